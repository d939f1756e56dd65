// SPDX-License-Identifier: GPL-2.0
/* iowhy-record, the BPF object: configure, load (tp_btf or raw_tp), attach, detach. */
#include "recorder.h"

/* ---------------------------------------------------------------- probes --- */


/* A syscalls:sys_{enter,exit}_<call> program of the write family. */
static int is_write_prog(const char *name)
{
	static const char *const calls[] = { "write", "pwrite64", "writev", "pwritev", "pwritev2" };

	if (strncmp(name, "sce_", 4) && strncmp(name, "scx_", 4))
		return 0;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (!strcmp(name + 4, calls[i]))
			return 1;
	return 0;
}

/* Whether vmlinux BTF has enum `type` with member `name` (a helper the kernel knows). */
static int btf_enum_has(const struct btf *btf, const char *type, const char *name)
{
	int id = btf__find_by_name_kind(btf, type, BTF_KIND_ENUM);
	const struct btf_type *t;
	const struct btf_enum *e;

	if (id <= 0)
		return 0;
	t = btf__type_by_id(btf, id);
	e = btf_enum(t);
	for (int i = 0; i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, e[i].name_off), name))
			return 1;
	return 0;
}

/*
 * --top: tracepoints whose records `iowhy top` does not read (rec_top.c folds off-CPU,
 * fsync-family and request records only): the journal and filesystem events, bio-based
 * completions and exec; and a request's insert and merge: top times a request from its
 * submission to its completion, and its entry is made at its issue (a request merged
 * into another before its issue never has one). The issue stays: a request issued
 * again without a completion seen between is how a lost completion is counted
 * (rq_fresh). Not loaded, so their events cost nothing.
 */
static int top_unread(const char *tp)
{
	static const char *const prefixes[] = { "jbd2_", "ext4_", "xfs_", "xlog_", "btrfs_",
						"block_bio_complete", "sched_process_exec",
						"block_rq_insert", "block_rq_merge" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(tp, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

static const char *tp_of(const char *prog_name, int *is_btf)
{
	if (!strncmp(prog_name, "tpb_", 4)) {
		*is_btf = 1;
		return prog_name + 4;
	}
	if (!strncmp(prog_name, "raw_", 4)) {
		*is_btf = 0;
		return prog_name + 4;
	}
	return NULL;
}

/* Words of the tracked-tgid and helper-pid bitmaps: one bit per possible PID. */
static __u32 pid_max_words(void)
{
	long pid_max = 4194304;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");

	if (f) {
		if (fscanf(f, "%ld", &pid_max) != 1)
			pid_max = 4194304;
		fclose(f);
	}
	return (__u32)((pid_max + 63) / 64);
}

/*
 * &__preempt_count - &runqueues, from the offsets of both per-CPU variables in the
 * kernel BTF's .data..percpu section; 0 when either is missing (the probes then record
 * the waking context as unknown: core_fixes.bpf.h, get_preempt_count).
 */
static __s64 preempt_count_from_rq(const struct btf *btf)
{
	const struct btf_var_secinfo *vs;
	const struct btf_type *t;
	__s64 pc = -1, rq = -1;
	int id;

	if (!btf)
		return 0;
	id = btf__find_by_name_kind(btf, ".data..percpu", BTF_KIND_DATASEC);
	if (id <= 0)
		return 0;
	t = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(t);
	for (int i = 0; i < btf_vlen(t); i++, vs++) {
		const char *name = btf__name_by_offset(btf, btf__type_by_id(btf, vs->type)->name_off);

		if (name && !strcmp(name, "__preempt_count"))
			pc = vs->offset;
		else if (name && !strcmp(name, "runqueues"))
			rq = vs->offset;
	}
	return pc >= 0 && rq >= 0 ? pc - rq : 0;
}

/*
 * Index (from 0, after the tracepoint's own `void *`) of balance_dirty_pages' `pause`
 * argument, the next-to-last one in every layout it has had: a signed long followed by
 * the unsigned long start_time (core_fixes.bpf.h, bdp_pause). 0 when the kernel's BTF
 * shows neither layout: the program then is not loaded.
 */
static __u8 bdp_pause_arg_of(const struct btf *btf)
{
	int id = btf__find_by_name_kind(btf, "btf_trace_balance_dirty_pages", BTF_KIND_TYPEDEF);
	const struct btf_type *t, *a, *b;
	const struct btf_param *p;
	int n;

	if (id <= 0)
		return 0;
	t = btf__type_by_id(btf, btf__resolve_type(btf, id));
	if (!t || !btf_is_ptr(t))
		return 0;
	t = btf__type_by_id(btf, t->type);
	if (!t || !btf_is_func_proto(t))
		return 0;
	n = btf_vlen(t);
	if (n != 9 && n != 13) /* void *, then 8 arguments (dtc) or 12 (its fields) */
		return 0;
	p = btf_params(t);
	a = btf__type_by_id(btf, btf__resolve_type(btf, p[n - 2].type));
	b = btf__type_by_id(btf, btf__resolve_type(btf, p[n - 1].type));
	if (!a || !b || !btf_is_int(a) || !btf_is_int(b) || a->size != 8 || b->size != 8 ||
	    !(btf_int_encoding(a) & BTF_INT_SIGNED) || (btf_int_encoding(b) & BTF_INT_SIGNED))
		return 0;
	return (__u8)(n - 3);
}

/*
 * Configure an opened object: rodata, map sizes, and which flavour of each program
 * loads. Tracepoints this kernel lacks (no btf_trace_<name> in its BTF) are skipped.
 */
static int configure(struct rec *r, struct iowhy_bpf *skel, struct btf *vmlinux, int use_btf,
		     int use_ts)
{
	struct bpf_program *prog;
	char tname[96];

	skel->rodata->nr_devs = r->env.ndevs;
	for (int i = 0; i < r->env.ndevs; i++)
		skel->rodata->devs[i] = r->env.devs[i];
	/* Per-thread state lives in one of two maps; the other is not created. */
	skel->rodata->use_task_storage = use_ts;
	if (bpf_map__set_autocreate(skel->maps.task_store, use_ts) ||
	    bpf_map__set_autocreate(skel->maps.tasks, !use_ts))
		return -EINVAL;
	skel->rodata->wakeup_bytes = ((__u64)r->env.ringbuf_mib << 20) / 8;
	skel->rodata->nr_fsync = SYS_fsync;
	skel->rodata->nr_fdatasync = SYS_fdatasync;
	skel->rodata->all_syscalls = !r->env.sync_syscalls;
	skel->rodata->nr_sync = SYS_sync;
	skel->rodata->nr_syncfs = SYS_syncfs;
	skel->rodata->nr_sync_file_range = SYS_sync_file_range;
	skel->rodata->nr_msync = SYS_msync;
	skel->rodata->nr_write = SYS_write;
	skel->rodata->nr_pwrite64 = SYS_pwrite64;
	skel->rodata->nr_writev = SYS_writev;
	skel->rodata->nr_pwritev = SYS_pwritev;
	skel->rodata->nr_pwritev2 = SYS_pwritev2;
	/* The probes find an untraced write by its saved syscall number: tp_btf and
	 * bpf_task_pt_regs() only (core_fixes.bpf.h, task_syscall_nr). */
	r->lazy_writes = r->env.sync_syscalls && !r->env.eager_writes && !r->env.dry_run && use_btf &&
		      !r->env.top_ms && btf_enum_has(vmlinux, "bpf_func_id", "BPF_FUNC_task_pt_regs");
	skel->rodata->lazy_writes = r->lazy_writes;
	skel->rodata->top_mode = r->env.top_ms > 0;
	skel->rodata->pc_from_rq = preempt_count_from_rq(vmlinux);
	skel->rodata->bdp_pause_arg = bdp_pause_arg_of(vmlinux);
	if (bpf_map__set_max_entries(skel->maps.rb, (__u32)r->env.ringbuf_mib << 20))
		return -EINVAL;
	if (bpf_map__set_max_entries(skel->maps.tracked, pid_max_words()) ||
	    bpf_map__set_max_entries(skel->maps.helper_pids, pid_max_words()))
		return -EINVAL;
	if (bpf_map__set_max_entries(skel->maps.stage, libbpf_num_possible_cpus()))
		return -EINVAL;
	skel->rodata->nr_cpus = libbpf_num_possible_cpus();
	skel->rodata->follow_cgroup_id = r->env.cgroup_id;
	r->nprobes = 0;
	bpf_object__for_each_program(prog, skel->obj) {
		int is_btf;
		const char *tp = tp_of(bpf_program__name(prog), &is_btf);
		int present, unknown, nocg, untop;

		if (!tp) {
			/*
			 * syscalls:sys_{enter,exit}_<call>: only with --syscalls sync. The
			 * dry-run loads both flavours of syscall probes: it checks them all.
			 */
			int sc = !strncmp(bpf_program__name(prog), "sce_", 4);
			/* --top counts fsync-family calls only: an O_SYNC write is no record */
			int want = (r->env.sync_syscalls || r->env.dry_run) &&
				   !(r->env.top_ms && is_write_prog(bpf_program__name(prog)));

			bpf_program__set_autoload(prog, want);
			if (sc && want && r->nprobes < 64) {
				snprintf(r->probes[r->nprobes].tp, sizeof(r->probes[r->nprobes].tp),
					 "sys_enter_%s", bpf_program__name(prog) + 4);
				r->probes[r->nprobes].how =
					r->lazy_writes && is_write_prog(bpf_program__name(prog))
						? "tracepoint, attached at the first O_SYNC/O_DSYNC write"
						: "tracepoint";
				r->nprobes++;
			}
			continue;
		}
		snprintf(tname, sizeof(tname), "btf_trace_%s", tp);
		present = btf__find_by_name_kind(vmlinux, tname, BTF_KIND_TYPEDEF) > 0;
		if (r->env.sync_syscalls && !r->env.dry_run &&
		    (!strcmp(tp, "sys_enter") || !strcmp(tp, "sys_exit")))
			present = 0;
		unknown = present && !strcmp(tp, "balance_dirty_pages") &&
			  !skel->rodata->bdp_pause_arg;
		/* every cgroup migration formats its path while this one is attached */
		nocg = !strcmp(tp, "cgroup_attach_task") && !r->env.cgroup && !r->env.dry_run;
		untop = r->env.top_ms && top_unread(tp);
		bpf_program__set_autoload(prog, present && !unknown && !nocg && !untop &&
						is_btf == use_btf);
		if (is_btf && r->nprobes < 64) {
			snprintf(r->probes[r->nprobes].tp, sizeof(r->probes[r->nprobes].tp), "%s", tp);
			r->probes[r->nprobes].how = nocg ? "skipped: no --cgroup"
				: untop ? "skipped: --top does not read it"
				: unknown ? "skipped: unknown argument layout"
				: present ? (use_btf ? "tp_btf" : "raw_tp")
				: (r->env.sync_syscalls && !r->env.dry_run && !strncmp(tp, "sys_e", 5))
					? "skipped: --syscalls sync"
					: "skipped: no such tracepoint in this kernel";
			r->nprobes++;
		}
	}
	return 0;
}

static int attach_all(struct rec *r, struct iowhy_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_link *link;
		int is_btf;
		const char *tp = tp_of(bpf_program__name(prog), &is_btf);

		if (!bpf_program__autoload(prog))
			continue;
		if (r->lazy_writes && is_write_prog(bpf_program__name(prog)))
			continue;
		if (!tp)
			tp = bpf_program__name(prog);
		link = bpf_program__attach(prog);
		if (!link) {
			int err = errno;

			fprintf(stderr, "failed to attach %s: %s\n", tp, strerror(err));
			return -err;
		}
		/* Attached by hand, so not owned by the skeleton: destroyed at cleanup. */
		if (r->nlinks < 128)
			r->links[r->nlinks++] = link;
	}
	return 0;
}

/*
 * The probes saw an O_SYNC/O_DSYNC write: attach the write family, the exits first, so
 * that the write open in the probes' state can still end at its own exit and a write
 * entering meanwhile is either wholly seen or not at all.
 */
void attach_write_family(struct rec *r, struct iowhy_bpf *skel)
{
	struct bpf_program *prog;
	/* Tests only: a slow attach, so that writes return before it (tests/test_record.py). */
	const char *delay = getenv("IOWHY_TEST_WRITE_ATTACH_DELAY_MS");

	if (delay)
		usleep(atoi(delay) * 1000);

	for (int pass = 0; pass < 2; pass++) {
		bpf_object__for_each_program(prog, skel->obj) {
			const char *name = bpf_program__name(prog);
			struct bpf_link *link;

			if (!is_write_prog(name) || (name[2] == 'x') != (pass == 0))
				continue;
			link = bpf_program__attach(prog);
			if (!link) {
				fprintf(stderr, "iowhy-record: WARNING: failed to attach %s: %s; O_SYNC "
						"writes are timed from their fs sync event only\n",
					name, strerror(errno));
				continue;
			}
			if (r->nlinks < 128)
				r->links[r->nlinks++] = link;
			else
				bpf_link__destroy(link);
		}
	}
	r->write_probes_ns = now_ns(CLOCK_MONOTONIC);
}

static void *destroy_link(void *link)
{
	bpf_link__destroy(link);
	return NULL;
}

/*
 * Detaching a classic tracepoint (the syscalls:sys_*_<call> ones) waits for RCU grace
 * periods (perf_trace_event_unreg -> tracepoint_synchronize_unregister), about 75 ms
 * each on the test VM: 1.6 s for the 22 of --syscalls sync, one after another. One
 * thread per link lets the waits overlap; a link whose thread cannot start is destroyed
 * here.
 */
void destroy_links(struct rec *r)
{
	pthread_t th[128];
	int started[128];

	for (int i = 0; i < r->nlinks; i++) {
		started[i] = pthread_create(&th[i], NULL, destroy_link, r->links[i]) == 0;
		if (!started[i])
			bpf_link__destroy(r->links[i]);
	}
	for (int i = 0; i < r->nlinks; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	r->nlinks = 0;
}

/*
 * The trace is complete: leave the detaching to a child and return at once. Detaching a
 * classic syscall tracepoint waits for RCU grace periods (perf_trace_event_unreg), about
 * 0.8 s in all with --syscalls sync, which would otherwise delay the user's prompt (and
 * `iowhy record`'s exit) after the workload has ended. The child holds copies of the
 * link descriptors, so closing ours at exit detaches nothing; the probes stay attached
 * until the child has detached them, writing to a ring buffer nobody reads any more.
 * The child keeps no terminal or pipe open (a caller reading our stderr sees its end
 * now). Without fork(), the caller detaches them itself.
 */
void detach_in_background(struct rec *r)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		return;
	if (pid > 0) {
		r->nlinks = 0; /* the child's now */
		return;
	}
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	setsid();
	destroy_links(r);
	_exit(0);
}

/* Open, configure and load the BPF object, the cheapest way that works. */
int load_probes(struct rec *r)
{
	int err;

	r->vmlinux = btf__load_vmlinux_btf();
	if (!r->vmlinux) {
		fprintf(stderr, "failed to load kernel BTF: %s\n", strerror(errno));
		return -1;
	}

	/*
	 * Open and load, trying the cheapest way first: tp_btf with per-thread state in
	 * task-local storage, then tp_btf with a hash map (the kernel refused task storage
	 * from tracing programs), then everything as raw_tp (which cannot pass a task to
	 * task storage).
	 */
	static const struct {
		int btf, ts;
	} modes[] = { { 1, 1 }, { 1, 0 }, { 0, 0 } };
	for (size_t m = r->env.raw_tp ? 2 : 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		int use_btf = modes[m].btf, use_ts = modes[m].ts;

		r->skel = iowhy_bpf__open();
		if (!r->skel) {
			err = -errno;
			fprintf(stderr, "failed to open BPF object: %s\n", strerror(-err));
			return -1;
		}
		err = configure(r, r->skel, r->vmlinux, use_btf, use_ts);
		if (err) {
			fprintf(stderr, "failed to configure BPF object: %s\n", strerror(-err));
			return -1;
		}
		err = iowhy_bpf__load(r->skel);
		if (!err) {
			r->attach_mode = use_btf ? "tp_btf" : "raw_tp";
			r->task_state = use_ts ? "task-storage" : "hash";
			break;
		}
		if (use_btf && r->env.verbose)
			fprintf(stderr, "iowhy-record: %s load failed (%s), trying %s\n",
				use_ts ? "tp_btf with task storage" : "tp_btf", strerror(-err),
				use_ts ? "a hash map" : "raw_tp");
		iowhy_bpf__destroy(r->skel);
		r->skel = NULL;
		if (!use_btf) {
			fprintf(stderr, "failed to load BPF programs: %s%s\n", strerror(-err),
				err == -EPERM ? " (need root: CAP_BPF and CAP_PERFMON)" : "");
			return -1;
		}
	}

	err = map_stages(r, r->skel->maps.stage);
	if (err) {
		fprintf(stderr, "failed to map staging buffers: %s\n", strerror(-err));
		return -1;
	}
	return 0;
}

int attach_probes(struct rec *r)
{
	int err;

	/* --probe-stats: counting starts before the first probe can run, so that it covers
	 * every event in the trace (other devices' requests issued while the workload is
	 * being started included), not only those after the workload starts. */
	if (!r->env.dry_run) {
		r->obj = r->skel->obj;
		stats_start(r);
	}
	err = attach_all(r, r->skel);
	if (!err)
		r->skel->bss->attach_ns = now_ns(CLOCK_MONOTONIC);
	if (err)
		return -1;
	r->obj = r->skel->obj;
	return 0;
}

/* --dry-run: what was attached, and how. */
void print_dry_run(struct rec *r)
{
	int attached = 0;

	for (int i = 0; i < r->nprobes; i++) {
		printf("%-28s %s\n", r->probes[i].tp, r->probes[i].how);
		attached += strncmp(r->probes[i].how, "skipped", 7) != 0;
	}
	printf("attached %d of %d probes (%s, thread state in %s), startup %.1f ms\n",
	       attached, r->nprobes, r->attach_mode, r->task_state,
	       (now_ns(CLOCK_MONOTONIC) - r->t_main) / 1e6);
	r->ret = 0;
}
