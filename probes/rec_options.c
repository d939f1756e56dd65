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

/* ---------------------------------------------------------------- steps --- */

/* Options: -1 to go on, or the exit status (usage errors 2, --help 0). */
int parse_args(struct rec *r, int argc, char **argv)
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
		{ "cgroup", required_argument, NULL, 'G' },
		{ "flight", required_argument, NULL, 'X' },
		{ "top", required_argument, NULL, 'Y' },
		{ "trigger", required_argument, NULL, 'T' },
		{ "after", required_argument, NULL, 'A' },
		{ "max-dumps", required_argument, NULL, 'N' },
		{ "dump-on-exit", no_argument, NULL, 'E' },
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
		case 'X':
		case 'A': {
			char *end;
			double v;

			errno = 0;
			v = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(v) || v < (opt == 'X' ? 1 : 0) ||
			    v > 86400) {
				fprintf(stderr, "iowhy-record: bad --%s %s (want seconds, %s to 86400)\n",
					opt == 'X' ? "flight" : "after", optarg, opt == 'X' ? "1" : "0");
				return 2;
			}
			if (opt == 'X')
				r->env.flight_s = v;
			else
				r->env.after_s = v;
			break;
		}
		case 'Y': {
			char *end;

			errno = 0;
			r->env.top_ms = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || r->env.top_ms < 100 ||
			    r->env.top_ms > 3600000) {
				fprintf(stderr, "iowhy-record: bad --top %s (want milliseconds, 100 to "
						"3600000)\n", optarg);
				return 2;
			}
			break;
		}
		case 'N': {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 || v > 10000) {
				fprintf(stderr, "iowhy-record: bad --max-dumps %s (want 1 to 10000)\n",
					optarg);
				return 2;
			}
			r->env.max_dumps = (int)v;
			break;
		}
		case 'T':
			if (r->env.ntriggers >= FLIGHT_MAX_TRIGGERS ||
			    flight_parse_trigger(optarg, &r->env.triggers[r->env.ntriggers])) {
				fprintf(stderr, "iowhy-record: bad --trigger %s (want fsync, request, "
						"flush or blocked, '>' and a time, e.g. fsync>200ms; at most "
						"%d)\n", optarg, FLIGHT_MAX_TRIGGERS);
				return 2;
			}
			r->env.ntriggers++;
			break;
		case 'G':
			if (cgroup_check(optarg, &r->env.cgroup_id))
				return 2;
			r->env.cgroup = optarg;
			break;
		case 'D':
			if (r->env.ndevs >= IOWHY_MAX_DEVS || parse_dev(optarg, &r->env.devs[r->env.ndevs])) {
				fprintf(stderr, "iowhy-record: bad --dev %s (want MAJ:MIN)\n", optarg);
				return 2;
			}
			r->env.ndevs++;
			break;
		case 'p': r->env.pid = atoi(optarg); break;
		case 'n': r->env.dry_run = 1; break;
		case 'q': r->env.quiet = 1; break;
		case 'P': r->env.probe_stats = 1; break;
		case 'E': r->env.dump_on_exit = 1; break;
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
	if (!r->env.dry_run && !r->env.output && !r->env.top_ms) {
		usage(stderr);
		return 2;
	}
	if (r->env.output) {
		/* "" or a path ending in / or . names no file: the partial file would land in
		 * the directory and the rename at stop fail, after the whole workload ran */
		const char *base = strrchr(r->env.output, '/');

		base = base ? base + 1 : r->env.output;
		if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
			fprintf(stderr, "iowhy: -o '%s' is not a file name (give the trace's file "
					"name, e.g. -o out.iowt)\n", r->env.output);
			return 2;
		}
	}
	if (!r->env.dry_run && !r->env.cmd && r->env.pid <= 0 && !r->env.cgroup) {
		fprintf(stderr, "iowhy-record: give a command after --, a PID with -p or --cgroup\n");
		return 2;
	}
	if (r->env.cgroup && r->env.cgroup_id == 1 && !r->env.force) {
		fprintf(stderr, "iowhy-record: refusing --cgroup %s: it is the root of the cgroup "
				"hierarchy, which holds every process on the system; give --force to "
				"record that\n", r->env.cgroup);
		return 2;
	}
	if (r->env.top_ms && (r->env.cmd || r->env.dry_run || r->env.flight_s > 0)) {
		fprintf(stderr, "iowhy-record: --top attaches (-p PID or --cgroup PATH), without "
				"--flight; it does not run a command\n");
		return 2;
	}
	if (r->env.flight_s > 0 && (r->env.cmd || r->env.dry_run)) {
		fprintf(stderr, "iowhy-record: --flight attaches (-p PID or --cgroup PATH); it "
				"does not run a command\n");
		return 2;
	}
	if (!(r->env.flight_s > 0) && (r->env.ntriggers || r->env.after_s >= 0 ||
				       r->env.max_dumps || r->env.dump_on_exit)) {
		fprintf(stderr, "iowhy-record: --trigger, --after, --max-dumps and --dump-on-exit "
				"need --flight SEC\n");
		return 2;
	}
	if (r->env.after_s < 0)
		r->env.after_s = 1;
	if (!r->env.max_dumps)
		r->env.max_dumps = 10;
	if (r->env.cgroup && r->env.pid > 0) {
		fprintf(stderr, "iowhy-record: -p and --cgroup exclude each other\n");
		return 2;
	}
	if (r->env.cmd && r->env.pid > 0) {
		fprintf(stderr, "iowhy-record: -p and a command exclude each other\n");
		return 2;
	}
	return -1;
}
