"""Bytes and flushes counted once per device stack (docs/report-json.md,
`stack_carried`).

A loop device's I/O becomes I/O on the device its backing file lives on (META `stack`,
`via: "loop"`): an upper write or read is carried by the loop worker as a write or read
of the backing file, and an upper flush by its fsync. The request tables and byte totals
count each stack at its top device; a request of the lower device that only carries the
upper device's I/O is left out of them (it stays in the time attribution and in the
per-device view, its flush figures included: it is what the upper device waited on).

The rule, per `stack` edge via a loop device: a request of the lower device is carried
when it was not submitted by the workload's threads (RQ_TRACKED: those are its own I/O
on the lower filesystem) nor by another user process (its own I/O), and either

* it moves bytes of file contents (class data, read or readahead: not the lower
  filesystem's journal or metadata, which are its own extra I/O) and was submitted while
  a request of the upper device was in flight (between that request's submission and
  its completion: the loop worker only does I/O for the backing file while serving
  one); or
* it is a flush (class flush: an `FF` flush, or an empty PREFLUSH request, which an
  `FF` serves) submitted (an `FF`: issued) while an `FF` flush of the upper device was
  in flight: the loop worker serves an upper flush by an fsync of the backing file,
  and the flush that fsync sends below is the upper flush carried out, one flush of
  the stack (counted at the upper device, as blktrace and the workload see it).

A lower request is carried for one upper device at most, so with several loop devices
backed by files of one disk each request is counted once, on the line of the loop
device it served.

Per `stack` edge from a bio-based device (device-mapper, md) to one of its slaves: the
slave's requests that move bytes are carried (the upper device's bios are the I/O
counted; see carried_owner).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..kernels import unique
from ..model.classify import CATEGORIES, FLUSH
from ..model.requests import RQ_BIO, Requests
from ..model.wakeups import BARRIER, device_states
from ..names import CLASS_NAMES
from ..model.devices import described_devices, device_names
from .workload import workload_covers

CARRIED_CLASSES = tuple(CLASS_NAMES.index(c) for c in ("data", "read", "readahead"))
# A slave's own requests: its flushes and discards (they move no file bytes).
SELF_CLASSES = tuple(CLASS_NAMES.index(c) for c in ("flush", "discard"))


def stack_edges(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]],
                via: str | None = None) -> list[tuple[int, int]]:
    """(upper, lower) indices into `devices` of each META `stack` edge (via `via` only,
    if given: "loop", "slave") whose two ends are both among `devices`."""
    index: dict[Any, int] = {tuple(d): k for k, d in enumerate(devices)}
    by_name: dict[Any, int] = {}
    for d in described_devices(meta):
        if (d.get("major"), d.get("minor")) in index:
            by_name[d.get("name")] = index[(d.get("major"), d.get("minor"))]
    out = []
    for e in meta.get("stack") or []:
        if isinstance(e, Mapping) and (via is None or e.get("via") == via):
            up, lo = by_name.get(e.get("upper")), by_name.get(e.get("lower"))
            if up is not None and lo is not None and up != lo:
                out.append((up, lo))
    return out


def loop_edges(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]]
               ) -> list[tuple[int, int]]:
    """(upper, lower) indices into `devices` of each META `stack` edge via a loop device
    whose two ends both have requests' device numbers."""
    return stack_edges(meta, devices, "loop")


def submitted_during(rq: Requests, up: int, idx: np.ndarray,
                     upper: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the requests idx: whether a request of device `up` (among the mask `upper`
    over rq, if given) was in flight (from its submission, else issue, to its
    completion) when each was submitted (else issued), the start of the latest request
    of `up` started at or before it, and that request (an index into rq; both
    meaningful where in flight, -1 and 0 elsewhere)."""
    start = np.where(rq.submit > 0, rq.submit, rq.issue).astype(np.int64)
    u = np.flatnonzero((rq.dev == up) if upper is None else (rq.dev == up) & upper)
    if not len(u) or not len(idx):
        return (np.zeros(len(idx), bool), np.zeros(len(idx), np.int64),
                np.full(len(idx), -1, np.int64))
    end = np.where(rq.done[u] > 0, rq.done[u], np.iinfo(np.int64).max).astype(np.int64)
    o = np.argsort(start[u], kind="stable")
    s = start[u][o]
    reach = np.maximum.accumulate(end[o])  # the latest end of those started so far
    cs = start[idx]
    i = np.searchsorted(s, cs, side="right") - 1
    ok = i >= 0
    ok[ok] = reach[i[ok]] >= cs[ok]
    i0 = np.maximum(i, 0)
    return ok, np.where(ok, s[i0], 0), np.where(ok, u[o][i0], -1)


def tids_in(tid: np.ndarray, tids: np.ndarray) -> np.ndarray:
    """tid in `tids`, per element: a lookup in a table by tid (thread ids are small),
    else np.isin."""
    tids = np.asarray(tids, np.int64)
    if not len(tids):
        return np.zeros(len(tid), bool)
    top = int(tids.max())
    if top >= 1 << 23 or tids.min() < 0:
        return np.isin(np.asarray(tid).astype(np.int64), tids)
    table = np.zeros(top + 2, bool)
    table[tids] = True
    return table[np.minimum(tid, top + 1)]


def carried_requests(rq: Requests, cls: np.ndarray, meta: Mapping[str, Any],
                     users: np.ndarray | None = None) -> np.ndarray | None:
    """The requests (a mask over rq) of lower devices that only carry an upper
    device's I/O (the module's rule; users: as carried_owner); None when META has no
    such edge between devices with requests."""
    owner = carried_owner(rq, cls, meta, users)
    return None if owner is None else owner >= 0


def carrying_edges(meta: Mapping[str, Any], rq: Requests) -> list[tuple[int, int, str]]:
    """(upper, lower, via) of the META `stack` edges whose lower device's requests can
    carry the upper device's I/O, both ends among rq's devices: every edge via a loop
    device, and every edge from a bio-based device (dm, md: META `bio_based_devices`, or
    a device with bio records) to its slave."""
    bio_names = {n for n in meta.get("bio_based_devices") or [] if isinstance(n, str)}
    bio_devs = set(unique(rq.dev[(rq.flags & RQ_BIO) != 0]).tolist())
    index: dict[Any, int] = {tuple(d): k for k, d in enumerate(rq.devices)}
    for d in described_devices(meta):
        k = index.get((d.get("major"), d.get("minor")))
        if k is not None and (d.get("bio_based") or d.get("name") in bio_names):
            bio_devs.add(k)
    return ([(up, lo, "loop") for up, lo in loop_edges(meta, rq.devices)]
            + [(up, lo, "slave") for up, lo in stack_edges(meta, rq.devices, "slave")
               if up in bio_devs])


def carried_owner(rq: Requests, cls: np.ndarray, meta: Mapping[str, Any],
                  users: np.ndarray | None = None, upper_of: np.ndarray | None = None
                  ) -> np.ndarray | None:
    """Per request, the index into carrying_edges() of the edge whose upper device's I/O
    it carried, else -1; None when META has no such edge between devices with requests.

    Via a loop device: the module's rule (both kinds). Each lower request is carried
    for one upper device at most: when requests (for a flush: `FF` flushes) of several
    upper devices on the same lower device were in flight at its submission (four loop
    devices backed by files of one disk), the one whose latest such request started
    last before it, the edge listed first on a tie. To a slave of a bio-based device
    (dm, md): every request of the slave that moves bytes (any class but flush and
    discard, any submitter: device-mapper submits in the submitter's context): the slave
    belongs to the upper device, whose bios are the I/O counted; the upper device's bios
    have no start time to test anything against.

    users: the tids of user processes outside the workload (views/background.py,
    user_submitters): a request they submitted (RQ_ORIGIN) is theirs, never carried.
    upper_of: if given (an int64 array over rq, all -1), set for each request carried
    via a loop device to the upper request it was carried for (the latest one started,
    as above)."""
    edges = carrying_edges(meta, rq)
    if not edges:
        return None
    theirs = (rq.flags & abi.RQ_TRACKED) == 0
    if users is not None and len(users):
        theirs &= ~(((rq.flags & abi.RQ_ORIGIN) != 0) & tids_in(rq.tid, users))
    movable = np.isin(cls, CARRIED_CLASSES) & (rq.nbytes > 0) & theirs
    flush = (cls == FLUSH) & theirs
    upper_ff = rq.op == abi.OP_FLUSH
    owner = np.full(len(rq), -1, np.int32)
    best = np.full(len(rq), np.iinfo(np.int64).min, np.int64)  # the owner's latest start
    for k, (up, lo, via) in enumerate(edges):
        if via == "slave":
            c = np.flatnonzero((rq.dev == lo) & (rq.nbytes > 0) & (owner < 0)
                               & ~np.isin(cls, SELF_CLASSES))
            owner[c] = k
            best[c] = np.iinfo(np.int64).max
            continue
        for mask, upper in ((movable, None), (flush, upper_ff)):
            cand = np.flatnonzero(mask & (rq.dev == lo))
            ok, last, which = submitted_during(rq, up, cand, upper)
            c, last = cand[ok], last[ok]
            better = last > best[c]
            owner[c[better]] = k
            best[c[better]] = last[better]
            if upper_of is not None:
                upper_of[c[better]] = which[ok][better]
    return owner


def without(rq: Requests, drop: np.ndarray) -> Requests:
    """The requests of rq not in the mask `drop` (same devices)."""
    k = ~drop
    return Requests(submit=rq.submit[k], insert=rq.insert[k], issue=rq.issue[k],
                    data_done=rq.data_done[k], done=rq.done[k], sector=rq.sector[k],
                    nbytes=rq.nbytes[k], dev=rq.dev[k], devices=rq.devices, op=rq.op[k],
                    iflags=rq.iflags[k], flags=rq.flags[k], tid=rq.tid[k],
                    extra={n: v[k] for n, v in rq.extra.items()})


def carried_summary(rq: Requests, owner: np.ndarray, meta: Mapping[str, Any],
                    names: Sequence[str], cls: np.ndarray) -> list[dict[str, Any]]:
    """Per edge whose lower device carried some of its upper device's I/O (owner:
    carried_owner()): the upper and lower device names, the carried requests that are
    not flushes (`requests`) with their read and written bytes, the carried `FF`
    flushes (`flushes`: the upper device's flushes carried out below) and the carried
    empty PREFLUSH requests (`empty_preflush`: those the loop worker's fsync sent, merged
    into those flushes), all left out of the request tables. Each lower request is in
    one edge's figures at most."""
    out = []
    fl = cls == FLUSH
    ff = fl & (rq.op == abi.OP_FLUSH)
    for k, (up, lo, _) in enumerate(carrying_edges(meta, rq)):
        m = owner == k
        if not m.any():
            continue
        nf = int(np.count_nonzero(m & ff))
        ne = int(np.count_nonzero(m & fl)) - nf
        m &= ~fl
        rd = m & (rq.op == abi.OP_READ)
        out.append({"upper": names[up] if up < len(names) else str(up),
                    "lower": names[lo] if lo < len(names) else str(lo),
                    "requests": int(np.count_nonzero(m)),
                    "read_bytes": int(rq.nbytes[rd].sum(dtype=np.int64)),
                    "write_bytes": int(rq.nbytes[m & ~rd].sum(dtype=np.int64)),
                    "flushes": nf, "empty_preflush": ne})
    return out


def carrier_devices(meta: Mapping[str, Any], devices: Sequence[tuple[int, int]],
                    used: Sequence[int]) -> dict[int, list[int]]:
    """The devices whose requests only carry I/O served below them, for the time
    attribution: per upper device of a `stack` edge via a loop device whose lower device
    has requests (`used`: indices of the devices with requests), the devices at the
    bottom of its stack that serve it (following further loop edges down to devices that
    carry nothing themselves), sorted. A loop device's request is served by its loop
    worker with I/O of the devices below it: a wait on it is named by the loop device's
    own service (its flush, its stage), and how the devices below served that is
    carried_service's."""
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


# What served a carrier device's time in service below it: the devices below's
# categories (level two's device parts), or nothing in flight there ("idle below": the
# loop worker, or the lower filesystem's journal thread, on a CPU or waiting for one).
BELOW_PARTS = ("flush", "log", "metadata", "data", "read", "idle below")


def carried_service(rq: Requests, stages: Any, unions: Any, flush: Any,
                    meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per carrier device (carrier_devices), how the devices below it served its time in
    service (docs/report-json.md, `stack_service`): its busy time by its own best
    category in flight (a flush first, as the device view's busy_by_category_ns ranks
    it: the same totals), each split by what the devices below were doing over it
    (BELOW_PARTS). A loop device's flush is its worker's fsync of the backing file:
    this says whether that was the disk's flush, the lower filesystem's journal, or
    the worker itself. stages, unions, flush: the model's (model/stages.py,
    views/device.py device_unions, model/flush.py)."""
    carriers = carrier_devices(meta, rq.devices, unique(rq.dev).tolist())
    names = device_names(meta, rq.devices)

    def states(devs: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # As the device view ranks a device's busy time (busy_by_category_ns): the
        # best category in flight.
        covers = workload_covers(rq, stages, unions, flush, devs)[0]
        return device_states([(c.s, c.e) for c in covers])

    out = []
    idle = len(BELOW_PARTS) - 1
    for up, low in sorted(carriers.items()):
        us, ue, uc = states([up])
        if not len(us):
            continue
        ls, le, lc = states(low)
        edges = unique(np.concatenate((us, ue, ls, le)).astype(np.int64))
        if len(edges) < 2:
            continue
        a, ln = edges[:-1], np.diff(edges)
        j = np.searchsorted(us, a, side="right") - 1
        inside = (j >= 0) & (ue[np.maximum(j, 0)] > a)
        a, ln, j = a[inside], ln[inside], j[inside]
        ucat = uc[j].astype(np.int64) - BARRIER
        i = np.searchsorted(ls, a, side="right") - 1
        if len(ls):
            below = (i >= 0) & (le[np.maximum(i, 0)] > a)
            lcat = np.where(below, lc[np.maximum(i, 0)].astype(np.int64) - BARRIER, idle)
        else:
            lcat = np.full(len(a), idle, np.int64)
        n = len(BELOW_PARTS)
        # Float sums of integer ns, exact below 2**53 ns (104 days): rounded back.
        m = np.bincount(ucat * n + lcat, weights=ln, minlength=(n - 1) * n)
        m = np.rint(m).astype(np.int64).reshape(n - 1, n)
        out.append({"upper": names[up], "lower": [names[g] for g in low],
                    "busy_ns": int(m.sum()),
                    "by_category_ns": {CATEGORIES[u]: {BELOW_PARTS[k]: int(m[u, k])
                                                       for k in range(n) if m[u, k]}
                                       for u in range(n - 1) if m[u].any()}})
    return out
