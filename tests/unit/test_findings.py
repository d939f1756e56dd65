"""findings.py: the sentences at the end of a report, from the report's own figures."""

from __future__ import annotations

from iowhy import abi
import tracebuilder as tb

SDY = (8, 16)


def _barrier_trace(path, fua_on: tuple[int, int]) -> str:
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
    ], offcpu=[tb.off(100, 1010, 1090, waking=1085)])


CLAUSE = "sdz has a volatile write cache without FUA, so every FUA write costs a post-flush"


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
