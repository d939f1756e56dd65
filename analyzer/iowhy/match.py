"""Per-request derived columns and the interval primitives the analysis is built on.

Everything here is a pure function over numpy arrays: no printing, no trace I/O beyond
pulling columns out of a `Trace`. Times are integer nanoseconds of CLOCK_MONOTONIC;
intervals are half-open, ``[start, end)``.

Per request (definitions used by every report):

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

Grouped interval operations use *keyed time*: ``group * span + (t - origin)`` with span
larger than any time offset, so one sort orders by (group, time) and intervals of
different groups never touch.
"""

from __future__ import annotations

import bisect
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from . import abi
from .classify import CATEGORY_OF_CLASS, DATA, LOG, METADATA

I64 = np.int64
_KEY_LIMIT = 1 << 62


# -- generic helpers ---------------------------------------------------------------------

def key_span(start_ns: int, end_ns: int) -> int:
    """Span for keyed time over [start_ns, end_ns]: every offset is < span."""
    return int(end_ns - start_ns) + 2


def check_keyed(groups: int, span: int) -> None:
    if groups and groups * span >= _KEY_LIMIT:
        raise OverflowError(f"{groups} groups x {span} ns do not fit a 62-bit key")


def select(cond: np.ndarray, a: Any, b: Any) -> np.ndarray:
    """np.where(cond, a, b) for integers, as b + (a - b) * cond: the same values (integer
    arithmetic wraps around exactly) and several times faster on unpredictable
    conditions, where np.where and masked copies branch element by element."""
    out = np.subtract(a, b)
    out *= cond
    out += b
    return out


def unique(x: Any) -> np.ndarray:
    """np.unique of a 1-d array (its distinct values, sorted) by a sort: numpy >= 2.3
    finds them by hashing, several times slower on the arrays met here."""
    s = np.sort(np.asarray(x).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


GATHER_BLOCK = 1 << 16

# np.take(..., out=out) in its default mode ("raise") first copies `out` and writes the
# copy back: on fresh memory, that read maps the zero page and the write back then
# faults again (with a TLB flush on every CPU the process runs on). With indices known
# to be valid, mode="clip" gives the same values without the copy.


def gather(arr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """arr[idx] for int32 (or any) indices: block by block with the indices as int64
    (numpy gathers several times faster with intp indices)."""
    if idx.dtype == np.intp:
        return np.take(arr, idx)
    n = len(idx)
    out = np.empty(n, arr.dtype)
    for a in range(0, n, GATHER_BLOCK):
        b = min(a + GATHER_BLOCK, n)
        np.take(arr, idx[a:b].astype(np.intp), out=out[a:b], mode="clip")
    return out


def union_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [s, e) given sorted by start; returns disjoint sorted intervals.

    Touching intervals ([0,5) and [5,9)) merge. Empty intervals must be removed first.
    """
    n = len(s)
    if n == 0:
        return np.zeros(0, I64), np.zeros(0, I64)
    cm = np.maximum.accumulate(e)
    brk = np.empty(n, dtype=bool)
    brk[0] = True
    np.greater(s[1:], cm[:-1], out=brk[1:])
    first = np.flatnonzero(brk)
    del brk
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = n - 1
    return np.take(s, first), np.take(cm, last)


def union_groups(s: np.ndarray, e: np.ndarray, group: np.ndarray, ngroups: int,
                 block: int = 1 << 16) -> list[tuple[np.ndarray, np.ndarray]]:
    """[union_sorted(s[group == k], e[group == k]) for k in range(ngroups)] of intervals
    sorted by start (none empty), a block at a time: the interval still open at the end
    of a block carries over to the next (small temporaries).

    In a block, one value sort of (group, position) packed in an unsigned int lists the
    positions group by group (faster than a search of each group), so that one gather
    of the starts and one of the ends serve all groups, and the new intervals of all
    groups are found in one pass."""
    starts: list[list[np.ndarray]] = [[] for _ in range(ngroups)]
    ends: list[list[np.ndarray]] = [[] for _ in range(ngroups)]
    carry: list[tuple[int, int] | None] = [None] * ngroups
    n = len(s)
    m = min(block, n)
    pbits = max(1, (m - 1).bit_length())
    kt = np.dtype(np.uint32 if pbits + max(1, (ngroups - 1).bit_length()) <= 32 else np.uint64)
    key: np.ndarray = np.empty(m, kt)
    pos: np.ndarray = np.arange(m, dtype=kt)
    sel = np.empty(m, np.intp)
    new = np.empty(m, bool)
    shift = kt.type(pbits)
    heads = np.left_shift(np.arange(ngroups + 1, dtype=kt), shift)  # where the groups begin
    low = kt.type((1 << pbits) - 1)
    for a in range(0, n, block):
        b = min(a + block, n)
        m = b - a
        kb = key[:m]
        np.copyto(kb, group[a:b], casting="unsafe")
        kb <<= shift
        kb |= pos[:m]
        kb.sort()
        bounds = np.searchsorted(kb, heads).tolist()  # group k: [bounds[k], bounds[k + 1])
        sb = sel[:m]
        np.bitwise_and(kb, low, out=sb, casting="unsafe")
        sk, cm = np.take(s[a:b], sb), np.take(e[a:b], sb)
        # The running max of the ends per group, from the carried interval's end.
        for k in range(ngroups):
            lo, hi = bounds[k], bounds[k + 1]
            if lo < hi:
                ck = cm[lo:hi]
                c = carry[k]
                if c is not None and c[1] > int(ck[0]):
                    ck[0] = c[1]
                np.maximum.accumulate(ck, out=ck)
        nb = new[:m]
        np.greater(sk[1:], cm[:-1], out=nb[1:])
        for k in range(ngroups):
            lo = bounds[k]
            if lo < bounds[k + 1]:
                c = carry[k]
                nb[lo] = c is None or int(sk[lo]) > c[1]
        first = np.flatnonzero(nb)
        fb = np.searchsorted(first, bounds).tolist()  # group k: first[fb[k]:fb[k + 1]]
        fs = np.take(sk, first)
        first -= 1
        fe = np.take(cm, first, mode="clip")  # the end of the interval before each
        for k in range(ngroups):
            lo, hi = bounds[k], bounds[k + 1]
            if lo == hi:
                continue
            i0, i1 = fb[k], fb[k + 1]
            c = carry[k]
            if c is not None:
                if i1 > i0 and first[i0] == lo - 1:  # the carried interval ended before
                    starts[k].append(np.array([c[0]], I64))
                    ends[k].append(np.array([c[1]], I64))
                elif i1 > i0:  # it extends up to the first new interval
                    starts[k].append(np.array([c[0]], I64))
                    ends[k].append(fe[i0:i0 + 1])
                else:  # it extends over the whole block
                    carry[k] = (c[0], int(cm[hi - 1]))
                    continue
            starts[k].append(fs[i0:i1 - 1])
            ends[k].append(fe[i0 + 1:i1])
            carry[k] = (int(fs[i1 - 1]), int(cm[hi - 1]))
    out = []
    for k in range(ngroups):
        c = carry[k]
        if c is not None:
            starts[k].append(np.array([c[0]], I64))
            ends[k].append(np.array([c[1]], I64))
        out.append((np.concatenate(starts[k]) if starts[k] else np.zeros(0, I64),
                    np.concatenate(ends[k]) if ends[k] else np.zeros(0, I64)))
    return out


def sort_with_order(x: np.ndarray, runs: bool = False, overwrite: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(x sorted, the stable order that sorts it) of an integer array.

    When x >= 0 and (value, position) fit 64 bits they are packed in one uint64 (block
    by block: the temporaries stay in cache) and sorted by value, several times faster
    than an argsort; runs=True for data made of a few sorted runs (a stable value sort
    merges them). overwrite=True lets an int64 x hold the packed keys (no copy); x is
    then left undefined.
    """
    n = len(x)
    ibits = max(1, (n - 1).bit_length())
    if n and int(x.min()) >= 0 and int(x.max()).bit_length() + ibits <= 64:
        inplace = overwrite and x.dtype == I64 and x.flags.c_contiguous
        key = x.view(np.uint64) if inplace else np.empty(n, np.uint64)
        shift = np.uint64(ibits)
        for a in range(0, n, SORT_BLOCK):
            b = min(a + SORT_BLOCK, n)
            kb = key[a:b]
            if not inplace:
                np.copyto(kb, x[a:b], casting="unsafe")
            kb <<= shift
            kb |= np.arange(a, b, dtype=np.uint64)
        key.sort(kind="stable" if runs else None)
        order = (key & np.uint64((1 << ibits) - 1)).view(I64)
        key >>= np.uint64(ibits)
        return key.view(I64).astype(x.dtype, copy=False), order
    order = np.argsort(x, kind="stable")
    return x[order], order


SORT_BLOCK = 1 << 16  # values packed at a time by sort_with_order


def union_intervals(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of arbitrary intervals [s, e) (empty ones ignored)."""
    keep = e > s
    if not keep.all():
        sel = np.flatnonzero(keep)
        s, e = s[sel], e[sel]
    del keep
    s, order = sort_with_order(np.asarray(s, dtype=I64))
    return union_sorted(s, e[order])


def merge_unions(a: tuple[np.ndarray, np.ndarray],
                 b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Union of two sorted interval lists as union_sorted returns them (disjoint, none
    touching). Each interval of the shorter takes in the intervals of the longer it
    meets or touches (two binary searches); those are united, and the intervals of the
    longer met by none (which then touch nothing) are placed among them: no pass over the
    longer, only searches in it."""
    if len(a[0]) > len(b[0]):
        a, b = b, a
    if len(a[0]) == 0:
        return b
    bs, be = b
    nb = len(bs)
    # b[lo[i]:hi[i]] meet or touch a[i]: they end at or after its start and start at or
    # before its end (none when hi <= lo).
    lo = np.searchsorted(be, a[0], side="left")
    hi = np.searchsorted(bs, a[1], side="right")
    met = hi > lo
    s = select(met, np.minimum(a[0], np.take(bs, lo, mode="clip")), a[0])
    e = select(met, np.maximum(a[1], np.take(be, hi - 1, mode="clip")), a[1])
    us, ue = union_sorted(s, e)
    del s, e
    # The intervals of b in no such range: lo and hi grow with i, so those from hi[i] up
    # to the next range's lo (the gaps between consecutive ranges, none where they
    # overlap), and those before the first range and after the last.
    m = np.flatnonzero(met)
    gs = np.concatenate(([0], np.take(hi, m)))
    gl = np.concatenate((np.take(lo, m), [nb]))
    gl -= gs
    np.maximum(gl, 0, out=gl)
    off = np.cumsum(gl)
    off -= gl
    gs -= off
    rest = np.repeat(gs, gl)
    rest += np.arange(len(rest))
    del m, gs, gl, off
    rs, re_ = np.take(bs, rest), np.take(be, rest)
    # Where each united interval goes: after the rest of b that start before it and the
    # united ones before it.
    pos = np.searchsorted(rs, us)
    pos += np.arange(len(us))
    n = len(rest) + len(us)
    keep = np.ones(n, bool)
    keep[pos] = False
    out_s = np.empty(n, I64)
    out_e = np.empty(n, I64)
    out_s[pos] = us
    out_e[pos] = ue
    out_s[keep] = rs
    out_e[keep] = re_
    return out_s, out_e


class Coverage:
    """Measure of a set of disjoint sorted intervals inside arbitrary windows."""

    def __init__(self, s: np.ndarray, e: np.ndarray) -> None:
        self.s = np.asarray(s, dtype=I64)
        self.e = np.asarray(e, dtype=I64)
        self.cum = np.zeros(len(self.s) + 1, dtype=I64)
        np.cumsum(self.e - self.s, out=self.cum[1:])
        # The end of the interval before each position: e shifted by one, a time below
        # any met first (so that nothing is cut from the empty set before the first).
        self.prev_e = np.empty(len(self.s) + 1, dtype=I64)
        self.prev_e[0] = -(1 << 62)
        self.prev_e[1:] = self.e

    @property
    def total(self) -> int:
        return int(self.cum[-1])

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Measure of the set inside (-inf, t)."""
        t = np.asarray(t, dtype=I64)
        if len(self.s) == 0:
            return np.zeros(t.shape, I64)
        j = np.searchsorted(self.s, t, side="right")
        # cum[j] minus the part of interval j - 1 at or after t.
        cut = np.take(self.prev_e, j)
        cut -= t
        np.maximum(cut, 0, out=cut)
        out = np.take(self.cum, j)
        out -= cut
        return out

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Measure of the set inside each [a, b) (0 where b <= a)."""
        a = np.asarray(a, dtype=I64)
        b = np.asarray(b, dtype=I64)
        return np.maximum(self.upto(np.maximum(a, b)) - self.upto(a), 0)


def log2_slots(values: np.ndarray) -> np.ndarray:
    """biolatency's log2 slot of each non-negative value: 0 and 1 -> 0, [2^i, 2^(i+1)) -> i."""
    v = np.asarray(values, dtype=I64)
    v = np.maximum(v, 1).astype(np.float64)
    # float log2 is exact at powers of two and monotone, so floor() is the slot.
    return np.floor(np.log2(v)).astype(np.int16)


def log2_hist(values: np.ndarray) -> list[int]:
    """Counts per biolatency log2 slot, trailing empty slots dropped."""
    if len(values) == 0:
        return []
    counts = np.bincount(log2_slots(values))
    nz = np.flatnonzero(counts)
    return counts[: int(nz[-1]) + 1].tolist() if len(nz) else []


def percentiles(values: np.ndarray, qs: Sequence[int] = (50, 99),
                inplace: bool = False) -> dict[str, int | None]:
    """Nearest-rank percentiles (the value at rank ceil(q/100 * n)) and max, as ints.

    Chained in-place partitions (each on the part above the previous rank) are several
    times faster than one np.partition with many kth. `inplace` reorders `values`.
    """
    n = len(values)
    out: dict[str, int | None] = {}
    if n == 0:
        for q in qs:
            out[f"p{q}"] = None
        out["max"] = None
        return out
    arr = values if inplace else np.array(values, copy=True)
    rank = {q: max(0, (q * n + 99) // 100 - 1) for q in qs}
    got: dict[int, int] = {}
    lo = 0
    if n > 4096:
        # Many zeros (queue times of direct issues) make introselect crawl: rank the
        # non-zero values only when zeros are a large share of non-negative data.
        zeros = int(np.count_nonzero(arr == 0))
        if zeros > n // 8 and int(arr.min()) == 0:
            rest = arr[arr != 0]
            for q in qs:
                k = rank[q]
                got[k] = 0 if k < zeros else -1
            pend = sorted({k - zeros for k, v in got.items() if v == -1})
            sub = percentiles_at(rest, pend)
            for k in list(got):
                if got[k] == -1:
                    got[k] = sub[k - zeros]
            for q in qs:
                out[f"p{q}"] = got[rank[q]]
            out["max"] = int(rest.max()) if len(rest) else 0
            return out
    for k in sorted(set(rank.values())):
        part = arr[lo:]
        part.partition(k - lo)
        got[k] = int(arr[k])
        lo = k + 1
    for q in qs:
        out[f"p{q}"] = got[rank[q]]
    out["max"] = int(arr[lo:].max()) if lo < n else got[n - 1]
    return out


def percentiles_at(arr: np.ndarray, ranks: Sequence[int]) -> dict[int, int]:
    """Values at sorted ranks of `arr` (reordered in place) by chained partitions."""
    got: dict[int, int] = {}
    lo = 0
    for k in sorted(set(ranks)):
        arr[lo:].partition(k - lo)
        got[k] = int(arr[k])
        lo = k + 1
    return got


def sorted_percentiles(x: np.ndarray, qs: Sequence[int] = (50, 99)) -> dict[str, int | None]:
    """percentiles() of values already sorted ascending."""
    n = len(x)
    out: dict[str, int | None] = {}
    for q in qs:
        out[f"p{q}"] = int(x[max(0, (q * n + 99) // 100 - 1)]) if n else None
    out["max"] = int(x[-1]) if n else None
    return out


def group_sort(group: np.ndarray, values: np.ndarray, ngroups: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Values sorted within groups, one sort for all groups.

    group: int8 in [0, ngroups]; the value ngroups leaves a value out. values: int64,
    overwritten. Returns (vals, off): group g's values ascending in vals[off[g]:off[g+1]].
    (group, value) is packed in one integer when the values allow: int32 for small
    values (a 32-bit sort is twice as fast), else int64; otherwise a lexsort.
    """
    values *= group != ngroups
    gbits = max(1, int(ngroups).bit_length())
    lo = int(values.min()) if len(values) else 0
    hi = int(values.max()) if len(values) else 0
    starts = np.arange(ngroups + 1, dtype=I64)
    dtype: Any
    for dtype, bits in ((np.int32, 31), (I64, 63)):
        vbits = bits - gbits
        if lo >= 0 and hi < (1 << vbits):
            key: Any = values.astype(dtype) if dtype is np.int32 else values
            g: Any = group.astype(dtype)
            g <<= vbits
            key |= g
            del g
            key.sort()
            off = np.searchsorted(key, (starts << vbits).astype(dtype))
            key &= dtype((1 << vbits) - 1)
            return key, off
    order = np.lexsort((values, group))
    off = np.searchsorted(group[order], starts)
    return values[order], off


# -- trace window --------------------------------------------------------------------------

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


# -- request columns -----------------------------------------------------------------------

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
    keys: list[int] = [(int(d["major"]) << 20) | int(d["minor"])
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
    devices = [(k >> 20, k & 0xFFFFF) for k in keys]

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
    """The device key (major << 20 | minor) of a raw (major, minor) pair value."""
    return ((pair & 0xFFFFFFFF) << 20) | (pair >> 32)


class _DeviceMap:
    """Raw (major, minor) pair -> provisional dense index: the position of its key in
    `keys`, which lists distinct keys in the order they were met (the meta's first)."""

    def __init__(self, meta_keys: list[int]) -> None:
        self.keys: list[int] = []
        self.index: dict[int, int] = {}
        for k in meta_keys:
            self._add(((k & 0xFFFFF) << 32) | (k >> 20))
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


def queue_ns(rq: Requests, sel: np.ndarray | None = None) -> np.ndarray:
    """issue - insert for issued requests (0 for a direct issue); -1 if not issued."""
    issue = rq.issue if sel is None else rq.issue[sel]
    insert = rq.insert if sel is None else rq.insert[sel]
    q = np.where(insert > 0, issue - insert, 0)
    return np.where(issue > 0, np.maximum(q, 0), -1)


def device_ns(rq: Requests, sel: np.ndarray | None = None) -> np.ndarray:
    """Final completion - issue; -1 if not issued."""
    issue = rq.issue if sel is None else rq.issue[sel]
    done = rq.done if sel is None else rq.done[sel]
    return np.where(issue > 0, np.maximum(done - issue, 0), -1)


def total_ns(rq: Requests, sel: np.ndarray | None = None) -> np.ndarray:
    """Final completion - first known start; -1 if no start is known."""
    st = first_start(rq, sel)
    done = rq.done if sel is None else rq.done[sel]
    return np.where(st > 0, np.maximum(done - st, 0), -1)


# Requests whose latencies are not observed: still in flight at the end, first seen at
# completion, or with a final completion never seen.
UNOBSERVED = abi.RQ_INCOMPLETE | abi.RQ_UNMATCHED | abi.RQ_LOST_DONE


def latency_ok(rq: Requests) -> np.ndarray:
    """Requests whose latencies are fully observed (not incomplete, not pre-dating the
    trace, final completion seen)."""
    return (rq.flags & UNOBSERVED) == 0


# -- device stages, issue order, seeks ---------------------------------------------------

@dataclass
class Stages:
    """Device stages sorted by (device, start) in keyed time, plus the issue-order seeks."""

    span: int
    origin: int
    idx: np.ndarray  # request index of each stage, in (device, start) order
    ks: np.ndarray  # keyed start, sorted
    ke: np.ndarray  # keyed end
    seek_idx: np.ndarray  # requests that have a seek distance, in issue order per device
    seek: np.ndarray  # their signed seek distance in sectors
    # Every request with a stage, empty ones included, in (device, start) order; None
    # when no stage was empty (then it is idx).
    all_idx: np.ndarray | None = None
    # seek_idx[seek_bounds[g]:seek_bounds[g + 1]] are device g's (None: not known).
    seek_bounds: np.ndarray | None = None
    # Service time (module doc) of each request of seek_idx (0 for an empty stage).
    seek_service: np.ndarray | None = None
    # The keyed ends sorted (it is ke itself when the stages complete in start order).
    ends_sorted: np.ndarray | None = None
    # Size in bytes of each request of seek_idx (None: not known).
    seek_nbytes: np.ndarray | None = None
    # With the classes (device_stages(cls=...); else None): the category (CATEGORIES)
    # of each stage (as idx), whether each request of issue_order is a locality write,
    # the class of each request of seek_idx.
    stage_cat: np.ndarray | None = None
    loc_writes: np.ndarray | None = None
    seek_cls: np.ndarray | None = None
    # What stage_service needs: (stage position of each request with a seek distance,
    # positions of the non-empty stages or None if all are, number of stages, and
    # (the keys of the ends sorted block by block (_end_keys), None if the ends are in
    # stage order; their index bits), or None if device_stages did not make them).
    _service: tuple[np.ndarray, np.ndarray | None, int,
                    tuple[np.ndarray | None, int] | None] | None = None
    # issue_order[order_bounds[g]:order_bounds[g + 1]] are device g's (None: not known).
    order_bounds: list[int] | None = None
    # Whether every known issue time is inside the window: then the stage order is the
    # issue order (None: not known).
    issue_in_window: bool | None = None

    @property
    def issue_order(self) -> np.ndarray:
        """Requests with a stage (empty ones included) in (device, clipped issue) order."""
        return self.idx if self.all_idx is None else self.all_idx


def device_stages(rq: Requests, window: Window, service: bool = True,
                  cls: np.ndarray | None = None) -> Stages:
    """Device stage of every request (see module doc), sorted by (device, issue).
    service=False leaves the service times and the sorted ends to stage_service().
    With the class of every request (classify), the pass also keeps what the unions,
    locality and per-class figures would gather again: Stages.stage_cat, loc_writes,
    seek_cls."""
    w0, w1 = window.start_ns, window.end_ns
    span = window.span
    ndev = len(rq.devices)
    check_keyed(ndev, span)
    n = len(rq)
    ibits = max(1, (n - 1).bit_length())
    packed = bool(n) and (ndev * span).bit_length() + ibits <= 64
    if packed:
        # (keyed start, request index) packed in one uint64: a value sort orders by
        # start, ties by index (as a stable argsort would), and is several times
        # faster than an argsort. Split into start and index block by block below.
        key, in_window = _stage_keys(rq, w0, w1, span, ibits)
        idx: np.ndarray = np.empty(len(key), np.int32 if ibits <= 31 else I64)
        ks = key.view(I64)
        shift, mask = np.uint64(ibits), np.uint64((1 << ibits) - 1)
    else:
        issue = rq.issue
        in_window = not len(issue) or (int(issue.max()) <= w1 and int(
            np.min(issue, where=issue > 0, initial=w0)) >= w0)
        has = issue > 0
        unmatched = (rq.flags & abi.RQ_UNMATCHED) != 0
        has |= unmatched
        sel = np.flatnonzero(has)
        del has
        ks = np.clip(issue[sel], w0, w1)
        ks -= w0
        ks *= ~(unmatched[sel] & (issue[sel] == 0))  # first seen at completion: the start
        del unmatched
        if ndev > 1:
            ks += rq.dev[sel].astype(I64) * span
        order = np.argsort(ks, kind="stable")
        idx = sel[order].astype(np.int32) if n < (1 << 31) else sel[order]
        ks = ks[order]
        del sel, order
    any_unmatched = bool(np.bitwise_and(rq.flags, abi.RQ_UNMATCHED).any())
    ns = len(idx)
    # Stages are grouped by device: bounds[g] is the first stage of device g.
    if ndev == 1:
        bounds = [0, ns]
    elif packed:
        bounds = np.searchsorted(key, np.arange(ndev + 1, dtype=np.uint64)
                                 * np.uint64(span) << shift).tolist()
    else:
        bounds = np.searchsorted(ks, np.arange(ndev + 1, dtype=I64) * span).tolist()
    ke = np.empty(ns, I64)
    # Seeks: data-bearing reads/writes, in issue order per device. Per device, block by
    # block: the keyed ends, then the seek of each data-bearing request from the end
    # of the previous one on the device (the first of a device has none).
    seek_pos = np.empty(ns, idx.dtype)  # stage positions of the requests with a seek
    seek_idx = np.empty(ns, idx.dtype)
    seek_nb = np.empty(ns, rq.nbytes.dtype)  # and their sizes
    seek: np.ndarray = np.empty(ns, np.int32)
    if cls is not None:
        stage_cat = np.empty(ns, np.int8)  # category of each stage's class
        loc_w = np.empty(ns, bool)  # a locality write (locality)
        seek_cls = np.empty(ns, np.int8)  # class of each request with a seek
        tmp8 = np.empty(min(ns, STAGE_BLOCK), np.uint8)  # scratch of a block
    # The keys service_times sorts to order the ends, made (and sorted block by block)
    # while the ends are in cache.
    ebits = max(1, (ns - 1).bit_length())
    ekey = np.empty(ns, np.uint64) if packed else None
    in_order = True  # the ends so far in stage order, none empty
    last_e = -1  # the previous block's last end
    ne_buf = np.empty(min(ns, STAGE_BLOCK), bool)
    ms = 0  # seeks so far
    n_empty = 0  # empty stages
    per_dev = np.zeros(ndev, I64)  # data-bearing requests per device
    sector, nbytes, op_all = rq.sector, rq.nbytes, rq.op
    for g in range(ndev):
        last_end = None  # end sector of the device's previous data-bearing request
        base = g * span - w0
        for a in range(bounds[g], bounds[g + 1], STAGE_BLOCK):
            b = min(a + STAGE_BLOCK, bounds[g + 1])
            if packed:
                kk = key[a:b]
                ib = np.bitwise_and(kk, mask).view(I64)  # int64 indices: faster gathers
                idx[a:b] = ib
                kk >>= shift
            else:
                ib = idx[a:b].astype(I64)
            op = np.take(op_all, ib)
            # Keyed end: the first completion (the final one for an FF), clipped.
            kb = ke[a:b]
            np.take(rq.data_done, ib, out=kb, mode="clip")
            ff = np.flatnonzero(op == abi.OP_FLUSH)
            if len(ff):
                kb[ff] = np.take(rq.done, np.take(ib, ff))
            np.clip(kb, w0, w1, out=kb)
            kb += base
            ne = np.greater(kb, ks[a:b], out=ne_buf[:b - a])
            kept_b = int(np.count_nonzero(ne))
            if ekey is not None and kept_b:
                first = a - n_empty
                ordered = _end_keys(ekey[first:b], kb, ne, kept_b, first, ebits)
                in_order = in_order and ordered and int(kb[0]) >= last_e
                last_e = int(kb[-1])
            n_empty += b - a - kept_b
            sk = op <= abi.OP_WRITE
            nb = np.take(nbytes, ib)
            sk &= nb > 0
            if any_unmatched:
                sk &= np.take(rq.issue, ib) > 0
            if cls is not None:
                cb = np.take(cls, ib).view(np.uint8)
                cat = stage_cat[a:b].view(np.uint8)
                cat[...] = cb
                t8 = tmp8[:b - a]
                for c, w in _CATEGORY_STEPS:
                    np.greater_equal(cb, c, out=t8.view(bool))
                    if w != 1:
                        t8 *= np.uint8(w & 0xFF)
                    cat -= t8
                lw = loc_w[a:b]
                np.right_shift(_LOCALITY_MASK, cb, out=t8)
                t8 &= np.uint8(1)
                np.logical_and(t8.view(bool), sk, out=lw)
                lw &= op == abi.OP_WRITE
            p = np.flatnonzero(sk)
            if not len(p):
                continue
            per_dev[g] += len(p)
            if last_end is None:  # the device's first: no seek, only its end
                f = np.take(ib, p[:1])
                e = np.take(nbytes, f) + np.uint32(511)
                e >>= np.uint32(9)
                last_end = int(e[0]) + int(sector[f[0]])
                p = p[1:]
                if not len(p):
                    continue
            # Written straight into the outputs where the types allow.
            k = len(p)
            out = slice(ms, ms + k)
            si = np.take(ib, p)
            sec = np.take(sector, si)
            nbp = seek_nb[out]
            np.take(nb, p, out=nbp, mode="clip")
            end = nbp + np.uint32(511)
            end >>= np.uint32(9)
            end = end + sec  # int64: end sector of each
            d = np.empty(k, I64)
            d[0] = int(sec[0]) - last_end
            np.subtract(sec[1:], end[:-1], out=d[1:])
            last_end = int(end[-1])
            if seek.dtype == np.int32 and not (
                    -(1 << 31) < int(d.min()) and int(d.max()) < (1 << 31)):
                seek = seek.astype(I64)  # a seek beyond 32 bits: int64 for all
            seek[out] = d
            seek_idx[out] = si
            if cls is not None:
                np.take(cb, p, out=seek_cls[out].view(np.uint8), mode="clip")
            np.add(p, a, out=seek_pos[out], casting="unsafe")
            ms += k
    seek = seek[:ms]
    seek_idx = seek_idx[:ms]
    seek_pos = seek_pos[:ms]
    seek_nb = seek_nb[:ms]
    if ms == 0:
        seek_idx, seek = np.zeros(0, I64), np.zeros(0, I64)
    seek_bounds = np.zeros(ndev + 1, I64)
    np.cumsum(np.maximum(per_dev - 1, 0), out=seek_bounds[1:])
    all_idx = None
    kept = None
    if n_empty:
        all_idx = idx
        kept = np.flatnonzero(ke > ks)
        idx, ks, ke = np.take(idx, kept), np.take(ks, kept), np.take(ke, kept)
        if cls is not None:
            stage_cat = np.take(stage_cat, kept)
    st = Stages(span=span, origin=w0, idx=idx, ks=ks, ke=ke, seek_idx=seek_idx, seek=seek,
                seek_nbytes=seek_nb,
                all_idx=all_idx, seek_bounds=seek_bounds, order_bounds=bounds,
                issue_in_window=in_window)
    ends = None
    if ekey is not None:
        ends = (None if in_order and not n_empty else ekey[:ns - n_empty], ebits)
    st._service = (seek_pos, kept, ns, ends)
    if cls is not None:
        st.stage_cat, st.loc_writes, st.seek_cls = stage_cat, loc_w, seek_cls[:ms]
    if service:
        stage_service(st)
    return st


def stage_service(st: Stages) -> None:
    """Service times of the requests with a seek distance (Stages.seek_service) and the
    keyed ends sorted (ends_sorted); device_stages(service=False) leaves them to this."""
    if st._service is None:
        return
    seek_pos, kept, ns, ends = st._service
    if ends is None:
        svc, st.ends_sorted = service_times(st.ks, st.ke)
    else:
        svc, st.ends_sorted = _service_sorted(st.ks, st.ke, *ends)
    if kept is not None:
        # Service times of the stages kept, then 0 for the empty ones.
        full = np.zeros(ns, I64)
        full[kept] = svc
        svc = full
        del full
    st.seek_service = gather(svc, seek_pos)
    st._service = None


def service_times(ks: np.ndarray, ke: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(service time of each stage, the keyed ends sorted) for non-empty stages given in
    (device, start) order in keyed time (module doc): ke - max(ks, the previous end in
    completion order), equal ends taken in stage order.

    The first stage of a device has no previous end on it: the previous one in keyed
    time belongs to an earlier device, below the device's keyed origin, so max() ignores
    it. When the ends are already in stage order (a device completing in order), the
    previous end is the previous stage's; else (end, position) packed in one uint64 is
    sorted by value (several times faster than an argsort), and the previous ends are
    scattered back to their stages."""
    n = len(ke)
    if not (ke[1:] < ke[:-1]).any():
        return _service_sorted(ks, ke, None, 0)
    bits = max(1, (n - 1).bit_length())
    if int(ke.max()).bit_length() + bits <= 64:
        key = np.empty(n, np.uint64)
        for a in range(0, n, STAGE_BLOCK):
            b = min(a + STAGE_BLOCK, n)
            _end_keys(key[a:b], ke[a:b], None, b - a, a, bits)
        return _service_sorted(ks, ke, key, bits)
    prev = np.empty(n, I64)
    order = np.argsort(ke, kind="stable")
    ends = ke[order]
    prev[order[1:]] = ends[:-1]
    prev[order[0]] = ks[order[0]]
    del order
    np.maximum(prev, ks, out=prev)
    np.subtract(ke, prev, out=prev)
    return prev, ends


def _end_keys(out: np.ndarray, ke: np.ndarray, ne: np.ndarray | None, kept: int,
              first: int, bits: int) -> bool:
    """The keys (end << bits | position) of a block of stages (ke: their keyed ends) into
    out[:kept], sorted: a stage ends out of start order only by the stages that start
    and end while it is in flight, so the ends are a few positions from their sorted
    place, and blocks sorted while in cache are then merged by a stable sort (timsort)
    almost by copying (_service_sorted). ne: which stages are not empty (None: all);
    the empty ones are left out, the others numbered from `first`. Returns whether the
    ends were already in order (none empty)."""
    key = out[:len(ke)]
    np.left_shift(ke.view(np.uint64), np.uint64(bits), out=key)
    if ne is None or kept == len(ke):
        key |= np.arange(first, first + kept, dtype=np.uint64)
        if not (ke[1:] < ke[:-1]).any():
            return True
    else:
        # Positions among the non-empty stages; the empty ones all ones (sorted last).
        pos = np.cumsum(ne, dtype=np.uint64)
        pos += np.uint64(first)
        pos -= np.uint64(1)
        key |= pos
        np.copyto(key, np.uint64(0xFFFFFFFFFFFFFFFF), where=~ne)
        key.sort()
        return False
    # In parts: several sorts of L1-sized parts are faster than one of the block.
    for h in range(0, len(key), SERVICE_BLOCK):
        key[h:h + SERVICE_BLOCK].sort()
    return False


def _service_sorted(ks: np.ndarray, ke: np.ndarray, key: np.ndarray | None, bits: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """service_times() from the keys of the ends sorted block by block (_end_keys; None
    when the ends are in stage order), which it merges and overwrites."""
    n = len(ke)
    prev = np.empty(n, I64)
    if n == 0:
        return prev, ke
    if key is None:
        prev[0] = ks[0]
        prev[1:] = ke[:-1]
        ends = ke
    else:
        key.sort(kind="stable")
        ends = key.view(I64)
        # prev[order[1:]] = ends[:-1], block by block: the order (int64 indices: faster
        # scatters) and the ends split off the packed keys while in cache.
        shift = np.uint64(bits)
        mask = np.uint64((1 << bits) - 1)
        for a in range(0, n, STAGE_BLOCK):
            b = min(a + STAGE_BLOCK, n)
            kb = key[a:b]
            o = np.bitwise_and(kb, mask).view(I64)
            kb >>= shift
            if a:
                prev[o] = ends[a - 1:b - 1]
            else:
                prev[o[1:]] = ends[:b - 1]
                prev[o[0]] = ks[o[0]]
        del key
    np.maximum(prev, ks, out=prev)
    np.subtract(ke, prev, out=prev)
    return prev, ends


SERVICE_BLOCK = 1 << 11  # end keys sorted at a time before the merge (_end_keys)
STAGE_BLOCK = 1 << 15  # requests per block of _stage_keys (temporaries stay in cache)
# Lookups by class code (a byte) as a few byte operations, several times faster than
# np.take with byte indices: the category of class c is c less the sum of the steps
# (class d, size w) of the table's offsets for d <= c; the locality write classes are
# the bits of a byte mask.
_CATEGORY_STEPS = [(c, int(w)) for c, w in enumerate(np.diff(
    np.arange(len(CATEGORY_OF_CLASS)) - CATEGORY_OF_CLASS, prepend=0).tolist()) if w]
_LOCALITY_MASK = np.uint8((1 << LOG) | (1 << METADATA) | (1 << DATA))


def _stage_keys(rq: Requests, w0: int, w1: int, span: int, ibits: int
                ) -> tuple[np.ndarray, bool]:
    """(keyed start << ibits | request index) as uint64 of every request with a stage,
    sorted; and whether every known issue time is inside the window (none clipped).

    Block by block: the keys of a block are sorted while in cache (those without a stage
    are set to all ones: sorted past its end, then dropped). The requests come in
    completion order, which on a device is close to the issue order, so the sorted
    blocks of a device overlap only at their edges and a stable sort (timsort) merges
    them almost by copying: together faster than one sort of the whole. The first
    device's part of each block is packed in place, the others' are kept aside and
    appended after it (device by device, as the keys order them)."""
    n = len(rq)
    ndev = len(rq.devices)
    key = np.empty(n, np.uint64)
    shift = np.uint64(ibits)
    ns = 0  # keys of the first device packed so far
    rest: list[list[np.ndarray]] = [[] for _ in range(ndev)]  # the others' parts
    # Where each device after the first begins among the keys of a block.
    dev_first = np.arange(1, ndev, dtype=np.uint64) * np.uint64(span) << shift
    inside = True
    dk = np.empty(min(n, STAGE_BLOCK), I64)  # device offsets of a block
    for a in range(0, n, STAGE_BLOCK):
        b = min(a + STAGE_BLOCK, n)
        iss = rq.issue[a:b]
        # Some known issue time outside the window: above w1, or in [1, w0) (one
        # unsigned comparison of iss - 1).
        if inside and (int(iss.max()) > w1 or (w0 > 1 and bool(
                ((iss - 1).view(np.uint64) < np.uint64(w0 - 1)).any()))):
            inside = False
        kb = key[ns:ns + b - a]
        k = kb.view(I64)
        np.clip(iss, w0, w1, out=k)
        k -= w0
        unmatched = (rq.flags[a:b] & abi.RQ_UNMATCHED) != 0
        has = iss > 0
        if unmatched.any():
            k *= ~(unmatched & ~has)  # first seen at completion: from the window start
            has |= unmatched
        if ndev > 1:
            d = dk[:b - a]
            np.multiply(rq.dev[a:b], np.int64(span), out=d)
            k += d
        kb <<= shift
        kb |= np.arange(a, b, dtype=np.uint64)
        # All ones without a stage (few): set on their own.
        none = np.flatnonzero(np.logical_not(has, out=has))
        kb[none] = np.uint64(0xFFFFFFFFFFFFFFFF)
        kb.sort()
        kb = kb[:b - a - len(none)]
        if ndev > 1:
            cut = [0] + np.searchsorted(kb, dev_first).tolist() + [len(kb)]
            for g in range(1, ndev):
                if cut[g + 1] > cut[g]:
                    rest[g].append(kb[cut[g]:cut[g + 1]].copy())
            kb = kb[:cut[1]]
        ns += len(kb)
    for g in range(1, ndev):
        for part in rest[g]:
            key[ns:ns + len(part)] = part
            ns += len(part)
    key = key[:ns]
    key.sort(kind="stable")
    return key, inside


# -- flush generations ---------------------------------------------------------------------

@dataclass
class FlushShare:
    ff_idx: np.ndarray  # request index of each FF (sorted by device, issue)
    ff_ns: np.ndarray  # device time of each FF inside the window
    ff_waiters: np.ndarray  # number of waiting requests per FF
    waiter_idx: np.ndarray  # request index of each flush-sequenced request
    waiter_flush_ns: np.ndarray  # time an FF was in flight while it waited
    pair_waiter: np.ndarray  # (waiter request index, FF position, share ns) per pair
    pair_ff: np.ndarray
    pair_share_ns: np.ndarray
    # The waiting windows [start, end) of the waiters (plain time): the one before each
    # one's data stage, then (after all of those) the one after it.
    wait_windows: tuple[np.ndarray, np.ndarray]


def flush_generations(rq: Requests, window: Window) -> FlushShare:
    """Which FF flushes each flush-sequenced request waited on (see module doc)."""
    w0, w1, span = window.start_ns, window.end_ns, window.span
    ff = np.flatnonzero(rq.op == abi.OP_FLUSH)
    fs = np.clip(rq.issue[ff], w0, w1)
    fe = np.clip(rq.done[ff], w0, w1)
    ok = np.flatnonzero((rq.issue[ff] > 0) & (fe > fs))
    ff, fs, fe = ff[ok], fs[ok], fe[ok]
    fbase = rq.dev[ff].astype(I64) * span - w0
    fks, fke = fs + fbase, fe + fbase
    order = np.argsort(fks, kind="stable")
    ff, fks, fke = ff[order], fks[order], fke[order]
    ff_ns = fke - fks
    # Flush-sequenced requests whose final completion was seen (a lost one has no
    # observed waiting window).
    waiters = np.flatnonzero(((rq.flags & (abi.RQ_FLUSH_SEQ | abi.RQ_LOST_DONE))
                              == abi.RQ_FLUSH_SEQ) & (rq.op != abi.OP_FLUSH))
    # Two waiting windows per request: before its data stage and after it.
    ws = np.clip(first_start(rq, waiters), w0, w1)
    we = np.clip(rq.done[waiters], w0, w1)
    iss = rq.issue[waiters]
    issued = iss > 0
    ds = np.clip(select(issued, iss, we), ws, we)
    de = np.clip(select(issued, rq.data_done[waiters], we), ds, we)
    del iss, issued
    windows = (np.concatenate((ws, de)), np.concatenate((ds, we)))
    del ws, we, ds, de
    empty = np.zeros(0, I64)
    if len(ff) == 0 or len(waiters) == 0:
        return FlushShare(ff, ff_ns, np.zeros(len(ff), I64), waiters,
                          np.zeros(len(waiters), I64), empty, empty, empty, windows)
    # The windows in keyed time.
    wbase = rq.dev[waiters].astype(I64) * span - w0
    wbase = np.concatenate((wbase, wbase))
    a = windows[0] + wbase
    b = windows[1] + wbase
    del wbase
    owner = np.concatenate((np.arange(len(waiters)), np.arange(len(waiters))))
    cm = np.maximum.accumulate(fke)
    lo = np.searchsorted(cm, a, side="right")
    hi = np.searchsorted(fks, b, side="left")
    # flush_wait per waiter: FF union inside its two windows.
    wait = _ff_wait(fks, fke, cm, a, b, lo, hi)
    wait = wait[:len(waiters)] + wait[len(waiters):]
    cnt = hi - lo
    cnt *= b > a  # an empty window meets no FF
    np.maximum(cnt, 0, out=cnt)
    tot = int(cnt.sum())
    # Candidate pairs: window rep meets FF pf, for pf in lo..hi-1.
    rep = np.repeat(np.arange(len(a)), cnt)
    start = np.cumsum(cnt)
    start -= cnt
    lo -= start
    pf = np.repeat(lo, cnt)
    pf += np.arange(tot)
    del start, lo, hi, cnt
    # They overlap when each starts before the other ends (both are non-empty).
    good = np.take(b, rep) > np.take(fks, pf)
    good &= np.take(a, rep) < np.take(fke, pf)
    sel = np.flatnonzero(good)
    del good
    rep, pf = np.take(rep, sel), np.take(pf, sel)
    pw = np.take(owner, rep)
    del rep, sel
    # A waiter may meet the same FF in both windows only if the FF spans its data stage;
    # count the pair once. Pairs in (FF, waiter) order; waiters are in request order.
    wbits = max(1, (len(waiters) - 1).bit_length())
    if len(ff).bit_length() + wbits <= 63:
        # (FF, waiter) packed in one int64: one value sort orders and deduplicates.
        key = pf.astype(I64) << wbits
        key |= pw
        key.sort()
        if len(key) > 1:
            new = np.empty(len(key), bool)
            new[0] = True
            np.not_equal(key[1:], key[:-1], out=new[1:])
            key = np.take(key, np.flatnonzero(new))
            del new
        pf_u = key >> wbits
        pw_u = key & ((1 << wbits) - 1)
        del key
    else:
        pair_key = pw.astype(I64) * len(ff) + pf
        uk, first = np.unique(pair_key, return_index=True)
        pw_u, pf_u = pw[first], pf[first]
        o = np.lexsort((waiters[pw_u], pf_u))
        pw_u, pf_u = pw_u[o], pf_u[o]
    del pw, pf
    n_w = np.bincount(pf_u, minlength=len(ff)).astype(I64)
    # Equal integer shares; the first (ff_ns % n) waiters (by request index) get +1.
    # rank: position of the pair among its FF's (runs of equal pf_u).
    pos = np.arange(len(pf_u))
    run_start = np.zeros(len(pf_u), I64)
    if len(pf_u) > 1:
        new_run = np.flatnonzero(pf_u[1:] != pf_u[:-1]) + 1
        run_start[new_run] = new_run
        np.maximum.accumulate(run_start, out=run_start)
    rank = pos - run_start
    del pos, run_start
    nn = np.take(n_w, pf_u)
    fn = np.take(ff_ns, pf_u)
    share, rem = np.divmod(fn, nn)
    share += rank < rem
    return FlushShare(ff, ff_ns, n_w, waiters, wait, np.take(waiters, pw_u), pf_u,
                      share.astype(I64), windows)


def _ff_wait(fks: np.ndarray, fke: np.ndarray, cm: np.ndarray, a: np.ndarray,
             b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Measure of the union of the FFs [fks, fke) (sorted by start; cm: the running max
    of fke) inside each window [a, b), from the positions the pair search found: lo, the
    FFs that end by a (cm <= a); hi, those that start before b. Before b, the measure is
    that of the union of the first hi FFs (U[hi]) less its part after b (of the
    component that ends at cm[hi - 1]); before a, that of the first lo FFs (which all
    end by a) plus the part of [fks[lo], a) FF lo (which ends after a) adds to them. No
    search of the union itself."""
    n = len(fks)
    # U[i], and cm[i - 1] and fks[i] with a time below or above any at either end.
    u = np.zeros(n + 1, I64)
    prev = np.empty(n + 1, I64)
    prev[0] = -(1 << 62)
    prev[1:] = cm
    np.maximum(fks, prev[:-1], out=u[1:])
    np.subtract(fke, u[1:], out=u[1:])
    np.maximum(u[1:], 0, out=u[1:])
    np.cumsum(u[1:], out=u[1:])
    nxt = np.empty(n + 1, I64)
    nxt[:-1] = fks
    nxt[-1] = 1 << 62
    # Up to b: U[hi] - max(cm[hi - 1] - b, 0).
    cut = np.take(prev, hi)
    cut -= b
    np.maximum(cut, 0, out=cut)
    out = np.take(u, hi)
    out -= cut
    # Up to a: U[lo] + max(a - max(fks[lo], cm[lo - 1]), 0).
    np.maximum(np.take(nxt, lo), np.take(prev, lo), out=cut)
    np.subtract(a, cut, out=cut)
    np.maximum(cut, 0, out=cut)
    out -= cut
    out -= np.take(u, lo)
    np.maximum(out, 0, out=out)  # an empty window (b <= a)
    return out


# -- request -> call join ------------------------------------------------------------------

def join_calls(req_tid: np.ndarray, req_t: np.ndarray, call_tid: np.ndarray,
               call_enter: np.ndarray, call_exit: np.ndarray,
               sel: np.ndarray | None = None) -> np.ndarray:
    """Index of the call (same tid, enter <= t <= exit) each request falls in, else -1.

    Calls of one thread never overlap (a thread runs one syscall at a time).
    `sel` restricts the search to some requests (others get -1).
    """
    out = np.full(len(req_tid), -1, np.int32)
    ri, rc = join_pairs(req_tid, req_t, call_tid, call_enter, call_exit, sel)
    out[ri] = rc
    return out


def join_pairs(req_tid: np.ndarray, req_t: np.ndarray, call_tid: np.ndarray,
               call_enter: np.ndarray, call_exit: np.ndarray,
               sel: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """join_calls() as (indices of the requests in a call, ascending; their call)."""
    n = len(req_tid)
    none = (np.zeros(0, I64), np.zeros(0, np.int32))
    if len(call_tid) == 0 or n == 0:
        return none
    utids = unique(call_tid)
    small = np.int8 if len(utids) < 128 else np.int16 if len(utids) < 32768 else np.int32
    top = int(utids.max())
    table = None
    if top < (1 << 23) and utids.min() >= 0:
        # tid -> dense index through a lookup table (tids are small: pid_max <= 2^22).
        table = np.full(top + 2, -1, small)
        table[utids] = np.arange(len(utids), dtype=small)
    # Calls keyed by (thread, enter) over the span of their times, lo..hi with a time
    # to spare on either side: a request time outside it is clipped to one of those,
    # where no call holds it (so the keys need no pass over the requests first).
    ce = np.asarray(call_enter, dtype=I64)
    cxr = np.maximum(np.asarray(call_exit, dtype=I64), ce)
    lo, hi = int(ce.min()) - 1, int(cxr.max()) + 1
    span = hi - lo + 1
    check_keyed(len(utids), span)
    ctid = np.searchsorted(utids, call_tid).astype(I64)
    ck = ctid * span + (ce - lo)
    cx = ctid * span + (cxr - lo)
    del ctid, cxr
    ck, co = sort_with_order(ck)
    # One slot past the calls: a key above any request's (the steps below stop there),
    # and the exit (below any key) and call read at position -1 (no call before).
    cx = np.append(np.take(cx, co), -2)
    co = np.append(co, -1).astype(np.int32)
    nkeys = len(utids) * span
    # The number of calls keyed before each bucket of 2^shift keys (about as many
    # buckets as calls; one more in front for the keys -1 of requests of no call): a
    # request's call is found from its bucket's first call in a step or two instead of
    # a binary search over all calls (and in any order: no sort of the requests).
    shift = max(0, (nkeys // len(ck)).bit_length() - 1)
    nb = ((nkeys - 1) >> shift) + 1
    first = np.zeros(nb + 1, np.intp)
    np.cumsum(np.bincount(ck >> shift, minlength=nb)[:-1], out=first[2:])
    ckp = np.append(ck, np.iinfo(I64).max)
    found_r, found_c = [], []
    for a in range(0, n, JOIN_BLOCK):
        b = min(a + JOIN_BLOCK, n)
        c = np.arange(a, b) if sel is None else np.flatnonzero(sel[a:b])
        if sel is not None:
            c += a
        rt = np.take(req_tid, c)
        if table is not None:
            np.minimum(rt, top + 1, out=rt)
            ti = np.take(table, rt)
        else:
            rt64 = rt.astype(I64)
            ti = np.searchsorted(utids, rt64).astype(small)
            ti[ti >= len(utids)] = 0
            ti = np.where(utids[ti] == rt64, ti, -1).astype(small)
        del rt
        rk = np.take(req_t, c).astype(I64, copy=False)
        # Requests of no call thread or without a time: key -1, before every call.
        ti[rk <= 0] = -1
        np.clip(rk, lo, hi, out=rk)
        rk -= lo
        rk += ti.astype(I64) * span
        del ti
        np.maximum(rk, -1, out=rk)
        q = rk >> shift
        q += 1
        # The number of calls keyed at or before each request: step over the calls of
        # its bucket (few) up to it; a binary search for those still stepping after
        # JOIN_STEPS.
        cnt = np.take(first, q)
        del q
        act = np.flatnonzero(np.take(ckp, cnt) <= rk)
        for _ in range(JOIN_STEPS):
            if not len(act):
                break
            cnt[act] += 1
            act = np.take(act, np.flatnonzero(np.take(ckp, np.take(cnt, act))
                                              <= np.take(rk, act)))
        if len(act):
            cnt[act] = np.searchsorted(ck, np.take(rk, act), side="right")
        # The last of those, if the request is before its exit, is the request's call.
        cnt -= 1
        hit = np.flatnonzero(rk <= np.take(cx, cnt))
        found_c.append(np.take(co, np.take(cnt, hit)))
        found_r.append(np.take(c, hit))
    ri = np.concatenate(found_r)
    rc = np.concatenate(found_c)
    return ri, rc


JOIN_BLOCK = 1 << 17  # requests joined at a time
JOIN_STEPS = 8  # steps within a bucket before a binary search
