"""whatif/requests.py: the recorded requests as the predictor takes them: what each asks
of the disk, when it arrived, whether it was observed, which FF flush served its pre-
or post-flush, and each device's service times in completion order."""

from __future__ import annotations

import numpy as np
import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.model.classify import CLASS_CODES
from iowhy.traceformat import read_trace
from iowhy.whatif import disk
from iowhy.whatif import requests as WR

SEQ = abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ
R = tb.req


def _table(tmp_path, rows, keep=None) -> WR.RequestTable:
    tr = read_trace(tb.write_trace(tmp_path / "w.iowt", requests=rows))
    seq = np.array([r["seq"] for r in rows] if keep is None else keep, np.int64)
    return WR.load(tr, seq, np.full(len(seq), CLASS_CODES["data"]), np.zeros(len(seq)),
                   ["sdz"], tr.meta, 1000, 1100)


def test_what_each_asks_and_when_it_arrived(tmp_path):
    t = _table(tmp_path, [
        R(1010, 1020, seq=1, submit=1005, sector=8),
        R(1030, 1040, seq=2, submit=0, insert=1025, op=abi.OP_READ),
        R(1050, 1060, seq=3, op=abi.OP_FLUSH, submit=0),
        R(1062, 1064, seq=4, op=abi.OP_DISCARD, submit=990),      # before the window
        R(1070, 1075, seq=5, nbytes=0, iflags=abi.F_PREFLUSH),    # an empty PREFLUSH
        R(0, 1080, seq=6, flags=abi.RQ_UNMATCHED, submit=1077),   # first seen completed
        R(1085, 0, seq=7, flags=abi.RQ_INCOMPLETE | abi.RQ_TRACKED)])
    assert t.kind.tolist() == [disk.WRITE, disk.READ, disk.FLUSH, disk.DISCARD, 0,
                               disk.WRITE, disk.WRITE]
    assert t.arrive.tolist() == [1005, 1025, 1050, 1000, 1070, 1000, 1085]
    assert t.observed.tolist() == [True, True, True, True, True, False, False]
    assert t.offset[0] == 8 * disk.SECTOR and t.is_ff.tolist()[2]
    assert len(t) == 7 and t.devices[0]["name"] == "sdz"
    assert t.devices[0]["write_cache"] == "write back" and t.devices[0]["fua"] is False


def test_only_the_kept_requests_by_seq(tmp_path):
    rows = [R(1010, 1020, seq=5), R(1030, 1040, seq=9), R(1050, 1060, seq=7)]
    t = _table(tmp_path, rows, keep=[7, 5])
    assert t.seq.tolist() == [7, 5] and t.issue.tolist() == [1050, 1010]
    assert t.find(np.array([5, 6, 7])).tolist() == [1, -1, 0]
    with pytest.raises(ValueError, match="does not hold"):
        _table(tmp_path, rows, keep=[5, 8])


def test_ffs_are_paired_with_the_flushes_they_served(tmp_path):
    t = _table(tmp_path, [
        R(1000, 1008, seq=1, op=abi.OP_FLUSH, flags=0),   # before 2 arrived: not its
        R(1012, 1018, seq=2, op=abi.OP_FLUSH, flags=0),   # 3's pre-flush
        R(1020, 1060, seq=3, submit=1010, data_done=1030,
          iflags=abi.F_PREFLUSH | abi.F_FUA, flags=SEQ),
        R(1035, 1055, seq=4, op=abi.OP_FLUSH, flags=0),   # 3's post-flush
        R(1070, 1080, seq=5, nbytes=0, iflags=abi.F_PREFLUSH, submit=1065, flags=0),
        R(1066, 1078, seq=6, op=abi.OP_FLUSH, flags=0),   # 5's, done before its completion
        # no FF after it arrived and before its data, none issued after its data stage
        R(1090, 1095, seq=7, submit=1088, data_done=1092, iflags=abi.F_PREFLUSH | abi.F_FUA,
          flags=SEQ),
    ])
    assert t.ff_served == {1: [(2, WR.PRE)], 3: [(2, WR.POST)], 5: [(4, WR.PRE)]}
    assert t.needs(2, fua_device=False) == WR.PRE | WR.POST
    assert t.needs(2, fua_device=True) == WR.PRE
    assert t.needs(0, fua_device=False) == 0


def test_service_times_in_completion_order(tmp_path):
    t = _table(tmp_path, [
        R(1010, 1030, seq=1),                    # 20
        R(1015, 1025, seq=2, op=abi.OP_READ),    # done first: 10 from its issue
        R(1040, 1050, seq=3, op=abi.OP_FLUSH),   # its done is its end
        R(1060, 1090, seq=4, data_done=1070, flags=SEQ),  # its data stage
        R(1075, 1075, seq=5, flags=abi.RQ_LOST_DONE | abi.RQ_TRACKED),
        R(1080, 1085, seq=6, nbytes=0, iflags=abi.F_PREFLUSH)])  # never issued
    idx, kind, svc = WR.service_times(t, 0)
    assert idx.tolist() == [1, 0, 2, 3, 4]
    assert kind.tolist() == [disk.READ, disk.WRITE, disk.FLUSH, disk.WRITE, disk.WRITE]
    assert svc.tolist() == [10, 5, 10, 10, -1]


def test_categories_follow_the_classes():
    from iowhy.model.wakeups import BARRIER
    assert WR.category_of(CLASS_CODES["flush"]) == BARRIER
    assert WR.category_of(CLASS_CODES["readahead"]) == WR.category_of(CLASS_CODES["read"])
    assert WR.FLUSH_CLASS == CLASS_CODES["flush"]
