"""A shared kworker woken by the journal thread of another filesystem (jbd2/<device>-<n>
of a device the trace does not describe: another process's ext4) was handed that
filesystem's work, not the workload's: the wakeup is not followed into that jbd2's CPU
and runqueue time (model/wakeups.py, foreign_jbd2). The kworker's wait is then an I/O
wait completed from another task, charged to what the workload's devices did over it.
The journal thread of the workload's own filesystem (the trace's /dev/sdz1) is still
followed.

Window [1000, 1100). The root (100) waits in fsync [1010, 1090), woken by the kworker
60. 60 is blocked [1005, 1050), woken from task context by the jbd2 thread 70, then
runnable until 1055 and on CPU. 70 is runnable [1000, 1045), then on CPU. A cache
flush of the workload's disk is in flight [1020, 1040).
"""

from __future__ import annotations

import numpy as np

from iowhy import abi
from iowhy.model.wakeups import foreign_jbd2
from tracebuilder import assert_sums, off, req, run, write_trace

T = abi.WCTX_TASK
FSYNC = 74  # x86-64


def _run(tmp_path, jbd2: str) -> dict:
    reqs = [req(1020, 1040, op=abi.OP_FLUSH, seq=5)]
    helpers = [off(60, 1005, 1055, waking=1050, waker=70, ctx=T, comm=jbd2),
               off(60, 1095, 1099, waker=0, ctx=T, comm="star"),
               off(70, 1000, 1045, preempt=True),
               off(70, 1098, 1099, preempt=True)]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    offs = [off(100, 1010, 1090, waker=60, ctx=T, comm="kworker/u8:2", syscall=FSYNC)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, helpers=helpers, offcpu=offs))
    assert_sums(r)
    return {k: v for k, v in r["attribution_ns"].items() if v}


def test_a_kworker_woken_by_another_filesystems_jbd2_is_not_followed(tmp_path):
    # [1010, 1050): 60's wait, not followed into 70: the flushes [1020, 1040) barrier 20,
    # the rest wait-other "(I/O completed in another task)" 20; [1050, 1055) 60 runnable,
    # [1055, 1090) on CPU; the root's cpu [1000, 1010) and [1090, 1100).
    assert _run(tmp_path, "jbd2/sdq1-8") == {"cpu": 20, "barrier": 20, "wait-other": 20,
                                             "helper-runqueue": 5, "helper-cpu": 35}


def test_the_workloads_own_jbd2_is_followed(tmp_path):
    # [1010, 1050): 60's wait on the journal thread, a commit (level one log 40), served
    # by 70 runnable [1010, 1045) and on CPU [1045, 1050); then 60 as above, a kworker's
    # own time (no purpose: helper-runqueue 5, helper-cpu 35).
    assert _run(tmp_path, "jbd2/sdz1-8") == {"cpu": 20, "log": 40, "helper-runqueue": 5,
                                             "helper-cpu": 35}


def test_foreign_jbd2_names():
    comm = np.array([b"jbd2/sdq1-8", b"jbd2/sdz1-8", b"jbd2/dm-0-8", b"jbd2/nvme0n1p2-",
                     b"kworker/u8:2", b"jbd2/sdz-8"], dtype="S16")
    assert foreign_jbd2(comm, ["sdz", "sdz1", "nvme0n1"]).tolist() == [
        True, False, True, False, False, False]
    assert not foreign_jbd2(comm, []).any()  # no device described: nothing is foreign
