"""A device profile fitted from a trace of that device (`iowhy whatif --fit`).

The profile is the emulated disk's model (whatif/disk.py) with its parameters measured:
the requests the device served are put through the model's structure (where the head
goes, what the write cache absorbs, what each flush destages, for a given cache size,
or with no cache), which says, per request, how many positionings it paid, over which
distances, and how many bytes it moved on the media and over the interface. A request's
service time in the trace (requests/service_times) is then linear in the parameters:

    service = A * positionings + B * sum(sqrt(distance / span)) + media bytes / media rate
              + interface bytes / interface rate + flush * flush overhead + path

where A is the track-to-track seek plus the rotational latency, B the full-stroke seek
less the track-to-track one, and `path` the time each request costs on the way to and
from the disk (for the lab's emulated disk, the loop device and FUSE round trip; for a
real disk, its controller and bus). The parameters are fitted by least absolute
deviations (the service times' noise is a CPU's scheduling delay: rare and long), each
cache hypothesis in turn, each pulled toward a prior (the emulated hdd-7200's values, or
the ssd's) as if by a few requests; the hypothesis and prior whose fit minimises that
sum (the deviations and the prior's pull) is kept, so that a prior the service times
contradict where they do tell (a seek that grows with distance, a media rate) cannot win
on what they cannot tell. A parameter no request of the trace exercises (no media
access, no read) keeps its prior (or the path of the writes) and is listed as assumed.
So does A where fewer than MIN_CONTRAST requests tell it apart from the paths and the
flush overhead (_contrast: e.g. every flush destages one extent after one seek, and
nearly every read seeks): their sum is measured, not the split.

The queue depth is the number of requests the device serves at once that explains the
recorded completions best: the recorded stream is replayed through the fitted model
with its recorded issue times on 1, 2, 4, ... servers.

The profile also keeps what was measured, per class: service-time percentiles against
seek distance and size (`service_ns`), and the fit's error per class (`fit`).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..names import CLASS_NAMES
from . import disk
from .requests import RequestTable, service_times

PROFILE_SCHEMA = "iowhy-whatif-profile/1"
CACHE_SIZES = (16 << 20, 4 << 20, 8 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20)
# Columns of the regression: A, B, 1/media rate, 1/interface rate, flush overhead + path,
# path of a read, path of a write (and of a discard, a flush).
COLS = ("positioning_ns", "seek_scale_ns", "media_ns_per_byte", "iface_ns_per_byte",
        "flush_ns", "path_read_ns", "path_write_ns")
# (the flush column's rows are the flushes: its parameter is the flush overhead plus a
# flush's path, taken as a write's)
MIN_ROWS = 3  # requests exercising a parameter before it is measured
QUEUE_DEPTHS = (1, 2, 4, 8, 16, 32, 64)


def features(kinds: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
             p: disk.DiskParams) -> np.ndarray:
    """Per request, the regression's row (COLS) under the structure of p (its cache
    setting and size, its span): the model run over the stream in service order."""
    d = disk.Disk(p)
    x = np.zeros((len(kinds), len(COLS)))
    for i, (k, off, n) in enumerate(zip(kinds.tolist(), offsets.tolist(), sizes.tolist())):
        c = d.serve(k, off, n)
        x[i, 0] = c.positioned
        x[i, 1] = c.sqrt_dist
        x[i, 2] = c.media_bytes
        x[i, 3] = c.iface_bytes
        if k == disk.FLUSH:
            x[i, 4] = 1.0
        elif k == disk.READ:
            x[i, 5] = 1.0
        else:
            x[i, 6] = 1.0
    return x


def prior(p: disk.DiskParams = disk.PRESETS["hdd-7200"]) -> np.ndarray:
    """The regression's parameters of a disk (no path)."""
    return np.array([p.t2t_ns + p.rot_ns, p.full_stroke_ns - p.t2t_ns, 1e9 / p.media_rate,
                     1e9 / p.iface_rate, p.flush_ns, 0.0, 0.0])


def lad(x: np.ndarray, y: np.ndarray, prior: np.ndarray | None = None,
        prior_rows: float = 0.0, iters: int = 40,
        fixed: Mapping[int, float] | None = None) -> np.ndarray:
    """Least absolute deviations with non-negative parameters (iteratively reweighted
    least squares; a parameter driven below zero is fixed at zero). With a prior, each
    parameter j < len(prior) is also pulled toward prior[j] as if by `prior_rows`
    requests whose only cost it is (in ns of the request that exercises it most), so
    that what the trace does not tell apart keeps the prior's share. Columns in `fixed`
    are held at their value."""
    n = x.shape[1]
    theta = np.zeros(n)
    fix: dict[int, float] = dict(fixed or {})
    npri = 0 if prior is None else len(prior)
    for _ in range(n + 1):
        free = [j for j in range(n) if j not in fix]
        if not free:
            break
        yf = y - (x[:, list(fix)] @ np.array(list(fix.values())) if fix else 0.0)
        xf = x[:, free]
        scale = np.maximum(np.abs(xf).max(axis=0), 1e-300)
        xs = xf / scale
        pj = [k for k, j in enumerate(free) if j < npri and prior_rows > 0]
        if pj:
            assert prior is not None
            xs = np.vstack((xs, np.eye(len(free))[pj]))
            yf = np.concatenate((yf, [prior[free[k]] * scale[k] for k in pj]))
        mult = np.ones(len(yf))
        if pj:
            mult[len(y):] = prior_rows
        w = mult.copy()
        beta = np.zeros(len(free))
        for _ in range(iters):
            sw = np.sqrt(w)
            beta = np.linalg.lstsq(xs * sw[:, None], yf * sw, rcond=None)[0]
            r = np.abs(yf - xs @ beta)
            w = mult / np.maximum(r, max(1.0, float(np.median(r)) * 1e-3))
        beta = beta / scale
        neg = [free[k] for k in range(len(free)) if beta[k] < 0]
        if not neg:
            for k, j in enumerate(free):
                theta[j] = beta[k]
            break
        for j in neg:
            fix[j] = 0.0
    for j, v in fix.items():
        theta[j] = v
    return theta


def _supported(x: np.ndarray) -> list[bool]:
    return [int((x[:, j] != 0).sum()) >= MIN_ROWS for j in range(x.shape[1])]


# Requests that tell the positioning constant apart from the paths and the flush
# overhead before it is measured (see _contrast). Each request the model serves out of
# its real order (a data stage whose completion the recording missed) gives two wrong
# ones, a scheduling delay one: the estimate must outvote a few of them.
MIN_CONTRAST = 10


def _contrast(x: np.ndarray) -> int:
    """The requests that tell the positioning constant A apart from the constant each
    request pays for its kind (the path of a read, of a write; a flush's overhead and
    path): those whose number of positionings differs from the most common one among
    the requests of their kind. Where every flush destages one extent and every read
    seeks, A and those constants are one sum, whatever the service times."""
    n = 0
    kind = np.argmax(x[:, 4:7] != 0, axis=1)
    for k in range(3):
        pos = x[kind == k, 0]
        if len(pos):
            n += len(pos) - int(np.unique(pos, return_counts=True)[1].max())
    return n


def _objective(x: np.ndarray, y: np.ndarray, th: np.ndarray, pri: np.ndarray) -> float:
    """What lad minimised with the prior pri: the absolute deviations plus PRIOR_ROWS
    requests per disk parameter, each costing that parameter's distance from the prior
    (in ns of the request that exercises it most)."""
    scale = np.abs(x[:, :PHYS]).max(axis=0) if len(x) else np.zeros(PHYS)
    return float(np.abs(y - x @ th).sum()
                 + PRIOR_ROWS * (np.abs(th[:PHYS] - pri[:PHYS]) * scale).sum())


PRIORS = ("hdd-7200", "ssd")  # what a parameter the trace cannot tell apart leans to
PRIOR_ROWS = 3.0
PHYS = 5  # the disk's own columns of COLS; the rest are the path's


def fit_device(t: RequestTable, d: int, size_bytes: int = 0) -> dict[str, Any]:
    """The profile of device d of the trace (see the module doc)."""
    idx, kinds, svc = service_times(t, d)
    offs, sizes = t.offset[idx], t.nbytes[idx]
    size = size_bytes or int(t.devices[d].get("size_bytes") or 0) or (1 << 30)
    size = max(size, int((offs + sizes).max()) if len(idx) else 0, disk.SECTOR)
    ok = svc >= 0
    base = disk.DiskParams("fitted", 0, 0, 0, 1, 1, 16 << 20, 0, size, True)
    hyps = [disk.DiskParams("fitted", 0, 0, 0, 1, 1, c, 0, size, True) for c in CACHE_SIZES]
    # the kernel's view of the cache first: another must explain clearly better
    if t.devices[d].get("write_cache") == "write back":
        hyps.append(base.with_cache(False))
    else:
        hyps.insert(0, base.with_cache(False))
    best: tuple[float, Any, Any, Any, Any, str] | None = None
    rows = _rows(kinds, ok)
    yo = svc[rows].astype(float)
    for h in hyps:
        x = features(kinds, offs, sizes, h)
        xo = _tie_paths(x[rows])
        sup = _supported(xo)
        if sup[0] and _contrast(xo) < MIN_CONTRAST:
            sup[0] = False  # A: the prior's, and said so (assumed)
        for pname in PRIORS:
            pri = prior(disk.PRESETS[pname])
            # a column no request exercises keeps the prior (a path: zero), and so does
            # A where the requests do not tell it apart
            none = {j: float(pri[j]) for j in range(len(COLS))
                    if not (xo[:, j] != 0).any() or (j == 0 and not sup[0])}
            th = lad(xo, yo, pri[:PHYS], PRIOR_ROWS, fixed=none)
            # Hypotheses and priors compare by what the fit minimised, the prior's pull
            # included: a prior the service times contradict where they do tell (a
            # seek that grows with distance, a media rate) does not win on what they
            # cannot tell (a few requests deciding A against the paths).
            cost = _objective(xo, yo, th, pri)
            # a later hypothesis must do clearly better (the kernel's view of the cache
            # first, then emudisk's cache size; the hdd prior first)
            if best is None or cost < 0.98 * best[0]:
                best = (cost, h, th, x, sup, pname)
    assert best is not None
    _, h, th, x, sup, pname = best
    th = _untie_paths(th, sup)
    pred = x @ th
    prof = _profile(t, d, h, th, sup, size)
    prof["prior"] = pname
    prof["queue_depth"] = _queue_depth(t, idx, pred)
    prof["fit"] = _fit_quality(t, idx, svc, pred)
    prof["service_ns"] = _service_tables(t, idx, svc)
    prof["requests"] = int(ok.sum())
    # for the replay (not written to a profile): each served request's own path, what
    # its recorded service took beyond the disk's (never below zero)
    phys = x[:, :PHYS] @ th[:PHYS]
    prof["_path"] = (idx, np.where(ok, np.maximum(svc - np.round(phys), 0), -1).astype(np.int64))
    return prof


FIT_ROWS = 20_000  # requests a fit regresses on at most (the model still runs over all)


def _rows(kinds: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The requests the regression uses: every observed one, or FIT_ROWS of them on a
    large trace: every flush and read (rare and telling) up to half of it, the rest
    evenly spaced over the stream."""
    idx = np.flatnonzero(ok)
    if len(idx) <= FIT_ROWS:
        return idx
    rare = idx[(kinds[idx] == disk.FLUSH) | (kinds[idx] == disk.READ)]
    if len(rare) > FIT_ROWS // 2:
        rare = rare[np.linspace(0, len(rare) - 1, FIT_ROWS // 2).astype(np.int64)]
    rest = np.setdiff1d(idx, rare)
    n = FIT_ROWS - len(rare)
    rest = rest[np.linspace(0, len(rest) - 1, n).astype(np.int64)] if len(rest) > n else rest
    return np.union1d(rare, rest)


def _untie_paths(th: np.ndarray, sup: Sequence[bool]) -> np.ndarray:
    """The path of reads or writes that had no requests of their own: the other's."""
    th = th.copy()
    if not sup[5]:
        th[5] = th[6]
    if not sup[6]:
        th[6] = th[5]
    return th


def _tie_paths(x: np.ndarray) -> np.ndarray:
    """One path column when reads or writes are too few to have their own."""
    sup = _supported(x)
    if sup[5] and sup[6]:
        return x
    xx = x.copy()
    xx[:, 6] += xx[:, 5]
    xx[:, 5] = 0.0
    return xx


def _profile(t: RequestTable, d: int, h: disk.DiskParams, th: np.ndarray,
             sup: Sequence[bool], size: int) -> dict[str, Any]:
    a, b, per_media, per_iface, flush_path, path_r, path_w = th.tolist()
    flush_ns = max(0.0, flush_path - path_w)
    params = disk.DiskParams(
        "fitted", 0, int(round(a)), int(round(a + b)),
        int(round(1e9 / per_media)) if per_media > 0 else 1 << 50,
        int(round(1e9 / per_iface)) if per_iface > 0 else 1 << 50,
        h.cache_bytes, int(round(flush_ns)), size, h.cache_on)
    measured = [c for c, s in zip(COLS, sup) if s]
    dv = t.devices[d]
    return {
        "schema": PROFILE_SCHEMA,
        "device": dv.get("name"),
        "kernel_write_cache": dv.get("write_cache"),
        "fua": bool(dv.get("fua")),
        "disk": params.as_dict(),
        "path_ns": {"read": int(round(path_r)), "write": int(round(path_w)),
                    "flush": int(round(path_w))},
        "measured": measured,
        "assumed": [c for c in COLS if c not in measured],
        "model": ("emudisk: positioning = t2t_ns + (full_stroke_ns - t2t_ns) * "
                  "sqrt(distance / span) (the rotational latency is folded into "
                  "t2t_ns: rpm 0), media and interface transfer, write cache "
                  f"{'on' if h.cache_on else 'off'} (cache_bytes), flush_ns per flush, "
                  "path_ns per request"),
    }


def _queue_depth(t: RequestTable, idx: np.ndarray, pred: np.ndarray) -> int:
    """The fewest servers whose replay of the recorded issue times with the fitted
    service times completes the requests closest to when they did (median error; more
    servers only when they halve it)."""
    ok = t.observed[idx]
    if ok.sum() < MIN_ROWS:
        return 1
    issue = t.issue[idx]
    end = np.where(t.is_ff[idx], t.done[idx], t.data_done[idx])
    o = np.argsort(issue, kind="stable")
    best_q, best_err = 1, math.inf
    for q in QUEUE_DEPTHS:
        free = [0] * q
        sim = np.zeros(len(idx))
        for k in o.tolist():
            s = max(int(issue[k]), heapq.heappop(free))
            sim[k] = s + pred[k]
            heapq.heappush(free, int(sim[k]))
        err = float(np.median(np.abs(sim[ok] - end[ok])))
        if err < 0.5 * best_err:  # clearly better, not noise
            best_q, best_err = q, err
    return best_q


def _fit_quality(t: RequestTable, idx: np.ndarray, svc: np.ndarray, pred: np.ndarray
                 ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ok = svc >= 0
    for c in np.unique(t.cls[idx]).tolist():
        m = ok & (t.cls[idx] == c)
        if not m.any():
            continue
        e = pred[m] - svc[m]
        out[CLASS_NAMES[c]] = {"requests": int(m.sum()),
                               "measured_ns": int(svc[m].sum()),
                               "model_ns": int(round(pred[m].sum())),
                               "median_abs_error_ns": int(np.median(np.abs(e)))}
    return out


SEEK_BINS = (0, 1, 1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 62)  # sectors
SIZE_BINS = (0, 4096, 16384, 65536, 262144, 1 << 40)  # bytes


def _service_tables(t: RequestTable, idx: np.ndarray, svc: np.ndarray) -> dict[str, Any]:
    """Per class: service-time percentiles by seek distance (sectors from the previous
    request's end, in service order) and by size."""
    end_prev = np.concatenate(([-1], (t.offset[idx] + t.nbytes[idx])[:-1]))
    dist = np.abs(t.offset[idx] - end_prev) // disk.SECTOR
    dist[0] = SEEK_BINS[-1] - 1
    out: dict[str, Any] = {}
    for c in np.unique(t.cls[idx]).tolist():
        m = (svc >= 0) & (t.cls[idx] == c)
        if not m.any():
            continue
        row: dict[str, Any] = {}
        for name, val, bins in (("by_seek_sectors", dist, SEEK_BINS),
                                ("by_size_bytes", t.nbytes[idx], SIZE_BINS)):
            tab = []
            for lo, hi in zip(bins[:-1], bins[1:]):
                mm = m & (val >= lo) & (val < hi)
                if mm.any():
                    v = svc[mm]
                    tab.append({"from": int(lo), "to": int(hi) if hi < bins[-1] else None,
                                "requests": int(mm.sum()),
                                "p50_ns": int(np.percentile(v, 50, method="inverted_cdf")),
                                "p90_ns": int(np.percentile(v, 90, method="inverted_cdf"))})
            row[name] = tab
        out[CLASS_NAMES[c]] = row
    return out


def public(profile: Mapping[str, Any]) -> dict[str, Any]:
    """The profile as written to a file."""
    return {k: v for k, v in profile.items() if not k.startswith("_")}


def fit(t: RequestTable) -> dict[str, Any]:
    """The profile of the trace's busiest device (most requests served)."""
    served = [(int(((t.dev == d) & (t.kind > 0)).sum()), d) for d in range(len(t.devices))]
    served = [s for s in served if s[0] > 0]
    if not served:
        raise ValueError("no request reached a device in this trace")
    d = max(served)[1]
    return fit_device(t, d)


def params_of(profile: Mapping[str, Any]) -> disk.DiskParams:
    name = str(profile.get("device") or "profile")
    return disk.params_from_dict(profile.get("disk") or {}, name)


def check_profile(profile: Any) -> None:
    """Raise ValueError unless profile is a profile this version reads."""
    if not isinstance(profile, Mapping) or profile.get("schema") != PROFILE_SCHEMA:
        raise ValueError(f"not an iowhy device profile (schema {PROFILE_SCHEMA!r})")
    params_of(profile)
    q = profile.get("queue_depth", 1)
    if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 4096:
        raise ValueError("queue_depth must be an integer from 1 to 4096")
    path = profile.get("path_ns") or {}
    if not isinstance(path, Mapping):
        raise ValueError("path_ns must be an object")
    for k, v in path.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"path_ns.{k} must be a non-negative integer")
