"""A run as a timeline: tracks, slices, instants and counters, for the Perfetto and
Trace Event JSON writers (perfetto.py).

Tracks:
* per device, named as the report names it: every request as a slice from issue to
  final completion, named by class, with class, served-by (its level two in the
  attribution) and carried-for (the device above whose I/O it carried) as the Parquet
  export has them, sector, bytes, flags and submitter as arguments. Requests in flight
  together go on lanes (tracks of the same name and merge key, siblings under
  "block devices") so slices on one track never overlap;
* per workload thread: its fsync-family calls (the thread's track) and its scheduling
  state (a child track: running, runnable, blocked in SYSCALL, with the waker; the
  Trace Event JSON draws it, the Perfetto writer sends the same as native scheduler
  data: `Timeline.sched` and `Timeline.wakings`);
* wakeups: on the woken thread's track, an instant at each wakeup of a blocked
  thread, with a flow from its waker (an instant on the waker's thread track) and from
  the request whose completion woke it, when the recording linked one;
* per filesystem, its journal: jbd2 commits (with their locking, flushing and logging
  phases nested), ext4 fast commits, XFS iclog writes and XFS log forces (until the
  log's next iclog completion) as slices; btrfs events as instants;
* flows: from each fsync-family call to the requests its thread submitted inside it,
  and the wakeups' flows above;
* counters: the attribution categories and, under each, what served it (level two)
  (cumulative ns: 0 at the start, the total at the end), each device's mean queue depth
  per interval, and every loss counter.

Times are the trace's (CLOCK_MONOTONIC ns).

Memory: a timeline holds a few slices or instants per record, so they are rows of
columns (SliceTable), with their arguments made from the records when a writer reads
them; the records are copied out of the trace with only the fields read here
(_fields); the writers take the events in order from sorted_events, which merges four
sorted streams a block at a time. A timeline of a recorded trace then takes 60-80 B per
record beside the analysis's model of the run (bench/README.md, "Current figures").
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .. import abi
from ..filesystems import FILESYSTEMS, JournalSpan
from ..names import comm_text, utf8_text
from ..progress import phase
from .source import (CATEGORIES, FS_NAMES, OP_NAMES, RunModel, device_names, load_run,
                     syscall_name)

I64 = np.int64


@dataclass
class Track:
    uuid: int
    name: str
    parent: int | None = None
    pid: int | None = None  # a thread track: pid/tid (and a process track: pid only)
    tid: int | None = None
    counter_unit: str | None = None  # set for a counter track ("ns", "count", "requests")
    group: str = ""  # devices, threads, journal, counters (Trace Event JSON's processes)
    comm: str | None = None  # a thread's or process's own name (its track's name adds the id)
    merge_key: str | None = None  # lanes of one device: drawn as one track
    state: bool = False  # a thread's scheduling-state track (sent natively to Perfetto)


NO_ARGS: Mapping[str, Any] = MappingProxyType({})


@dataclass(slots=True)
class Slice:
    """A slice (start < end) or an instant (start == end) on a track, as a writer reads
    it: made from a row of a SliceTable when read (table[k]), and dropped after."""

    track: int
    start: int
    end: int
    name: str
    cat: str
    args: Mapping[str, Any] = field(default_factory=lambda: NO_ARGS)
    # Flows (arrows): ids leaving this slice, and ids ending on it, in the order made.
    flows_out: list[int] | tuple[int, ...] = ()
    flows_in: list[int] | tuple[int, ...] = ()


ArgsMaker = Callable[[int], Mapping[str, Any]]


class SliceTable:
    """Slices (or instants) in columns, one row each, in the order added. A timeline
    holds a few per record (a request, a wakeup and its waker, a scheduling state): as
    Python objects, with their ints, arguments and flow lists, that was about 400 B
    each; here it is 7 columns, 35 B a row, and 16 B per flow end.

    A row's name and category are indices into `names` and `cats` (each distinct string
    once); its arguments are `makers[maker](a0)`, made when the row is read: maker 0 is no
    arguments, 1 an object kept in `objs` (a0 its index; an object added again, such as
    a Timeline.shared_args set, is kept once), the others registered by the builder
    (`maker()`): a request's from its record, for instance. Flows leaving and ending on
    rows are (row, flow id) pairs in the order made (Timeline.flow); reading a row
    finds its flows through an index made on the first read after a flow was added."""

    def __init__(self) -> None:
        self.track, self.start, self.end = array("i"), array("q"), array("q")
        self.name, self.cat = array("i"), array("h")
        self.maker_ix, self.a0 = array("b"), array("q")
        self.names: list[str] = []
        self._name_ix: dict[str, int] = {}
        self.cats: list[str] = []
        self.objs: list[Mapping[str, Any]] = []
        self._obj_ix: dict[int, int] = {}
        self.makers: list[ArgsMaker] = [lambda a0: NO_ARGS, lambda a0: self.objs[a0]]
        self.out_row, self.out_id = array("q"), array("q")
        self.in_row, self.in_id = array("q"), array("q")
        self._flow_ix: tuple[array[int], ...] | None = None

    def __len__(self) -> int:
        return len(self.start)

    def intern(self, name: str) -> int:
        k = self._name_ix.get(name)
        if k is None:
            k = self._name_ix[name] = len(self.names)
            self.names.append(name)
        return k

    def _cat(self, cat: str) -> int:
        if cat not in self.cats:
            self.cats.append(cat)
        return self.cats.index(cat)  # a few categories (request, sched, wakeup, ...)

    def maker(self, fn: ArgsMaker) -> int:
        """Register an arguments maker; its number for add()."""
        self.makers.append(fn)
        return len(self.makers) - 1

    def add(self, track: int, start: int, end: int, name: str, cat: str,
            args: Mapping[str, Any] | None = None, maker: int = 0, a0: int = 0) -> int:
        """A row (args: an object to keep, else maker(a0) when read); its number."""
        if args is not None:
            k = self._obj_ix.get(id(args))
            if k is None:
                k = self._obj_ix[id(args)] = len(self.objs)
                self.objs.append(args)
            maker, a0 = 1, k
        self.track.append(track)
        self.start.append(start)
        self.end.append(end)
        self.name.append(self.intern(name))
        self.cat.append(self._cat(cat))
        self.maker_ix.append(maker)
        self.a0.append(a0)
        return len(self.start) - 1

    def column(self, name: str) -> np.ndarray:
        """A copy of an int64 column as a numpy array."""
        return self.view(name).copy()

    def view(self, name: str) -> np.ndarray:
        """An int64 column as a numpy array without a copy (the table cannot grow while
        the view lives)."""
        col = getattr(self, name)
        assert col.typecode == "q"
        return np.frombuffer(col, I64) if len(col) else np.zeros(0, I64)

    def _flows(self) -> tuple[array[int], ...]:
        """Per direction, where each row's flows begin (row k's: [at[k], at[k + 1]) ) and
        the flow ids in that order (as arrays: an item read is a plain int; the offsets
        4 B each while the flows' number allows)."""
        if self._flow_ix is None:
            ix: list[array[int]] = []
            for rows, ids in (("out_row", "out_id"), ("in_row", "in_id")):
                r = self.column(rows)
                o = np.argsort(r, kind="stable")  # each row's flows in the order made
                at = np.searchsorted(r[o], np.arange(len(self) + 1, dtype=I64))
                for col, code in ((at, "i" if len(r) < 1 << 31 else "q"),
                                  (self.column(ids)[o], "q")):
                    a = array(code)
                    a.frombytes(col.astype(np.int32 if a.itemsize == 4 else I64).tobytes())
                    ix.append(a)
            self._flow_ix = tuple(ix)
        return self._flow_ix

    def flow_ids(self) -> np.ndarray:
        """Every flow id that leaves or ends on a row."""
        return np.concatenate((self.column("out_id"), self.column("in_id")))

    def __getitem__(self, k: int) -> Slice:
        o_at, o_id, i_at, i_id = self._flow_ix or self._flows()
        lo, hi = o_at[k], o_at[k + 1]
        fo = o_id[lo:hi].tolist() if hi > lo else ()
        lo, hi = i_at[k], i_at[k + 1]
        fi = i_id[lo:hi].tolist() if hi > lo else ()
        return Slice(self.track[k], self.start[k], self.end[k], self.names[self.name[k]],
                     self.cats[self.cat[k]], self.makers[self.maker_ix[k]](self.a0[k]), fo, fi)

    def bare(self, k: int) -> Slice:
        """Row k without its arguments and flows (what a slice's end needs)."""
        return Slice(self.track[k], self.start[k], self.end[k], self.names[self.name[k]],
                     self.cats[self.cat[k]])

    def __iter__(self) -> Iterator[Slice]:
        return (self[k] for k in range(len(self)))


@dataclass
class Timeline:
    tracks: dict[int, Track] = field(default_factory=dict)
    slices: SliceTable = field(default_factory=SliceTable)
    instants: SliceTable = field(default_factory=SliceTable)  # start == end
    counters: list[tuple[int, int, float]] = field(default_factory=list)  # track, ts, value
    start_ns: int = 0
    end_ns: int = 0
    flows: int = 0  # flow ids handed out (1..flows)
    # Native scheduling of the workload threads: running periods (cpu, start, end or 0
    # while still running at the end, tid, the kernel's prev_state at the end: 1 S,
    # 2 D, 0x10 X, 0x80 I, 0x100 preempted) and wakeups (cpu of the woken thread's next
    # switch-in, time, woken tid, waker tid or 0 for an interrupt on an idle CPU).
    # As int64 rows (a timeline holds about one of each per off-CPU record).
    sched: np.ndarray = field(default_factory=lambda: np.zeros((0, 5), I64))
    wakings: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), I64))
    comms: dict[int, str] = field(default_factory=dict)  # tid -> name, for sched data
    sched_unknown_cpu: int = 0  # running periods left out: their CPU is not known
    _next: int = 1
    _args: dict[tuple[Any, ...], Mapping[str, Any]] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)

    def track(self, name: str, parent: int | None = None, **kw: Any) -> int:
        u = self._next
        self._next += 1
        self.tracks[u] = Track(u, utf8_text(name), parent, **kw)
        return u

    def shared_name(self, *parts: str) -> str:
        """The name made of parts, one string object per distinct name."""
        key = "".join(parts)
        return self._names.setdefault(key, key)

    def shared_args(self, **args: Any) -> Mapping[str, Any]:
        """The arguments as one object per distinct set (in their order): the state
        slices of a run repeat a few sets (a syscall, a waker) over and over."""
        key = tuple(args.items())
        got = self._args.get(key)
        if got is None:
            got = self._args[key] = MappingProxyType(args)
        return got

    def flow(self, src: SliceTable, src_row: int, dst: SliceTable, dst_row: int) -> int:
        """A new flow from a row of src to a row of dst; its id."""
        self.flows += 1
        src.out_row.append(src_row)
        src.out_id.append(self.flows)
        dst.in_row.append(dst_row)
        dst.in_id.append(self.flows)
        src._flow_ix = dst._flow_ix = None
        return self.flows

    def flow_all(self, src: SliceTable, src_rows: np.ndarray, dst: SliceTable,
                 dst_rows: np.ndarray) -> None:
        """A new flow from each src row to the dst row beside it, ids in that order."""
        ids = np.arange(self.flows + 1, self.flows + 1 + len(src_rows), dtype=I64)
        self.flows += len(src_rows)
        for rows, at, tab in ((src_rows, src.out_row, src.out_id),
                              (dst_rows, dst.in_row, dst.in_id)):
            at.frombytes(np.asarray(rows, I64).tobytes())
            tab.frombytes(ids.tobytes())
        src._flow_ix = dst._flow_ix = None


def _comm(b: bytes) -> str:
    return comm_text(b)


class Lanes:
    """Slices that may overlap, put on lane tracks (children of `parent`) so that slices
    of one lane never overlap: lane 0 is the parent itself. Each slice goes to the
    lowest-numbered lane free at its start (slices must come in start order), found in
    O(log lanes): a heap of the lanes in use by their end, a heap of the free lanes by
    number."""

    def __init__(self, tl: Timeline, parent: int, name: str, lane_parent: int | None = None,
                 same_name: bool = False, **kw: Any) -> None:
        self.tl, self.parent, self.name, self.kw = tl, parent, name, kw
        self.same_name = same_name  # lanes named as the parent (merged by the viewer)
        # Where further lanes hang (Perfetto nests tracks under process tracks and
        # plain tracks, not under thread tracks).
        self.lane_parent = parent if lane_parent is None else lane_parent
        self.lanes = [parent]
        self.busy: list[tuple[int, int]] = []  # (end of its last slice, lane)
        self.free: list[int] = [0]  # lanes free since their last slice ended
        self.steps = 0  # heap operations so far (tests check the growth)

    def place(self, start: int, end: int) -> int:
        busy, free = self.busy, self.free
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
            self.steps += 2
        if free:
            best = heapq.heappop(free)
        else:
            best = len(self.lanes)
            self.lanes.append(self.tl.track(
                self.name if self.same_name else f"{self.name} lane {best}", self.lane_parent,
                **self.kw))
        heapq.heappush(busy, (max(end, start), best))
        self.steps += 2
        return self.lanes[best]


def _lifetimes(tasks: np.ndarray, w0: int, w1: int) -> dict[int, tuple[int, int, int, str]]:
    """tid -> (tgid, birth, death, comm) from task records."""
    out: dict[int, tuple[int, int, int, str]] = {}
    for t in tasks:
        tid = int(t["tid"])
        tg, b, d, c = out.get(tid, (int(t["tgid"]), w0, w1, _comm(t["comm"])))
        ev = int(t["event_u16"])
        ts = int(t["ts_ns"])
        if ev in (abi.TASK_ROOT, abi.TASK_FORK, abi.TASK_JOIN) and ts:
            b = max(w0, ts)
        elif ev == abi.TASK_EXIT and ts and d == w1:
            d = min(w1, ts)
        elif ev == abi.TASK_DEAD and ts:  # the last switch-out, after the exit
            d = min(w1, ts)
        if _comm(t["comm"]):
            c = _comm(t["comm"])
        out[tid] = (tg, b, d, c)
    return out


# The fields of each record type the timeline reads: only those are copied out of the
# trace's chunks (_fields), so that a timeline does not hold whole records beside it.
REQUEST_FIELDS = ("issue_ns", "done_ns", "insert_ns", "submit_ns", "flags_u16", "dev_major",
                  "dev_minor", "seq", "iflags", "start_sector", "len_bytes", "op", "comm",
                  "tid")
OFFCPU_FIELDS = ("tid", "tgid", "cpu", "start_ns", "waking_ns", "end_ns", "flags_u16",
                 "state", "syscall_nr", "waker_tid", "waker_tgid", "waker_comm",
                 "waker_rq_seq")
FSYNC_FIELDS = ("tid", "tgid", "enter_ns", "exit_ns", "flags_u16", "call_u16", "fs_u16",
                "fd", "ino", "ret", "commit_seq")


def _fields(trace: Any, name: str, fields: tuple[str, ...],
            keep: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """The records of one type with only these fields, in file order, a chunk taken at a
    time (a released type's chunks decoded one by one: Trace.iter_chunks); keep: the
    rows of a chunk to take (default all)."""
    dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
    narrow = np.dtype([(f, dtype[f]) for f in fields])
    # filled in place when every row is taken (as many as the trace counts), else in
    # parts joined at the end
    out = np.empty(trace.count(name) if keep is None else 0, narrow)
    at = 0
    parts = []
    for v in trace.iter_chunks(name):
        if keep is not None:
            v = v[keep(v)]
        if at + len(v) <= len(out):
            dst = out[at:at + len(v)]
            at += len(v)
        else:
            dst = np.empty(len(v), narrow)
            parts.append(dst)
        for f in fields:
            dst[f] = v[f]
    return np.concatenate([out[:at], *parts]) if parts else out[:at]


def build(trace: Any, model: RunModel | None = None, state_slices: bool = True) -> Timeline:
    """The run's timeline (module doc): tracks, slices and flows added in a fixed order
    (devices, threads, calls, wakeups, journal, counters), so track ids are stable.
    state_slices=False leaves the scheduling-state tracks empty (their tracks are made
    all the same): the Perfetto writer sends that state as native scheduler data
    (Timeline.sched, Timeline.wakings) and needs none of their slices."""
    m = model or load_run(trace)
    phase("timeline")
    tl = Timeline()
    w0, w1 = int(m.info["start_ns"]), int(m.info["end_ns"])
    tl.start_ns, tl.end_ns = w0, max(w1, w0)
    meta = trace.meta or {}
    devname = device_names(meta)
    rq = _fields(trace, "request", REQUEST_FIELDS)
    req_row = _device_slices(tl, rq, m, devname)

    tasks = trace.records("task")
    off = _fields(trace, "offcpu", OFFCPU_FIELDS)
    fs = _fields(trace, "fsync", FSYNC_FIELDS)
    life = _lifetimes(tasks, w0, tl.end_ns)
    tids = sorted(set(life) | {int(x) for x in off["tid"]} | {int(x) for x in fs["tid"]})
    procs, thread_track, state_track = _thread_tracks(tl, tids, life, off, fs, w0)
    o_order = np.lexsort((off["start_ns"], off["tid"]))
    _native_sched(tl, off, o_order, life)
    if state_slices:
        _sched_states(tl, off, o_order, life, state_track, tids, w0)
    call_row = _call_slices(tl, fs, thread_track)
    _call_flows(tl, m.requests.call_index, call_row, req_row)
    # only a helper's wakeup by a request's completion is drawn
    helpers = _fields(trace, "helper", OFFCPU_FIELDS, lambda h: h["waker_rq_seq"] != 0)
    _wakeup_flows(tl, rq, off, o_order, helpers, thread_track, procs, req_row, life)
    del off, helpers
    _journal(tl, trace.records("journal"), devname, meta)
    _counters(tl, m, trace.counters, w0)
    return tl


def _device_slices(tl: Timeline, rq: np.ndarray, m: RunModel,
                   devname: dict[tuple[int, int], str]) -> np.ndarray:
    """Every request with a start as a slice on its device's lanes, from its start
    (issue, else insert, else submit) to its completion (the end if incomplete), in
    (device, start) order; returns each request's row in tl.slices (-1: none). Its
    arguments are made from its record when a writer reads them (_request_args)."""
    rm = m.requests
    issue = rq["issue_ns"].astype(I64)
    done = rq["done_ns"].astype(I64)
    ins = rq["insert_ns"].astype(I64)
    sub = rq["submit_ns"].astype(I64)
    start = np.where(issue > 0, issue, np.where(ins > 0, ins, sub))
    incomplete = (rq["flags_u16"] & abi.RQ_INCOMPLETE) != 0
    end = np.where((done > 0) & ~incomplete, done, tl.end_ns)
    keep = start > 0
    dev = (rq["dev_major"].astype(I64) << 32) | rq["dev_minor"].astype(I64)
    order = np.lexsort((start, dev))
    lanes: dict[int, Lanes] = {}
    req_row = np.full(len(rq), -1, I64)
    devices_track: int | None = None
    args = tl.slices.maker(lambda i: _request_args(rq[i], i, m))
    for i in order.tolist():
        if not keep[i]:
            continue
        d = int(dev[i])
        if d not in lanes:
            key = (d >> 32, d & 0xFFFFFFFF)
            # the report's name of the device
            name = (rm.device[i] if i < len(rm.device) else None) or \
                devname.get(key, f"{key[0]}:{key[1]}")
            if devices_track is None:
                devices_track = tl.track("block devices", group="devices")
            lanes[d] = Lanes(tl, tl.track(name, devices_track, group="devices",
                                          merge_key=name),
                             name, lane_parent=devices_track, group="devices",
                             merge_key=name, same_name=True)
        s, e = int(start[i]), int(max(end[i], start[i]))
        req_row[i] = tl.slices.add(lanes[d].place(s, e), s, e, m.class_names[int(rm.cls[i])],
                                   "request", maker=args, a0=i)
    return req_row


def _request_args(r: Any, i: int, m: RunModel) -> dict[str, Any]:
    """A request slice's arguments (record r, index i): class, level two, the device
    above, sector, bytes, op, flags, submitter, and the times and seek it has."""
    rm = m.requests
    incomplete = bool(int(r["flags_u16"]) & abi.RQ_INCOMPLETE)
    issue = int(r["issue_ns"])
    ifl = int(r["iflags"])
    flags = [n for b, n in ((abi.F_SYNC, "sync"), (abi.F_META, "meta"),
                            (abi.F_FUA, "fua"), (abi.F_PREFLUSH, "preflush"),
                            (abi.F_RAHEAD, "readahead")) if ifl & b]
    args: dict[str, Any] = {"class": m.class_names[int(rm.cls[i])]}
    # the level two a workload wait on it counts as, and the device above whose I/O
    # it carried (the Parquet `requests` columns of the same names)
    for arg, col in (("served_by", rm.served_by), ("carried_for", rm.carried_for)):
        if i < len(col) and col[i] is not None:
            args[arg] = col[i]
    args |= {
        "sector": int(r["start_sector"]), "bytes": int(r["len_bytes"]),
        "op": OP_NAMES.get(int(r["op"]), str(int(r["op"]))), "flags": ",".join(flags),
        "submitter": (f"{_comm(r['comm']) or '?'}/{int(r['tid'])}"
                      if int(r["flags_u16"]) & abi.RQ_ORIGIN else "?"),
        "workload": bool(int(r["flags_u16"]) & abi.RQ_TRACKED),
    }
    if rm.queue_ns[i] >= 0:
        args["queue_ns"] = int(rm.queue_ns[i])
    if rm.device_ns[i] >= 0:
        args["device_ns"] = int(rm.device_ns[i])
    if rm.has_seek[i]:
        args["seek_sectors"] = int(rm.seek_sectors[i])
    if incomplete:
        args["incomplete"] = True
    if issue <= 0:
        args["issued"] = False  # e.g. an empty PREFLUSH write waiting for its flush
    return args


def _thread_tracks(tl: Timeline, tids: list[int],
                   life: dict[int, tuple[int, int, int, str]], off: np.ndarray,
                   fs: np.ndarray, w0: int
                   ) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """A process track per process and, under it, a track and a state track per thread
    (in tid order); returns (tgid -> track, tid -> track, tid -> state track)."""
    procs: dict[int, int] = {}
    thread_track: dict[int, int] = {}
    state_track: dict[int, int] = {}
    # a thread's process from its first off-CPU record, else its first call (one pass
    # each, not a search per thread: a file may hold as many threads as records)
    first_tgid: dict[int, int] = {}
    for recs in (fs, off):  # off last: it wins
        t_u, at = np.unique(np.asarray(recs["tid"]), return_index=True)
        first_tgid.update(zip(t_u.tolist(), np.asarray(recs["tgid"])[at].tolist()))
    for tid in tids:
        tg, b, d, c = life.get(tid, (0, w0, tl.end_ns, ""))
        if not tg:
            tg = int(first_tgid.get(tid, tid))
        if tg not in procs:
            leader = life.get(tg, (0, 0, 0, ""))[3]
            procs[tg] = tl.track(f"{leader or 'process'} {tg}", pid=tg, group="threads",
                                 comm=leader or None)
        name = f"{c or 'thread'} {tid}"
        thread_track[tid] = tl.track(name, procs[tg], pid=tg, tid=tid, group="threads",
                                     comm=c or None)
        state_track[tid] = tl.track(f"{name} state", procs[tg], group="threads", state=True)
        if c:
            tl.comms[tid] = c
    return procs, thread_track, state_track


def _sched_states(tl: Timeline, off: np.ndarray, o_order: np.ndarray,
                  life: dict[int, tuple[int, int, int, str]], state_track: dict[int, int],
                  tids: list[int], w0: int) -> None:
    """Scheduling state slices: each off-CPU interval (blocked then runnable, or
    runnable if preempted) and the running time between them within the thread's life;
    a record overlapping the one before it on its thread is left out."""
    cur_tid, last = -1, 0
    for i in o_order.tolist():
        r = off[i]
        tid = int(r["tid"])
        s, wk, e = int(r["start_ns"]), int(r["waking_ns"]), int(r["end_ns"])
        if not e or e > tl.end_ns:
            e = tl.end_ns
        if not s or e < s:
            continue
        if tid != cur_tid:
            if cur_tid >= 0:
                _running(tl, state_track[cur_tid], last,
                         life.get(cur_tid, (0, 0, tl.end_ns, ""))[2])
            cur_tid = tid
            last = life.get(tid, (0, w0, 0, ""))[1]
        if s < last:  # overlapping records of one thread: keep the first
            continue
        _running(tl, state_track[tid], last, s)
        _off_cpu_slices(tl, r, state_track[tid], s, wk, e)
        last = e
    if cur_tid >= 0:
        _running(tl, state_track[cur_tid], last, life.get(cur_tid, (0, 0, tl.end_ns, ""))[2])
    with_off = {int(x) for x in np.unique(off["tid"])}
    for tid in tids:
        if tid not in with_off:
            _, b, d, _ = life.get(tid, (0, w0, tl.end_ns, ""))
            _running(tl, state_track[tid], b, d)


def _off_cpu_slices(tl: Timeline, r: Any, track: int, s: int, wk: int, e: int) -> None:
    """One off-CPU record r over [s, e]: runnable if preempted (or never woken), else
    blocked in its syscall until its wakeup wk (clamped into [s, e]), then runnable."""
    fl = int(r["flags_u16"])
    sysname = syscall_name(int(r["syscall_nr"]))
    waker = {"waker": f"{_comm(r['waker_comm']) or '?'}/{int(r['waker_tid'])}"} \
        if int(r["waker_tid"]) else {}
    preempt = bool(fl & abi.OFF_PREEMPT) or not wk
    if preempt:
        tl.slices.add(track, s, e, "runnable (preempted)", "sched",
                      tl.shared_args(syscall=sysname))
    else:
        wk = min(max(wk, s), e)
        tl.slices.add(track, s, wk, tl.shared_name("blocked: ", sysname), "sched",
                      tl.shared_args(syscall=sysname, iowait=bool(fl & abi.OFF_IOWAIT),
                                     uninterruptible=bool(fl & abi.OFF_D), **waker))
        if e > wk:
            tl.slices.add(track, wk, e, "runnable", "sched", tl.shared_args(**waker))


def _call_slices(tl: Timeline, fs: np.ndarray, thread_track: dict[int, int]
                 ) -> np.ndarray:
    """fsync-family calls on their thread's track (lanes in case records overlap), in
    (thread, entry) order; an incomplete one runs to the end. Returns each call's row in
    tl.slices (-1: none)."""
    call_lanes: dict[int, Lanes] = {}
    call_row = np.full(len(fs), -1, I64)
    f_order = np.lexsort((fs["enter_ns"], fs["tid"]))
    args = tl.slices.maker(lambda i: _call_args(fs[i], i))
    for i in f_order.tolist():
        r = fs[i]
        tid = int(r["tid"])
        s, e = int(r["enter_ns"]), int(r["exit_ns"])
        if not s:
            continue
        if not e or int(r["flags_u16"]) & abi.FS_F_INCOMPLETE:
            e = tl.end_ns
        e = max(e, s)
        if tid not in call_lanes:
            tt = tl.tracks[thread_track[tid]]
            call_lanes[tid] = Lanes(tl, tt.uuid, f"{tt.name} calls", tt.parent, group="threads")
        call_row[i] = tl.slices.add(call_lanes[tid].place(s, e), s, e,
                                    abi.CALL_NAMES.get(int(r["call_u16"]), "call"), "fsync",
                                    maker=args, a0=i)
    return call_row


def _call_args(r: Any, i: int) -> dict[str, Any]:
    """A call slice's arguments (record r, index i)."""
    args = {"fs": FS_NAMES.get(int(r["fs_u16"]), ""), "fd": int(r["fd"]),
            "ino": int(r["ino"]), "ret": int(r["ret"]), "call_id": int(i)}
    if int(r["flags_u16"]) & abi.FS_F_SEQ:
        args["commit_seq"] = int(r["commit_seq"])
    return args


def _call_flows(tl: Timeline, call_index: np.ndarray, call_row: np.ndarray,
                req_row: np.ndarray) -> None:
    """A flow from each call to every request its thread submitted inside it (both
    drawn), in request order."""
    j = np.flatnonzero(call_index[:len(req_row)] >= 0)
    ci = np.asarray(call_index, I64)[j]
    j, ci = j[ci < len(call_row)], ci[ci < len(call_row)]
    src, dst = call_row[ci], req_row[j]
    both = (src >= 0) & (dst >= 0)
    tl.flow_all(tl.slices, src[both], tl.slices, dst[both])


def _counters(tl: Timeline, m: RunModel, counters: dict[str, int], w0: int) -> None:
    """Counter tracks: the attribution categories and their level two (cumulative ns:
    0 at the start, the total at the end), each device's mean queue depth per step,
    and the loss counters."""
    if m.attribution_ns is not None:
        parts = (m.detail.get("elapsed") or {})
        for cat in CATEGORIES:
            t = tl.track(f"attribution {cat} (ns)", counter_unit="ns", group="counters")
            tl.counters += [(t, w0, 0.0), (t, tl.end_ns, float(m.attribution_ns.get(cat, 0)))]
            # Level two: what served it, a counter per part.
            for part, ns in (parts.get(cat) or {}).items():
                t = tl.track(f"attribution {cat} served by {part} (ns)", counter_unit="ns",
                             group="counters")
                tl.counters += [(t, w0, 0.0), (t, tl.end_ns, float(ns))]
    for name, (step, series) in m.queue_depth.items():
        t = tl.track(f"{name} queue depth (mean per {step} ns)", counter_unit="requests",
                     group="counters")
        for k, v in enumerate(series):
            tl.counters.append((t, w0 + k * step, float(v)))
    for key, count in sorted(counters.items()):
        if key.startswith("lost_") or key in ("unmatched_completion",
                                              "request_without_origin"):
            t = tl.track(f"{key} (events)", counter_unit="count", group="counters")
            tl.counters += [(t, w0, 0.0), (t, tl.end_ns, float(count))]


# prev_state values of the kernel's sched_switch (TASK_REPORT bits; preempted:
# TASK_REPORT_MAX), which Perfetto decodes.
PREV_S, PREV_D, PREV_X, PREV_I, PREV_PREEMPTED = 0x1, 0x2, 0x10, 0x80, 0x100


def _prev_state(state: int, flags: int) -> int:
    if flags & abi.OFF_PREEMPT:
        return PREV_PREEMPTED
    if state & 0x402 == 0x402:  # TASK_IDLE: uninterruptible, not counted as load
        return PREV_I
    return PREV_D if flags & abi.OFF_D else PREV_S


def _native_sched(tl: Timeline, off: np.ndarray, order: np.ndarray,
                  life: dict[int, tuple[int, int, int, str]]) -> None:
    """The workload threads' running periods and wakeups, as the scheduler's own events
    would give them. An off-CPU record is written at the switch-in that ends it, on
    that CPU (its header's cpu): the thread then runs there until its next switch-out.
    Before a thread's first switch-in the CPU it ran on is not known: that period is
    left out (counted). A thread that exits leaves its CPU in state X at its death.
    Periods and wakeups are gathered as flat int64 arrays (5 and 4 values each), not
    tuples: a run holds about one of each per off-CPU record."""
    runs = array("q")
    wakings = array("q")
    cur, cpu, since = -1, -1, 0
    for i in order.tolist():
        r = off[i]
        tid = int(r["tid"])
        s, wk, e = int(r["start_ns"]), int(r["waking_ns"]), int(r["end_ns"])
        if tid != cur:
            if cur >= 0 and cpu >= 0:
                _last_run(runs, tl, cur, cpu, since, life)
            cur, cpu, since = tid, -1, 0
            tl.sched_unknown_cpu += 1  # the thread's first running period
        if not s or (e and e < s) or s < since:
            continue
        fl = int(r["flags_u16"])
        if cpu >= 0:
            runs.extend((cpu, since, s, tid, _prev_state(int(r["state"]), fl)))
        if not e or e > tl.end_ns or (fl & (abi.OFF_LATE_END | abi.OFF_OPEN_END)
                                      and e >= tl.end_ns):
            cpu = -2  # still off CPU at the end
            continue
        if wk and not fl & abi.OFF_PREEMPT and s <= wk <= e:
            wakings.extend((int(r["cpu"]), wk, tid, int(r["waker_tid"])))
        cpu, since = int(r["cpu"]), e
    if cur >= 0 and cpu >= 0:
        _last_run(runs, tl, cur, cpu, since, life)
    tl.wakings = np.array(wakings, I64).reshape(-1, 4)
    del wakings
    # One CPU runs one thread at a time: a period overlapping the one before it on its
    # CPU (records that disagree) is left out and counted, never drawn over another.
    # In (cpu, start, end, tid, state) order, a block at a time.
    rr = np.array(runs, I64).reshape(-1, 5)
    del runs
    rr = rr[np.lexsort(rr.T[::-1])]
    end_at: dict[int, int] = {}
    keep = np.zeros(len(rr), bool)
    for lo in range(0, len(rr), EVENTS_AT_ONCE):
        b = rr[lo:lo + EVENTS_AT_ONCE]
        for k, (c, s, e) in enumerate(zip(b[:, 0].tolist(), b[:, 1].tolist(),
                                          b[:, 2].tolist()), lo):
            if s < end_at.get(c, 0):
                tl.sched_unknown_cpu += 1
                continue
            end_at[c] = e if e else 1 << 63
            keep[k] = True
    tl.sched = rr[keep]


def _last_run(runs: array[int], tl: Timeline, tid: int, cpu: int, since: int,
              life: dict[int, tuple[int, int, int, str]]) -> None:
    death = life.get(tid, (0, 0, tl.end_ns, ""))[2]
    if death < tl.end_ns and death >= since:
        runs.extend((cpu, since, death, tid, PREV_X))
    else:
        runs.extend((cpu, since, 0, tid, 0))


WAKER_BITS = 24  # a woken instant's a0: request index << WAKER_BITS | waker name index
WAKER_MASK = (1 << WAKER_BITS) - 1


def _wakeup_flows(tl: Timeline, rq: np.ndarray, off: np.ndarray, order: np.ndarray,
                  helpers: np.ndarray, thread_track: dict[int, int], procs: dict[int, int],
                  req_row: np.ndarray, life: dict[int, tuple[int, int, int, str]]
                  ) -> None:
    """At each wakeup of a blocked workload thread, and of a helper thread (jbd2, a
    kworker: the helper records) that a request's completion woke: an instant on its
    track ("woken"), with a flow from an instant on its waker's thread track ("wakes")
    and one from the slice of the request whose completion woke it (the recording's
    waker_rq_seq)."""
    if not len(off) and not len(helpers):
        return
    # request index by sequence number (of equal numbers, the last)
    by_seq = np.argsort(rq["seq"], kind="stable") if len(rq) else np.zeros(0, I64)
    seqs = np.asarray(rq["seq"], I64)[by_seq]
    tracks = dict(thread_track)
    inst = tl.instants
    # a wakeup by a request's completion: its waker's name (an index into inst.names)
    # and the request (its index) in one number, while both fit
    woken_args = inst.maker(lambda a0: {"waker": inst.names[a0 & WAKER_MASK],
                                        "request_seq": int(rq["seq"][a0 >> WAKER_BITS])})

    def track_of(tid: int, tgid: int, comm: str) -> int:
        if tid not in tracks:
            tg = tgid or tid
            if tg not in procs:
                procs[tg] = tl.track(f"{comm or 'process'} {tg}", pid=tg, group="threads",
                                     comm=comm or None)
            tracks[tid] = tl.track(f"{comm or 'thread'} {tid}", procs[tg], pid=tg, tid=tid,
                                   group="threads", comm=comm or None)
        return tracks[tid]
    h_order = np.lexsort((helpers["start_ns"], helpers["tid"])) if len(helpers) else \
        np.zeros(0, np.int64)
    for recs, rec_order, helper in ((off, order, False), (helpers, h_order, True)):
        # the row of the request whose completion woke each record's thread (-1: none)
        seq = np.asarray(recs["waker_rq_seq"], I64)
        row_of = np.full(len(recs), -1, I64)
        req_of = np.full(len(recs), -1, I64)
        if len(seqs):
            at = np.maximum(np.searchsorted(seqs, seq, side="right") - 1, 0)
            found = (seq != 0) & (seqs[at] == seq)
            req_of[found] = by_seq[at[found]]
            row_of[found] = req_row[req_of[found]]
        for i in np.asarray(rec_order).tolist():
            r = recs[i]
            s, wk, e = int(r["start_ns"]), int(r["waking_ns"]), int(r["end_ns"])
            fl = int(r["flags_u16"])
            if not wk or fl & abi.OFF_PREEMPT or wk < s or (e and wk > e) or wk > tl.end_ns:
                continue
            q = int(row_of[i])
            if helper and q < 0:
                continue
            tid, wt = int(r["tid"]), int(r["waker_tid"])
            wcomm = _comm(r["waker_comm"])
            name = tl.comms.get(tid) or life.get(tid, (0, 0, 0, ""))[3]
            waker = tl.shared_name(wcomm or "?", "/", str(wt))
            woken_track = track_of(tid, int(r["tgid"]), name)
            # the waker's instant first, then the woken one (their order in instants)
            if wt:
                wakes = inst.add(track_of(wt, int(r["waker_tgid"]), wcomm), wk, wk, "wakes",
                                 "wakeup", tl.shared_args(woken=f"{name or '?'}/{tid}"))
            if q >= 0:
                w = inst.intern(waker)
                if w <= WAKER_MASK:
                    woken = inst.add(woken_track, wk, wk, "woken", "wakeup", maker=woken_args,
                                     a0=int(req_of[i]) << WAKER_BITS | w)
                else:
                    woken = inst.add(woken_track, wk, wk, "woken", "wakeup",
                                     {"waker": waker, "request_seq": int(r["waker_rq_seq"])})
                tl.flow(tl.slices, q, inst, woken)
            else:
                woken = inst.add(woken_track, wk, wk, "woken", "wakeup",
                                 tl.shared_args(waker=waker))
            if wt:
                tl.flow(inst, wakes, inst, woken)


def _running(tl: Timeline, track: int, s: int, e: int) -> None:
    if e > s:
        tl.slices.add(track, s, e, "running", "sched")


# The journal events that begin or end a stretch of a journal's work (a commit, an
# iclog write, a fast commit: iowhy.filesystems), and those that start a phase of one.
SPAN_EVENTS: dict[int, tuple[JournalSpan, bool]] = {
    abi.JOURNAL_EVENT_CODES[e]: (span, begin) for f in FILESYSTEMS for span in f.journal_spans
    for e, begin in ((span.begin, True), (span.end, False))}
SPAN_PHASES: dict[int, tuple[JournalSpan, str]] = {
    abi.JOURNAL_EVENT_CODES[e]: (span, phase) for f in FILESYSTEMS for span in f.journal_spans
    for e, phase in span.phases}


def _journal(tl: Timeline, jr: np.ndarray, devname: dict[tuple[int, int], str],
             meta: dict[str, Any]) -> None:
    if not len(jr):
        return
    fsname = {}
    for f in meta.get("filesystems", []) or []:
        for pre in ("dev", "st_dev"):
            # either number may have been dropped (tracecheck): a journal then goes by
            # its device number
            if f.get(f"{pre}_major") is not None and f.get(f"{pre}_minor") is not None:
                fsname[(int(f[f"{pre}_major"]), int(f[f"{pre}_minor"]))] = \
                    utf8_text(f"{f.get('fstype')} {f.get('source')}")
    tracks: dict[tuple[int, int], Lanes] = {}

    def lane(key: tuple[int, int], fs: int, s: int, e: int) -> int:
        if key not in tracks:
            name = "journal " + fsname.get(key, f"{FS_NAMES.get(fs, '')} {key[0]}:{key[1]}")
            tracks[key] = Lanes(tl, tl.track(name, group="journal"), name, group="journal")
        return tracks[key].place(s, e)

    def base(key: tuple[int, int], fs: int) -> int:
        """The journal's own track (instants need no lane)."""
        if key not in tracks:
            lane(key, fs, 0, 0)  # lane 0, free again from time 0 on
        return tracks[key].parent
    order = np.argsort(jr["ts_ns"], kind="stable")
    ev = jr["event_u16"][order]
    ts = jr["ts_ns"][order].astype(I64)
    rows = jr[order]
    done_at: dict[tuple[int, int], list[int]] = {}
    for k in np.flatnonzero(ev == abi.J_XLOG_DONE).tolist():
        done_at.setdefault((int(rows[k]["dev_major"]), int(rows[k]["dev_minor"])),
                           []).append(int(ts[k]))
    # (device, span, its key field) -> the time it began, and its phases so far.
    open_: dict[tuple, int] = {}
    phases: dict[tuple, list[tuple[int, str]]] = {}
    items: list[tuple[int, int, tuple[int, int], int, str, dict[str, Any],
                      list[tuple[int, str]]]] = []
    for k in range(len(rows)):
        r = rows[k]
        e, t = int(ev[k]), int(ts[k])
        key = (int(r["dev_major"]), int(r["dev_minor"]))
        fs = int(r["fs_u16"])
        seq = int(r["seq"])
        if e in SPAN_EVENTS:
            span, begin = SPAN_EVENTS[e]
            pk = (key, span, int(r[span.key]))
            if begin:
                open_[pk] = t
                phases[pk] = []
            elif pk in open_:
                args: dict[str, Any] = {a: int(r[f]) for a, f in span.args}
                items.append((open_.pop(pk), t, key, fs, span.label.format(seq=seq), args,
                              phases.pop(pk)))
        elif e in SPAN_PHASES:
            span, phase = SPAN_PHASES[e]
            pk = (key, span, int(r[span.key]))
            if pk in phases:
                phases[pk].append((t, phase))
        elif e == abi.J_XFS_FORCE and done_at.get(key):
            # A log force lasts until the log's next iclog write completes.
            d = done_at[key]
            i = bisect.bisect_left(d, t)
            args = {"seq": seq, "tid": int(r["tid"]), "comm": _comm(r["comm"]),
                    "ends": "at the next iclog completion"}
            if i < len(d):
                items.append((t, d[i], key, fs, "log force", args, []))
            else:
                tl.instants.add(base(key, fs), t, t, "log force", "journal", args)
        else:
            name = {abi.J_XFS_FORCE: "log force"}.get(e, abi.JOURNAL_EVENT_NAMES.get(e, "event"))
            tl.instants.add(base(key, fs), t, t, name, "journal",
                            {"seq": seq, "tid": int(r["tid"])})
    for s, e_, key, fs, name, args, ph in sorted(items, key=lambda x: (x[0], -x[1])):
        tr = lane(key, fs, s, e_)
        tl.slices.add(tr, s, e_, name, "journal", args)
        bounds = [(t, n) for t, n in ph if s <= t <= e_] + [(e_, "")]
        for (t0, n0), (t1, _) in zip(bounds, bounds[1:]):
            if t1 > t0:
                tl.slices.add(tr, t0, t1, n0, "journal")


EVENTS_AT_ONCE = 1 << 16  # events merged (and made Python objects) at a time, per stream


def sorted_events(tl: Timeline, ends: bool = True, label: str | None = None
                  ) -> Iterator[tuple[str, Any]]:
    """Every slice begin ("B") and end ("E"), instant ("I") and counter value ("C") in
    an order where slices nest on each track: at one time, ends before begins; of
    slices beginning together the longer first (the one made first if equally long),
    of those ending together the reverse. A slice of no length is an instant; instants
    at one time come by their number (a slice's row, an instant's row), a slice's
    before an instant's of the same number; counter values by theirs. A slice's end
    carries no arguments or flows: its begin has them. ends=False leaves the ends out
    (a writer of complete slices). label: the phase the progress line names, after the
    share of the events taken so far ("45% writing perfetto"), a block at a time.

    Four streams, each sorted on its own with the order above (ends, begins, instants,
    counter values: at one time, in that order), merged EVENTS_AT_ONCE per stream at a
    time: what stays alive is each stream's order, 8 B per event (the times are read
    from the tables a block at a time), not the keys of a sort of all events at once."""
    ni, nc = len(tl.instants), len(tl.counters)
    st = tl.slices.view("start")
    en = tl.slices.view("end")
    d = en - st
    k = np.flatnonzero(d > 0)
    # begins by (start, longer first, row); ends by (end, shorter first, later row first)
    b_ord = k[np.lexsort((-d[k], st[k]))]
    k = k[::-1] if ends else k[:0]
    e_ord = k[np.lexsort((d[k], en[k]))]
    del k, en
    # instants: a slice of no length (by its row), then the instants (by theirs)
    pk = np.flatnonzero(d <= 0)
    del d
    p_num = np.concatenate((pk, np.arange(ni, dtype=I64)))
    p_ord = np.lexsort((p_num, np.concatenate((st[pk], tl.instants.column("start")))))
    del st
    p_num = p_num[p_ord]
    p_code = np.where(p_ord >= len(pk), 3, 2).astype(np.int8)  # an instant's, a slice's
    del p_ord, pk
    c_t = np.fromiter((c[1] for c in tl.counters), I64, nc)
    c_ord = np.argsort(c_t, kind="stable")
    c_t = c_t[c_ord]
    # per stream, in the order of their rank at one time: its rows and what each
    # event is (0 an end, 1 a begin, 2 a slice's instant, 3 an instant, 4 a value);
    # the times are read from the tables a block at a time
    rows = (e_ord, b_ord, p_num, c_ord)
    codes: tuple[int | np.ndarray, ...] = (0, 1, p_code, 4)
    kinds = ("E", "B", "I", "I", "C")
    makes = (tl.slices.bare, tl.slices.__getitem__, tl.slices.__getitem__,
             tl.instants.__getitem__, tl.counters.__getitem__)

    def times(s: int, lo: int, hi: int) -> np.ndarray:
        r = rows[s][lo:hi]
        if s == 0:
            return tl.slices.view("end")[r]
        if s == 1:
            return tl.slices.view("start")[r]
        if s == 2:
            inst = p_code[lo:hi] == 3
            t = tl.slices.view("start")[np.where(inst, 0, r)] if len(tl.slices) else \
                np.zeros(hi - lo, I64)
            t[inst] = tl.instants.view("start")[r[inst]]
            return t
        return c_t[lo:hi]
    at = [0, 0, 0, 0]
    total = sum(len(r) for r in rows)
    while True:
        if label is not None and total:
            # the share first: a narrow terminal's line keeps a phase's start
            phase(f"{sum(at) * 100 // total}% {label}")
        stop = [min(at[s] + EVENTS_AT_ONCE, len(rows[s])) for s in range(4)]
        block = [times(s, at[s], stop[s]) for s in range(4)]
        # The merge may go up to the smallest (time, rank) that ends a stream's block
        # short of the stream's end: nothing after it in any stream comes before it.
        bound = min(((int(block[s][-1]), s) for s in range(4) if stop[s] < len(rows[s])),
                    default=None)
        take_t, take_s, take_r, take_c = [], [], [], []
        for s in range(4):
            lo, n = at[s], stop[s] - at[s]
            if bound is not None:
                n = int(np.searchsorted(block[s], bound[0],
                                        side="right" if s <= bound[1] else "left"))
            take_t.append(block[s][:n])
            take_s.append(np.full(n, s, np.int8))
            take_r.append(rows[s][lo:lo + n])
            c = codes[s]
            take_c.append(c[lo:lo + n] if isinstance(c, np.ndarray) else np.full(n, c, np.int8))
            at[s] = lo + n
        del block
        t = np.concatenate(take_t)
        if not len(t):
            return
        w = np.concatenate(take_s)
        o = np.lexsort((w, t))  # stable: each stream's own order kept at one (time, rank)
        for c, r in zip(np.concatenate(take_c)[o].tolist(), np.concatenate(take_r)[o].tolist()):
            yield kinds[c], makes[c](r)
