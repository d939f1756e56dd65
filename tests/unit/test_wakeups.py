"""model/wakeups.py: the timelines the causal engine walks, checked on hand-built traces
whose answer is worked out in the comments."""

from __future__ import annotations

from iowhy import abi

import tracebuilder as tb

K, T = abi.WCTX_SOFTIRQ, abi.WCTX_TASK
FSYNC = 74


def test_a_helpers_first_interval_stays_where_it_happened(tmp_path):
    # Twelve workload threads, so that a helper's actor key offset (its index times the
    # window's span) exceeds the window's start: the first helper interval was once
    # moved past the window (an int64 wrap-around) and the helper read as on CPU.
    # The root (100) waits [1010, 1050), woken by the helper (300); the helper is
    # recorded only [1020, 1040), waiting on a data write [1022, 1040) whose completion
    # wakes it. So: [1020, 1040) data 20 (the wait before the write's issue is the
    # write's too: it is no flush-sequenced request); the helper's time outside its
    # recorded stretch, [1010, 1020) and [1040, 1050), not recorded (level two
    # wait-other 20, with no device busy then to charge it to), and all of it level one
    # data: the data write's completion handed the helper its work; cpu 10 + 50.
    tasks = [tb.task(100, 1000)] + [tb.task(t, 1000, abi.TASK_FORK) for t in range(101, 112)]
    offs = [tb.off(100, 1010, 1050, waker=300, ctx=T, comm="kworker/u4:2", syscall=FSYNC)]
    helpers = [tb.off(300, 1020, 1040, ctx=K, rq_seq=1)]
    helpers[0]["flags_u16"] |= abi.OFF_HELPER
    reqs = [tb.req(1022, 1040, seq=1, flags=0, tid=300)]
    r = tb.run(tb.write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs, tasks=tasks,
                              helpers=helpers))
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    assert att == {"cpu": 60, "data": 40}, att
    assert r["attribution_detail_ns"]["data"] == {"data": 18, "queue": 2, "wait-other": 20}


def _kworker_wait(tmp_path, fs: int):
    # The root (100) in fsync [1010, 1050), woken by a kworker (300): asleep [1005, 1010)
    # until the root wakes it, runnable [1010, 1020), on CPU [1020, 1050), then asleep:
    # with the call's filesystem XFS the kworker serves the log force (level one log);
    # otherwise it names nothing: its time is its own (helper-cpu).
    tasks = [tb.task(100, 1000)]
    offs = [tb.off(100, 1010, 1050, waker=300, ctx=T, comm="kworker/u4:2", syscall=FSYNC)]
    helpers = [tb.off(300, 1005, 1020, waking=1010, waker=100, ctx=T, comm="star"),
               tb.off(300, 1050, 1060, waker=0, ctx=abi.WCTX_HARDIRQ)]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    calls = [tb.fsync(100, 1008, 1052, fs=fs)]
    return tb.run(tb.write_trace(tmp_path / f"k{fs}.iowt", offcpu=offs, tasks=tasks,
                                 helpers=helpers, fsyncs=calls))


def test_a_kworker_inside_an_xfs_fsync_serves_the_log(tmp_path):
    r = _kworker_wait(tmp_path, abi.FS_XFS)
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    # [1010, 1020) the kworker runnable (woken by the root), [1020, 1050) on CPU, all of
    # it the log's.
    assert att == {"cpu": 60, "log": 40}, att
    assert r["attribution_detail_ns"]["log"] == {"helper-runqueue": 10, "helper-cpu": 30}


def test_a_kworker_inside_an_ext4_fsync_is_its_own_time(tmp_path):
    r = _kworker_wait(tmp_path, abi.FS_EXT4)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    assert att == {"cpu": 60, "helper-runqueue": 10, "helper-cpu": 30}, att


def _end_io_wait(tmp_path, preempted: bool, fs: int = abi.FS_XFS):
    # The root (100) in fdatasync of a file [1008, 1052), asleep [1010, 1050), woken
    # by a kworker (300) from task context. The kworker was asleep [1000, 1030) until the
    # completion of the root's data write [1012, 1030) (seq 1, from a softirq) handed it
    # its work (xfs_end_io's size update of an append); runnable [1030, 1035), on CPU
    # [1035, 1050) but for a preemption [1040, 1045) when `preempted`. It served the data
    # write, not the log force: level one data over the whole wait, 40.
    tasks = [tb.task(100, 1000)]
    offs = [tb.off(100, 1010, 1050, waker=300, ctx=T, comm="kworker/1:2", syscall=FSYNC)]
    helpers = [tb.off(300, 1000, 1035, waking=1030, ctx=K, rq_seq=1)]
    if preempted:
        helpers.append(tb.off(300, 1040, 1045, preempt=True))
    helpers.append(tb.off(300, 1050, 1060, waker=0, ctx=abi.WCTX_HARDIRQ))
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    reqs = [tb.req(1012, 1030, seq=1)]
    calls = [tb.fsync(100, 1008, 1052, fs=fs, call=abi.CALL_FDATASYNC)]
    return tb.run(tb.write_trace(tmp_path / f"e{int(preempted)}{fs}.iowt", requests=reqs,
                                 offcpu=offs, tasks=tasks, helpers=helpers, fsyncs=calls))


def test_a_kworker_a_data_write_handed_its_work_serves_the_data(tmp_path):
    # On XFS (else the log force) and ext4 (else its own time) alike: end-I/O work.
    for preempted, fs in ((False, abi.FS_XFS), (True, abi.FS_XFS), (False, abi.FS_EXT4)):
        r = _end_io_wait(tmp_path, preempted, fs)
        tb.assert_sums(r)
        att = {k: v for k, v in r["attribution_ns"].items() if v}
        assert att == {"cpu": 60, "data": 40}, (preempted, att)
        # [1010, 1012) the write not yet issued (queued), [1012, 1030) in service; then
        # the kworker: runnable 5, on CPU 15 (10 and a preemption's 5 when preempted).
        detail = r["attribution_detail_ns"]["data"]
        assert sum(v for k, v in detail.items() if k.startswith("helper-")) == 20, detail


def _shell_jobs(tmp_path, born_between: bool):
    # `sh -c 'busy & dd ...; wait'`: the shell (100) forks 101 (a CPU loop, on CPU until
    # it exits at 1040) and 102 (its writes wait on the disk [1020, 1090), then it exits
    # at 1095). The shell waits in wait4 [1005, 1040), woken by 101's exit; it reaps 101
    # [1040, 1042) and waits again [1042, 1096), woken by 102's exit. It needed 102, not
    # 101: the whole wait is 102's (cpu [1005, 1020) and [1090, 1096) 21, data 68: its
    # write [1020, 1090) less the shell's own 2 on CPU).
    # With a thread born while it ran between the two waits (a new job started), the
    # first wait stays 101's (cpu by another thread 35).
    tasks = [tb.task(100, 1000), tb.task(101, 1001, abi.TASK_FORK),
             tb.task(102, 1002, abi.TASK_FORK), tb.task(101, 1040, abi.TASK_DEAD),
             tb.task(102, 1096, abi.TASK_DEAD)]
    if born_between:
        tasks.append(tb.task(103, 1041, abi.TASK_FORK))
        tasks.append(tb.task(103, 1043, abi.TASK_DEAD))
    wait4 = 61  # x86-64
    offs = [tb.off(100, 1005, 1040, waker=101, ctx=T, comm="busy", syscall=wait4),
            tb.off(100, 1042, 1096, waker=102, ctx=T, comm="dd", syscall=wait4),
            tb.off(102, 1020, 1090, rq_seq=1, ctx=K, syscall=1)]
    reqs = [tb.req(1020, 1090, seq=1, tid=102)]
    return tb.run(tb.write_trace(tmp_path / f"sh{int(born_between)}.iowt", requests=reqs,
                                 offcpu=offs, tasks=tasks))


def test_a_child_reaped_on_the_way_is_not_what_the_shell_waited_for(tmp_path):
    r = _shell_jobs(tmp_path, False)
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    # [1000, 1005) and [1040, 1042) and [1096, 1100) the shell on CPU 11; over its waits
    # 102: on CPU [1005, 1020) 15 and [1090, 1096) 6, its write the rest (data).
    assert att == {"cpu": 32, "data": 68}, att
    r = _shell_jobs(tmp_path, True)
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    assert att["cpu"] >= 11 + 35, att  # the first wait is 101's CPU loop


def test_a_child_waiting_on_its_parent_is_not_followed_back(tmp_path):
    # A jobserver: the parent (100) forks 101 (a CPU loop until its exit at 1040) and 102
    # (blocked reading a pipe [1010, 1041) that the parent writes after it reaps 101).
    # The parent: wait4 [1005, 1040) woken by 101's exit, on CPU [1040, 1042) (reaps it,
    # writes the pipe at 1041), wait4 again [1042, 1096) woken by 102's exit. 102 was
    # waiting for the parent over the first wait: that wait stays 101's CPU loop (35),
    # not 102's time, which would lead back to the parent (a cycle, "(depth limit)").
    tasks = [tb.task(100, 1000), tb.task(101, 1001, abi.TASK_FORK),
             tb.task(102, 1002, abi.TASK_FORK), tb.task(101, 1040, abi.TASK_DEAD),
             tb.task(102, 1096, abi.TASK_DEAD)]
    wait4, read = 61, 0
    offs = [tb.off(100, 1005, 1040, waker=101, ctx=T, comm="busy", syscall=wait4),
            tb.off(100, 1042, 1096, waker=102, ctx=T, comm="job", syscall=wait4),
            tb.off(102, 1010, 1041, waker=100, ctx=T, comm="make", syscall=read),
            tb.off(102, 1060, 1090, rq_seq=1, ctx=K, syscall=1)]
    reqs = [tb.req(1060, 1090, seq=1, tid=102)]
    r = tb.run(tb.write_trace(tmp_path / "js.iowt", requests=reqs, offcpu=offs,
                              tasks=tasks))
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    assert att == {"cpu": 70, "data": 30}, att
