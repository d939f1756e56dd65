"""iowhy.importers.common: matching block events into requests (blkparse/btt's rules),
the request records, and writing the imported trace. Nothing that does not fit is
dropped silently: it is counted in ImportStats.unmatched."""

from __future__ import annotations

import os
import stat
import uuid

import pytest

from iowhy import abi
from iowhy.importers import common as c
from iowhy.traceformat import read_trace

DEV = (8, 0)


@pytest.mark.parametrize("rwbs,op,iflags", [
    ("R", abi.OP_READ, 0), ("W", abi.OP_WRITE, 0), ("WS", abi.OP_WRITE, abi.F_SYNC),
    ("FWS", abi.OP_WRITE, abi.F_PREFLUSH | abi.F_SYNC),
    ("WFS", abi.OP_WRITE, abi.F_FUA | abi.F_SYNC), ("RA", abi.OP_READ, abi.F_RAHEAD),
    ("WM", abi.OP_WRITE, abi.F_META), ("FF", abi.OP_FLUSH, abi.F_PREFLUSH),
    ("F", abi.OP_FLUSH, 0), ("D", abi.OP_DISCARD, 0), ("DE", abi.OP_DISCARD, 0),
    ("N", abi.OP_OTHER, 0), ("", abi.OP_OTHER, 0), ("?", abi.OP_OTHER, 0),
])
def test_parse_rwbs(rwbs, op, iflags):
    assert c.parse_rwbs(rwbs) == (op, iflags)


def matcher(start_at_queue: bool = False) -> tuple[c.RequestMatcher, c.ImportStats]:
    st = c.ImportStats()
    return c.RequestMatcher(st, start_at_queue), st


W = abi.OP_WRITE


def test_queue_getrq_insert_issue_complete_is_one_request():
    for at_queue in (False, True):
        m, st = matcher(at_queue)
        m.queue(10, DEV, 1000, 4096, W, abi.F_SYNC, 7, "app")
        m.getrq(11, DEV, 1000, 4096, W, 0, 99, "kworker")
        m.insert(12, DEV, 1000, 4096, W, 0, 99, "kworker")
        m.issue(13, DEV, 1000, 4096, W, 0, 3)
        m.complete(20, DEV, 1000, 4096, W, 0, 3)
        [r] = m.finish()
        assert (r.submit, r.insert, r.issue, r.done) == (10 if at_queue else 11, 12, 13, 20)
        assert (r.tid, r.comm, r.origin, r.iflags) == (7, "app", True, abi.F_SYNC)
        assert r.queued == 10 and r.done_bytes == 4096 and not st.unmatched


def test_requests_on_one_key_are_served_in_order():
    m, st = matcher()
    for t in (1, 2):
        m.getrq(t, DEV, 1000, 4096, W, 0, t, "")
    m.issue(5, DEV, 1000, 4096, W, 0, 0)
    m.issue(6, DEV, 1000, 4096, W, 0, 0)
    m.complete(9, DEV, 1000, 4096, W, 0, 0)
    m.complete(8, DEV, 1000, 4096, W, 0, 0)
    a, b = m.finish()
    assert (a.submit, a.issue, a.done) == (1, 5, 9) and (b.submit, b.issue, b.done) == (2, 6, 8)
    assert st.unmatched == {"request without its queued bio (submitter unknown)": 2}


def test_merges_grow_the_request():
    m, st = matcher()
    m.queue(1, DEV, 1000, 4096, W, 0, 7, "app")
    m.getrq(2, DEV, 1000, 4096, W, 0, 7, "app")
    m.queue(3, DEV, 1008, 4096, W, 0, 7, "app")
    m.merge(3, DEV, 1008, 4096, W, front=False)
    m.queue(4, DEV, 992, 4096, W, 0, 7, "app")
    m.merge(4, DEV, 992, 4096, W, front=True)
    m.issue(5, DEV, 992, 12288, W, 0, 0)  # issued at its new start
    m.complete(6, DEV, 992, 12288, W, 0, 0)
    [r] = m.finish()
    assert (r.sector, r.nbytes, r.nr_bios, r.issue, r.done) == (992, 12288, 3, 5, 6)
    assert not st.unmatched
    m.merge(7, DEV, 5000, 4096, W, front=False)
    assert st.unmatched == {"bio merge into no pending request": 1}


def test_requeue_goes_back_to_pending():
    m, st = matcher()
    m.getrq(1, DEV, 1000, 4096, W, 0, 7, "")
    m.issue(2, DEV, 1000, 4096, W, 0, 0)
    m.requeue(3, DEV, 1000, W)
    m.issue(4, DEV, 1000, 4096, W, 0, 0)
    m.complete(5, DEV, 1000, 4096, W, 0, 0)
    [r] = m.finish()
    assert (r.requeues, r.issue, r.done) == (1, 4, 5)
    m.requeue(6, DEV, 1000, W)
    assert st.unmatched["requeue of no issued request"] == 1


def test_a_flush_sequenced_write_completes_twice():
    m, st = matcher()
    m.getrq(1, DEV, 1000, 4096, W, abi.F_PREFLUSH | abi.F_FUA, 7, "")
    m.issue(2, DEV, 1000, 4096, W, 0, 0)
    m.complete(3, DEV, 1000, 4096, W, 0, 0)  # its data stage
    m.complete(9, DEV, 1000, 0, W, 0, 1)  # after its post-flush
    [r] = m.finish()
    assert (r.data_done, r.done, r.flush_seq, r.cpu) == (3, 9, True, 1)
    recs = c.request_records([r])
    assert recs["data_done_ns"][0] == 3 and recs["done_ns"][0] == 9
    assert recs["flags_u16"][0] & abi.RQ_FLUSH_SEQ


def test_only_a_completion_of_no_bytes_ends_a_flush_sequenced_write():
    m, st = matcher()
    m.getrq(1, DEV, 1000, 4096, W, abi.F_FUA, 7, "")
    m.issue(2, DEV, 1000, 4096, W, 0, 0)
    m.complete(3, DEV, 1000, 4096, W, 0, 0)
    m.complete(9, DEV, 1000, 4096, W, 0, 0)  # bytes: another request, issued before
    first, other = m.finish()
    assert (first.done, first.data_done, first.flush_seq) == (3, 0, False)
    assert other.unmatched and other.done == 9


def test_an_empty_preflush_write_ended_by_the_flush_machinery():
    m, st = matcher()
    m.getrq(1, DEV, 1000, 0, W, abi.F_PREFLUSH, 7, "")
    m.complete(5, DEV, 1000, 0, W, 0, 0)  # never issued
    [r] = m.finish()
    assert r.flush_seq and r.done == 5 and not r.issue


def test_what_fits_no_request_is_counted():
    m, st = matcher()
    m.complete(5, DEV, 1000, 4096, W, 0, 0)  # issued before the capture
    m.issue(6, DEV, 2000, 4096, W, 0, 0)  # never inserted: issue without insert
    m.issue(6, DEV, 0, 0, abi.OP_FLUSH, 0, 0)  # a flush of the flush machinery: fine
    m.getrq(7, DEV, 3000, 4096, W, 0, 0, "")  # in flight at the end
    m.queue(8, DEV, 4000, 4096, W, 0, 0, "")  # queued, never a request
    out = m.finish()
    assert [r.done for r in out if r.unmatched] == [5]
    assert dict(st.unmatched) == {
        "completion of a request issued before the capture": 1,
        "issue without insert": 1,
        "request without its queued bio (submitter unknown)": 1,
        "request in flight at the end": 3,
        "queued bio never seen in a request": 1}
    assert "7 imported events matched no request as usual" in c.describe_unmatched(st)
    assert c.describe_unmatched(c.ImportStats()) is None


def test_request_records_flags():
    reqs = [c.Req(DEV, 8, 4096, W, submit=1, issue=2, done=3, tid=7, origin=True,
                  comm="a-very-long-command-name"),
            c.Req(DEV, 16, 4096, W, submit=1, tid=8),  # incomplete
            c.Req(DEV, 24, 4096, W, done=4, unmatched=True),
            c.Req(DEV, 32, 4096, W, submit=1, done=5)]  # done, never issued
    a = c.request_records(reqs, tracked={7})
    f = a["flags_u16"].tolist()
    assert f[0] == abi.RQ_ORIGIN | abi.RQ_TRACKED
    assert f[1] == abi.RQ_INCOMPLETE
    assert f[2] == abi.RQ_UNMATCHED
    assert f[3] == abi.RQ_NO_ISSUE
    assert a["seq"].tolist() == [1, 2, 3, 4]
    assert a["comm"][0] == b"a-very-long-comm"  # 16 bytes
    assert a["ts_ns"].tolist() == [3, 1, 4, 5]


def test_request_records_leave_out_what_does_not_fit():
    st = c.ImportStats()
    reqs = [c.Req(DEV, 8, 4096, W, done=1 << 63), c.Req((4096, 0), 8, 4096, W, done=1),
            c.Req(DEV, 8, 1 << 32, W, done=1), c.Req(DEV, 8, 4096, W, done=1)]
    a = c.request_records(reqs, stats=st)
    assert len(a) == 1 and a["seq"][0] == 1
    assert st.unmatched == {"requests with a value out of range, left out": 3}


def test_request_devices_sorted_unique():
    reqs = [c.Req((8, 16), 0, 0, W, done=1), c.Req((8, 0), 0, 0, W, done=1),
            c.Req((259, 1), 0, 0, W, done=1), c.Req((8, 0), 0, 0, W, done=1)]
    assert c.request_devices(c.request_records(reqs)) == [(8, 0), (8, 16), (259, 1)]


def test_check_comms():
    seen = {10: (1, "dd"), 11: (2, "dd"), 12: (3, "dd")}
    c.check_comms({"dd"}, seen, {11: 10, 12: 11}, set())  # one process and its children
    c.check_comms({"dd"}, seen, {11: 5, 12: 11, 5: 10}, set())  # via a parent not named dd
    c.check_comms({"dd"}, {10: (1, "dd"), 11: (2, "dd")}, {11: 4}, {4})  # under --pid's
    with pytest.raises(c.ImportError_) as ei:
        c.check_comms({"dd"}, seen, {12: 11}, set())
    assert str(ei.value).startswith("--comm dd names 2 processes: pid 10 (first seen at ")
    assert "--pid" in ei.value.hint


def test_open_input_takes_regular_files_only(tmp_path):
    p = tmp_path / "cap.txt"
    p.write_bytes(b"x")
    with c.open_input(str(p)) as f:
        assert f.read() == b"x"
    with pytest.raises(c.ImportError_, match="cannot read"):
        c.open_input(str(tmp_path / "missing"))
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(c.ImportError_, match="is not a regular file") as ei:
        c.open_input(str(tmp_path / "pipe"))  # a FIFO would block or never end
    assert "trace_pipe" in ei.value.hint


def test_content_uuid(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"same")
    b.write_bytes(b"same")
    assert c.content_uuid([str(a)]) == c.content_uuid([str(b)])
    assert c.content_uuid([str(a)]) != c.content_uuid([str(a), str(b)])
    assert uuid.UUID(c.content_uuid([str(a)])).version == 5


def imported(tmp_path, out, **kw):
    cap = tmp_path / "cap.txt"
    cap.write_bytes(b"capture")
    st = c.ImportStats()
    st.unmatched["completion of a request issued before the capture"] = 2
    recs = c.request_records([c.Req(DEV, 8, 4096, W, submit=150, issue=160, done=170)])
    c.write_imported(str(out), "blktrace", [str(cap)], 100, 200, {"request": recs},
                     [{"name": "sda", "major": 8, "minor": 0}], ["no task events"], st,
                     False, **kw)


def test_write_imported_writes_a_trace(tmp_path):
    out = tmp_path / "t.iowt"
    imported(tmp_path, out, command=["dd"], pid=5)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    tr = read_trace(str(out))
    imp = tr.meta["import"]
    assert imp["format"] == "blktrace" and imp["inputs"] == ["cap.txt"]
    assert imp["problems"][0] == "imported from blktrace: no task events"
    assert "2 imported events matched no request" in imp["problems"][1]
    assert tr.recorder["imported"] == "blktrace" and tr.recorder["pid"] == 5
    assert tr.trailer["counters"]["unmatched_completion"] == 2
    assert tr.trailer["end_ns"] == 200 and len(tr.records("request")) == 1
    assert tr.meta["run_uuid"] == c.content_uuid([str(tmp_path / "cap.txt")])


def test_write_imported_replaces_a_symlink_and_refuses_a_directory(tmp_path):
    target = tmp_path / "victim"
    target.write_bytes(b"keep")
    os.symlink(target, tmp_path / "t.iowt")
    imported(tmp_path, tmp_path / "t.iowt")
    assert target.read_bytes() == b"keep" and not os.path.islink(tmp_path / "t.iowt")
    with pytest.raises(c.ImportError_, match="it is a directory"):
        imported(tmp_path, tmp_path)
    with pytest.raises(c.ImportError_, match="does not exist") as ei:
        imported(tmp_path, tmp_path / "no" / "t.iowt")
    assert "-o" in ei.value.hint
