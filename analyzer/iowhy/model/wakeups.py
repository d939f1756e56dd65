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
   workload's devices (the request waited behind it: _linked_pieces); a request of a
   carrier device (a loop device whose lower device is recorded: views/stack.py,
   carrier_devices) the same, as that device shows it (its flushes, its stage): what
   served the wait is the service, a cache flush, not its server, the loop worker's
   fsync of its backing file (views/stack.py carried_service says how that went);
2. woken in interrupt context (hardirq, softirq, NMI) with no request, by the idle task
   or by the thread itself -> ``sleep`` (a timer: detail TIMER), or ``wait-other``
   "(irq, no request)"
   when the thread was in iowait (views/causal.py's device_fill then charges it to what
   the workload's devices were doing); a helper not in iowait -> ``wait-other``
   "(helper's timer)": device_fill charges what the devices did over it, and the rest
   is ``sleep`` (helper_timers: a worker polling on a timer, as btrfs's space reclaim
   does, with no I/O in flight);
3. woken by another workload thread -> *recurse*: that thread's own timeline over the
   wait (the recursion is views/causal.py's); but a wait for a child (wait4, waitid)
   that a child's exit ended, after which the thread only reaped it and waited again,
   recurses into the child that ended the later wait (_reaped_then_waited);
4. woken by a helper thread with recorded intervals -> *recurse* into the helper, whose
   on-CPU and runnable time are ``helper-cpu`` and ``helper-runqueue``, with its purpose
   when it has one (jbd2: log; xfsaild: metadata; a kworker a data write's completion
   handed its work: data, _handed_by; else a kworker inside an XFS fsync: log); but a jbd2
   thread of a device the trace does not describe works for another filesystem
   (foreign_jbd2): rule 5;
5. woken by another task: a kernel helper not recorded -> ``wait-other`` by its name;
   an I/O wait (iowait, or a helper's) woken from that task's context -> ``wait-other``
   "(I/O completed in another task)", filled from the devices like rule 2's;
   else ``external`` by its name;
6. not woken in the window (still blocked at the stop) or the waker not seen -> ``sleep``
   in a sleeping syscall (nanosleep, poll, select, epoll, pause...), else ``wait-other``
   "(not seen)"; counted as unseen wakers; but a wait for I/O still open at the stop
   (``OPEN_END``, in iowait or in an fsync-family syscall) -> ``wait-other`` "(blocked at
   the stop)", which views/causal.py's device_fill charges to what the workload's
   devices were doing, as rule 2's.

A preempted interval (``PREEMPT``, no wakeup) is runnable throughout; ``[waking,
switch-in)`` is runnable. Time between two intervals of a thread is on CPU. A thread's
life is from its ROOT/FORK (else its first interval, else the window start) to its EXIT
(else the window end); a helper's timeline covers only its first to its last recorded
interval.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from .. import abi
from ..kernels import I64, check_keyed, key_span, small_unique, unique
from ..categories import ATTRIBUTION_CATEGORIES, PART_NAMES, level_two
from ..filesystems import FILESYSTEMS, HELPER_THREADS
from ..syscalls import syscall_name
from .classify import CATEGORY_OF_CLASS
from .requests import Window
from .tasks import task_lifetimes


# Two levels (docs/design.md, "The two levels of the causal attribution"). A segment or
# a leaf has a *kind*: what was happening then, level two's part (KIND_NAMES). Its level
# one, what the workload waited for (ATTRIBUTION_CATEGORIES), is its *purpose* when a
# segment on the way to it set one (a request's class for a wait on the request, log for
# a wait on a journal thread, throttle for a throttled wait), else its kind's own
# (NATURAL_L1).
CAUSAL_CATEGORIES = ATTRIBUTION_CATEGORIES
KIND_NAMES = PART_NAMES  # the registry's level two, in code order
_KIND = {n: k for k, n in enumerate(KIND_NAMES)}
_L1 = {n: k for k, n in enumerate(ATTRIBUTION_CATEGORIES)}
CPU, RUNQ, BARRIER, LOG, METADATA, DATA, READ, HCPU, HRUNQ, SLEEP, EXTERNAL, OTHER = (
    _KIND[n] for n in ("cpu", "runqueue", "flush", "log", "metadata", "data", "read",
                       "helper-cpu", "helper-runqueue", "sleep", "external", "wait-other"))
# More kinds: a request waited for before its issue; a throttled wait (dirty pages, the
# block layer's throttles and tags); another workload thread on a CPU or waiting for one.
QUEUE, DIRTY, BLOCKQ, TCPU, TRUNQ = (
    _KIND[n] for n in ("queue", "dirty-pages", "block-throttle", "thread-cpu",
                       "thread-runqueue"))
FLUSH = BARRIER  # the kind of a cache flush in service; its natural level one is barrier
RECURSE = -1  # a segment explained by another thread's timeline (its `target`)
DEVICE_CAT0 = BARRIER  # device kinds are BARRIER + classify.CATEGORY_OF_CLASS
# Level-one indices (ATTRIBUTION_CATEGORIES); the device ones equal the device kinds
# (tests/unit/test_categories.py checks the registry keeps them so).
(L_CPU, L_RUNQ, L_BARRIER, L_LOG, L_METADATA, L_DATA, L_READ, L_THROTTLE, L_HCPU, L_HRUNQ,
 L_SLEEP, L_EXTERNAL, L_OTHER) = (
    _L1[n] for n in ("cpu", "runqueue", "barrier", "log", "metadata", "data", "read",
                     "throttle", "helper-cpu", "helper-runqueue", "sleep", "external",
                     "wait-other"))
# Each kind's own level one: its registry parent.
NATURAL_L1 = np.array([_L1[str(c.parent)] for c in level_two()], np.int8)

# Fixed details (reasons) of wait-other time; waker names follow them.
(NOT_SEEN, NO_TASK, DEPTH, IRQ_NO_RQ, NOT_RECORDED, TASK_IO, HELPER_IRQ, TIMER,
 AT_STOP) = range(9)
FIXED_DETAILS = ("(not seen)", "(no task)", "(depth limit)", "(irq, no request)",
                 "(not recorded)", "(I/O completed in another task)",
                 "(helper's timer)", "(timer)", "(blocked at the stop)")
# TIMER is the detail of a `sleep` segment woken by its timer (rule 2), which a polling
# loop is made of (views/causal.py continues it); other sleep segments have none (-1).

# Kernel threads the recorder treats as helpers (docs/trace-format.md, helper), by the
# prefix of their comm: the filesystems' journal threads and the generic helpers.
HELPER_PREFIXES = HELPER_THREADS
# (comm prefix, level one) of each filesystem's journal threads: what a wait one of them
# ends is for (iowhy.filesystems).
JOURNAL_THREAD_SERVES = tuple((t, _L1[f.journal_thread_serves])
                              for f in FILESYSTEMS for t in f.journal_threads)

# The fsync-family syscalls (abi.CALL_NAMES but the O_SYNC write, a write): a wait in one
# is for the I/O it started, or for the journal's commit of it.
SYNC_SYSCALLS = frozenset(n for c, n in abi.CALL_NAMES.items() if c != abi.CALL_OSYNC_WRITE)
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
    (actor, start), tiling each actor's covered time [birth, death) without a gap.
    Keyed times (actor * span + t - origin) make one searchsorted find an actor's
    segments over an interval.

    A segment is 22 bytes: its actor, keyed start, kind, argument, syscall and purpose. Its
    start and end are not stored: the start is the keyed start less the actor's
    offset, the end the next segment's start (the actor's death for its last one)."""

    origin: int
    span: int
    tids: np.ndarray  # tid of each actor
    helper: np.ndarray  # bool per actor
    birth: np.ndarray  # per actor: start of its covered time
    death: np.ndarray
    actor: np.ndarray  # int32 per segment
    kstart: np.ndarray  # int64: keyed start, ascending
    cat: np.ndarray  # int8: CAUSAL_CATEGORIES index, or RECURSE
    arg: np.ndarray  # int32: the actor explaining a RECURSE segment, else the detail
    #                  (an index into details: wait-other, external), or -1
    sys: np.ndarray  # int32: syscall of the interval the segment is part of; -3: on CPU
    pur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))  # int8: the
    #     level one (purpose) this segment sets for what explains it, or -1
    details: list[str] = field(default_factory=list)
    unseen: int = 0  # blocked intervals of workload threads whose waker was not seen
    unseen_ns: int = 0
    intervals: int = 0  # off-CPU intervals of workload threads
    devices: tuple[str, ...] = ()  # names of the devices the trace describes (foreign_jbd2)
    # per actor: born by a fork inside the window (its birth is the fork)
    forked: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def actor_of(self, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(actor index, found) of each tid (the index is meaningless where not found).
        By a table of the actors' tids (thread ids are below 2^23) when it is no larger
        than a few times the tids looked up: a search of unsorted keys mispredicts its
        branches."""
        if not len(self.tids):
            return np.zeros(len(tid), np.int64), np.zeros(len(tid), bool)
        top = int(self.tids.max())
        if int(self.tids.min()) >= 0 and top < min(1 << 23, 8 * len(tid) + 4096):
            table = np.full(top + 2, -1, np.int32)  # the last entry: any tid beyond
            table[self.tids] = np.arange(len(self.tids), dtype=np.int32)
            t = np.asarray(tid).astype(I64)
            ai = table[np.where((t >= 0) & (t <= top), t, top + 1)].astype(I64)
            found = ai >= 0
            np.maximum(ai, 0, out=ai)
            return ai, found
        order = np.argsort(self.tids, kind="stable")
        i = np.minimum(np.searchsorted(self.tids, tid, sorter=order), len(order) - 1)
        ai = order[i]
        return ai, self.tids[ai] == tid

    def keys(self, actor: np.ndarray, t: np.ndarray) -> np.ndarray:
        # In place in one new array (int64 arithmetic wraps alike in any order).
        k = actor.astype(I64)
        k *= self.span
        k += t
        k -= self.origin
        return k

    def key_starts(self) -> np.ndarray:
        return self.kstart

    def key_ends(self, j: np.ndarray) -> np.ndarray:
        """Keyed end of the segments j: the next one's keyed start, or the actor's
        keyed death."""
        n = len(self.kstart)
        act = self.actor[j].astype(I64)
        nxt = np.minimum(j + 1, max(n - 1, 0))
        same = (j + 1 < n) & (self.actor[nxt] == act)
        return np.where(same, self.kstart[nxt], act * self.span + (self.death[act] - self.origin))

    def starts(self, j: np.ndarray) -> np.ndarray:
        return self.kstart[j] - self.actor[j].astype(I64) * self.span + self.origin

    def ends(self, j: np.ndarray) -> np.ndarray:
        return self.key_ends(j) - self.actor[j].astype(I64) * self.span + self.origin

    def target(self, j: np.ndarray) -> np.ndarray:
        """The actor explaining each segment j, -1 for one that is not RECURSE."""
        return np.where(self.cat[j] == RECURSE, self.arg[j], -1)

    def detail(self, j: np.ndarray) -> np.ndarray:
        """The detail of each segment j, -1 for a RECURSE one."""
        return np.where(self.cat[j] == RECURSE, -1, self.arg[j])

    # Whole columns, for tests and tools.
    @property
    def a(self) -> np.ndarray:
        return self.starts(np.arange(len(self.kstart)))

    @property
    def b(self) -> np.ndarray:
        return self.ends(np.arange(len(self.kstart)))

    def first_segment(self, kq: np.ndarray) -> np.ndarray:
        """Per keyed time: the first segment ending after it (of its actor or a later
        one)."""
        ks = self.kstart
        j = np.searchsorted(ks, kq, side="right") - 1
        jc = np.maximum(j, 0)
        inside = (j >= 0) & (self.key_ends(jc) > kq)
        return np.where(inside, j, j + 1)


def asleep_at_start(off: Mapping[str, np.ndarray], thread: Mapping[str, np.ndarray],
                    window: Window, tasks: Mapping[str, np.ndarray] | None = None
                    ) -> Mapping[str, np.ndarray]:
    """The off-CPU columns plus, for each thread that was asleep when recording started
    (its `thread` record's state is not R) and has no off-CPU interval at all (it was
    never woken in the window), one interval over the whole window, never woken, in the
    syscall /proc showed: without it the thread would count as running throughout. A
    thread whose process joined the followed cgroup later (a JOIN in `tasks`) is asleep
    from its join on, not from the window's start."""
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
        add["start_ns"][:] = np.maximum(window.start_ns, _joined_at(tasks, tid[new]))
    add["syscall_nr"][:] = np.asarray(thread["syscall_nr"])[new]
    add["flags_u16"][:] = abi.OFF_FROM_START
    return {f: np.concatenate((np.asarray(off[f]), add[f])) for f in off}


def _joined_at(tasks: Mapping[str, np.ndarray] | None, tids: np.ndarray) -> np.ndarray:
    """Per tid: the time of its JOIN task event (0: none)."""
    out = np.zeros(len(tids), I64)
    if tasks is None or not len(tasks.get("tid", ())):
        return out
    j = np.asarray(tasks["event_u16"]) == abi.TASK_JOIN
    jt = np.asarray(tasks["tid"])[j].astype(I64)
    jts = np.asarray(tasks["ts_ns"])[j].astype(I64)
    for k, t in enumerate(tids):
        hit = jts[jt == t]
        if len(hit):
            out[k] = hit.min()
    return out


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
                   devices: Sequence[str] = (),
                   calls: Mapping[str, np.ndarray] | None = None,
                   threads: int = 1) -> Timeline:
    """The timelines of the workload's threads (off: their offcpu columns, tasks: their
    task events) and of the helpers (helper records), with each blocked segment's cause.
    devices: the names of the devices (and partitions) the trace describes (a jbd2
    thread of any other is not followed: foreign_jbd2).

    Work: one stable sort of each kind's intervals by (actor, start); every segment is
    then written straight to its place (_lay_out), so the segments come out sorted.
    Memory: the record columns are read a field at a time in that order (_Cols), never
    copied whole. threads: the chunks of the lay-out are taken this many at a time
    (chunk_map; numpy releases the GIL), each written to its own places: the same
    timeline whatever the number."""
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
    # Helper actors' covered time: first to last interval.
    hact = nw + np.searchsorted(htids, htid_all[hsel])
    del htid_all
    hb = np.full(len(htids), w1, I64)
    hd = np.full(len(htids), w0, I64)
    if len(htids):
        np.minimum.at(hb, hact - nw, np.clip(_col(helper, "start_ns", hsel), w0, w1))
        e = _col(helper, "end_ns", hsel)
        np.maximum.at(hd, hact - nw, np.clip(np.where(e > 0, e, w1), w0, w1))
        del e
        hd = np.maximum(hd, hb)
    tl = Timeline(origin=w0, span=span, tids=tids, helper=np.arange(len(tids)) >= nw,
                  birth=np.concatenate((wbirth, hb)), death=np.concatenate((wdeath, hd)),
                  actor=np.zeros(0, np.int32), kstart=np.zeros(0, I64),
                  cat=np.zeros(0, np.int8), arg=np.zeros(0, np.int32),
                  sys=np.zeros(0, np.int32), pur=np.zeros(0, np.int8), devices=tuple(devices),
                  forked=np.concatenate((_forked(tasks, wtids, wbirth, window),
                                         np.zeros(len(htids), bool))))
    wact = np.searchsorted(wtids, np.asarray(off["tid"]).astype(I64))
    iv = _intervals(tl, ((off, None, wact), (helper, hsel, hact)))
    del wact, hact, hsel
    names = _Names()
    cat, target, detail, pur = _causes(tl, iv, rq_link, names, arch, calls)
    _lay_out(tl, iv, cat, target, detail, pur, rq_link, threads)
    tl.details = names.names
    return tl


_T = TypeVar("_T")
_R = TypeVar("_R")


def chunk_map(fn: Callable[[_T], _R], items: Iterable[_T], threads: int) -> list[_R]:
    """[fn(x) for x in items], on `threads` threads when more than one item: the results
    in the items' order. For chunks of work that write disjoint parts of shared arrays or
    return their part (numpy releases the GIL in its loops, so two chunks progress side
    by side); at most `threads` chunks' temporaries exist at once."""
    todo = list(items)
    if threads <= 1 or len(todo) < 2:
        return [fn(x) for x in todo]
    with ThreadPoolExecutor(max_workers=min(threads, len(todo))) as pool:
        return list(pool.map(fn, todo))


def ordered_map(fn: Callable[[_T], _R], items: Iterable[_T], threads: int) -> Iterator[_R]:
    """fn(x) of each item, yielded in the items' order, computed on `threads` threads
    when more than one: at most `threads` results wait beyond the one yielded (their
    memory is bounded as the items' is), so that the caller's use of each (a sum)
    overlaps the work of the next."""
    if threads <= 1:
        for x in items:
            yield fn(x)
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending: deque[Future[_R]] = deque()
        for x in items:
            if len(pending) >= threads:
                yield pending.popleft().result()
            pending.append(pool.submit(fn, x))
        while pending:
            yield pending.popleft().result()


def _forked(tasks: Mapping[str, np.ndarray], tids: np.ndarray, birth: np.ndarray,
            window: Window) -> np.ndarray:
    """Per thread (tids, ascending): its birth is a FORK event inside the window."""
    out = np.zeros(len(tids), bool)
    if not len(tids) or not len(tasks.get("tid", ())):
        return out
    ev = np.asarray(tasks["event_u16"])
    f = np.flatnonzero(ev == abi.TASK_FORK)
    ft = np.asarray(tasks["tid"])[f].astype(I64)
    fts = np.asarray(tasks["ts_ns"])[f].astype(I64)
    i = np.minimum(np.searchsorted(tids, ft), len(tids) - 1)
    hit = (tids[i] == ft) & (fts == birth[i]) & (fts > window.start_ns)
    out[i[hit]] = True
    return out


def _col(src: Mapping[str, np.ndarray], f: str, sel: np.ndarray | None = None) -> np.ndarray:
    """Field f of one kind's columns (zeros where the source has none), rows sel, as
    int64 for the times and tids."""
    v = np.asarray(src[f]) if f in src else np.zeros(len(src["tid"]), abi.OFFCPU_DTYPE[f])
    if sel is not None:
        v = v[sel]
    wide = f in ("start_ns", "end_ns", "waking_ns", "tid", "run_total_ns", "waker_tid",
                 "waker_rq_seq")
    return v.astype(I64) if wide else v


class _Cols:
    """The record columns of the intervals in their sorted order: the workload's (rows
    wo of off), then the helpers' (rows ho of helper), read a field at a time."""

    def __init__(self, off: Mapping[str, np.ndarray], wo: np.ndarray,
                 helper: Mapping[str, np.ndarray], ho: np.ndarray) -> None:
        self.off, self.wo, self.hlp, self.ho = off, wo, helper, ho

    def __len__(self) -> int:
        return len(self.wo) + len(self.ho)

    def get(self, f: str, idx: np.ndarray | None = None) -> np.ndarray:
        """Field f of every interval, or of the intervals idx (sorted positions)."""
        if idx is None:
            return np.concatenate((_col(self.off, f, self.wo), _col(self.hlp, f, self.ho)))
        nw = len(self.wo)
        iw = idx[idx < nw]
        ih = idx[idx >= nw] - nw
        return np.concatenate((_col(self.off, f, self.wo[iw]), _col(self.hlp, f, self.ho[ih])))


@dataclass
class _Intervals:
    """Off-CPU intervals sorted by (actor, start), the workload's then the helpers',
    clipped to their actor's covered time and to each other: an interval starts no
    earlier than its actor's previous one ends (a damaged overlap), so they never
    overlap."""

    act: np.ndarray  # int64 actor
    s: np.ndarray  # switch-out
    w: np.ndarray  # waking (s for a preemption, e when never woken)
    e: np.ndarray  # switch-in
    woken: np.ndarray  # bool: woken in the window, not preempted
    helper: np.ndarray  # bool: a helper's interval
    sysnr: np.ndarray  # int32: the syscall it was in; -3 for a helper
    c: _Cols  # the record columns (WAKE_FIELDS) in this order


def _intervals(tl: Timeline, kinds: Sequence[tuple[Mapping[str, np.ndarray],
                                                   np.ndarray | None, np.ndarray]]
               ) -> _Intervals:
    """kinds: (columns, rows taken or None for all, actor of each row taken) of the
    workload's intervals, then of the helpers'."""
    parts = []
    for src, sel, act in kinds:
        lo, hi = tl.birth[act], tl.death[act]
        s = np.clip(_col(src, "start_ns", sel), lo, hi)
        e = _col(src, "end_ns", sel)
        e = np.clip(np.where(e > 0, e, hi), lo, hi)
        del lo, hi
        # Stable: equal starts keep the records' order.
        o = _by_actor_then_time(act, tl.keys(act, s), len(tl.tids))
        rows = o if sel is None else sel[o]
        parts.append((act[o], s[o], e[o], rows))
        del s, e, o
    act, s, e = (np.concatenate((parts[0][i], parts[1][i])) for i in range(3))
    c = _Cols(kinds[0][0], parts[0][3], kinds[1][0], parts[1][3])
    helper = np.zeros(len(act), bool)
    helper[len(parts[0][0]):] = True
    del parts
    ek = tl.keys(act, np.maximum(e, s))
    # The latest end before each interval, keyed (the first interval: its own start).
    prev = np.empty(len(ek), I64)
    if len(ek):
        prev[0] = ek[0] - np.maximum(e[0] - s[0], 0)
        np.maximum.accumulate(ek[:-1], out=prev[1:])
    del ek
    prev -= act * tl.span
    prev += tl.origin
    np.maximum(s, prev, out=s)
    del prev
    np.maximum(e, s, out=e)
    flags = c.get("flags_u16")
    wk = c.get("waking_ns")
    preempt = (flags & abi.OFF_PREEMPT) != 0
    del flags
    woken = (wk > 0) & ~preempt
    w = np.where(woken, np.clip(wk, s, e), np.where(preempt, s, e))
    del wk, preempt
    # A helper's syscall is none of the workload's: the waiter's own names the wait.
    sysnr = np.where(helper, -3, c.get("syscall_nr")).astype(np.int32)
    return _Intervals(act, s, w, e, woken, helper, sysnr, c)


def _by_actor_then_time(act: np.ndarray, key: np.ndarray, nact: int) -> np.ndarray:
    """np.argsort(key, kind="stable") of keyed times (actor-major): a stable radix sort
    of the actors first (16 bits), then a stable sort of the keys in that order, which
    within an actor are records in the order written, nearly sorted already (the sort
    merges runs): the same order, several times faster than sorting the records in
    their order (many threads' records interleaved)."""
    if nact >= 1 << 16 or len(act) < 1024:
        return np.argsort(key, kind="stable")
    o = np.argsort(act.astype(np.uint16), kind="stable")
    k = key[o]
    if len(k) > 1 and (k[1:] < k[:-1]).any():
        o = o[np.argsort(k, kind="stable")]
    return o


LAYOUT_CHUNK = 1 << 18  # intervals whose segments are laid out together (temporaries)


def _lay_out(tl: Timeline, iv: _Intervals, cat: np.ndarray, target: np.ndarray,
             detail: np.ndarray, pur: np.ndarray, link: "RequestLink",
             threads: int = 1) -> None:
    """Store in tl the segments of every actor, in (actor, start) order: a head (on CPU
    from its birth to its first interval, or to its death; for a thread forked in the
    window, runnable up to its first run, then on CPU), then per interval its
    blocked pieces, its runnable part and the gap to the next interval (on CPU; for a
    helper, only for the growth of its CPU total, run_total_ns, and the rest of the gap
    a stretch not recorded) or to the actor's death. Each segment is written to its
    place, found by a cumulative count: no sort. Empty segments are left out. The
    intervals are taken LAYOUT_CHUNK at a time, twice (count, then write): the
    temporaries are the chunk's, the output the only array of the segments' size; the
    chunks of each pass are taken `threads` at a time (chunk_map), each writing its own
    places."""
    act, s, w, e = iv.act, iv.s, iv.w, iv.e
    n = len(act)
    nact = len(tl.tids)
    blocked = w > s
    wk = ~iv.helper
    tl.intervals += int(wk.sum())
    un = wk & blocked & (detail == NOT_SEEN)
    tl.unseen += int(un.sum())
    tl.unseen_ns += int((w - s)[un].sum())
    del wk, un
    # Request links: the wait cut around the request's device stage (_linked_pieces).
    rl = cat == -2
    lq, lpa, lpc, ldet, lpur = _linked_pieces(s, w, target, rl & blocked, link, threads)
    nlinked = np.bincount(lq, minlength=n).astype(np.int32)
    plain = blocked & ~rl
    del blocked, rl
    # Segments per interval, then each unit's offset: units in order are each actor's
    # head, then its intervals.
    first = np.ones(n, bool)
    first[1:] = act[1:] != act[:-1]
    head_end = tl.death.copy()
    head_end[act[first]] = s[first]
    head = head_end > tl.birth
    # A thread forked in the window is runnable from its fork to its first run, then on
    # a CPU to its first switch-out: that run is its first interval's CPU total
    # (run_total_ns, the kernel's sum_exec_runtime, 0 at fork).
    head_run = np.zeros(nact, I64)
    fi = np.flatnonzero(first)
    fa = act[fi]
    rt0 = iv.c.get("run_total_ns", fi)
    ok = tl.forked[fa] & ~iv.helper[fi] & (rt0 > 0) & (s[fi] - rt0 > tl.birth[fa])
    head_run[fa[ok]] = s[fi][ok] - rt0[ok]
    del first, fi, fa, rt0, ok
    ifirst = np.searchsorted(act, np.arange(nact))  # each actor's first interval
    off = np.zeros(n + nact, I64)
    # Integers: a head of a thread forked in the window is two segments (runnable, then
    # on CPU); booleans would add as a logical or.
    off[ifirst + np.arange(nact)] = head.astype(I64) + (head & (head_run > 0))

    def count(a: int) -> None:
        b = min(n, a + LAYOUT_CHUNK)
        g = _gaps_after(tl, iv, a, b)
        off[np.arange(a, b) + act[a:b] + 1] = (plain[a:b] + nlinked[a:b] + (e[a:b] > w[a:b])
                                               + (g[1] > e[a:b]) + (g[0] > g[1]))
    chunk_map(count, range(0, n, LAYOUT_CHUNK), threads)
    total = int(off.sum())
    off[1:] = np.cumsum(off[:-1])
    off[:1] = 0
    oa = np.empty(total, np.int32)
    ok = np.empty(total, I64)
    ocat = np.empty(total, np.int8)
    oarg = np.full(total, -1, np.int32)
    osys = np.full(total, -3, np.int32)
    opur = np.full(total, -1, np.int8)
    hcpu = np.where(tl.helper, HCPU, CPU).astype(np.int8)

    def put(pos: np.ndarray, actor: np.ndarray, t: np.ndarray, k: Any, arg: Any = -1,
            sy: Any = -3, p: Any = -1) -> None:
        # A segment's end is the next one's start: only where it starts is written.
        oa[pos], ocat[pos] = actor, k
        ok[pos] = tl.keys(actor, t)
        if not np.isscalar(arg) or arg != -1:
            oarg[pos] = arg
        if not np.isscalar(sy) or sy != -3:
            osys[pos] = sy
        if not np.isscalar(p) or p != -1:
            opur[pos] = p

    h = np.flatnonzero(head)
    hr = head_run[h] > 0
    put(off[ifirst[h] + h], h, tl.birth[h], np.where(hr, RUNQ, hcpu[h]).astype(np.int8))
    h = h[hr]
    put(off[ifirst[h] + h] + 1, h, head_run[h], hcpu[h])
    del h, hr, head, head_run, ifirst
    # The linked pieces: lq is sorted (by interval, then time), so a piece's rank in its
    # interval is its distance from the interval's first, which follows the pieces of
    # every interval before it: at the exclusive count ahead[q].
    ahead = np.cumsum(nlinked, dtype=I64)
    ahead -= nlinked

    def put_linked(a: int, p: tuple[np.ndarray, ...] = (lq, lpa, lpc, ldet, lpur, ahead)
                   ) -> None:
        lq, lpa, lpc, ldet, lpur, ahead = p
        b = min(len(lq), a + LAYOUT_CHUNK * 4)
        q = lq[a:b]
        rank = np.arange(a, b) - ahead[q]
        put(off[q + act[q] + 1] + plain[q] + rank, act[q], lpa[a:b], lpc[a:b], ldet[a:b],
            iv.sysnr[q], lpur[a:b])
    chunk_map(put_linked, range(0, len(lq), LAYOUT_CHUNK * 4), threads)
    # The pieces' columns are not kept while the rest is written.
    del put_linked, lq, lpa, lpc, ldet, lpur, ahead

    def put_rest(a: int) -> None:
        b = min(n, a + LAYOUT_CHUNK)
        i = np.arange(a, b)
        base = off[i + act[a:b] + 1]
        nxt_s, cpu_end = _gaps_after(tl, iv, a, b)
        ca = act[a:b]
        # Each kind of segment's intervals as indices (i: absolute, m: in the chunk), one
        # pass over its mask for all the columns gathered.
        m = np.flatnonzero(plain[a:b])
        i = m + a
        k = cat[i]
        put(base[m], ca[m], s[i], k, np.where(k == RECURSE, target[i], detail[i]),
            iv.sysnr[i], pur[i])
        base += plain[a:b] + nlinked[a:b]
        runq = e[a:b] > w[a:b]
        m = np.flatnonzero(runq)
        i = m + a
        put(base[m], ca[m], w[i], np.where(iv.helper[i], HRUNQ, RUNQ).astype(np.int8), -1,
            iv.sysnr[i])
        base += runq
        oncpu = cpu_end > e[a:b]
        m = np.flatnonzero(oncpu)
        put(base[m], ca[m], e[m + a], hcpu[ca[m]])
        base += oncpu
        m = np.flatnonzero(nxt_s > cpu_end)
        put(base[m], ca[m], cpu_end[m], OTHER, NOT_RECORDED)
    chunk_map(put_rest, range(0, n, LAYOUT_CHUNK), threads)
    tl.actor, tl.kstart, tl.cat, tl.arg, tl.sys, tl.pur = oa, ok, ocat, oarg, osys, opur


def _gaps_after(tl: Timeline, iv: _Intervals, a: int, b: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """For the intervals [a, b): where the gap after each ends (the actor's next
    interval's start, else its death) and where its on-CPU part ends (a helper's: its
    CPU total's growth to the next interval; the rest of the gap was not recorded)."""
    n = len(iv.act)
    c = min(n, b + 1)
    act = iv.act[a:c]
    last = np.ones(b - a, bool)
    last[:c - a - 1] = act[1:] != act[:-1]
    nxt_s = np.where(last, tl.death[act[:b - a]], iv.s[a + 1:a + 1 + (b - a)]
                     if c > b else np.append(iv.s[a + 1:c], 0))
    # Only a helper's gap is split (the workload's intervals come first): its CPU
    # totals are read for the helpers' intervals alone.
    h0 = max(a, len(iv.c.wo))
    if h0 >= b:
        return nxt_s, nxt_s
    rt = np.zeros(c - a, I64)
    rt[h0 - a:] = iv.c.get("run_total_ns", np.arange(h0, c))
    rt_next = np.append(rt[1:], 0) if c == b else rt[1:]
    rt = rt[:b - a]
    split = iv.helper[a:b] & ~last & (rt > 0) & (rt_next >= rt)
    e = iv.e[a:b]
    cpu_end = np.where(split, np.minimum(nxt_s, e + (rt_next - rt)), nxt_s)
    return nxt_s, cpu_end


LINK_CHUNK = 1 << 18  # waits cut around their request at a time (temporaries)


def _linked_pieces(s: np.ndarray, w: np.ndarray, rq: np.ndarray, sel: np.ndarray,
                   link: "RequestLink", threads: int = 1
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of the waits [s, w) ended by a request's completion (sel; rq: the
    request's index in link), as (interval, start, kind, detail, purpose), sorted by
    interval then time (each piece ends where the next starts, the last at w). The
    purpose of every piece is the request's class (level one: what was waited for);
    the kinds say what served it, as the request's own device shows it: its pre-flush
    and post-flush (outside the request's device stage, a flush-sequenced request's:
    flush), the time before its issue (queue), its stage (its class), each cut where a
    flush was in flight (link.flushing, or link.flushing_carried for a request of a
    carrier device: flush, it waited behind it). A carrier device's request is named by
    its own service too, not by its loop worker's (the server): a loop device's flush is
    a cache flush however the file below implements it; what the devices below did for
    it is views/stack.py's carried_service. LINK_CHUNK waits at a time, `threads`
    chunks at once (chunk_map)."""
    k_all = np.flatnonzero(sel)
    parts = chunk_map(lambda a: _linked_chunk(s, w, rq, k_all[a:a + LINK_CHUNK], link),
                      range(0, len(k_all), LINK_CHUNK), threads)
    if not parts:
        z = np.zeros(0, I64)
        return z, z, np.zeros(0, np.int8), np.zeros(0, np.int32), np.zeros(0, np.int8)
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]


def _linked_chunk(s: np.ndarray, w: np.ndarray, rq: np.ndarray, k: np.ndarray,
                  link: "RequestLink"
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """_linked_pieces of the waits k (ascending)."""
    r = rq[k]
    out = []
    carried = np.isin(link.dev[r], link.carriers) if len(link.carriers) else None
    if carried is None:
        out.append(_own_pieces(s, w, k, r, link, link.flushing))
    else:
        for m, fl in ((~carried, link.flushing), (carried, link.flushing_carried)):
            if m.any():
                out.append(_own_pieces(s, w, k[m], r[m], link, fl))
    if not out:
        z = np.zeros(0, I64)
        return z, z, np.zeros(0, np.int8), np.zeros(0, np.int32), np.zeros(0, np.int8)
    cols = [np.concatenate(x) for x in zip(*out)]
    if len(out) > 1:  # carrier groups and the rest: order by interval (stable in time)
        o = np.argsort(cols[0], kind="stable")
        cols = [x[o] for x in cols]
    return (cols[0], cols[1], cols[2].astype(np.int8), cols[3].astype(np.int32),
            cols[4].astype(np.int8))


def _own_pieces(s: np.ndarray, w: np.ndarray, k: np.ndarray, r: np.ndarray,
                link: "RequestLink", flushing: tuple[np.ndarray, np.ndarray]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """_linked_chunk's pieces of the waits k on the requests r, as the requests' own
    device shows them; flushing: when a flush was in flight there."""
    rc = link.cat[r]
    pre_b = np.clip(link.stage_a[r], s[k], w[k])
    post_a = np.clip(link.stage_b[r], pre_b, w[k])
    fseq = link.flush_seq[r]
    # Before its device stage a flush-sequenced request waits for its pre-flush, any
    # other for its issue; after it, the post-flush or the wakeup (its class's).
    pre = np.where(fseq, FLUSH, QUEUE).astype(np.int8)
    post = np.where(fseq, FLUSH, rc).astype(np.int8)
    # Three parts per wait, interleaved so that one ordered cut keeps them in order;
    # the empty ones left out (most waits have no pre-flush part).
    qa = np.stack((s[k], pre_b, post_a), axis=1).ravel()
    qb = np.stack((pre_b, post_a, w[k]), axis=1).ravel()
    del pre_b, post_a
    keep = np.flatnonzero(qb > qa)
    qa, qb = qa[keep], qb[keep]
    gc = np.stack((pre, rc, post), axis=1).ravel()[keep]
    fs, fe = flushing
    qi, pa, _, pc = cut_ordered(qa, qb, fs, fe, np.full(len(fs), FLUSH, np.int8), gc)
    kq = keep[qi] // 3
    return k[kq], pa, pc, np.full(len(qi), -1, np.int32), rc[kq]


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
    gap_cat = np.asarray(gap_cat)
    if not len(ss):
        keep = np.flatnonzero(b > a)
        return keep, a[keep], b[keep], gap_cat[keep].astype(np.int8)
    lo = np.searchsorted(se, a, side="right")  # first state ending after a
    hi = np.searchsorted(ss, b, side="left")  # first state starting at or after b
    cnt = np.maximum(hi - lo, 0)
    # Most intervals meet no state: one piece, themselves. The others: slots.
    one = np.flatnonzero((cnt == 0) & (b > a))
    many = np.flatnonzero(cnt > 0)
    slots = 2 * cnt[many] + 1
    qm = np.repeat(many, slots)
    j = np.arange(len(qm)) - np.repeat(np.cumsum(slots) - slots, slots)
    is_state = (j & 1) == 1
    k = np.repeat(lo[many], slots) + (j >> 1)  # the state of an odd slot; after an even one
    kc = np.minimum(k, len(ss) - 1)
    kp = np.maximum(k - 1, 0)
    del k
    aq, bq = a[qm], b[qm]
    # A state: [max(a, ss), min(b, se)); a gap: from the state before (or a) to the
    # state after (or b).
    pa = np.where(is_state, np.maximum(aq, ss[kc]),
                  np.where(j == 0, aq, np.minimum(bq, se[kp])))
    pb = np.where(is_state, np.minimum(bq, se[kc]),
                  np.where(j == np.repeat(slots, slots) - 1, bq, np.maximum(aq, ss[kc])))
    pc = np.where(is_state, np.asarray(scat)[kc], gap_cat[qm]).astype(np.int8)
    del aq, bq, kc, kp, j, is_state
    keep = np.flatnonzero(pb > pa)
    qm, pa, pb, pc = qm[keep], pa[keep], pb[keep], pc[keep]
    # Both sets in interval order: each interval's pieces at its count's offset.
    per = np.zeros(n, I64)
    per[one] = 1
    per += np.bincount(qm, minlength=n)
    off = np.cumsum(per) - per
    total = int(per.sum())
    qi = np.empty(total, I64)
    oa, ob, oc = np.empty(total, I64), np.empty(total, I64), np.empty(total, np.int8)
    at = off[one]
    qi[at], oa[at], ob[at], oc[at] = one, a[one], b[one], gap_cat[one]
    if len(qm):
        first = np.ones(len(qm), bool)
        first[1:] = qm[1:] != qm[:-1]
        rank = np.arange(len(qm)) - np.flatnonzero(first)[np.cumsum(first) - 1]
        at = off[qm] + rank
        qi[at], oa[at], ob[at], oc[at] = qm, pa, pb, pc
    return qi, oa, ob, oc


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
    # The carrier devices (views/stack.py, carrier_devices: a loop device whose requests
    # the devices below serve) and when a flush of theirs was in flight (as `flushing`):
    # a wait on a carrier's request is named by the carrier's own service.
    carriers: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    flushing_carried: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64),
                                                       np.zeros(0, np.int64))

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
        """Index of each seq's request, -1 when not among the requests. By a table of the
        seqs when they are distinct and dense (request numbers: their range is a few
        times their count), else by a search."""
        if not len(self.seq):
            return np.full(len(seq), -1, np.int64)
        lo, hi = int(self.seq[0]), int(self.seq[-1])
        distinct = len(self.seq) < 2 or bool((self.seq[1:] > self.seq[:-1]).all())
        if hi - lo < 4 * len(self.seq) + 4096 and distinct:
            table = np.full(hi - lo + 2, -1, np.int64)  # the last entry: any seq outside
            table[self.seq - lo] = np.arange(len(self.seq))
            q = np.asarray(seq).astype(I64) - lo
            return table[np.where((q >= 0) & (q <= hi - lo), q, hi - lo + 1)]
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
    edges = unique(np.concatenate([np.concatenate((s, e)) for s, e in levels]
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
            arch: str | None, calls: Mapping[str, np.ndarray] | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(kind or RECURSE or -2 for a request link, target actor or request index,
    detail, purpose or -1) of each interval's blocked part, by the rules of the module
    doc. A request link's purpose is the request's class, set on its pieces
    (_linked_pieces)."""
    c, sysnr = iv.c, iv.sysnr
    n = len(sysnr)
    cat = np.full(n, OTHER, np.int8)
    target = np.full(n, -1, np.int64)
    detail = np.full(n, NOT_SEEN, np.int32)
    pur = np.full(n, -1, np.int8)
    flags = c.get("flags_u16")
    wtid = c.get("waker_tid")
    ctx = c.get("waker_ctx_u16")
    sleepy = syscalls_in(sysnr, SLEEP_SYSCALLS, arch)
    # 0. a throttled wait (the probes saw the throttle): whatever ended it.
    dirty = (flags & abi.OFF_THROTTLE_DIRTY) != 0
    blockq = ((flags & abi.OFF_THROTTLE_BLOCK) != 0) & ~dirty
    cat[dirty], cat[blockq] = DIRTY, BLOCKQ
    thr = dirty | blockq
    pur[thr], detail[thr] = L_THROTTLE, -1
    # 6. not woken / waker not seen. A wait for I/O still open when the recording
    # stopped (OPEN_END; in iowait, or in an fsync-family syscall, which waits for the
    # I/O it started and for the journal's) is filled from the devices, as rule 2's I/O
    # wait is: what will end it is not in the trace, what the devices were doing is.
    unseen = (~iv.woken | ((ctx == abi.WCTX_UNKNOWN) & (wtid == 0))) & ~thr
    done = unseen | thr
    cat[unseen & sleepy] = SLEEP
    detail[unseen & sleepy] = -1
    at_stop = unseen & ~sleepy & ~iv.woken & ((flags & abi.OFF_OPEN_END) != 0)
    if at_stop.any():
        at_stop &= ((flags & abi.OFF_IOWAIT) != 0) | syscalls_in(sysnr, SYNC_SYSCALLS, arch)
        detail[at_stop] = AT_STOP
    del at_stop
    # 1. request link: the request numbers read and looked up only where one is named.
    m = np.flatnonzero(~done & ((flags & abi.OFF_WAKER_RQ) != 0))
    ri = link.find(c.get("waker_rq_seq", m))
    found = ri >= 0
    m, ri = m[found], ri[found]
    cat[m], target[m], detail[m] = -2, ri, -1
    done[m] = True
    del found, ri
    # 2. interrupts, the idle task, the thread itself.
    irq = (ctx == abi.WCTX_HARDIRQ) | (ctx == abi.WCTX_SOFTIRQ) | (ctx == abi.WCTX_NMI)
    m = ~done & (irq | (wtid == 0) | (wtid == tl.tids[iv.act]))
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
    comm = c.get("waker_comm", m)
    keep = ~foreign_jbd2(comm, tl.devices)
    m, comm = m[keep], comm[keep]
    cat[m], target[m], detail[m] = RECURSE, ti[m], -1
    # What a helper serves: a filesystem's journal thread, what its entry says (jbd2, a
    # commit: log; xfsaild, metadata written back). Other helpers (kworkers) serve many
    # things: their own waits say which.
    h = tl.helper[ti[m]]
    for thread, serves in JOURNAL_THREAD_SERVES:
        pur[m[h & starts_with(comm, thread)]] = serves
    # A kworker serves many things. One that a data write's completion handed its work
    # (end-I/O work: an append's size update, an unwritten extent's conversion, the
    # page writeback's end) serves the data write: the thread waited for it. (Only a
    # data write's: a kworker a log write's completion woke may go on to other work,
    # as ext4's do.) Inside an fsync of an XFS file a kworker otherwise serves the log
    # force (the CIL push and the iclog completion are kworkers' work).
    kw = m[h & starts_with(comm, b"kworker/") & ~iv.helper[m]]
    if len(kw):
        handed = _handed_by(tl, iv, cat, target, link, ti[kw], iv.w[kw])
        pur[kw[handed == L_DATA]] = L_DATA
        if calls is not None:
            x = _in_xfs_fsync(tl, iv, kw, calls)
            pur[kw[x]] = np.where(handed[x] == L_DATA, L_DATA, L_LOG)
    done[m] = True
    _reaped_then_waited(tl, iv, cat, target, sysnr, arch)
    # 5. a task outside the workload.
    rest = np.flatnonzero(~done)
    if len(rest):
        comm = c.get("waker_comm", rest)
        helper_like = np.zeros(len(rest), bool)
        for p in HELPER_PREFIXES:
            helper_like |= starts_with(comm, p)
        cat[rest] = np.where(helper_like, OTHER, EXTERNAL)
        # Names numbered as met: the workload's wakers, then the helpers' (sorted by
        # name within each), as the intervals of each kind come.
        hr = iv.helper[rest]
        for part in (~hr, hr):
            detail[rest[part]] = names.codes(comm[part])
        # An I/O wait (iowait, or a helper's) ended from another task's context with no
        # request link is an I/O completion run in that task (a task-context completion:
        # a FUSE daemon serving a loop device, a submitter completing inline), not that
        # task's doing: like an interrupt without a request, filled from the devices.
        tio = io[rest] & (ctx[rest] == abi.WCTX_TASK)
        cat[rest[tio]], detail[rest[tio]] = OTHER, TASK_IO
    return cat, target, detail, pur


WAIT_CHILD = frozenset({"wait4", "waitid", "waitpid"})  # a wait for any child's exit


def _reaped_then_waited(tl: Timeline, iv: _Intervals, cat: np.ndarray, target: np.ndarray,
                        sysnr: np.ndarray, arch: str | None) -> None:
    """A wait for a child (WAIT_CHILD) that one child's exit ended, after which the
    thread only reaped it and waited for a child again (the waker gone by then, no
    thread of the workload born in between): the waiter needed the child that ended
    its later wait, not the one that happened to exit first (a shell's `a & b; wait`
    reaps a before it waits on for b). Such a wait takes, in place, the target of the
    first wait after it that is no such wait (a run of them, one per reaped child),
    when that thread was alive over it. cat, target: _causes' columns, workload
    threads' recursions (RECURSE) already set."""
    n = len(cat)
    if n < 2:
        return
    wc = (cat == RECURSE) & ~iv.helper
    cand = np.flatnonzero(wc)
    wc[cand] = syscalls_in(sysnr[cand], WAIT_CHILD, arch)
    k = np.flatnonzero(wc[:-1] & wc[1:] & (iv.act[:-1] == iv.act[1:]))
    if not len(k):
        return
    nxt = k + 1
    births = np.sort(tl.birth[~tl.helper])
    quiet = (np.searchsorted(births, iv.e[k], side="left")
             == np.searchsorted(births, iv.s[nxt], side="right"))
    ok = (tl.death[target[k]] <= iv.s[nxt]) & quiet & (target[k] != target[nxt])
    q = np.zeros(n, bool)
    q[k[ok]] = True
    if not q.any():
        return
    # Each q interval's next is its actor's: the first non-q one after it is too.
    idx = np.where(q, n, np.arange(n))
    last = np.minimum.accumulate(idx[::-1])[::-1]
    qi = np.flatnonzero(q)
    tgt = target[last[qi]]
    back = _waits_back(tl, iv, cat, target, tgt, iv.act[qi], iv.s[qi], iv.w[qi])
    ok = (tl.birth[tgt] <= iv.s[qi]) & ~back
    target[qi[ok]] = tgt[ok]


def _waits_back(tl: Timeline, iv: _Intervals, cat: np.ndarray, target: np.ndarray,
                a: np.ndarray, b: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per (thread a, thread b, [s, w)): whether a waited on b (one of a's workload waits
    recursing into b) over part of [s, w): then a's time there is no explanation of b's
    own wait (a jobserver's child waiting for the token its parent writes between two
    waits), and following it would go round."""
    out = np.zeros(len(a), bool)
    r = np.flatnonzero((cat == RECURSE) & ~iv.helper)
    if not len(r) or not len(a):
        return out
    n = np.int64(len(tl.tids))
    pairs, code = np.unique(iv.act[r].astype(I64) * n + target[r], return_inverse=True)
    want = a.astype(I64) * n + b
    i = np.minimum(np.searchsorted(pairs, want), len(pairs) - 1)
    has = pairs[i] == want
    if not has.any():
        return out
    try:
        check_keyed(len(pairs), tl.span)
    except OverflowError:  # cannot tell: take it as a wait back (no retarget)
        return has
    # Keyed by pair, then start: one pair's waits never overlap (one thread's), so the
    # last one starting before w is the only one that can reach past s.
    key = code.astype(I64) * tl.span + (iv.s[r] - tl.origin)
    o = np.argsort(key, kind="stable")
    key, r = key[o], r[o]
    j = np.searchsorted(key, i * tl.span + (w - tl.origin), side="left") - 1
    jj = r[np.maximum(j, 0)]
    return has & (j >= 0) & (code[o][np.maximum(j, 0)] == i) & (iv.w[jj] > s)


def _handed_by(tl: Timeline, iv: _Intervals, cat: np.ndarray, target: np.ndarray,
               link: RequestLink, actor: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per (helper actor, time t): the category (CAUSAL_CATEGORIES index) of the request
    whose completion woke the helper last before t (its latest wakeup before t, a
    preemption skipped: the helper went on with the work it was handed, has a request
    link: cat -2, target the link's index), else -1. cat and target: _causes' columns,
    request links already set."""
    out = np.full(len(actor), -1, np.int8)
    hi = np.flatnonzero(iv.helper)
    if not len(hi) or not len(actor):
        return out
    # Only a preemption is skipped: a wait whose waking was not seen (or a stretch
    # not woken in the window) ends the search with nothing known.
    hi = hi[(iv.c.get("flags_u16", hi) & abi.OFF_PREEMPT) == 0]
    if not len(hi):
        return out
    # Keyed by waking: already sorted (iv is by (actor, start), an actor's intervals
    # never overlap and each waking lies inside its interval); the latest woken
    # strictly before t (at t the helper may already sleep again).
    key = tl.keys(iv.act[hi], iv.w[hi])
    j = np.searchsorted(key, tl.keys(actor, t), side="left") - 1
    jj = hi[np.maximum(j, 0)]
    ok = (j >= 0) & (iv.act[jj] == actor) & (cat[jj] == -2)
    out[ok] = link.cat[target[jj[ok]]]
    return out


def syscalls_in(nr: np.ndarray, names: frozenset[str], arch: str | None) -> np.ndarray:
    """Per syscall number: whether its name is one of `names`; by a table over the
    numbers met (a count of each) when they span few values, else per distinct one."""
    if not len(nr):
        return np.zeros(0, bool)
    lo, hi = int(nr.min()), int(nr.max())
    if hi - lo < (1 << 16):
        k = nr.astype(np.intp)
        k -= lo
        table = np.zeros(hi - lo + 1, bool)
        for i in np.flatnonzero(np.bincount(k, minlength=hi - lo + 1)).tolist():
            table[i] = syscall_name(i + lo, arch) in names
        return table[k]
    out = np.zeros(len(nr), bool)
    for v in unique(nr).tolist():
        if syscall_name(int(v), arch) in names:
            out |= nr == v
    return out


# The calls that run the filesystem's fsync (vfs_fsync_range): on XFS, a log force.
_FSYNC_CALLS = (abi.CALL_FSYNC, abi.CALL_FDATASYNC, abi.CALL_MSYNC, abi.CALL_OSYNC_WRITE)


def _in_xfs_fsync(tl: Timeline, iv: _Intervals, k: np.ndarray,
                  calls: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per workload interval k: whether its thread was then inside an fsync-family call
    (_FSYNC_CALLS) of an XFS file (the call's filesystem event named XFS)."""
    ctid = np.asarray(calls.get("tid", np.zeros(0))).astype(I64)
    if not len(ctid) or not len(k):
        return np.zeros(len(k), bool)
    ok = (np.isin(np.asarray(calls["call_u16"]), _FSYNC_CALLS)
          & (np.asarray(calls["fs_u16"]) == abi.FS_XFS))
    if not ok.any():
        return np.zeros(len(k), bool)
    w0, w1 = tl.origin, tl.origin + tl.span - 2
    enter = np.clip(np.asarray(calls["enter_ns"]).astype(I64)[ok], w0, w1)
    ex = np.asarray(calls["exit_ns"]).astype(I64)[ok]
    ex = np.where(ex > 0, np.clip(ex, w0, w1), w1)  # still running at the stop
    ctid = ctid[ok]
    # Keyed by thread: one search finds each interval's last call entered before it.
    u = small_unique(ctid)
    key = np.searchsorted(u, ctid) * tl.span + (enter - w0)
    o = np.argsort(key, kind="stable")
    key, ex, ctid = key[o], ex[o], ctid[o]
    tid = tl.tids[iv.act[k]]
    pos = np.minimum(np.searchsorted(u, tid), len(u) - 1)
    known = u[pos] == tid
    j = np.searchsorted(key, pos * tl.span + (iv.s[k] - w0), side="right") - 1
    jc = np.maximum(j, 0)
    return known & (j >= 0) & (ctid[jc] == tid) & (ex[jc] > iv.s[k])


def starts_with(comm: np.ndarray, prefix: bytes) -> np.ndarray:
    """Per name of a fixed-width bytes array: whether it starts with prefix (a compare
    of the leading bytes, without per-element string calls; for a prefix of at most 8
    bytes, of the names' first 8 bytes as one little-endian word, masked)."""
    comm = np.ascontiguousarray(comm)
    width = comm.dtype.itemsize
    if len(prefix) > width:
        return np.zeros(len(comm), bool)
    if len(prefix) <= 8 and width % 8 == 0:
        word = comm.view(np.uint64).reshape(len(comm), width // 8)[:, 0]
        mask = np.uint64((1 << (8 * len(prefix))) - 1)
        want = np.uint64(int.from_bytes(prefix, "little"))
        return (word & mask) == want
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
