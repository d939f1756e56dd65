"""Device view: busy time by category (priority barrier > log > metadata > data >
read), flushes and the workload's devices.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..kernels import I64, exclusive_by_priority, gather, merge_unions, percentiles, union_groups
from ..model.classify import CATEGORIES, CATEGORY_OF_CLASS
from ..model.devices import described_devices, device_meta, fs_disks
from ..model.flush import FlushShare
from ..model.requests import RQ_BIO, Requests, Window
from ..model.stages import Stages
from ..names import CLASS_NAMES
from .classes import RequestCounts, request_counts
from .queue import queue_depth


def device_unions(rq: Requests, st: Stages, cls: np.ndarray):
    """Per-category keyed unions of device stages (U_c) and their cumulative unions."""
    prio = st.stage_cat if st.stage_cat is not None else \
        np.take(CATEGORY_OF_CLASS, gather(cls, st.idx))
    per_cat = union_groups(st.ks, st.ke, prio, len(CATEGORIES))
    del prio
    cumul = []
    prev = (np.zeros(0, I64), np.zeros(0, I64))
    for u in per_cat:
        prev = merge_unions(prev, u)
        cumul.append(prev)
    return per_cat, cumul


def device_view(rq: Requests, st: Stages, cls: np.ndarray, window: Window, fl: FlushShare,
                meta: Mapping[str, Any], cumul, buckets: int,
                counts: RequestCounts | None = None,
                qd: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One object per disk (docs/report-json.md); counts (request_counts) and qd
    (queue_depth) are computed if not given."""
    ndev = len(rq.devices)
    elapsed = window.elapsed_ns
    excl = exclusive_by_priority(cumul, st.span, ndev)
    if qd is None:
        qd = queue_depth(st, ndev, elapsed, buckets)
    metas = device_meta(meta, rq.devices)
    # Requests and bytes per (device, op).
    rc = counts if counts is not None else request_counts(rq, cls)
    cnt = rc.n.sum(axis=(1, 3))[:ndev]
    byt = rc.nbytes.sum(axis=(1, 3))[:ndev]
    nreq = cnt.sum(axis=1)
    rbytes = byt[:, abi.OP_READ]
    wbytes = byt[:, abi.OP_WRITE]
    ffdev = rq.dev[fl.ff_idx]
    # Bios of bio-based devices (model/bios.py): counted, never timed.
    bios = np.bincount(rq.dev[(rq.flags & RQ_BIO) != 0], minlength=ndev)
    # Writes that asked for FUA (the device emulates it with a post-flush when it lacks it).
    fua_writes = np.bincount(rq.dev[((rq.iflags & abi.F_FUA) != 0) & (rq.op == abi.OP_WRITE)],
                             minlength=ndev)
    out = []
    for g, (maj, mn) in enumerate(rq.devices):
        m = metas[g]
        busy = int(excl[g].sum())
        ffm = ffdev == g
        pm = ffdev[fl.pair_ff] == g if len(fl.pair_ff) else np.zeros(0, bool)
        shared: dict[str, int] = {}
        if pm.any():
            wcls = cls[fl.pair_waiter[pm]]
            sums = np.bincount(wcls, weights=fl.pair_share_ns[pm], minlength=len(CLASS_NAMES))
            shared = {CLASS_NAMES[c]: int(round(sums[c])) for c in range(len(CLASS_NAMES))
                      if sums[c]}
        unclaimed = int(fl.ff_ns[ffm & (fl.ff_waiters == 0)].sum())
        ff_lat = fl.ff_ns[ffm]
        wm = rq.dev[fl.waiter_idx] == g
        out.append({
            "name": m.get("name") or f"{maj}:{mn}",
            "major": maj, "minor": mn,
            "rotational": m.get("rotational"), "write_cache": m.get("write_cache"),
            "fua": m.get("fua"),
            "requests": int(nreq[g]),
            "bios": int(bios[g]),
            "fua_writes": int(fua_writes[g]),
            "read_bytes": int(rbytes[g]), "write_bytes": int(wbytes[g]),
            "busy_ns": busy,
            "busy_by_category_ns": {CATEGORIES[k]: int(excl[g, k]) for k in range(len(CATEGORIES))},
            "idle_ns": max(0, elapsed - busy),
            "utilisation": round(busy / elapsed, 6) if elapsed else 0.0,
            "queue_depth": {
                "buckets": len(qd["series"][g]),
                "mean": round(int(qd["area"][g]) / elapsed, 4) if elapsed else 0.0,
                "mean_busy": round(int(qd["area"][g]) / busy, 4) if busy else 0.0,
                "max": int(qd["max"][g]),
                "step_ns": int(qd["step_ns"]),
                "series": [round(float(x), 3) for x in qd["series"][g]],
            },
            "flush": {
                "count": int(ffm.sum()),
                "device_ns": percentiles(ff_lat, (50, 90, 99)),
                "total_ns": int(ff_lat.sum()),
                "waiters": int(wm.sum()),
                "waiting_ns": int(fl.waiter_flush_ns[wm].sum()),
                "shared_ns_by_class": shared,
                "unclaimed_ns": unclaimed,
            },
        })
    return out


def relevant_devices(rq: Requests, fsync_devs: Sequence[tuple[int, int]],
                     meta: Mapping[str, Any], counts: RequestCounts | None = None) -> list[int]:
    """The workload's devices: disks it writes to (writes, flushes or discards submitted by
    a workload task) or holding a filesystem it called an fsync-family call on (that
    call's filesystem; every filesystem for sync(2): model/calls.covered_devices); else
    the disks it read from; else none (a workload that submitted no request and synced
    no filesystem has no device). Then, with those: the external log device of a
    filesystem on one of them (META `log.device`), and a bio-based device (dm, md)
    above one of them in META `stack` (its I/O reached its slaves in the submitter's
    context). counts: request_counts(), if computed."""
    nd = len(rq.devices)
    if not nd:
        return []
    if counts is not None:
        tr = counts.n[:nd, :, :, 1].sum(axis=1)  # tracked requests by (device, op)
        cnt = np.stack((tr[:, abi.OP_READ], tr.sum(axis=1) - tr[:, abi.OP_READ]), axis=1)
    else:
        key = rq.dev * 2 + (rq.op != abi.OP_READ)
        key = key[(rq.flags & abi.RQ_TRACKED) != 0]
        cnt = np.bincount(key, minlength=2 * nd).reshape(nd, 2)
    rel = {int(i) for i in np.flatnonzero(cnt[:, 1])}
    index: dict[Any, int] = {d: i for i, d in enumerate(rq.devices)}
    for fs in meta.get("filesystems", []) or []:
        keys = {(fs.get("dev_major"), fs.get("dev_minor")),
                (fs.get("st_dev_major"), fs.get("st_dev_minor"))}
        disk = (fs.get("disk_major"), fs.get("disk_minor"))
        if any(k in fsync_devs for k in keys) and disk in index:
            rel.add(index[disk])
    if not rel:
        rel = {int(i) for i in np.flatnonzero(cnt[:, 0])}
    for fs in meta.get("filesystems", []) or []:
        if index.get((fs.get("disk_major"), fs.get("disk_minor"))) in rel:
            rel |= {index[d] for d in fs_disks(fs) if d in index}
    by_name = {d.get("name"): index.get((d.get("major"), d.get("minor")))
               for d in described_devices(meta)}
    slaves = [(by_name.get(e.get("upper")), by_name.get(e.get("lower")))
              for e in meta.get("stack", []) or []
              if isinstance(e, Mapping) and e.get("via") == "slave"]
    grew = True
    while grew:  # the dm/md devices above the workload's devices, up to the top
        new = {up for up, lo in slaves if up is not None and lo in rel} - rel
        rel |= new
        grew = bool(new)
    return sorted(rel)
