"""Locality view: write pairs adjacent on disk but issued far apart in time (they could
have merged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import abi
from ..kernels import I64, gather
from ..model.classify import DATA, LOG, METADATA
from ..model.requests import Requests
from ..model.stages import Stages


def locality(rq: Requests, cls: np.ndarray, gap_ns: int, st: Stages | None = None,
             counted: np.ndarray | None = None) -> dict[str, Any]:
    """Write pairs adjacent on disk (one ends where the next starts, consecutive in on-disk
    order; equal starts ordered by issue time) and how many were issued > gap_ns apart.
    counted: per request, whether it is the workload's (not background); then only the
    pairs of two such writes count, and `writes` counts those writes (every write still
    takes its place on disk: another's write between two of the workload's parts them).

    With the device stages `st`, the writes are taken in issue order from them and one
    value sort of (device, start sector, issue rank) gives the on-disk order directly."""
    if st is not None:
        inside = st.issue_in_window
        if inside is None:
            w0 = st.origin
            w1 = w0 + st.span - 2
            issue = rq.issue
            inside = not len(issue) or (int(issue.max()) <= w1 and int(
                np.min(issue, where=issue > 0, initial=w0)) >= w0)
        if inside:
            # The stage order is the issue order (no issue time was clipped to the window).
            fast = _locality_in_issue_order(rq, cls, st, gap_ns, counted)
            if fast is not None:
                return fast
    wi = np.flatnonzero(_locality_writes(rq, cls))
    res: dict[str, Any] = {"gap_ns": int(gap_ns), "adjacent_pairs": 0, "late_pairs": 0,
                           "late_share": None,
                           "writes": int(len(wi) if counted is None else counted[wi].sum())}
    if len(wi) < 2:
        return res
    sec = rq.sector[wi]
    sbits = (int(sec.max()) + (int(rq.nbytes[wi].max()) >> 9) + 1).bit_length()
    dbits = max(1, (len(rq.devices) - 1).bit_length())
    ibits = len(wi).bit_length()
    if dbits + sbits + ibits <= 63:
        # Sort (key, index) packed in one int64: a value sort is twice as fast as argsort.
        key = rq.dev[wi].astype(I64)
        key <<= sbits
        key |= sec
        del sec
        key <<= ibits
        key |= np.arange(len(wi), dtype=I64)
        key.sort()
        order = key & ((1 << ibits) - 1)
        key >>= ibits
    else:
        key = rq.dev[wi].astype(I64)
        key <<= sbits
        key |= sec
        del sec
        order = np.argsort(key)
        key = key[order]
    # Equal starts: order them by issue time (only the duplicated runs are re-sorted).
    eq = key[1:] == key[:-1]
    if eq.any():
        dup = np.zeros(len(key), bool)
        dup[1:] |= eq
        dup[:-1] |= eq
        di = np.flatnonzero(dup)
        sub = order[di]
        order[di] = sub[np.lexsort((rq.issue[wi[sub]], key[di]))]
    del eq
    wi = wi[order]
    del order
    end = (rq.nbytes[wi] + np.uint32(511)) >> np.uint32(9)
    adj = (key[:-1] + end[:-1]) == key[1:]
    del end, key
    if counted is not None:
        adj &= counted[wi[:-1]] & counted[wi[1:]]
    iss = rq.issue[wi]
    late = adj & (np.abs(iss[1:] - iss[:-1]) > gap_ns)
    na, nl = int(adj.sum()), int(late.sum())
    res.update({"adjacent_pairs": na, "late_pairs": nl,
                "late_share": round(nl / na, 6) if na else None})
    return res


_LOCALITY_CLASSES = np.zeros(256, bool)
_LOCALITY_CLASSES[[LOG, METADATA, DATA]] = True


LOCALITY_BLOCK = 1 << 16


def _locality_writes(rq: Requests, cls: np.ndarray) -> np.ndarray:
    """Bool per request: a data-bearing, issued write of class log, metadata or data.
    Block by block (the temporaries stay in cache)."""
    n = len(rq)
    wm = np.empty(n, bool)
    for a in range(0, n, LOCALITY_BLOCK):
        b = min(a + LOCALITY_BLOCK, n)
        m = wm[a:b]
        np.equal(rq.op[a:b], abi.OP_WRITE, out=m)
        m &= rq.nbytes[a:b] > 0
        m &= rq.issue[a:b] > 0
        m &= np.take(_LOCALITY_CLASSES, cls[a:b].view(np.uint8))
    return wm


def _locality_in_issue_order(rq: Requests, cls: np.ndarray, st: Stages, gap_ns: int,
                             counted: np.ndarray | None = None) -> dict[str, Any] | None:
    """locality() with the writes taken in (device, issue) order from the stages; None if
    (device, sector, rank) does not fit a 63-bit key."""
    order_all = st.issue_order
    lw = st.loc_writes if st.loc_writes is not None else \
        gather(_locality_writes(rq, cls), order_all)
    ndev = len(rq.devices)
    ob = st.order_bounds
    # The writes of device g are wi[cut[g]:cut[g + 1]] (when the stage order's device
    # bounds are known).
    cut = [0]
    if ob is not None:
        for g in range(len(ob) - 1):
            cut.append(cut[-1] + int(np.count_nonzero(lw[ob[g]:ob[g + 1]])))
    n = cut[-1] if ob is not None else int(np.count_nonzero(lw))
    res: dict[str, Any] = {"gap_ns": int(gap_ns), "adjacent_pairs": 0, "late_pairs": 0,
                           "late_share": None, "writes": int(n)}
    if n < 2:
        return res
    # The writes in issue order, their start sectors (in `key` until it is built) and
    # sizes in sectors: block by block, one pass over the stage order.
    wi = np.empty(n, order_all.dtype)
    key = np.empty(n, I64)
    nsec = np.empty(n, rq.nbytes.dtype)
    j = 0
    smax = 0
    for a in range(0, len(lw), LOCALITY_BLOCK):
        p = np.flatnonzero(lw[a:a + LOCALITY_BLOCK])
        k = len(p)
        if not k:
            continue
        p += a
        i = np.take(order_all, p).astype(np.intp)
        wi[j:j + k] = i
        sb = key[j:j + k]
        np.take(rq.sector, i, out=sb, mode="clip")
        smax = max(smax, int(sb.max()))
        nb = nsec[j:j + k]
        np.take(rq.nbytes, i, out=nb, mode="clip")
        nb += np.uint32(511)
        nb >>= np.uint32(9)
        j += k
    nbmax = int(rq.nbytes.max())  # of all requests: a bound, without a gather
    sbits = (smax + (nbmax >> 9) + 1).bit_length()
    dbits = max(1, (ndev - 1).bit_length())
    ibits = n.bit_length()
    if dbits + sbits + ibits > 63:
        return None
    # (device, start sector, rank in issue order) packed in one int64: one value sort
    # gives the on-disk order, equal starts in issue order (the ranks are distinct).
    # Built block by block (the temporaries stay in cache).
    for a in range(0, n, LOCALITY_BLOCK):
        b = min(a + LOCALITY_BLOCK, n)
        kb = key[a:b]
        kb <<= ibits
        kb |= np.arange(a, b, dtype=I64)
    if ndev > 1:
        dshift = sbits + ibits
        if ob is None:
            key |= rq.dev[wi].astype(I64) << dshift
        else:
            for g in range(1, ndev):
                key[cut[g]:cut[g + 1]] |= g << dshift
    key.sort()
    # Adjacent: the next in on-disk order starts (same device) where this one ends; the
    # sizes are looked up by rank. Block by block.
    rmask = (1 << ibits) - 1
    parts = []
    for a in range(0, n - 1, LOCALITY_BLOCK):
        b = min(a + LOCALITY_BLOCK, n - 1)
        pos = key[a:b + 1] >> ibits  # (device, start sector)
        end = pos[:-1] + np.take(nsec, (key[a:b] & rmask).astype(np.intp))
        parts.append(np.flatnonzero(end == pos[1:]) + a)
    adj = np.concatenate(parts) if parts else np.zeros(0, I64)
    del nsec, parts
    # Issue times of the adjacent pairs only (few, compared with the writes).
    first = np.take(wi, (np.take(key, adj) & rmask).astype(np.intp))
    second = np.take(wi, (np.take(key, adj + 1) & rmask).astype(np.intp))
    del key
    if counted is not None:
        both = counted[first] & counted[second]
        first, second = first[both], second[both]
        res["writes"] = int(np.count_nonzero(np.take(counted, wi)))
    gap = np.abs(rq.issue[second] - rq.issue[first])
    na, nl = len(first), int(np.count_nonzero(gap > gap_ns))
    res.update({"adjacent_pairs": na, "late_pairs": nl,
                "late_share": round(nl / na, 6) if na else None})
    return res
