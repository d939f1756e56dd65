"""Record-time metadata without a device: host and clock facts, block device number
parsing and small parsing helpers (the superblock parsers: test_superblocks.py)."""

from __future__ import annotations

import json
import os
import time

import pytest

from iowhy import __version__, metadata
from iowhy.metadata import block_device_number, collect


# -- without a device --------------------------------------------------------------------

def test_collect_host_and_clock():
    t0 = time.monotonic()
    meta = collect(["sh", "-c", "true"], None)
    assert time.monotonic() - t0 < 0.5
    json.dumps(meta)  # stored as JSON in the trace
    uts = os.uname()
    assert meta["kernel"] == uts.release and meta["machine"] == uts.machine
    assert meta["iowhy_version"] == __version__
    assert meta["command"] == ["sh", "-c", "true"]
    assert meta["page_size_bytes"] == os.sysconf("SC_PAGE_SIZE")
    assert meta["ncpus"] == os.cpu_count()
    assert abs(meta["created_realtime_ns"] - time.time_ns()) < 5 * 10**9
    expect = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(
        time.CLOCK_MONOTONIC)
    assert abs(meta["clock"]["realtime_minus_monotonic_ns"] - expect) < 10**7
    for d in meta["devices"]:
        assert not d["name"].startswith("ram")
        if d["name"].startswith("loop"):
            assert d["backing_file"]
    assert collect(None, None)["command"] is None


def test_block_device_number_rejects(tmp_path):
    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(ValueError, match=r"is not a block device"):
        block_device_number(str(f))
    with pytest.raises(ValueError, match=r"is not a block device"):
        block_device_number(str(tmp_path))
    missing = str(tmp_path / "missing")
    with pytest.raises(ValueError) as e:
        block_device_number(missing)
    assert str(e.value) == f"{missing}: no such file"
    with pytest.raises(ValueError) as e:
        block_device_number("4095:1048575")
    assert str(e.value) == "no block device 4095:1048575"


def test_small_helpers():
    assert metadata._bracketed("none [mq-deadline] kyber") == "mq-deadline"
    assert metadata._bracketed("[none] mq-deadline") == "none"
    assert metadata._unescape(r"/mnt/a\040b\011c\134d") == "/mnt/a b\tc\\d"
    assert metadata._merge_options("rw,relatime", "rw,errors=remount-ro") == \
        "rw,relatime,errors=remount-ro"
