"""findings.py: the sentences at the end of a report, from the report's own figures."""

from __future__ import annotations

from iowhy import abi
import tracebuilder as tb

SDY = (8, 16)


def _barrier_trace(path, fua_on: tuple[int, int], calls: tuple[int, ...] = ()) -> str:
    """flush_share's shape (golden_traces.py): a workload wait over sdz's flushes, and one
    FUA log write, on sdz (write back, no FUA) or on a second disk `fua_on`."""
    seq = abi.RQ_FLUSH_SEQ | abi.RQ_TRACKED
    pf = abi.F_PREFLUSH | abi.F_SYNC
    m = tb.meta()
    m["devices"].append(tb.disk("sdy", SDY, write_cache="write through", fua=1))
    return tb.write_trace(path, meta_obj=m, requests=[
        tb.req(0, 1050, nbytes=0, submit=1010, iflags=pf, flags=seq | abi.RQ_NO_ISSUE),
        tb.req(1052, 1080, submit=1015, data_done=1060, sector=tb.LOG_RANGE[0], dev=fua_on,
               iflags=abi.F_SYNC | abi.F_FUA | abi.F_META, flags=abi.RQ_TRACKED),
        tb.req(1030, 1050, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ),
        tb.req(1062, 1078, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ),
    ], offcpu=[tb.off(100, 1010, 1090, waking=1085)],
        fsyncs=[tb.fsync(100, 1001 + 2 * i, 1002 + 2 * i, call=c) for i, c in enumerate(calls)])


CLAUSE = ("sdz has a volatile write cache without FUA: its FUA writes (1) each waited for a "
          "post-flush (2 flushes in all)")


def test_the_post_flush_clause_names_a_device_only_for_its_own_fua_writes(tmp_path):
    own = tb.run(_barrier_trace(tmp_path / "own.iowt", tb.DEV))
    (barrier,) = [f for f in own["findings"] if f["key"] == "barrier"]
    assert CLAUSE in barrier["text"]
    assert {d["name"]: d["fua_writes"] for d in own["devices"]} == {"sdz": 1, "sdy": 0}
    # The FUA write went to sdy, which has FUA: none of sdz's flushes was its post-flush.
    other = tb.run(_barrier_trace(tmp_path / "other.iowt", SDY))
    (barrier,) = [f for f in other["findings"] if f["key"] == "barrier"]
    assert "volatile write cache" not in barrier["text"]
    assert {d["name"]: d["fua_writes"] for d in other["devices"]} == {"sdz": 0, "sdy": 1}


def test_the_post_flush_clause_needs_fua_writes_to_matter():
    # A few FUA writes among many explicit flushes (fdatasync's) are not why the flushes
    # cost: the clause names a device only from POST_FLUSH_SHARE of its flushes on.
    from iowhy.findings import POST_FLUSH_SHARE, _post_flush_clause
    dev = {"name": "sdz", "write_cache": "write back", "fua": 0,
           "flush": {"count": 25_754}, "fua_writes": 4}
    r = {"workload": {"devices": ["sdz"]}, "devices": [dev]}
    assert _post_flush_clause(r) == ""
    dev["fua_writes"] = int(POST_FLUSH_SHARE * 25_754) + 1
    assert _post_flush_clause(r).startswith("; sdz has a volatile write cache without FUA")
    dev["fua"] = 1  # the device does FUA itself: no post-flush
    assert _post_flush_clause(r) == ""


def test_sync_file_range_is_not_named_as_sending_flushes(tmp_path):
    # sync_file_range(2) starts or waits for writeback and never flushes a cache: the
    # barrier finding counts the calls that can (fdatasync here), not it.
    calls = (abi.CALL_FDATASYNC, abi.CALL_SYNC_FILE_RANGE, abi.CALL_SYNC_FILE_RANGE)
    p = _barrier_trace(tmp_path / "t.iowt", tb.DEV, calls=calls)
    (barrier,) = [f for f in tb.run(p)["findings"] if f["key"] == "barrier"]
    assert "1 fsync-family call (fdatasync) caused them" in barrier["text"]
    assert barrier["evidence"]["fsync_calls"] == 1
    p = _barrier_trace(tmp_path / "s.iowt", tb.DEV, calls=(abi.CALL_SYNC_FILE_RANGE,))
    (barrier,) = [f for f in tb.run(p)["findings"] if f["key"] == "barrier"]
    assert "no fsync-family call that flushes (sync_file_range only writes back)" \
        in barrier["text"]


def test_the_reads_median_is_of_the_class_that_has_the_requests(tmp_path):
    # The thread waits for readahead (device time 30 ns), then for a plain read (10 ns):
    # the read finding gives each class's own median, never the median of a class with
    # no requests ("-": it read the read class's when only readahead had any).
    H = abi.WCTX_HARDIRQ
    ra = tb.req(1010, 1040, op=abi.OP_READ, iflags=abi.F_RAHEAD, seq=1)
    rd = tb.req(1050, 1060, op=abi.OP_READ, sector=5000, seq=2)
    offs = [tb.off(100, 1010, 1040, waker=0, ctx=H, rq_seq=1, syscall=0),
            tb.off(100, 1050, 1060, waker=0, ctx=H, rq_seq=2, syscall=0)]
    rec = {"attach_mode": "tp_btf"}
    for name, reqs, o, want in (
            ("ra", [ra], offs[:1], "1 request, 0.0 MiB, device median 30 ns"),
            ("both", [ra, rd], offs, "2 requests (1 read, 1 readahead), 0.0 MiB, device "
             "median 10 ns read, 30 ns readahead")):
        r = tb.run(tb.write_trace(tmp_path / f"{name}.iowt", requests=reqs, offcpu=o,
                                  recorder=rec))
        (f,) = [f for f in r["findings"] if f["key"] == "read"]
        assert f["text"].endswith("waiting on reads: " + want), f["text"]
