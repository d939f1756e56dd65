// SPDX-License-Identifier: GPL-2.0
/* iowhy-record, statistics: kernel counters, recursion misses, BPF run-time
 * statistics, CPU time. */
#include "recorder.h"

__u64 counters_sum(int fd, __u64 *out)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 *vals = calloc(ncpu, sizeof(__u64)), total = 0;

	for (__u32 i = 0; i < IOWHY_C_MAX; i++) {
		out[i] = 0;
		if (vals && bpf_map_lookup_elem(fd, &i, vals) == 0)
			for (int c = 0; c < ncpu; c++)
				out[i] += vals[c];
		total += out[i];
	}
	free(vals);
	return total;
}

/*
 * Runs of our programs the kernel skipped because the same program was already running
 * on that CPU (bpf_prog_info.recursion_misses): events that happened and were not seen.
 */

__u64 recursion_misses(struct rec *r, FILE *detail)
{
	struct bpf_program *prog;
	__u64 total = 0;
	int first = 1;

	if (!r->obj)
		return 0;
	bpf_object__for_each_program(prog, r->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		total += info.recursion_misses;
		if (detail && info.recursion_misses) {
			fprintf(detail, "%s\"%s\": %llu", first ? "" : ", ", bpf_program__name(prog),
				(unsigned long long)info.recursion_misses);
			first = 0;
		}
	}
	return total;
}

/*
 * --probe-stats: what the probes cost, measured by the kernel (BPF_STATS_RUN_TIME, on
 * while stats_fd is open; it times every BPF program on the machine, so it is opt-in).
 * Run count and run time of each program from just before the probes are attached
 * (stats_start) to the last read of the ring at stop (stats_end): every event behind a
 * record of the trace. stats_write() writes the differences.
 */

static void stats_take(struct rec *r, __u64 *cnt, __u64 *ns)
{
	struct bpf_program *prog;
	int i = 0;

	bpf_object__for_each_program(prog, r->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (i >= MAX_PROGS)
			break;
		cnt[i] = ns[i] = 0;
		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len)) {
			cnt[i] = info.run_cnt;
			ns[i] = info.run_time_ns;
		}
		i++;
	}
}


void stats_end(struct rec *r)
{
	if (r->stats.fd < 0)
		return;
	stats_take(r, r->stats.cnt1, r->stats.ns1);
	close(r->stats.fd);
	r->stats.fd = -1;
	r->stats.done = 1;
}

void stats_write(struct rec *r, FILE *f)
{
	__u64 *cnt = r->stats.cnt1, *ns = r->stats.ns1;
	struct bpf_program *prog;
	int i = 0, first = 1;

	if (!r->stats.done)
		return;
	fprintf(f, "\"probe_stats\": {");
	bpf_object__for_each_program(prog, r->obj) {
		if (i >= MAX_PROGS)
			break;
		if (cnt[i] > r->stats.cnt0[i]) {
			fprintf(f, "%s\"%s\": {\"runs\": %llu, \"run_ns\": %llu}", first ? "" : ", ",
				bpf_program__name(prog), (unsigned long long)(cnt[i] - r->stats.cnt0[i]),
				(unsigned long long)(ns[i] - r->stats.ns0[i]));
			first = 0;
		}
		i++;
	}
	fprintf(f, "}, ");
}

void write_counts_json(struct rec *r, FILE *f, int counters_fd)
{
	__u64 c[IOWHY_C_MAX];

	counters_sum(counters_fd, c);
	fprintf(f, "\"counters\": {");
	for (int i = 0; i < IOWHY_C_MAX; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", counter_names[i], (unsigned long long)c[i]);
	fprintf(f, ", \"lost_recursion\": %llu", (unsigned long long)recursion_misses(r, NULL));
	fprintf(f, ", \"unknown_record\": %llu}, \"recursion_misses\": {",
		(unsigned long long)r->w.unknown_records);
	recursion_misses(r, f);
	fprintf(f, "}, \"records\": {");
	for (int t = 1; t <= IOWHY_REC_MAX; t++)
		fprintf(f, "%s\"%s\": %llu", t > 1 ? ", " : "", rec_names[t],
			(unsigned long long)r->w.bufs[t].total);
	fprintf(f, "}");
}

void stats_start(struct rec *r)
{
	if (!r->env.probe_stats)
		return;
	r->stats.fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (r->stats.fd < 0) {
		fprintf(stderr, "iowhy-record: WARNING: failed to enable BPF run-time statistics: "
				"%s; recording without --probe-stats\n", strerror(-r->stats.fd));
		return;
	}
	stats_take(r, r->stats.cnt0, r->stats.ns0);
}

/* The recorder's own CPU time (all its threads, user and system), in ns. */
void cpu_ns(__u64 *user, __u64 *sys)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru)) {
		*user = *sys = 0;
		return;
	}
	*user = ru.ru_utime.tv_sec * 1000000000ULL + ru.ru_utime.tv_usec * 1000ULL;
	*sys = ru.ru_stime.tv_sec * 1000000000ULL + ru.ru_stime.tv_usec * 1000ULL;
}

void write_progress(struct rec *r, int counters_fd)
{
	struct sbuf s;

	sb_open(&s);
	fprintf(s.f, "{\"end_ns\": %llu, ", (unsigned long long)now_ns(CLOCK_MONOTONIC));
	write_counts_json(r, s.f, counters_fd);
	cgroups_json(r, s.f, 1);
	fprintf(s.f, "}");
	sb_close_write(r, &s, IOWHY_CHUNK_PROGRESS);
}

/*
 * The live line: on a terminal (stderr a tty, no -q), once a second, the elapsed time,
 * the requests and records written, the records per second over the last second and
 * the events lost so far, redrawn in place. It costs one read of the per-CPU counter
 * map a second. live_clear() erases it before the recorder prints anything else, so
 * the counts at the stop are printed once, in one format.
 */
static int live_shown, live_on = -1; /* live_on: decided once, at the first call */
static __u64 live_last_ns, live_last_records;

void live_progress(struct rec *r, __u64 now)
{
	__u64 c[IOWHY_C_MAX], lost = 0, records = 0;
	double dt;

	if (live_on < 0) /* once, not a syscall per wake-up of the drain loop */
		live_on = !r->env.quiet && isatty(STDERR_FILENO);
	if (!live_on)
		return;
	if (!live_last_ns) { /* the first line after a second: short runs print none */
		live_last_ns = now;
		return;
	}
	if (now - live_last_ns < 1000000000ULL)
		return;
	counters_sum(r->counters_fd, c);
	for (int i = 0; i < IOWHY_C_MAX; i++)
		if (!strncmp(counter_names[i], "lost_", 5))
			lost += c[i];
	for (int t = 1; t <= IOWHY_REC_MAX; t++)
		records += r->w.bufs[t].total;
	dt = (now - live_last_ns) / 1e9;
	fprintf(stderr, "\riowhy-record: %.0f s, %llu requests, %llu records (%.0f/s), "
			"%llu events lost\033[K",
		(now - r->start_ns) / 1e9, (unsigned long long)r->w.bufs[IOWHY_REC_REQUEST].total,
		(unsigned long long)records, (records - live_last_records) / dt,
		(unsigned long long)lost);
	fflush(stderr);
	live_shown = 1;
	live_last_ns = now;
	live_last_records = records;
}

void live_clear(void)
{
	if (!live_shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	live_shown = 0;
}

