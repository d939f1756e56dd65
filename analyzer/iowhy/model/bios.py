"""The bios of bio-based devices (zram, device-mapper, md, brd) as requests.

A bio-based device never allocates a request: its I/O leaves `bio` records only (one
per bio, at its end: sector, length, operation and flags, and the task whose context
ended it), no `request` record. For the device view, the class tables and the figures
each such bio is taken as one request of its device (RQ_BIO), classified like any other
by its operation, flags and sector. What a bio record does not say is when the bio
started: a bio-request has an empty device stage at its end (issue = completions = the
bio's end), so it is in no time interval (busy time, queue depth, attribution, flush
generations) and in no latency percentile (it is UNOBSERVED), like a request whose
issue was not seen, but it counts in its class (`count`, `bytes`) and on its device
(`requests`, `bios`), and it is drawn where requests are drawn at their issue.

Its submitter: zram and brd end a bio in the submitter's context (the driver works
synchronously inside submit_bio), so the context task is the submitter (RQ_ORIGIN), and
a bio of a workload process is the workload's (RQ_TRACKED). device-mapper and md end a
bio in the completion context of the device below (an interrupt, a kworker): the
context task says nothing, the submitter is unknown.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .. import abi
from ..kernels import I64
from .devices import dev_key, dev_pair
from .requests import RQ_BIO, Requests

BIO_FIELDS = ("ts_ns", "sector", "len_bytes", "dev_major", "dev_minor", "op", "iflags",
              "tgid", "tid", "comm")

# Device kinds (META devices[].kind) that end a bio in the submitter's context.
SYNCHRONOUS_KINDS = ("zram", "ram")


def append_bios(rq: Requests, bio: Mapping[str, np.ndarray], meta: Mapping[str, Any],
                workload_tgids: np.ndarray) -> Requests:
    """rq with one request per bio record appended (RQ_BIO, the module doc); rq itself
    when there is none. workload_tgids: the workload's processes (task records)."""
    n = len(bio.get("ts_ns", ()))
    if not n:
        return rq
    ts = np.asarray(bio["ts_ns"]).astype(I64)
    keys = dev_key(np.asarray(bio["dev_major"]), np.asarray(bio["dev_minor"]))
    # Every device, the requests' and the bios', in (major, minor) order as load_requests
    # gives them: the requests' indices are renumbered into the merged list.
    old = np.array([dev_key(*d) for d in rq.devices], dtype=I64)
    allk = np.union1d(old, keys)
    devices = [dev_pair(k) for k in allk.tolist()]
    rq_dev = np.searchsorted(allk, old).astype(np.int32)[rq.dev] if len(old) else rq.dev
    dev = np.searchsorted(allk, keys).astype(np.int32)
    sync_devs = {(d.get("major"), d.get("minor")) for d in meta.get("devices") or []
                 if isinstance(d, Mapping) and d.get("kind") in SYNCHRONOUS_KINDS}
    sync_devs |= {(d.get("major"), d.get("minor")) for d in meta.get("lower_devices") or []
                  if isinstance(d, Mapping) and d.get("kind") in SYNCHRONOUS_KINDS}
    origin = np.isin(keys, np.array([dev_key(*d) for d in sync_devs
                                     if None not in d], dtype=I64))
    tracked = origin & np.isin(np.asarray(bio["tgid"]).astype(I64),
                               np.asarray(workload_tgids).astype(I64))
    flags = np.full(n, RQ_BIO, np.uint16)
    flags[origin] |= abi.RQ_ORIGIN
    flags[tracked] |= abi.RQ_TRACKED
    zero = np.zeros(n, I64)
    # Request numbers no recorded request has (those count up from 0): the top of the
    # column's range, counting down. No wakeup names a bio.
    extra = {k: np.concatenate((v, _top_numbers(v.dtype, n))) if k == "seq"
             else np.concatenate((v, np.zeros(n, v.dtype))) for k, v in rq.extra.items()}
    # The context task's tid stays in `tid` (the submitter when RQ_ORIGIN).
    return Requests(
        submit=np.concatenate((rq.submit, zero)), insert=np.concatenate((rq.insert, zero)),
        issue=np.concatenate((rq.issue, ts)), data_done=np.concatenate((rq.data_done, ts)),
        done=np.concatenate((rq.done, ts)),
        sector=np.concatenate((rq.sector, np.asarray(bio["sector"]).astype(I64))),
        nbytes=np.concatenate((rq.nbytes, np.asarray(bio["len_bytes"]).astype(rq.nbytes.dtype))),
        dev=np.concatenate((rq_dev, dev)), devices=devices,
        op=np.concatenate((rq.op, np.asarray(bio["op"]).astype(rq.op.dtype))),
        iflags=np.concatenate((rq.iflags, np.asarray(bio["iflags"]).astype(rq.iflags.dtype))),
        flags=np.concatenate((rq.flags, flags.astype(rq.flags.dtype))),
        tid=np.concatenate((rq.tid, np.asarray(bio["tid"]).astype(rq.tid.dtype))),
        extra=extra)


def _top_numbers(dtype: np.dtype, n: int) -> np.ndarray:
    """n distinct numbers of `dtype` from its largest down."""
    top = np.iinfo(dtype).max
    return (np.full(n, top, dtype) - np.arange(n).astype(dtype)).astype(dtype)
