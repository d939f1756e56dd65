"""TraceWriter: writes the trace format (docs/trace-format.md). The C recorder is the
production writer; this one serves tests and tools that produce synthetic traces."""

from __future__ import annotations

import json
import os
import zlib
from typing import IO, Any

import numpy as np
import zstandard

from . import abi
from .tracedecode import _transpose, compact
from .tracescan import CHDR_SIZE, HDR_SIZE


class TraceWriter:
    """Writes the trace format; the C recorder is the production writer, this one
    serves tests and tools that produce synthetic traces.

    zstd_level: 0 writes plain chunks; a zstd level (1-22) compresses each chunk, as the
    recorder does, kept plain when compressing does not make it smaller. compact (with a
    zstd level): the record types that have a compacted form are compacted before they are
    compressed, as the recorder does, and the file is of this format version; otherwise
    the file is version 5, the lowest that holds what is written (a reader of version 5
    reads it). `version` says which instead: a file of version 9 or later holds the
    tasks' cgroups (64-byte task records), one of an older version 56-byte task records
    (a task with a cgroup id is refused there)."""

    def __init__(self, path: str, created_realtime_ns: int = 0, zstd_level: int = 0,
                 compact: bool = False, fileobj: IO[Any] | None = None,
                 version: int | None = None) -> None:
        """fileobj: write there (a file the caller opened, and commits) instead of
        creating PATH; close() then leaves it open."""
        self.compact = bool(compact and zstd_level)
        if version is None:
            version = abi.FORMAT_VERSION if self.compact else abi.BASE_VERSION
        # refused before PATH is created or truncated
        if version not in abi.READ_VERSIONS or version < abi.BASE_VERSION or (
                self.compact and version < 6):
            raise ValueError(f"TraceWriter cannot write format version {version}")
        self.version = version
        self.own = fileobj is None
        if fileobj is None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)
            fileobj = os.fdopen(fd, "wb")
        self.f: IO[Any] = fileobj
        self.seq = 0
        self.zstd = zstandard.ZstdCompressor(level=zstd_level, write_content_size=True,
                                             write_checksum=True) if zstd_level else None
        self.counts: dict[str, int] = {}
        hdr = np.zeros(1, dtype=abi.FILE_HDR_DTYPE)
        hdr["magic"] = abi.FILE_MAGIC
        hdr["version"] = version
        hdr["hdr_bytes"] = HDR_SIZE
        hdr["chunk_hdr_bytes"] = CHDR_SIZE
        hdr["endian_tag"] = 0x01020304
        hdr["created_realtime_ns"] = created_realtime_ns
        self.f.write(hdr.tobytes())

    def _chunk(self, ctype: int, rec_size: int, count: int, data: bytes,
               data_bytes: int | None = None) -> None:
        """One chunk of `data`, compressed when the writer compresses and that helps.
        data_bytes overrides the header's data_bytes (tests of damaged files)."""
        dlen = len(data)
        if self.zstd is not None and data:
            packed = compact(data, ctype, rec_size, count) if self.compact and count > 1 \
                else None
            flags = abi.CHUNK_ZSTD
            if packed is not None:
                flags |= abi.CHUNK_COMPACT
                dlen = len(packed)  # what the frame decompresses to
            else:
                packed = (_transpose(data, rec_size, count)
                          if rec_size and count > 1 and rec_size * count == dlen else data)
            z = self.zstd.compress(packed)
            if len(z) < len(data):
                data = z
                ctype |= flags
            else:
                dlen = len(data)  # kept plain
        pad = (-len(data)) % 8
        payload = data + b"\0" * pad
        ch = np.zeros(1, dtype=abi.CHUNK_HDR_DTYPE)
        ch["magic"] = abi.CHUNK_MAGIC
        ch["type"] = ctype
        ch["rec_size_bytes"] = rec_size
        ch["count"] = count
        ch["payload_bytes"] = len(payload)
        ch["data_bytes"] = dlen if data_bytes is None else data_bytes
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
        old = abi.OLD_RECORD_DTYPES.get(self.version, {}).get(code)
        if old is not None:  # an older version's layout: the fields it has
            if code == abi.REC_TASK and a["cgroup_id"].any():
                raise ValueError(f"task cgroups need format version {abi.CGROUP_VERSION}; "
                                 f"this file is version {self.version}")
            narrow = np.zeros(len(a), dtype=old)
            for f in old.names or ():
                narrow[f] = a[f]
            a, dtype = narrow, old
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
        if self.own:
            self.f.close()
        else:
            self.f.flush()
