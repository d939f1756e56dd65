// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy-record, --flight SECONDS: the flight recorder. Attached until stopped, it keeps
 * the chunks the writer makes (compressed, as they would be written) in memory instead of
 * writing them, for as long as their records are within the last SECONDS, at most
 * FLIGHT_MAX_BYTES in all. On SIGUSR1, or when a trigger fires (a record that says an
 * fsync, a request, a cache flush or a workload thread's sleep took longer than its
 * limit), it waits --after seconds, then writes the window (from SECONDS before the
 * trigger to now) as a trace of its own: the first to OUT, the next to OUT with .1, .2,
 * ... before its .iowt, at most --max-dumps; then it keeps recording (after the last one,
 * it stops). Triggers are evaluated as the records arrive from the probes (blocked: a
 * workload thread's uninterruptible sleep, to its wakeup); one that fires
 * while a dump is pending is part of that dump, not a new one. At stop, a pending dump
 * is written (its --after cut short), and with --dump-on-exit the window up to the stop
 * is written when none is (flight_stop).
 *
 * A dump is an ordinary trace: the file header, META as it was collected, a RECORDER whose
 * start_ns is the window's start, the kept chunks (renumbered), and a TRAILER with the
 * records it holds, the probes' counters over the window, and `flight` (the window, the
 * trigger and when it fired, what was dropped). Chunks are dropped oldest first: those
 * whose records are all older than the window (aged), and, when the bound is reached,
 * those of the window (counted: the dump's window then starts after the last of them, and
 * says so). The bound covers the chunks kept (none is dropped while a dump is made: the
 * records that arrive meanwhile are kept, and dropped after it if they must be); the ring
 * buffer (-r) and the writer's per-type buffers come on top.
 */
#include "recorder.h"

static volatile sig_atomic_t flight_usr1;

struct fchunk {
	struct fchunk *next;
	__u64 tmin, tmax;             /* its records' times */
	__u64 counters[IOWHY_C_MAX];  /* the probes' counters when it was kept */
	__u16 type;                   /* record type, without the chunk flags */
	__u32 count;
	size_t len;                   /* header and payload */
	unsigned char bytes[];
};

struct flight {
	struct fchunk *head, *tail; /* oldest first, in the order they were made */
	size_t bytes, bound;
	unsigned char *meta;        /* the META chunk as made at the start */
	size_t meta_len;
	int writing;                /* a dump is being written: chunks go to its file */
	int dumping;                /* a dump is being made: no chunk is dropped, and a
				     * trigger is the next dump's (next_*) */
	int next_pending;
	__u64 next_trig_ns;
	char next_trig[48];
	/* the pending dump */
	int pending;
	__u64 trig_ns, due_ns;
	char trig[48];
	int dumps;
	int stop_failed;            /* the dump at stop could not be written */
	__u64 aged_chunks;          /* older than every window, dropped as meant */
	__u64 dropped_chunks, dropped_bytes; /* dropped for the bound since the last dump */
	__u64 lost_until_ns;        /* the newest record of a chunk dropped for the bound */
	__u64 fired, ignored;       /* triggers that fired; that fired while one was pending */
};

enum { TRIG_FSYNC, TRIG_REQUEST, TRIG_FLUSH, TRIG_BLOCKED };
static const char *const trig_names[] = { "fsync", "request", "flush", "blocked" };

static void usr1_handler(int sig)
{
	flight_usr1 = 1;
}

/*
 * "KIND>NUMBER[UNIT]": KIND fsync, request, flush or blocked; UNIT ns, us, ms or s
 * (default ms). 0 and the limit in ns, or -1.
 */
int flight_parse_trigger(const char *s, struct flight_trigger *t)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = { { "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "", 1e6 } };
	const char *gt = strchr(s, '>');
	char *end;
	double v;

	if (!gt)
		return -1;
	t->kind = -1;
	for (int k = 0; k < 4; k++)
		if ((size_t)(gt - s) == strlen(trig_names[k]) && !strncmp(s, trig_names[k], gt - s))
			t->kind = k;
	if (t->kind < 0)
		return -1;
	errno = 0;
	v = strtod(gt + 1, &end);
	if (errno || end == gt + 1 || !isfinite(v) || v <= 0)
		return -1;
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		if (!strcmp(end, units[u].unit)) {
			if (v * units[u].ns >= 1e18)
				return -1;
			t->ns = (__u64)(v * units[u].ns);
			snprintf(t->text, sizeof(t->text), "%s", s);
			return t->ns ? 0 : -1;
		}
	}
	return -1;
}

int flight_init(struct rec *r)
{
	struct sigaction sa = { .sa_handler = usr1_handler };
	const char *mib = getenv("IOWHY_FLIGHT_MAX_MIB"); /* tests: a small bound */

	r->fl = calloc(1, sizeof(*r->fl));
	if (!r->fl) {
		fprintf(stderr, "failed to allocate the flight recorder: %s\n", strerror(ENOMEM));
		return -1;
	}
	r->fl->bound = (size_t)FLIGHT_MAX_MIB << 20;
	if (mib && atol(mib) > 0 && atol(mib) <= FLIGHT_MAX_MIB)
		r->fl->bound = (size_t)atol(mib) << 20;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: it ends the ring's poll at once */
	{
		sigset_t set; /* `iowhy attach` starts it with SIGUSR1 blocked: one sent meanwhile
			       * is taken now */

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
	}
	return 0;
}

static void drop_head(struct flight *f)
{
	struct fchunk *c = f->head;

	f->head = c->next;
	if (!f->head)
		f->tail = NULL;
	f->bytes -= c->len;
	free(c);
}

/* The oldest time any window may still need. */
static __u64 horizon(struct rec *r, __u64 now)
{
	__u64 w = (__u64)(r->env.flight_s * 1e9), h = now > w ? now - w : 0;

	if (r->fl->pending && r->fl->trig_ns - w < h)
		h = r->fl->trig_ns > w ? r->fl->trig_ns - w : 0;
	return h;
}

/*
 * write_chunk's hook: keep a chunk made while recording (1), or let it be written (0: a
 * dump is being written). Record chunks are kept; META once; RECORDER, PROGRESS and
 * TRAILER are not (each dump writes its own).
 */
int flight_keep(struct rec *r, const struct iowhy_chunk_hdr *h, const void *out, size_t stored,
		size_t pad, __u16 type, const void *data, __u16 rec_size, __u32 count)
{
	struct flight *f = r->fl;
	size_t len = sizeof(*h) + stored + pad;
	struct fchunk *c;
	__u64 now;

	if (f->writing)
		return 0;
	if (type == IOWHY_CHUNK_META && !f->meta) {
		f->meta = malloc(len);
		if (f->meta) {
			memcpy(f->meta, h, sizeof(*h));
			memcpy(f->meta + sizeof(*h), out, stored);
			memset(f->meta + sizeof(*h) + stored, 0, pad);
			f->meta_len = len;
		}
		return 1;
	}
	if (type == IOWHY_CHUNK_RECORDER && !r->env.quiet) /* made once every probe is attached */
		fprintf(stderr, "iowhy-record: flight: recording, keeping the last %g s (at most "
				"%zu MiB); SIGUSR1 or a trigger writes them to %s\n", r->env.flight_s,
			f->bound >> 20, r->env.output);
	if (type < 1 || type > IOWHY_REC_MAX || !rec_size)
		return 1;
	c = malloc(sizeof(*c) + len);
	if (!c) {
		f->dropped_chunks++;
		f->dropped_bytes += len;
		f->lost_until_ns = now_ns(CLOCK_MONOTONIC);
		return 1;
	}
	c->next = NULL;
	c->type = type;
	c->count = count;
	c->len = len;
	c->tmin = ~0ULL;
	c->tmax = 0;
	for (__u32 i = 0; i < count; i++) {
		const struct iowhy_rec_hdr *rh = (const void *)((const char *)data + (size_t)i * rec_size);

		c->tmin = rh->ts_ns < c->tmin ? rh->ts_ns : c->tmin;
		c->tmax = rh->ts_ns > c->tmax ? rh->ts_ns : c->tmax;
	}
	counters_sum(r->counters_fd, c->counters);
	memcpy(c->bytes, h, sizeof(*h));
	memcpy(c->bytes + sizeof(*h), out, stored);
	memset(c->bytes + sizeof(*h) + stored, 0, pad);
	if (f->tail)
		f->tail->next = c;
	else
		f->head = c;
	f->tail = c;
	f->bytes += len;
	now = now_ns(CLOCK_MONOTONIC);
	while (f->head && f->head != f->tail && f->head->tmax < horizon(r, now)) {
		f->aged_chunks++;
		drop_head(f);
	}
	while (f->head && f->bytes > f->bound && !f->dumping) {
		f->dropped_chunks++;
		f->dropped_bytes += f->head->len;
		if (f->head->tmax > f->lost_until_ns)
			f->lost_until_ns = f->head->tmax;
		drop_head(f);
	}
	return 1;
}

/* A dump of the window around `at` is due --after seconds after it. */
static void make_pending(struct rec *r, const char *what, __u64 at)
{
	struct flight *f = r->fl;

	f->pending = 1;
	f->trig_ns = at;
	f->due_ns = at + (__u64)(r->env.after_s * 1e9);
	snprintf(f->trig, sizeof(f->trig), "%s", what);
	if (!r->env.quiet)
		fprintf(stderr, "iowhy-record: flight: %s at %.3f s; writing the window in %.1f s\n",
			what, (at - r->start_ns) / 1e9, r->env.after_s);
}

static void fire(struct rec *r, const char *what, __u64 at)
{
	struct flight *f = r->fl;

	f->fired++;
	if (f->dumping) { /* while a dump is made: its records come after that dump's end */
		if (!f->next_pending) {
			f->next_pending = 1;
			f->next_trig_ns = at;
			snprintf(f->next_trig, sizeof(f->next_trig), "%s", what);
		}
		return;
	}
	if (f->pending) {
		f->ignored++;
		return;
	}
	make_pending(r, what, at);
}

/* A record from the probes: does it fire a trigger? */
void flight_event(struct rec *r, const struct iowhy_rec_hdr *h)
{
	for (int i = 0; i < r->env.ntriggers; i++) {
		const struct flight_trigger *t = &r->env.triggers[i];
		__u64 took = 0, end = h->ts_ns;

		if (t->kind == TRIG_FSYNC && h->type == IOWHY_REC_FSYNC) {
			const struct iowhy_fsync *e = (const void *)h;

			if (e->call_u16 != IOWHY_CALL_OSYNC_WRITE && e->exit_ns > e->enter_ns)
				took = e->exit_ns - e->enter_ns, end = e->exit_ns;
		} else if ((t->kind == TRIG_REQUEST || t->kind == TRIG_FLUSH) &&
			   h->type == IOWHY_REC_REQUEST) {
			const struct iowhy_request *e = (const void *)h;
			__u64 from = e->submit_ns ? e->submit_ns : e->issue_ns;

			if ((t->kind == TRIG_FLUSH) == (e->op == IOWHY_OP_FLUSH) && from &&
			    e->done_ns > from)
				took = e->done_ns - from, end = e->done_ns;
		} else if (t->kind == TRIG_BLOCKED && h->type == IOWHY_REC_OFFCPU) {
			const struct iowhy_offcpu *e = (const void *)h;
			__u64 woke = e->waking_ns ? e->waking_ns : e->end_ns;

			/* blocked: uninterruptible sleep (D), as the hung-task detector counts it;
			 * a thread idle in poll or a timer is not */
			if ((e->flags_u16 & IOWHY_OFF_D) && woke > e->start_ns)
				took = woke - e->start_ns, end = woke;
		}
		if (took > t->ns) {
			char what[48];

			snprintf(what, sizeof(what), "%s", t->text);
			fire(r, what, end);
		}
	}
}

static int put(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* A kept chunk written with the dump's sequence number (outside the CRC). */
static int put_chunk(struct rec *r, const unsigned char *bytes, size_t len)
{
	struct iowhy_chunk_hdr h;

	memcpy(&h, bytes, sizeof(h));
	h.seq = r->w.seq++;
	if (put(r->w.fd, &h, sizeof(h)) || put(r->w.fd, bytes + sizeof(h), len - sizeof(h)))
		return -1;
	r->w.good_off += len;
	return 0;
}

/* A dump is made (or failed): a trigger that fired meanwhile is now pending. */
static void dump_done(struct rec *r)
{
	struct flight *f = r->fl;

	f->dumping = 0;
	if (!f->next_pending)
		return;
	f->next_pending = 0;
	if (f->pending) /* the dump failed, and is tried again: the trigger is part of it */
		f->ignored++;
	else
		make_pending(r, f->next_trig, f->next_trig_ns);
}

/* The dump's file name: OUT, then OUT with .N before its .iowt (or after it). */
static void dump_path(struct rec *r, int n, char *out, size_t cap)
{
	const char *o = r->env.output;
	size_t len = strlen(o);

	if (!n)
		snprintf(out, cap, "%s", o);
	else if (len > 5 && !strcmp(o + len - 5, ".iowt"))
		snprintf(out, cap, "%.*s.%d.iowt", (int)(len - 5), o, n);
	else
		snprintf(out, cap, "%s.%d", o, n);
}

/*
 * Write the window ending `now` to the next dump file. `at_stop`: the recording has
 * stopped, and drain_at_stop has added what was still open to the kept chunks; else the
 * probes' last records are taken first, and what is open at the end (requests in flight,
 * calls running, sleeps not ended) is added to the dump alone (take_open_state, then
 * write_open_state): the records the ring brings meanwhile are kept after the dump's
 * chunks (`last`), for the recording that goes on. 0, or -1 (one line said why;
 * recording goes on).
 */
static int dump(struct rec *r, __u64 now, int at_stop)
{
	struct flight *f = r->fl;
	__u64 w = (__u64)(r->env.flight_s * 1e9), start, counters[IOWHY_C_MAX], base[IOWHY_C_MAX];
	__u64 nrec[IOWHY_REC_MAX + 1] = {}, keep_start = r->start_ns, keep_seq = r->w.seq;
	__u64 keep_off = r->w.good_off, open[3] = {};
	char path[PATH_MAX], keep_partial[PATH_MAX];
	struct iowhy_file_hdr fh = {};
	struct fchunk *c, *first = NULL, *last;
	int err = 0, ok;
	struct sbuf s;

	f->dumping = 1;
	if (!at_stop) {
		drain_now(r);
		now = now_ns(CLOCK_MONOTONIC);
	}
	flush_all(r); /* every record up to now into a kept chunk */
	last = f->tail;
	if (!at_stop) {
		take_open_state(r, now);
		flush_all(r); /* the records it took from the ring: after `last` */
	}
	start = f->trig_ns > w ? f->trig_ns - w : 0;
	if (start < r->start_ns)
		start = r->start_ns;
	if (f->lost_until_ns > start)
		start = f->lost_until_ns;
	dump_path(r, f->dumps, path, sizeof(path));
	memcpy(keep_partial, r->partial_path, sizeof(keep_partial));
	r->w.fd = open_output(r, path);
	if (r->w.fd < 0) {
		memcpy(r->partial_path, keep_partial, sizeof(keep_partial));
		discard_open_state(r);
		dump_done(r);
		return -1;
	}
	f->writing = 1;
	r->w.seq = 0;
	r->w.good_off = 0;
	fill_file_hdr(&fh);
	err = put(r->w.fd, &fh, sizeof(fh));
	r->w.good_off = sizeof(fh);
	if (!err && f->meta)
		err = put_chunk(r, f->meta, f->meta_len);
	r->start_ns = start;
	if (!err)
		write_recorder_chunk(r);
	for (c = last ? f->head : NULL; c && !err && !r->w.failed; c = c->next) {
		if (c->tmax >= start) {
			if (!first)
				first = c;
			nrec[c->type] += c->count;
			err = put_chunk(r, c->bytes, c->len);
		}
		if (c == last)
			break;
	}
	if (!err && !r->w.failed && !at_stop)
		write_open_state(r, nrec, open);
	else if (!at_stop)
		discard_open_state(r);
	counters_sum(r->counters_fd, counters);
	memcpy(base, first ? first->counters : counters, sizeof(base));
	if (!err && !r->w.failed) {
		sb_open(&s);
		if (at_stop) {
			open[0] = r->w.incomplete_requests;
			open[1] = r->w.open_calls;
			open[2] = r->w.open_sleeps;
		}
		fprintf(s.f, "{\"end_ns\": %llu, \"stop_reason\": \"flight-dump\", \"exit_status\": null, "
			     "\"rq_seq_stride\": %d, \"in_flight_at_stop\": %llu, "
			     "\"calls_open_at_stop\": %llu, \"sleeps_open_at_stop\": %llu, \"records\": {",
			(unsigned long long)now, libbpf_num_possible_cpus(), (unsigned long long)open[0],
			(unsigned long long)open[1], (unsigned long long)open[2]);
		for (int t = 1; t <= IOWHY_REC_MAX; t++)
			fprintf(s.f, "%s\"%s\": %llu", t > 1 ? ", " : "", rec_names[t],
				(unsigned long long)nrec[t]);
		fprintf(s.f, "}, \"counters\": {");
		for (int i = 0; i < IOWHY_C_MAX; i++)
			fprintf(s.f, "%s\"%s\": %llu", i ? ", " : "", counter_names[i],
				(unsigned long long)(counters[i] >= base[i] ? counters[i] - base[i] : 0));
		fprintf(s.f, "}, \"flight\": {\"window_ns\": %llu, \"after_ns\": %llu, "
			     "\"trigger\": \"%s\", \"trigger_ns\": %llu, \"dump\": %d, "
			     "\"bound_bytes\": %llu, \"dropped_chunks\": %llu, \"dropped_bytes\": %llu, "
			     "\"aged_chunks\": %llu, \"triggers_during\": %llu}",
			(unsigned long long)w, (unsigned long long)(r->env.after_s * 1e9), f->trig,
			(unsigned long long)f->trig_ns, f->dumps + 1, (unsigned long long)f->bound,
			(unsigned long long)f->dropped_chunks, (unsigned long long)f->dropped_bytes,
			(unsigned long long)f->aged_chunks, (unsigned long long)f->ignored);
		cgroups_json(r, s.f, 0);
		thread_cgroups_json(r, s.f);
		fprintf(s.f, "}");
		sb_close_write(r, &s, IOWHY_CHUNK_TRAILER);
	}
	ok = !err && !r->w.failed;
	close(r->w.fd);
	if (!ok) {
		fprintf(stderr, "iowhy-record: flight: failed to write %s: %s; recording goes on\n",
			path, strerror(r->w.failed ? r->w.err : errno));
		unlink(r->partial_path);
		r->w.failed = 0;
		exiting = stop_signal != 0;
	} else if (commit_output(r, path)) {
		ok = 0;
	} else if (!r->env.quiet) {
		fprintf(stderr, "iowhy-record: flight: wrote %s: %.3f s, %s at %.3f s%s\n", path,
			(now - start) / 1e9, f->trig, (f->trig_ns - keep_start) / 1e9,
			f->dropped_chunks ? " (chunks dropped for the memory bound: see iowhy info)" : "");
	}
	r->w.fd = -1;
	r->w.seq = keep_seq;
	r->w.good_off = keep_off;
	r->start_ns = keep_start;
	memcpy(r->partial_path, keep_partial, sizeof(keep_partial));
	f->writing = 0;
	f->pending = 0;
	f->ignored = 0;
	dump_done(r);
	if (ok) {
		f->dumps++;
		f->dropped_chunks = f->dropped_bytes = 0;
	}
	return ok ? 0 : -1;
}

/* The poll loop's hook: SIGUSR1, a dump that is due, the last dump. */
void flight_tick(struct rec *r, __u64 now)
{
	struct flight *f = r->fl;

	if (flight_usr1) {
		flight_usr1 = 0;
		fire(r, "SIGUSR1", now);
	}
	if (!f->pending || now < f->due_ns)
		return;
	dump(r, now, 0);
	if (f->dumps >= r->env.max_dumps) {
		if (!r->env.quiet)
			fprintf(stderr, "iowhy-record: flight: %d dumps written (--max-dumps): "
					"stopping\n", f->dumps);
		r->stop_reason = "max-dumps";
		exiting = 1;
	}
}

/*
 * At stop (a signal, --duration, the target's exit; not --max-dumps): a dump a trigger
 * made pending is written now, its --after cut short, and with --dump-on-exit the window
 * up to the stop is written when none is pending, its trigger "stop (SIGINT)" (or
 * SIGTERM, or the stop reason). The probes' last records are drained first, and what is
 * still in flight written, as at the end of a trace.
 */
void flight_stop(struct rec *r)
{
	struct flight *f = r->fl;

	if (!f || !strcmp(r->stop_reason, "max-dumps") || (!f->pending && !r->env.dump_on_exit))
		return;
	/* Pending before the last records are drained: the chunks they make then age by
	 * the window's start (horizon), not by the clock, which has moved past the stop. */
	if (f->pending) {
		if (!r->env.quiet)
			fprintf(stderr, "iowhy-record: flight: stopped %.1f s before the dump of %s "
					"was due: writing it now\n",
				f->due_ns > r->end_ns ? (f->due_ns - r->end_ns) / 1e9 : 0.0, f->trig);
	} else {
		f->pending = 1;
		f->trig_ns = f->due_ns = r->end_ns;
		snprintf(f->trig, sizeof(f->trig), "stop (%s)",
			 stop_signal == SIGINT ? "SIGINT" : stop_signal == SIGTERM ? "SIGTERM" :
			 r->stop_reason);
	}
	drain_at_stop(r);
	if (dump(r, r->end_ns, 1))
		f->stop_failed = 1;
}

/* At stop: what was written; the memory goes. */
void flight_finish(struct rec *r)
{
	struct flight *f = r->fl;

	if (!f)
		return;
	if (!r->env.quiet)
		fprintf(stderr, "iowhy-record: flight: %d dump(s) written, %llu trigger(s) fired; "
				"stopped (%s)%s\n", f->dumps, (unsigned long long)f->fired,
			stop_signal ? "signal" : r->stop_reason,
			f->dumps || r->env.dump_on_exit ? "" :
			" (--dump-on-exit writes the window at stop)");
	r->ret = f->stop_failed ? 1 : stop_signal ? 128 + stop_signal : 0;
	while (f->head)
		drop_head(f);
	free(f->meta);
	free(f);
	r->fl = NULL;
}
