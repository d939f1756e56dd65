"""`iowhy export --format parquet` on synthetic runs: the tables hold what the analysis
finds in the trace (counts, per-class latency percentiles, flushes, attribution)."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from iowhy.analysis import AnalysisConfig, analyze
from iowhy.cli import main
from iowhy.traceformat import read_trace
from synth_runs import nearest_rank, synth_run

pq = pytest.importorskip("pyarrow.parquet")

TABLES = ("runs", "requests", "calls", "offcpu", "journal", "tasks", "attribution")


def export(tmp_path, seed=1, **kw):
    s = synth_run(tmp_path / f"run{seed}.iowt", seed=seed, **kw)
    out = tmp_path / f"pq{seed}"
    assert main(["export", s.path, "--format", "parquet", "-o", str(out)]) == 0
    return s, out, {t: pq.read_table(out / f"{t}.parquet").to_pylist() for t in TABLES}


def test_tables_match_the_analysis(tmp_path):
    s, out, t = export(tmp_path)
    r = analyze(read_trace(s.path), AnalysisConfig())
    assert len(t["requests"]) == len(s.requests)
    assert len(t["calls"]) == len(s.fsyncs)
    assert len(t["offcpu"]) == len(s.offcpu)
    assert len(t["journal"]) == len(s.journal)
    assert len(t["tasks"]) == len(s.tasks)
    for cls, figs in r["requests"].items():
        rows = [x for x in t["requests"] if x["class"] == cls]
        assert len(rows) == figs["count"], cls
        lat = [x["device_ns"] for x in rows if x["device_ns"] is not None]
        for q in (50, 90, 99):
            assert nearest_rank(lat, q) == figs["device_ns"][f"p{q}"], (cls, q)
    flushes = [x for x in t["requests"] if x["class"] == "flush"]
    assert len(flushes) == 40 == r["requests"]["flush"]["count"]
    # Latency parts from the synthetic list: data writes queue 4990 ns (insert at +10,
    # issue at +5000) and their device time is done - issue.
    by_seq = {x["seq"]: x for x in t["requests"]}
    for q in s.requests:
        x = by_seq[q["seq"]]
        assert x["device_ns"] == q["done_ns"] - q["issue_ns"]
        assert x["queue_ns"] == q["issue_ns"] - q["insert_ns"]
        assert x["total_ns"] == q["done_ns"] - q["submit_ns"]
    # Every data write was submitted inside an fsync call of its thread: call_id links it.
    data = [x for x in t["requests"] if x["class"] == "data"]
    assert all(x["call_id"] is not None for x in data)
    calls = {c["call_id"]: c for c in t["calls"]}
    for x in data:
        c = calls[x["call_id"]]
        assert c["tid"] == x["submitter_tid"] and c["enter_ns"] <= x["submit_ns"] <= c["exit_ns"]
    # Seeks: from the previous request's end on the device, in issue order.
    seeks = [x for x in t["requests"] if x["seek_sectors"] is not None]
    assert len(seeks) == len([q for q in s.requests if q["len_bytes"]]) - 1
    run = t["runs"][0]
    assert run["elapsed_ns"] == r["elapsed_ns"] == s.end_ns - s.start_ns
    for cat, v in r["attribution_ns"].items():
        assert run[f"{cat.replace('-', '_')}_ns"] == v
    assert sum(run[f"{c.replace('-', '_')}_ns"] for c in r["attribution_ns"]) == run["elapsed_ns"]
    # Level two: per basis, each category's rows sum to its level one, and are its parts.
    for basis, src in (("elapsed", r), ("thread_time", r["thread_time"])):
        rows = [x for x in t["attribution"] if x["basis"] == basis]
        assert rows
        for cat, parts in src["attribution_detail_ns"].items():
            got = {x["served_by"]: x["ns"] for x in rows if x["category"] == cat}
            assert got == parts, (basis, cat)
    assert (run["host"], run["kernel"], run["filesystems"], run["devices"]) == \
        ("hostA", "6.1.0", ["ext4"], ["sdz"])
    u = run["run_uuid"]
    for name in TABLES:
        assert {x["run_uuid"] for x in t[name]} == {u}, name
        mode = os.stat(out / f"{name}.parquet").st_mode
        assert stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700


def test_run_uuid_is_stable_and_distinct(tmp_path):
    _, _, a = export(tmp_path, seed=1)
    s, _, _ = export(tmp_path, seed=2)
    out = tmp_path / "again"
    assert main(["export", str(tmp_path / "run1.iowt"), "--format", "parquet", "-o",
                 str(out)]) == 0
    again = pq.read_table(out / "runs.parquet").to_pylist()[0]["run_uuid"]
    b = pq.read_table(tmp_path / "pq2" / "runs.parquet").to_pylist()[0]["run_uuid"]
    assert again == a["runs"][0]["run_uuid"] != b


def test_refuses_symlinks_and_non_directories(tmp_path, capsys):
    s = synth_run(tmp_path / "r.iowt", n_fsync=3, n_reads=1)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "realdir")
    (tmp_path / "realdir").mkdir()
    assert main(["export", s.path, "--format", "parquet", "-o", str(link)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iowhy: cannot write into") and "symlink" in err
    assert err.count("\n") == 1
    assert list((tmp_path / "realdir").iterdir()) == []
    assert main(["export", s.path, "--format", "parquet", "-o", str(victim)]) == 1
    assert "not a directory" in capsys.readouterr().err
    assert victim.read_text() == "keep"
    # A symlink planted in the output directory is not followed.
    d = tmp_path / "out"
    d.mkdir()
    (d / "requests.parquet").symlink_to(victim)
    assert main(["export", s.path, "--format", "parquet", "-o", str(d)]) == 1
    assert "symlink" in capsys.readouterr().err
    assert victim.read_text() == "keep"


def test_missing_pyarrow_is_one_line(tmp_path, capsys, monkeypatch):
    s = synth_run(tmp_path / "r.iowt", n_fsync=2, n_reads=0)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["export", s.path, "--format", "parquet", "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install" in err and "pyarrow" in err


def test_bad_trace_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.iowt"
    bad.write_bytes(b"not a trace at all, clearly")
    assert main(["export", str(bad), "--format", "parquet", "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iowhy: ") and err.count("\n") == 1


@pytest.mark.parametrize("module,argv", [
    ("duckdb", ["query", "SELECT 1"]),
    ("perfetto", ["export", "--format", "perfetto", "-o"]),
])
def test_missing_duckdb_or_perfetto_is_one_line(tmp_path, capsys, monkeypatch, module, argv):
    s = synth_run(tmp_path / "r.iowt", n_fsync=2, n_reads=0)
    # The module and any submodule an earlier test imported: none can be had.
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)
    if argv[0] == "query":
        argv = argv + [s.path]
    else:
        argv = ["export", s.path] + argv[1:] + [str(tmp_path / "o.pftrace")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"pip install {module}" in err
    assert not (tmp_path / "o.pftrace").exists()


def test_records_far_outside_the_window_are_left_out_as_the_analysis_does(tmp_path, capsys):
    # A record with a time far outside the recording is dropped when the trace is read
    # (damage); the export decodes the records again after the analysis released them,
    # and must drop it too, or its tables would not be the analysis' requests.
    from iowhy.tracecheck import WINDOW_SLACK_NS
    from tracebuilder import off, req, task, write_trace
    t0, far = 10**12, 10**12 + 2 * WINDOW_SLACK_NS
    p = tmp_path / "far.iowt"
    write_trace(p, start=t0, end=t0 + 100_000, tasks=[task(100, t0)],
                requests=[req(t0 + 20_000, t0 + 60_000, sector=50_000),
                          req(far + 30_000, far + 50_000, sector=60_000)],
                offcpu=[off(100, t0 + 10_000, t0 + 90_000, waking=t0 + 85_000),
                        off(100, far, far + 10_000)])
    tr = read_trace(str(p))
    kept = {n: (tr.count(n), tr.records(n).copy()) for n in ("request", "offcpu")}
    assert kept["request"][0] == 1 and kept["offcpu"][0] == 1
    tr.release("request", "offcpu")
    for n, (count, recs) in kept.items():  # decoded again: the same records
        assert tr.count(n) == count and (tr.records(n) == recs).all()
    out = tmp_path / "pq"
    assert main(["export", str(p), "--format", "parquet", "-o", str(out)]) == 0
    assert "1 request records with out-of-range values dropped" in capsys.readouterr().err
    assert pq.read_table(out / "requests.parquet").column("start_sector").to_pylist() == [50_000]
    assert pq.read_table(out / "offcpu.parquet").num_rows == 1
