"""views/queue.py queue_depth: per device, the area under the number of device stages
in flight (the sum of their lengths), its exact maximum and its mean per time bucket."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy.kernels import I64
from iowhy.model.stages import Stages, device_stages
from iowhy.views.queue import queue_depth
from rqload import loaded


def _stages(ks: np.ndarray, ke: np.ndarray, span: int) -> Stages:
    o = np.argsort(ks, kind="stable")
    return Stages(span=span, origin=0, idx=o, ks=ks[o].astype(I64), ke=ke[o].astype(I64),
                  seek_idx=np.zeros(0, I64), seek=np.zeros(0, I64))


def _brute(ks: np.ndarray, ke: np.ndarray, length: int) -> np.ndarray:
    depth = np.zeros(length, I64)
    for a, b in zip(ks, ke):
        depth[a:b] += 1
    return depth


def test_depth_of_a_few_requests(tmp_path):
    rq, win = loaded(tmp_path, [tb.req(1000, 1040), tb.req(1010, 1020), tb.req(1015, 1030),
                                tb.req(1060, 1080, dev=(8, 16))])
    st = device_stages(rq, win)
    q = queue_depth(st, len(rq.devices), win.elapsed_ns, 4)
    assert q["area"].tolist() == [40 + 10 + 15, 20]
    assert q["max"].tolist() == [3, 1]
    assert q["step_ns"] == 25
    # buckets [0, 25), [25, 50), [50, 75), [75, 100): the time-mean depth in each
    assert q["series"].tolist() == [[(25 + 10 + 10) / 25, (15 + 5) / 25, 0, 0],
                                    [0, 0, 15 / 25, 5 / 25]]


def test_back_to_back_stages_are_depth_one():
    ks, ke = np.array([0, 10, 20]), np.array([10, 20, 30])
    q = queue_depth(_stages(ks, ke, 1000), 1, 30, 3)
    assert q["max"].tolist() == [1] and q["area"].tolist() == [30]
    assert q["series"].tolist() == [[1.0, 1.0, 1.0]]


def test_random_stages_against_the_depth_counted_by_time():
    rng = np.random.default_rng(5)
    elapsed = 600
    for n in (1, 7, 90):
        ks = rng.integers(0, elapsed - 1, n)
        ke = np.minimum(ks + rng.integers(1, 80, n), elapsed)
        depth = _brute(ks, ke, elapsed)
        q = queue_depth(_stages(ks, ke, 1 << 20), 1, elapsed, 7)
        assert q["area"][0] == depth.sum() == (ke - ks).sum()
        assert q["max"][0] == depth.max()
        w = q["step_ns"]
        assert w == 86
        want = [depth[a:a + w].mean() for a in range(0, elapsed, w)]
        assert np.allclose(q["series"][0], want)


def test_no_stage_or_no_time_is_all_zero():
    empty = _stages(np.zeros(0, I64), np.zeros(0, I64), 100)
    q = queue_depth(empty, 2, 50, 5)
    assert q["area"].tolist() == [0, 0] and q["max"].tolist() == [0, 0]
    assert q["series"].shape == (2, 5) and not q["series"].any()
    q = queue_depth(_stages(np.array([0]), np.array([5]), 100), 1, 0, 5)
    assert q["area"].tolist() == [0]
