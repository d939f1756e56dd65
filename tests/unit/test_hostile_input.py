"""Files that are not what they claim: a FIFO, a crafted file full of chunk magics, a
sparse file larger than the address space allows, names that are not UTF-8, names with
terminal escape sequences, JSON values of the wrong type or out of range."""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from damaged_traces import (commands, join, meta_obj, recorder_obj, run_cli, split, with_json,
                            write_base)
from iowhy import abi
from iowhy.traceformat import TraceError, read_trace
from iowhy.tracewriter import TraceWriter

VENV_BIN = Path(sys.executable).parent


def test_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "trace.iowt"
    os.mkfifo(fifo)
    sound = write_base(tmp_path / "sound.iowt")
    for argv in commands(str(fifo), sound):
        t = time.monotonic()
        r = run_cli(argv, timeout_s=10)
        assert time.monotonic() - t < 5, argv
        assert r.rc != 0 and r.out == "", argv
        assert r.err.strip() == (f"iowhy: {fifo} is a FIFO, not a trace file (give the path "
                                 "of a trace file written by `iowhy record`)"), argv


def test_directory_is_refused(tmp_path):
    r = run_cli(["info", str(tmp_path)])
    assert r.rc != 0 and "is a directory, not a trace file" in r.err


def test_crafted_file_full_of_chunk_headers_is_rejected_in_linear_time(tmp_path):
    """4 MiB of chunk headers, each claiming a payload to the end of the file with a wrong
    CRC: verifying each candidate by CRC-ing its payload is quadratic (the reader before
    this took minutes); the prefix CRCs make it one pass."""
    path = tmp_path / "crafted.iowt"
    w = TraceWriter(str(path))
    w.f.close()
    head = path.read_bytes()[:64]
    size = 4 << 20
    buf = bytearray(size)
    buf[:64] = head
    for off in range(64, size - 32, 32):
        plen = (size - off - 32) & ~7
        struct.pack_into("<4sHHIIIIQ", buf, off, b"IWCK", abi.CHUNK_META, 0, 1, plen, plen,
                         0xDEADBEEF, 0)
    path.write_bytes(buf)
    t = time.monotonic()
    r = run_cli(["info", str(path)], timeout_s=30)
    assert time.monotonic() - t < 5
    assert r.rc != 0 and r.err.startswith(f"iowhy: {path} holds no readable chunk")


def test_crafted_candidates_do_not_hide_a_valid_chunk(tmp_path):
    """Resynchronisation still finds the sound chunks after a stretch of bogus headers."""
    sound = write_base(tmp_path / "sound.iowt")
    head, chunks = split(open(sound, "rb").read())
    junk = b"".join(struct.pack("<4sHHIIIIQ", b"IWCK", abi.CHUNK_META, 0, 1, 4096, 4096, 1, 0)
                    for _ in range(64))
    path = tmp_path / "t.iowt"
    path.write_bytes(head + junk + join(b"", chunks))
    tr = read_trace(str(path))
    assert tr.damage.bad_regions == 1 and tr.damage.missing_bytes == len(junk)
    assert tr.count("request") == read_trace(sound).count("request")


def _limit_as() -> None:
    lim = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def test_sparse_4gib_file_under_address_space_limit(tmp_path):
    """`ulimit -v 4194304`: a 4 GiB file cannot be mapped whole; the reader maps only up
    to its last valid chunk (or reads the payloads) and skips the hole."""
    p = write_base(tmp_path / "sparse.iowt")
    os.truncate(p, 4 << 30)
    r = subprocess.run([str(VENV_BIN / "iowhy"), "info", p], capture_output=True, text=True,
                       preexec_fn=_limit_as, timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("WARNING: trace is damaged: 4,294,9"), r.stdout[:200]
    assert "bytes at the end could not be read" in r.stdout.splitlines()[0]


def test_payloads_are_read_when_the_file_cannot_be_mapped(tmp_path, monkeypatch):
    from iowhy import tracescan

    def refuse(*a, **k):
        raise OSError(12, "Cannot allocate memory")
    sound = write_base(tmp_path / "sound.iowt")
    expect = read_trace(sound)
    monkeypatch.setattr(tracescan.mmap, "mmap", refuse)
    tr = read_trace(sound)
    assert not tr.damage.damaged
    for name in abi.RECORD_NAMES:
        assert tr.records(name).tobytes() == expect.records(name).tobytes()


def test_memory_error_is_one_line(tmp_path, monkeypatch):
    from iowhy import traceformat
    sound = write_base(tmp_path / "sound.iowt")

    def boom(*a, **k):
        raise MemoryError
    monkeypatch.setattr(traceformat, "_scan", boom)
    r = run_cli(["info", sound])
    assert r.rc != 0 and r.err.startswith(f"iowhy: not enough memory to read {sound}")


# -- names that are bytes, and escape sequences ------------------------------------------------

HOSTILE_MOUNT = "/mnt/caf\udce9/\x1b]0;pwned\x07\x1b[2J"


def _hostile_trace(tmp_path) -> str:
    """A mount point with a byte that is not UTF-8 and escape sequences, written as
    metadata.py writes it (json.dumps: \\udce9), and a command line whose bytes the
    recorder writes raw (0xff, ESC) into the RECORDER chunk, and a comm with ESC."""
    p = write_base(tmp_path / "hostile.iowt", meta=meta_obj(HOSTILE_MOUNT))
    head, chunks = split(open(p, "rb").read())
    i = next(k for k, c in enumerate(chunks) if c.type == abi.CHUNK_RECORDER)
    text = json.dumps(recorder_obj(["tar", "@@@"])).encode()
    text = text.replace(b"@@@", b"x\xff\\u001b[2Jy")
    chunks[i] = with_json(chunks[i], text)
    out = tmp_path / "hostile2.iowt"
    out.write_bytes(join(head, chunks))
    return str(out)


def test_names_are_carried_as_bytes(tmp_path):
    tr = read_trace(_hostile_trace(tmp_path))
    assert not tr.damage.damaged
    assert tr.meta["filesystems"][0]["mountpoint"] == HOSTILE_MOUNT
    assert tr.recorder["command"][1] == "x\udcff\x1b[2Jy"
    assert os.fsencode(tr.recorder["command"][1]) == b"x\xff\x1b[2Jy"


@pytest.mark.parametrize("argv", [["info"], ["report"], ["hist"], ["compare"]])
def test_terminal_output_shows_escapes_not_raw(tmp_path, argv):
    p = _hostile_trace(tmp_path)
    r = run_cli(argv + ([p, p] if argv[0] == "compare" else [p]))
    assert r.rc == 0, r.err
    assert "\x1b" not in r.out and "\x07" not in r.out
    assert all(not (0xD800 <= ord(c) <= 0xDFFF) for c in r.out)
    if argv[0] in ("info", "report", "compare"):
        assert "x\\xff^[[2Jy" in r.out  # the command line
    if argv[0] == "info":
        assert "caf\\xe9/^[]0;pwned^G^[[2J" in r.out  # the mount point


@pytest.mark.parametrize("argv", [["info"], ["report"], ["compare"]])
def test_strict_utf8_locale(tmp_path, argv):
    p = _hostile_trace(tmp_path)
    env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict")
    r = subprocess.run([str(VENV_BIN / "iowhy"), *argv, *([p, p] if argv[0] == "compare"
                                                          else [p])],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert b"Traceback" not in r.stderr
    assert b"\x1b" not in r.stdout
    r.stdout.decode("utf-8")  # valid UTF-8


def test_error_line_with_undecodable_path_under_strict_utf8(tmp_path):
    env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict")
    bad = os.fsencode(str(tmp_path)) + b"/no\xffsuch\x1b[2J.iowt"
    r = subprocess.run([str(VENV_BIN / "iowhy").encode(), b"info", bad], capture_output=True,
                       env=env, timeout=60)
    assert r.returncode != 0 and b"Traceback" not in r.stderr
    assert b"no\\xffsuch^[[2J.iowt" in r.stderr and b"\x1b" not in r.stderr


@pytest.mark.parametrize("kind", ["report", "compare"])
def test_html_with_undecodable_names(tmp_path, kind):
    p = _hostile_trace(tmp_path)
    out = tmp_path / "out.html"
    argv = [kind, "--html", str(out)] + ([p, p] if kind == "compare" else [p])
    r = run_cli(argv, timeout_s=120)
    assert r.rc == 0, r.err
    page = out.read_bytes().decode("utf-8")
    assert "\x1b" not in page and "\x07" not in page
    assert "caf\\xe9" in page or kind == "compare"
    assert "x\\xff^[[2Jy" in page


# -- hostile JSON values -------------------------------------------------------------------

def _with_chunk_json(tmp_path, ctype: int, edit) -> str:
    sound = write_base(tmp_path / "sound.iowt")
    head, chunks = split(open(sound, "rb").read())
    i = next(k for k, c in enumerate(chunks) if c.type == ctype)
    chunks[i] = with_json(chunks[i], edit(chunks[i].data))
    out = tmp_path / "t.iowt"
    out.write_bytes(join(head, chunks))
    return str(out)


def test_info_json_never_emits_nan(tmp_path):
    p = _with_chunk_json(tmp_path, abi.CHUNK_TRAILER, lambda d: d.replace(
        b'"user": 1000', b'"user": NaN').replace(b'"end_ns": ', b'"end_ns": 1e999, "x": '))
    r = run_cli(["info", "--json", p])
    assert r.rc == 0 and "NaN" not in r.out and "Infinity" not in r.out
    d = json.loads(r.out)
    assert d["damage"]["damaged"]
    assert set(d["damage"]["invalid_fields"]) >= {"trailer.recorder_cpu_ns.user",
                                                  "trailer.end_ns"}
    assert d["end_ns"] == d["end_ns"] and isinstance(d["end_ns"], int)


@pytest.mark.parametrize("bad", [
    {"counters": {"lost_completion": None}}, {"counters": {"lost_issue": -1}},
    {"counters": {"lost_issue": 2**70}}, {"counters": []}, {"end_ns": "soon"},
    {"records": {"request": 1.5}}, {"exit_status": {"a": 1}},
    {"probe_stats": {"p": {"runs": "x", "run_ns": 1}}},
])
def test_trailer_fields_of_the_wrong_type_are_dropped_and_counted(tmp_path, bad):
    def edit(d):
        t = json.loads(d)
        t.update(bad)
        return json.dumps(t).encode()
    p = _with_chunk_json(tmp_path, abi.CHUNK_TRAILER, edit)
    tr = read_trace(p)
    assert tr.damage.invalid_fields, bad
    assert tr.damage.summary().startswith("trace is damaged:")
    for argv in (["info", p], ["info", "--json", p], ["report", "--json", p], ["hist", p]):
        r = run_cli(argv)
        assert r.rc == 0 and "Traceback" not in r.err, (argv, r.err)


@pytest.mark.parametrize("path,value", [
    (("devices",), "sdz"), (("devices", 0, "major"), None), (("devices", 0, "minor"), 1 << 40),
    (("filesystems",), {}), (("filesystems", 0, "disk_major"), "8"),
    (("filesystems", 0, "log", "ranges", 0), [5]), (("filesystems", 0, "log"), [1, 2]),
    (("command",), "tar"), (("clock",), None),
])
def test_meta_fields_of_the_wrong_type(tmp_path, path, value):
    def edit(d):
        m = json.loads(d)
        o = m
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = value
        return json.dumps(m).encode()
    p = _with_chunk_json(tmp_path, abi.CHUNK_META, edit)
    assert read_trace(p).damage.invalid_fields
    for argv in (["info", p], ["report", p], ["report", "--json", p], ["hist", p]):
        r = run_cli(argv)
        assert r.rc == 0, (argv, r.err)
        assert r.out.startswith("WARNING: trace is damaged") or "--json" in argv


def test_deeply_nested_json_is_an_unknown_chunk(tmp_path):
    p = _with_chunk_json(tmp_path, abi.CHUNK_META, lambda d: b"[" * 200_000 + b"]" * 200_000)
    tr = read_trace(p)
    assert tr.damage.unknown_chunks == 1 and tr.meta == {}


def test_out_of_range_records_are_dropped_and_counted(tmp_path):
    import numpy as np
    sound = write_base(tmp_path / "sound.iowt")
    head, chunks = split(open(sound, "rb").read())
    i = next(k for k, c in enumerate(chunks) if c.type == abi.REC_REQUEST)
    arr = np.frombuffer(chunks[i].payload, dtype=abi.REQUEST_DTYPE).copy()
    arr["issue_ns"][0] = 2**64 - 1
    arr["dev_minor"][1] = 1 << 21
    arr["op"][2] = 200
    from damaged_traces import with_payload
    chunks[i] = with_payload(chunks[i], arr.tobytes())
    p = tmp_path / "t.iowt"
    p.write_bytes(join(head, chunks))
    tr = read_trace(str(p))
    assert tr.damage.invalid_records == {"request": 3}
    assert tr.count("request") == read_trace(sound).count("request") - 3
    assert "3 request records with out-of-range values dropped" in tr.damage.summary()


def test_not_a_trace_is_refused(tmp_path):
    with pytest.raises(TraceError):
        p = tmp_path / "x"
        p.write_bytes(b"hello")
        read_trace(str(p))


def test_record_time_far_outside_the_recording_is_dropped(tmp_path):
    """One fsync record entered at 2**62 ns: kept, it stretched the span of every call's
    times past the analysis's 62-bit keys (OverflowError in join_pairs)."""
    import numpy as np

    from damaged_traces import with_payload
    sound = write_base(tmp_path / "sound.iowt")
    head, chunks = split(open(sound, "rb").read())
    i = next(k for k, c in enumerate(chunks) if c.type == abi.REC_FSYNC)
    arr = np.frombuffer(chunks[i].payload, dtype=abi.FSYNC_DTYPE).copy()
    arr["enter_ns"][0] = 1 << 62
    chunks[i] = with_payload(chunks[i], arr.tobytes())
    p = tmp_path / "t.iowt"
    p.write_bytes(join(head, chunks))
    tr = read_trace(str(p))
    assert tr.damage.invalid_records == {"fsync": 1}
    for argv in (["report", str(p)], ["report", "--json", str(p)], ["compare", sound, str(p)]):
        r = run_cli(argv)
        assert r.rc == 0, (argv, r.err)


def test_window_too_long_to_analyze_is_one_line(tmp_path):
    """A recording window of 2**62 ns (recorder start 1, trailer end 2**62): the
    analysis cannot key it; one line, not a traceback."""
    rec = recorder_obj()
    rec["start_ns"] = 1
    sound = write_base(tmp_path / "sound.iowt", recorder=rec)
    head, chunks = split(open(sound, "rb").read())
    t = json.loads(chunks[-1].data)
    t["end_ns"] = (1 << 62) + 5
    chunks[-1] = with_json(chunks[-1], json.dumps(t).encode())
    p = tmp_path / "t.iowt"
    p.write_bytes(join(head, chunks))
    r = run_cli(["report", str(p)])
    assert r.rc == 1 and r.out == ""
    assert r.err.startswith("iowhy: cannot analyze this trace: ") and r.err.count("\n") == 1


def test_hist_without_values_names_an_undecodable_path_escaped(tmp_path):
    env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict")
    w = TraceWriter(str(tmp_path / "x"))
    w.write_json(abi.CHUNK_RECORDER, recorder_obj())
    w.close({"end_ns": 2_000_000})
    bad = os.fsencode(str(tmp_path)) + b"/e\xff.iowt"
    os.rename(tmp_path / "x", bad)
    r = subprocess.run([str(VENV_BIN / "iowhy").encode(), b"hist", bad], capture_output=True,
                       env=env, timeout=60)
    # nothing to draw exits 1 with one line, the path escaped
    assert r.returncode == 1 and b"Traceback" not in r.stderr, r.stderr
    assert r.stderr.count(b"\n") == 1 and b"e\\xff.iowt" in r.stderr


# -- issue 30: options, command lines -------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["report", "--merge-gap-ms", "nan"], ["report", "--merge-gap-ms", "inf"],
    ["report", "--merge-gap-ms", "-1"], ["report", "--interval", "nan"],
    ["report", "--interval", "inf"], ["report", "--interval", "0"],
    ["requests", "--slower", "nan"], ["requests", "--slower", "1e300"],
    ["info", "--decode-ratio", "0"], ["query", "SELECT 1", "--limit", "-1"],
])
def test_numbers_that_are_no_numbers_are_one_line(tmp_path, argv):
    """argparse's float() takes nan and inf: `report --merge-gap-ms nan` was a
    ValueError traceback, `--interval inf` an OverflowError read as a damaged trace."""
    t = write_base(tmp_path / "t.iowt")
    r = run_cli([*argv, t])
    assert r.rc == 2 and r.out == "", (argv, r.err)
    assert r.err.startswith("iowhy: ") and r.err.count("\n") == 1, (argv, r.err)
    assert "damaged" not in r.err


@pytest.mark.parametrize("out", ["", "dir/", ".", "dir/.."])
def test_record_output_that_names_no_file_is_refused_first(tmp_path, monkeypatch, out):
    """`record -o ""` recorded the whole workload before failing: refused at once, as a
    usage error, before root or the recorder are looked for (any user sees it)."""
    monkeypatch.chdir(tmp_path)
    r = run_cli(["record", "-o", out, "--", "true"])
    assert r.rc == 2 and r.err == (f"iowhy: -o '{out}' is not a file name (give the "
                                   "trace's file name, e.g. -o out.iowt)\n")
    assert list(tmp_path.iterdir()) == []


def test_long_command_lines_read_from_an_older_trace_are_cut_not_damage(tmp_path):
    """A trace written before the writers cut the command line (one argument of 131,071
    characters, 70,000 arguments) read as damaged and lost the whole command line: the
    reader cuts it as the writers now do, and the trace is sound."""
    from iowhy.names import clip_command
    big = "a" * 131_071
    many = [str(i) for i in range(70_000)]
    m = meta_obj()
    m["command"] = ["run", big]
    t = write_base(tmp_path / "t.iowt", meta=m, recorder=recorder_obj(["run", *many]))
    tr = read_trace(t)
    assert not tr.damage.damaged, tr.damage.summary()
    assert tr.meta["command"] == ["run", "a" * 65_000 + "[cut: 131071 characters in all]"]
    rc = tr.recorder["command"]
    assert len(rc) == 65_536 and rc[:2] == ["run", "0"]
    assert rc[-1] == "[cut: 70001 arguments in all]"
    assert clip_command(rc) == (rc, False)  # what is cut once is kept as it is
    r = run_cli(["info", t])
    assert r.rc == 0 and not r.out.startswith("WARNING")


def test_a_missing_trace_names_the_partial_file_left(tmp_path):
    """After `kill -9` of the recorder the trace is PATH.partial-PID: `iowhy info PATH`
    said only "No such file or directory"; it names the partial file (the newest)."""
    t = write_base(tmp_path / "x.iowt")
    os.rename(t, tmp_path / "t.iowt.partial-41")
    (tmp_path / "t.iowt.partial-4242").write_bytes(open(tmp_path / "t.iowt.partial-41",
                                                        "rb").read())
    os.utime(tmp_path / "t.iowt.partial-41", (1, 1))
    (tmp_path / "t.iowt.partial-x").write_text("not a recorder's")
    for argv in (["info"], ["report"], ["requests"], ["export", "--format", "perfetto", "-o",
                                                      str(tmp_path / "o.pf")]):
        r = run_cli([*argv, str(tmp_path / "t.iowt")])
        assert r.rc == 1 and r.err == (
            f"iowhy: cannot open {tmp_path / 't.iowt'}: No such file or directory; "
            f"{tmp_path / 't.iowt.partial-4242'} is a recording to it that was killed or is "
            "still running (read that file: every chunk written to it reads)\n"), argv
    r = run_cli(["info", str(tmp_path / "u.iowt")])
    assert r.err.endswith("No such file or directory (check the path; traces are mode "
                          "0600, read them as root)\n")


def test_running_out_of_memory_is_one_line(tmp_path, monkeypatch):
    """Past the reader (which says so itself), an allocation that fails in the analysis or
    a listing is one line, not a MemoryError traceback."""
    import iowhy.views.requests

    def boom(*a, **k):
        raise MemoryError()
    monkeypatch.setattr(iowhy.views.requests, "request_rows", boom)
    r = run_cli(["requests", "--json", write_base(tmp_path / "t.iowt")])
    assert r.rc == 1 and r.out == "" and r.err.startswith("iowhy: not enough memory")
    assert r.err.count("\n") == 1


def test_sigint_before_the_recorder_starts_says_so(tmp_path, monkeypatch):
    """Ctrl-C while `iowhy record` collects the metadata (before the recorder, which
    says so itself while the probes load) ended without a word: one line, exit 130."""
    from iowhy import cli, metadata

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "check_privileges", lambda: None)
    monkeypatch.setattr(cli, "find_recorder", lambda: "/bin/false")
    monkeypatch.setattr(metadata, "collect", interrupted)
    r = run_cli(["record", "-o", str(tmp_path / "t.iowt"), "--", "true"])
    assert r.rc == 130 and r.err == ("iowhy: stopped by SIGINT while collecting the "
                                     "metadata: nothing was recorded and the workload "
                                     "was not started\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(abi.RECORD_NAMES))
def test_record_checks_in_one_pass_equal_the_separate_checks(name):
    """tracecheck.checks() reads each time once for both checks: the same mask and bounds
    as valid_records() and time_bounds(), with values out of range or not."""
    import numpy as np
    from iowhy import tracecheck
    dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
    rng = np.random.default_rng(7)
    for n, bad in ((0, 0), (1, 0), (300, 0), (300, 5)):
        view = np.frombuffer(rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
                             .tobytes(), dtype=dtype).copy()
        for f in tracecheck.TIMES[name]:  # in range, some zero, unless made bad below
            view[f] = rng.integers(0, 1 << 40, n) * (rng.random(n) < 0.9)
        for f, hi in tracecheck.RECORD_LIMITS[name]:
            if f not in tracecheck.TIMES[name]:
                view[f] = np.minimum(view[f], hi)
        for f in tracecheck.TIMES[name][:bad and 2]:
            view[f][rng.integers(0, n, bad)] = np.uint64(1 << 63) + np.uint64(3)
        mask, bounds = tracecheck.checks(name, view)
        want = tracecheck.valid_records(name, view)
        assert (mask is None) == (want is None)
        assert (want is not None) == bool(bad)  # the bad values are out of range
        if want is not None:
            assert (mask == want).all() and not want.all()
        assert bounds == tracecheck.time_bounds(name, view)
