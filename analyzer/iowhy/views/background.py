"""Other devices' I/O, set apart from the workload's before the analysis (its request
tables, placement, locality, device view and findings then cover the workload's devices
only), and the bio-based devices whose I/O the report cannot show (docs/report-json.md,
`background`)."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from .. import abi
from ..filesystems import FILESYSTEMS
from ..kernels import I64, unique
from ..model.classify import FLUSH
from ..model.requests import Requests
from ..model.devices import fs_disks
from .device import relevant_devices
from .classes import request_counts
from ..model.devices import described_devices, device_names
from .stack import (carried_owner, carried_summary, stack_edges, submitted_during, tids_in,
                    without)


def device_roles(rq: Requests, fsync_devs: Sequence[tuple[int, int]],
                 meta: Mapping[str, Any], counts: Any = None) -> tuple[set[int], set[int]]:
    """The workload's devices (indices into rq.devices) in two sets, without looking at
    wakeups: (direct, below). direct: those it submitted requests to (RQ_TRACKED), those
    holding a filesystem it called an fsync-family call on or the external log of a
    filesystem on one of them, and a bio-based device (dm, md) above one of them in
    META `stack` (its I/O reaches its slaves in the submitter's context). below: the
    devices under a direct one in META `stack`, followed to the bottom, not direct
    themselves (a loop device's backing disk): their requests are the workload's only
    where they served the devices above (background_requests). counts:
    request_counts() of rq, if computed."""
    nd = len(rq.devices)
    if counts is not None:
        direct = set(np.flatnonzero(counts.n[:nd, :, :, 1].sum(axis=(1, 2))).tolist())
    else:
        direct = set(np.flatnonzero(np.bincount(rq.dev[(rq.flags & abi.RQ_TRACKED) != 0],
                                                minlength=nd)).tolist())
    direct |= set(relevant_devices(rq, fsync_devs, meta, counts))
    index: dict[Any, int] = {d: k for k, d in enumerate(rq.devices)}
    for fs in meta.get("filesystems") or []:
        if isinstance(fs, Mapping) and \
                index.get((fs.get("disk_major"), fs.get("disk_minor"))) in direct:
            direct |= {index[d] for d in fs_disks(fs) if d in index}
    by_name = {d.get("name"): index.get((d.get("major"), d.get("minor")))
               for d in described_devices(meta)}
    edges: list[tuple[int, int, Any]] = []
    for e in meta.get("stack", []) or []:
        if isinstance(e, Mapping):
            up, lo = by_name.get(e.get("upper")), by_name.get(e.get("lower"))
            if up is not None and lo is not None:
                edges.append((up, lo, e.get("via")))
    grew = True
    while grew:  # the dm/md devices above the workload's slaves
        new = {up for up, lo, via in edges if via == "slave" and lo in direct} - direct
        direct |= new
        grew = bool(new)
    below: set[int] = set()
    grew = True
    while grew:  # every device below one of the workload's
        new = {lo for up, lo, _ in edges if (up in direct or up in below)} - direct - below
        below |= new
        grew = bool(new)
    return direct, below


def workload_scope(rq: Requests, fsync_devs: Sequence[tuple[int, int]],
                   meta: Mapping[str, Any], off: Mapping[str, np.ndarray],
                   helper: Mapping[str, np.ndarray]) -> tuple[np.ndarray | None, np.ndarray]:
    """(the workload's devices, the requests it waited out) for a trace with wakeup
    links. The devices (indices into rq.devices): device_roles()' direct and below ones,
    and those whose request completion ended a wait the workload waited out
    (waker_request_seqs, off and helper: the offcpu and helper columns) with every
    device below them in META `stack`; None when that leaves out no device with
    requests (nothing to set apart). The requests: per request of rq, 1 if its
    completion ended such a wait (uint8; background_requests reads it as
    rq.extra["waited"])."""
    direct, below = device_roles(rq, fsync_devs, meta)
    mine = direct | below
    seq = rq.extra.get("seq")
    waited = np.zeros(len(rq), np.uint8)
    woke: set[int] = set()
    if seq is not None and len(seq):
        o = np.argsort(seq, kind="stable")
        ss = np.asarray(seq)[o]  # searched in place: a search through the sorter reads at random

        def rows(seqs: np.ndarray) -> np.ndarray:  # each seq's request, -1 if none
            i = np.minimum(np.searchsorted(ss, seqs), len(o) - 1)
            return np.where(ss[i] == seqs, o[i], -1)
        own = np.isin(np.arange(len(rq.devices)), np.array(sorted(mine), np.int64))

        def settled(seqs: np.ndarray) -> np.ndarray:  # on a device that is the workload's
            r = rows(seqs)
            return (r >= 0) & own[rq.dev[np.maximum(r, 0)]]
        hit = rows(waker_request_seqs(off, helper, settled))
        hit = hit[hit >= 0]
        waited[hit] = 1
        woke = set(unique(rq.dev[hit]).tolist()) - mine
    if woke:
        mine |= set().union(*device_roles_below(rq, meta, woke))
    used = set(unique(rq.dev).tolist())
    if not mine or used <= mine:
        return None, waited
    return np.array(sorted(mine), dtype=np.int32), waited


HANDOFF_HOPS = 8  # helper-to-helper hand-offs followed back from a workload wait


def waker_request_seqs(off: Mapping[str, np.ndarray], helper: Mapping[str, np.ndarray],
                       settled: Callable[[np.ndarray], np.ndarray] | None = None
                       ) -> np.ndarray:
    """The seqs of the requests whose completion ended a wait the workload waited out:
    every workload thread's (off), and a helper's only while a workload wait, or one of
    a helper such a wait waited for (up to HANDOFF_HOPS hand-offs), was waiting for that
    helper: the waiting one began before the helper's wakeup, and the helper woke it at
    or after it. A shared kernel thread (a kworker serving a loop device and other
    filesystems' writeback) also waits on requests the workload never waited for; those
    do not make their device the workload's (workload_scope). settled: per seq, whether
    its request's device is the workload's anyway; when every helper's is, which of
    them the workload waited out changes nothing, and every one is returned unsearched."""
    def col(d: Mapping[str, np.ndarray], f: str) -> np.ndarray:
        return np.asarray(d.get(f, np.zeros(0)))
    out = [col(off, "waker_rq_seq")[(col(off, "flags_u16") & abi.OFF_WAKER_RQ) != 0]]
    htid = col(helper, "tid").astype(I64)
    rqw = (col(helper, "flags_u16") & abi.OFF_WAKER_RQ) != 0
    if settled is not None and settled(col(helper, "waker_rq_seq")[rqw]).all():
        out.append(col(helper, "waker_rq_seq")[rqw])
    elif len(htid):
        hs, hw = col(helper, "start_ns").astype(I64), col(helper, "waking_ns").astype(I64)
        hwt = col(helper, "waker_tid").astype(I64)
        # The waits whose waker may be a helper: (waker, start, waking) of each.
        wt, ws, ww = (col(off, "waker_tid").astype(I64), col(off, "start_ns").astype(I64),
                      col(off, "waking_ns").astype(I64))
        found = np.zeros(len(htid), bool)
        for _ in range(HANDOFF_HOPS):
            new = _woken_while_waited(htid, hw, wt, ws, ww) & ~found
            if not new.any():
                break
            found |= new
            wt, ws, ww = hwt[new], hs[new], hw[new]  # waits on the helpers that ended these
        out.append(col(helper, "waker_rq_seq")[found & rqw])
    return np.concatenate(out).astype(np.uint64)


def _woken_while_waited(htid: np.ndarray, hw: np.ndarray, wt: np.ndarray, ws: np.ndarray,
                        ww: np.ndarray) -> np.ndarray:
    """Per helper interval (its tid, its waking hw): whether a wait (waker wt, from ws,
    woken at ww) that it then ended was under way at its waking: wt == tid and
    ws < hw <= ww. The waits keyed by (waker, start) in one sort, a running maximum of
    their keyed wakings (a waker's keys lie above every earlier waker's, so the maximum
    never reaches back into another's), one search per helper interval whose tid woke
    one of them."""
    out = np.zeros(len(htid), bool)
    if not len(wt) or not len(htid):
        return out
    helpers = unique(htid)  # a handful of threads: the searches below are on them alone
    ok = (ww > 0) & np.isin(wt, helpers)
    wt, ws, ww = wt[ok], ws[ok], ww[ok]
    if not len(wt):
        return out
    cand = np.flatnonzero(np.isin(htid, unique(wt)))
    if not len(cand):
        return out
    hc, hw = htid[cand], hw[cand]
    t0 = min(int(ws.min()), int(hw.min()))
    span = max(int(ww.max()), int(hw.max())) - t0 + 1
    top = max(int(wt.max()), int(hc.max())) + 1
    if top * span >= 1 << 62:  # the tids as ranks (the times fit any window of a trace)
        tids, code = np.unique(np.concatenate((wt, hc)), return_inverse=True)
        wt, hc, top = code[:len(wt)].astype(I64), code[len(wt):].astype(I64), len(tids)
        if top * span >= 1 << 62:
            raise OverflowError(f"{top} threads over {span} ns cannot be keyed")
    kstart = wt * span + (ws - t0)
    o = np.argsort(kstart)
    kstart = kstart[o]
    reach = np.maximum.accumulate(wt[o] * span + (ww[o] - t0))
    q = hc * span + (hw - t0)
    k = np.searchsorted(kstart, q, side="left") - 1  # the last wait starting before
    kk = np.maximum(k, 0)
    out[cand] = (k >= 0) & (wt[o][kk] == hc) & (reach[kk] >= q)
    return out


def device_roles_below(rq: Requests, meta: Mapping[str, Any], top: set[int]
                       ) -> tuple[set[int], set[int]]:
    """(top, the devices under them in META `stack`, followed to the bottom)."""
    index: dict[Any, int] = {d: k for k, d in enumerate(rq.devices)}
    by_name = {d.get("name"): index.get((d.get("major"), d.get("minor")))
               for d in described_devices(meta)}
    edges = [(by_name.get(e.get("upper")), by_name.get(e.get("lower")))
             for e in meta.get("stack", []) or [] if isinstance(e, Mapping)]
    below: set[int] = set()
    grew = True
    while grew:
        new = {lo for up, lo in edges if lo is not None and (up in top or up in below)}
        new -= top | below
        below |= new
        grew = bool(new)
    return set(top), below


def set_apart(rq: Requests, scope: np.ndarray, names: Sequence[str]
              ) -> tuple[Requests, dict[str, Any]]:
    """(the requests on the devices `scope`, the background: per other device with
    requests its name, requests, read and written bytes, and their total)."""
    keep = np.isin(rq.dev, scope)
    other = ~keep
    bg: list[dict[str, Any]] = []
    for d in unique(rq.dev[other]).tolist():
        m = other & (rq.dev == d)
        rd = m & (rq.op == abi.OP_READ)
        bg.append({"name": names[d] if d < len(names) else f"{rq.devices[d][0]}:"
                   f"{rq.devices[d][1]}", "requests": int(m.sum()),
                   "read_bytes": int(rq.nbytes[rd].sum(dtype=np.int64)),
                   "write_bytes": int(rq.nbytes[m & ~rd].sum(dtype=np.int64))})
    for x in bg:
        x["set_apart"] = True
    bg.sort(key=lambda x: -x["requests"])
    return rq.take(keep), {"devices": bg, "requests": sum(int(x["requests"]) for x in bg)}


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


# Kernel threads by the name their task has (a request's submitter comm): block I/O a
# kernel thread submits is a filesystem's or a device stack's work (a journal commit,
# writeback, a loop worker, a log push), not another user process's. The probes record
# names, not the PF_KTHREAD flag, so this is a list of the names kernel threads take:
# those of the filesystems iowhy knows (iowhy.filesystems), then the others'.
KERNEL_THREAD_NAME = re.compile(b"(" + b"|".join([
    *(t for f in FILESYSTEMS for t in f.kernel_threads),
    rb"kworker/", rb"kswapd", rb"kcompactd", rb"khugepaged", rb"ksoftirqd/", rb"kthreadd",
    rb"kblockd", rb"loop\d", rb"md\d+_", rb"dm[-_]", rb"kdmflush", rb"kcryptd", rb"dmcrypt",
    rb"irq/", rb"swapper/", rb"writeback", rb"z_", rb"zram", rb"kintegrityd", rb"f2fs_",
    rb"kverityd", rb"scsi_eh_", rb"napi/", rb"nvme", rb"blkcg_", rb"kjournald",
    rb"flush-"]) + b")")


def user_submitters(tids: np.ndarray, comms: Sequence[bytes],
                    kernel_tids: Sequence[int] | np.ndarray = ()) -> np.ndarray:
    """The tids among `tids` (with the name `comms` of each) that are user processes:
    not a kernel thread by name (KERNEL_THREAD_NAME), nor one of `kernel_tids` (the
    helper threads the trace recorded, kernel threads all); not tid 0 (the idle task)
    nor a task without a name (nothing known of it)."""
    known = set(int(t) for t in kernel_tids)
    out = []
    for t, c in zip(np.asarray(tids).tolist(), comms):
        name = bytes(c).split(b"\0")[0]
        if int(t) and name and int(t) not in known and not KERNEL_THREAD_NAME.match(name):
            out.append(int(t))
    return np.array(sorted(set(out)), dtype=I64)


def submitter_tids(flags: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One request (an index) per distinct submitter of the requests (their `flags` and
    `tid` columns) with a known submitter outside the workload (RQ_ORIGIN without
    RQ_TRACKED): whose name to read."""
    cand = np.flatnonzero((flags & (abi.RQ_ORIGIN | abi.RQ_TRACKED)) == abi.RQ_ORIGIN)
    if not len(cand):
        return np.zeros(0, np.int64)
    t = tid[cand]
    top = int(t.max())
    if top >= 1 << 23:
        _, first = np.unique(t, return_index=True)
        return np.sort(cand[first])
    # Thread ids are small (pid_max <= 2^22): one pass through a table by tid, which
    # keeps one of each tid's requests (any one: they share the name).
    pos = np.full(top + 1, -1, np.int64)
    pos[t] = cand
    return np.sort(pos[pos >= 0])


def comms_at(views: Sequence[np.ndarray], idx: np.ndarray) -> list[bytes]:
    """The `comm` of the records at positions idx (ascending) of the record chunks
    `views` taken end to end (load_requests' order)."""
    if not len(idx):
        return []
    bounds = np.cumsum([0] + [len(v) for v in views])
    which = np.searchsorted(bounds, idx, side="right") - 1
    return [bytes(views[w]["comm"][i - bounds[w]]) for w, i in
            zip(which.tolist(), np.asarray(idx).tolist())]


def background_requests(rq: Requests, meta: Mapping[str, Any],
                        fsync_devs: Sequence[tuple[int, int]], carried: np.ndarray | None,
                        users: np.ndarray, counts: Any = None,
                        cls: np.ndarray | None = None) -> np.ndarray:
    """The requests of the workload's devices that are not the workload's (a mask over
    rq), left out of its class tables (docs/report-json.md, `background`):

    * on any device, a request whose submitter is known (RQ_ORIGIN), is not the
      workload's (RQ_TRACKED) and is a user process (`users`: its tid; user_submitters):
      another process's I/O;
    * on a device that is the workload's only as the device below one of its devices
      (device_roles' `below`: the disk a loop device's backing file lives on, recorded
      because of `--dev`), every request but those that served the devices above: the
      carried ones (`carried`: views/stack.py), and those of a kernel thread or of an
      unknown submitter (the lower filesystem's journal, the flushes a loop worker's
      fsync sends) submitted while a request of a device above was in flight;
    * on a device that is neither direct nor below, in a trace with wakeup links
      (rq.extra["waited"]: per request, whether its completion ended a wait the workload
      waited out, waker_request_seqs): every request but those. Such a device is the
      workload's only because a wait of it, or of a kernel thread it waited for, ended
      there (workload_scope): a shared kworker also writes back other filesystems;
    * on such a device in a trace without wakeup links, when another user process wrote
      to or read from it (its requests above: another process's loop device), the
      flushes that are not the workload's own: that process's fsyncs sent them. (Its
      kernel threads' writes stay: with nothing to tell which waits they ended, writeback
      and the journal may be the workload's own buffered writes.)

    The workload's own requests (RQ_TRACKED) are never background. counts:
    request_counts() of rq, if computed; cls: each request's class (model/classify.py),
    for the flushes."""
    n = len(rq)
    mine = (rq.flags & abi.RQ_TRACKED) != 0
    if carried is not None:
        mine |= carried
    known = (rq.flags & abi.RQ_ORIGIN) != 0
    user = known & tids_in(rq.tid, users) if len(users) else np.zeros(n, bool)
    out = user & ~mine
    direct, below = device_roles(rq, fsync_devs, meta, counts)
    waited = rq.extra.get("waited")
    if waited is not None:
        others = np.setdiff1d(unique(rq.dev), np.array(sorted(direct | below), np.int64))
        if len(others):
            out |= np.isin(rq.dev, others) & ~mine & (waited == 0)
    elif direct and out.any():
        used = np.setdiff1d(unique(rq.dev[out]), np.array(sorted(direct | below), np.int64))
        if len(used):
            flush = np.zeros(n, bool) if cls is None else cls == FLUSH
            out |= np.isin(rq.dev, used) & flush & ~mine
    if below:
        edges = stack_edges(meta, rq.devices)
        for d in sorted(below):
            cand = np.flatnonzero((rq.dev == d) & ~mine & ~user)
            served = np.zeros(len(cand), bool)
            for up, lo in edges:
                if lo == d and (up in direct or up in below):
                    served |= submitted_during(rq, up, cand)[0]
            out[cand[~served]] = True
    return out


def background_summary(rq: Requests, mask: np.ndarray, names: Sequence[str]
                       ) -> list[dict[str, Any]]:
    """Per device with background requests (mask): its name, the requests, read and
    written bytes, most requests first."""
    out = []
    for d in unique(rq.dev[mask]).tolist():
        m = mask & (rq.dev == d)
        rd = m & (rq.op == abi.OP_READ)
        out.append({"name": names[d] if d < len(names) else
                    f"{rq.devices[d][0]}:{rq.devices[d][1]}",
                    "requests": int(m.sum()),
                    "read_bytes": int(rq.nbytes[rd].sum(dtype=np.int64)),
                    "write_bytes": int(rq.nbytes[m & ~rd].sum(dtype=np.int64)),
                    "set_apart": False})
    out.sort(key=lambda x: -int(x["requests"]))
    return out


class TableRequests(NamedTuple):
    """The class tables' requests (table_requests)."""

    counts: Any  # request_counts() of the requests counted in the class tables
    carried: list[dict[str, Any]] | None  # carried_summary(); None without a carrying edge
    background: np.ndarray | None  # the background requests (a mask; None if none)
    background_summary: list[dict[str, Any]]  # background_summary() of them
    dropped: np.ndarray | None  # the requests not counted (a mask; None if none)
    owner: np.ndarray | None  # carried_owner()
    empty_preflush: int  # the empty PREFLUSH requests merged into the counted flushes


def table_requests(rq: Requests, cls: np.ndarray, meta: Mapping[str, Any],
                   fsync_devs: Sequence[tuple[int, int]], users: np.ndarray,
                   counts: Any) -> TableRequests:
    """The class tables' requests: their request counts, with the lower devices' carried
    requests (views/stack.py), the background ones (background_requests) and the empty
    PREFLUSH requests left out, and what was left out. counts: request_counts() of rq,
    returned as they are when nothing is left out.

    A flush is counted once, as what was issued: the `FF` flush. An empty PREFLUSH
    request (blkdev_issue_flush) is never issued; the flush machinery merges it into an
    `FF` it waits for (one `FF` serves every PREFLUSH pending on the queue), as a bio
    merged into a request is not a request of its own. The flush class counts the `FF`
    flushes; `empty_preflush` counts the empty PREFLUSH requests that were merged into
    them, those neither background nor carried.

    A request carried for a background request of the device above (the upper request
    carried_owner names) is background, not carried, and so on down the stack."""
    names = device_names(meta, rq.devices)
    upper_of = np.full(len(rq), -1, np.int64)
    owner = carried_owner(rq, cls, meta, users, upper_of)
    carried = None if owner is None else owner >= 0
    bg = background_requests(rq, meta, fsync_devs, carried, users, counts, cls)
    if owner is not None:
        # What carried another process's I/O (a request of the device above that is
        # background) is background too, down a stack of loop devices.
        for _ in range(len(rq.devices)):
            theirs = (owner >= 0) & (upper_of >= 0) & bg[np.maximum(upper_of, 0)] & ~bg
            if not theirs.any():
                break
            bg |= theirs
        owner = np.where(bg, -1, owner).astype(owner.dtype)
        carried = owner >= 0
    summary = None if owner is None else carried_summary(rq, owner, meta, names, cls)
    out = bg if carried is None else bg | carried
    bgs = background_summary(rq, bg, names)
    asked = (cls == FLUSH) & (rq.op != abi.OP_FLUSH)
    n_asked = int(np.count_nonzero(asked & ~out))
    drop = out | asked
    if not drop.any():
        return TableRequests(counts, summary, None, bgs, None, owner, 0)
    if counts is None:
        counts = request_counts(rq, cls)
    # The full counts less those of the requests left out (fewer than those kept, as a
    # rule: a copy of them is the smaller one).
    left_out = request_counts(without(rq, ~drop), cls[drop])
    return TableRequests(counts.minus(left_out), summary, bg if bg.any() else None, bgs,
                         drop, owner, n_asked)
