"""Bytes counted once per device stack (docs/report-json.md, `stack_carried`).

A loop device's I/O becomes I/O on the device its backing file lives on (META `stack`,
`via: "loop"`): an upper write or read is carried by the loop worker as a write or read
of the backing file, and an upper flush by its fsync. The request tables and byte totals
count each stack at its top device; a request of the lower device that only carries the
upper device's I/O is left out of them (it stays in the time attribution, the per-device
view and the flushes: it is what the upper device waited on).

The rule, per `stack` edge via a loop device: a request of the lower device is carried
when it moves bytes of file contents (class data, read or readahead: not the lower
filesystem's journal, metadata or flushes, which are its own extra I/O), was not
submitted by the workload's threads (RQ_TRACKED: those are its own I/O on the lower
filesystem), and was submitted while a request of the upper device was in flight
(between that request's submission and its completion: the loop worker only does I/O
for the backing file while serving one).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..model.requests import Requests
from ..names import CLASS_NAMES
from .series import described_devices

CARRIED_CLASSES = tuple(CLASS_NAMES.index(c) for c in ("data", "read", "readahead"))


def loop_edges(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]]
               ) -> list[tuple[int, int]]:
    """(upper, lower) indices into `devices` of each META `stack` edge via a loop device
    whose two ends both have requests' device numbers."""
    index: dict[Any, int] = {tuple(d): k for k, d in enumerate(devices)}
    by_name: dict[Any, int] = {}
    for d in described_devices(meta):
        if (d.get("major"), d.get("minor")) in index:
            by_name[d.get("name")] = index[(d.get("major"), d.get("minor"))]
    out = []
    for e in meta.get("stack") or []:
        if isinstance(e, Mapping) and e.get("via") == "loop":
            up, lo = by_name.get(e.get("upper")), by_name.get(e.get("lower"))
            if up is not None and lo is not None and up != lo:
                out.append((up, lo))
    return out


def carried_requests(rq: Requests, cls: np.ndarray, meta: Mapping[str, Any]
                     ) -> np.ndarray | None:
    """The requests (a mask over rq) of lower devices that only carry an upper loop
    device's I/O (the module's rule); None when META has no loop edge between devices
    with requests."""
    edges = loop_edges(meta, rq.devices)
    if not edges:
        return None
    start = np.where(rq.submit > 0, rq.submit, rq.issue).astype(np.int64)
    end = np.where(rq.done > 0, rq.done, np.iinfo(np.int64).max).astype(np.int64)
    movable = (np.isin(cls, CARRIED_CLASSES) & ((rq.flags & abi.RQ_TRACKED) == 0)
               & (rq.nbytes > 0))
    out = np.zeros(len(rq), bool)
    for up, lo in edges:
        u = np.flatnonzero(rq.dev == up)
        cand = np.flatnonzero(movable & (rq.dev == lo))
        if not len(u) or not len(cand):
            continue
        o = np.argsort(start[u], kind="stable")
        s = start[u][o]
        reach = np.maximum.accumulate(end[u][o])  # the latest end of those started so far
        i = np.searchsorted(s, start[cand], side="right") - 1
        ok = i >= 0
        ok[ok] = reach[i[ok]] >= start[cand][ok]
        out[cand[ok]] = True
    return out


def without(rq: Requests, drop: np.ndarray) -> Requests:
    """The requests of rq not in the mask `drop` (same devices)."""
    k = ~drop
    return Requests(submit=rq.submit[k], insert=rq.insert[k], issue=rq.issue[k],
                    data_done=rq.data_done[k], done=rq.done[k], sector=rq.sector[k],
                    nbytes=rq.nbytes[k], dev=rq.dev[k], devices=rq.devices, op=rq.op[k],
                    iflags=rq.iflags[k], flags=rq.flags[k], tid=rq.tid[k],
                    extra={n: v[k] for n, v in rq.extra.items()})


def carried_summary(rq: Requests, carried: np.ndarray, meta: Mapping[str, Any],
                    names: Sequence[str]) -> list[dict[str, Any]]:
    """Per loop edge: the upper and lower device names and the lower device's carried
    requests, read and written bytes (left out of the request tables)."""
    out = []
    for up, lo in loop_edges(meta, rq.devices):
        m = carried & (rq.dev == lo)
        rd = m & (rq.op == abi.OP_READ)
        out.append({"upper": names[up] if up < len(names) else str(up),
                    "lower": names[lo] if lo < len(names) else str(lo),
                    "requests": int(m.sum()),
                    "read_bytes": int(rq.nbytes[rd].sum(dtype=np.int64)),
                    "write_bytes": int(rq.nbytes[m & ~rd].sum(dtype=np.int64))})
    return out


def carrier_devices(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]],
                    used: Sequence[int]) -> dict[int, list[int]]:
    """The devices whose requests only carry I/O served below them, for the time
    attribution: per upper device of a `stack` edge via a loop device whose lower device
    has requests (`used`: indices of the devices with requests), the devices at the
    bottom of its stack that serve it (following further loop edges down to devices that
    carry nothing themselves), sorted. A loop device's request is served by its loop
    worker, and with the devices below it recorded, what it waited on is theirs: its
    flushes, journal and data writes, reads, and the worker's CPU in between."""
    used_set = {int(u) for u in used}
    down: dict[int, list[int]] = {}
    for up, lo in loop_edges(meta, devices):
        if lo in used_set:
            down.setdefault(up, []).append(lo)

    def bottoms(d: int, seen: frozenset[int]) -> set[int]:
        if d not in down or d in seen:
            return {d}
        out: set[int] = set()
        for lo in down[d]:
            out |= bottoms(lo, seen | {d})
        return out

    out = {}
    for up in down:
        b = bottoms(up, frozenset()) - {up}
        if b:
            out[up] = sorted(b)
    return out


def served_devices(relevant: Sequence[int], carriers: Mapping[int, Sequence[int]]
                   ) -> list[int]:
    """The devices `relevant` with each carrier device (carrier_devices) replaced by the
    devices serving it."""
    out: set[int] = set()
    for d in relevant:
        out |= set(carriers.get(d, (d,)))
    return sorted(out)
