"""Every kernel of iowhy.kernels against a slow reference, on random data at sizes around
its block edges (and on both sides of its fast-path conditions)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iowhy import kernels as K

RNG_SEED = 20261127


def rng(n: int) -> np.random.Generator:
    return np.random.default_rng(RNG_SEED + n)


def ref_union(s, e):
    """Union of [s, e) intervals (empty ones dropped), touching ones merged."""
    out: list[list[int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in zip(s, e) if b > a):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def pairs(u):
    return list(zip(u[0].tolist(), u[1].tolist()))


def intervals(n: int, span: int = 1000, maxlen: int = 30, seed: int = 0):
    g = rng(n + seed)
    s = g.integers(0, span, n).astype(np.int64)
    e = s + g.integers(1, maxlen, n)
    return s, e


EDGES = (0, 1, 2, 7, 8, 9, 15, 16, 17, 33)


@pytest.mark.parametrize("n", EDGES + (1000,))
def test_union_sorted_and_intervals(n):
    s, e = intervals(n)
    o = np.argsort(s, kind="stable")
    assert pairs(K.union_sorted(s[o], e[o])) == ref_union(s, e)
    e2 = e.copy()
    e2[::3] = s[::3]  # some empty ones
    assert pairs(K.union_intervals(s, e2)) == ref_union(s, e2)


@pytest.mark.parametrize("n", EDGES)
@pytest.mark.parametrize("ngroups", (1, 3, 5))
def test_union_groups_block_edges(n, ngroups):
    s, e = intervals(n, span=200, maxlen=40)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    g = rng(n * 7 + ngroups).integers(0, ngroups, n).astype(np.int8)
    got = K.union_groups(s, e, g, ngroups, block=8)
    for k in range(ngroups):
        assert pairs(got[k]) == ref_union(s[g == k], e[g == k])


@pytest.mark.parametrize("n", ((1 << 16) - 1, (1 << 16) + 1))
def test_union_groups_default_block(n):
    s, e = intervals(n, span=50 * n, maxlen=200)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    g = rng(n).integers(0, 5, n).astype(np.int8)
    got = K.union_groups(s, e, g, 5)
    for k in range(5):
        assert pairs(got[k]) == ref_union(s[g == k], e[g == k])


@pytest.mark.parametrize("na,nb", ((0, 0), (0, 5), (1, 1), (3, 40), (40, 3), (200, 200)))
def test_merge_unions(na, nb):
    a = K.union_intervals(*intervals(na, seed=1))
    b = K.union_intervals(*intervals(nb, seed=2))
    want = ref_union(np.concatenate((a[0], b[0])), np.concatenate((a[1], b[1])))
    assert pairs(K.merge_unions(a, b)) == want


@pytest.mark.parametrize("n", (0, 1, 5, 100))
def test_coverage(n):
    us, ue = K.union_intervals(*intervals(n))
    cov = K.Coverage(us, ue)
    covered = np.zeros(1100, bool)
    for a, b in zip(us.tolist(), ue.tolist()):
        covered[a:b] = True
    t = np.arange(-5, 1100)
    assert cov.upto(t).tolist() == [int(covered[:max(x, 0)].sum()) for x in t.tolist()]
    g = rng(n)
    a = g.integers(0, 1100, 300)
    b = g.integers(0, 1100, 300)
    assert cov.within(a, b).tolist() == [int(covered[x:y].sum()) if y > x else 0
                                         for x, y in zip(a.tolist(), b.tolist())]
    assert cov.total == int(covered.sum())


@pytest.mark.parametrize("n", (0, 1, 2, (1 << 16) - 1, 1 << 16, (1 << 16) + 1))
@pytest.mark.parametrize("kind", ("small", "negative", "huge"))
def test_sort_with_order(n, kind):
    g = rng(n)
    if kind == "small":
        x = g.integers(0, 50, n).astype(np.int64)
    elif kind == "negative":
        x = g.integers(-50, 50, n).astype(np.int64)
    else:  # values that leave no room for the position bits
        x = g.integers(0, 1 << 62, n).astype(np.int64)
    xs, order = K.sort_with_order(x.copy())
    ref = np.argsort(x, kind="stable")
    assert np.array_equal(order, ref) and np.array_equal(xs, x[ref])
    xs2, order2 = K.sort_with_order(x.copy(), runs=True, overwrite=True)
    assert np.array_equal(order2, ref) and np.array_equal(xs2, x[ref])


@pytest.mark.parametrize("n", (0, 1, (1 << 16) - 1, 1 << 16, (1 << 16) + 1))
def test_gather(n):
    g = rng(n)
    arr = g.integers(0, 1 << 40, 1000)
    idx = g.integers(0, 1000, n)
    for dt in (np.int32, np.intp):
        assert np.array_equal(K.gather(arr, idx.astype(dt)), arr[idx])


@pytest.mark.parametrize("n", (0, 1, 2, 500))
def test_unique_small_unique_dense_codes(n):
    g = rng(n)
    x = g.integers(0, 40, n).astype(np.int64)
    assert np.array_equal(K.unique(x), np.unique(x))
    assert np.array_equal(K.small_unique(x), np.unique(x))
    big = x + (1 << 40)
    assert np.array_equal(K.small_unique(big), np.unique(big))
    for k in (x, np.sort(x)):
        keys, pos = K.dense_codes(k)
        assert np.array_equal(keys, np.unique(k)) and np.array_equal(keys[pos], k)


def test_select():
    g = rng(3)
    c = g.random(1000) < 0.5
    a, b = g.integers(-1 << 62, 1 << 62, 1000), g.integers(-1 << 62, 1 << 62, 1000)
    assert np.array_equal(K.select(c, a, b), np.where(c, a, b))


def ref_pct(values, q):
    v = sorted(int(x) for x in values)
    return v[max(0, math.ceil(q * len(v) / 100) - 1)] if v else None


@pytest.mark.parametrize("n", (0, 1, 2, 3, 99, 100, 101, 4096, 4097, 6000))
@pytest.mark.parametrize("zeros", (0.0, 0.5))
def test_percentiles_nearest_rank(n, zeros):
    g = rng(n)
    v = g.integers(1, 1 << 30, n).astype(np.int64)
    v[g.random(n) < zeros] = 0  # many zeros: the path that ranks the non-zero values
    qs = (1, 50, 90, 99, 100)
    got = K.percentiles(v, qs)
    for q in qs:
        assert got[f"p{q}"] == ref_pct(v, q)
        if n:
            assert K.nearest_rank(n, q) == max(0, math.ceil(q * n / 100) - 1)
    assert got["max"] == (int(v.max()) if n else None)
    srt = K.sorted_percentiles(np.sort(v), qs)
    assert srt == got
    if n:
        ranks = sorted({K.nearest_rank(n, q) for q in qs})
        assert K.percentiles_at(v.copy(), ranks) == {r: int(np.sort(v)[r]) for r in ranks}


@pytest.mark.parametrize("n", (0, 1, 50, 5000))
@pytest.mark.parametrize("big", (False, True))
def test_group_sort_and_group_stats(n, big):
    g = rng(n)
    ngroups = 6
    grp = g.integers(0, ngroups + 1, n).astype(np.int8)  # ngroups: left out
    hi = (1 << 62) if big else 1000
    v = g.integers(0, hi, n).astype(np.int64)
    vals, off = K.group_sort(grp, v.copy(), ngroups)
    for k in range(ngroups):
        assert vals[off[k]:off[k + 1]].tolist() == sorted(v[grp == k].tolist())
    kept = grp < ngroups
    lo = -(1 << 61) if big else -500
    w = g.integers(lo, hi // 2, n).astype(np.int64)
    cnt, pct = K.group_stats(grp[kept].astype(np.int64), w[kept], ngroups, (50, 90))
    for k in range(ngroups):
        mine = w[kept][grp[kept] == k]
        assert cnt[k] == len(mine)
        for q in (50, 90):
            assert pct[q][k] == (ref_pct(mine, q) if len(mine) else 0)


@pytest.mark.parametrize("ngroups", (1, 3, 64, 65, 200))
def test_group_lengths_and_exclusive_by_priority(ngroups):
    span = 1000
    unions = []
    for p in range(3):
        s, e = intervals(300, span=ngroups * span, maxlen=20, seed=p)
        # keep each interval inside its group's span
        e = np.minimum(e, (s // span + 1) * span - 1)
        unions.append(K.union_intervals(s, e))
    cov = [np.zeros(ngroups * span, bool) for _ in unions]
    for c, u in zip(cov, unions):
        for a, b in pairs(u):
            c[a:b] = True
    for c, u in zip(cov, unions):
        assert K.group_lengths(u[0], u[1], span, ngroups).tolist() == \
            c.reshape(ngroups, span).sum(axis=1).tolist()
    cumul, prev = [], (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for u in unions:
        prev = K.merge_unions(prev, u)
        cumul.append(prev)
    ex = K.exclusive_by_priority(cumul, span, ngroups)
    seen = np.zeros(ngroups * span, bool)
    for p, c in enumerate(cov):
        mine = c & ~seen
        assert ex[:, p].tolist() == mine.reshape(ngroups, span).sum(axis=1).tolist()
        seen |= c


def test_log2_slots_hist_and_floor_log2():
    v = np.array([0, 1, 2, 3, 4, 7, 8, (1 << 40) - 1, 1 << 40, (1 << 52) + 1])
    ref = [0 if x < 2 else x.bit_length() - 1 for x in v.tolist()]
    assert K.log2_slots(v).tolist() == ref
    assert K.floor_log2(v[1:]).tolist() == ref[1:]
    counts = K.log2_hist(v)
    assert counts == np.bincount(ref).tolist()
    assert K.log2_hist(np.zeros(0, np.int64)) == []


def test_theil_sen():
    x = np.array([1.0, 2.0, 3.0, 4.0, 4.0])
    y = np.array([12.0, 14.0, 16.0, 100.0, 18.0])  # slope 2, one outlier
    a, b = K.theil_sen(x, y)
    slopes = sorted((y[j] - y[i]) / (x[j] - x[i]) for i in range(5) for j in range(i + 1, 5)
                    if x[j] != x[i])
    assert b == float(np.median(slopes)) == 2.0
    assert a == float(np.median(y - b * x)) == 10.0
    assert K.theil_sen(np.array([5.0, 5.0]), np.array([1.0, 3.0])) == (2.0, 0.0)
    assert K.theil_sen(np.array([1.0, 2.0]), np.array([5.0, 1.0]))[1] == 0.0  # never < 0


def test_key_span_and_check_keyed():
    assert K.key_span(10, 20) == 12
    K.check_keyed(3, 1 << 40)
    with pytest.raises(OverflowError):
        K.check_keyed(1 << 22, 1 << 40)


@pytest.mark.parametrize("n", (0, 1, 2, 100))
@pytest.mark.parametrize("huge", (False, True))
def test_union_where(n, huge):
    s, e = intervals(n)
    if huge:  # starts that leave no room for the lengths: the unpacked path
        s = s + (1 << 60)
        e = e + (1 << 60)
    sel = rng(n).random(n) < 0.6
    assert pairs(K.union_where(s, e, sel)) == ref_union(s[sel], e[sel])
