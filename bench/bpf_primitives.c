// SPDX-License-Identifier: GPL-2.0
/*
 * What each primitive the probes use costs here, per call: a helper call (the clock, the
 * comm, a probe read, task storage, a hash-map lookup) against a plain load or compare,
 * and an atomic add to a cache line another CPU keeps changing (docs/design.md, "Wakers
 * and helper threads, read with loads"). Each primitive is a tp_btf program on sys_enter
 * making 16 calls per run; getppid() in a loop runs it, and the kernel's BPF statistics
 * time it. "per call" is (ns per run - the empty program's) / 16. shared_add is run by
 * one process, then by two at once, each pinned to its own CPU (one call per run).
 * Build and run as root from the top of a checkout (bench/README.md gives the figures):
 *
 *   make bpf-primitives && probes/.output/bpf_primitives
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf_primitives.skel.h"

#define CALLS 16
#define RUNS 200000

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void spin(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
}

/* ns per run of program `name`, run by this process (and a second one on CPU 1: two). */
static double ns_per_run(const char *name, int two)
{
	struct bpf_primitives *s = bpf_primitives__open();
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	struct bpf_program *p;
	struct bpf_link *l;
	int go[2];
	pid_t other = -1;
	double ns = -1;

	if (!s || pipe(go))
		return -1;
	if (two) {
		other = fork();
		if (!other) {
			char c;

			pin(1);
			if (read(go[0], &c, 1) == 1)
				spin(10L * RUNS);
			_exit(0);
		}
	}
	pin(0);
	s->rodata->tgid1 = getpid();
	s->rodata->tgid2 = two ? other : getpid();
	bpf_object__for_each_program(p, s->obj)
		bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), name));
	if (bpf_primitives__load(s))
		goto out;
	if (!strcmp(name, "hash_lookup")) {
		__u32 k = 5;
		__u8 one = 1;

		bpf_map_update_elem(bpf_map__fd(s->maps.hash), &k, &one, BPF_ANY);
	}
	p = bpf_object__find_program_by_name(s->obj, name);
	l = bpf_program__attach(p);
	if (!l)
		goto out;
	if (two && write(go[1], "x", 1) != 1)
		goto out;
	spin(RUNS);
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) && info.run_cnt)
		ns = (double)info.run_time_ns / info.run_cnt;
	bpf_link__destroy(l);
out:
	if (other > 0) {
		kill(other, SIGKILL);
		waitpid(other, NULL, 0);
	}
	close(go[0]);
	close(go[1]);
	bpf_primitives__destroy(s);
	return ns;
}

int main(void)
{
	static const char *const many[] = { "probe_read", "rdonly_cast", "comm_helper", "comm_loads",
					   "task_storage", "clock", "task_pt_regs", "hash_lookup",
					   "rodata_scan" };
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	double empty;

	if (fd < 0) {
		fprintf(stderr, "failed to enable BPF statistics: %s\n", strerror(-fd));
		return 1;
	}
	empty = ns_per_run("empty", 0);
	printf("%-14s %8s %9s\n", "primitive", "ns/run", "per call");
	printf("%-14s %8.1f\n", "empty", empty);
	for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++) {
		double ns = ns_per_run(many[i], 0);

		printf("%-14s %8.1f %9.1f\n", many[i], ns, (ns - empty) / CALLS);
	}
	for (int two = 0; two < 2; two++) {
		double e = ns_per_run("empty", two), ns = ns_per_run("shared_add", two);

		printf("%-14s %8.1f %9.1f  (%s)\n", "shared_add", ns, ns - e,
		       two ? "two CPUs adding" : "one CPU");
	}
	close(fd);
	return 0;
}
