"""Device stages, service times and seek distances of the requests, per device
(definitions in model/requests.py's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import abi
from ..kernels import I64, check_keyed, gather
from .classify import CATEGORY_OF_CLASS, DATA, LOG, METADATA
from .requests import Requests, Window


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
    seek_cls.

    One pass over the stages in (device, start) order, block by block (STAGE_BLOCK):
    each block's keyed ends, classes and seeks are made while in cache; what runs from
    block to block (the outputs written so far) is a _StagePass, and the end sector of
    the device's previous data-bearing request is handed from one block to the next."""
    w0, w1 = window.start_ns, window.end_ns
    span = window.span
    ndev = len(rq.devices)
    check_keyed(ndev, span)
    n = len(rq)
    ibits = max(1, (n - 1).bit_length())
    packed = bool(n) and (ndev * span).bit_length() + ibits <= 64
    key: np.ndarray | None = None
    if packed:
        # (keyed start, request index) packed in one uint64: a value sort orders by
        # start, ties by index (as a stable argsort would), and is several times
        # faster than an argsort. Split into start and index block by block below.
        key, in_window = _stage_keys(rq, w0, w1, span, ibits)
        idx: np.ndarray = np.empty(len(key), np.int32 if ibits <= 31 else I64)
        ks = key.view(I64)  # the keyed starts once _block_indices has split each block
    else:
        idx, ks, in_window = _stage_starts(rq, w0, w1, span)
    any_unmatched = bool(np.bitwise_and(rq.flags, abi.RQ_UNMATCHED).any())
    bounds = _device_bounds(key, ks, ndev, span, ibits)
    ps = _StagePass.start(len(idx), idx.dtype, rq.nbytes.dtype, ndev, cls is not None,
                          packed)
    for g in range(ndev):
        last_end = None  # end sector of the device's previous data-bearing request
        base = g * span - w0
        for a in range(bounds[g], bounds[g + 1], STAGE_BLOCK):
            b = min(a + STAGE_BLOCK, bounds[g + 1])
            ib = _block_indices(key, idx, a, b, ibits)
            op = np.take(rq.op, ib)
            _block_ends(ps, rq, ib, op, ks[a:b], a, w0, w1, base)
            sk, nb = _seekable(rq, ib, op, any_unmatched)
            cb = None if cls is None else _block_classes(ps, cls, ib, op, sk, a)
            last_end = _block_seeks(ps, rq, ib, sk, nb, cb, a, g, last_end)
    st = _stages_of(ps, idx, ks, span, w0, bounds, in_window)
    if service:
        stage_service(st)
    return st


@dataclass
class _StagePass:
    """device_stages' outputs written block by block, in stage order (ke, stage_cat,
    loc_w) or in the order of the requests with a seek (the seek_ columns, first ms),
    and what runs from block to block."""

    ke: np.ndarray  # keyed end of each stage
    seek_pos: np.ndarray  # stage positions of the requests with a seek
    seek_idx: np.ndarray  # their request indices
    seek_nb: np.ndarray  # and their sizes
    seek: np.ndarray  # their seeks: int32 until one needs more (then int64 for all)
    ekey: np.ndarray | None  # the end keys (_end_keys) of the non-empty stages, if packed
    ebits: int  # bits of a stage position in an end key
    ne_buf: np.ndarray  # scratch of a block: which stages are not empty
    per_dev: np.ndarray  # data-bearing requests per device
    stage_cat: np.ndarray | None = None  # category of each stage's class (with classes)
    loc_w: np.ndarray | None = None  # whether each stage is a locality write
    seek_cls: np.ndarray | None = None  # class of each request with a seek
    tmp8: np.ndarray | None = None  # scratch of a block (with classes)
    in_order: bool = True  # the ends so far in stage order, none empty
    last_e: int = -1  # the previous block's last end
    ms: int = 0  # seeks so far
    n_empty: int = 0  # empty stages so far

    @classmethod
    def start(cls, ns: int, idx_type: np.dtype, nb_type: np.dtype, ndev: int,
              classes: bool, packed: bool) -> _StagePass:
        """Empty outputs for ns stages (end keys only when packed)."""
        ps = cls(ke=np.empty(ns, I64), seek_pos=np.empty(ns, idx_type),
                 seek_idx=np.empty(ns, idx_type), seek_nb=np.empty(ns, nb_type),
                 seek=np.empty(ns, np.int32),
                 # The keys service_times sorts to order the ends, made (and sorted
                 # block by block) while the ends are in cache.
                 ekey=np.empty(ns, np.uint64) if packed else None,
                 ebits=max(1, (ns - 1).bit_length()),
                 ne_buf=np.empty(min(ns, STAGE_BLOCK), bool), per_dev=np.zeros(ndev, I64))
        if classes:
            ps.stage_cat = np.empty(ns, np.int8)
            ps.loc_w = np.empty(ns, bool)
            ps.seek_cls = np.empty(ns, np.int8)
            ps.tmp8 = np.empty(min(ns, STAGE_BLOCK), np.uint8)
        return ps


def _stage_starts(rq: Requests, w0: int, w1: int, span: int
                  ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(request index, keyed start) of every request with a stage in (device, start)
    order, ties by index, by a stable argsort (when a start and an index do not fit one
    uint64 key); and whether every known issue time is inside the window."""
    n = len(rq)
    ndev = len(rq.devices)
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
    return idx, ks, in_window


def _device_bounds(key: np.ndarray | None, ks: np.ndarray, ndev: int, span: int,
                   ibits: int) -> list[int]:
    """Stages are grouped by device: bounds[g] is the first stage of device g (g < ndev),
    bounds[ndev] their number; from the packed keys (key) if any, else the keyed starts."""
    if ndev == 1:
        return [0, len(ks)]
    if key is not None:
        return np.searchsorted(key, np.arange(ndev + 1, dtype=np.uint64)
                               * np.uint64(span) << np.uint64(ibits)).tolist()
    return np.searchsorted(ks, np.arange(ndev + 1, dtype=I64) * span).tolist()


def _block_indices(key: np.ndarray | None, idx: np.ndarray, a: int, b: int, ibits: int
                   ) -> np.ndarray:
    """The request indices (int64: faster gathers) of stages [a, b). Packed keys are
    split here: the indices into idx[a:b], the key left as the keyed start."""
    if key is None:
        return idx[a:b].astype(I64)
    kk = key[a:b]
    ib = np.bitwise_and(kk, np.uint64((1 << ibits) - 1)).view(I64)
    idx[a:b] = ib
    kk >>= np.uint64(ibits)
    return ib


def _block_ends(ps: _StagePass, rq: Requests, ib: np.ndarray, op: np.ndarray,
                ksb: np.ndarray, a: int, w0: int, w1: int, base: int) -> None:
    """Keyed ends of stages [a, a + len(ib)) (ksb: their keyed starts) into ps.ke: the
    first completion (the final one for an FF), clipped to the window; with their end
    keys (ps.ekey) and the count of empty stages (end not after start)."""
    b = a + len(ib)
    kb = ps.ke[a:b]
    np.take(rq.data_done, ib, out=kb, mode="clip")
    ff = np.flatnonzero(op == abi.OP_FLUSH)
    if len(ff):
        kb[ff] = np.take(rq.done, np.take(ib, ff))
    np.clip(kb, w0, w1, out=kb)
    kb += base
    ne = np.greater(kb, ksb, out=ps.ne_buf[:b - a])
    kept_b = int(np.count_nonzero(ne))
    if ps.ekey is not None and kept_b:
        first = a - ps.n_empty
        ordered = _end_keys(ps.ekey[first:b], kb, ne, kept_b, first, ps.ebits)
        ps.in_order = ps.in_order and ordered and int(kb[0]) >= ps.last_e
        ps.last_e = int(kb[-1])
    ps.n_empty += b - a - kept_b


def _seekable(rq: Requests, ib: np.ndarray, op: np.ndarray, any_unmatched: bool
              ) -> tuple[np.ndarray, np.ndarray]:
    """(which requests ib have a seek: data-bearing reads and writes, issued if any
    completion was unmatched; their sizes in bytes)."""
    sk = op <= abi.OP_WRITE
    nb = np.take(rq.nbytes, ib)
    sk &= nb > 0
    if any_unmatched:
        sk &= np.take(rq.issue, ib) > 0
    return sk, nb


def _block_classes(ps: _StagePass, cls: np.ndarray, ib: np.ndarray, op: np.ndarray,
                   sk: np.ndarray, a: int) -> np.ndarray:
    """Category (ps.stage_cat) and locality write flag (ps.loc_w) of stages
    [a, a + len(ib)) by byte operations on their classes; returns the classes (bytes)."""
    assert ps.stage_cat is not None and ps.loc_w is not None and ps.tmp8 is not None
    b = a + len(ib)
    cb = np.take(cls, ib).view(np.uint8)
    cat = ps.stage_cat[a:b].view(np.uint8)
    cat[...] = cb
    t8 = ps.tmp8[:b - a]
    for c, w in _CATEGORY_STEPS:
        np.greater_equal(cb, c, out=t8.view(bool))
        if w != 1:
            t8 *= np.uint8(w & 0xFF)
        cat -= t8
    lw = ps.loc_w[a:b]
    np.right_shift(_LOCALITY_MASK, cb, out=t8)
    t8 &= np.uint8(1)
    np.logical_and(t8.view(bool), sk, out=lw)
    lw &= op == abi.OP_WRITE
    return cb


def _block_seeks(ps: _StagePass, rq: Requests, ib: np.ndarray, sk: np.ndarray,
                 nb: np.ndarray, cb: np.ndarray | None, a: int, g: int,
                 last_end: int | None) -> int | None:
    """Seek of each request of stages [a, a + len(ib)) that has one (sk; nb: sizes, cb:
    classes or None) from the end sector of the device's previous one (last_end; None:
    the device's first, which has none), appended to the ps.seek_ columns. Returns the
    end sector of the block's last such request (last_end if none)."""
    p = np.flatnonzero(sk)
    if not len(p):
        return last_end
    ps.per_dev[g] += len(p)
    sector, nbytes = rq.sector, rq.nbytes
    if last_end is None:  # the device's first: no seek, only its end
        f = np.take(ib, p[:1])
        e = np.take(nbytes, f) + np.uint32(511)
        e >>= np.uint32(9)
        last_end = int(e[0]) + int(sector[f[0]])
        p = p[1:]
        if not len(p):
            return last_end
    # Written straight into the outputs where the types allow.
    k = len(p)
    out = slice(ps.ms, ps.ms + k)
    si = np.take(ib, p)
    sec = np.take(sector, si)
    nbp = ps.seek_nb[out]
    np.take(nb, p, out=nbp, mode="clip")
    end = nbp + np.uint32(511)
    end >>= np.uint32(9)
    end = end + sec  # int64: end sector of each
    d = np.empty(k, I64)
    d[0] = int(sec[0]) - last_end
    np.subtract(sec[1:], end[:-1], out=d[1:])
    if ps.seek.dtype == np.int32 and not (
            -(1 << 31) < int(d.min()) and int(d.max()) < (1 << 31)):
        ps.seek = ps.seek.astype(I64)  # a seek beyond 32 bits: int64 for all
    ps.seek[out] = d
    ps.seek_idx[out] = si
    if cb is not None:
        assert ps.seek_cls is not None
        np.take(cb, p, out=ps.seek_cls[out].view(np.uint8), mode="clip")
    np.add(p, a, out=ps.seek_pos[out], casting="unsafe")
    ps.ms += k
    return int(end[-1])


def _stages_of(ps: _StagePass, idx: np.ndarray, ks: np.ndarray, span: int, w0: int,
               bounds: list[int], in_window: bool) -> Stages:
    """The Stages of a finished pass: the seek columns cut to their length, the empty
    stages dropped from idx, ks, ke (and stage_cat; all_idx keeps them), and what
    stage_service needs."""
    ms, ns, n_empty = ps.ms, len(idx), ps.n_empty
    seek, seek_idx = ps.seek[:ms], ps.seek_idx[:ms]
    if ms == 0:
        seek_idx, seek = np.zeros(0, I64), np.zeros(0, I64)
    seek_bounds = np.zeros(len(ps.per_dev) + 1, I64)
    np.cumsum(np.maximum(ps.per_dev - 1, 0), out=seek_bounds[1:])
    all_idx = None
    kept = None
    ke, stage_cat = ps.ke, ps.stage_cat
    if n_empty:
        all_idx = idx
        kept = np.flatnonzero(ke > ks)
        idx, ks, ke = np.take(idx, kept), np.take(ks, kept), np.take(ke, kept)
        if stage_cat is not None:
            stage_cat = np.take(stage_cat, kept)
    st = Stages(span=span, origin=w0, idx=idx, ks=ks, ke=ke, seek_idx=seek_idx, seek=seek,
                seek_nbytes=ps.seek_nb[:ms],
                all_idx=all_idx, seek_bounds=seek_bounds, order_bounds=bounds,
                issue_in_window=in_window)
    ends = None
    if ps.ekey is not None:
        ends = (None if ps.in_order and not n_empty else ps.ekey[:ns - n_empty], ps.ebits)
    st._service = (ps.seek_pos[:ms], kept, ns, ends)
    if ps.seek_cls is not None:
        st.stage_cat, st.loc_writes, st.seek_cls = stage_cat, ps.loc_w, ps.seek_cls[:ms]
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
