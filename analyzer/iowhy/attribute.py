"""Attribution: where the elapsed time went (workload, device, fsync views), plus metadata
placement and time locality. Pure functions over numpy columns; see docs/report-json.md
for the definitions in words.

Workload view. At every instant of the window the workload's state is the best state
among its live threads: a thread on CPU (alive and not inside an off-CPU interval) ->
``cpu``; else a runnable one (off CPU after its wakeup, or preempted) -> ``runqueue``;
else some thread is blocked and the instant is charged to what the workload's devices
were doing, by priority: a flush in flight -> ``barrier``, else a log write -> ``log``,
else a metadata request -> ``metadata``, else a data write (or discard) -> ``data``, else
a read -> ``read``; with nothing in flight -> ``wait-other``, broken down by the syscall
the blocked threads are in (the one most blocked threads are in; ties to the lowest
number, "none" last). Instants with no live thread are ``wait-other`` "(no task)".
"In flight" is a request's device stage (match.py); for ``barrier`` it also covers the
time a flush-sequenced request waits for its pre/post-flush (flush machinery busy for
it even before the FF is issued). The workload's devices: the disks it writes to (a
write, flush or discard submitted by a workload task) or holding a filesystem it
fsynced; else the disks it read from; else all disks.

Sweeps are vectorised: boundaries are sorted once, counters are cumulative sums of
+1/-1 events, and priority among categories is resolved with cumulative unions
(V_k = union of categories 0..k; time exclusive to k = |V_k| - |V_k-1|).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from . import abi
from .classify import CATEGORIES, CATEGORY_OF_CLASS, CLASS_NAMES, DATA, FLUSH, LOG, METADATA
from .match import (
    Coverage, FlushShare, Requests, Stages, Window, check_keyed, first_start, join_calls, log2_hist,
    merge_unions, percentiles, union_intervals, union_sorted,
)

I64 = np.int64
WORKLOAD_CATEGORIES = ("cpu", "runqueue", "barrier", "log", "metadata", "data", "read",
                       "wait-other")
NO_TASK = "(no task)"

SYSCALL_NAMES_X86_64 = {
    0: "read", 1: "write", 2: "open", 3: "close", 4: "stat", 5: "fstat", 6: "lstat", 7: "poll",
    8: "lseek", 9: "mmap", 10: "mprotect", 11: "munmap", 12: "brk", 16: "ioctl", 17: "pread64",
    18: "pwrite64", 19: "readv", 20: "writev", 21: "access", 23: "select", 24: "sched_yield",
    26: "msync", 28: "madvise", 35: "nanosleep", 40: "sendfile", 56: "clone", 57: "fork",
    58: "vfork", 59: "execve", 60: "exit", 61: "wait4", 72: "fcntl", 73: "flock", 74: "fsync",
    75: "fdatasync", 76: "truncate", 77: "ftruncate", 78: "getdents", 82: "rename",
    83: "mkdir", 84: "rmdir", 85: "creat", 86: "link", 87: "unlink", 88: "symlink",
    89: "readlink", 90: "chmod", 91: "fchmod", 92: "chown", 93: "fchown", 132: "utime",
    162: "sync", 202: "futex", 217: "getdents64", 221: "fadvise64", 230: "clock_nanosleep",
    231: "exit_group", 232: "epoll_wait", 235: "utimes", 257: "openat", 258: "mkdirat",
    260: "fchownat", 262: "newfstatat", 263: "unlinkat", 264: "renameat", 265: "linkat",
    266: "symlinkat", 268: "fchmodat", 269: "faccessat", 270: "pselect6", 271: "ppoll",
    277: "sync_file_range", 280: "utimensat", 281: "epoll_pwait", 285: "fallocate",
    295: "preadv", 296: "pwritev", 306: "syncfs", 316: "renameat2", 326: "copy_file_range",
    327: "preadv2", 328: "pwritev2", 332: "statx", 426: "io_uring_enter", 435: "clone3",
    437: "openat2",
}


def syscall_name(nr: int) -> str:
    if nr < 0:
        return "none"
    return SYSCALL_NAMES_X86_64.get(nr, f"syscall_{nr}")


# -- generic priority machinery ---------------------------------------------------------

def cumulative_unions(ks: np.ndarray, ke: np.ndarray, prio: np.ndarray, nprio: int,
                      presorted: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """V_k = union of the intervals of priority 0..k, for each k (keyed or plain time)."""
    out = []
    prev: tuple[np.ndarray, np.ndarray] = (np.zeros(0, I64), np.zeros(0, I64))
    for k in range(nprio):
        m = prio == k
        if m.any():
            u = union_sorted(ks[m], ke[m]) if presorted else union_intervals(ks[m], ke[m])
            prev = merge_unions(prev, u)
        out.append(prev)
    return out


def group_lengths(us: np.ndarray, ue: np.ndarray, span: int, ngroups: int) -> np.ndarray:
    """Total length per group of disjoint keyed intervals (exact int64)."""
    cum = np.zeros(len(us) + 1, I64)
    np.cumsum(ue - us, out=cum[1:])
    b = np.searchsorted(us, np.arange(ngroups + 1, dtype=I64) * span)
    return cum[b[1:]] - cum[b[:-1]]


def exclusive_by_priority(unions: Sequence[tuple[np.ndarray, np.ndarray]], span: int,
                          ngroups: int) -> np.ndarray:
    """[ngroups, nprio] time exclusive to each priority (highest wins) per group."""
    cum = np.stack([group_lengths(u[0], u[1], span, ngroups) for u in unions], axis=1)
    out = cum.copy()
    out[:, 1:] -= cum[:, :-1]
    return out


def _unkey(u: tuple[np.ndarray, np.ndarray], span: int, origin: int,
           groups: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Intervals of some groups of a keyed union, back in plain time, merged."""
    ss, ee = [], []
    for g in groups:
        lo, hi = np.searchsorted(u[0], [g * span, (g + 1) * span])
        ss.append(u[0][lo:hi] - g * span + origin)
        ee.append(u[1][lo:hi] - g * span + origin)
    if not ss:
        return np.zeros(0, I64), np.zeros(0, I64)
    if len(ss) == 1:
        return ss[0], ee[0]
    return union_intervals(np.concatenate(ss), np.concatenate(ee))


# -- device view ------------------------------------------------------------------------

def device_unions(rq: Requests, st: Stages, cls: np.ndarray):
    """Per-category keyed unions of device stages (U_c) and their cumulative unions."""
    prio = CATEGORY_OF_CLASS[cls[st.idx]]
    per_cat = []
    for k in range(len(CATEGORIES)):
        m = prio == k
        per_cat.append(union_sorted(st.ks[m], st.ke[m]) if m.any()
                       else (np.zeros(0, I64), np.zeros(0, I64)))
    cumul = []
    prev = (np.zeros(0, I64), np.zeros(0, I64))
    for u in per_cat:
        prev = merge_unions(prev, u)
        cumul.append(prev)
    return per_cat, cumul


def queue_depth(st: Stages, ndev: int, elapsed: int, buckets: int) -> dict[str, Any]:
    """Depth (device stages in flight) per device: area, exact max, mean per time bucket.

    One sort merges every stage start and end (ends first at equal times); the running
    count is the depth, and its integral sampled at the bucket edges gives the exact
    time-weighted mean depth of each bucket.
    """
    span = st.span
    nb = max(buckets, 1)
    width = max(1, -(-elapsed // nb))
    maxd = np.zeros(ndev, I64)
    area = np.zeros(ndev, I64)
    series = np.zeros((ndev, nb))
    if not len(st.ks) or elapsed <= 0:
        return {"area": area, "max": maxd, "series": series, "step_ns": width}
    n = len(st.ks)
    ev = np.empty(2 * n, I64)
    np.left_shift(st.ke, 1, out=ev[:n])
    np.left_shift(st.ks, 1, out=ev[n:])
    ev[n:] |= 1
    ev.sort()
    step = (ev & 1).astype(np.int8)
    step *= 2
    step -= 1
    depth = np.cumsum(step, dtype=np.int32)
    del step
    ev >>= 1  # event times (keyed)
    starts = np.arange(ndev + 1, dtype=I64) * span
    b = np.searchsorted(ev, starts)
    edges_rel = np.minimum(np.arange(nb + 1, dtype=I64) * width, elapsed)
    # For every device and bucket edge t: j = last event <= t. The integral of depth from
    # the first event to t is P(j) + depth[j] * (t - ev[j]), P(j) = sum over i < j of
    # (ev[i+1] - ev[i]) * depth[i]; P is accumulated block by block (no 2N temporary).
    devs, js, ts = [], [], []
    for g in range(ndev):
        lo, hi = int(b[g]), int(b[g + 1])
        if hi <= lo:
            continue
        maxd[g] = int(depth[lo:hi].max())
        t = g * span + edges_rel
        j = np.searchsorted(ev[lo:hi], t, side="right") - 1 + lo
        devs.append(g)
        js.append(np.concatenate(([lo], np.maximum(j, lo))))
        ts.append(np.concatenate(([-1], np.where(j >= lo, t, -1))))
    if devs:
        jall = np.concatenate(js)
        order = np.argsort(jall, kind="stable")
        want = jall[order]
        pj = np.zeros(len(want), I64)
        carry = 0
        block = 1 << 20
        k = 0
        for a in range(0, len(ev) - 1, block):
            e = min(a + block, len(ev) - 1)
            seg = ev[a + 1:e + 1] - ev[a:e]
            seg *= depth[a:e]
            cs = np.cumsum(seg)
            del seg
            # wanted p in [a, e): P(p) = carry + (cs[p - a - 1] if p > a else 0)
            k2 = int(np.searchsorted(want, e, side="left"))
            sel = want[k:k2]
            pj[k:k2] = carry + np.where(sel > a, cs[np.maximum(sel - a - 1, 0)], 0)
            k = k2
            carry += int(cs[-1])
        pj[k:] = carry  # the last event
        pall = np.empty_like(pj)
        pall[order] = pj
        tall = np.concatenate(ts)
        part = pall + depth[jall].astype(I64) * np.maximum(tall - ev[jall], 0)
        lens = np.diff(edges_rel)
        for i, g in enumerate(devs):
            blk = slice(i * (nb + 2), (i + 1) * (nb + 2))
            p0 = pall[blk][0]  # P at the device's first event
            integ = np.where(tall[blk][1:] >= 0, part[blk][1:] - p0, 0)
            area[g] = int(integ[-1])
            series[g] = np.diff(integ) / np.maximum(lens, 1)
    used = -(-elapsed // width)  # buckets that hold some of the window
    return {"area": area, "max": maxd, "series": series[:, :used], "step_ns": width}


def device_view(rq: Requests, st: Stages, cls: np.ndarray, window: Window, fl: FlushShare,
                meta: Mapping[str, Any], cumul, buckets: int) -> list[dict[str, Any]]:
    ndev = len(rq.devices)
    elapsed = window.elapsed_ns
    excl = exclusive_by_priority(cumul, st.span, ndev)
    qd = queue_depth(st, ndev, elapsed, buckets)
    by_mm = {(int(d.get("major", -1)), int(d.get("minor", -1))): d
             for d in meta.get("devices", []) or []}
    # Requests and bytes per (device, op) in one weighted count.
    key = rq.dev * 16 + np.minimum(rq.op, 15)
    cnt = np.bincount(key, minlength=ndev * 16).reshape(ndev, 16)
    byt = np.bincount(key, weights=rq.nbytes, minlength=ndev * 16).reshape(ndev, 16)
    del key
    counts = cnt.sum(axis=1)
    rbytes = byt[:, abi.OP_READ]
    wbytes = byt[:, abi.OP_WRITE]
    ffdev = rq.dev[fl.ff_idx]
    out = []
    for g, (maj, mn) in enumerate(rq.devices):
        m = by_mm.get((maj, mn), {})
        busy = int(excl[g].sum())
        ffm = ffdev == g
        pm = ffdev[fl.pair_ff] == g if len(fl.pair_ff) else np.zeros(0, bool)
        shared: dict[str, int] = {}
        if pm.any():
            wcls = cls[fl.pair_waiter[pm]]
            sums = np.bincount(wcls, weights=fl.pair_share_ns[pm], minlength=len(CLASS_NAMES))
            shared = {CLASS_NAMES[c]: int(round(sums[c])) for c in range(len(CLASS_NAMES))
                      if sums[c]}
        unclaimed = int(fl.ff_ns[ffm & (fl.ff_waiters == 0)].sum())
        ff_lat = fl.ff_ns[ffm]
        wm = rq.dev[fl.waiter_idx] == g
        out.append({
            "name": m.get("name") or f"{maj}:{mn}",
            "major": maj, "minor": mn,
            "rotational": m.get("rotational"), "write_cache": m.get("write_cache"),
            "fua": m.get("fua"),
            "requests": int(counts[g]),
            "read_bytes": int(rbytes[g]), "write_bytes": int(wbytes[g]),
            "busy_ns": busy,
            "busy_by_category_ns": {CATEGORIES[k]: int(excl[g, k]) for k in range(len(CATEGORIES))},
            "idle_ns": max(0, elapsed - busy),
            "utilisation": round(busy / elapsed, 6) if elapsed else 0.0,
            "queue_depth": {
                "buckets": len(qd["series"][g]),
                "mean": round(int(qd["area"][g]) / elapsed, 4) if elapsed else 0.0,
                "mean_busy": round(int(qd["area"][g]) / busy, 4) if busy else 0.0,
                "max": int(qd["max"][g]),
                "step_ns": int(qd["step_ns"]),
                "series": [round(float(x), 3) for x in qd["series"][g]],
            },
            "flush": {
                "count": int(ffm.sum()),
                "device_ns": percentiles(ff_lat, (50, 90, 99)),
                "total_ns": int(ff_lat.sum()),
                "waiters": int(wm.sum()),
                "waiting_ns": int(fl.waiter_flush_ns[wm].sum()),
                "shared_ns_by_class": shared,
                "unclaimed_ns": unclaimed,
            },
        })
    return out


# -- workload view -----------------------------------------------------------------------

def task_lifetimes(tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                   window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tids, birth, death) of every thread seen. Birth: its ROOT/FORK event, else its
    first off-CPU interval; death: its EXIT, else the window end. Clipped to the window."""
    w0, w1 = window.start_ns, window.end_ns
    ttid = np.asarray(tasks["tid"]).astype(I64)
    otid = np.asarray(off["tid"]).astype(I64)
    tids = np.unique(np.concatenate((ttid, otid)))
    n = len(tids)
    birth = np.full(n, w1 + 1, I64)
    death = np.full(n, w1, I64)
    if len(ttid):
        ev = np.asarray(tasks["event_u16"])
        ts = np.asarray(tasks["ts_ns"]).astype(I64)
        ti = np.searchsorted(tids, ttid)
        b = (ev == abi.TASK_ROOT) | (ev == abi.TASK_FORK)
        np.minimum.at(birth, ti[b], ts[b])
        x = ev == abi.TASK_EXIT
        dd = np.full(n, w1 + 1, I64)
        np.minimum.at(dd, ti[x], ts[x])
        death = np.where(dd <= w1, dd, w1)
    nob = birth > w1
    if nob.any() and len(otid):
        first = np.full(n, w1 + 1, I64)
        np.minimum.at(first, np.searchsorted(tids, otid),
                      np.asarray(off["start_ns"]).astype(I64))
        birth = np.where(nob, first, birth)
    birth = np.where(birth > w1, w0, birth)
    birth = np.clip(birth, w0, w1)
    death = np.clip(np.maximum(death, birth), w0, w1)
    return tids, birth, death


def workload_view(window: Window, tasks: Mapping[str, np.ndarray],
                  off: Mapping[str, np.ndarray], covers: Sequence[Coverage],
                  waits: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """Attribution of every ns of the window (sums exactly to elapsed); see module doc.

    covers: cumulative coverages V_0..V_4 of the workload's devices; waits: intervals
    during which a flush-sequenced request waited for its flushes (barrier wherever
    blocked, whatever else is in flight).
    """
    w0, w1 = window.start_ns, window.end_ns
    tids, birth, death = task_lifetimes(tasks, off, window)
    otid = np.asarray(off["tid"]).astype(I64)
    oi = np.searchsorted(tids, otid)
    lo = birth[oi] if len(oi) else np.zeros(0, I64)
    hi = death[oi] if len(oi) else np.zeros(0, I64)
    s = np.clip(np.asarray(off["start_ns"]).astype(I64), lo, hi)
    e_raw = np.asarray(off["end_ns"]).astype(I64)
    e = np.clip(np.where(e_raw > 0, e_raw, hi), lo, hi)
    e = np.maximum(e, s)
    wk = np.asarray(off["waking_ns"]).astype(I64)
    w = np.clip(np.where(wk > 0, wk, s), s, e)
    sysnr = np.asarray(off["syscall_nr"]).astype(np.int32)
    nt, no = len(tids), len(s)
    ws, we = waits if waits is not None else (np.zeros(0, I64), np.zeros(0, I64))
    ws = np.clip(ws, w0, w1)
    we = np.clip(we, w0, w1)
    nw = len(ws)
    # Events: time, dAlive, dOff, dRunq, dBlocked (+syscall of blocked events), dWait.
    T = np.concatenate((birth, death, s, w, e, np.array([w0, w1], I64), ws, we))
    tail = np.zeros(2 + 2 * nw, np.int8)
    dA = np.concatenate((np.ones(nt, np.int8), -np.ones(nt, np.int8),
                         np.zeros(3 * no, np.int8), tail))
    dO = np.concatenate((np.zeros(2 * nt, np.int8), np.ones(no, np.int8), np.zeros(no, np.int8),
                         -np.ones(no, np.int8), tail))
    dR = np.concatenate((np.zeros(2 * nt + no, np.int8), np.ones(no, np.int8),
                         -np.ones(no, np.int8), tail))
    dW = np.concatenate((np.zeros(2 * nt + 3 * no + 2, np.int8), np.ones(nw, np.int8),
                         -np.ones(nw, np.int8)))
    order = np.argsort(T, kind="stable")
    T = T[order]
    n_alive = np.cumsum(dA[order], dtype=np.int32)
    n_off = np.cumsum(dO[order], dtype=np.int32)
    n_runq = np.cumsum(dR[order], dtype=np.int32)
    n_wait = np.cumsum(dW[order], dtype=np.int32)
    # State after all events at one time holds until the next distinct time.
    last = np.flatnonzero(np.append(T[1:] != T[:-1], True))
    seg_a = T[last][:-1]
    seg_b = T[last][1:]
    n_alive, n_off, n_runq = n_alive[last][:-1], n_off[last][:-1], n_runq[last][:-1]
    in_wait = n_wait[last][:-1] > 0
    inside = (seg_a >= w0) & (seg_b <= w1)
    seg_len = np.where(inside, seg_b - seg_a, 0)
    oncpu = (n_alive - n_off) > 0
    runq = ~oncpu & (n_runq > 0)
    blocked = ~oncpu & ~runq & ((n_off - n_runq) > 0)
    none = ~oncpu & ~runq & ~blocked
    res: dict[str, int] = {k: 0 for k in WORKLOAD_CATEGORIES}
    res["cpu"] = int(seg_len[oncpu].sum())
    res["runqueue"] = int(seg_len[runq].sum())
    bi = np.flatnonzero(blocked & (seg_len > 0))
    ba, bb = seg_a[bi], seg_b[bi]
    # A whole elementary segment is inside the flush-wait windows or outside them.
    wseg = in_wait[bi]
    blen = bb - ba
    prev = np.where(wseg, blen, 0)
    for k, cat in enumerate(CATEGORIES):
        cur = prev if k >= len(covers) else np.where(wseg, blen, covers[k].within(ba, bb))
        res[cat] = int((cur - prev).sum()) + (int(prev.sum()) if k == 0 else 0)
        prev = cur
    leftover = blen - prev
    by_sys: dict[str, int] = {}
    blocked_by_sys: dict[str, int] = {}
    if len(bi):
        # The syscall most blocked threads are in during each blocked segment.
        ev_sys = np.concatenate((np.full(2 * nt, -2, np.int32), sysnr, sysnr,
                                 np.full(no + 2 + 2 * nw, -2, np.int32)))[order]
        dB = np.concatenate((np.zeros(2 * nt, np.int8), np.ones(no, np.int8),
                             -np.ones(no, np.int8), np.zeros(no + 2 + 2 * nw, np.int8)))[order]
        cands = np.unique(sysnr[w > s])
        cands = np.concatenate((cands[cands >= 0], cands[cands < 0]))
        best = np.full(len(bi), -3, np.int32)
        best_n = np.zeros(len(bi), np.int32)
        seg_idx = last[:-1][bi]
        for nr in cands:
            cnt = np.cumsum(np.where(ev_sys == nr, dB, 0), dtype=np.int32)[seg_idx]
            better = cnt > best_n
            best[better] = nr
            best_n[better] = cnt[better]
        for nr in np.unique(best):
            m = best == nr
            name = syscall_name(int(nr)) if nr >= -1 else "none"
            lv = int(leftover[m].sum())
            if lv:
                by_sys[name] = by_sys.get(name, 0) + lv
            blocked_by_sys[name] = blocked_by_sys.get(name, 0) + int((bb - ba)[m].sum())
    no_task = int(seg_len[none].sum())
    if no_task:
        by_sys[NO_TASK] = no_task
    res["wait-other"] = int(leftover.sum()) + no_task
    return {
        "attribution_ns": res,
        "wait_other_by_syscall_ns": dict(sorted(by_sys.items(), key=lambda kv: -kv[1])),
        "blocked_by_syscall_ns": dict(sorted(blocked_by_sys.items(), key=lambda kv: -kv[1])),
        "threads": int(nt),
        "offcpu_intervals": int(no),
    }


def workload_covers(rq: Requests, st: Stages, cumul, fl: FlushShare, relevant: Sequence[int]
                    ) -> tuple[list[Coverage], tuple[np.ndarray, np.ndarray]]:
    """Cumulative coverages V_0..V_4 (barrier.. read) of the workload's devices, and the
    flush-wait windows of flush-sequenced requests on them (see workload_view)."""
    span, w0 = st.span, st.origin
    covers = [Coverage(*_unkey(u, span, w0, relevant)) for u in cumul]
    wi = fl.waiter_idx
    if len(wi) and len(relevant) < len(rq.devices):
        wi = wi[np.isin(rq.dev[wi], np.asarray(list(relevant), dtype=np.int32))]
    if not len(wi):
        return covers, (np.zeros(0, I64), np.zeros(0, I64))
    w1 = w0 + span - 2
    ws = np.clip(first_start(rq, wi), w0, w1)
    we = np.clip(rq.done[wi], w0, w1)
    issued = rq.issue[wi] > 0
    ds = np.clip(np.where(issued, rq.issue[wi], we), ws, we)
    de = np.clip(np.where(issued, rq.data_done[wi], we), ds, we)
    return covers, (np.concatenate((ws, de)), np.concatenate((ds, we)))


def relevant_devices(rq: Requests, fsync_devs: Sequence[tuple[int, int]],
                     meta: Mapping[str, Any]) -> list[int]:
    """The workload's devices: disks it writes to (writes, flushes or discards submitted by
    a workload task) or holding a filesystem it called an fsync-family call on; else the
    disks it read from; else every disk."""
    nd = len(rq.devices)
    if not nd:
        return []
    key = rq.dev * 2 + (rq.op != abi.OP_READ)
    key = key[(rq.flags & abi.RQ_TRACKED) != 0]
    cnt = np.bincount(key, minlength=2 * nd).reshape(nd, 2)
    rel = {int(i) for i in np.flatnonzero(cnt[:, 1])}
    index = {d: i for i, d in enumerate(rq.devices)}
    for fs in meta.get("filesystems", []) or []:
        keys = {(fs.get("dev_major"), fs.get("dev_minor")),
                (fs.get("st_dev_major"), fs.get("st_dev_minor"))}
        if any(k in fsync_devs for k in keys):
            disk = (fs.get("disk_major"), fs.get("disk_minor"))
            if disk in index:
                rel.add(index[disk])
    if not rel:
        rel = {int(i) for i in np.flatnonzero(cnt[:, 0])}
    return sorted(rel) if rel else list(range(nd))


# -- fsync view ----------------------------------------------------------------------------

def _hull_update(c0: np.ndarray, c1: np.ndarray, idx: np.ndarray, a: np.ndarray,
                 b: np.ndarray) -> None:
    np.minimum.at(c0, idx, a)
    np.maximum.at(c1, idx, b)


def dev_codes(*pairs: tuple[Any, Any]) -> list[np.ndarray]:
    """One small integer code per (major, minor), shared across several arrays."""
    keys = [(np.asarray(ma).astype(I64) << 20) | np.asarray(mi).astype(I64) for ma, mi in pairs]
    allk = np.unique(np.concatenate(keys)) if keys else np.zeros(0, I64)
    return [np.searchsorted(allk, k).astype(I64) for k in keys]


def seq_key(code: np.ndarray, seq: Any) -> np.ndarray:
    """(device code, 52-bit sequence) as one int64 key (XFS lsn cycles stay < 2^20)."""
    low = (np.asarray(seq).astype(np.uint64) & np.uint64((1 << 52) - 1)).astype(I64)
    return (np.asarray(code, dtype=I64) << 52) | low


def fsync_view(window: Window, fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
               rq: Requests, cls: np.ndarray, call_of_req: np.ndarray) -> dict[str, Any]:
    """fsync-family calls: latency per call type and per-call waiting breakdown."""
    w0, w1 = window.start_ns, window.end_ns
    n = len(fs["enter_ns"])
    enter = np.clip(np.asarray(fs["enter_ns"]).astype(I64), w0, w1)
    ex_raw = np.asarray(fs["exit_ns"]).astype(I64)
    fflags = np.asarray(fs["flags_u16"])
    incomplete = ((fflags & abi.FS_F_INCOMPLETE) != 0) | (ex_raw == 0)
    exit_ = np.clip(np.where(ex_raw > 0, ex_raw, w1), enter, w1)
    lat = exit_ - enter
    call = np.asarray(fs["call_u16"])
    fstype = np.asarray(fs["fs_u16"])
    tid = np.asarray(fs["tid"]).astype(I64)
    empty = {"count": 0, "incomplete": 0, "latency_ns": percentiles(np.zeros(0, I64), (50, 90, 99)),
             "by_call": {}, "split_ns": {"data": 0, "commit": 0, "flush": 0, "other": 0}}
    if n == 0:
        return {**empty, "_per_call": None}
    # Per-call waiting components: own data writes, the commit/log force, own flushes.
    own = call_of_req >= 0
    ri = np.flatnonzero(own)
    rc = call_of_req[ri]
    rcls = cls[ri]
    st = np.clip(first_start(rq, ri), enter[rc], exit_[rc])
    en = np.clip(rq.done[ri], st, exit_[rc])
    c0 = np.full(n, w1 + 1, I64)
    c1 = np.full(n, w0 - 1, I64)
    seq_ok = (fflags & abi.FS_F_SEQ) != 0
    needed = np.zeros(n, bool)
    commit_id = np.full(n, -1, I64)
    ev = np.asarray(jr["event_u16"]) if len(jr.get("event_u16", [])) else np.zeros(0, np.uint16)
    jts = np.asarray(jr["ts_ns"]).astype(I64) if len(ev) else np.zeros(0, I64)
    # ext4 jbd2: the commit whose tid the inode needed.
    e4 = np.flatnonzero((fstype == abi.FS_EXT4) & seq_ok)
    if len(e4) and len(ev):
        jcode, fcode = dev_codes((jr["dev_major"], jr["dev_minor"]),
                                 (np.asarray(fs["dev_major"])[e4], np.asarray(fs["dev_minor"])[e4]))
        jk = seq_key(jcode, jr["seq"])
        st_m = ev == abi.J_JBD2_START
        en_m = ev == abi.J_JBD2_END
        keys = np.unique(jk[st_m | en_m])
        cs = np.full(len(keys), w0, I64)
        ce = np.full(len(keys), w1, I64)
        cs[np.searchsorted(keys, jk[st_m])] = jts[st_m]
        ce[np.searchsorted(keys, jk[en_m])] = jts[en_m]
        fk = seq_key(fcode, np.asarray(fs["commit_seq"])[e4])
        pos = np.clip(np.searchsorted(keys, fk), 0, max(len(keys) - 1, 0))
        hit = (keys[pos] == fk) if len(keys) else np.zeros(len(e4), bool)
        a = np.maximum(cs[pos], enter[e4])
        b = np.minimum(ce[pos], exit_[e4])
        hit &= b > a
        _hull_update(c0, c1, e4[hit], a[hit], b[hit])
        needed[e4[hit]] = True
        commit_id[e4[hit]] = pos[hit]
    # ext4 fast commit and XFS log force, in the calling task.
    for evs, kind in (((abi.J_EXT4_FC_START, abi.J_EXT4_FC_STOP), "fc"),
                      ((abi.J_XFS_FORCE,), "xfs")):
        m = np.isin(ev, evs) if len(ev) else np.zeros(0, bool)
        if not m.any():
            continue
        ji = np.flatnonzero(m)
        jc = join_calls(np.asarray(jr["tid"])[ji].astype(I64), jts[ji], tid, enter, exit_)
        ok = jc >= 0
        ji, jc = ji[ok], jc[ok]
        if kind == "xfs":
            _hull_update(c0, c1, jc, jts[ji], exit_[jc])
        else:
            _hull_update(c0, c1, jc, jts[ji], jts[ji])
        needed[jc] = True
    # btrfs (in-task): from its first log write to the call's exit.
    bl = rcls == LOG
    bl &= fstype[rc] == abi.FS_BTRFS
    if bl.any():
        _hull_update(c0, c1, rc[bl], st[bl], exit_[rc[bl]])
        needed[rc[bl]] = True
    has_c = c1 > c0
    # Per-call priority timeline: data (0) > commit (1) > flush (2), call-relative keys.
    dm = rcls == DATA
    fm = rcls == FLUSH
    gi = np.concatenate((rc[dm], np.flatnonzero(has_c), rc[fm]))
    gs = np.concatenate((st[dm], c0[has_c], st[fm]))
    ge = np.concatenate((en[dm], c1[has_c], en[fm]))
    gp = np.concatenate((np.zeros(int(dm.sum()), np.int8), np.ones(int(has_c.sum()), np.int8),
                         np.full(int(fm.sum()), 2, np.int8)))
    cspan = int(lat.max()) + 2 if n else 2
    check_keyed(n, cspan)
    ks = gi.astype(I64) * cspan + (gs - enter[gi])
    ke = gi.astype(I64) * cspan + (ge - enter[gi])
    unions = cumulative_unions(ks, ke, gp, 3, presorted=False)
    comp = exclusive_by_priority(unions, cspan, n)
    other = lat - comp.sum(axis=1)
    per_call = {"latency": lat, "data": comp[:, 0], "commit": comp[:, 1], "flush": comp[:, 2],
                "other": other, "call": call, "needed": needed, "commit_id": commit_id,
                "incomplete": incomplete, "enter": enter, "exit": exit_, "tid": tid}
    out: dict[str, Any] = {
        "count": int(n),
        "incomplete": int(incomplete.sum()),
        "latency_ns": percentiles(lat[~incomplete], (50, 90, 99)),
        "split_ns": {"data": int(comp[:, 0].sum()), "commit": int(comp[:, 1].sum()),
                     "flush": int(comp[:, 2].sum()), "other": int(other.sum())},
        "by_call": {},
    }
    for c in np.unique(call):
        m = call == c
        ok = m & ~incomplete
        name = abi.CALL_NAMES.get(int(c), f"call_{int(c)}")
        out["by_call"][name] = {
            "count": int(m.sum()),
            "incomplete": int((m & incomplete).sum()),
            "latency_ns": percentiles(lat[ok], (50, 90, 99)),
            "total_ns": int(lat[m].sum()),
            "hist_log2_us": log2_hist(lat[ok] // 1000),
            "split_ns": {"data": int(comp[m, 0].sum()), "commit": int(comp[m, 1].sum()),
                         "flush": int(comp[m, 2].sum()), "other": int(other[m].sum())},
            "needed_commit": int((m & needed).sum()),
        }
    out["_per_call"] = per_call
    return out


# -- commits -----------------------------------------------------------------------------

def _phase(d: np.ndarray) -> dict[str, Any]:
    return percentiles(d[d >= 0], (50, 90))


def commits_view(window: Window, jr: Mapping[str, np.ndarray], fsv: Mapping[str, Any],
                 fs: Mapping[str, np.ndarray], log_bytes: int) -> dict[str, Any]:
    w0, w1 = window.start_ns, window.end_ns
    ev = np.asarray(jr["event_u16"]) if len(jr.get("event_u16", [])) else np.zeros(0, np.uint16)
    ts = np.asarray(jr["ts_ns"]).astype(I64) if len(ev) else np.zeros(0, I64)
    out: dict[str, Any] = {}
    total = 0
    # jbd2
    jm = (ev >= abi.J_JBD2_START) & (ev <= abi.J_JBD2_STATS)
    if jm.any():
        jk = seq_key(dev_codes((jr["dev_major"], jr["dev_minor"]))[0], jr["seq"])[jm]
        jev, jts = ev[jm], ts[jm]
        keys = np.unique(jk)
        pos = np.searchsorted(keys, jk)
        tab = {}
        for e in (abi.J_JBD2_START, abi.J_JBD2_LOCKING, abi.J_JBD2_FLUSHING,
                  abi.J_JBD2_LOGGING, abi.J_JBD2_END):
            col = np.full(len(keys), -1, I64)
            m = jev == e
            col[pos[m]] = jts[m]
            tab[e] = col
        blocks = np.zeros(len(keys), I64)
        sm = jev == abi.J_JBD2_STATS
        if sm.any():
            blocks[pos[sm]] = np.asarray(jr["aux2"])[jm][sm].astype(I64)
        s, lk, fl, lg, en = (tab[e] for e in (abi.J_JBD2_START, abi.J_JBD2_LOCKING,
                                              abi.J_JBD2_FLUSHING, abi.J_JBD2_LOGGING,
                                              abi.J_JBD2_END))

        def span_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return np.where((a >= 0) & (b >= 0), b - a, -1)
        done = en >= 0
        n_c = int(done.sum())
        total += n_c
        out["jbd2"] = {
            "count": n_c,
            "duration_ns": _phase(span_of(s, en)),
            "phases_ns": {"locking": _phase(span_of(lk, fl)),
                          "flushing": _phase(span_of(fl, lg)),
                          "logging": _phase(span_of(lg, en))},
            "blocks_logged": int(blocks.sum()),
        }
    fcm = ev == abi.J_EXT4_FC_STOP
    if fcm.any():
        status = np.asarray(jr["aux1"])[fcm].astype(I64)
        st_names = {0: "ok", 1: "ineligible", 2: "skipped", 3: "failed"}
        ok = int((status == 0).sum())
        total += ok
        out["ext4_fast_commit"] = {
            "count": int(fcm.sum()),
            "by_status": {st_names.get(int(k), str(int(k))): int((status == k).sum())
                          for k in np.unique(status)},
        }
    # XFS iclogs
    xm = (ev == abi.J_XLOG_SYNC) | (ev == abi.J_XLOG_WRITE) | (ev == abi.J_XLOG_DONE)
    if xm.any():
        xk = seq_key(dev_codes((jr["dev_major"], jr["dev_minor"]))[0], jr["seq"])[xm]
        xev, xts = ev[xm], ts[xm]
        keys = np.unique(xk)
        pos = np.searchsorted(keys, xk)
        cols = {}
        for e in (abi.J_XLOG_SYNC, abi.J_XLOG_WRITE, abi.J_XLOG_DONE):
            col = np.full(len(keys), -1, I64)
            m = xev == e
            col[pos[m]] = xts[m]
            cols[e] = col
        ibytes = np.zeros(len(keys), I64)
        sm = xev == abi.J_XLOG_SYNC
        ibytes[pos[sm]] = np.asarray(jr["aux1"])[xm][sm].astype(I64)
        sy, wr, dn = cols[abi.J_XLOG_SYNC], cols[abi.J_XLOG_WRITE], cols[abi.J_XLOG_DONE]
        n_c = int((dn >= 0).sum())
        total += n_c
        # Log force -> first iclog completion on the same device at or after it.
        fm = ev == abi.J_XFS_FORCE
        force_lat = np.zeros(0, I64)
        if fm.any():
            dkey = (np.asarray(jr["dev_major"]).astype(I64) << 20) | np.asarray(jr["dev_minor"])
            udev = np.unique(dkey[fm | (ev == abi.J_XLOG_DONE)])
            span = window.span
            check_keyed(len(udev), span)
            dmask = ev == abi.J_XLOG_DONE
            dk = np.searchsorted(udev, dkey[dmask]) * span + np.clip(ts[dmask], w0, w1) - w0
            dk.sort()
            fk = np.searchsorted(udev, dkey[fm]) * span + np.clip(ts[fm], w0, w1) - w0
            p = np.searchsorted(dk, fk, side="left")
            okp = p < len(dk)
            same = np.zeros(len(fk), bool)
            same[okp] = (dk[p[okp]] // span) == (fk[okp] // span)
            force_lat = dk[p[same]] - fk[same]
        out["xfs"] = {
            "count": n_c,
            "forces": int(fm.sum()),
            "force_to_iclog_done_ns": _phase(force_lat),
            "iclog_ns": _phase(np.where((sy >= 0) & (dn >= 0), dn - sy, -1)),
            "iclog_io_ns": _phase(np.where((wr >= 0) & (dn >= 0), dn - wr, -1)),
            "iclog_bytes": int(ibytes.sum()),
        }
    bm = ev == abi.J_BTRFS_COMMIT
    pc = fsv.get("_per_call")
    btrfs_log = 0
    if pc is not None:
        btrfs_calls = np.asarray(fs["fs_u16"]) == abi.FS_BTRFS
        btrfs_log = int((btrfs_calls & pc["needed"]).sum())
    if bm.any() or btrfs_log:
        total += int(bm.sum()) + btrfs_log
        out["btrfs"] = {"transaction_commits": int(bm.sum()), "log_syncs": btrfs_log}
    # Batching: calls that needed a commit / distinct commits they needed.
    fpc = None
    if pc is not None:
        needed = pc["needed"]
        if needed.any():
            cid = pc["commit_id"]
            with_id = needed & (cid >= 0)
            distinct = len(np.unique(cid[with_id])) + int((needed & (cid < 0)).sum())
            # XFS: calls forcing the same CIL sequence share one commit.
            xf = needed & (cid < 0) & (np.asarray(fs["fs_u16"]) == abi.FS_XFS) & \
                ((np.asarray(fs["flags_u16"]) & abi.FS_F_SEQ) != 0)
            if xf.any():
                xk = seq_key(dev_codes((np.asarray(fs["dev_major"])[xf],
                                        np.asarray(fs["dev_minor"])[xf]))[0],
                             np.asarray(fs["commit_seq"])[xf])
                distinct -= int(xf.sum()) - len(np.unique(xk))
            fpc = round(int(needed.sum()) / distinct, 3) if distinct else None
    out_all = {
        "count": int(total),
        "fsyncs_per_commit": fpc,
        "log_bytes": int(log_bytes),
        "bytes_logged_per_commit": int(log_bytes // total) if total else None,
    }
    out_all.update(out)
    return out_all


# -- placement and locality --------------------------------------------------------------

def floor_log2(v: np.ndarray) -> np.ndarray:
    """floor(log2(v)) of integers 1 <= v < 2^53, read from the float64 exponent."""
    return (np.asarray(v).astype(np.float64).view(I64) >> 52) - 1023


def seek_slots(absseek: np.ndarray) -> np.ndarray:
    """0 -> slot 0 (contiguous); [2^(i-1), 2^i) sectors -> slot i."""
    v = np.asarray(absseek, dtype=I64)
    return np.where(v > 0, floor_log2(np.maximum(v, 1)) + 1, 0)


def _positioning(sk: np.ndarray, stage: np.ndarray, okl: np.ndarray,
                 bucket: np.ndarray) -> tuple[int, int, int]:
    """(positioning ns, requests with a baseline, data-stage ns) for one class.

    bucket: the baseline group of each request, (device, size bucket) as one small int.
    """
    z = (sk == 0) & okl
    zb = bucket[z]
    # (bucket, time) packed: the median of a bucket is the packed value at rank
    # first + (count + 1) // 2 - 1, found by chained partitions (no full sort).
    ng = int(bucket.max()) + 1 if len(bucket) else 1
    zk = (zb << 44) | np.minimum(stage[z], (1 << 44) - 1)
    cnt = np.bincount(zb, minlength=ng)
    del zb, z
    hg = cnt > 0
    ranks = (np.cumsum(cnt) - cnt + (cnt + 1) // 2 - 1)[hg]
    lo = 0
    for r in ranks.tolist():
        zk[lo:].partition(r - lo)
        lo = r + 1
    med = np.zeros(ng, I64)
    med[hg] = zk[ranks] & ((1 << 44) - 1)
    del zk
    has = hg[bucket] & okl
    posn = int((stage - med[bucket])[has].sum())
    return posn, int(has.sum()), int(stage[okl].sum())


def per_class(rq: Requests, st: Stages, cls: np.ndarray, with_placement: bool = True
              ) -> tuple[dict[str, Any], dict[str, Any], np.ndarray, np.ndarray]:
    """Per-class request figures and metadata placement; also requests and bytes by
    (device, class, op) as two [ndev, nclass, 16] arrays.

    Requests: counts, bytes, attributes, latency percentiles (fully observed requests
    only: not incomplete, not pre-dating the trace), seek p50.
    Placement: seek histogram (seek_slots), sequential share (seek 0), seek p50/p90,
    and positioning cost: the sum over the class's requests with a seek distance of
    (data-stage time - the median data-stage time of the zero-seek requests of the same
    device, class and size bucket, floor(log2(bytes))); requests whose bucket has no
    zero-seek request are left out (positioning_basis counts those kept).
    """
    bad = abi.RQ_INCOMPLETE | abi.RQ_UNMATCHED
    ncls = len(CLASS_NAMES)
    # Counts and bytes by (class, flag bits) and (class, op): a few passes over all rows.
    c32 = cls.astype(np.int32)
    key = c32 * 64 + (rq.flags & 63)
    by_flags = np.bincount(key, minlength=ncls * 64).reshape(ncls, 64)
    key = c32 * 128 + (rq.iflags & 127)
    by_iflags = np.bincount(key, minlength=ncls * 128).reshape(ncls, 128)
    ndev = max(len(rq.devices), 1)
    key = (rq.dev * ncls + c32) * 16 + np.minimum(rq.op, 15)
    dev_op = np.bincount(key, minlength=ndev * ncls * 16).reshape(ndev, ncls, 16)
    dev_bytes = np.bincount(key, weights=rq.nbytes,
                            minlength=ndev * ncls * 16).reshape(ndev, ncls, 16)
    by_op = dev_op.sum(axis=0)
    bytes_op = dev_bytes.sum(axis=0)
    del key, c32
    fbits = np.arange(64)
    ibits = np.arange(128)

    def nflag(k: int, table: np.ndarray, bits: np.ndarray, bit: int) -> int:
        return int(table[k][(bits & bit) != 0].sum())
    reqs: dict[str, Any] = {}
    place: dict[str, Any] = {}
    for k, name in enumerate(CLASS_NAMES):
        idx = np.flatnonzero(cls == k)
        issue, done = rq.issue[idx], rq.done[idx]
        insert = rq.insert[idx]
        ok = (rq.flags[idx] & bad) == 0
        issued = issue > 0
        lat = ok & issued
        dev = (done - issue)[lat]
        q = np.where(insert > 0, issue - insert, 0)[lat]
        start = np.where(insert > 0, insert, issue)
        sub = rq.submit[idx]
        start = np.where(sub > 0, sub, start)
        del sub
        tm = ok & (start > 0)
        tot = (done - start)[tm]
        del start, tm, done, insert
        reqs[name] = {
            "count": int(by_op[k].sum()),
            "bytes": int(round(bytes_op[k].sum())),
            "writes": int(by_op[k, abi.OP_WRITE]),
            "write_bytes": int(round(bytes_op[k, abi.OP_WRITE])),
            "issued": int(issued.sum()),
            "incomplete": nflag(k, by_flags, fbits, abi.RQ_INCOMPLETE),
            "tracked": nflag(k, by_flags, fbits, abi.RQ_TRACKED),
            "fua": nflag(k, by_iflags, ibits, abi.F_FUA),
            "preflush": nflag(k, by_iflags, ibits, abi.F_PREFLUSH),
            "sync": nflag(k, by_iflags, ibits, abi.F_SYNC),
            "device_total_ns": int(dev.sum()),
            "device_ns": percentiles(dev, (50, 90, 99), inplace=True),
            "queue_ns": percentiles(np.maximum(q, 0), (50, 90, 99), inplace=True),
            "total_ns": percentiles(np.maximum(tot, 0), (50, 90, 99), inplace=True),
            "seek_sectors": {"p50": None, "max": None},
        }
        del dev, q, tot, issue, issued
    # Placement: the requests with a seek distance, class by class.
    scls = cls[st.seek_idx]
    for k, name in enumerate(CLASS_NAMES):
        m = scls == k
        if not m.any():
            continue
        sidx = st.seek_idx[m]
        sk = np.abs(st.seek[m])
        if not with_placement:
            reqs[name]["seek_sectors"] = percentiles(sk, (50,), inplace=True)
            continue
        issue = rq.issue[sidx]
        stage = np.maximum(rq.data_done[sidx] - issue, 0)
        del issue
        ok = (rq.flags[sidx] & bad) == 0
        bucket = rq.dev[sidx].astype(I64) * 64 + floor_log2(np.maximum(rq.nbytes[sidx], 1))
        posn, basis, devt = _positioning(sk, stage, ok, bucket)
        del stage, bucket, ok
        hist = np.bincount(seek_slots(sk))
        seek = percentiles(sk, (50, 90), inplace=True)
        reqs[name]["seek_sectors"] = {"p50": seek["p50"], "max": seek["max"]}
        place[name] = {
            "requests_with_seek": int(len(sk)),
            "sequential_share": round(float(hist[0]) / len(sk), 6),
            "seek_sectors": seek,
            "seek_hist_log2": hist.tolist(),
            "positioning_ns": posn,
            "positioning_basis": basis,
            "device_ns": devt,
        }
    return reqs, place, dev_op, dev_bytes


def locality(rq: Requests, cls: np.ndarray, gap_ns: int) -> dict[str, Any]:
    """Write pairs adjacent on disk (one ends where the next starts, consecutive in on-disk
    order; equal starts ordered by issue time) and how many were issued > gap_ns apart."""
    wm = (rq.op == abi.OP_WRITE) & (rq.nbytes > 0) & (rq.issue > 0) & \
        ((cls == LOG) | (cls == METADATA) | (cls == DATA))
    wi = np.flatnonzero(wm)
    del wm
    res: dict[str, Any] = {"gap_ns": int(gap_ns), "adjacent_pairs": 0, "late_pairs": 0,
                           "late_share": None, "writes": int(len(wi))}
    if len(wi) < 2:
        return res
    sec = rq.sector[wi]
    sbits = (int(sec.max()) + (int(rq.nbytes[wi].max()) >> 9) + 1).bit_length()
    dbits = max(1, (len(rq.devices) - 1).bit_length())
    ibits = len(wi).bit_length()
    if dbits + sbits + ibits <= 63:
        # Sort (key, index) packed in one int64: a value sort is twice as fast as argsort.
        key = rq.dev[wi].astype(I64)
        key <<= sbits
        key |= sec
        del sec
        key <<= ibits
        key |= np.arange(len(wi), dtype=I64)
        key.sort()
        order = key & ((1 << ibits) - 1)
        key >>= ibits
    else:
        key = rq.dev[wi].astype(I64)
        key <<= sbits
        key |= sec
        del sec
        order = np.argsort(key)
        key = key[order]
    # Equal starts: order them by issue time (only the duplicated runs are re-sorted).
    eq = key[1:] == key[:-1]
    if eq.any():
        dup = np.zeros(len(key), bool)
        dup[1:] |= eq
        dup[:-1] |= eq
        di = np.flatnonzero(dup)
        sub = order[di]
        order[di] = sub[np.lexsort((rq.issue[wi[sub]], key[di]))]
    del eq
    wi = wi[order]
    del order
    end = (rq.nbytes[wi] + np.uint32(511)) >> np.uint32(9)
    adj = (key[:-1] + end[:-1]) == key[1:]
    del end, key
    iss = rq.issue[wi]
    late = adj & (np.abs(iss[1:] - iss[:-1]) > gap_ns)
    na, nl = int(adj.sum()), int(late.sum())
    res.update({"adjacent_pairs": na, "late_pairs": nl,
                "late_share": round(nl / na, 6) if na else None})
    return res
