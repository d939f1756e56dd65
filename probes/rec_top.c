// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy-record, --top MS: for `iowhy top`. No trace is written and no record is kept:
 * each record from the probes is folded, as it arrives, into per-process totals of the
 * current interval, and every MS milliseconds one JSON line goes to stdout. The probes
 * run in top mode (iowhy.bpf.c, top_mode): they write only what is folded here (off-CPU
 * intervals and fsync-family calls of tracked threads, requests tracked threads
 * submitted), the class of the request whose completion ended a wait comes with the
 * off-CPU record, and the journal, filesystem and write-family programs are not loaded.
 *
 *   {"start_ns": .., "end_ns": .., "interval_ns": .., "block_start": {disk: [stat]},
 *    "block_end": {..}, "counters": {lost..: n},
 *    "processes": [{"pid": .., "attribution_ns": {cause: ns}, "fsync": {"count", "p99_ns",
 *    "max_ns"}, "requests": {"count", "p99_ns", "max_ns"}}]}
 *
 * The causes are a live approximation of the report's level one, one interval at a time
 * and without the critical path: a thread's on-CPU time (the growth of its
 * sum_exec_runtime between switch-outs) is `cpu`; a preemption, and the time from a
 * wakeup to the switch-in, `runqueue`; a sleep goes by what ended it: a throttling pause
 * `throttle`; the completion of a request (WAKER_RQ) `barrier` (a flush), `read`,
 * `metadata` or `data` by that request's class (`log` when a journal thread submitted
 * it); a journal thread (jbd2) or, for an uninterruptible sleep not on
 * its own I/O, a kernel thread: `log`; another thread of the process `wait-other`;
 * another process `external`; an interrupt without a request (a timer) `sleep`. Only
 * the part of a wait inside the interval counts, when it ends: a wait still running at
 * the end of an interval shows in the one where it ends. Latency percentiles come from
 * log-linear histograms (8 buckets per power of two: a p99 is the upper bound of its
 * bucket, at most 1/8 above the true value).
 */
#include "recorder.h"

enum { C_CPU, C_RUNQ, C_BARRIER, C_LOG, C_META, C_DATA, C_READ, C_THROTTLE, C_SLEEP,
       C_EXTERNAL, C_OTHER, C_N };
static const char *const cause_names[C_N] = { "cpu", "runqueue", "barrier", "log", "metadata",
					      "data", "read", "throttle", "sleep", "external",
					      "wait-other" };

#define TOP_PROCS 1024     /* table slots; 3/4 of them processes per interval (more: counted) */
#define TOP_THREADS 65536  /* threads whose last sum_exec_runtime is kept (a hash) */
#define HBUCKETS 256 /* up to 2^33 ns, 8.6 s; longer in the last (its max is exact) */

struct hist {
	__u32 n;
	__u64 max;
	__u32 b[HBUCKETS];
};

struct tproc {
	__u32 tgid; /* 0: free */
	__u64 ns[C_N];
	struct hist fsync, req;
};

struct top {
	struct tproc *procs; /* open addressing by tgid */
	__u32 nprocs, dropped;
	struct { __u32 tid; __u64 run; } *threads;
	__u64 t0, last_counters[IOWHY_C_MAX];
	char *block0; /* block_stats() at the current interval's start */
};

static __u32 bucket(__u64 v)
{
	int msb;

	if (v < 8)
		return (__u32)v;
	msb = 63 - __builtin_clzll(v);
	return (__u32)((msb - 2) * 8 + ((v >> (msb - 3)) & 7)); /* 8 per power of two */
}

static __u64 bucket_top(__u32 b)
{
	int msb;

	if (b < 8)
		return b;
	msb = (int)(b / 8) + 2;
	return ((8ULL + (b & 7) + 1) << (msb - 3)) - 1;
}

static void hist_add(struct hist *h, __u64 v)
{
	__u32 b = bucket(v);

	h->b[b < HBUCKETS ? b : HBUCKETS - 1]++;
	h->n++;
	if (v > h->max)
		h->max = v;
}

static __u64 hist_p99(const struct hist *h)
{
	__u64 want = h->n - h->n / 100, seen = 0; /* the value 99% of the samples are at or under */

	for (__u32 b = 0; b < HBUCKETS; b++) {
		seen += h->b[b];
		if (h->b[b] && seen >= want) {
			__u64 top = bucket_top(b);

			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}

int top_init(struct rec *r)
{
	struct top *t = calloc(1, sizeof(*t));

	if (t) {
		t->procs = calloc(TOP_PROCS, sizeof(*t->procs));
		t->threads = calloc(TOP_THREADS, sizeof(*t->threads));
	}
	if (!t || !t->procs || !t->threads) {
		fprintf(stderr, "failed to allocate the top tables: %s\n", strerror(ENOMEM));
		if (t) {
			free(t->procs);
			free(t->threads);
		}
		free(t);
		return -1;
	}
	r->top = t;
	return 0;
}

/*
 * The kernel's counters of every disk, /sys/block/DEV/stat, as the JSON object
 * {"DEV": [field, ...]} (a malloc'd string; "{}" when unreadable). Read here, at the
 * moment an interval starts and ends, so that `iowhy top`'s device line covers the same
 * time as the processes' rows however late it reads the line. The fields are taken up
 * to the first that is not a number.
 */
static char *block_stats(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	int first = 1;

	if (!f) {
		if (d)
			closedir(d);
		return strdup("{}");
	}
	fputc('{', f);
	while (d && (de = readdir(d))) {
		char path[NAME_MAX + 8], text[512], *p, *end;
		int fd, n = 0;
		ssize_t got;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/stat", de->d_name);
		fd = openat(dirfd(d), path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		got = read(fd, text, sizeof(text) - 1);
		close(fd);
		if (got <= 0)
			continue;
		text[got] = 0;
		fputs(first ? "" : ", ", f);
		json_str(f, de->d_name);
		fputs(": [", f);
		for (p = text;; p = end) {
			unsigned long long v;

			while (*p == ' ' || *p == '\t')
				p++;
			if (!*p || *p == '\n')
				break;
			errno = 0;
			v = strtoull(p, &end, 10);
			if (end == p || errno)
				break;
			fprintf(f, "%s%llu", n++ ? ", " : "", v);
		}
		fputc(']', f);
		first = 0;
	}
	fputc('}', f);
	if (d)
		closedir(d);
	if (fclose(f) || !buf) {
		free(buf);
		return strdup("{}");
	}
	return buf;
}

/* The recording has started (r->start_ns is set): the first interval's disk counters. */
void top_start(struct rec *r)
{
	r->top->block0 = block_stats();
}

static struct tproc *proc_of(struct top *t, __u32 tgid)
{
	__u32 h = (tgid * 2654435761u) % TOP_PROCS;

	for (__u32 i = 0; i < TOP_PROCS; i++, h = (h + 1) % TOP_PROCS) {
		if (t->procs[h].tgid == tgid)
			return &t->procs[h];
		if (!t->procs[h].tgid) {
			if (t->nprocs >= TOP_PROCS * 3 / 4)
				break;
			t->procs[h].tgid = tgid;
			t->nprocs++;
			return &t->procs[h];
		}
	}
	t->dropped++;
	return NULL;
}

/* The thread's sum_exec_runtime at its last switch-out (0: first seen); records `run`. */
static __u64 swap_run(struct top *t, __u32 tid, __u64 run)
{
	__u32 h = (tid * 2654435761u) % TOP_THREADS;
	__u64 prev;

	for (__u32 i = 0; i < 64; i++, h = (h + 1) % TOP_THREADS) {
		if (t->threads[h].tid == tid || !t->threads[h].tid) {
			prev = t->threads[h].tid ? t->threads[h].run : 0;
			t->threads[h].tid = tid;
			t->threads[h].run = run;
			return prev;
		}
	}
	return 0;
}

/* The cause of a request's class (IOWHY_RQC_*, which the probes decide under --top). */
static const int rqc_cause[] = { [IOWHY_RQC_BARRIER] = C_BARRIER, [IOWHY_RQC_LOG] = C_LOG,
				 [IOWHY_RQC_READ] = C_READ, [IOWHY_RQC_META] = C_META,
				 [IOWHY_RQC_DATA] = C_DATA };

/* ns of [a, b) inside [lo, hi) */
static __u64 inside(__u64 a, __u64 b, __u64 lo, __u64 hi)
{
	a = a > lo ? a : lo;
	b = b < hi ? b : hi;
	return b > a ? b - a : 0;
}

static int sleep_cause(const struct iowhy_offcpu *e)
{
	if (e->flags_u16 & (IOWHY_OFF_THROTTLE_DIRTY | IOWHY_OFF_THROTTLE_BLOCK))
		return C_THROTTLE;
	if (e->flags_u16 & IOWHY_OFF_WAKER_RQ) {
		/* the class the probes gave the request at its completion */
		if (e->waker_rq_class >= IOWHY_RQC_BARRIER && e->waker_rq_class <= IOWHY_RQC_DATA)
			return rqc_cause[e->waker_rq_class];
		return (e->flags_u16 & IOWHY_OFF_IOWAIT) ? C_DATA : C_OTHER;
	}
	if (!strncmp(e->waker_comm, "jbd2/", 5))
		return C_LOG;
	if (e->waker_ctx_u16 == IOWHY_WCTX_TASK) {
		if (e->waker_tgid == e->tgid)
			return C_OTHER;
		/* a kernel thread ending an uninterruptible wait not on its own I/O: a log
		 * commit's end (XFS's end-I/O worker); on its own I/O: the data */
		if (!strncmp(e->waker_comm, "kworker/", 8) && (e->flags_u16 & IOWHY_OFF_D))
			return (e->flags_u16 & IOWHY_OFF_IOWAIT) ? C_DATA : C_LOG;
		return C_EXTERNAL;
	}
	if (e->waker_ctx_u16 == IOWHY_WCTX_HARDIRQ || e->waker_ctx_u16 == IOWHY_WCTX_SOFTIRQ)
		return (e->flags_u16 & IOWHY_OFF_IOWAIT) ? C_DATA : C_SLEEP;
	return C_OTHER;
}

/*
 * The start of the current interval: t0, set at each tick; the first interval starts
 * with the recording (records can come before its first tick).
 */
static __u64 interval_start(const struct rec *r)
{
	return r->top->t0 ? r->top->t0 : r->start_ns;
}

/* A record from the probes, folded into the current interval. */
void top_event(struct rec *r, const struct iowhy_rec_hdr *h)
{
	struct top *t = r->top;
	__u64 lo = interval_start(r), hi = ~0ULL;
	struct tproc *p;

	if (h->type == IOWHY_REC_REQUEST) {
		const struct iowhy_request *e = (const void *)h;
		__u64 from = e->submit_ns ? e->submit_ns : e->issue_ns;

		if (!(e->flags_u16 & IOWHY_RQ_TRACKED) || !from || e->done_ns <= from)
			return;
		p = proc_of(t, e->tgid);
		if (p)
			hist_add(&p->req, e->done_ns - from);
	} else if (h->type == IOWHY_REC_FSYNC) {
		const struct iowhy_fsync *e = (const void *)h;

		if (e->call_u16 == IOWHY_CALL_OSYNC_WRITE || e->exit_ns < e->enter_ns)
			return;
		p = proc_of(t, e->tgid);
		if (p)
			hist_add(&p->fsync, e->exit_ns - e->enter_ns);
	} else if (h->type == IOWHY_REC_OFFCPU) {
		const struct iowhy_offcpu *e = (const void *)h;
		__u64 prev, woke = e->waking_ns ? e->waking_ns : e->end_ns;

		p = proc_of(t, e->tgid);
		if (!p)
			return;
		prev = e->run_total_ns ? swap_run(t, e->tid, e->run_total_ns) : 0;
		if (prev && e->run_total_ns > prev)
			p->ns[C_CPU] += e->run_total_ns - prev;
		if (e->flags_u16 & IOWHY_OFF_PREEMPT) {
			p->ns[C_RUNQ] += inside(e->start_ns, e->end_ns, lo, hi);
			return;
		}
		p->ns[sleep_cause(e)] += inside(e->start_ns, woke, lo, hi);
		p->ns[C_RUNQ] += inside(woke, e->end_ns, lo, hi);
	}
}

/* The histogram too, as [bucket, count] pairs of its non-empty buckets, so that `iowhy
 * top --by cgroup` merges processes exactly (analyzer/iowhy/top.py, merge_hists). */
static void hist_json(FILE *f, const char *name, const struct hist *h)
{
	int first = 1;

	fprintf(f, "\"%s\": {\"count\": %u, \"p99_ns\": %llu, \"max_ns\": %llu, \"buckets\": [",
		name, h->n, (unsigned long long)(h->n ? hist_p99(h) : 0), (unsigned long long)h->max);
	for (__u32 b = 0; b < HBUCKETS; b++) {
		if (!h->b[b])
			continue;
		fprintf(f, "%s[%u, %u]", first ? "" : ", ", b, h->b[b]);
		first = 0;
	}
	fprintf(f, "]}");
}

/* ms until the current interval ends (0: it has): how long the poll loop may sleep. */
int top_wait_ms(struct rec *r, __u64 now)
{
	__u64 end = interval_start(r) + r->env.top_ms * 1000000ULL;

	return end > now ? (int)((end - now + 999999) / 1000000) : 0;
}

/* The poll loop's hook: one JSON line per interval, then a new interval. */
void top_tick(struct rec *r, __u64 now)
{
	struct top *t = r->top;
	__u64 c[IOWHY_C_MAX];
	char *block;
	int first = 1;

	t->t0 = interval_start(r);
	if (now - t->t0 < r->env.top_ms * 1000000ULL)
		return;
	counters_sum(r->counters_fd, c);
	block = block_stats();
	printf("{\"start_ns\": %llu, \"end_ns\": %llu, \"interval_ns\": %llu, "
	       "\"dropped_processes\": %u, \"block_start\": %s, \"block_end\": %s, "
	       "\"counters\": {",
	       (unsigned long long)t->t0, (unsigned long long)now,
	       (unsigned long long)(now - t->t0), t->dropped, t->block0 ? t->block0 : "{}",
	       block ? block : "{}");
	free(t->block0);
	t->block0 = block;
	for (int i = 0; i < IOWHY_C_MAX; i++)
		printf("%s\"%s\": %llu", i ? ", " : "", counter_names[i],
		       (unsigned long long)(c[i] - t->last_counters[i]));
	printf("}, \"processes\": [");
	for (__u32 i = 0; i < TOP_PROCS; i++) {
		struct tproc *p = &t->procs[i];

		if (!p->tgid)
			continue;
		printf("%s{\"pid\": %u, \"attribution_ns\": {", first ? "" : ", ", p->tgid);
		for (int k = 0; k < C_N; k++)
			printf("%s\"%s\": %llu", k ? ", " : "", cause_names[k],
			       (unsigned long long)p->ns[k]);
		printf("}, ");
		hist_json(stdout, "fsync", &p->fsync);
		printf(", ");
		hist_json(stdout, "requests", &p->req);
		printf("}");
		first = 0;
		memset(p, 0, sizeof(*p));
	}
	printf("]}\n");
	fflush(stdout);
	memcpy(t->last_counters, c, sizeof(c));
	t->nprocs = t->dropped = 0;
	t->t0 = now;
}

void top_finish(struct rec *r)
{
	if (!r->top)
		return;
	free(r->top->procs);
	free(r->top->threads);
	free(r->top->block0);
	free(r->top);
	r->top = NULL;
	r->ret = stop_signal ? 128 + stop_signal : 0;
}
