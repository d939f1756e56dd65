"""`iowhy import blktrace` of a capture made by a test-only writer from a synthetic
request list (struct blk_io_trace as in include/uapi/linux/blktrace_api.h), checked
against that list and against the analysis of the trace the list came from."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from iowhy import abi
from iowhy.analysis import analyze
from iowhy.cli import main
from iowhy.traceformat import read_trace
from synth_runs import nearest_rank, synth_run
from tracebuilder import DEV

MAGIC = 0x65617400 | 0x07
TC = {"read": 1 << 0, "write": 1 << 1, "flush": 1 << 2, "sync": 1 << 3, "queue": 1 << 4,
      "requeue": 1 << 5, "issue": 1 << 6, "complete": 1 << 7, "fs": 1 << 8, "notify": 1 << 10,
      "ahead": 1 << 11, "meta": 1 << 12, "discard": 1 << 13, "fua": 1 << 15}
Q, M, G, D, C, I, A = 1, 2, 4, 7, 8, 12, 15
STAGE_CAT = {Q: "queue", M: "queue", G: "queue", I: "queue", D: "issue", C: "complete",
             A: "queue"}
CGROUP = 1 << 8


def kdev(major: int, minor: int) -> int:
    return (major << 20) | minor


class BlktraceWriter:
    """Test-only: blk_io_trace records (48-byte header + payload) in one byte order,
    split by CPU into DEV.blktrace.N files the way blktrace writes them."""

    def __init__(self, bo: str = "<") -> None:
        self.bo = bo
        self.events: list[tuple[int, int, bytes]] = []  # (time, cpu, record)
        self.seq = [0, 0]

    def rec(self, t, cpu, action, sector=0, nbytes=0, pid=0, dev=kdev(*DEV), error=0,
            pdu=b"") -> None:
        self.seq[cpu] += 1
        hdr = struct.pack(self.bo + "IIQQIIIIIHH", MAGIC, self.seq[cpu], t, sector, nbytes,
                          action, pid, dev, cpu, error & 0xFFFF, len(pdu))
        assert len(hdr) == 48
        self.events.append((t, cpu, hdr + pdu))

    def request_event(self, t, cpu, code, q, nbytes=None, sector=None, cgroup=None):
        op = q["op"]
        cats = TC[STAGE_CAT[code]]
        if op == abi.OP_FLUSH:
            cats |= TC["flush"] | TC["read"]
        elif op == abi.OP_READ:
            cats |= TC["read"]
        else:
            cats |= TC["write"]
        for fl, name in ((abi.F_SYNC, "sync"), (abi.F_META, "meta"), (abi.F_FUA, "fua"),
                         (abi.F_RAHEAD, "ahead")):
            if q["iflags"] & fl:
                cats |= TC[name]
        if q["iflags"] & abi.F_PREFLUSH and op != abi.OP_FLUSH and code in (Q, G):
            cats |= TC["flush"]
        action = code | (cats << 16)
        pdu = b""
        if cgroup is not None:
            action |= CGROUP
            pdu = struct.pack(self.bo + "Q", cgroup)
        self.rec(t, cpu, action, q["start_sector"] if sector is None else sector,
                 q["len_bytes"] if nbytes is None else nbytes, q["tid"], pdu=pdu)

    def files(self, dirpath, name: str = "sdz") -> list[str]:
        out = []
        for cpu in (0, 1):
            p = dirpath / f"{name}.blktrace.{cpu}"
            evs = sorted((e for e in self.events if e[1] == cpu), key=lambda e: e[0])
            p.write_bytes(b"".join(e[2] for e in evs))
            out.append(str(p))
        return out


def capture_of(s, bo="<", tmp=None, getrq=True):
    """blktrace events of the synthetic requests: Q, G, I, D, C (flush requests of the
    flush machinery: D and C only); a request of more than one page arrives as two
    bios, the second back-merged; process names as notify records."""
    w = BlktraceWriter(bo)
    rng = np.random.default_rng(7)
    comms = {q["tid"]: q["comm"] for q in s.requests if q["tid"]}
    for pid, comm in comms.items():
        w.rec(s.start_ns, 0, (TC["notify"] << 16) | 0, pid=pid, pdu=comm + b"\0")
    # the wall-clock time, and a remap record (partition -> disk)
    w.rec(s.start_ns, 1, (TC["notify"] << 16) | 1, pdu=struct.pack(bo + "II", 1_700_000_000, 5))
    w.rec(s.start_ns + 1, 1, A | (TC["queue"] << 16), sector=4096, nbytes=4096,
          pdu=struct.pack(">IIQ", kdev(8, 1), kdev(8, 0), 2048))
    for k, q in enumerate(s.requests):
        cpu = int(rng.integers(0, 2))
        if q["op"] != abi.OP_FLUSH:
            n = q["len_bytes"]
            first = n - 4096 if n > 4096 and getrq else n
            w.request_event(q["submit_ns"] - (0 if getrq else 50), cpu, Q, q, nbytes=first,
                            cgroup=1234 if k == 3 else None)
            if getrq:
                w.request_event(q["submit_ns"], cpu, G, q, nbytes=first)
            if n > first:
                second = dict(q)
                w.request_event(q["submit_ns"] + 1, cpu, Q, second, nbytes=4096,
                                sector=q["start_sector"] + first // 512)
                w.request_event(q["submit_ns"] + 1, cpu, M, second, nbytes=4096,
                                sector=q["start_sector"] + first // 512)
            w.request_event(q["insert_ns"], cpu, I, q)
        w.request_event(q["issue_ns"], int(rng.integers(0, 2)), D, q)
        w.request_event(q["done_ns"], int(rng.integers(0, 2)), C, q)
    return w


@pytest.mark.parametrize("bo", ["<", ">"])
def test_blktrace_capture_matches_the_request_list(tmp_path, bo, capsys):
    s = synth_run(tmp_path / "orig.iowt", seed=11)
    files = capture_of(s, bo).files(tmp_path)
    out = tmp_path / "imported.iowt"
    assert main(["import", "blktrace", *files, "-o", str(out)]) == 0
    tr = read_trace(str(out))
    got = tr.records("request")
    assert len(got) == len(s.requests)
    key = np.lexsort((got["start_sector"], got["issue_ns"]))
    want = sorted(s.requests, key=lambda q: (q["issue_ns"], q["start_sector"]))
    for g, q in zip(got[key], want):
        assert int(g["start_sector"]) == q["start_sector"]
        assert int(g["len_bytes"]) == q["len_bytes"]
        assert int(g["op"]) == q["op"]
        assert (int(g["issue_ns"]), int(g["done_ns"])) == (q["issue_ns"], q["done_ns"])
        if q["op"] != abi.OP_FLUSH:
            assert (int(g["submit_ns"]), int(g["insert_ns"])) == (q["submit_ns"], q["insert_ns"])
            assert int(g["tid"]) == q["tid"]
            assert bytes(g["comm"]).rstrip(b"\0") == q["comm"]
            assert int(g["nr_bios"]) == (2 if q["len_bytes"] > 4096 else 1)
            assert int(g["iflags"]) & (abi.F_META | abi.F_SYNC) == \
                q["iflags"] & (abi.F_META | abi.F_SYNC)
    assert (tr.meta["devices"][0]["name"], tr.meta["devices"][0]["major"]) == ("sdz", 8)
    # the remap record (partition 8:1 at 2048 -> disk 8:0 at 4096) names a partition
    assert [(x["major"], x["minor"], x["start_sector"]) for x in
            tr.meta["devices"][0]["partitions"]] == [(8, 1, 2048)]
    assert tr.meta["clock"]["realtime_minus_monotonic_ns"] == \
        1_700_000_000 * 10**9 + 5 - s.start_ns
    assert tr.meta["import"]["unmatched"] == {}
    # The analysis of both traces: the same requests, latencies and flushes. Without a
    # filesystem layout the journal writes (REQ_META) are metadata.
    a = analyze(read_trace(s.path))
    b = analyze(tr)
    ra, rb = a["requests"], b["requests"]
    assert rb["flush"]["count"] == ra["flush"]["count"] == 40
    assert rb["flush"]["device_ns"] == ra["flush"]["device_ns"]
    for cls in ("data", "read"):
        assert rb[cls]["count"] == ra[cls]["count"]
        assert rb[cls]["device_ns"] == ra[cls]["device_ns"]
        assert rb[cls]["queue_ns"] == ra[cls]["queue_ns"]
    assert rb["metadata"]["count"] == ra["metadata"]["count"] + ra["log"]["count"]
    lat = [q["done_ns"] - q["issue_ns"] for q in s.requests if q["iflags"] & abi.F_META]
    assert rb["metadata"]["device_ns"]["p99"] == nearest_rank(lat, 99)
    # What the source lacks is the first problem, in info and report.
    assert b["problems"][0].startswith("imported from blktrace: no task, off-CPU")
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert info.splitlines()[0].startswith("WARNING: imported from blktrace: no task")
    assert main(["report", str(out)]) == 0
    rep = capsys.readouterr().out.splitlines()
    assert rep[1].startswith("! imported from blktrace: no task")


def test_unmatched_and_damaged_are_counted(tmp_path):
    s = synth_run(tmp_path / "orig.iowt", seed=12, n_fsync=6, n_reads=2)
    w = capture_of(s)
    q0 = dict(s.requests[0])
    # A completion of a request issued before the capture, a request still in flight
    # at the end, and a torn record at the end of a file.
    w.request_event(s.start_ns + 5, 0, C, dict(q0, start_sector=77_777_000))
    late = dict(q0, start_sector=88_888_000)
    w.request_event(s.end_ns, 1, Q, late)
    w.request_event(s.end_ns, 1, G, late)
    w.request_event(s.end_ns, 1, I, late)
    w.request_event(s.end_ns + 1, 1, D, late)
    files = w.files(tmp_path)
    with open(files[0], "ab") as f:
        f.write(b"\x07tae" + b"\0" * 20)
    out = tmp_path / "i.iowt"
    assert main(["import", "blktrace", *files, "-o", str(out)]) == 0
    tr = read_trace(str(out))
    um = tr.meta["import"]["unmatched"]
    assert um["completion of a request issued before the capture"] == 1
    assert um["request in flight at the end"] == 1
    assert um["bytes of sdz.blktrace.0 that are no complete record"] == 24
    rq = tr.records("request")
    assert len(rq) == len(s.requests) + 2
    assert int(((rq["flags_u16"] & abi.RQ_UNMATCHED) != 0).sum()) == 1
    assert int(((rq["flags_u16"] & abi.RQ_INCOMPLETE) != 0).sum()) == 1
    assert tr.counters["unmatched_completion"] == 1
    assert any("matched no request" in p for p in tr.problems())


def test_not_blktrace_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.blktrace.0"
    bad.write_bytes(b"\0" * 100)
    assert main(["import", "blktrace", str(bad), "-o", str(tmp_path / "o.iowt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iowhy: ") and "not a blktrace file" in err and err.count("\n") == 1
    assert not (tmp_path / "o.iowt").exists()


def test_output_symlink_is_replaced_not_followed(tmp_path):
    s = synth_run(tmp_path / "orig.iowt", seed=13, n_fsync=3, n_reads=1)
    files = capture_of(s).files(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "out.iowt"
    link.symlink_to(victim)
    assert main(["import", "blktrace", *files, "-o", str(link)]) == 0
    assert victim.read_text() == "keep"
    assert not link.is_symlink() and (link.stat().st_mode & 0o777) == 0o600


def test_imported_trace_works_with_every_command(tmp_path, capsys):
    s = synth_run(tmp_path / "orig.iowt", seed=14, n_fsync=10, n_reads=5)
    out = tmp_path / "i.iowt"
    assert main(["import", "blktrace", *capture_of(s).files(tmp_path), "-o", str(out)]) == 0
    for argv in (["hist", str(out), "--metric", "device"], ["hist", str(out), "--metric", "seek"],
                 ["compare", s.path, str(out)], ["report", str(out), "--json"]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    pytest.importorskip("duckdb")
    pq = tmp_path / "pq"
    assert main(["export", str(out), "--format", "parquet", "-o", str(pq)]) == 0
    capsys.readouterr()
    assert main(["query", "SELECT source, cpu_ns, wait_other_ns, len(source_limits) AS n "
                 "FROM runs", str(pq), "--csv"]) == 0
    # No workload attribution from blktrace: NULL, not the analysis' all-wait-other.
    assert capsys.readouterr().out.splitlines()[1] == "blktrace,,,2"


def test_imported_trace_claims_no_attribution(tmp_path, capsys):
    """blktrace has no scheduler events: every output says where the time went is not
    known, rather than 100% wait-other and a finding that the workload waited on nothing."""
    import json
    s = synth_run(tmp_path / "orig.iowt", seed=17, n_fsync=10, n_reads=5)
    out = tmp_path / "i.iowt"
    assert main(["import", "blktrace", *capture_of(s).files(tmp_path), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "WHERE THE TIME WENT: not available" in text
    assert "imported from blktrace" in text
    assert "wait-other" not in text and "no I/O in flight" not in text
    assert main(["report", str(out), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["attribution_ns"] is None and r["attribution_pct"] is None
    assert r["attribution_unavailable"].startswith("imported from blktrace")
    assert r["workload"]["attribution"] is None
    assert all(f.get("category") not in ("wait-other", "cpu", "runqueue")
               for f in r["findings"])
    # the requests stand as they are
    assert sum(c["count"] for c in r["requests"].values()) == len(s.requests)
    assert main(["compare", s.path, str(out), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["basis"] == "none"
    html = tmp_path / "i.html"
    assert main(["report", str(out), "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "Not available: imported from blktrace" in page


def test_merged_dump_reads_like_the_per_cpu_files(tmp_path):
    """blkparse -d writes one file of the records of every CPU in time order."""
    s = synth_run(tmp_path / "orig.iowt", seed=15, n_fsync=8, n_reads=3)
    w = capture_of(s)
    files = w.files(tmp_path)
    dump = tmp_path / "dump.bin"
    dump.write_bytes(b"".join(e[2] for e in sorted(w.events, key=lambda e: e[0])))
    a, b = tmp_path / "a.iowt", tmp_path / "b.iowt"
    assert main(["import", "blktrace", *files, "-o", str(a)]) == 0
    assert main(["import", "blktrace", str(dump), "-o", str(b)]) == 0
    ra, rb = read_trace(str(a)).records("request"), read_trace(str(b)).records("request")
    assert len(ra) == len(rb) == len(s.requests)
    for f in ("start_sector", "len_bytes", "submit_ns", "insert_ns", "issue_ns", "done_ns",
              "op", "tid", "comm", "iflags", "flags_u16"):
        assert np.array_equal(ra[f], rb[f]), f


def test_without_getrq_the_submission_is_the_queueing(tmp_path):
    """A capture without G events (a partial capture): a request is made at insert,
    submitted when its bio was queued."""
    s = synth_run(tmp_path / "orig.iowt", seed=16, n_fsync=6, n_reads=3)
    out = tmp_path / "i.iowt"
    assert main(["import", "blktrace", *capture_of(s, getrq=False).files(tmp_path), "-o",
                 str(out)]) == 0
    tr = read_trace(str(out))
    assert tr.meta["import"]["unmatched"] == {}
    got = {int(r["issue_ns"]): r for r in tr.records("request")}
    for q in s.requests:
        r = got[q["issue_ns"]]
        if q["op"] != abi.OP_FLUSH:
            assert int(r["submit_ns"]) == q["submit_ns"] - 50
            assert int(r["insert_ns"]) == q["insert_ns"]
            assert int(r["flags_u16"]) & abi.RQ_ORIGIN


def test_damage_in_the_middle_is_skipped_and_counted(tmp_path):
    """A bad record (garbage, a flipped magic, a payload length past the end) no longer
    ends the file: the reader resynchronises on the next record magic, reads every
    record after it, and counts the stretches and bytes it skipped."""
    s = synth_run(tmp_path / "orig.iowt", seed=17, n_fsync=6, n_reads=2)
    w = capture_of(s)
    (tmp_path / "clean").mkdir()
    clean = w.files(tmp_path / "clean")
    a = tmp_path / "a.iowt"
    assert main(["import", "blktrace", *clean, "-o", str(a)]) == 0
    want = read_trace(str(a)).count("request")
    data = bytearray(open(clean[0], "rb").read())
    assert len(data) > 20 * 48
    garbage = b"\x07tae" + b"\xff" * 37  # a magic that leads nowhere, then junk
    offs = [0]  # where each record starts
    while offs[-1] < len(data):
        pdu = struct.unpack_from("<H", data, offs[-1] + 46)[0]
        offs.append(offs[-1] + 48 + pdu)
    mid = offs[len(offs) // 2]
    data[offs[5]:offs[5] + 4] = b"\0\0\0\0"  # one record's magic gone: that record is lost
    damaged = bytes(data[:mid]) + garbage + bytes(data[mid:])
    bad = tmp_path / "d" / "sdz.blktrace.0"
    bad.parent.mkdir()
    bad.write_bytes(damaged)
    b = tmp_path / "b.iowt"
    assert main(["import", "blktrace", str(bad), clean[1], "-o", str(b)]) == 0
    tr = read_trace(str(b))
    um = tr.meta["import"]["unmatched"]
    assert um["damaged or cut stretches of sdz.blktrace.0 skipped"] == 2
    assert um["bytes of sdz.blktrace.0 that are no complete record"] == \
        (offs[6] - offs[5]) + len(garbage)
    # only the request of the one lost record can be missing or incomplete
    assert want - 1 <= tr.count("request") <= want + 1


def test_a_request_starts_at_its_queueing_as_in_btt(tmp_path, capsys):
    """A request starts at its bio's Q, not at G: its time from submission to
    completion is btt's Q2C (here Q 1000, G 1700, I 1800, D 2000, C 5000: Q2C 4000 ns,
    of which 1000 before issue)."""
    q = {"op": abi.OP_WRITE, "iflags": abi.F_SYNC, "start_sector": 800, "len_bytes": 4096,
         "tid": 321}
    w = BlktraceWriter()
    w.rec(500, 0, (TC["notify"] << 16) | 0, pid=321, pdu=b"writer\0")
    for t, code in ((1000, Q), (1700, G), (1800, I), (2000, D), (5000, C)):
        w.request_event(t, 0, code, q)
    out = tmp_path / "q.iowt"
    assert main(["import", "blktrace", *w.files(tmp_path), "-o", str(out)]) == 0
    (r,) = read_trace(str(out)).records("request")
    assert (int(r["submit_ns"]), int(r["insert_ns"]), int(r["issue_ns"]),
            int(r["done_ns"])) == (1000, 1800, 2000, 5000)
    capsys.readouterr()
    assert main(["requests", str(out), "--json"]) == 0


def test_an_ambiguous_comm_is_refused(tmp_path, capsys):
    """Two processes named `writer`: --comm writer cannot say which is the workload. One
    line names both (pid, first seen) and points to --pid; --pid picks one."""
    q = {"op": abi.OP_WRITE, "iflags": 0, "start_sector": 800, "len_bytes": 4096, "tid": 321}
    w = BlktraceWriter()
    for pid in (321, 654):
        w.rec(500, 0, (TC["notify"] << 16) | 0, pid=pid, pdu=b"writer\0")
    for k, pid in enumerate((654, 321)):
        q = dict(q, tid=pid, start_sector=800 + 8 * k)
        for t, code in ((1000, Q), (1700, G), (1800, I), (2000, D), (5000, C)):
            w.request_event(t + 10_000 * k, 0, code, q)
    files = w.files(tmp_path)
    out = tmp_path / "c.iowt"
    capsys.readouterr()
    assert main(["import", "blktrace", *files, "-o", str(out), "--comm", "writer"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not out.exists()
    assert "--comm writer names 2 processes: pid 321 (first seen at 0.000000 s), pid 654" \
        in err and "--pid" in err
    assert main(["import", "blktrace", *files, "-o", str(out), "--pid", "654"]) == 0
    rq = read_trace(str(out)).records("request")
    assert sorted((int(r["tid"]), bool(r["flags_u16"] & abi.RQ_TRACKED)) for r in rq) == \
        [(321, False), (654, True)]


def test_q2c_and_d2c_agree_with_btt(tmp_path):
    """btt (blktrace's own analyzer) over the same capture: its average Q2C and D2C equal
    the import's mean completion - submission and completion - issue. Requests of one
    bio each (btt counts Q2C per bio), with a wait between Q and G."""
    import shutil
    import subprocess
    if not (shutil.which("btt") and shutil.which("blkparse")):
        pytest.skip("needs btt and blkparse (Debian package blktrace)")
    rng = np.random.default_rng(3)
    w = BlktraceWriter()
    t = 10_000
    for k in range(200):
        q = {"op": abi.OP_WRITE, "iflags": abi.F_SYNC, "start_sector": 1000 + 24 * k,
             "len_bytes": 4096, "tid": 321}
        g = t + int(rng.integers(100, 20_000))
        d = g + 500 + int(rng.integers(1_000, 50_000))
        c = d + int(rng.integers(20_000, 2_000_000))
        for tt, code in ((t, Q), (g, G), (g + 500, I), (d, D), (c, C)):
            w.request_event(tt, k % 2, code, q)
        t = max(t + 1, c - int(rng.integers(0, 1_500_000)))  # requests overlap
    files = w.files(tmp_path)
    subprocess.run(["blkparse", "-q", "-i", "sdz", "-d", "sdz.bin", "-o", "/dev/null"],
                   cwd=tmp_path, check=True, capture_output=True)
    p = subprocess.run(["btt", "-i", "sdz.bin"], cwd=tmp_path, check=True,
                       capture_output=True, text=True)
    avg = {x.split()[0]: (float(x.split()[2]), int(x.split()[4])) for x in
           p.stdout.splitlines() if x.split()[:1] in (["Q2C"], ["D2C"])}
    out = tmp_path / "i.iowt"
    assert main(["import", "blktrace", *files, "-o", str(out)]) == 0
    r = read_trace(str(out)).records("request")
    done, sub, iss = (r[f].astype(np.int64) for f in ("done_ns", "submit_ns", "issue_ns"))
    assert avg["Q2C"][1] == avg["D2C"][1] == len(r) == 200
    # btt prints seconds to 9 decimals
    assert round((done - sub).mean() / 1e9, 9) == avg["Q2C"][0]
    assert round((done - iss).mean() / 1e9, 9) == avg["D2C"][0]
