"""numpy mirror of probes/iowhy.h: record dtypes and constants.

tests/test_abi.py compiles the C header and checks every size and offset here.
"""

from __future__ import annotations

import numpy as np

FORMAT_VERSION = 10
# Older versions the reader still takes (their records are widened to this version's).
READ_VERSIONS = (3, 4, 5, 6, 7, 8, 9, 10)
# The first version whose task records carry the task's cgroup (TASK_DTYPE cgroup_id).
CGROUP_VERSION = 9
# The first version whose recorder writes the off-CPU intervals still open at stop
# (OFF_OPEN_END): in older recordings a thread asleep at the stop has no interval for
# that sleep, which then reads as time on CPU.
OPEN_END_VERSION = 10
# The version of a file without compacted chunks (what TraceWriter writes unless asked to
# compact): the lowest that holds it, so that readers of version 5 read it.
BASE_VERSION = 5
COMM_LEN = 16
FILE_MAGIC = b"IOWHYTRC"
CHUNK_MAGIC = b"IWCK"

REC_REQUEST = 1
REC_FSYNC = 2
REC_JOURNAL = 3
REC_OFFCPU = 4
REC_TASK = 5
REC_SYSCALL = 6
REC_THREAD = 7
REC_BIO = 8
REC_HELPER = 9

CHUNK_META = 0x100
CHUNK_RECORDER = 0x101
CHUNK_PROGRESS = 0x102
CHUNK_TRAILER = 0x1FF
# Flag in a chunk's type (version 5): the payload is a zstd frame; data_bytes is its size
# decompressed, crc32 covers the stored bytes.
CHUNK_ZSTD = 0x8000
# Flag in a compressed record chunk's type (version 6): the records are compacted before
# compression (tracedecode.py, docs/trace-format.md COMPACTED RECORD CHUNKS).
CHUNK_COMPACT = 0x4000
JSON_CHUNKS = {CHUNK_META: "meta", CHUNK_RECORDER: "recorder", CHUNK_PROGRESS: "progress",
               CHUNK_TRAILER: "trailer"}

# request flags_u16
RQ_INCOMPLETE = 1 << 0
RQ_TRACKED = 1 << 1
RQ_ORIGIN = 1 << 2
RQ_FLUSH_SEQ = 1 << 3
RQ_NO_ISSUE = 1 << 4
RQ_UNMATCHED = 1 << 5
RQ_LOST_DONE = 1 << 6
RQ_LOST_ISSUE = 1 << 7

OP_READ, OP_WRITE, OP_FLUSH, OP_DISCARD, OP_OTHER = 0, 1, 2, 3, 15

F_SYNC = 1 << 0
F_META = 1 << 1
F_FUA = 1 << 2
F_PREFLUSH = 1 << 3
F_RAHEAD = 1 << 4
F_PRIO = 1 << 5
F_IDLE = 1 << 6

CALL_FSYNC = 1
CALL_FDATASYNC = 2
CALL_SYNC = 3
CALL_SYNCFS = 4
CALL_SYNC_FILE_RANGE = 5
CALL_MSYNC = 6
CALL_OSYNC_WRITE = 7
CALL_NAMES = {CALL_FSYNC: "fsync", CALL_FDATASYNC: "fdatasync", CALL_SYNC: "sync",
              CALL_SYNCFS: "syncfs", CALL_SYNC_FILE_RANGE: "sync_file_range",
              CALL_MSYNC: "msync", CALL_OSYNC_WRITE: "osync_write"}

FS_NONE, FS_EXT4, FS_XFS, FS_BTRFS = 0, 1, 2, 3
FS_NAMES = {FS_NONE: "", FS_EXT4: "ext4", FS_XFS: "xfs", FS_BTRFS: "btrfs"}

FS_F_DATASYNC = 1 << 0
FS_F_FSEVENT = 1 << 1
FS_F_SEQ = 1 << 2
FS_F_INCOMPLETE = 1 << 3
FS_F_LATE_ENTER = 1 << 4
FS_F_EXIT_UNSEEN = 1 << 5
FS_F_SEQ_SPAN = 1 << 6

J_JBD2_START = 1
J_JBD2_LOCKING = 2
J_JBD2_FLUSHING = 3
J_JBD2_LOGGING = 4
J_JBD2_END = 5
J_JBD2_STATS = 6
J_EXT4_FC_START = 7
J_EXT4_FC_STOP = 8
J_XFS_FORCE = 9
J_XLOG_SYNC = 10
J_XLOG_WRITE = 11
J_XLOG_DONE = 12
J_BTRFS_SYNC = 13
J_BTRFS_COMMIT = 14
JOURNAL_EVENT_NAMES = {
    J_JBD2_START: "jbd2_start", J_JBD2_LOCKING: "jbd2_locking", J_JBD2_FLUSHING: "jbd2_flushing",
    J_JBD2_LOGGING: "jbd2_logging", J_JBD2_END: "jbd2_end", J_JBD2_STATS: "jbd2_stats",
    J_EXT4_FC_START: "ext4_fc_start", J_EXT4_FC_STOP: "ext4_fc_stop",
    J_XFS_FORCE: "xfs_log_force", J_XLOG_SYNC: "xlog_iclog_sync", J_XLOG_WRITE: "xlog_iclog_write",
    J_XLOG_DONE: "xlog_iclog_done", J_BTRFS_SYNC: "btrfs_sync_file",
    J_BTRFS_COMMIT: "btrfs_transaction_commit",
}
# By name (iowhy.filesystems names the filesystems and their journal events so).
FS_CODES = {v: k for k, v in FS_NAMES.items() if v}
JOURNAL_EVENT_CODES = {v: k for k, v in JOURNAL_EVENT_NAMES.items()}

OFF_PREEMPT = 1 << 0
OFF_IOWAIT = 1 << 1
OFF_D = 1 << 2
OFF_LATE_END = 1 << 3
OFF_WAKER_RQ = 1 << 4
OFF_FROM_START = 1 << 5
OFF_HELPER = 1 << 6
OFF_THROTTLE_DIRTY = 1 << 7
OFF_THROTTLE_BLOCK = 1 << 8
OFF_OPEN_END = 1 << 9

# offcpu waker_ctx_u16: the context the wakeup ran in
WCTX_UNKNOWN, WCTX_TASK, WCTX_SOFTIRQ, WCTX_HARDIRQ, WCTX_NMI = 0, 1, 2, 3, 4
WCTX_NAMES = {WCTX_UNKNOWN: "", WCTX_TASK: "task", WCTX_SOFTIRQ: "softirq",
              WCTX_HARDIRQ: "hardirq", WCTX_NMI: "nmi"}

# thread flags_u16
THR_ON_CPU = 1 << 0
THR_NO_SYSCALL = 1 << 1

# EXIT: the thread starts to exit; DEAD: its last switch-out, the end of its life; JOIN: its
# process joined the followed cgroup (--cgroup) while recording, its life in the trace starts
TASK_ROOT, TASK_FORK, TASK_EXEC, TASK_EXIT, TASK_DEAD, TASK_JOIN = 1, 2, 3, 4, 5, 6

# Loss and anomaly counters (trailer "counters"), in IOWHY_C_* order.
COUNTER_NAMES = (
    "lost_ringbuf_request", "lost_ringbuf_fsync", "lost_ringbuf_journal", "lost_ringbuf_offcpu",
    "lost_ringbuf_task", "lost_rqmap_full", "lost_taskmap_full", "lost_trackmap_full",
    "lost_biomap_full", "unmatched_completion", "request_without_origin", "requests_merged",
    "bio_walk_capped", "lost_completion", "lost_issue", "lost_switch_in", "lost_syscall_exit",
    "late_syscall_entry", "lost_ringbuf_bio", "lost_ringbuf_helper",
)
# Counters that mean an event was lost (the rest are anomalies that lose nothing).
LOSS_COUNTERS = tuple(n for n in COUNTER_NAMES if n.startswith("lost_"))
# Of those, events the kernel never delivered to the probes (docs/trace-format.md, "Events
# the kernel does not deliver"): each is still a flagged record. The others are drops:
# the ring buffer or a map was full, the remedy is a bigger --ringbuf.
UNSEEN_COUNTERS = ("lost_completion", "lost_issue", "lost_switch_in", "lost_syscall_exit")
DROP_COUNTERS = tuple(n for n in LOSS_COUNTERS if n not in UNSEEN_COUNTERS)
# Losses that take requests (or their origin and flags) out of the device figures; the
# others touch off-CPU intervals, fsync calls, journal events or task tracking only.
REQUEST_LOSS_COUNTERS = ("lost_ringbuf_request", "lost_rqmap_full", "lost_biomap_full",
                         "lost_completion", "lost_issue")

_HDR = [("type", "<u2"), ("size_bytes", "<u2"), ("cpu", "<u4"), ("ts_ns", "<u8")]
_COMM = ("comm", "S16")

REQUEST_DTYPE = np.dtype(_HDR + [
    ("start_sector", "<u8"), ("submit_ns", "<u8"), ("insert_ns", "<u8"), ("issue_ns", "<u8"),
    ("data_done_ns", "<u8"), ("done_ns", "<u8"), ("len_bytes", "<u4"), ("done_bytes", "<u4"),
    ("dev_major", "<u4"), ("dev_minor", "<u4"), ("cmd_flags", "<u4"), ("rq_flags", "<u4"),
    ("bio_flags", "<u4"), ("tgid", "<u4"), ("tid", "<u4"), ("error", "<i4"), ("seq", "<u8"),
    ("op", "u1"), ("pad0", "u1"), ("iflags", "<u2"), ("flags_u16", "<u2"), ("requeues", "<u2"),
    ("nr_bios", "<u4"), ("pad1", "<u4"), _COMM,
])

FSYNC_DTYPE = np.dtype(_HDR + [
    ("enter_ns", "<u8"), ("exit_ns", "<u8"), ("ino", "<u8"), ("commit_seq", "<u8"), ("ret", "<i8"),
    ("tgid", "<u4"), ("tid", "<u4"), ("dev_major", "<u4"), ("dev_minor", "<u4"), ("fd", "<i4"),
    ("syscall_nr", "<u4"), ("call_u16", "<u2"), ("fs_u16", "<u2"), ("flags_u16", "<u2"),
    ("seq_span_u16", "<u2"), _COMM,
])

JOURNAL_DTYPE = np.dtype(_HDR + [
    ("seq", "<u8"), ("aux0", "<u8"), ("aux1", "<u8"), ("aux2", "<u8"),
    ("dev_major", "<u4"), ("dev_minor", "<u4"), ("tgid", "<u4"), ("tid", "<u4"),
    ("event_u16", "<u2"), ("fs_u16", "<u2"), ("pad0", "<u4"), _COMM,
])

_OFFCPU_FIELDS = _HDR + [
    ("start_ns", "<u8"), ("waking_ns", "<u8"), ("end_ns", "<u8"), ("tgid", "<u4"), ("tid", "<u4"),
    ("state", "<u4"), ("syscall_nr", "<i4"), ("waker_tgid", "<u4"), ("waker_tid", "<u4"),
    ("flags_u16", "<u2"), ("waker_ctx_u16", "<u2"), ("waker_preempt_count", "<u4"),
    ("waker_comm", "S16"), ("waker_rq_seq", "<u8"), ("waker_rq_depth", "<u4"),
    # top mode only (the recorder's --top, which writes no file): the class of request
    # waker_rq_seq (IOWHY_RQC_*); 0 otherwise, so always 0 in a trace file
    ("waker_rq_class", "<u4"),
    ("run_total_ns", "<u8"),
]
OFFCPU_DTYPE = np.dtype(_OFFCPU_FIELDS)
# helper records share struct iowhy_offcpu; a dtype object of their own (equal, not the
# same object) lets a writer tell which record type an array holds.
HELPER_DTYPE = np.dtype(_OFFCPU_FIELDS)
# Version 3's offcpu record (88 bytes): the same first 88 bytes, waker_ctx_u16 and
# waker_preempt_count then padding (zero). The reader widens it to OFFCPU_DTYPE.
OFFCPU_V3_DTYPE = np.dtype(_HDR + [
    ("start_ns", "<u8"), ("waking_ns", "<u8"), ("end_ns", "<u8"), ("tgid", "<u4"), ("tid", "<u4"),
    ("state", "<u4"), ("syscall_nr", "<i4"), ("waker_tgid", "<u4"), ("waker_tid", "<u4"),
    ("flags_u16", "<u2"), ("pad0", "<u2"), ("pad1", "<u4"), ("waker_comm", "S16"),
])

_TASK_FIELDS = _HDR + [
    ("tgid", "<u4"), ("tid", "<u4"), ("parent_tgid", "<u4"), ("exit_code", "<i4"),
    ("event_u16", "<u2"), ("pad0", "<u2"), ("pad1", "<u4"), _COMM,
]
# cgroup_id (version 9): the task's cgroup v2 at the event, 0 when unknown.
TASK_DTYPE = np.dtype(_TASK_FIELDS + [("cgroup_id", "<u8")])
# Versions 3 to 8's task record (56 bytes): no cgroup. The reader widens it to TASK_DTYPE
# (cgroup_id 0), and TraceWriter writes it in a file of an older version.
TASK_V8_DTYPE = np.dtype(_TASK_FIELDS)

SYSCALL_DTYPE = np.dtype(_HDR + [
    ("count", "<u8"), ("total_ns", "<u8"), ("syscall_nr", "<u4"), ("pad0", "<u4"),
])

BIO_DTYPE = np.dtype(_HDR + [
    ("sector", "<u8"), ("len_bytes", "<u4"), ("dev_major", "<u4"), ("dev_minor", "<u4"),
    ("opf", "<u4"), ("error", "<i4"), ("tgid", "<u4"), ("tid", "<u4"), ("op", "u1"), ("pad0", "u1"),
    ("iflags", "<u2"), ("pad1", "<u4"), ("pad2", "<u4"), _COMM,
])

THREAD_DTYPE = np.dtype(_HDR + [
    ("arg0", "<u8"), ("tgid", "<u4"), ("tid", "<u4"), ("syscall_nr", "<i4"), ("state_u8", "u1"),
    ("pad0", "u1"), ("flags_u16", "<u2"), _COMM, ("wchan", "S32"),
])

FILE_HDR_DTYPE = np.dtype([
    ("magic", "S8"), ("version", "<u4"), ("hdr_bytes", "<u4"), ("chunk_hdr_bytes", "<u4"),
    ("endian_tag", "<u4"), ("created_realtime_ns", "<u8"), ("reserved", "u1", (32,)),
])

CHUNK_HDR_DTYPE = np.dtype([
    ("magic", "S4"), ("type", "<u2"), ("rec_size_bytes", "<u2"), ("count", "<u4"),
    ("payload_bytes", "<u4"), ("data_bytes", "<u4"), ("crc32", "<u4"), ("seq", "<u8"),
])

# Record type -> (name used in the CLI and JSON, dtype). Names are stable API.
RECORD_TYPES: dict[int, tuple[str, np.dtype]] = {
    REC_REQUEST: ("request", REQUEST_DTYPE),
    REC_FSYNC: ("fsync", FSYNC_DTYPE),
    REC_JOURNAL: ("journal", JOURNAL_DTYPE),
    REC_OFFCPU: ("offcpu", OFFCPU_DTYPE),
    REC_TASK: ("task", TASK_DTYPE),
    REC_SYSCALL: ("syscall", SYSCALL_DTYPE),
    REC_THREAD: ("thread", THREAD_DTYPE),
    REC_BIO: ("bio", BIO_DTYPE),
    # A helper thread's off-CPU interval: the offcpu layout (struct iowhy_offcpu).
    REC_HELPER: ("helper", HELPER_DTYPE),
}
# Record layouts of older versions: {version: {record type: dtype}}, for those that differ.
OLD_RECORD_DTYPES: dict[int, dict[int, np.dtype]] = {
    3: {REC_OFFCPU: OFFCPU_V3_DTYPE, REC_TASK: TASK_V8_DTYPE},
    **{v: {REC_TASK: TASK_V8_DTYPE} for v in range(4, CGROUP_VERSION)},
}
RECORD_NAMES = {name: code for code, (name, _) in RECORD_TYPES.items()}

# C struct name for each dtype, for the ABI test.
C_STRUCTS = {
    "iowhy_rec_hdr": np.dtype(_HDR),
    "iowhy_request": REQUEST_DTYPE, "iowhy_fsync": FSYNC_DTYPE, "iowhy_journal": JOURNAL_DTYPE,
    "iowhy_offcpu": OFFCPU_DTYPE, "iowhy_task": TASK_DTYPE, "iowhy_syscall": SYSCALL_DTYPE,
    "iowhy_thread": THREAD_DTYPE, "iowhy_bio": BIO_DTYPE,
    "iowhy_file_hdr": FILE_HDR_DTYPE, "iowhy_chunk_hdr": CHUNK_HDR_DTYPE,
}
