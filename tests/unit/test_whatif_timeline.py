"""whatif/timeline.py: the replay as a causal timeline, attributed by the analysis' own
walk: replayed as recorded, the steps land where the recording had them and the
attribution is the recorded one; the replayed devices' coverages nest by category."""

from __future__ import annotations

import numpy as np
import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.traceformat import read_trace
from iowhy.whatif import predict, replay
from iowhy.whatif import timeline as WT

T0 = 1_000_000
FL = abi.RQ_TRACKED | abi.RQ_ORIGIN


@pytest.fixture(scope="module")
def prep(tmp_path_factory):
    """Thread 100: on CPU, waits [+110, +300) for write 1 (device [+100, +300)), on CPU,
    waits [+410, +2600) for write 2 with PREFLUSH|FUA (pre-flush FF [+400, +1400), its
    data [+1400, +1600), post-flush FF [+1600, +2600)), on CPU until it exits at +3100."""
    t = T0
    reqs = [tb.req(t + 100, t + 300, submit=t + 100, sector=8, seq=1, flags=FL),
            tb.req(t + 400, t + 1400, op=abi.OP_FLUSH, seq=2, flags=abi.RQ_FLUSH_SEQ, tid=0),
            tb.req(t + 1400, t + 2600, submit=t + 400, data_done=t + 1600, sector=16, seq=3,
                   iflags=abi.F_PREFLUSH | abi.F_FUA | abi.F_SYNC,
                   flags=FL | abi.RQ_FLUSH_SEQ),
            tb.req(t + 1600, t + 2600, op=abi.OP_FLUSH, seq=4, flags=abi.RQ_FLUSH_SEQ, tid=0)]
    H = abi.WCTX_HARDIRQ
    offs = [tb.off(100, t + 110, t + 300, waker=0, ctx=H, rq_seq=1, syscall=1),
            tb.off(100, t + 410, t + 2600, waker=0, ctx=H, rq_seq=3, syscall=74)]
    path = tb.write_trace(tmp_path_factory.mktemp("w") / "w.iowt", start=t, end=t + 3100,
                          requests=reqs, offcpu=offs,
                          tasks=[tb.task(100, t), tb.task(100, t + 3100, abi.TASK_EXIT)])
    return predict.prepare(read_trace(path))


def _identity(prep) -> tuple[replay.Result, int]:
    specs = [predict._spec(prep.fits[d] or predict._fallback_fit(prep.reqs, d), prep.reqs, d,
                           None)[0] for d in range(len(prep.reqs.devices))]
    rp = replay.Replay(prep.progs, prep.births, prep.reqs, prep.anchor_actor, prep.anchor_t,
                       specs, service="recorded", path=prep.path,
                       workload=~prep.cm.timeline.helper)
    res = rp.run(prep.cm.window.start_ns)
    return res, prep.cm.window.end_ns


def test_replayed_as_recorded_the_timeline_is_the_recorded_one(prep):
    res, end = _identity(prep)
    tl = prep.cm.timeline
    stl = WT.build(tl, prep.progs, res, prep.reqs, end)
    assert stl.tids.tolist() == tl.tids.tolist()
    assert (np.diff(stl.kstart) > 0).all()  # sorted by (actor, start), none empty
    assert stl.birth.tolist() == tl.birth.tolist() and stl.death.tolist() == tl.death.tolist()
    # the same segments: kinds and times (the linked waits cut as the analysis cuts them)
    n = len(tl.kstart)
    assert len(stl.kstart) == n
    assert stl.starts(np.arange(n)).tolist() == tl.starts(np.arange(n)).tolist()
    assert stl.cat.tolist() == tl.cat.tolist()
    # the analysis' own walk attributes it as it attributed the recording
    att = predict._attribute(prep, res, end)["attribution_ns"]
    assert {k: v for k, v in att.items() if v} == \
        {k: v for k, v in prep.result["attribution_ns"].items() if v}


def test_covers_nest_and_flushes_are_disjoint(prep):
    res, _ = _identity(prep)
    cv, (ws, we) = WT.covers(res, prep.reqs)
    assert len(cv) == 5
    for a, b in zip(cv, cv[1:]):  # V_k holds V_(k-1)
        assert a.total <= b.total
        assert (a.total == 0) or (b.upto(a.e) - b.upto(a.s) == a.e - a.s).all()
    fs, fe = WT.flushing(res)
    assert (fe > fs).all() and (fs[1:] >= fe[:-1]).all()
    assert res.flushes == 2
    # the flush waits of log writes: a subset (write 3 is a data write)
    ls, le = WT.log_waits(res, prep.reqs, (ws, we))
    assert len(ls) == 0 and len(ws) == len(res.flush_wait_rq)


def test_no_replayed_flush_no_flushing():
    z = np.zeros(0, np.int64)
    res = replay.Result(z, z, z, z, z, z, z, z)
    fs, fe = WT.flushing(res)
    assert len(fs) == len(fe) == 0
