"""Queue depth per device: mean, mean while busy, maximum and a time series.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import I64
from ..model.stages import Stages


def queue_depth(st: Stages, ndev: int, elapsed: int, buckets: int) -> dict[str, Any]:
    """Depth (device stages in flight) per device: area, exact max, mean per time bucket.

    The integral of the depth up to t is sum(t - start) over starts before t minus
    sum(t - end) over ends before t: exact integers from the sorted starts and ends at
    the bucket edges. The max needs the running count: the sorted ends and the (already
    sorted) starts are merged (ends first at equal times) and the count accumulated.
    """
    span = st.span
    nb = max(buckets, 1)
    width = max(1, -(-elapsed // nb))
    n = len(st.ks)
    maxd = np.zeros(ndev, I64)
    area = np.zeros(ndev, I64)
    series = np.zeros((ndev, nb))
    if not n or elapsed <= 0:
        return {"area": area, "max": maxd, "series": series, "step_ns": width}
    # The sorted ends: computed with the stages' service times (model.stages.service_times).
    ke = st.ends_sorted if st.ends_sorted is not None and len(st.ends_sorted) == n else \
        np.sort(st.ke)
    starts = np.arange(ndev + 1, dtype=I64) * span
    bs = np.searchsorted(st.ks, starts)
    be = np.searchsorted(ke, starts)
    edges_rel = np.minimum(np.arange(nb + 1, dtype=I64) * width, elapsed)
    lens = np.diff(edges_rel)
    for g in range(ndev):
        if bs[g + 1] <= bs[g]:
            continue
        maxd[g] = _max_depth_sampled(st.ks[bs[g]:bs[g + 1]], ke[be[g]:be[g + 1]])
        t = (g * span + edges_rel).tolist()
        integ = np.array(_integrals(st.ks[bs[g]:bs[g + 1]], t), dtype=I64)
        integ -= np.array(_integrals(ke[be[g]:be[g + 1]], t), dtype=I64)
        area[g] = int(integ[-1])
        series[g] = np.diff(integ) / np.maximum(lens, 1)
    used = -(-elapsed // width)  # buckets that hold some of the window
    return {"area": area, "max": maxd, "series": series[:, :used], "step_ns": width}


def _max_depth_sampled(ks: np.ndarray, ke: np.ndarray, step: int = 8) -> int:
    """_max_depth(), from the depths after every step-th start: the depth after start i
    is i + 1 - (ends <= ks[i]), which grows by at most one per start, so a run of step
    starts cannot go above the depth at its first plus step - 1. Only the runs whose
    bound is above the largest sampled depth are looked at start by start; when that is
    too many of them (a device whose depth stays near its maximum), _max_depth()."""
    n = len(ks)
    if n == 0:
        return 0
    first = np.arange(0, n, step)
    depth = first + 1
    depth -= np.searchsorted(ke, ks[::step], side="right")
    best = int(depth.max())
    runs = np.flatnonzero(depth > best - step + 1)
    if len(runs) * 2 > len(first):
        return _max_depth(ks, ke)
    for a in range(0, len(runs), 1 << 14):
        at = (runs[a:a + (1 << 14), None] * step + np.arange(step)).ravel()
        at = at[at < n]
        d = at + 1
        d -= np.searchsorted(ke, np.take(ks, at), side="right")
        best = max(best, int(d.max()))
    return best


def _max_depth(ks: np.ndarray, ke: np.ndarray, block: int = 1 << 18) -> int:
    """Largest number of intervals in flight, given their starts and their ends, each
    sorted (ends before starts at equal times).

    It is reached just after a start: after start i (0-based) the depth is
    i + 1 - (ends <= ks[i]). Block by block of starts, the ends up to the block's last
    start are merged with its starts (time << 1 | is_start: two sorted runs, which a
    stable sort merges) and counted, so the temporaries stay small.
    """
    best = 0
    j0 = 0  # ends <= the previous block's last start
    for i0 in range(0, len(ks), block):
        s = ks[i0:i0 + block]
        j1 = int(np.searchsorted(ke, s[-1], side="right"))
        ev = np.empty(len(s) + j1 - j0, I64)
        np.left_shift(ke[j0:j1], 1, out=ev[:j1 - j0])
        np.left_shift(s, 1, out=ev[j1 - j0:])
        ev[j1 - j0:] |= 1
        ev.sort(kind="stable")
        # After each event: starts so far (from i0) minus ends so far (from j0).
        step = np.empty(len(ev), np.int8)
        np.bitwise_and(ev, 1, out=step, casting="unsafe")
        del ev
        step += step
        step -= 1
        depth = np.cumsum(step, dtype=np.int32)
        del step
        # Depth before the block: i0 started, j0 ended.
        best = max(best, i0 - j0 + int(depth.max()))
        j0 = j1
    return best


def _integrals(x: np.ndarray, ts: list[int]) -> list[int]:
    """sum(t - v) over the values v < t of sorted x, for each t of increasing ts (exact;
    one pass over x)."""
    pos = np.searchsorted(x, ts, side="left").tolist()
    top = max(int(x[-1]), 1) if len(x) else 1
    block = max(1, ((1 << 63) - 1) // top)  # int64 sums of this many values cannot overflow
    out, below, prev = [], 0, 0
    for t, p in zip(ts, pos):
        for a in range(prev, p, block):
            below += int(x[a:min(a + block, p)].sum())
        prev = max(prev, p)
        out.append(p * t - below)
    return out
