// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy-record: load the iowhy probes, run or attach to a workload, and stream the
 * records to a trace file (docs/trace-format.md).
 *
 * Shape of libbpf-bootstrap's bootstrap.c: open, configure, load, attach, poll. Every
 * failure prints "failed to <step>: <strerror>" and exits non-zero. Records are
 * buffered per type and written as CRC'd chunks at least once a second, so a kill -9
 * or a full disk keeps everything up to the last complete chunk readable.
 *
 * Usage: iowhy-record -o OUT [-m META.json | --meta-fd FD] [-r MiB] [-d SEC] [-D MAJ:MIN]...
 *                     [-q] [-v] (-p PID [--force] | -- CMD [ARGS...])
 *        iowhy-record -n [-- CMD]      load and attach every probe, then detach and exit
 * Exit: the workload's exit status (run mode; on SIGINT/SIGTERM the workload gets the
 *       signal and is waited for), 0 (attach, or --duration ended first), 128+signal
 *       (attach stopped by a signal), 1 (failure), 2 (usage), 126 (command not
 *       executable), 127 (command not found).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <zlib.h>
#include "iowhy.h"
#include "iowhy.skel.h"

#ifndef IOWHY_VERSION
#define IOWHY_VERSION "unknown"
#endif

#define CHUNK_BYTES (256 * 1024)
#define MAX_DURATION_S 2592000.0 /* 30 days */
#define MAX_RINGBUF_MIB 2048     /* the largest power of two a map's u32 max_entries holds */
#define STOP_GRACE_NS 5000000000ULL /* the workload's time to exit after a stop signal */
#define FLUSH_INTERVAL_NS 1000000000ULL

static volatile sig_atomic_t exiting;
static volatile sig_atomic_t stop_signal;

static const char *counter_names[IOWHY_C_MAX] = {
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
};

static const char *rec_names[IOWHY_REC_MAX + 1] = {
	[IOWHY_REC_REQUEST] = "request", [IOWHY_REC_FSYNC] = "fsync",
	[IOWHY_REC_JOURNAL] = "journal", [IOWHY_REC_OFFCPU] = "offcpu",
	[IOWHY_REC_TASK] = "task",       [IOWHY_REC_SYSCALL] = "syscall",
};

static const size_t rec_sizes[IOWHY_REC_MAX + 1] = {
	[IOWHY_REC_REQUEST] = sizeof(struct iowhy_request),
	[IOWHY_REC_FSYNC] = sizeof(struct iowhy_fsync),
	[IOWHY_REC_JOURNAL] = sizeof(struct iowhy_journal),
	[IOWHY_REC_OFFCPU] = sizeof(struct iowhy_offcpu),
	[IOWHY_REC_TASK] = sizeof(struct iowhy_task),
	[IOWHY_REC_SYSCALL] = sizeof(struct iowhy_syscall),
};

struct recbuf {
	char *data;
	size_t len;
	__u32 count;
	__u64 total;
};



struct held {
	int type;
	union {
		struct iowhy_request rq;
		struct iowhy_fsync fs;
	} u;
};

struct probe_state {
	char tp[64];
	const char *how; /* "tp_btf", "raw_tp", or a reason it was skipped */
};

#define MAX_PROGS 128

/*
 * Everything the recorder knows, passed to every step: the options, the trace file
 * writer, the records held at stop, the probes' staging buffers, the probes and their
 * links, the BPF statistics. The only globals left are the flags the signal handler
 * sets and libbpf's verbosity (its print callback takes no context).
 */
struct rec {
	struct env {
		const char *output;
		const char *meta;
		int meta_fd; /* --meta-fd: the metadata handed over by `iowhy record` (0: none) */
		long ringbuf_mib;
		double duration;
		int dry_run, quiet, verbose, raw_tp;
		int sync_syscalls; /* --syscalls sync: only the fsync and write families */
		int probe_stats;   /* --probe-stats: run count and time of every program */
		int eager_writes;  /* --eager-writes: the write family attached from the start */
		pid_t pid;
		int force; /* --force: attach to PID 1 or a kernel thread */
		char **cmd;
		__u32 devs[64];
		int ndevs;
	} env;
	struct writer {
		int fd;
		off_t good_off; /* end of the last chunk fully written */
		__u64 seq;
		int failed; /* a write failed: stop, keep what is readable */
		int err;
		struct recbuf bufs[IOWHY_REC_MAX + 1];
		__u64 unknown_records;
		__u64 incomplete_requests;
		__u64 open_calls; /* fsync-family calls still running at stop */
	} w;
	char partial_path[PATH_MAX]; /* where the trace is written until it is renamed */
	/* Stop-time records held until the late drain (see hold_record). */
	struct {
		struct held *v;
		size_t n, cap;
		__u64 *seen; /* identities of what the late drain brought */
		size_t nseen, capseen;
		int late; /* the late drain is running */
	} stop_q;
	/* The probes' per-CPU stages (struct iowhy_stage), mapped from the `stage` map. */
	struct {
		__u8 *base;
		size_t len, elem;
		__u32 ncpu;
		__u64 last_ns;
	} stages;
	struct bpf_object *obj;
	struct probe_state probes[64];
	int nprobes;
	struct bpf_link *links[128];
	int nlinks;
	int lazy_writes;       /* the write family waits for the probes' call */
	__u64 write_probes_ns; /* when the write family was attached (0: never) */
	/* --probe-stats: BPF_STATS_RUN_TIME on while fd is open; counts at start and end */
	struct {
		int fd, done;
		__u64 cnt0[MAX_PROGS], ns0[MAX_PROGS], cnt1[MAX_PROGS], ns1[MAX_PROGS];
	} stats;
	/* the run */
	struct iowhy_bpf *skel;
	struct btf *vmlinux;
	struct ring_buffer *rb;
	const char *attach_mode, *task_state, *stop_reason;
	__u64 t_main, start_ns, end_ns; /* main's start, recording's start and end */
	__u64 cpu0_user, cpu0_sys, cpu1_user, cpu1_sys;
	int counters_fd;
	int target_pidfd; /* attach: a pidfd of the target, to see it exit */
	pid_t child;      /* run: the workload */
	int child_status, child_done;
	int ret; /* the exit status */
};

static int libbpf_verbose;

static __u64 now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

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
static void sigchld_handler(int sig)
{
}

static void usage(FILE *f)
{
	fprintf(f, "usage: iowhy-record -o OUT [-m META.json | --meta-fd FD] [-r MiB] [-d SEC] "
		   "[-D MAJ:MIN]... [-q] [-v] (-p PID [--force] | -- CMD [ARGS...])\n"
		   "       iowhy-record -n            load and attach every probe, then exit\n"
		   "  -o OUT    written as OUT.partial-PID (O_EXCL, O_NOFOLLOW, mode 0600), renamed\n"
		   "            to OUT at stop; a previous OUT is kept as OUT.old; a symlink or\n"
		   "            non-regular file at OUT is refused; under sudo, owned by SUDO_UID\n"
		   "  -r MiB    ring buffer, a power of two, 1..%d (default 64)\n"
		   "  -d SEC    stop after SEC seconds, 0 < SEC <= %.0f; the workload goes on\n"
		   "  --force   attach to PID 1 or a kernel thread (follows the whole system)\n"
		   "  --raw-tp  use raw_tp programs even where tp_btf works (tests the fallback)\n"
		   "  --syscalls sync|all  time only the fsync and write families (default), or\n"
		   "            count and time every syscall of the workload (costlier per syscall)\n"
		   "  --eager-writes  with --syscalls sync, attach the write family at start\n"
		   "            (default: at the first O_SYNC/O_DSYNC write, where tp_btf can read\n"
		   "            a task's syscall number; that write is timed from its fs sync event)\n"
		   "  --probe-stats  measure each program's runs and run time while recording\n"
		   "            (kernel BPF statistics: adds about two clock reads to every run)\n",
		MAX_RINGBUF_MIB, MAX_DURATION_S);
}

/* ---------------------------------------------------------------- tracefs --- */

#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif
#define TRACEFS_PATH "/sys/kernel/tracing"

static int is_tracefs(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == TRACEFS_MAGIC;
}

/*
 * libbpf resolves classic tracepoints (syscalls:sys_enter_*) through tracefs, at
 * /sys/kernel/tracing or under debugfs at /sys/kernel/debug/tracing. A fresh machine
 * may have neither mounted: mount it, as perf does (libapi's tracefs_mount), before
 * anything is loaded, and say so once. Left mounted, as perf leaves it.
 */
static int ensure_tracefs(void)
{
	if (is_tracefs(TRACEFS_PATH) || is_tracefs("/sys/kernel/debug/tracing"))
		return 0;
	if (mount("nodev", TRACEFS_PATH, "tracefs", 0, NULL) == 0) {
		fprintf(stderr, "iowhy: mounted tracefs at " TRACEFS_PATH "\n");
		return 0;
	}
	{
		int e = errno;
		const char *why = e == EPERM || e == EACCES ? " (needs CAP_SYS_ADMIN)"
				  : e == ENODEV ? " (this kernel has no tracefs: CONFIG_TRACING)"
				  : "";

		fprintf(stderr, "iowhy: failed to mount tracefs at " TRACEFS_PATH ": %s%s; "
				"mount it as root and retry: mount -t tracefs nodev " TRACEFS_PATH "\n",
			strerror(e), why);
	}
	return -1;
}

/* ---------------------------------------------------------------- output file --- */

/*
 * The trace is written to PATH.partial-PID, created in PATH's directory with O_EXCL and
 * O_NOFOLLOW (mode 0600), and renamed to PATH when recording stops, on every stop path.
 * A symlink or a non-regular file at PATH is refused before recording; an existing
 * regular file is kept as PATH.old (as perf does). After a crash or kill -9 the partial
 * file stays, readable up to its last complete chunk.
 */

static const char *file_kind(mode_t m)
{
	return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO"
	       : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
	       : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

static int check_output(const char *path)
{
	struct stat st;

	if (lstat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "iowhy: refusing to write %s: it is %s (give a new name or the "
					"path of a regular file)\n", path, file_kind(st.st_mode));
			return -1;
		}
	} else if (errno != ENOENT) {
		fprintf(stderr, "iowhy: failed to check %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Run through sudo as root: the trace belongs to the user who asked (mode stays 0600). */
static void give_to_sudo_user(struct rec *r, int fd)
{
	const char *su = getenv("SUDO_UID"), *sg = getenv("SUDO_GID");
	unsigned long uid, gid;
	char *end;

	if (getuid() != 0 || !su || !sg || !*su || !*sg)
		return;
	errno = 0;
	uid = strtoul(su, &end, 10);
	if (errno || *end || uid >= (uid_t)-1)
		return;
	gid = strtoul(sg, &end, 10);
	if (errno || *end || gid >= (gid_t)-1)
		return;
	if (fchown(fd, (uid_t)uid, (gid_t)gid))
		fprintf(stderr, "iowhy-record: warning: cannot give %s to uid %lu: %s\n",
			r->partial_path, uid, strerror(errno));
}

static int open_output(struct rec *r, const char *path)
{
	int fd = -1;

	for (int i = 0; i < 100; i++) {
		int n = i ? snprintf(r->partial_path, sizeof(r->partial_path), "%s.partial-%d.%d", path,
				     getpid(), i)
			  : snprintf(r->partial_path, sizeof(r->partial_path), "%s.partial-%d", path,
				     getpid());

		if (n < 0 || (size_t)n >= sizeof(r->partial_path)) {
			fprintf(stderr, "failed to open %s: %s\n", path, strerror(ENAMETOOLONG));
			return -1;
		}
		fd = open(r->partial_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		fprintf(stderr, "failed to open %s: %s\n", r->partial_path, strerror(errno));
		r->partial_path[0] = 0;
		return -1;
	}
	give_to_sudo_user(r, fd);
	return fd;
}

/* Move the finished (or stopped) trace into place; the previous regular file -> PATH.old. */
static int commit_output(struct rec *r, const char *path)
{
	char old[PATH_MAX];
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		int n = snprintf(old, sizeof(old), "%s.old", path);

		if (n < 0 || (size_t)n >= sizeof(old) || rename(path, old))
			fprintf(stderr, "iowhy-record: warning: cannot keep the previous %s as %s.old: "
					"%s; replacing it\n", path, path,
				strerror(n < 0 || (size_t)n >= sizeof(old) ? ENAMETOOLONG : errno));
	}
	if (rename(r->partial_path, path)) {
		fprintf(stderr, "iowhy: failed to rename the trace to %s: %s; it is in %s\n", path,
			strerror(errno), r->partial_path);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- file writing --- */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

static void write_chunk(struct rec *r, __u16 type, __u16 rec_size, __u32 count, const void *data, size_t len)
{
	static const char zeros[8];
	struct iowhy_chunk_hdr h = {};
	size_t pad = (8 - len % 8) % 8;
	uLong crc;
	int err;

	if (r->w.failed)
		return;
	memcpy(h.magic, IOWHY_CHUNK_MAGIC, 4);
	h.type = type;
	h.rec_size_bytes = rec_size;
	h.count = count;
	h.payload_bytes = len + pad;
	h.data_bytes = len;
	crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, data, len);
	crc = crc32(crc, (const Bytef *)zeros, pad);
	h.crc32 = crc;
	h.seq = r->w.seq;
	err = write_all(r->w.fd, &h, sizeof(h));
	if (!err)
		err = write_all(r->w.fd, data, len);
	if (!err && pad)
		err = write_all(r->w.fd, zeros, pad);
	if (err) {
		/* Cut back to the last whole chunk so the file stays clean, and stop. */
		r->w.failed = 1;
		r->w.err = -err;
		if (ftruncate(r->w.fd, r->w.good_off))
			(void)0; /* the reader skips a torn tail anyway */
		lseek(r->w.fd, r->w.good_off, SEEK_SET);
		exiting = 1;
		return;
	}
	r->w.good_off += sizeof(h) + len + pad;
	r->w.seq++;
}

static void flush_type(struct rec *r, int t)
{
	struct recbuf *b = &r->w.bufs[t];

	if (!b->count)
		return;
	write_chunk(r, t, rec_sizes[t], b->count, b->data, b->len);
	b->len = 0;
	b->count = 0;
}

static void flush_all(struct rec *r)
{
	for (int t = 1; t <= IOWHY_REC_MAX; t++)
		flush_type(r, t);
}

static void add_record(struct rec *r, int t, const void *data)
{
	struct recbuf *b = &r->w.bufs[t];

	if (b->len + rec_sizes[t] > CHUNK_BYTES)
		flush_type(r, t);
	memcpy(b->data + b->len, data, rec_sizes[t]);
	b->len += rec_sizes[t];
	b->count++;
	b->total++;
}

/* A growable string for JSON chunks. */
struct sbuf {
	char *p;
	size_t len;
	FILE *f;
};

static void sb_open(struct sbuf *s)
{
	s->p = NULL;
	s->len = 0;
	s->f = open_memstream(&s->p, &s->len);
}

static void sb_close_write(struct rec *r, struct sbuf *s, __u16 type)
{
	fclose(s->f);
	write_chunk(r, type, 0, 1, s->p, s->len);
	free(s->p);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* ---------------------------------------------------------------- events --- */

/*
 * Stop-time records (requests in flight, calls still running) are held back until the
 * ring has been drained once more after the tables were read: a request that completes
 * or a call that returns while the recorder reads them is in the table as it was and,
 * moments later, in the ring as it ended. The ring's record wins; a held one is written
 * only if the late drain brought none with the same identity (request: seq; call: tid
 * and entry time).
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

/* Request and call identities share one list: a call's is tagged in the top bit. */
static __u64 call_identity(const struct iowhy_fsync *e)
{
	return (1ULL << 63) | ((((__u64)e->tid << 32) ^ e->enter_ns) & ~(1ULL << 63));
}

static void note_late(struct rec *r, const struct iowhy_rec_hdr *h)
{
	__u64 id;
	__u64 *v;

	if (h->type == IOWHY_REC_REQUEST)
		id = ((const struct iowhy_request *)h)->seq;
	else if (h->type == IOWHY_REC_FSYNC)
		id = call_identity((const struct iowhy_fsync *)h);
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

/* Write the held records the late drain did not supersede; count what is written. */
static void release_held(struct rec *r)
{
	qsort(r->stop_q.seen, r->stop_q.nseen, sizeof(__u64), cmp_u64);
	for (size_t i = 0; i < r->stop_q.n; i++) {
		struct held *h = &r->stop_q.v[i];
		__u64 id = h->type == IOWHY_REC_REQUEST ? h->u.rq.seq : call_identity(&h->u.fs);

		if (r->stop_q.nseen && bsearch(&id, r->stop_q.seen, r->stop_q.nseen, sizeof(id), cmp_u64))
			continue;
		add_record(r, h->type, &h->u);
		if (h->type == IOWHY_REC_REQUEST)
			r->w.incomplete_requests++;
		else
			r->w.open_calls++;
	}
	free(r->stop_q.v);
	free(r->stop_q.seen);
	memset(&r->stop_q, 0, sizeof(r->stop_q));
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
		} else {
			if (r->stop_q.late)
				note_late(r, h);
			add_record(r, h->type, h);
		}
		p += h->size_bytes;
		size -= h->size_bytes;
	}
	return 0;
}

/* The probes' per-CPU stages (struct iowhy_stage), mapped from the `stage` map. */

static int map_stages(struct rec *r, struct bpf_map *map)
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

				for (int t = 0; t < 8; t++)
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

static void emit_root_task(struct rec *r, pid_t tgid, pid_t tid)
{
	struct iowhy_task t = {};
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", tgid, tid);
	f = fopen(path, "r");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	t.hdr.type = IOWHY_REC_TASK;
	t.hdr.size_bytes = sizeof(t);
	t.hdr.ts_ns = now_ns(CLOCK_MONOTONIC);
	t.tgid = tgid;
	t.tid = tid;
	t.event_u16 = IOWHY_TASK_ROOT;
	memcpy(t.comm, comm, sizeof(t.comm) - 1);
	add_record(r, IOWHY_REC_TASK, &t);
}

static __u64 counters_sum(int fd, __u64 *out)
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

static __u64 recursion_misses(struct rec *r, FILE *detail)
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
 * Run count and run time of each program over the recording window: stats_take() at
 * the start, stats_write() at the end writes the differences.
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


static void stats_end(struct rec *r)
{
	if (r->stats.fd < 0)
		return;
	stats_take(r, r->stats.cnt1, r->stats.ns1);
	close(r->stats.fd);
	r->stats.fd = -1;
	r->stats.done = 1;
}

static void stats_write(struct rec *r, FILE *f)
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

static void write_counts_json(struct rec *r, FILE *f, int counters_fd)
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

static void stats_start(struct rec *r)
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
static void cpu_ns(__u64 *user, __u64 *sys)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru)) {
		*user = *sys = 0;
		return;
	}
	*user = ru.ru_utime.tv_sec * 1000000000ULL + ru.ru_utime.tv_usec * 1000ULL;
	*sys = ru.ru_stime.tv_sec * 1000000000ULL + ru.ru_stime.tv_usec * 1000ULL;
}

static void write_progress(struct rec *r, int counters_fd)
{
	struct sbuf s;

	sb_open(&s);
	fprintf(s.f, "{\"end_ns\": %llu, ", (unsigned long long)now_ns(CLOCK_MONOTONIC));
	write_counts_json(r, s.f, counters_fd);
	fprintf(s.f, "}");
	sb_close_write(r, &s, IOWHY_CHUNK_PROGRESS);
}

static void add_inflight(struct rec *r, struct iowhy_request *rq, __u64 stop)
{
	rq->hdr.type = IOWHY_REC_REQUEST;
	rq->hdr.size_bytes = sizeof(*rq);
	rq->hdr.ts_ns = stop;
	rq->flags_u16 |= IOWHY_RQ_INCOMPLETE;
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

/* The fsync-family call open in `st`, as the probes decide it at exit (fsync_call). */
static __u16 open_call(const struct iowhy_bpf *skel, const struct task_state *st)
{
	const __s32 nr = st->sys_nr;

	if (nr < 0)
		return 0;
	if (nr == skel->rodata->nr_fsync)
		return IOWHY_CALL_FSYNC;
	if (nr == skel->rodata->nr_fdatasync)
		return IOWHY_CALL_FDATASYNC;
	if (nr == skel->rodata->nr_sync)
		return IOWHY_CALL_SYNC;
	if (nr == skel->rodata->nr_syncfs)
		return IOWHY_CALL_SYNCFS;
	if (nr == skel->rodata->nr_sync_file_range)
		return IOWHY_CALL_SYNC_FILE_RANGE;
	if (nr == skel->rodata->nr_msync)
		return IOWHY_CALL_MSYNC;
	return (st->fs_flags & IOWHY_FS_F_FSEVENT) ? IOWHY_CALL_OSYNC_WRITE : 0;
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
 * fsync-family calls still running at stop become records flagged INCOMPLETE: a
 * thread blocked in fsync when the user presses Ctrl-C is often the very thing the
 * recording is about. Found from each tracked thread's probe state (the tracked bitmap
 * names the processes, /proc their threads); the fd comes from /proc/TID/syscall, which
 * shows the arguments of a thread blocked in a syscall.
 */
static void dump_open_calls(struct rec *r, struct iowhy_bpf *skel, __u64 stop)
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
			struct iowhy_fsync e = {};
			struct task_state st;
			long long nr = -1, a0 = -1;
			FILE *f;

			if (tid <= 0 || read_task_state(skel, sfd, tgid, tid, &st) ||
			    !st.sys_enter_ns || !(e.call_u16 = open_call(skel, &st)))
				continue;
			e.hdr.type = IOWHY_REC_FSYNC;
			e.hdr.size_bytes = sizeof(e);
			e.hdr.ts_ns = stop;
			e.enter_ns = st.sys_enter_ns;
			e.exit_ns = stop;
			e.ino = st.fs_ino;
			e.commit_seq = st.fs_seq;
			e.tgid = (__u32)tgid;
			e.tid = (__u32)tid;
			e.dev_major = st.fs_dev >> 20;
			e.dev_minor = st.fs_dev & ((1U << 20) - 1);
			e.syscall_nr = (__u32)st.sys_nr;
			e.fs_u16 = st.fs_kind;
			e.flags_u16 = st.fs_flags | IOWHY_FS_F_INCOMPLETE;
			snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", tgid, tid);
			if ((f = fopen(path, "r"))) {
				if (fscanf(f, "%lld %llx", &nr, (unsigned long long *)&a0) != 2)
					nr = -1;
				fclose(f);
			}
			e.fd = e.call_u16 == IOWHY_CALL_SYNC ? -1
			       : nr == st.sys_nr	      ? (__s32)a0
			       : (st.fs_flags & IOWHY_FS_F_LATE_ENTER) ? (__s32)st.arg0 : -1;
			snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", tgid, tid);
			if ((f = fopen(path, "r"))) {
				if (fgets(e.comm, sizeof(e.comm), f))
					e.comm[strcspn(e.comm, "\n")] = 0;
				fclose(f);
			}
			hold_record(r, IOWHY_REC_FSYNC, &e);
		}
		if (tasks)
			closedir(tasks);
	}
	closedir(proc);
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

/* Words of the tracked-tgid bitmap: one bit per possible PID. */
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

static int track_pid(int fd, pid_t pid)
{
	__u32 word = (__u32)pid >> 6;
	__u64 bits = 0;

	if (bpf_map_lookup_elem(fd, &word, &bits))
		return -errno;
	bits |= 1ULL << (pid & 63);
	return bpf_map_update_elem(fd, &word, &bits, BPF_ANY) ? -errno : 0;
}

/*
 * Configure an opened object: rodata, map sizes, and which flavour of each program
 * loads. Tracepoints this kernel lacks (no btf_trace_<name> in its BTF) are skipped.
 */
static int configure(struct rec *r, struct iowhy_bpf *skel, struct btf *vmlinux, int use_btf, int use_ts)
{
	struct bpf_program *prog;
	char tname[96];

	skel->rodata->filter_devs = r->env.ndevs > 0;
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
		      btf_enum_has(vmlinux, "bpf_func_id", "BPF_FUNC_task_pt_regs");
	skel->rodata->lazy_writes = r->lazy_writes;
	if (bpf_map__set_max_entries(skel->maps.rb, (__u32)r->env.ringbuf_mib << 20))
		return -EINVAL;
	if (bpf_map__set_max_entries(skel->maps.tracked, pid_max_words()))
		return -EINVAL;
	if (bpf_map__set_max_entries(skel->maps.stage, libbpf_num_possible_cpus()))
		return -EINVAL;
	skel->rodata->nr_cpus = libbpf_num_possible_cpus();
	r->nprobes = 0;
	bpf_object__for_each_program(prog, skel->obj) {
		int is_btf;
		const char *tp = tp_of(bpf_program__name(prog), &is_btf);
		int present;

		if (!tp) {
			/*
			 * syscalls:sys_{enter,exit}_<call>: only with --syscalls sync. The
			 * dry-run loads both flavours of syscall probes: it checks them all.
			 */
			int sc = !strncmp(bpf_program__name(prog), "sce_", 4);
			int want = r->env.sync_syscalls || r->env.dry_run;

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
		bpf_program__set_autoload(prog, present && is_btf == use_btf);
		if (is_btf && r->nprobes < 64) {
			snprintf(r->probes[r->nprobes].tp, sizeof(r->probes[r->nprobes].tp), "%s", tp);
			r->probes[r->nprobes].how = present ? (use_btf ? "tp_btf" : "raw_tp")
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
static void attach_write_family(struct rec *r, struct iowhy_bpf *skel)
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
static void destroy_links(struct rec *r)
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
static void detach_in_background(struct rec *r)
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

static int parse_dev(const char *s, __u32 *out)
{
	unsigned int maj, min;

	if (sscanf(s, "%u:%u", &maj, &min) != 2)
		return -1;
	*out = maj << 20 | min;
	return 0;
}

/*
 * What /proc/PID/stat says of an attach target: 0 when it can be recorded, else one line
 * on stderr and -1. A zombie never exits again (attach would never end); PID 1 and the
 * kernel threads (kthreadd, PID 2, forks them all) make attach follow the whole system.
 */
#define PF_KTHREAD_FLAG 0x00200000
static int check_target(pid_t pid, int force)
{
	char path[64], buf[1024], state = 0, *rp;
	unsigned long flags = 0;
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = 0;
	if (!n || !(rp = strrchr(buf, ')')) ||
	    sscanf(rp + 2, "%c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2) {
		fprintf(stderr, "iowhy-record: no process with PID %d\n", pid);
		return -1;
	}
	if (state == 'Z' || state == 'X') {
		fprintf(stderr, "iowhy-record: PID %d has exited (a zombie its parent has not "
				"reaped): there is nothing to record\n", pid);
		return -1;
	}
	if (force)
		return 0;
	if (pid == 1 || (flags & PF_KTHREAD_FLAG)) {
		fprintf(stderr, "iowhy-record: refusing to attach to PID %d (%s): it would follow "
				"%s; give --force to record that\n", pid,
			pid == 1 ? "init" : "a kernel thread",
			pid == 1 || pid == 2 ? "every process on the system" : "a kernel thread");
		return -1;
	}
	return 0;
}

/* Attach mode: has the target exited (zombie included: a pidfd polls readable then)? */
static int target_exited(int pidfd, pid_t pid)
{
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		return poll(&p, 1, 0) > 0;
	}
	return kill(pid, 0) && errno == ESRCH;
}

/* Attach mode: the process and its existing descendants. */
static void track_tree(struct rec *r, int tracked_fd, pid_t root)
{
	pid_t queue[4096];
	int head = 0, tail = 0;
	DIR *d;
	struct dirent *de;

	queue[tail++] = root;
	while (head < tail) {
		pid_t p = queue[head++];
		char path[64];

		track_pid(tracked_fd, p);
		snprintf(path, sizeof(path), "/proc/%d/task", p);
		d = opendir(path);
		if (d) {
			while ((de = readdir(d)))
				if (de->d_name[0] != '.')
					emit_root_task(r, p, atoi(de->d_name));
			closedir(d);
		}
		/* children of p, from /proc/<pid>/stat field 4 */
		d = opendir("/proc");
		if (!d)
			continue;
		while ((de = readdir(d)) && tail < 4096) {
			char sp[300], buf[512], *rp;
			int ppid;
			FILE *f;

			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			snprintf(sp, sizeof(sp), "/proc/%s/stat", de->d_name);
			f = fopen(sp, "r");
			if (!f)
				continue;
			if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) &&
			    sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == p)
				queue[tail++] = atoi(de->d_name);
			fclose(f);
		}
		closedir(d);
	}
}

/* ---------------------------------------------------------------- steps --- */

/* Options: -1 to go on, or the exit status (usage errors 2, --help 0). */
static int parse_args(struct rec *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' }, { "meta", required_argument, NULL, 'm' },
		{ "ringbuf", required_argument, NULL, 'r' }, { "duration", required_argument, NULL, 'd' },
		{ "dev", required_argument, NULL, 'D' },    { "pid", required_argument, NULL, 'p' },
		{ "dry-run", no_argument, NULL, 'n' },      { "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },      { "list-counters", no_argument, NULL, 'L' },
		{ "raw-tp", no_argument, NULL, 'R' },       { "help", no_argument, NULL, 'h' },
		{ "syscalls", required_argument, NULL, 'S' },
		{ "probe-stats", no_argument, NULL, 'P' },
		{ "eager-writes", no_argument, NULL, 'W' },
		{ "meta-fd", required_argument, NULL, 'M' },
		{ "force", no_argument, NULL, 'F' },
		{},
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "+o:m:r:d:D:p:nqvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': r->env.output = optarg; break;
		case 'm': r->env.meta = optarg; break;
		case 'M': {
			char *end;
			long fd;

			errno = 0;
			fd = strtol(optarg, &end, 10);
			if (errno || *end || fd < 3 || fd > INT_MAX || fcntl((int)fd, F_SETFD, FD_CLOEXEC)) {
				fprintf(stderr, "iowhy-record: bad --meta-fd %s (want an open descriptor)\n",
					optarg);
				return 2;
			}
			r->env.meta_fd = (int)fd;
			break;
		}
		case 'r': {
			char *end;

			errno = 0;
			r->env.ringbuf_mib = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || r->env.ringbuf_mib < 1 ||
			    r->env.ringbuf_mib > MAX_RINGBUF_MIB ||
			    (r->env.ringbuf_mib & (r->env.ringbuf_mib - 1))) {
				fprintf(stderr, "iowhy-record: bad --ringbuf %s (want a power of two MiB, "
						"1..%d)\n", optarg, MAX_RINGBUF_MIB);
				return 2;
			}
			break;
		}
		case 'd': {
			char *end;

			errno = 0;
			r->env.duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(r->env.duration) ||
			    r->env.duration <= 0 || r->env.duration > MAX_DURATION_S) {
				fprintf(stderr, "iowhy-record: bad --duration %s (want seconds, more than 0 "
						"and at most %.0f)\n", optarg, MAX_DURATION_S);
				return 2;
			}
			break;
		}
		case 'F': r->env.force = 1; break;
		case 'D':
			if (r->env.ndevs >= 64 || parse_dev(optarg, &r->env.devs[r->env.ndevs])) {
				fprintf(stderr, "iowhy-record: bad --dev %s (want MAJ:MIN)\n", optarg);
				return 2;
			}
			r->env.ndevs++;
			break;
		case 'p': r->env.pid = atoi(optarg); break;
		case 'n': r->env.dry_run = 1; break;
		case 'q': r->env.quiet = 1; break;
		case 'P': r->env.probe_stats = 1; break;
		case 'W': r->env.eager_writes = 1; break;
		case 'v': r->env.verbose = libbpf_verbose = 1; break;
		case 'R': r->env.raw_tp = 1; break;
		case 'S':
			if (strcmp(optarg, "all") && strcmp(optarg, "sync")) {
				fprintf(stderr, "failed to parse --syscalls: %s (all or sync)\n", optarg);
				return 2;
			}
			r->env.sync_syscalls = !strcmp(optarg, "sync");
			break;
		case 'L':
			for (int i = 0; i < IOWHY_C_MAX; i++)
				printf("%s\n", counter_names[i]);
			return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		r->env.cmd = &argv[optind];
	if (!r->env.dry_run && !r->env.output) {
		usage(stderr);
		return 2;
	}
	if (!r->env.dry_run && !r->env.cmd && r->env.pid <= 0) {
		fprintf(stderr, "iowhy-record: give a command after -- or a PID with -p\n");
		return 2;
	}
	if (r->env.cmd && r->env.pid > 0) {
		fprintf(stderr, "iowhy-record: -p and a command exclude each other\n");
		return 2;
	}
	return -1;
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
	if (!r->env.dry_run && check_output(r->env.output))
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

	/* Fail on an unwritable output before touching the kernel. */
	if (!r->env.dry_run) {
		r->w.fd = open_output(r, r->env.output);
		if (r->w.fd < 0)
			return 1;
	}
	return -1;
}

/* Open, configure and load the BPF object, the cheapest way that works. */
static int load_probes(struct rec *r)
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

	for (int i = 0; i < r->env.ndevs; i++) {
		__u8 one = 1;

		if (bpf_map_update_elem(bpf_map__fd(r->skel->maps.devs), &r->env.devs[i], &one, BPF_ANY)) {
			fprintf(stderr, "failed to set device filter: %s\n", strerror(errno));
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

static int attach_probes(struct rec *r)
{
	int err;

	err = attach_all(r, r->skel);
	if (!err)
		r->skel->bss->attach_ns = now_ns(CLOCK_MONOTONIC);
	if (err)
		return -1;
	r->obj = r->skel->obj;
	return 0;
}

/* --dry-run: what was attached, and how. */
static void print_dry_run(struct rec *r)
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

static int open_ring(struct rec *r)
{
	int err;

	r->rb = ring_buffer__new(bpf_map__fd(r->skel->maps.rb), handle_event, r, NULL);
	if (!r->rb) {
		err = -errno;
		fprintf(stderr, "failed to create ring buffer: %s\n", strerror(-err));
		return -1;
	}
	r->counters_fd = bpf_map__fd(r->skel->maps.counters);

	if (exiting) { /* stopped while loading: nothing recorded, nothing left */
		r->ret = 128 + stop_signal;
		return -1;
	}
	{
		struct sigaction sa = { .sa_handler = sigchld_handler }; /* no SA_RESTART */

		sigemptyset(&sa.sa_mask);
		sigaction(SIGCHLD, &sa, NULL);
	}
	return 0;
}

static int write_header(struct rec *r)
{
	int err;

	/* The file header and the metadata gathered by `iowhy record`. */
	{
		struct iowhy_file_hdr fh = {};

		memcpy(fh.magic, IOWHY_FILE_MAGIC, 8);
		fh.version = IOWHY_FORMAT_VERSION;
		fh.hdr_bytes = sizeof(fh);
		fh.chunk_hdr_bytes = sizeof(struct iowhy_chunk_hdr);
		fh.endian_tag = 0x01020304;
		fh.created_realtime_ns = now_ns(CLOCK_REALTIME);
		if ((err = write_all(r->w.fd, &fh, sizeof(fh)))) {
			fprintf(stderr, "failed to write %s: %s\n", r->env.output, strerror(-err));
			return -1;
		}
		r->w.good_off = sizeof(fh);
	}
	if (r->env.meta || r->env.meta_fd) {
		FILE *f;
		char *buf = NULL;
		size_t cap = 0, len = 0;

		if (r->env.meta_fd)
			lseek(r->env.meta_fd, 0, SEEK_SET); /* a memfd; a pipe has no offset */
		f = r->env.meta_fd ? fdopen(r->env.meta_fd, "r") : fopen(r->env.meta, "r");
		if (f && r->env.meta_fd)
			r->env.meta_fd = 0; /* fclose closes it */
		if (!f) {
			fprintf(stderr, "failed to read metadata %s: %s\n",
				r->env.meta ? r->env.meta : "descriptor", strerror(errno));
			return -1;
		}
		for (;;) {
			if (len == cap) {
				cap = cap ? cap * 2 : 65536;
				buf = realloc(buf, cap);
				if (!buf)
					break;
			}
			size_t n = fread(buf + len, 1, cap - len, f);

			if (!n)
				break;
			len += n;
		}
		fclose(f);
		if (buf)
			write_chunk(r, IOWHY_CHUNK_META, 0, 1, buf, len);
		free(buf);
	}
	return 0;
}

/* Run mode: fork CMD, track it, let it exec; attach mode: track the target's tree. */
static int start_workload(struct rec *r)
{
	int go_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };

	/* Start the workload only now that every probe is attached. */
	if (r->env.cmd) {
		if (pipe2(go_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
			fprintf(stderr, "failed to create pipes: %s\n", strerror(errno));
			return -1;
		}
		r->child = fork();
		if (r->child < 0) {
			fprintf(stderr, "failed to fork: %s\n", strerror(errno));
			return -1;
		}
		if (r->child == 0) {
			char c;
			int e;

			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			close(go_pipe[1]);
			close(err_pipe[0]);
			if (read(go_pipe[0], &c, 1) != 1)
				_exit(1);
			execvp(r->env.cmd[0], r->env.cmd);
			e = errno;
			if (write(err_pipe[1], &e, sizeof(e)) < 0)
				(void)0;
			_exit(e == ENOENT ? 127 : 126);
		}
		close(go_pipe[0]);
		close(err_pipe[1]);
		{
			int terr = track_pid(bpf_map__fd(r->skel->maps.tracked), r->child);

			if (terr) {
				fprintf(stderr, "failed to track workload: %s\n", strerror(-terr));
				kill(r->child, SIGKILL);
				waitpid(r->child, NULL, 0);
				return -1;
			}
		}
		emit_root_task(r, r->child, r->child);
		stats_start(r);
		cpu_ns(&r->cpu0_user, &r->cpu0_sys);
		r->start_ns = now_ns(CLOCK_MONOTONIC);
		if (write(go_pipe[1], "g", 1) != 1) {
			fprintf(stderr, "failed to start workload: %s\n", strerror(errno));
			return -1;
		}
		close(go_pipe[1]);
		{
			int e = 0;
			ssize_t n = read(err_pipe[0], &e, sizeof(e));

			close(err_pipe[0]);
			if (n == sizeof(e)) {
				waitpid(r->child, &r->child_status, 0);
				fprintf(stderr, "iowhy-record: cannot run %s: %s\n", r->env.cmd[0], strerror(e));
				r->ret = e == ENOENT ? 127 : 126;
				r->stop_reason = "error";
				r->child_done = 1;
				exiting = 1;
			}
		}
	} else {
		r->target_pidfd = syscall(SYS_pidfd_open, r->env.pid, 0);
		track_tree(r, bpf_map__fd(r->skel->maps.tracked), r->env.pid);
		stats_start(r);
		cpu_ns(&r->cpu0_user, &r->cpu0_sys);
		r->start_ns = now_ns(CLOCK_MONOTONIC);
		r->stop_reason = "target-exit";
	}
	return 0;
}

/* The RECORDER chunk: how this recording is made. */
static void write_recorder_chunk(struct rec *r)
{
	struct sbuf s;
	struct utsname u;
	__u64 rt = now_ns(CLOCK_REALTIME), mono = now_ns(CLOCK_MONOTONIC);

	uname(&u);
	sb_open(&s);
	fprintf(s.f, "{\"iowhy_version\": ");
	json_str(s.f, IOWHY_VERSION);
	fprintf(s.f, ", \"mode\": \"%s\", \"pid\": %d, \"recorder_pid\": %d, \"command\": [",
		r->env.cmd ? "run" : "attach", r->env.cmd ? r->child : r->env.pid, getpid());
	for (int i = 0; r->env.cmd && r->env.cmd[i]; i++) {
		fprintf(s.f, "%s", i ? ", " : "");
		json_str(s.f, r->env.cmd[i]);
	}
	if (!r->env.cmd) {
		/* attach: the target's own command line, NUL-separated in /proc */
		char path[64], buf[4096];
		size_t n = 0;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/cmdline", r->env.pid);
		f = fopen(path, "r");
		if (f) {
			n = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
		}
		buf[n] = 0;
		for (size_t off = 0; off < n; off += strlen(buf + off) + 1) {
			fprintf(s.f, "%s", off ? ", " : "");
			json_str(s.f, buf + off);
		}
	}
	fprintf(s.f, "], \"kernel\": ");
	json_str(s.f, u.release);
	fprintf(s.f, ", \"start_ns\": %llu, \"startup_ns\": %llu, \"attach_mode\": \"%s\", "
		     "\"task_state\": \"%s\", \"syscalls\": \"%s\", \"write_probes\": \"%s\", "
		     "\"ringbuf_bytes\": %llu, "
		     "\"devices_filter\": [",
		(unsigned long long)r->start_ns, (unsigned long long)(r->start_ns - r->t_main), r->attach_mode,
		r->task_state, r->env.sync_syscalls ? "sync" : "all", r->lazy_writes ? "lazy" : "start",
		(unsigned long long)r->env.ringbuf_mib << 20);
	for (int i = 0; i < r->env.ndevs; i++)
		fprintf(s.f, "%s\"%u:%u\"", i ? ", " : "", r->env.devs[i] >> 20,
			r->env.devs[i] & ((1U << 20) - 1));
	fprintf(s.f, "], \"clock\": {\"realtime_minus_monotonic_ns\": %lld}, \"probes\": {",
		(long long)(rt - mono));
	for (int i = 0; i < r->nprobes; i++) {
		fprintf(s.f, "%s\"%s\": ", i ? ", " : "", r->probes[i].tp);
		json_str(s.f, r->probes[i].how);
	}
	fprintf(s.f, "}}");
	sb_close_write(r, &s, IOWHY_CHUNK_RECORDER);
}

/* Record until the workload or the target exits, a signal, --duration or a full disk. */
static void poll_until_stop(struct rec *r)
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
		err = ring_buffer__poll(r->rb, 100);
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
		if (now - r->stages.last_ns >= IOWHY_STAGE_DRAIN_NS) {
			drain_stages(r, 0);
			r->stages.last_ns = now;
		}
		if (now - last_flush >= FLUSH_INTERVAL_NS) {
			flush_all(r);
			write_progress(r, r->counters_fd);
			last_flush = now;
		}
	}
	if (stop_signal)
		r->stop_reason = "signal";
	if (r->w.failed)
		r->stop_reason = "disk-full";
	r->end_ns = now_ns(CLOCK_MONOTONIC);
	cpu_ns(&r->cpu1_user, &r->cpu1_sys);
	stats_end(r);
}

static void drain_at_stop(struct rec *r)
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
	dump_inflight(r, r->skel, r->end_ns);
	dump_open_calls(r, r->skel, r->end_ns);
	r->stop_q.late = 1;
	ring_buffer__consume(r->rb);
	r->stop_q.late = 0;
	release_held(r);
	dump_syscalls(r, r->skel, r->end_ns);
	flush_all(r);
}

/* The TRAILER, the exit status, and what the user is told. */
static void write_trailer(struct rec *r)
{
	struct sbuf s;
	int code = 0;
	char status[16] = "null"; /* unless the workload's status was seen */

	if (r->child && r->child_done) {
		code = WIFEXITED(r->child_status) ? WEXITSTATUS(r->child_status)
					       : 128 + WTERMSIG(r->child_status);
		snprintf(status, sizeof(status), "%d", code);
	}
	sb_open(&s);
	fprintf(s.f, "{\"end_ns\": %llu, \"stop_reason\": \"%s\", \"exit_status\": %s, "
		     "\"in_flight_at_stop\": %llu, \"calls_open_at_stop\": %llu, "
		     "\"write_probes_ns\": %llu, \"rq_seq_stride\": %d, "
		     "\"recorder_cpu_ns\": {\"user\": %llu, \"system\": %llu}, ",
		(unsigned long long)r->end_ns, r->stop_reason, status,
		(unsigned long long)r->w.incomplete_requests, (unsigned long long)r->w.open_calls,
		(unsigned long long)(r->lazy_writes ? r->write_probes_ns : r->start_ns),
		libbpf_num_possible_cpus(), (unsigned long long)(r->cpu1_user - r->cpu0_user),
		(unsigned long long)(r->cpu1_sys - r->cpu0_sys));
	stats_write(r, s.f);
	write_counts_json(r, s.f, r->counters_fd);
	fprintf(s.f, "}");
	sb_close_write(r, &s, IOWHY_CHUNK_TRAILER);
	if (r->w.failed) {
		fprintf(stderr, "failed to write %s: %s; recording stopped, the trace holds "
				"everything before that point (truncated)\n",
			r->env.output, strerror(r->w.err));
		if (r->child && !r->child_done)
			fprintf(stderr, "iowhy-record: the workload (PID %d) is still running\n",
				r->child);
		r->ret = 1;
	} else if (!strcmp(r->stop_reason, "error")) {
		/* ret already set */
	} else if (r->child && r->child_done) {
		r->ret = code;
	} else if (stop_signal) {
		r->ret = 128 + stop_signal;
	} else {
		if (r->child && !r->env.quiet) /* --duration: the workload goes on */
			fprintf(stderr, "iowhy-record: the workload (PID %d) is still running\n",
				r->child);
		r->ret = 0;
	}
	{
		__u64 c[IOWHY_C_MAX], lost = 0;

		counters_sum(r->counters_fd, c);
		__u64 unseen = c[IOWHY_C_LOST_DONE] + c[IOWHY_C_LOST_ISSUE] +
			       c[IOWHY_C_LOST_SWITCH_IN] + recursion_misses(r, NULL);

		for (int i = 0; i <= IOWHY_C_BIOMAP_FULL; i++)
			lost += c[i];
		if (lost)
			fprintf(stderr, "iowhy-record: WARNING: %llu events lost in the kernel "
					"(see `iowhy info`); if the ring buffer or a map was full, "
					"record again with a bigger --ringbuf (now %ld MiB)\n",
				(unsigned long long)lost, r->env.ringbuf_mib);
		if (unseen)
			fprintf(stderr, "iowhy-record: WARNING: the kernel did not run the probes "
					"for %llu events (see `iowhy info`); the requests and "
					"intervals they end are written flagged\n",
				(unsigned long long)unseen);
		if (r->w.unknown_records)
			fprintf(stderr, "iowhy-record: WARNING: %llu malformed records ignored\n",
				(unsigned long long)r->w.unknown_records);
	}
	if (!r->env.quiet && !r->w.failed)
		fprintf(stderr, "iowhy-record: %s: %llu requests, %llu fsync calls, %llu journal "
				"events, %.3f s (%s)\n",
			r->env.output, (unsigned long long)r->w.bufs[IOWHY_REC_REQUEST].total,
			(unsigned long long)r->w.bufs[IOWHY_REC_FSYNC].total,
			(unsigned long long)r->w.bufs[IOWHY_REC_JOURNAL].total,
			(r->end_ns - r->start_ns) / 1e9, r->stop_reason);
}

/* Free, close, rename the trace into place, detach (in the background). */
static int cleanup(struct rec *r)
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
	if (r->nlinks && !r->env.dry_run)
		detach_in_background(r);
	destroy_links(r);
	iowhy_bpf__destroy(r->skel);
	btf__free(r->vmlinux);
	if (r->target_pidfd >= 0)
		close(r->target_pidfd);
	return r->ret;
}

/* ---------------------------------------------------------------- main --- */

int main(int argc, char **argv)
{
	struct rec rs = { .env = { .ringbuf_mib = 64, .sync_syscalls = 1 }, .w = { .fd = -1 },
			  .stats = { .fd = -1 }, .ret = 1, .target_pidfd = -1,
			  .attach_mode = "tp_btf", .task_state = "task-storage",
			  .stop_reason = "workload-exit" };
	struct rec *r = &rs;
	int code;

	r->t_main = now_ns(CLOCK_MONOTONIC);
	if ((code = parse_args(r, argc, argv)) >= 0 || (code = prepare(r)) >= 0)
		return code;
	if (load_probes(r) || attach_probes(r))
		return cleanup(r);
	if (r->env.dry_run) {
		print_dry_run(r);
		return cleanup(r);
	}
	if (open_ring(r) || write_header(r) || start_workload(r))
		return cleanup(r);
	write_recorder_chunk(r);
	poll_until_stop(r);
	drain_at_stop(r);
	write_trailer(r);
	return cleanup(r);
}
