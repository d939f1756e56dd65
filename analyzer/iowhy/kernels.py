"""Generic numpy kernels the analysis is built on: interval unions and coverage,
group sorts and group statistics, unique values, the nearest-rank percentile, log2 slots.

Each function states its contract in its first line; tests/unit/test_kernels.py checks
each against a slow reference at sizes around its block edges. Intervals are half-open,
``[start, end)``, of int64 nanoseconds. Grouped interval operations use *keyed time*:
``group * span + (t - origin)`` with span larger than any time offset, so one sort orders
by (group, time) and intervals of different groups never touch.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


I64 = np.int64
_KEY_LIMIT = 1 << 62


def key_span(start_ns: int, end_ns: int) -> int:
    """Span for keyed time over [start_ns, end_ns]: every offset is < span."""
    return int(end_ns - start_ns) + 2


def check_keyed(groups: int, span: int) -> None:
    """Raise OverflowError unless keyed time of `groups` groups of `span` fits 62 bits."""
    if groups and groups * span >= _KEY_LIMIT:
        raise OverflowError(f"{groups} groups x {span} ns do not fit a 62-bit key")


def select(cond: np.ndarray, a: Any, b: Any) -> np.ndarray:
    """np.where(cond, a, b) for integers, as b + (a - b) * cond: the same values (integer
    arithmetic wraps around exactly) and several times faster on unpredictable
    conditions, where np.where and masked copies branch element by element."""
    out = np.subtract(a, b)
    out *= cond
    out += b
    return out


def unique(x: Any) -> np.ndarray:
    """np.unique of a 1-d array (its distinct values, sorted) by a sort: numpy >= 2.3
    finds them by hashing, several times slower on the arrays met here."""
    s = np.sort(np.asarray(x).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


GATHER_BLOCK = 1 << 16


def gather(arr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """arr[idx] for int32 (or any) indices: block by block with the indices as int64
    (numpy gathers several times faster with intp indices)."""
    if idx.dtype == np.intp:
        return np.take(arr, idx)
    n = len(idx)
    out = np.empty(n, arr.dtype)
    for a in range(0, n, GATHER_BLOCK):
        b = min(a + GATHER_BLOCK, n)
        # np.take(..., out=out) in its default mode ("raise") first copies `out` and
        # writes the copy back: on fresh memory, that read maps the zero page and the
        # write back then faults again. With indices known to be valid, mode="clip"
        # gives the same values without the copy.
        np.take(arr, idx[a:b].astype(np.intp), out=out[a:b], mode="clip")
    return out


def union_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [s, e) given sorted by start; returns disjoint sorted intervals.

    Touching intervals ([0,5) and [5,9)) merge. Empty intervals must be removed first.
    """
    n = len(s)
    if n == 0:
        return np.zeros(0, I64), np.zeros(0, I64)
    cm = np.maximum.accumulate(e)
    brk = np.empty(n, dtype=bool)
    brk[0] = True
    np.greater(s[1:], cm[:-1], out=brk[1:])
    first = np.flatnonzero(brk)
    del brk
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = n - 1
    return np.take(s, first), np.take(cm, last)


def union_groups(s: np.ndarray, e: np.ndarray, group: np.ndarray, ngroups: int,
                 block: int = 1 << 16) -> list[tuple[np.ndarray, np.ndarray]]:
    """[union_sorted(s[group == k], e[group == k]) for k in range(ngroups)] of intervals
    sorted by start (none empty), a block at a time: the interval still open at the end
    of a block carries over to the next (small temporaries).

    In a block, one value sort of (group, position) packed in an unsigned int lists the
    positions group by group (faster than a search of each group), so that one gather
    of the starts and one of the ends serve all groups, and the new intervals of all
    groups are found in one pass."""
    starts: list[list[np.ndarray]] = [[] for _ in range(ngroups)]
    ends: list[list[np.ndarray]] = [[] for _ in range(ngroups)]
    carry: list[tuple[int, int] | None] = [None] * ngroups
    n = len(s)
    m = min(block, n)
    pbits = max(1, (m - 1).bit_length())
    kt = np.dtype(np.uint32 if pbits + max(1, (ngroups - 1).bit_length()) <= 32 else np.uint64)
    key: np.ndarray = np.empty(m, kt)
    pos: np.ndarray = np.arange(m, dtype=kt)
    sel = np.empty(m, np.intp)
    new = np.empty(m, bool)
    shift = kt.type(pbits)
    heads = np.left_shift(np.arange(ngroups + 1, dtype=kt), shift)  # where the groups begin
    low = kt.type((1 << pbits) - 1)
    for a in range(0, n, block):
        b = min(a + block, n)
        m = b - a
        kb = key[:m]
        np.copyto(kb, group[a:b], casting="unsafe")
        kb <<= shift
        kb |= pos[:m]
        kb.sort()
        bounds = np.searchsorted(kb, heads).tolist()  # group k: [bounds[k], bounds[k + 1])
        sb = sel[:m]
        np.bitwise_and(kb, low, out=sb, casting="unsafe")
        sk, cm = np.take(s[a:b], sb), np.take(e[a:b], sb)
        # The running max of the ends per group, from the carried interval's end.
        for k in range(ngroups):
            lo, hi = bounds[k], bounds[k + 1]
            if lo < hi:
                ck = cm[lo:hi]
                c = carry[k]
                if c is not None and c[1] > int(ck[0]):
                    ck[0] = c[1]
                np.maximum.accumulate(ck, out=ck)
        nb = new[:m]
        np.greater(sk[1:], cm[:-1], out=nb[1:])
        for k in range(ngroups):
            lo = bounds[k]
            if lo < bounds[k + 1]:
                c = carry[k]
                nb[lo] = c is None or int(sk[lo]) > c[1]
        first = np.flatnonzero(nb)
        fb = np.searchsorted(first, bounds).tolist()  # group k: first[fb[k]:fb[k + 1]]
        fs = np.take(sk, first)
        first -= 1
        fe = np.take(cm, first, mode="clip")  # the end of the interval before each
        for k in range(ngroups):
            lo, hi = bounds[k], bounds[k + 1]
            if lo == hi:
                continue
            i0, i1 = fb[k], fb[k + 1]
            c = carry[k]
            if c is not None:
                if i1 > i0 and first[i0] == lo - 1:  # the carried interval ended before
                    starts[k].append(np.array([c[0]], I64))
                    ends[k].append(np.array([c[1]], I64))
                elif i1 > i0:  # it extends up to the first new interval
                    starts[k].append(np.array([c[0]], I64))
                    ends[k].append(fe[i0:i0 + 1])
                else:  # it extends over the whole block
                    carry[k] = (c[0], int(cm[hi - 1]))
                    continue
            starts[k].append(fs[i0:i1 - 1])
            ends[k].append(fe[i0 + 1:i1])
            carry[k] = (int(fs[i1 - 1]), int(cm[hi - 1]))
    out = []
    for k in range(ngroups):
        c = carry[k]
        if c is not None:
            starts[k].append(np.array([c[0]], I64))
            ends[k].append(np.array([c[1]], I64))
        out.append((np.concatenate(starts[k]) if starts[k] else np.zeros(0, I64),
                    np.concatenate(ends[k]) if ends[k] else np.zeros(0, I64)))
    return out


def sort_with_order(x: np.ndarray, runs: bool = False, overwrite: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(x sorted, the stable order that sorts it) of an integer array.

    When x >= 0 and (value, position) fit 64 bits they are packed in one uint64 (block
    by block: the temporaries stay in cache) and sorted by value, several times faster
    than an argsort; runs=True for data made of a few sorted runs (a stable value sort
    merges them). overwrite=True lets an int64 x hold the packed keys (no copy); x is
    then left undefined.
    """
    n = len(x)
    ibits = max(1, (n - 1).bit_length())
    if n and int(x.min()) >= 0 and int(x.max()).bit_length() + ibits <= 64:
        inplace = overwrite and x.dtype == I64 and x.flags.c_contiguous
        key = x.view(np.uint64) if inplace else np.empty(n, np.uint64)
        shift = np.uint64(ibits)
        for a in range(0, n, SORT_BLOCK):
            b = min(a + SORT_BLOCK, n)
            kb = key[a:b]
            if not inplace:
                np.copyto(kb, x[a:b], casting="unsafe")
            kb <<= shift
            kb |= np.arange(a, b, dtype=np.uint64)
        key.sort(kind="stable" if runs else None)
        order = (key & np.uint64((1 << ibits) - 1)).view(I64)
        key >>= np.uint64(ibits)
        return key.view(I64).astype(x.dtype, copy=False), order
    order = np.argsort(x, kind="stable")
    return x[order], order


SORT_BLOCK = 1 << 16  # values packed at a time by sort_with_order


def union_intervals(s: np.ndarray, e: np.ndarray, runs: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Union of arbitrary intervals [s, e) (empty ones ignored). runs=True when they
    come as a few runs sorted by start (sort_with_order merges them)."""
    keep = e > s
    if not keep.all():
        sel = np.flatnonzero(keep)
        s, e = s[sel], e[sel]
    del keep
    s, order = sort_with_order(np.asarray(s, dtype=I64), runs=runs)
    return union_sorted(s, e[order])


def union_where(s: np.ndarray, e: np.ndarray, sel: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """union_intervals() of the intervals [s, e) where `sel` (s >= 0). When (start,
    length) fit 64 bits they are packed in one uint64 and sorted by value (the union
    does not depend on the order of equal starts): no gather of the ends by an order."""
    sel = sel & (e > s)
    idx = np.flatnonzero(sel)
    del sel
    s = np.take(s, idx)
    ln = np.take(e, idx)
    del idx
    ln -= s
    if not len(s):
        return s, ln
    lbits = int(ln.max()).bit_length()
    if int(s.max()).bit_length() + lbits > 64:
        return union_intervals(s, s + ln)
    key = s.astype(np.uint64)
    key <<= np.uint64(lbits)
    key |= ln.view(np.uint64)
    del s, ln
    key.sort()
    ln = (key & np.uint64((1 << lbits) - 1)).view(I64)
    key >>= np.uint64(lbits)
    s = key.view(I64)
    ln += s
    return union_sorted(s, ln)


def merge_unions(a: tuple[np.ndarray, np.ndarray],
                 b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Union of two sorted interval lists as union_sorted returns them (disjoint, none
    touching). Each interval of the shorter takes in the intervals of the longer it
    meets or touches (two binary searches); those are united, and the intervals of the
    longer met by none (which then touch nothing) are placed among them: no pass over the
    longer, only searches in it."""
    if len(a[0]) > len(b[0]):
        a, b = b, a
    if len(a[0]) == 0:
        return b
    bs, be = b
    nb = len(bs)
    # b[lo[i]:hi[i]] meet or touch a[i]: they end at or after its start and start at or
    # before its end (none when hi <= lo).
    lo = np.searchsorted(be, a[0], side="left")
    hi = np.searchsorted(bs, a[1], side="right")
    met = hi > lo
    s = select(met, np.minimum(a[0], np.take(bs, lo, mode="clip")), a[0])
    e = select(met, np.maximum(a[1], np.take(be, hi - 1, mode="clip")), a[1])
    us, ue = union_sorted(s, e)
    del s, e
    # The intervals of b in no such range: lo and hi grow with i, so those from hi[i] up
    # to the next range's lo (the gaps between consecutive ranges, none where they
    # overlap), and those before the first range and after the last.
    m = np.flatnonzero(met)
    gs = np.concatenate(([0], np.take(hi, m)))
    gl = np.concatenate((np.take(lo, m), [nb]))
    gl -= gs
    np.maximum(gl, 0, out=gl)
    off = np.cumsum(gl)
    off -= gl
    gs -= off
    rest = np.repeat(gs, gl)
    rest += np.arange(len(rest))
    del m, gs, gl, off
    rs, re_ = np.take(bs, rest), np.take(be, rest)
    # Where each united interval goes: after the rest of b that start before it and the
    # united ones before it.
    pos = np.searchsorted(rs, us)
    pos += np.arange(len(us))
    n = len(rest) + len(us)
    keep = np.ones(n, bool)
    keep[pos] = False
    out_s = np.empty(n, I64)
    out_e = np.empty(n, I64)
    out_s[pos] = us
    out_e[pos] = ue
    out_s[keep] = rs
    out_e[keep] = re_
    return out_s, out_e


class Coverage:
    """Measure of a set of disjoint sorted intervals inside arbitrary windows."""

    def __init__(self, s: np.ndarray, e: np.ndarray) -> None:
        self.s = np.asarray(s, dtype=I64)
        # The end of the interval before each position: e shifted by one, a time below
        # any met first (so that nothing is cut from the empty set before the first).
        # The ends are kept once: e is a view of it.
        self.prev_e = np.empty(len(self.s) + 1, dtype=I64)
        self.prev_e[0] = -(1 << 62)
        self.prev_e[1:] = e
        self.e = self.prev_e[1:]
        self.cum = np.zeros(len(self.s) + 1, dtype=I64)
        np.subtract(self.e, self.s, out=self.cum[1:])
        np.cumsum(self.cum[1:], out=self.cum[1:])

    @property
    def total(self) -> int:
        return int(self.cum[-1])

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Measure of the set inside (-inf, t)."""
        t = np.asarray(t, dtype=I64)
        if len(self.s) == 0:
            return np.zeros(t.shape, I64)
        j = np.searchsorted(self.s, t, side="right")
        # cum[j] minus the part of interval j - 1 at or after t.
        cut = np.take(self.prev_e, j)
        cut -= t
        np.maximum(cut, 0, out=cut)
        out = np.take(self.cum, j)
        out -= cut
        return out

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Measure of the set inside each [a, b) (0 where b <= a)."""
        a = np.asarray(a, dtype=I64)
        b = np.asarray(b, dtype=I64)
        return np.maximum(self.upto(np.maximum(a, b)) - self.upto(a), 0)


def nested_coverage(prev: Coverage | None, s: np.ndarray, e: np.ndarray) -> Coverage:
    """The next of a list of nested coverages (each the union of the one before and
    more), the intervals [s, e): the one before itself when they are the same, so that
    equal coverages are kept once."""
    if prev is not None and np.array_equal(prev.s, s) and np.array_equal(prev.e, e):
        return prev
    return Coverage(s, e)


def log2_slots(values: np.ndarray) -> np.ndarray:
    """biolatency's log2 slot of each non-negative value: 0 and 1 -> 0, [2^i, 2^(i+1)) -> i."""
    v = np.asarray(values, dtype=I64)
    v = np.maximum(v, 1).astype(np.float64)
    # float log2 is exact at powers of two and monotone, so floor() is the slot.
    return np.floor(np.log2(v)).astype(np.int16)


def log2_hist(values: np.ndarray) -> list[int]:
    """Counts per biolatency log2 slot, trailing empty slots dropped."""
    if len(values) == 0:
        return []
    counts = np.bincount(log2_slots(values))
    nz = np.flatnonzero(counts)
    return counts[: int(nz[-1]) + 1].tolist() if len(nz) else []


def nearest_rank(n: Any, q: int) -> Any:
    """0-based position of the nearest-rank percentile q (the value at rank
    ceil(q/100 * n), 1-based) among n sorted values; n an int or an int array."""
    r = (q * n + 99) // 100 - 1
    return max(0, r) if isinstance(r, int) else np.maximum(r, 0)


def percentiles(values: np.ndarray, qs: Sequence[int] = (50, 99),
                inplace: bool = False) -> dict[str, int | None]:
    """Nearest-rank percentiles (the value at rank ceil(q/100 * n)) and max, as ints.

    Chained in-place partitions (each on the part above the previous rank) are several
    times faster than one np.partition with many kth. `inplace` reorders `values`.
    """
    n = len(values)
    out: dict[str, int | None] = {}
    if n == 0:
        for q in qs:
            out[f"p{q}"] = None
        out["max"] = None
        return out
    arr = values if inplace else np.array(values, copy=True)
    rank = {q: nearest_rank(n, q) for q in qs}
    got: dict[int, int] = {}
    lo = 0
    if n > 4096:
        # Many zeros (queue times of direct issues) make introselect crawl: rank the
        # non-zero values only when zeros are a large share of non-negative data.
        zeros = int(np.count_nonzero(arr == 0))
        if zeros > n // 8 and int(arr.min()) == 0:
            rest = arr[arr != 0]
            for q in qs:
                k = rank[q]
                got[k] = 0 if k < zeros else -1
            pend = sorted({k - zeros for k, v in got.items() if v == -1})
            sub = percentiles_at(rest, pend)
            for k in list(got):
                if got[k] == -1:
                    got[k] = sub[k - zeros]
            for q in qs:
                out[f"p{q}"] = got[rank[q]]
            out["max"] = int(rest.max()) if len(rest) else 0
            return out
    for k in sorted(set(rank.values())):
        part = arr[lo:]
        part.partition(k - lo)
        got[k] = int(arr[k])
        lo = k + 1
    for q in qs:
        out[f"p{q}"] = got[rank[q]]
    out["max"] = int(arr[lo:].max()) if lo < n else got[n - 1]
    return out


def percentiles_at(arr: np.ndarray, ranks: Sequence[int]) -> dict[int, int]:
    """Values at sorted ranks of `arr` (reordered in place) by chained partitions."""
    got: dict[int, int] = {}
    lo = 0
    for k in sorted(set(ranks)):
        arr[lo:].partition(k - lo)
        got[k] = int(arr[k])
        lo = k + 1
    return got


def sorted_percentiles(x: np.ndarray, qs: Sequence[int] = (50, 99)) -> dict[str, int | None]:
    """percentiles() of values already sorted ascending."""
    n = len(x)
    out: dict[str, int | None] = {}
    for q in qs:
        out[f"p{q}"] = int(x[nearest_rank(n, q)]) if n else None
    out["max"] = int(x[-1]) if n else None
    return out


def group_sort(group: np.ndarray, values: np.ndarray, ngroups: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Values sorted within groups, one sort for all groups.

    group: int8 in [0, ngroups]; the value ngroups leaves a value out. values: int64,
    overwritten. Returns (vals, off): group g's values ascending in vals[off[g]:off[g+1]].
    (group, value) is packed in one integer when the values allow: int32 for small
    values (a 32-bit sort is twice as fast), else int64; otherwise a lexsort.
    """
    values *= group != ngroups
    gbits = max(1, int(ngroups).bit_length())
    lo = int(values.min()) if len(values) else 0
    hi = int(values.max()) if len(values) else 0
    starts = np.arange(ngroups + 1, dtype=I64)
    dtype: Any
    for dtype, bits in ((np.int32, 31), (I64, 63)):
        vbits = bits - gbits
        if lo >= 0 and hi < (1 << vbits):
            key: Any = values.astype(dtype) if dtype is np.int32 else values
            g: Any = group.astype(dtype)
            g <<= vbits
            key |= g
            del g
            key.sort()
            off = np.searchsorted(key, (starts << vbits).astype(dtype))
            key &= dtype((1 << vbits) - 1)
            return key, off
    order = np.lexsort((values, group))
    off = np.searchsorted(group[order], starts)
    return values[order], off


def group_lengths(us: np.ndarray, ue: np.ndarray, span: int, ngroups: int) -> np.ndarray:
    """Total length per group of disjoint keyed intervals (exact int64)."""
    if ngroups > 64 and span < (1 << 53):
        # Many groups: count each interval in its group directly. A group's total is at
        # most span < 2^53, so the float64 sums of integer lengths are exact.
        if not len(us):
            return np.zeros(ngroups, I64)
        g = us // span
        return np.bincount(g, weights=ue - us, minlength=ngroups)[:ngroups].astype(I64)
    cum = np.zeros(len(us) + 1, I64)
    np.cumsum(ue - us, out=cum[1:])
    b = np.searchsorted(us, np.arange(ngroups + 1, dtype=I64) * span)
    return cum[b[1:]] - cum[b[:-1]]


def exclusive_by_priority(unions: Sequence[tuple[np.ndarray, np.ndarray]], span: int,
                          ngroups: int) -> np.ndarray:
    """[ngroups, nprio] time exclusive to each priority (highest wins) per group."""
    cum = np.stack([group_lengths(u[0], u[1], span, ngroups) for u in unions], axis=1)
    out = cum.copy()
    out[:, 1:] -= cum[:, :-1]
    return out


def small_unique(x: np.ndarray) -> np.ndarray:
    """np.unique of integers; by marking a table when they are small non-negative ones
    (thread ids: pid_max <= 2^22), without a sort."""
    if len(x) and int(x.min()) >= 0 and int(x.max()) < (1 << 23):
        seen = np.zeros(int(x.max()) + 1, bool)
        seen[x] = True
        return np.flatnonzero(seen).astype(x.dtype, copy=False)
    return unique(x)


def dense_codes(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique(k), the position of each of k in it); one pass when k is sorted (journal
    records of one filesystem, in time order)."""
    if len(k) > 1:
        new = k[1:] != k[:-1]
        if (k[1:] >= k[:-1]).all():
            pos = np.zeros(len(k), I64)
            np.cumsum(new, out=pos[1:])
            return k[np.flatnonzero(np.concatenate(([True], new)))], pos
    keys = unique(k)
    return keys, np.searchsorted(keys, k)


def floor_log2(v: np.ndarray) -> np.ndarray:
    """floor(log2(v)) of integers 1 <= v < 2^53, read from the float64 exponent."""
    x = np.asarray(v).astype(np.float64).view(I64)
    x >>= 52
    x -= 1023
    return x


def group_stats(groups: np.ndarray, values: np.ndarray, ngroups: int, qs: Sequence[int]
                ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """(count per group, {q: nearest-rank percentile q per group}) of int64 `values` in
    groups 0..ngroups-1 (0 for an empty group). (group, value - min) packed in one int64
    and sorted by value (a vectorised sort, much faster than partitions group by group);
    a lexsort when they do not fit."""
    cnt = np.bincount(groups, minlength=ngroups)[:ngroups].astype(I64)
    out = {q: np.zeros(ngroups, I64) for q in qs}
    if not len(values):
        return cnt, out
    v = np.asarray(values, dtype=I64)
    lo = int(v.min())
    vbits = max(1, (int(v.max()) - lo).bit_length())
    if vbits + max(1, (int(ngroups) - 1).bit_length()) <= 63:
        key = np.left_shift(groups, vbits, dtype=I64)
        key += v
        if lo:
            key -= lo  # v - lo is in [0, 2^vbits): it stays below the group's bits
        key.sort()
        key &= (1 << vbits) - 1
        if lo:
            key += lo
    else:
        key = v[np.lexsort((v, groups))]
    first = np.cumsum(cnt) - cnt
    has = np.flatnonzero(cnt)
    for q in qs:
        out[q][has] = key[first[has] + nearest_rank(cnt[has], q)]
    return cnt, out


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of the line through points (x, y): the slope is the median of
    the slopes between pairs of points with different x (0 without any, and never below
    0: a transfer does not get faster with size), the intercept the median of
    y - slope * x."""
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    use = dx != 0
    slope = float(np.median((y[j] - y[i])[use] / dx[use])) if use.any() else 0.0
    slope = max(slope, 0.0)
    return float(np.median(y - slope * x)), slope
