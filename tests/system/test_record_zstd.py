"""The recorder's compressed chunks (format version 5, 6) on a real recording: a dd of direct
4 KiB writes on XFS on a loop device. Checked: every record chunk is zstd-compressed and
reads back; the file is at least 4 times smaller than its data (the trailer's
`chunk_zstd` says how much data went in); the request records equal what dd wrote; and a
recorder killed with -9 mid-run leaves a partial trace whose complete chunks all
decompress (no undecodable chunk, no damaged region: only the cut tail is missing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import recorder_path
from iowhy import abi
from iowhy.traceformat import read_trace
from recording import assert_nothing_dropped, record

pytestmark = pytest.mark.bpf

COUNT = 4000


def _chunks(data: bytes) -> tuple[list[np.void], int]:
    """The chunk headers of every complete chunk of a trace file, and where they end."""
    off, out = 64, []
    while off + 32 <= len(data):
        ch = np.frombuffer(data, dtype=abi.CHUNK_HDR_DTYPE, count=1, offset=off)[0]
        end = off + 32 + int(ch["payload_bytes"])
        if end > len(data):
            break
        out.append(ch)
        off = end
    return out, off


def _dd(mnt, count: int) -> list[str]:
    return ["dd", "if=/dev/zero", f"of={mnt}/f", "bs=4k", f"count={count}", "oflag=direct",
            "status=none"]


def test_dd_trace_is_compressed(bpf, make_fs, iowhy_bin, tmp_path):
    lp, mnt = make_fs("xfs")
    out = tmp_path / "dd.iowt"
    record(iowhy_bin, out, _dd(mnt, COUNT))
    tr = read_trace(str(out))
    assert tr.version == abi.FORMAT_VERSION == 10 and not tr.damage.damaged
    assert_nothing_dropped(tr)
    rq = tr.records("request")
    major, minor = (int(x) for x in open(f"/sys/block/{os.path.basename(lp.dev)}/dev")
                    .read().split(":"))
    mine = rq[(rq["dev_major"] == major) & (rq["dev_minor"] == minor)]
    writes = mine[(mine["op"] == 1) & (mine["len_bytes"] == 4096)]
    assert len(writes) >= COUNT  # dd's writes, one request each (direct I/O)
    z = tr.trailer["chunk_zstd"]
    assert z["level"] >= 1 and z["stored_bytes"] * 4 <= z["data_bytes"], z
    assert z["cpu_ns"] > 0
    chunks, _ = _chunks(out.read_bytes())
    flags = abi.CHUNK_ZSTD | abi.CHUNK_COMPACT
    rec_chunks = [c for c in chunks if (int(c["type"]) & ~flags) in abi.RECORD_TYPES]
    assert rec_chunks and all(int(c["type"]) & abi.CHUNK_ZSTD for c in rec_chunks
                              if int(c["count"]) > 8)
    per_rq = tr.file_bytes / len(rq)
    plain = sum(int(c["data_bytes"]) + 32 for c in chunks) / len(rq)
    print(f"dd: {per_rq:.1f} B of file per request ({plain:.1f} B plain), "
          f"zstd {z['cpu_ns'] / 1e6:.1f} ms CPU")
    assert per_rq * 4 <= plain


def test_kill9_leaves_readable_compressed_chunks(bpf, make_fs, tmp_path):
    """kill -9 of the recorder while it writes: every complete chunk of the partial trace
    decompresses."""
    lp, mnt = make_fs("xfs", size_mib=1024)
    out = tmp_path / "k.iowt"
    r = subprocess.Popen([str(recorder_path()), "-q", "-o", str(out), "--",
                          *_dd(mnt, 200_000)], stderr=subprocess.PIPE)
    partial = tmp_path / f"k.iowt.partial-{r.pid}"
    try:
        deadline = time.monotonic() + 30
        # chunks are flushed once a second: wait for a few record chunks
        while time.monotonic() < deadline:
            if partial.exists() and partial.stat().st_size > 64 * 1024:
                break
            time.sleep(0.1)
        time.sleep(0.3)
        kids = [int(c) for c in open(f"/proc/{r.pid}/task/{r.pid}/children").read().split()]
        r.send_signal(signal.SIGKILL)
        r.wait()
    finally:
        if r.poll() is None:
            r.kill()
            r.wait()
    for k in kids:  # the workload (dd), started by the recorder
        try:
            os.kill(k, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not out.exists() and partial.exists()
    tr = read_trace(str(partial))
    d = tr.damage
    assert d.truncated and d.undecodable_chunks == 0 and d.bad_regions == 0
    assert d.unknown_chunks == 0
    data = partial.read_bytes()
    # every complete chunk: the reader took them all (only a cut tail may be missing)
    chunks, off = _chunks(data)
    packed = sum(bool(int(c["type"]) & abi.CHUNK_ZSTD) for c in chunks)
    assert tr.chunk_count == len(chunks) and packed >= 1
    assert d.missing_bytes == len(data) - off
    assert tr.count("request") > 0
