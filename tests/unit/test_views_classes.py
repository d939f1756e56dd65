"""views/classes.py: requests and bytes by (device, class, op, tracked) and their
attributes, counted once each (request_counts), and the per-class figures built on them
(per_class)."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model.classify import classify
from iowhy.model.stages import device_stages
from iowhy.names import CLASS_NAMES
from iowhy.views.classes import request_counts, per_class
from rqload import loaded

OTHER = (8, 16)
W, TR = abi.OP_WRITE, abi.RQ_TRACKED


def _rows() -> list[dict]:
    R = tb.req
    return [
        R(1000, 1010, nbytes=4096, iflags=abi.F_FUA | abi.F_SYNC),            # 0 data
        R(1001, 1011, nbytes=8192, iflags=abi.F_PREFLUSH, flags=0),          # 1 data
        R(1002, 1012, op=abi.OP_READ, nbytes=4096),                          # 2 read
        R(1003, 1013, sector=tb.LOG_RANGE[0], nbytes=4096, flags=0),         # 3 log
        R(1004, 1014, op=abi.OP_FLUSH, flags=0),                             # 4 flush
        R(1005, 0, nbytes=1024, flags=TR | abi.RQ_INCOMPLETE),               # 5 data
        R(1006, 0, nbytes=2048, flags=TR | abi.RQ_LOST_DONE),                # 6 data
        R(0, 1020, nbytes=512, flags=abi.RQ_NO_ISSUE),                       # 7 data
        R(1008, 1018, nbytes=512, dev=OTHER),                                # 8 data
        R(1009, 1019, op=abi.OP_READ, nbytes=512),                           # 9 read, as 2
    ]


def test_per_class_counts_bytes_and_attributes(tmp_path):
    rq, win = loaded(tmp_path, _rows())
    cls = classify(rq, tb.meta())
    reqs, place, dev_op, dev_bytes = per_class(rq, device_stages(rq, win, cls=cls), cls)
    d = reqs["data"]
    assert (d["count"], d["bytes"], d["writes"], d["write_bytes"]) == \
        (6, 4096 + 8192 + 1024 + 2048 + 512 + 512, 6, 16384)
    assert (d["issued"], d["incomplete"], d["lost"], d["tracked"]) == (5, 1, 1, 4)
    assert (d["fua"], d["preflush"], d["sync"]) == (1, 1, 1)
    assert (reqs["read"]["count"], reqs["read"]["writes"], reqs["read"]["bytes"]) == (2, 0, 4608)
    assert (reqs["log"]["count"], reqs["log"]["tracked"]) == (1, 0)
    assert (reqs["flush"]["count"], reqs["flush"]["bytes"]) == (1, 0)
    assert sum(r["count"] for r in reqs.values()) == len(rq)
    # by (device, class, op)
    assert dev_op.shape == (2, len(CLASS_NAMES), 16)
    k = CLASS_NAMES.index("data")
    assert dev_op[0, k, W] == 5 and dev_op[1, k, W] == 1
    assert dev_bytes[1, k, W] == 512
    assert int(dev_op.sum()) == len(rq) and int(dev_bytes.sum()) == int(rq.nbytes.sum())
    assert set(place) == {"data", "read", "log"}  # the classes with a seek distance


def test_the_counts_are_the_same_block_by_block(tmp_path):
    rq, _ = loaded(tmp_path, _rows())
    cls = classify(rq, tb.meta())
    whole = request_counts(rq, cls)
    for block in (1, 2, 4):
        part = request_counts(rq, cls, block=block)
        assert (part.n == whole.n).all() and (part.nbytes == whole.nbytes).all()
        assert (part.attrs == whole.attrs).all()
    assert int(whole.n.sum()) == len(rq)
    # tracked in the last axis
    k = CLASS_NAMES.index("data")
    assert whole.n[0, k, W].tolist() == [2, 3]
    zero = whole.minus(whole)
    assert not zero.n.any() and not zero.nbytes.any() and not zero.attrs.any()


def test_no_request_counts_nothing(tmp_path):
    rq, win = loaded(tmp_path, [])
    cls = classify(rq, tb.meta())
    rc = request_counts(rq, cls)
    assert not rc.n.any() and rc.n.shape == (1, len(CLASS_NAMES), 16, 2)
    reqs, _, _, _ = per_class(rq, device_stages(rq, win, cls=cls), cls)
    assert all(r["count"] == 0 for r in reqs.values())
    assert np.array_equal(rc.dev_op, np.zeros((1, len(CLASS_NAMES), 16)))
