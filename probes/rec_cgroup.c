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

/* A cgroup's file handle: kernfs's, 8 bytes, the kernel's cgroup id. */
struct cg_handle {
	struct file_handle fh;
	unsigned char id[8];
};

/*
 * The cgroup id of the cgroup v2 directory `path` (as name_to_handle_at() takes it,
 * relative to dirfd, with its AT_* flags): 0 and the id, or -1 (a handle of another
 * size, or errno).
 */
static int cgroup_id_at(int dirfd, const char *path, int flags, __u64 *id)
{
	struct cg_handle h = { .fh = { .handle_bytes = 8 } };
	int mount_id;

	if (name_to_handle_at(dirfd, path, &h.fh, &mount_id, flags) || h.fh.handle_bytes != 8)
		return -1;
	memcpy(id, h.fh.f_handle, 8);
	return 0;
}

/*
 * PATH must be a directory of a cgroup v2 hierarchy: 0 and its id (the kernel's cgroup
 * id, as name_to_handle_at() gives it and the probes read it), or one line and -1.
 */
int cgroup_check(const char *path, __u64 *id)
{
	struct statfs sf;
	struct stat st;

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
	if (cgroup_id_at(AT_FDCWD, path, 0, id)) {
		fprintf(stderr, "iowhy-record: --cgroup %s: cannot read its cgroup id: %s\n", path,
			strerror(errno));
		return -1;
	}
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
			t.cgroup_id = cgroup_of_thread(r, tgid, tid);
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

/* ------------------------------------------------------ the tasks' cgroups --- */

/*
 * Every task record carries the cgroup v2 id of its task: the probes read it, and the
 * recorder reads /proc/TGID/task/TID/cgroup for the tasks it names itself. TRAILER
 * `cgroups` (and PROGRESS, the ones new since the last) maps each id to its path below
 * the cgroup2 mount, as /proc/PID/cgroup shows it. An id the probes bring is looked up
 * once, when first seen, by the id itself: it is the cgroup's file handle on the cgroup2
 * mount (open_by_handle_at, then the path of what that opened). A cgroup removed before
 * then has no path (null): the report counts its tasks as in an unknown cgroup.
 */
#ifndef FILEID_KERNFS
#define FILEID_KERNFS 0xfe /* include/linux/exportfs.h: kernfs's handles, 8 bytes (the id) */
#endif
#define CGROUPS_MAX 65536 /* entries of TRAILER `cgroups` (a format list's limit) */

/* mountinfo's octal escapes (\040 for a space) undone in place */
static void unescape_octal(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* The first cgroup2 mount, opened (the handles' mount), and its mount point: looked up
 * at the table's first use. */
static void cg_init(struct rec *r)
{
	struct cgtable *c = &r->cg;
	char line[2 * PATH_MAX], mnt[PATH_MAX], fstype[64];
	FILE *f;

	if (c->init)
		return;
	c->init = 1;
	c->mount_fd = -1;
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(sep + 3, "%63s", fstype) != 1 || strcmp(fstype, "cgroup2") ||
		    sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		unescape_octal(mnt);
		c->mount_fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (c->mount_fd >= 0) {
			snprintf(c->mount, sizeof(c->mount), "%s", mnt);
			break;
		}
	}
	if (f)
		fclose(f);
}

static struct cgpath *cg_find(struct cgtable *c, __u64 id)
{
	if (c->last < c->n && c->v[c->last].id == id)
		return &c->v[c->last];
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].id == id) {
			c->last = i;
			return &c->v[i];
		}
	}
	return NULL;
}

/* Past CGROUPS_MAX, or out of memory, an id is not named: its tasks count as unknown. */
static void cg_add(struct cgtable *c, __u64 id, const char *path)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct cgpath *v = c->n < CGROUPS_MAX ? realloc(c->v, cap * sizeof(*v)) : NULL;

		if (!v) {
			c->full = 1;
			return;
		}
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n].id = id;
	c->v[c->n].path = path ? strdup(path) : NULL;
	c->last = c->n++;
}

/* `abs` (a path under the mount point) as the hierarchy names it ("/" for its root), or
 * NULL when it is not under it or the directory is gone. */
static const char *below_mount(struct cgtable *c, const char *abs)
{
	size_t m = strlen(c->mount), n = strlen(abs);
	static const char gone[] = " (deleted)";

	if (n >= sizeof(gone) - 1 && !strcmp(abs + n - (sizeof(gone) - 1), gone))
		return NULL;
	if (m == 1) /* mounted at "/" */
		return abs;
	if (strncmp(abs, c->mount, m) || (abs[m] && abs[m] != '/'))
		return NULL;
	return abs[m] ? abs + m : "/";
}

/* A cgroup id first seen: its path, from the id (open_by_handle_at). */
static void cg_lookup(struct rec *r, __u64 id)
{
	struct cg_handle h = { .fh = { .handle_bytes = 8, .handle_type = FILEID_KERNFS } };
	char link[64], buf[PATH_MAX];
	const char *path = NULL;
	ssize_t n;
	int fd = -1;

	memcpy(h.fh.f_handle, &id, 8);
	if (r->cg.mount_fd >= 0)
		fd = open_by_handle_at(r->cg.mount_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			path = below_mount(&r->cg, buf);
		}
	}
	cg_add(&r->cg, id, path);
}

/* A task record's cgroup id: named in the table if it is new (once the table is full, a
 * new id costs no lookup: it stays unnamed, as cg_add says). */
void cgroup_seen(struct rec *r, __u64 id)
{
	cg_init(r);
	if (id && !r->cg.full && !cg_find(&r->cg, id))
		cg_lookup(r, id);
}

/* The cgroup v2 id of a thread, from /proc (0: unknown), named in the table. */
__u64 cgroup_of_thread(struct rec *r, pid_t tgid, pid_t tid)
{
	char path[64], line[PATH_MAX + 8];
	__u64 id = 0;
	FILE *f;

	cg_init(r);
	if (r->cg.mount_fd < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/cgroup", tgid, tid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *rel = line + 3;

		if (strncmp(line, "0::/", 4))
			continue;
		rel[strcspn(rel, "\n")] = 0;
		if (!cgroup_id_at(r->cg.mount_fd, rel[1] ? rel + 1 : "", rel[1] ? 0 : AT_EMPTY_PATH,
				  &id) && !cg_find(&r->cg, id))
			cg_add(&r->cg, id, rel);
		break;
	}
	if (f)
		fclose(f);
	return id;
}

/* `, "cgroups": [{"id": N, "path": P}, ...]` (all, or those new since the last call
 * with since_last); nothing when there are none. */
void cgroups_json(struct rec *r, FILE *f, int since_last)
{
	struct cgtable *c = &r->cg;
	size_t from = since_last ? c->reported : 0;

	if (since_last)
		c->reported = c->n;
	if (from >= c->n)
		return;
	fprintf(f, ", \"cgroups\": [");
	for (size_t i = from; i < c->n; i++) {
		fprintf(f, "%s{\"id\": %llu, \"path\": ", i > from ? ", " : "",
			(unsigned long long)c->v[i].id);
		if (c->v[i].path)
			json_str(f, c->v[i].path);
		else
			fprintf(f, "null");
		fprintf(f, "}");
	}
	fprintf(f, "]");
}

/*
 * --flight: the cgroup of every live tracked thread as its first task record named it,
 * so that a dump names the cgroup of a thread whose task records are older than its
 * window (TRAILER `thread_cgroups`). A thread's entry goes at its DEAD record. At most
 * THREADS_MAX threads (2 MiB); past them a thread is not kept (counted), and a dump
 * leaves it to its own records.
 */
#define THREADS_MAX 65536

static size_t th_home(const struct cgtable *c, __u32 tid)
{
	return (size_t)(tid * 2654435761u) & (c->th_cap - 1);
}

static size_t th_slot(const struct cgtable *c, __u32 tid)
{
	size_t i = th_home(c, tid);

	while (c->th[i].used && c->th[i].tid != tid)
		i = (i + 1) & (c->th_cap - 1);
	return i;
}

static int th_grow(struct cgtable *c)
{
	size_t cap = c->th_cap ? 2 * c->th_cap : 1024, ocap = c->th_cap;
	struct thread_cg *old = c->th, *nw = calloc(cap, sizeof(*nw));

	if (!nw)
		return -1;
	c->th = nw;
	c->th_cap = cap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].used)
			c->th[th_slot(c, old[i].tid)] = old[i];
	free(old);
	return 0;
}

/* Linear probing's deletion: the entries after it move back where a lookup finds them. */
static void th_del(struct cgtable *c, size_t i)
{
	size_t mask = c->th_cap - 1, j = i;

	c->th[i].used = 0;
	c->th_n--;
	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!c->th[j].used)
			return;
		k = th_home(c, c->th[j].tid);
		/* j stays unless its home is cyclically outside (i, j] */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			c->th[i] = c->th[j];
			c->th[j].used = 0;
			i = j;
		}
	}
}

void cgroup_thread_seen(struct rec *r, const struct iowhy_task *t)
{
	struct cgtable *c = &r->cg;
	size_t i;

	if (c->th_cap) {
		i = th_slot(c, t->tid);
		if (c->th[i].used) {
			if (t->event_u16 == IOWHY_TASK_DEAD)
				th_del(c, i);
			else if (t->event_u16 == IOWHY_TASK_FORK || t->event_u16 == IOWHY_TASK_ROOT ||
				 t->event_u16 == IOWHY_TASK_JOIN || !c->th[i].id)
				c->th[i].id = t->cgroup_id; /* a new life (a tid reused), or the
							     * first record that names one */
			return;
		}
	}
	if (t->event_u16 == IOWHY_TASK_DEAD)
		return;
	if (c->th_n >= THREADS_MAX || ((c->th_n + 1) * 2 > c->th_cap && th_grow(c))) {
		c->th_full++;
		return;
	}
	i = th_slot(c, t->tid);
	c->th[i] = (struct thread_cg){ .tid = t->tid, .used = 1, .id = t->cgroup_id };
	c->th_n++;
}

/* `, "thread_cgroups": {"threads": [[tid, id], ...], "not_kept": N}`: the live threads
 * that have one, and those the table had no room for. */
void thread_cgroups_json(struct rec *r, FILE *f)
{
	const struct cgtable *c = &r->cg;
	int first = 1;

	fprintf(f, ", \"thread_cgroups\": {\"threads\": [");
	for (size_t i = 0; i < c->th_cap; i++) {
		if (!c->th[i].used || !c->th[i].id)
			continue;
		fprintf(f, "%s[%u, %llu]", first ? "" : ", ", c->th[i].tid,
			(unsigned long long)c->th[i].id);
		first = 0;
	}
	fprintf(f, "], \"not_kept\": %llu}", (unsigned long long)c->th_full);
}

void cgroups_free(struct rec *r)
{
	for (size_t i = 0; i < r->cg.n; i++)
		free(r->cg.v[i].path);
	free(r->cg.v);
	free(r->cg.th);
	if (r->cg.init && r->cg.mount_fd >= 0)
		close(r->cg.mount_fd);
	memset(&r->cg, 0, sizeof(r->cg));
}
