"""Chunk scanning for the trace reader (traceformat.py, docs/trace-format.md RECOVERY):
one linear pass that finds every plausible chunk header and the running CRC-32 of the file,
the CRC arithmetic that gives any payload's CRC from it in constant time, and the source of
the valid chunks' bytes (one mapping of the file, or each payload read)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import heapq
import mmap
import os
import struct
import zlib
from typing import Any, Callable

from . import abi

HDR_SIZE = abi.FILE_HDR_DTYPE.itemsize
CHDR_SIZE = abi.CHUNK_HDR_DTYPE.itemsize
_CHDR = struct.Struct("<4sHHIIIIQ")  # struct iowhy_chunk_hdr, as abi.CHUNK_HDR_DTYPE
SCAN_WINDOW = 8 << 20  # bytes read at a time while scanning


# -- CRC of any stretch from running CRCs (linear-time resynchronisation) ----------------------

_POLY = 0xEDB88320


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the CRC-32 polynomial (reflected), as zlib's multmodp."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                break
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


_X2N = [1 << 30]  # x^(2^k) modulo the polynomial
for _ in range(31):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def _crc32_shift_py(crc: int, nbytes: int) -> int:
    """zlib's crc32_combine(crc, 0, nbytes): crc advanced over nbytes of zero."""
    p, k, n = 1 << 31, 3, nbytes
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc)


def _zlib_shift() -> Callable[[int, int], int]:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("z") or "libz.so.1")
        fn = lib.crc32_combine64
        fn.restype = ctypes.c_ulong
        fn.argtypes = [ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int64]
        if fn(0x12345678, 0, 1000) != _crc32_shift_py(0x12345678, 1000):
            return _crc32_shift_py
        return lambda crc, n: int(fn(crc, 0, n)) & 0xFFFFFFFF
    except (OSError, AttributeError):
        return _crc32_shift_py


_crc32_shift = _zlib_shift()


def _pread(fd: int, n: int, off: int) -> bytes:
    out = []
    while n > 0:
        b = os.pread(fd, n, off)
        if not b:
            break
        out.append(b)
        n -= len(b)
        off += len(b)
    return b"".join(out)


def _plausible(h: tuple, off: int, size: int) -> bool:
    """A chunk header whose payload lies within the file (RECOVERY, step 2); a compressed
    chunk's data_bytes is its decompressed size, not bounded by the payload."""
    plen, dlen = h[4], h[5]
    return off + CHDR_SIZE + plen <= size and (dlen <= plen or bool(h[1] & abi.CHUNK_ZSTD))


def _scan(fd: int, size: int, start: int) -> tuple[dict[int, tuple], dict[int, int]]:
    """One pass over the file: every plausible chunk header at or after `start`
    ({offset: header}) and the running CRC-32 of the file from `start` at each one's
    payload start and end ({offset: crc}), from which any payload's CRC follows in
    constant time: the work is linear in the file size, however many chunk magics a
    damaged or crafted file holds."""
    cands: dict[int, tuple] = {}
    need: list[int] = []
    prefix: dict[int, int] = {}
    crc = 0
    pos = start
    off = start
    while off < size:
        if not need:
            # No payload pending: a hole (of a sparse file) holds no chunk and no CRC is
            # wanted across it; the running CRC starts anew after it (every payload's two
            # ends are then on the same chain).
            try:
                data = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:  # ENXIO: only a hole from here on
                data = size if e.errno == errno.ENXIO else off
            if data >= size:
                break
            if data > off:
                off = pos = data
                crc = 0
        n = min(SCAN_WINDOW, size - off)
        buf = _pread(fd, n + CHDR_SIZE, off)
        if len(buf) < n:  # the file shrank while read
            n = len(buf)
            if n == 0:
                break
        mv = memoryview(buf)
        i = buf.find(abi.CHUNK_MAGIC)
        while 0 <= i < n:
            if i + CHDR_SIZE <= len(buf):
                h = _CHDR.unpack_from(buf, i)
                p = off + i
                if _plausible(h, p, size):
                    cands[p] = h
                    heapq.heappush(need, p + CHDR_SIZE)
                    heapq.heappush(need, p + CHDR_SIZE + h[4])
            i = buf.find(abi.CHUNK_MAGIC, i + 1)
        end = off + n
        while need and need[0] <= end:
            x = heapq.heappop(need)
            if x not in prefix:
                crc = zlib.crc32(mv[pos - off:x - off], crc)
                pos = x
                prefix[x] = crc
        crc = zlib.crc32(mv[pos - off:n], crc)
        pos = end
        off = end
        mv.release()
    return cands, prefix


def _payload_crc(prefix: dict[int, int], a: int, b: int) -> int | None:
    pa, pb = prefix.get(a), prefix.get(b)
    if pa is None or pb is None:
        return None
    return pb ^ _crc32_shift(pa, b - a)


class _Source:
    """The bytes of the valid chunks: one mapping of the file up to the last of them, or,
    where that cannot be had (address space, a file too large), each payload read."""

    def __init__(self, fd: int, end: int, spans: list[tuple[int, int]]) -> None:
        self.mm: mmap.mmap | None = None
        self.copies: dict[int, bytes] = {}
        if end == 0:
            return
        try:
            self.mm = mmap.mmap(fd, end, prot=mmap.PROT_READ)
            return
        except (OSError, ValueError, OverflowError, MemoryError):
            self.mm = None
        for a, n in spans:
            self.copies[a] = _pread(fd, n, a)

    def payload(self, a: int, n: int) -> Any:
        if self.mm is not None:
            return memoryview(self.mm)[a:a + n]
        return memoryview(self.copies[a])
