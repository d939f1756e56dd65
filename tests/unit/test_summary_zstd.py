"""The short summary after `iowhy record` on a compressed trace (format version 5): its
RECORDER and TRAILER are read from the ends of the file even when compressed, and a cut
trace's size stands for more records than a plain one's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iowhy import abi, summary
from tracebuilder import Trace


def write(path: Path, trailer: dict | None) -> str:
    r = np.zeros(3000, dtype=abi.REQUEST_DTYPE)
    r["ts_ns"] = 10**9 + np.arange(3000) * 1000
    r["done_ns"] = r["ts_ns"]
    t = Trace(path, {"devices": [], "filesystems": [], "note": "m" * 400},
              {"start_ns": 10**9, "pid": 1000, "command": ["x"], "note": "r" * 400},
              zstd_level=3)
    return t.add("request", r).close(trailer)


def test_compressed_recorder_and_trailer_are_read(tmp_path):
    t = write(tmp_path / "t.iowt", {"end_ns": 2 * 10**9, "stop_reason": "signal",
                                    "counters": {"lost_x": 2}, "note": "t" * 400})
    p = summary.peek(t)
    assert p.compressed and p.start_ns == 10**9
    assert p.records() == {"request": 3000} and p.record_count() == 3000
    assert p.lost_events() == 2


def test_cut_compressed_trace_counts_more_per_byte(tmp_path):
    t = write(tmp_path / "cut.iowt", None)
    p = summary.peek(t)
    assert p.trailer is None and p.compressed
    most = (Path(t).stat().st_size - summary._HDR) // summary._MIN_RECORD_BYTES
    assert p.record_count() == most * summary._COMPRESSION_BOUND
