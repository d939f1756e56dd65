"""Read and write iowhy trace files (docs/trace-format.md).

The reader maps the file, validates every chunk (magic, bounds, CRC) and exposes each
record chunk as a zero-copy numpy view. A damaged or cut file yields every complete
chunk; what could not be read is counted (`missing_bytes`, `bad_regions`,
`unknown_chunks`) and a lost trailer is reported as `truncated`.

The writer produces the same format and is what tests use for synthetic traces.
"""

from __future__ import annotations

import json
import mmap
import os
import stat
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from . import abi


class TraceError(Exception):
    """A trace file that cannot be read at all. str() is the one-line message."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class Trace:
    path: str
    version: int
    created_realtime_ns: int
    file_bytes: int
    meta: dict[str, Any] = field(default_factory=dict)
    recorder: dict[str, Any] = field(default_factory=dict)
    trailer: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    truncated: bool = False
    missing_bytes: int = 0  # bytes of the file that belong to no valid chunk
    bad_regions: int = 0  # damaged stretches skipped by resynchronising on the next chunk
    unknown_chunks: int = 0  # valid chunks of a type or record size this reader does not know
    chunk_count: int = 0
    _views: dict[str, list[np.ndarray]] = field(default_factory=dict, repr=False)
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    # -- records -----------------------------------------------------------------
    def chunks(self, name: str) -> list[np.ndarray]:
        """Zero-copy views of every chunk of record type `name` ("request", ...)."""
        return self._views.get(name, [])

    def records(self, name: str) -> np.ndarray:
        """All records of one type as one structured array (copied once, then cached)."""
        if name not in self._cache:
            views = self.chunks(name)
            dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
            if not views:
                self._cache[name] = np.zeros(0, dtype=dtype)
            elif len(views) == 1:
                self._cache[name] = views[0]
            else:
                self._cache[name] = np.concatenate(views)
        return self._cache[name]

    def column(self, name: str, fieldname: str) -> np.ndarray:
        """One field of one record type across all chunks, without copying whole records."""
        views = self.chunks(name)
        if not views:
            dtype = abi.RECORD_TYPES[abi.RECORD_NAMES[name]][1]
            return np.zeros(0, dtype=dtype[fieldname])
        if len(views) == 1:
            return views[0][fieldname]
        return np.concatenate([v[fieldname] for v in views])

    def count(self, name: str) -> int:
        return int(sum(len(v) for v in self.chunks(name)))

    # -- summary -----------------------------------------------------------------
    @property
    def counters(self) -> dict[str, int]:
        """Loss and anomaly counters: the trailer's, else the last progress chunk's."""
        src = self.trailer if self.trailer is not None else self.progress
        return {k: int(v) for k, v in (src or {}).get("counters", {}).items()}

    @property
    def lost_events(self) -> int:
        c = self.counters
        return int(sum(v for k, v in c.items() if k.startswith("lost_")))

    @property
    def start_ns(self) -> int:
        return int(self.recorder.get("start_ns", 0))

    @property
    def end_ns(self) -> int:
        for src in (self.trailer, self.progress):
            if src and src.get("end_ns"):
                return int(src["end_ns"])
        # A trace without trailer or progress ends with its last record.
        last = 0
        for name in abi.RECORD_NAMES:
            for v in self.chunks(name):
                if len(v):
                    last = max(last, int(v["ts_ns"].max()))
        return last

    @property
    def duration_ns(self) -> int:
        start, end = self.start_ns, self.end_ns
        return max(0, end - start) if start else 0

    def problems(self) -> list[str]:
        """Everything lost or suspicious, in words, for the top of every report."""
        out = []
        if self.truncated:
            out.append(
                "trace is truncated (no trailer: the recorder was killed or the disk filled); "
                f"{self.missing_bytes} bytes at the end could not be read"
                if self.missing_bytes else
                "trace is truncated (no trailer: the recorder was killed or the disk filled)")
        if self.bad_regions:
            out.append(f"{self.bad_regions} damaged region(s) skipped ({self.missing_bytes} bytes)")
        if self.unknown_chunks:
            out.append(f"{self.unknown_chunks} chunk(s) of an unknown type or size ignored")
        c = self.counters
        lost = {k: v for k, v in c.items() if k.startswith("lost_") and v}
        if lost:
            parts = ", ".join(f"{v} {k[5:].replace('_', ' ')}" for k, v in sorted(lost.items()))
            out.append(f"{sum(lost.values())} events lost in the kernel ({parts})")
        if c.get("unmatched_completion"):
            out.append(f"{c['unmatched_completion']} completions of requests issued "
                       "before recording")
        if c.get("request_without_origin"):
            out.append(f"{c['request_without_origin']} requests whose submitting task is unknown")
        if c.get("unknown_record"):
            out.append(f"{c['unknown_record']} malformed records from the probes were dropped "
                       "(recorder and probes from different builds?)")
        if c.get("bio_walk_capped"):
            out.append(f"{c['bio_walk_capped']} requests with more bios than the probe follows")
        return out


HDR_SIZE = abi.FILE_HDR_DTYPE.itemsize
CHDR_SIZE = abi.CHUNK_HDR_DTYPE.itemsize


def _json_chunk(buf: memoryview, n: int) -> dict[str, Any] | None:
    try:
        obj = json.loads(bytes(buf[:n]).decode("utf-8", errors="replace"))
    except (UnicodeDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def read_trace(path: str) -> Trace:
    """Open and validate a trace. Raises TraceError for a file that is not one at all."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise TraceError(f"cannot open {path}: {e.strerror}",
                         "check the path; traces are mode 0600, read them as root") from None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(f"{path} is not a regular file",
                             "give the path of a trace file written by `iowhy record`")
        if size == 0:
            raise TraceError(f"{path} is empty",
                             "the recorder never wrote to it; record again with `iowhy record`")
        mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    buf = memoryview(mm)
    if size < HDR_SIZE or bytes(buf[:8]) != abi.FILE_MAGIC:
        raise TraceError(f"{path} is not an iowhy trace (bad magic)",
                         "iowhy reads .iowt files written by `iowhy record`")
    hdr = np.frombuffer(buf, dtype=abi.FILE_HDR_DTYPE, count=1)[0]
    version = int(hdr["version"])
    if version not in abi.READ_VERSIONS:
        older = ", ".join(str(v) for v in abi.READ_VERSIONS if v != abi.FORMAT_VERSION)
        raise TraceError(f"{path} is trace format version {version}; this iowhy reads version "
                         f"{abi.FORMAT_VERSION}" + (f" (and {older})" if older else ""),
                         "use the iowhy release that recorded it")
    if int(hdr["endian_tag"]) != 0x01020304:
        raise TraceError(f"{path} was written on a big-endian host",
                         "analyze it on a host of the recorder's byte order")
    tr = Trace(path=path, version=version, created_realtime_ns=int(hdr["created_realtime_ns"]),
               file_bytes=size)
    off = int(hdr["hdr_bytes"])
    chdr_size = int(hdr["chunk_hdr_bytes"]) or CHDR_SIZE
    known_sizes = {code: dt.itemsize for code, (_, dt) in abi.RECORD_TYPES.items()}
    old_dtypes = abi.OLD_RECORD_DTYPES.get(version, {})
    known_sizes.update({code: dt.itemsize for code, dt in old_dtypes.items()})
    while off < size:
        ok = False
        if off + chdr_size <= size and bytes(buf[off:off + 4]) == abi.CHUNK_MAGIC:
            ch = np.frombuffer(buf, dtype=abi.CHUNK_HDR_DTYPE, count=1, offset=off)[0]
            plen = int(ch["payload_bytes"])
            pstart = off + chdr_size
            if pstart + plen <= size and int(ch["data_bytes"]) <= plen:
                payload = buf[pstart:pstart + plen]
                if zlib.crc32(payload) & 0xFFFFFFFF == int(ch["crc32"]):
                    ok = True
                    tr.chunk_count += 1
                    _take_chunk(tr, ch, payload, known_sizes, old_dtypes)
                    off = pstart + plen
        if ok:
            continue
        # Damage: resynchronise on the next chunk magic, count what was skipped.
        nxt = mm.find(abi.CHUNK_MAGIC, off + 1)
        if nxt < 0:
            tr.missing_bytes += size - off
            break
        tr.bad_regions += 1
        tr.missing_bytes += nxt - off
        off = nxt
    tr.truncated = tr.trailer is None
    if tr.chunk_count == 0 and not tr.recorder and not tr.meta:
        raise TraceError(f"{path} holds no readable chunk",
                         "the recording was cut before its first chunk; record again")
    return tr


def _take_chunk(tr: Trace, ch: np.void, payload: memoryview,
                known_sizes: dict[int, int], old_dtypes: dict[int, np.dtype] | None = None
                ) -> None:
    ctype = int(ch["type"])
    n = int(ch["data_bytes"])
    if ctype in abi.JSON_CHUNKS:
        obj = _json_chunk(payload, n)
        if obj is None:
            tr.unknown_chunks += 1
            return
        kind = abi.JSON_CHUNKS[ctype]
        if kind == "meta":
            tr.meta.update(obj)
        elif kind == "recorder":
            tr.recorder.update(obj)
        elif kind == "progress":
            tr.progress = obj
        else:
            tr.trailer = obj
        return
    if ctype in abi.RECORD_TYPES and int(ch["rec_size_bytes"]) == known_sizes[ctype]:
        name, dtype = abi.RECORD_TYPES[ctype]
        old = (old_dtypes or {}).get(ctype)
        count = int(ch["count"])
        if count * (old or dtype).itemsize != n:
            tr.unknown_chunks += 1
            return
        if old is not None:
            # An older version's layout: widen to this version's (new fields zero).
            src = np.frombuffer(payload, dtype=old, count=count)
            view = np.zeros(count, dtype=dtype)
            for f in old.names or ():
                if f in (dtype.names or ()) and not f.startswith("pad"):
                    view[f] = src[f]
            view["size_bytes"] = dtype.itemsize
        else:
            view = np.frombuffer(payload, dtype=dtype, count=count)
        tr._views.setdefault(name, []).append(view)
        return
    tr.unknown_chunks += 1


class TraceWriter:
    """Writes the trace format; the C recorder is the production writer, this one
    serves tests and tools that produce synthetic traces."""

    def __init__(self, path: str, created_realtime_ns: int = 0) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        self.f: BinaryIO = os.fdopen(fd, "wb")
        self.seq = 0
        self.counts: dict[str, int] = {}
        hdr = np.zeros(1, dtype=abi.FILE_HDR_DTYPE)
        hdr["magic"] = abi.FILE_MAGIC
        hdr["version"] = abi.FORMAT_VERSION
        hdr["hdr_bytes"] = HDR_SIZE
        hdr["chunk_hdr_bytes"] = CHDR_SIZE
        hdr["endian_tag"] = 0x01020304
        hdr["created_realtime_ns"] = created_realtime_ns
        self.f.write(hdr.tobytes())

    def _chunk(self, ctype: int, rec_size: int, count: int, data: bytes) -> None:
        pad = (-len(data)) % 8
        payload = data + b"\0" * pad
        ch = np.zeros(1, dtype=abi.CHUNK_HDR_DTYPE)
        ch["magic"] = abi.CHUNK_MAGIC
        ch["type"] = ctype
        ch["rec_size_bytes"] = rec_size
        ch["count"] = count
        ch["payload_bytes"] = len(payload)
        ch["data_bytes"] = len(data)
        ch["crc32"] = zlib.crc32(payload) & 0xFFFFFFFF
        ch["seq"] = self.seq
        self.seq += 1
        self.f.write(ch.tobytes())
        self.f.write(payload)

    def write_json(self, ctype: int, obj: dict[str, Any]) -> None:
        self._chunk(ctype, 0, 1, json.dumps(obj, sort_keys=True).encode())

    def write_records(self, arr: np.ndarray, chunk_records: int = 65536) -> None:
        # The dtype object itself first: two record types may share a layout (helper).
        found = [c for c, (_, dt) in abi.RECORD_TYPES.items() if arr.dtype is dt] or \
            [c for c, (_, dt) in abi.RECORD_TYPES.items() if arr.dtype == dt]
        if not found:
            raise ValueError(f"not a record dtype: {arr.dtype}")
        code = found[0]
        name, dtype = abi.RECORD_TYPES[code]
        a = np.ascontiguousarray(arr)
        if "type" in (dtype.names or ()):
            a = a.copy()
            a["type"] = code
            a["size_bytes"] = dtype.itemsize
        for i in range(0, len(a), chunk_records):
            part = a[i:i + chunk_records]
            self._chunk(code, dtype.itemsize, len(part), part.tobytes())
        self.counts[name] = self.counts.get(name, 0) + len(a)

    def close(self, trailer: dict[str, Any] | None = None) -> None:
        """Write the trailer (unless None: that leaves the file truncated) and close."""
        if trailer is not None:
            t = dict(trailer)
            t.setdefault("records", dict(self.counts))
            t.setdefault("counters", {n: 0 for n in abi.COUNTER_NAMES})
            self.write_json(abi.CHUNK_TRAILER, t)
        self.f.close()
