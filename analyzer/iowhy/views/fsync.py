"""fsync view: per call type, latency and where each call's time went (its own data
writes, the commit or log force it needed, its own flushes, other).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .. import abi
from ..filesystems import FILESYSTEMS
from ..kernels import (
    I64, check_keyed, dense_codes, log2_hist, merge_unions, percentiles, small_unique,
    union_intervals, union_where,
    unique,
)
from ..model.calls import call_exit, dev_codes, join_calls, join_pairs, seq_key
from ..model.devices import dev_key
from ..model.classify import DATA, FLUSH, LOG, LOG_IN_CALLS
from ..model.requests import Requests, Window, first_start


def _hull_update(c0: np.ndarray, c1: np.ndarray, idx: np.ndarray, a: np.ndarray,
                 b: np.ndarray) -> None:
    np.minimum.at(c0, idx, a)
    np.maximum.at(c1, idx, b)


def fsync_view(window: Window, fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
               rq: Requests, cls: np.ndarray,
               call_of_req: np.ndarray | tuple[np.ndarray, np.ndarray],
               covered: Mapping[str, Any] | None = None,
               sync_reqs: tuple[np.ndarray, np.ndarray] | None = None,
               off: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """fsync-family calls: latency per call type and per-call waiting breakdown.
    call_of_req: join_calls() of the requests, or join_pairs(); covered: the sync(2)
    and syncfs(2) calls and the filesystems each covers (model/calls.sync_coverage);
    sync_reqs: the (request, call) pairs of the writeback they waited for
    (model/calls.sync_pairs), which count as their own data and flushes; off: the
    sleeps of the calls' threads (call_sleeps: those that were waits for the journal or
    log are the commit's, _log_sleeps)."""
    w0, w1 = window.start_ns, window.end_ns
    n = len(fs["enter_ns"])
    enter = np.clip(np.asarray(fs["enter_ns"]).astype(I64), w0, w1)
    ex_raw = np.asarray(fs["exit_ns"]).astype(I64)
    fflags = np.asarray(fs["flags_u16"])
    # Still running at stop, or its exit never seen (exit_ns is then an upper bound).
    incomplete = ((fflags & (abi.FS_F_INCOMPLETE | abi.FS_F_EXIT_UNSEEN)) != 0) | (ex_raw == 0)
    exit_ = np.clip(call_exit(fs, w1), enter, w1)
    lat = exit_ - enter
    call = np.asarray(fs["call_u16"])
    fstype = np.asarray(fs["fs_u16"])
    tid = np.asarray(fs["tid"]).astype(I64)
    empty = {"count": 0, "incomplete": 0, "latency_ns": percentiles(np.zeros(0, I64), (50, 90, 99)),
             "by_call": {}, "split_ns": {"data": 0, "commit": 0, "flush": 0, "other": 0}}
    if n == 0:
        return {**empty, "_per_call": None}
    # Per-call waiting components: own data writes, the commit/log force, own flushes
    # (requests whose final completion was seen: a lost one has no observed interval).
    if isinstance(call_of_req, tuple):
        ri, rc = call_of_req
    else:
        ri = np.flatnonzero(call_of_req >= 0)
        rc = np.take(call_of_req, ri)
    n_own = len(ri)  # the calls' own requests, then the writeback a sync waited for
    if sync_reqs is not None and len(sync_reqs[0]):
        ri = np.concatenate((np.asarray(ri, I64), sync_reqs[0]))
        rc = np.concatenate((np.asarray(rc, I64), sync_reqs[1]))
    own = np.arange(len(ri)) < n_own
    lost = (np.take(rq.flags, ri) & abi.RQ_LOST_DONE) != 0
    if lost.any():
        keep = np.flatnonzero(~lost)
        ri, rc, own = np.take(ri, keep), np.take(rc, keep), np.take(own, keep)
    del lost
    rc = rc.astype(I64)  # int64 indices: faster gathers
    rcls = np.take(cls, ri)
    call_enter = np.take(enter, rc)
    req_call_exit = np.take(exit_, rc)
    st = np.clip(first_start(rq, ri), call_enter, req_call_exit)
    en = np.clip(np.take(rq.done, ri), st, req_call_exit, out=req_call_exit)
    c0 = np.full(n, w1 + 1, I64)
    c1 = np.full(n, w0 - 1, I64)
    needed = np.zeros(n, bool)
    commit_id = np.full(n, -1, I64)
    ev = np.asarray(jr["event_u16"]) if len(jr.get("event_u16", [])) else np.zeros(0, np.uint16)
    jts = np.asarray(jr["ts_ns"]).astype(I64) if len(ev) else np.zeros(0, I64)
    ender = _jbd2_commits(window, fs, jr, ev, jts, enter, exit_, c0, c1, needed, commit_id,
                          covered)
    force_seq, force_ts = _in_task_commits(jr, ev, jts, tid, enter, exit_, c0, c1, needed)
    iclog = _xfs_iclogs(jr, ev, jts, fs, force_seq, force_ts, exit_)
    # btrfs (in-task): from its first log write to the call's exit.
    bl = rcls == LOG
    bl &= fstype[rc] == abi.FS_BTRFS
    if bl.any():
        _hull_update(c0, c1, rc[bl], st[bl], exit_[rc[bl]])
        needed[rc[bl]] = True
    has_c = c1 > c0
    # The call whose log sync a call waited for instead of syncing the log itself (btrfs:
    # a call whose log another task synced), else -1.
    sync_of = np.full(n, -1, I64)
    # Per-call priority timeline (_call_split), call-relative keys.
    cspan = int(lat.max()) + 2 if n else 2
    check_keyed(n, cspan)
    base = np.multiply(rc, cspan)
    base -= call_enter
    del rc, call_enter
    st += base
    en += base
    del base
    # The commit's part: its hull, and the sleeps that were waits for the journal or log.
    ci = np.flatnonzero(has_c)
    cs, ce = c0[ci], c1[ci]
    if off is not None:
        si, ss, se, by = _log_sleeps(off, fs, tid, enter, exit_, commit_id, ender, c0, c1)
        ci, cs, ce = np.concatenate((ci, si)), np.concatenate((cs, ss)), np.concatenate((ce, se))
        # Waited for another call's log sync with none of its own: the last one's (in
        # the order of the sleeps).
        w = np.flatnonzero((by >= 0) & ~has_c[si])
        o = w[np.argsort(ss[w], kind="stable")]
        sync_of[si[o]] = by[o]
        needed[si[w]] = True
    cb = ci * cspan
    cb -= enter[ci]
    cs += cb
    ce += cb
    data, commit, flush = _call_split(st, en, rcls, own, cs, ce, cspan, n)
    del st, en, rcls, own
    other = lat - data
    other -= commit
    other -= flush
    per_call = {"latency": lat, "data": data, "commit": commit, "flush": flush,
                "other": other, "call": call, "needed": needed, "commit_id": commit_id,
                "sync_of": sync_of, "incomplete": incomplete, "enter": enter, "exit": exit_,
                "tid": tid, "force_seq": force_seq, "iclog": iclog}
    out: dict[str, Any] = {
        "count": int(n),
        "incomplete": int(incomplete.sum()),
        "latency_ns": percentiles(lat[~incomplete], (50, 90, 99), inplace=True),
        "split_ns": {"data": int(data.sum()), "commit": int(commit.sum()),
                     "flush": int(flush.sum()), "other": int(other.sum())},
    }
    out["by_call"] = _by_call(per_call)
    out["_per_call"] = per_call
    return out


def _jbd2_commits(window: Window, fs: Mapping[str, np.ndarray], jr: Mapping[str, np.ndarray],
                  ev: np.ndarray, jts: np.ndarray, enter: np.ndarray, exit_: np.ndarray,
                  c0: np.ndarray, c1: np.ndarray, needed: np.ndarray,
                  commit_id: np.ndarray, covered: Mapping[str, Any] | None = None
                  ) -> np.ndarray | None:
    """ext4 calls and the jbd2 commits they needed: the commits' part of each call (its
    hull c0, c1), `needed` and `commit_id` (the commit's index in the table of commits),
    in place; returns the thread that ended each commit of that table (-1: its end not
    recorded), None if no call needed one.

    A call with an inode's sync tid (FS_F_SEQ) needed the commit of that tid, or of a
    later one up to the tid the inode had when the sync path returned (FS_F_SEQ_SPAN:
    its own writeback joined the inode to the running transaction after the entry, and
    that is the commit it waited for); each such commit of its filesystem's journal
    that ran during the call is part of the hull. A sync(2) or syncfs(2)
    (`covered`: sync_coverage) needed every commit of the filesystems it covers that
    ended during the call (ext4_sync_fs waits for the running transaction's)."""
    w0, w1 = window.start_ns, window.end_ns
    fflags = np.asarray(fs["flags_u16"])
    seq_ok = (fflags & abi.FS_F_SEQ) != 0
    e4 = np.flatnonzero((np.asarray(fs["fs_u16"]) == abi.FS_EXT4) & seq_ok)
    # The commits' starts and ends only (none when the journal holds only other
    # filesystems' logs: then no ext4 call needed a commit).
    se = np.flatnonzero((ev == abi.J_JBD2_START) | (ev == abi.J_JBD2_END))
    if not len(se) or not (len(e4) or (covered is not None and len(covered["calls"]))):
        return None
    jdev = (np.asarray(jr["dev_major"])[se], np.asarray(jr["dev_minor"])[se])
    jcode, fcode = dev_codes(jdev, (np.asarray(fs["dev_major"])[e4],
                                    np.asarray(fs["dev_minor"])[e4]))
    keys, jpos = dense_codes(seq_key(jcode, np.asarray(jr["seq"])[se]))
    del jcode
    st_m = ev[se] == abi.J_JBD2_START
    en_m = ~st_m
    sts = jts[se]
    cs = np.full(len(keys), w0, I64)
    ce = np.full(len(keys), w1, I64)
    has_end = np.zeros(len(keys), bool)
    cs[jpos[st_m]] = sts[st_m]
    ce[jpos[en_m]] = sts[en_m]
    has_end[jpos[en_m]] = True
    ender = np.full(len(keys), -1, I64)
    ender[jpos[en_m]] = np.asarray(jr["tid"])[se[en_m]]
    kdev = np.zeros(len(keys), I64)  # each commit's filesystem (dev_key)
    kdev[jpos] = dev_key(*jdev)
    del jpos, sts, st_m, en_m
    if len(e4):
        seq = np.asarray(fs["commit_seq"])[e4].astype(np.uint64)
        span = np.where((fflags[e4] & abi.FS_F_SEQ_SPAN) != 0,
                        np.asarray(fs.get("seq_span_u16", np.zeros(len(fflags), np.uint16)))[e4],
                        0).astype(np.int64)
        # Each tid from the entry's to the exit's (a span is 0 or 1 but for a call a
        # concurrent writer's transactions overtook): the latest that ran in the call is
        # its commit_id.
        for off in range(int(min(span.max(), MAX_SPAN)) + 1):
            sel = np.flatnonzero(span >= off)
            fk = seq_key(fcode[sel], seq[sel] + np.uint64(off))
            pos = np.minimum(np.searchsorted(keys, fk), len(keys) - 1)
            calls = e4[sel]
            a = np.maximum(cs[pos], enter[calls])
            b = np.minimum(ce[pos], exit_[calls])
            h = np.flatnonzero((keys[pos] == fk) & (b > a))
            _hull_update(c0, c1, calls[h], a[h], b[h])
            needed[calls[h]] = True
            commit_id[calls[h]] = pos[h]
    if covered is not None and len(covered["calls"]):
        # The commits of each sync-like call's filesystems that ended in it, per
        # filesystem (-1: every one), those of a filesystem in order of their ends.
        ended = np.flatnonzero(has_end)
        for dk in unique(covered["dev"]).tolist():
            calls = covered["calls"][covered["dev"] == dk]
            m = ended if dk < 0 else ended[kdev[ended] == dk]
            if not len(m):
                continue
            m = m[np.argsort(ce[m], kind="stable")]
            e_sorted = ce[m]
            lo = np.searchsorted(e_sorted, enter[calls], side="right")
            hi = np.searchsorted(e_sorted, exit_[calls], side="right")
            h = np.flatnonzero(hi > lo)
            if not len(h):
                continue
            calls, lo, hi = calls[h], lo[h], hi[h]
            # The earliest start among each call's commits (a range minimum, by
            # reduceat over [lo, hi) pairs) and the latest end.
            cs_pad = np.append(cs[m], 0)
            first = np.minimum.reduceat(cs_pad, np.stack((lo, hi), axis=1).ravel())[::2]
            a = np.maximum(first, enter[calls])
            _hull_update(c0, c1, calls, a, e_sorted[hi - 1])
            needed[calls] = True
            commit_id[calls] = m[hi - 1]
    return ender


SLEEP_FIELDS = ("tid", "start_ns", "waking_ns", "waker_tid", "waker_ctx_u16")


def call_sleeps(off: Mapping[str, np.ndarray], fs: Mapping[str, np.ndarray],
                jr: Mapping[str, np.ndarray], window: Window) -> dict[str, np.ndarray]:
    """The off-CPU intervals fsync_view reads (`off`): the sleeps that began in an
    fsync-family call and that a thread able to end a wait for the journal or log ended
    (one that ended a jbd2 commit, one that made a call on a filesystem whose calls
    write its log: _log_sleeps), taken from the whole recording's table so that it can
    be dropped before the view runs."""
    tid = np.asarray(fs["tid"]).astype(I64)
    ev = np.asarray(jr.get("event_u16", np.zeros(0, np.uint16)))
    wakers = np.union1d(np.asarray(jr["tid"])[ev == abi.J_JBD2_END] if len(ev) else [],
                        tid[np.isin(np.asarray(fs["fs_u16"]), LOG_IN_CALLS)]).astype(I64)
    if not len(wakers) or not len(off.get("tid", ())):
        return {f: np.zeros(0, I64) for f in SLEEP_FIELDS}
    otid = np.asarray(off["tid"])
    start, waking = np.asarray(off["start_ns"]), np.asarray(off["waking_ns"])
    keep = np.flatnonzero(np.isin(np.asarray(off["waker_tid"]), wakers) & (waking > start))
    keep = keep[np.isin(otid[keep], small_unique(tid))]
    enter = np.asarray(fs["enter_ns"]).astype(I64)
    keep = keep[join_pairs(otid[keep].astype(I64), start[keep].astype(I64), tid, enter,
                           np.maximum(call_exit(fs, window.end_ns), enter))[0]]
    return {f: (np.asarray(off[f])[keep] if f in off else np.zeros(len(keep), np.uint16))
            for f in SLEEP_FIELDS}


def _log_sleeps(off: Mapping[str, np.ndarray], fs: Mapping[str, np.ndarray], tid: np.ndarray,
                enter: np.ndarray, exit_: np.ndarray, commit_id: np.ndarray,
                ender: np.ndarray | None, c0: np.ndarray, c1: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Of the sleeps `off` (call_sleeps), those of the calls that were waits for the
    journal or log: (call, start, waking, the call whose log sync ended it or -1), from
    the switch-out to the wakeup (not the wait for a CPU after it). Only wakeups made by
    a task count: an interrupt's runs on top of whichever thread is on the CPU, which
    names that thread (c0, c1: each call's commit hull).

    jbd2: the caller wakes the journal thread and sleeps in jbd2_log_wait_commit until
    the commit of its transaction ends; that commit begins when the journal thread gets
    a CPU (milliseconds later on a busy machine), and only after the commit before it
    (another task's) has ended: the journal thread wakes the waiters at each commit's
    end (a handle waiting for a locked transaction too). So a sleep of a call that
    needed a jbd2 commit, ended by the thread that ended it (`ender`, per commit), was
    one. A filesystem whose fsync calls write its log (btrfs): a call whose log another
    task is syncing waits in wait_log_commit for that task to end it, in its own call.
    So a sleep ended by another thread then in a call on the same filesystem, after that
    call's first log write (before it, as at the inode lock of a file both sync, the
    other call was not syncing the log yet), was one. bpftrace sees those sleeps block
    in jbd2 functions and in btrfs_sync_log (tests/system/test_devices_live.py)."""
    none = (np.zeros(0, I64), np.zeros(0, I64), np.zeros(0, I64), np.zeros(0, I64))
    jbd2 = commit_id >= 0 if ender is not None else np.zeros(len(tid), bool)
    in_call_log = np.isin(np.asarray(fs["fs_u16"]), LOG_IN_CALLS)
    k = np.flatnonzero(jbd2 | in_call_log)
    if not len(k) or not len(off.get("tid", ())):
        return none
    start = np.asarray(off["start_ns"]).astype(I64)
    waking = np.asarray(off["waking_ns"]).astype(I64)
    # A sleep belongs to the call its switch-out falls in (a thread's calls never overlap).
    si, ci = join_pairs(np.asarray(off["tid"]).astype(I64), start, tid[k], enter[k], exit_[k])
    ci = k[ci]
    start, wake_at = start[si], waking[si]
    woke = np.asarray(off["waker_tid"])[si].astype(I64)
    ctx = np.asarray(off["waker_ctx_u16"])[si]
    by_task = (ctx == abi.WCTX_TASK) | (ctx == abi.WCTX_UNKNOWN)
    ok = np.zeros(len(ci), bool)
    by = np.full(len(ci), -1, I64)
    if ender is not None:
        j = np.flatnonzero(jbd2[ci] & by_task)
        ok[j] = woke[j] == ender[commit_id[ci[j]]]
    lg = np.flatnonzero(in_call_log[ci] & by_task & (woke != tid[ci]))
    if len(lg):
        # The waker's call at the wakeup, if it was in one on the same filesystem and
        # had begun its log sync.
        calls = np.flatnonzero(in_call_log)
        wi, wc = join_pairs(woke[lg], wake_at[lg], tid[calls], enter[calls], exit_[calls])
        dev = dev_key(np.asarray(fs["dev_major"]), np.asarray(fs["dev_minor"]))
        wcall = calls[wc]
        syncing = (dev[wcall] == dev[ci[lg[wi]]]) & (c1[wcall] > c0[wcall])
        syncing &= wake_at[lg[wi]] >= c0[wcall]
        ok[lg[wi[syncing]]] = True
        by[lg[wi[syncing]]] = wcall[syncing]
    ci, by = ci[ok], by[ok]
    return ci, start[ok], np.minimum(wake_at[ok], exit_[ci]), by


MAX_SPAN = 16  # tids looked at past a call's entry tid (FS_F_SEQ_SPAN)


# (journal events, whether the commit lasts to the call's exit) of the commits a
# filesystem makes in the calling task of an fsync-family call (iowhy.filesystems).
CALL_COMMITS = tuple((tuple(abi.JOURNAL_EVENT_CODES[e] for e in f.call_commit),
                      f.call_commit_to_exit) for f in FILESYSTEMS if f.call_commit)


def _in_task_commits(jr: Mapping[str, np.ndarray], ev: np.ndarray, jts: np.ndarray,
                     tid: np.ndarray, enter: np.ndarray, exit_: np.ndarray, c0: np.ndarray,
                     c1: np.ndarray, needed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Commits made in the calling task (CALL_COMMITS: ext4 fast commits, XFS log
    forces): widen each call's commit hull (c0, c1) and mark it `needed`, in place.
    Returns per call the CIL sequence of the last XFS log force it made (-1: none),
    the checkpoint it waited for, and that force's time. The inode's sequence the probe
    reads at the call's entry can be older (its data writeback's size update is logged
    after it) or 0."""
    force_seq = np.full(len(tid), -1, I64)
    force_ts = np.full(len(tid), -1, I64)
    for evs, to_exit in CALL_COMMITS:
        m = np.isin(ev, evs) if len(ev) else np.zeros(0, bool)
        if not m.any():
            continue
        ji = np.flatnonzero(m)
        jc = join_calls(np.asarray(jr["tid"])[ji].astype(I64), jts[ji], tid, enter, exit_)
        ok = jc >= 0
        ji, jc = ji[ok], jc[ok]
        if to_exit:
            _hull_update(c0, c1, jc, jts[ji], exit_[jc])
        else:
            _hull_update(c0, c1, jc, jts[ji], jts[ji])
        needed[jc] = True
        # Each call's last XFS log force naming a sequence (a force of everything: 0).
        seq = np.asarray(jr["seq"])[ji].astype(I64)
        f = np.flatnonzero((ev[ji] == abi.J_XFS_FORCE) & (seq > 0))
        if len(f):
            last = f[np.lexsort((jts[ji[f]], jc[f]))]  # by call, then time
            keep = np.ones(len(last), bool)
            keep[:-1] = jc[last][1:] != jc[last][:-1]
            last = last[keep]
            force_seq[jc[last]] = seq[last]
            force_ts[jc[last]] = jts[ji[last]]
    return force_seq, force_ts


def _xfs_iclogs(jr: Mapping[str, np.ndarray], ev: np.ndarray, jts: np.ndarray,
                fs: Mapping[str, np.ndarray], force_seq: np.ndarray, force_ts: np.ndarray,
                exit_: np.ndarray) -> np.ndarray:
    """Per call with a log force, the iclog write that ended its wait (seq_key of its
    device and the iclog's lsn; -1: none): the last iclog completion on the call's
    filesystem between its last log force and its exit, the one whose end woke it. A
    call whose checkpoint was already on the disk waited for none, or only for an
    unrelated one: views/commits.py takes each checkpoint's earliest iclog found for
    all of its calls. Several checkpoints share an iclog write when they are forced while
    the one before is in flight: the iclog write (with its flushes) is the commit the
    calls share, what `fsyncs_per_commit` counts."""
    out = np.full(len(force_seq), -1, I64)
    calls = np.flatnonzero(force_seq >= 0)
    dm = ev == abi.J_XLOG_DONE if len(ev) else np.zeros(0, bool)
    if not len(calls) or not dm.any():
        return out
    di = np.flatnonzero(dm)
    dcode, ccode = dev_codes((np.asarray(jr["dev_major"])[di], np.asarray(jr["dev_minor"])[di]),
                             (np.asarray(fs["dev_major"])[calls],
                              np.asarray(fs["dev_minor"])[calls]))
    dts, dlsn = jts[di], np.asarray(jr["seq"])[di]
    for code in unique(ccode).tolist():
        d = np.flatnonzero(dcode == code)
        c = calls[ccode == code]
        if not len(d):
            continue
        d = d[np.argsort(dts[d], kind="stable")]
        j = np.searchsorted(dts[d], exit_[c], side="right") - 1  # the last done by exit
        ok = j >= 0
        ok[ok] = dts[d[j[ok]]] >= force_ts[c[ok]]  # ... after the force
        out[c[ok]] = seq_key(np.full(int(ok.sum()), code), dlsn[d[j[ok]]])
    return out


def _by_call(pc: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """fsync_view's figures per call type, from its per-call arrays."""
    call, incomplete, lat, needed = pc["call"], pc["incomplete"], pc["latency"], pc["needed"]
    data, commit, flush, other = pc["data"], pc["commit"], pc["flush"], pc["other"]
    n = len(call)
    out: dict[str, Any] = {}
    kinds = small_unique(call)
    for c in kinds:
        # The calls of this type (all of them when there is one type), gathered once.
        m = np.flatnonzero(call == c) if len(kinds) > 1 else np.arange(n)
        inc = np.take(incomplete, m)
        ok_lat = np.take(lat, np.take(m, np.flatnonzero(~inc)))
        name = abi.CALL_NAMES.get(int(c), f"call_{int(c)}")
        out[name] = {
            "count": len(m),
            "incomplete": int(np.count_nonzero(inc)),
            "latency_ns": percentiles(ok_lat, (50, 90, 99), inplace=True),
            "total_ns": int(np.take(lat, m).sum()),
            "hist_log2_us": log2_hist(ok_lat // 1000),
            "split_ns": {"data": int(np.take(data, m).sum()),
                         "commit": int(np.take(commit, m).sum()),
                         "flush": int(np.take(flush, m).sum()),
                         "other": int(np.take(other, m).sum())},
            "needed_commit": int(np.count_nonzero(np.take(needed, m))),
        }
    return out


def _call_split(ks: np.ndarray, ke: np.ndarray, rcls: np.ndarray, own: np.ndarray,
                cs: np.ndarray, ce: np.ndarray, cspan: int, n: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time of each of the n calls exclusive to its data writes, then its own flushes,
    then its commit, then the flushes a sync waited for (priority in that order):
    (data, commit, flush), flush both kinds. ks, ke: the requests' intervals in
    call-keyed time (call * cspan + time - the call's enter), rcls their classes, own
    whether the call submitted it (else the writeback of a sync or syncfs); cs, ce: the
    commit's intervals (any number per call, overlapping or not).

    With D the union of the data writes, F of the own flushes, C of the commit's
    intervals and S of the others: data = |D|, flush = |D | F| - |D| + |D | F | C | S| -
    |D | F | C|, commit = |D | F | C| - |D | F|, each a sum per call of the pieces of a
    union (a piece never spans two calls: a call's keyed times lie within
    [call * cspan, call * cspan + cspan - 2]). A flush the call issued is its own cache
    flush even inside its commit's hull (an XFS call's after its log force, a btrfs
    call's in the log sync it makes); the flushes a sync waited for include the
    journal's own, which are the commits' it waited for."""
    def per_call(u: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        # Per call: at most cspan each, so float64 sums of these integers are exact.
        return np.bincount(u[0] // cspan, weights=u[1] - u[0], minlength=n)[:n].astype(I64)
    fl = rcls == FLUSH
    d = union_where(ks, ke, rcls == DATA)
    df = merge_unions(d, union_where(ks, ke, fl & own))
    dfc = merge_unions(df, union_intervals(cs, ce))
    data = per_call(d)
    flush = per_call(df)
    flush -= data
    commit = per_call(dfc)
    commit -= per_call(df)
    if not own.all():
        flush += per_call(merge_unions(dfc, union_where(ks, ke, fl & ~own)))
        flush -= per_call(dfc)
    return data, commit, flush


def fsync_values(per_call: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """The latency of each complete call (fsync_view's), by call name: for `iowhy hist
    --metric fsync`."""
    if per_call is None:
        return {}
    lat, inc, call = per_call["latency"], per_call["incomplete"], per_call["call"]
    return {abi.CALL_NAMES.get(int(c), f"call_{int(c)}"): lat[(call == c) & ~inc]
            for c in small_unique(call)}
