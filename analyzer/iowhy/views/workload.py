"""Workload view: where the elapsed time went, every ns of the window in one category
(docs/report-json.md has the definitions in words).

Workload view. At every instant of the window the workload's state is the best state
among its live threads: a thread on CPU (alive and not inside an off-CPU interval) ->
``cpu``; else a runnable one (off CPU after its wakeup, or preempted) -> ``runqueue``;
else some thread is blocked and the instant is charged to what the workload's devices
were doing, by priority: a flush in flight -> ``barrier``, else a log write -> ``log``,
else a metadata request -> ``metadata``, else a data write (or discard) -> ``data``, else
a read -> ``read``; with nothing in flight -> ``wait-other``, broken down by the syscall
the blocked threads are in (the one most blocked threads are in; ties to the lowest
number, "none" last). Instants with no live thread are ``wait-other`` "(no task)".
"In flight" is a request's device stage (model/requests.py); for ``barrier`` it also covers the
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

from ..categories import CORRELATIONAL
from ..kernels import (Coverage, I64, nested_coverage, select, sort_with_order, union_intervals,
                       unique)
from ..model.classify import CATEGORIES
from ..model.flush import FlushShare
from ..model.requests import Requests, Window
from ..model.stages import Stages
from ..model.tasks import task_lifetimes
from ..names import CLASS_NAMES
from ..syscalls import syscall_name


WORKLOAD_CATEGORIES = CORRELATIONAL


NO_TASK = "(no task)"


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


# Workload events: thread birth and death; off-CPU start, wakeup and end (back on CPU);
# the window's bounds; a flush wait's start and end; an off-CPU start and wakeup at once
# (a preemption).
(_EV_BIRTH, _EV_DEATH, _EV_OFF, _EV_WAKE, _EV_ON, _EV_EDGE, _EV_WAIT, _EV_UNWAIT,
 _EV_OFF_WAKE) = range(9)


_EV_BITS = 4  # bits of an event's kind


def workload_view(window: Window, tasks: Mapping[str, np.ndarray],
                  off: Mapping[str, np.ndarray], covers: Sequence[Coverage],
                  waits: tuple[np.ndarray, np.ndarray] | None = None,
                  arch: str | None = None) -> dict[str, Any]:
    """Attribution of every ns of the window (sums exactly to elapsed); see module doc.

    covers: cumulative coverages V_0..V_4 of the workload's devices; waits: intervals
    during which a flush-sequenced request waited for its flushes (barrier wherever
    blocked, whatever else is in flight).
    """
    w0 = window.start_ns
    tids, birth, death = task_lifetimes(tasks, off, window)
    s, w, key, kind = _events(window, tids, birth, death, off, waits)
    del birth, death
    res: dict[str, int] = {k: 0 for k in WORKLOAD_CATEGORIES}
    res["cpu"], res["runqueue"], no_task, ba, bb, wseg = _sweep(key, kind, w0)
    del key, kind
    # The blocked segments by what the devices were doing: a whole elementary segment
    # is inside the flush-wait windows (barrier) or outside them (wseg).
    blen = bb - ba
    prev = blen * wseg
    for k, cat in enumerate(CATEGORIES):
        cur = prev if k >= len(covers) else select(wseg, blen, covers[k].within(ba, bb))
        res[cat] = int((cur - prev).sum()) + (int(prev.sum()) if k == 0 else 0)
        prev = cur
    leftover = blen - prev
    by_sys, blocked_by_sys = _by_syscall(ba, blen, leftover,
                                         np.asarray(off["syscall_nr"]).astype(np.int32), s, w,
                                         arch)
    if no_task:
        by_sys[NO_TASK] = no_task
    res["wait-other"] = int(leftover.sum()) + no_task
    return {
        "attribution_ns": res,
        "wait_other_by_syscall_ns": dict(sorted(by_sys.items(), key=lambda kv: -kv[1])),
        "blocked_by_syscall_ns": dict(sorted(blocked_by_sys.items(), key=lambda kv: -kv[1])),
        "threads": len(tids),
        "offcpu_intervals": len(s),
    }


def _events(window: Window, tids: np.ndarray, birth: np.ndarray, death: np.ndarray,
            off: Mapping[str, np.ndarray], waits: tuple[np.ndarray, np.ndarray] | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """workload_view's events, sorted: (off-CPU starts and wakeups clipped to their
    thread's life, the event keys, their kinds apart when not packed in the keys)."""
    w0, w1 = window.start_ns, window.end_ns
    otid, start, end, waking = (np.asarray(off[k])
                                for k in ("tid", "start_ns", "end_ns", "waking_ns"))
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
    del start, end, waking, otid
    if packed:
        key.sort()
    else:
        key, order = sort_with_order(key, overwrite=True)
        kind = np.take(kind, order)
        del order
    return s, w, key, kind


def _sweep(key: np.ndarray, kind: np.ndarray, w0: int
           ) -> tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray]:
    """Sweep the sorted events: (time on CPU, runnable, with no live thread; the blocked
    segments' starts, ends and whether each is inside a flush wait)."""
    packed = key.dtype == np.uint64
    n = len(key)
    cpu = runqueue = 0
    no_task = 0
    blocked_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    # Block by block of events (the temporaries stay in cache). The state after each
    # event holds until the next event's time: for the last event of a time, over the
    # segment to the next time; for the others, over nothing. A block takes the segments
    # from its events and the previous block's last one (the counts it left: the carry).
    carry = np.zeros(len(_COUNTS), np.int32)
    for a in range(0, n, WORKLOAD_BLOCK):
        b = min(a + WORKLOAD_BLOCK, n)
        p = max(a - 1, 0)  # the first event whose segment the block takes
        tb: np.ndarray
        if packed:
            tb = key[p:b] >> np.uint64(_EV_BITS)
            kb = np.bitwise_and(key[a:b], np.uint64((1 << _EV_BITS) - 1)).view(I64)
        else:
            tb, kb = key[p:b], kind[a:b]
        # Each count after events p .. b - 2 (the carry: after event a - 1).
        n_alive, n_off, n_runq, n_wait = (_running_count(_COUNTS[i], kb, carry, i, a - p)
                                          for i in range(len(_COUNTS)))
        del kb
        off_cpu = n_alive <= n_off
        if not off_cpu.any():
            cpu += int(tb[-1] - tb[0])
            continue
        seg_len = np.diff(tb).view(I64)
        cpu += int((seg_len * ~off_cpu).sum())  # masked sums without a selection
        runq = off_cpu & (n_runq > 0)
        runqueue += int((seg_len * runq).sum())
        rest = off_cpu & ~runq
        blocked = rest & (n_off > n_runq)
        no_task += int((seg_len * (rest & ~blocked)).sum())
        bi = np.flatnonzero(blocked & (seg_len > 0))
        if len(bi):
            blocked_parts.append((np.take(tb, bi).view(I64) + w0,
                                  np.take(tb, bi + 1).view(I64) + w0,
                                  np.take(n_wait, bi) > 0))
    del key, kind
    # The blocked segments; a whole elementary segment is inside the flush-wait windows
    # or outside them (wseg).
    if blocked_parts:
        ba, bb, wseg = (np.concatenate(x) for x in zip(*blocked_parts))
    else:
        ba, bb, wseg = np.zeros(0, I64), np.zeros(0, I64), np.zeros(0, bool)
    del blocked_parts
    return cpu, runqueue, no_task, ba, bb, wseg


def _by_syscall(ba: np.ndarray, blen: np.ndarray, leftover: np.ndarray, sysnr: np.ndarray,
                s: np.ndarray, w: np.ndarray, arch: str | None = None
                ) -> tuple[dict[str, int], dict[str, int]]:
    """The wait-other time (leftover) and the blocked time (blen) of the blocked segments
    starting at ba, by the syscall most blocked threads are in; s, w: the off-CPU
    intervals' starts and wakeups, sysnr their syscalls."""
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
            name = syscall_name(int(nr), arch) if nr >= -2 else "none"
            lv = int(leftover[m].sum())
            if lv:
                by_sys[name] = by_sys.get(name, 0) + lv
            blocked_by_sys[name] = blocked_by_sys.get(name, 0) + int(blen[m].sum())
    return by_sys, blocked_by_sys


WORKLOAD_BLOCK = 1 << 16  # events of workload_view swept (off-CPU intervals read) at a time


def _count_table(plus: tuple[int, ...], minus: int) -> np.ndarray:
    """What each kind of event adds to a running count: +1 for the kinds `plus`, -1 for
    the kind `minus`."""
    t = np.zeros(1 << _EV_BITS, np.int32)
    t[list(plus)] = 1
    t[minus] = -1
    return t


# The running counts of workload_view: threads alive, off CPU, runnable, and flush waits.
_COUNTS = (_count_table((_EV_BIRTH,), _EV_DEATH),
           _count_table((_EV_OFF, _EV_OFF_WAKE), _EV_ON),
           _count_table((_EV_WAKE, _EV_OFF_WAKE), _EV_ON),
           _count_table((_EV_WAIT,), _EV_UNWAIT))


def _running_count(table: np.ndarray, kinds: np.ndarray, carry: np.ndarray, i: int,
                   back: int) -> np.ndarray:
    """The count `table` after each event of a block of event kinds, starting from
    carry[i] (the count before the block; updated to the count after it), with `back`
    (0 or 1) leading entries of the count before the block, and without the last."""
    c = np.empty(len(kinds) + 1, np.int32)
    c[0] = carry[i]
    np.take(table, kinds, out=c[1:], mode="clip")
    np.cumsum(c, out=c)
    carry[i] = c[-1]
    return c[1 - back:-1]


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
    covers: list[Coverage] = []
    for u in cumul:
        covers.append(nested_coverage(covers[-1] if covers else None,
                                      *_unkey(u, st.span, st.origin, relevant)))
    return covers, flush_waits(rq, fl, relevant)


def flush_waits(rq: Requests, fl: FlushShare, relevant: Sequence[int],
                cls: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The flush-wait windows (starts, ends) of the flush-sequenced requests on the
    devices `relevant`; with the requests' classes `cls`, only those of class log (a
    journal or log write waiting out its flushes)."""
    wi = fl.waiter_idx
    a, b = fl.wait_windows
    ok = None
    if len(wi) and len(relevant) < len(rq.devices):
        ok = np.isin(rq.dev[wi], np.asarray(list(relevant), dtype=np.int32))
    if cls is not None and len(wi):
        log = cls[wi] == CLASS_NAMES.index("log")
        ok = log if ok is None else ok & log
    if ok is not None:
        keep = np.flatnonzero(ok)
        keep = np.concatenate((keep, keep + len(wi)))
        a, b = np.take(a, keep), np.take(b, keep)
    return a, b
