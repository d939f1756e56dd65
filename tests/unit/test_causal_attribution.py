"""The causal attribution (model/wakeups.py, views/causal.py) on synthetic traces whose
cause is known by construction: each wait names its waker, and the expected figures are
worked out in the comments (window [1000, 1100) unless said otherwise)."""

from __future__ import annotations

import numpy as np
import pytest

from iowhy import abi
from iowhy.analysis import AnalysisConfig, analyze
from iowhy.traceformat import read_trace
from iowhy.tracewriter import TraceWriter
from tracebuilder import (att, CAUSAL_CATS, LOG_RANGE, assert_sums, meta, off, req, run, task,
                          write_trace)

T, H, K = abi.WCTX_TASK, abi.WCTX_HARDIRQ, abi.WCTX_SOFTIRQ
FSYNC, WAIT4, NANOSLEEP, READ, FUTEX = 74, 61, 35, 0, 202  # x86-64 numbers


def det(r, cat):
    """Level two of one level-one category."""
    return r["attribution_detail_ns"][cat]


def test_request_link_per_class(tmp_path):
    # Four waits, each woken by the completion of one request of a known class:
    # [1010,1020) data, [1030,1040) log (in the journal), [1050,1060) read, [1070,1080)
    # a flush; the rest on CPU (60). Other requests are in flight at those times but
    # did not wake the thread: they are charged nothing.
    reqs = [req(1005, 1020, sector=50_000, seq=1),
            req(1025, 1040, sector=LOG_RANGE[0] + 8, iflags=abi.F_META | abi.F_SYNC, seq=2),
            req(1045, 1060, op=abi.OP_READ, sector=70_000, seq=3),
            req(1065, 1080, op=abi.OP_FLUSH, seq=4),
            req(1001, 1099, sector=90_000, seq=5, flags=0)]  # background, never waited on
    offs = [off(100, 1010, 1020, waker=0, ctx=H, rq_seq=1, syscall=1),
            off(100, 1030, 1040, waker=0, ctx=H, rq_seq=2, syscall=FSYNC),
            off(100, 1050, 1060, waker=0, ctx=H, rq_seq=3, syscall=READ),
            off(100, 1070, 1080, waker=0, ctx=K, rq_seq=4, syscall=FSYNC)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs))
    assert_sums(r)
    assert set(r["attribution_ns"]) == set(CAUSAL_CATS)
    assert att(r) == {"cpu": 60, "data": 10, "log": 10, "read": 10, "barrier": 10}
    assert r["thread_time"]["attribution_ns"] == r["attribution_ns"]
    assert r["thread_time"]["by_syscall"]["fsync"] == {
        "total_ns": 20, "attribution_ns": {"barrier": 10, "log": 10},
        "attribution_detail_ns": {"barrier": {"flush": 10}, "log": {"log": 10}}}


def test_flush_sequenced_request_is_served_by_its_flushes(tmp_path):
    # A FUA-emulated write: submitted 1010, pre-flush until 1030, its data on the device
    # [1030, 1050), post-flush until 1070 (done). The thread waits [1010, 1070) for its
    # data write (level one: data 60), served by its flushes 20 + 20 and its stage 20.
    r0 = req(1030, 1070, submit=1010, data_done=1050, sector=50_000, seq=7,
             flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ, iflags=abi.F_FUA)
    r = run(write_trace(tmp_path / "t.iowt", requests=[r0],
                        offcpu=[off(100, 1010, 1070, waker=0, ctx=H, rq_seq=7)]))
    assert att(r) == {"cpu": 40, "data": 60}
    assert det(r, "data") == {"flush": 40, "data": 20}
    assert det(r, "cpu") == {"cpu": 40}


@pytest.mark.parametrize("linked", [True, False])
def test_a_log_write_waiting_out_its_flush_is_log_either_way(tmp_path, linked):
    # A journal write with PREFLUSH + FUA emulated: submitted 1010, pre-flush until 1030,
    # its data [1030, 1050), post-flush until 1070. The thread waits [1010, 1070) on it:
    # woken by its completion (linked), or from an interrupt with no request link, when
    # the fill names the wait by what the devices were doing. Either way level one is
    # log (the wait was for the log write), served by its flushes 40 and its stage 20;
    # the fill has no stage of its own to name: flush 40, then the log write 20.
    r0 = req(1030, 1070, submit=1010, data_done=1050, sector=LOG_RANGE[0] + 8, seq=7,
             flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ,
             iflags=abi.F_FUA | abi.F_PREFLUSH | abi.F_META | abi.F_SYNC)
    w = off(100, 1010, 1070, waker=0, ctx=H, rq_seq=7 if linked else 0, flags=abi.OFF_IOWAIT)
    r = run(write_trace(tmp_path / "t.iowt", requests=[r0], offcpu=[w]))
    assert_sums(r)
    assert att(r) == {"cpu": 40, "log": 60}
    assert det(r, "log") == {"flush": 40, "log": 20}


def test_helper_chain_its_cpu_runqueue_and_requests(tmp_path):
    # The workload thread 100 waits [1010, 1090) in fsync and is woken by jbd2 (tid 50).
    # jbd2 over that wait: runnable [1010, 1020), on CPU [1020, 1030), asleep [1030,
    # 1060) until its log write (seq 3) completes, runnable [1060, 1065), on CPU
    # [1065, 1075), asleep [1075, 1085) on a flush (seq 4), on CPU [1085, 1090+).
    reqs = [req(1030, 1060, sector=LOG_RANGE[0] + 8, iflags=abi.F_META, seq=3, tid=50,
                flags=0),
            req(1075, 1085, op=abi.OP_FLUSH, seq=4, tid=50, flags=0)]
    helpers = [off(50, 1000, 1020, waking=1010, waker=100, ctx=T, comm="star"),
               off(50, 1030, 1065, waking=1060, ctx=H, rq_seq=3),
               off(50, 1075, 1085, ctx=H, rq_seq=4),
               off(50, 1095, 1099, waker=0, ctx=H)]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, helpers=helpers,
                        offcpu=[off(100, 1010, 1090, waker=50, ctx=T, comm="jbd2/sdz1-8",
                                    syscall=FSYNC)]))
    assert_sums(r)
    # cpu 10 + 10. The wait [1010, 1090) is a journal commit's (woken by jbd2): level one
    # log 80, served by jbd2 waiting for a CPU 10 + 5, on CPU 10 + 10 + 5, its log write
    # 30 and its flush 10.
    assert att(r) == {"cpu": 20, "log": 80}
    assert det(r, "log") == {"helper-runqueue": 15, "helper-cpu": 25, "log": 30, "flush": 10}
    assert r["workload"]["helpers"] == 1


def test_a_forked_threads_first_run_is_on_cpu_after_its_wait_for_a_cpu(tmp_path):
    # 101, forked at 1020, waits for a CPU to 1030 and runs to 1040 (its first interval's
    # CPU total, run_total_ns, is 10), is preempted [1040, 1060), runs and exits at 1070.
    # Its thread time: runqueue 10 + 20, cpu 10 + 10; the root (never off a CPU) cpu 100.
    # (The head's two segments were once counted as one, so its run read as runqueue.)
    tasks = [task(100, 1000), task(101, 1020, abi.TASK_FORK), task(101, 1070, abi.TASK_EXIT)]
    offs = [off(101, 1040, 1060, preempt=True, run_total_ns=10)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs, tasks=tasks,
                        recorder={"attach_mode": "command"}))
    assert_sums(r)
    tt = r["thread_time"]
    assert tt["threads"] == 2 and tt["total_ns"] == 100 + 50
    assert {k: v for k, v in tt["attribution_ns"].items() if v} == {"cpu": 120, "runqueue": 30}


def test_wait4_on_a_child_that_fsyncs_names_the_child(tmp_path):
    # sh (100) forks 101 at 1005 and waits in wait4 [1010, 1095); 101 runs, fsyncs
    # [1020, 1080) woken by its flush (seq 9), runs and exits at 1090 waking 100.
    # The elapsed time follows the child: cpu 10 (sh) + 10 + 10 (child) + 5 (sh after);
    # barrier 60; [1090, 1095): sh woken at 1090 by the exited child, not yet
    # running -> sh runnable 5.
    tasks = [task(100, 1000), task(101, 1005, abi.TASK_FORK), task(101, 1090, abi.TASK_EXIT)]
    offs = [off(100, 1010, 1095, waking=1090, waker=101, ctx=T, comm="sync", syscall=WAIT4),
            off(101, 1020, 1080, waker=0, ctx=H, rq_seq=9, syscall=FSYNC)]
    reqs = [req(1020, 1080, op=abi.OP_FLUSH, seq=9, tid=101)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs, tasks=tasks))
    assert_sums(r)
    # cpu: sh [1000,1010) + [1095,1100) = 15; child [1010,1020) + [1080,1090) = 20.
    assert att(r) == {"cpu": 35, "barrier": 60, "runqueue": 5}
    assert "wait4" not in r["wait_other_by_syscall_ns"]
    assert "fsync" in r["blocked_by_syscall_ns"] and "wait4" not in r["blocked_by_syscall_ns"]
    # Thread time: both threads' lives, the parent's wait explained by the child.
    tt = r["thread_time"]
    assert tt["threads"] == 2 and tt["total_ns"] == 100 + 85
    assert sum(tt["attribution_ns"].values()) == tt["total_ns"]
    assert tt["by_syscall"]["wait4"]["attribution_ns"]["barrier"] == 60


PSELECT6 = 270  # x86-64


@pytest.mark.parametrize("syscall,named", [(PSELECT6, True), (WAIT4, False)])
def test_a_root_in_one_long_event_wait_is_named(tmp_path, syscall, named):
    # The root (100) waits [1005, 1095) and is woken by workload thread 101 at 1090: in
    # pselect6 (a server's master process, or make) the report names that wait and its
    # waker, since following the waker is right only if the root waited for it; in
    # wait4 it does not (a child's exit is what wait4 waits for).
    tasks = [task(100, 1000), task(101, 1000, abi.TASK_FORK), task(101, 1090, abi.TASK_EXIT)]
    offs = [off(100, 1005, 1095, waking=1090, waker=101, ctx=T, comm="postgres",
                syscall=syscall)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs, tasks=tasks))
    assert_sums(r)
    rw = r["root_event_wait"]
    from iowhy.reports.terminal import render_report
    text = render_report(r)
    if named:
        assert rw == {"syscall": "pselect6", "ns": 85, "waits": 1, "waker_tid": 101,
                      "waker_comm": ""}
        assert "note: pid 100 spent 85% of the window in one pselect6 wait" in text
    else:
        assert rw is None and "note: pid" not in text


def test_a_root_woken_now_and_then_by_its_workers_is_named(tmp_path):
    # A server's master process (100) waits in pselect6 three times, 20 + 20 + 15 ns,
    # each ended by a worker (101 twice, 102 once): 55% of the window together, no
    # single wait near half of it.
    tasks = [task(100, 1000), task(101, 1000), task(102, 1000)]
    offs = [off(100, 1010, 1030, waker=101, ctx=T, syscall=PSELECT6),
            off(100, 1040, 1060, waker=102, ctx=T, syscall=PSELECT6),
            off(100, 1070, 1085, waker=101, ctx=T, syscall=PSELECT6)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs, tasks=tasks))
    assert r["root_event_wait"] == {"syscall": "pselect6", "ns": 55, "waits": 3,
                                    "waker_tid": 101, "waker_comm": ""}
    from iowhy.reports.terminal import render_report
    text = " ".join(render_report(r).split())
    assert "55% of the window in 3 event waits (mostly pselect6)" in text
    assert "mostly thread (tid 101)" in text


def test_a_child_on_its_exit_path_is_on_cpu(tmp_path):
    # As above, but the child's EXIT record is at 1084, 6 ns before it wakes the parent
    # (sched_process_exit fires before the exit path notifies the parent): the child was
    # on CPU until the wakeup, not "not recorded".
    tasks = [task(100, 1000), task(101, 1005, abi.TASK_FORK), task(101, 1084, abi.TASK_EXIT)]
    offs = [off(100, 1010, 1095, waking=1090, waker=101, ctx=T, comm="sync", syscall=WAIT4),
            off(101, 1020, 1080, waker=0, ctx=H, rq_seq=9, syscall=FSYNC)]
    reqs = [req(1020, 1080, op=abi.OP_FLUSH, seq=9, tid=101)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs, tasks=tasks))
    assert att(r) == {"cpu": 35, "barrier": 60, "runqueue": 5}


def test_sleep_external_and_unexplained(tmp_path):
    # [1010, 1030) nanosleep woken by a timer (hardirq on the idle task) -> sleep;
    # [1040, 1060) read woken by a task outside the workload ("sshd") -> external;
    # [1070, 1080) futex woken by a kworker with no recorded intervals -> wait-other
    # by waker "kworker/0:1"; [1085, 1095) never woken (waker not seen) -> wait-other
    # "(not seen)", counted.
    offs = [off(100, 1010, 1030, waker=0, ctx=H, syscall=NANOSLEEP),
            off(100, 1040, 1060, waker=777, ctx=T, comm="sshd", syscall=READ),
            off(100, 1070, 1080, waker=888, ctx=T, comm="kworker/0:1", syscall=FUTEX),
            off(100, 1085, 1095, syscall=FUTEX)]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs))
    assert_sums(r)
    assert att(r) == {"cpu": 40, "sleep": 20, "external": 20, "wait-other": 10 + 10}
    assert r["external_by_comm_ns"] == {"sshd": 20}
    assert r["wait_other_by_waker_ns"] == {"kworker/0:1": 10, "(not seen)": 10}
    assert r["wait_other_by_syscall_ns"] == {"futex": 20}
    assert r["unseen_wakers"] == {"count": 1, "blocked_ns": 10}


def test_device_time_never_charged_without_a_wait(tmp_path):
    # The thread sleeps the whole time (a timer wakes it) while another device is busy
    # with flushes and writes nobody of the workload waited on.
    reqs = [req(1000 + i, 1001 + i, op=abi.OP_FLUSH if i % 2 else abi.OP_WRITE,
                seq=i + 1, flags=0, tid=999) for i in range(0, 98, 2)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs,
                        offcpu=[off(100, 1001, 1099, waker=0, ctx=H, syscall=NANOSLEEP)]))
    assert att(r) == {"cpu": 2, "sleep": 98}


def test_intervals_sum_to_their_length(tmp_path):
    offs = [off(100, 1010, 1030, waker=0, ctx=H, syscall=NANOSLEEP),
            off(100, 1040, 1060, waker=777, ctx=T, comm="sshd", syscall=READ)]
    p = write_trace(tmp_path / "t.iowt", offcpu=offs)
    r = analyze(read_trace(p), AnalysisConfig(interval_ns=30))
    iv = r["intervals"]
    assert [(i["start_ns"], i["end_ns"]) for i in iv] == [(0, 30), (30, 60), (60, 90),
                                                          (90, 100)]
    for i in iv:
        assert sum(i["attribution_ns"].values()) == i["end_ns"] - i["start_ns"]
    assert iv[0]["attribution_ns"]["sleep"] == 20 and iv[1]["attribution_ns"]["external"] == 20
    tot = {k: sum(i["attribution_ns"][k] for i in iv) for k in CAUSAL_CATS}
    assert tot == r["attribution_ns"]


def test_no_wakers_falls_back_to_the_correlational_view(tmp_path):
    # A format 4 trace whose intervals name no waker (converted from another tool).
    r = run(write_trace(tmp_path / "t.iowt", offcpu=[off(100, 1010, 1020)]))
    assert "thread_time" not in r and r["workload"]["attribution"] == "correlational"
    assert r["problems"] == []


def test_version_3_falls_back_and_says_so(tmp_path):
    p = str(tmp_path / "v3.iowt")
    w = TraceWriter(p)
    w.write_json(abi.CHUNK_RECORDER, {"start_ns": 1000, "pid": 7})
    a = np.zeros(1, dtype=abi.OFFCPU_V3_DTYPE)
    a["type"], a["size_bytes"] = abi.REC_OFFCPU, abi.OFFCPU_V3_DTYPE.itemsize
    a["start_ns"], a["waking_ns"], a["end_ns"], a["tid"] = 1010, 1050, 1060, 7
    a["waker_tid"], a["waker_comm"], a["flags_u16"] = 9, b"sshd", abi.OFF_D
    w._chunk(abi.REC_OFFCPU, a.itemsize, 1, a.tobytes())
    w.close({"end_ns": 1100})
    with open(p, "r+b") as f:
        f.seek(8)
        f.write((3).to_bytes(4, "little"))
    r = analyze(read_trace(p))
    assert r["workload"]["attribution"] == "correlational" and "thread_time" not in r
    assert any("version 3 records no wakeups" in x for x in r["problems"])
    assert "external" not in r["attribution_ns"]
    assert_sums(r)


# -- the sum-to-elapsed invariant against a slow reference ---------------------------------


_REF_RANK = ("cpu", "runqueue", "barrier", "data", "read", "external")  # better than sleep
_REF_CLASS_KIND = {"data": "data", "read": "read", "barrier": "flush"}


def _reference(offs, reqs_cls, w0, w1, root, lives, depth=64, flushes=()):
    """Per-nanosecond reference of the elapsed attribution, both levels: follow the
    root's state at each ns, recursing into the waker over a wait (same rules, one ns
    at a time). A wait on a request is the request's class (level one), served by a
    flush while one was in flight ([issue, done) of `flushes`), else by its own class's
    device time; a CPU or runnable ns of a thread other than the root is another
    workload thread's; a nanosleep ended by its timer (a polling loop) is the best of
    the other threads' states better than sleep (explained depth - 1 deep, not
    continued again), else sleep. Returns ({level one: ns}, {level one: {part: ns}})."""
    by_tid = {}
    for o in offs:
        by_tid.setdefault(o["tid"], []).append(o)

    def state(tid, t, d, cont=True):
        lo, hi = lives[tid]
        if not lo <= t < hi:
            return "wait-other", "wait-other"
        mine = tid == root
        for o in by_tid.get(tid, []):
            s, e, w = o["start_ns"], o["end_ns"], o["waking_ns"]
            if s <= t < e:
                if o["flags_u16"] & abi.OFF_PREEMPT or t >= w:
                    return "runqueue", "runqueue" if mine else "thread-runqueue"
                if o["flags_u16"] & abi.OFF_WAKER_RQ:
                    c = reqs_cls[o["waker_rq_seq"]]
                    if any(a <= t < b for a, b in flushes):
                        return c, "flush"
                    return c, _REF_CLASS_KIND[c]
                if o["waker_ctx_u16"] == H:
                    if cont and o["syscall_nr"] == NANOSLEEP:
                        alt = [state(x, t, depth - 1, False) for x in lives if x != tid]
                        alt = [c for c in alt if c[0] in _REF_RANK]
                        if alt:
                            best = min(alt, key=lambda c: _REF_RANK.index(c[0]))
                            return best[0], {"cpu": "thread-cpu", "runqueue":
                                             "thread-runqueue"}.get(best[1], best[1])
                    return "sleep", "sleep"
                if o["waker_tid"] in lives:
                    return state(o["waker_tid"], t, d - 1, cont) if d > 0 else \
                        ("wait-other", "wait-other")
                return "external", "external"
        return "cpu", "cpu" if mine else "thread-cpu"
    out = {k: 0 for k in CAUSAL_CATS}
    detail = {k: {} for k in CAUSAL_CATS}
    for t in range(w0, w1):
        c, part = state(root, t, depth)
        out[c] += 1
        detail[c][part] = detail[c].get(part, 0) + 1
    return out, detail


@pytest.mark.parametrize("seed", range(12))
def test_random_traces_match_the_reference(tmp_path, seed):
    rng = np.random.default_rng(seed)
    w0, w1 = 1000, 1400
    tids = [100, 101, 102]
    lives = {t: (w0, w1) for t in tids}
    cls_of = {}
    reqs, offs = [], []
    seq = 1
    for tid in tids:
        t = w0 + int(rng.integers(0, 10))
        while t < w1 - 20:
            s = t
            e = min(w1, s + int(rng.integers(2, 60)))
            w = int(rng.integers(s, e + 1))
            kind = rng.integers(0, 5)
            o = None
            if kind == 0:
                o = off(tid, s, e, preempt=True)
            elif kind == 1:
                r = rng.integers(0, 3)
                op, sec, name = [(abi.OP_WRITE, 50_000, "data"), (abi.OP_READ, 60_000, "read"),
                                 (abi.OP_FLUSH, 0, "barrier")][r]
                reqs.append(req(s, w, op=op, sector=sec, seq=seq))
                cls_of[seq] = name
                o = off(tid, s, e, waking=w, ctx=H, rq_seq=seq)
                seq += 1
            elif kind == 2:
                o = off(tid, s, e, waking=w, ctx=H, syscall=NANOSLEEP)
            elif kind == 3:
                other = int(rng.choice([x for x in tids if x != tid]))
                o = off(tid, s, e, waking=w, waker=other, ctx=T, comm="peer")
            else:
                o = off(tid, s, e, waking=w, waker=5000, ctx=T, comm="ext")
            offs.append(o)
            t = e + int(rng.integers(0, 15))
    tasks = [task(t_, w0) for t_ in tids]
    p = write_trace(tmp_path / "t.iowt", start=w0, end=w1, requests=reqs, offcpu=offs,
                    tasks=tasks, pid=100)
    r = run(p)
    assert_sums(r)
    flushes = [(q["issue_ns"], q["done_ns"]) for q in reqs if q["op"] == abi.OP_FLUSH]
    ref, ref_detail = _reference(offs, cls_of, w0, w1, 100, lives, flushes=flushes)
    assert r["attribution_ns"] == ref
    assert r["attribution_detail_ns"] == ref_detail
    tt = r["thread_time"]
    assert sum(tt["attribution_ns"].values()) == tt["total_ns"] == 3 * (w1 - w0)


# -- thread time in compare, the interval table, the HTML -----------------------------------


def _bench(path, flush: bool):
    # A fixed-duration benchmark: 4 threads, each writing then fdatasync in a loop for
    # the whole window [1000, 1400); each wait is 40 ns, woken by its flush (cache on)
    # or by its data write (cache off), then 10 ns on CPU.
    reqs, offs, tasks = [], [], [task(100, 1000)]
    seq = 1
    for tid in (100, 101, 102, 103):
        if tid != 100:
            tasks.append(task(tid, 1000, abi.TASK_FORK))
        for s in range(1000, 1400, 50):
            reqs.append(req(s, s + 40, op=abi.OP_FLUSH if flush else abi.OP_WRITE,
                            sector=50_000, seq=seq, tid=tid))
            offs.append(off(tid, s, s + 40, waker=0, ctx=H, rq_seq=seq, syscall=75))
            seq += 1
    return write_trace(path, start=1000, end=1400, requests=reqs, offcpu=offs, tasks=tasks)


def test_compare_uses_thread_time_for_runs_of_the_same_duration(tmp_path):
    from iowhy.compare import compare
    a = run(_bench(tmp_path / "on.iowt", True))
    b = run(_bench(tmp_path / "off.iowt", False))
    tt = a["thread_time"]
    assert tt["threads"] == 4 and tt["total_ns"] == 1600
    assert tt["attribution_ns"]["barrier"] == 4 * 8 * 40
    assert tt["by_syscall"]["fdatasync"] == {
        "total_ns": 1280, "attribution_ns": {"barrier": 1280},
        "attribution_detail_ns": {"barrier": {"flush": 1280}}}
    # Per thread: each one's life, explained so that it sums to it, busiest first, and
    # beside it its own state: 8 waits of 40 in fdatasync, on CPU the rest.
    bt = tt["by_thread"]
    assert sorted(t["tid"] for t in bt) == [100, 101, 102, 103]
    assert all(t["total_ns"] == 400 and sum(t["explained_ns"].values()) == 400 for t in bt)
    assert all(t["explained_ns"]["barrier"] == 8 * 40 for t in bt)
    assert all(t["on_cpu_ns"] == 80 and t["runqueue_ns"] == 0
               and t["blocked_in_ns"] == {"fdatasync": 320} and t["waiting_for"] == []
               for t in bt)
    c = compare(a, b)
    assert c["basis"] == "thread_time"
    lines = c["explanations"]
    # The basis is said apart, not ranked: the first line after the speed is the
    # largest category difference.
    assert "fixed-duration" in c["basis_note"]["text"]
    assert all(e["category"] != "thread_time" for e in lines)
    assert lines[1]["category"] == "barrier"
    assert lines[0]["category"] == "elapsed" and "fixed length" in lines[0]["text"]
    # The terminal says the basis on a line of its own, above the numbered list.
    from iowhy.reports.compare_text import render_compare
    txt = render_compare(c).splitlines()
    note = next(i for i, ln in enumerate(txt) if "fixed-duration" in ln)
    assert not txt[note].lstrip()[:1].isdigit()
    assert note < next(i for i, ln in enumerate(txt) if ln.lstrip().startswith("1. "))


def test_report_interval_table_and_json(tmp_path, capsys):
    from iowhy.cli import main
    offs = [off(100, 1010, 1030, waker=0, ctx=H, syscall=NANOSLEEP),
            off(100, 1040, 1060, waker=777, ctx=T, comm="sshd", syscall=READ)]
    p = write_trace(tmp_path / "t.iowt", offcpu=offs)
    assert main(["report", p, "--interval", "0.00000003"]) == 0
    out = [x for x in capsys.readouterr().out.splitlines() if x]
    assert out[0] == "iowhy report  star -x"  # the report's first lines come first
    assert out[1] == "ATTRIBUTION PER INTERVAL (us)"  # the report's unit (--unit)
    # the report's category names
    assert out[2].split() == ["from", "(s)", "to", "(s)", "cpu", "sleep", "external"]
    assert len(out) == 3 + 4
    assert main(["report", p, "--interval", "0.00000003", "--json"]) == 0
    import json
    r = json.loads(capsys.readouterr().out)
    assert len(r["intervals"]) == 4
    assert main(["report", p, "--interval", "-1"]) != 0
    assert "iowhy: --interval" in capsys.readouterr().err


def test_terminal_and_html_show_the_new_categories(tmp_path):
    from iowhy.reports.html import render_html
    from iowhy.reports.terminal import render_report
    offs = [off(100, 1010, 1030, waker=0, ctx=H, syscall=NANOSLEEP),
            off(100, 1040, 1060, waker=777, ctx=T, comm="sshd", syscall=READ)]
    p = write_trace(tmp_path / "t.iowt", offcpu=offs)
    r = analyze(read_trace(p), AnalysisConfig(figures=True))
    text = render_report(r)
    assert "along the critical path" in text and "external by process: sshd" in text
    assert "THREAD TIME" in text
    assert max(len(x) for x in text.splitlines()) <= 100
    page = render_html(r)
    assert 'id="fig-attribution-time"' in page and "table-thread-time" in page


def test_background_devices_and_bio_based_warning(tmp_path):
    # The workload waits on a write to sdz (linked); sdy is busy with another process's
    # I/O: it is background. zram0 is bio-based with no bio records: a warning.
    m = meta()
    m["devices"].append({"name": "sdy", "major": 8, "minor": 16, "size_bytes": 1 << 30})
    m["devices"].append({"name": "zram0", "major": 252, "minor": 0, "size_bytes": 1 << 20,
                         "bio_based": True})
    m["bio_based_devices"] = ["zram0"]
    reqs = [req(1010, 1020, sector=50_000, seq=1, flags=0),
            req(1030, 1040, sector=50_000, seq=2, flags=0, dev=(8, 16), tid=999),
            req(1050, 1060, sector=50_000, seq=3, flags=0, dev=(8, 16), tid=999)]
    p = write_trace(tmp_path / "t.iowt", requests=reqs, meta_obj=m,
                    offcpu=[off(100, 1010, 1020, waker=0, ctx=H, rq_seq=1, syscall=1)])
    r = run(p)
    assert r["background"]["requests"] == 2
    assert [d["name"] for d in r["background"]["devices"]] == ["sdy"]
    assert r["background"]["devices"][0]["write_bytes"] == 2 * 4096
    # The request table, the devices and the findings cover the workload's disk only.
    assert r["requests"]["data"]["count"] == 1
    assert [d["name"] for d in r["devices"]] == ["sdz", "zram0"]
    assert any(x.startswith("zram0 is a bio-based device") for x in r["problems"])
    # With the bio probe attached, no bio record means no I/O: nothing to warn about.
    p = write_trace(tmp_path / "t2.iowt", requests=reqs, meta_obj=m,
                    offcpu=[off(100, 1010, 1020, waker=0, ctx=H, rq_seq=1, syscall=1)],
                    recorder={"probes": {"block_bio_complete": "tp_btf"}})
    assert not any("bio-based" in x for x in run(p)["problems"])


def test_threads_asleep_throughout_are_not_running(tmp_path):
    # attach: thread 100 runs (one short timer sleep); 101 is asleep in read(2) and 102
    # in epoll_wait when recording starts, and neither is woken in the window (no
    # off-CPU record): 101 is wait-other (not seen), 102 sleep, never cpu.
    tasks = [task(100, 1000), task(101, 1000), task(102, 1000)]
    threads = [{"tid": 100, "tgid": 100, "state_u8": ord("R"), "syscall_nr": -2},
               {"tid": 101, "tgid": 100, "state_u8": ord("S"), "syscall_nr": READ},
               {"tid": 102, "tgid": 100, "state_u8": ord("S"), "syscall_nr": 232}]
    p = write_trace(tmp_path / "t.iowt", tasks=tasks, threads=threads,
                    offcpu=[off(100, 1010, 1020, waker=0, ctx=H, syscall=NANOSLEEP)])
    r = run(p)
    assert att(r) == {"cpu": 90, "sleep": 10}
    tt = r["thread_time"]
    assert tt["threads"] == 3 and tt["total_ns"] == 300
    assert {k: v for k, v in tt["attribution_ns"].items() if v} == {
        "cpu": 90, "sleep": 110, "wait-other": 100}
    assert r["unseen_wakers"]["count"] == 1


def test_time_with_no_thread_alive_is_no_task(tmp_path):
    # The root exits at 1080; the recording ends at 1100: 20 ns of no task.
    tasks = [task(100, 1000), task(100, 1080, abi.TASK_EXIT)]
    r = run(write_trace(tmp_path / "t.iowt", tasks=tasks,
                        offcpu=[off(100, 1010, 1020, waker=0, ctx=H, syscall=NANOSLEEP)]))
    assert att(r) == {"cpu": 70, "sleep": 10, "wait-other": 20}
    assert r["wait_other_by_syscall_ns"] == {"(no task)": 20}
    assert r["wait_other_by_waker_ns"] == {"(no task)": 20}


def test_depth_limit_and_irq_without_request(tmp_path):
    # 100 waits [1010, 1050) woken by 101, which waits [1000, 1050) woken by 102, which
    # runs. With depth 1, 101's wait is not followed: wait-other "(depth limit)"; with the
    # default depth, 102's cpu. 100 also waits [1060, 1070) in iowait, woken from a
    # hardirq with no request link: wait-other "(irq, no request)".
    tasks = [task(100, 1000), task(101, 1000), task(102, 1000)]
    offs = [off(100, 1010, 1050, waker=101, ctx=T, comm="b", syscall=FUTEX),
            off(101, 1000, 1050, waker=102, ctx=T, comm="c", syscall=FUTEX),
            off(100, 1060, 1070, waker=0, ctx=H, syscall=READ, flags=abi.OFF_IOWAIT)]
    p = write_trace(tmp_path / "t.iowt", tasks=tasks, offcpu=offs)
    deep = run(p)
    assert att(deep) == {"cpu": 90, "wait-other": 10}
    assert deep["wait_other_by_waker_ns"] == {"(irq, no request)": 10}
    shallow = analyze(read_trace(p), AnalysisConfig(causal_depth=1))
    assert att(shallow) == {"cpu": 50, "wait-other": 50}
    assert shallow["wait_other_by_waker_ns"] == {"(depth limit)": 40, "(irq, no request)": 10}


def test_helper_stretch_not_recorded_is_filled_by_the_devices(tmp_path):
    # 100 waits [1010, 1090) woken by kworker 60. 60's recorded intervals: [1000, 1020)
    # (switched out with 500 ns of CPU in total) and [1080, 1095) (with 510: it ran 10 ns
    # between them), so of its gap [1020, 1080) 10 ns are helper-cpu and 50 ns were not
    # recorded. A flush is in flight on the workload's disk [1040, 1060): 20 of those
    # 50 ns are barrier, 30 stay wait-other "(not recorded)".
    reqs = [req(1040, 1060, op=abi.OP_FLUSH, seq=5), req(1001, 1002, seq=6)]
    helpers = [off(60, 1000, 1020, waker=100, ctx=T, comm="star"),
               off(60, 1080, 1095, waker=0, ctx=H, rq_seq=6)]
    helpers[0]["run_total_ns"], helpers[1]["run_total_ns"] = 500, 510
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    offs = [off(100, 1010, 1090, waker=60, ctx=T, comm="kworker/u8:1", syscall=FSYNC)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, helpers=helpers, offcpu=offs))
    assert_sums(r)
    # Over the wait: [1010, 1020) 60 is blocked, woken by 100, itself waiting on 60: the
    # cycle runs into the depth limit (wait-other 10); [1020, 1030) helper-cpu;
    # [1030, 1080) not recorded: barrier 20, wait-other 30; [1080, 1090) 60 waits on its
    # data write (seq 6): data 10. cpu: [1000, 1010) and [1090, 1100).
    assert att(r) == {"cpu": 20, "helper-cpu": 10, "barrier": 20, "data": 10,
                      "wait-other": 40}
    assert r["wait_other_by_waker_ns"] == {"(not recorded)": 30, "(depth limit)": 10}


def test_interval_on_a_trace_without_wakers_is_one_clear_line(tmp_path, capsys):
    from iowhy.cli import main
    p = write_trace(tmp_path / "t.iowt", offcpu=[off(100, 1010, 1020)])
    assert main(["report", p, "--interval", "0.00000003"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("iowhy: ") and "no wakeup links" in err[0]
    assert "Traceback" not in "\n".join(err)


def test_compare_of_the_same_work_in_about_the_same_time_is_by_elapsed(tmp_path):
    # Two runs of the same job (the same fsync calls and bytes written) that took about
    # as long are no fixed-duration benchmark: compared by elapsed, "within 2%".
    from iowhy.compare import compare
    a = run(_bench(tmp_path / "a.iowt", False))
    b = run(_bench(tmp_path / "b.iowt", False))
    c = compare(a, b)
    assert c["basis"] == "elapsed" and c["basis_note"] is None
    assert c["explanations"][0]["text"].startswith("no difference")
