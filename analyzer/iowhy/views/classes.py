"""Per-class request figures: counts, bytes and attributes by (device, class, op),
latency percentiles and the placement figures of each class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import abi
from ..kernels import I64
from ..model.requests import Requests
from ..model.stages import Stages
from ..names import CLASS_NAMES
from .latency import latency_figures
from .placement import _placement


@dataclass
class RequestCounts:
    """Requests and bytes by (device, class, op, tracked), and by (class, attribute bits)
    (see request_counts)."""

    n: np.ndarray  # [ndev, nclass, 16, 2] requests; op >= 15 counted as 15
    nbytes: np.ndarray  # the same, bytes (float64)
    attrs: np.ndarray  # [nclass, 64] requests by ATTR_* bits

    @property
    def dev_op(self) -> np.ndarray:
        return self.n.sum(axis=3)

    @property
    def dev_bytes(self) -> np.ndarray:
        return self.nbytes.sum(axis=3)

    def attr(self, k: int, bit: int) -> int:
        """Requests of class k with attribute bit `bit` set."""
        return int(self.attrs[k][(np.arange(64) & bit) != 0].sum())

    def minus(self, other: RequestCounts) -> RequestCounts:
        """These counts less `other`, the counts of some of the same requests (the byte
        sums are integers below 2^53: exact in float64)."""
        return RequestCounts(self.n - other.n, self.nbytes - other.nbytes,
                             self.attrs - other.attrs)


# Attribute bits of request_counts().attrs: the iflags bits kept as they are, then ours
# (ATTR_LOST in the bit of F_META, which the attributes do not keep).
ATTR_IFLAGS = abi.F_SYNC | abi.F_FUA | abi.F_PREFLUSH


ATTR_LOST = abi.F_META


ATTR_ISSUED = 1 << 4


ATTR_INCOMPLETE = 1 << 5
assert ATTR_IFLAGS < ATTR_ISSUED and not ATTR_IFLAGS & ATTR_LOST
assert abi.RQ_LOST_DONE > ATTR_LOST
# request_counts moves the tracked flag (to the bit above the attributes) and the
# incomplete flag (to ATTR_INCOMPLETE) by one shift.
assert abi.RQ_TRACKED == abi.RQ_INCOMPLETE << 1 and ATTR_INCOMPLETE == 1 << 5


def request_counts(rq: Requests, cls: np.ndarray, block: int = 1 << 16) -> RequestCounts:
    """Requests and bytes by (device, class, op, tracked) and attribute counts by class.
    The requests are counted once by (device, class, op, tracked, attribute bits), block
    by block (small temporaries): a block's keys, each packed with the bytes of its
    request in one uint64, are sorted by value; the runs of equal keys give the counts
    and the byte sums (in integers: the float64 sums are exact)."""
    ncls = len(CLASS_NAMES)
    ndev = max(len(rq.devices), 1)
    n = len(rq)
    shape = (ndev, ncls, 16, 2)
    nj = ndev * ncls * 32 * 64
    # (uint32 holds the keys of any device count whose counts fit memory.)
    kdt = np.uint16 if nj <= (1 << 16) else np.uint32
    cnt = np.zeros(nj, I64)
    byt = np.zeros(nj, np.uint64)
    ishift = ATTR_INCOMPLETE.bit_length() - abi.RQ_INCOMPLETE.bit_length()
    lshift = abi.RQ_LOST_DONE.bit_length() - ATTR_LOST.bit_length()
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        key: Any = rq.dev[lo:hi].astype(kdt)
        key *= ncls
        key += cls[lo:hi].astype(kdt)
        key <<= 4
        op = rq.op[lo:hi]
        if int(op.max()) > 15:
            op = np.minimum(op, 15)
        key |= op.astype(kdt)
        # The tracked bit, then (SYNC/FUA/PREFLUSH, lost, issued, incomplete) in 6 bits.
        key <<= 7
        fl = rq.flags[lo:hi]
        t: Any = np.bitwise_and(fl, abi.RQ_TRACKED | abi.RQ_INCOMPLETE, dtype=kdt,
                                casting="unsafe")
        t <<= ishift
        key |= t
        np.bitwise_and(fl, abi.RQ_LOST_DONE, out=t, casting="unsafe")
        t >>= lshift
        key |= t
        np.bitwise_and(rq.iflags[lo:hi], ATTR_IFLAGS, out=t, casting="unsafe")
        key |= t
        np.greater(rq.issue[lo:hi], 0, out=t, casting="unsafe")
        t <<= ATTR_ISSUED.bit_length() - 1
        key |= t
        p = key.astype(np.uint64)
        p <<= 32
        p |= rq.nbytes[lo:hi]
        p.sort()
        # A run of m equal keys k sums to m * (k << 32) + its bytes, modulo 2^64: exact,
        # as a block's bytes stay below 2^64.
        k = p >> 32
        starts = np.flatnonzero(k[1:] != k[:-1])
        starts += 1
        starts = np.concatenate(([0], starts))
        ks = k[starts]
        m = np.diff(starts, append=hi - lo)
        cnt[ks] += m
        sums = np.add.reduceat(p, starts)
        sums -= (ks << 32) * m.astype(np.uint64)
        byt[ks] += sums
    full = cnt.reshape(shape + (64,))
    nbytes = byt.reshape(shape + (64,)).sum(axis=4).astype(np.float64)
    return RequestCounts(full.sum(axis=4), nbytes, full.sum(axis=(0, 2, 3)))


def per_class(rq: Requests, st: Stages, cls: np.ndarray, with_placement: bool = True,
              counts: RequestCounts | None = None,
              latency: list[dict[str, Any]] | None = None, release: bool = False,
              remapped: np.ndarray | None = None, counted: np.ndarray | None = None
              ) -> tuple[dict[str, Any], dict[str, Any], np.ndarray, np.ndarray]:
    """Per-class request figures and metadata placement; also requests and bytes by
    (device, class, op) as two [ndev, nclass, 16] arrays.

    Requests: counts, bytes, attributes, latency percentiles (fully observed requests
    only: not incomplete, not pre-dating the trace, final completion seen; `lost`
    counts those whose final completion was never seen), seek p50.
    Placement: seek histogram (seek_slots), sequential share (seek 0), seek p50/p90,
    and positioning cost, over the class's fully observed requests with a seek distance
    and their service times (model/requests.py: the device's time on each alone). Requests are
    grouped in buckets (device, size bucket floor(log2(bytes))); each bucket has a
    baseline b and a noise threshold t:

    * "zero-seek bucket": the bucket has zero-seek requests: b is their median service
      time, t the larger of their p90 - b and the device fit's spread;
    * "device fit": else, when the device has zero-seek requests (any class): b = the
      device's fitted a + slope * bytes of the request (device_fits), t its spread;
    * "fastest decile": the device has no zero-seek request at all: b is the median of
      the fastest tenth of the bucket's requests, t = the bucket's p90 - b (only the
      slowest tenth can count: without a request free of positioning, the noise cannot
      be told apart, so this is a conservative estimate).

    A request with a non-zero seek adds its excess over b when that excess is above t
    (positioned_requests counts them); zero-seek requests add 0. The requests of a
    `remapped` device (views/placement.py remapped_devices: a loop device over a file
    that a filesystem below places) are in no positioning figure. With `counted` (a mask
    over rq: the requests that are not another process's, views/background.py), the
    placement figures are those requests': a seek is still measured from whatever
    request came before it on the device, and every request's contiguous ones give the
    baselines, but another process's requests add no seek or positioning.

    Latencies are computed for all requests at once and sorted within classes by one
    sort per figure (group_sort); `counts` (request_counts) and `latency`
    (latency_figures) are computed if not given. release=True drops the seek columns of
    `st` (seek, seek_idx, seek_service, seek_nbytes, seek_cls) once they are read, for
    callers that need them no more (lower peak memory).
    """
    rc = counts if counts is not None else request_counts(rq, cls)
    dev_op, dev_bytes = rc.dev_op, rc.dev_bytes
    by_op = dev_op.sum(axis=0)
    bytes_op = dev_bytes.sum(axis=0)
    tracked = rc.n[..., 1].sum(axis=(0, 2))
    lat_figs = latency if latency is not None else latency_figures(rq, cls)
    reqs: dict[str, Any] = {}
    for k, name in enumerate(CLASS_NAMES):
        reqs[name] = {
            "count": int(by_op[k].sum()),
            "bytes": int(round(bytes_op[k].sum())),
            "writes": int(by_op[k, abi.OP_WRITE]),
            "write_bytes": int(round(bytes_op[k, abi.OP_WRITE])),
            "issued": rc.attr(k, ATTR_ISSUED),
            "incomplete": rc.attr(k, ATTR_INCOMPLETE),
            "lost": rc.attr(k, ATTR_LOST),
            "tracked": int(tracked[k]),
            "fua": rc.attr(k, abi.F_FUA),
            "preflush": rc.attr(k, abi.F_PREFLUSH),
            "sync": rc.attr(k, abi.F_SYNC),
            **lat_figs[k],
            "seek_sectors": {"p50": None, "max": None},
        }
    place = _placement(rq, st, cls, reqs, with_placement, release, remapped, counted)
    return reqs, place, dev_op, dev_bytes
