"""Other devices' I/O, set apart from the workload's before the analysis (its request
tables, placement, locality, device view and findings then cover the workload's devices
only), and the bio-based devices whose I/O the report cannot show (docs/report-json.md,
`background`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..model.requests import Requests
from .device import relevant_devices
from .series import described_devices


def workload_scope(rq: Requests, fsync_devs: Sequence[tuple[int, int]],
                   meta: Mapping[str, Any], waker_seqs: np.ndarray) -> np.ndarray | None:
    """The workload's devices (indices into rq.devices) for a trace with wakeup links:
    those it submitted requests to (RQ_TRACKED), holding a filesystem it called an
    fsync-family call on, or whose request completion woke one of its threads or of
    their helpers (waker_seqs), and every device below one of those in META `stack`.
    None when that leaves out no device with requests (nothing to set apart)."""
    nd = len(rq.devices)
    mine = set(np.unique(rq.dev[(rq.flags & abi.RQ_TRACKED) != 0]).tolist())
    seq = rq.extra.get("seq")
    if seq is not None and len(waker_seqs) and len(seq):
        o = np.argsort(seq, kind="stable")
        i = np.minimum(np.searchsorted(seq, waker_seqs, sorter=o), len(o) - 1)
        hit = o[i][np.asarray(seq)[o[i]] == waker_seqs]
        mine |= set(np.unique(rq.dev[hit]).tolist())
    rel = relevant_devices(rq, fsync_devs, meta)
    if len(rel) < nd:  # not its fallback to every disk
        mine |= set(rel)
    if not mine:
        return None
    index: dict[Any, int] = {d: k for k, d in enumerate(rq.devices)}
    by_name = {d.get("name"): index.get((d.get("major"), d.get("minor")))
               for d in described_devices(meta)}
    names = {n for n, k in by_name.items() if k in mine}
    edges = [(e.get("upper"), e.get("lower")) for e in meta.get("stack", []) or []
             if isinstance(e, Mapping)]
    grew = True
    while grew:  # every device below one of the workload's
        new = {lo for up, lo in edges if up in names and lo not in names}
        names |= new
        grew = bool(new)
    mine |= {by_name[n] for n in names if by_name.get(n) is not None}
    used = set(np.unique(rq.dev).tolist())
    if used <= mine:
        return None
    return np.array(sorted(mine), dtype=np.int32)


def set_apart(rq: Requests, scope: np.ndarray, names: Sequence[str]
              ) -> tuple[Requests, dict[str, Any]]:
    """(the requests on the devices `scope`, the background: per other device with
    requests its name, requests, read and written bytes, and their total)."""
    keep = np.isin(rq.dev, scope)
    other = ~keep
    bg: list[dict[str, Any]] = []
    for d in np.unique(rq.dev[other]).tolist():
        m = other & (rq.dev == d)
        rd = m & (rq.op == abi.OP_READ)
        bg.append({"name": names[d] if d < len(names) else f"{rq.devices[d][0]}:"
                   f"{rq.devices[d][1]}", "requests": int(m.sum()),
                   "read_bytes": int(rq.nbytes[rd].sum(dtype=np.int64)),
                   "write_bytes": int(rq.nbytes[m & ~rd].sum(dtype=np.int64))})
    bg.sort(key=lambda x: -x["requests"])
    sub = Requests(submit=rq.submit[keep], insert=rq.insert[keep], issue=rq.issue[keep],
                   data_done=rq.data_done[keep], done=rq.done[keep], sector=rq.sector[keep],
                   nbytes=rq.nbytes[keep], dev=rq.dev[keep], devices=rq.devices,
                   op=rq.op[keep], iflags=rq.iflags[keep], flags=rq.flags[keep],
                   tid=rq.tid[keep], extra={k: v[keep] for k, v in rq.extra.items()})
    return sub, {"devices": bg, "requests": sum(int(x["requests"]) for x in bg)}


def bio_based_warnings(meta: Mapping[str, Any], seen: set[tuple[int, int]]) -> list[str]:
    """A line per bio-based device of META with no bio record (seen: the (major, minor)
    of the bio records): its I/O never becomes requests, so nothing of it is in the
    request figures."""
    names = [n for n in meta.get("bio_based_devices", []) or [] if isinstance(n, str)]
    out = []
    for d in described_devices(meta):
        if d.get("name") in names and \
                (d.get("major"), d.get("minor")) not in seen:
            out.append(f"{d['name']} is a bio-based device (its I/O never becomes requests) "
                       "and its bios were not recorded: any I/O of it is missing here")
    return out
