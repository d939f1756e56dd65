// SPDX-License-Identifier: GPL-2.0
/* iowhy-record, the workload: launch (run mode), the target's tree (attach mode). */
#include "recorder.h"

int track_pid(int fd, pid_t pid)
{
	__u32 word = (__u32)pid >> 6;
	__u64 bits = 0;

	if (bpf_map_lookup_elem(fd, &word, &bits))
		return -errno;
	bits |= 1ULL << (pid & 63);
	return bpf_map_update_elem(fd, &word, &bits, BPF_ANY) ? -errno : 0;
}

/*
 * A thread's state as /proc shows it now (the probes are attached, so whatever it does
 * next is recorded): stat field 3, the syscall it is blocked in with its first argument,
 * and wchan. A thread that is asleep has no switch-out in the trace; this says why.
 */
void emit_thread_state(struct rec *r, pid_t tgid, pid_t tid)
{
	struct iowhy_thread t = {};
	char path[96], buf[512], *p;
	FILE *f;

	t.hdr.type = IOWHY_REC_THREAD;
	t.hdr.size_bytes = sizeof(t);
	t.hdr.ts_ns = now_ns(CLOCK_MONOTONIC);
	t.tgid = tgid;
	t.tid = tid;
	t.syscall_nr = -2;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", tgid, tid);
	f = fopen(path, "re");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);

		buf[n] = 0;
		fclose(f);
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2])
			t.state_u8 = (__u8)p[2];
		if (p && (p = strchr(buf, '('))) {
			size_t len = strrchr(buf, ')') - p - 1;

			memcpy(t.comm, p + 1, len < sizeof(t.comm) ? len : sizeof(t.comm) - 1);
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", tgid, tid);
	f = fopen(path, "re");
	if (f && fgets(buf, sizeof(buf), f)) {
		long long nr;
		unsigned long long a0;

		if (!strncmp(buf, "running", 7)) {
			t.flags_u16 |= IOWHY_THR_ON_CPU;
		} else if (sscanf(buf, "%lld %llx", &nr, &a0) == 2) {
			t.syscall_nr = (__s32)nr;
			t.arg0 = nr >= 0 ? a0 : 0;
		} else if (sscanf(buf, "%lld", &nr) == 1) {
			t.syscall_nr = (__s32)nr;
		}
	} else {
		t.flags_u16 |= IOWHY_THR_NO_SYSCALL;
	}
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", tgid, tid);
	f = fopen(path, "re");
	if (f) {
		size_t n = fread(buf, 1, sizeof(t.wchan) - 1, f);

		buf[n] = 0;
		fclose(f);
		if (strcmp(buf, "0"))
			memcpy(t.wchan, buf, n);
	}
	add_record(r, IOWHY_REC_THREAD, &t);
}

/* A thread's name from /proc ("" when it cannot be read), IOWHY_COMM_LEN bytes. */
void read_comm(pid_t tgid, pid_t tid, char *out)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", tgid, tid);
	f = fopen(path, "r");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	memcpy(out, comm, IOWHY_COMM_LEN - 1);
}

void emit_root_task(struct rec *r, pid_t tgid, pid_t tid)
{
	struct iowhy_task t = {};

	read_comm(tgid, tid, t.comm);
	t.hdr.type = IOWHY_REC_TASK;
	t.hdr.size_bytes = sizeof(t);
	t.hdr.ts_ns = now_ns(CLOCK_MONOTONIC);
	t.tgid = tgid;
	t.tid = tid;
	t.event_u16 = IOWHY_TASK_ROOT;
	t.cgroup_id = cgroup_of_thread(r, tgid, tid);
	add_record(r, IOWHY_REC_TASK, &t);
	emit_thread_state(r, tgid, tid);
}

/*
 * What /proc/PID/stat says of an attach target: 0 when it can be recorded, else one line
 * on stderr and -1. A zombie never exits again (attach would never end); PID 1 and the
 * kernel threads (kthreadd, PID 2, forks them all) make attach follow the whole system.
 */
#define PF_KTHREAD_FLAG 0x00200000
int check_target(pid_t pid, int force)
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
int target_exited(int pidfd, pid_t pid)
{
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		return poll(&p, 1, 0) > 0;
	}
	if (pid <= 0) /* --cgroup: no target process */
		return 0;
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

/* Run mode: fork CMD, track it, let it exec; attach mode: track the target's tree. */
int start_workload(struct rec *r)
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
		if (r->env.cgroup)
			track_cgroup(r);
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
		if (r->env.cgroup) {
			track_cgroup(r);
		} else {
			r->target_pidfd = syscall(SYS_pidfd_open, r->env.pid, 0);
			track_tree(r, bpf_map__fd(r->skel->maps.tracked), r->env.pid);
		}
		cpu_ns(&r->cpu0_user, &r->cpu0_sys);
		r->start_ns = now_ns(CLOCK_MONOTONIC);
		r->stop_reason = "target-exit";
	}
	return 0;
}
