"""A two-level stack (a loop device whose backing file lives on the filesystem of disk
sdz): the request tables count each byte once, at the top device, and list the lower
device's carried I/O apart (views/stack.py); the time attribution does not change."""

from __future__ import annotations


from iowhy import abi

import tracebuilder as tb

UPPER, UPPER_LOG = tb.UPPER, tb.UPPER_LOG  # loop1, backing file on sdz1; its journal


def stack_meta(with_stack: bool = True) -> dict:
    m = tb.loop_stack_meta(with_stack)
    m["lower_devices"] = []
    return m


def stack_trace(path, with_stack: bool = True) -> str:
    R = tb.req
    up = dict(dev=UPPER)
    requests = [
        # the workload's fsync on the upper filesystem: a data write, then its journal
        # write with a preflush, served by the loop worker (tid 300)
        R(1010, 1020, nbytes=4096, sector=1000, tid=100, seq=1, **up),
        R(1022, 1060, nbytes=4096, sector=UPPER_LOG[0] + 8, iflags=abi.F_PREFLUSH,
          flags=0, tid=60, seq=2, **up),
        # the loop worker's fsync of the backing file inside that window: the file's
        # pages (carried), the lower journal and a cache flush (the lower device's own)
        R(1030, 1040, nbytes=8192, sector=4000, flags=0, tid=300, seq=3),
        R(1041, 1050, nbytes=4096, sector=tb.LOG_RANGE[0] + 8, flags=0, tid=50, seq=4),
        R(1051, 1058, op=abi.OP_FLUSH, flags=0, tid=50, seq=5),
        # the workload's own write on the lower filesystem in the same window: its own
        R(1032, 1045, nbytes=2048, sector=9000, tid=100, seq=6),
        # another write of a file of the lower filesystem, no upper request in flight
        R(1070, 1080, nbytes=16384, sector=7000, flags=0, tid=400, seq=7),
    ]
    fsyncs = [tb.fsync(100, 1005, 1065, dev=UPPER)]
    return tb.write_trace(path, requests=requests, fsyncs=fsyncs, meta_obj=stack_meta(with_stack))


def written(r: dict, cls: str) -> int:
    return int(r["requests"][cls]["write_bytes"])


def test_lower_carried_bytes_are_counted_once(tmp_path):
    r = tb.run(stack_trace(tmp_path / "s.iowt"))
    upper_bytes = 4096 + 4096
    lower_own = 4096 + 2048 + 16384  # its journal, the workload's write, another file's
    total = sum(written(r, c) for c in ("data", "metadata", "log"))
    assert total == upper_bytes + lower_own
    assert written(r, "data") == 4096 + 2048 + 16384
    assert written(r, "log") == 4096 + 4096
    assert r["requests"]["data"]["writes"] == 3
    assert r["metadata_data"]["data_bytes"] == written(r, "data")
    assert r["stack_carried"] == [{"upper": "loop1", "lower": "sdz", "requests": 1,
                                   "read_bytes": 0, "write_bytes": 8192,
                                   "flushes": 0, "empty_preflush": 0}]
    from iowhy.reports.html import render_html
    from iowhy.reports.terminal import render_report
    line = "1 requests (0.0 MiB) of sdz only carried loop1's I/O"
    assert line in " ".join(render_report(r).split())
    assert line in render_html(r)
    # the per-device view is each device's own figure: the disk wrote the carried bytes
    dev = {d["name"]: d for d in r["devices"]}
    assert dev["sdz"]["write_bytes"] == 8192 + lower_own


def test_without_a_stack_every_request_counts_and_time_is_unchanged(tmp_path):
    flat = tb.run(stack_trace(tmp_path / "flat.iowt", with_stack=False))
    stacked = tb.run(stack_trace(tmp_path / "s.iowt"))
    assert "stack_carried" not in flat
    assert written(flat, "data") == written(stacked, "data") + 8192
    assert flat["attribution_ns"] == stacked["attribution_ns"]
    tb.assert_sums(stacked)


def flush_stack_trace(path) -> str:
    """The workload's fsync flushes loop1: its empty PREFLUSH (never issued) rides the
    FF the block layer issues; the loop worker (tid 300) serves that FF by an fsync of
    the backing file, which sends an empty PREFLUSH and an FF of its own to sdz. Then a
    data write of loop1, carried below, during which sdz flushes for itself (no flush of
    loop1 in flight: the lower filesystem's own)."""
    R = tb.req
    up = dict(dev=UPPER)
    pf = abi.F_PREFLUSH | abi.F_SYNC
    kw = {"comm": b"kworker/u8:3"}
    requests = [
        R(0, 1040, nbytes=0, submit=1010, iflags=pf, flags=abi.RQ_TRACKED | abi.RQ_NO_ISSUE,
          seq=1, **up),
        R(1012, 1040, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ, tid=0, seq=2, **up),
        R(1050, 1070, nbytes=4096, sector=1000, seq=3, **up),
        {**R(0, 1030, nbytes=0, submit=1015, iflags=pf,
             flags=abi.RQ_ORIGIN | abi.RQ_NO_ISSUE, tid=300, seq=4), **kw},
        R(1016, 1030, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ, tid=0, seq=5),
        {**R(1052, 1058, nbytes=4096, sector=4000, flags=abi.RQ_ORIGIN, tid=300, seq=6), **kw},
        R(1060, 1064, op=abi.OP_FLUSH, flags=0, tid=0, seq=7),
    ]
    return tb.write_trace(path, requests=requests, meta_obj=stack_meta())


def test_a_flush_is_counted_once_per_stack(tmp_path):
    # Requests of class flush: 5. Flushes of the stack: loop1's FF (the workload's empty
    # PREFLUSH merged into it; sdz's empty PREFLUSH and FF its fsync sent carried it
    # out) and sdz's own FF: 2, as /sys/block's flush counts and blktrace would give.
    r = tb.run(flush_stack_trace(tmp_path / "f.iowt"), requests=True)
    assert r["requests"]["flush"]["count"] == 2
    assert r["requests"]["flush"]["issued"] == 2
    assert r["flushes"]["count"] == 2 and r["flushes"]["empty_preflush"] == 1
    assert r["flushes"]["total_ns"] == 28 + 4
    # The row's device time and percentiles are those of the two it counts (loop1's FF,
    # 28 ns; sdz's own, 4 ns), not of sdz's carried FF nor of the empty PREFLUSHes.
    row = r["requests"]["flush"]
    assert row["device_total_ns"] == 28 + 4
    assert row["device_ns"] == {"p50": 4, "p90": 28, "p99": 28, "max": 28}
    assert row["total_ns"] == row["device_ns"]
    assert r["workload"]["devices"] == ["loop1"]
    assert r["workload"]["flushes"]["count"] == 1
    assert r["stack_carried"] == [{"upper": "loop1", "lower": "sdz", "requests": 1,
                                   "read_bytes": 0, "write_bytes": 4096,
                                   "flushes": 1, "empty_preflush": 1}]
    # Each device's own view: every FF it served.
    dev = {d["name"]: d["flush"]["count"] for d in r["devices"]}
    assert dev == {"sdz": 2, "loop1": 1}
    # The export's `counted` is the class tables' (record order: seq 1..7).
    roles = r["_requests"]
    assert roles["counted"].tolist() == [False, True, True, False, False, False, True]
    assert (roles["carried_for"] >= 0).tolist() == [False] * 3 + [True] * 3 + [False]
    from iowhy.reports.html import render_html
    from iowhy.reports.terminal import render_report
    text = " ".join(render_report(r).split())
    assert "counted once per stack: 1 requests (0.0 MiB) and 1 flush of sdz only carried " \
        "loop1's I/O" in text
    assert "merged into them: 1 empty PREFLUSH request (never issued themselves)" in text
    html = render_html(r)
    assert "1 requests (0.0 MiB) and 1 flush of sdz only carried loop1's I/O" in html
    assert "merged into them: 1 empty PREFLUSH request" in html


def seeking_trace(path, with_stack: bool = True) -> str:
    """On loop1 and on sdz alike: ten contiguous 4 KiB writes of 100 ns, then five far
    apart of 1,000 ns each (900 ns above the contiguous baseline)."""
    requests, seq = [], 0
    for dev, t0 in ((UPPER, 1000), (tb.DEV, 10_000)):
        t, sector = t0, 100_000
        for i in range(15):
            far = i >= 10
            sector += 5_000_000 * (i - 9) if far else 8
            seq += 1
            requests.append(tb.req(t, t + (1000 if far else 100), sector=sector, dev=dev,
                                   seq=seq))
            t += 2000
    return tb.write_trace(path, end=50_000, requests=requests, meta_obj=stack_meta(with_stack))


def test_positioning_leaves_out_a_loop_device_over_a_file_placed_below(tmp_path):
    # loop1's sectors are offsets in a file that sdz1's filesystem places: a time above
    # the contiguous baseline there is no seek of the medium. sdz's own are counted.
    flat = tb.run(seeking_trace(tmp_path / "flat.iowt", with_stack=False))
    stacked = tb.run(seeking_trace(tmp_path / "s.iowt"))
    both, own = flat["placement"]["data"], stacked["placement"]["data"]
    assert both["positioned_requests"] == 10 and both["positioning_ns"] == 10 * 900
    assert own["positioned_requests"] == 5 and own["positioning_ns"] == 5 * 900
    # sdz's first write has no seek distance: 14 measured
    assert own["positioning_basis"] == 14 and own["device_ns"] == both["device_ns"] // 2
    # the seeks themselves stay: a file's offsets still tell sequential from not
    assert own["requests_with_seek"] == both["requests_with_seek"]
    assert "placement_remapped" not in flat and stacked["placement_remapped"] == ["loop1"]
    from iowhy.reports.terminal import render_report
    assert "positioning and dev time leave out loop1" in " ".join(render_report(stacked).split())


def test_what_carried_another_process_io_is_background(tmp_path):
    # The workload writes to loop1 at [1010, 1020), carried below at [1012, 1018); another
    # process (psql, a user process) writes to loop1 at [1100, 1140), carried below by
    # the loop worker at [1110, 1120), right after the workload's carried write on disk.
    # That second lower write is the other process's I/O: background, not carried, and
    # in no placement or locality figure.
    R = tb.req
    up = dict(dev=UPPER)
    requests = [
        R(1010, 1020, nbytes=4096, sector=1000, tid=100, seq=1, **up),
        R(1012, 1018, nbytes=4096, sector=4000, flags=0, tid=300, seq=2),
        R(1100, 1140, nbytes=4096, sector=1008, flags=abi.RQ_ORIGIN, tid=500, seq=3,
          comm=b"psql", **up),
        R(1110, 1120, nbytes=4096, sector=4008, flags=0, tid=300, seq=4),
    ]
    r = tb.run(tb.write_trace(tmp_path / "b.iowt", requests=requests, end=1200,
                              meta_obj=stack_meta()))
    assert r["stack_carried"] == [{"upper": "loop1", "lower": "sdz", "requests": 1,
                                   "read_bytes": 0, "write_bytes": 4096,
                                   "flushes": 0, "empty_preflush": 0}]
    bg = {d["name"]: d["requests"] for d in r["background"]["devices"]}
    assert bg == {"loop1": 1, "sdz": 1}
    assert r["requests"]["data"]["writes"] == 1  # the workload's, at loop1
    # the two lower writes are adjacent on disk; the pair is not the workload's
    assert r["locality"]["adjacent_pairs"] == 0 and r["locality"]["writes"] == 2
