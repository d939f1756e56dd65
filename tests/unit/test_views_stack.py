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
                                   "read_bytes": 0, "write_bytes": 8192}]
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
