// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy probes: block requests, journal/log events, fsync-family calls, off-CPU time
 * and per-syscall totals of a tracked workload. Tracepoints only: every program
 * exists as tp_btf (preferred) and raw_tp (fallback); the recorder picks one flavour
 * by trying to load it. Handlers read through CO-RE either way.
 *
 * Cost: block events fire for every request on the traced devices (a table slot per
 * request at block_getrq, one per request event, one ring-buffer record per finished
 * request); syscall, sched and fs events, and the per-bio events that mark throttling
 * (block_bio_queue, block_split, the bio merges), test one bit per process for untracked
 * tasks and exit. By default (--syscalls sync) only the fsync and write families are timed,
 * through their own syscall tracepoints; --syscalls all times every syscall of the
 * workload through sys_enter/sys_exit, two clock reads each (docs/design.md).
 * Filtering by task happens at submission and syscall time, never at completion
 * (interrupt context).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "iowhy.h"
#include "core_fixes.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the recorder before load. */
/* --dev: the whole-disk dev_t (kernel encoding) of each device to record, and how many
 * (0: every device). */
const volatile __u32 nr_devs = 0;
const volatile __u32 devs[IOWHY_MAX_DEVS] = {};
const volatile __u64 wakeup_bytes = 1 << 20; /* wake the reader once this much is queued */
/* 1: every syscall is timed (raw sys_enter/sys_exit, --syscalls all); 0: only the
 * fsync and write families, through their own syscalls:sys_*_<call> tracepoints. */
const volatile __u8 all_syscalls = 0;
const volatile __s32 nr_fsync = -1, nr_fdatasync = -1, nr_sync = -1, nr_syncfs = -1,
		     nr_sync_file_range = -1, nr_msync = -1;
/*
 * 1: the write family's tracepoints are not attached at start (--syscalls sync without
 * --eager-writes, tp_btf only). A write(2) of a tracked task is then seen only if the
 * filesystem's sync event fires inside it (O_SYNC/O_DSYNC): that event opens the call
 * (IOWHY_FS_F_LATE_ENTER) and asks the recorder, through write_probes_wanted and a
 * wakeup, to attach the write family, which then times every later write from entry.
 * Spares every other write(2) of the workload the two tracepoint programs.
 */
const volatile __u8 lazy_writes = 0;
/*
 * 1: `iowhy top` (the recorder's --top). It folds only the off-CPU, fsync-family and
 * request records of tracked tasks into its totals, so the probes follow no helper
 * thread and write no task record; the verifier drops that code. (The recorder does not
 * load the journal, filesystem and write-family programs either: rec_probes.c.)
 */
const volatile __u8 top_mode = 0;
const volatile __s32 nr_write = -1, nr_pwrite64 = -1, nr_writev = -1, nr_pwritev = -1,
		     nr_pwritev2 = -1;
__u32 write_probes_wanted = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20); /* resized by the recorder (--ringbuf) */
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOWHY_C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/*
 * Processes (tgid) of the workload, one bit per tgid: the recorder sizes it to
 * pid_max and seeds it, forks extend it. An array lookup is inlined by the verifier,
 * which matters because every syscall and context switch on the machine asks.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536); /* u64 words: pid_max / 64, set by the recorder */
	__type(key, __u32);
	__type(value, __u64);
} tracked SEC(".maps");

/*
 * Who submitted a request's first bio and with which flags (block_getrq), until the
 * request takes it at insert or issue: a two-way set-associative table indexed by the
 * bio's address, `bio` holding the address as the tag. A slot costs an inlined lookup
 * and two atomics, where a hash map update per submission would be the largest single
 * cost of tracing an I/O-heavy workload. Bios that never reach a request (a failed
 * submission) leave stale slots that later bios overwrite; a bio whose slot was
 * overwritten while still queued leaves its request without an origin, which
 * IOWHY_C_NO_ORIGIN counts.
 */
#define BIO_FREE 0
#define BIO_BUSY 1 /* being written; no key is odd */
struct bio_info {
	__u64 bio; /* tag: the bio's key (BIO_KEY), or BIO_FREE / BIO_BUSY */
	__u64 ts_ns;
	__u32 tgid;
	__u32 tid;
	__u32 opf;
	__u32 tracked;
	char comm[IOWHY_COMM_LEN];
};

/*
 * One slot per request between block_getrq and its insert or issue, not per bio: the
 * same 8192 slots as rq_tab, 384 KiB.
 */
#define BIO_SET_BITS 12
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 << BIO_SET_BITS);
	__type(key, __u32);
	__type(value, struct bio_info);
} bios SEC(".maps");

/*
 * A bio's address as a number. In tp_btf programs it is a typed pointer, on which the
 * verifier allows no arithmetic but the difference of two pointers (privileged
 * loaders only); raw_tp ones see plain numbers.
 */
#define BIO_KEY(btf, bio) ((btf) ? (__u64)(void *)(bio) - (__u64)(void *)&bios : (__u64)(bio))

static __always_inline __u32 bio_set(__u64 bio)
{
	return (__u32)((bio >> 7) & ((1 << BIO_SET_BITS) - 1)) << 1;
}

/*
 * Requests in flight; the record-to-be lives in the entry. First a two-way
 * set-associative table indexed by the request's address (struct rq_slot in iowhy.h):
 * blk-mq allocates a queue's requests side by side, so they fall in different sets.
 * When both ways of a set are taken, the request goes to the overflow hash, which
 * lookups consult only while it holds anything. The table costs two atomics per
 * request, where a hash map would cost an update and a delete.
 */
#define RQ_SET_BITS 12
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 << RQ_SET_BITS);
	__type(key, __u32);
	__type(value, struct rq_slot);
} rq_tab SEC(".maps");

/*
 * The overflow takes a request only when both ways of its set are busy, so it holds a
 * small share of what is in flight; 8192 entries (a preallocated 1.9 MiB) on top of
 * the table's 8192. Every byte of the maps and the ring is held for the whole run.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct rq_slot);
} rqs SEC(".maps");

__u64 rqs_used = 0; /* entries in `rqs`; raised before an insert, lowered after a delete */

/* A request's address as a number (see BIO_KEY). Never 0. */
#define RQ_KEY(btf, rq) ((btf) ? (__u64)(void *)(rq) - (__u64)(void *)&rq_tab : (__u64)(rq))

static __always_inline __u32 rq_set(__u64 key)
{
	return (__u32)((key >> 7) & ((1 << RQ_SET_BITS) - 1)) << 1;
}

/*
 * Per-thread state of tracked tasks: struct task_state (iowhy.h, which the recorder
 * reads at stop). Two homes for it, one chosen at load by trying (recorder.c):
 * task-local storage, one helper call with no hashing and no size limit, where the
 * kernel allows it from these programs; else a hash map by tid. Syscall entry and exit
 * each look the state up, so on a syscall-heavy workload this lookup is a large part of
 * what tracing costs.
 */
const volatile __u8 use_task_storage = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_store SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct task_state);
} tasks SEC(".maps");

struct sys_stat {
	__u64 count;
	__u64 total_ns;
};

#define SYS_SLOTS 1024
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYS_SLOTS);
	__type(key, __u32);
	__type(value, struct sys_stat);
} sysstats SEC(".maps");

/* Scratch for building records bigger than is comfortable on the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rq_slot);
} rq_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* possible CPUs, set by the recorder */
	__type(key, __u32);
	__type(value, struct iowhy_stage);
} stage SEC(".maps");

/*
 * Request numbers, counted per CPU: seq = n * nr_cpus + cpu, n this CPU's count. One
 * global counter would put a locked add on a cache line every CPU keeps reading
 * (stopping, attach_ns sit beside it) into every request.
 */
const volatile __u32 nr_cpus = 1; /* possible CPUs, set by the recorder */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rq_seqs SEC(".maps");
/* Set by the recorder once every probe is attached (CLOCK_MONOTONIC, as bpf_ktime_get_ns). */
__u64 attach_ns = 0;
/*
 * Set by the recorder when recording ends, before it reads the tables: no request gets
 * an entry (and a sequence number) after that, so every number handed out ends up in
 * exactly one record, from the ring or from the stop-time dump.
 */
__u64 stopping = 0;

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									 : BPF_RB_NO_WAKEUP;
}

/*
 * Staging (struct iowhy_stage, iowhy.h). A record of the five high-volume types is
 * built in this CPU's stage, and a full stage goes to the ring buffer in one helper
 * call, where a reserve + submit per record would pay the ring's lock, its atomics and
 * the record header's commit every time. The lock is never waited for: whoever finds
 * it taken writes to the ring directly.
 */
static __always_inline void count_n(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += n;
}

/* Hand the staged records to the ring buffer, or count them lost per type. */
static __always_inline void stage_flush(struct iowhy_stage *sb)
{
	__u32 used = sb->used_bytes;

	if (used > IOWHY_STAGE_BYTES) /* never: bounds the size for the verifier */
		used = IOWHY_STAGE_BYTES;
	if (used && bpf_ringbuf_output(&rb, sb->buf, used, wakeup_flag())) {
		/* IOWHY_C_RB_<type> is IOWHY_REC_<type> - 1 */
		count_n(IOWHY_C_RB_REQUEST, sb->nrec_u32[IOWHY_REC_REQUEST]);
		count_n(IOWHY_C_RB_FSYNC, sb->nrec_u32[IOWHY_REC_FSYNC]);
		count_n(IOWHY_C_RB_JOURNAL, sb->nrec_u32[IOWHY_REC_JOURNAL]);
		count_n(IOWHY_C_RB_OFFCPU, sb->nrec_u32[IOWHY_REC_OFFCPU]);
		count_n(IOWHY_C_RB_HELPER, sb->nrec_u32[IOWHY_REC_HELPER]);
	}
	sb->nrec_u32[IOWHY_REC_REQUEST] = 0;
	sb->nrec_u32[IOWHY_REC_FSYNC] = 0;
	sb->nrec_u32[IOWHY_REC_JOURNAL] = 0;
	sb->nrec_u32[IOWHY_REC_OFFCPU] = 0;
	sb->nrec_u32[IOWHY_REC_HELPER] = 0;
	sb->used_bytes = 0;
}

/*
 * Room for one record in this CPU's stage, held by the caller until stage_end(); NULL
 * when the stage is taken or recording is stopping: the caller then reserves in the
 * ring buffer. `stopping` is read with the stage held, so once the recorder has set it
 * and taken every stage once, no record can be left in a stage.
 */
static __always_inline void *stage_begin(struct iowhy_stage **sbp, __u32 size)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct iowhy_stage *sb = bpf_map_lookup_elem(&stage, &cpu);
	__u32 used;

	if (!sb || __sync_lock_test_and_set(&sb->busy_u32, 1))
		return NULL;
	if (stopping) {
		__sync_lock_test_and_set(&sb->busy_u32, 0);
		return NULL;
	}
	used = sb->used_bytes;
	if (used > IOWHY_STAGE_BYTES - size) {
		stage_flush(sb);
		used = 0;
	}
	*sbp = sb;
	return sb->buf + used;
}

/* Commit a record begun with stage_begin() (sb set) or reserved in the ring (sb NULL). */
static __always_inline void stage_end(struct iowhy_stage *sb, void *e, __u16 type, __u32 size)
{
	if (!sb) {
		bpf_ringbuf_submit(e, wakeup_flag());
		return;
	}
	sb->used_bytes += size;
	if (type <= IOWHY_REC_MAX)
		sb->nrec_u32[type] += 1;
	__sync_lock_test_and_set(&sb->busy_u32, 0);
}

static __always_inline int is_tracked(__u32 tgid)
{
	__u32 word = tgid >> 6;
	__u64 *w = bpf_map_lookup_elem(&tracked, &word);

	return w && ((*w >> (tgid & 63)) & 1);
}

static __always_inline int set_tracked(__u32 tgid, int on)
{
	__u32 word = tgid >> 6;
	__u64 *w = bpf_map_lookup_elem(&tracked, &word);

	if (!w)
		return -1;
	if (on)
		__sync_fetch_and_or(w, 1ULL << (tgid & 63));
	else
		__sync_fetch_and_and(w, ~(1ULL << (tgid & 63)));
	return 0;
}

static __always_inline void fill_hdr(struct iowhy_rec_hdr *h, __u16 type, __u16 size, __u64 ts)
{
	h->type = type;
	h->size_bytes = size;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = ts;
}

/*
 * The current task's comm into dst[IOWHY_COMM_LEN], as bpf_get_current_comm() gives it:
 * NUL-terminated, zero after the NUL. In tp_btf programs it is two loads through the
 * task's BTF pointer, about 35 ns less than the helper here, paid by every request (its
 * submitter), every recorded waking (its waker) and every journal record. The bytes after
 * the first NUL are cleared as the helper's copy clears them: kernels that set comm with
 * strlcpy() leave the tail of a longer earlier name there.
 */
static __always_inline void current_comm(int btf, char *dst)
{
	const __u64 ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	struct task_struct *t;
	__u64 a, b, z;

	if (!btf) {
		bpf_get_current_comm(dst, IOWHY_COMM_LEN);
		return;
	}
	t = bpf_get_current_task_btf();
	a = *(__u64 *)&t->comm[0];
	b = *(__u64 *)&t->comm[8];
	/* The lowest byte flagged in z is the first NUL of the word (bytes below it
	 * never borrow); keep only the bytes before it. */
	z = (a - ones) & ~a & highs;
	if (z) {
		a &= ((z & -z) >> 7) - 1;
		b = 0;
	} else {
		z = (b - ones) & ~b & highs;
		b &= z ? ((z & -z) >> 7) - 1 : ~0ULL >> 8; /* 15 bytes and the NUL at most */
	}
	__builtin_memcpy(dst, &a, 8);
	__builtin_memcpy(dst + 8, &b, 8);
}

#define DEV_MAJOR(d) iowhy_dev_major(d)
#define DEV_MINOR(d) iowhy_dev_minor(d)

/* ---------------------------------------------------------------- block layer --- */

static __always_inline __u32 disk_devt(int btf, struct gendisk *disk)
{
	__u32 major = RD(btf, disk, major);
	__u32 minor = RD(btf, disk, first_minor);

	return iowhy_mkdev(major, minor);
}

/*
 * Whether --dev asked for devt. Every block event asks (three or four per request), so
 * the devices are constants the verifier sees (read-only data, set before load), scanned
 * in a loop it bounds by nr_devs: a compare per device, where a hash-map lookup costs
 * about 30 ns here.
 */
static __always_inline int dev_wanted(__u32 devt)
{
	if (!nr_devs)
		return 1;
	for (int i = 0; i < IOWHY_MAX_DEVS && i < nr_devs; i++)
		if (devs[i] == devt)
			return 1;
	return 0;
}

/* IOWHY_OP_* and IOWHY_F_* of a request's raw flags (normalize) */
struct norm {
	__u8 op;
	__u16 iflags;
};

/* Normalize op and REQ_* bits, whose numbering changes across kernels: those of
 * cmd_flags (rq->cmd_flags) and bio_flags (the OR of its bios' bi_opf). */
static __always_inline struct norm normalized(__u32 cmd_flags, __u32 bio_flags)
{
	__u32 all = cmd_flags | bio_flags;
	__u32 op = cmd_flags & 0xff;
	struct norm n = {};
	__u16 f = 0;

	if (op == bpf_core_enum_value(enum req_op, REQ_OP_READ))
		n.op = IOWHY_OP_READ;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE))
		n.op = IOWHY_OP_WRITE;
	else if (op == req_op_flush())
		n.op = IOWHY_OP_FLUSH;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_DISCARD))
		n.op = IOWHY_OP_DISCARD;
	else
		n.op = IOWHY_OP_OTHER;
	if (all & REQ_BIT(__REQ_SYNC))
		f |= IOWHY_F_SYNC;
	if (all & REQ_BIT(__REQ_META))
		f |= IOWHY_F_META;
	if (all & REQ_BIT(__REQ_FUA))
		f |= IOWHY_F_FUA;
	if (all & REQ_BIT(__REQ_PREFLUSH))
		f |= IOWHY_F_PREFLUSH;
	if (all & REQ_BIT(__REQ_RAHEAD))
		f |= IOWHY_F_RAHEAD;
	if (all & REQ_BIT(__REQ_PRIO))
		f |= IOWHY_F_PRIO;
	if (all & REQ_BIT(__REQ_IDLE))
		f |= IOWHY_F_IDLE;
	n.iflags = f;
	return n;
}

/* The request's op and iflags from its raw flags (what the record holds). */
static __always_inline void normalize(struct iowhy_request *r)
{
	struct norm n = normalized(r->cmd_flags, r->bio_flags);

	r->op = n.op;
	r->iflags = n.iflags;
}

/*
 * block_getrq: blk-mq has just given `bio` a request of its own, in the submitter's
 * context. It fires once per request, where block_bio_queue fires once per bio (most
 * bios of a streaming write merge into an existing request, and a merged bio's origin
 * is not kept: its flags are read from the bio when its request is inserted). The time
 * is after any wait for a driver tag or writeback throttling, which block_bio_queue
 * would have included.
 */
static __always_inline void on_getrq(int btf, struct bio *bio)
{
	__u64 key = BIO_KEY(btf, bio), id, tag;
	__u32 idx = bio_set(key), idx1 = idx + 1;
	struct bio_info *a, *b, *s;

	if (nr_devs && !dev_wanted(disk_devt(btf, bio_disk(btf, bio))))
		return;
	a = bpf_map_lookup_elem(&bios, &idx);
	b = bpf_map_lookup_elem(&bios, &idx1);
	if (!a || !b)
		return;
	/*
	 * A slot that still holds this very bio, else a free one, else the one written
	 * longer ago. A bio submitted again at the same address whose earlier slot was
	 * never taken must not leave that slot beside the new one, or the request would take
	 * the stale origin and time, and so would every later request of that bio at that
	 * address (blkdev_issue_flush's empty PREFLUSH is an on-stack bio, at one address
	 * call after call): a slot is left behind by a request whose insert, issue and
	 * completion the probes all missed (one submitted while they were being attached).
	 */
	s = a->bio == key ? a : b->bio == key ? b : a->bio == BIO_FREE ? a
		: b->bio == BIO_FREE ? b : a->ts_ns <= b->ts_ns ? a : b;
	/*
	 * Claim the slot by marking it busy: a reader that has already matched the old
	 * tag then fails its own compare-and-swap and ignores what it read, and another
	 * CPU's submission leaves the slot alone. A slot another CPU is claiming at this
	 * moment leaves the other way of the set, so two submissions hashing to one set at
	 * once can both keep their origin.
	 */
	tag = s->bio;
	if (tag == BIO_BUSY || __sync_val_compare_and_swap(&s->bio, tag, BIO_BUSY) != tag) {
		s = s == a ? b : a;
		tag = s->bio;
		if (tag == BIO_BUSY || __sync_val_compare_and_swap(&s->bio, tag, BIO_BUSY) != tag) {
			count(IOWHY_C_BIOMAP_FULL);
			return;
		}
	}
	id = bpf_get_current_pid_tgid();
	s->ts_ns = bpf_ktime_get_ns();
	s->tgid = id >> 32;
	s->tid = (__u32)id;
	s->opf = RD(btf, bio, bi_opf);
	s->tracked = is_tracked(s->tgid);
	current_comm(btf, s->comm);
	__sync_lock_test_and_set(&s->bio, key);
}

/*
 * Take the submission record of `bio` out of the table into `out`: 1 if it was there
 * and nobody overwrote it while it was being read.
 */
static __always_inline int bio_take(__u64 key, struct bio_info *out)
{
	__u32 idx = bio_set(key);

	for (int i = 0; i < 2; i++, idx++) {
		struct bio_info *s = bpf_map_lookup_elem(&bios, &idx);

		if (!s || s->bio != key)
			continue;
		__builtin_memcpy(out, s, sizeof(*out));
		return __sync_val_compare_and_swap(&s->bio, key, BIO_FREE) == key;
	}
	return 0;
}

/*
 * With --dev, a request on another device: its events return before any table is
 * touched (the slot reads cost more than this check), so tracing one disk of a busy
 * machine costs the other disks' events little more than the dispatch.
 */
static __always_inline int rq_unwanted(int btf, struct request *rq)
{
	return nr_devs && !dev_wanted(disk_devt(btf, rq_disk(btf, rq)));
}

static __always_inline struct iowhy_request *rq_lookup(__u64 key)
{
	__u32 idx = rq_set(key);
	struct rq_slot *s;

	for (int i = 0; i < 2; i++, idx++) {
		s = bpf_map_lookup_elem(&rq_tab, &idx);
		if (s && s->tag == key)
			return &s->r;
	}
	if (!rqs_used)
		return NULL;
	s = bpf_map_lookup_elem(&rqs, &key);
	return s ? &s->r : NULL;
}

/*
 * The request's entry, created on first sight (insert, issue or completion), by a
 * caller that has just looked it up and found none. The block layer orders a request's
 * events, so no other CPU looks this key up meanwhile.
 */
static __always_inline struct iowhy_request *rq_create(int btf, struct request *rq, __u64 key)
{
	__u32 idx, zero = 0, devt;
	struct rq_slot *s;

	if (stopping)
		return NULL;
	devt = disk_devt(btf, rq_disk(btf, rq)); /* a wanted one: see rq_unwanted */
	idx = rq_set(key);
	for (int i = 0; i < 2; i++, idx++) {
		s = bpf_map_lookup_elem(&rq_tab, &idx);
		if (s && !s->tag && __sync_val_compare_and_swap(&s->tag, 0, key) == 0) {
			__builtin_memset(&s->r, 0, sizeof(s->r));
			s->in_hash = 0;
			goto init;
		}
	}
	s = bpf_map_lookup_elem(&rq_scratch, &zero);
	if (!s)
		return NULL;
	__builtin_memset(s, 0, sizeof(*s));
	s->tag = key;
	s->in_hash = 1;
	__sync_fetch_and_add(&rqs_used, 1);
	if (bpf_map_update_elem(&rqs, &key, s, BPF_NOEXIST)) {
		__sync_fetch_and_sub(&rqs_used, 1);
		count(IOWHY_C_RQMAP_FULL);
		return NULL;
	}
	s = bpf_map_lookup_elem(&rqs, &key);
	if (!s)
		return NULL;
init:
	s->r.dev_major = DEV_MAJOR(devt);
	s->r.dev_minor = DEV_MINOR(devt);
	{
		__u64 *n = bpf_map_lookup_elem(&rq_seqs, &zero);

		s->r.seq = n ? __sync_fetch_and_add(n, 1) * nr_cpus + bpf_get_smp_processor_id() : 0;
	}
	return &s->r;
}

/* Free the entry of `r` (found under `key`); its contents are dead after this. */
static __always_inline void rq_release(struct iowhy_request *r, __u64 key)
{
	struct rq_slot *s = (struct rq_slot *)r;

	if (s->in_hash) {
		if (bpf_map_delete_elem(&rqs, &key) == 0)
			__sync_fetch_and_sub(&rqs_used, 1);
	} else {
		/* a full barrier: what was read from the slot was read before it is free */
		__sync_lock_test_and_set(&s->tag, 0);
	}
}

/* Fold the bios now in the request into it: origin of the first, flags of all. */
static __always_inline void rq_take_bios(int btf, struct iowhy_request *r, struct request *rq)
{
	struct bio *bio = RD(btf, rq, bio);
	__u32 n = 0;

	for (int i = 0; i < IOWHY_MAX_BIO_WALK; i++) {
		struct bio_info one, *info = &one;

		if (!bio)
			break;
		if (bio_take(BIO_KEY(btf, bio), &one)) {
			if (!(r->flags_u16 & IOWHY_RQ_ORIGIN)) {
				r->flags_u16 |= IOWHY_RQ_ORIGIN;
				if (info->tracked)
					r->flags_u16 |= IOWHY_RQ_TRACKED;
				r->submit_ns = info->ts_ns;
				r->tgid = info->tgid;
				r->tid = info->tid;
				__builtin_memcpy(r->comm, info->comm, sizeof(r->comm));
			}
			r->bio_flags |= info->opf;
		} else {
			r->bio_flags |= RD(btf, bio, bi_opf);
		}
		n++;
		bio = RD(btf, bio, bi_next);
	}
	if (bio)
		count(IOWHY_C_BIO_WALK_CAP);
	if (n > r->nr_bios)
		r->nr_bios = n;
}

static __always_inline void rq_emit(struct iowhy_request *r, __u64 key, __u64 now)
{
	struct iowhy_stage *sb = NULL;
	struct iowhy_request *e;

	normalize(r);
	r->pad0 = 0;
	if (!(r->flags_u16 & IOWHY_RQ_ORIGIN) && r->nr_bios)
		count(IOWHY_C_NO_ORIGIN);
	/* top reads the requests of tracked tasks only (a waking takes its request's class
	 * from the completion stack) */
	if (top_mode && !(r->flags_u16 & IOWHY_RQ_TRACKED)) {
		rq_release(r, key);
		return;
	}
	fill_hdr(&r->hdr, IOWHY_REC_REQUEST, sizeof(*r), now);
	e = stage_begin(&sb, sizeof(*r));
	if (e) {
		__builtin_memcpy(e, r, sizeof(*r));
		stage_end(sb, e, IOWHY_REC_REQUEST, sizeof(*r));
	} else if (bpf_ringbuf_output(&rb, r, sizeof(*r), wakeup_flag())) {
		/*
		 * Straight from the slot: one helper call, cheaper than a reserve, a copy in
		 * BPF and a submit.
		 */
		count(IOWHY_C_RB_REQUEST);
	}
	rq_release(r, key);
}

#define RQ_REQUEUED 1 /* pad0: requeued, so seeing it issued again is expected */

/*
 * An entry already issued and not requeued, seen inserted or issued again: the same
 * struct request now carries a new I/O, and the previous one's completion was never
 * seen. Write the old one out, flagged, and count it.
 *
 * The kernel can skip a probe without counting a recursion miss. On some kernels (a
 * Firecracker guest kernel is one) bpf_trace_run* returns before running any tracing
 * program while current->tgid == 1, unless PID 1 loaded the program. Block completions
 * (and issues) done in softirq on top of a PID 1 thread, such as an agent's vsock
 * traffic, are then invisible to every BPF program, bpftrace's included, while the
 * tracefs event records them (docs/design.md). Nothing in BPF can recover the time;
 * the probes make sure each such request is still written, flagged and counted.
 */
static __always_inline struct iowhy_request *rq_fresh(int btf, struct request *rq, __u64 key)
{
	struct iowhy_request *r = rq_lookup(key);
	__u64 now;

	if (r && r->issue_ns && !(r->pad0 & RQ_REQUEUED)) {
		now = bpf_ktime_get_ns();
		r->flags_u16 |= IOWHY_RQ_LOST_DONE;
		count(IOWHY_C_LOST_DONE);
		rq_emit(r, key, now);
		r = NULL;
	}
	return r ? r : rq_create(btf, rq, key);
}

/*
 * Whether a request was allocated after every probe was attached, so that its insert and
 * issue should have been seen. start_time_ns is set only when the queue keeps I/O
 * statistics or has a scheduler; 0 answers "unknown" (no).
 */
static __always_inline int rq_born_recording(int btf, struct request *rq)
{
	__u64 born = RD(btf, rq, start_time_ns);

	return attach_ns && born > attach_ns;
}

static __always_inline void on_rq_insert(int btf, struct request *rq)
{
	struct iowhy_request *r;

	if (rq_unwanted(btf, rq))
		return;
	r = rq_fresh(btf, rq, RQ_KEY(btf, rq));

	if (!r)
		return;
	if (!r->insert_ns)
		r->insert_ns = bpf_ktime_get_ns();
	rq_take_bios(btf, r, rq);
	/* What a request still queued when recording stops is written out with (the issue
	 * rereads all three). */
	if (!r->issue_ns) {
		r->start_sector = RD(btf, rq, __sector);
		r->len_bytes = RD(btf, rq, __data_len);
		r->cmd_flags = RD(btf, rq, cmd_flags);
		normalize(r);
	}
}

static __always_inline void on_rq_issue(int btf, struct request *rq)
{
	struct iowhy_request *r;

	if (rq_unwanted(btf, rq))
		return;
	r = rq_fresh(btf, rq, RQ_KEY(btf, rq));

	if (!r)
		return;
	r->pad0 &= ~RQ_REQUEUED;
	r->issue_ns = bpf_ktime_get_ns();
	r->start_sector = RD(btf, rq, __sector);
	r->len_bytes = RD(btf, rq, __data_len);
	r->cmd_flags = RD(btf, rq, cmd_flags);
	r->rq_flags |= RD(btf, rq, rq_flags);
	if (r->rq_flags & rqf_flush_seq())
		r->flags_u16 |= IOWHY_RQ_FLUSH_SEQ;
	rq_take_bios(btf, r, rq);
	if ((r->cmd_flags & 0xff) == req_op_flush())
		r->start_sector = 0;
	/*
	 * The op and flags now, not only at completion: a request in flight when recording
	 * stops is written out by the recorder as it stands (dump_inflight), and one whose
	 * completion the kernel never delivered (rq_fresh) stays in flight until then.
	 */
	normalize(r);
}

static __always_inline void on_rq_requeue(int btf, struct request *rq)
{
	struct iowhy_request *r = rq_lookup(RQ_KEY(btf, rq));

	if (r) {
		r->requeues++;
		r->pad0 |= RQ_REQUEUED;
	}
}

/* A request merged into another one is freed without completing. */
static __always_inline void on_rq_merge(int btf, struct request *rq)
{
	__u64 key = RQ_KEY(btf, rq);
	struct iowhy_request *r = rq_lookup(key);

	if (r) {
		rq_release(r, key);
		count(IOWHY_C_RQ_MERGED);
	}
}

/*
 * Requests being completed on this CPU, innermost last: what ties a wakeup to the
 * request whose completion caused it. block_rq_complete fires at the top of
 * blk_update_request (and of blk_complete_request, the batched path), before the loop
 * that ends the request's bios; bio_endio's wake_up of the waiting thread therefore runs
 * inside the tracepoint's call chain, after it, on the same CPU and in the same context
 * (hardirq, softirq or the completing task). No event marks the end of that chain, so an
 * entry is trusted at sched_waking only while
 *   - the context (hardirq/softirq/NMI bits of the preempt count) and the current task
 *     are those of its push (an interrupt that nests on the chain wakes from another
 *     context and does not match),
 *   - its request is not yet freed (struct request's state is not MQ_RQ_IDLE: the block
 *     layer frees a fully completed request after the bios are ended, which also ends
 *     an entry left by a completion that finished),
 *   - it was pushed less than DONE_MAX_AGE_NS ago (a partial completion leaves a live
 *     request behind).
 * Nesting: a loop device on a file of another disk, with direct I/O, completes its
 * request inside the backing request's completion, so two (or more) entries are live
 * at once; the innermost one that matches is the link. A flush sequence's data stage
 * ends no bio (req_bio_endio skips them until the final, zero-byte completion) and is
 * not pushed.
 *
 * Cost: block_rq_complete adds a per-CPU array lookup, a preempt-count read and a few
 * stores, plus one probe read of a request's state for each entry it finds above it;
 * sched_waking of a tracked thread adds the lookup and one probe read per entry it
 * examines (the stack is almost always empty or one deep). Nothing for other threads.
 */
#define DONE_DEPTH 4
#define DONE_MAX_AGE_NS 2000000ULL
#define DONE_SEQ_NONE ((__u64)-1) /* a request the table could not follow */
#define DONE_CTX_UNKNOWN 0xffffffffU /* ctx_pc when the preempt count is unreadable */

struct done_ent {
	__u64 rq;     /* the struct request's address */
	__u64 seq;    /* its iowhy_request.seq, or DONE_SEQ_NONE */
	__u64 ts_ns;  /* when block_rq_complete fired */
	__u32 ctx_pc; /* preempt count & IOWHY_PC_CTX_MASK at the push */
	__u32 pid;    /* current task at the push (0: idle) */
	__u32 by_hctx; /* never started (state MQ_RQ_IDLE at the push): alive while mq_hctx is set */
	__u32 cls;     /* top_mode: its IOWHY_RQC_* (0: unknown) */
};

struct done_stack {
	__u32 n;
	__u32 pad;
	struct done_ent e[DONE_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct done_stack);
} done_stk SEC(".maps");

/*
 * Whether the request of an entry is still allocated. blk_mq_free_request() and the
 * batched completion set a started request's state back to MQ_RQ_IDLE; a request the
 * driver never started (an empty PREFLUSH request, completed by the flush machinery)
 * is IDLE all along, and __blk_mq_free_request() clears its mq_hctx instead.
 */
static __always_inline int done_rq_live(int btf, struct done_ent *e)
{
	struct request *rq = (struct request *)e->rq;

	if (HAVE_RDONLY_CAST(btf)) {
		rq = bpf_rdonly_cast(rq, bpf_core_type_id_kernel(struct request));
		return e->by_hctx ? rq->mq_hctx != NULL : rq->state != 0;
	}
	if (e->by_hctx)
		return BPF_CORE_READ(rq, mq_hctx) != NULL;
	return BPF_CORE_READ(rq, state) != 0;
}

static __always_inline void done_push(int btf, struct request *req, __u64 seq, __u32 cls,
				      __u64 now)
{
	__u64 rq = (__u64)req;
	__u32 zero = 0, n, pc;
	struct done_stack *d = bpf_map_lookup_elem(&done_stk, &zero);
	struct done_ent *e;

	if (!d)
		return;
	n = d->n;
	if (n > DONE_DEPTH)
		n = DONE_DEPTH;
	/* Drop finished entries above (and an older entry of this very request). */
	for (int i = 0; i < DONE_DEPTH; i++) {
		if (!n)
			break;
		e = &d->e[(n - 1) & (DONE_DEPTH - 1)];
		if (e->rq != rq && now - e->ts_ns < DONE_MAX_AGE_NS && done_rq_live(btf, e))
			break;
		n--;
	}
	if (n >= DONE_DEPTH)
		n = DONE_DEPTH - 1; /* deeper than ever seen: the innermost one wins */
	e = &d->e[n & (DONE_DEPTH - 1)];
	e->rq = rq;
	e->seq = seq;
	e->ts_ns = now;
	e->ctx_pc = get_preempt_count(btf, &pc) ? DONE_CTX_UNKNOWN : pc & IOWHY_PC_CTX_MASK;
	e->pid = (__u32)bpf_get_current_pid_tgid();
	e->by_hctx = RD(btf, req, state) == 0;
	e->cls = cls;
	d->n = n + 1;
}

/*
 * At sched_waking of a tracked thread: the request whose completion is waking it, from
 * the innermost matching entry. `pc` is the context (preempt count & IOWHY_PC_CTX_MASK,
 * or DONE_CTX_UNKNOWN). Returns its depth (1 = outermost), 0 if none.
 */
static __always_inline __u32 done_link(int btf, __u32 pc, __u64 now, __u64 *seq, __u32 *cls)
{
	__u32 zero = 0, n, pid = (__u32)bpf_get_current_pid_tgid();
	struct done_stack *d = bpf_map_lookup_elem(&done_stk, &zero);

	if (!d)
		return 0;
	n = d->n;
	if (n > DONE_DEPTH)
		n = DONE_DEPTH;
	for (int i = 0; i < DONE_DEPTH; i++) {
		struct done_ent *e;

		if (!n)
			break;
		e = &d->e[(n - 1) & (DONE_DEPTH - 1)];
		if (e->ctx_pc == pc && e->pid == pid && now - e->ts_ns < DONE_MAX_AGE_NS &&
		    done_rq_live(btf, e)) {
			if (e->seq == DONE_SEQ_NONE)
				return 0;
			*seq = e->seq;
			*cls = e->cls;
			return n;
		}
		n--;
	}
	return 0;
}

/*
 * top_mode: the class of a request at its final completion (IOWHY_RQC_*), for the thread
 * its completion wakes (on_waking): `iowhy top` names that wait by it. A flush is what
 * the analysis calls one (model/classify.py): REQ_OP_FLUSH, or an empty PREFLUSH write
 * (an fsync's blkdev_issue_flush(), completed when the flush it waited for is done).
 */
static __always_inline __u32 rq_class(struct iowhy_request *r, __u32 cmd)
{
	struct norm n = normalized(cmd, r->bio_flags); /* cmd: its cmd_flags at completion */

	if (n.op == IOWHY_OP_FLUSH ||
	    (n.op == IOWHY_OP_WRITE && !r->len_bytes && (n.iflags & IOWHY_F_PREFLUSH)))
		return IOWHY_RQC_BARRIER;
	if ((*(__u64 *)r->comm & 0xffffffffffULL) == 0x2f3264626aULL) /* "jbd2/" */
		return IOWHY_RQC_LOG;
	if (n.op == IOWHY_OP_READ)
		return IOWHY_RQC_READ;
	if (n.iflags & IOWHY_F_META)
		return IOWHY_RQC_META;
	return IOWHY_RQC_DATA;
}

/*
 * A flush-sequenced data request completes twice: its data stage (RQF_FLUSH_SEQ still
 * set) and, once the post-flush is done, again with 0 bytes after the flag is cleared.
 * Only the latter finishes it. An empty PREFLUSH request is never issued: its single
 * completion comes when the FF flush it waited for is done.
 */
static __always_inline void on_rq_complete(int btf, struct request *rq, int error,
					   unsigned int nr_bytes)
{
	__u64 key = RQ_KEY(btf, rq), now;
	struct iowhy_request *r;
	__u32 rqf, cmd, len;
	int is_flush;

	if (rq_unwanted(btf, rq))
		return;
	now = bpf_ktime_get_ns();
	r = rq_lookup(key);
	rqf = RD(btf, rq, rq_flags);
	cmd = RD(btf, rq, cmd_flags);
	len = RD(btf, rq, __data_len);
	is_flush = (cmd & 0xff) == req_op_flush();

	if (!r || (!r->issue_ns && len)) {
		/*
		 * Not seen issued. Either it started before recording, or the kernel did not run
		 * the issue probe (see rq_fresh). The request still holds its op, sector
		 * and length here: blk_update_request traces before it advances them.
		 */
		int created = !r;

		if (!r)
			r = rq_create(btf, rq, key);
		if (!r) {
			if (!(rqf & rqf_flush_seq()) || is_flush)
				done_push(btf, rq, DONE_SEQ_NONE, 0, now);
			return;
		}
		r->cmd_flags = cmd;
		r->rq_flags |= rqf;
		r->start_sector = RD(btf, rq, __sector);
		if (!r->len_bytes)
			r->len_bytes = len;
		rq_take_bios(btf, r, rq);
		r->flags_u16 |= IOWHY_RQ_NO_ISSUE;
		/*
		 * An empty PREFLUSH request (no data, not REQ_OP_FLUSH) is never issued: that
		 * is its normal life. Anything else created while recording should have been.
		 */
		if (!created || ((len || is_flush) && rq_born_recording(btf, rq)) ||
		    ((r->flags_u16 & IOWHY_RQ_ORIGIN) && !is_flush && len)) {
			r->flags_u16 |= IOWHY_RQ_LOST_ISSUE;
			count(IOWHY_C_LOST_ISSUE);
		} else if (!(r->flags_u16 & IOWHY_RQ_ORIGIN) && !is_flush) {
			/* no bio of ours: it was submitted before recording started */
			r->flags_u16 |= IOWHY_RQ_UNMATCHED;
			count(IOWHY_C_UNMATCHED_DONE);
		}
		if (is_flush || r->start_sector == (__u64)-1)
			r->start_sector = 0;
	}
	if (!r->data_done_ns)
		r->data_done_ns = now;
	r->done_bytes += nr_bytes;
	if ((rqf & rqf_flush_seq()) && !is_flush) {
		r->flags_u16 |= IOWHY_RQ_FLUSH_SEQ;
		return;
	}
	done_push(btf, rq, r->seq, top_mode ? rq_class(r, cmd) : 0, now);
	r->done_ns = now;
	r->error = error;
	rq_emit(r, key, now);
}

/*
 * block_bio_complete: a bio of a bio-based device (zram, dm, md), whose I/O never
 * becomes a request and so has no other record (struct iowhy_bio). Cost: request-based
 * devices trace their bios' completion in blk_update_request and clear the flag that
 * makes bio_endio fire this event, so it runs only for bio-based I/O (and bios failed
 * before they reached a request): one ring-buffer record each.
 */
static __always_inline void on_bio_complete(int btf, struct bio *bio)
{
	__u32 devt = disk_devt(btf, bio_disk(btf, bio)), opf;
	struct iowhy_request n = {};
	struct iowhy_bio *e;
	__u64 pt;

	if (!dev_wanted(devt))
		return;
	e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(IOWHY_C_RB_BIO);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_hdr(&e->hdr, IOWHY_REC_BIO, sizeof(*e), bpf_ktime_get_ns());
	opf = RD(btf, bio, bi_opf);
	e->sector = RD(btf, bio, bi_iter.bi_sector);
	e->len_bytes = RD(btf, bio, bi_iter.bi_size);
	e->dev_major = DEV_MAJOR(devt);
	e->dev_minor = DEV_MINOR(devt);
	e->opf = opf;
	e->error = RD(btf, bio, bi_status);
	pt = bpf_get_current_pid_tgid();
	e->tgid = pt >> 32;
	e->tid = (__u32)pt;
	n.cmd_flags = opf;
	normalize(&n);
	e->op = n.op;
	e->iflags = n.iflags;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, wakeup_flag());
}

/* ------------------------------------------------------------- tracked tasks --- */

/*
 * The state of thread `t` (tid `tid`), created on first use if `create`. `t` is a
 * BTF task pointer in tp_btf programs; use_task_storage is never set for raw_tp ones,
 * whose verifier then drops that branch unseen.
 */
static __always_inline struct task_state *task_state_of(struct task_struct *t, __u32 tid,
							int create)
{
	struct task_state *st;

	if (use_task_storage) {
		st = bpf_task_storage_get(&task_store, t, NULL, 0);
		if (st || !create)
			return st;
		st = bpf_task_storage_get(&task_store, t, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (st) {
			st->sys_nr = -1;
			st->off_sys_nr = -1;
		}
	} else {
		struct task_state zero = {};

		st = bpf_map_lookup_elem(&tasks, &tid);
		if (st || !create)
			return st;
		zero.sys_nr = -1;
		zero.off_sys_nr = -1;
		bpf_map_update_elem(&tasks, &tid, &zero, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&tasks, &tid);
	}
	if (!st)
		count(IOWHY_C_TASKMAP_FULL);
	return st;
}

static __always_inline struct task_state *current_state(__u32 tid, int create)
{
	return task_state_of(use_task_storage ? bpf_get_current_task_btf() : NULL, tid, create);
}

/* The cgroup v2 a task is in: its default hierarchy's cgroup (0: none, or unreadable). */
static __always_inline __u64 task_cgroup_id(struct task_struct *t)
{
	struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);

	return cg ? cgroup_id_of(cg) : 0;
}

/* cgid: the cgroup the task is in at the event (task_cgroup_id, or the one it moved to) */
static __always_inline void emit_task_at(struct task_struct *t, __u16 event, __u32 parent_tgid,
					 __s32 code, __u64 ts, __u64 cgid)
{
	struct iowhy_task *e;

	if (top_mode)
		return;
	e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(IOWHY_C_RB_TASK);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_hdr(&e->hdr, IOWHY_REC_TASK, sizeof(*e), ts);
	e->tgid = BPF_CORE_READ(t, tgid);
	e->tid = BPF_CORE_READ(t, pid);
	e->parent_tgid = parent_tgid;
	e->exit_code = code;
	e->event_u16 = event;
	e->cgroup_id = cgid;
	BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	bpf_ringbuf_submit(e, wakeup_flag());
}

static __always_inline void emit_task(struct task_struct *t, __u16 event, __u32 parent_tgid,
				      __s32 code)
{
	if (top_mode) /* before the reads of the arguments below: top keeps no task record */
		return;
	emit_task_at(t, event, parent_tgid, code, bpf_ktime_get_ns(), task_cgroup_id(t));
}

/* ------------------------------------------------------------ --cgroup --- */

/*
 * --cgroup: every process with a task in a cgroup v2 (follow_cgroup_id, set by the
 * recorder) or below it. The recorder tracks the processes in it at the start; a process
 * that joins later is tracked here, when it is moved in (cgroup_attach_task, attached only
 * with --cgroup) or forked into it by an untracked parent (clone3 CLONE_INTO_CGROUP).
 * Forks of a tracked process are tracked as always. Tracking stays per process (tgid):
 * a thread moved in alone (cgroup.threads) brings its process, and a process that leaves
 * stays followed until it exits. The hot paths are unchanged: the check runs on
 * migrations and on forks of untracked parents only, and only with --cgroup (otherwise
 * the verifier drops it).
 */
const volatile __u64 follow_cgroup_id = 0;
#define IOWHY_CGROUP_DEPTH 64 /* ancestors looked at; deeper nesting is not followed */

/* tgid -> when its process joined (a thread asleep since then is opened there, not at
 * attach_ns: open_from_start). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} joined SEC(".maps");

static __always_inline int cgroup_followed(struct cgroup *cg)
{
	for (int i = 0; i < IOWHY_CGROUP_DEPTH && cg; i++) {
		if (cgroup_id_of(cg) == follow_cgroup_id)
			return 1;
		cg = BPF_CORE_READ(cg, self.parent, cgroup);
	}
	return 0;
}

/* The process of `t` joined the followed cgroup now (moved to, or forked into, `dst`):
 * track it, say so. */
static __always_inline void join_followed(struct task_struct *t, __u32 tgid, __u32 parent_tgid,
					  struct cgroup *dst)
{
	__u64 now = bpf_ktime_get_ns();

	if (bpf_map_update_elem(&joined, &tgid, &now, BPF_ANY) || set_tracked(tgid, 1)) {
		count(IOWHY_C_TRACKMAP_FULL);
		return;
	}
	/* at the time open_from_start opens its threads' waits from */
	emit_task_at(t, IOWHY_TASK_JOIN, parent_tgid, 0, now, cgroup_id_of(dst));
}

/* cgroup_attach_task: `task` (a thread, or a leader with its whole group) was moved to dst. */
static __always_inline void on_cgroup_attach(struct cgroup *dst, struct task_struct *task)
{
	__u32 tgid;

	if (!follow_cgroup_id)
		return;
	tgid = BPF_CORE_READ(task, tgid);
	if (!is_tracked(tgid) && cgroup_followed(dst))
		join_followed(task, tgid, 0, dst);
}

/* A fork by an untracked parent straight into the followed cgroup (CLONE_INTO_CGROUP). */
static __always_inline void fork_into_followed(struct task_struct *child, __u32 ptgid, __u32 ctgid)
{
	struct cgroup *cg;

	if (!follow_cgroup_id || ctgid == ptgid)
		return;
	cg = BPF_CORE_READ(child, cgroups, dfl_cgrp);
	if (cgroup_followed(cg))
		join_followed(child, ctgid, ptgid, cg);
}

/* When the process joined (0: it did not, it was tracked from the start or forked). */
static __always_inline __u64 joined_at(__u32 tgid)
{
	__u64 *j;

	if (!follow_cgroup_id)
		return 0;
	j = bpf_map_lookup_elem(&joined, &tgid);
	return j ? *j : 0;
}

static __always_inline void on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (!is_tracked(ptgid)) {
		fork_into_followed(child, ptgid, ctgid);
		return;
	}
	if (ctgid != ptgid && set_tracked(ctgid, 1))
		count(IOWHY_C_TRACKMAP_FULL);
	emit_task(child, IOWHY_TASK_FORK, ptgid, 0);
}

static __always_inline void on_exec(struct task_struct *p)
{
	if (is_tracked(BPF_CORE_READ(p, tgid)))
		emit_task(p, IOWHY_TASK_EXEC, 0, 0);
}

/* ----------------------------------------------------------------- syscalls --- */

/*
 * Helper threads: kernel threads a workload waits on while they work for it (jbd2
 * commits, XFS log and end-I/O workers, loop workers, writeback flushers and kblockd
 * are all kworkers or named threads). A kernel thread whose name starts with one of
 * "jbd2/", "kworker/", "loop", "xfsaild", "kswapd" becomes a helper for HELPER_HOLD_NS
 * when a tracked thread wakes it (handing it work: a commit, a queued work item), when
 * a marked helper wakes it while a tracked thread is asleep (the work handed on: a loop
 * worker's fsync of its backing file waking that filesystem's jbd2) or it wakes a
 * tracked thread from task context (the work is done); each such edge renews the mark. A helper asleep with no interval open when a tracked thread wakes it gets
 * one opened at that waking (its wait for a CPU and its work for the thread are then
 * recorded from the hand-off on). While a helper is marked and at least one tracked
 * thread is asleep (blocked_tracked), its off-CPU intervals are recorded like a
 * tracked thread's, as `helper` records: when it slept, who woke it, from which
 * context and which request's completion, its run-queue wait, and its total on-CPU time
 * at each switch-out (so its CPU time between two intervals is exact). An interval so opened is closed at the
 * helper's next switch-in even if no tracked thread is asleep any more. Kernel threads
 * that never touch the workload (another workload's writeback, say) stay unrecorded.
 *
 * Bound: one task_state per kernel thread so marked (task-local storage, or entries of
 * the `tasks` hash shared with tracked threads; kernel threads rarely exit, so those
 * entries stay), a handful of threads per workload, and its bit in `helper_pids`.
 *
 * Cost. The switch and waking programs run for every task on the machine, so a kernel
 * thread is first tested against `helper_pids` (an inlined array lookup of a word that is
 * almost never written): one that never helped costs no state lookup, no clock read and
 * no read of the shared blocked_tracked. A waking of a kernel thread by a tracked one, or
 * of a tracked one by a kernel thread in task context, reads the kernel thread's name
 * and writes its mark. While a tracked thread sleeps, a marked helper's switch-out looks
 * its state up and reads the clock; its switch-in and wakings look its state up. A
 * tracked thread's sleep and waking each add one atomic add on the shared counter. Each
 * helper interval then costs what a tracked thread's does (the waking's context and
 * completion-stack reads, a staged record): on a workload nearly always asleep in fsync
 * while the loop worker and kblockd work for it, that is most of what the probes add,
 * several helper records per fsync.
 */
#define HELPER_HOLD_NS 1000000000ULL
/*
 * Tracked threads asleep, not yet woken: changed by an atomic add from any CPU at every
 * tracked sleep and waking. It lives in a section of its own (a map of its own, so memory
 * of its own): in .bss it shared a cache line with what every block and staging program
 * reads (stopping, rqs_used, attach_ns), and each add took that line from the other
 * CPUs. It is read only for marked helpers, after the cheaper tests, since a read after
 * another CPU's add is a cache miss.
 */
__u64 blocked_tracked SEC(".data.waits") = 0;
#define IOWHY_PF_KTHREAD 0x00200000 /* include/linux/sched.h */

/*
 * Kernel threads ever marked helpers, one bit per pid (sized to pid_max by the recorder,
 * like `tracked`). A bit is set once, at the thread's first mark, and stays set when the
 * mark expires or the thread exits: it only says that looking the thread's state up may
 * find something (a reused pid costs one lookup that finds nothing). It replaces a count
 * of open helper intervals that every switch and waking read and every interval changed
 * twice, from any CPU.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536); /* u64 words: pid_max / 64, set by the recorder */
	__type(key, __u32);
	__type(value, __u64);
} helper_pids SEC(".maps");

static __always_inline int helper_pid(__u32 pid)
{
	__u32 word = pid >> 6;
	__u64 *w = bpf_map_lookup_elem(&helper_pids, &word);

	return w && ((*w >> (pid & 63)) & 1);
}

static __always_inline void set_helper_pid(__u32 pid)
{
	__u32 word = pid >> 6;
	__u64 *w = bpf_map_lookup_elem(&helper_pids, &word);

	if (w && !((*w >> (pid & 63)) & 1))
		__sync_fetch_and_or(w, 1ULL << (pid & 63));
}

static __always_inline int is_kthread(int btf, struct task_struct *t)
{
	return (RD(btf, t, flags) & IOWHY_PF_KTHREAD) && RD(btf, t, pid);
}

/*
 * "jbd2/", "kworker/", "loop", "xfsaild", "kswapd" as little-endian prefixes of comm: the
 * analyzer's HELPER_THREADS (analyzer/iowhy/filesystems.py; tests/unit/test_filesystems.py
 * decodes these constants and checks they are that list).
 */
static __always_inline int helper_name(int btf, struct task_struct *t)
{
	__u64 c = 0;

	if (btf)
		c = *(__u64 *)&t->comm[0];
	else if (bpf_probe_read_kernel(&c, sizeof(c), &t->comm))
		return 0;
	return c == 0x2f72656b726f776bULL ||                      /* kworker/ */
	       (c & 0xffffffffffULL) == 0x2f3264626aULL ||         /* jbd2/ */
	       (c & 0xffffffffULL) == 0x706f6f6cULL ||             /* loop */
	       (c & 0xffffffffffffffULL) == 0x646c6961736678ULL || /* xfsaild */
	       (c & 0xffffffffffffULL) == 0x64706177736bULL;       /* kswapd */
}

/*
 * Mark kernel thread `t` (pid `pid`, a kernel thread: is_kthread) a helper for the next
 * HELPER_HOLD_NS (see above); its state, or NULL when it is no helper.
 */
static __always_inline struct task_state *mark_helper(int btf, struct task_struct *t, __u32 pid,
						      __u64 now)
{
	struct task_state *st;

	if (!helper_name(btf, t))
		return NULL;
	st = task_state_of(t, pid, 1);
	if (st) {
		st->helper_until_ns = now + HELPER_HOLD_NS;
		set_helper_pid(pid);
	}
	return st;
}

/* Open an off-CPU interval of helper `t` at `now` (its state `state`, flags `f`). */
static __always_inline void open_helper(int btf, struct task_struct *t, struct task_state *st,
					__u32 state, __u64 now, __u16 f)
{
	f |= IOWHY_OFF_HELPER;
	if ((state & 0x2) && !(state & 0x400))
		f |= IOWHY_OFF_D;
	st->off_ns = now;
	st->off_state = state;
	st->off_flags = f;
	st->off_sys_nr = -1;
	st->waking_ns = 0;
	st->waker_tgid = 0;
	st->waker_tid = 0;
	st->waker_ctx = 0;
	st->waker_rq_depth = 0;
	st->run_ns = RD(btf, t, se.sum_exec_runtime);
}

static __always_inline void blocked_dec(struct task_state *st)
{
	if (st->counted) {
		st->counted = 0;
		__sync_fetch_and_sub(&blocked_tracked, 1);
	}
}

/* Write the off-CPU interval that started at st->off_ns and ends now. */
static __always_inline void emit_offcpu(struct task_state *st, __u32 tgid, __u32 tid, __u64 now,
					__u16 late)
{
	struct iowhy_stage *sb = NULL;
	/* A helper's interval is its own record type (the workload's threads are exactly
	 * those with offcpu records). */
	int helper = st->off_flags & IOWHY_OFF_HELPER;
	__u16 type = helper ? IOWHY_REC_HELPER : IOWHY_REC_OFFCPU;
	struct iowhy_offcpu *e = stage_begin(&sb, sizeof(*e));

	if (!e)
		e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(helper ? IOWHY_C_RB_HELPER : IOWHY_C_RB_OFFCPU);
	} else {
		__builtin_memset(e, 0, sizeof(*e));
		fill_hdr(&e->hdr, type, sizeof(*e), now);
		e->start_ns = st->off_ns;
		e->waking_ns = (st->off_flags & IOWHY_OFF_PREEMPT) ? 0 : st->waking_ns;
		e->end_ns = now;
		e->tgid = tgid;
		e->tid = tid;
		e->state = st->off_state;
		e->syscall_nr = st->off_sys_nr;
		e->waker_tgid = st->waker_tgid;
		e->waker_tid = st->waker_tid;
		e->flags_u16 = st->off_flags | late;
		e->run_total_ns = (st->off_flags & IOWHY_OFF_FROM_START) ? 0 : st->run_ns;
		__builtin_memcpy(e->waker_comm, st->waker_comm, sizeof(e->waker_comm));
		if (e->waking_ns) {
			e->waker_ctx_u16 = st->waker_ctx;
			e->waker_preempt_count = st->waker_preempt_count;
			if (st->waker_rq_depth) {
				e->flags_u16 |= IOWHY_OFF_WAKER_RQ;
				e->waker_rq_seq = st->waker_rq_seq;
				e->waker_rq_depth = st->waker_rq_depth;
				if (top_mode)
					e->waker_rq_class = st->waker_rq_class;
			}
		}
		stage_end(sb, e, type, sizeof(*e));
	}
	if (late)
		count(IOWHY_C_LOST_SWITCH_IN);
	st->off_ns = 0;
	blocked_dec(st);
}

/*
 * The thread is running in its own context (a syscall or its switch-out) while an
 * off-CPU interval is still open: the switch back in was not seen (rq_fresh says why).
 * Close the interval now, an upper bound, flagged and counted.
 */
static __always_inline void offcpu_seen_running(struct task_state *st, __u32 tgid, __u32 tid)
{
	if (st->off_ns)
		emit_offcpu(st, tgid, tid, bpf_ktime_get_ns(), IOWHY_OFF_LATE_END);
}

#define RODATA_NR(name) nr_##name
static __always_inline __u16 fsync_call(__s32 nr, __u16 fs_flags)
{
	return IOWHY_CALL_OF(nr, fs_flags, RODATA_NR);
}

/*
 * The fsync-family record of the call open in `st`, ending at `now`. `unseen`: its exit
 * was never seen (now is when that became clear, an upper bound; ret unknown).
 */
static __always_inline void emit_call(struct task_state *st, __u16 call, __u64 pt, __u64 now,
				      struct pt_regs *regs, long ret, int unseen)
{
	struct iowhy_stage *sb = NULL;
	struct iowhy_fsync *e = stage_begin(&sb, sizeof(*e));

	if (!e)
		e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(IOWHY_C_RB_FSYNC);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_hdr(&e->hdr, IOWHY_REC_FSYNC, sizeof(*e), now);
	e->enter_ns = st->sys_enter_ns;
	e->exit_ns = now;
	e->ino = st->fs_ino;
	e->commit_seq = st->fs_seq;
	e->ret = unseen ? 0 : ret;
	e->tgid = pt >> 32;
	e->tid = (__u32)pt;
	e->dev_major = DEV_MAJOR(st->fs_dev);
	e->dev_minor = DEV_MINOR(st->fs_dev);
	/*
	 * The saved user registers still hold the arguments at exit (only execve and
	 * sigreturn rewrite them), so the first one is read here, for the few calls that
	 * are recorded, not at every entry.
	 */
	e->fd = (call == IOWHY_CALL_SYNC) ? -1
		: regs ? (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs) : (__s32)st->arg0;
	e->syscall_nr = st->sys_nr;
	e->call_u16 = call;
	e->fs_u16 = st->fs_kind;
	e->flags_u16 = st->fs_flags | (unseen ? IOWHY_FS_F_EXIT_UNSEEN : 0);
	e->seq_span_u16 = (st->fs_flags & IOWHY_FS_F_SEQ_SPAN) ? st->fs_seq_span : 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	stage_end(sb, e, IOWHY_REC_FSYNC, sizeof(*e));
}

/*
 * A new call starts (or is found running) while `st` still holds one whose exit was
 * never seen: the kernel skipped the exit probe, or (lazy_writes) the write family
 * was not attached yet when an O_SYNC write returned. Write it, flagged and counted.
 */
static __always_inline void close_unseen_call(struct task_state *st, __u64 pt, __u64 now)
{
	__u16 call = fsync_call(st->sys_nr, st->fs_flags);

	if (!call)
		return;
	count(IOWHY_C_LOST_SYS_EXIT);
	emit_call(st, call, pt, now, NULL, 0, 1);
}

static __always_inline void on_exit(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid), tid = BPF_CORE_READ(p, pid);
	struct task_state *st;

	if (!is_tracked(tgid))
		return;
	emit_task(p, IOWHY_TASK_EXIT, 0, BPF_CORE_READ(p, exit_code));
	/* A recorded call still open in the exiting thread (p is current) never returned
	 * under a probe's eyes: write it now. */
	st = current_state(tid, 0);
	if (st && st->sys_enter_ns)
		close_unseen_call(st, bpf_get_current_pid_tgid(), bpf_ktime_get_ns());
	/* The thread still runs its exit (closing files, freeing its memory), and can be
	 * preempted or wait there: it stays tracked until its last switch-out (on_dead). */
}

/*
 * The last switch-out of an exiting thread (its state is TASK_DEAD): the end of its life,
 * after which it never runs. Its state goes (task storage goes with the task; a hash
 * entry would outlive it), and the process is no longer tracked once its last thread
 * is gone (its pid cannot be reused before it is reaped, which is later).
 */
static __always_inline void on_dead(struct task_struct *p, __u32 tgid, __u32 tid)
{
	emit_task(p, IOWHY_TASK_DEAD, 0, 0);
	if (!use_task_storage)
		bpf_map_delete_elem(&tasks, &tid);
	/* The recorder learns of the workload's end from waitpid, not from this map. */
	if (task_group_dead(p))
		set_tracked(tgid, 0);
}

static __always_inline void on_sys_exit(struct pt_regs *regs, long ret)
{
	__u64 pt = bpf_get_current_pid_tgid(), now;
	__u32 tid = (__u32)pt, slot;
	struct task_state *st;
	struct sys_stat *ss;
	__u16 call;

	if (!is_tracked(pt >> 32))
		return;
	st = current_state(tid, 0);
	if (!st)
		return;
	offcpu_seen_running(st, pt >> 32, tid);
	st->throttle = 0; /* no throttle outlives its syscall */
	st->throttle_bios = 0;
	if (!st->sys_enter_ns)
		return;
	now = bpf_ktime_get_ns();
	slot = (__u32)st->sys_nr & (SYS_SLOTS - 1);
	ss = bpf_map_lookup_elem(&sysstats, &slot);
	if (ss) {
		ss->count++;
		ss->total_ns += now - st->sys_enter_ns;
	}
	call = fsync_call(st->sys_nr, st->fs_flags);
	if (call)
		emit_call(st, call, pt, now, regs, ret, 0);
	st->sys_enter_ns = 0;
	st->sys_nr = -1;
}

static __always_inline void on_sys_enter(long id, __u64 arg0)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct task_state *st;

	if (!is_tracked(pt >> 32))
		return;
	st = current_state((__u32)pt, 1);
	if (!st)
		return;
	offcpu_seen_running(st, pt >> 32, (__u32)pt);
	if (st->sys_enter_ns)
		close_unseen_call(st, pt, bpf_ktime_get_ns());
	st->sys_nr = id;
	st->arg0 = arg0;
	st->sys_enter_ns = bpf_ktime_get_ns();
	st->fs_flags = 0;
	st->fs_kind = 0;
	st->fs_ino = 0;
	st->fs_seq = 0;
	st->fs_dev = 0;
}

static __always_inline int is_write_call(__s32 nr)
{
	return nr >= 0 && (nr == nr_write || nr == nr_pwrite64 || nr == nr_writev ||
			   nr == nr_pwritev || nr == nr_pwritev2);
}

/*
 * lazy_writes: the filesystem's sync event fired inside a write(2)-family call whose
 * entry no probe saw. Open the call here, and have the recorder attach the write family.
 */
static __always_inline struct task_state *open_late_write(int btf, struct task_state *st, __u64 pt)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__s32 nr = task_syscall_nr(btf, t);
	__u64 now;

	if (!is_write_call(nr))
		return st;
	if (!st)
		st = current_state((__u32)pt, 1);
	if (!st)
		return NULL;
	now = bpf_ktime_get_ns();
	if (st->sys_enter_ns)
		close_unseen_call(st, pt, now);
	st->sys_nr = nr;
	st->arg0 = task_syscall_arg0(btf, t);
	st->sys_enter_ns = now;
	st->fs_flags = IOWHY_FS_F_LATE_ENTER;
	count(IOWHY_C_LATE_ENTRY);
	if (!write_probes_wanted) {
		void *p = bpf_ringbuf_reserve(&rb, 8, 0);

		write_probes_wanted = 1;
		/* an empty record, discarded: only the wakeup matters */
		if (p)
			bpf_ringbuf_discard(p, BPF_RB_FORCE_WAKEUP);
	}
	return st;
}

/* The filesystem's fsync path ran inside the current tracked task's syscall. */
static __always_inline void note_fs_sync(int btf, __u16 kind, __u32 dev, __u64 ino, __u64 seq,
					 int has_seq, int datasync)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct task_state *st;

	if (!is_tracked(pt >> 32))
		return;
	st = current_state(tid, 0);
	/* A write's sync event is the first sign of it, or the call open in st is a late
	 * one whose exit was never seen. */
	if (lazy_writes && btf && (!st || !st->sys_enter_ns || (st->fs_flags & IOWHY_FS_F_LATE_ENTER)))
		st = open_late_write(btf, st, pt);
	if (!st || !st->sys_enter_ns)
		return;
	st->fs_flags |= IOWHY_FS_F_FSEVENT | (has_seq ? IOWHY_FS_F_SEQ : 0) |
			(datasync ? IOWHY_FS_F_DATASYNC : 0);
	st->fs_kind = kind;
	st->fs_dev = dev;
	st->fs_ino = ino;
	st->fs_seq = seq;
}

static __always_inline int current_syscall_is(__s32 nr)
{
	struct task_state *st = current_state((__u32)bpf_get_current_pid_tgid(), 0);

	return st && st->sys_nr == nr;
}

/* --------------------------------------------------------------- throttling --- */

/*
 * A wait the kernel imposed on a tracked thread to slow it down is flagged on its off-CPU
 * record, whatever ends it (the analysis names it level-one `throttle`):
 *
 *   - IOWHY_OFF_THROTTLE_DIRTY, dirty-page throttling: writeback:balance_dirty_pages fires
 *     in the dirtier's context right before it sleeps `pause` jiffies
 *     (io_schedule_timeout, TASK_KILLABLE); a pause of 0 or less is no sleep (the kernel
 *     traces min(pause, 0) when it lets the thread go on).
 *   - IOWHY_OFF_THROTTLE_BLOCK, the block layer's throttles: between a bio's
 *     block_bio_queue and its block_getrq (or its merge into a request) blk-mq runs the
 *     rq-qos policies (writeback throttling's wbt_wait, rq_qos_wait, iocost) and waits for
 *     a driver or scheduler tag (blk_mq_get_tag). An uninterruptible sleep of the
 *     submitter in that stretch is one of those waits (or, rarely, a wait for a frozen
 *     queue or for memory in the submit path, which slow it down the same way). No cheap
 *     event tells a rq-qos wait from a tag wait, so THROTTLE_BLOCK covers both. A bio
 *     larger than the queue's limits is split (block_split) before its throttles: the
 *     part split off goes on to its request, the rest is submitted again without a second
 *     block_bio_queue and meets the throttles again; so the thread counts the bios it has
 *     queued or split off and not yet placed (task_state.throttle_bios).
 *
 * The marks are set in the thread's own context and taken by its next switch-out that is
 * an uninterruptible sleep: the dirty mark once (a pause is one sleep), the block mark by
 * every such sleep until its bios are placed or the syscall returns. A preemption keeps
 * them (the sleep is still to come). A mark is honoured only if the thread switches out
 * in the jiffy it set the mark or last came back on CPU in, or the next one (at most two
 * ticks: 8 ms at HZ=250): the throttled sleep follows the event within microseconds of
 * running, and a mark whose end the probes could not see (a bio ended with an error or -EAGAIN before it had a request, a discard merged
 * without a tracepoint, BDP_ASYNC's io_uring writes that return -EAGAIN instead of
 * sleeping) is dropped instead of naming a later, unrelated wait.
 *
 * Cost: block_bio_queue fires for every bio on the machine, block_bio_backmerge /
 * frontmerge for every merge, block_split for every split; for a thread outside the
 * workload each returns after the tracked-tgid bit test. A tracked thread's bio costs
 * four loads (is its disk a blk-mq one), a task-state lookup and a read of jiffies (a
 * tick is bound enough, and bpf_ktime_get_ns() would cost ~30 ns more per bio), its
 * request or merge another lookup and a store; balance_dirty_pages runs only for
 * dirtiers over their limit. Helper threads (a loop worker, the flusher) are not marked:
 * a throttled helper is part of how the workload's own wait was served, not what the
 * workload waited for.
 */
#define THROTTLE_MARK_JIFFIES 1

static __always_inline void on_dirty_pause(long pause)
{
	__u64 pt;
	struct task_state *st;

	if (pause <= 0)
		return;
	pt = bpf_get_current_pid_tgid();
	if (!is_tracked(pt >> 32))
		return;
	st = current_state((__u32)pt, 1);
	if (!st)
		return;
	st->throttle |= IOWHY_OFF_THROTTLE_DIRTY;
	st->throttle_jiffies = bpf_jiffies64();
}

/*
 * Only a blk-mq disk gives a bio a request: a bio-based one (zram, device-mapper, md)
 * never fires block_getrq for it, and the bios it passes down are queued, counted and
 * given requests on the disks below.
 */
static __always_inline int bio_on_mq(int btf, struct bio *bio)
{
	struct gendisk *disk = bio_disk(btf, bio);
	struct request_queue *q;

	if (!disk)
		return 0;
	q = RD(btf, disk, queue);
	return q && RD(btf, q, mq_ops) != NULL;
}

/*
 * block_bio_queue (`split` 0) or block_split (1) in the submitter's context: one more
 * bio to place. A split counts only under a bio already counted.
 */
static __always_inline void on_bio_submit(int btf, struct bio *bio, int split)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct task_state *st;

	if (!is_tracked(pt >> 32) || !bio_on_mq(btf, bio))
		return;
	st = current_state((__u32)pt, !split);
	if (!st || (split && !st->throttle_bios))
		return;
	if (st->throttle_bios < 0xffff)
		st->throttle_bios++;
	st->throttle_jiffies = bpf_jiffies64();
}

/* A bio of the current thread has a request (block_getrq) or merged into one. */
static __always_inline void on_bio_placed(void)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct task_state *st;

	if (!is_tracked(pt >> 32))
		return;
	st = current_state((__u32)pt, 0);
	if (st && st->throttle_bios)
		st->throttle_bios--;
}

/*
 * The throttle flag of a tracked thread's switch-out with flags `f`, taking its marks (see
 * above).
 */
static __always_inline __u16 throttle_flags(struct task_state *st, __u16 f)
{
	__u16 dirty = st->throttle & IOWHY_OFF_THROTTLE_DIRTY;

	if ((!dirty && !st->throttle_bios) || (f & IOWHY_OFF_PREEMPT))
		return 0;
	if (!(f & IOWHY_OFF_D) || bpf_jiffies64() - st->throttle_jiffies > THROTTLE_MARK_JIFFIES) {
		st->throttle = 0;
		st->throttle_bios = 0;
		return 0;
	}
	st->throttle = 0;
	return dirty ? IOWHY_OFF_THROTTLE_DIRTY : IOWHY_OFF_THROTTLE_BLOCK;
}

/* Back on CPU with a mark still set: its age counts from now. */
static __always_inline void throttle_resume(struct task_state *st)
{
	if (st->throttle || st->throttle_bios)
		st->throttle_jiffies = bpf_jiffies64();
}

/* ------------------------------------------------------------------ off-CPU --- */

/*
 * A tracked thread off CPU since before the probes were attached (nothing has created
 * its state yet, and it is older than the attach), first seen being woken (`woken`) or
 * switched in: open its interval at attach_ns (--cgroup: at its process's join, if it
 * joined later), with what can be read of its sleep now (at sched_waking the task's state
 * is still the sleeping one). Returns NULL for threads born after that, whose first
 * switch-in follows their fork.
 */
static __always_inline struct task_state *open_from_start(int btf, struct task_struct *p, __u32 tid,
							  int woken)
{
	struct task_state *st;
	__u32 state;
	__u16 f = IOWHY_OFF_FROM_START;
	/* a process that joined the followed cgroup is the workload's from then on */
	__u64 from = joined_at(RD(btf, p, tgid));

	if (!from)
		from = attach_ns;
	if (!from || BPF_CORE_READ(p, start_time) >= from)
		return NULL;
	st = task_state_of(p, tid, 1);
	if (!st)
		return NULL;
	state = woken ? get_task_state(btf, p) : 0;
	if (!woken)
		f |= IOWHY_OFF_PREEMPT;
	if (woken && task_in_iowait(btf, p))
		f |= IOWHY_OFF_IOWAIT;
	if ((state & 0x2) && !(state & 0x400))
		f |= IOWHY_OFF_D;
	st->off_ns = from;
	st->off_state = state;
	st->off_flags = f;
	st->off_sys_nr = task_syscall_nr(btf, p);
	st->waking_ns = 0;
	st->waker_tgid = 0;
	st->waker_tid = 0;
	st->waker_ctx = 0;
	st->waker_rq_depth = 0;
	return st;
}

static __always_inline void on_switch(int btf, int preempt, struct task_struct *prev,
				     struct task_struct *next)
{
	__u64 now = 0; /* read once, and only when a tracked thread is involved */
	__u32 tid, tgid;
	struct task_state *st;

	tgid = RD(btf, prev, tgid);
	if (is_tracked(tgid)) {
		__u32 state = get_task_state(btf, prev);

		tid = RD(btf, prev, pid);
		if (state & TASK_DEAD_STATE) {
			on_dead(prev, tgid, tid);
			goto next_task;
		}
		st = task_state_of(prev, tid, 1);
		if (st) {
			__u16 f = 0;

			offcpu_seen_running(st, tgid, tid);
			if (preempt || state == 0)
				f |= IOWHY_OFF_PREEMPT;
			if (task_in_iowait(btf, prev))
				f |= IOWHY_OFF_IOWAIT;
			if ((state & 0x2) && !(state & 0x400))
				f |= IOWHY_OFF_D;
			now = bpf_ktime_get_ns();
			f |= throttle_flags(st, f);
			st->off_ns = now;
			st->off_state = state;
			st->off_flags = f;
			/*
			 * The traced syscall in progress, else the one in the saved registers:
			 * that names waits in untraced syscalls (--syscalls sync) and in
			 * syscalls whose entry the kernel did not deliver.
			 */
			st->off_sys_nr = st->sys_enter_ns ? st->sys_nr : task_syscall_nr(btf, prev);
			/* unreadable registers: with every syscall traced, "none" is known */
			if (st->off_sys_nr == -2 && all_syscalls)
				st->off_sys_nr = -1;
			st->waking_ns = 0;
			st->waker_tgid = 0;
			st->waker_tid = 0;
			st->waker_ctx = 0;
			st->waker_rq_depth = 0;
			st->run_ns = RD(btf, prev, se.sum_exec_runtime);
			if (!(f & IOWHY_OFF_PREEMPT) && !st->counted) {
				st->counted = 1;
				__sync_fetch_and_add(&blocked_tracked, 1);
			}
		}
	} else if (!top_mode && is_kthread(btf, prev) && helper_pid(tid = RD(btf, prev, pid)) &&
		   blocked_tracked) {
		st = task_state_of(prev, tid, 0);
		if (st && !st->off_ns && st->helper_until_ns > (now = bpf_ktime_get_ns())) {
			__u32 state = get_task_state(btf, prev);
			__u16 f = 0;

			if (preempt || state == 0)
				f |= IOWHY_OFF_PREEMPT;
			if (task_in_iowait(btf, prev))
				f |= IOWHY_OFF_IOWAIT;
			open_helper(btf, prev, st, state, now, f);
		}
	}
next_task:
	tgid = RD(btf, next, tgid);
	if (is_tracked(tgid)) {
		tid = RD(btf, next, pid);
		st = task_state_of(next, tid, 0);
		if (!st)
			st = open_from_start(btf, next, tid, 0);
		if (!st || !st->off_ns)
			return;
		emit_offcpu(st, tgid, tid, now ? now : bpf_ktime_get_ns(), 0);
		throttle_resume(st);
	} else if (!top_mode && is_kthread(btf, next) && helper_pid(tid = RD(btf, next, pid))) {
		st = task_state_of(next, tid, 0);
		if (!st || !st->off_ns || !(st->off_flags & IOWHY_OFF_HELPER))
			return;
		emit_offcpu(st, tgid, tid, now ? now : bpf_ktime_get_ns(), 0);
	}
}

/*
 * Who woke a tracked thread (or a helper with an interval open), from which context, and
 * (when the wakeup runs inside a block completion) which request: see done_stk. The
 * cost for such a thread is one read of the preempt count, the completion-stack lookup
 * and a copy of the waker's comm; a kernel thread woken by a tracked thread, or by a
 * marked helper while a tracked thread sleeps, is marked a helper (see above). The clock
 * is read once, and the waker's state looked up at most once.
 */
static __always_inline void on_waking(int btf, struct task_struct *p)
{
	struct task_struct *cur;
	struct task_state *st;
	__u32 tid, cur_tid, pc;
	__u64 pt, now = 0;
	int tracked = is_tracked(RD(btf, p, tgid));

	/* Most wakings on a busy machine are of other tasks: they end here. */
	if (!tracked && (top_mode || !is_kthread(btf, p)))
		return;
	cur = btf ? bpf_get_current_task_btf() : (struct task_struct *)bpf_get_current_task();
	pt = bpf_get_current_pid_tgid();
	cur_tid = (__u32)pt;
	tid = RD(btf, p, pid);
	if (tracked) {
		st = task_state_of(p, tid, 0);
		if (!st)
			st = open_from_start(btf, p, tid, 1);
		if (!st || !st->off_ns || st->waking_ns)
			return;
		blocked_dec(st);
	} else {
		st = NULL;
		/* Work handed to p by a tracked thread, or by a marked helper while a tracked
		 * thread sleeps (a hand-off down a chain). */
		if (is_tracked(pt >> 32)) {
			now = bpf_ktime_get_ns();
			st = mark_helper(btf, p, tid, now);
		} else if (is_kthread(btf, cur) && helper_pid(cur_tid) && blocked_tracked) {
			struct task_state *cs = task_state_of(cur, cur_tid, 0);

			if (cs && cs->helper_until_ns > (now = bpf_ktime_get_ns()))
				st = mark_helper(btf, p, tid, now);
		}
		/*
		 * Handed work while asleep with no interval open (it slept before it was a
		 * helper): open one at this waking, so its wait for a CPU and what it does next
		 * are recorded from the hand-off on (its sleep before is not: the interval's
		 * start is this waking).
		 */
		if (st && !st->off_ns)
			open_helper(btf, p, st, get_task_state(btf, p), now, 0);
		if (!st) {
			if (!helper_pid(tid))
				return;
			st = task_state_of(p, tid, 0);
		}
		if (!st || !st->off_ns || st->waking_ns || !(st->off_flags & IOWHY_OFF_HELPER))
			return;
	}
	if (!now)
		now = bpf_ktime_get_ns();
	st->waking_ns = now;
	st->waker_tgid = pt >> 32;
	st->waker_tid = cur_tid;
	current_comm(btf, st->waker_comm);
	if (get_preempt_count(btf, &pc)) {
		st->waker_preempt_count = 0;
		st->waker_ctx = IOWHY_WCTX_UNKNOWN;
		pc = DONE_CTX_UNKNOWN;
	} else {
		st->waker_preempt_count = pc;
		st->waker_ctx = (pc & IOWHY_PC_NMI_MASK) ? IOWHY_WCTX_NMI
				: (pc & IOWHY_PC_HARDIRQ_MASK) ? IOWHY_WCTX_HARDIRQ
				: (pc & IOWHY_PC_SOFTIRQ_OFFSET) ? IOWHY_WCTX_SOFTIRQ
				: IOWHY_WCTX_TASK;
		pc &= IOWHY_PC_CTX_MASK;
	}
	st->waker_rq_depth = done_link(btf, pc, now, &st->waker_rq_seq, &st->waker_rq_class);
	/* a kernel thread ending a tracked thread's wait from task context has worked for it */
	if (!top_mode && st->waker_ctx == IOWHY_WCTX_TASK && !(st->off_flags & IOWHY_OFF_HELPER) &&
	    is_kthread(btf, cur))
		mark_helper(btf, cur, cur_tid, now);
}

/* ------------------------------------------------------------ journal / log --- */

static __always_inline void emit_journal(int btf, __u16 event, __u16 fs, __u32 dev, __u64 seq, __u64 a0,
					 __u64 a1, __u64 a2)
{
	struct iowhy_stage *sb = NULL;
	struct iowhy_journal *e = stage_begin(&sb, sizeof(*e));
	__u64 pt = bpf_get_current_pid_tgid();

	if (!e)
		e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		count(IOWHY_C_RB_JOURNAL);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_hdr(&e->hdr, IOWHY_REC_JOURNAL, sizeof(*e), bpf_ktime_get_ns());
	e->seq = seq;
	e->aux0 = a0;
	e->aux1 = a1;
	e->aux2 = a2;
	e->dev_major = DEV_MAJOR(dev);
	e->dev_minor = DEV_MINOR(dev);
	e->tgid = pt >> 32;
	e->tid = (__u32)pt;
	e->event_u16 = event;
	e->fs_u16 = fs;
	current_comm(btf, e->comm);
	stage_end(sb, e, IOWHY_REC_JOURNAL, sizeof(*e));
}

static __always_inline void on_jbd2(int btf, __u16 event, journal_t *j, transaction_t *t)
{
	emit_journal(btf, event, IOWHY_FS_EXT4, BPF_CORE_READ(j, j_fs_dev, bd_dev),
		     BPF_CORE_READ(t, t_tid), 0, 0, 0);
}

static __always_inline void on_ext4_sync_enter(int btf, struct file *file, int datasync)
{
	struct inode *inode;
	struct ext4_inode_info *ei;
	__u32 tid;

	if (!is_tracked(bpf_get_current_pid_tgid() >> 32))
		return;
	inode = BPF_CORE_READ(file, f_inode);
	ei = (void *)inode - bpf_core_field_offset(struct ext4_inode_info, vfs_inode);
	tid = datasync ? BPF_CORE_READ(ei, i_datasync_tid) : BPF_CORE_READ(ei, i_sync_tid);
	note_fs_sync(btf, IOWHY_FS_EXT4, BPF_CORE_READ(inode, i_sb, s_dev), BPF_CORE_READ(inode, i_ino),
		     tid, 1, datasync);
}

/*
 * ext4_sync_file_exit: the inode's sync tid again, once the call's own writeback is
 * done. Writeback that allocates blocks (delayed allocation: an msync of new pages, an
 * fsync after an append) joins the inode to the running transaction after the entry
 * event read its tid, and the commit the call then waits for is that later one: the
 * record keeps how far the tid moved (seq_span_u16), so the analysis finds it.
 */
static __always_inline void on_ext4_sync_exit(int btf, struct inode *inode)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct ext4_inode_info *ei;
	struct task_state *st;
	__u32 tid, span;

	if (!is_tracked(pt >> 32))
		return;
	st = current_state((__u32)pt, 0);
	if (!st || !st->sys_enter_ns || st->fs_kind != IOWHY_FS_EXT4 ||
	    !(st->fs_flags & IOWHY_FS_F_SEQ) || st->fs_ino != BPF_CORE_READ(inode, i_ino))
		return;
	ei = (void *)inode - bpf_core_field_offset(struct ext4_inode_info, vfs_inode);
	tid = (st->fs_flags & IOWHY_FS_F_DATASYNC) ? BPF_CORE_READ(ei, i_datasync_tid)
						  : BPF_CORE_READ(ei, i_sync_tid);
	span = tid - (__u32)st->fs_seq; /* jbd2 tids wrap at 2^32 */
	if (span && span < 0x10000) {
		st->fs_seq_span = span;
		st->fs_flags |= IOWHY_FS_F_SEQ_SPAN;
	}
}

/*
 * ext4_sync_fs in a tracked task's syncfs(2) or sync(2): the filesystem it syncs (sync
 * visits every one; the last is kept, the analysis takes sync as covering all). It
 * names the filesystem of a syncfs, whose record has no other sync event.
 */
static __always_inline void on_ext4_sync_fs(int btf, struct super_block *sb)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct task_state *st;

	if (!is_tracked(pt >> 32))
		return;
	st = current_state((__u32)pt, 0);
	if (!st || (st->sys_nr != nr_syncfs && st->sys_nr != nr_sync))
		return;
	note_fs_sync(btf, IOWHY_FS_EXT4, BPF_CORE_READ(sb, s_dev), 0, 0, 0, 0);
}

static __always_inline void on_xfs_fsync(int btf, struct xfs_inode *ip)
{
	int datasync;
	__u64 seq;

	if (!is_tracked(bpf_get_current_pid_tgid() >> 32))
		return;
	datasync = current_syscall_is(nr_fdatasync);
	seq = xfs_fsync_seq(btf, ip, datasync);
	note_fs_sync(btf, IOWHY_FS_XFS, btf ? ip->i_mount->m_super->s_dev
					    : BPF_CORE_READ(ip, i_mount, m_super, s_dev),
		     RD(btf, ip, i_ino), seq, seq != 0, datasync);
}

static __always_inline void on_xlog(int btf, __u16 event, struct xlog_in_core *ic)
{
	__u32 dev = btf ? ic->ic_log->l_mp->m_super->s_dev
			: BPF_CORE_READ(ic, ic_log, l_mp, m_super, s_dev);

	emit_journal(btf, event, IOWHY_FS_XFS, dev, xlog_iclog_lsn(btf, ic), RD(btf, ic, ic_flags),
		     RD(btf, ic, ic_offset), 0);
}

static __always_inline void on_btrfs_sync(int btf, struct file *file, int datasync)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	__u32 dev = BPF_CORE_READ(inode, i_sb, s_dev);
	__u64 ino = BPF_CORE_READ(inode, i_ino);

	/* every btrfs fsync is a journal event, tracked task or not */
	emit_journal(btf, IOWHY_J_BTRFS_SYNC, IOWHY_FS_BTRFS, dev, 0, ino, datasync, 0);
	note_fs_sync(btf, IOWHY_FS_BTRFS, dev, ino, 0, 0, datasync);
}

/* ---------------------------------------------------------------- programs --- */

/*
 * Each tracepoint gets a tp_btf and a raw_tp program calling the same handler; the
 * recorder disables one flavour before load. Program names are tpb_<tp> / raw_<tp>.
 * `btf` tells the hot handlers whether they may load kernel fields directly (RD()).
 */
/*
 * IOWHY_EMPTY_PROBES (bench only: probes/.output/iowhy-record-empty, `bench_record.py
 * --only floor`): every program is loaded and attached as usual but returns at once, so
 * that the kernel's dispatch to the attached tracepoints can be timed apart from what the
 * programs do. The recorder works unchanged; its traces hold no events.
 */
#ifdef IOWHY_EMPTY_PROBES
#define IOWHY_BODY(x) \
	do {          \
		if (0) {  \
			x; \
		}         \
	} while (0)
#else
#define IOWHY_BODY(x) x
#endif

#define IOWHY_TP(tp, call, ...)                                  \
	SEC("tp_btf/" #tp) int BPF_PROG(tpb_##tp, ##__VA_ARGS__) \
	{                                                        \
		const int btf __attribute__((unused)) = 1;       \
		IOWHY_BODY(call);                                \
		return 0;                                        \
	}                                                        \
	SEC("raw_tp/" #tp) int BPF_PROG(raw_##tp, ##__VA_ARGS__) \
	{                                                        \
		const int btf __attribute__((unused)) = 0;       \
		IOWHY_BODY(call);                                \
		return 0;                                        \
	}

IOWHY_TP(block_getrq, (on_bio_placed(), on_getrq(btf, bio)), struct bio *bio)
IOWHY_TP(block_rq_insert, on_rq_insert(btf, rq), struct request *rq)
IOWHY_TP(block_rq_issue, on_rq_issue(btf, rq), struct request *rq)
IOWHY_TP(block_rq_requeue, on_rq_requeue(btf, rq), struct request *rq)
IOWHY_TP(block_rq_merge, on_rq_merge(btf, rq), struct request *rq)
IOWHY_TP(block_rq_complete, on_rq_complete(btf, rq, error, nr_bytes), struct request *rq, int error,
	 unsigned int nr_bytes)

IOWHY_TP(block_bio_complete, on_bio_complete(btf, bio), struct request_queue *q, struct bio *bio)

/* Throttling (see on_bio_submit, on_dirty_pause). */
IOWHY_TP(block_bio_queue, on_bio_submit(btf, bio, 0), struct bio *bio)
IOWHY_TP(block_split, on_bio_submit(btf, bio, 1), struct bio *bio, unsigned int new_sector)
IOWHY_TP(block_bio_backmerge, on_bio_placed(), struct bio *bio)
IOWHY_TP(block_bio_frontmerge, on_bio_placed(), struct bio *bio)
/* By position: the argument list changed (core_fixes.bpf.h, bdp_pause). */
IOWHY_TP(balance_dirty_pages, on_dirty_pause(bdp_pause(ctx)))

IOWHY_TP(sched_process_fork, on_fork(parent, child), struct task_struct *parent,
	 struct task_struct *child)
IOWHY_TP(sched_process_exec, on_exec(p), struct task_struct *p)
/* --cgroup only (rec_probes.c): a migration, and the path it formats, costs nothing otherwise */
IOWHY_TP(cgroup_attach_task, on_cgroup_attach(dst_cgrp, task), struct cgroup *dst_cgrp,
	 const char *path, struct task_struct *task, bool threadgroup)
IOWHY_TP(sched_process_exit, on_exit(p), struct task_struct *p)
IOWHY_TP(sched_switch, on_switch(btf, preempt, prev, next), bool preempt, struct task_struct *prev,
	 struct task_struct *next)
IOWHY_TP(sched_waking, on_waking(btf, p), struct task_struct *p)

IOWHY_TP(sys_enter, on_sys_enter(id, 0), struct pt_regs *regs, long id)
IOWHY_TP(sys_exit, on_sys_exit(regs, ret), struct pt_regs *regs, long ret)

/*
 * --syscalls sync: instead of sys_enter/sys_exit on every syscall, the classic
 * tracepoints of the calls iowhy records one by one: the fsync family, and the write
 * family, inside which an O_SYNC/O_DSYNC write runs the filesystem's fsync. Every other
 * syscall then pays only the kernel's syscall-tracepoint slow path and a bit test, and
 * is neither counted nor timed. Program names: sce_<call> / scx_<call>.
 */
struct sc_enter {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

struct sc_exit {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

/* The kernel refuses a program that reads past its event: sync(2) has no argument. */
#define IOWHY_SC(call) IOWHY_SC_ARG(call, ctx->args[0])
#define IOWHY_SC_ARG(call, arg0)                                                    \
	SEC("tracepoint/syscalls/sys_enter_" #call) int sce_##call(struct sc_enter *ctx) \
	{                                                                           \
		IOWHY_BODY(on_sys_enter(ctx->nr, arg0));                             \
		return 0;                                                           \
	}                                                                           \
	SEC("tracepoint/syscalls/sys_exit_" #call) int scx_##call(struct sc_exit *ctx)   \
	{                                                                           \
		IOWHY_BODY(on_sys_exit(NULL, ctx->ret));                             \
		return 0;                                                           \
	}

IOWHY_SC(fsync)
IOWHY_SC(fdatasync)
IOWHY_SC_ARG(sync, 0)
IOWHY_SC(syncfs)
IOWHY_SC(sync_file_range)
IOWHY_SC(msync)
IOWHY_SC(write)
IOWHY_SC(pwrite64)
IOWHY_SC(writev)
IOWHY_SC(pwritev)
IOWHY_SC(pwritev2)

IOWHY_TP(jbd2_start_commit, on_jbd2(btf, IOWHY_J_JBD2_START, j, t), journal_t *j, transaction_t *t)
IOWHY_TP(jbd2_commit_locking, on_jbd2(btf, IOWHY_J_JBD2_LOCKING, j, t), journal_t *j, transaction_t *t)
IOWHY_TP(jbd2_commit_flushing, on_jbd2(btf, IOWHY_J_JBD2_FLUSHING, j, t), journal_t *j,
	 transaction_t *t)
IOWHY_TP(jbd2_commit_logging, on_jbd2(btf, IOWHY_J_JBD2_LOGGING, j, t), journal_t *j, transaction_t *t)
IOWHY_TP(jbd2_end_commit, on_jbd2(btf, IOWHY_J_JBD2_END, j, t), journal_t *j, transaction_t *t)
IOWHY_TP(jbd2_run_stats,
	 emit_journal(btf, IOWHY_J_JBD2_STATS, IOWHY_FS_EXT4, dev, tid, BPF_CORE_READ(s, rs_handle_count),
		      BPF_CORE_READ(s, rs_blocks), BPF_CORE_READ(s, rs_blocks_logged)),
	 dev_t dev, tid_t tid, struct transaction_run_stats_s *s)
IOWHY_TP(ext4_fc_commit_start,
	 emit_journal(btf, IOWHY_J_EXT4_FC_START, IOWHY_FS_EXT4, BPF_CORE_READ(sb, s_dev), tid, 0, 0, 0),
	 struct super_block *sb, tid_t tid)
IOWHY_TP(ext4_fc_commit_stop,
	 emit_journal(btf, IOWHY_J_EXT4_FC_STOP, IOWHY_FS_EXT4, BPF_CORE_READ(sb, s_dev), tid, nblks,
		      reason, 0),
	 struct super_block *sb, int nblks, int reason, tid_t tid)
IOWHY_TP(ext4_sync_file_enter, on_ext4_sync_enter(btf, file, datasync), struct file *file, int datasync)
IOWHY_TP(ext4_sync_file_exit, on_ext4_sync_exit(btf, inode), struct inode *inode, int ret)
IOWHY_TP(ext4_sync_fs, on_ext4_sync_fs(btf, sb), struct super_block *sb, int wait)

IOWHY_TP(xfs_file_fsync, on_xfs_fsync(btf, ip), struct xfs_inode *ip)
IOWHY_TP(xfs_log_force,
	 emit_journal(btf, IOWHY_J_XFS_FORCE, IOWHY_FS_XFS, RD2(btf, mp, m_super, s_dev), lsn, 0, 0, 0),
	 struct xfs_mount *mp, xfs_lsn_t lsn, unsigned long caller)
IOWHY_TP(xlog_iclog_sync, on_xlog(btf, IOWHY_J_XLOG_SYNC, ic), struct xlog_in_core *ic)
IOWHY_TP(xlog_iclog_write, on_xlog(btf, IOWHY_J_XLOG_WRITE, ic), struct xlog_in_core *ic)
IOWHY_TP(xlog_iclog_sync_done, on_xlog(btf, IOWHY_J_XLOG_DONE, ic), struct xlog_in_core *ic)

IOWHY_TP(btrfs_sync_file, on_btrfs_sync(btf, file, datasync), struct file *file, int datasync)
IOWHY_TP(btrfs_transaction_commit,
	 emit_journal(btf, IOWHY_J_BTRFS_COMMIT, IOWHY_FS_BTRFS, BPF_CORE_READ(fi, sb, s_dev),
		      BPF_CORE_READ(fi, generation), 0, 0, 0),
	 struct btrfs_fs_info *fi)
