"""views/causal_inputs.py: the causal engine's inputs built from the model: the
timeline of the workload's threads then its helpers, the root thread, and the helpers'
names and which of them work for another filesystem (from the wakeups they made)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import tracebuilder as tb
from iowhy.analysis import columns
from iowhy.model.classify import classify
from iowhy.model.flush import flush_generations
from iowhy.model.requests import load_requests, trace_window
from iowhy.model.stages import device_stages
from iowhy.traceformat import read_trace
from iowhy.views import causal_inputs as CI
from iowhy.views.device import device_unions

OURS, FOREIGN = "jbd2/sdz1-8", "jbd2/sdq1-8"  # sdq is no device of the trace


def _all(tr, name: str) -> dict[str, np.ndarray]:
    return columns(tr, name, tb.DTYPES[name].names)


def test_timeline_root_and_helper_names(tmp_path):
    path = tb.write_trace(
        tmp_path / "c.iowt", pid=100, tasks=[tb.task(101, 1000), tb.task(100, 1001)],
        requests=[tb.req(1012, 1030)],
        offcpu=[tb.off(100, 1010, 1050, waker=50, comm=OURS),
                tb.off(101, 1060, 1080, waker=60, comm=FOREIGN)],
        helpers=[tb.helper(50, 1020, 1040), tb.helper(60, 1062, 1070)])
    tr = read_trace(path)
    win = trace_window(tr)
    rq = load_requests(tr, win)
    cls = classify(rq, tr.meta)
    st = device_stages(rq, win, cls=cls)
    tasks, off, helper = _all(tr, "task"), _all(tr, "offcpu"), _all(tr, "helper")
    tl, fill, root, names = CI.causal_inputs(
        win, tr.meta, rq, st, device_unions(rq, st, cls)[1], flush_generations(rq, win), [0],
        cls, tasks, off, helper, _all(tr, "fsync"), 100, 1)
    # the workload's threads first, then the helpers
    nw = int((~tl.helper).sum())
    assert sorted(tl.tids[:nw].tolist()) == [100, 101]
    assert sorted(tl.tids[nw:].tolist()) == [50, 60]
    assert tl.tids[root] == 100  # the recorded process, not the earliest root task
    assert names == {50: OURS, 60: FOREIGN}
    tid, comm = CI._wakers(off, helper)
    assert CI.foreign_helpers(tl, tid, comm) == [60]
    assert fill is not None


def _tl(tids, helper, devices=("sdz", "sdz1")):
    return SimpleNamespace(tids=np.array(tids), helper=np.array(helper), devices=devices)


def test_foreign_helpers_and_names_need_a_recorded_helper():
    tid = np.array([50, 60, 70, 60])
    comm = np.array([OURS.encode(), FOREIGN.encode(), FOREIGN.encode(), b"other"], "S16")
    tl = _tl([100, 50, 60], [False, True, True])
    # 70 woke a thread but is no helper of the timeline
    assert CI.foreign_helpers(tl, tid, comm) == [60]
    assert CI.helper_names(tl, tid, comm) == {50: OURS, 60: FOREIGN}
    assert CI.foreign_helpers(tl, tid[:0], comm[:0]) == []
    # without the trace's device names nothing is foreign
    assert CI.foreign_helpers(_tl([50, 60], [True, True], ()), tid, comm) == []


def test_no_wakeup_record_no_waker():
    tid, comm = CI._wakers({}, None)
    assert len(tid) == 0 and len(comm) == 0
    off = {"waker_tid": np.array([7], np.uint32), "waker_comm": np.array([b"kw"], "S16")}
    tid, comm = CI._wakers(off, {"waker_tid": np.zeros(0)})
    assert tid.tolist() == [7] and comm.tolist() == [b"kw"]
