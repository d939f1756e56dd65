"""The recorder's compacted record chunks (format version 6) on a real recording: 8
processes appending and fsyncing on XFS on a loop device, so that requests, fsync calls,
journal events and off-CPU intervals of several threads interleave. Checked: every
record chunk of those types with more than a few records is compacted (and compressed);
each one's data, decompressed, is byte for byte what the reference encoder
(tracedecode.compact) makes of the records the reader put back in order, so the C
encoder and the documented form agree on the recorder's own output; and the trace is
read without damage, with the file per request under the benchmark's 48 bytes.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import zstandard

from conftest import REPO
from iowhy import abi, tracedecode
from iowhy.traceformat import read_trace
from recording import assert_nothing_dropped, record

pytestmark = pytest.mark.bpf

TASKS, K = 8, 150


def _chunks(data: bytes) -> list[tuple[np.void, bytes]]:
    off, out = 64, []
    while off + 32 <= len(data):
        ch = np.frombuffer(data, dtype=abi.CHUNK_HDR_DTYPE, count=1, offset=off)[0]
        end = off + 32 + int(ch["payload_bytes"])
        if end > len(data):
            break
        out.append((ch, data[off + 32:end]))
        off = end
    return out


def test_fsync_tasks_trace_is_compacted(bpf, make_fs, iowhy_bin, tmp_path):
    _lp, mnt = make_fs("xfs", size_mib=1024)
    out = tmp_path / "f.iowt"
    record(iowhy_bin, out, [sys.executable, str(REPO / "lab" / "workloads.py"),
                            "fsync-tasks", str(mnt), str(TASKS), str(K)])
    tr = read_trace(str(out))
    assert tr.version == abi.FORMAT_VERSION and not tr.damage.damaged, tr.damage.summary()
    assert_nothing_dropped(tr)
    assert tr.count("fsync") >= TASKS * K
    seen: dict[str, int] = {}
    done: dict[str, int] = {}
    dec = zstandard.ZstdDecompressor()
    for ch, payload in _chunks(out.read_bytes()):
        ctype, count = int(ch["type"]), int(ch["count"])
        code = ctype & ~(abi.CHUNK_ZSTD | abi.CHUNK_COMPACT)
        if code not in tracedecode.COMPACT_SPECS:
            continue
        name = abi.RECORD_TYPES[code][0]
        if count > 8:
            assert ctype & abi.CHUNK_COMPACT and ctype & abi.CHUNK_ZSTD, (name, hex(ctype))
        if ctype & abi.CHUNK_COMPACT:
            data = dec.decompressobj().decompress(payload)
            assert len(data) == int(ch["data_bytes"]) == count * (int(ch["rec_size_bytes"]) + 2)
            at = seen.get(name, 0)
            recs = tr.records(name)[at:at + count]
            assert tracedecode.compact(recs.tobytes(), code, recs.dtype.itemsize, count) \
                == data, name
            done[name] = done.get(name, 0) + 1
        seen[name] = seen.get(name, 0) + count
    assert {"request", "fsync", "journal", "offcpu"} <= set(done), done
    per_rq = tr.file_bytes / tr.count("request")
    z = tr.trailer["chunk_zstd"]
    print(f"fsync-tasks {TASKS}x{K}: {per_rq:.1f} B of file per request, "
          f"compaction and zstd {z['cpu_ns'] / 1e6:.1f} ms CPU")
    assert z["cpu_ns"] > 0 and per_rq <= 48
