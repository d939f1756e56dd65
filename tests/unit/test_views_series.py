"""views/series.py: what the HTML figures draw: the sector scatter of the busiest
workload disks (sampled above a limit), bytes completed per time bucket, the
fsync-family calls, commit marks and task names."""

from __future__ import annotations

import numpy as np
import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.model.classify import classify
from iowhy.model.requests import load_requests, trace_window
from iowhy.traceformat import read_trace
from iowhy.views import series as S
from iowhy.views.latency import values_by_class

OTHER, THIRD, FOURTH = (8, 16), (8, 32), (8, 48)


def test_comm_text():
    assert S.comm_text(b"tar\0junk") == "tar"
    assert S.comm_text(np.bytes_(b"kworker/0:1")) == "kworker/0:1"
    assert S.comm_text(b"\xff") == "\ufffd"
    assert S.comm_text("as is") == "as is"
    assert S.task_comms(None) == {}


def _data(tmp_path, rows, workload=(0,), **kw):
    kw.setdefault("meta_obj", {**tb.meta(), "devices": [
        tb.disk(), tb.disk("sdb", OTHER), tb.disk("sdc", THIRD), tb.disk("sdd", FOURTH)]})
    tr = read_trace(tb.write_trace(tmp_path / "s.iowt", requests=rows, start=1000,
                                   end=1000 + 150_000, **kw))
    win = trace_window(tr)
    rq = load_requests(tr, win)
    cls = classify(rq, tr.meta)
    values = values_by_class(rq, cls)
    values["seek"] = {c: np.zeros(0, np.int64) for c in values["device"]}
    return S.figure_data(win, tr.meta, rq, cls, list(workload), values, {},
                         {k: tr.column("fsync", k) for k in ("enter_ns", "exit_ns", "call_u16",
                                                             "tid", "flags_u16")},
                         {k: tr.column("journal", k) for k in ("event_u16", "ts_ns")}, tr), rq


def test_throughput_counts_each_data_byte_once_in_its_completion_bucket(tmp_path):
    R = tb.req
    rows = [R(1100, 2000, nbytes=4096), R(1200, 2500, nbytes=512, op=abi.OP_READ),
            R(1300, 1000 + 149_999, nbytes=8192), R(1400, 1500, op=abi.OP_FLUSH),
            R(0, 1600, nbytes=1024, flags=abi.RQ_NO_ISSUE),  # never issued
            R(1500, 1600, nbytes=2048, dev=OTHER)]  # not a workload disk
    fd, _ = _data(tmp_path, rows)
    assert fd.tput_step_ns == 1000 and len(fd.tput_write) == 150
    assert fd.tput_write.sum() == 4096 + 8192 and fd.tput_read.sum() == 512
    assert fd.tput_write[1] == 4096 and fd.tput_write[149] == 8192 and fd.tput_read[1] == 512
    assert fd.origin_ns == 1000 and fd.elapsed_ns == 150_000


def test_scatter_draws_the_busiest_disks_data_requests(tmp_path):
    R = tb.req
    rows = ([R(1100 + i, 1200 + i, sector=10 * i) for i in range(3)]
            + [R(1100 + i, 1200 + i, dev=OTHER) for i in range(4)]
            + [R(1100 + i, 1200 + i, dev=THIRD) for i in range(2)]
            + [R(1100, 1200, dev=FOURTH)]
            + [R(1100, 1200, op=abi.OP_FLUSH), R(1100, 1200, nbytes=0)])
    fd, rq = _data(tmp_path, rows, workload=[])
    # no workload disk given: the busiest of all, at most MAX_SCATTER_DEVICES
    assert [s.name for s in fd.scatters] == ["sdb", "sdz", "sdc"]
    assert fd.scatter_devices_total == 4
    sdz = fd.scatters[1]
    assert sdz.total == 3 and sdz.sector.tolist() == [0, 10, 20]
    assert sdz.t_s.tolist() == pytest.approx([100e-9, 101e-9, 102e-9])
    assert sdz.log_ranges == [tb.LOG_RANGE] and sdz.log_label == "ext4 journal"


def test_scatter_samples_above_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "SCATTER_LIMIT", 4)
    rows = [tb.req(1100 + i, 1200 + i, sector=i) for i in range(10)]
    fd, _ = _data(tmp_path, rows)
    (s,) = fd.scatters
    assert s.total == 10 and len(s.sector) == 4
    assert len(set(s.sector.tolist())) == 4 and (np.diff(s.sector) > 0).all()
    # a sample of them all (not the first few), the same every time (a fixed seed)
    assert int(s.sector.max()) >= 4
    assert _data(tmp_path, rows)[0].scatters[0].sector.tolist() == s.sector.tolist()


def test_calls_marks_and_names(tmp_path):
    fsyncs = [tb.fsync(100, 1100, 1300), tb.fsync(101, 1200, 0, call=abi.CALL_FDATASYNC,
                                                  flags_u16=abi.FS_F_INCOMPLETE)]
    journal = [tb.jev(abi.J_JBD2_END, 1250, 1), tb.jev(abi.J_JBD2_START, 1240, 1)]
    tasks = [tb.task(101, 1000, abi.TASK_FORK, comm=b"w"), tb.task(100, 1000, comm=b"star"),
             tb.task(100, 1050, abi.TASK_EXEC, comm=b"tar")]
    fd, _ = _data(tmp_path, [], fsyncs=fsyncs, journal=journal, tasks=tasks)
    assert fd.calls_type.tolist() == ["fsync", "fdatasync"]
    assert fd.calls_tid.tolist() == [100, 101]
    assert fd.calls_enter_s.tolist() == pytest.approx([100e-9, 200e-9])
    # the call still running at the end is drawn to the end of the window
    assert fd.calls_exit_s.tolist() == pytest.approx([300e-9, 150_000e-9])
    assert list(fd.marks) == ["jbd2 commit end"]
    assert fd.marks["jbd2 commit end"].tolist() == pytest.approx([250e-9])
    assert fd.tasks == {100: "tar", 101: "w"}
    assert fd.scatters == [] and fd.tput_write.sum() == 0
