"""views/commits.py: the journal records of the workload's filesystems, and their
commits: jbd2 commits and phases, ext4 fast commits, XFS iclogs and log forces, btrfs
transactions and log syncs, and how many fsync-family calls shared a commit."""

from __future__ import annotations

import numpy as np

import tracebuilder as tb
from iowhy import abi
from iowhy.model.requests import Window
from iowhy.views.commits import commits_view, journal_of, workload_filesystems

J = tb.jev
WIN = Window(900, 2000)
OTHER = (8, 17)


def _view(jrows: list[dict], fsrows: list[dict] = (), per_call=None, log_bytes: int = 0):
    fsv = {} if per_call is None else {"_per_call": per_call}
    return commits_view(WIN, tb.columns("journal", jrows), fsv, tb.columns("fsync", list(fsrows)),
                        log_bytes)


def test_workload_filesystems_and_their_journal_records():
    m = tb.meta()
    m["filesystems"].append(tb.fs_entry("xfs", (8, 16), OTHER, "sdy", "/mnt/x"))
    devices = [tb.DEV, (8, 16)]
    calls = tb.columns("fsync", [tb.fsync(1, 10, 20, dev=(0, 40)),
                                 tb.fsync(1, 30, 40, dev=(0, 0))])
    assert workload_filesystems(m, devices, [0], calls) == {tb.PART, (0, 40)}
    assert workload_filesystems(m, devices, [0, 1], tb.columns("fsync", [])) == {tb.PART, OTHER}
    jr = tb.columns("journal", [J(abi.J_JBD2_START, 1000, 1),
                                J(abi.J_XLOG_SYNC, 1000, 1, dev=OTHER)])
    mine = journal_of(jr, {tb.PART})
    assert mine["event_u16"].tolist() == [abi.J_JBD2_START]
    assert len(journal_of(jr, {tb.PART, OTHER})["ts_ns"]) == 2
    assert journal_of(tb.columns("journal", []), {tb.PART})["ts_ns"].tolist() == []


def test_jbd2_commits_and_their_phases():
    v = _view([J(abi.J_JBD2_START, 1000, 1), J(abi.J_JBD2_LOCKING, 1010, 1),
               J(abi.J_JBD2_FLUSHING, 1020, 1), J(abi.J_JBD2_LOGGING, 1035, 1),
               J(abi.J_JBD2_END, 1060, 1), J(abi.J_JBD2_STATS, 1061, 1, aux2=12),
               # the same sequence number on another filesystem: another commit
               J(abi.J_JBD2_START, 1000, 1, dev=OTHER), J(abi.J_JBD2_END, 1100, 1, dev=OTHER),
               J(abi.J_JBD2_START, 1200, 2)],  # not ended in the trace
              log_bytes=9000)
    j = v["jbd2"]
    assert j["count"] == 2 and v["count"] == 2
    assert j["duration_ns"] == {"p50": 60, "p90": 100, "max": 100}
    assert j["phases_ns"]["locking"] == {"p50": 10, "p90": 10, "max": 10}
    assert j["phases_ns"]["flushing"]["max"] == 15 and j["phases_ns"]["logging"]["max"] == 25
    assert j["blocks_logged"] == 12
    assert sorted(v["_durations"]["jbd2"].tolist()) == [60, 100]
    assert v["log_bytes"] == 9000 and v["bytes_logged_per_commit"] == 4500
    assert v["fsyncs_per_commit"] is None


def test_ext4_fast_commits_pair_in_their_task():
    v = _view([J(abi.J_EXT4_FC_START, 1000, tid=7), J(abi.J_EXT4_FC_START, 1001, tid=8),
               J(abi.J_EXT4_FC_STOP, 1004, tid=7), J(abi.J_EXT4_FC_STOP, 1010, tid=8, aux1=1)])
    assert v["ext4_fast_commit"] == {"count": 2, "by_status": {"ok": 1, "ineligible": 1}}
    assert v["count"] == 1  # the one that succeeded is a commit
    assert sorted(v["_durations"]["fc"].tolist()) == [4, 9]
    assert "jbd2" not in v
    # a start whose task stopped no fast commit, a stop of a task that started none
    v = _view([J(abi.J_EXT4_FC_START, 1000, tid=7), J(abi.J_EXT4_FC_STOP, 1010, tid=8)])
    assert v["_durations"]["fc"].tolist() == []


def test_xfs_iclogs_and_log_forces():
    X = dict(fs=abi.FS_XFS)
    v = _view([J(abi.J_XFS_FORCE, 995, **X), J(abi.J_XLOG_SYNC, 1000, 5, aux1=4096, **X),
               J(abi.J_XLOG_WRITE, 1005, 5, **X), J(abi.J_XLOG_DONE, 1015, 5, **X),
               J(abi.J_XLOG_SYNC, 1020, 6, aux1=512, **X),  # not done in the trace
               # no iclog done on their devices (one numbered below, one above)
               J(abi.J_XFS_FORCE, 1000, dev=(7, 0), **X), J(abi.J_XFS_FORCE, 1000, dev=OTHER, **X)])
    x = v["xfs"]
    assert (x["count"], x["forces"], x["iclog_bytes"]) == (1, 3, 4608)
    assert x["force_to_iclog_done_ns"] == {"p50": 20, "p90": 20, "max": 20}
    assert x["iclog_ns"]["max"] == 15 and x["iclog_io_ns"]["max"] == 10
    assert v["_durations"]["xfs"].tolist() == [15]


def test_btrfs_commits_and_the_calls_sharing_commits():
    fsrows = [tb.fsync(1, 1000, 1010, fs=abi.FS_BTRFS), tb.fsync(2, 1000, 1012, fs=abi.FS_BTRFS),
              tb.fsync(3, 1020, 1030, fs=abi.FS_BTRFS), tb.fsync(4, 1040, 1050, fs=abi.FS_BTRFS)]
    pc = {"needed": np.array([True, True, True, False]), "commit_id": np.array([4, 4, -1, -1]),
          "sync_of": np.full(4, -1)}
    v = _view([J(abi.J_BTRFS_COMMIT, 1100, fs=abi.FS_BTRFS)], fsrows, pc)
    assert v["btrfs"] == {"transaction_commits": 1, "log_syncs": 3}
    assert v["count"] == 4
    # 3 calls needed a commit: two the same one (4), one its own
    assert v["fsyncs_per_commit"] == 1.5
    # The fourth waited for the third's log sync: 4 calls, 2 commits, the same 3 syncs.
    pc = {**pc, "needed": np.ones(4, bool), "sync_of": np.array([-1, -1, -1, 2])}
    v = _view([J(abi.J_BTRFS_COMMIT, 1100, fs=abi.FS_BTRFS)], fsrows, pc)
    assert v["btrfs"] == {"transaction_commits": 1, "log_syncs": 3}
    assert v["fsyncs_per_commit"] == 2.0


def test_no_journal_record_no_commit():
    v = _view([])
    assert v["count"] == 0 and v["bytes_logged_per_commit"] is None
    assert not {"jbd2", "xfs", "btrfs", "ext4_fast_commit"} & set(v)
