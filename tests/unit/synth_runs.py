"""Synthetic runs for the export, query and import tests, written with the tests' builder
(tracebuilder.py).

`synth_run(path, seed=...)` writes a trace of a workload doing fsyncs on ext4: each
fsync has a data write submitted inside the call, a journal write by jbd2, a cache
flush and a jbd2 commit, while the thread is blocked; reads and metadata writes come
in between. Every figure derives from a seeded random generator, so each seed is a
different run with known contents (returned as `Synth`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tracebuilder as tb
from iowhy import abi
from tracebuilder import LOG_RANGE

START = 1_000_000_000
JBD2_TID = 50
FS_CODES = {"ext4": abi.FS_EXT4, "xfs": abi.FS_XFS, "btrfs": abi.FS_BTRFS}


@dataclass
class Synth:
    path: str
    start_ns: int
    end_ns: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    fsyncs: list[dict[str, Any]] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)
    offcpu: list[dict[str, Any]] = field(default_factory=list)
    helpers: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    host: str = ""
    command: str = ""
    kernel: str = ""


def meta(host: str, kernel: str, fstype: str = "ext4") -> dict[str, Any]:
    """One 16 GiB disk with `fstype` on its partition, its log LOG_RANGE."""
    log = {"kind": "jbd2" if fstype == "ext4" else "xfs", "ranges": [list(LOG_RANGE)],
           "fc_ranges": []}
    return {"host": host, "kernel": kernel, "machine": "x86_64", "iowhy_version": "test",
            "devices": [tb.disk(size_bytes=1 << 34)],
            "filesystems": [tb.fs_entry(fstype, log=log)]}


def rq(submit: int, issue: int, done: int, *, op: int = abi.OP_WRITE, sector: int = 0,
       nbytes: int = 4096, iflags: int = 0, tracked: bool = True, tid: int = 100,
       comm: bytes = b"worker", seq: int = 0, insert: int | None = None) -> dict[str, Any]:
    """A request of one bio on DEV, submitted by `tid` (its own origin)."""
    return tb.req(issue, done, op=op, sector=sector, nbytes=nbytes, submit=submit,
                  insert=submit + 10 if insert is None else insert, iflags=iflags,
                  flags=(abi.RQ_TRACKED | abi.RQ_ORIGIN) if tracked else abi.RQ_ORIGIN,
                  tid=tid, seq=seq, comm=comm, nr_bios=1)


def synth_run(path, *, seed: int = 1, n_fsync: int = 40, n_reads: int = 30,
              host: str = "hostA", kernel: str = "6.1.0", fstype: str = "ext4",
              flush_scale: int = 1, helpers: bool = True) -> Synth:
    rng = np.random.default_rng(seed)
    t = START + 1_000_000
    s = Synth(path=str(path), start_ns=START, end_ns=0, host=host, kernel=kernel,
              command=f"dbbench --seed={seed}")
    tids = (100,)
    s.tasks.append(tb.task(100, START, comm=b"worker"))
    for tid in tids[1:]:
        s.tasks.append(tb.task(tid, START + 1000, abi.TASK_FORK, tgid=100, parent_tgid=100,
                               comm=b"worker"))
    seq = 0
    data_sector = 1_000_000

    def nxt() -> int:
        nonlocal seq
        seq += 1
        return seq
    for k in range(n_fsync):
        tid = tids[k % len(tids)]
        enter = t
        sub = enter + 2_000
        dlat = int(rng.integers(50_000, 2_000_000))
        d_issue = sub + 5_000
        d_done = d_issue + dlat
        s.requests.append(rq(sub, d_issue, d_done, sector=data_sector,
                             nbytes=int(rng.integers(1, 64)) * 4096, tid=tid, seq=nxt()))
        data_sector += int(rng.integers(8, 100_000))
        j0 = d_done + 1_000
        s.journal.append(tb.jev(abi.J_JBD2_START, j0, 100 + k, tid=JBD2_TID,
                                comm=b"jbd2/sdz1-8"))
        llat = int(rng.integers(20_000, 400_000))
        l_issue = j0 + 2_000
        s.requests.append(rq(j0 + 1_000, l_issue, l_issue + llat,
                             sector=LOG_RANGE[0] + 8 * (k % 1000),
                             nbytes=8192, iflags=abi.F_META | abi.F_SYNC, tracked=False,
                             tid=JBD2_TID, comm=b"jbd2/sdz1-8", seq=nxt()))
        f_issue = l_issue + llat + 1_000
        flat = int(rng.integers(100_000, 5_000_000)) * flush_scale
        s.requests.append(rq(f_issue - 500, f_issue, f_issue + flat, op=abi.OP_FLUSH,
                             tracked=False, tid=JBD2_TID, comm=b"jbd2/sdz1-8", seq=nxt(),
                             iflags=abi.F_PREFLUSH))
        jend = f_issue + flat + 2_000
        s.journal.append(tb.jev(abi.J_JBD2_END, jend, 100 + k, tid=JBD2_TID,
                                comm=b"jbd2/sdz1-8"))
        exit_ = jend + 3_000
        s.fsyncs.append(tb.fsync(tid, enter, exit_,
                                 call=abi.CALL_FSYNC if k % 4 else abi.CALL_FDATASYNC,
                                 fs=FS_CODES[fstype], seq=100 + k, tgid=100,
                                 syscall_nr=74 if k % 4 else 75, ino=12 + k, comm=b"worker"))
        s.offcpu.append(tb.off(tid, sub + 1_000, exit_ - 1_000, exit_ - 2_500,
                               syscall=74 if k % 4 else 75, waker=JBD2_TID,
                               ctx=abi.WCTX_TASK, comm="jbd2/sdz1-8", tgid=100))
        # jbd2 meanwhile: asleep on the data write, the log write and the flush (each
        # woken by its completion), on CPU in between.
        for a, b, q in ((sub + 1_000, d_done, seq - 2), (l_issue, l_issue + llat, seq - 1),
                        (f_issue, f_issue + flat, seq)) if helpers else ():
            s.helpers.append(tb.helper(JBD2_TID, a, b + 500, b, ctx=abi.WCTX_HARDIRQ,
                                       rq_seq=q))
        t = exit_ + int(rng.integers(10_000, 200_000))
        if k < n_reads:
            rlat = int(rng.integers(30_000, 3_000_000))
            r_sub = t
            s.requests.append(rq(r_sub, r_sub + 3_000, r_sub + 3_000 + rlat, op=abi.OP_READ,
                                 sector=int(rng.integers(2_000_000, 9_000_000)), tid=tid,
                                 seq=nxt()))
            # woken by the end-I/O worker, unrecorded (no helpers here)
            s.offcpu.append(tb.off(tid, r_sub + 500, r_sub + 3_000 + rlat + 900,
                                   r_sub + 3_000 + rlat + 100, syscall=0, waker=9,
                                   ctx=abi.WCTX_TASK, comm="kworker/1:1", tgid=100))
            t = r_sub + 3_000 + rlat + 5_000
        if k % 5 == 0:
            mlat = int(rng.integers(10_000, 100_000))
            s.requests.append(rq(t, t + 1_000, t + 1_000 + mlat, sector=30_000 + k * 8,
                                 iflags=abi.F_META, tracked=False, tid=0, comm=b"",
                                 seq=nxt()))
            t += 1_000 + mlat + 1_000
    s.end_ns = t + 1_000_000
    for tid in tids:
        s.tasks.append(tb.task(tid, s.end_ns - 1000, abi.TASK_EXIT, tgid=100, comm=b"worker"))
    t = tb.Trace(path, meta(host, kernel, fstype),
                 {"start_ns": START, "pid": 100, "command": s.command.split()},
                 created_realtime_ns=1_700_000_000_000_000_000 + seed)
    for name, rows in (("request", s.requests), ("fsync", s.fsyncs), ("journal", s.journal),
                       ("offcpu", s.offcpu), ("task", s.tasks), ("helper", s.helpers)):
        t.add(name, rows)
    t.close(tb.trailer(s.end_ns))
    return s


def nearest_rank(values, q: int) -> int | None:
    """The analysis' percentile: the value at rank ceil(q/100 * n)."""
    v = sorted(int(x) for x in values)
    if not v:
        return None
    return v[max(0, (q * len(v) + 99) // 100 - 1)]
