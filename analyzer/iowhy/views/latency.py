"""Latency view: per-class percentiles of the device, queue and total times of the
fully observed requests.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..kernels import I64, group_sort, select, sorted_percentiles
from ..model.requests import Requests, UNOBSERVED, first_start
from ..names import CLASS_NAMES


LATENCY_BLOCK = 1 << 15  # requests per block: the temporaries of a block stay in cache


LATENCY_FIGURES = ("device_ns", "queue_ns", "total_ns")


def latency_figures(rq: Requests, cls: np.ndarray) -> list[dict[str, Any]]:
    """device_total_ns and the device, queue and total percentiles of each class (report
    order). The values of each figure are sorted within classes by one sort: (class,
    value) packed in an int32 when every value is below 2^28 (the keys of the device and
    queue times are built in one pass, those of the total time in a second one, once
    the first two are dropped), else by group_sort on full arrays."""
    ncls = len(CLASS_NAMES)
    out: list[dict[str, Any]] = [{} for _ in range(ncls)]
    starts = (np.arange(ncls + 1, dtype=I64) << _LAT_VBITS).astype(np.int32)
    for figs in ((0, 1), (2,)):
        keys = _latency_keys(rq, cls, figs)
        for i, m in enumerate(figs):
            vals = keys[i]
            keys[i] = None
            if vals is not None:
                vals.sort()
                off = np.searchsorted(vals, starts)
                base = starts  # the class bits of a class's keys, subtracted from its figures
            else:
                vals, off = group_sort(*latency_values(rq, cls, m), ncls)
                base = np.zeros(ncls + 1, np.int32)
            for k in range(ncls):
                x = vals[off[k]:off[k + 1]]
                b = int(base[k])
                if m == 0:
                    out[k]["device_total_ns"] = int(x.sum(dtype=I64)) - b * len(x)
                pct = sorted_percentiles(x, (50, 90, 99))
                out[k][LATENCY_FIGURES[m]] = {q: None if p is None else p - b
                                              for q, p in pct.items()}
            del vals
    return out


_LAT_VBITS = 28  # value bits of the packed int32 keys (3 bits of class, 8 groups)


def _latency_keys(rq: Requests, cls: np.ndarray, figs: tuple[int, ...]
                  ) -> list[np.ndarray | None]:
    """(class << 28 | value) as int32 of figures `figs` (0, 1: the device and queue
    times, which leave out the same requests; or 2: the total time) of every request
    (class 7 for a request left out, with value 0), None for a figure whose values do
    not all fit 28 bits (see latency_values). Block by block: the columns the figures
    share are read once and the temporaries stay in cache."""
    n = len(rq)
    none = len(CLASS_NAMES) << _LAT_VBITS
    lim = 1 << _LAT_VBITS
    keys: list[np.ndarray | None] = [np.empty(n, np.int32) for _ in figs]

    def put(i: int, a: int, c: np.ndarray, v: np.ndarray, out: np.ndarray) -> None:
        # Keys a, a + 1, ... of figure figs[i] from the values v and the class bits c.
        k = keys[i]
        if k is None:
            return
        if int(v.max()) >= lim:
            keys[i] = None
            return
        kb = k[a:a + len(v)]
        np.copyto(kb, v, casting="unsafe")
        kb |= c
        kb[out] = none

    for a in range(0, n, LATENCY_BLOCK):
        b = min(a + LATENCY_BLOCK, n)
        iss, ins, done = rq.issue[a:b], rq.insert[a:b], rq.done[a:b]
        c = cls[a:b].astype(np.int32)
        c <<= _LAT_VBITS
        # The requests left out (few): value 0, class `none`, set on their own.
        bad = (rq.flags[a:b] & UNOBSERVED) != 0
        if figs[0] == 0:
            # Device and queue times: of fully observed, issued requests.
            out = np.flatnonzero(bad | (iss <= 0))
            v = done - iss
            np.maximum(v, 0, out=v)
            v[out] = 0
            put(0, a, c, v, out)
            np.subtract(iss, ins, out=v)
            np.maximum(v, 0, out=v)
            v *= ins > 0
            v[out] = 0
            put(1, a, c, v, out)
        else:
            # Total time: from the first known start (submit, else insert, else issue),
            # looked up only for the few requests without a submit time.
            sub = rq.submit[a:b]
            v = done - sub
            z = np.flatnonzero(sub <= 0)
            if len(z):
                st = select(ins[z] > 0, ins[z], iss[z])
                bad[z] |= st <= 0
                v[z] = done[z] - st
            np.maximum(v, 0, out=v)
            out = np.flatnonzero(bad)
            v[out] = 0
            put(0, a, c, v, out)
    return keys


def latency_values(rq: Requests, cls: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(class, or 7 for a request left out; value) of figure m for every request: the
    definition of the per-request times (model/requests.py says them in words).

    m = 0, device: final completion - issue; 1, queue: issue - insert (0 for a direct
    issue); 2, total: final completion - first known start. Each at least 0; only for
    fully observed requests (not UNOBSERVED), issued ones for the device and queue times
    and those with a known start for the total. _latency_keys computes the same values
    block by block, packed with their class."""
    none = np.int8(len(CLASS_NAMES))
    ok = np.bitwise_and(rq.flags, UNOBSERVED) == 0
    issue, insert, done = rq.issue, rq.insert, rq.done
    if m < 2:
        lat = issue > 0
        lat &= ok
        grp = select(lat, cls, none)
        if m == 0:
            v = done - issue
            np.maximum(v, 0, out=v)
            return grp, v
        v = issue - insert
        v *= insert > 0
        np.maximum(v, 0, out=v)
        return grp, v
    start = first_start(rq)
    ok &= start > 0
    grp = select(ok, cls, none)
    np.subtract(done, start, out=start)
    np.maximum(start, 0, out=start)
    return grp, start


VALUE_FIGURES = ("device", "queue", "total")


def values_by_class(rq: Requests, cls: np.ndarray, figures: Sequence[str] = VALUE_FIGURES
                    ) -> dict[str, dict[str, np.ndarray]]:
    """{figure: {class name: its values (latency_values), ascending}} for the figures
    asked for ("device", "queue", "total"): for `iowhy hist` and the HTML figures."""
    ncls = len(CLASS_NAMES)
    out: dict[str, dict[str, np.ndarray]] = {}
    for m, fig in enumerate(VALUE_FIGURES):
        if fig not in figures:
            continue
        vals, off = group_sort(*latency_values(rq, cls, m), ncls)
        out[fig] = {name: vals[off[k]:off[k + 1]].astype(I64)
                    for k, name in enumerate(CLASS_NAMES)}
    return out


def split_values(group: np.ndarray, values: np.ndarray, keep: np.ndarray,
                 names: Sequence[str]) -> dict[str, np.ndarray]:
    """{names[g]: the values of group g among `keep`, ascending} for the groups that
    have any (`iowhy hist -D` and `--flags`: group = a request's device or flag
    combination)."""
    g = np.asarray(group)[keep].astype(I64)
    v = np.asarray(values)[keep].astype(I64)
    order = np.lexsort((v, g))
    g, v = g[order], v[order]
    bounds = np.searchsorted(g, np.arange(len(names) + 1))
    return {name: v[bounds[k]:bounds[k + 1]] for k, name in enumerate(names)
            if bounds[k + 1] > bounds[k]}


def latency_split(rq: Requests, cls: np.ndarray, figure: str, group: np.ndarray,
                  names: Sequence[str], klass: int | None = None
                  ) -> dict[str, np.ndarray]:
    """The values of one figure ("device", "queue", "total": latency_values) of the
    requests of class `klass` (None: all), by group (split_values)."""
    grp, v = latency_values(rq, cls, VALUE_FIGURES.index(figure))
    keep = grp < len(CLASS_NAMES) if klass is None else grp == klass
    return split_values(group, v, keep, names)
