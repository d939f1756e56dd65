"""model/calls.py: requests joined to the fsync-family call of their thread they were
submitted in (enter <= t <= exit), the calls' devices, sync(2) coverage and keys."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model import calls
from iowhy.model.devices import dev_key

A = np.array


def _join(req_tid, req_t, call_tid, enter, exit_, sel=None) -> list[int]:
    return calls.join_calls(A(req_tid, np.uint32), A(req_t, np.int64), A(call_tid, np.int64),
                            A(enter, np.int64), A(exit_, np.int64),
                            None if sel is None else A(sel, bool)).tolist()


def test_a_request_joins_the_call_of_its_thread_that_holds_it():
    # calls: tid 1 [100, 200], tid 1 [300, 400], tid 2 [100, 400]
    c = ([1, 1, 2], [100, 300, 100], [200, 400, 400])
    got = _join([1, 1, 1, 1, 1, 2, 3, 2], [100, 200, 201, 350, 401, 250, 150, 0], *c)
    # both ends inclusive; between calls, after them, another thread's, no time: -1
    assert got == [0, 0, -1, 1, -1, 2, -1, -1]


def test_the_join_is_the_same_in_any_order_and_with_a_selection():
    rng = np.random.default_rng(1)
    tid = rng.integers(1, 5, 300)
    t = rng.integers(1, 1000, 300)
    # per thread, calls that do not overlap: [k*100, k*100+50] for k of its own parity
    ct = A([1 + (k % 4) for k in range(10)])
    ce = A([k * 100 for k in range(10)])
    cx = ce + 50
    got = _join(tid, t, ct, ce, cx)
    want = [next((k for k in range(10) if ct[k] == a and ce[k] <= b <= cx[k]), -1)
            for a, b in zip(tid, t)]
    assert got == want
    sel = rng.random(300) < 0.5
    assert _join(tid, t, ct, ce, cx, sel) == [w if s else -1 for w, s in zip(want, sel)]
    ri, rc = calls.join_pairs(tid.astype(np.uint32), t, ct, ce, cx)
    assert ri.tolist() == [i for i, w in enumerate(want) if w >= 0]
    assert rc.tolist() == [w for w in want if w >= 0]


def test_no_call_or_no_request_joins_nothing():
    assert _join([1, 2], [10, 20], [], [], []) == [-1, -1]
    assert _join([], [], [1], [10], [20]) == []


def test_a_call_running_at_the_stop_ends_at_the_window_end():
    fs = {"exit_ns": A([150, 0, 180]),
          "flags_u16": A([0, 0, abi.FS_F_INCOMPLETE], np.uint16)}
    assert calls.call_exit(fs, 999).tolist() == [150, 999, 999]


def _fs(rows: list[dict]) -> dict[str, np.ndarray]:
    arr = tb.records(tb.DTYPES["fsync"], rows)
    return {f: arr[f] for f in arr.dtype.names}


def test_covered_devices_a_sync_covers_every_filesystem():
    m = tb.meta()
    m["filesystems"].append(tb.fs_entry("xfs", (8, 16), (8, 17), "sdy", "/mnt/u"))
    one = _fs([tb.fsync(1, 10, 20)])
    assert calls.call_devices(one) == {tb.PART}
    assert calls.covered_devices(one, m) == {tb.PART}
    both = _fs([tb.fsync(1, 10, 20), tb.fsync(1, 30, 40, call=abi.CALL_SYNC, dev=(0, 0))])
    assert calls.covered_devices(both, m) == {tb.PART, (8, 17)}


def test_sync_coverage_names_each_call_and_the_disks_it_covers():
    m = tb.meta()
    fs = _fs([tb.fsync(1, 10, 20), tb.fsync(1, 30, 40, call=abi.CALL_SYNC, dev=(0, 0)),
              tb.fsync(1, 50, 60, call=abi.CALL_SYNCFS),
              tb.fsync(1, 70, 80, call=abi.CALL_SYNCFS, dev=(0, 0))])
    cov = calls.sync_coverage(fs, m)
    assert cov["calls"].tolist() == [1, 2, 3]
    # a sync and a syncfs of no named filesystem: every one (-1)
    assert cov["dev"].tolist() == [-1, dev_key(*tb.PART), -1]
    assert cov["disks"] == {-1: {tb.DEV}, dev_key(*tb.PART): {tb.DEV}}


def test_dev_codes_share_one_code_per_device_across_arrays():
    a = (A([8, 8, 9]), A([0, 0, 1]))
    b = (A([9, 7]), A([1, 3]))
    ca, cb = calls.dev_codes(a, b)
    assert ca.tolist() == [1, 1, 2] and cb.tolist() == [2, 0]
    (one,) = calls.dev_codes((A([8, 8]), A([0, 0])))
    assert one.tolist() == [0, 0]


def test_seq_key_orders_by_device_then_sequence():
    k = calls.seq_key(A([0, 0, 1, 1]), A([5, (1 << 52) - 1, 0, 7], np.uint64))
    assert (np.diff(k) > 0).all()
    assert k[2] == 1 << 52 and k[3] == (1 << 52) + 7
