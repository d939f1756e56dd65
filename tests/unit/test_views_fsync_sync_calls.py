"""The FSYNC view covers msync, sync_file_range, syncfs and sync as it covers fsync: each
call's split (own data, commit/log, own flushes, other) on hand-built traces whose
answer is counted by hand in each test.

Times are ns in the window [1000, 1100) (tracebuilder's); the ext4 filesystem is on
PART (8:1) of disk DEV (8:0), a second one on sdy (8:16)."""

from __future__ import annotations


from iowhy import abi

import tracebuilder as tb

OTHER = (8, 16)  # sdy, a second ext4 filesystem (no partition)


def two_fs_meta() -> dict:
    m = tb.meta()
    m["devices"].append(tb.disk("sdy", OTHER))
    m["filesystems"].append(tb.fs_entry("ext4", OTHER, OTHER, "sdy", "/mnt/y",
                                        source="/dev/sdy", part_start_sector=0))
    return m


def commit(tid: int, start: int, end: int, dev=tb.PART) -> list[dict]:
    return [tb.jev(abi.J_JBD2_START, start, tid, dev=dev),
            tb.jev(abi.J_JBD2_END, end, tid, dev=dev)]


def split(r: dict, call: str) -> dict:
    return r["fsync"]["by_call"][call]["split_ns"]


def test_msync_waits_for_the_commit_its_own_writeback_joined(tmp_path):
    # msync [1010, 1060): the inode's tid at entry is 7, long committed; its writeback
    # (data write 1012-1020) allocated blocks and joined transaction 8, whose commit
    # 1025-1055 it waited for. The record says so: SEQ_SPAN, span 1.
    call = tb.fsync(100, 1010, 1060, call=abi.CALL_MSYNC, seq=7)
    spanned = {**call, "flags_u16": call["flags_u16"] | abi.FS_F_SEQ_SPAN, "seq_span_u16": 1}
    reqs = [tb.req(1015, 1020, submit=1012, seq=1)]
    jr = commit(7, 1001, 1005) + commit(8, 1025, 1055)
    r = tb.run(tb.write_trace(tmp_path / "a.iowt", requests=reqs, fsyncs=[spanned],
                              journal=jr))
    # data 1012-1020 = 8, commit 1025-1055 = 30, other 12
    assert split(r, "msync") == {"data": 8, "commit": 30, "flush": 0, "other": 12}
    assert r["fsync"]["by_call"]["msync"]["needed_commit"] == 1
    # Without the exit's tid (a trace of an older recorder) the entry's commit (7) ran
    # before the call: no commit found, as before.
    r = tb.run(tb.write_trace(tmp_path / "b.iowt", requests=reqs, fsyncs=[call], journal=jr))
    assert split(r, "msync") == {"data": 8, "commit": 0, "flush": 0, "other": 42}


def test_a_span_takes_every_commit_up_to_the_exit_tid(tmp_path):
    # fsync [1010, 1090), tid 7 at entry, 9 at exit (another thread's handle overtook):
    # the commits of 8 (1020-1040) and 9 (1050-1080) both ran in the call; the hull
    # 1020-1080 is its commit part (60), and a commit of another filesystem's journal
    # with the same tid (8, on sdy) is not.
    call = tb.fsync(100, 1010, 1090, seq=7)
    call = {**call, "flags_u16": call["flags_u16"] | abi.FS_F_SEQ_SPAN, "seq_span_u16": 2}
    jr = commit(8, 1020, 1040) + commit(9, 1050, 1080) + commit(8, 1012, 1018, dev=OTHER)
    r = tb.run(tb.write_trace(tmp_path / "t.iowt", fsyncs=[call], journal=jr,
                              meta_obj=two_fs_meta()))
    assert split(r, "fsync") == {"data": 0, "commit": 60, "flush": 0, "other": 20}


def test_sync_file_range_counts_its_own_data_writes(tmp_path):
    # sync_file_range [1010, 1050): no sync event, no commit; its data writes 1012-1030
    # and 1025-1040 (union 28) are its own data.
    call = {**tb.fsync(100, 1010, 1050, call=abi.CALL_SYNC_FILE_RANGE, fs=abi.FS_NONE,
                       dev=(0, 0)), "flags_u16": 0}
    reqs = [tb.req(1015, 1030, submit=1012, seq=1), tb.req(1026, 1040, submit=1025, seq=2)]
    r = tb.run(tb.write_trace(tmp_path / "t.iowt", requests=reqs, fsyncs=[call],
                              journal=commit(3, 1041, 1045)))
    assert split(r, "sync_file_range") == {"data": 28, "commit": 0, "flush": 0, "other": 12}


def sync_trace(path, call: int, dev=(0, 0), fs: int = abi.FS_NONE, more=()) -> str:
    # A sync-like call [1010, 1090) of thread 100. The flusher (kworker, tid 300) writes
    # back data on DEV 1012-1030 and on sdy 1015-1035; another user process (dd, tid
    # 400) writes on DEV 1031-1039 (not the call's). Commits: DEV's filesystem 1040-1060,
    # sdy's 1062-1070, and one of DEV's that ended before the call (1001-1008).
    c = {**tb.fsync(100, 1010, 1090, call=call, fs=fs, dev=dev),
         "flags_u16": abi.FS_F_FSEVENT if fs else 0}
    origin = abi.RQ_ORIGIN
    kw, dd = {"comm": b"kworker/u8:2"}, {"comm": b"dd"}
    reqs = [{**tb.req(1013, 1030, submit=1012, flags=origin, tid=300, seq=1), **kw},
            {**tb.req(1016, 1035, submit=1015, flags=origin, tid=300, seq=2, dev=OTHER), **kw},
            {**tb.req(1032, 1039, submit=1031, flags=origin, tid=400, seq=3), **dd}, *more]
    jr = commit(5, 1001, 1008) + commit(6, 1040, 1060) + commit(2, 1062, 1070, dev=OTHER)
    return tb.write_trace(path, requests=reqs, fsyncs=[c], journal=jr,
                          meta_obj=two_fs_meta())


def test_sync_waits_for_the_writeback_and_commits_of_every_filesystem(tmp_path):
    r = tb.run(sync_trace(tmp_path / "t.iowt", abi.CALL_SYNC))
    # data: the flusher's writes 1012-1035 (the dd write is another process's) = 23;
    # commit: the hull of DEV's (1040-1060) and sdy's (1062-1070) commits, 1040-1070 =
    # 30; other: 80 - 53 = 27. Both filesystems' disks are the workload's.
    assert split(r, "sync") == {"data": 23, "commit": 30, "flush": 0, "other": 27}
    assert r["fsync"]["by_call"]["sync"]["needed_commit"] == 1
    assert sorted(r["workload"]["devices"]) == ["sdy", "sdz"]
    assert r["commits"]["jbd2"]["count"] == 3


def test_the_commits_flushes_a_sync_waited_for_are_the_commits(tmp_path):
    # As above, and the journal's cache flush on DEV 1045-1055, inside DEV's commit: a
    # flush the sync waited for, but not one it issued, so the commit's (as the
    # commit's own in an fsync); the split is the one without it.
    ff = tb.req(1045, 1055, op=abi.OP_FLUSH, seq=4, flags=abi.RQ_FLUSH_SEQ, tid=0)
    r = tb.run(sync_trace(tmp_path / "t.iowt", abi.CALL_SYNC, more=[ff]))
    assert split(r, "sync") == {"data": 23, "commit": 30, "flush": 0, "other": 27}
    # The same flush from 1065 to 1075 is after the commits' hull (1040-1070) by 5.
    ff = tb.req(1065, 1075, op=abi.OP_FLUSH, seq=4, flags=abi.RQ_FLUSH_SEQ, tid=0)
    r = tb.run(sync_trace(tmp_path / "u.iowt", abi.CALL_SYNC, more=[ff]))
    assert split(r, "sync") == {"data": 23, "commit": 30, "flush": 5, "other": 22}


def test_syncfs_covers_its_own_filesystem_only(tmp_path):
    # syncfs of sdy (its ext4_sync_fs event named it): sdy's writeback 1015-1035 and its
    # commit 1062-1070; nothing of DEV's.
    r = tb.run(sync_trace(tmp_path / "t.iowt", abi.CALL_SYNCFS, dev=OTHER, fs=abi.FS_EXT4))
    assert split(r, "syncfs") == {"data": 20, "commit": 8, "flush": 0, "other": 52}
    assert r["workload"]["devices"] == ["sdy"]
    # A syncfs whose filesystem no event named (an older recorder) covers them all.
    r = tb.run(sync_trace(tmp_path / "u.iowt", abi.CALL_SYNCFS))
    assert split(r, "syncfs") == {"data": 23, "commit": 30, "flush": 0, "other": 27}
