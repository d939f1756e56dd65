"""Thread timelines with causes: every ns of each workload thread's life, and of each
helper thread's recorded stretches, as one segment: on CPU, runnable, or blocked, and a
blocked segment with the cause its wakeup names (docs/report-json.md, "causal
attribution", has the rules in words).

A blocked segment ``[switch-out, waking)`` is explained by its waker, first rule that
applies:

1. woken inside the completion of a request (``WAKER_RQ``, the request's ``seq``) ->
   the request's category (barrier, log, metadata, data, read); for a flush-sequenced
   request, the part of the wait outside the request's own device stage is ``barrier``
   (its pre/post flushes), and so is the part during which a flush was in flight on the
   workload's devices (the request waited behind it: _behind_flushes); a request of a
   carrier device (a loop device whose lower device is recorded: views/stack.py,
   carrier_devices) -> what the devices below did over the wait (RequestLink.below:
   their flushes barrier, log writes log, ...) and, where they were idle, its loop
   worker's CPU (helper-cpu); a carrier's flushes are none of the workload's flushes;
2. woken in interrupt context (hardirq, softirq, NMI) with no request, by the idle task
   or by the thread itself -> ``sleep`` (a timer: detail TIMER), or ``wait-other``
   "(irq, no request)"
   when the thread was in iowait (views/causal.py's device_fill then charges it to what
   the workload's devices were doing); a helper not in iowait -> ``wait-other``
   "(helper's timer)": device_fill charges what the devices did over it, and the rest
   is ``sleep`` (helper_timers: a worker polling on a timer, as btrfs's space reclaim
   does, with no I/O in flight);
3. woken by another workload thread -> *recurse*: that thread's own timeline over the
   wait (the recursion is views/causal.py's);
4. woken by a helper thread with recorded intervals -> *recurse* into the helper, whose
   on-CPU and runnable time are ``helper-cpu`` and ``helper-runqueue``; but a jbd2
   thread of a device the trace does not describe works for another filesystem
   (foreign_jbd2): rule 5;
5. woken by another task: a kernel helper not recorded -> ``wait-other`` by its name;
   an I/O wait (iowait, or a helper's) woken from that task's context -> ``wait-other``
   "(I/O completed in another task)", filled from the devices like rule 2's;
   else ``external`` by its name;
6. not woken in the window (still blocked at the stop) or the waker not seen -> ``sleep``
   in a sleeping syscall (nanosleep, poll, select, epoll, pause...), else ``wait-other``
   "(not seen)"; counted as unseen wakers.

A preempted interval (``PREEMPT``, no wakeup) is runnable throughout; ``[waking,
switch-in)`` is runnable. Time between two intervals of a thread is on CPU. A thread's
life is from its ROOT/FORK (else its first interval, else the window start) to its EXIT
(else the window end); a helper's timeline covers only its first to its last recorded
interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..kernels import I64, check_keyed, key_span, small_unique
from ..names import ATTRIBUTION_CATEGORIES
from ..syscalls import syscall_name
from .classify import CATEGORY_OF_CLASS
from .requests import Window


CAUSAL_CATEGORIES = ATTRIBUTION_CATEGORIES
CPU, RUNQ, BARRIER, LOG, METADATA, DATA, READ, HCPU, HRUNQ, SLEEP, EXTERNAL, OTHER = range(12)
RECURSE = -1  # a segment explained by another thread's timeline (its `target`)
DEVICE_CAT0 = BARRIER  # device categories are BARRIER + classify.CATEGORY_OF_CLASS

# Fixed details (reasons) of wait-other time; waker names follow them.
NOT_SEEN, NO_TASK, DEPTH, IRQ_NO_RQ, NOT_RECORDED, TASK_IO, HELPER_IRQ, TIMER, CARRIED = \
    range(9)
FIXED_DETAILS = ("(not seen)", "(no task)", "(depth limit)", "(irq, no request)",
                 "(not recorded)", "(I/O completed in another task)",
                 "(helper's timer)", "(timer)", "(loop worker)")
# TIMER is the detail of a `sleep` segment woken by its timer (rule 2), which a polling
# loop is made of (views/causal.py continues it); other sleep segments have none (-1).
# CARRIED marks helper-cpu time that is a carrier request's with the devices below it
# idle (its loop worker serving it): views/causal.py's fill splits it by what the
# recorded helper threads were doing (on a CPU, waiting for one).

# Kernel threads the recorder treats as helpers (docs/trace-format.md, helper).
HELPER_PREFIXES = (b"jbd2/", b"kworker/", b"loop", b"xfsaild", b"kswapd")

# Syscalls whose wait is a voluntary sleep or a timeout when nothing else woke them.
SLEEP_SYSCALLS = frozenset({
    "nanosleep", "clock_nanosleep", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    "epoll_wait_old", "select", "pselect6", "_newselect", "poll", "ppoll", "pause",
    "rt_sigsuspend", "rt_sigtimedwait", "sigsuspend", "alarm"})

# Columns of offcpu/helper records the timelines read.
WAKE_FIELDS = ("start_ns", "waking_ns", "end_ns", "tid", "syscall_nr", "flags_u16",
               "waker_tid", "waker_ctx_u16", "waker_comm", "waker_rq_seq", "run_total_ns")


@dataclass
class Timeline:
    """Segments of every actor (workload threads first, then helpers), sorted by
    (actor, start), tiling each actor's covered time. Keyed times (actor * span +
    t - origin) make one searchsorted find an actor's segments over an interval."""

    origin: int
    span: int
    tids: np.ndarray  # tid of each actor
    helper: np.ndarray  # bool per actor
    birth: np.ndarray  # per actor: start of its covered time
    death: np.ndarray
    actor: np.ndarray  # per segment
    a: np.ndarray
    b: np.ndarray
    cat: np.ndarray  # int8: CAUSAL_CATEGORIES index, or RECURSE
    target: np.ndarray  # int32: actor explaining a RECURSE segment, else -1
    detail: np.ndarray  # int32: index into details (wait-other, external), else -1
    sys: np.ndarray  # int32: syscall of the interval the segment is part of; -3: on CPU
    details: list[str] = field(default_factory=list)
    unseen: int = 0  # blocked intervals of workload threads whose waker was not seen
    unseen_ns: int = 0
    intervals: int = 0  # off-CPU intervals of workload threads
    devices: tuple[str, ...] = ()  # names of the devices the trace describes (foreign_jbd2)
    _kstart: np.ndarray | None = None  # keyed start of each segment (key_starts)

    def actor_of(self, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(actor index, found) of each tid."""
        if not len(self.tids):
            return np.zeros(len(tid), np.int64), np.zeros(len(tid), bool)
        order = np.argsort(self.tids, kind="stable")
        i = np.minimum(np.searchsorted(self.tids, tid, sorter=order), len(order) - 1)
        ai = order[i]
        return ai, self.tids[ai] == tid

    def keys(self, actor: np.ndarray, t: np.ndarray) -> np.ndarray:
        return actor.astype(I64) * self.span + (t - self.origin)

    def key_starts(self) -> np.ndarray:
        """The keyed start of every segment (sorted: the segments are in (actor, start)
        order), made once. A segment's keyed end is its keyed start plus its length:
        the segments of an actor tile its covered time, so no second array is kept."""
        if self._kstart is None or len(self._kstart) != len(self.a):
            self._kstart = self.keys(self.actor, self.a)
        return self._kstart

    def first_segment(self, kq: np.ndarray) -> np.ndarray:
        """Per keyed time: the first segment ending after it (of its actor or a later
        one)."""
        ks = self.key_starts()
        j = np.searchsorted(ks, kq, side="right") - 1
        jc = np.maximum(j, 0)
        inside = (j >= 0) & (ks[jc] + (self.b[jc] - self.a[jc]) > kq)
        return np.where(inside, j, j + 1)


def asleep_at_start(off: Mapping[str, np.ndarray], thread: Mapping[str, np.ndarray],
                    window: Window) -> Mapping[str, np.ndarray]:
    """The off-CPU columns plus, for each thread that was asleep when recording started
    (its `thread` record's state is not R) and has no off-CPU interval at all (it was
    never woken in the window), one interval over the whole window, never woken, in the
    syscall /proc showed: without it the thread would count as running throughout."""
    tid = np.asarray(thread.get("tid", np.zeros(0))).astype(I64)
    if not len(tid):
        return off
    state = np.asarray(thread["state_u8"])
    asleep = (state != 0) & (state != ord("R"))
    new = asleep & ~np.isin(tid, np.asarray(off["tid"]).astype(I64))
    if not new.any():
        return off
    n = int(new.sum())
    add: dict[str, np.ndarray] = {f: np.zeros(n, abi.OFFCPU_DTYPE[f]) for f in off}
    add["tid"][:] = tid[new]
    if "start_ns" in add:
        add["start_ns"][:] = window.start_ns
    add["syscall_nr"][:] = np.asarray(thread["syscall_nr"])[new]
    add["flags_u16"][:] = abi.OFF_FROM_START
    return {f: np.concatenate((np.asarray(off[f]), add[f])) for f in off}


def has_wakers(off: Mapping[str, np.ndarray]) -> bool:
    """Whether any off-CPU interval names its waker (traces converted from other tools
    name none)."""
    if "waker_ctx_u16" not in off or not len(off["waker_ctx_u16"]):
        return False
    return bool((np.asarray(off["waker_ctx_u16"]) != 0).any()
                or (np.asarray(off["waker_tid"]) != 0).any()
                or (np.asarray(off["flags_u16"]) & abi.OFF_WAKER_RQ).any())


def _empty_cols() -> dict[str, np.ndarray]:
    return {f: np.zeros(0, abi.OFFCPU_DTYPE[f]) for f in WAKE_FIELDS}


def build_timeline(window: Window, tasks: Mapping[str, np.ndarray],
                   off: Mapping[str, np.ndarray], helper: Mapping[str, np.ndarray] | None,
                   rq_link: "RequestLink", arch: str | None = None,
                   devices: Sequence[str] = ()) -> Timeline:
    """The timelines of the workload's threads (off: their offcpu columns, tasks: their
    task events) and of the helpers (helper records), with each blocked segment's cause.
    devices: the names of the devices (and partitions) the trace describes (a jbd2
    thread of any other is not followed: foreign_jbd2).

    Work: one stable sort of the intervals by (actor, start); every segment is then
    written straight to its place (_lay_out), so the segments come out sorted."""
    from ..views.workload import task_lifetimes
    helper = helper if helper is not None and len(helper.get("tid", ())) else _empty_cols()
    w0, w1 = window.start_ns, window.end_ns
    wtids, wbirth, wdeath = task_lifetimes(tasks, off, window)
    htid_all = np.asarray(helper["tid"]).astype(I64)
    hsel = np.flatnonzero(~np.isin(htid_all, wtids))  # a workload thread is never a helper
    htids = small_unique(htid_all[hsel])
    tids = np.concatenate((wtids, htids))
    nw = len(wtids)
    span = key_span(w0, w1)
    check_keyed(len(tids), span)
    # The intervals of both kinds as one set of columns: the workload's, then the helpers'.
    n_off = len(off["tid"])
    c: dict[str, np.ndarray] = {}
    for f in WAKE_FIELDS:
        parts = [np.asarray(src[f]) if f in src
                 else np.zeros(len(src["tid"]), abi.OFFCPU_DTYPE[f]) for src in (off, helper)]
        c[f] = np.concatenate((parts[0], parts[1][hsel]))
    act = np.empty(len(c["tid"]), I64)
    act[:n_off] = np.searchsorted(wtids, c["tid"][:n_off].astype(I64))
    act[n_off:] = nw + np.searchsorted(htids, c["tid"][n_off:].astype(I64))
    # Helper actors' covered time: first to last interval.
    hb = np.full(len(htids), w1, I64)
    hd = np.full(len(htids), w0, I64)
    if len(htids):
        hi = act[n_off:] - nw
        np.minimum.at(hb, hi, np.clip(c["start_ns"][n_off:].astype(I64), w0, w1))
        e = c["end_ns"][n_off:].astype(I64)
        np.maximum.at(hd, hi, np.clip(np.where(e > 0, e, w1), w0, w1))
        hd = np.maximum(hd, hb)
    tl = Timeline(origin=w0, span=span, tids=tids, helper=np.arange(len(tids)) >= nw,
                  birth=np.concatenate((wbirth, hb)), death=np.concatenate((wdeath, hd)),
                  actor=np.zeros(0, np.int32), a=np.zeros(0, I64), b=np.zeros(0, I64),
                  cat=np.zeros(0, np.int8), target=np.zeros(0, np.int32),
                  detail=np.zeros(0, np.int32), sys=np.zeros(0, np.int32),
                  devices=tuple(devices))
    is_helper = np.arange(len(act)) >= n_off
    iv = _intervals(tl, act, c, is_helper)
    del act, is_helper
    names = _Names()
    cat, target, detail = _causes(tl, iv, rq_link, names, arch)
    _lay_out(tl, iv, cat, target, detail, rq_link)
    tl.details = names.names
    return tl


@dataclass
class _Intervals:
    """Off-CPU intervals sorted by (actor, start), clipped to their actor's covered
    time and to each other: an interval starts no earlier than its actor's previous one
    ends (a damaged overlap), so they never overlap."""

    act: np.ndarray  # int64 actor
    s: np.ndarray  # switch-out
    w: np.ndarray  # waking (s for a preemption, e when never woken)
    e: np.ndarray  # switch-in
    woken: np.ndarray  # bool: woken in the window, not preempted
    helper: np.ndarray  # bool: a helper's interval
    sysnr: np.ndarray  # int32: the syscall it was in; -3 for a helper
    c: dict[str, np.ndarray]  # the record columns (WAKE_FIELDS) in this order


def _intervals(tl: Timeline, act: np.ndarray, c: Mapping[str, np.ndarray],
               helper: np.ndarray) -> _Intervals:
    lo, hi = tl.birth[act], tl.death[act]
    s = np.clip(c["start_ns"].astype(I64), lo, hi)
    e = c["end_ns"].astype(I64)
    e = np.clip(np.where(e > 0, e, hi), lo, hi)
    del lo, hi
    # Stable: equal starts keep the records' order.
    o = np.argsort(tl.keys(act, s), kind="stable")
    act, s, e, helper = act[o], s[o], e[o], helper[o]
    cols = {f: np.asarray(v)[o] for f, v in c.items()}
    del o
    ek = tl.keys(act, np.maximum(e, s))
    # The latest end before each interval, keyed (the first interval: its own start).
    prev = np.empty(len(ek), I64)
    if len(ek):
        prev[0] = ek[0] - np.maximum(e[0] - s[0], 0)
        np.maximum.accumulate(ek[:-1], out=prev[1:])
    s = np.maximum(s, prev - act * tl.span + tl.origin)
    del ek, prev
    e = np.maximum(e, s)
    flags = cols["flags_u16"].astype(np.int64)
    wk = cols["waking_ns"].astype(I64)
    preempt = (flags & abi.OFF_PREEMPT) != 0
    woken = (wk > 0) & ~preempt
    w = np.where(woken, np.clip(wk, s, e), np.where(preempt, s, e))
    # A helper's syscall is none of the workload's: the waiter's own names the wait.
    sysnr = np.where(helper, -3, cols["syscall_nr"]).astype(np.int32)
    return _Intervals(act, s, w, e, woken, helper, sysnr, cols)


def _lay_out(tl: Timeline, iv: _Intervals, cat: np.ndarray, target: np.ndarray,
             detail: np.ndarray, link: "RequestLink") -> None:
    """Store in tl the segments of every actor, in (actor, start) order: a head (on CPU
    from its birth to its first interval, or to its death), then per interval its
    blocked pieces, its runnable part and the gap to the next interval (on CPU; for a
    helper, only for the growth of its CPU total, run_total_ns, and the rest of the gap
    a stretch not recorded) or to the actor's death. Each segment is written to its
    place, found by a cumulative count: no sort. Empty segments are left out."""
    act, s, w, e, helper = iv.act, iv.s, iv.w, iv.e, iv.helper
    n = len(act)
    nact = len(tl.tids)
    blocked = w > s
    wk = ~helper
    tl.intervals += int(wk.sum())
    un = wk & blocked & (detail == NOT_SEEN)
    tl.unseen += int(un.sum())
    tl.unseen_ns += int((w - s)[un].sum())
    del wk, un
    # Request links: the wait cut around the request's device stage (_linked_pieces).
    rl = cat == -2
    lq, lpa, lpb, lpc, ldet = _linked_pieces(s, w, np.where(rl, target, -1), rl & blocked,
                                             link)
    plain = blocked & ~rl
    nb = plain.astype(I64)
    if len(lq):
        nb += np.bincount(lq, minlength=n)
    # The gap after each interval: to the actor's next interval, else its death.
    first = np.ones(n, bool)
    first[1:] = act[1:] != act[:-1]
    last = np.ones(n, bool)
    last[:-1] = first[1:]
    nxt_s = np.empty(n, I64)
    nxt_s[:-1] = s[1:]
    nxt_s = np.where(last, tl.death[act], nxt_s)
    rt = iv.c["run_total_ns"].astype(I64)
    rt_next = np.empty(n, I64)
    rt_next[:-1] = rt[1:]
    split = helper & ~last & (rt > 0) & (rt_next >= rt)
    cpu_end = np.where(split, np.minimum(nxt_s, e + (rt_next - rt)), nxt_s)
    del rt, rt_next, split
    runq = e > w
    gcpu = cpu_end > e
    gnr = nxt_s > cpu_end
    # Heads: from each actor's birth to its first interval (or its death).
    has = np.zeros(nact, bool)
    has[act] = True
    head_end = tl.death.copy()
    head_end[act[first]] = s[first]
    head = head_end > tl.birth
    # Units in order: each actor's head, then its intervals. Count of segments of each.
    ifirst = np.searchsorted(act, np.arange(nact))  # each actor's first interval
    upos_head = ifirst + np.arange(nact)
    upos_iv = np.arange(n) + act + 1
    cnt = np.zeros(n + nact, I64)
    cnt[upos_head] = head
    cnt[upos_iv] = nb + runq + gcpu + gnr
    off = np.zeros(n + nact, I64)
    np.cumsum(cnt[:-1], out=off[1:])
    total = int(off[-1] + cnt[-1]) if len(cnt) else 0
    del cnt
    oa = np.empty(total, np.int32)
    ob = np.empty(total, I64)
    ox = np.empty(total, I64)
    ocat = np.empty(total, np.int8)
    otg = np.full(total, -1, np.int32)
    odet = np.full(total, -1, np.int32)
    osys = np.full(total, -3, np.int32)
    hcpu = np.where(tl.helper, HCPU, CPU).astype(np.int8)

    def put(pos: np.ndarray, actor: np.ndarray, a: np.ndarray, b: np.ndarray, k: Any,
            tg: Any = -1, det: Any = -1, sy: Any = -3) -> None:
        oa[pos], ox[pos], ob[pos], ocat[pos] = actor, a, b, k
        if not np.isscalar(tg) or tg != -1:
            otg[pos] = tg
        if not np.isscalar(det) or det != -1:
            odet[pos] = det
        if not np.isscalar(sy) or sy != -3:
            osys[pos] = sy

    h = np.flatnonzero(head)
    put(off[upos_head[h]], h, tl.birth[h], head_end[h], hcpu[h])
    base = off[upos_iv]
    i = np.flatnonzero(plain)
    put(base[i], act[i], s[i], w[i], cat[i], target[i], detail[i], iv.sysnr[i])
    if len(lq):
        # Pieces of an interval are consecutive and in time order in lq.
        starts = np.ones(len(lq), bool)
        starts[1:] = lq[1:] != lq[:-1]
        grp = np.cumsum(starts) - 1
        rank = np.arange(len(lq)) - np.flatnonzero(starts)[grp]
        put(base[lq] + rank, act[lq], lpa, lpb, lpc, -1, ldet, iv.sysnr[lq])
    base = base + nb
    i = np.flatnonzero(runq)
    rq_cat = np.where(helper[i], HRUNQ, RUNQ).astype(np.int8)
    put(base[i], act[i], w[i], e[i], rq_cat, -1, -1, iv.sysnr[i])
    base = base + runq
    i = np.flatnonzero(gcpu)
    put(base[i], act[i], e[i], cpu_end[i], hcpu[act[i]])
    base = base + gcpu
    i = np.flatnonzero(gnr)
    put(base[i], act[i], cpu_end[i], nxt_s[i], OTHER, -1, NOT_RECORDED)
    tl.actor, tl.a, tl.b, tl.cat = oa, ox, ob, ocat
    tl.target, tl.detail, tl.sys = otg, odet, osys


def _linked_pieces(s: np.ndarray, w: np.ndarray, rq: np.ndarray, sel: np.ndarray,
                   link: "RequestLink"
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of the waits [s, w) ended by a request's completion (sel; rq: the
    request's index in link), as (interval, start, end, category, detail), sorted by
    interval then time: a request of a carrier device, by what the devices below did
    over the wait (link.below) and its loop worker where they were idle (helper-cpu,
    CARRIED); any other, its pre-flush and post-flush (outside the request's device
    stage, a flush-sequenced request's) as barrier and its stage as its category, each
    cut where a flush was in flight (link.flushing: barrier, it waited behind it)."""
    k = np.flatnonzero(sel)
    z = np.zeros(0, I64)
    if not len(k):
        return z, z, z, np.zeros(0, np.int8), np.zeros(0, np.int32)
    r = rq[k]
    out = []
    carried = np.zeros(len(k), bool)
    for d, (ss, se, sc) in link.below.items():
        m = link.dev[r] == d
        if not m.any():
            continue
        carried |= m
        km = k[m]
        qi, pa, pb, pc = cut_ordered(s[km], w[km], ss, se, sc,
                                     np.full(len(km), HCPU, np.int8))
        out.append((km[qi], pa, pb, pc, np.where(pc == HCPU, CARRIED, -1).astype(np.int32)))
    k, r = k[~carried], r[~carried]
    if len(k):
        rc = link.cat[r]
        pre_b = np.clip(link.stage_a[r], s[k], w[k])
        post_a = np.clip(link.stage_b[r], pre_b, w[k])
        outer = np.where(link.flush_seq[r], BARRIER, rc).astype(np.int8)
        # Three parts per wait, interleaved so that one ordered cut keeps them in order.
        qa = np.stack((s[k], pre_b, post_a), axis=1).ravel()
        qb = np.stack((pre_b, post_a, w[k]), axis=1).ravel()
        gc = np.stack((outer, rc, outer), axis=1).ravel()
        fs, fe = link.flushing
        qi, pa, pb, pc = cut_ordered(qa, qb, fs, fe, np.full(len(fs), BARRIER, np.int8), gc)
        out.append((k[qi // 3], pa, pb, pc, np.full(len(qi), -1, np.int32)))
    cols = [np.concatenate(x) for x in zip(*out)]
    if len(out) > 1:  # carrier groups and the rest: order by interval (stable in time)
        o = np.argsort(cols[0], kind="stable")
        cols = [x[o] for x in cols]
    return cols[0], cols[1], cols[2], cols[3].astype(np.int8), cols[4].astype(np.int32)


def cut_ordered(a: np.ndarray, b: np.ndarray, ss: np.ndarray, se: np.ndarray,
                scat: np.ndarray, gap_cat: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each interval [a, b) cut by the states [ss, se) (disjoint, sorted) with their
    categories scat; its time outside every state has its own gap_cat. Returns (index
    of the interval, start, end, category) of the non-empty pieces, sorted by interval
    then start: they tile each interval exactly. An interval meeting c states has
    2c + 1 slots, gap and state alternating."""
    a, b = np.asarray(a, I64), np.asarray(b, I64)
    n = len(a)
    if not len(ss):
        keep = np.flatnonzero(b > a)
        return keep, a[keep], b[keep], np.asarray(gap_cat)[keep].astype(np.int8)
    lo = np.searchsorted(se, a, side="right")  # first state ending after a
    hi = np.searchsorted(ss, b, side="left")  # first state starting at or after b
    cnt = np.maximum(hi - lo, 0)
    slots = 2 * cnt + 1
    qi = np.repeat(np.arange(n), slots)
    first = np.cumsum(slots) - slots
    j = np.arange(len(qi)) - first[qi]
    is_state = (j & 1) == 1
    k = lo[qi] + (j >> 1)  # the state of an odd slot; the state after an even one
    kc = np.minimum(k, len(ss) - 1)
    kp = np.maximum(k - 1, 0)
    aq, bq = a[qi], b[qi]
    # A state: [max(a, ss), min(b, se)); a gap: from the state before (or a) to the
    # state after (or b).
    pa = np.where(is_state, np.maximum(aq, ss[kc]),
                  np.where(j == 0, aq, np.minimum(bq, se[kp])))
    pb = np.where(is_state, np.minimum(bq, se[kc]),
                  np.where(j == slots[qi] - 1, bq, np.maximum(aq, ss[kc])))
    pc = np.where(is_state, np.asarray(scat)[kc], np.asarray(gap_cat)[qi]).astype(np.int8)
    keep = np.flatnonzero(pb > pa)
    return qi[keep], pa[keep], pb[keep], pc[keep]


class _Names:
    """Detail strings: the fixed reasons, then waker names as met."""

    def __init__(self) -> None:
        self.names = list(FIXED_DETAILS)
        self.index = {n: i for i, n in enumerate(self.names)}

    def codes(self, comm: np.ndarray) -> np.ndarray:
        if not len(comm):
            return np.zeros(0, np.int32)
        u, inv = unique_names(comm)
        m = np.empty(len(u), np.int32)
        for i, raw in enumerate(u.tolist()):
            n = raw.rstrip(b"\0").decode("utf-8", "replace") or "(unnamed)"
            if n not in self.index:
                self.index[n] = len(self.names)
                self.names.append(n)
            m[i] = self.index[n]
        return m[inv]


@dataclass
class RequestLink:
    """What a request link needs of the requests: sorted seqs and, in that order, each
    request's category (CAUSAL_CATEGORIES), device stage and flush-wait flag."""

    seq: np.ndarray
    cat: np.ndarray
    stage_a: np.ndarray
    stage_b: np.ndarray
    flush_seq: np.ndarray
    order: np.ndarray  # the request (index in Requests) of each entry
    # Disjoint sorted intervals when a flush was in flight on the workload's devices (a
    # flush-sequenced request's pre/post-flush included; a carrier device's are the
    # devices' below it); empty: not known.
    flushing: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    dev: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # device index
    # Per carrier device (views/stack.py, carrier_devices: a loop device whose requests
    # the devices below serve), what those devices were doing (device_states): a wait
    # on one of its requests is that, and the loop worker's CPU in between.
    below: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)

    @staticmethod
    def build(rq: Any, cls: np.ndarray | None) -> "RequestLink":
        seq = rq.extra.get("seq") if hasattr(rq, "extra") else None
        if seq is None or cls is None or not len(seq):
            z = np.zeros(0, I64)
            return RequestLink(z, np.zeros(0, np.int8), z, z, np.zeros(0, bool), z)
        o = np.argsort(seq, kind="stable")
        cat = (CATEGORY_OF_CLASS[np.asarray(cls)[o]] + DEVICE_CAT0).astype(np.int8)
        issue = rq.issue[o]
        dd = rq.data_done[o]
        flush_seq = (rq.flags[o] & abi.RQ_FLUSH_SEQ) != 0
        return RequestLink(np.asarray(seq)[o].astype(I64), cat, issue,
                           np.maximum(dd, issue), flush_seq, o.astype(I64),
                           dev=rq.dev[o].astype(np.int32))

    def find(self, seq: np.ndarray) -> np.ndarray:
        """Index of each seq's request, -1 when not among the requests."""
        if not len(self.seq):
            return np.full(len(seq), -1, np.int64)
        i = np.minimum(np.searchsorted(self.seq, seq), len(self.seq) - 1)
        return np.where(self.seq[i] == seq, i, -1)


def device_states(levels: list[tuple[np.ndarray, np.ndarray]]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cumulative coverages levels[0] <= levels[1] <= ... (disjoint sorted
    intervals each: level k is the time something of category BARRIER + k or better
    was in flight) as one partition: disjoint sorted [s, e) with, for each, the best
    category in flight (BARRIER + the first level covering it)."""
    if not levels:
        z = np.zeros(0, I64)
        return z, z, np.zeros(0, np.int8)
    edges = np.unique(np.concatenate([np.concatenate((s, e)) for s, e in levels]
                                     ).astype(I64))
    if len(edges) < 2:
        z = np.zeros(0, I64)
        return z, z, np.zeros(0, np.int8)
    ea, eb = edges[:-1], edges[1:]
    cat = np.full(len(ea), -1, np.int16)
    for k in range(len(levels) - 1, -1, -1):  # the best (lowest) level last
        s, e = (np.asarray(x, I64) for x in levels[k])
        if not len(s):
            continue
        j = np.searchsorted(s, ea, side="right") - 1
        inside = (j >= 0) & (e[np.maximum(j, 0)] > ea)
        cat[inside] = BARRIER + k
    keep = cat >= 0
    ea, eb, cat = ea[keep], eb[keep], cat[keep]
    if len(ea) > 1:  # merge neighbours of one category
        new = np.ones(len(ea), bool)
        new[1:] = (ea[1:] != eb[:-1]) | (cat[1:] != cat[:-1])
        starts = np.flatnonzero(new)
        ends = np.append(starts[1:], len(ea)) - 1
        ea, eb, cat = ea[starts], eb[ends], cat[starts]
    return ea, eb, cat.astype(np.int8)


def _causes(tl: Timeline, iv: _Intervals, link: RequestLink, names: _Names,
            arch: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(category or RECURSE or -2 for a request link, target actor or request index,
    detail) of each interval's blocked part, by the rules of the module doc."""
    c, sysnr = iv.c, iv.sysnr
    n = len(sysnr)
    cat = np.full(n, OTHER, np.int8)
    target = np.full(n, -1, np.int64)
    detail = np.full(n, NOT_SEEN, np.int32)
    flags = c["flags_u16"].astype(np.int64)
    wtid = c["waker_tid"].astype(I64)
    ctx = c["waker_ctx_u16"].astype(np.int64)
    comm = np.ascontiguousarray(c["waker_comm"])
    sleepy = np.zeros(n, bool)
    for nr in np.unique(sysnr).tolist():
        if syscall_name(int(nr), arch) in SLEEP_SYSCALLS:
            sleepy |= sysnr == nr
    done = ~iv.woken
    # 6. not woken / waker not seen.
    unseen = done | ((ctx == abi.WCTX_UNKNOWN) & (wtid == 0))
    cat[unseen & sleepy] = SLEEP
    detail[unseen & sleepy] = -1
    done = unseen.copy()
    # 1. request link.
    ri = link.find(c["waker_rq_seq"].astype(I64))
    m = ~done & ((flags & abi.OFF_WAKER_RQ) != 0) & (ri >= 0)
    cat[m], target[m], detail[m] = -2, ri[m], -1
    done |= m
    # 2. interrupts, the idle task, the thread itself.
    irq = (ctx == abi.WCTX_HARDIRQ) | (ctx == abi.WCTX_SOFTIRQ) | (ctx == abi.WCTX_NMI)
    m = ~done & (irq | (wtid == 0) | (wtid == c["tid"].astype(I64)))
    # A helper woken from an interrupt with no request link may be handed work by an
    # I/O completion (end-I/O work queued from it) or wake from a timer: out of iowait,
    # what the devices did not do over it is its sleep (HELPER_IRQ, helper_timers).
    iowait = (flags & abi.OFF_IOWAIT) != 0
    io = iowait | iv.helper
    cat[m & ~io], detail[m & ~io] = SLEEP, TIMER
    cat[m & io] = OTHER
    detail[m & io] = np.where(iowait[m & io], IRQ_NO_RQ, HELPER_IRQ)
    done |= m
    # 3, 4. another workload thread or a recorded helper: recurse; not into the journal
    # thread of a filesystem on a device the trace does not describe (foreign_jbd2).
    ti, known = tl.actor_of(wtid)
    m = np.flatnonzero(~done & known)
    m = m[~foreign_jbd2(comm[m], tl.devices)]
    cat[m], target[m], detail[m] = RECURSE, ti[m], -1
    done[m] = True
    # 5. a task outside the workload.
    rest = np.flatnonzero(~done)
    if len(rest):
        helper_like = np.zeros(len(rest), bool)
        for p in HELPER_PREFIXES:
            helper_like |= starts_with(comm[rest], p)
        cat[rest] = np.where(helper_like, OTHER, EXTERNAL)
        # Names numbered as met: the workload's wakers, then the helpers' (sorted by
        # name within each), as the intervals of each kind come.
        hr = iv.helper[rest]
        for part in (rest[~hr], rest[hr]):
            detail[part] = names.codes(comm[part])
        # An I/O wait (iowait, or a helper's) ended from another task's context with no
        # request link is an I/O completion run in that task (a task-context completion:
        # a FUSE daemon serving a loop device, a submitter completing inline), not that
        # task's doing: like an interrupt without a request, filled from the devices.
        tio = io[rest] & (ctx[rest] == abi.WCTX_TASK)
        cat[rest[tio]], detail[rest[tio]] = OTHER, TASK_IO
    return cat, target, detail


def starts_with(comm: np.ndarray, prefix: bytes) -> np.ndarray:
    """Per name of a fixed-width bytes array: whether it starts with prefix (a compare
    of the leading bytes, without per-element string calls)."""
    comm = np.ascontiguousarray(comm)
    width = comm.dtype.itemsize
    if len(prefix) > width:
        return np.zeros(len(comm), bool)
    lead = comm.view(np.uint8).reshape(len(comm), width)[:, :len(prefix)]
    return (lead == np.frombuffer(prefix, np.uint8)).all(axis=1)


def unique_names(comm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(comm, return_inverse=True) of 16-byte names, by a sort of a 64-bit hash
    of each (a numeric sort, several times faster than sorting the strings); a hash
    collision falls back to the string sort. The same result either way."""
    comm = np.ascontiguousarray(comm)
    if comm.dtype.itemsize != 16 or len(comm) < 1024:
        u, inv = np.unique(comm, return_inverse=True)
        return u, inv.ravel()
    v = comm.view(np.uint64).reshape(len(comm), 2)
    with np.errstate(over="ignore"):
        h = v[:, 0] * np.uint64(0x9E3779B97F4A7C15) + (v[:, 1] ^ (v[:, 1] >> np.uint64(29)))
    hu, first, hinv = np.unique(h, return_index=True, return_inverse=True)
    rep = comm[first]
    if not (rep[hinv.ravel()] == comm).all():  # a collision
        u, inv = np.unique(comm, return_inverse=True)
        return u, inv.ravel()
    o = np.argsort(rep, kind="stable")
    rank = np.empty(len(o), np.int64)
    rank[o] = np.arange(len(o))
    return rep[o], rank[hinv.ravel()]


def foreign_jbd2(comm: np.ndarray, devices: Sequence[str]) -> np.ndarray:
    """Per waker comm: whether it is the journal thread of an ext4 (``jbd2/<device>-<n>``)
    whose device is none of `devices` nor a partition of one (names compared by prefix
    either way, as a comm is cut at 15 bytes). Such a thread works for another
    filesystem: a shared kworker it woke (kblockd, an unbound worker) was handed that
    filesystem's work, not the workload's. Nothing is foreign without `devices`."""
    out = np.zeros(len(comm), bool)
    if not devices or not len(comm):
        return out
    j = np.flatnonzero(starts_with(comm, b"jbd2/"))
    if not len(j):
        return out
    u, inv = unique_names(np.asarray(comm)[j])
    bad = np.zeros(len(u), bool)
    for i, raw in enumerate(u.tolist()):
        if not raw.startswith(b"jbd2/"):
            continue
        rest = raw.rstrip(b"\0")[5:].decode("utf-8", "replace")
        dev = rest.rsplit("-", 1)[0] if "-" in rest else rest
        bad[i] = bool(dev) and not any(n.startswith(dev) or dev.startswith(n)
                                       for n in devices if n)
    out[j] = bad[inv]
    return out
