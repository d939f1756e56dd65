"""Throttled waits in the causal attribution: an off-CPU record the probes flagged
IOWHY_OFF_THROTTLE_DIRTY (a balance_dirty_pages pause) or IOWHY_OFF_THROTTLE_BLOCK
(writeback throttling, another rq-qos policy or a wait for a tag, before the bio had a
request) is level one `throttle`, level two `dirty-pages` or `block-throttle`, whatever
ended it; the same wait unflagged is named by its waker as before. Synthetic traces,
figures worked out in the comments (window [1000, 1100), one thread 100)."""

from __future__ import annotations

from iowhy import abi
from tracebuilder import att, assert_sums, off, req, run, task, write_trace

T, K, H = abi.WCTX_TASK, abi.WCTX_SOFTIRQ, abi.WCTX_HARDIRQ
WRITE, FSYNC = 1, 74  # x86-64 numbers
DIRTY, BLOCK, IOWAIT = abi.OFF_THROTTLE_DIRTY, abi.OFF_THROTTLE_BLOCK, abi.OFF_IOWAIT


def test_a_dirty_pause_is_throttle_where_the_same_wait_unflagged_is_unexplained(tmp_path):
    # Two io_schedule_timeout sleeps in write(2), each ended by the timer softirq (no
    # request): [1010, 1030) flagged as a balance_dirty_pages pause, [1040, 1060) not.
    # The first is throttle 20 (dirty-pages); the second is what an unflagged pause
    # looked like before: in iowait, woken from an interrupt with no request, 20 of
    # wait-other "(irq, no request)". cpu 60.
    offs = [off(100, 1010, 1030, waker=0, ctx=K, syscall=WRITE, flags=IOWAIT | DIRTY),
            off(100, 1040, 1060, waker=0, ctx=K, syscall=WRITE, flags=IOWAIT)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs))
    assert_sums(r)
    assert att(r) == {"cpu": 60, "throttle": 20, "wait-other": 20}
    assert r["attribution_detail_ns"]["throttle"] == {"dirty-pages": 20}
    assert r["wait_other_by_waker_ns"] == {"(irq, no request)": 20}
    assert r["thread_time"]["by_syscall"]["write"]["attribution_ns"] == {
        "throttle": 20, "wait-other": 20}
    f = {x["key"]: x for x in r["findings"]}
    assert "dirty-page throttling" in f["throttle"]["text"], f["throttle"]
    assert f["throttle"]["evidence"]["served_by_ns"] == {"dirty-pages": 20}


def test_a_block_throttle_is_throttle_though_a_request_completion_ended_it(tmp_path):
    # fsync's writeback: the thread sleeps in wbt_wait [1010, 1040) until the completion
    # of another data request (seq 1) lets it go on; then it waits [1050, 1070) on its
    # own data write (seq 2). Both woken by a completion, but the first was the block
    # layer's throttle: throttle 30 (block-throttle), data 20, cpu 50.
    reqs = [req(1005, 1040, sector=50_000, seq=1),
            req(1045, 1070, sector=60_000, seq=2)]
    offs = [off(100, 1010, 1040, waker=0, ctx=H, rq_seq=1, syscall=FSYNC,
                flags=IOWAIT | BLOCK),
            off(100, 1050, 1070, waker=0, ctx=H, rq_seq=2, syscall=FSYNC, flags=IOWAIT)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs))
    assert_sums(r)
    assert att(r) == {"cpu": 50, "throttle": 30, "data": 20}
    assert r["attribution_detail_ns"]["throttle"] == {"block-throttle": 30}
    assert r["thread_time"]["by_syscall"]["fsync"]["attribution_detail_ns"] == {
        "throttle": {"block-throttle": 30}, "data": {"data": 20}}


def test_a_throttled_wait_ended_by_a_thread_is_not_that_threads_work(tmp_path):
    # Woken from task context by a kworker (tid 60, not recorded) and, unflagged, by a
    # workload thread 101 that is on CPU throughout: a throttled wait stays throttle
    # whoever ended it, [1010, 1030) throttle 20, [1040, 1060) thread-cpu (cpu 20).
    tasks = [task(100, 1000), task(101, 1000, abi.TASK_FORK)]
    offs = [off(100, 1010, 1030, waker=60, ctx=T, comm="kworker/u4:2", syscall=FSYNC,
                flags=IOWAIT | BLOCK),
            off(100, 1040, 1060, waker=101, ctx=T, comm="star", syscall=FSYNC)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs, tasks=tasks))
    assert_sums(r)
    assert att(r) == {"cpu": 80, "throttle": 20}
    assert r["attribution_detail_ns"]["throttle"] == {"block-throttle": 20}


def test_the_runnable_tail_of_a_pause_is_runqueue_and_dirty_wins(tmp_path):
    # A pause [1010, 1040) whose timer fired at 1030: blocked 20 (throttle), runnable 10
    # (runqueue). A record with both flags (a pause taken while a bio of the thread was
    # still without a request) is the dirty throttle's: [1050, 1060) dirty-pages 10.
    offs = [off(100, 1010, 1040, waking=1030, waker=0, ctx=K, syscall=WRITE,
                flags=IOWAIT | DIRTY),
            off(100, 1050, 1060, waker=0, ctx=K, syscall=WRITE, flags=IOWAIT | DIRTY | BLOCK)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs))
    assert_sums(r)
    assert att(r) == {"cpu": 60, "throttle": 30, "runqueue": 10}
    assert r["attribution_detail_ns"]["throttle"] == {"dirty-pages": 30}
