// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy-record, --cgroup PATH: the cgroup v2 whose processes are the workload. Checked
 * before anything is loaded (cgroup v1 and other paths refused with one line); its
 * processes, and those of every cgroup below it, tracked once the probes are attached;
 * a process that joins later is tracked by the probes (iowhy.bpf.c, --cgroup), which
 * write one JOIN task record for the thread that moved; the recorder names the other
 * threads of that process and their state here.
 */
#include "recorder.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#define CGROUP_WALK_DEPTH 64 /* the probes look as far up (IOWHY_CGROUP_DEPTH) */

/*
 * PATH must be a directory of a cgroup v2 hierarchy: 0 and its id (the kernel's cgroup
 * id, as name_to_handle_at() gives it and the probes read it), or one line and -1.
 */
int cgroup_check(const char *path, __u64 *id)
{
	struct {
		struct file_handle fh;
		unsigned char id[8];
	} h = { .fh = { .handle_bytes = 8 } };
	struct statfs sf;
	struct stat st;
	int mount_id;

	if (statfs(path, &sf) || stat(path, &st)) {
		fprintf(stderr, "iowhy-record: --cgroup %s: %s (give a cgroup v2 directory, e.g. "
				"/sys/fs/cgroup/system.slice/NAME.service)\n", path, strerror(errno));
		return -1;
	}
	if (sf.f_type == CGROUP_SUPER_MAGIC) {
		fprintf(stderr, "iowhy-record: --cgroup %s is a cgroup v1 hierarchy; iowhy follows "
				"cgroup v2 only (give the same group under the cgroup2 mount, see "
				"`mount -t cgroup2`)\n", path);
		return -1;
	}
	if (sf.f_type != CGROUP2_SUPER_MAGIC || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "iowhy-record: --cgroup %s is not a cgroup v2 directory (give one "
				"under the cgroup2 mount, see `mount -t cgroup2`)\n", path);
		return -1;
	}
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) || h.fh.handle_bytes != 8) {
		fprintf(stderr, "iowhy-record: --cgroup %s: cannot read its cgroup id: %s\n", path,
			strerror(errno));
		return -1;
	}
	memcpy(id, h.fh.f_handle, 8);
	return 0;
}

static int tracked_already(int fd, pid_t pid)
{
	__u32 word = (__u32)pid >> 6;
	__u64 bits = 0;

	return !bpf_map_lookup_elem(fd, &word, &bits) && ((bits >> (pid & 63)) & 1);
}

/*
 * The threads of process tgid, from /proc: ROOT records with their state (join_ts 0: it
 * is tracked from the start), or, for a process that joined at join_ts, JOIN records for
 * those the probes did not name (all but skip_tid) and the state of each.
 */
static void emit_process_threads(struct rec *r, pid_t tgid, pid_t skip_tid, __u64 join_ts)
{
	char path[64];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", tgid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		pid_t tid = atoi(de->d_name);

		if (tid <= 0)
			continue;
		if (!join_ts) {
			emit_root_task(r, tgid, tid);
			continue;
		}
		if (tid != skip_tid) {
			struct iowhy_task t = {};

			t.hdr.type = IOWHY_REC_TASK;
			t.hdr.size_bytes = sizeof(t);
			t.hdr.ts_ns = join_ts;
			t.tgid = tgid;
			t.tid = tid;
			t.event_u16 = IOWHY_TASK_JOIN;
			read_comm(tgid, tid, t.comm);
			add_record(r, IOWHY_REC_TASK, &t);
		}
		emit_thread_state(r, tgid, tid);
	}
	closedir(d);
}

/* Track the processes of the cgroup at `dir` and below; returns how many were new. */
static int track_dir(struct rec *r, int fd, const char *dir, int depth)
{
	char path[PATH_MAX], line[32];
	struct dirent *de;
	int n = 0;
	FILE *f;
	DIR *d;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		pid_t tgid = atoi(line);

		/* already tracked: listed twice (a threaded subtree), or it joined meanwhile */
		if (tgid <= 0 || tracked_already(fd, tgid))
			continue;
		if (track_pid(fd, tgid) == 0) {
			emit_process_threads(r, tgid, -1, 0);
			n++;
		}
	}
	if (f)
		fclose(f);
	if (depth >= CGROUP_WALK_DEPTH || !(d = opendir(dir)))
		return n;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n += track_dir(r, fd, path, depth + 1);
	}
	closedir(d);
	return n;
}

/*
 * Attach mode with --cgroup: the processes in the cgroup now (the probes are attached, so
 * one that joins meanwhile is tracked by them and skipped here), and a way to see the
 * cgroup removed: an inotify descriptor that polls readable once its directory is gone
 * (target_exited), since a removed cgroup can have no process again.
 */
void track_cgroup(struct rec *r)
{
	int fd = bpf_map__fd(r->skel->maps.tracked);

	track_dir(r, fd, r->env.cgroup, 0);
	if (!r->env.cmd) {
		r->target_pidfd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
		if (r->target_pidfd >= 0 &&
		    inotify_add_watch(r->target_pidfd, r->env.cgroup, IN_DELETE_SELF) < 0) {
			close(r->target_pidfd);
			r->target_pidfd = -1;
		}
	}
}

/*
 * A task record from the probes: for a JOIN, the process's other threads are named
 * (JOIN records at the same time) and the state of each is read, as for the processes
 * tracked at the start.
 */
void cgroup_task_seen(struct rec *r, const struct iowhy_task *t)
{
	if (t->event_u16 == IOWHY_TASK_JOIN)
		emit_process_threads(r, (pid_t)t->tgid, (pid_t)t->tid, t->hdr.ts_ns);
}
