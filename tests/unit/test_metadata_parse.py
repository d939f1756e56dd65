"""Record-time metadata without a device: host and clock facts, block device number
parsing, and the superblock parsers on hand-built bytes."""

from __future__ import annotations

import json
import os
import struct
import time

import pytest

from iowhy import __version__, metadata, superblocks
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
    assert superblocks._merge([[8, 16], [0, 8], [20, 24], [22, 30], [5, 5]]) == [[0, 16], [20, 30]]
    assert metadata._bracketed("none [mq-deadline] kyber") == "mq-deadline"
    assert metadata._bracketed("[none] mq-deadline") == "none"
    assert metadata._unescape(r"/mnt/a\040b\011c\134d") == "/mnt/a b\tc\\d"
    assert metadata._merge_options("rw,relatime", "rw,errors=remount-ro") == \
        "rw,relatime,errors=remount-ro"


def test_ext4_extent_tree_with_index_level():
    bs = 1024
    leaf = bytearray(bs)
    struct.pack_into("<HHHHI", leaf, 0, 0xF30A, 2, 84, 0, 0)
    struct.pack_into("<IHHI", leaf, 12, 0, 100, 0, 5000)
    struct.pack_into("<IHHI", leaf, 24, 100, 32768 + 28, 1, 7)  # unwritten, above 4 GiB
    root = bytearray(60)
    struct.pack_into("<HHHHI", root, 0, 0xF30A, 1, 4, 1, 0)
    struct.pack_into("<IIHH", root, 12, 0, 42, 0, 0)
    reads = []

    def read(off, length):
        reads.append((off, length))
        assert off == 42 * bs
        return bytes(leaf[:length])
    got = superblocks._ext4_extent_tree(read, bytes(root), bs)
    assert got == [(0, 5000, 100), (100, (1 << 32) + 7, 28)]
    assert reads == [(42 * bs, bs)]
    assert superblocks._map_range(got, 90, 110) == [(90, 5090, 10), (100, (1 << 32) + 7, 10)]
    root[0] = 0
    with pytest.raises(ValueError):
        superblocks._ext4_extent_tree(read, bytes(root), bs)
