"""Classify every block request into exactly one class.

Rules, applied in this order (the first that matches wins):

1. ``flush``: REQ_OP_FLUSH requests (the ``FF`` pre- and post-flushes the block layer
   issues), and empty PREFLUSH requests (a write of 0 bytes with PREFLUSH: the
   ``blkdev_issue_flush()`` of an fsync, or btrfs' ``write_dev_flush``).
2. ``discard``: REQ_OP_DISCARD.
3. ``log``: writes that belong to a filesystem's journal or log:

   * a write whose start sector lies inside one of the ``log.ranges`` or
     ``log.fc_ranges`` of a filesystem in the trace metadata (whole-disk sectors,
     ``[start, end)``) on that filesystem's disk: the ext4 journal and its fast-commit
     area, the XFS internal log; or inside the ``log.device.ranges`` of an external log
     on that device's disk (XFS ``logdev=``);
   * btrfs (no log region): a REQ_META write submitted by a task while it is inside a
     ``btrfs_sync_file`` call (its fsync-family syscall, between entry and exit: the
     log-tree writes), and any write to a btrfs superblock copy (partition sectors 128,
     131072, 536870912) on a btrfs filesystem's disk.
4. ``metadata``: any other REQ_META request (reads included: inode tables, directories).
5. ``readahead``: reads with REQ_RAHEAD.
6. ``read``: other reads.
7. ``data``: every other write (and any other operation carrying data).

PREFLUSH and FUA stay attributes of the request that carried them (``iflags``); they do
not make a data or log write a flush.

For the time views, classes map to categories: ``flush`` -> ``barrier``, ``log`` ->
``log``, ``metadata`` -> ``metadata``, ``data`` and ``discard`` -> ``data``, ``read`` and
``readahead`` -> ``read`` (CATEGORY_OF_CLASS).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import abi
from ..categories import DEVICE_CATEGORIES
from ..filesystems import FILESYSTEMS
from ..names import CLASS_NAMES


FLUSH, LOG, METADATA, DATA, READ, READAHEAD, DISCARD = range(7)


CLASS_CODES = {n: i for i, n in enumerate(CLASS_NAMES)}


# Device categories in priority order (index = priority, 0 highest): the registry's code
# order (categories.py).
CATEGORIES: tuple[str, ...] = DEVICE_CATEGORIES


CATEGORY_OF_CLASS = np.array([0, 1, 2, 3, 4, 4, 3], dtype=np.int8)


# The filesystems whose log writes are the REQ_META writes their fsync calls submit
# (abi.FS_*), and the partition sectors a write to is always their log's (btrfs: its
# superblock copies, 128, 131072, 536870912); iowhy.filesystems.
LOG_IN_CALLS = np.array([abi.FS_CODES[f.name] for f in FILESYSTEMS if f.log_in_fsync],
                        dtype=np.int64)
LOG_SECTORS = {f.name: f.log_sectors for f in FILESYSTEMS if f.log_in_fsync}


CLASSIFY_BLOCK = 1 << 16  # requests classified at a time


def _disk_key(fs: Mapping[str, Any]) -> tuple[int, int] | None:
    if fs.get("disk_major") is None or fs.get("disk_minor") is None:
        return None
    return int(fs["disk_major"]), int(fs["disk_minor"])


def log_ranges(meta: Mapping[str, Any]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Journal/log regions per whole disk (major, minor): [start_sector, end_sector).
    An external log (`log.device`: XFS `logdev=`) is its device's `ranges`, on its
    disk."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for fs in meta.get("filesystems", []) or []:
        lg = fs.get("log") or {}
        if not isinstance(lg, Mapping):
            continue
        places = [(_disk_key(fs), list(lg.get("ranges") or []) + list(lg.get("fc_ranges") or []))]
        dv = lg.get("device")
        if isinstance(dv, Mapping):
            places.append((_disk_key(dv), list(dv.get("ranges") or [])))
        for key, ranges in places:
            if key is None:
                continue
            for r in ranges:
                if len(r) >= 2 and int(r[1]) > int(r[0]):
                    out.setdefault(key, []).append((int(r[0]), int(r[1])))
    return out


def log_in_calls_disks(meta: Mapping[str, Any]) -> dict[tuple[int, int], list[int]]:
    """Disks holding a filesystem whose log writes are made in its fsync calls (btrfs)
    -> whole-disk sectors always written by its log (LOG_SECTORS)."""
    out: dict[tuple[int, int], list[int]] = {}
    for fs in meta.get("filesystems", []) or []:
        fstype = fs.get("fstype")
        if not isinstance(fstype, str) or fstype not in LOG_SECTORS:
            continue
        key = _disk_key(fs)
        if key is None:
            continue
        base = int(fs.get("part_start_sector") or 0)
        out.setdefault(key, []).extend(base + s for s in LOG_SECTORS[fstype])
    return out


def _device_masks(requests: Any, devices: Sequence[tuple[int, int]] | None):
    """A function (major, minor) -> bool mask of the requests on that disk."""
    if devices is not None:
        dev = requests["dev"] if not hasattr(requests, "dev") else requests.dev
        index = {d: i for i, d in enumerate(devices)}

        def on(key: tuple[int, int]) -> np.ndarray | None:
            i = index.get(key)
            return None if i is None else dev == i
        return on
    majors = np.asarray(requests["dev_major"])
    minors = np.asarray(requests["dev_minor"])

    def on_disk(key: tuple[int, int]) -> np.ndarray | None:
        m = (majors == key[0]) & (minors == key[1])
        return m if m.any() else None
    return on_disk


def classify(requests: Any, meta: Mapping[str, Any], in_sync_call: np.ndarray | None = None,
             devices: Sequence[tuple[int, int]] | None = None) -> np.ndarray:
    """Class code (int8, index into CLASS_NAMES) of every request.

    `requests`: a request record array, or any mapping of its fields (op, iflags,
    len_bytes, start_sector and dev_major/dev_minor; or a `model.requests.Requests` with its dense
    `dev` index and `devices`). `in_sync_call`: bool per request, True when it was
    submitted by a task inside its own btrfs fsync call (model.calls.join_calls).
    """
    if devices is None and hasattr(requests, "devices"):
        devices = requests.devices
    op = np.asarray(requests["op"])
    n = len(op)
    if devices is not None and n > CLASSIFY_BLOCK:
        # Block by block: the temporaries of a block stay in cache.
        dev = requests["dev"] if not hasattr(requests, "dev") else requests.dev
        cols = {f: np.asarray(requests[f]) for f in ("op", "iflags", "len_bytes",
                                                     "start_sector")}
        out = np.empty(n, np.int8)
        for a in range(0, n, CLASSIFY_BLOCK):
            b = min(a + CLASSIFY_BLOCK, n)
            part = {f: c[a:b] for f, c in cols.items()}
            part["dev"] = dev[a:b]
            out[a:b] = classify(part, meta, None if in_sync_call is None else
                                np.asarray(in_sync_call)[a:b], devices)
        return out
    iflags = np.asarray(requests["iflags"])
    nbytes = np.asarray(requests["len_bytes"])
    sector = np.asarray(requests["start_sector"])
    on = _device_masks(requests, devices)
    logm = np.zeros(n, dtype=bool)
    for key, ranges in log_ranges(meta).items():
        m = on(key)
        if m is None:
            continue
        inr = np.zeros(n, dtype=bool)
        for lo, hi in ranges:
            inr |= _in_range(sector, lo, hi)
        inr &= m
        logm |= inr
        del inr, m
    bdisks = log_in_calls_disks(meta)
    if bdisks:
        supers = np.zeros(n, dtype=bool)
        bdisk = np.zeros(n, dtype=bool)
        for key, secs in bdisks.items():
            m = on(key)
            if m is None:
                continue
            bdisk |= m
            supers |= m & np.isin(sector, np.asarray(secs, dtype=sector.dtype))
        logm |= supers
        if in_sync_call is not None:
            logm |= bdisk & ((iflags & abi.F_META) != 0) & np.asarray(in_sync_call, dtype=bool)
    elif in_sync_call is not None:
        logm |= ((iflags & abi.F_META) != 0) & np.asarray(in_sync_call, dtype=bool)
    return _class_lookup(op, iflags, nbytes, logm)


def log_in_calls(fs_type: np.ndarray) -> bool:
    """Whether a call (of `fs_type`, abi.FS_* per fsync-family call) is on a filesystem
    whose log writes are made in its fsync calls: then a request's class needs the call
    it was submitted in."""
    return bool(np.isin(np.asarray(fs_type), LOG_IN_CALLS).any())


def request_classes(rq: Any, meta: Mapping[str, Any], fs_type: np.ndarray,
                    call_of_req: np.ndarray | None) -> np.ndarray:
    """classify() of the loaded requests `rq` (model.requests.Requests), the one place
    that decides a request's class. fs_type: the filesystem (abi.FS_*) of each
    fsync-family call; call_of_req: the call each request was submitted in
    (model.calls.join_requests_to_calls, -1 for none), needed only when a call is on
    btrfs (its log writes are the REQ_META writes submitted inside its fsync calls)."""
    in_sync_call = None
    if log_in_calls(fs_type):
        assert call_of_req is not None, "btrfs calls: the classes need the call join"
        in_sync_call = np.zeros(len(rq), bool)
        inc = call_of_req >= 0
        in_sync_call[inc] = np.isin(np.asarray(fs_type)[call_of_req[inc]], LOG_IN_CALLS)
    return classify(rq, meta, in_sync_call=in_sync_call, devices=rq.devices)


def _in_range(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """lo <= x < hi, as one unsigned comparison of x - lo."""
    if x.dtype.kind in "iu" and x.dtype.itemsize == 8 and 0 <= lo < hi < (1 << 62):
        # Modulo 2^64, x - lo < hi - lo exactly when lo <= x < hi (x read as unsigned;
        # an int64 x below 0 is a uint64 sector above 2^63: outside, as before).
        d = x - x.dtype.type(lo)
        return d.view(np.uint64) < np.uint64(hi - lo)
    return (x >= lo) & (x < hi)


# The iflags bits the class depends on; the two others below them carry our own bits.
_CLASS_IFLAGS = abi.F_META | abi.F_RAHEAD | abi.F_PREFLUSH


_BIT_DATA, _BIT_LOG = 1 << 0, 1 << 2  # nbytes > 0; in a log region (logm)
assert not _CLASS_IFLAGS & (_BIT_DATA | _BIT_LOG) and _CLASS_IFLAGS < 32


def _class_table() -> np.ndarray:
    """Class of every (op, iflags bits, nbytes > 0, logm) code: the rules of classify()."""
    table = np.empty(256 << 5, np.int8)
    for code in range(len(table)):
        op, low = code >> 5, code & 31
        has_data, in_log = bool(low & _BIT_DATA), bool(low & _BIT_LOG)
        c = DATA
        if op == abi.OP_READ:
            c = READAHEAD if low & abi.F_RAHEAD else READ
        if low & abi.F_META:
            c = METADATA
        if in_log and op == abi.OP_WRITE and has_data:
            c = LOG
        if op == abi.OP_DISCARD:
            c = DISCARD
        if op == abi.OP_FLUSH or (op == abi.OP_WRITE and not has_data
                                  and low & abi.F_PREFLUSH):
            c = FLUSH
        table[code] = c
    return table


_TABLE = _class_table()


def _class_lookup(op: np.ndarray, iflags: np.ndarray, nbytes: np.ndarray,
                  logm: np.ndarray) -> np.ndarray:
    """classify()'s rules (_class_table) as one table lookup per request."""
    code = op.astype(np.uint16)
    code &= 0xFF  # operation codes are u8 (abi.REQUEST_DTYPE)
    code <<= 5
    t = np.empty(len(op), np.uint16)
    np.bitwise_and(iflags, _CLASS_IFLAGS, out=t, casting="unsafe")
    code |= t
    np.greater(nbytes, 0, out=t, casting="unsafe")
    code |= t
    if logm.any():
        np.left_shift(logm, 2, out=t, casting="unsafe")
        code |= t
    del t
    return np.take(_TABLE, code)
