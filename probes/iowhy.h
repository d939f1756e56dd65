/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * iowhy ABI: every record the BPF probes and the recorder write to a trace.
 *
 * This header is shared by the BPF side (after vmlinux.h) and the recorder (after
 * <linux/types.h>); the analyzer mirrors it in analyzer/iowhy/abi.py and
 * tests/unit/test_abi.py compiles this file to check every size and offset.
 *
 * Rules: fixed-width types only (no bool, enum, long, pid_t in records), explicit
 * padding, 8-byte aligned sizes, a unit suffix on every quantity (_ns: nanoseconds
 * of CLOCK_MONOTONIC, _bytes, _sector: 512-byte sectors). A record never changes
 * shape within a format version: new fields mean a new version (docs/trace-format.md).
 */
#ifndef IOWHY_H
#define IOWHY_H

#define IOWHY_FORMAT_VERSION 10
#define IOWHY_COMM_LEN 16

/* Record types (iowhy_rec_hdr.type and the chunk type of a record chunk). */
#define IOWHY_REC_REQUEST 1 /* one block request, written when it is finally done */
#define IOWHY_REC_FSYNC 2   /* one fsync-family call of a tracked task */
#define IOWHY_REC_JOURNAL 3 /* one journal/log event (jbd2, ext4 fc, XFS log, btrfs) */
#define IOWHY_REC_OFFCPU 4  /* one off-CPU interval of a tracked task */
#define IOWHY_REC_TASK 5    /* fork/exec/exit of a tracked task */
#define IOWHY_REC_SYSCALL 6 /* per-syscall count and time, aggregated in the kernel */
#define IOWHY_REC_THREAD 7  /* a tracked thread's state when recording started (read by the recorder) */
#define IOWHY_REC_BIO 8     /* one bio completed outside any request: a bio-based device (zram, dm, md) */
#define IOWHY_REC_HELPER 9  /* one off-CPU interval of a helper thread (struct iowhy_offcpu) */
#define IOWHY_REC_MAX 9

/* Common header: every record starts with it. */
struct iowhy_rec_hdr {
	__u16 type;       /* IOWHY_REC_* */
	__u16 size_bytes; /* sizeof the whole record */
	__u32 cpu;        /* CPU the record was emitted on */
	__u64 ts_ns;      /* when the record was emitted */
};

/*
 * Per-CPU staging buffer (map `stage`, one element per possible CPU, mmapped by the
 * recorder). Not a record and not in the trace file: the probes append finished
 * records of the five high-volume types (request, fsync, journal, offcpu, helper) here and hand a full buffer to the ring buffer
 * in one bpf_ringbuf_output(), instead of one reserve + submit per record
 * (docs/design.md). The recorder empties the buffers every IOWHY_STAGE_DRAIN_NS and at
 * stop.
 *
 * busy_u32 is a lock taken by atomic exchange, by a program or by the recorder, never
 * waited for by a program: a program that finds it taken (a program it interrupted on
 * this CPU, or the recorder draining) writes its record to the ring buffer directly, as
 * it does once the recorder has set `stopping`. nrec_u32[t] counts the staged records of
 * type t, so a buffer the ring buffer refuses is counted lost per type.
 */
#define IOWHY_STAGE_BYTES 8192
#define IOWHY_STAGE_DRAIN_NS 50000000ULL

struct iowhy_stage {
	__u32 busy_u32;
	__u32 used_bytes;
	__u32 nrec_u32[IOWHY_REC_MAX + 1]; /* indexed by IOWHY_REC_* */
	__u8 buf[IOWHY_STAGE_BYTES]; /* at offset 48: records stay 8-byte aligned */
};

/* iowhy_request.flags_u16 */
#define IOWHY_RQ_INCOMPLETE (1 << 0)  /* still in flight when recording stopped */
#define IOWHY_RQ_TRACKED (1 << 1)     /* submitted by a tracked (workload) task */
#define IOWHY_RQ_ORIGIN (1 << 2)      /* the origin fields come from the submitting bio */
#define IOWHY_RQ_FLUSH_SEQ (1 << 3)   /* went through the flush state machine (RQF_FLUSH_SEQ) */
#define IOWHY_RQ_NO_ISSUE (1 << 4)    /* completed without an issue seen (pending flush-only, or pre-dated recording) */
#define IOWHY_RQ_UNMATCHED (1 << 5)   /* first seen at completion: started before recording */
#define IOWHY_RQ_LOST_DONE (1 << 6)   /* its final completion was never seen (the kernel did not run
					 the probe); done_ns is 0, ts_ns is when the request was
					 seen issued again */
#define IOWHY_RQ_LOST_ISSUE (1 << 7)  /* its issue was never seen (the kernel did not run the probe):
					 op, sector and length were read at completion; issue_ns
					 is 0 */

/*
 * Normalized operation and flag bits (the kernel's REQ_* bit numbers move between
 * versions; the probes translate them with bpf_core_enum_value so the trace does not).
 */
#define IOWHY_OP_READ 0
#define IOWHY_OP_WRITE 1
#define IOWHY_OP_FLUSH 2
#define IOWHY_OP_DISCARD 3
#define IOWHY_OP_OTHER 15

#define IOWHY_F_SYNC (1 << 0)
#define IOWHY_F_META (1 << 1)
#define IOWHY_F_FUA (1 << 2)
#define IOWHY_F_PREFLUSH (1 << 3)
#define IOWHY_F_RAHEAD (1 << 4)
#define IOWHY_F_PRIO (1 << 5)
#define IOWHY_F_IDLE (1 << 6)

struct iowhy_request {
	struct iowhy_rec_hdr hdr;  /* ts_ns: final completion (or stop time if incomplete) */
	__u64 start_sector;        /* first sector at issue (512-byte units); 0 for flushes */
	__u64 submit_ns;           /* block_getrq of its first bio (0 if unknown) */
	__u64 insert_ns;           /* block_rq_insert (0: direct issue or never inserted) */
	__u64 issue_ns;            /* last block_rq_issue (0: never issued) */
	__u64 data_done_ns;        /* first block_rq_complete (data stage of a flush sequence) */
	__u64 done_ns;             /* final block_rq_complete (0 if incomplete) */
	__u32 len_bytes;           /* data length at issue (0 for flushes) */
	__u32 done_bytes;          /* sum of bytes completed over all completions */
	__u32 dev_major;           /* whole disk */
	__u32 dev_minor;
	__u32 cmd_flags;           /* raw rq->cmd_flags at issue (kernel bit layout) */
	__u32 rq_flags;            /* raw rq->rq_flags at issue (kernel bit layout) */
	__u32 bio_flags;           /* raw OR of bi_opf of its bios at submission (PREFLUSH/FUA live here) */
	__u32 tgid;                /* originating task, taken at bio submission */
	__u32 tid;
	__s32 error;               /* blk_status_t of the final completion */
	__u64 seq;                 /* per-recording request number, in order of first sight */
	__u8 op;                   /* IOWHY_OP_* */
	__u8 pad0;                 /* zero in the file (the probes keep requeue state here) */
	__u16 iflags;              /* IOWHY_F_*: cmd_flags | bio_flags, normalized */
	__u16 flags_u16;           /* IOWHY_RQ_* */
	__u16 requeues;            /* block_rq_requeue count */
	__u32 nr_bios;             /* bios seen in the request at issue (capped at IOWHY_MAX_BIO_WALK) */
	__u32 pad1;
	char comm[IOWHY_COMM_LEN]; /* originating task's comm */
};

/* iowhy_fsync.call_u16 */
#define IOWHY_CALL_FSYNC 1
#define IOWHY_CALL_FDATASYNC 2
#define IOWHY_CALL_SYNC 3
#define IOWHY_CALL_SYNCFS 4
#define IOWHY_CALL_SYNC_FILE_RANGE 5
#define IOWHY_CALL_MSYNC 6
#define IOWHY_CALL_OSYNC_WRITE 7 /* a write(2)-family call that ran the fs fsync path (O_SYNC/O_DSYNC) */

/* iowhy_fsync.fs_u16 and iowhy_journal.fs_u16 */
#define IOWHY_FS_NONE 0
#define IOWHY_FS_EXT4 1
#define IOWHY_FS_XFS 2
#define IOWHY_FS_BTRFS 3

/* iowhy_fsync.flags_u16 */
#define IOWHY_FS_F_DATASYNC (1 << 0)  /* the fs was asked for a datasync */
#define IOWHY_FS_F_FSEVENT (1 << 1)   /* the filesystem's sync event fired inside the call */
#define IOWHY_FS_F_SEQ (1 << 2)       /* commit_seq is valid */
#define IOWHY_FS_F_INCOMPLETE (1 << 3)/* still running when recording stopped */
#define IOWHY_FS_F_LATE_ENTER (1 << 4)/* entry not seen: enter_ns is the fs sync event (a later bound) */
#define IOWHY_FS_F_EXIT_UNSEEN (1 << 5)/* exit not seen: exit_ns is an upper bound, ret unknown (0) */
#define IOWHY_FS_F_SEQ_SPAN (1 << 6)  /* seq_span_u16 is valid (ext4: the tid grew during the call) */

struct iowhy_fsync {
	struct iowhy_rec_hdr hdr; /* ts_ns: syscall exit */
	__u64 enter_ns;
	__u64 exit_ns;
	__u64 ino;                /* inode from the fs sync event (0 if none fired) */
	__u64 commit_seq;         /* ext4: i_(data)sync_tid = jbd2 tid at entry; XFS: ili_(datasync|commit)_seq = CIL seq */
	__s64 ret;                /* syscall return value */
	__u32 tgid;
	__u32 tid;
	__u32 dev_major;          /* filesystem's device from the fs sync event (partition; btrfs: anon dev) */
	__u32 dev_minor;
	__s32 fd;                 /* first argument for fd-taking calls, -1 otherwise */
	__u32 syscall_nr;
	__u16 call_u16;           /* IOWHY_CALL_* */
	__u16 fs_u16;             /* IOWHY_FS_* of the sync event seen */
	__u16 flags_u16;          /* IOWHY_FS_F_* */
	__u16 seq_span_u16;       /* IOWHY_FS_F_SEQ_SPAN: ext4's tid at the sync path's exit - commit_seq */
	char comm[IOWHY_COMM_LEN];
};

/* iowhy_journal.event_u16, with what seq/aux0..2 hold for each */
#define IOWHY_J_JBD2_START 1    /* seq = tid */
#define IOWHY_J_JBD2_LOCKING 2  /* seq = tid */
#define IOWHY_J_JBD2_FLUSHING 3 /* seq = tid */
#define IOWHY_J_JBD2_LOGGING 4  /* seq = tid */
#define IOWHY_J_JBD2_END 5      /* seq = tid */
#define IOWHY_J_JBD2_STATS 6    /* seq = tid, aux0 = handles, aux1 = blocks, aux2 = blocks logged */
#define IOWHY_J_EXT4_FC_START 7 /* seq = tid */
#define IOWHY_J_EXT4_FC_STOP 8  /* seq = tid, aux0 = fc blocks, aux1 = status (0 ok, 1 ineligible, 2 skipped, 3 failed) */
#define IOWHY_J_XFS_FORCE 9     /* seq = CIL sequence asked for (0: force everything) */
#define IOWHY_J_XLOG_SYNC 10    /* seq = iclog lsn (cycle << 32 | block), aux0 = ic_flags, aux1 = ic_offset bytes */
#define IOWHY_J_XLOG_WRITE 11   /* same fields as XLOG_SYNC */
#define IOWHY_J_XLOG_DONE 12    /* same fields as XLOG_SYNC: iclog I/O completed */
#define IOWHY_J_BTRFS_SYNC 13   /* aux0 = ino, aux1 = datasync */
#define IOWHY_J_BTRFS_COMMIT 14 /* seq = generation */

struct iowhy_journal {
	struct iowhy_rec_hdr hdr; /* ts_ns: event time */
	__u64 seq;
	__u64 aux0;
	__u64 aux1;
	__u64 aux2;
	__u32 dev_major;          /* filesystem's device (partition; btrfs: the anon dev of its superblock) */
	__u32 dev_minor;
	__u32 tgid;               /* context task */
	__u32 tid;
	__u16 event_u16;          /* IOWHY_J_* */
	__u16 fs_u16;             /* IOWHY_FS_* */
	__u32 pad0;
	char comm[IOWHY_COMM_LEN];
};

/* iowhy_offcpu.flags_u16 */
#define IOWHY_OFF_PREEMPT (1 << 0) /* switched out while runnable */
#define IOWHY_OFF_IOWAIT (1 << 1)  /* in_iowait: waiting on its own block I/O */
#define IOWHY_OFF_D (1 << 2)       /* uninterruptible sleep (TASK_UNINTERRUPTIBLE, not TASK_IDLE) */
#define IOWHY_OFF_LATE_END (1 << 3) /* its switch back on CPU was not seen: end_ns is when the task
				       was next seen running (syscall or switch-out), an upper bound */
#define IOWHY_OFF_WAKER_RQ (1 << 4) /* woken inside the completion of request waker_rq_seq */
#define IOWHY_OFF_FROM_START (1 << 5) /* off CPU since before the probes were attached: start_ns is
					 the attach time; state, IOWAIT, D and syscall_nr were read
					 at the waking (PREEMPT: first seen switched in, never woken) */
#define IOWHY_OFF_HELPER (1 << 6) /* not a workload thread: a kernel thread that recently took work
				     from or handed it back to a tracked thread (jbd2, kworker,
				     loop, xfsaild, kswapd), switched out while some tracked
				     thread was asleep; such records are of type
				     IOWHY_REC_HELPER, never IOWHY_REC_OFFCPU */
#define IOWHY_OFF_THROTTLE_DIRTY (1 << 7) /* a pause of dirty-page throttling
					     (balance_dirty_pages): the wait is the throttle's */
#define IOWHY_OFF_THROTTLE_BLOCK (1 << 8) /* throttled in the block layer before it had a
					     request (writeback throttling, rq-qos, a wait for a
					     tag): the wait is the throttle's */
#define IOWHY_OFF_OPEN_END (1 << 9) /* still off CPU when recording stopped (version 10): end_ns
				       is the stop time; written by the recorder from the
				       thread's probe state (waking_ns: woken, not yet back on
				       a CPU; 0: still asleep) */

/* iowhy_offcpu.waker_ctx_u16: the context sched_waking ran in (from the preempt count) */
#define IOWHY_WCTX_UNKNOWN 0 /* not woken (preempted, yielded) or not readable */
#define IOWHY_WCTX_TASK 1    /* a task (the waker task itself: a syscall, a kthread, a worker) */
#define IOWHY_WCTX_SOFTIRQ 2 /* serving a softirq (on top of waker_tid, or in ksoftirqd) */
#define IOWHY_WCTX_HARDIRQ 3 /* a hardware interrupt handler */
#define IOWHY_WCTX_NMI 4

struct iowhy_offcpu {
	struct iowhy_rec_hdr hdr;  /* ts_ns: back on CPU */
	__u64 start_ns;            /* switched out */
	__u64 waking_ns;           /* made runnable (0: never slept: preempted or yielded) */
	__u64 end_ns;              /* switched back in */
	__u32 tgid;
	__u32 tid;
	__u32 state;               /* raw prev_state at switch-out (kernel bit layout) */
	__s32 syscall_nr;          /* syscall in progress (-1: none) */
	__u32 waker_tgid;
	__u32 waker_tid;
	__u16 flags_u16;           /* IOWHY_OFF_* */
	__u16 waker_ctx_u16;       /* IOWHY_WCTX_* (version 3: pad, 0) */
	__u32 waker_preempt_count; /* raw preempt count at the waking (kernel bit layout; version 3: 0) */
	char waker_comm[IOWHY_COMM_LEN];
	__u64 waker_rq_seq;        /* seq of the request whose completion woke it (IOWHY_OFF_WAKER_RQ) */
	__u32 waker_rq_depth;      /* requests being completed on the CPU at the waking, the linked
				      one included (2: a loop request inside its backing device's
				      completion); 0 without IOWHY_OFF_WAKER_RQ */
	__u32 waker_rq_class;      /* top mode only (the recorder's --top, which writes no
				      file): the class of request waker_rq_seq (IOWHY_RQC_*);
				      0 otherwise, so always 0 in a trace file */
	__u64 run_total_ns;        /* the thread's total on-CPU time at the switch-out
				      (se.sum_exec_runtime); 0 with FROM_START */
};

/*
 * The class of a request as `iowhy top` names what its completion ended (rec_top.c),
 * decided by the probes at the completion under --top only: a flush, a request a
 * journal thread (jbd2) submitted, a read, a metadata write, any other write.
 */
#define IOWHY_RQC_BARRIER 1
#define IOWHY_RQC_LOG 2
#define IOWHY_RQC_READ 3
#define IOWHY_RQC_META 4
#define IOWHY_RQC_DATA 5

/* iowhy_thread.flags_u16 */
#define IOWHY_THR_ON_CPU (1 << 0)   /* /proc/TID/syscall said "running": on a CPU when read */
#define IOWHY_THR_NO_SYSCALL (1 << 1) /* /proc/TID/syscall unreadable (syscall_nr -2) */

/*
 * One thread of the tracked process as /proc showed it when recording started, read by
 * the recorder after the probes were attached (so anything later is in the records).
 */
struct iowhy_thread {
	struct iowhy_rec_hdr hdr; /* ts_ns: when /proc was read */
	__u64 arg0;               /* first argument of the syscall it is in (0 if none) */
	__u32 tgid;
	__u32 tid;
	__s32 syscall_nr;         /* /proc/TID/syscall: the syscall it is blocked in; -1: blocked
				     outside a syscall; -2: unknown (on a CPU, or unreadable) */
	__u8 state_u8;            /* /proc/TID/stat field 3: 'R', 'S', 'D', 'I', 'T', 't', 'Z', ... */
	__u8 pad0;
	__u16 flags_u16;          /* IOWHY_THR_* */
	char comm[IOWHY_COMM_LEN];
	char wchan[32];           /* /proc/TID/wchan: kernel function it sleeps in ("" if none) */
};

/* iowhy_task.event_u16 */
#define IOWHY_TASK_ROOT 1 /* tracked from the start (the workload, or a task of the attached process) */
#define IOWHY_TASK_FORK 2 /* new task (thread or process) of a tracked process */
#define IOWHY_TASK_EXEC 3
#define IOWHY_TASK_EXIT 4 /* sched_process_exit: the thread starts to exit (it still runs, and can wait) */
#define IOWHY_TASK_DEAD 5 /* its last switch-out (state TASK_DEAD): its life ends here */
#define IOWHY_TASK_JOIN 6 /* --cgroup: its process joined the followed cgroup while recording */

struct iowhy_task {
	struct iowhy_rec_hdr hdr; /* ts_ns: event time */
	__u32 tgid;
	__u32 tid;
	__u32 parent_tgid;
	__s32 exit_code;          /* raw exit_code for EXIT, 0 otherwise */
	__u16 event_u16;          /* IOWHY_TASK_* */
	__u16 pad0;
	__u32 pad1;
	char comm[IOWHY_COMM_LEN];
	__u64 cgroup_id;          /* version 9: the task's cgroup v2 at the event (0: unknown) */
};

struct iowhy_syscall {
	struct iowhy_rec_hdr hdr; /* ts_ns: when the recorder read the totals */
	__u64 count;
	__u64 total_ns;           /* sum of enter-to-exit time of tracked tasks */
	__u32 syscall_nr;
	__u32 pad0;
};

/*
 * A bio ended without ever being part of a request: block_bio_complete fires only for
 * bios whose completion blk_update_request has not traced already, that is, for the
 * bios of bio-based devices (zram, device-mapper, md, brd), which have no requests, and
 * for bios failed before they reached one. No submission time: block_bio_queue fires for
 * every bio of every device, a cost the probes do not pay.
 */
struct iowhy_bio {
	struct iowhy_rec_hdr hdr;  /* ts_ns: bio_endio */
	__u64 sector;              /* bio's sector (512-byte units) as the tracepoint reports it */
	__u32 len_bytes;           /* bio's remaining size at its end */
	__u32 dev_major;           /* the bio's disk (whole disk) */
	__u32 dev_minor;
	__u32 opf;                 /* raw bi_opf (kernel bit layout) */
	__s32 error;               /* blk_status_t */
	__u32 tgid;                /* context task at the end (zram: the submitter, synchronously) */
	__u32 tid;
	__u8 op;                   /* IOWHY_OP_* */
	__u8 pad0;
	__u16 iflags;              /* IOWHY_F_* */
	__u32 pad1;
	__u32 pad2;
	char comm[IOWHY_COMM_LEN]; /* context task's comm */
};

/*
 * Loss and anomaly counters: a per-CPU array in the kernel indexed by these, summed
 * by the recorder into the trailer under the names listed in docs/trace-format.md.
 * The IOWHY_C_LOST_* and IOWHY_C_*_FULL ones are losses; the rest are anomalies the
 * analyzer reports but that lose nothing.
 */
#define IOWHY_C_RB_REQUEST 0      /* ring buffer full: request records lost */
#define IOWHY_C_RB_FSYNC 1
#define IOWHY_C_RB_JOURNAL 2
#define IOWHY_C_RB_OFFCPU 3
#define IOWHY_C_RB_TASK 4
#define IOWHY_C_RQMAP_FULL 5      /* in-flight request map full: a request not followed */
#define IOWHY_C_TASKMAP_FULL 6    /* per-thread state unavailable: a syscall/off-CPU interval lost */
#define IOWHY_C_TRACKMAP_FULL 7   /* tracked-process map full: a child not tracked */
#define IOWHY_C_BIOMAP_FULL 8     /* bio origin table: both slots of the set busy elsewhere, origin not kept */
#define IOWHY_C_UNMATCHED_DONE 9  /* completion of a request never seen before (written, flagged) */
#define IOWHY_C_NO_ORIGIN 10      /* request whose bios were not seen at submission (written, flagged) */
#define IOWHY_C_RQ_MERGED 11      /* requests merged into another request (not a loss) */
#define IOWHY_C_BIO_WALK_CAP 12   /* requests with more bios than the walk follows (flags of the rest unseen) */
#define IOWHY_C_LOST_DONE 13      /* a request's final completion never seen (written, flagged IOWHY_RQ_LOST_DONE) */
#define IOWHY_C_LOST_ISSUE 14     /* a request's issue never seen (written, flagged IOWHY_RQ_LOST_ISSUE) */
#define IOWHY_C_LOST_SWITCH_IN 15 /* a tracked thread's switch back on CPU never seen (written, IOWHY_OFF_LATE_END) */
#define IOWHY_C_LOST_SYS_EXIT 16   /* an fsync-family call's exit never seen (written, IOWHY_FS_F_EXIT_UNSEEN) */
#define IOWHY_C_LATE_ENTRY 17      /* an O_SYNC/O_DSYNC write first seen at its fs sync event (IOWHY_FS_F_LATE_ENTER) */
#define IOWHY_C_RB_BIO 18          /* ring buffer full: bio records lost */
#define IOWHY_C_RB_HELPER 19       /* ring buffer full: helper records lost */
#define IOWHY_C_MAX 20

#define IOWHY_MAX_BIO_WALK 256

/*
 * Not a record: the value of the probes' in-flight request maps (rq_tab, rqs), which
 * the recorder reads at stop to write out requests still in flight.
 */
/*
 * Per-thread state of tracked tasks (syscall in progress, fs sync event, off-CPU): the
 * value of the probes' task map, read back by the recorder at stop for the calls still
 * running and the sleeps not ended (dump_open_tasks). Not a trace record.
 */
struct task_state {
	__u64 sys_enter_ns;
	__u64 arg0; /* first argument, kept only where the exit cannot read it */
	__s32 sys_nr;
	__u16 fs_flags;
	__u16 fs_kind;
	__u64 fs_ino;
	__u64 fs_seq;
	__u32 fs_dev;
	__u32 off_state;
	__u64 off_ns;
	__u64 waking_ns;
	__u16 off_flags;
	__u16 fs_seq_span; /* IOWHY_FS_F_SEQ_SPAN in fs_flags: the call's seq_span_u16 */
	__s32 off_sys_nr;
	__u32 waker_tgid;
	__u32 waker_tid;
	char waker_comm[IOWHY_COMM_LEN];
	__u64 waker_rq_seq;
	__u32 waker_rq_depth;
	__u16 waker_ctx;
	__u16 counted;  /* 1: counted in the probes' blocked_tracked while asleep */
	__u32 waker_preempt_count;
	__u32 waker_rq_class; /* --top: IOWHY_RQC_* of request waker_rq_seq (0 otherwise) */
	__u64 run_ns;   /* se.sum_exec_runtime at the switch-out */
	__u64 helper_until_ns; /* a kernel thread: its intervals are recorded until then */
	/*
	 * Throttling seen in the thread's own context, not yet slept in (iowhy.bpf.c,
	 * "throttling"): `throttle` holds IOWHY_OFF_THROTTLE_DIRTY from a balance_dirty_pages
	 * pause until the sleep that takes it; `throttle_bios` counts the bios it queued or
	 * split off that have neither a request nor merged yet (IOWHY_OFF_THROTTLE_BLOCK while
	 * not 0). throttle_jiffies: when a mark was last set, or the thread last came back on
	 * CPU with one set (its age bounds it).
	 */
	__u64 throttle_jiffies;
	__u16 throttle;
	__u16 throttle_bios;
	__u32 pad3;
};

struct rq_slot {
	struct iowhy_request r; /* first, so a pointer to the slot is one to the record */
	__u64 tag;              /* the request's key; 0 while the table slot is free */
	__u64 in_hash;          /* 1: the entry lives in the overflow hash `rqs` */
};

/*
 * Trace file layout (docs/trace-format.md): one iowhy_file_hdr, then chunks until
 * end of file. Each chunk is an iowhy_chunk_hdr followed by payload_bytes of payload
 * (zero-padded to a multiple of 8). A record chunk holds `count` records of one type,
 * rec_size_bytes each; JSON chunks hold UTF-8 text. Little-endian throughout.
 */
#define IOWHY_FILE_MAGIC "IOWHYTRC"
#define IOWHY_CHUNK_MAGIC "IWCK"

#define IOWHY_CHUNK_META 0x100      /* JSON: host, devices, filesystems (written by `iowhy record`) */
#define IOWHY_CHUNK_RECORDER 0x101  /* JSON: recorder settings, probes attached, clocks */
#define IOWHY_CHUNK_PROGRESS 0x102  /* JSON: counters so far (last one stands in for a lost trailer) */
#define IOWHY_CHUNK_TRAILER 0x1ff   /* JSON: record counts, loss counters, stop reason; last chunk */
/*
 * Flag in a chunk's type (version 5): the payload is one zstd frame (declaring its content
 * size) followed by zero padding to a multiple of 8; data_bytes is the size of the data
 * once decompressed, crc32 covers the stored (compressed, padded) payload. The records of
 * a compressed record chunk are byte-transposed: byte b of record i at b * count + i.
 */
#define IOWHY_CHUNK_ZSTD 0x8000
/*
 * Flag in a compressed record chunk's type (version 6): its records are compacted before
 * compression (grouped by thread, times as differences, some fields row-wise; the data is
 * count * (rec_size_bytes + 2) bytes); docs/trace-format.md, COMPACTED RECORD CHUNKS.
 */
#define IOWHY_CHUNK_COMPACT 0x4000

struct iowhy_file_hdr {
	char magic[8];            /* IOWHY_FILE_MAGIC, no NUL */
	__u32 version;            /* IOWHY_FORMAT_VERSION */
	__u32 hdr_bytes;          /* sizeof(struct iowhy_file_hdr) */
	__u32 chunk_hdr_bytes;    /* sizeof(struct iowhy_chunk_hdr) */
	__u32 endian_tag;         /* 0x01020304 as written by the host */
	__u64 created_realtime_ns;/* CLOCK_REALTIME at creation */
	__u8 reserved[32];
};

struct iowhy_chunk_hdr {
	char magic[4];            /* IOWHY_CHUNK_MAGIC */
	__u16 type;               /* IOWHY_REC_* or IOWHY_CHUNK_*, | IOWHY_CHUNK_ZSTD (| _COMPACT) */
	__u16 rec_size_bytes;     /* record size for record chunks, 0 for JSON */
	__u32 count;              /* records in the chunk (1 for JSON) */
	__u32 payload_bytes;      /* payload length including padding, a multiple of 8 */
	__u32 data_bytes;         /* bytes of data (JSON text length; count * rec_size), decompressed */
	__u32 crc32;              /* zlib crc32 of the payload_bytes of payload, as stored */
	__u64 seq;                /* chunk number, from 0 */
};

/*
 * Shared by the probes and the recorder (never by the trace reader: nothing here is in
 * the file format).
 *
 * dev_t as the kernel's tracepoints carry it, and as iowhy's maps and --dev hold it:
 * major << 20 | minor (not the userspace encoding).
 */
#define IOWHY_MAX_DEVS 64 /* --dev devices a recording can be limited to */

static inline __attribute__((always_inline)) __u32 iowhy_dev_major(__u32 dev)
{
	return dev >> 20;
}

static inline __attribute__((always_inline)) __u32 iowhy_dev_minor(__u32 dev)
{
	return dev & ((1U << 20) - 1);
}

static inline __attribute__((always_inline)) __u32 iowhy_mkdev(__u32 major, __u32 minor)
{
	return major << 20 | minor;
}

/*
 * Which fsync-family call (IOWHY_CALL_*) syscall `nr` is, 0 for none: the probes decide
 * it at the call's exit, the recorder for the calls still open at stop. NR(name) gives
 * the syscall number the recorder resolved for `name` (the probes' nr_<name> rodata; -1
 * where unresolved), read only as far as the comparisons go; fs_flags: the thread's
 * task_state fs_flags (an O_SYNC/O_DSYNC write ran the filesystem's fsync path).
 */
#define IOWHY_CALL_OF(nr, fs_flags, NR)					\
	((nr) == NR(fsync) ? IOWHY_CALL_FSYNC :				\
	 (nr) == NR(fdatasync) ? IOWHY_CALL_FDATASYNC :			\
	 (nr) == NR(sync) ? IOWHY_CALL_SYNC :				\
	 (nr) == NR(syncfs) ? IOWHY_CALL_SYNCFS :			\
	 (nr) == NR(sync_file_range) ? IOWHY_CALL_SYNC_FILE_RANGE :	\
	 (nr) == NR(msync) ? IOWHY_CALL_MSYNC :				\
	 ((fs_flags) & IOWHY_FS_F_FSEVENT) ? IOWHY_CALL_OSYNC_WRITE : 0)

#endif /* IOWHY_H */
