"""Pure tests of the analysis on synthetic traces written with TraceWriter.

Every expected figure is computed by hand in the comments (times in ns, window
[1000, 1100) unless said otherwise), or by a brute-force per-nanosecond reference.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from iowhy import abi
import golden_traces as gt
from iowhy.analysis import metric_values
from iowhy.model.classify import CLASS_NAMES, classify
from iowhy.traceformat import read_trace
from tracebuilder import (LOG_RANGE, assert_sums, busy_trace, fsync, jev, meta, off, records, req,
                          run, task, write_trace)


# -- hand-computed scenarios ---------------------------------------------------------------------

def test_overlapping_flush_log_data(tmp_path):
    # One task, off CPU [1010, 1090): blocked in fsync until 1085, then runnable.
    # data [1020,1060), log [1030,1050), FF [1040,1070) on the same disk:
    #   [1010,1020) nothing -> wait-other 10   [1020,1030) data 10   [1030,1040) log 10
    #   [1040,1070) barrier 30                 [1070,1085) wait-other 15
    # runqueue [1085,1090) = 5; cpu [1000,1010) + [1090,1100) = 20.
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(1020, 1060, sector=50_000),
        req(1030, 1050, sector=LOG_RANGE[0] + 8, iflags=abi.F_META | abi.F_SYNC, flags=0),
        req(1040, 1070, op=abi.OP_FLUSH, flags=0),
    ], offcpu=[off(100, 1010, 1090, waking=1085)])
    r = run(p)
    assert r["elapsed_ns"] == 100
    assert r["attribution_ns"] == {"cpu": 20, "runqueue": 5, "barrier": 30, "log": 10,
                                   "metadata": 0, "data": 10, "read": 0, "wait-other": 25}
    assert r["wait_other_by_syscall_ns"] == {"fsync": 25}
    assert_sums(r)
    d = r["devices"][0]
    assert d["busy_ns"] == 50 and d["idle_ns"] == 50 and d["utilisation"] == 0.5
    assert d["busy_by_category_ns"] == {"barrier": 30, "log": 10, "metadata": 0, "data": 10,
                                        "read": 0}
    assert d["queue_depth"]["max"] == 3
    # mean depth = (40 + 20 + 30) / 100; when busy (50 ns): 1.8
    assert d["queue_depth"]["mean"] == 0.9 and d["queue_depth"]["mean_busy"] == 1.8
    # 10 buckets of 10 ns: [1020,1030) data; +log; +FF; data+FF; FF
    r10 = run(p, queue_depth_buckets=10)["devices"][0]["queue_depth"]
    assert r10["step_ns"] == 10
    assert r10["series"] == [0.0, 0.0, 1.0, 2.0, 3.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    r7 = run(p, queue_depth_buckets=7)["devices"][0]["queue_depth"]  # width 15, 7 buckets
    assert r7["step_ns"] == 15 and len(r7["series"]) == 7
    assert r7["series"][1] == round(10 / 15, 3)  # [1015,1030): data from 1020 only
    assert r["requests"]["log"]["count"] == 1
    assert r["requests"]["data"]["device_ns"] == {"p50": 40, "p90": 40, "p99": 40, "max": 40}
    assert r["requests"]["flush"]["device_ns"]["max"] == 30


def test_one_flush_shared_by_several_requests(tmp_path):
    # FF1 [1030,1050) (pre-flush) and FF2 [1062,1078) (post-flush).
    # r1, r3: empty PREFLUSH requests (never issued), submitted 1010 / 1020, done 1050.
    # r2: PREFLUSH|FUA log write, submitted 1015, data stage [1052,1060), done 1080.
    # Waits: r1 20 (FF1), r2 20 + 16 = 36, r3 20. FF1 shared 7/7/6 (r1, r2, r3), FF2 16 to r2.
    # Workload (blocked [1010,1085)): barrier = FF stages U waiting windows
    #   = [1010,1052) U [1060,1080) = 62; log [1052,1060) = 8; wait-other [1080,1085) = 5.
    seq = abi.RQ_FLUSH_SEQ | abi.RQ_TRACKED
    pf = abi.F_PREFLUSH | abi.F_SYNC
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(0, 1050, nbytes=0, submit=1010, iflags=pf, flags=seq | abi.RQ_NO_ISSUE),
        req(1052, 1080, submit=1015, data_done=1060, sector=LOG_RANGE[0],
            iflags=pf | abi.F_FUA | abi.F_META, flags=seq),
        req(0, 1050, nbytes=0, submit=1020, iflags=pf, flags=seq | abi.RQ_NO_ISSUE),
        req(1030, 1050, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ),
        req(1062, 1078, op=abi.OP_FLUSH, flags=abi.RQ_FLUSH_SEQ),
    ], offcpu=[off(100, 1010, 1090, waking=1085)])
    r = run(p)
    assert r["attribution_ns"] == {"cpu": 20, "runqueue": 5, "barrier": 62, "log": 8,
                                   "metadata": 0, "data": 0, "read": 0, "wait-other": 5}
    assert_sums(r)
    fl = r["devices"][0]["flush"]
    assert fl["count"] == 2 and fl["total_ns"] == 36 and fl["waiters"] == 3
    assert fl["waiting_ns"] == 20 + 36 + 20
    assert fl["shared_ns_by_class"] == {"flush": 13, "log": 23}
    assert fl["unclaimed_ns"] == 0
    d = r["devices"][0]
    assert d["busy_by_category_ns"]["barrier"] == 36 and d["busy_by_category_ns"]["log"] == 8
    rq = r["requests"]
    # The two FFs issued; the empty PREFLUSH requests r1, r3 were merged into them.
    assert rq["flush"]["count"] == 2 and rq["flush"]["issued"] == 2
    assert rq["flush"]["flush_wait_ns"] == 40 and rq["log"]["flush_wait_ns"] == 36
    assert rq["log"]["fua"] == 1 and rq["log"]["preflush"] == 1
    # device time of the log write: issue to final completion, post-flush included
    assert rq["log"]["device_ns"]["p50"] == 28
    assert r["flushes"]["empty_preflush"] == 2


def test_idle_gap_and_no_task(tmp_path):
    # Root born at 1010, exits at 1090: [1000,1010) and [1090,1100) have no task (20).
    # Sleeps in nanosleep [1020,1060) while a read is in flight [1030,1040):
    #   read 10, wait-other (nanosleep) 30. cpu [1010,1020) + [1060,1090) = 40.
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(1030, 1040, op=abi.OP_READ, sector=777),
    ], offcpu=[off(100, 1020, 1060, syscall=35)],
        tasks=[task(100, 1010), task(100, 1090, abi.TASK_EXIT)])
    r = run(p)
    assert r["attribution_ns"] == {"cpu": 40, "runqueue": 0, "barrier": 0, "log": 0,
                                   "metadata": 0, "data": 0, "read": 10, "wait-other": 50}
    assert r["wait_other_by_syscall_ns"] == {"nanosleep": 30, "(no task)": 20}
    d = r["devices"][0]
    assert d["busy_ns"] == 10 and d["idle_ns"] == 90 and d["utilisation"] == 0.1
    assert_sums(r)


def test_several_tasks(tmp_path):
    # A (100): off [1010,1060), blocked in fsync until 1050; exits 1095.
    # B (101): forked 1000, off [1020,1080), blocked in write until 1070.
    # cpu: [1000,1020) + [1060,1100) = 60; runqueue [1050,1060) = 10 (B still blocked);
    # blocked [1020,1050) = 30: data [1030,1040) 10, wait-other 20, both blocked with one
    # thread each -> tie -> lowest syscall number: write.
    p = write_trace(tmp_path / "t.iowt", requests=[req(1030, 1040, tid=101)],
                    offcpu=[off(100, 1010, 1060, waking=1050, syscall=74),
                            off(101, 1020, 1080, waking=1070, syscall=1)],
                    tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK),
                           task(100, 1095, abi.TASK_EXIT)])
    r = run(p)
    assert r["attribution_ns"] == {"cpu": 60, "runqueue": 10, "barrier": 0, "log": 0,
                                   "metadata": 0, "data": 10, "read": 0, "wait-other": 20}
    assert r["wait_other_by_syscall_ns"] == {"write": 20}
    assert r["blocked_by_syscall_ns"] == {"write": 30}
    assert r["workload"]["threads"] == 2
    assert_sums(r)


def test_preempted_is_runqueue_and_incomplete_clipped(tmp_path):
    # Preempted [1010,1030): runqueue 20. Blocked [1050,1100) (still off CPU at stop).
    # An incomplete data write issued at 1060 is clipped to the end: data 40, wait 10.
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(1060, 0, flags=abi.RQ_TRACKED | abi.RQ_INCOMPLETE, data_done=0),
    ], offcpu=[off(100, 1010, 1030, preempt=True), off(100, 1050, 1100, syscall=74)])
    r = run(p)
    att = r["attribution_ns"]
    assert att["runqueue"] == 20 and att["cpu"] == 30
    assert att["data"] == 40 and att["wait-other"] == 10
    assert r["requests"]["data"]["incomplete"] == 1
    assert r["requests"]["data"]["device_ns"]["p50"] is None  # censored: not in percentiles
    assert_sums(r)


def test_lost_completion_is_in_no_time_interval(tmp_path):
    # RQ_LOST_DONE: the final completion was never seen (done_ns 0; ts_ns is when the
    # struct request was seen reused). One task blocked in fsync [1010, 1090).
    # A data [1020,1040) and C data [1060,1070) are observed. B (data, lost, issued 1030
    # between them on disk), an FF (lost, 1045) and a PREFLUSH|FUA log write (lost,
    # flush-sequenced, 1075) must add no time anywhere: data = 20 + 10, no barrier, no
    # log; taking their completion as the trace end would have made [1030, 1090) data
    # and [1045, 1090) barrier.
    lost = abi.RQ_LOST_DONE
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(1020, 1040, sector=50_000),
        {**req(1030, 0, sector=50_008, data_done=0, flags=abi.RQ_TRACKED | lost),
         "ts_ns": 1080},
        {**req(1045, 0, op=abi.OP_FLUSH, data_done=0, flags=abi.RQ_FLUSH_SEQ | lost),
         "ts_ns": 1085},
        {**req(1075, 0, submit=1073, data_done=0, sector=LOG_RANGE[0],
               iflags=abi.F_PREFLUSH | abi.F_FUA | abi.F_META,
               flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | lost), "ts_ns": 1086},
        req(1060, 1070, sector=50_016),
    ], offcpu=[off(100, 1010, 1090)], fsyncs=[fsync(100, 1010, 1090)],
        counters={"lost_completion": 3})
    r = run(p)
    assert r["attribution_ns"] == {"cpu": 20, "runqueue": 0, "barrier": 0, "log": 0,
                                   "metadata": 0, "data": 30, "read": 0, "wait-other": 50}
    assert_sums(r)
    d = r["devices"][0]
    assert d["busy_ns"] == 30 and d["busy_by_category_ns"]["data"] == 30
    assert d["queue_depth"]["max"] == 1 and d["queue_depth"]["mean"] == 0.3
    assert d["flush"]["count"] == 0 and d["flush"]["waiters"] == 0
    assert d["requests"] == 5  # still requests of the disk
    rq = r["requests"]
    assert rq["data"]["count"] == 3 and rq["data"]["lost"] == 1
    assert rq["data"]["incomplete"] == 0 and rq["data"]["issued"] == 3
    assert rq["data"]["device_ns"] == {"p50": 10, "p90": 20, "p99": 20, "max": 20}
    assert rq["data"]["device_total_ns"] == 30
    assert rq["flush"]["count"] == 1 and rq["flush"]["lost"] == 1
    assert rq["flush"]["device_ns"]["p50"] is None
    assert rq["log"]["lost"] == 1 and rq["log"]["total_ns"]["max"] is None
    assert rq["log"]["flush_wait_ns"] == 0
    assert all(rq[c]["lost"] == 0 for c in ("metadata", "read", "readahead", "discard"))
    # The fsync call's own data writes: A and C only.
    assert r["fsync"]["split_ns"] == {"data": 30, "commit": 0, "flush": 0, "other": 50}
    # B keeps its place in the issue order: C is contiguous with it (seek 0), but B has
    # no service time, so only C is measured.
    pl = r["placement"]["data"]
    assert pl["requests_with_seek"] == 2 and pl["sequential_share"] == 1.0
    assert pl["positioning_basis"] == 1
    assert r["lost_events"] == 3 and "3 completion" in r["problems"][0]
    assert sorted(metric_values(read_trace(p), "device", "data")[0].tolist()) == [10, 20]


# -- fsync view and commits ------------------------------------------------------------------

def test_fsync_split_and_commits_ext4(tmp_path):
    # A fsync [1010,1100) of task 100, tid 5: own data [1012,1030) = 18, jbd2 commit 5
    #   [1035,1090) = 55, other 17.
    # B fdatasync [1110,1150) of task 100, tid 5 already committed at 1090: only its own
    #   empty PREFLUSH [1112,1140) = 28 (flush), other 12.
    # C fsync [1105,1160) of task 101 and E fsync [1115,1155) of task 102 both need tid 6
    #   [1120,1150): commit 30 each; other 25 and 10.
    # fsyncs per commit: A, C, E need a commit; distinct commits 5, 6 -> 1.5.
    j = [jev(abi.J_JBD2_START, 1035, 5), jev(abi.J_JBD2_LOCKING, 1036, 5),
         jev(abi.J_JBD2_FLUSHING, 1040, 5), jev(abi.J_JBD2_LOGGING, 1050, 5),
         jev(abi.J_JBD2_END, 1090, 5), jev(abi.J_JBD2_STATS, 1090, 5, aux2=3),
         jev(abi.J_JBD2_START, 1120, 6), jev(abi.J_JBD2_END, 1150, 6)]
    p = write_trace(tmp_path / "t.iowt", end=1200, requests=[
        req(1015, 1030, submit=1012, sector=50_000),
        req(1052, 1060, sector=LOG_RANGE[0], iflags=abi.F_META, flags=0, tid=50),
        req(0, 1140, submit=1112, nbytes=0, iflags=abi.F_PREFLUSH,
            flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | abi.RQ_NO_ISSUE),
    ], fsyncs=[fsync(100, 1010, 1100, seq=5),
               fsync(100, 1110, 1150, seq=5, call=abi.CALL_FDATASYNC),
               fsync(101, 1105, 1160, seq=6), fsync(102, 1115, 1155, seq=6)],
        journal=j, tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK),
                          task(102, 1000, abi.TASK_FORK)])
    r = run(p)
    f = r["fsync"]
    assert f["count"] == 4 and f["incomplete"] == 0
    fs = f["by_call"]["fsync"]
    assert fs["count"] == 3
    assert fs["latency_ns"] == {"p50": 55, "p90": 90, "p99": 90, "max": 90}
    assert fs["split_ns"] == {"data": 18, "commit": 115, "flush": 0, "other": 52}
    assert fs["needed_commit"] == 3
    assert fs["hist_log2_us"] == [3]  # all under 2 us
    fd = f["by_call"]["fdatasync"]
    assert fd["split_ns"] == {"data": 0, "commit": 0, "flush": 28, "other": 12}
    assert fd["needed_commit"] == 0
    c = r["commits"]
    assert c["count"] == 2 and c["fsyncs_per_commit"] == 1.5
    assert c["jbd2"]["count"] == 2
    assert c["jbd2"]["duration_ns"]["p50"] == 30 and c["jbd2"]["duration_ns"]["max"] == 55
    assert c["jbd2"]["phases_ns"]["locking"]["p50"] == 4
    assert c["jbd2"]["phases_ns"]["flushing"]["p50"] == 10
    assert c["jbd2"]["phases_ns"]["logging"]["p50"] == 40
    assert c["jbd2"]["blocks_logged"] == 3
    assert c["log_bytes"] == 4096 and c["bytes_logged_per_commit"] == 2048


def test_fsync_sleeps_the_journal_thread_ended_are_the_commits(tmp_path):
    # Two journals: jbd2 thread 50 commits 5 [1020,1060) and 6 [1070,1100) on PART,
    # thread 60 commits 9 [1040,1080) on (8, 49). One call of each type, so that each
    # call's split is its type's:
    # - fsync [1030,1110) of 101 needs 6: it sleeps [1032, woken 1060) while 5 commits (6
    #   cannot begin before 5 ends), then [1062, woken 1100), 6 beginning only at 1070
    #   (the journal thread waiting for a CPU), both woken by 50: commit 28 + 38 = 66,
    #   other 14. Its sleep [1005, 1020) is before the call: nothing.
    # - fdatasync [1030,1110) of 102 needs 6, its sleep [1032,1100) ended by another
    #   task (77): commit 30 (6's run), other 50.
    # - msync [1035,1090) of 103 needs 9: its sleep [1036, woken 1081) by 50 (the other
    #   journal's thread) is not 9's; [1082, woken 1085) by 60 is: commit 40 + 3,
    #   other 12.
    # - osync_write [1030,1110) of 104 needs 6: its sleep [1032, woken 1050) in a hard
    #   interrupt on top of 50 is not the journal's; [1100, woken 1105) by 50 is:
    #   commit 30 + 5, other 45.
    elsewhere = (8, 49)
    j = [jev(abi.J_JBD2_START, 1020, 5), jev(abi.J_JBD2_END, 1060, 5),
         jev(abi.J_JBD2_START, 1070, 6), jev(abi.J_JBD2_END, 1100, 6),
         jev(abi.J_JBD2_START, 1040, 9, tid=60, dev=elsewhere),
         jev(abi.J_JBD2_END, 1080, 9, tid=60, dev=elsewhere)]
    p = write_trace(tmp_path / "t.iowt", end=1200, fsyncs=[
        fsync(101, 1030, 1110, seq=6), fsync(102, 1030, 1110, seq=6, call=abi.CALL_FDATASYNC),
        fsync(103, 1035, 1090, seq=9, dev=elsewhere, call=abi.CALL_MSYNC),
        fsync(104, 1030, 1110, seq=6, call=abi.CALL_OSYNC_WRITE)], journal=j,
        offcpu=[off(101, 1005, 1021, waking=1020, waker=50),
                off(101, 1032, 1061, waking=1060, waker=50),
                off(101, 1062, 1104, waking=1100, waker=50),
                off(102, 1032, 1102, waking=1100, waker=77),
                off(103, 1036, 1081, waking=1081, waker=50),
                off(103, 1082, 1086, waking=1085, waker=60),
                off(104, 1032, 1051, waking=1050, waker=50, ctx=abi.WCTX_HARDIRQ),
                off(104, 1100, 1106, waking=1105, waker=50, ctx=abi.WCTX_TASK)],
        tasks=[task(101, 1000), *(task(t, 1000, abi.TASK_FORK) for t in (102, 103, 104))])
    r = run(p)
    by = r["fsync"]["by_call"]
    assert {c: by[c]["split_ns"]["commit"] for c in by} == {
        "fsync": 66, "fdatasync": 30, "msync": 43, "osync_write": 35}
    assert {c: by[c]["split_ns"]["other"] for c in by} == {
        "fsync": 14, "fdatasync": 50, "msync": 12, "osync_write": 45}
    assert r["fsync"]["split_ns"]["data"] == r["fsync"]["split_ns"]["flush"] == 0
    assert {c: by[c]["needed_commit"] for c in by} == {
        "fsync": 1, "fdatasync": 1, "msync": 1, "osync_write": 1}


def test_commits_of_other_filesystems_are_left_out(tmp_path):
    # The recorder sees every filesystem's journal. The workload writes to sdz only.
    # Counted: jbd2 commits 5 and 6 of sdz1 (its filesystem, PART) and commit 9 of
    # (8, 49), a filesystem the metadata does not describe but the workload fsynced.
    # Left out: the ext4 on sdy1 (8, 17; in the metadata, on a disk the workload did not
    # write to) with a commit, a fast commit and its log write; the root filesystem
    # (8, 33; not in the metadata) with two commits and an iclog; an unrelated btrfs
    # (0, 99) transaction commit.
    p = tmp_path / "t.iowt"
    gt.other_fs_commits(p)  # the golden trace of this shape
    r = run(p)
    assert r["workload"]["devices"] == ["sdz"]
    c = r["commits"]
    assert c["count"] == 3
    assert c["jbd2"]["count"] == 3 and c["jbd2"]["duration_ns"]["max"] == 30
    assert "xfs" not in c and "ext4_fast_commit" not in c and "btrfs" not in c
    assert c["log_bytes"] == 4096 == r["metadata_data"]["log_bytes"]
    assert c["bytes_logged_per_commit"] == 4096 // 3
    assert r["fsync"]["by_call"]["fsync"]["needed_commit"] == 1
    # `iowhy hist --metric commit` shows the same commits.
    vals, unit = metric_values(read_trace(p), "commit")
    assert unit == "ns" and sorted(vals.tolist()) == [4, 10, 30]
    assert metric_values(read_trace(p), "commit", "xfs")[0].tolist() == []


def test_fsync_xfs_log_force(tmp_path):
    # Two calls force CIL sequence 9; one iclog (sync 1045, write 1046, done 1080).
    # Call 1 [1010,1100): data [1012,1030) 18, force at 1040 -> commit [1040,1100) 60, other 12.
    # Call 2 [1020,1090) (task 101): force at 1050 -> commit 40, other 30.
    lsn = (3 << 32) | 64
    j = [jev(abi.J_XFS_FORCE, 1040, 9, tid=100, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1050, 9, tid=101, fs=abi.FS_XFS),
         jev(abi.J_XLOG_SYNC, 1045, lsn, aux1=8192, fs=abi.FS_XFS),
         jev(abi.J_XLOG_WRITE, 1046, lsn, fs=abi.FS_XFS),
         jev(abi.J_XLOG_DONE, 1080, lsn, fs=abi.FS_XFS)]
    p = write_trace(tmp_path / "t.iowt", requests=[req(1015, 1030, submit=1012)],
                    fsyncs=[fsync(100, 1010, 1100, seq=9, fs=abi.FS_XFS),
                            fsync(101, 1020, 1090, seq=9, fs=abi.FS_XFS)],
                    journal=j, meta_obj=meta("xfs"),
                    tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK)])
    r = run(p)
    assert r["fsync"]["split_ns"] == {"data": 18, "commit": 100, "flush": 0, "other": 42}
    x = r["commits"]["xfs"]
    assert x["count"] == 1 and x["forces"] == 2 and x["iclog_bytes"] == 8192
    assert x["iclog_ns"]["p50"] == 35 and x["iclog_io_ns"]["p50"] == 34
    assert x["force_to_iclog_done_ns"] == {"p50": 30, "p90": 40, "max": 40}
    assert r["commits"]["fsyncs_per_commit"] == 2.0


@pytest.mark.parametrize("one_iclog", [False, True])
def test_xfs_fsyncs_per_commit_follow_what_the_calls_forced(tmp_path, one_iclog):
    # Four tasks' fsyncs. The inode's sequence the probe read at entry is stale (6, an
    # older checkpoint) for two and unknown for the other two: XFS logs an append's size
    # update as its data completes, inside the call. What each call forced names its
    # checkpoint: 100 and 101 force 7, 102 and 103 force 8 (100's earlier force of
    # everything, sequence 0, names none). Their commit is the iclog write that
    # completed each checkpoint (the last iclog completion between a call's force and
    # its exit): one iclog each (done at 1052 and 1068), or one for both (at 1068).
    j = [jev(abi.J_XFS_FORCE, 1015, 0, tid=100, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1040, 7, tid=100, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1045, 7, tid=101, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1060, 8, tid=102, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1065, 8, tid=103, fs=abi.FS_XFS),
         jev(abi.J_XLOG_DONE, 1068, (3 << 32) | 80, fs=abi.FS_XFS)]
    if not one_iclog:
        j.append(jev(abi.J_XLOG_DONE, 1052, (3 << 32) | 64, fs=abi.FS_XFS))
    x0 = 1070 if one_iclog else 1053  # the checkpoint-7 calls' exits
    calls = [fsync(100, 1010, x0, seq=6, fs=abi.FS_XFS),
             fsync(101, 1012, x0 + 2, seq=6, fs=abi.FS_XFS),
             fsync(102, 1030, 1070, fs=abi.FS_XFS),
             fsync(103, 1032, 1075, fs=abi.FS_XFS)]
    p = write_trace(tmp_path / "t.iowt", fsyncs=calls, journal=j, meta_obj=meta("xfs"),
                    tasks=[task(100, 1000)] + [task(t, 1000, abi.TASK_FORK)
                                               for t in (101, 102, 103)])
    r = run(p)
    assert r["fsync"]["by_call"]["fsync"]["needed_commit"] == 4
    assert r["commits"]["xfs"]["checkpoints"] == 2
    assert r["commits"]["fsyncs_per_commit"] == (4.0 if one_iclog else 2.0)


def test_xfs_calls_of_one_checkpoint_share_the_iclog_that_carried_it(tmp_path):
    # Checkpoint 5: 100 forces it at 1040 and waits for the iclog done at 1050; 101 (the
    # inode's sequence 5 at its entry) forces only everything (sequence 0); 102 forces 5
    # at 1055, already on disk, and exits after an unrelated iclog at 1070. One commit:
    # the earliest iclog its calls found, for all three.
    j = [jev(abi.J_XFS_FORCE, 1040, 5, tid=100, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1041, 0, tid=101, fs=abi.FS_XFS),
         jev(abi.J_XLOG_DONE, 1050, (3 << 32) | 64, fs=abi.FS_XFS),
         jev(abi.J_XFS_FORCE, 1055, 5, tid=102, fs=abi.FS_XFS),
         jev(abi.J_XLOG_DONE, 1070, (3 << 32) | 72, fs=abi.FS_XFS)]
    calls = [fsync(100, 1010, 1051, fs=abi.FS_XFS), fsync(101, 1012, 1060, seq=5, fs=abi.FS_XFS),
             fsync(102, 1052, 1080, fs=abi.FS_XFS)]
    p = write_trace(tmp_path / "t.iowt", fsyncs=calls, journal=j, meta_obj=meta("xfs"),
                    tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK),
                           task(102, 1000, abi.TASK_FORK)])
    r = run(p)
    assert r["fsync"]["by_call"]["fsync"]["needed_commit"] == 3
    assert r["commits"]["xfs"]["checkpoints"] == 1
    assert r["commits"]["fsyncs_per_commit"] == 3.0


def test_fsync_ext4_fast_commit_in_task(tmp_path):
    # An fsync [1010,1100) whose own task makes a fast commit (start 1040, stop 1070):
    # data [1012,1030) 18, commit [1040,1070] 30, other 42. Another task's fast commit
    # in the call (1050, 1060) is not its.
    j = [jev(abi.J_EXT4_FC_START, 1040, 0, tid=100), jev(abi.J_EXT4_FC_STOP, 1070, 0, tid=100),
         jev(abi.J_EXT4_FC_START, 1050, 0, tid=101),
         jev(abi.J_EXT4_FC_STOP, 1060, 0, tid=101, aux1=1)]
    p = write_trace(tmp_path / "t.iowt", requests=[req(1015, 1030, submit=1012)],
                    fsyncs=[fsync(100, 1010, 1100)], journal=j,
                    tasks=[task(100, 1000), task(101, 1000, abi.TASK_FORK)])
    r = run(p)
    assert r["fsync"]["split_ns"] == {"data": 18, "commit": 30, "flush": 0, "other": 42}
    assert r["fsync"]["by_call"]["fsync"]["needed_commit"] == 1
    fc = r["commits"]["ext4_fast_commit"]
    assert fc == {"count": 2, "by_status": {"ok": 1, "ineligible": 1}}
    assert r["commits"]["count"] == 1  # the ineligible one committed nothing
    assert sorted(metric_values(read_trace(p), "commit", "fc")[0].tolist()) == [10, 30]


def test_btrfs_log_writes_in_task(tmp_path):
    # btrfs: no log region. In the call [1010,1100) of task 100: data [1012,1030); a REQ_META
    # write submitted at 1040 by the same task -> log; a superblock write (partition
    # sector 128) -> log. Outside the call, or by another task: metadata.
    m = meta("btrfs")
    anon = (0, 45)
    m["filesystems"][0].update({"st_dev_major": anon[0], "st_dev_minor": anon[1]})
    p = write_trace(tmp_path / "t.iowt", end=1200, requests=[
        req(1015, 1030, submit=1012, sector=90_000),
        req(1041, 1050, submit=1040, sector=70_000, iflags=abi.F_META),
        req(1061, 1070, submit=1060, sector=2048 + 128, iflags=abi.F_META | abi.F_FUA),
        req(1045, 1055, submit=1044, sector=71_000, iflags=abi.F_META, flags=0, tid=200),
        req(1151, 1160, submit=1150, sector=72_000, iflags=abi.F_META),
    ], fsyncs=[fsync(100, 1010, 1100, fs=abi.FS_BTRFS, dev=anon)],
        journal=[jev(abi.J_BTRFS_COMMIT, 1180, 77, fs=abi.FS_BTRFS, dev=anon)],
        meta_obj=m)
    r = run(p)
    assert r["requests"]["log"]["count"] == 2
    assert r["requests"]["metadata"]["count"] == 2
    assert r["fsync"]["split_ns"] == {"data": 18, "commit": 60, "flush": 0, "other": 12}
    b = r["commits"]["btrfs"]
    assert b == {"transaction_commits": 1, "log_syncs": 1}
    assert r["commits"]["count"] == 2


def test_btrfs_sleeps_another_log_sync_ended_are_the_commits(tmp_path):
    # btrfs (anonymous dev 0:45). One call of each type, so that each call's split is its
    # type's:
    # - fsync [1010,1100) of 100 syncs the log: its log write submitted at 1040, so its
    #   commit runs [1040,1100), but for its own cache flush (an empty PREFLUSH) 1060-1080:
    #   commit 40, flush 20, other 30.
    # - fdatasync [1020,1110) of 102 sleeps [1025, woken 1099) by 100, then in its log
    #   sync on the same filesystem (wait_log_commit): commit 74, other 16.
    # - osync_write [1020,1110) of 103: its sleep [1025, woken 1035) by 100 before 100's
    #   first log write (at 1040: a lock, not the log sync), [1036, woken 1045) in a
    #   softirq on top of 100, [1046, woken 1105) by 100 after 100's call: other 90.
    # - sync_file_range [1020,1110) of 104, on another btrfs (0:46), woken by 100 in its
    #   log sync: other 90.
    m = meta("btrfs")
    anon, other_fs = (0, 45), (0, 46)
    m["filesystems"][0].update({"st_dev_major": anon[0], "st_dev_minor": anon[1]})
    p = write_trace(tmp_path / "t.iowt", end=1200, requests=[
        req(1041, 1050, submit=1040, sector=70_000, iflags=abi.F_META),
        req(0, 1080, submit=1060, nbytes=0, iflags=abi.F_PREFLUSH,
            flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | abi.RQ_NO_ISSUE)],
        fsyncs=[fsync(100, 1010, 1100, fs=abi.FS_BTRFS, dev=anon),
                fsync(102, 1020, 1110, fs=abi.FS_BTRFS, dev=anon, call=abi.CALL_FDATASYNC),
                fsync(103, 1020, 1110, fs=abi.FS_BTRFS, dev=anon, call=abi.CALL_OSYNC_WRITE),
                fsync(104, 1020, 1110, fs=abi.FS_BTRFS, dev=other_fs,
                      call=abi.CALL_SYNC_FILE_RANGE)],
        offcpu=[off(102, 1025, 1100, waking=1099, waker=100),
                off(103, 1025, 1035, waking=1035, waker=100),
                off(103, 1036, 1045, waking=1045, waker=100, ctx=abi.WCTX_SOFTIRQ),
                off(103, 1046, 1106, waking=1105, waker=100),
                off(104, 1025, 1100, waking=1099, waker=100)],
        tasks=[task(100, 1000), *(task(t, 1000, abi.TASK_FORK) for t in (102, 103, 104))],
        meta_obj=m)
    r = run(p)
    assert r["requests"]["log"]["count"] == 1
    by = r["fsync"]["by_call"]
    assert {c: by[c]["split_ns"] for c in by} == {
        "fsync": {"data": 0, "commit": 40, "flush": 20, "other": 30},
        "fdatasync": {"data": 0, "commit": 74, "flush": 0, "other": 16},
        "osync_write": {"data": 0, "commit": 0, "flush": 0, "other": 90},
        "sync_file_range": {"data": 0, "commit": 0, "flush": 0, "other": 90}}
    # The call that synced the log, and the one that waited for its sync: one log sync
    # for two calls.
    assert {c: by[c]["needed_commit"] for c in by} == {
        "fsync": 1, "fdatasync": 1, "osync_write": 0, "sync_file_range": 0}
    assert r["commits"]["btrfs"]["log_syncs"] == 1
    assert r["commits"]["fsyncs_per_commit"] == 2.0


def test_fsync_own_flush_inside_the_xfs_log_force(tmp_path):
    # XFS fsync [1010,1100): log force at 1040 (its commit to the exit), then, as when
    # another task wrote the iclog, its own empty PREFLUSH 1070-1090: commit 40,
    # flush 20, other 30.
    j = [jev(abi.J_XFS_FORCE, 1040, 9, tid=100, fs=abi.FS_XFS)]
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(0, 1090, submit=1070, nbytes=0, iflags=abi.F_PREFLUSH,
            flags=abi.RQ_TRACKED | abi.RQ_FLUSH_SEQ | abi.RQ_NO_ISSUE)],
        fsyncs=[fsync(100, 1010, 1100, seq=9, fs=abi.FS_XFS)], journal=j,
        meta_obj=meta("xfs"))
    r = run(p)
    assert r["fsync"]["split_ns"] == {"data": 0, "commit": 40, "flush": 20, "other": 30}


# -- classification ---------------------------------------------------------------------------

def test_classification_rules():
    m = meta()
    m["filesystems"][0]["log"]["fc_ranges"] = [[30_000, 30_100]]
    rows = [
        (req(1, 2, op=abi.OP_FLUSH), "flush"),
        (req(0, 2, nbytes=0, iflags=abi.F_PREFLUSH), "flush"),
        # PREFLUSH and FUA stay attributes of the write that carried them
        (req(1, 2, iflags=abi.F_PREFLUSH | abi.F_FUA, sector=50), "data"),
        (req(1, 2, iflags=abi.F_PREFLUSH | abi.F_FUA, sector=LOG_RANGE[0]), "log"),
        (req(1, 2, sector=LOG_RANGE[1] - 1), "log"),
        (req(1, 2, sector=LOG_RANGE[1]), "data"),
        (req(1, 2, sector=30_050), "log"),  # fast-commit area
        (req(1, 2, sector=LOG_RANGE[0], dev=(8, 16)), "data"),  # another disk
        (req(1, 2, iflags=abi.F_META, sector=5), "metadata"),
        (req(1, 2, op=abi.OP_READ, iflags=abi.F_META), "metadata"),
        (req(1, 2, op=abi.OP_READ, iflags=abi.F_RAHEAD), "readahead"),
        (req(1, 2, op=abi.OP_READ, sector=LOG_RANGE[0]), "read"),  # journal replay read
        (req(1, 2, op=abi.OP_DISCARD, sector=LOG_RANGE[0]), "discard"),
        (req(1, 2, op=abi.OP_WRITE, iflags=abi.F_SYNC), "data"),
    ]
    arr = records(abi.REQUEST_DTYPE, [r for r, _ in rows])
    got = [CLASS_NAMES[c] for c in classify(arr, m)]
    assert got == [c for _, c in rows]


# -- seeks, placement, locality -----------------------------------------------------------------

def test_seeks_placement_positioning(tmp_path):
    # Disk A in issue order: r0 (no seek: first), r1..r3 contiguous (seek 0), a flush
    # (skipped by the seeks), r4 far away (seek 5000 - 1032 = 3968), r5 back (50 - 5008).
    # Service times (completion order: r0 1015, r1 1030, r2 1051, FF 1065, r3 1082, r4
    # 1133, r5 1150): r1 10, r2 1051 - 1031 = 20, r3 1082 - max(1052, FF's 1065) = 17
    # (it waited for the flush inside the device), r4 50, r5 10.
    # Zero-seek 4 KiB data 10, 17, 20: baseline 17 (median), p90 20; the device fit
    # (one size: slope 0, a = 17) has residuals -7, 0, 3: spread p90 - p50 = 3. Threshold
    # max(20 - 17, 3) = 3. r4: 50 - 17 = 33 > 3 counts; r5: 10 - 17 does not.
    # Disk B: 7000 (first), then 7100: seek 7100 - 7008 = 92.
    p = write_trace(tmp_path / "t.iowt", end=1300, requests=[
        req(1010, 1015, sector=1000),
        req(1020, 1030, sector=1008),
        req(1031, 1051, sector=1016),
        req(1052, 1082, sector=1024),
        req(1060, 1065, op=abi.OP_FLUSH),
        req(1083, 1133, sector=5000),
        req(1015, 1016, sector=7000, dev=(8, 16), op=abi.OP_READ),
        req(1035, 1036, sector=7100, dev=(8, 16), op=abi.OP_READ),
        req(1140, 1150, sector=50),
    ])
    r = run(p)
    d = r["placement"]["data"]
    assert d["requests_with_seek"] == 5
    assert d["sequential_share"] == 0.6
    assert d["positioning_ns"] == 33
    assert d["positioning_basis"] == 5 and d["positioned_requests"] == 1
    assert d["baseline"] == "zero-seek bucket"
    assert d["baseline_requests"] == {"zero-seek bucket": 2, "device fit": 0,
                                      "fastest decile": 0}
    assert d["device_ns"] == 10 + 20 + 17 + 50 + 10  # service times
    # device_ns percentiles keep their definition: issue to final completion (5, 10, 20,
    # 30, 50, 10: r3's stage 30 includes the flush it waited for)
    assert r["requests"]["data"]["device_ns"] == {"p50": 10, "p90": 50, "p99": 50, "max": 50}
    # |seeks| 0,0,0,3968,4958 -> slots 0 x3, 12 (3968), 13 (4958)
    assert d["seek_hist_log2"] == [3] + [0] * 11 + [1, 1]
    assert r["requests"]["data"]["seek_sectors"]["p50"] == 0
    rd = r["placement"]["read"]
    assert rd["requests_with_seek"] == 1 and rd["seek_sectors"]["p50"] == 92
    # Disk B has no zero-seek request: the one read is its own fastest decile and p90.
    assert rd["baseline"] == "fastest decile" and rd["positioning_ns"] == 0
    tr = read_trace(p)
    vals, unit = metric_values(tr, "seek", "data")
    assert unit == "sectors" and sorted(vals.tolist()) == [0, 0, 0, 3968, 4958]


def test_positioning_leaves_out_time_queued_in_the_device(tmp_path):
    # One disk serving one request at a time. r0 (first), r1..r3 contiguous, each alone:
    # service 10. Then r4, r5, r6 issued together at 1050 to far places (seeks 3968,
    # 3992, 11992) and served one after the other: completions 1080, 1110, 1140. Their
    # device stages are 30, 60, 90 (queued behind each other), their service 30 each.
    # (Sectors avoid the journal, [10000, 20000).)
    # r7 and r8 complete out of order: r8 [1155, 1170) service 15, r7 [1150, 1200) after
    # it: 1200 - 1170 = 30. r9 [1210, 1230) and r10 [1215, 1230) complete at the same
    # instant: in issue order r9 (1230 - max(1210, 1200) = 20), then r10 (0).
    # Baseline 10 (zero-seek), threshold 0: positioning 3 x 20 + 20 + 5 + 10 = 95 (the
    # data stages would give 20 + 50 + 80 + ...).
    rows = [req(1010, 1020, sector=1000), req(1020, 1030, sector=1008),
            req(1030, 1040, sector=1016), req(1040, 1050, sector=1024),
            req(1050, 1080, sector=5000), req(1050, 1110, sector=9000),
            req(1050, 1140, sector=21000),
            req(1150, 1200, sector=25000), req(1155, 1170, sector=29000),
            req(1210, 1230, sector=33000), req(1215, 1230, sector=37000)]
    r = run(write_trace(tmp_path / "t.iowt", end=1300, requests=rows))
    d = r["placement"]["data"]
    assert d["requests_with_seek"] == 10 and d["sequential_share"] == 0.3
    assert d["positioning_ns"] == 95
    assert d["positioned_requests"] == 6
    assert d["device_ns"] == 3 * 10 + 3 * 30 + 30 + 15 + 20 + 0
    # The service intervals of a device completing in order tile its busy time.
    busy = r["devices"][0]["busy_ns"]
    assert busy == 10 + 3 * 10 + 3 * 30 + (1200 - 1150) + (1230 - 1210)
    # the device view keeps its definitions: up to 3 in flight
    assert r["devices"][0]["queue_depth"]["max"] == 3
    assert r["requests"]["data"]["device_ns"]["max"] == 90


def test_positioning_baselines_device_fit_and_fastest_decile(tmp_path):
    # Disk A, one request at a time (service = stage). Zero-seek data: 4 KiB r1, r2, r4
    # (10 each) and 64 KiB r3 (40). Device fit through the size-bucket medians (4096, 10)
    # and (65536, 40): slope 30 / 61440 = 1/2048 ns per byte, a = median(10 - 2,
    # 40 - 32) = 8; residuals all 0: spread 0.
    # Metadata (16 KiB, every one seeking, no zero-seek of its own): baseline
    # 8 + 16384 / 2048 = 16, threshold 0: r5 26 -> 10, r6 20 -> 4, r7 16 -> 0.
    # Data r8 (4 KiB, seeks back): zero-seek bucket baseline 10 -> 15.
    # Disk B: reads at scattered places, never contiguous: fastest decile. 10 measured
    # requests, services 5..13 and 50: the decile is {5}: baseline 5; the bucket's p90
    # (9th of 10) is 13: only 50 counts: 45.
    rows = [req(1010, 1020, sector=1000), req(1020, 1030, sector=1008),
            req(1030, 1040, sector=1016), req(1040, 1080, sector=1024, nbytes=65536),
            req(1080, 1090, sector=1152),
            req(1090, 1116, sector=50000, nbytes=16384, iflags=abi.F_META),
            req(1116, 1136, sector=60000, nbytes=16384, iflags=abi.F_META),
            req(1136, 1152, sector=70000, nbytes=16384, iflags=abi.F_META),
            req(1152, 1177, sector=1160)]
    t = 1000
    for i, svc in enumerate([7, 5, 6, 7, 8, 9, 10, 11, 12, 13, 50]):
        rows.append(req(t, t + svc, op=abi.OP_READ, sector=1000 + 2000 * i, dev=(8, 16)))
        t += svc
    m = meta()
    m["devices"].append({"name": "sdy", "major": 8, "minor": 16, "rotational": 1,
                         "write_cache": "write through", "fua": 1})
    r = run(write_trace(tmp_path / "t.iowt", end=1300, requests=rows, meta_obj=m))
    md = r["placement"]["metadata"]
    assert md["requests_with_seek"] == 3 and md["sequential_share"] == 0.0
    assert md["positioning_ns"] == 14 and md["positioned_requests"] == 2
    assert md["baseline"] == "device fit"
    assert md["baseline_requests"] == {"zero-seek bucket": 0, "device fit": 3,
                                       "fastest decile": 0}
    assert md["device_ns"] == 26 + 20 + 16
    d = r["placement"]["data"]
    assert d["positioning_ns"] == 15 and d["baseline"] == "zero-seek bucket"
    assert d["device_ns"] == 10 + 10 + 40 + 10 + 25
    rd = r["placement"]["read"]
    assert rd["requests_with_seek"] == 10
    assert rd["positioning_ns"] == 45 and rd["positioned_requests"] == 1
    assert rd["baseline"] == "fastest decile"
    assert rd["device_ns"] == sum(range(5, 14)) + 50
    f = next(f for f in r["findings"] if f["key"] == "positioning-read")
    assert f["evidence"]["baseline"] == "fastest decile" and "at least" in f["text"]
    # The terminal and HTML placement tables mark that figure as a lower bound.
    from iowhy.reports import html, terminal
    place = terminal.render_report(r).split("PLACEMENT AND LOCALITY")[1].split("FINDINGS")[0]
    rows = {ln.split()[0]: ln for ln in place.splitlines() if ln.startswith("  ")}
    assert ">= 0.045" in rows["read"] and ">=" not in rows["data"]  # 45 ns in us
    assert "\u2265 0.045" in html.render_html(r)


def test_positioning_slow_device_fit_raises_no_warning(tmp_path):
    # A slow disk: zero-seek 4 KiB writes take 60 us, a 64 KiB one 1 ms (about 15 ns per
    # byte). The metadata writes all seek, so their baseline is the device fit. The
    # analysis bounds the baseline of every size bucket, including buckets no request
    # can reach (2^62 bytes at 15 ns per byte is beyond int64): no numpy warning may
    # reach the user's terminal.
    import warnings
    rows, t, sector = [], 1000, 1000
    for nbytes, svc in [(4096, 60_000)] * 3 + [(65536, 1_000_000)]:
        rows.append(req(t, t + svc, sector=sector, nbytes=nbytes))
        t, sector = t + svc, sector + nbytes // 512
    for i, svc in enumerate([400_000, 300_000, 250_000]):
        rows.append(req(t, t + svc, sector=50_000 + 10_000 * i, nbytes=16384,
                        iflags=abi.F_META))
        t += svc
    path = write_trace(tmp_path / "t.iowt", end=t + 1000, requests=rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = run(path)
    md = r["placement"]["metadata"]
    assert md["baseline"] == "device fit" and md["requests_with_seek"] == 3
    assert md["positioned_requests"] >= 1


def test_positioning_ignores_jitter_within_the_baselines_spread(tmp_path):
    # Zero-seek 4 KiB data services 10, 12, 11, 13, 30 (jitter): median 12, p90 30, so
    # the threshold is 18 (the device fit, one size, has the same spread: residuals
    # -2, -1, 0, 1, 18). Seeking requests: 14 (+2), 29 (+17), 31 (+19), 9 (-3): only 19
    # is beyond the noise. The old sum of every excess would be 2 + 17 + 19 - 3 = 35; the
    # zero-seek requests' own deviations (+18 for the 30) add nothing either.
    rows, t = [], 1000
    for sector, svc in [(1000, 5), (1008, 10), (1016, 12), (1024, 11), (1032, 13),
                        (1040, 30), (5000, 14), (9000, 29), (21000, 31), (25000, 9)]:
        rows.append(req(t, t + svc, sector=sector))
        t += svc
    d = run(write_trace(tmp_path / "t.iowt", end=1300, requests=rows))["placement"]["data"]
    assert d["positioning_ns"] == 19
    assert d["positioned_requests"] == 1 and d["positioning_basis"] == 9
    assert d["device_ns"] == 10 + 12 + 11 + 13 + 30 + 14 + 29 + 31 + 9


def test_locality(tmp_path):
    # On-disk order (equal starts by issue time): 100 (w1), 108 (w2, issued 1015),
    # 108 (w5, issued 1150), 116 (w3, issued 1100), 500 (w4).
    # Adjacent consecutive pairs: (w1,w2) 5 ns apart; (w5,w3) 50 ns apart -> late (gap 20).
    p = write_trace(tmp_path / "t.iowt", end=1300, requests=[
        req(1010, 1011, sector=100), req(1015, 1016, sector=108),
        req(1100, 1101, sector=116), req(1120, 1121, sector=500),
        req(1150, 1151, sector=108, iflags=abi.F_META),
    ])
    loc = run(p, locality_gap_ns=20)["locality"]
    assert loc == {"gap_ns": 20, "adjacent_pairs": 2, "late_pairs": 1, "late_share": 0.5,
                   "writes": 5}


def test_metadata_data_ratio(tmp_path):
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(1010, 1011, nbytes=8192), req(1012, 1013, nbytes=4096, sector=9),
        req(1014, 1015, iflags=abi.F_META, nbytes=12288, sector=77),
        req(1016, 1017, iflags=abi.F_META, op=abi.OP_READ, nbytes=4096, sector=5),  # a read
    ])
    r = run(p)
    assert r["metadata_data_ratio"] == 1.0
    assert r["metadata_data"]["metadata_requests"] == 1 and r["metadata_data"]["data_requests"] == 2


# -- outputs ------------------------------------------------------------------------------

REQUIRED = {"elapsed_ns", "attribution_ns", "requests", "fsync", "commits",
            "metadata_data_ratio", "lost_events"}


def test_json_keys_and_sums(tmp_path):
    p = busy_trace(tmp_path)
    r = run(p)
    assert REQUIRED <= set(r)
    assert_sums(r)
    for name in CLASS_NAMES:
        c = r["requests"][name]
        assert {"count", "bytes", "device_ns"} <= set(c)
        assert {"p50", "p99", "max"} <= set(c["device_ns"])
    assert {"count", "latency_ns"} <= set(r["fsync"])
    assert {"p50", "p90", "p99", "max"} <= set(r["fsync"]["latency_ns"])
    assert {"count", "fsyncs_per_commit"} <= set(r["commits"])
    assert r["commits"]["count"] > 0 and r["fsync"]["count"] > 0
    json.loads(json.dumps(r))  # plain JSON types only
    # single-threaded and threaded runs agree
    assert run(p, threads=1) == r


def test_terminal_report_fits_100_columns(tmp_path):
    from iowhy.reports.terminal import render_report, render_where
    p = busy_trace(tmp_path, counters={"lost_ringbuf_request": 12, "lost_rqmap_full": 1})
    r = run(p)
    text = render_report(r)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 100
    assert lines[1].startswith("! 13 events lost in the kernel")  # drops come first, in words
    for head in ("WHERE THE TIME WENT", "REQUESTS BY CLASS", "FSYNC AND COMMITS", "DEVICES",
                 "PLACEMENT AND LOCALITY", "FINDINGS"):
        assert head in text
    assert "workload    star -x -f linux-6.1.tar\n" in text
    assert "; pid 1000, 8 thread(s)" in text
    assert max(len(x) for x in render_where(r).splitlines()) <= 100
    for f in r["findings"]:
        assert f["text"] and f["weight_ns"] > 0
    weights = [f["weight_ns"] for f in r["findings"]]
    assert weights == sorted(weights, reverse=True)


def test_truncated_trace_says_so_first(tmp_path):
    from iowhy.reports.terminal import render_report
    from iowhy.summary import short_summary
    p = busy_trace(tmp_path, trailer=False)
    r = run(p)
    assert r["trace"]["truncated"]
    assert render_report(r).splitlines()[0].startswith("WARNING: trace is truncated")
    assert short_summary(p).splitlines()[0].startswith("trace is truncated")
    assert_sums(r)


def test_barrier_finding_wording(tmp_path):
    # 3 fsyncs, each waiting on one FF flush of 30 ns while blocked.
    reqs, offs, fss = [], [], []
    for i in range(3):
        t = 1010 + 30 * i
        reqs.append(req(t, t + 30, op=abi.OP_FLUSH, flags=0))
        offs.append(off(100, t, t + 30))
        fss.append(fsync(100, t - 1, t + 30))
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs, fsyncs=fss))
    f = r["findings"][0]
    assert f["key"] == "barrier"
    assert f["text"].startswith("90% of elapsed is waiting on cache flushes (barrier): 3 cache "
                                "flushes, median 30 ns; "
                                "3 fsync-family calls (fsync) caused them")


def test_hist_text_shape():
    from iowhy.reports.hist import log2_counts, render_log2_hist
    counts = log2_counts([0, 1, 3, 3, 900, 1000, 1500])
    assert counts == [2, 2] + [0] * 7 + [2, 1]
    text = render_log2_hist(counts, "usecs")
    lines = text.splitlines()
    assert lines[0] == "     usecs               : count    distribution"
    assert lines[1] == "         0 -> 1          : 2        |" + "*" * 40 + "|"
    assert lines[10] == "       512 -> 1023       : 2        |" + "*" * 40 + "|"
    assert lines[11] == "      1024 -> 2047       : 1        |" + "*" * 20 + " " * 20 + "|"
    assert len(lines) == 12
    assert render_log2_hist([], "usecs") == ""


def test_cli_report_json_end_to_end(tmp_path, capsys):
    from iowhy.cli import main
    p = busy_trace(tmp_path)
    assert main(["report", p, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert REQUIRED <= set(out)
    assert not any(k.startswith("_") for k in out)
    assert sum(out["attribution_ns"].values()) == out["elapsed_ns"]
    assert main(["report", p]) == 0
    text = capsys.readouterr().out
    assert max(len(x) for x in text.splitlines()) <= 100
    assert main(["hist", p, "--metric", "fsync", "--unit", "msecs"]) == 0
    out = capsys.readouterr().out
    assert "     msecs               : count    distribution" in out
    # no log request waited in a queue here: an empty histogram is a failure
    assert main(["hist", p, "--class", "log", "--metric", "queue"]) == 1
    assert "iowhy: no values for queue of log" in capsys.readouterr().err
    png = tmp_path / "h.png"
    assert main(["hist", p, "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors(tmp_path, capsys):
    from iowhy.cli import main
    p = busy_trace(tmp_path)
    assert main(["hist", p, "--class", "nope"]) == 2
    assert "iowhy: unknown class 'nope'" in capsys.readouterr().err
    assert main(["hist", p, "--metric", "commit", "--class", "ext3"]) == 2
    capsys.readouterr()
    assert main(["hist", p, "--png", str(tmp_path / "no" / "h.png")]) != 0
    assert "does not exist" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.iowt")]) != 0
    assert "cannot open" in capsys.readouterr().err
    assert main(["report", p, "--merge-gap-ms", "-1"]) == 2
    capsys.readouterr()
    try:
        import iowhy.reports.html  # noqa: F401
    except ImportError:
        assert main(["report", p, "--html", str(tmp_path / "r.html")]) != 0
        assert "--html is not available" in capsys.readouterr().err


def test_percentiles_nearest_rank():
    from iowhy.kernels import percentiles
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 100, 5000, 20000):
        for zeros in (0.0, 0.3, 0.9, 1.0):
            v = rng.integers(1, 10**6, n)
            v[rng.random(n) < zeros] = 0
            got = percentiles(v.copy(), (50, 90, 99))
            s = np.sort(v)
            for q in (50, 90, 99):
                assert got[f"p{q}"] == int(s[max(0, -(-q * n // 100) - 1)]), (n, zeros, q)
            assert got["max"] == int(s[-1])
    assert percentiles(np.zeros(0, np.int64)) == {"p50": None, "p99": None, "max": None}


def test_lost_issue_is_unobserved(tmp_path):
    # RQ_LOST_ISSUE: the issue was never seen (issue_ns 0); op, sector and length were
    # read at its completion. One task blocked in fsync [1010, 1090): A data [1020,1040)
    # observed; B (data, completed at 1060, issue unknown) must add no time anywhere
    # (taking it as issued at the trace start would have made [1000, 1060) data), and it
    # is counted, with its bytes, as an unobserved request of its class.
    p = write_trace(tmp_path / "t.iowt", requests=[
        req(1020, 1040, sector=50_000),
        req(0, 1060, sector=50_008, data_done=1060,
            flags=abi.RQ_TRACKED | abi.RQ_NO_ISSUE | abi.RQ_LOST_ISSUE),
    ], offcpu=[off(100, 1010, 1090)], fsyncs=[fsync(100, 1010, 1090)],
        counters={"lost_issue": 1})
    r = run(p)
    assert r["attribution_ns"] == {"cpu": 20, "runqueue": 0, "barrier": 0, "log": 0,
                                   "metadata": 0, "data": 20, "read": 0, "wait-other": 60}
    assert_sums(r)
    rq = r["requests"]["data"]
    assert rq["count"] == 2 and rq["lost"] == 1 and rq["bytes"] == 8192
    assert rq["device_ns"] == {"p50": 20, "p90": 20, "p99": 20, "max": 20}
    assert r["devices"][0]["busy_ns"] == 20
    assert r["lost_events"] == 1 and "issue" in r["problems"][0]
