"""The request model: the trace window, the request columns and the per-request
times every view uses.

Everything here is a pure function over numpy arrays: no printing, no trace I/O beyond
pulling columns out of a `Trace`. Times are integer nanoseconds of CLOCK_MONOTONIC;
intervals are half-open, ``[start, end)``.

Per request (definitions used by every report; views.latency.latency_values computes the
three times, each at least 0, for every view, `hist` and the figures):

* ``queue_ns``  = issue - insert (0 for a direct issue, where insert_ns is 0).
* ``device_ns`` = final completion - issue (includes the post-flush of a flush-sequenced
  request); only for requests that were issued.
* ``total_ns``  = final completion - first known start (submit, else insert, else issue).
* The *device stage* of a request is ``[issue_ns, data_done_ns)``: the time it occupied
  the device. For an ``FF`` flush (REQ_OP_FLUSH) it is ``[issue_ns, done_ns)``. A request
  still in flight at the end of the recording (RQ_INCOMPLETE) is clipped at the trace
  end; one first seen at completion (RQ_UNMATCHED) is taken as in flight since the trace
  start. Device busy time and queue depth are built from device stages.
* A request whose final completion was never seen (RQ_LOST_DONE: its struct request was
  issued again), or whose issue was never seen (RQ_LOST_ISSUE, taken as issued at its
  first completion), is *unobserved*: its completions are set to its issue time, so its
  device stage is empty and it is in no time interval (busy time, attribution, queue
  depth, flush generations); it is left out of latency figures like an incomplete one.
  It keeps its place in the issue order (the device did serve it), so seek distances
  and locality still see it.
* *Service time* (for the positioning estimate): the device stages of a device taken in
  completion order (stage end; equal ends in issue order), a request's service runs from
  max(its issue, the previous completion on the device) to its own completion. On a
  device that serves one request at a time and completes them in order, this is the time
  the device spent on that request alone (the time it queued inside the device behind
  others is left out), and the service intervals tile the device's busy time.
* *Seek distance* in issue order per device: ``start_sector - previous_end`` in sectors,
  where previous_end is the end sector of the previously issued request on the same
  device (flushes and discards are skipped; the first request of a device has none).
* *Flush generation*: a request that went through the flush state machine
  (RQ_FLUSH_SEQ) waits for pre/post-flushes during ``[start, done) - [issue, data_done)``
  (start = submit, else insert, else issue). Every ``FF`` request in flight on the same
  device during that window is one it waited on; its ``flush_wait_ns`` is the time at
  least one ``FF`` was in flight during that window, and each ``FF``'s device time is
  shared equally (integer ns, remainder to the earliest waiters) among its waiters.
"""

from __future__ import annotations

import bisect
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from .. import abi
from .devices import dev_key, dev_pair
from ..kernels import GATHER_BLOCK, I64, key_span, select, unique


@dataclass(frozen=True)
class Window:
    """The workload window: [recorder start, trailer end]."""

    start_ns: int
    end_ns: int

    @property
    def elapsed_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def span(self) -> int:
        return key_span(self.start_ns, self.end_ns)


def trace_window(trace: Any) -> Window:
    """[recorder.start_ns, end_ns]; without a recorder chunk, from the earliest record."""
    start = int(trace.start_ns or 0)
    end = int(trace.end_ns or 0)
    if not start:
        firsts = []
        for name, fld in (("request", "submit_ns"), ("request", "issue_ns"),
                          ("fsync", "enter_ns"), ("offcpu", "start_ns"), ("task", "ts_ns"),
                          ("journal", "ts_ns")):
            col = trace.column(name, fld)
            col = col[col > 0]
            if len(col):
                firsts.append(int(col.min()))
        start = min(firsts) if firsts else end
    if end < start:
        end = start
    return Window(start, end)


REQUEST_FIELDS = ("submit_ns", "insert_ns", "issue_ns", "data_done_ns", "done_ns",
                  "start_sector", "len_bytes", "dev_major", "dev_minor", "op", "iflags",
                  "flags_u16", "tid")


@dataclass
class Requests:
    """The request columns the analysis uses (int64 ns; 0 = unknown)."""

    submit: np.ndarray
    insert: np.ndarray
    issue: np.ndarray
    data_done: np.ndarray
    done: np.ndarray  # final completion, clipped to the window end if incomplete (the
    #                   issue time if it was never seen: RQ_LOST_DONE)
    sector: np.ndarray
    nbytes: np.ndarray  # uint32
    dev: np.ndarray  # int32 index into devices
    devices: list[tuple[int, int]]
    op: np.ndarray
    iflags: np.ndarray
    flags: np.ndarray
    tid: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.issue)

    def __getitem__(self, name: str) -> np.ndarray:
        """Field access by trace field name, so a Requests works where a record array does."""
        alias = {"submit_ns": self.submit, "insert_ns": self.insert, "issue_ns": self.issue,
                 "data_done_ns": self.data_done, "done_ns": self.done,
                 "start_sector": self.sector, "len_bytes": self.nbytes, "op": self.op,
                 "iflags": self.iflags, "flags_u16": self.flags, "tid": self.tid}
        if name in alias:
            return alias[name]
        return self.extra[name]

    def take(self, keep: np.ndarray) -> Requests:
        """The requests where bool array `keep` is true, in their order, on the same
        devices (each `dev` still indexes `devices`); extra columns too."""
        return Requests(submit=self.submit[keep], insert=self.insert[keep],
                        issue=self.issue[keep], data_done=self.data_done[keep],
                        done=self.done[keep], sector=self.sector[keep],
                        nbytes=self.nbytes[keep], dev=self.dev[keep], devices=self.devices,
                        op=self.op[keep], iflags=self.iflags[keep], flags=self.flags[keep],
                        tid=self.tid[keep], extra={k: v[keep] for k, v in self.extra.items()})


SUBCHUNK = 8192  # records copied at a time: a few fields of 8192 records stay in L2


def gather_columns(views: Sequence[np.ndarray], fields: Sequence[str],
                   dtype: np.dtype) -> dict[str, np.ndarray]:
    """Copy fields out of record chunks, a cache-sized slice at a time (one pass)."""
    n = sum(len(v) for v in views)
    out = {f: np.empty(n, dtype=dtype[f]) for f in fields}
    off = 0
    for v in views:
        for i in range(0, len(v), SUBCHUNK):
            w = v[i:i + SUBCHUNK]
            m = len(w)
            for f in fields:
                out[f][off:off + m] = w[f]
            off += m
    return out


def load_requests(trace: Any, window: Window, threads: int = 1,
                  alongside: Callable[[list[np.ndarray]], list[Callable[[], Any]]] | None = None
                  ) -> Requests:
    """Pull the request columns out of a trace and normalise them (see module doc).

    One pass over the mapped records, a cache-sized slice at a time: fields are copied,
    the device is mapped to a dense index and unknown times are fixed while the slice
    is hot. threads=2 copies on two threads, one from the first slice on, the other
    from the last one back (numpy releases the GIL while it copies).

    alongside: given the columns (allocated, not yet written), work (callables) to do
    while they are filled: analyze() faults in the heap with it. With threads=2 the
    second thread takes it, in order, before it copies slices; the first, once out of
    slices, takes what is left from the end. threads=1 does it all before copying.
    """
    views = trace.chunks("request")
    n = sum(len(v) for v in views)
    cols = {f: np.empty(n, dtype=abi.REQUEST_DTYPE[f]) for f in REQUEST_FIELDS
            if f not in ("dev_major", "dev_minor")}
    dev = np.empty(n, dtype=np.int32)
    jobs = deque(alongside([*cols.values(), dev]) if alongside else [])
    keys: list[int] = [dev_key(d["major"], d["minor"])
                       for d in trace.meta.get("devices", []) or []
                       if d.get("major") is not None and d.get("minor") is not None]
    # (view, first, last record in the view, position in the output) per slice.
    slices: deque[tuple[np.ndarray, int, int, int]] = deque()
    off = 0
    for v in views:
        for i in range(0, len(v), SUBCHUNK):
            m = min(SUBCHUNK, len(v) - i)
            slices.append((v, i, i + m, off))
            off += m
    end = np.uint64(window.end_ns)
    maps = [_DeviceMap(keys)]
    if threads > 1 and (jobs or len(slices) >= 4):
        maps.append(_DeviceMap(keys))

        def second() -> tuple[int, int]:
            for job in _drain(jobs, True):
                job()
            return _load_slices(_drain(slices, False), cols, dev, end, maps[1])
        with ThreadPoolExecutor(max_workers=1) as pool:
            fut = pool.submit(second)
            spans = [_load_slices(_drain(slices, True), cols, dev, end, maps[0])]
            for job in _drain(jobs, False):
                job()
            spans.append(fut.result())
    else:
        for job in jobs:
            job()
        spans = [_load_slices(iter(slices), cols, dev, end, maps[0])]
    # Devices in (major, minor) order (the meta's and those met in requests); a device
    # is the first entry of its key.
    for dm in maps:
        keys.extend(k for k in dm.keys if k not in keys)
    keys.sort()
    for (lo, hi), dm in zip(spans, maps):
        final = np.array([bisect.bisect_left(keys, k) for k in dm.keys], dtype=np.int32)
        if hi > lo and not np.array_equal(final, np.arange(len(final))):
            np.take(final, dev[lo:hi], out=dev[lo:hi])
    devices = [dev_pair(k) for k in keys]

    def i64(name: str) -> np.ndarray:
        return cols[name].view(I64)
    return Requests(submit=i64("submit_ns"), insert=i64("insert_ns"), issue=i64("issue_ns"),
                    data_done=i64("data_done_ns"), done=i64("done_ns"),
                    sector=i64("start_sector"), nbytes=cols["len_bytes"], dev=dev,
                    devices=devices, op=cols["op"], iflags=cols["iflags"],
                    flags=cols["flags_u16"], tid=cols["tid"])


# dev_major and dev_minor (adjacent u32) read as one little-endian u64: major | minor << 32.
_REQUEST_FIELDS: Any = abi.REQUEST_DTYPE.fields


_DEV_PAIR_SPEC: Any = {"names": ["pair"], "formats": ["<u8"],
                       "offsets": [_REQUEST_FIELDS["dev_major"][1]],
                       "itemsize": abi.REQUEST_DTYPE.itemsize}


_DEV_PAIR = np.dtype(_DEV_PAIR_SPEC)
assert _REQUEST_FIELDS["dev_minor"][1] == _REQUEST_FIELDS["dev_major"][1] + 4


def _pair_key(pair: int) -> int:
    """The dev_key of a raw pair value (major | minor << 32: _DEV_PAIR)."""
    return dev_key(pair & 0xFFFFFFFF, pair >> 32)


def _raw_pair(key: int) -> int:
    """The raw pair value (_DEV_PAIR) of a dev_key."""
    major, minor = dev_pair(key)
    return major | (minor << 32)


class _DeviceMap:
    """Raw (major, minor) pair -> provisional dense index: the position of its key in
    `keys`, which lists distinct keys in the order they were met (the meta's first)."""

    def __init__(self, meta_keys: list[int]) -> None:
        self.keys: list[int] = []
        self.index: dict[int, int] = {}
        for k in meta_keys:
            self._add(_raw_pair(k))
        self._arrays()

    def _add(self, pair: int) -> None:
        k = _pair_key(pair)
        if k not in self.keys:
            self.keys.append(k)
        self.index[pair] = self.keys.index(k)

    def _arrays(self) -> None:
        ps = sorted(self.index)
        self.pairs = np.array(ps, dtype=np.uint64)
        self.ids = np.array([self.index[p] for p in ps], dtype=np.int32)

    def map(self, pair: np.ndarray, out: np.ndarray) -> None:
        """Provisional index of each pair into `out`."""
        if self._try(pair, out):
            return
        for p in unique(pair).tolist():
            if p not in self.index:
                self._add(p)
        self._arrays()
        if not self._try(pair, out):
            raise AssertionError("device map")

    def _try(self, pair: np.ndarray, out: np.ndarray) -> bool:
        np_ = len(self.pairs)
        if np_ == 0:
            return len(pair) == 0
        if np_ <= 4:
            # A few devices: one comparison per known pair.
            eq = np.empty(len(pair), bool)
            found = 0
            for p, i in zip(self.pairs.tolist(), self.ids.tolist()):
                np.equal(pair, p, out=eq)
                k = int(np.count_nonzero(eq))
                if k == len(pair):
                    out.fill(i)
                    return True
                if k:
                    np.copyto(out, i, where=eq)
                    found += k
            return found == len(pair)
        pos = np.searchsorted(self.pairs, pair)
        np.minimum(pos, np_ - 1, out=pos)
        if not (self.pairs[pos] == pair).all():
            return False
        np.take(self.ids, pos, out=out, mode="clip")
        return True


def _drain(items: deque[Any], first: bool) -> Iterator[Any]:
    """Take items off one end of a deque, one at a time, until it is empty (another
    thread may be taking them off the other end)."""
    take = items.popleft if first else items.pop
    while True:
        try:
            yield take()
        except IndexError:
            return


def _load_slices(slices: Iterable[tuple[np.ndarray, int, int, int]],
                 cols: dict[str, np.ndarray], dev: np.ndarray, end: np.uint64,
                 dmap: _DeviceMap) -> tuple[int, int]:
    """Copy and normalise some slices of request records (see load_requests); returns
    the range of output positions they cover (the slices are adjacent)."""
    done_c, dd_c, fl_c = cols["done_ns"], cols["data_done_ns"], cols["flags_u16"]
    issue_c = cols["issue_ns"]
    plain = [(cols[f], f) for f in cols if f not in ("done_ns", "data_done_ns")]
    pair = np.empty(SUBCHUNK, np.uint64)
    bad = np.empty(SUBCHUNK, bool)
    tmp = np.empty(SUBCHUNK, bool)
    lo, hi = len(dev), 0
    for v, i, j, off in slices:
        w = v[i:j]
        m = j - i
        lo, hi = min(lo, off), max(hi, off + m)
        sl = slice(off, off + m)
        for c, f in plain:
            c[sl] = w[f]
        fl = fl_c[sl]
        seen = int(np.bitwise_or.reduce(fl))  # the flags of any request of the slice
        # Final completion: unknown or incomplete -> the window end; never after it.
        done = done_c[sl]
        done[...] = w["done_ns"]
        b, t = bad[:m], tmp[:m]
        np.equal(done, 0, out=b)
        if seen & abi.RQ_INCOMPLETE:
            np.bitwise_and(fl, abi.RQ_INCOMPLETE, out=t, casting="unsafe")
            b |= t
        np.copyto(done, end, where=b)
        np.minimum(done, end, out=done)
        # First completion: unknown or after the final one -> the final one.
        dd = dd_c[sl]
        dd[...] = w["data_done_ns"]
        np.equal(dd, 0, out=b)
        np.greater(dd, done, out=t)
        b |= t
        np.copyto(dd, done, where=b)
        if seen & (abi.RQ_LOST_ISSUE | abi.RQ_LOST_DONE):
            _unobserved(issue_c[sl], dd, done, fl)
        p = pair[:m]
        p[...] = w.view(_DEV_PAIR)["pair"]
        dmap.map(p, dev[sl])
    return lo, hi


def _unobserved(issue: np.ndarray, data_done: np.ndarray, done: np.ndarray,
                flags: np.ndarray) -> None:
    """Requests not fully seen, in a slice of the columns (see _load_slices)."""
    # Issue never seen (RQ_LOST_ISSUE): the device stage is unknown; from here on such a
    # request is unobserved exactly like one whose final completion was never seen, with
    # its empty stage at its first completion.
    li = np.flatnonzero(flags & abi.RQ_LOST_ISSUE)
    issue[li] = data_done[li]
    flags[li] |= abi.RQ_LOST_DONE
    # Final completion never seen: both completions at the issue (an empty stage).
    lost = np.flatnonzero(flags & abi.RQ_LOST_DONE)
    done[lost] = data_done[lost] = issue[lost]


def first_start(rq: Requests, sel: np.ndarray | None = None) -> np.ndarray:
    """submit, else insert, else issue (0 if none is known), for all or `sel` requests
    (block by block: the temporaries stay in cache). The submit time is known for most
    requests: insert and issue are looked at only for those without one."""
    if sel is None:
        out = rq.submit.copy()
        fill_start(rq, out, None)
        return out
    n = len(sel)
    out = np.empty(n, I64)
    for a in range(0, n, GATHER_BLOCK):
        b = min(a + GATHER_BLOCK, n)
        i = sel[a:b].astype(np.intp, copy=False)
        ob = out[a:b]
        np.take(rq.submit, i, out=ob, mode="clip")
        fill_start(rq, ob, i)
    return out


def fill_start(rq: Requests, start: np.ndarray, idx: np.ndarray | None,
               offset: int = 0) -> None:
    """Where `start` (the submit times of requests idx, else of requests offset, offset
    + 1, ...) is not > 0: insert, else issue, in place."""
    z = np.flatnonzero(start <= 0)
    if not len(z):
        return
    r = z + offset if idx is None else np.take(idx, z)
    ins = np.take(rq.insert, r)
    start[z] = select(ins > 0, ins, np.take(rq.issue, r))


# A bio of a bio-based device loaded as a request (model/bios.py): a flag of the analysis
# only, never in a trace (the record's flags_u16 has no bit this high).
RQ_BIO = 1 << 15


# Requests whose latencies are not observed: still in flight at the end, first seen at
# completion, with a final completion never seen, or a bio (its start is not recorded).
UNOBSERVED = abi.RQ_INCOMPLETE | abi.RQ_UNMATCHED | abi.RQ_LOST_DONE | RQ_BIO


def data_stage_unseen(rq: Requests, emulated_fua: np.ndarray) -> np.ndarray:
    """Mask of the FUA writes whose data-stage completion the trace lacks: on a device
    that emulates FUA (emulated_fua, per device index: a volatile write cache without
    FUA support) a FUA write is flush-sequenced, its data stage ends at a completion of
    its own and its post-flush after it, so its first completion (data_done) comes
    before its last (done). Equal, the kernel delivered only the last (the probe counts
    no loss for it: the request's final completion is there); its device stage then runs
    to the end of its post-flush."""
    if not len(rq.iflags) or not emulated_fua.any():
        return np.zeros(len(rq.dev), bool)
    return (((rq.flags & abi.RQ_FLUSH_SEQ) != 0) & ((rq.iflags & abi.F_FUA) != 0)
            & (rq.nbytes > 0) & (rq.data_done == rq.done) & (rq.done > 0)
            & ((rq.flags & UNOBSERVED) == 0) & emulated_fua[rq.dev])
