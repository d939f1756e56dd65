/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel differences, handled by CO-RE feature detection (never by version number).
 * Each shim names the kernel commit that made it necessary. Everything the probes
 * read that moved between releases goes through here.
 */
#ifndef IOWHY_CORE_FIXES_BPF_H
#define IOWHY_CORE_FIXES_BPF_H

#include <bpf/bpf_core_read.h>

/*
 * Reading a kernel field. A tp_btf program's arguments are BTF pointers: the verifier
 * lets it load through them, and through the pointers it reaches from them, directly
 * (a plain load the JIT guards against faults), which is much cheaper than a
 * bpf_probe_read_kernel() call. raw_tp arguments are plain integers and need the helper.
 * Hot handlers take `btf`, a constant at every call site (1 in tp_btf programs, 0 in
 * raw_tp ones), so the compiler removes the other branch before the verifier sees it.
 */
#define RD(btf, p, f) ((btf) ? (p)->f : BPF_CORE_READ(p, f))
#define RD2(btf, p, f, g) ((btf) ? (p)->f->g : BPF_CORE_READ(p, f, g))

/*
 * Loading kernel memory that no BTF pointer leads to: a per-CPU variable found by its
 * offset from another (get_preempt_count), a struct request kept as a number between two
 * events (done_rq_live in iowhy.bpf.c). bpf_rdonly_cast() gives the address a BTF type,
 * after which a load is a plain one the JIT guards against faults (a faulting load reads
 * 0), as for a tp_btf argument; the verifier turns the call into a register move. Here
 * that is about 30 ns less per read than a bpf_probe_read_kernel() call, which the probes
 * pay on every waking they record and every request completion.
 * commit a35b9af4ec2c ("bpf: Add a kfunc for type cast"), 6.2. On older kernels the weak
 * extern stays unresolved (0) and the verifier drops the branch using it; raw_tp programs
 * (btf 0) never use it, so they keep bpf_probe_read_kernel().
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

#define HAVE_RDONLY_CAST(btf) ((btf) && bpf_rdonly_cast)

/*
 * The u32 at kernel address `addr` (0 if unreadable). bpf_rdonly_cast() casts to struct
 * types only: any kernel struct whose first member is a 32-bit integer serves, and
 * refcount_t's (struct refcount_struct { atomic_t refs; }) is one on every kernel that
 * has the kfunc.
 */
static __always_inline __u32 kernel_u32(int btf, const void *addr)
{
	__u32 v = 0;

	if (HAVE_RDONLY_CAST(btf)) {
		struct refcount_struct *r =
			bpf_rdonly_cast(addr, bpf_core_type_id_kernel(struct refcount_struct));

		return r->refs.counter;
	}
	bpf_probe_read_kernel(&v, sizeof(v), addr);
	return v;
}

/*
 * task_struct::state was renamed to __state.
 * commit 2f064a59a11f ("sched: Change task_struct::state")
 */
struct task_struct___o {
	volatile long int state;
} __attribute__((preserve_access_index));

static __always_inline __u32 get_task_state(int btf, struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return RD(btf, t, __state);
	return RD(btf, (struct task_struct___o *)t, state);
}

/* in_iowait is a bitfield whose position moves with neighbouring fields. */
static __always_inline __u32 task_in_iowait(int btf, struct task_struct *t)
{
	if (btf)
		return BPF_CORE_READ_BITFIELD(t, in_iowait);
	return BPF_CORE_READ_BITFIELD_PROBED(t, in_iowait);
}

/*
 * request::rq_disk was removed; the disk is reached through the queue.
 * commit f3fa33acca9f ("block: remove the ->rq_disk field in struct request")
 */
struct request___o {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *rq_disk(int btf, struct request *rq)
{
	if (bpf_core_field_exists(((struct request___o *)rq)->rq_disk))
		return RD(btf, (struct request___o *)rq, rq_disk);
	return RD2(btf, rq, q, disk);
}

/*
 * bio::bi_disk became bio::bi_bdev.
 * commit 309dca309fc3 ("block: store a block_device pointer in struct bio")
 */
struct bio___o {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *bio_disk(int btf, struct bio *bio)
{
	if (bpf_core_field_exists(((struct bio___o *)bio)->bi_disk))
		return RD(btf, (struct bio___o *)bio, bi_disk);
	return RD2(btf, bio, bi_bdev, bd_disk);
}

/*
 * enum req_opf was renamed enum req_op.
 * commit ff07a02e9e8e ("treewide: Rename enum req_opf into enum req_op")
 * The REQ_* flag bit numbers (enum req_flag_bits) move whenever a flag is added
 * or removed, so they are always resolved by name, never hard-coded.
 */
enum req_opf___o { REQ_OP_FLUSH___o = 2 };

static __always_inline __u32 req_op_flush(void)
{
	if (bpf_core_enum_value_exists(enum req_op, REQ_OP_FLUSH))
		return bpf_core_enum_value(enum req_op, REQ_OP_FLUSH);
	return bpf_core_enum_value(enum req_opf___o, REQ_OP_FLUSH___o);
}

#define REQ_BIT(name) (1U << bpf_core_enum_value(enum req_flag_bits, name))

/*
 * RQF_FLUSH_SEQ: a #define (bit 4 through 6.1) until the RQF_ bits became an enum.
 * commit 5f89154e8e9e ("block: Use enum to define RQF_x bit indexes")
 */
enum rqf_flags___o { __RQF_FLUSH_SEQ___o = 4 };

static __always_inline __u32 rqf_flush_seq(void)
{
	if (bpf_core_enum_value_exists(enum rqf_flags, __RQF_FLUSH_SEQ))
		return 1U << bpf_core_enum_value(enum rqf_flags, __RQF_FLUSH_SEQ);
	return 1U << 4;
}

/*
 * XFS: ili_datasync_seq appeared next to ili_commit_seq (the 2025 rework of XFS
 * datasync tracking that replaced ili_fsync_fields; hash not verified here), so
 * fdatasync forces only the CIL sequence that logged data-relevant changes. Older
 * kernels have ili_commit_seq only, which is what fsync forces there.
 */
struct xfs_inode_log_item___o {
	__u64 ili_datasync_seq;
} __attribute__((preserve_access_index));

static __always_inline __u64 xfs_fsync_seq(int btf, struct xfs_inode *ip, int datasync)
{
	struct xfs_inode_log_item *iip = RD(btf, ip, i_itemp);

	if (!iip)
		return 0;
	if (datasync &&
	    bpf_core_field_exists(((struct xfs_inode_log_item___o *)iip)->ili_datasync_seq))
		return RD(btf, (struct xfs_inode_log_item___o *)iip, ili_datasync_seq);
	return RD(btf, iip, ili_commit_seq);
}

/*
 * XFS iclog header: reached through the ic_data union (xlog_in_core_2_t) on the kernels
 * we know; a kernel that exposes ic_header directly is handled by the flavour below.
 */
struct xlog_in_core___new {
	struct xlog_rec_header *ic_header;
} __attribute__((preserve_access_index));

static __always_inline __u64 xlog_iclog_lsn(int btf, struct xlog_in_core *ic)
{
	__u64 be;

	if (bpf_core_field_exists(((struct xlog_in_core___new *)ic)->ic_header))
		be = RD2(btf, (struct xlog_in_core___new *)ic, ic_header, h_lsn);
	else if (btf)
		be = ic->ic_data->hic_header.h_lsn;
	else
		be = BPF_CORE_READ(ic, ic_data, hic_header.h_lsn);
	return __builtin_bswap64(be);
}

/*
 * The syscall a task is in when it switches out, from the user registers saved at its
 * kernel entry. x86-64 entry code stores the syscall number in orig_ax, and -1 there for
 * exceptions and interrupts ("no syscall to restart", the idtentry macros in
 * arch/x86/entry/entry_64.S), so -1 means "not in a syscall". It needs
 * bpf_task_pt_regs(), which takes a BTF task pointer (tp_btf only) and appeared in
 * commit dd6e10fbd9fb ("bpf: Add bpf_task_pt_regs() helper"); both are probed, and
 * -2 ("unknown") is the answer without them.
 */
static __always_inline __s32 task_syscall_nr(int btf, struct task_struct *t)
{
	struct pt_regs *regs;
	long nr;

	if (!btf || !bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs) ||
	    !bpf_core_field_exists(struct pt_regs, orig_ax))
		return -2;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return -2;
	nr = regs->orig_ax;
	return nr < 0 ? -1 : (__s32)nr;
}

/*
 * The first argument of the syscall a task is in, from the same saved registers (see
 * task_syscall_nr): the fd of a write(2) seen only from inside it. -1 when unreadable.
 */
static __always_inline __s64 task_syscall_arg0(int btf, struct task_struct *t)
{
	struct pt_regs *regs;

	if (!btf || !bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return -1;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return -1;
	return PT_REGS_PARM1_CORE_SYSCALL(regs);
}

/*
 * TASK_DEAD, the state an exiting task has at its last switch-out (do_task_dead()), is a
 * #define, not in BTF: 0x80 since commit 06eb61844d84 ("sched/debug: Add explicit
 * TASK_PARKED printing", v4.14, where it swapped with TASK_PARKED), older than any
 * kernel with BTF. No other task state uses the bit.
 */
#define TASK_DEAD_STATE 0x80

/*
 * sched_process_exit gained a group_dead argument late; signal->live reaches zero
 * before the tracepoint fires on every kernel, so that is what we test.
 */
static __always_inline int task_group_dead(struct task_struct *t)
{
	return BPF_CORE_READ(t, signal, live.counter) == 0;
}

/*
 * The preempt count of this CPU, which says what context a probe runs in (hardirq,
 * serving a softirq, NMI, or a task). x86 keeps it in the per-CPU variable
 * __preempt_count (in pcpu_hot between commit 64701838bf05 "x86/percpu: Move
 * preempt_count next to current_task in pcpu_hot" and its revert, 46e8fff6d45f). A
 * typed __ksym cannot reach it where kallsyms lists no data symbols
 * (CONFIG_KALLSYMS_ALL=n: the verifier then refuses the program), so it is found from
 * another per-CPU object the probes can reach: this CPU's runqueue, the `rq` of the
 * current task's cfs_rq (CONFIG_FAIR_GROUP_SCHED). Two per-CPU variables of one CPU are
 * as far apart as in the .data..percpu section, so the recorder reads both offsets from
 * the kernel's BTF and sets pc_from_rq = offset(__preempt_count) - offset(runqueues)
 * (0: unknown). The runqueue's cpu is checked against this CPU before the read, so the
 * address is always that of this CPU's preempt count.
 * Returns 0 and sets *pc, or -1 when the context cannot be read.
 */
const volatile __s64 pc_from_rq = 0;

struct sched_entity___grp {
	struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));

/*
 * The address found, per CPU (0: not yet): it is fixed for the CPU's life, and the
 * probes that read the count (every recorded waking, every request completion) then pay
 * one per-CPU slot and one load instead of the walk from the current task (three
 * dependent loads and a check of the runqueue's CPU).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pc_addr SEC(".maps");

static __always_inline int get_preempt_count(int btf, __u32 *pc)
{
	struct sched_entity___grp *se;
	struct task_struct *t;
	struct rq *rq;
	__u32 zero = 0;
	__u64 *cached = NULL;

	if (!pc_from_rq || !bpf_core_field_exists(((struct sched_entity___grp *)0)->cfs_rq) ||
	    !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
		return -1;
	if (HAVE_RDONLY_CAST(btf)) {
		cached = bpf_map_lookup_elem(&pc_addr, &zero);
		if (cached && *cached) {
			*pc = kernel_u32(btf, (void *)*cached);
			return 0;
		}
	}
	if (btf) {
		t = bpf_get_current_task_btf();
		se = (void *)&t->se;
		rq = se->cfs_rq->rq;
		if (!rq || rq->cpu != bpf_get_smp_processor_id())
			return -1;
	} else {
		t = (void *)bpf_get_current_task();
		se = (void *)&t->se;
		rq = BPF_CORE_READ(se, cfs_rq, rq);
		if (!rq || BPF_CORE_READ(rq, cpu) != bpf_get_smp_processor_id())
			return -1;
	}
	if (HAVE_RDONLY_CAST(btf)) {
		if (cached)
			*cached = (__u64)(void *)rq + pc_from_rq;
		*pc = kernel_u32(btf, (void *)rq + pc_from_rq);
		return 0;
	}
	return bpf_probe_read_kernel(pc, sizeof(*pc), (void *)rq + pc_from_rq) ? -1 : 0;
}

/*
 * writeback:balance_dirty_pages takes the dirty_throttle_control instead of five of its
 * fields (thresh, bg_thresh, dirty, wb_thresh, wb_dirty), so `pause` (jiffies) moved from
 * the 11th argument to the 7th.
 * commit f1ab2831e2a4 ("writeback: let trace_balance_dirty_pages() take struct dtc as
 * parameter"), v6.15, also in 6.14.y stable: a release number does not say which.
 * In both layouts `pause` is the next-to-last argument (`long pause, unsigned long
 * start_time`). A type-match relocation (bpf_core_type_matches) would let the program
 * test the prototype itself, but it needs LLVM 15 and the build's clang may be older, so
 * the recorder reads the tracepoint's prototype from the kernel's BTF and sets
 * bdp_pause_arg to that argument's index (rec_probes.c; 0: not found, the program is not
 * loaded). It is a constant when the program is verified, so the verifier walks only the
 * read of the argument that exists: tp_btf refuses a read past the prototype's last
 * argument.
 */
const volatile __u8 bdp_pause_arg = 0;

/* Argument `n` of a tracepoint's context, by a load at a constant offset: the verifier
 * refuses a ctx access at a computed one, which clang makes of two loads that differ
 * only in their index. */
#define IOWHY_CTX_ARG(ctx, n)                                                        \
	({                                                                           \
		long __v;                                                            \
		asm volatile("%0 = *(u64 *)(%1 + %2)" : "=r"(__v) : "r"(ctx), "i"((n) * 8)); \
		__v;                                                                 \
	})

static __always_inline long bdp_pause(unsigned long long *ctx)
{
	if (bdp_pause_arg == 6)
		return IOWHY_CTX_ARG(ctx, 6);
	if (bdp_pause_arg == 10)
		return IOWHY_CTX_ARG(ctx, 10);
	return 0;
}

/*
 * A cgroup's id (what name_to_handle_at() on its directory and bpf_get_current_cgroup_id()
 * give) is its kernfs node's id: a u64 since commit 67c0496e87d1 ("kernfs: convert
 * kernfs_node->id from union kernfs_node_id to u64"), before it a union whose u64 member
 * `id` covers the same 8 bytes.
 */
union kernfs_node_id___o {
	struct {
		__u32 ino;
		__u32 generation;
	};
	__u64 id;
} __attribute__((preserve_access_index));

struct kernfs_node___o {
	union kernfs_node_id___o id;
} __attribute__((preserve_access_index));

static __always_inline __u64 cgroup_id_of(struct cgroup *cg)
{
	struct kernfs_node *kn = BPF_CORE_READ(cg, kn);

	if (!kn)
		return 0;
	if (bpf_core_type_exists(union kernfs_node_id___o))
		return BPF_CORE_READ((struct kernfs_node___o *)kn, id.id);
	return BPF_CORE_READ(kn, id);
}

/* include/linux/preempt.h: 8 preempt bits, 8 softirq, 4 hardirq, 4 NMI; the softirq
 * count's lowest bit is set while a softirq is being served (the rest count bh-disable). */
#define IOWHY_PC_SOFTIRQ_OFFSET 0x100U
#define IOWHY_PC_HARDIRQ_MASK 0xf0000U
#define IOWHY_PC_NMI_MASK 0xf00000U
#define IOWHY_PC_CTX_MASK (IOWHY_PC_SOFTIRQ_OFFSET | IOWHY_PC_HARDIRQ_MASK | IOWHY_PC_NMI_MASK)

#endif /* IOWHY_CORE_FIXES_BPF_H */
