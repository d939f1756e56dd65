// SPDX-License-Identifier: GPL-2.0
/* iowhy-record, draining: ring buffer, staging buffers, the poll loop, what is in
 * flight at stop. */
#include "recorder.h"

/* ---------------------------------------------------------------- events --- */

/*
 * Stop-time records (requests in flight, calls still running, sleeps not ended) are held
 * back until the ring has been drained once more after the tables were read: a request
 * that completes, a call that returns or a thread that comes back on a CPU while the
 * recorder reads them is in the table as it was and, moments later, in the ring as it
 * ended. The ring's record wins; a held one is written only if the late drain brought
 * none with the same identity (request: seq; call: tid and entry time; sleep: tid and
 * switch-out time).
 */

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 64;

	while (c < need)
		c *= 2;
	if (c == *cap)
		return p;
	p = realloc(p, c * elem);
	if (p)
		*cap = c;
	return p;
}

/*
 * Request, call and sleep identities share one list: a request's is its seq (below
 * 2^62); a call's (tid, entry time) and a sleep's (tid, switch-out time) are tagged in
 * the top two bits.
 */
#define ID_TAG_MASK (3ULL << 62)
static __u64 tagged_identity(__u64 tag, __u32 tid, __u64 ns)
{
	return tag | ((((__u64)tid << 32) ^ ns) & ~ID_TAG_MASK);
}

static __u64 call_identity(const struct iowhy_fsync *e)
{
	return tagged_identity(2ULL << 62, e->tid, e->enter_ns);
}

static __u64 sleep_identity(const struct iowhy_offcpu *e)
{
	return tagged_identity(3ULL << 62, e->tid, e->start_ns);
}

static __u64 held_identity(const struct held *h)
{
	return h->type == IOWHY_REC_REQUEST ? h->u.rq.seq
	       : h->type == IOWHY_REC_FSYNC ? call_identity(&h->u.fs)
					    : sleep_identity(&h->u.off);
}

static void note_late(struct rec *r, const struct iowhy_rec_hdr *h)
{
	__u64 id;
	__u64 *v;

	if (h->type == IOWHY_REC_REQUEST)
		id = ((const struct iowhy_request *)h)->seq;
	else if (h->type == IOWHY_REC_FSYNC)
		id = call_identity((const struct iowhy_fsync *)h);
	else if (h->type == IOWHY_REC_OFFCPU)
		id = sleep_identity((const struct iowhy_offcpu *)h);
	else
		return;
	v = grow(r->stop_q.seen, &r->stop_q.capseen, r->stop_q.nseen + 1, sizeof(*v));
	if (!v)
		return; /* no memory: the held record is written too, a duplicate at worst */
	r->stop_q.seen = v;
	r->stop_q.seen[r->stop_q.nseen++] = id;
}

static void hold_record(struct rec *r, int type, const void *rec)
{
	struct held *v = grow(r->stop_q.v, &r->stop_q.cap, r->stop_q.n + 1, sizeof(*v));

	if (!v) {
		add_record(r, type, rec); /* no memory: write it now rather than lose it */
		return;
	}
	r->stop_q.v = v;
	v[r->stop_q.n].type = type;
	memcpy(&v[r->stop_q.n].u, rec, rec_sizes[type]);
	r->stop_q.n++;
}

static int cmp_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/* The held records and the late drain's identities, dropped (written, or a dump not
 * written). */
void discard_open_state(struct rec *r)
{
	free(r->stop_q.v);
	free(r->stop_q.seen);
	memset(&r->stop_q, 0, sizeof(r->stop_q));
}

/* Whether a held record is of something still open at its end (flagged so). */
static int held_open(const struct held *h)
{
	return h->type == IOWHY_REC_REQUEST ? !!(h->u.rq.flags_u16 & IOWHY_RQ_INCOMPLETE)
	       : h->type == IOWHY_REC_FSYNC ? !!(h->u.fs.flags_u16 & IOWHY_FS_F_INCOMPLETE)
					    : !!(h->u.off.flags_u16 & IOWHY_OFF_OPEN_END);
}

/*
 * Write the held records the late drain did not supersede (one from the ring itself is
 * never superseded); `open`: the requests, calls and sleeps written still open.
 */
static void release_held(struct rec *r, __u64 open[3])
{
	qsort(r->stop_q.seen, r->stop_q.nseen, sizeof(__u64), cmp_u64);
	for (size_t i = 0; i < r->stop_q.n; i++) {
		struct held *h = &r->stop_q.v[i];
		__u64 id = held_identity(h);

		if (!h->from_ring && r->stop_q.nseen &&
		    bsearch(&id, r->stop_q.seen, r->stop_q.nseen, sizeof(id), cmp_u64))
			continue;
		add_record(r, h->type, &h->u);
		if (held_open(h))
			open[h->type == IOWHY_REC_REQUEST ? 0 : h->type == IOWHY_REC_FSYNC ? 1 : 2]++;
	}
	discard_open_state(r);
}

/* When a request was first seen: its first bio's, else its insertion, else its issue. */
static __u64 request_first_ns(const struct iowhy_request *rq)
{
	return rq->submit_ns ? rq->submit_ns : rq->insert_ns ? rq->insert_ns : rq->issue_ns;
}

/*
 * Request `rq` as it was at `at`, still in flight: the stages reached since not reached
 * yet (a flight dump's tables are read, and its ring taken again, while the probes run,
 * moments after its end), flagged INCOMPLETE.
 */
static void request_open_at(struct iowhy_request *rq, __u64 at)
{
	if (rq->insert_ns > at)
		rq->insert_ns = 0;
	if (rq->issue_ns > at)
		rq->issue_ns = 0;
	if (rq->data_done_ns > at)
		rq->data_done_ns = 0;
	rq->hdr.ts_ns = at;
	rq->flags_u16 |= IOWHY_RQ_INCOMPLETE;
}

/* Call `e` as it was at `at`, still running (exit unknown): flagged INCOMPLETE. */
static void call_open_at(struct iowhy_fsync *e, __u64 at)
{
	e->exit_ns = e->hdr.ts_ns = at;
	e->ret = 0;
	e->flags_u16 |= IOWHY_FS_F_INCOMPLETE;
}

/*
 * Off-CPU interval `e` as it was at `at`, not ended: flagged OPEN_END, and not yet woken
 * if its waking came after `at` (a waking read after the end is not this interval's).
 */
static void sleep_open_at(struct iowhy_offcpu *e, __u64 at)
{
	e->end_ns = e->hdr.ts_ns = at;
	e->flags_u16 |= IOWHY_OFF_OPEN_END;
	if (e->waking_ns > at) {
		e->waking_ns = 0;
		e->waker_tgid = e->waker_tid = 0;
		memset(e->waker_comm, 0, sizeof(e->waker_comm));
		e->waker_ctx_u16 = 0;
		e->waker_preempt_count = 0;
		e->flags_u16 &= ~IOWHY_OFF_WAKER_RQ;
		e->waker_rq_seq = 0;
		e->waker_rq_depth = 0;
		e->waker_rq_class = 0;
	}
}

/*
 * While a flight dump ending at stop_q.dump_at takes what is open at its end: a request,
 * call or sleep the ring brings that began by then belongs to the dump (it ended after
 * the drain that took the dump's records, maybe before its end, maybe while the probes'
 * state was read and so missing from it). Kept for the dump, as the probes wrote it when
 * it ended by then, else as what was open at the end (as put_open_* make it from the
 * probes' state); it goes on into the recording as it is.
 */
static void collect_for_dump(struct rec *r, const struct iowhy_rec_hdr *rh)
{
	__u64 at = r->stop_q.dump_at;
	struct held c = { .type = rh->type, .from_ring = 1 };
	struct held *v;

	if (rh->type == IOWHY_REC_OFFCPU) {
		struct iowhy_offcpu *e = &c.u.off;

		memcpy(e, rh, sizeof(*e));
		if (e->start_ns > at || (e->flags_u16 & IOWHY_OFF_HELPER))
			return;
		if (e->end_ns > at)
			sleep_open_at(e, at);
	} else if (rh->type == IOWHY_REC_FSYNC) {
		struct iowhy_fsync *e = &c.u.fs;

		memcpy(e, rh, sizeof(*e));
		if (e->enter_ns > at)
			return;
		if (e->exit_ns > at)
			call_open_at(e, at);
	} else if (rh->type == IOWHY_REC_REQUEST) {
		struct iowhy_request *e = &c.u.rq;
		__u64 first;

		memcpy(e, rh, sizeof(*e));
		first = request_first_ns(e);
		if (!first || first > at)
			return;
		if (e->done_ns > at) { /* in flight at the end, as add_inflight writes it */
			e->done_ns = 0;
			e->error = 0;
			if (e->data_done_ns > at || !e->data_done_ns)
				e->done_bytes = 0; /* no completion by then */
			request_open_at(e, at);
		}
	} else {
		return;
	}
	v = grow(r->stop_q.v, &r->stop_q.cap, r->stop_q.n + 1, sizeof(*v));
	if (!v) { /* no memory: the dump lacks it, counted as an unknown record */
		r->w.unknown_records++;
		return;
	}
	r->stop_q.v = v;
	v[r->stop_q.n++] = c;
}

/*
 * One ring-buffer sample: a single record, or a stage's worth of records back to back
 * (struct iowhy_stage), each sized by its header.
 */
static int handle_event(void *ctx, void *data, size_t size)
{
	struct rec *r = ctx;
	const __u8 *p = data;

	while (size) {
		const struct iowhy_rec_hdr *h = (const void *)p;

		if (size < sizeof(*h) || h->size_bytes < sizeof(*h) || h->size_bytes > size) {
			r->w.unknown_records++; /* the rest of the sample cannot be split */
			break;
		}
		if (h->type < 1 || h->type > IOWHY_REC_MAX || h->size_bytes != rec_sizes[h->type]) {
			r->w.unknown_records++;
		} else if (r->top) {
			top_event(r, h); /* --top: folded into the interval, nothing kept */
		} else {
			if (r->stop_q.late)
				note_late(r, h);
			if (r->stop_q.dump_at)
				collect_for_dump(r, h);
			add_record(r, h->type, h);
			if (h->type == IOWHY_REC_TASK) {
				cgroup_seen(r, ((const struct iowhy_task *)h)->cgroup_id);
				if (r->env.cgroup)
					cgroup_task_seen(r, (const struct iowhy_task *)h);
			}
			if (r->env.ntriggers)
				flight_event(r, h);
		}
		p += h->size_bytes;
		size -= h->size_bytes;
	}
	return 0;
}

/* The probes' per-CPU stages (struct iowhy_stage), mapped from the `stage` map. */

/* The probes build records in place in buf: a misaligned buf makes every 8-byte store
 * of every staged record a misaligned one. */
_Static_assert(offsetof(struct iowhy_stage, buf) % 8 == 0, "iowhy_stage.buf must be 8-byte aligned");

int map_stages(struct rec *r, struct bpf_map *map)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	r->stages.ncpu = bpf_map__max_entries(map);
	r->stages.elem = (sizeof(struct iowhy_stage) + 7) & ~(size_t)7; /* the kernel's stride */
	r->stages.len = (r->stages.elem * r->stages.ncpu + page - 1) / page * page;
	p = mmap(NULL, r->stages.len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
	if (p == MAP_FAILED)
		return -errno;
	r->stages.base = p;
	return 0;
}

/*
 * Empty every CPU's stage into the trace: take its lock, copy the records out, reset
 * it, give it back, then write the copy. A program never waits for the lock (it writes
 * to the ring buffer while the recorder holds it), and the recorder holds it only for a
 * copy. `wait` (at stop): retry a stage a program holds, for the few hundred ns it
 * takes; otherwise leave it for the next round.
 */
static void drain_stages(struct rec *r, int wait)
{
	static __u8 copy[IOWHY_STAGE_BYTES];

	for (__u32 c = 0; r->stages.base && c < r->stages.ncpu; c++) {
		struct iowhy_stage *s = (struct iowhy_stage *)(r->stages.base + c * r->stages.elem);
		int got = 0;
		__u32 used;

		for (long tries = 0;; tries++) {
			if (!__atomic_exchange_n(&s->busy_u32, 1, __ATOMIC_ACQUIRE)) {
				got = 1;
				break;
			}
			if (!wait || tries >= 1000000)
				break;
			sched_yield();
		}
		if (!got) {
			if (wait) { /* cannot happen: a program holds it for one record */
				__u64 n = 0;

				for (int t = 0; t <= IOWHY_REC_MAX; t++)
					n += s->nrec_u32[t];
				fprintf(stderr, "iowhy-record: the staging buffer of CPU %u stayed "
						"locked: %llu records lost, counted as unknown\n",
					c, (unsigned long long)n);
				r->w.unknown_records += n;
			}
			continue;
		}
		used = s->used_bytes;
		if (used > IOWHY_STAGE_BYTES) {
			r->w.unknown_records++;
			used = 0;
		}
		memcpy(copy, s->buf, used);
		memset(s->nrec_u32, 0, sizeof(s->nrec_u32));
		s->used_bytes = 0;
		__atomic_store_n(&s->busy_u32, 0, __ATOMIC_RELEASE);
		handle_event(r, copy, used);
	}
}

static void add_inflight(struct rec *r, struct iowhy_request *rq, __u64 stop)
{
	if (request_first_ns(rq) > stop) /* begun after a flight dump's end: not in it */
		return;
	request_open_at(rq, stop);
	rq->hdr.type = IOWHY_REC_REQUEST;
	rq->hdr.size_bytes = sizeof(*rq);
	rq->pad0 = 0;
	hold_record(r, IOWHY_REC_REQUEST, rq);
}

/* Requests still in flight at stop (in the table or its overflow hash) become records
 * marked incomplete. */
static void dump_inflight(struct rec *r, struct iowhy_bpf *skel, __u64 stop)
{
	int fd = bpf_map__fd(skel->maps.rqs), tfd = bpf_map__fd(skel->maps.rq_tab);
	__u32 n = bpf_map__max_entries(skel->maps.rq_tab);
	__u64 key, next, *prev = NULL;
	struct rq_slot s;

	for (__u32 i = 0; i < n; i++)
		if (bpf_map_lookup_elem(tfd, &i, &s) == 0 && s.tag)
			add_inflight(r, &s.r, stop);
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &s) == 0)
			add_inflight(r, &s.r, stop);
	}
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* pidfd of a thread, not only of a leader (Linux 6.9) */
#endif

/* The fsync-family call open in `st`, as the probes decide it at exit (iowhy.h). */
static __u16 open_call(const struct iowhy_bpf *skel, const struct task_state *st)
{
#define SKEL_NR(name) (skel->rodata->nr_##name)
	if (st->sys_nr < 0)
		return 0;
	return IOWHY_CALL_OF(st->sys_nr, st->fs_flags, SKEL_NR);
#undef SKEL_NR
}

/* Thread `tid`'s probe state: task-local storage is looked up through a pidfd. */
static int read_task_state(const struct iowhy_bpf *skel, int fd, pid_t tgid, pid_t tid,
			   struct task_state *st)
{
	int pfd, err;

	if (!skel->rodata->use_task_storage)
		return bpf_map_lookup_elem(fd, &(__u32){ (__u32)tid }, st);
	pfd = syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (pfd < 0 && tid == tgid)
		pfd = syscall(SYS_pidfd_open, tid, 0);
	if (pfd < 0)
		return -1;
	err = bpf_map_lookup_elem(fd, &pfd, st);
	close(pfd);
	return err;
}

/*
 * The fsync-family call still running in `st` at stop, as a record flagged INCOMPLETE:
 * a thread blocked in fsync when the user presses Ctrl-C is often the very thing the
 * recording is about. The fd comes from /proc/TID/syscall, which shows the arguments of
 * a thread blocked in a syscall.
 */
static void put_open_call(struct rec *r, const struct iowhy_bpf *skel, const struct task_state *st,
			  pid_t tgid, pid_t tid, __u64 stop)
{
	struct iowhy_fsync e = {};
	long long nr = -1, a0 = -1;
	char path[96];
	FILE *f;

	if (!st->sys_enter_ns || st->sys_enter_ns > stop || !(e.call_u16 = open_call(skel, st)))
		return;
	e.hdr.type = IOWHY_REC_FSYNC;
	e.hdr.size_bytes = sizeof(e);
	e.enter_ns = st->sys_enter_ns;
	e.ino = st->fs_ino;
	e.commit_seq = st->fs_seq;
	e.tgid = (__u32)tgid;
	e.tid = (__u32)tid;
	e.dev_major = iowhy_dev_major(st->fs_dev);
	e.dev_minor = iowhy_dev_minor(st->fs_dev);
	e.syscall_nr = (__u32)st->sys_nr;
	e.fs_u16 = st->fs_kind;
	e.flags_u16 = st->fs_flags;
	e.seq_span_u16 = (st->fs_flags & IOWHY_FS_F_SEQ_SPAN) ? st->fs_seq_span : 0;
	call_open_at(&e, stop);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", tgid, tid);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%lld %llx", &nr, (unsigned long long *)&a0) != 2)
			nr = -1;
		fclose(f);
	}
	e.fd = e.call_u16 == IOWHY_CALL_SYNC ? -1
	       : nr == st->sys_nr	    ? (__s32)a0
	       : (st->fs_flags & IOWHY_FS_F_LATE_ENTER) ? (__s32)st->arg0 : -1;
	read_comm(tgid, tid, e.comm);
	hold_record(r, IOWHY_REC_FSYNC, &e);
}

/*
 * The off-CPU interval still open in `st` at stop (the thread asleep, or woken and not
 * yet back on a CPU), as the probes would have written it at the switch-in, ending at
 * the stop and flagged OPEN_END: without it the thread's last sleep would read as time
 * on CPU (a thread's time between its intervals is). Mirrors emit_offcpu (iowhy.bpf.c).
 */
static void put_open_sleep(struct rec *r, const struct task_state *st, pid_t tgid, pid_t tid,
			   __u64 stop)
{
	struct iowhy_offcpu e = {};

	if (!st->off_ns || st->off_ns > stop || (st->off_flags & IOWHY_OFF_HELPER))
		return;
	e.hdr.type = IOWHY_REC_OFFCPU;
	e.hdr.size_bytes = sizeof(e);
	e.start_ns = st->off_ns;
	e.waking_ns = (st->off_flags & IOWHY_OFF_PREEMPT) ? 0 : st->waking_ns;
	e.tgid = (__u32)tgid;
	e.tid = (__u32)tid;
	e.state = st->off_state;
	e.syscall_nr = st->off_sys_nr;
	e.flags_u16 = st->off_flags;
	e.run_total_ns = (st->off_flags & IOWHY_OFF_FROM_START) ? 0 : st->run_ns;
	if (e.waking_ns) {
		e.waker_tgid = st->waker_tgid;
		e.waker_tid = st->waker_tid;
		memcpy(e.waker_comm, st->waker_comm, sizeof(e.waker_comm));
		e.waker_ctx_u16 = st->waker_ctx;
		e.waker_preempt_count = st->waker_preempt_count;
		if (st->waker_rq_depth) {
			e.flags_u16 |= IOWHY_OFF_WAKER_RQ;
			e.waker_rq_seq = st->waker_rq_seq;
			e.waker_rq_depth = st->waker_rq_depth;
		}
	}
	sleep_open_at(&e, stop);
	hold_record(r, IOWHY_REC_OFFCPU, &e);
}

/*
 * What each tracked thread was still doing at stop, from its probe state (the tracked
 * bitmap names the processes, /proc their threads): the fsync-family call it was in and
 * the off-CPU interval it was in, as records.
 */
static void dump_open_tasks(struct rec *r, struct iowhy_bpf *skel, __u64 stop)
{
	int bfd = bpf_map__fd(skel->maps.tracked);
	int sfd = bpf_map__fd(skel->rodata->use_task_storage ? skel->maps.task_store
							      : skel->maps.tasks);
	DIR *proc = opendir("/proc"), *tasks;
	struct dirent *pe, *te;
	char path[96];

	if (!proc)
		return;
	while ((pe = readdir(proc))) {
		pid_t tgid = (pid_t)strtol(pe->d_name, NULL, 10);
		__u32 word = (__u32)tgid >> 6;
		__u64 bits;

		if (tgid <= 0 || bpf_map_lookup_elem(bfd, &word, &bits) ||
		    !((bits >> (tgid & 63)) & 1))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task", tgid);
		tasks = opendir(path);
		while (tasks && (te = readdir(tasks))) {
			pid_t tid = (pid_t)strtol(te->d_name, NULL, 10);
			struct task_state st;

			if (tid <= 0 || read_task_state(skel, sfd, tgid, tid, &st))
				continue;
			put_open_call(r, skel, &st, tgid, tid, stop);
			put_open_sleep(r, &st, tgid, tid, stop);
		}
		if (tasks)
			closedir(tasks);
	}
	closedir(proc);
}

/* What is in flight, running or asleep at `at`, read from the probes' tables and the
 * tracked threads' state, held for the late drain. */
static void hold_open_state(struct rec *r, __u64 at)
{
	dump_inflight(r, r->skel, at);
	dump_open_tasks(r, r->skel, at);
}

static void dump_syscalls(struct rec *r, struct iowhy_bpf *skel, __u64 stop)
{
	int fd = bpf_map__fd(skel->maps.sysstats), ncpu = libbpf_num_possible_cpus();
	struct { __u64 count, total_ns; } *vals = calloc(ncpu, 16);

	if (!vals)
		return;
	for (__u32 nr = 0; nr < 1024; nr++) {
		struct iowhy_syscall s = {};

		if (bpf_map_lookup_elem(fd, &nr, vals))
			continue;
		for (int c = 0; c < ncpu; c++) {
			s.count += vals[c].count;
			s.total_ns += vals[c].total_ns;
		}
		if (!s.count)
			continue;
		s.hdr.type = IOWHY_REC_SYSCALL;
		s.hdr.size_bytes = sizeof(s);
		s.hdr.ts_ns = stop;
		s.syscall_nr = nr;
		add_record(r, IOWHY_REC_SYSCALL, &s);
	}
	free(vals);
}

int open_ring(struct rec *r)
{
	int err;

	r->rb = ring_buffer__new(bpf_map__fd(r->skel->maps.rb), handle_event, r, NULL);
	if (!r->rb) {
		err = -errno;
		fprintf(stderr, "failed to create ring buffer: %s\n", strerror(-err));
		return -1;
	}
	r->counters_fd = bpf_map__fd(r->skel->maps.counters);

	if (stopped_before_start(r)) /* nothing recorded, nothing left */
		return -1;
	{
		struct sigaction sa = { .sa_handler = sigchld_handler }; /* no SA_RESTART */

		sigemptyset(&sa.sa_mask);
		sigaction(SIGCHLD, &sa, NULL);
	}
	return 0;
}

/*
 * Wait up to timeout_ms for ring buffer data or, in attach mode, for the target to exit
 * (its pidfd turns readable), then consume what the ring holds. Waiting on the pidfd too
 * ends the window when the target exits, not up to a poll timeout later: that time, with
 * no workload thread alive, would be unexplained. Returns what ring_buffer__consume does,
 * or -errno of poll(2) (-EINTR on a signal).
 */
static int wait_ring(struct rec *r, int timeout_ms)
{
	struct pollfd p[2] = { { .fd = ring_buffer__epoll_fd(r->rb), .events = POLLIN },
			       { .fd = r->target_pidfd, .events = POLLIN } };
	int n = r->target_pidfd >= 0 && !r->child ? 2 : 1;

	if (poll(p, n, timeout_ms) < 0)
		return -errno;
	return ring_buffer__consume(r->rb);
}

/* Record until the workload or the target exits, a signal, --duration or a full disk. */
void poll_until_stop(struct rec *r)
{
	__u64 last_flush, kill_at = 0;
	int err, stop_sent = 0, killed = 0;

	last_flush = now_ns(CLOCK_MONOTONIC);
	for (;;) {
		__u64 now;

		if (exiting && !stop_sent) {
			/* a full disk or a failed exec: the workload is not stopped */
			if (!r->child || r->child_done || !stop_signal)
				break;
			/*
			 * Stopped by SIGINT/SIGTERM in run mode: stop the workload as perf does,
			 * passing the signal on, and keep recording until it has exited (its
			 * last I/O is in the trace, and its exit status); SIGKILL after the grace
			 * time. Attach mode never signals its target.
			 */
			kill(r->child, stop_signal);
			stop_sent = 1;
			kill_at = now_ns(CLOCK_MONOTONIC) + STOP_GRACE_NS;
		}
		/* --top sleeps until its interval ends (or the ring fills, or the target exits) */
		err = wait_ring(r, r->top ? top_wait_ms(r, now_ns(CLOCK_MONOTONIC)) : 100);
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "failed to poll ring buffer: %s\n", strerror(-err));
			r->stop_reason = "error";
			break;
		}
		if (r->lazy_writes && !r->write_probes_ns && r->skel->bss->write_probes_wanted)
			attach_write_family(r, r->skel);
		now = now_ns(CLOCK_MONOTONIC);
		if (r->child && !r->child_done && waitpid(r->child, &r->child_status, WNOHANG) == r->child) {
			r->child_done = 1;
			r->stop_reason = "workload-exit";
			break;
		}
		if (stop_sent) {
			if (!killed && now >= kill_at) {
				kill(r->child, SIGKILL);
				killed = 1;
			}
		} else if (!r->child && target_exited(r->target_pidfd, r->env.pid)) {
			r->stop_reason = "target-exit";
			break;
		} else if (r->env.duration > 0 && now - r->start_ns >= (__u64)(r->env.duration * 1e9)) {
			r->stop_reason = "duration";
			break;
		}
		if (r->top) {
			/* the stages and the ring once per interval, right before its line */
			if (!top_wait_ms(r, now)) {
				drain_stages(r, 0);
				ring_buffer__consume(r->rb);
				top_tick(r, now_ns(CLOCK_MONOTONIC));
			}
		} else if (now - r->stages.last_ns >= IOWHY_STAGE_DRAIN_NS) {
			drain_stages(r, 0);
			r->stages.last_ns = now;
		}
		if (r->fl)
			flight_tick(r, now);
		if (now - last_flush >= FLUSH_INTERVAL_NS && !r->top) {
			flush_all(r);
			write_progress(r, r->counters_fd);
			last_flush = now;
		}
		live_progress(r, now);
	}
	live_clear();
	if (stop_signal)
		r->stop_reason = "signal";
	if (r->w.failed)
		r->stop_reason = "disk-full";
	r->end_ns = now_ns(CLOCK_MONOTONIC);
	cpu_ns(&r->cpu1_user, &r->cpu1_sys);
}

/* Take what the probes' stages and the ring hold now (a flight dump's end). */
void drain_now(struct rec *r)
{
	drain_stages(r, 0);
	ring_buffer__consume(r->rb);
}

void drain_at_stop(struct rec *r)
{
	/*
	 * Drain what the kernel still holds, then read what is still in flight, then drain
	 * again: what ended while the tables were read is in the ring by then (the probes
	 * write a request's record before they free its entry), and supersedes what was read.
	 * From `stopping` on, no request gets an entry, so none can be missed in between.
	 */
	r->skel->bss->stopping = 1;
	__sync_synchronize();
	drain_stages(r, 1); /* each stage taken once after `stopping`: none is written again */
	ring_buffer__consume(r->rb);
	hold_open_state(r, r->end_ns);
	r->stop_q.late = 1;
	ring_buffer__consume(r->rb);
	r->stop_q.late = 0;
	{
		__u64 open[3] = {};

		release_held(r, open);
		r->w.incomplete_requests += open[0];
		r->w.open_calls += open[1];
		r->w.open_sleeps += open[2];
	}
	dump_syscalls(r, r->skel, r->end_ns);
	flush_all(r);
	/* after the last read of the ring: the counts cover every record of the trace */
	stats_end(r);
}

/*
 * The end of a flight dump written while recording goes on (rec_flight.c), `at`: the
 * probes' records up to then are in the kept chunks. What is still in flight, running or
 * asleep is read from the probes' tables and state, then the ring is taken again: what
 * ended while they were read (missing from them), or between the drain and `at`, comes
 * from it, and supersedes what was read (collect_for_dump), as at a stop. Held for the
 * dump (write_open_state); the ring's records go on into the recording as they are.
 * IOWHY_FLIGHT_STATE_DELAY_MS (tests): wait that long before reading the tables, so that
 * something ends in between.
 */
void take_open_state(struct rec *r, __u64 at)
{
	const char *delay = getenv("IOWHY_FLIGHT_STATE_DELAY_MS");

	if (delay && atol(delay) > 0 && atol(delay) <= 10000)
		usleep((useconds_t)atol(delay) * 1000);
	hold_open_state(r, at);
	r->stop_q.late = 1;
	r->stop_q.dump_at = at;
	drain_stages(r, 1);
	ring_buffer__consume(r->rb);
	r->stop_q.late = 0;
	r->stop_q.dump_at = 0;
}

/*
 * Add what take_open_state held to the dump being written, through the writer's buffers
 * (empty then: the recording's records are in kept chunks), leaving the recording's
 * totals as they were. `nrec`: the dump's records, by type; `open`: the requests, calls
 * and sleeps added still open.
 */
void write_open_state(struct rec *r, __u64 nrec[IOWHY_REC_MAX + 1], __u64 open[3])
{
	__u64 before[IOWHY_REC_MAX + 1];

	for (int t = 1; t <= IOWHY_REC_MAX; t++)
		before[t] = r->w.bufs[t].total;
	release_held(r, open);
	flush_all(r);
	for (int t = 1; t <= IOWHY_REC_MAX; t++) {
		nrec[t] += r->w.bufs[t].total - before[t];
		r->w.bufs[t].total = before[t];
	}
}
