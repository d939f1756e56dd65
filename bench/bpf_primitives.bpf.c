// SPDX-License-Identifier: GPL-2.0
/*
 * What one call of each primitive the probes use costs on this machine: a tp_btf program
 * on sys_enter per primitive, each making N calls of it per run (bench/bpf_primitives.c
 * triggers and times them; docs/design.md, "Wakers and helper threads, read with loads").
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

#define N 16
const volatile __u32 tgid1 = 0, tgid2 = 0; /* the processes whose syscalls run them */
const volatile __u32 devs[64] = { 5 };
const volatile __u32 nr_devs = 1;
__u64 sink;
__u64 shared SEC(".data.shared"); /* a cache line of its own */

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} ts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} hash SEC(".maps");

#define MINE()                                                        \
	__u32 tg = bpf_get_current_pid_tgid() >> 32;                  \
	if (tg != tgid1 && tg != tgid2)                               \
		return 0
#define KEEP() asm volatile("" ::: "memory")

SEC("tp_btf/sys_enter")
int BPF_PROG(empty, struct pt_regs *regs, long id)
{
	MINE();
	return 0;
}

/* A u32 of the current task's runqueue, as get_preempt_count() reads a per-CPU one. */
SEC("tp_btf/sys_enter")
int BPF_PROG(probe_read, struct pt_regs *regs, long id)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 v, s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		bpf_probe_read_kernel(&v, 4, (void *)t->se.cfs_rq->rq);
		s += v;
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(rdonly_cast, struct pt_regs *regs, long id)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 s = 0;

	MINE();
	if (!bpf_rdonly_cast)
		return 0;
	for (int i = 0; i < N; i++) {
		struct refcount_struct *r = bpf_rdonly_cast((void *)t->se.cfs_rq->rq,
							    bpf_core_type_id_kernel(struct refcount_struct));

		s += r->refs.counter;
		KEEP();
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(comm_helper, struct pt_regs *regs, long id)
{
	char c[16];
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		bpf_get_current_comm(c, sizeof(c));
		s += *(__u64 *)c;
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(comm_loads, struct pt_regs *regs, long id)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		s += *(volatile __u64 *)&t->comm[0] + *(volatile __u64 *)&t->comm[8];
		KEEP();
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(task_storage, struct pt_regs *regs, long id)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		__u64 *v = bpf_task_storage_get(&ts, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

		if (v)
			s += *v;
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(clock, struct pt_regs *regs, long id)
{
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++)
		s += bpf_ktime_get_ns();
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(task_pt_regs, struct pt_regs *regs, long id)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);

		s += r->orig_ax;
		KEEP();
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(hash_lookup, struct pt_regs *regs, long id)
{
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		__u32 k = 5;

		s += bpf_map_lookup_elem(&hash, &k) != NULL;
		KEEP();
	}
	sink = s;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(rodata_scan, struct pt_regs *regs, long id)
{
	__u64 s = 0;

	MINE();
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < 64 && j < nr_devs; j++)
			if (devs[j] == 5) {
				s++;
				break;
			}
		KEEP();
	}
	sink = s;
	return 0;
}

/* One atomic add per run to a u64 that every runner shares. */
SEC("tp_btf/sys_enter")
int BPF_PROG(shared_add, struct pt_regs *regs, long id)
{
	MINE();
	__sync_fetch_and_add(&shared, 1);
	return 0;
}
