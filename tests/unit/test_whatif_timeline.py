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


@pytest.fixture(scope="module")
def prep(tmp_path_factory):
    """tracebuilder.fsync_through_flushes: thread 100's fsync through a pre-flush, its
    FUA write and a post-flush."""
    path = tb.fsync_through_flushes(tmp_path_factory.mktemp("w") / "w.iowt", t=T0)
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


def test_a_guessed_wait_is_named_as_the_analysis_names_it(tmp_path):
    """Thread 100 writes data [100, 500), the journal thread writes the log [500, 900),
    and thread 100 waits [100, 1100) in iowait, woken from an interrupt with no request
    link: the analysis names the wait by what the device did, data, then log, then
    wait-other "(irq, no request)". The replay times the wait by the write that
    completed last before it ended (program.build's guess: the log write) and keeps its
    recorded kind, so that the same fill names it the same (by the guessed write's
    class it would be log throughout)."""
    t = T0
    reqs = [tb.req(t + 100, t + 500, sector=8, seq=1, flags=abi.RQ_TRACKED | abi.RQ_ORIGIN),
            tb.req(t + 500, t + 900, sector=tb.LOG_RANGE[0] + 8, seq=2, tid=50,
                   comm=b"jbd2/sdz1-8", flags=abi.RQ_ORIGIN)]
    offs = [tb.off(100, t + 100, t + 1100, waker=0, ctx=abi.WCTX_HARDIRQ, syscall=1,
                   flags=abi.OFF_IOWAIT)]
    p = predict.prepare(read_trace(tb.write_trace(
        tmp_path / "g.iowt", start=t, end=t + 1200, requests=reqs, offcpu=offs,
        tasks=[tb.task(100, t), tb.task(100, t + 1200, abi.TASK_EXIT)])))
    assert p.progs.guessed == 1
    rec = {k: v for k, v in p.result["attribution_ns"].items() if v}
    assert rec == {"cpu": 200, "data": 400, "log": 400, "wait-other": 200}
    res, end = _identity(p)
    att = predict._attribute(p, res, end)["attribution_ns"]
    assert {k: v for k, v in att.items() if v} == rec
