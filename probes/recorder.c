// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy-record: load the iowhy probes, run or attach to a workload, and stream the
 * records to a trace file (docs/trace-format.md).
 *
 * Shape of libbpf-bootstrap's bootstrap.c and retsnoop: main() below is the list of
 * steps (parse, prepare, load, attach, open the ring, write the header, start the
 * workload, poll, drain, write the trailer, clean up); every failure prints
 * "failed to <step>: <strerror>" and exits non-zero. One state, struct rec
 * (recorder.h), is passed to every step. The parts: rec_options.c (options, tracefs),
 * rec_probes.c (load, attach, detach), rec_workload.c (run/attach target),
 * rec_drain.c (ring buffer, stages, stop), rec_writer.c (the file), rec_stats.c
 * (counters, BPF statistics). Records are buffered per type and written as CRC'd
 * chunks at least once a second, so a kill -9 or a full disk keeps everything up to
 * the last complete chunk readable.
 *
 * Usage: iowhy-record -o OUT [-m META.json | --meta-fd FD] [-r MiB] [-d SEC] [-D MAJ:MIN]...
 *                     [-q] [-v] (-p PID [--force] | -- CMD [ARGS...])
 *        iowhy-record -n [-- CMD]      load and attach every probe, then detach and exit
 * Exit: the workload's exit status (run mode; on SIGINT/SIGTERM the workload gets the
 *       signal and is waited for), 0 (attach, or --duration ended first), 128+signal
 *       (attach stopped by a signal), 1 (failure), 2 (usage), 126 (command not
 *       executable), 127 (command not found).
 */
#include "recorder.h"

volatile sig_atomic_t exiting;
volatile sig_atomic_t stop_signal;
int libbpf_verbose;

const char *counter_names[IOWHY_C_MAX] = {
	[IOWHY_C_RB_REQUEST] = "lost_ringbuf_request",
	[IOWHY_C_RB_FSYNC] = "lost_ringbuf_fsync",
	[IOWHY_C_RB_JOURNAL] = "lost_ringbuf_journal",
	[IOWHY_C_RB_OFFCPU] = "lost_ringbuf_offcpu",
	[IOWHY_C_RB_TASK] = "lost_ringbuf_task",
	[IOWHY_C_RQMAP_FULL] = "lost_rqmap_full",
	[IOWHY_C_TASKMAP_FULL] = "lost_taskmap_full",
	[IOWHY_C_TRACKMAP_FULL] = "lost_trackmap_full",
	[IOWHY_C_BIOMAP_FULL] = "lost_biomap_full",
	[IOWHY_C_UNMATCHED_DONE] = "unmatched_completion",
	[IOWHY_C_NO_ORIGIN] = "request_without_origin",
	[IOWHY_C_RQ_MERGED] = "requests_merged",
	[IOWHY_C_BIO_WALK_CAP] = "bio_walk_capped",
	[IOWHY_C_LOST_DONE] = "lost_completion",
	[IOWHY_C_LOST_ISSUE] = "lost_issue",
	[IOWHY_C_LOST_SWITCH_IN] = "lost_switch_in",
	[IOWHY_C_LOST_SYS_EXIT] = "lost_syscall_exit",
	[IOWHY_C_LATE_ENTRY] = "late_syscall_entry",
	[IOWHY_C_RB_BIO] = "lost_ringbuf_bio",
	[IOWHY_C_RB_HELPER] = "lost_ringbuf_helper",
};

const char *rec_names[IOWHY_REC_MAX + 1] = {
	[IOWHY_REC_REQUEST] = "request", [IOWHY_REC_FSYNC] = "fsync",
	[IOWHY_REC_JOURNAL] = "journal", [IOWHY_REC_OFFCPU] = "offcpu",
	[IOWHY_REC_TASK] = "task",       [IOWHY_REC_SYSCALL] = "syscall",
	[IOWHY_REC_THREAD] = "thread",   [IOWHY_REC_BIO] = "bio",
	[IOWHY_REC_HELPER] = "helper",
};

const size_t rec_sizes[IOWHY_REC_MAX + 1] = {
	[IOWHY_REC_REQUEST] = sizeof(struct iowhy_request),
	[IOWHY_REC_FSYNC] = sizeof(struct iowhy_fsync),
	[IOWHY_REC_JOURNAL] = sizeof(struct iowhy_journal),
	[IOWHY_REC_OFFCPU] = sizeof(struct iowhy_offcpu),
	[IOWHY_REC_TASK] = sizeof(struct iowhy_task),
	[IOWHY_REC_SYSCALL] = sizeof(struct iowhy_syscall),
	[IOWHY_REC_THREAD] = sizeof(struct iowhy_thread),
	[IOWHY_REC_BIO] = sizeof(struct iowhy_bio),
	[IOWHY_REC_HELPER] = sizeof(struct iowhy_offcpu),
};

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG && !libbpf_verbose)
		return 0;
	if (level == LIBBPF_INFO && !libbpf_verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void sig_handler(int sig)
{
	stop_signal = sig;
	exiting = 1;
}

/* Only interrupts the ring-buffer poll, so the workload's exit is seen at once. */
void sigchld_handler(int sig)
{
}

/*
 * What must hold before anything is loaded: the attach target, the signal handlers,
 * BTF, the output path, tracefs; the buffers and the output file. -1 to go on, or the
 * exit status (nothing is left to clean up).
 */
static int prepare(struct rec *r)
{
	if (r->env.pid > 0 && check_target(r->env.pid, r->env.force))
		return 1;
	/*
	 * Stop (cleanly: trailer, rename) when the parent dies, `iowhy record` killed with
	 * -9 included; if it died before the prctl, stop now. The handlers are set before
	 * anything is created, so a signal during loading ends with nothing left behind.
	 */
	{
		pid_t ppid = getppid();

		signal(SIGINT, sig_handler);
		signal(SIGTERM, sig_handler);
		signal(SIGPIPE, SIG_IGN);
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != ppid) {
			fprintf(stderr, "iowhy-record: the parent process has exited: not recording\n");
			return 1;
		}
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, "failed to find kernel BTF: %s (iowhy needs CONFIG_DEBUG_INFO_BTF=y)\n",
			strerror(errno));
		return 1;
	}
	if (!r->env.dry_run && !r->env.top_ms && check_output(r->env.output))
		return 1;
	if (ensure_tracefs())
		return 1;
	libbpf_set_print(libbpf_print);

	for (int t = 1; t <= IOWHY_REC_MAX; t++) {
		r->w.bufs[t].data = malloc(CHUNK_BYTES);
		if (!r->w.bufs[t].data) {
			fprintf(stderr, "failed to allocate buffers: %s\n", strerror(ENOMEM));
			return 1;
		}
	}
	if (writer_init(r))
		return 1;

	if (r->env.flight_s > 0 && flight_init(r))
		return 1;
	if (r->env.top_ms && top_init(r))
		return 1;
	/* Fail on an unwritable output before touching the kernel (--flight writes its
	 * dumps when they are due: rec_flight.c). */
	if (!r->env.dry_run && !r->fl && !r->top) {
		r->w.fd = open_output(r, r->env.output);
		if (r->w.fd < 0)
			return 1;
	}
	return -1;
}

/* Free, close, rename the trace into place, detach (in the background). */
int cleanup(struct rec *r)
{
	ring_buffer__free(r->rb);
	if (r->stages.base)
		munmap(r->stages.base, r->stages.len);
	if (r->w.fd >= 0) {
		close(r->w.fd);
		/* Failed before the header: leave no empty file behind to be mistaken for a trace. */
		if (!r->w.good_off)
			unlink(r->partial_path);
		else if (commit_output(r, r->env.output) && r->ret == 0)
			r->ret = 1;
	}
	for (int t = 1; t <= IOWHY_REC_MAX; t++)
		free(r->w.bufs[t].data);
	writer_free(r);
	cgroups_free(r);
	if (r->nlinks && !r->env.dry_run)
		detach_in_background(r);
	destroy_links(r);
	iowhy_bpf__destroy(r->skel);
	btf__free(r->vmlinux);
	if (r->target_pidfd >= 0)
		close(r->target_pidfd);
	return r->ret;
}

/*
 * A stop signal before the workload started (SIGINT or SIGTERM while the probes load,
 * which can take seconds): say so, and exit 128+signal with nothing left behind (the
 * output file is removed by cleanup(), having no header yet).
 */
int stopped_before_start(struct rec *r)
{
	if (!exiting || !stop_signal)
		return 0;
	fprintf(stderr, "iowhy: stopped by %s while loading the probes: nothing was recorded%s\n",
		stop_signal == SIGINT ? "SIGINT" : stop_signal == SIGTERM ? "SIGTERM" : "a signal",
		r->env.cmd ? " and the workload was not started" : "");
	r->ret = 128 + stop_signal;
	return 1;
}

/* ---------------------------------------------------------------- main --- */

int main(int argc, char **argv)
{
	struct rec rs = { .env = { .ringbuf_mib = 64, .sync_syscalls = 1, .after_s = -1 },
			  .w = { .fd = -1 },
			  .stats = { .fd = -1 }, .ret = 1, .target_pidfd = -1,
			  .attach_mode = "tp_btf", .task_state = "task-storage",
			  .stop_reason = "workload-exit" };
	struct rec *r = &rs;
	int code;

	r->t_main = now_ns(CLOCK_MONOTONIC);
	if ((code = parse_args(r, argc, argv)) >= 0 || (code = prepare(r)) >= 0)
		return code;
	if (stopped_before_start(r))
		return cleanup(r);
	if (load_probes(r) || attach_probes(r)) {
		stopped_before_start(r); /* a load cut short by the signal: say why */
		return cleanup(r);
	}
	if (r->env.dry_run) {
		print_dry_run(r);
		return cleanup(r);
	}
	if (open_ring(r) || (!r->top && write_header(r)) || start_workload(r))
		return cleanup(r);
	if (r->top)
		top_start(r);
	else
		write_recorder_chunk(r);
	poll_until_stop(r);
	if (r->top) {
		top_finish(r);
		return cleanup(r);
	}
	if (r->fl) {
		flight_stop(r);
		flight_finish(r);
		return cleanup(r);
	}
	drain_at_stop(r);
	write_trailer(r);
	return cleanup(r);
}
