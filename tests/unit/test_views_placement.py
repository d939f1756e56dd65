"""views/placement.py: seek slots and bins, the device fit of the zero-seek requests,
the positioning estimate of a class over its baseline, and the seek values by class."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy.kernels import I64
from iowhy.model.classify import classify
from iowhy.model.stages import device_stages
from iowhy.names import CLASS_NAMES
from iowhy.views import placement as P
from iowhy.views.classes import per_class
from rqload import loaded


def test_seek_slots_are_log2_buckets():
    v = np.array([0, 1, 2, 3, 4, 7, 8, (1 << 40) - 1, 1 << 40])
    assert P.seek_slots(v).tolist() == [0, 1, 2, 2, 3, 3, 4, 40, 41]


def test_seek_bins_refine_the_slots_in_value_order():
    v = np.concatenate((np.arange(0, 300), np.array([1 << 33, (1 << 33) + (1 << 31), 1 << 62])))
    b = P.seek_bins(v)
    assert (np.diff(b) >= 0).all()
    assert ((b >> P.SEEK_SUB) == P.seek_slots(v)).all()
    assert b[0] == 0 and int(b.max()) < P.SEEK_BINS
    # 16 bins per slot: 256..511 spread over all of them
    assert len(np.unique(b[256:300])) > 1


def test_device_fit_recovers_a_line():
    nbytes = np.array([4096, 8192, 16384, 65536, 4096, 8192], np.uint32)
    service = (100 + nbytes // 64).astype(I64)
    bucket = np.log2(nbytes).astype(I64)  # device 0
    fit = P.device_fits(service, nbytes, bucket, 2)
    assert fit.zero.tolist() == [True, False]
    assert np.isclose(fit.a[0], 100) and np.isclose(fit.b[0], 1 / 64)
    assert fit.spread.tolist() == [0, 0]
    assert fit.baseline(np.array([0, 0]), np.array([0, 6400])).tolist() == [100, 200]
    none = P.device_fits(None, nbytes, bucket, 1)
    assert not none.zero.any() and none.a.tolist() == [0.0]


def _seq_rows() -> list[dict]:
    R = tb.req
    # 4 KiB writes (8 sectors) one after the other, each 10 ns alone on the device,
    # then one 5000 sectors away that takes 50 ns
    return [R(1000, 1010, sector=0), R(1010, 1020, sector=8), R(1020, 1030, sector=16),
            R(1030, 1040, sector=24), R(1040, 1090, sector=5000)]


def test_positioning_is_the_excess_over_the_zero_seek_baseline(tmp_path):
    rq, win = loaded(tmp_path, _seq_rows())
    cls = classify(rq, tb.meta())
    reqs, place, _, _ = per_class(rq, device_stages(rq, win, cls=cls), cls)
    d = place["data"]
    assert d["requests_with_seek"] == 4
    assert d["sequential_share"] == 0.75
    assert d["seek_sectors"] == {"p50": 0, "p90": 4968, "max": 4968}
    assert d["seek_hist_log2"] == [3] + [0] * 12 + [1]  # 4968 is in slot 13
    assert d["positioning_ns"] == 40 and d["positioned_requests"] == 1
    assert d["positioning_basis"] == 4
    assert d["baseline"] == "zero-seek bucket"
    assert d["baseline_requests"] == {"zero-seek bucket": 1, "device fit": 0,
                                      "fastest decile": 0}
    assert reqs["data"]["seek_sectors"] == {"p50": 0, "max": 4968}
    # without placement: only the seek percentiles
    reqs2, place2, _, _ = per_class(rq, device_stages(rq, win, cls=cls), cls,
                                    with_placement=False)
    assert place2 == {} and reqs2["data"]["seek_sectors"] == {"p50": 0, "max": 4968}
    # a remapped device (a loop device over a file) has no positioning estimate
    _, place3, _, _ = per_class(rq, device_stages(rq, win, cls=cls), cls,
                                remapped=np.array([True]))
    assert place3["data"]["positioning_ns"] == 0
    assert place3["data"]["seek_sectors"] == d["seek_sectors"]


def test_remapped_devices_are_the_loop_devices_of_the_stack():
    m = tb.loop_stack_meta()
    assert P.remapped_devices([tb.DEV, tb.UPPER], m).tolist() == [False, True]
    assert P.remapped_devices([tb.DEV], m) is None
    assert P.remapped_devices([tb.DEV, tb.UPPER], tb.loop_stack_meta(stack=False)) is None


def test_seek_values_by_class_and_split(tmp_path):
    rows = _seq_rows()
    rows[1]["op"] = 0  # a read, 0 sectors from the first
    rq, win = loaded(tmp_path, rows)
    cls = classify(rq, tb.meta())
    st = device_stages(rq, win)
    by = P.seek_values_by_class(st, cls)
    assert set(by) == set(CLASS_NAMES)
    assert by["data"].tolist() == [0, 0, 4968] and by["read"].tolist() == [0]
    assert sum(len(v) for v in by.values()) == len(st.seek)
    group = np.array([0, 0, 1, 1, 0])
    split = P.seek_split(st, cls, group, ["a", "b"], CLASS_NAMES.index("data"))
    assert sorted(split["a"].tolist()) == [4968] and sorted(split["b"].tolist()) == [0, 0]


def _data_placement(tmp_path, rows: list[dict]) -> dict:
    rq, win = loaded(tmp_path, rows)
    cls = classify(rq, tb.meta())
    return per_class(rq, device_stages(rq, win, cls=cls), cls)[1]["data"]


def test_each_baseline_where_it_applies(tmp_path):
    R = tb.req
    # one zero-seek request of the size: its bucket's own baseline
    d = _data_placement(tmp_path, [R(1000, 1010, sector=0), R(1010, 1020, sector=8),
                                   R(1020, 1070, sector=5000)])
    assert d["baseline"] == "zero-seek bucket" and d["positioning_ns"] == 40
    # no zero-seek request of that size, some of another on the device: the device fit
    d = _data_placement(tmp_path, [R(1000, 1010, sector=0), R(1010, 1020, sector=8),
                                   R(1020, 1070, sector=5000, nbytes=8192)])
    assert d["baseline_requests"] == {"zero-seek bucket": 0, "device fit": 1,
                                      "fastest decile": 0}
    # none on the device: the bucket's fastest tenth; only the slowest tenth can count
    rows = [R(1000 + 5 * i, 1005 + 5 * i, sector=100 * i) for i in range(12)]
    rows.append(R(1060, 1099, sector=5000))
    d = _data_placement(tmp_path, rows)
    assert d["baseline"] == "fastest decile" and d["sequential_share"] == 0
    assert d["positioned_requests"] == 1 and d["positioning_ns"] == 39 - 5
