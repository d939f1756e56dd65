"""model/classify.py: every request in exactly one class, by the module's rules in
order (flush, discard, log, metadata, readahead, read, data)."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model import classify as C
from iowhy.names import CLASS_NAMES

LOG0 = tb.LOG_RANGE[0]


def _classes(rows: list[dict], meta: dict, in_sync_call=None) -> list[str]:
    arr = tb.records(abi.REQUEST_DTYPE, rows)
    return [CLASS_NAMES[c] for c in C.classify(arr, meta, in_sync_call)]


def test_the_rules_in_their_order():
    R, W = abi.OP_READ, abi.OP_WRITE
    rows = [
        tb.req(1, 2, op=abi.OP_FLUSH),
        tb.req(1, 2, op=W, nbytes=0, iflags=abi.F_PREFLUSH),  # an empty preflush
        tb.req(1, 2, op=abi.OP_DISCARD, iflags=abi.F_META),
        tb.req(1, 2, op=W, sector=LOG0, iflags=abi.F_META | abi.F_PREFLUSH | abi.F_FUA),
        tb.req(1, 2, op=W, sector=tb.LOG_RANGE[1] - 1),
        tb.req(1, 2, op=R, sector=LOG0),  # a read of the journal is no log write
        tb.req(1, 2, op=R, iflags=abi.F_META | abi.F_RAHEAD),
        tb.req(1, 2, op=R, iflags=abi.F_RAHEAD),
        tb.req(1, 2, op=R),
        tb.req(1, 2, op=W, iflags=abi.F_PREFLUSH | abi.F_FUA),  # a data write with them
        tb.req(1, 2, op=W, sector=tb.LOG_RANGE[1]),  # just past the journal
        tb.req(1, 2, op=abi.OP_OTHER),
    ]
    assert _classes(rows, tb.meta()) == [
        "flush", "flush", "discard", "log", "log", "read", "metadata", "readahead", "read",
        "data", "data", "data"]


def test_a_log_range_counts_on_its_own_disk_only():
    rows = [tb.req(1, 2, sector=LOG0), tb.req(1, 2, sector=LOG0, dev=(8, 16))]
    assert _classes(rows, tb.meta()) == ["log", "data"]
    assert _classes(rows, {"filesystems": []}) == ["data", "data"]


def test_fast_commit_and_external_log_ranges():
    fs = tb.fs_entry("ext4")
    fs["log"]["fc_ranges"] = [[30_000, 30_100]]
    xfs = tb.fs_entry("xfs", (8, 16), (8, 17), "sdy", "/mnt/x")
    xfs["log"] = {"kind": "xlog", "ranges": [],
                  "device": {"disk_major": 8, "disk_minor": 32, "ranges": [[0, 500]]}}
    m = {"filesystems": [fs, xfs]}
    assert C.log_ranges(m) == {tb.DEV: [tb.LOG_RANGE, (30_000, 30_100)], (8, 32): [(0, 500)]}
    rows = [tb.req(1, 2, sector=30_050), tb.req(1, 2, sector=499, dev=(8, 32)),
            tb.req(1, 2, sector=500, dev=(8, 32)), tb.req(1, 2, sector=100, dev=(8, 16))]
    assert _classes(rows, m) == ["log", "log", "data", "data"]


def test_btrfs_log_writes_are_its_fsync_calls_meta_writes_and_its_superblocks():
    m = tb.meta("btrfs")
    assert C.log_in_calls_disks(m) == {tb.DEV: [2048 + s for s in (128, 131072, 536870912)]}
    rows = [tb.req(1, 2, iflags=abi.F_META), tb.req(1, 2, iflags=abi.F_META),
            tb.req(1, 2), tb.req(1, 2, sector=2048 + 128), tb.req(1, 2, sector=128)]
    in_call = np.array([True, False, True, False, False])
    assert _classes(rows, m, in_call) == ["log", "metadata", "data", "log", "data"]
    assert C.log_in_calls(np.array([abi.FS_EXT4, abi.FS_BTRFS]))
    assert not C.log_in_calls(np.array([abi.FS_EXT4, abi.FS_XFS]))
    assert not C.log_in_calls(np.zeros(0, np.uint16))


def test_no_request_no_class():
    assert _classes([], tb.meta()) == []


def test_block_by_block_is_the_same_as_at_once(tmp_path, monkeypatch):
    from rqload import loaded
    rng = np.random.default_rng(2)
    rows = [tb.req(1010, 1020, op=int(rng.choice([0, 1, 2, 3])), nbytes=int(rng.choice([0, 512])),
                   sector=int(rng.choice([LOG0, 5])), iflags=int(rng.integers(0, 32)))
            for _ in range(40)]
    rq, _ = loaded(tmp_path, rows)
    whole = C.classify(rq, tb.meta())
    monkeypatch.setattr(C, "CLASSIFY_BLOCK", 7)
    assert C.classify(rq, tb.meta()).tolist() == whole.tolist()
    assert whole.tolist() == C.classify(tb.records(abi.REQUEST_DTYPE, rows), tb.meta()).tolist()


def test_any_integer_sector_column_gives_the_same_classes():
    edges = (LOG0 - 1, LOG0, tb.LOG_RANGE[1] - 1, tb.LOG_RANGE[1])
    rows = [tb.req(1, 2, sector=s) for s in edges]
    arr = tb.records(abi.REQUEST_DTYPE, rows)
    cols = {f: arr[f] for f in arr.dtype.names}
    want = ["data", "log", "log", "data"]
    for dtype in (np.uint64, np.int64, np.int32):
        cols["start_sector"] = arr["start_sector"].astype(dtype)
        assert [CLASS_NAMES[c] for c in C.classify(cols, tb.meta())] == want, dtype
