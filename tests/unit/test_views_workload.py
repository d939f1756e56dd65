"""views/workload.py workload_view: every ns of the window in one category: on CPU,
runnable, blocked while the devices did something (by priority), else wait-other by
syscall, or no live thread."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.kernels import Coverage, union_intervals
from iowhy.model.flush import FlushShare
from iowhy.model.requests import Window
from iowhy.views.workload import NO_TASK, WORKLOAD_CATEGORIES, flush_waits, workload_view
from rqload import loaded

WIN = Window(1000, 1100)
ARCH = "x86_64"  # fsync is 74, read 0


def _cumulative(*per_cat: list[tuple[int, int]]) -> list[Coverage]:
    """V_0..V_4 from the intervals of each category (barrier, log, metadata, data, read)."""
    out, acc = [], []
    for iv in per_cat:
        acc = acc + iv
        s = np.array([a for a, _ in acc], np.int64)
        e = np.array([b for _, b in acc], np.int64)
        out.append(Coverage(*union_intervals(s, e)) if acc else Coverage(s, e))
    return out


def _view(tasks, off, covers=(), waits=None) -> dict:
    v = workload_view(WIN, tb.columns("task", tasks), tb.columns("offcpu", off), list(covers),
                      waits, ARCH)
    att = v["attribution_ns"]
    assert set(att) == set(WORKLOAD_CATEGORIES)
    assert sum(att.values()) == WIN.elapsed_ns and min(att.values()) >= 0
    assert sum(v["wait_other_by_syscall_ns"].values()) == att["wait-other"]
    return v


def test_every_ns_in_one_category():
    tasks = [tb.task(1, 1000), tb.task(1, 1095, abi.TASK_DEAD)]
    off = [tb.off(1, 1010, 1050, waking=1040, syscall=74),  # blocked 30, runnable 10
           tb.off(1, 1060, 1090, syscall=0)]                # blocked 30
    covers = _cumulative([(1015, 1020)], [(1020, 1025)], [], [(1065, 1070)],
                         [(1070, 1075), (1000, 1010)])
    waits = (np.array([1030]), np.array([1035]))
    v = _view(tasks, off, covers, waits)
    assert v["attribution_ns"] == {
        "cpu": 10 + 10 + 5, "runqueue": 10, "barrier": 5 + 5, "log": 5, "metadata": 0,
        "data": 5, "read": 5, "wait-other": 15 + 20 + 5}
    assert v["wait_other_by_syscall_ns"] == {"read": 20, "fsync": 15, NO_TASK: 5}
    assert v["blocked_by_syscall_ns"] == {"fsync": 30, "read": 30}
    assert v["threads"] == 1 and v["offcpu_intervals"] == 2


def test_the_best_state_among_the_live_threads():
    tasks = [tb.task(1, 1000), tb.task(2, 1000, abi.TASK_FORK)]
    off = [tb.off(1, 1000, 1100, syscall=74),         # 1 blocked throughout
           tb.off(2, 1020, 1040, preempt=True),        # 2 preempted: runnable
           tb.off(2, 1040, 1100, waking=1060, syscall=0)]
    v = _view(tasks, off)
    att = v["attribution_ns"]
    # runnable while 2 is preempted, and after its wakeup: 1 blocked does not count
    assert (att["cpu"], att["runqueue"], att["wait-other"]) == (20, 20 + 40, 20)
    # 1040..1060: both blocked, one in fsync, one in read: the tie to the lowest number
    assert v["wait_other_by_syscall_ns"] == {"read": 20}
    assert v["blocked_by_syscall_ns"] == {"read": 20}


def test_no_thread_at_all_is_wait_other_with_no_task():
    v = _view([], [])
    assert v["attribution_ns"]["wait-other"] == 100
    assert v["wait_other_by_syscall_ns"] == {NO_TASK: 100}
    assert v["threads"] == 0


def test_flush_waits_of_some_devices_or_of_log_writes(tmp_path):
    rq, _ = loaded(tmp_path, [tb.req(1010, 1020), tb.req(1030, 1040, dev=(8, 16)),
                              tb.req(1050, 1060, sector=tb.LOG_RANGE[0])])
    wi = np.array([0, 1, 2])
    fl = FlushShare(*(np.zeros(0, np.int64),) * 3, wi, np.zeros(3, np.int64),
                    *(np.zeros(0, np.int64),) * 3,
                    (np.array([1, 2, 3, 11, 12, 13]), np.array([5, 6, 7, 15, 16, 17])))
    a, b = flush_waits(rq, fl, [0, 1])
    assert a.tolist() == [1, 2, 3, 11, 12, 13] and b.tolist() == [5, 6, 7, 15, 16, 17]
    a, b = flush_waits(rq, fl, [0])
    assert a.tolist() == [1, 3, 11, 13] and b.tolist() == [5, 7, 15, 17]
    cls = np.array([3, 3, 1], np.int8)  # data, data, log
    a, b = flush_waits(rq, fl, [0, 1], cls)
    assert a.tolist() == [3, 13] and b.tolist() == [7, 17]


def test_workload_covers_are_the_relevant_devices_unions_in_plain_time(tmp_path):
    from types import SimpleNamespace
    from iowhy.views.workload import workload_covers
    rq, _ = loaded(tmp_path, [tb.req(1010, 1020), tb.req(1030, 1040, dev=(8, 16))])
    span, origin = 1000, 1000
    st = SimpleNamespace(span=span, origin=origin)
    # keyed unions: device 0 [10, 20) and [50, 60), device 1 [15, 30)
    u = (np.array([10, 50, span + 15]), np.array([20, 60, span + 30]))
    fl = FlushShare(*(np.zeros(0, np.int64),) * 8, (np.zeros(0, np.int64),) * 2)
    (both,), _ = workload_covers(rq, st, [u], fl, [0, 1])
    assert both.s.tolist() == [1010, 1050] and both.e.tolist() == [1030, 1060]
    (one,), _ = workload_covers(rq, st, [u], fl, [1])
    assert one.s.tolist() == [1015] and one.e.tolist() == [1030]
    (none,), _ = workload_covers(rq, st, [u], fl, [])
    assert none.total == 0
