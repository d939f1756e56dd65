"""Threads of the workload: when each was alive (its task records, else its off-CPU
intervals), a fact the wakeup timeline and the workload view both read.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .. import abi
from ..kernels import I64, small_unique
from .requests import Window


def task_lifetimes(tasks: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray],
                   window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tids, birth, death) of every thread seen. Birth: its ROOT/FORK/JOIN event, else
    its first off-CPU interval; death: its DEAD event (its last switch-out), else its EXIT
    (traces before DEAD, or a DEAD not delivered), else the window end. Clipped to the
    window."""
    w0, w1 = window.start_ns, window.end_ns
    ttid = np.asarray(tasks["tid"]).astype(I64)
    otid = np.asarray(off["tid"]).astype(I64)
    tids = small_unique(np.concatenate((ttid, otid)))
    n = len(tids)
    birth = np.full(n, w1 + 1, I64)
    death = np.full(n, w1, I64)
    if len(ttid):
        ev = np.asarray(tasks["event_u16"])
        ts = np.asarray(tasks["ts_ns"]).astype(I64)
        ti = np.searchsorted(tids, ttid)
        b = (ev == abi.TASK_ROOT) | (ev == abi.TASK_FORK) | (ev == abi.TASK_JOIN)
        np.minimum.at(birth, ti[b], ts[b])
        dd = np.full(n, w1 + 1, I64)
        x = ev == abi.TASK_EXIT
        np.minimum.at(dd, ti[x], ts[x])
        gone = np.full(n, w1 + 1, I64)
        x = ev == abi.TASK_DEAD
        np.minimum.at(gone, ti[x], ts[x])
        dd = np.where(gone <= w1, np.maximum(gone, np.where(dd <= w1, dd, 0)), dd)
        death = np.where(dd <= w1, dd, w1)
    nob = birth > w1
    if nob.any() and len(otid):
        first = np.full(n, w1 + 1, I64)
        np.minimum.at(first, np.searchsorted(tids, otid),
                      np.asarray(off["start_ns"]).astype(I64))
        birth = np.where(nob, first, birth)
    birth = np.where(birth > w1, w0, birth)
    birth = np.clip(birth, w0, w1)
    death = np.clip(np.maximum(death, birth), w0, w1)
    return tids, birth, death
