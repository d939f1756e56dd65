"""Seeded synthetic traces for tests and benchmarks, built with numpy (no per-record loop)
and written through the tests' builder (tracebuilder.py). Importable from every test
tier and from bench/ (setup.cfg puts tests/ on the path; bench/bench_analyze.py adds
it): nothing here imports bench/.

* `synth(n, seed)`: an fsync-heavy ext4-like workload on two disks, n requests with
  fsync, journal, off-CPU and task records but no wakeup links, helper or thread
  records (the golden traces `busy`, `big` and `big_blocked` are made from it: its
  output for a given (n, seed) must not change);
  `write_synth(path, n)` writes it with the benchmark's metadata (`synth_meta`).
* `recorded_mix(n, seed, mix)`: about n records in the record mix of a recorded trace
  (BUSY_MIX, measured on the busy recording of bench/bench_analyze.py): off-CPU and
  helper intervals with their wakers and request links, requests, fsync calls, the XFS
  log's journal records, task and thread records; `write_recorded_mix(path, n)` writes
  it as the recorder does (compacted, zstd); `causal_mix(path)` is a small one (50,000
  records) for a golden trace.
* `measure_mix(trace)`: the record mix of any trace, the proportions above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from iowhy import abi
from tracebuilder import Trace, disk, fs_entry, trailer

NTID = 8
DEV_A, DEV_B, PART_A = (8, 0), (8, 16), (8, 1)
LOG = (2_000_000, 2_262_144)  # 128 MiB journal, whole-disk sectors


def synth(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Arrays of every record type for an fsync-heavy ext4-like workload on two disks."""
    rng = np.random.default_rng(seed)
    w0 = 1_000_000_000
    kinds = rng.choice(7, size=n, p=[0.55, 0.10, 0.15, 0.06, 0.02, 0.08, 0.04])
    # 0 data, 1 metadata, 2 log, 3 FF flush, 4 empty preflush, 5 read, 6 readahead
    gap = (rng.exponential(40_000, n) + 2_000).astype(np.int64)
    issue = w0 + 1_000_000 + np.cumsum(gap)
    dev_t = rng.lognormal(np.log(120_000), 0.7, n).astype(np.int64) + 5_000
    dev_t[kinds == 3] = rng.lognormal(np.log(2_000_000), 0.4, int((kinds == 3).sum()))
    done = issue + dev_t
    r = np.zeros(n, dtype=abi.REQUEST_DTYPE)
    nbytes = (4096 << rng.integers(0, 7, n)).astype(np.uint32)
    nbytes[(kinds == 1)] = 4096
    nbytes[(kinds == 3) | (kinds == 4)] = 0
    sect = (nbytes.astype(np.int64) + 511) >> 9
    # data: sequential streams with occasional jumps; metadata random; log sequential.
    jump = rng.random(n) < 0.05
    seq_pos = np.cumsum(np.where(jump, rng.integers(0, 1 << 20, n), sect))
    sector = np.where(kinds == 1, rng.integers(0, 1 << 30, n), (seq_pos % (1 << 30)) + (1 << 22))
    sector = np.where(kinds == 2, LOG[0] + (np.cumsum(np.where(kinds == 2, sect, 0))
                                            % (LOG[1] - LOG[0] - 128)), sector)
    sector[(kinds == 3) | (kinds == 4)] = 0
    op = np.full(n, abi.OP_WRITE, np.uint8)
    op[kinds == 3] = abi.OP_FLUSH
    op[kinds >= 5] = abi.OP_READ
    iflags = np.zeros(n, np.uint16)
    iflags[kinds == 1] = abi.F_META
    iflags[kinds == 2] = abi.F_META | abi.F_SYNC
    iflags[kinds == 4] = abi.F_PREFLUSH | abi.F_SYNC
    iflags[kinds == 6] = abi.F_RAHEAD
    flushseq = (kinds == 3) | (kinds == 4) | ((kinds == 2) & (rng.random(n) < 0.1))
    flags = np.where((kinds == 0) | (kinds >= 4), abi.RQ_TRACKED, 0).astype(np.uint16)
    flags[flushseq] |= abi.RQ_FLUSH_SEQ
    submit = issue - rng.integers(1_000, 60_000, n)
    insert = np.where(rng.random(n) < 0.5, submit + 500, 0)
    data_done = np.where(flushseq & (kinds == 2), issue + dev_t // 2, done)
    empty = kinds == 4
    issue = np.where(empty, 0, issue)
    insert = np.where(empty, 0, insert)
    flags[empty] |= abi.RQ_NO_ISSUE
    devb = rng.random(n) < 0.1
    r["start_sector"] = sector
    r["submit_ns"] = submit
    r["insert_ns"] = insert
    r["issue_ns"] = issue
    r["data_done_ns"] = data_done
    r["done_ns"] = done
    r["ts_ns"] = done
    r["len_bytes"] = nbytes
    r["done_bytes"] = nbytes
    r["dev_major"] = 8
    r["dev_minor"] = np.where(devb & (kinds >= 5), DEV_B[1], DEV_A[1])
    r["tid"] = 1000 + rng.integers(0, NTID, n)
    r["tgid"] = 1000
    r["op"] = op
    r["iflags"] = iflags
    r["flags_u16"] = flags
    r["seq"] = np.arange(n)
    r = r[np.argsort(done, kind="stable")]  # the recorder writes requests when done
    end = int(done.max()) + 1_000_000
    elapsed = end - w0
    # fsync calls: per thread back to back, 5 calls per jbd2 commit.
    nf = max(n // 20, NTID)
    j = np.arange(nf)
    period = elapsed // (nf // NTID + 1)
    f = np.zeros(nf, dtype=abi.FSYNC_DTYPE)
    f["tid"] = 1000 + j % NTID
    f["tgid"] = 1000
    f["enter_ns"] = w0 + (j // NTID) * period + (j % NTID) * (period // (2 * NTID))
    f["exit_ns"] = f["enter_ns"] + period // 3
    f["ts_ns"] = f["exit_ns"]
    f["call_u16"] = np.where(j % 4 == 0, abi.CALL_FDATASYNC, abi.CALL_FSYNC)
    f["fs_u16"] = abi.FS_EXT4
    f["flags_u16"] = abi.FS_F_FSEVENT | abi.FS_F_SEQ
    f["commit_seq"] = 1 + j // 5
    f["dev_major"], f["dev_minor"] = PART_A
    ncom = int(f["commit_seq"].max())
    cs = np.arange(1, ncom + 1)
    t0 = w0 + ((cs - 1) * 5 // NTID) * period + period // 8
    jr = np.zeros(5 * ncom, dtype=abi.JOURNAL_DTYPE)
    for k, (ev, dt) in enumerate(((abi.J_JBD2_START, 0), (abi.J_JBD2_LOCKING, period // 64),
                                  (abi.J_JBD2_FLUSHING, period // 32),
                                  (abi.J_JBD2_LOGGING, period // 16),
                                  (abi.J_JBD2_END, period // 6))):
        jr["event_u16"][k::5] = ev
        jr["seq"][k::5] = cs
        jr["ts_ns"][k::5] = t0 + dt
    jr["dev_major"], jr["dev_minor"] = PART_A
    jr["fs_u16"] = abi.FS_EXT4
    jr["tid"] = 77
    # off-CPU: each fsync blocks most of its duration; plus preemptions.
    no = 2 * nf
    o = np.zeros(no, dtype=abi.OFFCPU_DTYPE)
    o["tid"][:nf] = f["tid"]
    o["start_ns"][:nf] = f["enter_ns"] + period // 50
    o["waking_ns"][:nf] = f["exit_ns"] - period // 100
    o["end_ns"][:nf] = f["exit_ns"] - period // 200
    o["syscall_nr"][:nf] = 74
    o["tid"][nf:] = f["tid"]
    o["start_ns"][nf:] = f["exit_ns"] + period // 10
    o["end_ns"][nf:] = f["exit_ns"] + period // 8
    o["waking_ns"][nf:] = 0
    o["syscall_nr"][nf:] = 1
    o["flags_u16"][nf:] = abi.OFF_PREEMPT
    o = o[np.argsort(o["end_ns"], kind="stable")]
    o["ts_ns"] = o["end_ns"]
    t = np.zeros(NTID, dtype=abi.TASK_DTYPE)
    t["tid"] = 1000 + np.arange(NTID)
    t["tgid"] = 1000
    t["ts_ns"] = w0
    t["event_u16"] = abi.TASK_ROOT
    return {"request": r, "fsync": f, "journal": jr, "offcpu": o, "task": t,
            "start_ns": np.int64(w0), "end_ns": np.int64(end)}


def synth_meta() -> dict[str, Any]:
    """META of synth's traces: two disks (sdb, rotational, write back; sdc, write through
    with FUA) and an ext4 on the first, its journal LOG."""
    return {"devices": [disk("sdb", DEV_A, size_bytes=1 << 40),
                        disk("sdc", DEV_B, size_bytes=1 << 40, rotational=0,
                             write_cache="write through", fua=1)],
            "filesystems": [fs_entry("ext4", DEV_A, PART_A, "sdb", "/mnt/bench",
                                     log={"kind": "jbd2", "ranges": [list(LOG)],
                                          "fc_ranges": []})]}


def write_synth(path: str, n: int) -> None:
    """synth(n) in a trace file, with synth_meta."""
    d = synth(n)
    t = Trace(path, synth_meta(), {"start_ns": int(d["start_ns"]),
                                   "command": ["synthetic", str(n)], "pid": 1000})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        t.add(name, d.pop(name))
    t.close(trailer(int(d["end_ns"]), stop_reason="synthetic", exit_status=None))


# -- the record mix of a trace -------------------------------------------------------------

HELPER_KINDS = (b"jbd2/", b"kworker/", b"loop", b"xfsaild", b"kswapd")
SLEEP_SYSCALL_NRS = (35, 230, 7, 23, 232, 281, 270, 271, 34)  # x86-64: nanosleep,
#   clock_nanosleep, poll, select, epoll_wait, epoll_pwait, pselect6, ppoll, pause


def _share(x: np.ndarray) -> float:
    return round(float(x.mean()), 5) if len(x) else 0.0


def _woken(o: np.ndarray, workload: np.ndarray, helpers: np.ndarray) -> dict[str, Any]:
    """What woke the intervals of `o` (offcpu layout), as shares: preempted among all;
    request, irq (interrupt context, no request), workload thread, helper thread, other
    task, unseen (no waker seen, or never woken) among the waits (not preempted)."""
    f = o["flags_u16"]
    slept = (f & abi.OFF_PREEMPT) == 0
    w = o[slept]
    wf, ctx, tid = w["flags_u16"], w["waker_ctx_u16"], w["waker_tid"]
    rq = (wf & abi.OFF_WAKER_RQ) != 0
    unseen = ~rq & (((tid == 0) & (ctx == abi.WCTX_UNKNOWN)) | (w["waking_ns"] == 0))
    irq = ~rq & ~unseen & (ctx >= abi.WCTX_SOFTIRQ)
    task = ~rq & ~unseen & ~irq
    by_wl = task & np.isin(tid, workload)
    by_helper = task & ~by_wl & np.isin(tid, helpers)
    sysnr = o["syscall_nr"]
    u, c = np.unique(sysnr, return_counts=True)
    top = np.argsort(-c, kind="stable")[:4]
    from iowhy.syscalls import syscall_name
    return {"n": int(len(o)), "preempt": _share(~slept),
            "woken": {"request": _share(rq), "irq": _share(irq), "workload": _share(by_wl),
                      "helper": _share(by_helper),
                      "other-task": _share(task & ~by_wl & ~by_helper),
                      "unseen": _share(unseen)},
            "sleep-syscall": _share(np.isin(w["syscall_nr"], SLEEP_SYSCALL_NRS)),
            "iowait": _share((f & abi.OFF_IOWAIT) != 0), "D": _share((f & abi.OFF_D) != 0),
            "syscalls": {syscall_name(int(u[i])): round(float(c[i] / len(o)), 5)
                         for i in top}}


def measure_mix(trace: Any) -> dict[str, Any]:
    """The record mix of a trace (traceformat.Trace): records per type and their shares,
    workload and helper threads (helpers by kind, named from the records they woke),
    requests per device, and what woke the off-CPU and helper intervals (_woken).
    bench/bench_analyze.py prints it for every trace it measures; recorded_mix()'s
    proportions come from it."""
    counts = {n: trace.count(n) for n in abi.RECORD_NAMES}
    total = sum(counts.values())
    off, hel = trace.records("offcpu"), trace.records("helper")
    workload = np.unique(off["tid"])
    helpers = np.unique(hel["tid"])
    # a helper's name: the waker_comm of any interval it woke
    both = np.concatenate([off[["waker_tid", "waker_comm"]], hel[["waker_tid", "waker_comm"]]])
    named = both[np.isin(both["waker_tid"], helpers)]
    _, first = np.unique(named["waker_tid"], return_index=True)
    names = named["waker_comm"][first]
    kinds: dict[str, int] = {}
    for k in HELPER_KINDS:
        kinds[k.decode().rstrip("/")] = int(np.char.startswith(names, k).sum())
    kinds["unnamed"] = int(len(helpers) - len(names))
    rq = trace.records("request")
    devname = {(int(d.get("major", -1)), int(d.get("minor", -1))): str(d.get("name"))
               for d in (trace.meta or {}).get("devices", []) or []}
    key = rq["dev_major"].astype(np.int64) << 20 | rq["dev_minor"].astype(np.int64)
    u, c = np.unique(key, return_counts=True)
    rq_devices = {devname.get((int(k >> 20), int(k & 0xFFFFF)), f"{k >> 20}:{k & 0xFFFFF}"):
                  round(float(n / max(1, len(rq))), 5) for k, n in zip(u, c)}
    return {"records": total, "counts": counts,
            "share": {k: round(v / total, 5) if total else 0.0 for k, v in counts.items()},
            "threads": int(len(workload)), "helpers": int(len(helpers)),
            "helper_kinds": {k: v for k, v in kinds.items() if v},
            "rq_devices": rq_devices,
            "offcpu": _woken(off, workload, helpers), "helper": _woken(hel, workload, helpers)}


# -- a synthetic trace in the record mix of a recorded one ------------------------------------

WOKEN = ("request", "irq", "workload", "helper", "other-task", "unseen")


@dataclass(frozen=True)
class Mix:
    """The proportions recorded_mix draws, as measure_mix reports them for a recorded trace:
    shares of all records per type; workload threads (the first polls in clock_nanosleep,
    the second waits in fsync, the others in pwrite64) and helper threads; the shares of
    preempted intervals and of what woke the others (WOKEN order), for the workload's
    off-CPU intervals and the helpers'; the share of off-CPU intervals that are the
    poller's sleeps and the fsync thread's waits; the share of requests on the
    filesystem's device; the trace's length per record."""

    request: float
    offcpu: float
    helper: float
    fsync: float
    journal: float
    threads: int
    helpers: int
    helper_names: tuple[str, ...]
    off_preempt: float
    off_woken: tuple[float, float, float, float, float, float]
    hel_preempt: float
    hel_woken: tuple[float, float, float, float, float, float]
    poll: float
    fsync_waits: float
    rq_fs_dev: float
    ns_per_record: float


# Loop devices and an XFS, as the busy recording's: LOOP_RAW takes the randwrites,
# LOOP_FS holds the filesystem (its log range in whole-disk sectors).
LOOP_RAW, LOOP_FS = (7, 0), (7, 1)
XFS_LOG = (1_048_624, 1_179_696)
KSOFTIRQD = ((14, b"ksoftirqd/0"), (22, b"ksoftirqd/1"))
MIN_CPU_NS = 4_000  # on CPU between two intervals, at least (room for a call's edges)
MIN_SLEEP_NS = 2_000  # a wait woken by a request, at least (submission to completion)


def mix_meta() -> dict[str, Any]:
    """META of recorded_mix's traces: the two loop devices and the XFS."""
    return {"devices": [disk("loop0", LOOP_RAW, rotational=0, kind="loop"),
                        disk("loop1", LOOP_FS, rotational=0, kind="loop")],
            "filesystems": [fs_entry("xfs", LOOP_FS, LOOP_FS, "loop1", "/mnt/b",
                                     source="/dev/loop1", part_start_sector=0,
                                     log={"kind": "xfs", "ranges": [list(XFS_LOG)],
                                          "fc_ranges": []})]}


def _timelines(rng: np.random.Generator, counts: np.ndarray, span: int, w0: int,
               preempt: np.ndarray, sleep_med: np.ndarray) -> dict[str, np.ndarray]:
    """Back-to-back intervals of several actors, actor by actor: on CPU (lognormal, at
    least MIN_CPU_NS), asleep (lognormal around sleep_med of the actor; none when
    preempted), runnable; each actor's sleeps stretched so that its intervals fill
    `span` ns from w0. Returns actor index, start, waking (0: preempted), end,
    run_total (on-CPU time so far) per interval."""
    n = int(counts.sum())
    actor = np.repeat(np.arange(len(counts)), counts)
    cpu = rng.lognormal(np.log(8_000), 0.8, n).astype(np.int64) + MIN_CPU_NS
    runq = rng.lognormal(np.log(6_000), 0.9, n).astype(np.int64) + 200
    sleep = (rng.lognormal(0.0, 1.0, n) * sleep_med[actor]).astype(np.int64) + MIN_SLEEP_NS
    sleep[preempt] = 0
    busy = np.bincount(actor, cpu + runq, minlength=len(counts))
    slept = np.bincount(actor, sleep, minlength=len(counts))
    stretch = np.maximum(span - busy, 0) / np.maximum(slept, 1)
    sleep = np.where(preempt, 0, np.maximum((sleep * stretch[actor]).astype(np.int64),
                                            MIN_SLEEP_NS))
    step = cpu + sleep + runq
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    cum = np.cumsum(step)
    base = np.repeat(cum[first] - step[first], counts)
    t = w0 + cum - step - base  # this interval's cycle starts here
    start = t + cpu
    waking = np.where(preempt, 0, start + sleep)
    end = start + sleep + runq
    ccum = np.cumsum(cpu)
    run_total = ccum - np.repeat(ccum[first] - cpu[first], counts)
    return {"actor": actor, "start": start, "waking": waking, "end": end,
            "run_total": run_total}


def _draw(rng: np.random.Generator, n: int, p: Any) -> np.ndarray:
    """n category indices with probabilities p (normalised; all zero: category 0)."""
    q = np.clip(np.asarray(p, dtype=float), 0, None)
    if q.sum() <= 0:
        return np.zeros(n, np.int64)
    return rng.choice(len(q), size=n, p=q / q.sum())


def recorded_mix(n: int, seed: int = 1, mix: Mix | None = None) -> dict[str, Any]:
    """Arrays of every record type for about n records in a recorded trace's mix
    (default BUSY_MIX): off-CPU intervals of the workload threads and helper records
    with their wakers (request links through OFF_WAKER_RQ and waker_rq_seq, helper,
    workload and other tasks in task context, interrupts, unseen wakers, polling sleeps
    in clock_nanosleep), the requests that woke them and more, the fsync calls with the
    XFS log's journal records, task records and the root's thread record. Deterministic
    for (n, seed, mix); vectorised."""
    m = mix or BUSY_MIX
    rng = np.random.default_rng(seed)
    w0 = 1_000_000_000
    span = max(int(n * m.ns_per_record), 1_000_000)
    n_off = max(int(n * m.offcpu), 4 * m.threads)
    n_hel = max(int(n * m.helper), m.helpers) if m.helpers else 0
    n_fsync = max(int(n * m.fsync), 1)
    per_call = max(1, int(round(m.fsync_waits * n_off / n_fsync)))
    # workload threads: 0 polls, 1 fsyncs, the others write; tids 1000 + index
    n_poll = max(1, int(n_off * m.poll))
    n_fsw = min(per_call * n_fsync, (n_off - n_poll) // 2)
    n_fsync = n_fsw // per_call
    nio = max(1, m.threads - 2)
    io_each = np.full(nio, (n_off - n_poll - n_fsw) // nio)
    counts = np.concatenate([[n_poll, n_fsw], io_each]).astype(np.int64)
    tids = 1000 + np.arange(len(counts))
    pre = rng.random(int(counts.sum())) < m.off_preempt
    pre[:n_poll] = False  # the poller sleeps, never preempted
    med = np.full(len(counts), 12_000.0)
    med[0] = 1e6
    o = _timelines(rng, counts, span, w0, pre, med)
    no = len(o["start"])
    # what woke each wait: the poller's timer, then the others drawn so that the whole
    # matches the mix (the poller's sleeps are its interrupts)
    wait = ~pre
    woken = np.full(no, -1)
    woken[:n_poll] = 1
    want = np.asarray(m.off_woken, float) * wait.sum()
    want[1] = max(want[1] - n_poll, 0)
    rest = wait & (np.arange(no) >= n_poll)
    woken[rest] = _draw(rng, int(rest.sum()), want)
    # helpers: tids 10 + index, counts uneven as recorded (a few do most)
    hw = rng.dirichlet(np.ones(max(m.helpers, 1)) * 0.7)
    hcounts = np.floor(hw * n_hel).astype(np.int64) if m.helpers else np.zeros(0, np.int64)
    hpre = rng.random(int(hcounts.sum())) < m.hel_preempt
    h = _timelines(rng, hcounts, span, w0, hpre,
                   np.full(len(hcounts), 20_000.0)) if len(hcounts) else None
    htids = 10 + np.arange(len(hcounts))
    hnames = np.array([m.helper_names[i % len(m.helper_names)].encode()
                       for i in range(len(hcounts))], dtype="S16")
    hwoken = np.full(len(hpre), -1)
    hwoken[~hpre] = _draw(rng, int((~hpre).sum()), m.hel_woken)

    def wakers(tid_self: np.ndarray, woke: np.ndarray) -> dict[str, np.ndarray]:
        """waker tid, ctx and comm per interval by its category (WOKEN index)."""
        k = len(woke)
        wt = np.zeros(k, np.uint32)
        ctx = np.zeros(k, np.uint16)
        comm = np.zeros(k, "S16")
        cpu = rng.integers(0, 2, k)
        soft = np.array([t for t, _ in KSOFTIRQD], np.uint32)[cpu]
        scomm = np.array([c for _, c in KSOFTIRQD], "S16")[cpu]
        for cat, sel in ((0, woke == 0), (1, woke == 1)):
            wt[sel], comm[sel] = soft[sel], scomm[sel]
            ctx[sel] = abi.WCTX_SOFTIRQ
        poll = (woke == 1) & (tid_self == tids[0])
        wt[poll], comm[poll], ctx[poll] = 0, b"swapper/0", abi.WCTX_HARDIRQ
        sel = woke == 2  # another workload thread
        other = tids[1 + (np.searchsorted(tids, tid_self[sel]) +
                          rng.integers(0, len(tids) - 1, int(sel.sum()))) % (len(tids) - 1)]
        wt[sel], comm[sel], ctx[sel] = np.where(other == tid_self[sel], tids[0], other), \
            b"fio", abi.WCTX_TASK
        sel = woke == 3
        if len(htids):
            j = rng.integers(0, len(htids), int(sel.sum()))
            wt[sel], comm[sel] = htids[j], hnames[j]
        ctx[sel] = abi.WCTX_TASK
        sel = woke == 4  # a task neither the workload's nor a recorded helper
        wt[sel], comm[sel], ctx[sel] = 5000, b"iowhy-record", abi.WCTX_TASK
        return {"waker_tid": wt, "waker_ctx_u16": ctx, "waker_comm": comm}

    off = np.zeros(no, dtype=abi.OFFCPU_DTYPE)
    otid = tids[o["actor"]].astype(np.uint32)
    off["tid"], off["tgid"] = otid, tids[0]
    off["start_ns"], off["waking_ns"], off["end_ns"] = o["start"], o["waking"], o["end"]
    off["ts_ns"] = o["end"]
    off["run_total_ns"] = o["run_total"]
    off["cpu"] = rng.integers(0, 2, no)
    sysnr = np.full(no, 18, np.int32)  # pwrite64
    sysnr[:n_poll] = 230  # clock_nanosleep
    sysnr[n_poll:n_poll + n_fsw] = 74  # fsync
    off["syscall_nr"] = sysnr
    flags = np.where(pre, abi.OFF_PREEMPT, abi.OFF_D).astype(np.uint16)
    flags[:n_poll] = 0  # an interruptible sleep
    flags[woken == 0] |= abi.OFF_WAKER_RQ | abi.OFF_IOWAIT
    off["flags_u16"] = flags
    for k, v in wakers(otid, woken).items():
        off[k] = v
    unseen = woken == 5
    last = np.append(o["actor"][1:] != o["actor"][:-1], True)
    off["waking_ns"][unseen & last] = 0  # still asleep at the stop: never woken

    hel = np.zeros(len(hpre), dtype=abi.HELPER_DTYPE)
    if h is not None:
        htid = htids[h["actor"]].astype(np.uint32)
        hel["tid"], hel["tgid"] = htid, htid
        hel["start_ns"], hel["waking_ns"], hel["end_ns"] = h["start"], h["waking"], h["end"]
        hel["ts_ns"] = h["end"]
        hel["run_total_ns"] = h["run_total"]
        hel["cpu"] = rng.integers(0, 2, len(hel))
        hel["syscall_nr"] = -1
        hf = np.where(hpre, abi.OFF_PREEMPT, 0).astype(np.uint16) | abi.OFF_HELPER
        hf[hwoken == 0] |= abi.OFF_WAKER_RQ
        hel["flags_u16"] = hf
        for k, v in wakers(htid, hwoken).items():
            hel[k] = v

    # requests: one per wait a completion woke (the workload's writers' on the raw loop,
    # the fsync thread's and the helpers' log and data writes on the filesystem's), then
    # flushes on the filesystem's device and unlinked raw writes up to the mix's count
    lo = np.flatnonzero(woken == 0)
    lh = np.flatnonzero(hwoken == 0)
    n_rq = max(int(n * m.request), len(lo) + len(lh))
    fs_linked = np.isin(o["actor"][lo], [1])
    n_fs = max(int(n_rq * m.rq_fs_dev) - int(fs_linked.sum()) - len(lh), 0)
    n_fs = min(n_fs, n_rq - len(lo) - len(lh))
    n_raw = n_rq - len(lo) - len(lh) - n_fs
    start = np.concatenate([o["start"][lo], hel["start_ns"][lh].astype(np.int64)])
    wake = np.concatenate([o["waking"][lo], hel["waking_ns"][lh].astype(np.int64)])
    who = np.concatenate([otid[lo], hel["tid"][lh]])
    nl = len(start)
    submit = start - 300
    done = wake - rng.integers(200, 1_000, nl)
    issue = np.minimum(submit + 200 + rng.integers(0, 400, nl), done - 100)
    fs_dev = np.concatenate([fs_linked, np.ones(len(lh), bool)])
    log = fs_dev & (rng.random(nl) < 0.5)
    # unlinked: flushes on the filesystem's device, raw writes of the writers
    t_un = w0 + rng.integers(0, span, n_fs + n_raw)
    dev_un = rng.lognormal(np.log(15_000), 0.6, n_fs + n_raw).astype(np.int64) + 1_000
    submit = np.concatenate([submit, t_un - 500])
    issue = np.concatenate([issue, t_un])
    done = np.concatenate([done, t_un + dev_un])
    who = np.concatenate([who, np.zeros(n_fs, np.uint32),
                          tids[2 + rng.integers(0, nio, n_raw)].astype(np.uint32)])
    fs_dev = np.concatenate([fs_dev, np.ones(n_fs, bool), np.zeros(n_raw, bool)])
    log = np.concatenate([log, np.zeros(n_fs + n_raw, bool)])
    flush = np.concatenate([np.zeros(nl, bool), np.ones(n_fs, bool), np.zeros(n_raw, bool)])
    nr = len(done)
    rq = np.zeros(nr, dtype=abi.REQUEST_DTYPE)
    rq["submit_ns"], rq["issue_ns"], rq["done_ns"], rq["ts_ns"] = submit, issue, done, done
    rq["data_done_ns"] = np.where(log, issue + (done - issue) // 2, done)
    rq["dev_major"] = np.where(fs_dev, LOOP_FS[0], LOOP_RAW[0])
    rq["dev_minor"] = np.where(fs_dev, LOOP_FS[1], LOOP_RAW[1])
    rq["op"] = np.where(flush, abi.OP_FLUSH, abi.OP_WRITE)
    nbytes = np.where(flush, 0, np.where(log, 4096 << rng.integers(0, 4, nr), 4096))
    rq["len_bytes"], rq["done_bytes"] = nbytes, nbytes
    sector = rng.integers(0, (900 << 20) >> 12, nr) << 3
    sector[log] = XFS_LOG[0] + (np.arange(int(log.sum())) * 8) % (XFS_LOG[1] - XFS_LOG[0] - 64)
    sector[flush] = 0
    rq["start_sector"] = sector
    rq["iflags"] = np.where(log, abi.F_SYNC | abi.F_META | abi.F_FUA | abi.F_PREFLUSH,
                            np.where(flush, abi.F_PREFLUSH, abi.F_SYNC))
    workload_rq = np.isin(who, tids)
    rq["flags_u16"] = (np.where(workload_rq, abi.RQ_TRACKED | abi.RQ_ORIGIN,
                                np.where(who > 0, abi.RQ_ORIGIN, 0))
                       | np.where(log | flush, abi.RQ_FLUSH_SEQ, 0))
    rq["tid"], rq["tgid"] = who, np.where(workload_rq, tids[0], who)
    rq["cpu"] = rng.integers(0, 2, nr)
    # numbered in submission order from 1; the links name their request's number
    order = np.argsort(submit, kind="stable")
    seq = np.empty(nr, np.uint64)
    seq[order] = np.arange(1, nr + 1, dtype=np.uint64)
    rq["seq"] = seq
    off["waker_rq_seq"][lo] = seq[:len(lo)]
    off["waker_rq_depth"][lo] = 1
    hel["waker_rq_seq"][lh] = seq[len(lo):nl]
    hel["waker_rq_depth"][lh] = 1

    # fsync calls: the fsync thread's waits, per_call at a time; the XFS log's journal
    # records (two log forces, then an iclog's sync, write and done) in as many calls as
    # the mix's journal share asks
    fi = np.arange(n_poll, n_poll + n_fsync * per_call).reshape(n_fsync, per_call)
    enter = o["start"][fi[:, 0]] - 1_500
    exit_ = o["end"][fi[:, -1]] + 500
    fs = np.zeros(n_fsync, dtype=abi.FSYNC_DTYPE)
    fs["tid"], fs["tgid"] = tids[1], tids[0]
    fs["enter_ns"], fs["exit_ns"], fs["ts_ns"] = enter, exit_, exit_
    fs["call_u16"], fs["fs_u16"] = abi.CALL_FSYNC, abi.FS_XFS
    fs["dev_major"], fs["dev_minor"] = LOOP_FS
    fs["fd"], fs["syscall_nr"] = 5, 74
    ngrp = min(max(int(n * m.journal) // 5, 0), n_fsync)
    g = np.linspace(0, n_fsync - 1, ngrp).astype(np.int64) if ngrp else np.zeros(0, np.int64)
    lsn = (np.uint64(1) << np.uint64(32)) | (np.arange(1, ngrp + 1, dtype=np.uint64) * 64)
    fs["flags_u16"] = abi.FS_F_FSEVENT
    fs["flags_u16"][g] |= abi.FS_F_SEQ
    fs["commit_seq"][g] = lsn
    jr = np.zeros(5 * ngrp, dtype=abi.JOURNAL_DTYPE)
    jtid = np.uint32(htids[0] if len(htids) else 50)
    for k, (ev, at) in enumerate(((abi.J_XFS_FORCE, 200), (abi.J_XFS_FORCE, 400),
                                  (abi.J_XLOG_SYNC, 600), (abi.J_XLOG_WRITE, 700),
                                  (abi.J_XLOG_DONE, -300))):
        jr["event_u16"][k::5] = ev
        jr["seq"][k::5] = lsn
        jr["ts_ns"][k::5] = (enter[g] if at > 0 else exit_[g]) + at
        jr["tid"][k::5] = tids[1] if ev == abi.J_XFS_FORCE else jtid
    jr["aux1"][2::5] = 4096
    jr["dev_major"], jr["dev_minor"] = LOOP_FS
    jr["fs_u16"] = abi.FS_XFS
    end = int(max(off["end_ns"].max(), done.max(), hel["end_ns"].max() if len(hel) else 0))
    end += 1_000_000
    nt = len(tids)
    task = np.zeros(2 * nt, dtype=abi.TASK_DTYPE)
    task["tid"] = np.concatenate([tids, tids])
    task["tgid"] = tids[0]
    task["ts_ns"] = np.concatenate([w0 + np.arange(nt), np.full(nt, end - 1_000)])
    task["event_u16"] = np.concatenate([[abi.TASK_ROOT], np.full(nt - 1, abi.TASK_FORK),
                                        np.full(nt, abi.TASK_EXIT)])
    task["comm"] = b"fio"
    thr = np.zeros(1, dtype=abi.THREAD_DTYPE)
    thr["tid"], thr["tgid"], thr["ts_ns"] = tids[0], tids[0], w0
    thr["syscall_nr"], thr["state_u8"], thr["comm"] = -2, ord("R"), b"fio"
    thr["flags_u16"] = abi.THR_ON_CPU

    def by(a: np.ndarray, key: str) -> np.ndarray:  # in the order the recorder writes
        return a[np.argsort(a[key], kind="stable")]
    return {"request": by(rq, "done_ns"), "offcpu": by(off, "end_ns"),
            "helper": by(hel, "end_ns"), "fsync": by(fs, "exit_ns"),
            "journal": by(jr, "ts_ns"), "task": task, "thread": thr,
            "start_ns": w0, "end_ns": end, "pid": int(tids[0])}


def write_recorded_mix(path: str, n: int, seed: int = 1, mix: Mix | None = None) -> str:
    """recorded_mix(n, seed, mix) in a trace file, compressed and compacted as the
    recorder writes it, with RECORDER attach_mode set (a recording that names its
    wakers)."""
    d = recorded_mix(n, seed, mix)
    t = Trace(path, mix_meta(), {"start_ns": d["start_ns"], "pid": d["pid"],
                                 "command": ["synthetic", "recorded-mix", str(n)],
                                 "attach_mode": "record"}, zstd_level=3, compact=True)
    for name in ("thread", "task", "fsync", "journal", "offcpu", "helper", "request"):
        t.add(name, d.pop(name), chunk_records=8192)
    return t.close(trailer(d["end_ns"], stop_reason="workload-exit"))


def causal_mix(path: str, n: int = 50_000, seed: int = 1) -> str:
    """A small causal trace (about n records, default 50,000) in the busy recording's
    mix (BUSY_MIX): every kind of waker, request links, helper records, polling sleeps
    and unseen waits, for a golden trace. Deterministic: the same (n, seed) writes the
    same bytes."""
    return write_recorded_mix(path, n, seed, BUSY_MIX)


# The record mix of the traces bench/bench_analyze.py records (measure_mix; it prints them
# for every trace it measures), on Linux 6.18, 2 CPUs, under a load average of 4-6:
#
#                        busy 60 s   fio psync 20 s  fsync-tasks 8x300  untar 20000
#   records              16,353,708  2,141,952       52,880             7,861
#   request              0.3235      0.2593          0.2761             0.4564
#   offcpu               0.2892      0.2602          0.2152             0.0518
#   helper               0.3318      0.4805          0.3336             0.4076
#   fsync                0.0352      -               0.0454             0.0001
#   journal              0.0203      -               0.1294             0.0827
#   task, thread, syscall  < 0.0001  < 0.0001        0.0004             0.0014
#   workload / helper threads  6 / 16    4 / 8       9 / 9              3 / 10
#   offcpu preempted     0.0085      0.0002          0.0345             0.0958
#   offcpu waits woken by: request 0.960, helper 0.038, irq 0.0013, unseen 0.0006 (busy);
#     request 0.996, irq 0.0038 (fio); helper 0.761, request 0.157, workload 0.081,
#     unseen 0.0006 (fsync-tasks); helper 0.883, request 0.068, unseen 0.038 (untar)
#   offcpu in clock_nanosleep (polling) 0.0013 (busy), 0.0036 (fio), 0 (fsync, untar)
#   helper preempted     0.1796      0.4608          0.2201             0.5843
#   helper waits woken by: workload 0.675, helper 0.265, irq 0.029, request 0.029,
#     other task 0.001, unseen 0.0006 (busy); workload 0.9996 (fio); request 0.408,
#     helper 0.266, workload 0.199, irq 0.127 (fsync-tasks); request 0.549, helper 0.356,
#     irq 0.064, workload 0.031 (untar)
#
# BUSY_MIX is the busy trace's: what made the analysis slowest.
BUSY_MIX = Mix(
    request=0.3235, offcpu=0.2892, helper=0.3318, fsync=0.0352, journal=0.0203,
    threads=6, helpers=16,
    helper_names=("kworker/u8:1", "kworker/1:1H", "kworker/0:0H", "kworker/u8:4",
                  "xfsaild/loop2"),
    off_preempt=0.00845, off_woken=(0.96016, 0.00134, 0.0, 0.03794, 0.0, 0.00056),
    hel_preempt=0.17961, hel_woken=(0.02857, 0.02949, 0.67531, 0.26509, 0.00096, 0.00057),
    poll=0.00126, fsync_waits=0.25824, rq_fs_dev=0.33837, ns_per_record=3_669.0)
