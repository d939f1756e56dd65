"""The short "where the time went" that `iowhy record` and `iowhy attach` print when
they stop: problems first, one line per category, the largest finding.

It must not hold up `record`'s exit, nor take more memory than the analysis's own
budget. So the size of the trace is looked at first, from the file's size and its
TRAILER's record counts (read from the end of the file, without the records): up to
SUMMARY_MAX_RECORDS records (about a second of analysis on a quiet machine) the trace
is analyzed as `iowhy report` would, without placement and locality; above that only
the trailer's counters are printed, in one line, with a word that the analysis was
skipped and the command that makes it.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from typing import Any, Optional

from . import abi

SUMMARY_MAX_RECORDS = 1_000_000
# A trace without a trailer is measured by its size: no record is smaller than this.
_MIN_RECORD_BYTES = min(dt.itemsize for _, dt in abi.RECORD_TYPES.values())
_HDR = abi.FILE_HDR_DTYPE.itemsize
_CHDR = abi.CHUNK_HDR_DTYPE.itemsize
_TAIL = 1 << 20          # the trailer is looked for in the last MiB
# Records a compressed trace without a trailer is taken to hold per byte of file, times
# what a plain one can: real traces compress 6-15 times (bench/README.md), and no record
# compresses below 2.5 bytes, which the bound allows for.
_COMPRESSION_BOUND = 16
_HEAD_CHUNKS = 8         # RECORDER is among the first chunks (after META)


@dataclass
class Peek:
    """What the ends of a trace file say, without reading its records."""

    file_bytes: int
    start_ns: Optional[int]
    trailer: Optional[dict[str, Any]]
    compressed: bool = False  # zstd-compressed chunks seen (format version 5 and later)

    def records(self) -> Optional[dict[str, int]]:
        """The trailer's {record type: count}, when it has a valid one."""
        rec = (self.trailer or {}).get("records")
        if not isinstance(rec, dict):
            return None
        out = {}
        for k, v in rec.items():
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**63:
                return None
            out[str(k)] = v
        return out

    def record_count(self) -> int:
        """Records in the trace: the trailer's total, else the most the file can hold."""
        rec = self.records()
        if rec is not None:
            return sum(rec.values())
        most = max(0, self.file_bytes - _HDR) // _MIN_RECORD_BYTES
        return most * _COMPRESSION_BOUND if self.compressed else most

    def lost_events(self) -> int:
        c = (self.trailer or {}).get("counters")
        if not isinstance(c, dict):
            return 0
        return sum(v for k, v in c.items() if str(k).startswith("lost_")
                   and isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**63)


def _chunk_header(raw: bytes) -> Any:
    """The chunk header at the start of RAW (a numpy record), or None."""
    import numpy as np
    if len(raw) < _CHDR or raw[:4] != abi.CHUNK_MAGIC:
        return None
    return np.frombuffer(raw[:_CHDR], dtype=abi.CHUNK_HDR_DTYPE, count=1)[0]


def _data(ch: Any, payload: bytes) -> Optional[bytes]:
    """The data of a JSON chunk whose payload's CRC is right: decompressed (within the
    reader's bounds) when the chunk is compressed; None when it does not decompress."""
    n, plen = int(ch["data_bytes"]), int(ch["payload_bytes"])
    if not int(ch["type"]) & abi.CHUNK_ZSTD:
        return payload[:n] if n <= plen else None
    from .tracedecode import JSON_MAX, _unzstd
    return _unzstd(payload, plen, n) if n <= JSON_MAX else None


def _json(payload: Optional[bytes], n: int) -> Optional[dict[str, Any]]:
    if payload is None:
        return None
    try:
        obj = json.loads(payload[:n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def peek(path: str) -> Peek:
    """The file's size, RECORDER `start_ns` and TRAILER, reading at most a few MiB at its
    two ends. A missing or damaged trailer is None (the full reader says more)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        start_ns = None
        packed = False
        off = _HDR
        for _ in range(_HEAD_CHUNKS):
            ch = _chunk_header(os.pread(fd, _CHDR, off))
            if ch is None:
                break
            ctype, plen = int(ch["type"]), int(ch["payload_bytes"])
            packed |= bool(ctype & abi.CHUNK_ZSTD)
            ctype &= ~abi.CHUNK_ZSTD
            if ctype not in abi.JSON_CHUNKS or plen > _TAIL:
                break
            if abi.JSON_CHUNKS[ctype] == "recorder":
                payload = os.pread(fd, plen, off + _CHDR)
                if zlib.crc32(payload) & 0xFFFFFFFF == int(ch["crc32"]):
                    v = (_json(_data(ch, payload), int(ch["data_bytes"])) or {}).get("start_ns")
                    if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**63:
                        start_ns = v
                break
            off += _CHDR + plen
        trailer = None
        base = max(_HDR, size - _TAIL)
        tail = os.pread(fd, size - base, base)
    finally:
        os.close(fd)
    # the last chunk whose end is the end of the file, checked like the reader does
    at = len(tail)
    while True:
        at = tail.rfind(abi.CHUNK_MAGIC, 0, at)
        if at < 0:
            break
        ch = _chunk_header(tail[at:at + _CHDR])
        if ch is not None and int(ch["type"]) & ~abi.CHUNK_ZSTD == abi.CHUNK_TRAILER:
            plen, n = int(ch["payload_bytes"]), int(ch["data_bytes"])
            payload = tail[at + _CHDR:]
            packed |= bool(int(ch["type"]) & abi.CHUNK_ZSTD)
            if len(payload) == plen and zlib.crc32(payload) & 0xFFFFFFFF == int(ch["crc32"]):
                trailer = _json(_data(ch, payload), n)
            break
    return Peek(size, start_ns, trailer, packed)


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _size(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


def counters_summary(path: str, p: Peek, max_records: int) -> str:
    """The short summary of a trace too large to analyze at once: the trailer only."""
    lines = []
    if p.trailer is None:
        lines.append("iowhy: the trace has no readable trailer (the recording was cut): "
                     "`iowhy info` says what it holds")
    lost = p.lost_events()
    if lost:
        lines.append(f"iowhy: {_count(lost, 'event', 'events')} lost in the kernel "
                     f"(`iowhy info {path}` lists them)")
    parts = []
    rec = p.records()
    if rec is not None:
        for key, one, many in (("request", "block request", "block requests"),
                               ("fsync", "fsync-family call", "fsync-family calls"),
                               ("journal", "journal event", "journal events"),
                               ("offcpu", "off-CPU interval", "off-CPU intervals")):
            parts.append(_count(rec.get(key, 0), one, many))
    parts.append(f"{_size(p.file_bytes)} trace")
    what = "recorded"
    end = (p.trailer or {}).get("end_ns")
    if (p.start_ns and isinstance(end, int) and not isinstance(end, bool)
            and end > p.start_ns):
        what = f"{(end - p.start_ns) / 1e9:.1f} s recorded"
    stop = (p.trailer or {}).get("stop_reason")
    if isinstance(stop, str) and stop.isprintable() and len(stop) < 40:
        what += f" ({stop})"
    lines.append(f"iowhy: {what}: {', '.join(parts)}")
    lines.append(f"iowhy: summary skipped for a trace this large ({p.record_count():,} "
                 f"records, more than {max_records:,}): run `iowhy report {path}`")
    return "\n".join(lines)


def short_summary(path: str, max_records: int = SUMMARY_MAX_RECORDS) -> str:
    """Text for the terminal; raises traceformat.TraceError for an unreadable trace.
    Above MAX_RECORDS records (or a file that could hold that many, without a
    trailer) only the trailer's counters are printed (counters_summary)."""
    from .traceformat import TraceError
    try:
        p = peek(path)
    except OSError as e:
        raise TraceError(f"cannot open {path}: {e.strerror}", "") from None
    if p.record_count() > max_records or p.file_bytes > max_records * 160 + (16 << 20):
        return counters_summary(path, p, max_records)
    from .analysis import AnalysisConfig, analyze
    from .traceformat import read_trace
    # Placement and locality are skipped: the short summary must be quick.
    short = AnalysisConfig(placement=False, locality=False, queue_depth_buckets=1,
                           max_findings=1)
    tr = read_trace(path)
    try:
        result = analyze(tr, short)
    except Exception as e:  # never lose the recording's exit to a summary bug
        return (f"iowhy: could not summarize {path} ({type(e).__name__}: {e}); "
                f"try `iowhy report {path}`")
    from .reports.terminal import render_where
    return render_where(result) + f"\n(full report: iowhy report {path})"
