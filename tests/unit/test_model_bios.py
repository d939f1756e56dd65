"""model/bios.py: each bio record of a bio-based device appended as one request
(RQ_BIO) with an empty device stage at its end; the submitter is known (RQ_ORIGIN, and
RQ_TRACKED for the workload's) only on devices that end a bio in its context."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model.bios import append_bios
from iowhy.model.requests import RQ_BIO
from rqload import loaded

ZRAM, DM = (252, 0), (253, 0)
META = {"devices": [tb.disk("zram0", ZRAM, kind="zram"), tb.disk("dm-0", DM, kind="dm")]}


def _bios(rows: list[dict]) -> dict[str, np.ndarray]:
    arr = tb.records(tb.DTYPES["bio"], rows)
    return {f: arr[f] for f in arr.dtype.names}


def test_no_bio_leaves_the_requests_as_they_are(tmp_path):
    rq, _ = loaded(tmp_path, [tb.req(1010, 1020)])
    assert append_bios(rq, _bios([]), META, np.array([100])) is rq


def test_a_bio_is_one_request_with_an_empty_stage_at_its_end(tmp_path):
    rq, _ = loaded(tmp_path, [tb.req(1010, 1020, tid=100)])
    out = append_bios(rq, _bios([tb.bio(1050, dev=ZRAM, sector=8, nbytes=512, tid=100),
                                 tb.bio(1060, dev=ZRAM, tid=777, op=abi.OP_READ),
                                 tb.bio(1070, dev=DM, tid=100)]),
                      META, np.array([100]))
    assert len(out) == 4
    # the devices merged in (major, minor) order; the first request renumbered onto them
    assert out.devices == [tb.DEV, ZRAM, DM]
    assert [out.devices[d] for d in out.dev] == [tb.DEV, ZRAM, ZRAM, DM]
    # the recorded request is unchanged
    assert out.issue[0] == 1010 and out.done[0] == 1020 and out.flags[0] == abi.RQ_TRACKED
    b = slice(1, 4)
    assert out.issue[b].tolist() == out.data_done[b].tolist() == out.done[b].tolist() \
        == [1050, 1060, 1070]
    assert out.submit[b].tolist() == out.insert[b].tolist() == [0, 0, 0]
    assert out.sector[1] == 8 and out.nbytes[1] == 512 and out.op[2] == abi.OP_READ
    assert out.tid[b].tolist() == [100, 777, 100]
    flags = out.flags[b].astype(int).tolist()
    # zram ends a bio in the submitter's context: its origin is known, and the
    # workload's (tgid 100) is tracked; a dm bio's context says nothing
    assert flags == [RQ_BIO | abi.RQ_ORIGIN | abi.RQ_TRACKED, RQ_BIO | abi.RQ_ORIGIN, RQ_BIO]


def test_bio_request_numbers_are_distinct_and_above_the_recorded_ones(tmp_path):
    rq, _ = loaded(tmp_path, [tb.req(1010, 1020, seq=1), tb.req(1030, 1040, seq=2)])
    rq.extra["seq"] = np.array([1, 2], np.uint64)
    out = append_bios(rq, _bios([tb.bio(1050, dev=DM), tb.bio(1051, dev=DM),
                                 tb.bio(1052, dev=DM)]), META, np.array([100]))
    seq = out.extra["seq"]
    assert seq[:2].tolist() == [1, 2]
    assert len(set(seq.tolist())) == 5 and int(seq[2:].min()) > 2
    assert seq.dtype == np.uint64
