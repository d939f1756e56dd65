"""model/stages.py: each request's device stage in (device, start) order, seek
distances in issue order per device, and service times in completion order (the
definitions of model/requests.py)."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model.requests import Window
from iowhy.model.stages import device_stages, service_times
from rqload import loaded

OTHER = (8, 16)


def _rows() -> list[dict]:
    R = tb.req
    return [
        R(1010, 1020, sector=1000, nbytes=4000),               # 0: A, ends at sector 1008
        R(1015, 1030, sector=1008, op=abi.OP_READ),            # 1: B, right after A
        R(1030, 1035, op=abi.OP_FLUSH),                        # 2: no seek
        R(1040, 1060, sector=2000, nbytes=1000),               # 3: C, 2 sectors
        R(1045, 1055, sector=100),                             # 4: D, done before C
        R(1012, 1018, sector=50, dev=OTHER),                   # 5: the other device's first
        R(1070, 0, sector=3000, flags=abi.RQ_LOST_DONE),       # 6: an empty stage
    ]


def test_stages_seeks_and_service(tmp_path):
    rq, win = loaded(tmp_path, _rows())
    st = device_stages(rq, win)
    span = st.span
    base = np.array([0, 0, 0, 0, 0, span])
    assert st.idx.tolist() == [0, 1, 2, 3, 4, 5]
    assert (st.ks - base).tolist() == [10, 15, 30, 40, 45, 12]
    assert (st.ke - base).tolist() == [20, 30, 35, 60, 55, 18]
    # the empty stage keeps its place in the issue order only
    assert st.issue_order.tolist() == [0, 1, 2, 3, 4, 6, 5]
    assert st.seek_idx.tolist() == [1, 3, 4, 6]
    assert st.seek.tolist() == [0, 2000 - 1016, 100 - 2002, 3000 - 108]
    assert st.seek_bounds.tolist() == [0, 4, 4]
    # B, C, D, L; in completion order A, B, FF, D, C: D from its issue, C from D's end
    assert st.seek_service.tolist() == [10, 5, 10, 0]
    assert sorted(st.ends_sorted.tolist()) == st.ends_sorted.tolist()
    assert sorted(st.ends_sorted.tolist()) == sorted(st.ke.tolist())


def test_service_later_is_the_same(tmp_path):
    rq, win = loaded(tmp_path, _rows())
    st = device_stages(rq, win, service=False)
    assert st.seek_service is None
    from iowhy.model.stages import stage_service
    stage_service(st)
    assert st.seek_service.tolist() == device_stages(rq, win).seek_service.tolist()


def test_stages_are_clipped_to_the_window(tmp_path):
    rq, _ = loaded(tmp_path, [tb.req(990, 1010), tb.req(1020, 1080), tb.req(1060, 1070)],
                   start=900, end=1100)
    st = device_stages(rq, Window(1000, 1050))
    assert st.origin == 1000
    assert (st.ks + st.origin).tolist() == [1000, 1020]
    assert (st.ke + st.origin).tolist() == [1010, 1050]
    # the one issued after the window's end has an empty stage: in the issue order only
    assert st.issue_order.tolist() == [0, 1, 2]
    assert st.issue_in_window is False


def test_no_request_no_stage(tmp_path):
    rq, win = loaded(tmp_path, [])
    st = device_stages(rq, win)
    assert len(st.idx) == len(st.seek_idx) == len(st.issue_order) == 0


def test_in_order_service_tiles_the_busy_time():
    rng = np.random.default_rng(4)
    ks = np.sort(rng.integers(0, 1000, 50))
    ke = np.maximum.accumulate(ks + rng.integers(1, 40, 50))  # completions in order
    svc, ends = service_times(ks, ke)
    busy = np.zeros(1100, bool)
    for a, b in zip(ks, ke):
        busy[a:b] = True
    assert (svc >= 0).all() and int(svc.sum()) == int(busy.sum())
    assert ends.tolist() == ke.tolist()


def test_out_of_order_service_runs_from_the_previous_completion():
    ks = np.array([0, 10, 20])
    ke = np.array([50, 30, 30])  # two equal ends: in stage order
    svc, ends = service_times(ks, ke)
    assert svc.tolist() == [20, 20, 0]
    assert ends.tolist() == [30, 30, 50]
