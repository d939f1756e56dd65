"""Flush generations: which FF flushes each flush-sequenced request waited on, and
each FF's device time shared among its waiters (definition in model/requests.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import abi
from ..kernels import I64, select
from .requests import Requests, Window, first_start


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
    """Which FF flushes each flush-sequenced request waited on (see model/requests.py).

    Why one long function: the waiters' windows, the FFs in flight during them and the
    equal sharing of each FF's time are steps over the same keyed arrays, each read by
    the next; they stay together with the invariants that link them."""
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
