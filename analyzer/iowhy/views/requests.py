"""Requests view: one row per block request, in biosnoop's shape, for `iowhy requests`.

Every figure of a row comes from the model's one definition: the class from
model.classify.request_classes, the queue, device and total times from
views.latency.latency_values, the fsync-family call from model.calls (the call the
request was submitted in). Rows are in completion order (as biosnoop prints them);
times are integer ns, the row time is the final completion relative to the trace
window's start. A figure that was not observed is -1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import abi
from ..kernels import I64
from ..model.calls import join_requests_to_calls
from ..model.classify import request_classes
from ..model.requests import Requests, load_requests, trace_window
from ..names import CLASS_NAMES, comm_text
from ..model.devices import device_names
from .latency import latency_values

# blk_fill_rwbs's letters: preflush first, then the operation, then the modifiers.
OP_LETTERS = {abi.OP_READ: "R", abi.OP_WRITE: "W", abi.OP_FLUSH: "F", abi.OP_DISCARD: "D"}
# biolatency -F's words for the same flags, in the order it prints them.
FLAG_WORDS = ((abi.F_PRIO, "Priority"), (abi.F_PREFLUSH, "Preflush"), (abi.F_FUA, "FUA"),
              (abi.F_META, "Metadata"), (abi.F_RAHEAD, "ReadAhead"), (abi.F_SYNC, "Sync"))
OP_WORDS = {abi.OP_READ: "Read", abi.OP_WRITE: "Write", abi.OP_FLUSH: "Flush",
            abi.OP_DISCARD: "Discard"}


def rwbs(op: int, iflags: int) -> str:
    """The request's operation and flags as blktrace's RWBS string (`FWFS`: preflush,
    write, FUA, sync; `RA`: readahead read; `WM`: metadata write)."""
    s = "F" if iflags & abi.F_PREFLUSH else ""
    s += OP_LETTERS.get(op, "N")
    for bit, ch in ((abi.F_FUA, "F"), (abi.F_RAHEAD, "A"), (abi.F_SYNC, "S"),
                    (abi.F_META, "M")):
        if iflags & bit:
            s += ch
    return s


def flags_name(op: int, iflags: int) -> str:
    """The request's flags and operation as biolatency -F names them (`Sync-Write`)."""
    words = [w for bit, w in FLAG_WORDS if iflags & bit]
    return "-".join([*words, OP_WORDS.get(op, "Other")])


def request_flag_codes(rq: Requests) -> tuple[np.ndarray, list[str]]:
    """(code of each request's flag combination, the name of each code: flags_name),
    codes in order of first appearance of the (op, flag) pair sorted by name."""
    key = rq.op.astype(I64) << 16 | (rq.iflags.astype(I64) & 0xFFFF)
    uk, inv = np.unique(key, return_inverse=True)
    names = [flags_name(int(k) >> 16, int(k) & 0xFFFF) for k in uk.tolist()]
    # Several (op, flags) pairs can share a name (flags biolatency does not print).
    uniq = sorted(set(names))
    code = np.array([uniq.index(n) for n in names], np.int32)
    return code[inv.reshape(-1)] if len(uk) else np.zeros(0, np.int32), uniq


@dataclass
class Filters:
    """Which requests `iowhy requests` lists (None: any)."""

    klass: str | None = None
    dev: str | None = None  # a device name or MAJ:MIN
    pid: int | None = None
    comm: str | None = None
    slower_ns: int | None = None  # total time (submission to completion) above this


@dataclass
class RequestRows:
    """The listed requests, one entry per row, in completion order."""

    time_ns: np.ndarray  # final completion - window start
    comm: list[str]
    pid: np.ndarray  # the submitter's process (tgid), 0 unknown
    disk: list[str]
    op: list[str]  # rwbs()
    sector: np.ndarray
    nbytes: np.ndarray
    queue_ns: np.ndarray  # -1: not observed (latency_values leaves it out)
    device_ns: np.ndarray
    total_ns: np.ndarray
    cls: list[str]
    call: list[str]  # the fsync-family call it was submitted in, "" for none
    call_index: np.ndarray  # its index among the trace's fsync records, -1 for none
    total: int  # requests in the trace, before the filters

    def __len__(self) -> int:
        return len(self.time_ns)

    def as_dicts(self, lo: int = 0, hi: int | None = None) -> list[dict[str, Any]]:
        """Rows lo..hi (all by default) as dicts."""
        keys = ("time_ns", "comm", "pid", "disk", "op", "sector", "nbytes", "queue_ns",
                "device_ns", "total_ns", "cls", "call", "call_index")
        cols = [getattr(self, k)[lo:hi] for k in keys]
        cols = [c.tolist() if isinstance(c, np.ndarray) else c for c in cols]
        names = [{"nbytes": "bytes", "cls": "class"}.get(k, k) for k in keys]
        return [dict(zip(names, row)) for row in zip(*cols)]


def _comm(c: bytes) -> str:
    return comm_text(c)


def request_rows(trace: Any, flt: Filters | None = None) -> RequestRows:
    """The rows of the requests of `trace` that pass `flt`. Raises ValueError for a
    class or device the trace does not know."""
    flt = flt or Filters()
    if flt.klass is not None and flt.klass not in CLASS_NAMES:
        raise ValueError(f"unknown class {flt.klass!r} (one of {', '.join(CLASS_NAMES)})")
    win = trace_window(trace)
    meta = trace.meta or {}
    rq = load_requests(trace, win)
    n = len(rq)
    fs = trace.records("fsync")
    fs_type = np.asarray(fs["fs_u16"])
    call = (np.asarray(join_requests_to_calls(rq, fs, win)).astype(I64) if n and len(fs)
            else np.full(n, -1, I64))
    cls = np.asarray(request_classes(rq, meta, fs_type, call), np.int8)
    names = device_names(meta, rq.devices)
    keep = np.ones(n, bool)
    if flt.klass is not None:
        keep &= cls == CLASS_NAMES.index(flt.klass)
    if flt.dev is not None:
        idx = [i for i, (nm, (ma, mi)) in enumerate(zip(names, rq.devices))
               if flt.dev in (nm, f"{ma}:{mi}", f"/dev/{nm}")]
        if not idx:
            known = ", ".join(names) or "none"
            raise ValueError(f"no device {flt.dev!r} in this trace (its devices: {known})")
        keep &= np.isin(rq.dev, np.asarray(idx, np.int32))
    tgid = np.asarray(trace.column("request", "tgid")).astype(I64)
    comm_col = trace.column("request", "comm")
    if flt.pid is not None:
        keep &= tgid == flt.pid
    if flt.comm is not None:
        want = flt.comm.encode()[:15]
        keep &= np.char.equal(np.asarray(comm_col, "S16"), want)
    lat = []
    for m in range(3):  # device, queue, total: views.latency's one definition
        grp, v = latency_values(rq, cls, m)
        lat.append(np.where(grp < len(CLASS_NAMES), v, -1).astype(I64))
    if flt.slower_ns is not None:
        keep &= lat[2] > flt.slower_ns
    sel = np.flatnonzero(keep)
    done = rq.done[sel]
    order = sel[np.argsort(done, kind="stable")]
    call_names = [abi.CALL_NAMES.get(int(c), f"call_{int(c)}")
                  for c in np.asarray(fs["call_u16"]).tolist()]
    ci = call[order]
    return RequestRows(
        time_ns=np.maximum(rq.done[order] - win.start_ns, 0),
        comm=[_comm(c) for c in np.asarray(comm_col)[order].tolist()],
        pid=tgid[order],
        disk=[names[d] for d in rq.dev[order].tolist()],
        op=[rwbs(int(o), int(f)) for o, f in zip(rq.op[order].tolist(),
                                                 rq.iflags[order].tolist())],
        sector=rq.sector[order].astype(I64),
        nbytes=rq.nbytes[order].astype(I64),
        queue_ns=lat[1][order], device_ns=lat[0][order], total_ns=lat[2][order],
        cls=[CLASS_NAMES[c] for c in cls[order].tolist()],
        call=[call_names[c] if c >= 0 else "" for c in ci.tolist()],
        call_index=ci, total=n)
