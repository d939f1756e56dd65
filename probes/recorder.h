/* SPDX-License-Identifier: GPL-2.0 */
/*
 * iowhy-record's shared state and the steps each file provides (see recorder.c).
 */
#ifndef IOWHY_RECORDER_H
#define IOWHY_RECORDER_H

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
#include <sys/inotify.h>
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
#include <zstd.h>
#include "iowhy.h"
#include "iowhy.skel.h"
#include "rec_compact.h"

#ifndef IOWHY_VERSION
#define IOWHY_VERSION "unknown"
#endif

#define CHUNK_BYTES (256 * 1024)
/* a chunk's data once compacted: 2 more bytes per record, and no record is under 8 bytes */
#define TBUF_BYTES (CHUNK_BYTES + CHUNK_BYTES / 4)
/* zstd level of the chunks (IOWHY_ZSTD_LEVEL overrides it; 0: plain chunks). Chosen by
 * measurement, bench/README.md. */
#define ZSTD_LEVEL_DEFAULT 3
#define MAX_DURATION_S 2592000.0 /* 30 days */
#define MAX_RINGBUF_MIB 2048     /* the largest power of two a map's u32 max_entries holds */
#define STOP_GRACE_NS 5000000000ULL /* the workload's time to exit after a stop signal */
#define FLUSH_INTERVAL_NS 1000000000ULL
/* --flight: the chunks kept for the window, at most this much (rec_flight.c) */
#define FLIGHT_MAX_MIB 256
#define FLIGHT_MAX_TRIGGERS 16

struct flight_trigger {
	int kind;   /* fsync, request, flush, blocked (rec_flight.c) */
	__u64 ns;   /* fires when it took longer */
	char text[40];
};
struct flight;
struct top;

/* A cgroup v2 a task record named (rec_cgroup.c): its id and its path below the cgroup2
 * mount ("/" for the root), or no path when it was gone before it could be looked up. */
struct cgpath {
	__u64 id;
	char *path;
};

/* --flight: a live thread's cgroup when first seen (rec_cgroup.c, thread_cgroups). */
struct thread_cg {
	__u32 tid;
	__u32 used;
	__u64 id;
};

extern volatile sig_atomic_t exiting;     /* set by the signal handler */
extern volatile sig_atomic_t stop_signal;

extern const char *counter_names[IOWHY_C_MAX];
extern const char *rec_names[IOWHY_REC_MAX + 1];
extern const size_t rec_sizes[IOWHY_REC_MAX + 1];

struct recbuf {
	char *data;
	size_t len;
	__u32 count;
	__u64 total;
};



struct held {
	int type;
	int from_ring; /* a flight dump's: a record the probes wrote (collect_for_dump) */
	union {
		struct iowhy_request rq;
		struct iowhy_fsync fs;
		struct iowhy_offcpu off;
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
		long top_ms;        /* --top: one JSON line per interval of this many ms (0: off) */
		double flight_s;    /* --flight: the window kept, seconds (0: not a flight recorder) */
		double after_s;     /* --after: recorded past a trigger before the dump */
		int max_dumps;      /* --max-dumps */
		int dump_on_exit;   /* --dump-on-exit: the window is written at stop too */
		struct flight_trigger triggers[FLIGHT_MAX_TRIGGERS];
		int ntriggers;
		const char *cgroup; /* --cgroup: the cgroup v2 directory followed */
		__u64 cgroup_id;    /* its kernel id */
		int force; /* --force: attach to PID 1 or a kernel thread */
		char **cmd;
		__u32 devs[IOWHY_MAX_DEVS];
		int ndevs;
	} env;
	struct writer {
		int fd;
		off_t good_off; /* end of the last chunk fully written */
		__u64 seq;
		int failed; /* a write failed: stop, keep what is readable */
		int err;
		struct recbuf bufs[IOWHY_REC_MAX + 1];
		ZSTD_CCtx *zctx; /* reused for every chunk; NULL: chunks are written plain */
		char *zbuf;      /* a compressed chunk (ZSTD_compressBound(CHUNK_BYTES) bytes) */
		unsigned char *tbuf; /* a record chunk byte-transposed or compacted (TBUF_BYTES) */
		struct compact_work cw; /* the compaction's scratch space */
		size_t zcap;
		int zlevel;
		/* data compressed, what it became, the thread CPU time compressing took */
		__u64 zstd_in_bytes, zstd_out_bytes, zstd_cpu_ns;
		__u64 unknown_records;
		__u64 incomplete_requests;
		__u64 open_calls; /* fsync-family calls still running at stop */
		__u64 open_sleeps; /* off-CPU intervals of workload threads still open at stop */
	} w;
	char partial_path[PATH_MAX]; /* where the trace is written until it is renamed */
	/* Stop-time records held until the late drain (see hold_record). */
	struct {
		struct held *v;
		size_t n, cap;
		__u64 *seen; /* identities of what the late drain brought */
		size_t nseen, capseen;
		int late; /* the late drain is running */
		__u64 dump_at; /* a flight dump's end: what the ring brings is kept for it too */
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
	/* the cgroups of the task records, id -> path (rec_cgroup.c, TRAILER `cgroups`) */
	struct cgtable {
		int init;         /* the mount looked for */
		int mount_fd;     /* the cgroup2 mount (-1: none) */
		char mount[PATH_MAX];
		struct cgpath *v;
		size_t n, cap;
		int full;         /* an id could not be added: later new ids are not looked up */
		size_t reported;  /* entries the last PROGRESS had written */
		size_t last;      /* the entry found last (task records come in runs) */
		struct thread_cg *th; /* --flight: open addressing by tid */
		size_t th_n, th_cap;
		__u64 th_full;    /* threads not kept: the table was full */
	} cg;
	struct flight *fl; /* --flight (rec_flight.c) */
	struct top *top;   /* --top (rec_top.c) */
};

extern int libbpf_verbose;

static inline __u64 now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* A growable string for JSON chunks. */
struct sbuf {
	char *p;
	size_t len;
	FILE *f;
};

/* rec_options.c: options and features */
int ensure_tracefs(void);
int parse_args(struct rec *r, int argc, char **argv);

/* rec_writer.c: the trace file */
int check_output(const char *path);
int open_output(struct rec *r, const char *path);
int commit_output(struct rec *r, const char *path);
void flush_all(struct rec *r);
void add_record(struct rec *r, int t, const void *data);
void sb_open(struct sbuf *s);
void sb_close_write(struct rec *r, struct sbuf *s, __u16 type);
void json_str(FILE *f, const char *s);
int write_header(struct rec *r);
int writer_init(struct rec *r);
void writer_free(struct rec *r);
void write_recorder_chunk(struct rec *r);
void write_trailer(struct rec *r);

/* rec_drain.c: draining and the poll loop */
int map_stages(struct rec *r, struct bpf_map *map);
int open_ring(struct rec *r);
void poll_until_stop(struct rec *r);
void drain_at_stop(struct rec *r);
void drain_now(struct rec *r);
void take_open_state(struct rec *r, __u64 at);
void discard_open_state(struct rec *r);
void write_open_state(struct rec *r, __u64 nrec[IOWHY_REC_MAX + 1], __u64 open[3]);

/* rec_stats.c: statistics */
__u64 counters_sum(int fd, __u64 *out);
__u64 recursion_misses(struct rec *r, FILE *detail);
void stats_end(struct rec *r);
void stats_write(struct rec *r, FILE *f);
void write_counts_json(struct rec *r, FILE *f, int counters_fd);
void stats_start(struct rec *r);
void cpu_ns(__u64 *user, __u64 *sys);
void write_progress(struct rec *r, int counters_fd);
void fill_file_hdr(struct iowhy_file_hdr *fh);
void live_progress(struct rec *r, __u64 now);
void live_clear(void);

/* rec_probes.c: load, attach, detach */
void attach_write_family(struct rec *r, struct iowhy_bpf *skel);
void destroy_links(struct rec *r);
void detach_in_background(struct rec *r);
int load_probes(struct rec *r);
int attach_probes(struct rec *r);
void print_dry_run(struct rec *r);

/* rec_workload.c: the workload */
int track_pid(int fd, pid_t pid);
void read_comm(pid_t tgid, pid_t tid, char *out);
void emit_thread_state(struct rec *r, pid_t tgid, pid_t tid);
void emit_root_task(struct rec *r, pid_t tgid, pid_t tid);
int check_target(pid_t pid, int force);
int target_exited(int pidfd, pid_t pid);
int start_workload(struct rec *r);

/* rec_cgroup.c: --cgroup */
int cgroup_check(const char *path, __u64 *id);
void track_cgroup(struct rec *r);
void cgroup_task_seen(struct rec *r, const struct iowhy_task *t);
__u64 cgroup_of_thread(struct rec *r, pid_t tgid, pid_t tid);
void cgroup_seen(struct rec *r, __u64 id);
void cgroups_json(struct rec *r, FILE *f, int since_last);
void cgroup_thread_seen(struct rec *r, const struct iowhy_task *t);
void thread_cgroups_json(struct rec *r, FILE *f);
void cgroups_free(struct rec *r);

/* rec_flight.c: --flight */
int flight_parse_trigger(const char *s, struct flight_trigger *t);
int flight_init(struct rec *r);
int flight_keep(struct rec *r, const struct iowhy_chunk_hdr *h, const void *out, size_t stored,
		size_t pad, __u16 type, const void *data, __u16 rec_size, __u32 count);
void flight_event(struct rec *r, const struct iowhy_rec_hdr *h);
void flight_tick(struct rec *r, __u64 now);
void flight_stop(struct rec *r);
void flight_finish(struct rec *r);

/* rec_top.c: --top */
int top_init(struct rec *r);
void top_event(struct rec *r, const struct iowhy_rec_hdr *h);
void top_start(struct rec *r);
int top_wait_ms(struct rec *r, __u64 now);
void top_tick(struct rec *r, __u64 now);
void top_finish(struct rec *r);

/* recorder.c: main's steps */
void sigchld_handler(int sig);
int cleanup(struct rec *r);
int stopped_before_start(struct rec *r);

#endif
