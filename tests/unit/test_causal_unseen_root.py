"""The critical path over a wait of the root nobody ended (views/causal.py,
_continue_unseen), on synthetic traces whose cause is known by construction: the
attached process's main thread joins (futex) for the whole window and is never woken,
the time is the other workload threads' best-explained state at each instant."""

from __future__ import annotations

from iowhy import abi
from tracebuilder import att, assert_sums, off, req, run, task, write_trace

H, T = abi.WCTX_HARDIRQ, abi.WCTX_TASK
FSYNC, READ, FUTEX, NANOSLEEP = 74, 0, 202, 35  # x86-64 numbers
W0, W1 = 1000, 2000


def never_woken(tid: int, syscall: int, start: int = W0) -> dict:
    o = off(tid, start, 0, syscall=syscall)
    o["waking_ns"], o["end_ns"], o["ts_ns"] = 0, 0, W1
    return o


def worker_cycles(tid: int = 101, t0: int = W0, t1: int = W1):
    """Per 100 ns: on CPU 40, then fsync waits 30 on its data write (woken by that
    request's completion) and 30 on the cache flush (woken by the flush's)."""
    offs, reqs = [], []
    seq = 1
    for c in range(t0, t1, 100):
        reqs.append(req(c + 40, c + 70, sector=50_000, seq=seq, tid=tid))
        reqs.append(req(c + 70, c + 100, op=abi.OP_FLUSH, seq=seq + 1, tid=tid))
        offs.append(off(tid, c + 40, c + 70, ctx=H, rq_seq=seq, syscall=FSYNC))
        offs.append(off(tid, c + 70, c + 100, ctx=H, rq_seq=seq + 1, syscall=FSYNC))
        seq += 2
    return offs, reqs


def tasks3():
    return [task(100, W0), task(101, W0, abi.TASK_FORK), task(102, W0, abi.TASK_FORK)]


def test_root_joining_all_window_follows_the_worker(tmp_path):
    # main (100) in futex [1000, 2000) never woken; idle (102) in read never woken;
    # worker (101): cpu 40% of the window, data 30%, barrier 30%.
    offs, reqs = worker_cycles()
    offs += [never_woken(100, FUTEX), never_woken(102, READ)]
    r = run(write_trace(tmp_path / "t.iowt", start=W0, end=W1, requests=reqs, offcpu=offs,
                        tasks=tasks3()))
    assert_sums(r)
    el = r["elapsed_ns"]
    a = att(r)
    assert abs(a["cpu"] - 0.40 * el) <= 0.01 * el
    assert a.get("wait-other", 0) <= 0.01 * el
    assert abs(a["data"] - 0.30 * el) <= 0.01 * el
    assert abs(a["barrier"] - 0.30 * el) <= 0.01 * el
    assert "futex" not in r["wait_other_by_syscall_ns"]
    # The worker's syscall names the blocked time, as on any followed path.
    assert "fsync" in r["blocked_by_syscall_ns"]


def test_idle_threads_contribute_nothing_unless_nothing_runs(tmp_path):
    # The worker only lives [1000, 1500): after it the main thread's join and the idle
    # thread's read are all there is; that half stays wait-other on the main's futex.
    offs, reqs = worker_cycles(t1=1500)
    offs += [never_woken(100, FUTEX), never_woken(102, READ)]
    tasks = tasks3() + [task(101, 1500, abi.TASK_EXIT)]
    r = run(write_trace(tmp_path / "t.iowt", start=W0, end=W1, requests=reqs, offcpu=offs,
                        tasks=tasks))
    assert_sums(r)
    el = r["elapsed_ns"]
    a = att(r)
    assert abs(a["cpu"] - 200) <= 2 and abs(a["data"] - 150) <= 2
    assert abs(a["wait-other"] - (el - 500)) <= 2
    assert list(r["wait_other_by_syscall_ns"]) == ["futex"]


def test_a_sleeping_root_is_not_continued(tmp_path):
    # A root in nanosleep never woken is a voluntary sleep, not a wait on its threads.
    offs, reqs = worker_cycles()
    offs += [never_woken(100, NANOSLEEP)]
    r = run(write_trace(tmp_path / "t.iowt", start=W0, end=W1, requests=reqs, offcpu=offs,
                        tasks=tasks3()[:2]))
    assert att(r) == {"sleep": r["elapsed_ns"]}


def test_a_wait_woken_by_an_unrecorded_flusher_is_its_device_time(tmp_path):
    # The root (100) waits in syncfs [1010, 1090), woken by a writeback flusher
    # (kworker/u8:3, tid 77) of which the trace has no intervals. The flusher's data
    # writes to the workload's disk are in flight [1010, 1080): data 70; the last 10
    # nothing explains (wait-other under the flusher's name); cpu 20.
    SYNCFS = 306
    reqs = [req(1010, 1045, sector=60_000, seq=1, tid=77, flags=0),
            req(1040, 1080, sector=61_000, seq=2, tid=77, flags=0),
            req(1100 - 5, 1099, sector=5_000, seq=3, tid=100)]  # the workload's own
    offs = [off(100, 1010, 1090, waker=77, ctx=T, comm="kworker/u8:3", syscall=SYNCFS)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs))
    assert_sums(r)
    assert att(r) == {"cpu": 20, "data": 70, "wait-other": 10}
    assert r["wait_other_by_waker_ns"] == {"kworker/u8:3": 10}


def test_an_io_wait_completed_in_another_task_is_its_device_time(tmp_path):
    # The root (100) waits in fdatasync, in iowait, [1010, 1090); the completion that
    # ends the wait runs in another task's context (tid 500, a FUSE daemon serving the
    # loop device, not a workload thread nor a kernel helper) with no request link. Its
    # own data write is in flight [1010, 1080): data 70, the last 10 unexplained; cpu 20.
    # A pipe read (not iowait) ended by an outside writer stays that writer's: external.
    FDATASYNC = 75
    reqs = [req(1010, 1080, sector=60_000, seq=1, tid=100)]
    io = off(100, 1010, 1090, waker=500, ctx=T, comm="emudisk", syscall=FDATASYNC)
    io["flags_u16"] |= abi.OFF_IOWAIT
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=[io]))
    assert_sums(r)
    assert att(r) == {"cpu": 20, "data": 70, "wait-other": 10}
    assert r["wait_other_by_waker_ns"] == {"(I/O completed in another task)": 10}
    pipe = off(100, 1010, 1090, waker=500, ctx=T, comm="writer", syscall=READ)
    pipe["flags_u16"] = abi.OFF_S if hasattr(abi, "OFF_S") else 0
    r = run(write_trace(tmp_path / "p.iowt", requests=reqs, offcpu=[pipe]))
    assert att(r) == {"cpu": 20, "external": 80}


def test_a_batch_of_pieces_with_no_other_thread_alive(tmp_path, monkeypatch):
    # Two joins of the main thread nobody ends: [1010, 1040) while the worker (101)
    # lives, [1060, 1090) after it exited at 1050; one piece per batch, so that the
    # second batch meets no other thread at all: it stays wait-other "(not seen)".
    from iowhy.views import causal
    monkeypatch.setattr(causal, "CONTINUE_BATCH", 1)
    offs = [off(100, 1010, 1040, waking=1040, syscall=FUTEX),
            off(100, 1060, 1090, waking=1090, syscall=FUTEX),
            off(101, 1020, 1030, ctx=H, syscall=NANOSLEEP)]
    for o in offs[:2]:
        o["waker_tid"], o["waker_ctx_u16"] = 0, 0  # the waker was not seen
    tasks = [task(100, W0), task(101, W0, abi.TASK_FORK), task(101, 1050, abi.TASK_EXIT)]
    r = run(write_trace(tmp_path / "t.iowt", start=1000, end=1100, offcpu=offs, tasks=tasks))
    assert_sums(r)
    # [1010, 1040): the worker on CPU 20 and asleep 10 (a sleep is better explained
    # than the join's wait-other); [1060, 1090): nobody alive, wait-other 30; the main
    # thread on CPU [1000, 1010) [1040, 1060) [1090, 1100).
    assert att(r) == {"cpu": 40 + 20, "sleep": 10, "wait-other": 30}
    assert r["attribution_detail_ns"]["cpu"] == {"cpu": 40, "thread-cpu": 20}
