"""What the causal engine (views/causal.py) walks, built from the model: the causal
timeline of the workload's threads and helpers (model/wakeups.py), the fill that names
a blocked instant by what the workload's devices were doing, and the root thread.

A loop device's requests are carried by the devices below it when those are recorded
(views/stack.py): a wait on one is named by the loop device's own service (its flush,
its stage), and so is a wait the fill names (the loop device's requests are among the
devices the fill covers, beside the devices below: never its server, the loop worker or
the class of the I/O it sends below).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..kernels import union_intervals, unique
from ..model.devices import described_names
from ..model.requests import Requests, Window
from ..model.wakeups import (HELPER_IRQ, RequestLink, Timeline, build_timeline,
                             foreign_jbd2)
from .causal import (device_fill, helper_busy, helper_timers, root_actor,
                     unrecorded_helper_details)
from .series import comm_text
from .stack import carrier_devices, served_devices
from .workload import flush_waits, workload_covers


def _wakers(off: Mapping[str, np.ndarray], helper: Mapping[str, np.ndarray] | None
            ) -> tuple[np.ndarray, np.ndarray]:
    """(tid, comm) of every waker the off-CPU and helper records name."""
    cols = [c for c in (off, helper) if c and len(c.get("waker_tid", ()))]
    if not cols:
        return np.zeros(0, np.int64), np.zeros(0, "S16")
    return (np.concatenate([np.asarray(c["waker_tid"]).astype(np.int64) for c in cols]),
            np.concatenate([np.asarray(c["waker_comm"]) for c in cols]))


def foreign_helpers(tl: Timeline, tid: np.ndarray, comm: np.ndarray) -> list[int]:
    """The tids of recorded helpers that are another filesystem's journal thread
    (foreign_jbd2), named by the records where they woke a thread (_wakers)."""
    if not len(tid):
        return []
    bad = foreign_jbd2(comm, tl.devices)
    return sorted(set(tid[bad].tolist()) & set(tl.tids[tl.helper].tolist()))


def helper_names(tl: Timeline, tid: np.ndarray, comm: np.ndarray) -> dict[int, str]:
    """tid -> name of each helper of the timeline that woke a recorded thread (kernel
    threads have no task record: their name is the one their wakeups carry, _wakers),
    as views/series.py task_comms decodes names."""
    hit = np.flatnonzero(np.isin(tid, np.asarray(tl.tids[tl.helper], np.int64)))
    u, first = np.unique(tid[hit], return_index=True)
    return {int(t): comm_text(c) for t, c in zip(u.tolist(), comm[hit[first]].tolist())}


def causal_inputs(win: Window, meta: Mapping[str, Any], rq: Requests, stages: Any,
                  unions: Any, flush: Any, relevant: Sequence[int], classes: np.ndarray,
                  tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                  helper: Mapping[str, np.ndarray] | None, calls: Mapping[str, np.ndarray],
                  recorder_pid: int | None, threads: int
                  ) -> tuple[Timeline, Any, int, dict[int, str]]:
    """(timeline, fill, root, helper names): the causal timeline, the fill of its
    blocked instants (views/causal.py device_fill), the root actor and the helpers'
    names (helper_names).

    relevant: the devices the workload's requests count on (views/device.py
    relevant_devices); stages, unions, flush: the model's (model/stages.py,
    views/device.py device_unions, model/flush.py)."""
    arch = meta.get("machine")
    carriers = carrier_devices(meta, rq.devices, unique(rq.dev).tolist())

    def covers_of(devs: Sequence[int]) -> Any:
        return workload_covers(rq, stages, unions, flush, devs)
    served = served_devices(relevant, carriers)
    covers, waits = covers_of(served)
    # The fill covers a loop device's own requests too, beside the devices below it: its
    # class names a wait as it names one linked to its request (a metadata read through
    # a loop device is metadata, whatever the class of the read its worker sends below).
    fill_covers = covers_of(sorted(set(served) | set(relevant)))[0] if carriers else covers
    # The fill's flush waits are a carrier's too: a wait on one is its own service's, a
    # flush, as a wait linked to its request (model/wakeups.py); the log writes' come
    # first (a subset of them: the fill's coverages nest).
    both = sorted(set(served) | set(carriers))
    fill_waits = flush_waits(rq, flush, both) if carriers else waits
    log_waits = flush_waits(rq, flush, both, classes)
    link = RequestLink.build(rq, classes)
    if covers:
        link.flushing = union_intervals(np.concatenate((covers[0].s, waits[0])),
                                        np.concatenate((covers[0].e, waits[1])))
    if carriers:
        cc, cw = covers_of(sorted(carriers))
        link.carriers = np.asarray(sorted(carriers), np.int32)
        if cc:
            link.flushing_carried = union_intervals(np.concatenate((cc[0].s, cw[0])),
                                                    np.concatenate((cc[0].e, cw[1])))
    tl = build_timeline(win, tasks, off, helper, link, arch, devices=described_names(meta),
                        calls=calls, threads=threads)
    del link
    wtid, wcomm = _wakers(off, helper)
    foreign, names = foreign_helpers(tl, wtid, wcomm), helper_names(tl, wtid, wcomm)
    del wtid, wcomm  # a name per waker record: not kept while the fill is made
    busy = helper_busy(tl, foreign, threads)
    fill = helper_timers(device_fill(fill_covers, fill_waits,
                                     [*unrecorded_helper_details(tl), HELPER_IRQ],
                                     busy, log_waits))
    root = root_actor(tl, tasks, recorder_pid)
    return tl, fill, root, names
