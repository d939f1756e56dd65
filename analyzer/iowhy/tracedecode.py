"""Chunk decoding for the trace reader (traceformat.py): compressed chunks (zstd, with
the bounds that keep a crafted file from becoming a decompression bomb), byte-transposed
and compacted records (and their encoding, for the writers), and JSON chunks parsed so
that no value the file should not hold gets through."""

from __future__ import annotations

import functools
import json
import math
import threading
from typing import Any, NamedTuple

import numpy as np
import zstandard

from . import abi

JSON_MAX = 64 << 20  # a JSON chunk larger than this is not parsed (unknown chunk)
# No compressed chunk decompresses to more than ZSTD_CHUNK_MAX bytes (the whole file's
# budget is traceformat.ZSTD_BUDGET_*); a chunk beyond it is undecodable.
ZSTD_CHUNK_MAX = 64 << 20


_LOCAL = threading.local()  # a decompressor per thread: one may not be shared


def _dctx() -> Any:
    d = getattr(_LOCAL, "dctx", None)
    if d is None:
        d = _LOCAL.dctx = zstandard.ZstdDecompressor()
    return d


def _unzstd(buf: Any, plen: int, dlen: int) -> bytes | None:
    """The data of a compressed chunk: one zstd frame that declares its content size, equal
    to data_bytes, and decompresses to exactly that, its checksum (when it has one, as
    iowhy's writers give it) right; then only the zero padding (fewer than 8 bytes). None
    for anything else (counted as undecodable by the caller)."""
    if dlen > ZSTD_CHUNK_MAX or plen < 4:
        return None
    data = bytes(buf[:plen])
    try:
        if zstandard.frame_content_size(data) != dlen:  # -1: not declared
            return None
        dobj = _dctx().decompressobj()
        out = dobj.decompress(data)
        if not dobj.eof or len(out) != dlen:
            return None
        rest = dobj.unused_data
    except zstandard.ZstdError:
        return None
    if len(rest) >= 8 or rest.strip(b"\0"):
        return None
    return out


def _transpose(data: bytes, rec_size: int, count: int) -> bytes:
    """Records byte-transposed, as compressed record chunks hold them: byte b of record i
    at b * count + i."""
    return np.frombuffer(data, np.uint8).reshape(count, rec_size).T.tobytes()


def _untranspose(data: bytes | memoryview, rec_size: int, count: int) -> bytes:
    return np.frombuffer(data, np.uint8).reshape(rec_size, count).T.tobytes()


# -- compacted record chunks (version 6, docs/trace-format.md COMPACTED RECORD CHUNKS) -------


class CompactSpec(NamedTuple):
    """How one record type is compacted: `rel`, the 8-byte time fields stored relative to
    the record's own ts_ns; `prev`, the 8-byte fields stored as the difference from the
    previous stored record's (ts_ns first); `rows`, the byte ranges [start, end) kept
    record by record instead of byte-transposed. `key`: the offset of the u32 field the
    writers group records by (tid; the reader does not need it)."""

    rel: tuple[int, ...]
    prev: tuple[int, ...]
    rows: tuple[tuple[int, int], ...]
    key: int


def _spec(dt: np.dtype, rel: tuple[str, ...], prev: tuple[str, ...],
          rows: tuple[tuple[str, str], ...]) -> CompactSpec:
    fields: Any = dt.fields or {}

    def off(name: str) -> int:
        return int(fields[name][1])

    def end(name: str) -> int:
        return off(name) + fields[name][0].itemsize

    return CompactSpec(tuple(off(f) for f in rel), tuple(off(f) for f in prev),
                       tuple((off(a), end(b)) for a, b in rows), off("tid"))


_TIMES_OFFCPU = ("start_ns", "waking_ns", "end_ns")
# The record types a version-6 chunk may hold compacted; probes/rec_compact.c has the same
# table (tests/unit/test_compact_chunks.py checks that both encode alike).
COMPACT_SPECS: dict[int, CompactSpec] = {
    abi.REC_REQUEST: _spec(abi.REQUEST_DTYPE,
                           ("submit_ns", "insert_ns", "issue_ns", "data_done_ns", "done_ns"),
                           ("ts_ns", "seq"), (("comm", "comm"),)),
    abi.REC_FSYNC: _spec(abi.FSYNC_DTYPE, ("enter_ns", "exit_ns"), ("ts_ns",),
                         (("comm", "comm"),)),
    abi.REC_JOURNAL: _spec(abi.JOURNAL_DTYPE, (), ("ts_ns",), (("comm", "comm"),)),
    abi.REC_OFFCPU: _spec(abi.OFFCPU_DTYPE, _TIMES_OFFCPU, ("ts_ns", "run_total_ns"),
                          (("waker_tgid", "waker_comm"),)),
    abi.REC_HELPER: _spec(abi.HELPER_DTYPE, _TIMES_OFFCPU, ("ts_ns", "run_total_ns"),
                          (("waker_tgid", "waker_comm"),)),
}
COMPACT_MAX_COUNT = 0xFFFF  # the group numbers are u16
_TS = 1  # ts_ns: the second 8-byte word of every record


def _rel(x: np.ndarray, base: np.ndarray) -> np.ndarray:
    """A time relative to the record's ts_ns: ts + 1 - x (mod 2^64), with 0 (unknown) kept 0
    and ts + 1, which that maps to 0, kept as it is. Its own inverse. (Both exceptions
    keep x: x == 0, and x == ts + 1, where ts + 1 - x is 0.)"""
    y = base + np.uint64(1)
    y -= x
    keep = x == 0
    keep |= y == 0
    np.copyto(y, x, where=keep)
    return y


_Ranges = list[tuple[int, int]]


@functools.lru_cache(maxsize=None)
def _layout(spec: CompactSpec, rec_size: int) -> tuple[_Ranges, _Ranges]:
    """The byte ranges stored byte-transposed, and those kept row-wise, in the order stored."""
    inrow = np.zeros(rec_size + 1, bool)
    for a, b in spec.rows:
        inrow[a:b] = True
    edges = np.flatnonzero(np.diff(np.concatenate(([not inrow[0]], inrow[:-1]))) != 0)
    runs = list(zip(edges.tolist(), edges[1:].tolist() + [rec_size]))
    return ([r for r in runs if not inrow[r[0]]], [r for r in runs if inrow[r[0]]])


def compact(data: bytes, ctype: int, rec_size: int, count: int) -> bytes | None:
    """Records compacted as a version-6 chunk holds them (before zstd), or None for a type
    or count that is not compacted."""
    spec = COMPACT_SPECS.get(ctype)
    if (spec is None or not 1 <= count <= COMPACT_MAX_COUNT or rec_size % 8
            or rec_size != abi.RECORD_TYPES[ctype][1].itemsize or len(data) != rec_size * count):
        return None
    recs = np.frombuffer(data, np.uint8).reshape(count, rec_size)
    key = recs[:, spec.key:spec.key + 4].copy().view("<u4")[:, 0]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    groups = rank[inv.reshape(-1)].astype("<u2")  # first appearance numbers the threads
    s = recs.view(f"V{rec_size}")[:, 0][np.argsort(groups, kind="stable")]
    s = np.frombuffer(s.tobytes(), np.uint8).reshape(count, rec_size).copy()
    w = s.view("<u8")
    ts = w[:, _TS].copy()
    for off in spec.rel:
        w[:, off // 8] = _rel(w[:, off // 8], ts)
    for off in spec.prev:
        col = w[:, off // 8].copy()
        w[1:, off // 8] = col[1:] - col[:-1]
    cols, rows = _layout(spec, rec_size)
    return b"".join([groups.view(np.uint8).reshape(count, 2).T.tobytes()]
                    + [s[:, a:b].T.tobytes() for a, b in cols]
                    + [np.hstack([s[:, a:b] for a, b in rows]).tobytes()])


def uncompact(data: bytes | memoryview, ctype: int, rec_size: int, count: int,
              dest: np.ndarray | None = None) -> memoryview | None:
    """The records of a compacted chunk's data, in the order written (the bytes of a new
    array, or of dest: uint8, rec_size * count long); None if the data cannot be one (an
    unknown type or size, a wrong length, a group number out of range)."""
    spec = COMPACT_SPECS.get(ctype)
    if (spec is None or not 1 <= count <= COMPACT_MAX_COUNT
            or rec_size != abi.RECORD_TYPES[ctype][1].itemsize
            or len(data) != (rec_size + 2) * count):
        return None
    buf = np.frombuffer(data, np.uint8)
    groups = buf[:2 * count].reshape(2, count).T.copy().view("<u2")[:, 0]
    if int(groups.max()) >= count:
        return None
    cols, rows = _layout(spec, rec_size)
    s = np.empty((count, rec_size), np.uint8)  # the records, in the groups' order
    at = 2 * count
    for a, b in cols:  # byte-transposed: each byte's plane into its place in every record
        s[:, a:b] = buf[at:at + (b - a) * count].reshape(b - a, count).T
        at += (b - a) * count
    r = buf[at:].reshape(count, -1)
    at = 0
    for a, b in rows:  # kept record by record
        s[:, a:b] = r[:, at:at + b - a]
        at += b - a
    w = s.view("<u8")
    for off in spec.prev:
        w[:, off // 8] = np.cumsum(w[:, off // 8], dtype=np.uint64)
    ts = w[:, _TS].copy()
    for off in spec.rel:
        w[:, off // 8] = _rel(w[:, off // 8], ts)
    # Records moved whole, each as one element of rec_size bytes (a row copy each).
    out = (dest if dest is not None and len(dest) == w.nbytes
           else np.empty(w.nbytes, np.uint8))
    rec = np.dtype((np.void, rec_size))
    out.view(rec)[np.argsort(groups, kind="stable")] = s.reshape(-1).view(rec)
    return out.data


def _json_chunk(buf: Any, n: int) -> dict[str, Any] | None:
    """The JSON object of a chunk, or None. Text is UTF-8; bytes that are not (names are
    bytes) are kept as lone surrogates U+DC80..U+DCFF (Python's surrogateescape), as the
    writers of the file escape them. NaN, infinities and numbers that do not fit are
    replaced by a value that fails every check (the field is then dropped)."""
    if n > JSON_MAX:
        return None
    try:
        text = bytes(buf[:n]).decode("utf-8", errors="surrogateescape")
        obj = json.loads(text, parse_constant=lambda s: _BAD, parse_float=_float,
                         parse_int=_int)
    except (ValueError, RecursionError, MemoryError):
        return None
    return obj if isinstance(obj, dict) else None


class _Bad:
    """A JSON value the file should not hold (NaN, infinity, an unparsable number)."""


_BAD = _Bad()


def _float(s: str) -> Any:
    v = float(s)
    return v if math.isfinite(v) else _BAD


def _int(s: str) -> Any:
    try:
        return int(s)
    except ValueError:  # more digits than Python converts
        return _BAD
