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
    linked: list[np.ndarray] = field(default_factory=list)  # requests (Requests indices)
    #                                                         whose completion woke a wait
    devices: tuple[str, ...] = ()  # names of the devices the trace describes (foreign_jbd2)

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
    thread of any other is not followed: foreign_jbd2)."""
    from ..views.workload import task_lifetimes
    helper = helper if helper is not None and len(helper.get("tid", ())) else _empty_cols()
    w0, w1 = window.start_ns, window.end_ns
    wtids, wbirth, wdeath = task_lifetimes(tasks, off, window)
    htid_all = np.asarray(helper["tid"]).astype(I64)
    hkeep = ~np.isin(htid_all, wtids)  # a workload thread is never a helper
    htids = small_unique(htid_all[hkeep])
    tids = np.concatenate((wtids, htids))
    nw = len(wtids)
    span = key_span(w0, w1)
    check_keyed(len(tids), span)
    names = _Names()
    cols = []
    for src, keep, is_helper in ((off, None, False), (helper, hkeep, True)):
        c = {f: np.asarray(src[f]) if f in src else np.zeros(len(src["tid"]),
                                                             abi.OFFCPU_DTYPE[f])
             for f in WAKE_FIELDS}
        if keep is not None:
            c = {f: v[keep] for f, v in c.items()}
        cols.append((c, is_helper))
    # Actor of each interval; helper actors' covered time: first to last interval.
    hb = np.full(len(htids), w1, I64)
    hd = np.full(len(htids), w0, I64)
    if len(htids):
        hc = cols[1][0]
        hi = np.searchsorted(htids, hc["tid"].astype(I64))
        np.minimum.at(hb, hi, np.clip(hc["start_ns"].astype(I64), w0, w1))
        e = hc["end_ns"].astype(I64)
        np.maximum.at(hd, hi, np.clip(np.where(e > 0, e, w1), w0, w1))
        hd = np.maximum(hd, hb)
    birth = np.concatenate((wbirth, hb))
    death = np.concatenate((wdeath, hd))
    tl = Timeline(origin=w0, span=span, tids=tids, helper=np.arange(len(tids)) >= nw,
                  birth=birth, death=death, actor=np.zeros(0, np.int32),
                  a=np.zeros(0, I64), b=np.zeros(0, I64), cat=np.zeros(0, np.int8),
                  target=np.zeros(0, np.int32), detail=np.zeros(0, np.int32),
                  sys=np.zeros(0, np.int32), devices=tuple(devices))
    parts = []
    for c, is_helper in cols:
        act = tl.actor_of(c["tid"].astype(I64))[0]
        parts.append(_segments(tl, act.astype(np.int32), c, is_helper, rq_link, names, arch))
    _gaps_and_sort(tl, parts)
    tl.details = names.names
    return tl


class _Names:
    """Detail strings: the fixed reasons, then waker names as met."""

    def __init__(self) -> None:
        self.names = list(FIXED_DETAILS)
        self.index = {n: i for i, n in enumerate(self.names)}

    def codes(self, comm: np.ndarray) -> np.ndarray:
        if not len(comm):
            return np.zeros(0, np.int32)
        u, inv = np.unique(comm, return_inverse=True)
        m = np.empty(len(u), np.int32)
        for i, raw in enumerate(u.tolist()):
            n = raw.rstrip(b"\0").decode("utf-8", "replace") or "(unnamed)"
            if n not in self.index:
                self.index[n] = len(self.names)
                self.names.append(n)
            m[i] = self.index[n]
        return m[inv.ravel()]


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


Parts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
              np.ndarray]


def _segments(tl: Timeline, act: np.ndarray, c: Mapping[str, np.ndarray], is_helper: bool,
              link: RequestLink, names: _Names, arch: str | None) -> tuple[Parts, np.ndarray]:
    """The runnable and blocked segments of one kind of interval (workload or helper),
    and the intervals' (actor, start, end) clipped for the on-CPU gaps."""
    lo, hi = tl.birth[act], tl.death[act]
    s = np.clip(c["start_ns"].astype(I64), lo, hi)
    e = c["end_ns"].astype(I64)
    e = np.clip(np.where(e > 0, e, hi), lo, hi)
    # Damaged overlaps: an interval starts no earlier than its thread's previous end.
    o = np.lexsort((s, act))
    act, s, e = act[o], s[o], e[o]
    c = {f: np.asarray(v)[o] for f, v in c.items()}
    ek = tl.keys(act, np.maximum(e, s))
    # The latest end before each interval, keyed; before the first, its own start (not
    # the smallest int64: minus an actor's key offset that would wrap around).
    prev = np.concatenate((tl.keys(act[:1], s[:1]), np.maximum.accumulate(ek)[:-1]))
    s = np.maximum(s, prev - act.astype(I64) * tl.span + tl.origin)
    e = np.maximum(e, s)
    flags = c["flags_u16"].astype(np.int64)
    wk = c["waking_ns"].astype(I64)
    woken = (wk > 0) & ((flags & abi.OFF_PREEMPT) == 0)
    w = np.where(woken, np.clip(wk, s, e), np.where((flags & abi.OFF_PREEMPT) != 0, s, e))
    # A helper's syscall is none of the workload's: the waiter's own names the wait.
    sysnr = (np.full(len(s), -3, np.int32) if is_helper
             else c["syscall_nr"].astype(np.int32))
    cat, target, detail = _causes(tl, act, c, woken, sysnr, is_helper, link, names, arch)
    blocked = w > s
    if not is_helper:
        tl.intervals += len(s)
        un = blocked & (detail == NOT_SEEN)
        tl.unseen += int(un.sum())
        tl.unseen_ns += int((w - s)[un].sum())
    # Request links split the wait around the request's device stage.
    ri = np.where(cat == -2, target, -1)
    rl = ri >= 0
    cat = np.where(rl, OTHER, cat).astype(np.int8)
    target = np.where(rl, -1, target).astype(np.int32)
    runq = np.full(len(s), HRUNQ if is_helper else RUNQ, np.int8)
    m1 = np.full(len(s), -1, np.int32)
    seg: list[tuple[np.ndarray, ...]] = [(act, w, e, runq, m1, m1, sysnr),
                                         (act, s, w, cat, target, detail, sysnr)]
    seg[1] = tuple(x[blocked & ~rl] for x in seg[1])
    if rl.any():
        k = np.flatnonzero(rl & blocked)
        r = ri[k]
        tl.linked.append(link.order[r])
        carried = np.zeros(len(k), bool)
        for d, (ss, se, sc) in link.below.items():
            m = link.dev[r] == d
            if not m.any():
                continue
            carried |= m
            # A request of a carrier device: the wait is what the devices below did over
            # it, and their idle time the loop worker's (helper-cpu).
            km = k[m]
            qi, pa, pb, pc = cut_by_states(s[km], w[km], ss, se, sc,
                                           np.full(len(km), HCPU, np.int8))
            n = len(qi)
            seg.append((act[km][qi], pa, pb, pc, np.full(n, -1, np.int32),
                        np.where(pc == HCPU, CARRIED, -1).astype(np.int32), sysnr[km][qi]))
        k, r = k[~carried], r[~carried]
        rc = link.cat[r]
        fs = link.flush_seq[r]
        pre_b = np.clip(link.stage_a[r], s[k], w[k])
        post_a = np.clip(link.stage_b[r], pre_b, w[k])
        outer = np.where(fs, BARRIER, rc).astype(np.int8)
        mk = np.full(len(k), -1, np.int32)
        for a_, b_, c_ in ((s[k], pre_b, outer), (pre_b, post_a, rc), (post_a, w[k], outer)):
            seg.append(_behind_flushes(link, act[k], a_, b_, c_, mk, sysnr[k]))
    cat_all = tuple(np.concatenate(x) for x in zip(*seg))
    rt = c["run_total_ns"].astype(I64) if "run_total_ns" in c else np.zeros(len(s), I64)
    return cat_all, np.stack((act.astype(I64), s, e, rt))  # type: ignore[return-value]


def _behind_flushes(link: "RequestLink", act: np.ndarray, a: np.ndarray, b: np.ndarray,
                    cat: np.ndarray, m1: np.ndarray, sysnr: np.ndarray
                    ) -> tuple[np.ndarray, ...]:
    """Segments [a, b) of a wait on a request, cut where a flush was in flight on the
    workload's devices (link.flushing): the request waited behind it (barrier), the
    rest keeps its category."""
    fs, fe = link.flushing
    if not len(fs) or not len(a):
        return (act, a, b, cat, m1, m1, sysnr)
    qi, pa, pb, pc = cut_by_states(a, b, fs, fe, np.full(len(fs), BARRIER, np.int8), cat)
    n = len(qi)
    return (act[qi], pa, pb, pc, np.full(n, -1, np.int32), np.full(n, -1, np.int32),
            sysnr[qi])


def cut_by_states(a: np.ndarray, b: np.ndarray, ss: np.ndarray, se: np.ndarray,
                  scat: np.ndarray, gap_cat: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each interval [a, b) cut by the states [ss, se) (disjoint, sorted) with their
    categories scat; its time outside every state has its own gap_cat. Returns (index
    of the interval, start, end, category) of the non-empty pieces, which tile each
    interval exactly."""
    a, b = np.asarray(a, I64), np.asarray(b, I64)
    lo = np.searchsorted(se, a, side="right")  # first state ending after a
    hi = np.searchsorted(ss, b, side="left")  # first state starting at or after b
    cnt = np.maximum(hi - lo, 0)
    qi = np.repeat(np.arange(len(a)), cnt)
    first = np.cumsum(cnt) - cnt
    si = lo[qi] + (np.arange(len(qi)) - first[qi])
    pa = np.maximum(a[qi], ss[si])
    pb = np.minimum(b[qi], se[si])
    # The parts outside the states: from a (or each state's end) to the next state's
    # start (or b), as explain's gaps.
    prev = np.empty(len(qi), I64)
    if len(qi):
        prev[1:] = pb[:-1]
    has = cnt > 0
    prev[first[has]] = a[has]
    last_end = (np.where(has, pb[np.maximum(first + cnt - 1, 0)], a) if len(pb)
                else a.copy())
    ga = np.concatenate((prev, last_end))
    gb = np.concatenate((pa, b))
    gq = np.concatenate((qi, np.arange(len(a))))
    keep_f = pb > pa
    keep_g = gb > ga
    return (np.concatenate((qi[keep_f], gq[keep_g])),
            np.concatenate((pa[keep_f], ga[keep_g])),
            np.concatenate((pb[keep_f], gb[keep_g])),
            np.concatenate((np.asarray(scat)[si[keep_f]],
                            np.asarray(gap_cat)[gq[keep_g]])).astype(np.int8))


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


def _causes(tl: Timeline, act: np.ndarray, c: Mapping[str, np.ndarray], woken: np.ndarray,
            sysnr: np.ndarray, is_helper: bool, link: RequestLink, names: _Names,
            arch: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(category or RECURSE or -2 for a request link, target actor or request index,
    detail) of each interval's blocked part, by the rules of the module doc."""
    n = len(act)
    cat = np.full(n, OTHER, np.int8)
    target = np.full(n, -1, np.int64)
    detail = np.full(n, NOT_SEEN, np.int32)
    flags = c["flags_u16"].astype(np.int64)
    wtid = c["waker_tid"].astype(I64)
    ctx = c["waker_ctx_u16"].astype(np.int64)
    comm = np.asarray(c["waker_comm"])
    tid = c["tid"].astype(I64)
    sleepy = np.zeros(n, bool)
    for nr in np.unique(sysnr).tolist():
        if syscall_name(int(nr), arch) in SLEEP_SYSCALLS:
            sleepy |= sysnr == nr
    done = ~woken
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
    m = ~done & (irq | (wtid == 0) | (wtid == tid))
    # A helper woken from an interrupt with no request link may be handed work by an
    # I/O completion (end-I/O work queued from it) or wake from a timer: out of iowait,
    # what the devices did not do over it is its sleep (HELPER_IRQ, helper_timers).
    iowait = (flags & abi.OFF_IOWAIT) != 0
    io = iowait | is_helper
    cat[m & ~io], detail[m & ~io] = SLEEP, TIMER
    cat[m & io] = OTHER
    detail[m & io] = np.where(iowait[m & io], IRQ_NO_RQ, HELPER_IRQ)
    done |= m
    # 3, 4. another workload thread or a recorded helper: recurse; not into the journal
    # thread of a filesystem on a device the trace does not describe (foreign_jbd2).
    ti, known = tl.actor_of(wtid)
    m = ~done & known & ~foreign_jbd2(comm, tl.devices)
    cat[m], target[m], detail[m] = RECURSE, ti[m], -1
    done |= m
    # 5. a task outside the workload.
    rest = np.flatnonzero(~done)
    if len(rest):
        helper_like = np.zeros(len(rest), bool)
        for p in HELPER_PREFIXES:
            helper_like |= np.char.startswith(comm[rest], p)
        cat[rest] = np.where(helper_like, OTHER, EXTERNAL)
        detail[rest] = names.codes(comm[rest])
        # An I/O wait (iowait, or a helper's) ended from another task's context with no
        # request link is an I/O completion run in that task (a task-context completion:
        # a FUSE daemon serving a loop device, a submitter completing inline), not that
        # task's doing: like an interrupt without a request, filled from the devices.
        tio = io[rest] & (ctx[rest] == abi.WCTX_TASK)
        cat[rest[tio]], detail[rest[tio]] = OTHER, TASK_IO
    return cat, target, detail


def foreign_jbd2(comm: np.ndarray, devices: Sequence[str]) -> np.ndarray:
    """Per waker comm: whether it is the journal thread of an ext4 (``jbd2/<device>-<n>``)
    whose device is none of `devices` nor a partition of one (names compared by prefix
    either way, as a comm is cut at 15 bytes). Such a thread works for another
    filesystem: a shared kworker it woke (kblockd, an unbound worker) was handed that
    filesystem's work, not the workload's. Nothing is foreign without `devices`."""
    out = np.zeros(len(comm), bool)
    if not devices or not len(comm):
        return out
    u, inv = np.unique(np.asarray(comm), return_inverse=True)
    bad = np.zeros(len(u), bool)
    for i, raw in enumerate(u.tolist()):
        if not raw.startswith(b"jbd2/"):
            continue
        rest = raw.rstrip(b"\0")[5:].decode("utf-8", "replace")
        dev = rest.rsplit("-", 1)[0] if "-" in rest else rest
        bad[i] = bool(dev) and not any(n.startswith(dev) or dev.startswith(n)
                                       for n in devices if n)
    return bad[inv.ravel()]


def _gaps_and_sort(tl: Timeline, parts: list[tuple[Parts, np.ndarray]]) -> None:
    """Add the on-CPU gaps of every actor (its covered time outside its intervals), sort
    all segments by (actor, start) and store them in tl."""
    segs = [p[0] for p in parts]
    ivs = np.concatenate([p[1] for p in parts], axis=1)
    nact = len(tl.tids)
    # Per actor: its intervals sorted, the gaps before, between and after them.
    ia, isa, iea, irt = ivs[0], ivs[1], ivs[2], ivs[3]
    o = np.lexsort((isa, ia))
    ia, isa, iea, irt = ia[o], isa[o], iea[o], irt[o]
    acts = np.arange(nact, dtype=I64)
    ga = np.concatenate((acts, ia))  # gap starts: the birth, then each interval's end
    gs = np.concatenate((tl.birth, iea))
    # The gap after each: up to the next interval of the actor, else its death.
    nxt = np.concatenate((np.searchsorted(ia, acts), np.arange(1, len(ia) + 1)))
    nxt_ok = nxt < len(ia)
    nxt_c = np.minimum(nxt, max(len(ia) - 1, 0))
    same = nxt_ok & (ia[nxt_c] == ga if len(ia) else np.zeros(len(ga), bool))
    ge = np.where(same, isa[nxt_c] if len(ia) else 0, tl.death[ga.astype(np.int64)])
    # A gap after the birth is only the part before the first interval.
    keep = ge > gs
    ga, gs, ge = ga[keep], gs[keep], ge[keep]
    # A helper is recorded in stretches: between two of its intervals it ran only for
    # the growth of its CPU total (run_total_ns, at each switch-out); the rest of the gap
    # is a stretch not recorded.
    cpu_end = ge.copy()
    if len(ia):
        prev = np.concatenate((np.full(nact, -1), np.arange(len(ia))))[keep]
        nx = nxt_c[keep]
        h = tl.helper[ga.astype(np.int64)] & same[keep] & (prev >= 0)
        rt0 = irt[np.maximum(prev, 0)]
        rt1 = irt[nx]
        h &= (rt0 > 0) & (rt1 >= rt0)
        cpu_end = np.where(h, np.minimum(ge, gs + (rt1 - rt0)), ge)
    gcat = np.where(tl.helper[ga.astype(np.int64)], HCPU, CPU).astype(np.int8)
    m1 = np.full(len(ga), -1, np.int32)
    segs.append((ga.astype(np.int32), gs, cpu_end, gcat, m1, m1,
                 np.full(len(ga), -3, np.int32)))
    segs.append((ga.astype(np.int32), cpu_end, ge, np.full(len(ga), OTHER, np.int8), m1,
                 np.full(len(ga), NOT_RECORDED, np.int32), np.full(len(ga), -3, np.int32)))
    cols = [np.concatenate(x) for x in zip(*segs)]
    act, a, b = cols[0].astype(np.int32), cols[1].astype(I64), cols[2].astype(I64)
    keep = b > a
    o = np.lexsort((a[keep], act[keep]))
    tl.actor, tl.a, tl.b = act[keep][o], a[keep][o], b[keep][o]
    tl.cat = cols[3][keep][o].astype(np.int8)
    tl.target = cols[4][keep][o].astype(np.int32)
    tl.detail = cols[5][keep][o].astype(np.int32)
    tl.sys = cols[6][keep][o].astype(np.int32)
