"""Commits view: jbd2 commits and their phases, XFS iclogs and log forces, ext4 fast
commits and btrfs transactions of the workload's filesystems.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import abi
from ..filesystems import FILESYSTEMS
from ..kernels import I64, check_keyed, dense_codes, percentiles, unique
from ..model.devices import dev_key, dev_pair
from ..model.calls import dev_codes, seq_key
from ..model.requests import Window


def _phase(d: np.ndarray) -> dict[str, Any]:
    return percentiles(d[d >= 0], (50, 90))


def workload_filesystems(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]],
                         relevant: Sequence[int], fs: Mapping[str, np.ndarray]
                         ) -> set[tuple[int, int]]:
    """The device numbers a journal record of a filesystem on the workload's devices
    carries: (dev and st_dev of) every filesystem of the metadata whose disk is one of
    `relevant` (indices into `devices`), plus the filesystem of every fsync-family call
    of the workload (a filesystem the metadata may not describe)."""
    disks = {devices[i] for i in relevant}
    out: set[tuple[int, int]] = set()
    for f in meta.get("filesystems", []) or []:
        if (f.get("disk_major"), f.get("disk_minor")) not in disks:
            continue
        for a, b in (("dev_major", "dev_minor"), ("st_dev_major", "st_dev_minor")):
            if f.get(a) is not None and f.get(b) is not None:
                out.add((int(f[a]), int(f[b])))
    if len(fs.get("dev_major", [])):
        keys = unique(dev_key(fs["dev_major"], fs["dev_minor"]))
        out |= {dev_pair(k) for k in keys.tolist() if k}
    return out


def journal_of(jr: Mapping[str, np.ndarray], devs: set[tuple[int, int]]
               ) -> dict[str, np.ndarray]:
    """The journal records of the filesystems `devs` (workload_filesystems)."""
    if not len(jr.get("dev_major", [])):
        return dict(jr)
    key = dev_key(jr["dev_major"], jr["dev_minor"])
    want = np.array(sorted(dev_key(a, b) for a, b in devs), dtype=I64)
    keep = np.isin(key, want)
    if keep.all():  # the usual case: no copy
        return {k: np.asarray(v) for k, v in jr.items()}
    return {k: np.asarray(v)[keep] for k, v in jr.items()}


def commits_view(window: Window, jr: Mapping[str, np.ndarray], fsv: Mapping[str, Any],
                 fs: Mapping[str, np.ndarray], log_bytes: int) -> dict[str, Any]:
    """Commits of the journal records `jr` (those of the workload's filesystems:
    journal_of) and the batching of the fsync-family calls `fs`: each filesystem's
    figures (JOURNAL_FIGURES), in the order of the table. "_durations": the commit
    durations by kind (jbd2 start to end, XFS iclog sync to done, ext4 fast commits),
    for `iowhy hist --metric commit`."""
    ev = np.asarray(jr["event_u16"]) if len(jr.get("event_u16", [])) else np.zeros(0, np.uint16)
    ts = np.asarray(jr["ts_ns"]).astype(I64) if len(ev) else np.zeros(0, I64)
    pc = fsv.get("_per_call")
    out: dict[str, Any] = {}
    durations: dict[str, np.ndarray] = {}
    total = 0
    for f in FILESYSTEMS:
        figures, n, d = JOURNAL_FIGURES[f.journal](window, jr, ev, ts, fs, pc)
        out.update(figures)
        durations.update(d)
        total += n
    per_commit, checkpoints = _fsyncs_per_commit(pc, fs)
    if "xfs" in out:  # what an XFS call's commit is (the iclog writes carry them)
        out["xfs"]["checkpoints"] = checkpoints
    out_all: dict[str, Any] = {
        "count": int(total),
        "fsyncs_per_commit": per_commit,
        "log_bytes": int(log_bytes),
        "bytes_logged_per_commit": int(log_bytes // total) if total else None,
    }
    out_all.update(out)
    out_all["_durations"] = durations
    return out_all


# (figures by report key, the commits they count, commit durations by kind)
Figures = tuple[dict[str, Any], int, dict[str, np.ndarray]]


def _ext4_figures(window: Window, jr: Mapping[str, np.ndarray], ev: np.ndarray,
                  ts: np.ndarray, fs: Mapping[str, np.ndarray],
                  pc: Mapping[str, np.ndarray] | None) -> Figures:
    """jbd2 commits (`jbd2`) and ext4 fast commits (`ext4_fast_commit`; those that
    succeeded are commits)."""
    out: dict[str, Any] = {}
    durations = {"jbd2": np.zeros(0, I64), "fc": _fast_commit_durations(jr, ev, ts)}
    total = 0
    if ((ev >= abi.J_JBD2_START) & (ev <= abi.J_JBD2_STATS)).any():
        out["jbd2"], durations["jbd2"] = _jbd2(jr, ev, ts)
        total += out["jbd2"]["count"]
    fcm = ev == abi.J_EXT4_FC_STOP
    if fcm.any():
        status = np.asarray(jr["aux1"])[fcm].astype(I64)
        st_names = {0: "ok", 1: "ineligible", 2: "skipped", 3: "failed"}
        total += int((status == 0).sum())
        out["ext4_fast_commit"] = {
            "count": int(fcm.sum()),
            "by_status": {st_names.get(int(k), str(int(k))): int((status == k).sum())
                          for k in unique(status)},
        }
    return out, total, durations


def _xfs_figures(window: Window, jr: Mapping[str, np.ndarray], ev: np.ndarray,
                 ts: np.ndarray, fs: Mapping[str, np.ndarray],
                 pc: Mapping[str, np.ndarray] | None) -> Figures:
    """XFS iclog writes (its commits) and log forces (`xfs`)."""
    if not ((ev == abi.J_XLOG_SYNC) | (ev == abi.J_XLOG_WRITE) | (ev == abi.J_XLOG_DONE)).any():
        return {}, 0, {"xfs": np.zeros(0, I64)}
    x, d = _xfs(window, jr, ev, ts)
    return {"xfs": x}, x["count"], {"xfs": d}


def _btrfs_figures(window: Window, jr: Mapping[str, np.ndarray], ev: np.ndarray,
                   ts: np.ndarray, fs: Mapping[str, np.ndarray],
                   pc: Mapping[str, np.ndarray] | None) -> Figures:
    """btrfs transaction commits and the log-tree syncs of the calls that needed one
    (`btrfs`), each a commit."""
    bm = ev == abi.J_BTRFS_COMMIT
    btrfs_log = 0
    if pc is not None:
        # The calls that synced the log themselves (the others waited for one of them).
        btrfs_calls = np.asarray(fs["fs_u16"]) == abi.FS_BTRFS
        btrfs_log = int((btrfs_calls & pc["needed"] & (pc["sync_of"] < 0)).sum())
    if not (bm.any() or btrfs_log):
        return {}, 0, {}
    n = int(bm.sum())
    return {"btrfs": {"transaction_commits": n, "log_syncs": btrfs_log}}, n + btrfs_log, {}


# What each kind of journal's records give, by its key (Filesystem.journal): a function
# per kind, as bcc's fs_configs[] holds its filesystems' functions (here, not in
# iowhy.filesystems, which stays free of numpy for `iowhy record`).
JOURNAL_FIGURES: dict[str, Callable[..., Figures]] = {
    "jbd2": _ext4_figures, "xfs": _xfs_figures, "btrfs": _btrfs_figures}


def _jbd2(jr: Mapping[str, np.ndarray], ev: np.ndarray, ts: np.ndarray
          ) -> tuple[dict[str, Any], np.ndarray]:
    """jbd2 commits: count, duration and phase percentiles, blocks logged; and the
    duration of each commit seen from start to end."""
    ji = np.flatnonzero((ev >= abi.J_JBD2_START) & (ev <= abi.J_JBD2_STATS))
    jk = seq_key(dev_codes((np.asarray(jr["dev_major"])[ji],
                            np.asarray(jr["dev_minor"])[ji]))[0], np.asarray(jr["seq"])[ji])
    jev, jts = ev[ji], ts[ji]
    keys, pos = dense_codes(jk)
    del jk
    # The time of each event of each commit: a row per event, filled in one scatter
    # (the last record wins, as per event; the STATS row is not read).
    tab = np.full((abi.J_JBD2_STATS + 1, len(keys)), -1, I64)
    cell = jev.astype(I64) * len(keys)
    cell += pos
    tab.reshape(-1)[cell] = jts
    del cell
    blocks = np.zeros(len(keys), I64)
    sm = jev == abi.J_JBD2_STATS
    if sm.any():
        blocks[pos[sm]] = np.asarray(jr["aux2"])[ji][sm].astype(I64)
    s, lk, fl, lg, en = (tab[e] for e in (abi.J_JBD2_START, abi.J_JBD2_LOCKING,
                                          abi.J_JBD2_FLUSHING, abi.J_JBD2_LOGGING,
                                          abi.J_JBD2_END))

    def span_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where((a >= 0) & (b >= 0), b - a, -1)
    return {
        "count": int((en >= 0).sum()),
        "duration_ns": _phase(span_of(s, en)),
        "phases_ns": {"locking": _phase(span_of(lk, fl)),
                      "flushing": _phase(span_of(fl, lg)),
                      "logging": _phase(span_of(lg, en))},
        "blocks_logged": int(blocks.sum()),
    }, _positive(span_of(s, en))


def _xfs(window: Window, jr: Mapping[str, np.ndarray], ev: np.ndarray, ts: np.ndarray
         ) -> tuple[dict[str, Any], np.ndarray]:
    """XFS iclogs and log forces: counts, percentiles, bytes; and the duration of each
    iclog seen from sync to done."""
    w0, w1 = window.start_ns, window.end_ns
    xi = np.flatnonzero((ev == abi.J_XLOG_SYNC) | (ev == abi.J_XLOG_WRITE)
                        | (ev == abi.J_XLOG_DONE))
    xk = seq_key(dev_codes((np.asarray(jr["dev_major"])[xi],
                            np.asarray(jr["dev_minor"])[xi]))[0], np.asarray(jr["seq"])[xi])
    xev, xts = ev[xi], ts[xi]
    keys, pos = dense_codes(xk)
    cols = {}
    for e in (abi.J_XLOG_SYNC, abi.J_XLOG_WRITE, abi.J_XLOG_DONE):
        col = np.full(len(keys), -1, I64)
        m = xev == e
        col[pos[m]] = xts[m]
        cols[e] = col
    ibytes = np.zeros(len(keys), I64)
    sm = xev == abi.J_XLOG_SYNC
    ibytes[pos[sm]] = np.asarray(jr["aux1"])[xi][sm].astype(I64)
    sy, wr, dn = cols[abi.J_XLOG_SYNC], cols[abi.J_XLOG_WRITE], cols[abi.J_XLOG_DONE]
    # Log force -> first iclog completion on the same device at or after it.
    fm = ev == abi.J_XFS_FORCE
    force_lat = np.zeros(0, I64)
    if fm.any():
        dkey = dev_key(jr["dev_major"], jr["dev_minor"])
        udev = unique(dkey[fm | (ev == abi.J_XLOG_DONE)])
        span = window.span
        check_keyed(len(udev), span)
        dmask = ev == abi.J_XLOG_DONE
        dk = np.searchsorted(udev, dkey[dmask]) * span + np.clip(ts[dmask], w0, w1) - w0
        dk.sort()
        fk = np.searchsorted(udev, dkey[fm]) * span + np.clip(ts[fm], w0, w1) - w0
        p = np.searchsorted(dk, fk, side="left")
        okp = p < len(dk)
        same = np.zeros(len(fk), bool)
        same[okp] = (dk[p[okp]] // span) == (fk[okp] // span)
        force_lat = dk[p[same]] - fk[same]
    iclog = np.where((sy >= 0) & (dn >= 0), dn - sy, -1)
    return {
        "count": int((dn >= 0).sum()),
        "forces": int(fm.sum()),
        "force_to_iclog_done_ns": _phase(force_lat),
        "iclog_ns": _phase(iclog),
        "iclog_io_ns": _phase(np.where((wr >= 0) & (dn >= 0), dn - wr, -1)),
        "iclog_bytes": int(ibytes.sum()),
    }, _positive(iclog)


def _fsyncs_per_commit(pc: Mapping[str, np.ndarray] | None, fs: Mapping[str, np.ndarray]
                       ) -> tuple[float | None, int]:
    """Batching: calls that needed a commit / distinct commits they needed (a call that
    waited for another call's log sync, `sync_of`, shares that call's; an XFS call's
    commit is the iclog write that completed its checkpoint, the earliest its calls
    found (views/fsync.py _xfs_iclogs), else the checkpoint); and the XFS checkpoints
    (distinct CIL sequences) those calls needed."""
    if pc is None:
        return None, 0
    needed = pc["needed"]
    if not needed.any():
        return None, 0
    cid = pc["commit_id"]
    with_id = needed & (cid >= 0)
    own = needed & (cid < 0) & (pc["sync_of"] < 0)
    distinct = len(unique(cid[with_id])) + int(own.sum())
    # XFS: calls whose checkpoints one iclog write completed share one commit; a call
    # with none found, its checkpoint: the sequence of its own log force
    # (views/fsync.py), else the inode's at its entry.
    none = np.full(len(needed), -1, I64)
    fseq = pc.get("force_seq", none)
    forced = fseq >= 0
    xf = needed & (cid < 0) & (np.asarray(fs["fs_u16"]) == abi.FS_XFS) & \
        (forced | ((np.asarray(fs["flags_u16"]) & abi.FS_F_SEQ) != 0))
    checkpoints = 0
    if xf.any():
        seqs = np.where(forced, fseq, np.asarray(fs["commit_seq"]).astype(I64))
        xk = seq_key(dev_codes((np.asarray(fs["dev_major"])[xf],
                                np.asarray(fs["dev_minor"])[xf]))[0],
                     seqs[xf].astype(np.uint64))
        # Each checkpoint's commit: the earliest iclog write its calls found (one whose
        # checkpoint was already on disk may have found a later, unrelated one), for
        # every call of it (one that forced nothing of its own too); else itself.
        cks, inv = np.unique(xk, return_inverse=True)
        inv = inv.reshape(-1)
        checkpoints = len(cks)
        il = np.asarray(pc.get("iclog", none))[xf]
        last = np.iinfo(I64).max
        first = np.full(len(cks), last, I64)
        np.minimum.at(first, inv[il >= 0], il[il >= 0])
        found = first != last
        commits = len(unique(first[found])) + int((~found).sum())
        distinct -= int(xf.sum()) - commits
    return (round(int(needed.sum()) / distinct, 3) if distinct else None), checkpoints


def _positive(d: np.ndarray) -> np.ndarray:
    return d[d >= 0]


def _fast_commit_durations(jr: Mapping[str, np.ndarray], ev: np.ndarray, ts: np.ndarray
                           ) -> np.ndarray:
    """ext4 fast commits: from each FC_START to the FC_STOP that follows it in the same
    task."""
    if not len(ev):
        return np.zeros(0, I64)
    tid = np.asarray(jr["tid"]).astype(I64)
    m = (ev == abi.J_EXT4_FC_START) | (ev == abi.J_EXT4_FC_STOP)
    o = np.lexsort((ts[m], tid[m]))
    e2, t2, d2 = ev[m][o], ts[m][o], tid[m][o]
    pr = (e2[:-1] == abi.J_EXT4_FC_START) & (e2[1:] == abi.J_EXT4_FC_STOP) & \
        (d2[:-1] == d2[1:])
    return _positive((t2[1:] - t2[:-1])[pr])
