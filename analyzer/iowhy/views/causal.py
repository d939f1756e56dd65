"""Causal attribution: the workload's elapsed time along the critical path of the
recorded process, the thread time of all workload threads, and both per interval
(docs/report-json.md has the definitions in words).

Both are made of one operation, `explain`: the time of an actor (a thread) over an
interval, as pieces of time with a category each. The actor's segments (model/wakeups.py)
over the interval give the pieces; a segment explained by another thread (woken by it)
is replaced by that thread's own pieces over the same time, level by level, at most
`depth` levels deep (deeper: ``wait-other`` "(depth limit)"). Time of the interval the
actor's timeline does not cover (before its birth, after its death, outside a helper's
recorded stretches) is ``wait-other`` "(no task)" at the top, "(not recorded)" below.
The pieces tile the interval exactly, so the elapsed time's categories sum to elapsed.

* Elapsed: explain(root thread, window). The root is the recorded process's thread
  (RECORDER `pid`), else the first ROOT task, else the lowest thread id. A piece of a
  workload thread's wait left wait-other "(not seen)" (still blocked at the window end,
  or its waker unseen) in a wait only its own process ends (WAITS_ON_WORKLOAD: futex, a
  join; wait4 on a child; a pipe read) continues into the other workload threads over
  it (_continue_unseen): at each instant the best-explained state among them (cpu >
  runqueue > helper-cpu > helper-runqueue > a device > external > sleep), each
  explained one level deeper and not continued again; a thread blocked all window with
  no waker adds nothing, and where nothing is better the wait stays as it was. A
  workload thread's ``sleep`` in a sleeping syscall (SLEEP_SYSCALLS) ended by its timer
  (a polling loop, such as fio's main process waiting for its jobs in clock_nanosleep)
  continues the same way, into what is better than sleep only; a sleep never woken in
  the window is not continued.
* Thread time: explain(each workload thread, its life), summed.

Work. The timeline is built with one sort of the intervals (model/wakeups.py). explain()
walks the recursion a level at a time for all its queries at once: per level, two
searches per query in the segments' keyed starts (made once per timeline) and one
gather per piece. The pieces of one query never overlap at any level, so a query's
pieces number at most (depth + 1) x the segments its interval meets; the queries of the
elapsed time are one (the root) plus, for _continue_unseen, one per (continued piece,
other thread alive over it), whose pieces are disjoint per thread. Work and memory are
therefore linear in the segments, times the number of threads explained over the same
time (for thread time, the threads whose waits end in the same thread at once); thread
time sums each level's leaves as they come and keeps none (tests/unit/test_causal_work.py
checks the growth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .. import abi
from ..kernels import I64, Coverage, check_keyed, nested_coverage, union_intervals, unique
from ..model.wakeups import (AT_STOP, BARRIER, BLOCKQ, CAUSAL_CATEGORIES, CPU, DEPTH, DIRTY,
                             EXTERNAL, FIXED_DETAILS, HCPU, HELPER_PREFIXES, HRUNQ, IRQ_NO_RQ,
                             KIND_NAMES, L_CPU, L_HCPU, L_HRUNQ, L_LOG, L_OTHER, L_RUNQ, L_SLEEP,
                             L_EXTERNAL, NATURAL_L1, NO_TASK, NOT_RECORDED, NOT_SEEN, OTHER,
                             QUEUE, RECURSE, RUNQ, SLEEP, TASK_IO, TCPU, TRUNQ,
                             Timeline)
from ..model.wakeups import HELPER_IRQ, SLEEP_SYSCALLS, TIMER, chunk_map, ordered_map
from ..syscalls import syscall_name


@dataclass
class Leaves:
    """Pieces of explained time: the query each explains, its time, kind (level two,
    model/wakeups.py KIND_NAMES), detail (wait-other / external name), the top-level
    syscall and the innermost one, and the purpose (level one) a segment on the way to
    it set, or -1 (then its kind's own, NATURAL_L1)."""

    root: np.ndarray
    a: np.ndarray
    b: np.ndarray
    cat: np.ndarray
    detail: np.ndarray
    top_sys: np.ndarray
    in_sys: np.ndarray
    pur: np.ndarray

    @property
    def level1(self) -> np.ndarray:
        """What was waited for: the purpose, else the kind's own."""
        return np.where(self.pur >= 0, self.pur, NATURAL_L1[self.cat.astype(np.int64)])

    @property
    def length(self) -> np.ndarray:
        return self.b - self.a


Fill = Callable[[Leaves], Leaves]


def explain(tl: Timeline, actor: np.ndarray, qa: np.ndarray, qb: np.ndarray, depth: int,
            fill: Fill | None = None) -> Leaves:
    """The pieces explaining each query (actor, [qa, qb)); see the module doc. fill:
    applied to the pieces at the end (device_fill)."""
    lv = _explain(tl, actor, qa, qb, depth)[0]
    return fill(lv) if fill is not None else lv


def helper_busy(tl: Timeline, foreign: Sequence[int] = (), threads: int = 1
                ) -> list[tuple[Coverage, int]]:
    """When some recorded helper thread was on a CPU (helper-cpu) and, apart from that,
    when one was waiting for a CPU (helper-runqueue): the last resort of device_fill.
    The helpers of `foreign` (tids: another filesystem's journal threads,
    model/wakeups.py foreign_jbd2) are left out. threads: the two made side by side
    when 2 or more."""
    ok = tl.helper & ~np.isin(tl.tids, np.asarray(foreign, np.int64))
    hseg = ok[tl.actor.astype(np.int64)] if len(tl.actor) else np.zeros(0, bool)

    def busy(cat: int) -> tuple[Coverage, int] | None:
        m = np.flatnonzero(hseg & (tl.cat == cat))
        if not len(m):
            return None
        # In (actor, start) order: a sorted run per helper.
        return Coverage(*union_intervals(tl.starts(m), tl.ends(m), runs=True)), cat
    return [x for x in chunk_map(busy, (HCPU, HRUNQ), threads) if x is not None]


def device_fill(covers: Sequence[Coverage], waits: tuple[np.ndarray, np.ndarray],
                helpers: Sequence[int] = (),
                busy: Sequence[tuple[Coverage, int]] = (),
                log_waits: tuple[np.ndarray, np.ndarray] | None = None) -> Fill:
    """A fill for the time a followed helper was not recorded ("(not recorded)"), a wait
    woken by a kernel helper with no recorded intervals at all (wait-other by its name;
    `helpers`: those detail codes, unrecorded_helper_details) or a wait in iowait ended
    by an interrupt without a request link ("(irq, no request)") or from another task's
    context ("(I/O completed in another task)"):
    what the workload's devices were doing then, highest priority first (a flush in
    flight or a flush-sequenced request waiting for its flushes -> barrier, else a log
    write -> log, ... as in the correlational view), the rest stays wait-other. The
    pieces of a filled one follow each other in that order inside it (their lengths are
    exact, their places within it are not known).

    covers and waits are those of the workload's devices: a loop device's own requests
    (its service, as a wait linked to one is named: never its loop worker) and the
    devices below it. busy (helper_busy): last, the time a recorded helper
    thread (one working for the workload: it was handed work by a workload thread or
    ended one's wait) was on a CPU or waiting for one, as helper-cpu and
    helper-runqueue: with no I/O in flight, an unexplained wait is most likely one on
    that helper's work (an XFS log push formatting the log, a flusher building bios);
    not a helper's own timer wait ("(helper's timer)", HELPER_IRQ).

    log_waits (a subset of waits): the flush-wait windows of the log writes (a journal
    commit block or an XFS iclog write waiting out its pre- or post-flush). Time under
    one comes first and is a flush serving the log: kind flush, level one log, what a
    wait linked to that log write is named (model/wakeups.py), so the same wait reads
    the same whichever way its wakeup was seen."""
    ws, we = waits
    cum = []
    pur1: list[int] = []  # the level one of each cats entry, -1: the kind's own
    if log_waits is not None and len(log_waits[0]):
        cum.append(Coverage(*union_intervals(log_waits[0], log_waits[1], runs=True)))
        pur1.append(L_LOG)
    for c in covers:
        s, e = union_intervals(np.concatenate((c.s, ws)), np.concatenate((c.e, we)), runs=True)
        cum.append(nested_coverage(cum[-1] if cum else None, s, e))
    cats = [BARRIER] * len(pur1) + [BARRIER + k for k in range(len(covers))]
    pur1 += [-1] * len(covers)
    busy_at = len(cats)  # cats from here on: the recorded helpers' own time
    for cov, cat in busy:
        if not len(cov.s):
            continue
        prev = cum[-1] if cum else Coverage(ws, we)
        s, e = union_intervals(np.concatenate((prev.s, cov.s)), np.concatenate((prev.e, cov.e)),
                               runs=True)
        cum.append(nested_coverage(prev, s, e))
        cats.append(cat)
        pur1.append(-1)

    def fill(lv: Leaves) -> Leaves:
        m = (lv.cat == OTHER) & np.isin(lv.detail, (NOT_RECORDED, IRQ_NO_RQ, TASK_IO, AT_STOP,
                                                    *helpers))
        if not m.any() or not cum:
            return lv
        i = np.flatnonzero(m)
        a, b = lv.a[i], lv.b[i]
        lens = [c.within(a, b) for c in cum]
        excl = [lens[0]] + [lens[k] - lens[k - 1] for k in range(1, len(lens))]
        excl.append((b - a) - lens[-1])
        # A helper's own timer wait (HELPER_IRQ) is not filled by other helpers' time.
        own = lv.detail[i] == HELPER_IRQ
        if own.any():
            for k in range(busy_at, len(cats)):
                excl[-1] = excl[-1] + np.where(own, excl[k], 0)
                excl[k] = np.where(own, 0, excl[k])
        parts = []
        at = a.copy()
        for k, ln, p1 in zip(cats + [OTHER], excl, pur1 + [-1]):
            det = lv.detail[i] if k == OTHER else np.full(len(i), -1)
            pur = lv.pur[i] if p1 < 0 else np.where(lv.pur[i] >= 0, lv.pur[i],
                                                    p1).astype(lv.pur.dtype)
            parts.append((lv.root[i], at, at + ln, np.full(len(i), k, np.int8),
                          det.astype(np.int32), lv.top_sys[i], lv.in_sys[i], pur))
            at = at + ln
        keep = ~m
        cols = [np.concatenate([x[keep]] + [p[j] for p in parts])
                for j, x in enumerate(_cols(lv))]
        nz = cols[2] > cols[1]
        return Leaves(*(c[nz] for c in cols))
    return fill


def helper_timers(fill: Fill) -> Fill:
    """`fill` (device_fill, given HELPER_IRQ among its codes), then the wait-other
    "(helper's timer)" it leaves (a helper out of iowait woken from an interrupt with no
    request, while no device of the workload was working) as ``sleep``: the helper
    slept on a timer (model/wakeups.py, rule 2)."""
    def then_sleep(lv: Leaves) -> Leaves:
        lv = fill(lv)
        m = (lv.cat == OTHER) & (lv.detail == HELPER_IRQ)
        if m.any():
            lv.cat = np.where(m, SLEEP, lv.cat).astype(np.int8)
            lv.detail = np.where(m, -1, lv.detail).astype(np.int32)
        return lv
    return then_sleep


def unrecorded_helper_details(tl: Timeline) -> list[int]:
    """Detail codes of wait-other time woken by a kernel helper (HELPER_PREFIXES) the
    trace has no intervals of: like a helper's stretch not recorded, what it did over
    the wait is known only from the devices (device_fill)."""
    return [i for i, n in enumerate(tl.details)
            if i >= len(FIXED_DETAILS) and n.encode().startswith(HELPER_PREFIXES)]


def _explain(tl: Timeline, actor: np.ndarray, qa: np.ndarray, qb: np.ndarray, depth: int
             ) -> tuple[Leaves, np.ndarray]:
    """explain() before its fill, and the actor whose timeline gave each piece."""
    out = [p for level in _levels(tl, actor, qa, qb, depth) for p in level]
    if not out:
        z = np.zeros(0, I64)
        return _empty(), z
    cols = [np.concatenate(x) for x in zip(*out)]
    return Leaves(*cols[:8]), cols[8].astype(I64)


def _empty() -> Leaves:
    z = np.zeros(0, I64)
    return Leaves(z, z, z, np.zeros(0, np.int8), z.astype(np.int32), z.astype(np.int32),
                  z.astype(np.int32), np.zeros(0, np.int8))


def _levels(tl: Timeline, actor: np.ndarray, qa: np.ndarray, qb: np.ndarray, depth: int
            ) -> Iterator[list[tuple[np.ndarray, ...]]]:
    """The leaves of explain() before its fill, a level of the recursion at a time: per
    level a list of (root, a, b, kind, detail, top_sys, in_sys, purpose, actor) column
    tuples. A piece's purpose is its query's, else its segment's (the first segment on
    the way from the query's thread that set one); a CPU or runnable piece of a thread
    other than the query's own is another workload thread's (TCPU, TRUNQ).

    Work: per level, two searches per query and one gather per piece; the queries of a
    level are the RECURSE pieces of the one before, whose pieces tile them, so the
    pieces of one query never overlap at any level."""
    nq = len(actor)
    root = np.arange(nq, dtype=I64)
    top = np.full(nq, -3, np.int32)
    inner = np.full(nq, -3, np.int32)
    qpur = np.full(nq, -1, np.int8)
    act = np.asarray(actor, I64)
    home = act.copy()  # the thread each query explains
    qa, qb = np.asarray(qa, I64), np.asarray(qb, I64)
    level = 0
    while len(act):
        out: list[tuple[np.ndarray, ...]] = []
        # Keyed times of the queries (Timeline.keys): a time t of query q is t + qoff[q].
        qoff = act * tl.span
        qoff -= tl.origin
        lo, hi = _segment_range(tl, qa + qoff, qb + qoff)
        cnt = np.maximum(hi - lo, 0)
        qi = np.repeat(np.arange(len(act)), cnt)
        first = np.cumsum(cnt) - cnt
        si = lo[qi] + (np.arange(len(qi)) - first[qi])
        pa, pb = _clipped(tl, si, qi, cnt, first, act, qa, qb, qoff)
        del lo, hi
        _gaps(out, qi, pa, pb, cnt, first, qa, qb, root, top, inner, qpur,
              NO_TASK if level == 0 else NOT_RECORDED,
              _exiting(tl, act, qb) if level else None, act, home)
        cat = tl.cat[si]
        arg = tl.arg[si]
        det = np.where(cat == RECURSE, -1, arg)
        ssys = tl.sys[si]
        blocked_sys = ssys >= -2
        p_top = ssys if level == 0 else top[qi]
        p_in = np.where(blocked_sys, ssys, inner[qi])
        p_pur = qpur[qi]
        p_pur = np.where(p_pur >= 0, p_pur, tl.pur[si]).astype(np.int8)
        if level:
            cat = _as_other_thread(cat, (act != home)[qi])
        rec = cat == RECURSE
        if level >= depth:
            cat = np.where(rec, OTHER, cat).astype(np.int8)
            det = np.where(rec, DEPTH, det)
            rec = np.zeros(len(cat), bool)
        leaf = ~rec
        ql = qi[leaf]
        out.append((root[ql], pa[leaf], pb[leaf], cat[leaf], det[leaf], p_top[leaf],
                    p_in[leaf], p_pur[leaf], act[ql]))
        del ql, leaf
        # The next level's queries, then only the leaves are kept while they are used.
        qr = qi[rec]
        act = arg[rec].astype(I64)
        qa, qb = pa[rec], pb[rec]
        root, top, inner = root[qr], p_top[rec], p_in[rec]
        qpur, home = p_pur[rec], home[qr]
        del qr, qi, si, first, cnt, pa, pb, cat, arg, det, ssys, blocked_sys, p_top, p_in
        del p_pur, rec, qoff
        yield out
        del out
        level += 1


def _clipped(tl: Timeline, si: np.ndarray, qi: np.ndarray, cnt: np.ndarray,
             first: np.ndarray, act: np.ndarray, qa: np.ndarray, qb: np.ndarray,
             qoff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The start and end of each segment si met by query qi (_segment_range; cnt and
    first: each query's count and first piece), clipped to the query [qa, qb).

    The segments a query meets are consecutive ones of its actor: each ends where the
    next starts, so only a query's first start (clipped to qa) and last end are
    computed; the last is the next segment's start if the actor has one (it starts
    at or after qb) or the actor's death, so min(qb, death) either way."""
    n = len(si)
    ks = tl.kstart[si]
    kb = np.empty(n, I64)
    if n:
        kb[:-1] = ks[1:]
        has = np.flatnonzero(cnt)
        f = first[has]
        ks[f] = np.maximum(ks[f], qa[has] + qoff[has])
        last = f + cnt[has] - 1
        kb[last] = np.minimum(qb[has], tl.death[act[has]]) + qoff[has]
    off = qoff[qi]
    ks -= off
    kb -= off
    return ks, kb


def _as_other_thread(kind: np.ndarray, other: np.ndarray) -> np.ndarray:
    """The kinds, a CPU or runnable one of another workload thread (other) made that."""
    out = kind.copy()
    out[other & (kind == CPU)] = TCPU
    out[other & (kind == RUNQ)] = TRUNQ
    return out


def _segment_range(tl: Timeline, ka: np.ndarray, kb: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi): the segments of each query's actor meeting [ka, kb) (keyed times,
    Timeline.keys). The keys are searched in sorted order (numpy's search then narrows
    each from the one before, and the table is read in order), the results put back in
    the queries' order."""
    o = np.argsort(ka, kind="stable") if len(ka) > 64 else None
    if o is not None:
        ka, kb = ka[o], kb[o]
    lo = tl.first_segment(ka)
    hi = np.searchsorted(tl.key_starts(), kb, side="left")
    if o is None:
        return lo, hi
    lo_, hi_ = np.empty_like(lo), np.empty_like(hi)
    lo_[o], hi_[o] = lo, hi
    return lo_, hi_


def _exiting(tl: Timeline, act: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """Per query: whether its actor is a workload thread whose life ended before the
    query's end. A thread followed as a waker woke the waiter at the query's end, so it
    ran until then: after its EXIT record it was on its exit path (freeing its memory,
    notifying its parent), on CPU."""
    return ~tl.helper[act] & (tl.death[act] < qb)


def _gaps(out: list[tuple[np.ndarray, ...]], qi: np.ndarray, pa: np.ndarray, pb: np.ndarray,
          cnt: np.ndarray, first: np.ndarray, qa: np.ndarray, qb: np.ndarray, root: np.ndarray,
          top: np.ndarray, inner: np.ndarray, qpur: np.ndarray, reason: int,
          exiting: np.ndarray | None, act: np.ndarray, home: np.ndarray) -> None:
    """Leaves for the time of each query its pieces do not cover (pieces of a query are
    in time order and do not overlap), of the query's purpose; the time after the death
    of an exiting waker (_exiting) is cpu (another workload thread's)."""
    prev = np.empty(len(qi), I64)
    if len(qi):
        prev[1:] = pb[:-1]
        prev[first[cnt > 0]] = qa[cnt > 0]
    ga = np.concatenate((prev, np.where(cnt > 0, pb[np.maximum(first + cnt - 1, 0)]
                                        if len(pb) else qa, qa)))
    gb = np.concatenate((pa, qb))
    gq = np.concatenate((qi, np.arange(len(qa))))
    m = np.flatnonzero(gb > ga)  # the gaps that are not empty
    if len(m):
        n = len(m)
        cat = np.full(n, OTHER, np.int8)
        det = np.full(n, reason, np.int32)
        g = gq[m]
        if exiting is not None:
            # The trailing gaps (the last len(qa)) of exiting wakers, from their death on.
            tail = np.zeros(len(ga), bool)
            tail[len(qi):] = exiting
            tail = tail[m]
            if tail.any():
                cat[tail], det[tail] = CPU, -1
                cat = _as_other_thread(cat, act[g] != home[g])
        inn = inner[g] if reason != NO_TASK else np.full(n, NO_TASK_SYS, np.int32)
        out.append((root[g], ga[m], gb[m], cat, det, top[g], inn, qpur[g], act[g]))


# -- a critical path over a wait nobody ended ---------------------------------------------

# Waits a thread can only be released from by its own process's threads (a join, a
# child's exit, a pipe between threads): left unexplained, the critical path continues
# into the other workload threads over them (_continue_unseen).
WAITS_ON_WORKLOAD = frozenset({"futex", "futex_waitv", "wait4", "waitid", "waitpid",
                               "read", "readv"})
# Preference among the other threads' pieces at an instant, by kind, best first: on CPU,
# waiting for a CPU, a helper working, a device, a queue, a throttle, a task outside, a
# sleep; wait-other last.
_RANK = np.full(len(KIND_NAMES), 13, np.int64)
for _r, _ks in enumerate(((CPU, TCPU), (RUNQ, TRUNQ), (HCPU,), (HRUNQ,), (BARRIER,),
                          (BARRIER + 1,), (BARRIER + 2,), (BARRIER + 3,), (BARRIER + 4,),
                          (QUEUE,), (DIRTY, BLOCKQ), (EXTERNAL,), (SLEEP,))):
    _RANK[list(_ks)] = _r
_RANK8 = _RANK.astype(np.int8)  # the ranks as a radix sort takes them
_NRANKS = int(_RANK.max()) + 1


CONTINUE_BATCH = 1 << 16  # segments of the other threads explained over a batch of pieces


def _continue_unseen(tl: Timeline, lv: Leaves, actors: np.ndarray, depth: int,
                     arch: str | None, threads: int = 1) -> Iterator[Leaves]:
    """Replace each piece of a workload thread's wait whose waker was not seen
    (wait-other "(not seen)", in a syscall of WAITS_ON_WORKLOAD) or of its sleep in a
    sleeping syscall (SLEEP_SYSCALLS) ended by its timer (TIMER), by the best-explained
    state, instant by instant, among the other workload threads over it (_RANK), each
    explained as explain() does, one level less deep and without continuing again.
    Where none of them is better than wait-other (than sleep, for a sleep) the piece
    stays as it was. lv: leaves of one query (disjoint pieces). Yields the leaves in
    batches: those kept, then the continued pieces' a batch of pieces at a time.

    Work: one explain() of every (piece, other thread alive over it) pair of a batch at
    once, and one pass per rank over the leaves it gives (_best_of): linear in those
    leaves. A batch of pieces meets about CONTINUE_BATCH segments of the other threads
    (a piece is never split: one meeting more is a batch of its own); the batches are
    worked on `threads` at a time (ordered_map), yielded in order."""
    nw = int((~tl.helper).sum())
    if depth <= 0 or nw < 2 or not len(lv.a):
        yield lv
        return
    name = _sys_name(arch)
    waits = np.zeros(len(lv.a), bool)
    for nr in unique(lv.in_sys).tolist():
        if name(int(nr)) in WAITS_ON_WORKLOAD:
            waits |= lv.in_sys == nr
    sleeps = np.zeros(len(lv.a), bool)
    for nr in unique(lv.in_sys[lv.cat == SLEEP]).tolist():
        if name(int(nr)) in SLEEP_SYSCALLS:
            sleeps |= lv.in_sys == nr
    own = (actors >= 0) & (actors < nw)
    # A sleep in a sleeping syscall ended by its timer (a polling loop: fio's main
    # process waits for its jobs in clock_nanosleep) continues into what is better than
    # sleep; one never woken in the window is a sleep, whatever the others do.
    slept = (lv.cat == SLEEP) & (lv.detail == TIMER) & sleeps & own
    m = ((lv.cat == OTHER) & (lv.detail == NOT_SEEN) & waits & own) | slept
    if not m.any():
        yield lv
        return
    yield _take(lv, np.flatnonzero(~m))
    idx = np.flatnonzero(m)
    pa, pb = lv.a[idx], lv.b[idx]
    # Queries: each piece with every other workload thread alive over it, by thread.
    qp, qk = _alive_over(pa, pb, tl.birth[:nw], tl.death[:nw], actors[idx])
    below = np.where(slept[idx], _RANK[SLEEP], _RANK.max())
    # Batches of whole pieces by the segments their queries meet (qp is sorted).
    qoff = tl.keys(qk, np.zeros(len(qk), I64))  # a time t of query k is t + qoff[k]
    lo, hi = _segment_range(tl, pa[qp] + qoff, pb[qp] + qoff)
    del qoff
    work = np.cumsum(1 + np.bincount(qp, weights=np.maximum(hi - lo, 1), minlength=len(idx)))
    del lo, hi
    qstart = np.searchsorted(qp, np.arange(len(idx) + 1))  # each piece's first query
    batches = []
    start = 0
    while start < len(idx):
        limit = (work[start - 1] if start else 0) + CONTINUE_BATCH
        end = max(start + 1, int(np.searchsorted(work, limit, side="right")))
        batches.append((start, end))
        start = end

    def batch(se: tuple[int, int]) -> Leaves:
        start, end = se
        q = slice(int(qstart[start]), int(qstart[end]))
        bp, bk = qp[q] - start, qk[q]
        pcs = slice(start, end)
        sub = _explain(tl, bk, pa[pcs][bp], pb[pcs][bp], depth - 1)[0]
        if not len(sub.a):  # no other thread alive over these pieces: they stay
            return _take(lv, idx[pcs])
        cp, ea, eb, owner = _best_of(sub, bp[sub.root], pa[pcs], pb[pcs], below[pcs])
        mine = owner < 0
        oc = np.maximum(owner, 0)
        src = idx[cp + start]
        # An owner's CPU or runnable time is another workload thread's.
        theirs = _as_other_thread(sub.cat[oc].astype(np.int8), np.ones(len(oc), bool))
        return Leaves(lv.root[src], ea, eb,
                      np.where(mine, lv.cat[src], theirs).astype(lv.cat.dtype),
                      np.where(mine, lv.detail[src], sub.detail[oc]).astype(lv.detail.dtype),
                      lv.top_sys[src],
                      np.where(mine, lv.in_sys[src], sub.in_sys[oc]).astype(lv.in_sys.dtype),
                      np.where(mine, lv.pur[src], sub.pur[oc]).astype(np.int8))
    yield from ordered_map(batch, batches, threads)


def _alive_over(pa: np.ndarray, pb: np.ndarray, birth: np.ndarray, death: np.ndarray,
                me: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (piece, thread), sorted by piece then thread, of the disjoint pieces [pa,
    pb) and the threads whose life [birth, death) meets them, but the piece's own (me).
    A thread that lived none of a piece would add only time "(no task)", which never
    replaces anything."""
    o = np.argsort(pa, kind="stable")
    sa, sb = pa[o], pb[o]
    lo = np.searchsorted(sb, birth, side="right")  # first piece ending after the birth
    hi = np.searchsorted(sa, death, side="left")  # first piece starting at the death
    cnt = np.maximum(hi - lo, 0)
    k = np.repeat(np.arange(len(birth), dtype=I64), cnt)
    first = np.cumsum(cnt) - cnt
    p = o[np.repeat(lo, cnt) + (np.arange(len(k)) - np.repeat(first, cnt))]
    keep = k != me[p]
    p, k = p[keep], k[keep]
    s = np.lexsort((k, p))
    return p[s], k[s]


def _cols(lv: Leaves) -> tuple[np.ndarray, ...]:
    return (lv.root, lv.a, lv.b, lv.cat, lv.detail, lv.top_sys, lv.in_sys, lv.pur)


DENSE_CUTS = 32  # _best_of counts per edge when more than 1 / DENSE_CUTS of its edges are open


def _best_of(sub: Leaves, piece: np.ndarray, pa: np.ndarray, pb: np.ndarray,
             below: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each piece [pa, pb) cut at every boundary of its leaves in sub (piece: the piece
    of each leaf), and per cut the leaf with the best rank covering it among the ranks
    under the piece's `below` (-1: none): (piece, start, end, owner) of every cut.
    Among leaves of one rank, the one starting at or before the cut with the latest end
    (of those, the last in sub's order) owns it.

    Times are keyed by piece (piece * width + offset in the piece, width above every
    piece's length), so one sort orders all pieces' edges and a running maximum never
    crosses from one piece into the next."""
    n = len(pa)
    width = int((pb - pa).max()) + 1 if n else 1
    check_keyed(n, width)
    base = np.arange(n, dtype=I64) * width
    ln = pb - pa
    bounds = np.stack((base, base + ln), axis=1).ravel()  # each piece's edges, sorted
    if not len(sub.a):
        edges = unique(bounds)
    else:
        # The leaves lie inside their pieces (they explain them), keyed by a shift.
        shift = (base - pa)[piece]
        la = sub.a + shift
        lb = sub.b + shift
        del shift
        # The leaves by start once (stable: sub's order among equal starts). The edges
        # are every leaf's start and each piece's: the leaves of one query tile its
        # piece, so a leaf ends where another of its query starts or at its piece's
        # end. One stable sort merges the two sorted runs.
        by_start = np.argsort(la, kind="stable")
        ls = la[by_start]
        edges = np.sort(np.concatenate((ls, bounds)), kind="stable")
        keep = np.empty(len(edges), bool)
        keep[:1] = True
        np.not_equal(edges[1:], edges[:-1], out=keep[1:])
        edges = edges[keep]
        # The edge (an index into edges) of each leaf's start, in start order: its place
        # in the merge of the two sorted runs, after the bounds below it (a bound is
        # below the leaves from the first one above it on: a count of those firsts),
        # less the repeats before it.
        # Edge indices are below len(edges): int32 when that is (always, in practice).
        ei = np.dtype(np.int32 if len(keep) < 1 << 31 else np.int64)
        below_ls = np.bincount(np.searchsorted(ls, bounds, side="right"),
                               minlength=len(ls) + 1)[:len(ls)]
        np.cumsum(below_ls, out=below_ls)
        below_ls += np.arange(len(ls))
        at_edge: np.ndarray = np.cumsum(keep, dtype=ei)
        at_edge -= 1
        start_edge = at_edge[below_ls]
        del keep, at_edge, ls, below_ls
    cut_piece = edges // width
    same = cut_piece[1:] == cut_piece[:-1]
    nedges = len(edges)
    cut_edge = np.flatnonzero(same)  # each cut's start, an index into edges
    ka, kb = edges[cut_edge], edges[cut_edge + 1]
    cp = cut_piece[cut_edge]
    del edges, cut_piece, same
    owner = np.full(len(ka), -1, np.int64)
    back = (pa - base)[cp]  # a cut's keyed times back to times
    if not len(sub.a):
        return cp, ka + back, kb + back, owner
    # Each rank's leaves in start order: one stable (radix) sort of the ranks of the
    # leaves in start order. Only the cuts no better rank owns are searched.
    rank = _RANK8[sub.cat.astype(np.intp)][by_start]
    rank_order = np.argsort(rank, kind="stable")  # positions in start order, by rank
    by_rank = by_start[rank_order]
    edge_by_rank = start_edge[rank_order]
    # Where each rank's leaves start in that order: a search of the ranks it sorts.
    at = np.searchsorted(rank[rank_order], np.arange(_NRANKS + 1, dtype=rank.dtype))
    del rank, by_start, rank_order, start_edge
    cut_below = below[cp]
    open_cut = np.flatnonzero(cut_below > 0)
    # Every cut's `below` is at least the least piece's: the ranks under it need no
    # filter of the open cuts.
    every = int(below.min()) if n else 0
    for r in range(int(below.max()) if n else 0):
        if at[r] == at[r + 1] or not len(open_cut):
            continue
        k = by_rank[at[r]:at[r + 1]]
        sb = lb[k]
        cmax = np.maximum.accumulate(sb)
        # The position of the running maximum: positions where a leaf's end is not the
        # maximum so far count as 0 (the maximum's own position is never less).
        arg = np.arange(len(k))
        arg[sb != cmax] = 0
        np.maximum.accumulate(arg, out=arg)
        del sb
        c = open_cut if r < every else open_cut[r < cut_below[open_cut]]
        kc = ka[c]
        # The last leaf starting at or before each cut: a search per cut when few are
        # open, else a count of the leaves starting at each edge (every leaf starts at
        # an edge and edges ascend strictly: the same index either way).
        if len(c) * DENSE_CUTS < nedges:
            j = np.searchsorted(la[k], kc, side="right")
        else:
            cnt = np.bincount(edge_by_rank[at[r]:at[r + 1]], minlength=nedges)
            np.cumsum(cnt, out=cnt)
            j = cnt[cut_edge[c]]
            del cnt
        j -= 1
        jj = np.maximum(j, 0)
        ok = (j >= 0) & (cmax[jj] > kc)
        won = np.flatnonzero(ok)  # an index: gathered from two columns
        owner[c[won]] = k[arg[jj[won]]]
        del won
        # Open for the next ranks: the cuts of c this rank did not own (a cut left out
        # of c has its `below` at or under r, so no later rank is searched for it).
        open_cut = c[~ok]
    return cp, ka + back, kb + back, owner


# -- the views ----------------------------------------------------------------------------


def root_actor(tl: Timeline, tasks: Mapping[str, np.ndarray], pid: int | None) -> int:
    """The actor of the recorded process (module doc); -1 without workload threads."""
    nw = int((~tl.helper).sum())
    if not nw:
        return -1
    wt = tl.tids[:nw]
    cand: list[int] = []
    if pid:
        cand.append(int(pid))
    ev = np.asarray(tasks.get("event_u16", np.zeros(0)))
    if len(ev):
        ts = np.asarray(tasks["ts_ns"]).astype(I64)
        tt = np.asarray(tasks["tid"]).astype(I64)
        r = np.flatnonzero(ev == abi.TASK_ROOT)
        if len(r):
            cand.append(int(tt[r[np.lexsort((tt[r], ts[r]))[0]]]))
    for c in cand:
        i = np.flatnonzero(wt == c)
        if len(i):
            return int(i[0])
    return int(np.argmin(wt))


NO_TASK_SYS = -4  # the "syscall" of time with no thread alive


def _sys_name(arch: str | None) -> Any:
    return lambda nr: ("none" if nr == -3 else "(no task)" if nr == NO_TASK_SYS
                       else syscall_name(nr, arch))


ELAPSED_BATCH = 1 << 16  # leaves of the root's explanation continued and filled together


def elapsed_view(tl: Timeline, root: int, depth: int, arch: str | None,
                 fill: Fill | None = None, steps: Sequence[int] = (), threads: int = 1
                 ) -> tuple[dict[str, Any], dict[int, list[dict[str, Any]]]]:
    """The elapsed time along the critical path: attribution_ns (level one) and
    attribution_detail_ns (level two), their breakdowns, and per step of `steps` (ns)
    the attribution per interval of that length.

    The leaves are continued (_continue_unseen, its batches `threads` at a time),
    filled and summed a batch at a time as the recursion gives them (at most
    ELAPSED_BATCH at once), never kept."""
    w0, w1 = tl.origin, tl.origin + tl.span - 2
    tally = _Tally(w0, w1, steps)
    if root < 0:
        tally.add(Leaves(np.zeros(1, I64), np.array([w0], I64), np.array([w1], I64),
                         np.array([OTHER], np.int8), np.array([NO_TASK], np.int32),
                         np.array([-3], np.int32), np.array([-3], np.int32),
                         np.array([-1], np.int8)))
    else:
        for level in _levels(tl, np.array([root]), np.array([w0]), np.array([w1]), depth):
            for part in level:
                for a in range(0, len(part[0]), ELAPSED_BATCH):
                    cut = [x[a:a + ELAPSED_BATCH] for x in part]
                    for lv in _continue_unseen(tl, Leaves(*cut[:8]), cut[8], depth, arch,
                                               threads):
                        tally.add_filled(lv, fill)
            del level, part  # not kept while the next level is made
    name = _sys_name(arch)

    def detail(d: int) -> str:
        return tl.details[d]
    res = {
        "attribution_ns": tally.level1(),
        "attribution_detail_ns": tally.level2(),
        "wait_other_by_syscall_ns": tally.named("wait_other_sys", name),
        "wait_other_by_waker_ns": tally.named("wait_other_waker", detail),
        "external_by_comm_ns": tally.named("external", detail),
        "sleep_by_syscall_ns": tally.named("sleep", name),
        "blocked_by_syscall_ns": tally.named("blocked", name),
        "root_tid": int(tl.tids[root]) if root >= 0 else None,
    }
    return res, {step: tally.intervals(step) for step in steps}


NL1, NK = len(CAUSAL_CATEGORIES), len(KIND_NAMES)
_ON_CPU_L1 = (L_CPU, L_RUNQ, L_HCPU, L_HRUNQ)  # level ones that are not a wait


def detail_dict(m: np.ndarray) -> dict[str, dict[str, int]]:
    """attribution_detail_ns from a (level one x kind) matrix of ns: every level one,
    its non-zero parts by kind name."""
    return {c: {k: int(v) for k, v in zip(KIND_NAMES, row.tolist()) if v}
            for c, row in zip(CAUSAL_CATEGORIES, m)}


class _Tally:
    """Sums of leaves added a batch at a time: per level one and kind, the breakdowns of
    elapsed_view by a code (syscall or detail), and per interval of each step."""

    def __init__(self, w0: int, w1: int, steps: Sequence[int]) -> None:
        self.m = np.zeros((NL1, NK), I64)
        self.by: dict[str, dict[int, int]] = {k: {} for k in (
            "wait_other_sys", "wait_other_waker", "external", "sleep", "blocked")}
        self.w0 = w0
        self.edges: dict[int, np.ndarray] = {}
        self.spans: dict[int, np.ndarray] = {}  # per step: ns per (code, interval)
        for step in steps:
            if step > 0 and w1 > w0:
                e = np.append(np.arange(w0, w1, step, dtype=I64), I64(w1))
                self.edges[step] = e
                self.spans[step] = np.zeros((NL1 * NK, len(e) - 1), I64)

    def add_filled(self, lv: Leaves, fill: Fill | None) -> None:
        """add(fill_leaves(lv, fill)), without making it (the sums are additive): the
        leaves a fill leaves untouched where they are, the filled ones apart."""
        cand = _fill_candidates(lv) if fill is not None else None
        if cand is None or not cand.any():
            self.add(lv)
            return
        assert fill is not None
        self.add(lv, ~cand)
        self.add(fill(_take(lv, np.flatnonzero(cand))))

    def add(self, lv: Leaves, weigh: np.ndarray | None = None) -> None:
        """Add the leaves' time (weigh: only of those leaves)."""
        if not len(lv.a):
            return
        ln = lv.length
        if weigh is not None:
            ln *= weigh
        i = _code_index(lv)
        l1, code = _L1[i], _CODE[i]
        del i
        self.m.reshape(-1)[:] += _isum(code, ln, NL1 * NK)
        wo = l1 == L_OTHER
        ext = l1 == L_EXTERNAL
        slp = l1 == L_SLEEP
        blocked = (lv.in_sys >= -2) & _WAIT_L1[l1]
        for key, c, sel in (("wait_other_sys", lv.in_sys, wo),
                            ("wait_other_waker", lv.detail, wo),
                            ("external", lv.detail, ext), ("sleep", lv.in_sys, slp),
                            ("blocked", lv.in_sys, blocked)):
            if sel.any():
                d = self.by[key]
                for k, v in zip(*_group_sums(c[sel], ln[sel])):
                    d[k] = d.get(k, 0) + v
        for step, e in self.edges.items():
            self.spans[step].reshape(-1)[:] += _per_interval(lv.a, lv.b, weigh, code, e, step)

    def level1(self) -> dict[str, int]:
        return {k: int(v) for k, v in zip(CAUSAL_CATEGORIES, self.m.sum(axis=1).tolist())}

    def level2(self) -> dict[str, dict[str, int]]:
        return detail_dict(self.m)

    def named(self, key: str, name: Any) -> dict[str, int]:
        """{name: ns} by the codes' order, equal names added up, largest first."""
        out: dict[str, int] = {}
        for k, v in sorted(self.by[key].items()):
            if v:
                nm = name(int(k))
                out[nm] = out.get(nm, 0) + int(v)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def intervals(self, step: int) -> list[dict[str, Any]]:
        """The attribution per interval of `step` ns from the window start (the last one
        shorter), level one and level two: each interval's level ones sum exactly to its
        length, and each level one's parts to it."""
        if step not in self.edges:
            return []
        e = self.edges[step]
        d = self.spans[step].reshape(NL1, NK, len(e) - 1)
        return [{"start_ns": int(e[i] - self.w0), "end_ns": int(e[i + 1] - self.w0),
                 "attribution_ns": {k: int(v) for k, v in
                                    zip(CAUSAL_CATEGORIES, d[:, :, i].sum(axis=1).tolist())},
                 "attribution_detail_ns": detail_dict(d[:, :, i])}
                for i in range(len(e) - 1)]


BY_THREAD_MAX = 200  # threads listed in thread_time `by_thread`, the busiest first


ROOT_WAIT_SHARE = 0.5  # the root's event waits this long together are named (root_event_wait)


def root_event_wait(tl: Timeline, root: int, arch: str | None,
                    comms: Mapping[int, str] | None = None) -> dict[str, Any] | None:
    """The root thread's waits in an event-wait syscall (SLEEP_SYSCALLS: select, poll,
    epoll, pause...) that other workload threads ended, when together they cover at least
    ROOT_WAIT_SHARE of the window: their time (`ns`) and number (`waits`), the syscall
    and the waker with the most of that time; else None. The elapsed time then says what
    those threads did over the waits, which is the cause when the root waited for them
    (make, a Python parent polling its child's pipe) and not when the root was idle (a
    server's master process, woken now and then by its workers): the report says so."""
    if root < 0:
        return None
    nw = int((~tl.helper).sum())
    m = (tl.actor == root) & (tl.cat == RECURSE) & (tl.arg >= 0) & (tl.arg < nw)
    if not m.any():
        return None
    name = _sys_name(arch)
    idx = np.flatnonzero(m)
    idx = idx[[name(int(n)) in SLEEP_SYSCALLS for n in tl.sys[idx].tolist()]]
    if not len(idx):
        return None
    lens = tl.ends(idx) - tl.starts(idx)
    ns = int(lens.sum())
    if ns < ROOT_WAIT_SHARE * (tl.span - 2):
        return None
    by_sys = np.unique(tl.sys[idx], return_inverse=True)
    sys_nr = int(by_sys[0][np.argmax(np.bincount(by_sys[1], weights=lens))])
    by_waker = np.unique(tl.arg[idx], return_inverse=True)
    waker = int(by_waker[0][np.argmax(np.bincount(by_waker[1], weights=lens))])
    tid = int(tl.tids[waker])
    return {"syscall": name(sys_nr), "ns": ns, "waits": int(len(idx)), "waker_tid": tid,
            "waker_comm": (comms or {}).get(tid, "")}


CPU_TO_STOP_NS = 100_000_000  # a thread's time on CPU up to the stop this long is named


def cpu_to_stop(tl: Timeline, end_ns: int) -> dict[str, int] | None:
    """For a recording whose recorder did not write the sleeps still open at the stop
    (format before abi.OPEN_END_VERSION): the workload threads alive at the window's end
    whose last segment is time on CPU of at least CPU_TO_STOP_NS up to the end, how many
    and that time; part of it may be a sleep never closed. None when there is none."""
    nw = int((~tl.helper).sum())
    if not nw or not len(tl.actor):
        return None
    a = np.arange(nw)
    last = np.searchsorted(tl.actor, a, side="right") - 1
    has = last >= 0
    a, last = a[has], last[has]
    has = tl.actor[last] == a
    a, last = a[has], last[has]
    lens = tl.ends(last) - tl.starts(last)
    m = (tl.death[a] >= end_ns) & (tl.cat[last] == CPU) & (lens >= CPU_TO_STOP_NS)
    if not m.any():
        return None
    return {"threads": int(m.sum()), "ns": int(lens[m].sum())}


THREAD_BATCH = 1 << 16  # segments of the threads explained together by thread_time_view


def _thread_slices(tl: Timeline, nw: int, most: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The lives [birth, death) of the nw workload threads cut at the start of every
    `most`-th segment of each: (actor, start, end, segments) of each slice, in actor
    then time order. The explanation of an interval is that of its parts side by side
    (every piece is clipped to its query, at every level), so the sums over the slices
    are those over the lives; a slice bounds what one query makes."""
    first = np.searchsorted(tl.actor, np.arange(nw + 1, dtype=tl.actor.dtype))
    cnt = np.diff(first)
    cuts = np.maximum((cnt - 1) // most, 0)  # cuts inside each life
    act = np.repeat(np.arange(nw, dtype=I64), cuts)
    at = np.arange(len(act), dtype=I64) - np.repeat(np.cumsum(cuts) - cuts, cuts)
    seg = first[:-1][act] + (at + 1) * most  # the segment each cut starts
    t = tl.starts(seg)
    qact = np.repeat(np.arange(nw, dtype=I64), cuts + 1)
    head = np.cumsum(cuts + 1) - (cuts + 1)  # each thread's first slice
    last = head + cuts  # and its last
    # The cuts in order end the slices that are not a thread's last and start those
    # that are not its first.
    qa = np.empty(len(qact), I64)
    qa[head] = tl.birth[:nw]
    not_head = np.ones(len(qact), bool)
    not_head[head] = False
    qa[not_head] = t
    qb = np.empty(len(qact), I64)
    qb[last] = tl.death[:nw]
    not_last = np.ones(len(qact), bool)
    not_last[last] = False
    qb[not_last] = t
    qseg = np.full(len(qact), most, I64)
    qseg[last] = cnt - cuts * most
    return qact, qa, qb, qseg


def thread_time_view(tl: Timeline, depth: int, arch: str | None,
                     fill: Fill | None = None,
                     comms: Mapping[int, str] | None = None,
                     groups: np.ndarray | None = None) -> dict[str, Any]:
    """The same categories summed over every workload thread's life, per syscall the
    thread was in (its own syscall, not its waker's) and per thread (at most
    BY_THREAD_MAX, by time not asleep, largest first; comms: tid -> name), with each
    thread's own state beside what explains it (own_state).

    The leaves are summed as each level of the recursion gives them, for about
    THREAD_BATCH segments of the threads at a time (their lives cut in slices of at
    most that many, _thread_slices), and never kept: memory is one level's of one
    batch.

    groups: a group number per workload thread (views/cgroups.py); the level ones are
    then also summed per group, in `_by_group` (groups x level one), for the caller
    to take out."""
    nw = int((~tl.helper).sum())
    per = np.zeros((nw, NL1), I64)
    det = np.zeros((NL1, NK), I64)
    sys_sum: dict[int, np.ndarray] = {}  # per syscall: (level one x kind) ns
    qact, qa, qb, qseg = _thread_slices(tl, nw, THREAD_BATCH)
    # Batches of consecutive slices of about THREAD_BATCH segments (at least one slice).
    work = np.cumsum(qseg)
    start = 0
    while start < len(qact):
        limit = (work[start - 1] if start else 0) + THREAD_BATCH
        end = max(start + 1, int(np.searchsorted(work, limit, side="right")))
        q = slice(start, end)
        batch = np.zeros((end - start, NL1), I64)  # the leaves' roots count from `start`
        for level in _levels(tl, qact[q], qa[q], qb[q], depth):
            for part in level:
                _sum_filled(batch, det, sys_sum, Leaves(*part[:8]), fill)
            del level, part  # not kept while the next level is made
        np.add.at(per, qact[q], batch)
        start = end
    total = int((tl.death[:nw] - tl.birth[:nw]).sum())
    awake = per.sum(axis=1) - per[:, L_SLEEP]
    order = np.lexsort((tl.tids[:nw], -awake))[:BY_THREAD_MAX]
    own = own_state(tl, order, arch)
    by_thread = []
    for k, st in zip(order.tolist(), own):
        for w in st["waiting_for"]:
            w["comm"] = (comms or {}).get(w["tid"], "")
        split = {c: int(v) for c, v in zip(CAUSAL_CATEGORIES, per[k].tolist()) if v}
        by_thread.append({"tid": int(tl.tids[k]), "comm": (comms or {}).get(int(tl.tids[k]), ""),
                          "total_ns": int(tl.death[k] - tl.birth[k]), **st,
                          "explained_ns": split})
    by_name: dict[str, np.ndarray] = {}
    name = _sys_name(arch)
    for nr in sorted(sys_sum):  # equal names added up, in the syscalls' order
        nm = name(int(nr))
        by_name[nm] = by_name[nm] + sys_sum[nr] if nm in by_name else sys_sum[nr].copy()
    by_sys: dict[str, Any] = {}
    for nm, m in sorted(by_name.items(), key=lambda kv: -int(kv[1].sum())):
        att = {k: int(x) for k, x in zip(CAUSAL_CATEGORIES, m.sum(axis=1).tolist()) if x}
        by_sys[nm] = {"total_ns": int(m.sum()), "attribution_ns": att,
                      "attribution_detail_ns": {c: p for c, p in detail_dict(m).items() if p}}
    sums = per.sum(axis=0)
    out = {"threads": nw, "total_ns": total,
           "attribution_ns": {k: int(v) for k, v in zip(CAUSAL_CATEGORIES, sums.tolist())},
           "attribution_detail_ns": detail_dict(det),
           "by_syscall": by_sys, "by_thread": by_thread}
    if groups is not None:
        g = np.asarray(groups, I64)
        by_group = np.zeros((int(g.max()) + 1 if len(g) else 0, NL1), I64)
        np.add.at(by_group, g, per)
        out["_by_group"] = by_group
    return out


def own_state(tl: Timeline, actors: np.ndarray, arch: str | None) -> list[dict[str, Any]]:
    """Each workload thread's own state over its life, from its own segments alone (not
    what explains them): on_cpu_ns, runqueue_ns, blocked_in_ns ({syscall: ns} of its
    blocked time, largest first) and waiting_for ([{tid, ns}] of the workload threads
    and helpers whose wakeups ended its waits, the three longest)."""
    name = _sys_name(arch)
    out = []
    first = np.searchsorted(tl.actor, np.asarray(actors, tl.actor.dtype))
    last = np.searchsorted(tl.actor, np.asarray(actors, tl.actor.dtype), side="right")
    for act, a, b in zip(np.asarray(actors).tolist(), first.tolist(), last.tolist()):
        # An actor's segments are consecutive: each ends where the next starts, the last
        # at its death.
        ln = np.diff(tl.kstart[a:b], append=act * tl.span + (int(tl.death[act]) - tl.origin))
        k = tl.cat[a:b]
        blocked = (k != CPU) & (k != RUNQ)
        sys_of = tl.sys[a:b][blocked]
        by_sys: dict[str, int] = {}
        for nr, v in zip(*_group_sums(sys_of, ln[blocked])):
            nm = name(nr)
            by_sys[nm] = by_sys.get(nm, 0) + v
        rec = k == RECURSE
        waited = [{"tid": int(tl.tids[t]), "ns": v}
                  for t, v in zip(*_group_sums(tl.arg[a:b][rec], ln[rec]))]
        out.append({"on_cpu_ns": int(ln[k == CPU].sum()),
                    "runqueue_ns": int(ln[k == RUNQ].sum()),
                    "blocked_in_ns": dict(sorted(by_sys.items(), key=lambda kv: -kv[1])),
                    "waiting_for": sorted(waited, key=lambda w: -w["ns"])[:3]})
    return out


def _take(lv: Leaves, sel: np.ndarray) -> Leaves:
    return Leaves(*(c[sel] for c in _cols(lv)))


def fill_leaves(lv: Leaves, fill: Fill) -> Leaves:
    """fill(lv), given only the leaves a fill can change (wait-other): the others pass
    through untouched, in any order."""
    cand = _fill_candidates(lv)
    if not cand.any():
        return lv
    if cand.all():
        return fill(lv)
    done = fill(Leaves(*(c[cand] for c in _cols(lv))))
    keep = np.flatnonzero(~cand)
    return Leaves(*(np.concatenate((x[keep], y)) for x, y in zip(_cols(lv), _cols(done))))


def _fill_candidates(lv: Leaves) -> np.ndarray:
    """The leaves a fill can change (fill_leaves): wait-other (the loop worker's
    helper-cpu is the fill's own, never a leaf before it)."""
    return lv.cat == OTHER


def _sum_filled(per: np.ndarray, det: np.ndarray, sys_sum: dict[int, np.ndarray],
                lv: Leaves, fill: Fill | None) -> None:
    """_sum_into of fill_leaves(lv, fill), without making it: the sums are additive, so
    the leaves a fill leaves untouched are summed where they are (the others weigh 0)
    and the filled ones apart. A filled leaf keeps its thread and syscall and its pieces
    cover it (at least one is not empty), so the syscalls met are the same."""
    cand = _fill_candidates(lv) if fill is not None else None
    if cand is None or not cand.any():
        _sum_into(per, det, sys_sum, lv)
        return
    assert fill is not None
    _sum_into(per, det, sys_sum, lv, ~cand)
    _sum_into(per, det, sys_sum, fill(_take(lv, np.flatnonzero(cand))))


SYS_BINS = 1 << 12  # syscall numbers (+ 2) summed by a direct count below this


def _sum_into(per: np.ndarray, det: np.ndarray, sys_sum: dict[int, np.ndarray],
              lv: Leaves, weigh: np.ndarray | None = None) -> None:
    """Add the leaves' time to per[root, level one], det[level one, kind] and, for
    leaves in a syscall of their thread's own (top_sys >= -2), to
    sys_sum[syscall][level one, kind] (a syscall met gets an entry, whatever its time).
    weigh: the leaves whose time counts (the others are met, with no time)."""
    if not len(lv.a):
        return
    ln = lv.length
    if weigh is not None:
        ln *= weigh
    i = _code_index(lv)
    code = _CODE[i]
    flat = per.reshape(-1)
    # Integer sums: bincount's float64 is exact below 2^53 ns (104 days) per bin.
    flat += np.bincount(lv.root * NL1 + _L1[i], weights=ln,
                        minlength=len(flat)).round().astype(I64)
    d = det.reshape(-1)
    d += np.bincount(code, weights=ln, minlength=len(d)).round().astype(I64)
    blocked = np.flatnonzero(lv.top_sys >= -2)  # an index: gathered from three columns
    if not len(blocked):
        return
    top = lv.top_sys[blocked]
    hi = int(top.max()) + 3
    if hi <= SYS_BINS:
        # The syscalls by a count of each (+ 2: from -2), not a sort.
        t2 = top.astype(np.intp)
        t2 += 2
        met = np.flatnonzero(np.bincount(t2, minlength=hi))
        t2 *= NL1 * NK
        t2 += code[blocked]
        s = np.bincount(t2, weights=ln[blocked], minlength=hi * NL1 * NK
                        ).round().astype(I64).reshape(hi, NL1, NK)
        rows = zip((met - 2).tolist(), s[met])
    else:
        u, inv = np.unique(top.astype(np.int64), return_inverse=True)
        rows = zip(u.tolist(), np.bincount(
            inv.ravel() * (NL1 * NK) + code[blocked], weights=ln[blocked],
            minlength=len(u) * NL1 * NK).round().astype(I64).reshape(len(u), NL1, NK))
    for nr, m in rows:
        if nr in sys_sum:
            sys_sum[nr] += m
        else:
            sys_sum[nr] = m


# By (purpose + 1) * NK + kind (_code_index): the level one (Leaves.level1), and the
# (level one, kind) code level one * NK + kind.
_L1 = np.array([p if p >= 0 else int(NATURAL_L1[k])
                for p in range(-1, len(CAUSAL_CATEGORIES)) for k in range(len(KIND_NAMES))],
               np.intp)
_CODE = _L1 * len(KIND_NAMES) + np.tile(np.arange(len(KIND_NAMES)), len(CAUSAL_CATEGORIES) + 1)


def _code_index(lv: Leaves) -> np.ndarray:
    """Per leaf: (purpose + 1) * NK + kind, the index of its level one in _L1 and of its
    code in _CODE (a look-up instead of Leaves.level1's np.where)."""
    i = lv.pur.astype(np.intp)
    i += 1
    i *= NK
    i += lv.cat
    return i


_WAIT_L1 = np.ones(NL1, bool)  # by level one: a wait (not on or waiting for a CPU)
_WAIT_L1[list(_ON_CPU_L1)] = False
_EXACT = 1 << 53  # float64 holds every integer below this exactly


def _isum(idx: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of the non-negative integers w per bin idx (0 <= idx < n): by
    bincount's float64 when their total is below 2^53 (every partial sum is then an
    exact integer), else np.add.at."""
    if len(w) and int(w.sum()) >= _EXACT:
        out = np.zeros(n, I64)
        np.add.at(out, idx, w)
        return out
    return np.bincount(idx, weights=w, minlength=n).astype(I64)


def _group_sums(keys: np.ndarray, w: np.ndarray) -> tuple[list[int], list[int]]:
    """(the distinct keys ascending, the exact sum of w of each): by a count of the
    keys when they span at most SYS_BINS values, else np.unique."""
    if not len(keys):
        return [], []
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo < SYS_BINS:
        k = keys.astype(np.intp)
        k -= lo
        met = np.flatnonzero(np.bincount(k, minlength=hi - lo + 1))
        return (met + lo).tolist(), _isum(k, w, hi - lo + 1)[met].tolist()
    u, inv = np.unique(keys, return_inverse=True)
    return u.tolist(), _isum(inv.ravel(), w, len(u)).tolist()


def _per_interval(a: np.ndarray, b: np.ndarray, weigh: np.ndarray | None, code: np.ndarray,
                  e: np.ndarray, step: int) -> np.ndarray:
    """Per (code, interval [e[i], e[i + 1])): the time of the intervals [a, b) (those of
    weigh) inside it, exact, as a flat (code x interval) array; e[i] = e[0] + i * step
    but the last, which may be closer. A leaf inside one interval (most: they are
    shorter than a step) is one count; the others (few: the leaves of one explanation
    are disjoint, so at most one crosses each edge) are split at the edges they cross."""
    n = len(e) - 1
    a = np.clip(a, e[0], e[-1])
    b = np.clip(b, e[0], e[-1])
    ln = b - a
    if weigh is not None:
        ln *= weigh
    # The interval of each start and of each last ns (a division: a search of unsorted
    # times is several times slower).
    ia = a - e[0]
    ia //= step
    np.minimum(ia, n - 1, out=ia)
    ib = b - (e[0] + 1)
    ib //= step
    np.clip(ib, 0, n - 1, out=ib)
    cross = np.flatnonzero((ia != ib) & (ln > 0))
    bins = code * n
    bins += ia
    w = ln
    if len(cross):
        w[cross] = 0
        ca, cb, cia, cib = a[cross], b[cross], ia[cross], ib[cross]
        cnt = cib - cia + 1
        k = np.repeat(np.arange(len(cross)), cnt)
        j = np.repeat(cia, cnt) + (np.arange(len(k)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        part = np.minimum(cb[k], e[j + 1]) - np.maximum(ca[k], e[j])
        bins = np.concatenate((bins, code[cross][k] * n + j))
        w = np.concatenate((w, part))
    return _isum(bins, w, NL1 * NK * n)
