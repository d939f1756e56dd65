"""Chunk decoding for the trace reader (traceformat.py): compressed chunks (zstd, with
the bounds that keep a crafted file from becoming a decompression bomb), byte-transposed
records, and JSON chunks parsed so that no value the file should not hold gets through."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import zstandard

JSON_MAX = 64 << 20  # a JSON chunk larger than this is not parsed (unknown chunk)
# No compressed chunk decompresses to more than ZSTD_CHUNK_MAX bytes (the whole file's
# budget is traceformat.ZSTD_BUDGET_*); a chunk beyond it is undecodable.
ZSTD_CHUNK_MAX = 64 << 20


_DCTX = zstandard.ZstdDecompressor()


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
        dobj = _DCTX.decompressobj()
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


def _untranspose(data: bytes, rec_size: int, count: int) -> bytes:
    return np.frombuffer(data, np.uint8).reshape(rec_size, count).T.tobytes()


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
