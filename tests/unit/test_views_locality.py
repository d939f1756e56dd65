"""views/locality.py: write pairs adjacent on disk (one ends where the next starts,
on the same device) and how many of them were issued more than gap_ns apart; the same
with and without the device stages."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model.classify import classify
from iowhy.model.stages import device_stages
from iowhy.views.locality import locality
from rqload import loaded


def _both(tmp_path, rows: list[dict], gap: int = 20) -> dict:
    rq, win = loaded(tmp_path, rows)
    cls = classify(rq, tb.meta())
    plain = locality(rq, cls, gap)
    assert locality(rq, cls, gap, device_stages(rq, win)) == plain
    assert locality(rq, cls, gap, device_stages(rq, win, cls=cls)) == plain
    return plain


def test_adjacent_writes_issued_far_apart_are_late(tmp_path):
    R = tb.req
    r = _both(tmp_path, [
        R(1000, 1002, sector=100, nbytes=4096),  # 100..108
        R(1010, 1012, sector=108, nbytes=1000),  # adjacent, 10 ns later: not late
        R(1050, 1052, sector=110),               # after 108 + 2 sectors: late (40 ns)
        R(1060, 1062, sector=119),               # a hole of one sector: not adjacent
        R(1070, 1072, sector=118, op=abi.OP_READ),  # a read: not a locality write
        R(1080, 1082, sector=127, dev=(8, 16)),  # another device
        R(1081, 1083, op=abi.OP_FLUSH),
    ])
    assert r == {"gap_ns": 20, "adjacent_pairs": 2, "late_pairs": 1, "late_share": 0.5,
                 "writes": 5}


def test_equal_starts_are_taken_in_issue_order(tmp_path):
    R = tb.req
    # two writes of sector 200 (issued at 1000 and 1090), then one at 208 (1005): the
    # pair is the later 200 and 208, 85 ns apart
    r = _both(tmp_path, [R(1090, 1092, sector=200), R(1000, 1002, sector=200),
                         R(1005, 1007, sector=208)])
    assert (r["adjacent_pairs"], r["late_pairs"]) == (1, 1)
    r = _both(tmp_path, [R(1090, 1092, sector=200), R(1000, 1002, sector=200),
                         R(1095, 1097, sector=208)])
    assert (r["adjacent_pairs"], r["late_pairs"]) == (1, 0)


def test_fewer_than_two_writes_no_pair(tmp_path):
    for rows in ([], [tb.req(1000, 1002)]):
        r = _both(tmp_path, rows)
        assert r == {"gap_ns": 20, "adjacent_pairs": 0, "late_pairs": 0,
                     "late_share": None, "writes": len(rows)}


def test_random_writes_the_two_ways_agree(tmp_path):
    rng = np.random.default_rng(6)
    rows = [tb.req(int(t), int(t) + 3, sector=int(s), nbytes=4096, dev=((8, 0), (8, 16))[d])
            for t, s, d in zip(rng.integers(1000, 1090, 60), rng.integers(0, 12, 60) * 8,
                               rng.integers(0, 2, 60))]
    r = _both(tmp_path, rows, gap=30)
    # the definition: on-disk order (device, start, issue), next start == this end
    w = sorted((row["dev_major"], row["dev_minor"], row["start_sector"], row["issue_ns"])
               for row in rows)
    adj = [(a, b) for a, b in zip(w, w[1:]) if a[:2] == b[:2] and a[2] + 8 == b[2]]
    late = [p for p in adj if abs(p[0][3] - p[1][3]) > 30]
    assert r["writes"] == 60 and 0 < len(late) < len(adj)
    assert (r["adjacent_pairs"], r["late_pairs"]) == (len(adj), len(late))


def test_a_write_never_issued_is_not_a_locality_write(tmp_path):
    R = tb.req
    r = _both(tmp_path, [R(1000, 1002, sector=100), R(0, 1050, sector=108, flags=abi.RQ_NO_ISSUE),
                         R(0, 1060, sector=116, flags=abi.RQ_UNMATCHED)])
    assert r["writes"] == 1 and r["adjacent_pairs"] == 0
