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

import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from . import abi
from .classify import CATEGORIES, CATEGORY_OF_CLASS, CLASS_NAMES, DATA, FLUSH, LOG, METADATA
from .match import (
    UNOBSERVED, Coverage, FlushShare, Requests, Stages, Window, check_keyed,
    first_start, gather, group_sort, join_calls, log2_hist, merge_unions,
    percentiles, select, sort_with_order, sorted_percentiles, union_groups, union_intervals,
    union_sorted, unique,
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
    if nr == -2:  # --syscalls sync via raw_tp: outside a traced call, registers unread
        return "untraced-syscall"
    if nr < 0:
        return "none"
    return SYSCALL_NAMES_X86_64.get(nr, f"syscall_{nr}")


# -- generic priority machinery ---------------------------------------------------------

def group_lengths(us: np.ndarray, ue: np.ndarray, span: int, ngroups: int) -> np.ndarray:
    """Total length per group of disjoint keyed intervals (exact int64)."""
    if ngroups > 64 and span < (1 << 53):
        # Many groups: count each interval in its group directly. A group's total is at
        # most span < 2^53, so the float64 sums of integer lengths are exact.
        if not len(us):
            return np.zeros(ngroups, I64)
        g = us // span
        return np.bincount(g, weights=ue - us, minlength=ngroups)[:ngroups].astype(I64)
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
    prio = st.stage_cat if st.stage_cat is not None else \
        np.take(CATEGORY_OF_CLASS, gather(cls, st.idx))
    per_cat = union_groups(st.ks, st.ke, prio, len(CATEGORIES))
    del prio
    cumul = []
    prev = (np.zeros(0, I64), np.zeros(0, I64))
    for u in per_cat:
        prev = merge_unions(prev, u)
        cumul.append(prev)
    return per_cat, cumul


def queue_depth(st: Stages, ndev: int, elapsed: int, buckets: int) -> dict[str, Any]:
    """Depth (device stages in flight) per device: area, exact max, mean per time bucket.

    The integral of the depth up to t is sum(t - start) over starts before t minus
    sum(t - end) over ends before t: exact integers from the sorted starts and ends at
    the bucket edges. The max needs the running count: the sorted ends and the (already
    sorted) starts are merged (ends first at equal times) and the count accumulated.
    """
    span = st.span
    nb = max(buckets, 1)
    width = max(1, -(-elapsed // nb))
    n = len(st.ks)
    maxd = np.zeros(ndev, I64)
    area = np.zeros(ndev, I64)
    series = np.zeros((ndev, nb))
    if not n or elapsed <= 0:
        return {"area": area, "max": maxd, "series": series, "step_ns": width}
    # The sorted ends: computed with the stages' service times (match.service_times).
    ke = st.ends_sorted if st.ends_sorted is not None and len(st.ends_sorted) == n else \
        np.sort(st.ke)
    starts = np.arange(ndev + 1, dtype=I64) * span
    bs = np.searchsorted(st.ks, starts)
    be = np.searchsorted(ke, starts)
    edges_rel = np.minimum(np.arange(nb + 1, dtype=I64) * width, elapsed)
    lens = np.diff(edges_rel)
    for g in range(ndev):
        if bs[g + 1] <= bs[g]:
            continue
        maxd[g] = _max_depth_sampled(st.ks[bs[g]:bs[g + 1]], ke[be[g]:be[g + 1]])
        t = (g * span + edges_rel).tolist()
        integ = np.array(_integrals(st.ks[bs[g]:bs[g + 1]], t), dtype=I64)
        integ -= np.array(_integrals(ke[be[g]:be[g + 1]], t), dtype=I64)
        area[g] = int(integ[-1])
        series[g] = np.diff(integ) / np.maximum(lens, 1)
    used = -(-elapsed // width)  # buckets that hold some of the window
    return {"area": area, "max": maxd, "series": series[:, :used], "step_ns": width}


def _max_depth_sampled(ks: np.ndarray, ke: np.ndarray, step: int = 8) -> int:
    """_max_depth(), from the depths after every step-th start: the depth after start i
    is i + 1 - (ends <= ks[i]), which grows by at most one per start, so a run of step
    starts cannot go above the depth at its first plus step - 1. Only the runs whose
    bound is above the largest sampled depth are looked at start by start; when that is
    too many of them (a device whose depth stays near its maximum), _max_depth()."""
    n = len(ks)
    if n == 0:
        return 0
    first = np.arange(0, n, step)
    depth = first + 1
    depth -= np.searchsorted(ke, ks[::step], side="right")
    best = int(depth.max())
    runs = np.flatnonzero(depth > best - step + 1)
    if len(runs) * 2 > len(first):
        return _max_depth(ks, ke)
    for a in range(0, len(runs), 1 << 14):
        at = (runs[a:a + (1 << 14), None] * step + np.arange(step)).ravel()
        at = at[at < n]
        d = at + 1
        d -= np.searchsorted(ke, np.take(ks, at), side="right")
        best = max(best, int(d.max()))
    return best


def _max_depth(ks: np.ndarray, ke: np.ndarray, block: int = 1 << 18) -> int:
    """Largest number of intervals in flight, given their starts and their ends, each
    sorted (ends before starts at equal times).

    It is reached just after a start: after start i (0-based) the depth is
    i + 1 - (ends <= ks[i]). Block by block of starts, the ends up to the block's last
    start are merged with its starts (time << 1 | is_start: two sorted runs, which a
    stable sort merges) and counted, so the temporaries stay small.
    """
    best = 0
    j0 = 0  # ends <= the previous block's last start
    for i0 in range(0, len(ks), block):
        s = ks[i0:i0 + block]
        j1 = int(np.searchsorted(ke, s[-1], side="right"))
        ev = np.empty(len(s) + j1 - j0, I64)
        np.left_shift(ke[j0:j1], 1, out=ev[:j1 - j0])
        np.left_shift(s, 1, out=ev[j1 - j0:])
        ev[j1 - j0:] |= 1
        ev.sort(kind="stable")
        # After each event: starts so far (from i0) minus ends so far (from j0).
        step = np.empty(len(ev), np.int8)
        np.bitwise_and(ev, 1, out=step, casting="unsafe")
        del ev
        step += step
        step -= 1
        depth = np.cumsum(step, dtype=np.int32)
        del step
        # Depth before the block: i0 started, j0 ended.
        best = max(best, i0 - j0 + int(depth.max()))
        j0 = j1
    return best


def _integrals(x: np.ndarray, ts: list[int]) -> list[int]:
    """sum(t - v) over the values v < t of sorted x, for each t of increasing ts (exact;
    one pass over x)."""
    pos = np.searchsorted(x, ts, side="left").tolist()
    top = max(int(x[-1]), 1) if len(x) else 1
    block = max(1, ((1 << 63) - 1) // top)  # int64 sums of this many values cannot overflow
    out, below, prev = [], 0, 0
    for t, p in zip(ts, pos):
        for a in range(prev, p, block):
            below += int(x[a:min(a + block, p)].sum())
        prev = max(prev, p)
        out.append(p * t - below)
    return out


def device_view(rq: Requests, st: Stages, cls: np.ndarray, window: Window, fl: FlushShare,
                meta: Mapping[str, Any], cumul, buckets: int,
                counts: RequestCounts | None = None,
                qd: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One object per disk (docs/report-json.md); counts (request_counts) and qd
    (queue_depth) are computed if not given."""
    ndev = len(rq.devices)
    elapsed = window.elapsed_ns
    excl = exclusive_by_priority(cumul, st.span, ndev)
    if qd is None:
        qd = queue_depth(st, ndev, elapsed, buckets)
    by_mm = {(int(d.get("major", -1)), int(d.get("minor", -1))): d
             for d in meta.get("devices", []) or []}
    # Requests and bytes per (device, op).
    rc = counts if counts is not None else request_counts(rq, cls)
    cnt = rc.n.sum(axis=(1, 3))[:ndev]
    byt = rc.nbytes.sum(axis=(1, 3))[:ndev]
    nreq = cnt.sum(axis=1)
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
            "requests": int(nreq[g]),
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

def small_unique(x: np.ndarray) -> np.ndarray:
    """np.unique of integers; by marking a table when they are small non-negative ones
    (thread ids: pid_max <= 2^22), without a sort."""
    if len(x) and int(x.min()) >= 0 and int(x.max()) < (1 << 23):
        seen = np.zeros(int(x.max()) + 1, bool)
        seen[x] = True
        return np.flatnonzero(seen).astype(x.dtype, copy=False)
    return unique(x)


def task_lifetimes(tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                   window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tids, birth, death) of every thread seen. Birth: its ROOT/FORK event, else its
    first off-CPU interval; death: its EXIT, else the window end. Clipped to the window."""
    w0, w1 = window.start_ns, window.end_ns
    ttid = np.asarray(tasks["tid"]).astype(I64)
    otid = np.asarray(off["tid"]).astype(I64)
    tids = small_unique(np.concatenate((ttid, otid)))
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


# Workload events: thread birth and death; off-CPU start, wakeup and end (back on CPU);
# the window's bounds; a flush wait's start and end; an off-CPU start and wakeup at once
# (a preemption).
(_EV_BIRTH, _EV_DEATH, _EV_OFF, _EV_WAKE, _EV_ON, _EV_EDGE, _EV_WAIT, _EV_UNWAIT,
 _EV_OFF_WAKE) = range(9)
_EV_BITS = 4  # bits of an event's kind


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
    otid, start, end, waking = (np.asarray(off[k])
                                for k in ("tid", "start_ns", "end_ns", "waking_ns"))
    sysnr = np.asarray(off["syscall_nr"]).astype(np.int32)
    nt, no = len(tids), len(start)
    ws, we = waits if waits is not None else (np.zeros(0, I64), np.zeros(0, I64))
    ws = np.clip(ws, w0, w1)
    we = np.clip(we, w0, w1)
    full = np.flatnonzero(we > ws)
    if len(full) < len(ws):
        ws, we = np.take(ws, full), np.take(we, full)
    del full
    # Events: each one's time (inside the window: relative to its start) << _EV_BITS |
    # its kind (_EV_*) in one uint64, value-sorted. The state after the last event of a
    # time does not depend on the order of the events at that time, and events that
    # change nothing there can go: the start and wakeup of a preemption are one event,
    # an empty flush wait has none.
    packed = (w1 - w0).bit_length() + _EV_BITS <= 64
    n = 2 * nt + 2 + 2 * len(ws) + 3 * no  # at most: the wakeups are fewer
    key: np.ndarray = np.empty(n, np.uint64 if packed else I64)
    kind = np.empty(0 if packed else n, np.int8)  # the kinds apart when they do not fit
    j = 0
    for t, k in ((birth, _EV_BIRTH), (death, _EV_DEATH), (np.array([w0, w1], I64), _EV_EDGE),
                 (ws, _EV_WAIT), (we, _EV_UNWAIT)):
        j = _put_events(key, kind, j, t, k, w0)
    del ws, we
    # The off-CPU intervals, block by block (the temporaries stay in cache): clipped to
    # their thread's life; their start (with the wakeup when at the same time) and end
    # events in place, their wakeups after them all.
    s = np.empty(no, I64)
    w = np.empty(no, I64)
    js, je = j, j + no
    j += 2 * no
    for a in range(0, no, WORKLOAD_BLOCK):
        b = min(a + WORKLOAD_BLOCK, no)
        oi = np.searchsorted(tids, otid[a:b].astype(I64))
        lo, hi = np.take(birth, oi), np.take(death, oi)
        del oi
        sb = s[a:b]
        np.clip(start[a:b].astype(I64), lo, hi, out=sb)
        t = end[a:b].astype(I64)
        eb = select(t > 0, t, hi)
        np.clip(eb, lo, hi, out=eb)
        np.maximum(eb, sb, out=eb)
        del lo, hi
        wb = w[a:b]
        t = waking[a:b].astype(I64)
        np.clip(select(t > 0, t, sb), sb, eb, out=wb)
        later = wb > sb
        _put_events(key, kind, js + a, sb,
                    np.where(later, np.uint64(_EV_OFF), np.uint64(_EV_OFF_WAKE)), w0)
        _put_events(key, kind, je + a, eb, _EV_ON, w0)
        j = _put_events(key, kind, j, wb[later], _EV_WAKE, w0)
    key = key[:j]
    kind = kind[:j]
    n = j
    del birth, death, start, end, waking, otid
    if packed:
        key.sort()
    else:
        key, order = sort_with_order(key, overwrite=True)
        kind = np.take(kind, order)
        del order

    def table(first: tuple[tuple[int, ...], int], second: tuple[tuple[int, ...], int]
              ) -> np.ndarray:
        """What each kind of event adds to two running counts, one per (plus, minus) pair
        of kinds: the events of the kinds plus minus those of kind minus. Both in one
        uint64 sum, in its 32-bit halves (see below)."""
        t = [0] * (1 << _EV_BITS)
        for shift, (plus, minus) in ((0, first), (32, second)):
            for k in plus:
                t[k] += 1 << shift
            t[minus] -= 1 << shift
        return np.array([v % (1 << 64) for v in t], np.uint64)
    # Alive, off CPU; runnable, in a flush wait.
    tab1 = table(((_EV_BIRTH,), _EV_DEATH), ((_EV_OFF, _EV_OFF_WAKE), _EV_ON))
    tab2 = table(((_EV_WAKE, _EV_OFF_WAKE), _EV_ON), ((_EV_WAIT,), _EV_UNWAIT))
    # Each half is biased by 2^31 from the start (no count reaches 2^31 in size, so
    # neither borrows from the other). Biased alike, counts compare as they are.
    bias = np.uint64((1 << 63) | (1 << 31))
    zero = np.uint32(1 << 31)
    low = 0 if sys.byteorder == "little" else 1
    res: dict[str, int] = {k: 0 for k in WORKLOAD_CATEGORIES}
    no_task = 0
    blocked_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    # Block by block of events (the temporaries stay in cache). The state after each
    # event holds until the next event's time: for the last event of a time, over the
    # segment to the next time; for the others, over nothing. A block takes the segments
    # from its events and the previous block's last one (the counts it left: the carry).
    carry1 = carry2 = bias
    for a in range(0, n, WORKLOAD_BLOCK):
        b = min(a + WORKLOAD_BLOCK, n)
        p = max(a - 1, 0)  # the first event whose segment the block takes
        tb: np.ndarray
        if packed:
            tb = key[p:b] >> np.uint64(_EV_BITS)
            kb = np.bitwise_and(key[a:b], np.uint64((1 << _EV_BITS) - 1)).view(I64)
        else:
            tb, kb = key[p:b], kind[a:b]
        # The counts after events a - 1 .. b - 1.
        c1 = np.empty(b - a + 1, np.uint64)
        c1[0] = carry1
        np.take(tab1, kb, out=c1[1:], mode="clip")
        np.cumsum(c1, out=c1)
        carry1 = c1[-1]
        c2 = np.empty(b - a + 1, np.uint64)
        c2[0] = carry2
        np.take(tab2, kb, out=c2[1:], mode="clip")
        np.cumsum(c2, out=c2)
        carry2 = c2[-1]
        del kb
        # Events p .. b - 2: their counts and segment lengths.
        h1 = c1[1 - (a - p):-1].view(np.uint32)
        h2 = c2[1 - (a - p):-1].view(np.uint32)
        n_alive, n_off = h1[low::2], h1[1 - low::2]
        n_runq, n_wait = h2[low::2], h2[1 - low::2]
        off_cpu = n_alive <= n_off
        if not off_cpu.any():
            res["cpu"] += int(tb[-1] - tb[0])
            continue
        seg_len = np.diff(tb).view(I64)
        res["cpu"] += int((seg_len * ~off_cpu).sum())  # masked sums without a selection
        runq = off_cpu & (n_runq > zero)
        res["runqueue"] += int((seg_len * runq).sum())
        rest = off_cpu & ~runq
        blocked = rest & (n_off > n_runq)
        no_task += int((seg_len * (rest & ~blocked)).sum())
        bi = np.flatnonzero(blocked & (seg_len > 0))
        if len(bi):
            blocked_parts.append((np.take(tb, bi).view(I64) + w0,
                                  np.take(tb, bi + 1).view(I64) + w0,
                                  np.take(n_wait, bi) > zero))
    del key, kind
    # The blocked segments; a whole elementary segment is inside the flush-wait windows
    # or outside them (wseg).
    if blocked_parts:
        ba, bb, wseg = (np.concatenate(x) for x in zip(*blocked_parts))
    else:
        ba, bb, wseg = np.zeros(0, I64), np.zeros(0, I64), np.zeros(0, bool)
    del blocked_parts
    blen = bb - ba
    prev = blen * wseg
    for k, cat in enumerate(CATEGORIES):
        cur = prev if k >= len(covers) else select(wseg, blen, covers[k].within(ba, bb))
        res[cat] = int((cur - prev).sum()) + (int(prev.sum()) if k == 0 else 0)
        prev = cur
    leftover = blen - prev
    by_sys: dict[str, int] = {}
    blocked_by_sys: dict[str, int] = {}
    if len(ba):
        # The syscall most blocked threads are in during each blocked segment: the threads
        # blocked in a syscall at a time are its intervals gone off CPU by then (the state
        # after all events at that time) less those woken by then.
        sys_cands = unique(sysnr[w > s])  # syscalls of intervals with a blocked part
        cands = np.concatenate((sys_cands[sys_cands >= 0], sys_cands[sys_cands < 0]))
        best = np.full(len(ba), -3, np.int32)
        best_n = np.zeros(len(ba), I64)
        for nr in cands:
            m = np.flatnonzero(sysnr == nr)
            cnt = np.searchsorted(np.sort(np.take(s, m)), ba, side="right")
            cnt -= np.searchsorted(np.sort(np.take(w, m)), ba, side="right")
            better = cnt > best_n
            best[better] = nr
            best_n[better] = cnt[better]
        for nr in unique(best):
            m = best == nr
            name = syscall_name(int(nr)) if nr >= -2 else "none"
            lv = int(leftover[m].sum())
            if lv:
                by_sys[name] = by_sys.get(name, 0) + lv
            blocked_by_sys[name] = blocked_by_sys.get(name, 0) + int(blen[m].sum())
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


WORKLOAD_BLOCK = 1 << 16  # events of workload_view swept (off-CPU intervals read) at a time


def _put_events(key: np.ndarray, kind: np.ndarray, j: int, t: np.ndarray, k: Any,
                w0: int) -> int:
    """workload_view's events of kind(s) k at times t, from position j of key (and of
    kind when the kinds are apart: key in int64); returns the next position."""
    kb: np.ndarray = key[j:j + len(t)]
    np.subtract(t, w0, out=kb, casting="unsafe")
    if key.dtype == np.uint64:
        kb <<= np.uint64(_EV_BITS)
        kb |= np.asarray(k, np.uint64)
    else:
        kind[j:j + len(t)] = k
    return j + len(t)


def workload_covers(rq: Requests, st: Stages, cumul, fl: FlushShare, relevant: Sequence[int]
                    ) -> tuple[list[Coverage], tuple[np.ndarray, np.ndarray]]:
    """Cumulative coverages V_0..V_4 (barrier.. read) of the workload's devices, and the
    flush-wait windows of flush-sequenced requests on them (see workload_view)."""
    span, w0 = st.span, st.origin
    covers = [Coverage(*_unkey(u, span, w0, relevant)) for u in cumul]
    wi = fl.waiter_idx
    a, b = fl.wait_windows
    if len(wi) and len(relevant) < len(rq.devices):
        keep = np.flatnonzero(np.isin(rq.dev[wi], np.asarray(list(relevant), dtype=np.int32)))
        keep = np.concatenate((keep, keep + len(wi)))
        a, b = np.take(a, keep), np.take(b, keep)
    return covers, (a, b)


def relevant_devices(rq: Requests, fsync_devs: Sequence[tuple[int, int]],
                     meta: Mapping[str, Any], counts: RequestCounts | None = None) -> list[int]:
    """The workload's devices: disks it writes to (writes, flushes or discards submitted by
    a workload task) or holding a filesystem it called an fsync-family call on; else the
    disks it read from; else every disk. counts: request_counts(), if computed."""
    nd = len(rq.devices)
    if not nd:
        return []
    if counts is not None:
        tr = counts.n[:nd, :, :, 1].sum(axis=1)  # tracked requests by (device, op)
        cnt = np.stack((tr[:, abi.OP_READ], tr.sum(axis=1) - tr[:, abi.OP_READ]), axis=1)
    else:
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
    keys = []
    for ma, mi in pairs:
        k = np.asarray(ma).astype(I64)
        k <<= 20
        k |= np.asarray(mi)
        keys.append(k)
    # The distinct devices from the first key of each run of equal ones (records of a
    # device come in runs): a sort of few.
    heads = [k[np.flatnonzero(k[1:] != k[:-1]) + 1] for k in keys] + [k[:1] for k in keys]
    allk = unique(np.concatenate(heads)) if keys else np.zeros(0, I64)
    if len(allk) == 1:
        return [np.zeros(len(k), I64) for k in keys]
    return [np.searchsorted(allk, k) for k in keys]


def seq_key(code: np.ndarray, seq: Any) -> np.ndarray:
    """(device code, 52-bit sequence) as one int64 key (XFS lsn cycles stay < 2^20)."""
    key = np.asarray(code).astype(I64)
    key <<= 52
    key |= (np.asarray(seq).astype(np.uint64) & np.uint64((1 << 52) - 1)).view(I64)
    return key


def _codes(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique(k), the position of each of k in it); one pass when k is sorted (journal
    records of one filesystem, in time order)."""
    if len(k) > 1:
        new = k[1:] != k[:-1]
        if (k[1:] >= k[:-1]).all():
            pos = np.zeros(len(k), I64)
            np.cumsum(new, out=pos[1:])
            return k[np.flatnonzero(np.concatenate(([True], new)))], pos
    keys = unique(k)
    return keys, np.searchsorted(keys, k)


def fsync_view(window: Window, fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
               rq: Requests, cls: np.ndarray,
               call_of_req: np.ndarray | tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """fsync-family calls: latency per call type and per-call waiting breakdown.
    call_of_req: join_calls() of the requests, or join_pairs()."""
    w0, w1 = window.start_ns, window.end_ns
    n = len(fs["enter_ns"])
    enter = np.clip(np.asarray(fs["enter_ns"]).astype(I64), w0, w1)
    ex_raw = np.asarray(fs["exit_ns"]).astype(I64)
    fflags = np.asarray(fs["flags_u16"])
    # Still running at stop, or its exit never seen (exit_ns is then an upper bound).
    incomplete = ((fflags & (abi.FS_F_INCOMPLETE | abi.FS_F_EXIT_UNSEEN)) != 0) | (ex_raw == 0)
    exit_ = np.clip(select(ex_raw > 0, ex_raw, w1), enter, w1)
    lat = exit_ - enter
    call = np.asarray(fs["call_u16"])
    fstype = np.asarray(fs["fs_u16"])
    tid = np.asarray(fs["tid"]).astype(I64)
    empty = {"count": 0, "incomplete": 0, "latency_ns": percentiles(np.zeros(0, I64), (50, 90, 99)),
             "by_call": {}, "split_ns": {"data": 0, "commit": 0, "flush": 0, "other": 0}}
    if n == 0:
        return {**empty, "_per_call": None}
    # Per-call waiting components: own data writes, the commit/log force, own flushes
    # (requests whose final completion was seen: a lost one has no observed interval).
    if isinstance(call_of_req, tuple):
        ri, rc = call_of_req
    else:
        ri = np.flatnonzero(call_of_req >= 0)
        rc = np.take(call_of_req, ri)
    lost = (np.take(rq.flags, ri) & abi.RQ_LOST_DONE) != 0
    if lost.any():
        keep = np.flatnonzero(~lost)
        ri, rc = np.take(ri, keep), np.take(rc, keep)
    del lost
    rc = rc.astype(I64)  # int64 indices: faster gathers
    rcls = np.take(cls, ri)
    call_enter = np.take(enter, rc)
    call_exit = np.take(exit_, rc)
    st = np.clip(first_start(rq, ri), call_enter, call_exit)
    en = np.clip(np.take(rq.done, ri), st, call_exit, out=call_exit)
    c0 = np.full(n, w1 + 1, I64)
    c1 = np.full(n, w0 - 1, I64)
    seq_ok = (fflags & abi.FS_F_SEQ) != 0
    needed = np.zeros(n, bool)
    commit_id = np.full(n, -1, I64)
    ev = np.asarray(jr["event_u16"]) if len(jr.get("event_u16", [])) else np.zeros(0, np.uint16)
    jts = np.asarray(jr["ts_ns"]).astype(I64) if len(ev) else np.zeros(0, I64)
    # ext4 jbd2: the commit whose tid the inode needed.
    e4 = np.flatnonzero((fstype == abi.FS_EXT4) & seq_ok)
    # The commits' starts and ends only (none when the journal holds only other
    # filesystems' logs: then no ext4 call needed a commit).
    se = np.flatnonzero((ev == abi.J_JBD2_START) | (ev == abi.J_JBD2_END))
    if len(e4) and len(se):
        jcode, fcode = dev_codes((np.asarray(jr["dev_major"])[se], np.asarray(jr["dev_minor"])[se]),
                                 (np.asarray(fs["dev_major"])[e4], np.asarray(fs["dev_minor"])[e4]))
        keys, jpos = _codes(seq_key(jcode, np.asarray(jr["seq"])[se]))
        del jcode
        st_m = ev[se] == abi.J_JBD2_START
        en_m = ~st_m
        sts = jts[se]
        cs = np.full(len(keys), w0, I64)
        ce = np.full(len(keys), w1, I64)
        cs[jpos[st_m]] = sts[st_m]
        ce[jpos[en_m]] = sts[en_m]
        del se, jpos, sts, st_m, en_m
        fk = seq_key(fcode, np.asarray(fs["commit_seq"])[e4])
        pos = np.minimum(np.searchsorted(keys, fk), len(keys) - 1)
        hit = keys[pos] == fk
        a = np.maximum(cs[pos], enter[e4])
        b = np.minimum(ce[pos], exit_[e4])
        hit &= b > a
        h = np.flatnonzero(hit)
        e4h = e4[h]
        # The first hull update, one per call: within [enter, exit] (b > a), so a and b
        # replace the initial c0 > w1 and c1 < w0.
        c0[e4h] = a[h]
        c1[e4h] = b[h]
        needed[e4h] = True
        commit_id[e4h] = pos[h]
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
    cspan = int(lat.max()) + 2 if n else 2
    check_keyed(n, cspan)
    base = np.multiply(rc, cspan)
    base -= call_enter
    del rc, call_enter
    st += base
    en += base
    del base
    data, commit, flush = _call_split(st, en, rcls, c0, c1, has_c, enter, cspan, n)
    del st, en, rcls
    other = lat - data
    other -= commit
    other -= flush
    per_call = {"latency": lat, "data": data, "commit": commit, "flush": flush,
                "other": other, "call": call, "needed": needed, "commit_id": commit_id,
                "incomplete": incomplete, "enter": enter, "exit": exit_, "tid": tid}
    out: dict[str, Any] = {
        "count": int(n),
        "incomplete": int(incomplete.sum()),
        "latency_ns": percentiles(lat[~incomplete], (50, 90, 99), inplace=True),
        "split_ns": {"data": int(data.sum()), "commit": int(commit.sum()),
                     "flush": int(flush.sum()), "other": int(other.sum())},
        "by_call": {},
    }
    kinds = small_unique(call)
    for c in kinds:
        # The calls of this type (all of them when there is one type), gathered once.
        m = np.flatnonzero(call == c) if len(kinds) > 1 else np.arange(n)
        inc = np.take(incomplete, m)
        ok_lat = np.take(lat, np.take(m, np.flatnonzero(~inc)))
        name = abi.CALL_NAMES.get(int(c), f"call_{int(c)}")
        out["by_call"][name] = {
            "count": len(m),
            "incomplete": int(np.count_nonzero(inc)),
            "latency_ns": percentiles(ok_lat, (50, 90, 99), inplace=True),
            "total_ns": int(np.take(lat, m).sum()),
            "hist_log2_us": log2_hist(ok_lat // 1000),
            "split_ns": {"data": int(np.take(data, m).sum()),
                         "commit": int(np.take(commit, m).sum()),
                         "flush": int(np.take(flush, m).sum()),
                         "other": int(np.take(other, m).sum())},
            "needed_commit": int(np.count_nonzero(np.take(needed, m))),
        }
    out["_per_call"] = per_call
    return out


def _call_split(ks: np.ndarray, ke: np.ndarray, rcls: np.ndarray, c0: np.ndarray,
                c1: np.ndarray, has_c: np.ndarray, enter: np.ndarray, cspan: int, n: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time of each of the n calls exclusive to its own data writes, then its commit, then
    its own flushes (priority in that order): three arrays. ks, ke: the requests' intervals
    in call-keyed time (call * cspan + time - the call's enter), rcls their classes.

    D = union of the data writes, C the commit (one interval per call), F the union of
    the flushes: data = |D|, commit = |C| - |C & D|, flush = |F| - |F & (D | C)| with
    |F & (D | C)| = |F & D| + |F & C| - |F & C & D|, every term a measure of D inside
    intervals (Coverage) or an interval overlap. The intervals of D of call g are
    first[g]:first[g + 1]: the measures of D up to a time of call g are looked up from
    there, a step or a few each (_CallCover), instead of by binary searches over all.
    """
    d = _keyed_union(ks, ke, rcls == DATA)
    cov = _CallCover(Coverage(*d), cspan, n)
    del d
    data = np.take(cov.cum, cov.first[1:])
    data -= np.take(cov.cum, cov.first[:-1])
    commit = np.zeros(n, I64)
    ci = np.flatnonzero(has_c)
    cbase = ci.astype(I64) * cspan - enter[ci]
    cs, ce = c0[ci] + cbase, c1[ci] + cbase
    # cs < ce: the measure up to ce is found from the position of cs on.
    j = np.take(cov.first, ci)
    before = cov.upto(j, cs)
    commit[ci] = (ce - cs) - (cov.upto(j, ce) - before)
    flush = np.zeros(n, I64)
    fs_, fe_ = _keyed_union(ks, ke, rcls == FLUSH)
    if len(fs_):
        g = fs_ // cspan
        # The commit interval of each flush's call (empty if it had none).
        has = has_c[g]
        gcs = np.where(has, c0[g] + g * cspan - enter[g], 0)
        gce = np.where(has, c1[g] + g * cspan - enter[g], 0)
        xs, xe = np.maximum(fs_, gcs), np.minimum(fe_, gce)
        both = np.maximum(xe - xs, 0)
        # fs_ < fe_ and fs_ <= xs <= max(xs, xe): each looked up from the position of
        # one before it.
        j = np.take(cov.first, g)
        excl = fe_ - fs_
        excl += cov.upto(j, fs_)
        jx = j.copy()
        excl -= cov.upto(j, fe_)
        excl -= both
        excl -= cov.upto(jx, xs)
        excl += cov.upto(jx, np.maximum(xs, xe))
        # Per call: at most cspan each, so float64 sums of these integers are exact.
        flush = np.bincount(g, weights=excl, minlength=n)[:n].astype(I64)
    return data, commit, flush


class _CallCover:
    """Coverage of disjoint sorted intervals in call-keyed time (call * cspan + offset),
    looked up by call: the intervals of call g are first[g]:first[g + 1], few, so a
    lookup steps over them from a position known to be at or before its answer."""

    def __init__(self, cov: Coverage, cspan: int, n: int) -> None:
        self.s, self.cum, self.prev_e = cov.s, cov.cum, cov.prev_e
        self.first = np.zeros(n + 1, I64)
        if len(self.s):
            np.cumsum(np.bincount(self.s // cspan, minlength=n)[:n], out=self.first[1:])
        # The starts with one above any time after them: the steps stop there.
        self.s_pad = np.append(self.s, np.iinfo(I64).max)

    def upto(self, j: np.ndarray, t: np.ndarray, steps: int = 8) -> np.ndarray:
        """Coverage.upto(t), given j: positions at or before searchsorted(s, t, "right"),
        which j is advanced to in place (a later lookup of a time >= t can start there):
        a step over the intervals at a time, then a binary search for those still
        stepping after `steps`."""
        act = np.flatnonzero(np.take(self.s_pad, j) <= t)
        for _ in range(steps):
            if not len(act):
                break
            j[act] += 1
            act = np.take(act, np.flatnonzero(np.take(self.s_pad, np.take(j, act))
                                              <= np.take(t, act)))
        if len(act):
            j[act] = np.searchsorted(self.s, np.take(t, act), side="right")
        # cum[j] minus the part of interval j - 1 at or after t (as Coverage.upto).
        cut = np.take(self.prev_e, j)
        cut -= t
        np.maximum(cut, 0, out=cut)
        out = np.take(self.cum, j)
        out -= cut
        return out


def _keyed_union(s: np.ndarray, e: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, ...]:
    """union_intervals() of the intervals [s, e) where `sel` (s >= 0). When (start,
    length) fit 64 bits they are packed in one uint64 and sorted by value (the union
    does not depend on the order of equal starts): no gather of the ends by an order."""
    sel = sel & (e > s)
    idx = np.flatnonzero(sel)
    del sel
    s = np.take(s, idx)
    ln = np.take(e, idx)
    del idx
    ln -= s
    if not len(s):
        return s, ln
    lbits = int(ln.max()).bit_length()
    if int(s.max()).bit_length() + lbits > 64:
        return union_intervals(s, s + ln)
    key = s.astype(np.uint64)
    key <<= np.uint64(lbits)
    key |= ln.view(np.uint64)
    del s, ln
    key.sort()
    ln = (key & np.uint64((1 << lbits) - 1)).view(I64)
    key >>= np.uint64(lbits)
    s = key.view(I64)
    ln += s
    return union_sorted(s, ln)


# -- commits -----------------------------------------------------------------------------

def _phase(d: np.ndarray) -> dict[str, Any]:
    return percentiles(d[d >= 0], (50, 90))


def workload_filesystems(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]],
                         relevant: Sequence[int], fs: Mapping[str, np.ndarray]
                         ) -> set[tuple[int, int]]:
    """The device numbers a journal record of a filesystem on the workload's devices
    carries: (dev and st_dev of) every filesystem of the metadata whose disk is one of
    `relevant` (indices into `devices`), plus the filesystem of every fsync-family call
    of the workload (a filesystem the metadata may not describe)."""
    disks = {devices[i] for i in relevant}
    out: set[tuple[int, int]] = set()
    for f in meta.get("filesystems", []) or []:
        if (f.get("disk_major"), f.get("disk_minor")) not in disks:
            continue
        for a, b in (("dev_major", "dev_minor"), ("st_dev_major", "st_dev_minor")):
            if f.get(a) is not None and f.get(b) is not None:
                out.add((int(f[a]), int(f[b])))
    if len(fs.get("dev_major", [])):
        pairs = unique((np.asarray(fs["dev_major"]).astype(I64) << 32)
                       | np.asarray(fs["dev_minor"]).astype(I64))
        out |= {(int(p >> 32), int(p & 0xFFFFFFFF)) for p in pairs.tolist() if p}
    return out


def journal_of(jr: Mapping[str, np.ndarray], devs: set[tuple[int, int]]
               ) -> dict[str, np.ndarray]:
    """The journal records of the filesystems `devs` (workload_filesystems)."""
    if not len(jr.get("dev_major", [])):
        return dict(jr)
    key = (np.asarray(jr["dev_major"]).astype(I64) << 32) | np.asarray(jr["dev_minor"])
    want = np.array(sorted((a << 32) | b for a, b in devs), dtype=I64)
    keep = np.isin(key, want)
    if keep.all():  # the usual case: no copy
        return {k: np.asarray(v) for k, v in jr.items()}
    return {k: np.asarray(v)[keep] for k, v in jr.items()}


def commits_view(window: Window, jr: Mapping[str, np.ndarray], fsv: Mapping[str, Any],
                 fs: Mapping[str, np.ndarray], log_bytes: int) -> dict[str, Any]:
    """Commits of the journal records `jr` (those of the workload's filesystems:
    journal_of) and the batching of the fsync-family calls `fs`."""
    w0, w1 = window.start_ns, window.end_ns
    ev = np.asarray(jr["event_u16"]) if len(jr.get("event_u16", [])) else np.zeros(0, np.uint16)
    ts = np.asarray(jr["ts_ns"]).astype(I64) if len(ev) else np.zeros(0, I64)
    out: dict[str, Any] = {}
    total = 0
    # jbd2
    jm = (ev >= abi.J_JBD2_START) & (ev <= abi.J_JBD2_STATS)
    if jm.any():
        ji = np.flatnonzero(jm)
        jk = seq_key(dev_codes((np.asarray(jr["dev_major"])[ji],
                                np.asarray(jr["dev_minor"])[ji]))[0], np.asarray(jr["seq"])[ji])
        jev, jts = ev[ji], ts[ji]
        keys, pos = _codes(jk)
        del jk
        # The time of each event of each commit: a row per event, filled in one scatter
        # (the last record wins, as per event; the STATS row is not read).
        tab = np.full((abi.J_JBD2_STATS + 1, len(keys)), -1, I64)
        cell = jev.astype(I64) * len(keys)
        cell += pos
        tab.reshape(-1)[cell] = jts
        del cell
        blocks = np.zeros(len(keys), I64)
        sm = jev == abi.J_JBD2_STATS
        if sm.any():
            blocks[pos[sm]] = np.asarray(jr["aux2"])[ji][sm].astype(I64)
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
                          for k in unique(status)},
        }
    # XFS iclogs
    xm = (ev == abi.J_XLOG_SYNC) | (ev == abi.J_XLOG_WRITE) | (ev == abi.J_XLOG_DONE)
    if xm.any():
        xi = np.flatnonzero(xm)
        xk = seq_key(dev_codes((np.asarray(jr["dev_major"])[xi],
                                np.asarray(jr["dev_minor"])[xi]))[0], np.asarray(jr["seq"])[xi])
        xev, xts = ev[xi], ts[xi]
        keys, pos = _codes(xk)
        cols = {}
        for e in (abi.J_XLOG_SYNC, abi.J_XLOG_WRITE, abi.J_XLOG_DONE):
            col = np.full(len(keys), -1, I64)
            m = xev == e
            col[pos[m]] = xts[m]
            cols[e] = col
        ibytes = np.zeros(len(keys), I64)
        sm = xev == abi.J_XLOG_SYNC
        ibytes[pos[sm]] = np.asarray(jr["aux1"])[xi][sm].astype(I64)
        sy, wr, dn = cols[abi.J_XLOG_SYNC], cols[abi.J_XLOG_WRITE], cols[abi.J_XLOG_DONE]
        n_c = int((dn >= 0).sum())
        total += n_c
        # Log force -> first iclog completion on the same device at or after it.
        fm = ev == abi.J_XFS_FORCE
        force_lat = np.zeros(0, I64)
        if fm.any():
            dkey = (np.asarray(jr["dev_major"]).astype(I64) << 20) | np.asarray(jr["dev_minor"])
            udev = unique(dkey[fm | (ev == abi.J_XLOG_DONE)])
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
            distinct = len(unique(cid[with_id])) + int((needed & (cid < 0)).sum())
            # XFS: calls forcing the same CIL sequence share one commit.
            xf = needed & (cid < 0) & (np.asarray(fs["fs_u16"]) == abi.FS_XFS) & \
                ((np.asarray(fs["flags_u16"]) & abi.FS_F_SEQ) != 0)
            if xf.any():
                xk = seq_key(dev_codes((np.asarray(fs["dev_major"])[xf],
                                        np.asarray(fs["dev_minor"])[xf]))[0],
                             np.asarray(fs["commit_seq"])[xf])
                distinct -= int(xf.sum()) - len(unique(xk))
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
    x = np.asarray(v).astype(np.float64).view(I64)
    x >>= 52
    x -= 1023
    return x


def seek_slots(absseek: np.ndarray) -> np.ndarray:
    """0 -> slot 0 (contiguous); [2^(i-1), 2^i) sectors -> slot i."""
    v = np.asarray(absseek, dtype=I64)
    return np.where(v > 0, floor_log2(np.maximum(v, 1)) + 1, 0)


SEEK_SUB = 4  # seek_bins: 2^4 bins per seek slot
SEEK_BINS = 128 << SEEK_SUB  # bins per class: slots 0..127 (an int64 seek has < 66)


def seek_bins(absseek: np.ndarray) -> np.ndarray:
    """Bin of each |seek| (int64), in value order: its slot (seek_slots) << 4 plus the
    top 4 mantissa bits of its float64, read from the float64 bits (0 has exponent and
    mantissa 0: bin 0; a value in [2^(i-1), 2^i) has exponent 1022 + i)."""
    b = np.asarray(absseek).astype(np.float64).view(I64)
    b >>= 52 - SEEK_SUB
    b -= 1022 << SEEK_SUB
    np.maximum(b, 0, out=b)
    return b


# Baselines of the positioning estimate, best first (see per_class).
BASELINES = ("zero-seek bucket", "device fit", "fastest decile")
SIZE_BITS = 6  # a size bucket floor(log2(bytes)) of a uint32 is < 2^6: (device << 6) | size


def _rank(n: int, q: int) -> int:
    """0-based nearest rank of percentile q among n values."""
    return max(0, (q * n + 99) // 100 - 1)


def group_stats(groups: np.ndarray, values: np.ndarray, ngroups: int, qs: Sequence[int]
                ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """(count per group, {q: nearest-rank percentile q per group}) of int64 `values` in
    groups 0..ngroups-1 (0 for an empty group). (group, value - min) packed in one int64
    and sorted by value (a vectorised sort, much faster than partitions group by group);
    a lexsort when they do not fit."""
    cnt = np.bincount(groups, minlength=ngroups)[:ngroups].astype(I64)
    out = {q: np.zeros(ngroups, I64) for q in qs}
    if not len(values):
        return cnt, out
    v = np.asarray(values, dtype=I64)
    lo = int(v.min())
    vbits = max(1, (int(v.max()) - lo).bit_length())
    if vbits + max(1, (int(ngroups) - 1).bit_length()) <= 63:
        key = np.left_shift(groups, vbits, dtype=I64)
        key += v
        if lo:
            key -= lo  # v - lo is in [0, 2^vbits): it stays below the group's bits
        key.sort()
        key &= (1 << vbits) - 1
        if lo:
            key += lo
    else:
        key = v[np.lexsort((v, groups))]
    first = np.cumsum(cnt) - cnt
    has = np.flatnonzero(cnt)
    for q in qs:
        out[q][has] = key[first[has] + np.maximum(0, (q * cnt[has] + 99) // 100 - 1)]
    return cnt, out


@dataclass
class DeviceFit:
    """Per device: a transfer-time baseline a + b * bytes fitted on its zero-seek
    requests, and the spread of those requests around it (see device_fits)."""

    zero: np.ndarray  # bool: the device has fully observed zero-seek requests
    a: np.ndarray  # float64 intercept, ns
    b: np.ndarray  # float64 slope, ns per byte
    spread: np.ndarray  # int64: p90 - p50 of the zero-seek requests' residuals

    def baseline(self, dev: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """round(a + b * bytes), at least 0, for requests on devices `dev`."""
        if len(self.a) == 1:  # one device: no gathers
            v = np.maximum(nbytes, 1) * self.b[0]
            v += self.a[0]
        else:
            v = self.a[dev] + self.b[dev] * np.maximum(nbytes, 1)
        np.maximum(v, 0, out=v)
        return np.rint(v).astype(I64)


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of the line through points (x, y): the slope is the median of
    the slopes between pairs of points with different x (0 without any, and never below
    0: a transfer does not get faster with size), the intercept the median of
    y - slope * x."""
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    use = dx != 0
    slope = float(np.median((y[j] - y[i])[use] / dx[use])) if use.any() else 0.0
    slope = max(slope, 0.0)
    return float(np.median(y - slope * x)), slope


def device_fits(service: np.ndarray | None, nbytes: np.ndarray, bucket: np.ndarray,
                ndev: int) -> DeviceFit:
    """The device fit of every device, from its fully observed zero-seek requests (their
    service times, None if there are none; sizes; buckets (device << 6) | size bucket
    floor(log2(bytes))): their median service time per size bucket, paired with the
    bucket's mean size, then a Theil-Sen line through those points; its spread is
    p90 - p50 of the residuals (service - fitted baseline) of the zero-seek requests
    themselves."""
    ndev = max(ndev, 1)
    fit = DeviceFit(np.zeros(ndev, bool), np.zeros(ndev), np.zeros(ndev), np.zeros(ndev, I64))
    if service is None or not len(service):
        return fit
    nb = nbytes.astype(I64)
    np.maximum(nb, 1, out=nb)
    dev = bucket >> SIZE_BITS
    ng = ndev << SIZE_BITS
    cnt, med = group_stats(bucket, service, ng, (50,))
    size_sum = np.bincount(bucket, weights=nb, minlength=ng)
    for g in range(ndev):
        sl = slice(g << SIZE_BITS, (g + 1) << SIZE_BITS)
        has = cnt[sl] > 0
        if not has.any():
            continue
        x = size_sum[sl][has] / cnt[sl][has]
        y = med[50][sl][has].astype(np.float64)
        fit.a[g], fit.b[g] = theil_sen(x, y)
        fit.zero[g] = True
    resid = service - fit.baseline(dev, nb)
    del nb
    _, q = group_stats(dev, resid, ndev, (50, 90))
    fit.spread = q[90] - q[50]
    return fit


def _baselines(zcode: np.ndarray, zsv: np.ndarray, per_b: np.ndarray, fit: DeviceFit,
               ng: int, code: np.ndarray, svc: np.ndarray, ok: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per bucket (class, device, size bucket), see per_class: which baseline (BASELINES
    index), its value and its noise threshold, and the requests with a non-zero seek
    (measured). zcode, zsv: bucket and service time of the fully observed zero-seek
    requests; per_b: fully observed requests per bucket; code, svc, ok: bucket, service
    time and fully observed (None: all) of every request with a seek."""
    nbk = len(per_b)
    cnt, q = group_stats(zcode, zsv, nbk, (50, 90))
    dev_of = (np.arange(nbk) % ng) >> SIZE_BITS
    measured = per_b - cnt
    kind = np.where(cnt > 0, 0, np.where(fit.zero[dev_of], 1, 2))
    base = q[50]
    thr = np.where(cnt > 0, np.maximum(q[90] - q[50], fit.spread[dev_of]), fit.spread[dev_of])
    decile = np.flatnonzero((measured > 0) & (kind == 2))
    if len(decile):
        # No zero-seek request on the device: the bucket's fastest decile is its
        # baseline, and only requests slower than the bucket's p90 count. Their service
        # times sorted within buckets.
        pick = np.zeros(nbk, bool)
        pick[decile] = True
        sel = np.take(pick, code.astype(np.intp))
        if ok is not None:
            sel &= ok
        sel = np.flatnonzero(sel)
        g, v = np.take(code, sel), np.take(svc, sel)
        o = np.lexsort((v, g))
        g, v = g[o], v[o]
        lo = np.searchsorted(g, decile)
        hi = np.searchsorted(g, decile, side="right")
        for b, i, j in zip(decile.tolist(), lo.tolist(), hi.tolist()):
            n = j - i
            base[b] = v[i + _rank(-(-n // 10), 50)]
            thr[b] = int(v[i + _rank(n, 90)]) - int(base[b])
    return kind, base, thr, measured


@dataclass
class RequestCounts:
    """Requests and bytes by (device, class, op, tracked), and by (class, attribute bits)
    (see request_counts)."""

    n: np.ndarray  # [ndev, nclass, 16, 2] requests; op >= 15 counted as 15
    nbytes: np.ndarray  # the same, bytes (float64)
    attrs: np.ndarray  # [nclass, 64] requests by ATTR_* bits

    @property
    def dev_op(self) -> np.ndarray:
        return self.n.sum(axis=3)

    @property
    def dev_bytes(self) -> np.ndarray:
        return self.nbytes.sum(axis=3)

    def attr(self, k: int, bit: int) -> int:
        """Requests of class k with attribute bit `bit` set."""
        return int(self.attrs[k][(np.arange(64) & bit) != 0].sum())


# Attribute bits of request_counts().attrs: the iflags bits kept as they are, then ours
# (ATTR_LOST in the bit of F_META, which the attributes do not keep).
ATTR_IFLAGS = abi.F_SYNC | abi.F_FUA | abi.F_PREFLUSH
ATTR_LOST = abi.F_META
ATTR_ISSUED = 1 << 4
ATTR_INCOMPLETE = 1 << 5
assert ATTR_IFLAGS < ATTR_ISSUED and not ATTR_IFLAGS & ATTR_LOST
assert abi.RQ_LOST_DONE > ATTR_LOST
# request_counts moves the tracked flag (to the bit above the attributes) and the
# incomplete flag (to ATTR_INCOMPLETE) by one shift.
assert abi.RQ_TRACKED == abi.RQ_INCOMPLETE << 1 and ATTR_INCOMPLETE == 1 << 5


def request_counts(rq: Requests, cls: np.ndarray, block: int = 1 << 16) -> RequestCounts:
    """Requests and bytes by (device, class, op, tracked) and attribute counts by class.
    The requests are counted once by (device, class, op, tracked, attribute bits), block
    by block (small temporaries): a block's keys, each packed with the bytes of its
    request in one uint64, are sorted by value; the runs of equal keys give the counts
    and the byte sums (in integers: the float64 sums are exact)."""
    ncls = len(CLASS_NAMES)
    ndev = max(len(rq.devices), 1)
    n = len(rq)
    shape = (ndev, ncls, 16, 2)
    nj = ndev * ncls * 32 * 64
    # (uint32 holds the keys of any device count whose counts fit memory.)
    kdt = np.uint16 if nj <= (1 << 16) else np.uint32
    cnt = np.zeros(nj, I64)
    byt = np.zeros(nj, np.uint64)
    ishift = ATTR_INCOMPLETE.bit_length() - abi.RQ_INCOMPLETE.bit_length()
    lshift = abi.RQ_LOST_DONE.bit_length() - ATTR_LOST.bit_length()
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        key: Any = rq.dev[lo:hi].astype(kdt)
        key *= ncls
        key += cls[lo:hi].astype(kdt)
        key <<= 4
        op = rq.op[lo:hi]
        if int(op.max()) > 15:
            op = np.minimum(op, 15)
        key |= op.astype(kdt)
        # The tracked bit, then (SYNC/FUA/PREFLUSH, lost, issued, incomplete) in 6 bits.
        key <<= 7
        fl = rq.flags[lo:hi]
        t: Any = np.bitwise_and(fl, abi.RQ_TRACKED | abi.RQ_INCOMPLETE, dtype=kdt,
                                casting="unsafe")
        t <<= ishift
        key |= t
        np.bitwise_and(fl, abi.RQ_LOST_DONE, out=t, casting="unsafe")
        t >>= lshift
        key |= t
        np.bitwise_and(rq.iflags[lo:hi], ATTR_IFLAGS, out=t, casting="unsafe")
        key |= t
        np.greater(rq.issue[lo:hi], 0, out=t, casting="unsafe")
        t <<= ATTR_ISSUED.bit_length() - 1
        key |= t
        p = key.astype(np.uint64)
        p <<= 32
        p |= rq.nbytes[lo:hi]
        p.sort()
        # A run of m equal keys k sums to m * (k << 32) + its bytes, modulo 2^64: exact,
        # as a block's bytes stay below 2^64.
        k = p >> 32
        starts = np.flatnonzero(k[1:] != k[:-1])
        starts += 1
        starts = np.concatenate(([0], starts))
        ks = k[starts]
        m = np.diff(starts, append=hi - lo)
        cnt[ks] += m
        sums = np.add.reduceat(p, starts)
        sums -= (ks << 32) * m.astype(np.uint64)
        byt[ks] += sums
    full = cnt.reshape(shape + (64,))
    nbytes = byt.reshape(shape + (64,)).sum(axis=4).astype(np.float64)
    return RequestCounts(full.sum(axis=4), nbytes, full.sum(axis=(0, 2, 3)))


def per_class(rq: Requests, st: Stages, cls: np.ndarray, with_placement: bool = True,
              counts: RequestCounts | None = None,
              latency: list[dict[str, Any]] | None = None, release: bool = False
              ) -> tuple[dict[str, Any], dict[str, Any], np.ndarray, np.ndarray]:
    """Per-class request figures and metadata placement; also requests and bytes by
    (device, class, op) as two [ndev, nclass, 16] arrays.

    Requests: counts, bytes, attributes, latency percentiles (fully observed requests
    only: not incomplete, not pre-dating the trace, final completion seen; `lost`
    counts those whose final completion was never seen), seek p50.
    Placement: seek histogram (seek_slots), sequential share (seek 0), seek p50/p90,
    and positioning cost, over the class's fully observed requests with a seek distance
    and their service times (match.py: the device's time on each alone). Requests are
    grouped in buckets (device, size bucket floor(log2(bytes))); each bucket has a
    baseline b and a noise threshold t:

    * "zero-seek bucket": the bucket has zero-seek requests: b is their median service
      time, t the larger of their p90 - b and the device fit's spread;
    * "device fit": else, when the device has zero-seek requests (any class): b = the
      device's fitted a + slope * bytes of the request (device_fits), t its spread;
    * "fastest decile": the device has no zero-seek request at all: b is the median of
      the fastest tenth of the bucket's requests, t = the bucket's p90 - b (only the
      slowest tenth can count: without a request free of positioning, the noise cannot
      be told apart, so this is a conservative estimate).

    A request with a non-zero seek adds its excess over b when that excess is above t
    (positioned_requests counts them); zero-seek requests add 0.

    Latencies are computed for all requests at once and sorted within classes by one
    sort per figure (group_sort); `counts` (request_counts) and `latency`
    (latency_figures) are computed if not given. release=True drops the seek columns of
    `st` (seek, seek_idx, seek_service, seek_nbytes, seek_cls) once they are read, for
    callers that need them no more (lower peak memory).
    """
    rc = counts if counts is not None else request_counts(rq, cls)
    dev_op, dev_bytes = rc.dev_op, rc.dev_bytes
    by_op = dev_op.sum(axis=0)
    bytes_op = dev_bytes.sum(axis=0)
    tracked = rc.n[..., 1].sum(axis=(0, 2))
    lat_figs = latency if latency is not None else latency_figures(rq, cls)
    reqs: dict[str, Any] = {}
    for k, name in enumerate(CLASS_NAMES):
        reqs[name] = {
            "count": int(by_op[k].sum()),
            "bytes": int(round(bytes_op[k].sum())),
            "writes": int(by_op[k, abi.OP_WRITE]),
            "write_bytes": int(round(bytes_op[k, abi.OP_WRITE])),
            "issued": rc.attr(k, ATTR_ISSUED),
            "incomplete": rc.attr(k, ATTR_INCOMPLETE),
            "lost": rc.attr(k, ATTR_LOST),
            "tracked": int(tracked[k]),
            "fua": rc.attr(k, abi.F_FUA),
            "preflush": rc.attr(k, abi.F_PREFLUSH),
            "sync": rc.attr(k, abi.F_SYNC),
            **lat_figs[k],
            "seek_sectors": {"p50": None, "max": None},
        }
    place = _placement(rq, st, cls, reqs, with_placement, release)
    return reqs, place, dev_op, dev_bytes


LATENCY_BLOCK = 1 << 15  # requests per block: the temporaries of a block stay in cache


LATENCY_FIGURES = ("device_ns", "queue_ns", "total_ns")


def latency_figures(rq: Requests, cls: np.ndarray) -> list[dict[str, Any]]:
    """device_total_ns and the device, queue and total percentiles of each class (report
    order). The values of each figure are sorted within classes by one sort: (class,
    value) packed in an int32 when every value is below 2^28 (the keys of the device and
    queue times are built in one pass, those of the total time in a second one, once
    the first two are dropped), else by group_sort on full arrays."""
    ncls = len(CLASS_NAMES)
    out: list[dict[str, Any]] = [{} for _ in range(ncls)]
    starts = (np.arange(ncls + 1, dtype=I64) << _LAT_VBITS).astype(np.int32)
    for figs in ((0, 1), (2,)):
        keys = _latency_keys(rq, cls, figs)
        for i, m in enumerate(figs):
            vals = keys[i]
            keys[i] = None
            if vals is not None:
                vals.sort()
                off = np.searchsorted(vals, starts)
                base = starts  # the class bits of a class's keys, subtracted from its figures
            else:
                vals, off = group_sort(*_latency_values(rq, cls, m), ncls)
                base = np.zeros(ncls + 1, np.int32)
            for k in range(ncls):
                x = vals[off[k]:off[k + 1]]
                b = int(base[k])
                if m == 0:
                    out[k]["device_total_ns"] = int(x.sum(dtype=I64)) - b * len(x)
                pct = sorted_percentiles(x, (50, 90, 99))
                out[k][LATENCY_FIGURES[m]] = {q: None if p is None else p - b
                                              for q, p in pct.items()}
            del vals
    return out


_LAT_VBITS = 28  # value bits of the packed int32 keys (3 bits of class, 8 groups)


def _latency_keys(rq: Requests, cls: np.ndarray, figs: tuple[int, ...]
                  ) -> list[np.ndarray | None]:
    """(class << 28 | value) as int32 of figures `figs` (0, 1: the device and queue
    times, which leave out the same requests; or 2: the total time) of every request
    (class 7 for a request left out, with value 0), None for a figure whose values do
    not all fit 28 bits (see _latency_values). Block by block: the columns the figures
    share are read once and the temporaries stay in cache."""
    n = len(rq)
    none = len(CLASS_NAMES) << _LAT_VBITS
    lim = 1 << _LAT_VBITS
    keys: list[np.ndarray | None] = [np.empty(n, np.int32) for _ in figs]

    def put(i: int, a: int, c: np.ndarray, v: np.ndarray, out: np.ndarray) -> None:
        # Keys a, a + 1, ... of figure figs[i] from the values v and the class bits c.
        k = keys[i]
        if k is None:
            return
        if int(v.max()) >= lim or (figs[i] == 0 and int(v.min()) < 0):
            keys[i] = None
            return
        kb = k[a:a + len(v)]
        np.copyto(kb, v, casting="unsafe")
        kb |= c
        kb[out] = none

    for a in range(0, n, LATENCY_BLOCK):
        b = min(a + LATENCY_BLOCK, n)
        iss, ins, done = rq.issue[a:b], rq.insert[a:b], rq.done[a:b]
        c = cls[a:b].astype(np.int32)
        c <<= _LAT_VBITS
        # The requests left out (few): value 0, class `none`, set on their own.
        bad = (rq.flags[a:b] & UNOBSERVED) != 0
        if figs[0] == 0:
            # Device and queue times: of fully observed, issued requests.
            out = np.flatnonzero(bad | (iss <= 0))
            v = done - iss
            v[out] = 0
            put(0, a, c, v, out)
            np.subtract(iss, ins, out=v)
            np.maximum(v, 0, out=v)
            v *= ins > 0
            v[out] = 0
            put(1, a, c, v, out)
        else:
            # Total time: from the first known start (submit, else insert, else issue),
            # looked up only for the few requests without a submit time.
            sub = rq.submit[a:b]
            v = done - sub
            z = np.flatnonzero(sub <= 0)
            if len(z):
                st = select(ins[z] > 0, ins[z], iss[z])
                bad[z] |= st <= 0
                v[z] = done[z] - st
            np.maximum(v, 0, out=v)
            out = np.flatnonzero(bad)
            v[out] = 0
            put(0, a, c, v, out)
    return keys


def _latency_values(rq: Requests, cls: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(class or 7 for left out, value) of figure m (0 device, 1 queue, 2 total) for
    every request, as full arrays (for values beyond 28 bits)."""
    none = np.int8(len(CLASS_NAMES))
    ok = np.bitwise_and(rq.flags, UNOBSERVED) == 0
    issue, insert, done = rq.issue, rq.insert, rq.done
    if m < 2:
        lat = issue > 0
        lat &= ok
        grp = select(lat, cls, none)
        if m == 0:
            return grp, done - issue
        v = issue - insert
        v *= insert > 0
        np.maximum(v, 0, out=v)
        return grp, v
    start = first_start(rq)
    ok &= start > 0
    grp = select(ok, cls, none)
    np.subtract(done, start, out=start)
    np.maximum(start, 0, out=start)
    return grp, start


PLACEMENT_BLOCK = 1 << 16  # seeks per block of _placement (temporaries stay in cache)


def _placement(rq: Requests, st: Stages, cls: np.ndarray, reqs: dict[str, Any],
               with_placement: bool, release: bool = False) -> dict[str, Any]:
    """Placement figures per class (and reqs[class]["seek_sectors"]), see per_class.

    The requests with a seek are taken block by block in stage order, without grouping
    them by class: a first pass counts them by (class, seek_bins) and by bucket (class,
    device, size bucket) and keeps the fully observed zero-seek ones, which give the
    baselines; a second pass sums the excess over them by bucket and picks out the seeks
    of the bins that hold each class's seek percentiles, ranked then within those bins
    only. release=True drops the seek columns of `st` once read (per_class)."""
    ncls = len(CLASS_NAMES)
    ndev = max(len(rq.devices), 1)
    ng = ndev << SIZE_BITS
    nbk = ncls * ng
    n = len(st.seek)
    # All fully observed (the usual case): no per-request check needed.
    all_ok = not np.bitwise_and(rq.flags, UNOBSERVED).any()
    service = st.seek_service if st.seek_service is not None else np.zeros(n, I64)
    # The device of each seek follows from its position when the bounds are known.
    bounds = st.seek_bounds.tolist() if st.seek_bounds is not None and ndev > 1 else None

    def of_request(col: np.ndarray | None, arr: np.ndarray, a: int, b: int) -> np.ndarray:
        """A seek column's block, else `arr` of the block's requests."""
        return col[a:b] if col is not None else gather(arr, st.seek_idx[a:b])

    skey = np.empty(n, np.int16)  # class << 11 | seek bin
    hist = np.zeros(ncls * SEEK_BINS, I64)
    code = np.empty(n if with_placement else 0, np.int16 if nbk < (1 << 15) else np.int32)
    ok_all = None if all_ok or not with_placement else np.empty(n, bool)
    per_b = np.zeros(nbk, I64)  # fully observed requests per bucket
    zparts = []
    for a in range(0, n, PLACEMENT_BLOCK):
        b = min(a + PLACEMENT_BLOCK, n)
        c = of_request(st.seek_cls, cls, a, b).astype(I64)
        seek = st.seek[a:b]
        bins = seek_bins(np.abs(seek))
        bins += c * SEEK_BINS
        hist += np.bincount(bins, minlength=len(hist))
        skey[a:b] = bins
        if not with_placement:
            continue
        # Bucket: size bucket floor(log2(bytes)), plus device << 6, plus class * ng.
        bk = floor_log2(np.maximum(of_request(st.seek_nbytes, rq.nbytes, a, b), 1))
        if bounds is not None:
            for g in range(1, ndev):
                lo, hi = max(bounds[g], a), min(bounds[g + 1], b)
                if lo < hi:
                    bk[lo - a:hi - a] += g << SIZE_BITS
        elif ndev > 1:
            bk += gather(rq.dev, st.seek_idx[a:b]).astype(I64) << SIZE_BITS
        c *= ng
        bk += c
        code[a:b] = bk
        z = seek == 0
        if ok_all is not None:
            ok = ok_all[a:b]
            np.equal(gather(rq.flags, st.seek_idx[a:b]) & UNOBSERVED, 0, out=ok)
            z &= ok
            bk = bk[ok]
        per_b += np.bincount(bk, minlength=nbk)
        zparts.append(np.flatnonzero(z) + a)
    if with_placement:
        zi = np.concatenate(zparts) if zparts else np.zeros(0, I64)
        zcode = np.take(code, zi).astype(I64)
        zsv = np.take(service, zi)
        dev_b = zcode % ng
        znb = (np.take(st.seek_nbytes, zi) if st.seek_nbytes is not None else
               gather(rq.nbytes, np.take(st.seek_idx, zi)))
        del zi
        fit = device_fits(zsv if st.seek_service is not None else None, znb, dev_b, ndev)
        del znb, dev_b
        kind, base, thr, measured = _baselines(zcode, zsv, per_b, fit, ng, code, service,
                                               ok_all)
        del zcode, zsv
        dev_of = (np.arange(nbk) % ng) >> SIZE_BITS
        fit_kind = (kind == 1) if ((measured > 0) & (kind == 1)).any() else None
        # The least baseline of each bucket plus its threshold: a request at or below it
        # cannot count. A device fit's baseline grows with the size, so its least in a
        # bucket is that of the bucket's least size, 2^(size bucket). Requests are below
        # 4 GiB (a u32 length): buckets from 32 up hold none, and a least size capped at
        # 2^32 keeps the baseline of a slow device's fit far from the int64 limit.
        lim = base + thr
        if fit_kind is not None:
            fb = np.flatnonzero(fit_kind)
            least = np.left_shift(1, np.minimum(fb & ((1 << SIZE_BITS) - 1), 32), dtype=I64)
            lim[fb] = fit.baseline(dev_of[fb], least) + thr[fb]
    # The bins that hold each class's seek percentiles (p50, p90 with placement) and max.
    qs = (50, 90) if with_placement else (50,)
    counts = hist.reshape(ncls, SEEK_BINS)
    nk = counts.sum(axis=1)
    cum = np.cumsum(counts, axis=1)
    want = np.zeros(ncls * SEEK_BINS, bool)
    ranks: dict[int, list[tuple[int, int]]] = {}  # class: [(rank, bin)]
    for cl in np.flatnonzero(nk).tolist():
        rs = [_rank(int(nk[cl]), q) for q in qs] + [int(nk[cl]) - 1]
        ranks[cl] = [(r, int(np.searchsorted(cum[cl], r, side="right"))) for r in rs]
        for _, bn in ranks[cl]:
            want[cl * SEEK_BINS + bn] = bn > 0  # bin 0 holds only zeros
    pos = np.zeros(nbk, I64)  # excess over the baselines (the positioning) per bucket
    hits = np.zeros(nbk, I64)
    dns = np.zeros(nbk, I64)  # service time per bucket
    picked = []
    for a in range(0, n, PLACEMENT_BLOCK):
        b = min(a + PLACEMENT_BLOCK, n)
        kb = skey[a:b].astype(np.intp)
        w = np.flatnonzero(np.take(want, kb))
        if len(w):
            picked.append((np.take(kb, w), np.abs(np.take(st.seek[a:b], w)).astype(I64)))
        if not with_placement:
            continue
        cc = code[a:b].astype(np.intp)
        sv = service[a:b]
        # The candidates: above their bucket's least baseline plus threshold (the hits,
        # about a tenth of the requests, and in device fit buckets a few more). Their
        # excess over the baseline, then the hits among them; the zero-seek requests
        # (and any not fully observed) add 0: they are never hits.
        ci = np.flatnonzero(sv > np.take(lim, cc))
        ch = np.take(cc, ci)
        svc = np.take(sv, ci)
        ex = np.take(base, ch)
        np.subtract(svc, ex, out=ex)
        if fit_kind is not None:
            fi = np.flatnonzero(np.take(fit_kind, ch))
            if len(fi):
                nb = of_request(st.seek_nbytes, rq.nbytes, a, b)
                ex[fi] = svc[fi] - fit.baseline(np.take(dev_of, ch[fi]),
                                                nb[ci[fi]].astype(I64))
        hit = ex > np.take(thr, ch)
        hit &= np.take(st.seek[a:b], ci) != 0
        if ok_all is not None:
            hit &= np.take(ok_all[a:b], ci)
            sv = sv * ok_all[a:b]
        hi = np.flatnonzero(hit)
        ch = np.take(ch, hi)
        hits += np.bincount(ch, minlength=nbk)
        np.add.at(pos, ch, np.take(ex, hi))
        np.add.at(dns, cc, sv)
    if release:
        st.seek_idx = st.seek = st.seek_service = np.zeros(0, I64)
        st.seek_nbytes = st.seek_cls = None
    # The seeks picked, sorted by (class, bin, value): (class << 11 | bin) << vbits | value
    # in one int64 when it fits (a value sort), else a lexsort.
    pk = np.concatenate([p[0] for p in picked]) if picked else np.zeros(0, np.intp)
    pv = np.concatenate([p[1] for p in picked]) if picked else np.zeros(0, I64)
    del picked
    vbits = max(1, int(pv.max()).bit_length()) if len(pv) else 1
    if vbits + (ncls * SEEK_BINS - 1).bit_length() <= 63:
        key = pk.astype(I64) << vbits
        key |= pv
        key.sort()
        pv = key & ((1 << vbits) - 1)
        pk = key >> vbits
    else:
        o = np.lexsort((pv, pk))
        pk, pv = pk[o], pv[o]
    place: dict[str, Any] = {}
    for k, rk in ranks.items():
        name = CLASS_NAMES[k]
        vals = []
        for r, bn in rk:
            if not bn:
                vals.append(0)
                continue
            below = int(cum[k, bn - 1])
            first = int(np.searchsorted(pk, k * SEEK_BINS + bn))
            vals.append(int(pv[first + r - below]))
        seek_p: dict[str, int | None] = {f"p{q}": v for q, v in zip(qs, vals)}
        seek_p["max"] = vals[-1]
        if not with_placement:
            reqs[name]["seek_sectors"] = seek_p
            continue
        reqs[name]["seek_sectors"] = {"p50": seek_p["p50"], "max": seek_p["max"]}
        slots = counts[k].reshape(-1, 1 << SEEK_SUB).sum(axis=1)
        hist_k = slots[:int(np.flatnonzero(slots)[-1]) + 1]
        sl = slice(k * ng, (k + 1) * ng)
        by = np.bincount(kind[sl], weights=measured[sl], minlength=len(BASELINES)).astype(I64)
        place[name] = {
            "requests_with_seek": int(nk[k]),
            "sequential_share": round(float(hist_k[0]) / int(nk[k]), 6),
            "seek_sectors": seek_p,
            "seek_hist_log2": hist_k.tolist(),
            "positioning_ns": int(pos[sl].sum()),
            "positioning_basis": int(per_b[sl].sum()),
            "positioned_requests": int(hits[sl].sum()),
            "baseline": BASELINES[int(np.argmax(by))] if by.any() else None,
            "baseline_requests": {bname: int(by[i]) for i, bname in enumerate(BASELINES)},
            "device_ns": int(dns[sl].sum()),
        }
    return place


def locality(rq: Requests, cls: np.ndarray, gap_ns: int, st: Stages | None = None
             ) -> dict[str, Any]:
    """Write pairs adjacent on disk (one ends where the next starts, consecutive in on-disk
    order; equal starts ordered by issue time) and how many were issued > gap_ns apart.

    With the device stages `st`, the writes are taken in issue order from them and one
    value sort of (device, start sector, issue rank) gives the on-disk order directly."""
    if st is not None:
        inside = st.issue_in_window
        if inside is None:
            w0 = st.origin
            w1 = w0 + st.span - 2
            issue = rq.issue
            inside = not len(issue) or (int(issue.max()) <= w1 and int(
                np.min(issue, where=issue > 0, initial=w0)) >= w0)
        if inside:
            # The stage order is the issue order (no issue time was clipped to the window).
            fast = _locality_in_issue_order(rq, cls, st, gap_ns)
            if fast is not None:
                return fast
    wi = np.flatnonzero(_locality_writes(rq, cls))
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


_LOCALITY_CLASSES = np.zeros(256, bool)
_LOCALITY_CLASSES[[LOG, METADATA, DATA]] = True
LOCALITY_BLOCK = 1 << 16


def _locality_writes(rq: Requests, cls: np.ndarray) -> np.ndarray:
    """Bool per request: a data-bearing, issued write of class log, metadata or data.
    Block by block (the temporaries stay in cache)."""
    n = len(rq)
    wm = np.empty(n, bool)
    for a in range(0, n, LOCALITY_BLOCK):
        b = min(a + LOCALITY_BLOCK, n)
        m = wm[a:b]
        np.equal(rq.op[a:b], abi.OP_WRITE, out=m)
        m &= rq.nbytes[a:b] > 0
        m &= rq.issue[a:b] > 0
        m &= np.take(_LOCALITY_CLASSES, cls[a:b].view(np.uint8))
    return wm


_HASH = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio, odd: Fibonacci hashing


def _sector_hash(x: np.ndarray, shift: np.uint64) -> None:
    """The top 64 - shift bits of x * _HASH (0 when shift is 64), in place: sectors that
    differ, even in high bits only, mostly get different hashes."""
    x *= _HASH
    x >>= shift


def _locality_in_issue_order(rq: Requests, cls: np.ndarray, st: Stages, gap_ns: int
                             ) -> dict[str, Any] | None:
    """locality() with the writes taken in (device, issue) order from the stages; None if
    (device, sector, rank) does not fit a 63-bit key."""
    order_all = st.issue_order
    lw = st.loc_writes if st.loc_writes is not None else \
        gather(_locality_writes(rq, cls), order_all)
    ndev = len(rq.devices)
    ob = st.order_bounds
    # The writes of device g are wi[cut[g]:cut[g + 1]] (when the stage order's device
    # bounds are known).
    cut = [0]
    if ob is not None:
        for g in range(len(ob) - 1):
            cut.append(cut[-1] + int(np.count_nonzero(lw[ob[g]:ob[g + 1]])))
    n = cut[-1] if ob is not None else int(np.count_nonzero(lw))
    res: dict[str, Any] = {"gap_ns": int(gap_ns), "adjacent_pairs": 0, "late_pairs": 0,
                           "late_share": None, "writes": int(n)}
    if n < 2:
        return res
    # The writes in issue order, their start sectors (in `key` until it is built) and
    # sizes in sectors: block by block, one pass over the stage order.
    wi = np.empty(n, order_all.dtype)
    key = np.empty(n, I64)
    nsec = np.empty(n, rq.nbytes.dtype)
    j = 0
    smax = 0
    for a in range(0, len(lw), LOCALITY_BLOCK):
        p = np.flatnonzero(lw[a:a + LOCALITY_BLOCK])
        k = len(p)
        if not k:
            continue
        p += a
        i = np.take(order_all, p).astype(np.intp)
        wi[j:j + k] = i
        sb = key[j:j + k]
        np.take(rq.sector, i, out=sb, mode="clip")
        smax = max(smax, int(sb.max()))
        nb = nsec[j:j + k]
        np.take(rq.nbytes, i, out=nb, mode="clip")
        nb += np.uint32(511)
        nb >>= np.uint32(9)
        j += k
    nbmax = int(rq.nbytes.max())  # of all requests: a bound, without a gather
    sbits = (smax + (nbmax >> 9) + 1).bit_length()
    dbits = max(1, (ndev - 1).bit_length())
    ibits = n.bit_length()
    if dbits + sbits + ibits > 63:
        return None
    # (device, sector, rank in issue order, a hash of the end sector in the bits left)
    # packed in one int64: one value sort gives the on-disk order with equal starts in
    # issue order (the ranks are distinct: the hash below them does not change the
    # order). Built block by block (the temporaries stay in cache).
    lbits = 63 - dbits - sbits - ibits
    hshift = np.uint64(64 - lbits)
    for a in range(0, n, LOCALITY_BLOCK):
        b = min(a + LOCALITY_BLOCK, n)
        kb = key[a:b]
        h = kb + nsec[a:b]
        _sector_hash(h.view(np.uint64), hshift)
        kb <<= ibits + lbits
        kb |= h
        del h
        r = np.arange(a, b, dtype=I64)
        r <<= lbits
        kb |= r
    if ndev > 1:
        dshift = sbits + ibits + lbits
        if ob is None:
            key |= rq.dev[wi].astype(I64) << dshift
        else:
            for g in range(1, ndev):
                key[cut[g]:cut[g + 1]] |= g << dshift
    key.sort()
    # Adjacent: the next in on-disk order starts where this one ends. Only the pairs
    # whose end and next start have the same hash are checked in full, with the size
    # looked up by rank (few: the adjacent ones and about a 2^-lbits share of the
    # others). Block by block.
    ku = key.view(np.uint64)
    low = np.uint64((1 << lbits) - 1)
    smask = np.uint64((1 << sbits) - 1)
    rmask = np.uint64((1 << ibits) - 1)
    lshift = np.uint64(lbits)
    sshift = np.uint64(ibits + lbits)
    parts = []
    for a in range(0, n - 1, LOCALITY_BLOCK):
        b = min(a + LOCALITY_BLOCK, n - 1)
        nxt = ku[a + 1:b + 1] >> sshift
        nxt &= smask
        _sector_hash(nxt, hshift)
        c = np.flatnonzero(np.bitwise_and(ku[a:b], low) == nxt)
        del nxt
        c += a
        kc = np.take(ku, c)
        rank = kc >> lshift
        rank &= rmask
        kc >>= sshift
        kc += np.take(nsec, rank.astype(np.intp))
        nxt = np.take(ku, c + 1)
        nxt >>= sshift
        parts.append(np.take(c, np.flatnonzero(kc == nxt)))
    adj = np.concatenate(parts) if parts else np.zeros(0, I64)
    del nsec, parts
    # Issue times of the adjacent pairs only (few, compared with the writes).
    first = np.take(wi, ((np.take(ku, adj) >> lshift) & rmask).astype(np.intp))
    second = np.take(wi, ((np.take(ku, adj + 1) >> lshift) & rmask).astype(np.intp))
    del key, ku
    gap = np.abs(rq.issue[second] - rq.issue[first])
    na, nl = len(adj), int(np.count_nonzero(gap > gap_ns))
    res.update({"adjacent_pairs": na, "late_pairs": nl,
                "late_share": round(nl / na, 6) if na else None})
    return res
