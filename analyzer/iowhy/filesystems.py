"""The filesystems iowhy knows, one entry each, in the manner of bcc's `fs_configs[]`
(libbpf-tools/fsslower.c): its journal, the kernel threads that write it, where its log
lies on the disk (the superblock parser, superblocks.py), its tracepoints and how the lab
makes one, what its journal's events bound (commits, iclog writes, the commits its fsync
calls make in their own task). A new filesystem is one entry here plus its superblock
parser; a new kind of journal also needs its figures (views/commits.py JOURNAL_FIGURES),
their report lines (reports/terminal.py COMMIT_LINES, reports/html.py COMMIT_ROWS) and,
where its fsync calls wait for commits another thread makes, how a call finds its commit
(views/fsync.py, as _jbd2_commits).

What the records call a filesystem (`fs_u16`) is abi.FS_NAMES (it mirrors
probes/iowhy.h); a journal event, abi.JOURNAL_EVENT_NAMES. This module names both by
those names and stays free of numpy: metadata.collect() runs in `iowhy record`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .superblocks import BTRFS_SUPER_OFFSETS, SECTOR, ReadFn, _btrfs_info, _ext4_info, _xfs_info

# (read, the partition's first whole-disk sector, the device's size in bytes when asked)
# -> {"uuid", "block_bytes", "log": {"kind", "ranges", "fc_ranges", "bytes"}, ...}
SuperblockParser = Callable[[ReadFn, int, Callable[[], Optional[int]]], dict]


@dataclass(frozen=True)
class JournalSpan:
    """A stretch of a journal's work that two of its events bound: from a `begin` to the
    next `end` of the same filesystem with the same `key` field (the record's `seq`: one
    commit or iclog; its `tid`: work done in the calling task). The exports draw each
    as a slice (export/timeline.py)."""

    label: str  # the slice's name ("{seq}": the record's seq)
    begin: str  # journal events (abi.JOURNAL_EVENT_NAMES)
    end: str
    key: str = "seq"  # "seq" or "tid"
    args: tuple[tuple[str, str], ...] = (("seq", "seq"),)  # (the slice's argument, field)
    # (journal event, phase): the phases it is cut into, each from its event on.
    phases: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Filesystem:
    name: str  # as mountinfo, META and abi.FS_NAMES name it
    journal: str  # its journal's key in the commits view (views/commits.py)
    log_word: str  # its log in labels: "ext4 journal", "xfs log"
    superblock: SuperblockParser  # where its log lies (META `log`)
    # Comm prefixes of the kernel threads that write its journal or log: helpers the
    # recorder follows (HELPER_THREADS below).
    journal_threads: tuple[bytes, ...]
    # The level-one category (iowhy.categories) of a wait one of them ends: what it
    # did for the waiter (jbd2: a commit, `log`; xfsaild: metadata written back).
    journal_thread_serves: str
    # Names its kernel threads take (regular expressions, views/background.py).
    kernel_threads: tuple[bytes, ...]
    fsync_tracepoints: tuple[str, ...]  # its fsync-family tracepoints (probes/iowhy.bpf.c)
    fsync_entry: str  # the one of them at an fsync's entry, naming the inode (ftrace import)
    # (tracepoint, the journal event it records), probes/iowhy.bpf.c.
    journal_tracepoints: tuple[tuple[str, str], ...]
    # The stretches of its journal's work its events bound (commits, iclog writes).
    journal_spans: tuple[JournalSpan, ...]
    # Journal events of a commit made in the calling task of an fsync-family call
    # (views/fsync.py): the call waited for it from the first of them on, to the last
    # (ext4's fast commit) or to its exit (an XFS log force waits for the iclog writes).
    call_commit: tuple[str, ...]
    call_commit_to_exit: bool
    # (label, journal event) drawn as marks under the fsync calls (views/series.py).
    commit_marks: tuple[tuple[str, str], ...]
    mkfs: tuple[str, ...]  # the lab's mkfs command (the device follows)
    nobarrier_option: str | None = None  # the mount option that sends no cache flush
    external_log_option: str | None = None  # the mount option naming an external log
    members_by_fsid: bool = False  # one filesystem over several devices, found by its fsid
    # Its log writes are the REQ_META writes its fsync calls submit (no log region).
    log_in_fsync: bool = False
    # Partition sectors whose writes are always its log's (model/classify.py).
    log_sectors: tuple[int, ...] = ()


def _ext4(read: ReadFn, part_start: int, device_bytes: Callable[[], int | None]) -> dict:
    return _ext4_info(read, part_start)


def _xfs(read: ReadFn, part_start: int, device_bytes: Callable[[], int | None]) -> dict:
    return _xfs_info(read, part_start)


def _btrfs(read: ReadFn, part_start: int, device_bytes: Callable[[], int | None]) -> dict:
    return _btrfs_info(read, part_start, device_bytes())


FILESYSTEMS: tuple[Filesystem, ...] = (
    Filesystem(
        "ext4", "jbd2", "journal", _ext4,
        journal_threads=(b"jbd2/",), journal_thread_serves="log",
        kernel_threads=(rb"jbd2/", rb"ext4-"),
        fsync_tracepoints=("ext4_sync_file_enter", "ext4_sync_file_exit", "ext4_sync_fs"),
        fsync_entry="ext4_sync_file_enter",
        journal_tracepoints=(
            ("jbd2_start_commit", "jbd2_start"), ("jbd2_commit_locking", "jbd2_locking"),
            ("jbd2_commit_flushing", "jbd2_flushing"), ("jbd2_commit_logging", "jbd2_logging"),
            ("jbd2_end_commit", "jbd2_end"), ("jbd2_run_stats", "jbd2_stats"),
            ("ext4_fc_commit_start", "ext4_fc_start"), ("ext4_fc_commit_stop", "ext4_fc_stop")),
        journal_spans=(
            JournalSpan("commit {seq}", "jbd2_start", "jbd2_end",
                        phases=(("jbd2_locking", "locking"), ("jbd2_flushing", "flushing"),
                                ("jbd2_logging", "logging"))),
            JournalSpan("fast commit", "ext4_fc_start", "ext4_fc_stop", key="tid",
                        args=(("tid", "tid"),))),
        call_commit=("ext4_fc_start", "ext4_fc_stop"), call_commit_to_exit=False,
        commit_marks=(("jbd2 commit end", "jbd2_end"), ("ext4 fast commit", "ext4_fc_stop")),
        # Inode tables and the journal zeroed by mkfs, so no ext4lazyinit thread writes
        # into the measured window.
        mkfs=("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"),
        nobarrier_option="barrier=0"),
    Filesystem(
        "xfs", "xfs", "log", _xfs,
        journal_threads=(b"xfsaild",), journal_thread_serves="metadata",
        kernel_threads=(rb"xfsaild/", rb"xfs-", rb"xfs_"),
        fsync_tracepoints=("xfs_file_fsync",),
        fsync_entry="xfs_file_fsync",
        journal_tracepoints=(
            ("xfs_log_force", "xfs_log_force"), ("xlog_iclog_sync", "xlog_iclog_sync"),
            ("xlog_iclog_write", "xlog_iclog_write"),
            ("xlog_iclog_sync_done", "xlog_iclog_done")),
        journal_spans=(JournalSpan("iclog write", "xlog_iclog_sync", "xlog_iclog_done",
                                   args=(("seq", "seq"), ("lsn", "seq"))),),
        call_commit=("xfs_log_force",), call_commit_to_exit=True,
        commit_marks=(("xfs log force", "xfs_log_force"), ("xfs iclog done", "xlog_iclog_done")),
        mkfs=("mkfs.xfs", "-q", "-f"),
        # XFS removed `nobarrier` in 4.19 (the lab sets the device write-through instead).
        external_log_option="logdev="),
    Filesystem(
        "btrfs", "btrfs", "log", _btrfs,
        journal_threads=(), journal_thread_serves="log",
        kernel_threads=(rb"btrfs-",),
        fsync_tracepoints=("btrfs_sync_file",),
        fsync_entry="btrfs_sync_file",
        journal_tracepoints=(("btrfs_sync_file", "btrfs_sync_file"),
                             ("btrfs_transaction_commit", "btrfs_transaction_commit")),
        journal_spans=(),
        call_commit=(), call_commit_to_exit=False,
        commit_marks=(("btrfs txn commit", "btrfs_transaction_commit"),),
        mkfs=("mkfs.btrfs", "-q", "-f"),
        nobarrier_option="nobarrier",
        members_by_fsid=True,
        log_in_fsync=True,
        # Its superblock copies (partition sectors 128, 131072, 536870912): every
        # commit rewrites them.
        log_sectors=tuple(off // SECTOR for off in BTRFS_SUPER_OFFSETS)),
)

BY_NAME: dict[str, Filesystem] = {f.name: f for f in FILESYSTEMS}
NAMES: tuple[str, ...] = tuple(BY_NAME)

# Comm prefixes of the kernel threads, none a filesystem's own, that work for any
# workload: kworkers (end-I/O work, writeback, kblockd), loop workers, kswapd.
GENERIC_HELPER_THREADS: tuple[bytes, ...] = (b"kworker/", b"loop", b"kswapd")
# Every kernel thread the recorder treats as a helper, by the prefix of its comm: the
# journal threads of the table, then the generic ones. The probes hold the same list
# (helper_name() in probes/iowhy.bpf.c; tests/unit/test_filesystems.py checks they
# agree); model/wakeups.py names a waker among them a helper.
HELPER_THREADS: tuple[bytes, ...] = (
    *(t for f in FILESYSTEMS for t in f.journal_threads), *GENERIC_HELPER_THREADS)
