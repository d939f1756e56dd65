"""A workload thread that waits for its other threads by polling (a loop of
clock_nanosleep, each ended by its timer: fio's main process waiting for its job
processes) does not hide their time: over each sleep the critical path continues into
what the other threads were doing, where that is better than sleep (views/causal.py,
_continue_unseen). A sleep with nobody else working stays sleep.

Window [1000, 2000). The job (102) works in cycles of 100 ns: on CPU 20, then a pwrite
waiting 80 on its data write (woken by the request's completion), until 1900, then on
CPU until it exits at 1980. The poller sleeps [s, s + 45) in clock_nanosleep, woken by a
timer (hardirq, idle task), and runs [s + 45, s + 50), for s = 1000, 1050, ..., 1900.
"""

from __future__ import annotations

from iowhy import abi
from tracebuilder import att, assert_sums, off, req, run, task, write_trace

H, T = abi.WCTX_HARDIRQ, abi.WCTX_TASK
WAIT4, READ, PWRITE, CLOCK_NANOSLEEP = 61, 0, 18, 230  # x86-64 numbers
W0, W1 = 1000, 2000


def _job(tid: int = 102):
    offs, reqs = [], []
    for k, c in enumerate(range(W0, 1900, 100)):
        reqs.append(req(c + 20, c + 100, sector=50_000 + 64 * k, seq=k + 1, tid=tid))
        offs.append(off(tid, c + 20, c + 100, ctx=H, rq_seq=k + 1, syscall=PWRITE))
    return offs, reqs


def _poller(tid: int):
    return [off(tid, s, s + 45, waker=0, ctx=H, syscall=CLOCK_NANOSLEEP)
            for s in range(W0, 1950, 50)]


def test_a_child_polling_for_its_job_is_the_jobs_time(tmp_path):
    # The recorded process (100) waits in wait4 [1005, 1990) for the poller (101),
    # which exits at 1985 and wakes it; the job (102) is 101's child.
    offs, reqs = _job()
    offs += _poller(101)
    offs.append(off(100, 1005, 1990, waker=101, ctx=T, comm="fio", syscall=WAIT4))
    tasks = [task(100, W0), task(101, W0, abi.TASK_FORK), task(102, W0, abi.TASK_FORK),
             task(102, 1980, abi.TASK_EXIT), task(101, 1985, abi.TASK_EXIT)]
    r = run(write_trace(tmp_path / "t.iowt", start=W0, end=W1, requests=reqs, offcpu=offs,
                        tasks=tasks))
    assert_sums(r)
    el = r["elapsed_ns"]
    a = att(r)
    # Every ns of the poller's sleeps the job was on CPU or waiting on its write: no
    # sleep is left. data: the job's waits [c + 20, c + 100) met by the poller's sleeps
    # [c, c + 45) and [c + 50, c + 95): 25 + 45 per cycle, 9 cycles.
    assert a == {"cpu": el - 630, "data": 630}, a
    assert r["sleep_by_syscall_ns"] == {}


def test_a_recorded_process_polling_for_its_job(tmp_path):
    # The poller is the recorded process itself (100); the job (102) is its child.
    offs, reqs = _job()
    offs += _poller(100)
    tasks = [task(100, W0), task(102, W0, abi.TASK_FORK), task(102, 1980, abi.TASK_EXIT)]
    r = run(write_trace(tmp_path / "t.iowt", start=W0, end=W1, requests=reqs, offcpu=offs,
                        tasks=tasks))
    assert_sums(r)
    a = att(r)
    assert a == {"cpu": r["elapsed_ns"] - 630, "data": 630}, a


def test_polling_with_nobody_working_stays_sleep(tmp_path):
    # The other thread (102) is blocked in read all window, never woken: nothing is
    # better than the poller's sleep, 45 of every 50 ns until 1950.
    offs = _poller(100)
    o = off(102, W0, 0, syscall=READ)
    o["waking_ns"], o["end_ns"], o["ts_ns"] = 0, 0, W1
    offs.append(o)
    tasks = [task(100, W0), task(102, W0, abi.TASK_FORK)]
    r = run(write_trace(tmp_path / "t.iowt", start=W0, end=W1, offcpu=offs, tasks=tasks))
    assert_sums(r)
    assert att(r) == {"sleep": 19 * 45, "cpu": r["elapsed_ns"] - 19 * 45}
    assert r["sleep_by_syscall_ns"] == {"clock_nanosleep": 19 * 45}
