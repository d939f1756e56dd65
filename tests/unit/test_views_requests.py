"""`iowhy requests` and `iowhy hist -D/--flags/--json` on a small synthetic trace: the
snapshots of the text, CSV and JSON, and every figure checked against the trace's own
records, computed here without iowhy's functions."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math

import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.cli import main
from iowhy.traceformat import read_trace

START, END = 1_000_000, 4_000_000
DISK2 = (8, 16)  # a second disk the META does not name

# (record, class by construction, comm)
REQS = [
    # a sync data write inside the fsync of tid 100, queued 300 us
    (tb.req(1_500_000, 2_500_000, sector=1000, submit=1_100_000, insert=1_200_000,
            iflags=abi.F_SYNC, tid=100), "data", "db"),
    # a journal write by jbd2, issued directly
    (tb.req(2_000_000, 2_200_000, sector=12_000, iflags=abi.F_META | abi.F_SYNC, tid=50),
     "log", "jbd2/sdz1-8"),
    # a readahead read on the second disk
    (tb.req(3_000_000, 3_050_000, op=abi.OP_READ, sector=7000, nbytes=8192, dev=DISK2,
            submit=2_900_000, insert=2_950_000, iflags=abi.F_RAHEAD, tid=200), "readahead",
     "cat"),
    # in flight at the end: no device time
    (tb.req(3_500_000, 0, sector=3000, tid=100, flags=abi.RQ_TRACKED | abi.RQ_INCOMPLETE),
     "data", "db"),
    # a cache flush inside the fsync
    (tb.req(2_600_000, 2_700_000, op=abi.OP_FLUSH, tid=100), "flush", "db"),
]
CALLS = [tb.fsync(100, 1_000_000, 3_000_000)]


def _rows():
    rows = []
    for rec, cls, comm in REQS:
        rec = dict(rec, comm=comm.encode())
        rows.append(rec)
    return rows


@pytest.fixture
def trace(tmp_path):
    return tb.write_trace(tmp_path / "rq.iowt", start=START, end=END, requests=_rows(),
                          fsyncs=CALLS)


def cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def expected():
    """Each request's row from its record alone, in completion order."""
    out = []
    for rec, cls, comm in REQS:
        done = rec["done_ns"]
        incomplete = rec["flags_u16"] & abi.RQ_INCOMPLETE
        done_eff = END if incomplete else done
        insert, issue, submit = rec["insert_ns"], rec["issue_ns"], rec["submit_ns"]
        call = None
        for c in CALLS:
            if (c["tid"] == rec["tid"] and c["enter_ns"] <= submit <= c["exit_ns"]
                    and rec["op"] != abi.OP_READ):
                call = "fsync"
        out.append({
            "time_ns": done_eff - START, "comm": comm, "pid": rec["tgid"],
            "disk": "sdz" if (rec["dev_major"], rec["dev_minor"]) == tb.DEV else "8:16",
            "sector": rec["start_sector"], "bytes": rec["len_bytes"],
            "queue_ns": None if incomplete else (issue - insert if insert else 0),
            "device_ns": None if incomplete else done - issue,
            "total_ns": None if incomplete else done - submit,
            "class": cls, "call": call})
    return sorted(out, key=lambda r: r["time_ns"])


def test_requests_json_matches_the_records(trace):
    rc, out = cli(["requests", "--json", trace])
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == "iowhy-requests/1"
    assert doc["count"] == doc["requests_in_trace"] == len(REQS)
    want = expected()
    got = [{k: r[k] for k in want[0]} for r in doc["requests"]]
    assert got == want
    assert [r["op"] for r in doc["requests"]] == ["WSM", "WS", "F", "RA", "W"]
    assert [r["call_index"] for r in doc["requests"]] == [None, 0, 0, None, None]


def test_requests_json_and_csv_are_written_a_batch_at_a_time(trace, monkeypatch):
    """The listing is formatted and written in batches (a trace of millions of requests
    never becomes one string), and reads exactly as the whole document dumped at once."""
    import iowhy.reports.requests as rr
    whole_json, whole_csv = cli(["requests", "--json", trace])[1], cli(["requests", "--csv",
                                                                       trace])[1]
    monkeypatch.setattr(rr, "BATCH", 2)
    writes = []

    class Out(io.StringIO):
        def write(self, s):
            writes.append(len(s))
            return super().write(s)
    for argv, whole in ((["--json"], whole_json), (["--csv"], whole_csv)):
        out = Out()
        writes.clear()
        with contextlib.redirect_stdout(out):
            assert main(["requests", *argv, trace]) == 0
        assert out.getvalue() == whole, argv
        assert max(writes) < len(whole) / 2, argv  # never the whole text at once
    doc = json.loads(whole_json)
    assert whole_json == json.dumps(doc, indent=2) + "\n"


def test_requests_text_snapshot(trace):
    rc, out = cli(["requests", trace])
    assert rc == 0
    assert out == """\
time (s) comm        pid disk op  sector bytes queue (us) device (us) class     call
0.001200 jbd2/sdz1-8  50 sdz  WSM  12000 4,096          0       200.0 log       -
0.001500 db          100 sdz  WS    1000 4,096      300.0     1,000.0 data      fsync
0.001700 db          100 sdz  F        0     0          0       100.0 flush     fsync
0.002050 cat         200 8:16 RA    7000 8,192       50.0        50.0 readahead -
0.003000 db          100 sdz  W     3000 4,096          -           - data      -
"""


def test_requests_unit_and_filters(trace):
    rc, out = cli(["requests", "--unit", "ms", "--class", "data", trace])
    assert rc == 0
    lines = out.splitlines()
    assert "queue (ms)" in lines[0] and "device (ms)" in lines[0]
    assert len(lines) == 3 and "1.000" in lines[1] and "0.300" in lines[1]
    want = expected()
    for argv, keep in ((["--dev", "8:16"], lambda r: r["disk"] == "8:16"),
                       (["--dev", "/dev/sdz"], lambda r: r["disk"] == "sdz"),
                       (["--pid", "100"], lambda r: r["pid"] == 100),
                       (["--comm", "jbd2/sdz1-8"], lambda r: r["comm"] == "jbd2/sdz1-8"),
                       (["--slower", "0.3"], lambda r: (r["total_ns"] or 0) > 300_000)):
        rc, out = cli(["requests", "--json", *argv, trace])
        assert rc == 0, argv
        got = json.loads(out)["requests"]
        assert [r["time_ns"] for r in got] == [r["time_ns"] for r in want if keep(r)], argv


def test_requests_csv_snapshot(trace):
    rc, out = cli(["requests", "--csv", trace])
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    want = expected()
    assert [int(r["time_ns"]) for r in rows] == [w["time_ns"] for w in want]
    assert [r["device_ns"] for r in rows] == [
        "" if w["device_ns"] is None else str(w["device_ns"]) for w in want]
    assert out == """\
time_ns,comm,pid,disk,op,sector,bytes,queue_ns,device_ns,total_ns,class,call,call_index
1200000,jbd2/sdz1-8,50,sdz,WSM,12000,4096,0,200000,200000,log,,
1500000,db,100,sdz,WS,1000,4096,300000,1000000,1400000,data,fsync,0
1700000,db,100,sdz,F,0,0,0,100000,100000,flush,fsync,0
2050000,cat,200,8:16,RA,7000,8192,50000,50000,150000,readahead,,
3000000,db,100,sdz,W,3000,4096,,,,data,,
"""


def test_requests_no_match_exits_1(trace):
    rc, out = cli(["requests", "--pid", "4242", trace])
    assert rc == 1 and out.splitlines()[1] == "no request matches"
    rc, out = cli(["requests", "--json", "--pid", "4242", trace])
    assert rc == 1 and json.loads(out)["count"] == 0


def test_requests_bad_input(trace, capsys):
    for argv in (["--class", "nope"], ["--dev", "sdq"], ["--slower", "-1"]):
        rc = main(["requests", *argv, trace])
        err = capsys.readouterr().err
        assert rc != 0 and err.startswith("iowhy: ") and len(err.splitlines()) == 1, argv


def _nearest_rank(values, q):
    v = sorted(values)
    return v[max(0, math.ceil(q / 100 * len(v)) - 1)]


def _slots(values_us):
    counts = {}
    for v in values_us:
        i = max(0, v.bit_length() - 1)
        counts[i] = counts.get(i, 0) + 1
    return [counts.get(i, 0) for i in range(max(counts) + 1)]


def _device_by(key):
    groups = {}
    for r in expected():
        if r["device_ns"] is not None:
            groups.setdefault(key(r), []).append(r["device_ns"])
    return groups


def test_hist_per_disk_json(trace):
    rc, out = cli(["hist", "-D", "--json", trace])
    assert rc == 0
    doc = json.loads(out)
    assert doc["split"] == "disk" and doc["unit"] == "ns" and doc["slot_unit"] == "usecs"
    want = _device_by(lambda r: r["disk"])
    got = {g["name"]: g for g in doc["groups"]}
    assert set(got) == set(want)
    for name, vals in want.items():
        g = got[name]
        assert g["count"] == len(vals)
        assert g["p50"] == _nearest_rank(vals, 50) and g["p99"] == _nearest_rank(vals, 99)
        assert g["max"] == max(vals)
        assert [s["count"] for s in g["slots"]] == _slots([v // 1000 for v in vals])


FLAG_NAMES = {"data": "Sync-Write", "log": "Metadata-Sync-Write", "readahead": "ReadAhead-Read",
              "flush": "Flush"}


def test_hist_flags_json(trace):
    rc, out = cli(["hist", "--flags", "--json", "--unit", "nsecs", trace])
    assert rc == 0
    doc = json.loads(out)
    want = _device_by(lambda r: FLAG_NAMES[r["class"]])
    got = {g["name"]: g for g in doc["groups"]}
    assert set(got) == set(want)
    for name, vals in want.items():
        assert got[name]["count"] == len(vals)
        assert [s["count"] for s in got[name]["slots"]] == _slots(vals)


def test_hist_per_disk_text_snapshot(trace):
    rc, out = cli(["hist", "-D", trace])
    assert rc == 0
    assert out == """\
device by disk: 4 values

disk = sdz: 3 values
     usecs               : count    distribution
         0 -> 1          : 0        |                                        |
         2 -> 3          : 0        |                                        |
         4 -> 7          : 0        |                                        |
         8 -> 15         : 0        |                                        |
        16 -> 31         : 0        |                                        |
        32 -> 63         : 0        |                                        |
        64 -> 127        : 1        |****************************************|
       128 -> 255        : 1        |****************************************|
       256 -> 511        : 0        |                                        |
       512 -> 1023       : 1        |****************************************|

disk = 8:16: 1 values
     usecs               : count    distribution
         0 -> 1          : 0        |                                        |
         2 -> 3          : 0        |                                        |
         4 -> 7          : 0        |                                        |
         8 -> 15         : 0        |                                        |
        16 -> 31         : 0        |                                        |
        32 -> 63         : 1        |****************************************|
"""


def test_hist_unit_takes_both_spellings(trace):
    a = cli(["hist", "--unit", "ms", "--json", trace])[1]
    b = cli(["hist", "--unit", "msecs", "--json", trace])[1]
    assert a == b and json.loads(a)["slot_unit"] == "msecs"


def test_hist_flags_text_groups(trace):
    rc, out = cli(["hist", "--flags", "--class", "data", trace])
    assert rc == 0
    heads = [ln for ln in out.splitlines() if ln.startswith("flags = ")]
    assert heads == ["flags = Sync-Write: 1 values"]


def test_hist_split_refuses_call_metrics(trace, capsys):
    rc = main(["hist", "-D", "--metric", "fsync", trace])
    assert rc != 0
    assert "apply to the request metrics" in capsys.readouterr().err


def test_hist_png_figure(trace):
    from iowhy.reports.hist import hist_figure
    fig = hist_figure([("disk = sdz: n=3", [0, 1, 2], {"p50": 1.5, "p99": 2.5})],
                      "device time (us)", "rq.iowt: device time of data requests, n=3",
                      log_y=True, value_unit="us")
    ax = fig.axes[0]
    assert fig._suptitle.get_text() == "rq.iowt: device time of data requests, n=3"
    assert ax.get_xlabel().startswith("device time (us)")
    assert ax.get_ylabel() == "count" and ax.get_yscale() == "log"
    assert ax.get_ylim()[0] == 0.5  # the bars (from 0) start at the axis bottom
    assert [p.get_height() for p in ax.patches] == [0, 1, 2]
    labels = [t.get_label() for t in ax.get_lines()]
    assert labels == ["p50 1.50 us", "p99 2.50 us"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "2", "4"]


def test_hist_png_cli_title(trace, tmp_path, monkeypatch):
    import iowhy.reports.hist as h
    seen = []
    orig = h.hist_figure

    def spy(*a, **k):
        fig = orig(*a, **k)
        seen.append(fig)
        return fig
    monkeypatch.setattr(h, "hist_figure", spy)
    out = tmp_path / "h.png"
    assert main(["hist", "--png", str(out), "--class", "data", "--log-y", trace]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    title = seen[0]._suptitle.get_text()
    assert title == "rq.iowt: device time of data requests, n=1"
    assert seen[0].axes[0].get_yscale() == "log"
    assert read_trace(trace).count("request") == len(REQS)


def test_hist_png_keeps_the_largest_groups(tmp_path, monkeypatch):
    import iowhy.commands as c
    import iowhy.reports.hist as h
    seen = []
    orig = h.hist_figure

    def spy(*a, **k):
        seen.append(a)
        return orig(*a, **k)
    monkeypatch.setattr(h, "hist_figure", spy)
    monkeypatch.setattr(c, "PNG_PANELS", 2)
    t = tb.busy_trace(tmp_path, n=600)
    assert main(["hist", "--flags", "--png", str(tmp_path / "f.png"), t]) == 0
    panels, _, title = seen[0][:3]
    assert len(panels) == 2 and "(2 of 6 flag combinations with the most values)" in title
    rc, out = cli(["hist", "--flags", "--json", t])
    counts = sorted((g["count"] for g in json.loads(out)["groups"]), reverse=True)
    drawn = sorted(int(p[0].rsplit("n=", 1)[1].replace(",", "")) for p in panels)
    assert drawn == sorted(counts[:2])
