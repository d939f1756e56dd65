"""fsync-family calls joined to the requests submitted inside them, and the calls'
devices and journal sequence keys.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .. import abi
from .devices import dev_key, dev_pair, fs_disks
from ..kernels import I64, check_keyed, sort_with_order, unique
from .requests import Requests, Window


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


def call_exit(fs: Mapping[str, np.ndarray], end_ns: int) -> np.ndarray:
    """The effective exit of each fsync-family call: its exit, or `end_ns` (the window's
    end) for a call still running at the stop (FS_F_INCOMPLETE) or with no exit time."""
    ex = np.asarray(fs["exit_ns"]).astype(I64)
    running = (np.asarray(fs["flags_u16"]) & abi.FS_F_INCOMPLETE) != 0
    return np.where((ex > 0) & ~running, ex, end_ns)


def join_requests_to_calls(rq: Requests, fs: Mapping[str, np.ndarray],
                           win: Window, pairs: bool = False) -> Any:
    """join_calls() of the tracked writes (or join_pairs(), with pairs=True)."""
    exit_ = call_exit(fs, win.end_ns)
    tracked = ((rq.flags & abi.RQ_TRACKED) != 0) & (rq.op != abi.OP_READ)
    return (join_pairs if pairs else join_calls)(
        rq.tid, rq.submit, np.asarray(fs["tid"]).astype(I64),
        np.asarray(fs["enter_ns"]).astype(I64), exit_, sel=tracked)


def call_devices(fs: Mapping[str, np.ndarray]) -> set[tuple[int, int]]:
    """Devices of the fsync-family calls: distinct (major, minor) pairs, found in numpy."""
    return {dev_pair(k) for k in unique(dev_key(fs["dev_major"], fs["dev_minor"])).tolist()}


def covered_devices(fs: Mapping[str, np.ndarray], meta: Mapping[str, Any]
                    ) -> set[tuple[int, int]]:
    """The filesystems (their device numbers) the fsync-family calls covered: each call's
    own (its filesystem's sync event: call_devices), and every filesystem of META for a
    sync(2), which syncs them all."""
    out = call_devices(fs) - {(0, 0)}
    if len(fs.get("call_u16", ())) and (np.asarray(fs["call_u16"]) == abi.CALL_SYNC).any():
        for f in meta.get("filesystems") or []:
            if isinstance(f, Mapping) and f.get("dev_major") is not None:
                out.add((int(f["dev_major"]), int(f["dev_minor"])))
    return out


def sync_coverage(fs: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The sync(2) and syncfs(2) calls and what each covers: `calls` (indices), `dev`
    (the dev_key of its filesystem; -1 for every filesystem: a sync, or a syncfs whose
    filesystem no sync event named, as in traces recorded before ext4_sync_fs was) and
    `disks` ({dev key: the (major, minor) of the disks of those filesystems, their
    external logs' too, from META})."""
    call = np.asarray(fs.get("call_u16", np.zeros(0, np.uint16)))
    calls = np.flatnonzero((call == abi.CALL_SYNC) | (call == abi.CALL_SYNCFS))
    dev = np.full(len(calls), -1, I64)
    if len(calls):
        k = dev_key(np.asarray(fs["dev_major"])[calls], np.asarray(fs["dev_minor"])[calls])
        own = (call[calls] == abi.CALL_SYNCFS) & (k != 0)
        dev[own] = k[own]
    disks: dict[int, set[tuple[int, int]]] = {-1: set()}
    for f in meta.get("filesystems") or []:
        if not isinstance(f, Mapping) or f.get("dev_major") is None:
            continue
        mine = {d for d in fs_disks(f) if None not in d}
        disks[-1] |= mine
        for key in {dev_key(int(f["dev_major"]), int(f["dev_minor"])),
                    dev_key(int(f.get("st_dev_major") or 0), int(f.get("st_dev_minor") or 0))}:
            disks.setdefault(key, set()).update(mine)
    return {"calls": calls, "dev": dev, "disks": disks}


def sync_pairs(rq: Requests, cls: np.ndarray, fs: Mapping[str, np.ndarray], win: Window,
               coverage: Mapping[str, Any], users: np.ndarray,
               classes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(request, call) pairs of the writeback a sync(2) or syncfs(2) waited for: the
    requests of class `classes` (data, flush) on the disks of the filesystems each
    covers (coverage: sync_coverage) in flight during the call (from their submission
    to their completion), submitted by the workload, a kernel thread (a flusher) or an
    unknown submitter (a flush): all but another user process's (`users`). A sync waits
    for every page under writeback, whoever started it (a close() that started the
    writeback of a replaced file, a flusher). A request can pair with several calls
    (overlapping syncs all waited for it)."""
    calls, cdev = coverage["calls"], coverage["dev"]
    none = (np.zeros(0, I64), np.zeros(0, I64))
    if not len(calls) or not len(rq):
        return none
    index = {d: i for i, d in enumerate(rq.devices)}
    cand = np.isin(cls, np.asarray(classes))
    if len(users):
        cand &= ~(((rq.flags & abi.RQ_ORIGIN) != 0) & np.isin(rq.tid.astype(I64), users))
    start = np.where(rq.submit > 0, rq.submit, np.where(rq.insert > 0, rq.insert, rq.issue))
    enter = np.asarray(fs["enter_ns"]).astype(I64)
    exit_ = call_exit(fs, win.end_ns)
    out_r, out_c = [], []
    for dk in unique(cdev).tolist():
        devs = [index[d] for d in coverage["disks"].get(dk, ()) if d in index]
        c = calls[cdev == dk]
        r = np.flatnonzero(cand & np.isin(rq.dev, np.asarray(devs, np.int32)))
        if not len(r) or not len(c):
            continue
        r = r[np.argsort(start[r], kind="stable")]
        t = start[r]
        # Those started up to the longest request's time before the call: then only
        # the ones still in flight at its entry.
        longest = int((rq.done[r] - t).max())
        lo = np.searchsorted(t, enter[c] - longest, side="left")
        hi = np.searchsorted(t, exit_[c], side="right")
        n = hi - lo
        if not n.sum():
            continue
        # Each call's requests lo..hi: positions by a repeat and a running offset.
        ci = np.repeat(c, n)
        pos = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
        ri = r[pos]
        live = rq.done[ri] > enter[ci]
        out_r.append(ri[live])
        out_c.append(ci[live])
    if not out_r:
        return none
    return np.concatenate(out_r).astype(I64), np.concatenate(out_c).astype(I64)


def dev_codes(*pairs: tuple[Any, Any]) -> list[np.ndarray]:
    """One small integer code per (major, minor), shared across several arrays."""
    keys = [dev_key(ma, mi) for ma, mi in pairs]
    # The distinct devices from the first key of each run of equal ones (records of a
    # device come in runs): a sort of few.
    heads = [k[np.flatnonzero(k[1:] != k[:-1]) + 1] for k in keys] + [k[:1] for k in keys]
    allk = unique(np.concatenate(heads)) if keys else np.zeros(0, I64)
    if len(allk) == 1:
        return [np.zeros(len(k), I64) for k in keys]
    return [np.searchsorted(allk, k) for k in keys]


def seq_key(code: np.ndarray, seq: Any) -> np.ndarray:
    """(device code, 52-bit sequence) as one int64 key (XFS lsn cycles stay < 2^20)."""
    key = np.asarray(code).astype(I64)
    key <<= 52
    key |= (np.asarray(seq).astype(np.uint64) & np.uint64((1 << 52) - 1)).view(I64)
    return key
