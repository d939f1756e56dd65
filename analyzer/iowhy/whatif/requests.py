"""The recorded requests as the predictor needs them: what each asked of its device
(a read, a write, a discard, a cache flush, and through the flush state machine a
pre-flush and a post-flush), when it arrived and who submitted it, what the device
took to serve it, and which recorded ``FF`` flush served which request's flush.

Only the requests the analysis kept (the workload's devices; background I/O set apart,
views/background.py) are taken, by their record ``seq``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..kernels import I64
from ..filesystems import FILESYSTEMS
from ..model.classify import CATEGORY_OF_CLASS, FLUSH as CLS_FLUSH, LOG as CLS_LOG
from ..model.wakeups import DEVICE_CAT0
from ..superblocks import BTRFS_SUPER_OFFSETS
from . import disk

# What a request asks of the flush state machine (blk-flush.c): a pre-flush before its
# data, a post-flush after it (FUA on a device without FUA), both, or neither.
PRE, POST = 1, 2


@dataclass
class RequestTable:
    """Per request (arrays in the analysis' order, index = request number here)."""

    seq: np.ndarray  # record seq (the wakeup links name it)
    dev: np.ndarray  # device index (into devices)
    devices: list[dict[str, Any]]  # name, write_cache ("write back"/"write through"),
    #                                fua, size_bytes, rotational, kind (META devices[])
    cls: np.ndarray  # class code (model/classify.py)
    kind: np.ndarray  # disk.READ / WRITE / FLUSH / DISCARD, 0: nothing for the disk
    offset: np.ndarray  # bytes
    nbytes: np.ndarray
    iflags: np.ndarray
    flush_seq: np.ndarray  # bool: went through the flush state machine
    is_ff: np.ndarray  # bool: an FF (REQ_OP_FLUSH) the block layer issued
    arrive: np.ndarray  # when the block layer got it: submit, else insert, else issue
    issue: np.ndarray
    data_done: np.ndarray  # end of its device stage (data stage of a flush sequence)
    done: np.ndarray  # final completion (0: not seen)
    tid: np.ndarray  # submitter (0: unknown)
    origin: np.ndarray  # bool: tid and arrive come from the submitting bio
    observed: np.ndarray  # bool: issued and completed inside the window
    # FF index -> [(request, PRE or POST)] of the flush-sequenced requests it served
    ff_served: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.seq)

    @property
    def category(self) -> np.ndarray:
        """The request's device kind (model/wakeups.py: BARRIER + CATEGORY_OF_CLASS)."""
        return (CATEGORY_OF_CLASS[self.cls.astype(I64)] + DEVICE_CAT0).astype(np.int8)

    def find(self, seq: np.ndarray) -> np.ndarray:
        """Index of each seq, -1 when not among these requests."""
        if not len(self.seq):
            return np.full(len(seq), -1, I64)
        o = np.argsort(self.seq, kind="stable")
        i = np.minimum(np.searchsorted(self.seq, seq, sorter=o), len(o) - 1)
        j = o[i]
        return np.where(self.seq[j] == seq, j, -1)

    def needs(self, i: int, fua_device: bool) -> int:
        """What request i asks of the flush state machine (PRE | POST), from the flags
        its bios carried; 0 for a plain request."""
        f = int(self.iflags[i])
        out = PRE if f & abi.F_PREFLUSH else 0
        if f & abi.F_FUA and not fua_device and self.nbytes[i] > 0:
            out |= POST
        return out


def _device_info(meta: Mapping[str, Any], names: Sequence[str]) -> list[dict[str, Any]]:
    by_name = {d.get("name"): d for d in meta.get("devices", []) or []
               if isinstance(d, Mapping)}
    out = []
    for n in names:
        d = by_name.get(n) or {}
        out.append({"name": n, "write_cache": d.get("write_cache") or "write back",
                    "fua": bool(d.get("fua")), "size_bytes": int(d.get("size_bytes") or 0),
                    "rotational": d.get("rotational"), "kind": d.get("kind")})
    return out


def load(trace: Any, keep_seq: np.ndarray, cls: np.ndarray, dev: np.ndarray,
         names: Sequence[str], meta: Mapping[str, Any], w0: int, w1: int) -> RequestTable:
    """The requests of the trace whose seq is in keep_seq (the analysis' requests, with
    their class and device index, in that order)."""
    rec = trace.records("request")
    o = np.argsort(rec["seq"], kind="stable")
    pos = np.searchsorted(rec["seq"][o], keep_seq)
    pos = np.minimum(pos, max(len(o) - 1, 0))
    idx = o[pos] if len(o) else np.zeros(0, I64)
    ok = rec["seq"][idx] == keep_seq if len(idx) else np.zeros(0, bool)
    if not ok.all():
        raise ValueError("the analysis kept requests the trace does not hold")
    r = rec[idx]
    op = r["op"].astype(I64)
    fl = r["flags_u16"].astype(I64)
    nb = r["len_bytes"].astype(I64)
    kind = np.zeros(len(r), np.int8)
    kind[op == abi.OP_READ] = disk.READ
    kind[op == abi.OP_WRITE] = disk.WRITE
    kind[op == abi.OP_FLUSH] = disk.FLUSH
    kind[op == abi.OP_DISCARD] = disk.DISCARD
    # An empty PREFLUSH request is never issued: only its flush reaches the disk.
    kind[(op == abi.OP_WRITE) & (nb == 0)] = 0
    sub, ins, iss = (r[f].astype(I64) for f in ("submit_ns", "insert_ns", "issue_ns"))
    arrive = np.where(sub > 0, sub, np.where(ins > 0, ins, iss))
    unmatched = (fl & abi.RQ_UNMATCHED) != 0
    arrive = np.where(unmatched | (arrive <= 0), w0, np.clip(arrive, w0, w1))
    dd, dn = r["data_done_ns"].astype(I64), r["done_ns"].astype(I64)
    lost = (fl & (abi.RQ_LOST_DONE | abi.RQ_LOST_ISSUE | abi.RQ_INCOMPLETE
                  | abi.RQ_UNMATCHED)) != 0
    observed = ~lost & (iss > 0) & (dn > 0)
    t = RequestTable(
        seq=np.asarray(keep_seq).astype(I64), dev=np.asarray(dev).astype(I64),
        devices=_device_info(meta, names), cls=np.asarray(cls).astype(np.int8), kind=kind,
        offset=r["start_sector"].astype(I64) * disk.SECTOR, nbytes=nb,
        iflags=r["iflags"].astype(I64), flush_seq=(fl & abi.RQ_FLUSH_SEQ) != 0,
        is_ff=op == abi.OP_FLUSH, arrive=arrive, issue=iss,
        data_done=np.where(dd > 0, dd, dn), done=dn, tid=r["tid"].astype(I64),
        origin=(fl & abi.RQ_ORIGIN) != 0, observed=observed)
    t.ff_served = _pair_flushes(t)
    return t


def _pair_flushes(t: RequestTable) -> dict[int, list[tuple[int, int]]]:
    """Which recorded FF served which request's pre- or post-flush: the
    last FF on its device to complete after the request arrived and before its data
    was issued (its pre-flush; for a request with no data, before its completion), and
    the last to complete after its data stage and at its completion (its post-flush)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for d in np.unique(t.dev).tolist():
        ff = np.flatnonzero(t.is_ff & (t.dev == d) & (t.done > 0))
        if not len(ff):
            continue
        fdone = t.done[ff]
        o = np.argsort(fdone, kind="stable")
        ff, fdone = ff[o], fdone[o]
        fiss = t.issue[ff]
        # every request whose bios asked for a flush (an empty PREFLUSH request is never
        # issued and not flagged as flush-sequenced: its flush is all it is)
        asked = (t.iflags & (abi.F_PREFLUSH | abi.F_FUA)) != 0
        for i in np.flatnonzero(asked & ~t.is_ff & (t.dev == d) & (t.done > 0)).tolist():
            f = int(t.iflags[i])
            data = t.nbytes[i] > 0
            if f & abi.F_PREFLUSH:
                until = t.issue[i] if data and t.issue[i] > 0 else t.done[i]
                k = int(np.searchsorted(fdone, until, side="right")) - 1
                if k >= 0 and fdone[k] >= t.arrive[i] and fiss[k] >= t.arrive[i] - 1:
                    out.setdefault(int(ff[k]), []).append((i, PRE))
            if f & abi.F_FUA and data:
                k = int(np.searchsorted(fdone, t.done[i], side="right")) - 1
                if k >= 0 and fiss[k] >= t.data_done[i]:
                    out.setdefault(int(ff[k]), []).append((i, POST))
    return out


# XFS's iclog flags (fs/xfs/xfs_log_priv.h, XLOG_ICL_NEED_FLUSH / XLOG_ICL_NEED_FUA):
# what xlog_write_iclog() asks of the iclog's bio, recorded in the XLOG_WRITE record
XLOG_ICL_NEED_FLUSH, XLOG_ICL_NEED_FUA = 1, 2
# the mount options that send no cache flush (ext4 takes either)
NO_BARRIER_OPTIONS = frozenset(f.nobarrier_option for f in FILESYSTEMS if f.nobarrier_option)


def asked_barriers(trace: Any, t: RequestTable, meta: Mapping[str, Any]) -> np.ndarray:
    """Per request, the PREFLUSH and FUA (abi.F_*) its filesystem asked for, as its
    journal records (btrfs: where it wrote) say, whatever its bios carried: on a device
    the kernel sees as write-through the block layer drops both from the bios before any
    request exists (submit_bio_noacct), so a recording on such a device has none, yet
    the filesystem asked. Three are recorded:

    * XFS: each iclog write (XLOG_WRITE) records its ic_flags; the log request that
      task submitted next on that device is that iclog's (its first request, if the
      block layer split it);
    * ext4 (jbd2, barriers on: the mount has no nobarrier or barrier=0): a commit's
      commit block, with PREFLUSH and FUA (journal_submit_commit_record, without
      async_commit): the last log request the journal thread submitted between the
      commit's LOGGING and END records;
    * btrfs (barriers on): each write of its primary superblock, where the device holds
      it (write_all_supers: an empty PREFLUSH bio, waited for, then the superblock with
      FUA; the mirrors go without), given both.

    Not recorded, so not here: an fsync's own flush when there was nothing to commit
    (an empty PREFLUSH bio, dropped whole), a journal on another device."""
    out = np.zeros(len(t), I64)
    if not len(t):
        return out
    # a journal record names its filesystem's device (a partition, or the whole disk):
    # its requests are the disk's
    names = [d.get("name") for d in t.devices]
    devno: dict[tuple[int, int], int] = {}
    for d in meta.get("devices", []) or []:
        if isinstance(d, Mapping) and d.get("name") in names:
            devno[(int(d.get("major", -1)), int(d.get("minor", -1)))] = names.index(
                d.get("name"))
    no_barrier: set[tuple[int, int]] = set()
    supers: list[tuple[int, int]] = []  # (device, byte offset) of btrfs superblocks
    for f in meta.get("filesystems", []) or []:
        if not isinstance(f, Mapping) or f.get("disk") not in names:
            continue
        at = (int(f.get("dev_major", -1)), int(f.get("dev_minor", -1)))
        devno.setdefault(at, names.index(f.get("disk")))
        if any(o in str(f.get("options") or "").split(",") for o in NO_BARRIER_OPTIONS):
            no_barrier.add(at)
        elif f.get("fstype") == "btrfs":
            part = int(f.get("part_start_sector") or 0) * disk.SECTOR
            supers.append((names.index(f.get("disk")), part + BTRFS_SUPER_OFFSETS[0]))
    for d, at_byte in supers:
        m = (t.dev == d) & (t.kind == disk.WRITE) & (t.offset == at_byte)
        out[m] |= abi.F_PREFLUSH | abi.F_FUA
    j = trace.records("journal")
    log = np.flatnonzero((t.cls == CLS_LOG) & (t.kind == disk.WRITE))
    if not len(log) or not len(j):
        return out
    ev = j["event_u16"].astype(I64)
    jdev = np.asarray([devno.get((int(a), int(b)), -1)
                       for a, b in zip(j["dev_major"].tolist(), j["dev_minor"].tolist())], I64)
    ts, jtid = j["ts_ns"].astype(I64), j["tid"].astype(I64)
    jat = list(zip(j["dev_major"].tolist(), j["dev_minor"].tolist()))
    # log requests by (device, submitter), in arrival order
    o = np.lexsort((t.arrive[log], t.tid[log], t.dev[log]))
    log = log[o]
    key = (t.dev[log] << 32) | t.tid[log]

    def first_after(d: int, tid: int, at: int) -> int:
        k = (d << 32) | tid
        lo, hi = np.searchsorted(key, k), np.searchsorted(key, k, side="right")
        i = lo + int(np.searchsorted(t.arrive[log[lo:hi]], at))
        return int(log[i]) if i < hi else -1

    for i in np.flatnonzero((ev == abi.J_XLOG_WRITE) & (jdev >= 0)).tolist():
        f = int(j["aux0"][i])
        want = (abi.F_PREFLUSH if f & XLOG_ICL_NEED_FLUSH else 0) | \
            (abi.F_FUA if f & XLOG_ICL_NEED_FUA else 0)
        if want and jat[i] not in no_barrier:
            r = first_after(int(jdev[i]), int(jtid[i]), int(ts[i]))
            if r >= 0:
                out[r] |= want
    logging = {(jat[i], int(j["seq"][i])): (int(ts[i]), int(jtid[i]))
               for i in np.flatnonzero((ev == abi.J_JBD2_LOGGING) & (jdev >= 0)).tolist()}
    for i in np.flatnonzero((ev == abi.J_JBD2_END) & (jdev >= 0)).tolist():
        d = int(jdev[i])
        start = logging.get((jat[i], int(j["seq"][i])))
        if start is None or jat[i] in no_barrier:
            continue
        k = (d << 32) | start[1]
        lo, hi = np.searchsorted(key, k), np.searchsorted(key, k, side="right")
        arr = t.arrive[log[lo:hi]]
        m = np.flatnonzero((arr >= start[0]) & (arr <= int(ts[i])))
        if len(m):
            out[log[lo + m[-1]]] |= abi.F_PREFLUSH | abi.F_FUA
    return out


def service_times(t: RequestTable, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The device stages of device d in completion order, as the disk saw them: (request
    index, disk kind, service ns). A stage's service runs from max(its issue, the previous
    stage's end) to its end (docs/report-json.md, "service time"): on a disk that serves
    one request at a time, its time on that request alone. Data stages of flush
    sequences count as the write they are; empty PREFLUSH requests (never issued) are
    left out; unobserved requests are in the order but have no service (-1)."""
    m = np.flatnonzero((t.dev == d) & (t.kind > 0) & (t.issue > 0))
    end = np.where(t.is_ff[m], t.done[m], t.data_done[m])
    end = np.where(end > 0, end, t.issue[m])
    o = np.lexsort((t.issue[m], end))
    m, end = m[o], end[o]
    prev = np.concatenate(([0], end[:-1]))
    svc = end - np.maximum(t.issue[m], prev)
    svc = np.where(t.observed[m], np.maximum(svc, 0), -1)
    return m, t.kind[m].astype(np.int8), svc


def category_of(cls: int) -> int:
    """The device kind of a class code (BARRIER + CATEGORY_OF_CLASS)."""
    return int(CATEGORY_OF_CLASS[cls]) + DEVICE_CAT0


FLUSH_CLASS = CLS_FLUSH
