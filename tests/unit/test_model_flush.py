"""model/flush.py flush_generations: the FF flushes each flush-sequenced request
waited on (those in flight on its device outside its data stage), the time one was in
flight (flush_wait) and each FF's device time shared equally among its waiters."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model.flush import flush_generations
from rqload import loaded

SEQ = abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ
OTHER = (8, 16)


def _ff(issue: int, done: int, **kw) -> dict:
    return tb.req(issue, done, op=abi.OP_FLUSH, flags=0, **kw)


def _waiter(submit: int, issue: int, data_done: int, done: int, **kw) -> dict:
    kw.setdefault("flags", SEQ)
    return tb.req(issue, done, submit=submit, data_done=data_done, **kw)


def _pairs(fl) -> list[tuple[int, int, int]]:
    """(waiter, FF request, share) per pair."""
    return [(int(w), int(fl.ff_idx[p]), int(s))
            for w, p, s in zip(fl.pair_waiter, fl.pair_ff, fl.pair_share_ns)]


def test_an_ff_is_shared_equally_remainder_to_the_earliest_waiters(tmp_path):
    rq, win = loaded(tmp_path, [
        _ff(1010, 1021),                   # 0: 11 ns, before both data stages
        _waiter(1005, 1022, 1030, 1050),   # 1: waits [1005, 1022) and [1030, 1050)
        _waiter(1008, 1025, 1028, 1045),   # 2: waits [1008, 1025) and [1028, 1045)
        _ff(1035, 1042),                   # 3: 7 ns, after both data stages
        tb.req(1036, 1037, flags=SEQ | abi.RQ_LOST_DONE),  # 4: no waiting window seen
        _waiter(1001, 1002, 1003, 1090, dev=OTHER),        # 5: on another device
        tb.req(1012, 1018),                # 6: not flush-sequenced
    ])
    fl = flush_generations(rq, win)
    assert fl.ff_idx.tolist() == [0, 3] and fl.ff_ns.tolist() == [11, 7]
    assert fl.waiter_idx.tolist() == [1, 2, 5]
    assert fl.ff_waiters.tolist() == [2, 2]
    assert _pairs(fl) == [(1, 0, 6), (2, 0, 5), (1, 3, 4), (2, 3, 3)]
    assert fl.waiter_flush_ns.tolist() == [18, 18, 0]
    # the shares of each FF add up to its device time
    assert np.bincount(fl.pair_ff, fl.pair_share_ns).tolist() == [11, 7]


def test_an_ff_across_a_data_stage_is_waited_on_once(tmp_path):
    rq, win = loaded(tmp_path, [_waiter(1060, 1065, 1070, 1080), _ff(1062, 1075)])
    fl = flush_generations(rq, win)
    assert _pairs(fl) == [(0, 1, 13)]
    # in flight for 3 ns of [1060, 1065) and 5 of [1070, 1080)
    assert fl.waiter_flush_ns.tolist() == [8]
    starts, ends = fl.wait_windows
    assert starts.tolist() == [1060, 1070] and ends.tolist() == [1065, 1080]


def test_overlapping_ffs_are_one_wait_and_window_edges_clip(tmp_path):
    rq, win = loaded(tmp_path, [_waiter(1010, 1050, 1060, 1070),
                                _ff(990, 1020), _ff(1015, 1030), _ff(1040, 1055)],
                     start=1000, end=1100)
    fl = flush_generations(rq, win)
    # the first FF counts from the window start; the union of the three inside [1010,
    # 1050): [1010, 1030) and [1040, 1050)
    assert fl.ff_ns.tolist() == [20, 15, 15]
    assert fl.waiter_flush_ns.tolist() == [30]
    assert _pairs(fl) == [(0, 1, 20), (0, 2, 15), (0, 3, 15)]


def test_no_ff_or_no_waiter_no_pair(tmp_path):
    rq, win = loaded(tmp_path, [_waiter(1010, 1020, 1030, 1040)])
    fl = flush_generations(rq, win)
    assert fl.waiter_idx.tolist() == [0] and fl.waiter_flush_ns.tolist() == [0]
    assert len(fl.pair_waiter) == 0 and len(fl.ff_idx) == 0
    rq, win = loaded(tmp_path, [_ff(1010, 1020)])
    fl = flush_generations(rq, win)
    assert fl.ff_waiters.tolist() == [0] and len(fl.pair_share_ns) == 0
