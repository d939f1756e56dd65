"""whatif/program.py: each actor's recorded life as a program of steps that tile it (a
wait the records link to a request is one step on that request, a wait ended by another
actor one on it), where each actor starts, which actor submits each request, and the
machine's waits for a CPU after a sleep by the sleep's length."""

from __future__ import annotations

import numpy as np
import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.traceformat import read_trace
from iowhy.whatif import predict
from iowhy.whatif import program as P

T0 = 1_000_000
FL = abi.RQ_TRACKED | abi.RQ_ORIGIN


@pytest.fixture(scope="module")
def prep(tmp_path_factory):
    """Thread 100 submits write 1 at +100 (issued at +150) and waits [+110, +300) for it
    (linked: its queue, then its stage); it
    forks 101 at +50, which waits [+200, +250) until 100 wakes it, then exits at +500;
    100 exits at +1000."""
    t = T0
    path = tb.write_trace(
        tmp_path_factory.mktemp("p") / "p.iowt", start=t, end=t + 1000,
        requests=[tb.req(t + 150, t + 300, submit=t + 100, sector=8, seq=1, flags=FL),
                  tb.req(t + 600, t + 650, submit=t + 600, sector=32, seq=3,
                         flags=abi.RQ_TRACKED),
                  tb.req(t + 400, t + 450, submit=t + 400, sector=64, seq=2, flags=FL,
                         tid=999)],
        offcpu=[tb.off(100, t + 110, t + 300, waker=0, ctx=abi.WCTX_HARDIRQ, rq_seq=1,
                       syscall=1),
                tb.off(101, t + 200, t + 250, waker=100, ctx=abi.WCTX_TASK, syscall=202)],
        tasks=[tb.task(100, t), tb.task(101, t + 50, abi.TASK_FORK, parent_tgid=100),
               tb.task(101, t + 500, abi.TASK_EXIT), tb.task(100, t + 1000, abi.TASK_EXIT)])
    return predict.prepare(read_trace(path))


def test_programs_tile_each_actors_life(prep):
    p, tl = prep.progs, prep.cm.timeline
    nact = len(tl.tids)
    assert len(p.first) == nact + 1 and p.first[0] == 0 and p.first[-1] == len(p.kind)
    assert (np.diff(p.first) >= 0).all()
    for a in range(nact):
        s = slice(p.first[a], p.first[a + 1])
        ra, rb = p.ra[s], p.rb[s]
        assert ra[0] == tl.birth[a] and rb[-1] == tl.death[a]
        assert (rb[:-1] == ra[1:]).all() and (rb >= ra).all()
    wa = p.kind == P.WAIT_ACTOR
    assert ((p.dep[wa] >= 0) & (p.dep[wa] < nact)).all()
    wr = p.kind == P.WAIT_RQ
    assert ((p.dep[wr] >= 0) & (p.dep[wr] < len(prep.reqs))).all()
    assert (p.dep[~(wa | wr)] == -1).all()
    s = P.summary(p)
    assert s["steps"] == len(p.kind) == s["fixed"] + s["waits_on_actors"] + \
        s["waits_on_requests"] + s["helper_idle"] + s["polling_sleeps"]


def test_the_linked_wait_is_one_step_on_its_request(prep):
    p, tl = prep.progs, prep.cm.timeline
    a = int(np.flatnonzero(tl.tids == 100)[0])
    s = slice(p.first[a], p.first[a + 1])
    wr = np.flatnonzero(p.kind[s] == P.WAIT_RQ)
    assert len(wr) == 1
    i = p.first[a] + wr[0]
    assert (p.ra[i], p.rb[i]) == (T0 + 110, T0 + 300)
    assert prep.reqs.seq[p.dep[i]] == 1
    assert (p.linked_waits, p.linked_unplaced, p.guessed) == (1, 0, 0)


def test_the_woken_thread_waits_on_its_waker(prep):
    p, tl = prep.progs, prep.cm.timeline
    a = int(np.flatnonzero(tl.tids == 101)[0])
    root = int(np.flatnonzero(tl.tids == 100)[0])
    s = slice(p.first[a], p.first[a + 1])
    wa = np.flatnonzero(p.kind[s] == P.WAIT_ACTOR)
    assert [int(p.dep[p.first[a] + k]) for k in wa] == [root]
    assert p.rb[p.first[a] + wa[0]] == T0 + 250
    # it starts where its parent forked it
    assert prep.births.parent.tolist()[a] == root and prep.births.at[a] == T0 + 50
    assert prep.births.parent[root] == -1 and prep.births.at[root] == T0


def test_requests_are_anchored_at_their_submitter(prep):
    actor, at = P.anchors(prep.reqs, prep.cm.timeline)
    root = int(np.flatnonzero(prep.cm.timeline.tids == 100)[0])
    by_seq = dict(zip(prep.reqs.seq.tolist(), actor.tolist()))
    # 999 is no thread of the workload; 3's submitter is not known (no RQ_ORIGIN)
    assert by_seq == {1: root, 2: -1, 3: -1}
    assert at.tolist() == prep.reqs.arrive.tolist()


def test_wake_latency_bins_and_moves():
    w = P.WakeLatency(P.WAKE_EDGES, [np.linspace(0, 100, 101), None, 2 * np.linspace(0, 100, 101),
                                     None, None, None, None])
    assert [w.bin(x) for x in (0, 19_999, 20_000, 99_999, 10**9)] == [0, 0, 1, 1, 6]
    assert w.moved(30, 10, 15) == 30  # the same bin
    assert w.moved(30, 10, 50_000) == 30  # too few wakeups in the other bin
    assert w.moved(30, 10, 200_000) == 60  # the same percentile of the other bin


def test_wake_latency_of_a_trace(tmp_path):
    offs = [tb.off(100, T0 + 10 * i, T0 + 10 * i + 5 + i % 3, waking=T0 + 10 * i + 5)
            for i in range(P.WAKE_MIN)]
    tr = read_trace(tb.write_trace(tmp_path / "w.iowt", start=T0, end=T0 + 1000, offcpu=offs))
    w = P.wake_latency(tr)
    assert w.pct[0] is not None and all(x is None for x in w.pct[1:])
    assert w.pct[0][0] == 0 and w.pct[0][100] == 2
    tr = read_trace(tb.write_trace(tmp_path / "v.iowt", start=T0, end=T0 + 1000,
                                   offcpu=offs[:-1]))
    assert P.wake_latency(tr).pct[0] is None  # fewer than WAKE_MIN
