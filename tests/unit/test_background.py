"""views/background.py: which requests are another's (background) and stay out of the
workload's class tables, on hand-built traces.

The workload (tid 100) reads from sdy. On sdz, which it never submitted to:
* its own buffered writes, written back by the flusher kworker and committed by jbd2:
  the workload's, in its tables (no user process on sdz);
* or another process's (`dd`, tid 400) writes and the flushes its fsyncs sent: all
  background, the flushes too (the kernel sends them; the device is that process's).
"""

from __future__ import annotations

from iowhy import abi
import tracebuilder as tb

SDY = (8, 16)


def _meta():
    m = tb.meta()
    m["devices"].append({"name": "sdy", "major": SDY[0], "minor": SDY[1],
                         "size_bytes": 1 << 30, "rotational": 0,
                         "write_cache": "write back", "fua": 0})
    return m


def _counts(r):
    return {k: v["count"] for k, v in r["requests"].items() if v["count"]}


def test_the_workloads_own_writeback_is_not_background(tmp_path):
    kw = {"comm": b"kworker/u8:3"}
    reqs = [tb.req(1005, 1015, op=abi.OP_READ, dev=SDY, seq=1),
            {**tb.req(1020, 1060, sector=6000, flags=abi.RQ_ORIGIN, tid=301, seq=2), **kw},
            {**tb.req(1062, 1070, sector=6100, flags=abi.RQ_ORIGIN, tid=301, seq=3), **kw},
            {**tb.req(1071, 1075, sector=tb.LOG_RANGE[0], flags=abi.RQ_ORIGIN, tid=50,
                      seq=4, iflags=abi.F_META), "comm": b"jbd2/sdz1-8"},
            tb.req(1076, 1080, op=abi.OP_FLUSH, flags=0, seq=5)]
    r = tb.run(tb.write_trace(tmp_path / "wb.iowt", requests=reqs, meta_obj=_meta()))
    assert _counts(r) == {"read": 1, "data": 2, "log": 1, "flush": 1}, _counts(r)
    assert not (r.get("background") or {}).get("requests")


def test_another_processes_device_keeps_its_flushes(tmp_path):
    dd = {"comm": b"dd"}
    reqs = [tb.req(1005, 1015, op=abi.OP_READ, dev=SDY, seq=1),
            {**tb.req(1020, 1030, sector=6000, flags=abi.RQ_ORIGIN, tid=400, seq=2), **dd},
            tb.req(1031, 1040, op=abi.OP_FLUSH, flags=0, seq=3),
            {**tb.req(1041, 1050, sector=6100, flags=abi.RQ_ORIGIN, tid=400, seq=4), **dd},
            tb.req(1051, 1060, op=abi.OP_FLUSH, flags=0, seq=5)]
    r = tb.run(tb.write_trace(tmp_path / "dd.iowt", requests=reqs, meta_obj=_meta()))
    assert _counts(r) == {"read": 1}, _counts(r)
    bg = {d["name"]: d["requests"] for d in r["background"]["devices"]}
    assert bg == {"sdz": 4}, r["background"]


def test_a_shared_kworkers_other_io_is_background(tmp_path):
    # With wakeup links: the workload (tid 100) writes sdz and waits [1010, 1100) for
    # kworker 300, which ends that wait at 1100. The kworker also writes sdy back for
    # someone else: one of its waits there ended at 1050, while the workload waited for
    # it (head-of-line: the workload did wait for that sdy write); another at 1300, with
    # nobody of the workload waiting. sdy is the workload's only through that one wait:
    # its tables count the write it waited out, not the kworker's other I/O.
    kw = {"comm": b"kworker/u8:3"}
    reqs = [tb.req(1000, 1005, sector=6000, seq=1),
            {**tb.req(1020, 1050, dev=SDY, sector=100, flags=abi.RQ_ORIGIN, tid=300, seq=2),
             **kw},
            {**tb.req(1200, 1300, dev=SDY, sector=900, flags=abi.RQ_ORIGIN, tid=300, seq=3),
             **kw},
            {**tb.req(1310, 1320, dev=SDY, sector=1900, flags=abi.RQ_ORIGIN, tid=300, seq=4),
             **kw}]
    offcpu = [tb.off(100, 1010, 1100, waker=300, comm="kworker/u8:3")]
    helpers = [tb.helper(300, 1020, 1050, rq_seq=2), tb.helper(300, 1200, 1300, rq_seq=3)]
    t = tb.Trace(tmp_path / "kw.iowt", _meta())
    t.add("request", reqs).add("offcpu", offcpu).add("helper", helpers)
    t.add("task", [tb.task(100, 1000)])
    r = tb.run(t.close(tb.trailer(1400)))
    assert _counts(r) == {"data": 2}, _counts(r)  # sdz's own write, and sdy's seq 2
    bg = {d["name"]: d["requests"] for d in r["background"]["devices"]}
    assert bg == {"sdy": 2}, r["background"]
    # no positioning or seek of another's I/O in the placement figures: sdz's first
    # write and sdy's seq 2 have no request before them on their device
    assert (r["placement"].get("data") or {}).get("requests_with_seek", 0) == 0


def test_waits_a_helper_ended_count_only_while_the_workload_waited():
    from iowhy.views.background import waker_request_seqs
    off = tb.columns("offcpu", [tb.off(100, 1010, 1100, waker=300),
                                tb.off(100, 2000, 2100, waker=301)])
    # helper 301 hands off to 300 inside the second wait (two hops)
    helper = tb.columns("helper", [
        tb.helper(300, 1020, 1050, rq_seq=2), tb.helper(300, 1200, 1300, rq_seq=3),
        tb.helper(301, 2010, 2050, waker=300), tb.helper(300, 2005, 2040, rq_seq=5)])
    assert sorted(waker_request_seqs(off, helper).tolist()) == [2, 5]
