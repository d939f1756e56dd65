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

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import abi

I64 = np.int64
_KEY_LIMIT = 1 << 62


# -- generic helpers ---------------------------------------------------------------------

def key_span(start_ns: int, end_ns: int) -> int:
    """Span for keyed time over [start_ns, end_ns]: every offset is < span."""
    return int(end_ns - start_ns) + 2


def check_keyed(groups: int, span: int) -> None:
    if groups and groups * span >= _KEY_LIMIT:
        raise OverflowError(f"{groups} groups x {span} ns do not fit a 62-bit key")


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
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = n - 1
    return s[first], cm[last]


def union_intervals(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of arbitrary intervals [s, e) (empty ones ignored)."""
    keep = e > s
    s, e = s[keep], e[keep]
    order = np.argsort(s, kind="stable")
    return union_sorted(s[order], e[order])


def merge_unions(a: tuple[np.ndarray, np.ndarray],
                 b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Union of two disjoint sorted interval lists (a linear merge via a stable sort)."""
    if len(a[0]) == 0:
        return b
    if len(b[0]) == 0:
        return a
    s = np.concatenate((a[0], b[0]))
    e = np.concatenate((a[1], b[1]))
    order = np.argsort(s, kind="stable")  # two sorted runs: timsort merges them
    return union_sorted(s[order], e[order])


class Coverage:
    """Measure of a set of disjoint sorted intervals inside arbitrary windows."""

    def __init__(self, s: np.ndarray, e: np.ndarray) -> None:
        self.s = np.asarray(s, dtype=I64)
        self.e = np.asarray(e, dtype=I64)
        self.cum = np.zeros(len(self.s) + 1, dtype=I64)
        np.cumsum(self.e - self.s, out=self.cum[1:])

    @property
    def total(self) -> int:
        return int(self.cum[-1])

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Measure of the set inside (-inf, t)."""
        t = np.asarray(t, dtype=I64)
        j = np.searchsorted(self.s, t, side="right")
        jm = np.maximum(j - 1, 0)
        if len(self.s) == 0:
            return np.zeros(t.shape, I64)
        out = self.cum[j] - np.maximum(self.e[jm] - t, 0)
        return np.where(j > 0, out, 0)

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
    done: np.ndarray  # final completion, clipped to the window end if incomplete
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


def load_requests(trace: Any, window: Window) -> Requests:
    """Pull the request columns out of a trace and normalise them (see module doc).

    One pass over the mapped records, a cache-sized slice at a time: fields are copied,
    the device is mapped to a dense index and unknown times are fixed while the slice
    is hot.
    """
    views = trace.chunks("request")
    n = sum(len(v) for v in views)
    cols = {f: np.empty(n, dtype=abi.REQUEST_DTYPE[f]) for f in REQUEST_FIELDS
            if f not in ("dev_major", "dev_minor")}
    dev = np.empty(n, dtype=np.int32)
    keys: list[int] = [(int(d["major"]) << 20) | int(d["minor"])
                       for d in trace.meta.get("devices", []) or []
                       if d.get("major") is not None and d.get("minor") is not None]
    end = np.uint64(window.end_ns)
    fixed = ("done_ns", "data_done_ns", "flags_u16")
    off = 0
    for v in views:
        for i in range(0, len(v), SUBCHUNK):
            w = v[i:i + SUBCHUNK]
            m = len(w)
            sl = slice(off, off + m)
            for f in cols:
                if f not in fixed:
                    cols[f][sl] = w[f]
            fl = w["flags_u16"]
            cols["flags_u16"][sl] = fl
            done = w["done_ns"].copy()
            done[(done == 0) | ((fl & abi.RQ_INCOMPLETE) != 0)] = end
            np.minimum(done, end, out=done)
            cols["done_ns"][sl] = done
            dd = w["data_done_ns"].copy()
            bad = (dd == 0) | (dd > done)
            dd[bad] = done[bad]
            cols["data_done_ns"][sl] = dd
            dk = (w["dev_major"].astype(I64) << 20) | w["dev_minor"]
            _map_devices(dk, keys, dev[sl])
            off += m
    # Devices in (major, minor) order, whatever order they were first met in.
    order = sorted(range(len(keys)), key=lambda k: keys[k])
    if order != list(range(len(keys))):
        remap = np.empty(len(keys), np.int32)
        remap[order] = np.arange(len(keys), dtype=np.int32)
        dev = remap[dev]
    devices = [(keys[k] >> 20, keys[k] & 0xFFFFF) for k in order]

    def i64(name: str) -> np.ndarray:
        return cols[name].view(I64)
    return Requests(submit=i64("submit_ns"), insert=i64("insert_ns"), issue=i64("issue_ns"),
                    data_done=i64("data_done_ns"), done=i64("done_ns"),
                    sector=i64("start_sector"), nbytes=cols["len_bytes"], dev=dev,
                    devices=devices, op=cols["op"], iflags=cols["iflags"],
                    flags=cols["flags_u16"], tid=cols["tid"])


def _map_devices(dk: np.ndarray, keys: list[int], out: np.ndarray) -> None:
    """Dense device index of each key into `out`; unseen keys are appended to `keys`."""
    if len(dk) == 0:
        return
    first = int(dk[0])
    if first in keys and (dk == first).all():
        out[:] = keys.index(first)
        return
    out[:] = -1
    for k in np.unique(dk).tolist():
        if k not in keys:
            keys.append(k)
        out[dk == k] = keys.index(k)


def first_start(rq: Requests, sel: np.ndarray | None = None) -> np.ndarray:
    """submit, else insert, else issue (0 if none is known), for all or `sel` requests."""
    sub = rq.submit if sel is None else rq.submit[sel]
    ins = rq.insert if sel is None else rq.insert[sel]
    iss = rq.issue if sel is None else rq.issue[sel]
    s = np.where(sub > 0, sub, ins)
    return np.where(s > 0, s, iss)


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


def latency_ok(rq: Requests) -> np.ndarray:
    """Requests whose latencies are fully observed (not incomplete, not pre-dating the trace)."""
    return (rq.flags & (abi.RQ_INCOMPLETE | abi.RQ_UNMATCHED)) == 0


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


def device_stages(rq: Requests, window: Window) -> Stages:
    """Device stage of every request (see module doc), sorted by (device, issue)."""
    w0, w1 = window.start_ns, window.end_ns
    span = window.span
    ndev = len(rq.devices)
    check_keyed(ndev, span)
    issue = rq.issue
    has = issue > 0
    unmatched = (rq.flags & abi.RQ_UNMATCHED) != 0
    any_unmatched = bool(unmatched.any())
    if any_unmatched:
        has |= unmatched
    idx = np.flatnonzero(has)
    del has
    s = np.clip(issue[idx], w0, w1)
    if any_unmatched:
        s[(issue[idx] == 0) & unmatched[idx]] = w0
    del unmatched
    e = rq.data_done[idx]
    ff = np.flatnonzero(rq.op[idx] == abi.OP_FLUSH)
    e[ff] = rq.done[idx[ff]]
    np.clip(e, w0, w1, out=e)
    e -= s  # duration
    s -= w0
    if ndev > 1:
        s += rq.dev[idx].astype(I64) * span
    order = np.argsort(s, kind="stable")
    idx = idx[order].astype(np.int32) if len(rq) < (1 << 31) else idx[order]
    ks = s[order]
    del s
    ke = ks + e[order]
    del e, order
    # Seeks: data-bearing reads/writes, in issue order per device.
    sk = rq.op[idx] <= abi.OP_WRITE
    nb = rq.nbytes[idx]
    sk &= nb > 0
    if any_unmatched:
        sk &= rq.issue[idx] > 0
    sidx = idx[sk]
    nsec = (nb[sk] + np.uint32(511)) >> np.uint32(9)
    del nb, sk
    if len(sidx) > 1:
        sec = rq.sector[sidx]
        seek = sec[1:] - sec[:-1]
        seek -= nsec[:-1]
        del sec
        seek_idx = sidx[1:]
        if len(seek) and int(np.abs(seek).max()) < (1 << 31):
            seek = seek.astype(np.int32)
        if ndev > 1:
            d = rq.dev[sidx]
            same = d[1:] == d[:-1]
            seek_idx, seek = seek_idx[same], seek[same]
    else:
        seek_idx, seek = np.zeros(0, I64), np.zeros(0, I64)
    keep = ke > ks
    if not keep.all():
        idx, ks, ke = idx[keep], ks[keep], ke[keep]
    return Stages(span=span, origin=w0, idx=idx, ks=ks, ke=ke, seek_idx=seek_idx, seek=seek)


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


def flush_generations(rq: Requests, window: Window) -> FlushShare:
    """Which FF flushes each flush-sequenced request waited on (see module doc)."""
    w0, w1, span = window.start_ns, window.end_ns, window.span
    ff = np.flatnonzero(rq.op == abi.OP_FLUSH)
    fs = np.clip(rq.issue[ff], w0, w1)
    fe = np.clip(rq.done[ff], w0, w1)
    ok = (rq.issue[ff] > 0) & (fe > fs)
    ff, fs, fe = ff[ok], fs[ok], fe[ok]
    fbase = rq.dev[ff].astype(I64) * span - w0
    fks, fke = fs + fbase, fe + fbase
    order = np.argsort(fks, kind="stable")
    ff, fks, fke = ff[order], fks[order], fke[order]
    ff_ns = fke - fks
    waiters = np.flatnonzero(((rq.flags & abi.RQ_FLUSH_SEQ) != 0) & (rq.op != abi.OP_FLUSH))
    empty = np.zeros(0, I64)
    if len(ff) == 0 or len(waiters) == 0:
        return FlushShare(ff, ff_ns, np.zeros(len(ff), I64), waiters,
                          np.zeros(len(waiters), I64), empty, empty, empty)
    wbase = rq.dev[waiters].astype(I64) * span - w0
    ws = np.clip(first_start(rq, waiters), w0, w1) + wbase
    we = np.clip(rq.done[waiters], w0, w1) + wbase
    issued = rq.issue[waiters] > 0
    ds = np.where(issued, np.clip(rq.issue[waiters], w0, w1) + wbase, we)
    de = np.where(issued, np.clip(rq.data_done[waiters], w0, w1) + wbase, we)
    ds = np.clip(ds, ws, we)
    de = np.clip(de, ds, we)
    # Two waiting windows per request: before its data stage and after it.
    a = np.concatenate((ws, de))
    b = np.concatenate((ds, we))
    owner = np.concatenate((np.arange(len(waiters)), np.arange(len(waiters))))
    cm = np.maximum.accumulate(fke)
    lo = np.searchsorted(cm, a, side="right")
    hi = np.searchsorted(fks, b, side="left")
    cnt = np.maximum(hi - lo, 0)
    tot = int(cnt.sum())
    rep = np.repeat(np.arange(len(a)), cnt)
    offs = np.arange(tot) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pf = np.repeat(lo, cnt) + offs
    ov = np.minimum(b[rep], fke[pf]) - np.maximum(a[rep], fks[pf])
    good = ov > 0
    rep, pf, ov = rep[good], pf[good], ov[good]
    pw = owner[rep]
    # A waiter may meet the same FF in both windows only if the FF spans its data stage;
    # count the pair once.
    pair_key = pw.astype(I64) * len(ff) + pf
    uk, first = np.unique(pair_key, return_index=True)
    pw_u, pf_u = pw[first], pf[first]
    # flush_wait per waiter: FF union inside its two windows.
    fu = Coverage(*union_sorted(fks, fke))
    wait = fu.within(ws, ds) + fu.within(de, we)
    n_w = np.bincount(pf_u, minlength=len(ff)).astype(I64)
    # Equal integer shares; the first (ff_ns % n) waiters (by request index) get +1.
    o = np.lexsort((waiters[pw_u], pf_u))
    pw_u, pf_u = pw_u[o], pf_u[o]
    rank = np.arange(len(pf_u)) - np.searchsorted(pf_u, pf_u, side="left")
    nn = n_w[pf_u]
    share = ff_ns[pf_u] // nn + (rank < (ff_ns[pf_u] % nn))
    return FlushShare(ff, ff_ns, n_w, waiters, wait, waiters[pw_u], pf_u, share.astype(I64))


# -- request -> call join ------------------------------------------------------------------

def join_calls(req_tid: np.ndarray, req_t: np.ndarray, call_tid: np.ndarray,
               call_enter: np.ndarray, call_exit: np.ndarray,
               sel: np.ndarray | None = None) -> np.ndarray:
    """Index of the call (same tid, enter <= t <= exit) each request falls in, else -1.

    Calls of one thread never overlap (a thread runs one syscall at a time).
    `sel` restricts the search to some requests (others get -1).
    """
    n = len(req_tid)
    out = np.full(n, -1, np.int32)
    if len(call_tid) == 0 or n == 0:
        return out
    utids = np.unique(call_tid)
    cands = np.arange(n) if sel is None else np.flatnonzero(sel)
    top = int(utids.max())
    if top < (1 << 23) and utids.min() >= 0:
        # tid -> dense index through a lookup table (tids are small: pid_max <= 2^22).
        table = np.full(top + 2, -1, np.int32)
        table[utids] = np.arange(len(utids), dtype=np.int32)
        ti = table[np.minimum(req_tid[cands], top + 1)]
    else:
        rt = req_tid[cands].astype(I64)
        ti = np.searchsorted(utids, rt).astype(np.int32)
        ti[ti >= len(utids)] = 0
        ti = np.where(utids[ti] == rt, ti, -1).astype(np.int32)
        del rt
    m = ti >= 0
    cands, ti = cands[m], ti[m]
    tt = req_t[cands].astype(I64)
    m = tt > 0
    cands, ti, tt = cands[m], ti[m], tt[m]
    del m
    if not len(cands):
        return out
    # Raw times (not clipped to the window): keyed over the span they cover.
    ce = np.asarray(call_enter, dtype=I64)
    cxr = np.maximum(np.asarray(call_exit, dtype=I64), ce)
    w0 = min(int(ce.min()), int(tt.min()))
    span = max(int(cxr.max()), int(tt.max())) - w0 + 2
    check_keyed(len(utids), span)
    ctid = np.searchsorted(utids, call_tid).astype(I64)
    ck = ctid * span + (ce - w0)
    cx = ctid * span + (cxr - w0)
    co = np.argsort(ck, kind="stable")
    ck, cx = ck[co], cx[co]
    # Search in tid-major order so the needles are nearly sorted (fast binary search).
    if len(utids) < 32768:
        o = np.argsort(ti.astype(np.int16), kind="stable")
    else:
        o = np.argsort(ti, kind="stable")
    cands = cands[o]
    rk = ti[o].astype(I64)
    del ti
    rk *= span
    rk += tt[o]
    del tt, o
    rk -= w0
    pos = np.searchsorted(ck, rk, side="right")
    pos -= 1
    ok = pos >= 0
    np.maximum(pos, 0, out=pos)
    ok &= rk <= cx[pos]
    del rk
    out[cands] = np.where(ok, co[pos], -1)
    return out
