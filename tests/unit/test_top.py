"""`iowhy top` without the kernel: a recorder line named and sorted, the device line
from /sys/block counters, the table's width and units, and the target checks in one
line before anything starts."""

from __future__ import annotations

import pytest

from iowhy import cli, top
from iowhy.errors import EXIT_USAGE


def _proc(pid: int, **ns: int) -> dict:
    a = {c: 0 for c in top.CAUSES}
    a.update({k.replace("_", "-"): v for k, v in ns.items()})
    return {"pid": pid, "attribution_ns": a,
            "fsync": {"count": 3, "p99_ns": 4_000_000, "max_ns": 4_100_000},
            "requests": {"count": 9, "p99_ns": 120_000, "max_ns": 130_000}}


RAW = {"start_ns": 10, "end_ns": 1_000_000_010, "interval_ns": 1_000_000_000,
       "dropped_processes": 0, "counters": {"lost_ringbuf_offcpu": 2, "requests_merged": 5},
       "processes": [_proc(7, cpu=900_000_000),
                     _proc(8, data=300_000_000, barrier=200_000_000, runqueue=100_000_000)]}


def test_a_snapshot_is_named_and_sorted_by_blocked_time():
    names = {7: ("busy", "/a.slice"), 8: ("db", None)}
    s = top.snapshot(RAW, [], names)
    assert [p["pid"] for p in s["processes"]] == [8, 7]
    assert s["processes"][0]["blocked_ns"] == 500_000_000  # runqueue and cpu are not blocked
    assert s["processes"][1]["cgroup"] == "/a.slice" and s["processes"][0]["comm"] == "db"
    assert s["lost"] == {"lost_ringbuf_offcpu": 2}


def test_the_table_fits_100_columns_with_units():
    s = top.snapshot(RAW, [{"name": "loop0", "busy_pct": 55.0, "queue_depth": 1.25,
                            "reads_per_s": 0.0, "writes_per_s": 70.5,
                            "flushes_per_s": 35.0}], {7: ("a" * 40, None), 8: ("db", None)})
    text = top.render(s)
    lines = text.splitlines()
    assert all(len(x) <= 100 for x in lines), [len(x) for x in lines]
    assert "busy  55.0%" in text and "flushes    35.0/s" in text and "p99 ms" in text
    assert "events lost in the kernel: 2 ringbuf_offcpu" in text
    row = next(x for x in lines if x.strip().startswith("8 "))
    assert row.split()[:4] == ["8", "db", "50", "0"]  # blocked 50%, cpu 0%


def test_device_rows_from_the_kernel_counters():
    a = {"sda": [0] * 17, "idle": [5] * 17}
    b = {"sda": [10, 0, 0, 0, 40, 0, 0, 0, 0, 500, 1500, 0, 0, 0, 0, 20, 0], "idle": [5] * 17}
    rows = top.device_rows(a, b, 1_000_000_000)
    assert rows == [{"name": "sda", "busy_pct": 50.0, "queue_depth": 1.5, "reads_per_s": 10.0,
                     "writes_per_s": 40.0, "flushes_per_s": 20.0}]


def test_device_counters_are_the_recorders_at_its_interval_bounds():
    raw = {**RAW, "block_start": {"sda": [0] * 17, "vdb": [1] * 17, "bad": ["x"], "no": 3},
           "block_end": {"sda": [10, 0, 0, 0, 40] + [0] * 12}}
    assert top.block_counters(raw, "block_start") == {"sda": [0] * 17, "vdb": [1] * 17}
    assert top.block_counters(raw, "block_start", ["vdb"]) == {"vdb": [1] * 17}
    assert top.block_counters(RAW, "block_end") == {}  # a line without them: no device line
    rows = top.device_rows(top.block_counters(raw, "block_start"),
                           top.block_counters(raw, "block_end"), raw["interval_ns"])
    assert [(r["name"], r["writes_per_s"]) for r in rows] == [("sda", 40.0)]


@pytest.mark.parametrize("argv,words", [
    ([], "one target: -p PID, --cgroup PATH or -a"),
    (["-p", "3", "-i", "0"], "-i 0.0 is not a number of seconds"),
    (["-p", "3", "-n", "0"], "-n 0 is not a count"),
    (["-p", "1"], "refusing to attach to PID 1"),
    (["--cgroup", "/nonexistent/x"], "--cgroup /nonexistent/x"),
])
def test_bad_targets_are_one_line(argv, words, capsys):
    rc = cli.main(["top", *argv])
    err = capsys.readouterr().err
    assert rc != 0 and words in err and err.count("\n") == 1, err
    if "one target" in words or "-i" in words or "-n" in words:
        assert rc == EXIT_USAGE


def test_cgroups_merge_their_processes_histograms_exactly():
    a = {"count": 99, "p99_ns": 140, "max_ns": 140, "buckets": [[40, 99]]}  # 128..143 ns
    b = {"count": 1, "p99_ns": 900_000, "max_ns": 900_000, "buckets": [[100, 1]]}
    assert top.bucket_top(40) == 143 and top.bucket_top(10) == 10 and top.bucket_top(7) == 7
    assert top.merge_hists([a, b]) == {"count": 100, "p99_ns": 143, "max_ns": 900_000}
    b2 = {**b, "count": 2, "buckets": [[100, 2]]}
    assert top.merge_hists([a, b2])["p99_ns"] == min(top.bucket_top(100), 900_000)
    assert top.merge_hists([]) == {"count": 0, "p99_ns": 0, "max_ns": 0}
    raw = {**RAW, "processes": [
        {**_proc(7, data=100), "fsync": a, "requests": a},
        {**_proc(8, data=300, barrier=50), "fsync": b, "requests": b},
        {**_proc(9, cpu=5), "fsync": b, "requests": b}]}
    names = {7: ("db", "/db.slice"), 8: ("db2", "/db.slice"), 9: ("x", None)}
    s = top.snapshot(raw, [], names, by="cgroup")
    assert "processes" not in s
    (db, other) = s["cgroups"]
    assert db["cgroup"] == "/db.slice" and db["pids"] == [7, 8] and db["blocked_ns"] == 450
    assert db["fsync"] == {"count": 100, "p99_ns": 143, "max_ns": 900_000}
    assert other["cgroup"] == "?" and other["blocked_ns"] == 0
    assert all(len(x) <= 100 for x in top.render(s).splitlines())
    # by process, the histograms' buckets stay inside
    s = top.snapshot(raw, [], names)
    assert "buckets" not in s["processes"][0]["fsync"]
