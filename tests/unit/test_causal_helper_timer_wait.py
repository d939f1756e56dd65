"""A helper thread's wait that no I/O ended: woken from an interrupt with no request link
while it was not in iowait (a timer: btrfs's space reclaim worker polling with
schedule_timeout while the workload's openat waits on it). What the workload's devices
did over it is charged to them, as for any unlinked interrupt wakeup of a helper; the
rest is the helper's sleep, not wait-other. The same wait in iowait (an I/O completion
on a device the trace does not cover) stays wait-other "(irq, no request)".

Window [1000, 1100). The root thread 100 waits in openat [1010, 1090), woken by the
kworker 60 (task context). 60 is blocked [1005, 1080), woken at 1080 from a softirq by
the idle task with no request link, runnable [1080, 1085), on CPU [1085, 1095). A cache
flush of the workload's disk is in flight [1030, 1040).
"""

from __future__ import annotations

from iowhy import abi
from tracebuilder import att, assert_sums, off, req, run, write_trace

T, K = abi.WCTX_TASK, abi.WCTX_SOFTIRQ
OPENAT = 257  # x86-64


def _trace(tmp_path, helper_flags: int) -> dict:
    reqs = [req(1030, 1040, op=abi.OP_FLUSH, seq=5)]
    helpers = [off(60, 1005, 1085, waking=1080, waker=0, ctx=K, flags=helper_flags),
               off(60, 1095, 1099, waker=0, ctx=K, flags=helper_flags)]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    offs = [off(100, 1010, 1090, waker=60, ctx=T, comm="kworker/u8:2", syscall=OPENAT)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, helpers=helpers, offcpu=offs))
    assert_sums(r)
    return r


def test_helper_timer_wait_is_sleep_beyond_the_devices(tmp_path):
    r = _trace(tmp_path, 0)
    # cpu [1000, 1010) + [1090, 1100); over the wait: the flush 10 (barrier), the rest of
    # 60's timer wait 60 (sleep), helper-runqueue 5, helper-cpu 5.
    assert att(r) == {"cpu": 20, "barrier": 10, "sleep": 60, "helper-runqueue": 5,
                      "helper-cpu": 5}, r["wait_other_by_waker_ns"]
    assert r["wait_other_by_waker_ns"] == {}
    assert r["thread_time"]["attribution_ns"] == r["attribution_ns"]


def test_helper_iowait_without_request_stays_wait_other(tmp_path):
    r = _trace(tmp_path, abi.OFF_IOWAIT)
    assert att(r) == {"cpu": 20, "barrier": 10, "wait-other": 60, "helper-runqueue": 5,
                      "helper-cpu": 5}
    assert r["wait_other_by_waker_ns"] == {"(irq, no request)": 60}
