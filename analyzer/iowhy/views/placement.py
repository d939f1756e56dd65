"""Placement view: seek distances, sequential share and the positioning cost of each
class (per_class in views/classes.py states the baselines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..kernels import (
    I64, floor_log2, gather, group_sort, group_stats, nearest_rank, theil_sen,
)
from ..model.requests import Requests, UNOBSERVED
from ..model.stages import Stages
from ..names import CLASS_NAMES


def seek_slots(absseek: np.ndarray) -> np.ndarray:
    """0 -> slot 0 (contiguous); [2^(i-1), 2^i) sectors -> slot i."""
    v = np.asarray(absseek, dtype=I64)
    return np.where(v > 0, floor_log2(np.maximum(v, 1)) + 1, 0)


SEEK_SUB = 4  # seek_bins: 2^4 bins per seek slot


SEEK_BINS = 128 << SEEK_SUB  # bins per class: slots 0..127 (an int64 seek has < 66)


def seek_bins(absseek: np.ndarray) -> np.ndarray:
    """Bin of each |seek| (int64), in value order: its slot (seek_slots) << 4 plus the
    top 4 mantissa bits of its float64, read from the float64 bits (0 has exponent and
    mantissa 0: bin 0; a value in [2^(i-1), 2^i) has exponent 1022 + i)."""
    b = np.asarray(absseek).astype(np.float64).view(I64)
    b >>= 52 - SEEK_SUB
    b -= 1022 << SEEK_SUB
    np.maximum(b, 0, out=b)
    return b


# Baselines of the positioning estimate, best first (see per_class).
BASELINES = ("zero-seek bucket", "device fit", "fastest decile")


SIZE_BITS = 6  # a size bucket floor(log2(bytes)) of a uint32 is < 2^6: (device << 6) | size


@dataclass
class DeviceFit:
    """Per device: a transfer-time baseline a + b * bytes fitted on its zero-seek
    requests, and the spread of those requests around it (see device_fits)."""

    zero: np.ndarray  # bool: the device has fully observed zero-seek requests
    a: np.ndarray  # float64 intercept, ns
    b: np.ndarray  # float64 slope, ns per byte
    spread: np.ndarray  # int64: p90 - p50 of the zero-seek requests' residuals

    def baseline(self, dev: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """round(a + b * bytes), at least 0, for requests on devices `dev`."""
        if len(self.a) == 1:  # one device: no gathers
            v = np.maximum(nbytes, 1) * self.b[0]
            v += self.a[0]
        else:
            v = self.a[dev] + self.b[dev] * np.maximum(nbytes, 1)
        np.maximum(v, 0, out=v)
        return np.rint(v).astype(I64)


def device_fits(service: np.ndarray | None, nbytes: np.ndarray, bucket: np.ndarray,
                ndev: int) -> DeviceFit:
    """The device fit of every device, from its fully observed zero-seek requests (their
    service times, None if there are none; sizes; buckets (device << 6) | size bucket
    floor(log2(bytes))): their median service time per size bucket, paired with the
    bucket's mean size, then a Theil-Sen line through those points; its spread is
    p90 - p50 of the residuals (service - fitted baseline) of the zero-seek requests
    themselves."""
    ndev = max(ndev, 1)
    fit = DeviceFit(np.zeros(ndev, bool), np.zeros(ndev), np.zeros(ndev), np.zeros(ndev, I64))
    if service is None or not len(service):
        return fit
    nb = nbytes.astype(I64)
    np.maximum(nb, 1, out=nb)
    dev = bucket >> SIZE_BITS
    ng = ndev << SIZE_BITS
    cnt, med = group_stats(bucket, service, ng, (50,))
    size_sum = np.bincount(bucket, weights=nb, minlength=ng)
    for g in range(ndev):
        sl = slice(g << SIZE_BITS, (g + 1) << SIZE_BITS)
        has = cnt[sl] > 0
        if not has.any():
            continue
        x = size_sum[sl][has] / cnt[sl][has]
        y = med[50][sl][has].astype(np.float64)
        fit.a[g], fit.b[g] = theil_sen(x, y)
        fit.zero[g] = True
    resid = service - fit.baseline(dev, nb)
    del nb
    _, q = group_stats(dev, resid, ndev, (50, 90))
    fit.spread = q[90] - q[50]
    return fit


def _baselines(zcode: np.ndarray, zsv: np.ndarray, per_b: np.ndarray, fit: DeviceFit,
               ng: int, code: np.ndarray, svc: np.ndarray, ok: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per bucket (class, device, size bucket), see per_class: which baseline (BASELINES
    index), its value and its noise threshold, and the requests with a non-zero seek
    (measured). zcode, zsv: bucket and service time of the fully observed zero-seek
    requests; per_b: fully observed requests per bucket; code, svc, ok: bucket, service
    time and fully observed (None: all) of every request with a seek."""
    nbk = len(per_b)
    cnt, q = group_stats(zcode, zsv, nbk, (50, 90))
    dev_of = (np.arange(nbk) % ng) >> SIZE_BITS
    measured = per_b - cnt
    kind = np.where(cnt > 0, 0, np.where(fit.zero[dev_of], 1, 2))
    base = q[50]
    thr = np.where(cnt > 0, np.maximum(q[90] - q[50], fit.spread[dev_of]), fit.spread[dev_of])
    decile = np.flatnonzero((measured > 0) & (kind == 2))
    if len(decile):
        # No zero-seek request on the device: the bucket's fastest decile is its
        # baseline, and only requests slower than the bucket's p90 count. Their service
        # times sorted within buckets.
        pick = np.zeros(nbk, bool)
        pick[decile] = True
        sel = np.take(pick, code.astype(np.intp))
        if ok is not None:
            sel &= ok
        sel = np.flatnonzero(sel)
        g, v = np.take(code, sel), np.take(svc, sel)
        o = np.lexsort((v, g))
        g, v = g[o], v[o]
        lo = np.searchsorted(g, decile)
        hi = np.searchsorted(g, decile, side="right")
        for b, i, j in zip(decile.tolist(), lo.tolist(), hi.tolist()):
            n = j - i
            base[b] = v[i + nearest_rank(-(-n // 10), 50)]
            thr[b] = int(v[i + nearest_rank(n, 90)]) - int(base[b])
    return kind, base, thr, measured


PLACEMENT_BLOCK = 1 << 16  # seeks per block of _placement (temporaries stay in cache)


def _placement(rq: Requests, st: Stages, cls: np.ndarray, reqs: dict[str, Any],
               with_placement: bool, release: bool = False,
               remapped: np.ndarray | None = None,
               in_figures: np.ndarray | None = None) -> dict[str, Any]:
    """Placement figures per class (and reqs[class]["seek_sectors"]), see per_class.
    remapped: per device, whether its sectors are offsets in a file that a filesystem
    places on another device (remapped_devices): no positioning is estimated there.
    in_figures: per request, whether it is in the figures (None: all); every request with
    a seek gives the baselines.

    The requests with a seek are taken block by block in stage order, without grouping
    them by class: a first pass counts them by (class, seek_bins) and by bucket (class,
    device, size bucket) and keeps the fully observed zero-seek ones, which give the
    baselines; a second pass sums the excess over them by bucket and picks out the seeks
    of the bins that hold each class's seek percentiles, ranked then within those bins
    only. release=True drops the seek columns of `st` once read (per_class)."""
    ncls = len(CLASS_NAMES)
    ndev = max(len(rq.devices), 1)
    service = st.seek_service if st.seek_service is not None else np.zeros(len(st.seek), I64)
    keep = None if in_figures is None else in_figures[st.seek_idx]
    if keep is not None and keep.all():
        keep = None
    counted = _count_seeks(rq, st, cls, with_placement, ndev, keep)
    limits = _bucket_limits(rq, st, counted, service, ndev) if with_placement else None
    # The bins that hold each class's seek percentiles (p50, p90 with placement) and max.
    qs = (50, 90) if with_placement else (50,)
    counts = counted.hist.reshape(ncls, SEEK_BINS)
    nk = counts.sum(axis=1)
    cum = np.cumsum(counts, axis=1)
    ranks, want = _percentile_bins(nk, cum, qs)
    picked, excess = _excess_and_picks(rq, st, counted, limits, want, service,
                                       ncls * (ndev << SIZE_BITS), keep)
    if release:
        st.seek_idx = st.seek = st.seek_service = np.zeros(0, I64)
        st.seek_nbytes = st.seek_cls = None
    pk, pv = _sorted_picks(picked, ncls)
    place: dict[str, Any] = {}
    for k, rk in ranks.items():
        name = CLASS_NAMES[k]
        # rank r of the class is rank r - (seeks in the bins below) of its bin's picks
        vals = [int(pv[int(np.searchsorted(pk, k * SEEK_BINS + bn)) + r - int(cum[k, bn - 1])])
                if bn else 0 for r, bn in rk]
        seek_p: dict[str, int | None] = {f"p{q}": v for q, v in zip(qs, vals)}
        seek_p["max"] = vals[-1]
        if limits is None:
            reqs[name]["seek_sectors"] = seek_p
            continue
        reqs[name]["seek_sectors"] = {"p50": seek_p["p50"], "max": seek_p["max"]}
        place[name] = _class_placement(k, counts[k], int(nk[k]), seek_p, counted, limits,
                                       excess, ndev << SIZE_BITS, remapped)
    return place


def remapped_devices(devices: Sequence[tuple[int, int]], meta: Any) -> np.ndarray | None:
    """Per device (major, minor), whether it is a loop device whose backing file lives on
    a filesystem of another block device (META `stack`, via loop): the distance between
    two of its sectors is one between two offsets of that file, which the filesystem
    below places where it will, so a time above the contiguous baseline there is not
    a seek of the medium (the disk below, when recorded, shows its own). A loop device
    over a file on FUSE or tmpfs (the lab's emulated disk, a RAM disk) or over a device
    node maps its sectors straight to the file's offsets, the medium's own; it keeps
    its estimate. None when there is no such device."""
    upper = {e.get("upper") for e in (meta.get("stack") or []) if e.get("via") == "loop"}
    if not upper:
        return None
    names = {(d.get("major"), d.get("minor")): d.get("name") for d in meta.get("devices") or []}
    out = np.array([names.get((d[0], d[1])) in upper for d in devices], dtype=np.bool_)
    return out if out.any() else None


class _Counted(NamedTuple):
    """_placement's first pass, over the requests with a seek in stage order."""

    skey: np.ndarray  # class << 11 | seek bin of each
    hist: np.ndarray  # requests per (class, seek bin)
    code: np.ndarray  # bucket of each (with placement; else empty)
    ok_all: np.ndarray | None  # whether each is fully observed (None: all are)
    per_b: np.ndarray  # fully observed requests per bucket
    zi: np.ndarray  # positions of the fully observed zero-seek ones (with placement)
    per_b_in: np.ndarray  # per_b of the requests in the figures (per_b when all are)


class _Limits(NamedTuple):
    """Per bucket: the baseline kind (BASELINES index), value, noise threshold and the
    requests measured against it (_baselines); the device fits; which buckets use a
    device fit (None: no measured one does); the bucket's least baseline plus its
    threshold; the device of each bucket."""

    kind: np.ndarray
    base: np.ndarray
    thr: np.ndarray
    measured: np.ndarray
    fit: DeviceFit
    fit_kind: np.ndarray | None
    lim: np.ndarray
    dev_of: np.ndarray


class _Excess(NamedTuple):
    """Per bucket: the positioning (excess over the baselines, ns), the requests that
    count as positioned (hits) and the service time (ns)."""

    pos: np.ndarray
    hits: np.ndarray
    dns: np.ndarray


def _of_request(st: Stages, col: np.ndarray | None, arr: np.ndarray, a: int, b: int
                ) -> np.ndarray:
    """A seek column's block [a, b), else `arr` of the block's requests."""
    return col[a:b] if col is not None else gather(arr, st.seek_idx[a:b])


def _count_seeks(rq: Requests, st: Stages, cls: np.ndarray, with_placement: bool,
                 ndev: int, keep: np.ndarray | None = None) -> _Counted:
    """First pass, block by block: each seek's (class, bin) key and the histogram of
    those in the figures (keep: per seek, None: all); with placement, each one's bucket
    (class, device, size bucket floor(log2(bytes))), the fully observed requests per
    bucket (all, for the baselines, and those in the figures) and the fully observed
    zero-seek ones."""
    ncls = len(CLASS_NAMES)
    ng = ndev << SIZE_BITS
    nbk = ncls * ng
    n = len(st.seek)
    # All fully observed (the usual case): no per-request check needed.
    all_ok = not np.bitwise_and(rq.flags, UNOBSERVED).any()
    # The device of each seek follows from its position when the bounds are known.
    bounds = st.seek_bounds.tolist() if st.seek_bounds is not None and ndev > 1 else None
    skey = np.empty(n, np.int16)  # class << 11 | seek bin
    hist = np.zeros(ncls * SEEK_BINS, I64)
    code = np.empty(n if with_placement else 0, np.int16 if nbk < (1 << 15) else np.int32)
    ok_all = None if all_ok or not with_placement else np.empty(n, bool)
    per_b = np.zeros(nbk, I64)  # fully observed requests per bucket
    per_b_in = per_b if keep is None else np.zeros(nbk, I64)
    zparts = []
    for a in range(0, n, PLACEMENT_BLOCK):
        b = min(a + PLACEMENT_BLOCK, n)
        c = _of_request(st, st.seek_cls, cls, a, b).astype(I64)
        seek = st.seek[a:b]
        bins = seek_bins(np.abs(seek))
        bins += c * SEEK_BINS
        hist += np.bincount(bins if keep is None else bins[keep[a:b]], minlength=len(hist))
        skey[a:b] = bins
        if not with_placement:
            continue
        # Bucket: size bucket floor(log2(bytes)), plus device << 6, plus class * ng.
        bk = floor_log2(np.maximum(_of_request(st, st.seek_nbytes, rq.nbytes, a, b), 1))
        if bounds is not None:
            for g in range(1, ndev):
                lo, hi = max(bounds[g], a), min(bounds[g + 1], b)
                if lo < hi:
                    bk[lo - a:hi - a] += g << SIZE_BITS
        elif ndev > 1:
            bk += gather(rq.dev, st.seek_idx[a:b]).astype(I64) << SIZE_BITS
        c *= ng
        bk += c
        code[a:b] = bk
        z = seek == 0
        kb = None if keep is None else keep[a:b]
        if ok_all is not None:
            ok = ok_all[a:b]
            np.equal(gather(rq.flags, st.seek_idx[a:b]) & UNOBSERVED, 0, out=ok)
            z &= ok
            bk = bk[ok]
            kb = None if kb is None else kb[ok]
        per_b += np.bincount(bk, minlength=nbk)
        if kb is not None:
            per_b_in += np.bincount(bk[kb], minlength=nbk)
        zparts.append(np.flatnonzero(z) + a)
    zi = np.concatenate(zparts) if zparts else np.zeros(0, I64)
    return _Counted(skey, hist, code, ok_all, per_b, zi, per_b_in)


def _bucket_limits(rq: Requests, st: Stages, counted: _Counted, service: np.ndarray,
                   ndev: int) -> _Limits:
    """The baselines of the buckets from the zero-seek requests (device fits, then
    _baselines), and each bucket's least baseline plus threshold: a request at or below
    it cannot count."""
    ng = ndev << SIZE_BITS
    nbk = len(counted.per_b)
    zi = counted.zi
    zcode = np.take(counted.code, zi).astype(I64)
    zsv = np.take(service, zi)
    dev_b = zcode % ng
    znb = (np.take(st.seek_nbytes, zi) if st.seek_nbytes is not None else
           gather(rq.nbytes, np.take(st.seek_idx, zi)))
    del zi
    fit = device_fits(zsv if st.seek_service is not None else None, znb, dev_b, ndev)
    del znb, dev_b
    kind, base, thr, measured = _baselines(zcode, zsv, counted.per_b, fit, ng, counted.code,
                                           service, counted.ok_all)
    del zcode, zsv
    dev_of = (np.arange(nbk) % ng) >> SIZE_BITS
    fit_kind = (kind == 1) if ((measured > 0) & (kind == 1)).any() else None
    # A device fit's baseline grows with the size, so its least in a bucket is that of
    # the bucket's least size, 2^(size bucket). Requests are below 4 GiB (a u32
    # length): buckets from 32 up hold none, and a least size capped at 2^32 keeps the
    # baseline of a slow device's fit far from the int64 limit.
    lim = base + thr
    if fit_kind is not None:
        fb = np.flatnonzero(fit_kind)
        least = np.left_shift(1, np.minimum(fb & ((1 << SIZE_BITS) - 1), 32), dtype=I64)
        lim[fb] = fit.baseline(dev_of[fb], least) + thr[fb]
    return _Limits(kind, base, thr, measured, fit, fit_kind, lim, dev_of)


def _percentile_bins(nk: np.ndarray, cum: np.ndarray, qs: tuple[int, ...]
                     ) -> tuple[dict[int, list[tuple[int, int]]], np.ndarray]:
    """From the requests per class (nk) and their cumulative counts by bin (cum): per
    class with seeks, the (rank, bin) of each percentile of qs and of the max; and
    which (class, bin) hold one (bin 0 never: it holds only zeros)."""
    want = np.zeros(cum.size, bool)
    ranks: dict[int, list[tuple[int, int]]] = {}  # class: [(rank, bin)]
    for cl in np.flatnonzero(nk).tolist():
        rs = [nearest_rank(int(nk[cl]), q) for q in qs] + [int(nk[cl]) - 1]
        ranks[cl] = [(r, int(np.searchsorted(cum[cl], r, side="right"))) for r in rs]
        for _, bn in ranks[cl]:
            want[cl * SEEK_BINS + bn] = bn > 0  # bin 0 holds only zeros
    return ranks, want


def _excess_and_picks(rq: Requests, st: Stages, counted: _Counted, limits: _Limits | None,
                      want: np.ndarray, service: np.ndarray, nbk: int,
                      keep: np.ndarray | None = None
                      ) -> tuple[list[tuple[np.ndarray, np.ndarray]], _Excess]:
    """Second pass, block by block: the (key, |seek|) of the seeks in the wanted bins;
    with placement (limits), the excess, hits and service time per bucket; of the seeks
    in the figures only (keep: per seek, None: all)."""
    n = len(st.seek)
    excess = _Excess(np.zeros(nbk, I64), np.zeros(nbk, I64), np.zeros(nbk, I64))
    picked = []
    for a in range(0, n, PLACEMENT_BLOCK):
        b = min(a + PLACEMENT_BLOCK, n)
        kb = counted.skey[a:b].astype(np.intp)
        wanted = np.take(want, kb)
        if keep is not None:
            wanted &= keep[a:b]
        w = np.flatnonzero(wanted)
        if len(w):
            picked.append((np.take(kb, w), np.abs(np.take(st.seek[a:b], w)).astype(I64)))
        if limits is not None:
            _block_excess(rq, st, counted, limits, service, a, b, excess,
                          None if keep is None else keep[a:b])
    return picked, excess


def _block_excess(rq: Requests, st: Stages, counted: _Counted, limits: _Limits,
                  service: np.ndarray, a: int, b: int, excess: _Excess,
                  keep: np.ndarray | None = None) -> None:
    """Adds the seeks [a, b) in the figures (keep, None: all) to `excess`: each hit's
    excess over its baseline and the hits by bucket, and every fully observed one's
    service time."""
    base, thr, fit, fit_kind = limits.base, limits.thr, limits.fit, limits.fit_kind
    ok_all = counted.ok_all
    cc = counted.code[a:b].astype(np.intp)
    sv = service[a:b]
    # The candidates: above their bucket's least baseline plus threshold (the hits,
    # about a tenth of the requests, and in device fit buckets a few more). Their
    # excess over the baseline, then the hits among them; the zero-seek requests
    # (and any not fully observed) add 0: they are never hits.
    ci = np.flatnonzero(sv > np.take(limits.lim, cc))
    ch = np.take(cc, ci)
    svc = np.take(sv, ci)
    ex = np.take(base, ch)
    np.subtract(svc, ex, out=ex)
    if fit_kind is not None:
        fi = np.flatnonzero(np.take(fit_kind, ch))
        if len(fi):
            nb = _of_request(st, st.seek_nbytes, rq.nbytes, a, b)
            ex[fi] = svc[fi] - fit.baseline(np.take(limits.dev_of, ch[fi]),
                                            nb[ci[fi]].astype(I64))
    hit = ex > np.take(thr, ch)
    hit &= np.take(st.seek[a:b], ci) != 0
    if ok_all is not None:
        hit &= np.take(ok_all[a:b], ci)
        sv = sv * ok_all[a:b]
    if keep is not None:
        hit &= np.take(keep, ci)
        sv = sv * keep
    hi = np.flatnonzero(hit)
    ch = np.take(ch, hi)
    excess.hits[...] += np.bincount(ch, minlength=len(excess.hits))
    np.add.at(excess.pos, ch, np.take(ex, hi))
    np.add.at(excess.dns, cc, sv)


def _sorted_picks(picked: list[tuple[np.ndarray, np.ndarray]], ncls: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The seeks picked, sorted by (class, bin, value): (class << 11 | bin) << vbits |
    value in one int64 when it fits (a value sort), else a lexsort."""
    pk = np.concatenate([p[0] for p in picked]) if picked else np.zeros(0, np.intp)
    pv = np.concatenate([p[1] for p in picked]) if picked else np.zeros(0, I64)
    del picked
    vbits = max(1, int(pv.max()).bit_length()) if len(pv) else 1
    if vbits + (ncls * SEEK_BINS - 1).bit_length() <= 63:
        key = pk.astype(I64) << vbits
        key |= pv
        key.sort()
        pv = key & ((1 << vbits) - 1)
        pk = key >> vbits
    else:
        o = np.lexsort((pv, pk))
        pk, pv = pk[o], pv[o]
    return pk, pv


def _class_placement(k: int, counts_k: np.ndarray, nk: int, seek_p: dict[str, int | None],
                     counted: _Counted, limits: _Limits, excess: _Excess, ng: int,
                     remapped: np.ndarray | None = None) -> dict[str, Any]:
    """Class k's placement figures: from its seek bins (counts_k: requests per bin, nk
    in all), its seek percentiles and the sums over its buckets; the positioning
    estimate over the buckets of the devices not `remapped` only."""
    slots = counts_k.reshape(-1, 1 << SEEK_SUB).sum(axis=1)
    hist_k = slots[:int(np.flatnonzero(slots)[-1]) + 1]
    sl = slice(k * ng, (k + 1) * ng)
    keep = np.ones(ng, bool) if remapped is None else ~remapped[limits.dev_of[sl]]
    by = np.bincount(limits.kind[sl][keep], weights=limits.measured[sl][keep],
                     minlength=len(BASELINES)).astype(I64)
    return {
        "requests_with_seek": nk,
        "sequential_share": round(float(hist_k[0]) / nk, 6),
        "seek_sectors": seek_p,
        "seek_hist_log2": hist_k.tolist(),
        "positioning_ns": int(excess.pos[sl][keep].sum()),
        "positioning_basis": int(counted.per_b_in[sl][keep].sum()),
        "positioned_requests": int(excess.hits[sl][keep].sum()),
        "baseline": BASELINES[int(np.argmax(by))] if by.any() else None,
        "baseline_requests": {bname: int(by[i]) for i, bname in enumerate(BASELINES)},
        "device_ns": int(excess.dns[sl][keep].sum()),
    }


def seek_values_by_class(st: Stages, cls: np.ndarray) -> dict[str, np.ndarray]:
    """|seek distance| in sectors of every request that has one (model.stages), by class
    name, ascending: for `iowhy hist --metric seek` and the figures."""
    scls = st.seek_cls if st.seek_cls is not None else gather(cls, st.seek_idx)
    ncls = len(CLASS_NAMES)
    vals, off = group_sort(np.asarray(scls).astype(np.int8), np.abs(st.seek).astype(I64), ncls)
    return {name: vals[off[k]:off[k + 1]].astype(I64) for k, name in enumerate(CLASS_NAMES)}


def seek_split(st: Stages, cls: np.ndarray, group: np.ndarray, names: Sequence[str],
               klass: int | None = None) -> dict[str, np.ndarray]:
    """|seek distance| in sectors (seek_values_by_class's values) of the requests of
    class `klass` (None: all), by group of the request (views.latency.split_values)."""
    from .latency import split_values
    idx = np.asarray(st.seek_idx).astype(np.intp)
    scls = st.seek_cls if st.seek_cls is not None else gather(cls, st.seek_idx)
    keep = np.ones(len(idx), bool) if klass is None else np.asarray(scls) == klass
    return split_values(np.asarray(group)[idx], np.abs(st.seek).astype(I64), keep, names)
