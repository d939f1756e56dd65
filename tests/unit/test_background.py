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
