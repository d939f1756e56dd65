"""A fixed set of synthetic traces for the golden-output test (test_golden.py).

Each builder writes one trace deterministically (same bytes on every run): the
hand-computed shapes of the analysis tests, the fsync-view shape of the ext4 calls that
needed no commit while another filesystem logs, a few thousand requests of every kind,
and about 200k requests from synthtrace.synth (tests/synthtrace.py) with a fixed seed.
Records, metadata and files are tracebuilder's: a change of their defaults shows here
as a golden difference, on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from iowhy import abi
import synthtrace
from tracebuilder import (DEV, LOG_RANGE, UPPER, Trace, fs_entry, fsync, jev, loop_stack_meta,
                          meta, off, req, task, trailer, write_trace)

BIG_REQUESTS = 200_000


# -- the traces ----------------------------------------------------------------------------

def overlap(p: Path) -> None:
    write_trace(p, requests=[
        req(1020, 1060, sector=50_000),
        req(1030, 1050, sector=LOG_RANGE[0] + 8, iflags=abi.F_META | abi.F_SYNC, flags=0),
        req(1040, 1070, op=abi.OP_FLUSH, flags=0),
    ], offcpu=[off(100, 1010, 1090, waking=1085)])


def flush_share(p: Path) -> None:
    seq = abi.RQ_FLUSH_SEQ | abi.RQ_TRACKED
    pf = abi.F_PREFLUSH | abi.F_SYNC
    write_trace(p, requests=[
        req(0, 1050, nbytes=0, submit=1010, iflags=pf, flags=seq | abi.RQ_NO_ISSUE),
        req(1052, 1080, submit=1015, data_done=1060, sector=LOG_RANGE[0],
            iflags=pf | abi.F_FUA | abi.F_META, flags=seq),
        req(0, 1050, nbytes=0, submit=1020, iflags=pf, flags=seq | abi.RQ_NO_ISSUE),
        req(1030, 1050, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ),
        req(1062, 1078, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ),
    ], offcpu=[off(100, 1010, 1090, waking=1085)])


def tasks_and_gaps(p: Path) -> None:
    write_trace(p, requests=[req(1030, 1040, tid=101), req(1042, 1048, op=abi.OP_READ,
                                                           sector=777, tid=100)],
                offcpu=[off(100, 1010, 1060, waking=1050, syscall=74),
                        off(101, 1020, 1080, waking=1070, syscall=1),
                        off(100, 1062, 1070, preempt=True),
                        off(101, 1082, 1099, syscall=35)],
                tasks=[task(100, 1005), task(101, 1000, abi.TASK_FORK),
                       task(100, 1095, abi.TASK_EXIT)])


def lost_completion(p: Path) -> None:
    lost = abi.RQ_LOST_DONE
    write_trace(p, requests=[
        req(1020, 1040, sector=50_000),
        {**req(1030, 0, sector=50_008, data_done=0, flags=abi.RQ_TRACKED | lost),
         "ts_ns": 1080},
        {**req(1045, 0, op=abi.OP_FLUSH, data_done=0, flags=abi.RQ_FLUSH_SEQ | lost),
         "ts_ns": 1085},
        {**req(1075, 0, submit=1073, data_done=0, sector=LOG_RANGE[0],
               iflags=abi.F_PREFLUSH | abi.F_FUA | abi.F_META,
               flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | lost), "ts_ns": 1086},
        req(1060, 1070, sector=50_016),
        req(1092, 0, flags=abi.RQ_TRACKED | abi.RQ_INCOMPLETE, data_done=0),
    ], offcpu=[off(100, 1010, 1090)], fsyncs=[fsync(100, 1010, 1090)],
        counters={"lost_completion": 3})


def fsync_ext4(p: Path) -> None:
    j = [jev(abi.J_JBD2_START, 1035, 5), jev(abi.J_JBD2_LOCKING, 1036, 5),
         jev(abi.J_JBD2_FLUSHING, 1040, 5), jev(abi.J_JBD2_LOGGING, 1050, 5),
         jev(abi.J_JBD2_END, 1090, 5), jev(abi.J_JBD2_STATS, 1090, 5, aux2=3),
         jev(abi.J_JBD2_START, 1120, 6), jev(abi.J_JBD2_END, 1150, 6)]
    write_trace(p, end=1200, requests=[
        req(1015, 1030, submit=1012, sector=50_000),
        req(1052, 1060, sector=LOG_RANGE[0], iflags=abi.F_META, flags=0, tid=50),
        req(0, 1140, submit=1112, nbytes=0, iflags=abi.F_PREFLUSH,
            flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | abi.RQ_NO_ISSUE),
    ], fsyncs=[fsync(100, 1010, 1100, seq=5),
               fsync(100, 1110, 1150, seq=5, call=abi.CALL_FDATASYNC),
               fsync(101, 1105, 1160, seq=6), fsync(102, 1115, 1155, seq=6)],
        journal=j, tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK),
                          task(102, 1000, abi.TASK_FORK)])


def other_fs_commits(p: Path) -> None:
    m = meta()
    m["devices"].append({"name": "sdy", "major": 8, "minor": 16, "rotational": 1,
                         "write_cache": "write back", "fua": 0})
    m["filesystems"].append(fs_entry("ext4", (8, 16), (8, 17), "sdy", "/mnt/other"))
    other, root, elsewhere = (8, 17), (8, 33), (8, 49)
    j = [jev(abi.J_JBD2_START, 1010, 5), jev(abi.J_JBD2_END, 1020, 5),
         jev(abi.J_JBD2_START, 1030, 6), jev(abi.J_JBD2_END, 1060, 6),
         jev(abi.J_JBD2_START, 1062, 9, dev=elsewhere),
         jev(abi.J_JBD2_END, 1066, 9, dev=elsewhere),
         jev(abi.J_JBD2_START, 1011, 70, dev=other), jev(abi.J_JBD2_END, 1090, 70, dev=other),
         jev(abi.J_EXT4_FC_START, 1040, 0, dev=other),
         jev(abi.J_EXT4_FC_STOP, 1041, 0, dev=other),
         jev(abi.J_JBD2_START, 1012, 300, dev=root), jev(abi.J_JBD2_END, 1013, 300, dev=root),
         jev(abi.J_JBD2_START, 1050, 301, dev=root), jev(abi.J_JBD2_END, 1095, 301, dev=root),
         jev(abi.J_XLOG_SYNC, 1070, 1 << 32, dev=root, fs=abi.FS_XFS),
         jev(abi.J_XLOG_DONE, 1072, 1 << 32, dev=root, fs=abi.FS_XFS),
         jev(abi.J_BTRFS_COMMIT, 1080, 12, dev=(0, 99), fs=abi.FS_BTRFS)]
    write_trace(p, requests=[
        req(1015, 1030, sector=50_000),
        req(1052, 1060, sector=LOG_RANGE[0], iflags=abi.F_META, flags=0, tid=50),
        req(1052, 1060, sector=LOG_RANGE[0], nbytes=8192, iflags=abi.F_META, flags=0,
            tid=51, dev=(8, 16)),
    ], fsyncs=[fsync(100, 1061, 1070, seq=9, dev=elsewhere)], journal=j, meta_obj=m)


def xfs_force(p: Path) -> None:
    lsn = (3 << 32) | 64
    j = [jev(abi.J_XFS_FORCE, 1040, 9, tid=100, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1050, 9, tid=101, fs=abi.FS_XFS),
         jev(abi.J_XLOG_SYNC, 1045, lsn, aux1=8192, fs=abi.FS_XFS),
         jev(abi.J_XLOG_WRITE, 1046, lsn, fs=abi.FS_XFS),
         jev(abi.J_XLOG_DONE, 1080, lsn, fs=abi.FS_XFS)]
    write_trace(p, requests=[req(1015, 1030, submit=1012)],
                fsyncs=[fsync(100, 1010, 1100, seq=9, fs=abi.FS_XFS),
                        fsync(101, 1020, 1090, seq=9, fs=abi.FS_XFS)],
                journal=j, meta_obj=meta("xfs"),
                tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK)])


def btrfs(p: Path) -> None:
    m = meta("btrfs")
    anon = (0, 45)
    m["filesystems"][0].update({"st_dev_major": anon[0], "st_dev_minor": anon[1]})
    write_trace(p, end=1200, requests=[
        req(1015, 1030, submit=1012, sector=90_000),
        req(1041, 1050, submit=1040, sector=70_000, iflags=abi.F_META),
        req(1061, 1070, submit=1060, sector=2048 + 128, iflags=abi.F_META | abi.F_FUA),
        req(1045, 1055, submit=1044, sector=71_000, iflags=abi.F_META, flags=0, tid=200),
        req(1151, 1160, submit=1150, sector=72_000, iflags=abi.F_META),
    ], fsyncs=[fsync(100, 1010, 1100, fs=abi.FS_BTRFS, dev=anon)],
        journal=[jev(abi.J_BTRFS_COMMIT, 1180, 77, fs=abi.FS_BTRFS, dev=anon)],
        meta_obj=m)


XFS_DEV, XFS_PART = (8, 16), (8, 17)


def ext4_no_commit_xfs_busy(p: Path) -> None:
    """Five fdatasyncs on ext4 that needed no jbd2 commit (overwritten blocks: their
    commit tid 5 was committed before the trace began, so no jbd2 event names it), while
    an XFS on another disk writes its log (iclogs, a log force by another task)."""
    m = meta()
    m["devices"].append({"name": "sdy", "major": XFS_DEV[0], "minor": XFS_DEV[1],
                         "size_bytes": 1 << 30, "rotational": 1, "write_cache": "write back",
                         "fua": 0})
    m["filesystems"].append(fs_entry("xfs", XFS_DEV, XFS_PART, "sdy", "/mnt/x"))
    calls, rqs = [], []
    for i in range(5):
        t = 1010 + 30 * i
        calls.append(fsync(100, t, t + 20, seq=5, call=abi.CALL_FDATASYNC))
        rqs.append(req(t + 2, t + 12, submit=t + 1, sector=50_000 + 8 * i))
    j = []
    for i in range(3):
        lsn = (1 << 32) | (64 * (i + 1))
        t = 1020 + 40 * i
        j += [jev(abi.J_XFS_FORCE, t, 9 + i, tid=300, fs=abi.FS_XFS, dev=XFS_PART),
              jev(abi.J_XLOG_SYNC, t + 1, lsn, aux1=4096, fs=abi.FS_XFS, dev=XFS_PART),
              jev(abi.J_XLOG_WRITE, t + 2, lsn, fs=abi.FS_XFS, dev=XFS_PART),
              jev(abi.J_XLOG_DONE, t + 15, lsn, fs=abi.FS_XFS, dev=XFS_PART)]
        rqs.append(req(t + 2, t + 14, sector=LOG_RANGE[0] + 8 * i, dev=XFS_DEV,
                       iflags=abi.F_META | abi.F_SYNC, flags=0, tid=301))
    write_trace(p, end=1200, requests=rqs, fsyncs=calls, journal=j,
                offcpu=[off(100, c["enter_ns"] + 1, c["exit_ns"] - 1) for c in calls],
                meta_obj=m)


def seeks(p: Path) -> None:
    write_trace(p, end=1300, requests=[
        req(1010, 1015, sector=1000),
        req(1020, 1030, sector=1008),
        req(1031, 1051, sector=1016),
        req(1052, 1082, sector=1024),
        req(1060, 1065, op=abi.OP_FLUSH),
        req(1083, 1133, sector=5000),
        req(1015, 1016, sector=7000, dev=(8, 16), op=abi.OP_READ),
        req(1035, 1036, sector=7100, dev=(8, 16), op=abi.OP_READ),
        req(1140, 1150, sector=50),
        req(1160, 1161, sector=100), req(1165, 1166, sector=108),
        req(1200, 1201, sector=116), req(1220, 1221, sector=500),
        req(1250, 1251, sector=108, iflags=abi.F_META),
    ])


def _synth(p: Path, n: int, seed: int, meta_obj: dict[str, Any] | None) -> None:
    d = synthtrace.synth(n, seed=seed)
    # The generator leaves the blocked intervals' state 0; mark half of them D (blocked,
    # attributed to I/O) and give every interval the workload's tgid, so the
    # workload view has blocked time to split.
    o = d["offcpu"]
    sel = (o["flags_u16"] == 0) & (np.arange(len(o)) % 2 == 0)
    o["flags_u16"][sel] = abi.OFF_D
    o["tgid"] = 1000  # left 0 by the generator: not the workload's
    _write(p, d, meta_obj, ["star", "-x", "-f", "linux-6.1.tar"])


def _write(p: Path, d: dict[str, Any], meta_obj: dict[str, Any] | None,
           command: list[str]) -> None:
    """synthtrace.synth's arrays `d` in a trace, in the order the generator's writer used."""
    t = Trace(p, meta_obj, {"start_ns": int(d["start_ns"]), "command": command, "pid": 1000})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        t.add(name, d[name])
    t.close(trailer(int(d["end_ns"]), exit_status=None))


def busy(p: Path) -> None:
    """A few thousand requests of every kind (synthtrace.synth)."""
    _synth(p, 4000, 3, meta())


def big(p: Path) -> None:
    """About 200k requests on two disks, with the benchmark's metadata."""
    _synth(p, BIG_REQUESTS, 1, synthtrace.synth_meta())


def big_blocked(p: Path) -> None:
    """About 200k requests on two disks with the benchmark's metadata, its threads off
    CPU from each fsync-family call's entry to their next call (blocked in several
    syscalls, woken shortly before the end): the workload view splits blocked time."""
    d = synthtrace.synth(BIG_REQUESTS, seed=2)
    f = d["fsync"]
    o = np.zeros(len(f), dtype=abi.OFFCPU_DTYPE)
    order = np.lexsort((f["enter_ns"], f["tid"]))
    tid, enter = f["tid"][order], f["enter_ns"][order].astype(np.int64)
    nxt = np.append(enter[1:], int(d["end_ns"]))
    last = np.append(tid[1:] != tid[:-1], True)
    nxt[last] = int(d["end_ns"]) - 1000
    o["tid"], o["tgid"] = tid, 1000
    o["start_ns"] = enter + 1000
    o["end_ns"] = np.maximum(nxt - 1000, enter + 2000)
    o["waking_ns"] = o["end_ns"] - 500
    o["syscall_nr"] = np.array([74, 1, 35, 75])[np.arange(len(o)) % 4]
    o["flags_u16"] = abi.OFF_D
    o = o[np.argsort(o["end_ns"], kind="stable")]
    o["ts_ns"] = o["end_ns"]
    d["offcpu"] = o
    _write(p, d, synthtrace.synth_meta(), ["fsync-bench"])


def pair_a(p: Path) -> None:
    _pair(p, flushes=0, write_cache="write through")


def pair_b(p: Path) -> None:
    _pair(p, flushes=4, write_cache="write back", extra_cpu_ms=5)


MS = 1_000_000
T0 = 1_000_000_000


def _pair(p: Path, *, flushes: int, write_cache: str, extra_cpu_ms: int = 0,
          flush_ms: int = 30) -> None:
    def at(ms: float) -> int:
        return T0 + int(ms * MS)
    requests = [req(at(20), at(40), sector=50_000)]
    offcpu = [off(100, at(10), at(50))]
    fsyncs = [fsync(100, at(9), at(50))]
    t = 100
    for i in range(flushes):
        s = t + i * flush_ms
        requests.append(req(at(s), at(s + flush_ms), op=abi.OP_FLUSH, flags=0))
        fsyncs.append(fsync(100, at(s), at(s + flush_ms)))
    if flushes:
        offcpu.append(off(100, at(t), at(t + flushes * flush_ms)))
    end = t + flushes * flush_ms + extra_cpu_ms
    m = meta(write_cache=write_cache)
    m["filesystems"][0]["options"] = "rw,relatime" if flushes else "rw,noatime,nobarrier"
    write_trace(p, start=T0, end=at(end), requests=requests, offcpu=offcpu, fsyncs=fsyncs,
                tasks=[task(100, T0)], meta_obj=m, command=("star", "-x", "-f", "linux.tar"))


# -- causal traces: every rule of the causal engine (model/wakeups.py), seeded ---------------

C0 = 5_000_000_000  # the window starts 5 s after boot, as a recording's would
US = 1_000
H, K, T = abi.WCTX_HARDIRQ, abi.WCTX_SOFTIRQ, abi.WCTX_TASK
_SYS = {"fsync": 74, "pwrite": 18, "read": 0, "futex": 202, "wait4": 61,
        "clock_nanosleep": 230, "poll": 7, "fdatasync": 75}


def _causal(p: Path, seed: int, nthreads: int, nhelpers: int, span_us: int,
            stack: bool) -> None:
    """Workload threads (100, 101, ...) and helpers (jbd2, kworkers, a loop worker) that
    alternate CPU bursts and waits of every kind the engine tells apart: a request's
    completion (flushes, flush-sequenced writes, a loop device's requests when `stack`),
    an interrupt with or without iowait, a timer, another workload thread (chains of
    them, deeper than the depth bound), a recorded or an unrecorded helper, another
    filesystem's jbd2, an outside process, a task-context I/O completion, preemption,
    no waker seen (in futex, wait4, a sleep, fsync), still blocked at the end; some
    threads born and ended inside the window, one asleep from the start, one damaged
    overlap."""
    rng = np.random.default_rng(seed)
    end = C0 + span_us * US
    wt = list(range(100, 100 + nthreads))
    ht = list(range(300, 300 + nhelpers))
    hname = ["jbd2/sdz1-8", "kworker/u4:2", "loop1", "kworker/1:1H", "xfsaild/sdz1"]
    birth = {t: C0 if i < 2 else C0 + int(rng.integers(0, span_us // 4)) * US
             for i, t in enumerate(wt)}
    death = {t: end if i % 3 else int(end - rng.integers(0, span_us // 5) * US)
             for i, t in enumerate(wt)}
    death[wt[0]] = end
    requests: list[dict[str, Any]] = []
    offs: list[dict[str, Any]] = []
    helpers: list[dict[str, Any]] = []
    seq = [1]

    def request(a: int, b: int, upper: bool, kind: int) -> int:
        s = seq[0]
        seq[0] += 1
        dev = UPPER if upper else DEV
        if kind == 0:  # a cache flush
            requests.append(req(a, b, op=abi.OP_FLUSH, seq=s, dev=dev, flags=0))
        elif kind == 1:  # a flush-sequenced journal write: pre-flush, data, post-flush
            requests.append(req(a + (b - a) // 3, b, submit=a, data_done=a + (b - a) // 2,
                                sector=LOG_RANGE[0] + 8 * s, seq=s, dev=dev,
                                iflags=abi.F_META | abi.F_PREFLUSH | abi.F_FUA,
                                flags=abi.RQ_FLUSH_SEQ))
            f = seq[0]
            seq[0] += 1
            requests.append(req(a, a + (b - a) // 3, op=abi.OP_FLUSH, seq=f, dev=dev, flags=0))
        elif kind == 2:  # metadata
            requests.append(req(a, b, sector=int(rng.integers(0, 1 << 20)), seq=s, dev=dev,
                                iflags=abi.F_META))
        elif kind == 3:  # a read
            requests.append(req(a, b, op=abi.OP_READ, sector=int(rng.integers(0, 1 << 20)),
                                seq=s, dev=dev))
        else:  # data
            requests.append(req(a, b, sector=int(rng.integers(0, 1 << 20)), seq=s, dev=dev))
        if upper:  # the loop worker's I/O of the backing file below it
            t = a + (b - a) // 4
            requests.append(req(t, t + (b - a) // 3, sector=int(rng.integers(0, 1 << 20)),
                                seq=seq[0], flags=0, tid=ht[2]))
            seq[0] += 1
        return s

    def wait(tid: int, s: int, e: int, pool: list[int], helper: bool) -> dict[str, Any]:
        k = int(rng.integers(0, 15))
        sysc = _SYS[str(rng.choice(list(_SYS)))]
        w = s + int((e - s) * rng.uniform(0.6, 1.0))
        if k <= 2:  # a request's completion
            r = request(s + (w - s) // 5, w, stack and k == 2, int(rng.integers(0, 5)))
            return off(tid, s, e, w, syscall=sysc, ctx=K, rq_seq=r,
                       flags=abi.OFF_IOWAIT if k else 0)
        if k == 3:  # an interrupt, in iowait: no request linked
            return off(tid, s, e, w, syscall=sysc, ctx=H, flags=abi.OFF_IOWAIT)
        if k == 4:  # a timer
            return off(tid, s, e, w, syscall=_SYS["clock_nanosleep"], ctx=H)
        if k in (5, 6):  # another workload thread
            o = int(rng.choice([t for t in wt if t != tid]))
            return off(tid, s, e, w, syscall=_SYS["futex"] if k == 5 else _SYS["wait4"],
                       waker=o, ctx=T, comm="worker")
        if k in (7, 8):  # a recorded helper
            h = int(rng.choice(ht))
            return off(tid, s, e, w, syscall=sysc, waker=h, ctx=T, comm=hname[h - 300])
        if k == 9:  # a kernel helper never recorded
            return off(tid, s, e, w, syscall=sysc, waker=777, ctx=T, comm="kworker/0:7")
        if k == 10:  # another filesystem's journal thread
            return off(tid, s, e, w, syscall=sysc, waker=778, ctx=T, comm="jbd2/vdq1-8")
        if k == 11:  # an outside process, or an I/O completion run in its context
            return off(tid, s, e, w, syscall=sysc, waker=900, ctx=T, comm="postgres",
                       flags=abi.OFF_IOWAIT if rng.random() < 0.5 else 0)
        if k == 12:  # preempted
            return off(tid, s, e, syscall=sysc, preempt=True)
        # no waker seen
        unseen_in = [_SYS["futex"], _SYS["wait4"], _SYS["clock_nanosleep"], _SYS["fsync"]]
        o = off(tid, s, e, w, syscall=int(rng.choice(unseen_in)))
        o["waker_tid"] = o["waker_tgid"] = 0
        if helper:
            o["flags_u16"] |= abi.OFF_HELPER
        return o

    for t in wt + ht:
        helper = t in ht
        at = C0 + int(rng.integers(0, 200)) * US if helper else birth[t]
        stop = end if helper else death[t]
        run_total = 0
        pool = wt if helper else wt + ht
        while True:
            burst = int(rng.integers(1, 40)) * US
            at += burst
            run_total += burst
            ln = int(rng.integers(5, 400)) * US
            if at + ln >= stop:
                break
            o = wait(t, at, at + ln, pool, helper)
            if helper:
                o["run_total_ns"] = run_total
                helpers.append(o)
            else:
                offs.append(o)
            at += ln
            if helper and rng.random() < 0.1:  # a stretch not recorded
                at += int(rng.integers(50, 500)) * US
    # Still blocked at the end, never woken: the root's last wait, a futex.
    last = max(o["end_ns"] for o in offs if o["tid"] == wt[0])
    o = off(wt[0], last + 2 * US, 0, syscall=_SYS["futex"])
    o["waking_ns"], o["end_ns"], o["ts_ns"] = 0, 0, end
    offs.append(o)
    # A damaged overlap: an interval starting before the thread's previous one ended.
    o1 = [o for o in offs if o["tid"] == wt[1]]
    if len(o1) > 3:
        offs.append(off(wt[1], o1[2]["start_ns"] - 3 * US, o1[2]["start_ns"] + 3 * US,
                        ctx=H, syscall=_SYS["poll"]))
    tasks = [task(wt[0], C0)]
    for t in wt[1:]:
        tasks.append(task(t, birth[t], abi.TASK_FORK))
    for t in wt:
        if death[t] < end:
            tasks.append(task(t, death[t], abi.TASK_EXIT))
    # A thread asleep in read from before the start, never woken.
    threads = [{"tid": 555, "tgid": 100, "state_u8": ord("S"), "syscall_nr": _SYS["read"],
                "ts_ns": C0}]
    requests.sort(key=lambda r: r["done_ns"])
    offs.sort(key=lambda o: (o["ts_ns"], o["tid"]))
    helpers.sort(key=lambda o: (o["ts_ns"], o["tid"]))
    write_trace(p, start=C0, end=end, requests=requests, offcpu=offs, tasks=tasks,
                helpers=helpers, threads=threads, pid=wt[0],
                meta_obj=loop_stack_meta() if stack else meta(),
                recorder={"attach_mode": "command"})


def causal_mix(p: Path) -> None:
    _causal(p, seed=7, nthreads=12, nhelpers=5, span_us=60_000, stack=False)


def causal_stack(p: Path) -> None:
    _causal(p, seed=11, nthreads=6, nhelpers=5, span_us=40_000, stack=True)


TRACES: dict[str, Callable[[Path], None]] = {
    "overlap": overlap,
    "flush_share": flush_share,
    "tasks_and_gaps": tasks_and_gaps,
    "lost_completion": lost_completion,
    "fsync_ext4": fsync_ext4,
    "other_fs_commits": other_fs_commits,
    "xfs_force": xfs_force,
    "btrfs": btrfs,
    "seeks": seeks,
    "ext4_no_commit_xfs_busy": ext4_no_commit_xfs_busy,
    "busy": busy,
    "big": big,
    "big_blocked": big_blocked,
    "pair_a": pair_a,
    "pair_b": pair_b,
    "causal_mix": causal_mix,
    "causal_stack": causal_stack,
}

# (A, B) pairs of `iowhy compare`.
COMPARE_PAIRS = (("pair_a", "pair_b"), ("overlap", "flush_share"), ("busy", "big"),
                 ("big", "big_blocked"),
                 ("fsync_ext4", "xfs_force"), ("fsync_ext4", "ext4_no_commit_xfs_busy"),
                 ("causal_mix", "causal_stack"))

# `iowhy hist` argument lists, run on the traces named.
HIST_TRACES = ("busy", "big", "big_blocked", "fsync_ext4", "xfs_force", "seeks", "lost_completion",
               "ext4_no_commit_xfs_busy")
HIST_ARGS = (["--metric", "device"], ["--metric", "queue", "--unit", "nsecs"],
             ["--metric", "total", "--class", "data"], ["--metric", "device", "--class", "flush"],
             ["--metric", "fsync"], ["--metric", "fsync", "--class", "fdatasync"],
             ["--metric", "commit"], ["--metric", "commit", "--class", "xfs"],
             ["--metric", "seek"], ["--metric", "seek", "--class", "read"])


def build(directory: Path, names: Any = None) -> dict[str, Path]:
    """Write the traces named (default: all) into `directory`; name -> path."""
    out = {}
    for name in names or TRACES:
        path = directory / f"{name}.iowt"
        TRACES[name](path)
        out[name] = path
    return out
