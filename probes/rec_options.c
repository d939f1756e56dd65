// SPDX-License-Identifier: GPL-2.0
/* iowhy-record, options and features: usage, argument parsing, tracefs. */
#include "recorder.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: iowhy-record -o OUT [-m META.json | --meta-fd FD] [-r MiB] [-d SEC] "
		   "[-D MAJ:MIN]... [-q] [-v] [--cgroup PATH] (-p PID [--force] | -- CMD [ARGS...])\n"
		   "       iowhy-record -o OUT [options] --cgroup PATH      follow a cgroup until stopped\n"
		   "       iowhy-record -n            load and attach every probe, then exit\n"
		   "  -o OUT    written as OUT.partial-PID (O_EXCL, O_NOFOLLOW, mode 0600), renamed\n"
		   "            to OUT at stop; a previous OUT is kept as OUT.old; a symlink or\n"
		   "            non-regular file at OUT is refused; under sudo, owned by SUDO_UID\n"
		   "  -r MiB    ring buffer, a power of two, 1..%d (default 64)\n"
		   "  -d SEC    stop after SEC seconds, 0 < SEC <= %.0f; the workload goes on\n"
		   "  --cgroup PATH  also record every process of this cgroup v2 and the cgroups\n"
		   "            below it, those that join while recording included (alone: until\n"
		   "            SIGINT/SIGTERM, --duration or the cgroup's removal)\n"
		   "  --flight SEC  a flight recorder (attach only): keep the records of the last\n"
		   "            SEC seconds in memory, at most %d MiB of compressed chunks (the\n"
		   "            oldest dropped first beyond it, counted in each dump; and 2 MiB\n"
		   "            naming the cgroup of each live thread), until\n"
		   "            SIGINT/SIGTERM or --duration; on SIGUSR1 or a --trigger, write them\n"
		   "            and --after seconds more to OUT, then OUT.1.iowt, OUT.2.iowt, ...\n"
		   "  --trigger KIND>TIME  fsync, request, flush or blocked (a workload thread in\n"
		   "            D state) longer than TIME (ns, us, ms, s; default ms); repeatable\n"
		   "  --after SEC  recorded past a trigger before the dump (default 1)\n"
		   "  --max-dumps N  stop after N dumps (default 10)\n"
		   "  --dump-on-exit  also write the window when recording stops (SIGINT,\n"
		   "            SIGTERM, --duration, the target's exit); a dump a trigger made\n"
		   "            pending is written at stop in any case\n"
		   "  --top MS  no trace: fold the records into per-process totals and print\n"
		   "            one JSON line every MS ms (for `iowhy top`; attach only)\n"
		   "  --force   attach to PID 1 or a kernel thread, or follow the root cgroup\n"
		   "            (follows the whole system)\n"
		   "  --raw-tp  use raw_tp programs even where tp_btf works (tests the fallback)\n"
		   "  --syscalls sync|all  time only the fsync and write families (default), or\n"
		   "            count and time every syscall of the workload (costlier per syscall)\n"
		   "  --eager-writes  with --syscalls sync, attach the write family at start\n"
		   "            (default: at the first O_SYNC/O_DSYNC write, where tp_btf can read\n"
		   "            a task's syscall number; that write is timed from its fs sync event)\n"
		   "  --probe-stats  measure each program's runs and run time while recording\n"
		   "            (kernel BPF statistics: adds about two clock reads to every run)\n",
		MAX_RINGBUF_MIB, MAX_DURATION_S, FLIGHT_MAX_MIB);
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
int ensure_tracefs(void)
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

static int parse_dev(const char *s, __u32 *out)
{
	unsigned int maj, min;

	if (sscanf(s, "%u:%u", &maj, &min) != 2)
		return -1;
	*out = iowhy_mkdev(maj, min);
	return 0;
}

/* ---------------------------------------------------------------- options --- */

/*
 * Every function below returns GO_ON, or the exit status parse_args() hands to main():
 * USAGE (after one line on stderr naming the option, the value and what it wants, or
 * the usage text) or 0 (--help, --list-counters: printed, nothing to record).
 */
enum { GO_ON = -1, USAGE = 2 };

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
	{ "cgroup", required_argument, NULL, 'G' },
	{ "flight", required_argument, NULL, 'X' },
	{ "top", required_argument, NULL, 'Y' },
	{ "trigger", required_argument, NULL, 'T' },
	{ "after", required_argument, NULL, 'A' },
	{ "max-dumps", required_argument, NULL, 'N' },
	{ "dump-on-exit", no_argument, NULL, 'E' },
	{},
};

/* ARG as a whole decimal number in [lo, hi] into *v: 0, else -1. */
static int long_in(const char *arg, long lo, long hi, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(arg, &end, 10);
	return errno || end == arg || *end || *v < lo || *v > hi ? -1 : 0;
}

/* ARG as a finite number of seconds in [lo, hi] into *v: 0, else -1. */
static int seconds_in(const char *arg, double lo, double hi, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(arg, &end);
	return errno || end == arg || *end || !isfinite(*v) || *v < lo || *v > hi ? -1 : 0;
}

/* --meta-fd: the metadata `iowhy record` left open for us; kept from the workload. */
static int set_meta_fd(struct rec *r, const char *arg)
{
	long fd;

	if (long_in(arg, 3, INT_MAX, &fd) || fcntl((int)fd, F_SETFD, FD_CLOEXEC)) {
		fprintf(stderr, "iowhy-record: bad --meta-fd %s (want an open descriptor)\n", arg);
		return USAGE;
	}
	r->env.meta_fd = (int)fd;
	return GO_ON;
}

/* -r: the ring buffer, a power of two MiB (a BPF ring buffer's size must be). */
static int set_ringbuf(struct rec *r, const char *arg)
{
	long v;

	if (long_in(arg, 1, MAX_RINGBUF_MIB, &v) || (v & (v - 1))) {
		fprintf(stderr, "iowhy-record: bad --ringbuf %s (want a power of two MiB, "
				"1..%d)\n", arg, MAX_RINGBUF_MIB);
		return USAGE;
	}
	r->env.ringbuf_mib = v;
	return GO_ON;
}

/* -d: seconds, finite and positive. */
static int set_duration(struct rec *r, const char *arg)
{
	if (seconds_in(arg, 0, MAX_DURATION_S, &r->env.duration) || r->env.duration <= 0) {
		fprintf(stderr, "iowhy-record: bad --duration %s (want seconds, more than 0 "
				"and at most %.0f)\n", arg, MAX_DURATION_S);
		return USAGE;
	}
	return GO_ON;
}

/* --flight (opt 'X', at least 1 s) and --after ('A', at least 0 s): at most a day. */
static int set_flight_seconds(struct rec *r, int opt, const char *arg)
{
	if (seconds_in(arg, opt == 'X' ? 1 : 0, 86400,
		       opt == 'X' ? &r->env.flight_s : &r->env.after_s)) {
		fprintf(stderr, "iowhy-record: bad --%s %s (want seconds, %s to 86400)\n",
			opt == 'X' ? "flight" : "after", arg, opt == 'X' ? "1" : "0");
		return USAGE;
	}
	return GO_ON;
}

/* --top: the interval between two JSON lines, whole milliseconds. */
static int set_top(struct rec *r, const char *arg)
{
	long v;

	if (long_in(arg, 100, 3600000, &v)) {
		fprintf(stderr, "iowhy-record: bad --top %s (want milliseconds, 100 to "
				"3600000)\n", arg);
		return USAGE;
	}
	r->env.top_ms = v;
	return GO_ON;
}

/* --max-dumps: a count. */
static int set_max_dumps(struct rec *r, const char *arg)
{
	long v;

	if (long_in(arg, 1, 10000, &v)) {
		fprintf(stderr, "iowhy-record: bad --max-dumps %s (want 1 to 10000)\n", arg);
		return USAGE;
	}
	r->env.max_dumps = (int)v;
	return GO_ON;
}

/* --trigger KIND>TIME, repeatable up to FLIGHT_MAX_TRIGGERS (rec_flight.c parses it). */
static int add_trigger(struct rec *r, const char *arg)
{
	if (r->env.ntriggers >= FLIGHT_MAX_TRIGGERS ||
	    flight_parse_trigger(arg, &r->env.triggers[r->env.ntriggers])) {
		fprintf(stderr, "iowhy-record: bad --trigger %s (want fsync, request, "
				"flush or blocked, '>' and a time, e.g. fsync>200ms; at most "
				"%d)\n", arg, FLIGHT_MAX_TRIGGERS);
		return USAGE;
	}
	r->env.ntriggers++;
	return GO_ON;
}

/* --cgroup: a cgroup v2 directory; cgroup_check() says what is wrong with it. */
static int set_cgroup(struct rec *r, const char *arg)
{
	if (cgroup_check(arg, &r->env.cgroup_id))
		return USAGE;
	r->env.cgroup = arg;
	return GO_ON;
}

/* -D MAJ:MIN, repeatable up to IOWHY_MAX_DEVS. */
static int add_dev(struct rec *r, const char *arg)
{
	if (r->env.ndevs >= IOWHY_MAX_DEVS || parse_dev(arg, &r->env.devs[r->env.ndevs])) {
		fprintf(stderr, "iowhy-record: bad --dev %s (want MAJ:MIN)\n", arg);
		return USAGE;
	}
	r->env.ndevs++;
	return GO_ON;
}

/* --syscalls sync|all. */
static int set_syscalls(struct rec *r, const char *arg)
{
	if (strcmp(arg, "all") && strcmp(arg, "sync")) {
		fprintf(stderr, "failed to parse --syscalls: %s (all or sync)\n", arg);
		return USAGE;
	}
	r->env.sync_syscalls = !strcmp(arg, "sync");
	return GO_ON;
}

/* One option getopt_long() returned, with its argument (NULL for a flag). */
static int apply_option(struct rec *r, int opt, const char *arg)
{
	switch (opt) {
	case 'o': r->env.output = arg; return GO_ON;
	case 'm': r->env.meta = arg; return GO_ON;
	case 'M': return set_meta_fd(r, arg);
	case 'r': return set_ringbuf(r, arg);
	case 'd': return set_duration(r, arg);
	case 'F': r->env.force = 1; return GO_ON;
	case 'X':
	case 'A': return set_flight_seconds(r, opt, arg);
	case 'Y': return set_top(r, arg);
	case 'N': return set_max_dumps(r, arg);
	case 'T': return add_trigger(r, arg);
	case 'G': return set_cgroup(r, arg);
	case 'D': return add_dev(r, arg);
	case 'p': r->env.pid = atoi(arg); return GO_ON;
	case 'n': r->env.dry_run = 1; return GO_ON;
	case 'q': r->env.quiet = 1; return GO_ON;
	case 'P': r->env.probe_stats = 1; return GO_ON;
	case 'E': r->env.dump_on_exit = 1; return GO_ON;
	case 'W': r->env.eager_writes = 1; return GO_ON;
	case 'v': r->env.verbose = libbpf_verbose = 1; return GO_ON;
	case 'R': r->env.raw_tp = 1; return GO_ON;
	case 'S': return set_syscalls(r, arg);
	case 'L':
		for (int i = 0; i < IOWHY_C_MAX; i++)
			printf("%s\n", counter_names[i]);
		return 0;
	case 'h': usage(stdout); return 0;
	default: usage(stderr); return USAGE; /* getopt_long() said which option */
	}
}

/*
 * -o, needed unless --dry-run or --top, must name a file: "" or a path ending in / or .
 * names none, and the partial file would land in the directory and the rename at stop
 * fail, after the whole workload ran.
 */
static int check_output_name(struct rec *r)
{
	const char *base;

	if (!r->env.dry_run && !r->env.output && !r->env.top_ms) {
		usage(stderr);
		return USAGE;
	}
	if (!r->env.output)
		return GO_ON;
	base = strrchr(r->env.output, '/');
	base = base ? base + 1 : r->env.output;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		fprintf(stderr, "iowhy: -o '%s' is not a file name (give the trace's file "
				"name, e.g. -o out.iowt)\n", r->env.output);
		return USAGE;
	}
	return GO_ON;
}

/* Something to record (unless --dry-run), and not the whole system by accident. */
static int check_target_given(struct rec *r)
{
	if (!r->env.dry_run && !r->env.cmd && r->env.pid <= 0 && !r->env.cgroup) {
		fprintf(stderr, "iowhy-record: give a command after --, a PID with -p or "
				"--cgroup\n");
		return USAGE;
	}
	if (r->env.cgroup && r->env.cgroup_id == 1 && !r->env.force) {
		fprintf(stderr, "iowhy-record: refusing --cgroup %s: it is the root of the "
				"cgroup hierarchy, which holds every process on the system; give "
				"--force to record that\n", r->env.cgroup);
		return USAGE;
	}
	return GO_ON;
}

/*
 * --top and --flight attach to running processes and exclude each other; the flight
 * recorder's own options need --flight. Then the flight recorder's defaults (after_s
 * starts at -1 to tell "not given" from --after 0).
 */
static int check_modes(struct rec *r)
{
	if (r->env.top_ms && (r->env.cmd || r->env.dry_run || r->env.flight_s > 0)) {
		fprintf(stderr, "iowhy-record: --top attaches (-p PID or --cgroup PATH), without "
				"--flight; it does not run a command\n");
		return USAGE;
	}
	if (r->env.flight_s > 0 && (r->env.cmd || r->env.dry_run)) {
		fprintf(stderr, "iowhy-record: --flight attaches (-p PID or --cgroup PATH); it "
				"does not run a command\n");
		return USAGE;
	}
	if (!(r->env.flight_s > 0) && (r->env.ntriggers || r->env.after_s >= 0 ||
				       r->env.max_dumps || r->env.dump_on_exit)) {
		fprintf(stderr, "iowhy-record: --trigger, --after, --max-dumps and --dump-on-exit "
				"need --flight SEC\n");
		return USAGE;
	}
	if (r->env.after_s < 0)
		r->env.after_s = 1;
	if (!r->env.max_dumps)
		r->env.max_dumps = 10;
	return GO_ON;
}

/* One target at a time: -p, --cgroup and a command exclude each other. */
static int check_one_target(struct rec *r)
{
	if (r->env.cgroup && r->env.pid > 0) {
		fprintf(stderr, "iowhy-record: -p and --cgroup exclude each other\n");
		return USAGE;
	}
	if (r->env.cmd && r->env.pid > 0) {
		fprintf(stderr, "iowhy-record: -p and a command exclude each other\n");
		return USAGE;
	}
	return GO_ON;
}

/* ---------------------------------------------------------------- steps --- */

/*
 * Options: -1 to go on, or the exit status (usage errors 2, --help 0). Each option is
 * checked as it comes, then how they combine, in the order the checks print.
 */
int parse_args(struct rec *r, int argc, char **argv)
{
	int opt, code;

	while ((opt = getopt_long(argc, argv, "+o:m:r:d:D:p:nqvh", longopts, NULL)) != -1)
		if ((code = apply_option(r, opt, optarg)) != GO_ON)
			return code;
	if (optind < argc)
		r->env.cmd = &argv[optind];
	if ((code = check_output_name(r)) != GO_ON || (code = check_target_given(r)) != GO_ON ||
	    (code = check_modes(r)) != GO_ON || (code = check_one_target(r)) != GO_ON)
		return code;
	return GO_ON;
}
