// SPDX-License-Identifier: GPL-2.0
/* iowhy-record, the trace file: safe creation, chunks, the header, RECORDER and TRAILER chunks. */
#include "recorder.h"

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

int check_output(const char *path)
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

int open_output(struct rec *r, const char *path)
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
int commit_output(struct rec *r, const char *path)
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

/*
 * The chunks' compression: one zstd context for every chunk, at ZSTD_LEVEL_DEFAULT or
 * IOWHY_ZSTD_LEVEL (0: plain chunks). Each chunk is one zstd frame of its own, so every
 * complete chunk reads alone, whatever happened to the rest of the file. The record types
 * that have a compacted form (rec_compact.c) are compacted first.
 */
int writer_init(struct rec *r)
{
	const char *e = getenv("IOWHY_ZSTD_LEVEL");
	long level = ZSTD_LEVEL_DEFAULT;

	if (e && *e) {
		char *end;

		errno = 0;
		level = strtol(e, &end, 10);
		if (errno || *end || level < 0 || level > ZSTD_maxCLevel()) {
			fprintf(stderr, "iowhy: IOWHY_ZSTD_LEVEL=%s is not a zstd level (give 0, for "
					"plain chunks, to %d)\n", e, ZSTD_maxCLevel());
			return 1;
		}
	}
	r->w.zlevel = (int)level;
	if (!level)
		return 0;
	r->w.zcap = ZSTD_compressBound(TBUF_BYTES);
	r->w.zbuf = malloc(r->w.zcap);
	r->w.tbuf = malloc(TBUF_BYTES);
	r->w.zctx = ZSTD_createCCtx();
	if (!r->w.zbuf || !r->w.tbuf || !r->w.zctx || compact_init(&r->w.cw, CHUNK_BYTES) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(r->w.zctx, ZSTD_c_compressionLevel, (int)level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(r->w.zctx, ZSTD_c_contentSizeFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(r->w.zctx, ZSTD_c_checksumFlag, 1))) {
		fprintf(stderr, "failed to set up zstd compression: %s\n", strerror(ENOMEM));
		return 1;
	}
	return 0;
}

void writer_free(struct rec *r)
{
	ZSTD_freeCCtx(r->w.zctx);
	compact_free(&r->w.cw);
	free(r->w.zbuf);
	free(r->w.tbuf);
	r->w.zctx = NULL;
	r->w.zbuf = NULL;
	r->w.tbuf = NULL;
}

/*
 * data compressed into r->w.zbuf: its length, or 0 to write the chunk plain. The records of
 * a record chunk are compacted (rec_compact.c: *flags gets IOWHY_CHUNK_COMPACT, *dlen the
 * compacted length) when their type has a compacted form, else byte-transposed (byte b of
 * record i at b * count + i): the bytes of one field, alike from record to record, then sit
 * side by side.
 */
static size_t compress_chunk(struct rec *r, __u16 type, __u16 rec_size, __u32 count,
			     const void *data, size_t len, __u16 *flags, size_t *dlen)
{
	const unsigned char *src = data;
	size_t n, clen;
	__u64 t0;

	*flags = 0;
	*dlen = len;
	if (!r->w.zctx || !len || ZSTD_compressBound(len) > r->w.zcap)
		return 0;
	t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	clen = rec_size && count > 1 ? compact_bytes(type, rec_size, count) : 0;
	if (clen && len == (size_t)rec_size * count && clen <= TBUF_BYTES &&
	    !compact_records(&r->w.cw, type, data, rec_size, count, r->w.tbuf)) {
		data = r->w.tbuf;
		*flags = IOWHY_CHUNK_COMPACT;
		*dlen = clen;
	} else if (rec_size && count > 1) {
		if (len != (size_t)rec_size * count || len > TBUF_BYTES) {
			r->w.zstd_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
			return 0;
		}
		for (__u32 i = 0; i < count; i++, src += rec_size)
			for (__u16 b = 0; b < rec_size; b++)
				r->w.tbuf[(size_t)b * count + i] = src[b];
		data = r->w.tbuf;
	}
	n = ZSTD_compress2(r->w.zctx, r->w.zbuf, r->w.zcap, data, *dlen);
	r->w.zstd_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	if (ZSTD_isError(n) || n >= len) { /* no gain: plain */
		*flags = 0;
		*dlen = len;
		return 0;
	}
	*flags |= IOWHY_CHUNK_ZSTD;
	r->w.zstd_in_bytes += len;
	r->w.zstd_out_bytes += n;
	return n;
}

static void write_chunk(struct rec *r, __u16 type, __u16 rec_size, __u32 count,
			const void *data, size_t len)
{
	static const char zeros[8];
	struct iowhy_chunk_hdr h = {};
	size_t stored, pad, z, dlen;
	const void *out;
	__u16 flags;
	uLong crc;
	int err;

	if (r->w.failed || r->top) /* --top keeps nothing (rec_top.c) */
		return;
	z = compress_chunk(r, type, rec_size, count, data, len, &flags, &dlen);
	out = z ? r->w.zbuf : data;
	stored = z ? z : len;
	pad = (8 - stored % 8) % 8;
	memcpy(h.magic, IOWHY_CHUNK_MAGIC, 4);
	h.type = type | flags;
	h.rec_size_bytes = rec_size;
	h.count = count;
	h.payload_bytes = stored + pad;
	h.data_bytes = dlen;
	crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, out, stored);
	crc = crc32(crc, (const Bytef *)zeros, pad);
	h.crc32 = crc;
	h.seq = r->w.seq;
	if (r->fl && flight_keep(r, &h, out, stored, pad, type, data, rec_size, count)) {
		r->w.seq++; /* --flight: kept in memory (rec_flight.c), not written */
		return;
	}
	err = write_all(r->w.fd, &h, sizeof(h));
	if (!err)
		err = write_all(r->w.fd, out, stored);
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
	r->w.good_off += sizeof(h) + stored + pad;
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

void flush_all(struct rec *r)
{
	for (int t = 1; t <= IOWHY_REC_MAX; t++)
		flush_type(r, t);
}

void add_record(struct rec *r, int t, const void *data)
{
	struct recbuf *b = &r->w.bufs[t];

	if (b->len + rec_sizes[t] > CHUNK_BYTES)
		flush_type(r, t);
	memcpy(b->data + b->len, data, rec_sizes[t]);
	b->len += rec_sizes[t];
	b->count++;
	b->total++;
	if (t == IOWHY_REC_TASK && r->fl) /* --flight: each live thread's first cgroup */
		cgroup_thread_seen(r, data);
}

void sb_open(struct sbuf *s)
{
	s->p = NULL;
	s->len = 0;
	s->f = open_memstream(&s->p, &s->len);
}

void sb_close_write(struct rec *r, struct sbuf *s, __u16 type)
{
	fclose(s->f);
	write_chunk(r, type, 0, 1, s->p, s->len);
	free(s->p);
}

void json_str(FILE *f, const char *s)
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

/*
 * A command-line argument as a JSON string a reader keeps: the format's strings hold at
 * most 65,536 characters (docs/trace-format.md, VALIDATION), and the kernel takes
 * arguments of up to 128 KiB. A longer one is cut at CMD_ARG_KEEP bytes (at a UTF-8
 * character's start) and ends in "[cut: N bytes in all]": the trace says so, and it
 * never reads as damaged (analyzer/iowhy/names.py, clip_command, is the same).
 */
#define CMD_LIMIT 65536 /* characters of a string, entries of a list */
#define CMD_ARG_KEEP 65000

static void json_arg(FILE *f, const char *s)
{
	size_t n = strlen(s), keep = n;
	char *cut;

	if (n <= CMD_LIMIT) {
		json_str(f, s);
		return;
	}
	keep = CMD_ARG_KEEP;
	while (keep && ((unsigned char)s[keep] & 0xC0) == 0x80) /* not inside a character */
		keep--;
	cut = malloc(keep + 48);
	if (!cut) {
		json_str(f, "[cut: out of memory]");
		return;
	}
	memcpy(cut, s, keep);
	snprintf(cut + keep, 48, "[cut: %zu bytes in all]", n);
	json_str(f, cut);
	free(cut);
}

/* The command line as a JSON array a reader keeps (json_arg; at most 65,536 entries: past
 * that, the first 65,535 and "[cut: N arguments in all]"). */
static void json_argv(FILE *f, char **argv, int argc, int *cut_args, int *cut_bytes)
{
	int keep = argc > CMD_LIMIT ? CMD_LIMIT - 1 : argc; /* and one saying how many */

	for (int i = 0; i < keep; i++) {
		fprintf(f, "%s", i ? ", " : "");
		if (strlen(argv[i]) > CMD_LIMIT)
			(*cut_bytes)++;
		json_arg(f, argv[i]);
	}
	if (argc > CMD_LIMIT) {
		fprintf(f, ", \"[cut: %d arguments in all]\"", argc);
		*cut_args = 1;
	}
}

/* The file header of a trace (trace-format.md, "File header"): this build's version and
 * sizes, the byte-order tag, the wall-clock time of its making. */
void fill_file_hdr(struct iowhy_file_hdr *fh)
{
	memset(fh, 0, sizeof(*fh));
	memcpy(fh->magic, IOWHY_FILE_MAGIC, 8);
	fh->version = IOWHY_FORMAT_VERSION;
	fh->hdr_bytes = sizeof(*fh);
	fh->chunk_hdr_bytes = sizeof(struct iowhy_chunk_hdr);
	fh->endian_tag = 0x01020304;
	fh->created_realtime_ns = now_ns(CLOCK_REALTIME);
}

int write_header(struct rec *r)
{
	int err;

	/* The file header and the metadata gathered by `iowhy record`; --flight writes the
	 * header with each dump (rec_flight.c). */
	if (!r->fl) {
		struct iowhy_file_hdr fh;

		fill_file_hdr(&fh);
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

/* The RECORDER chunk: how this recording is made. */
void write_recorder_chunk(struct rec *r)
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
	if (r->env.cmd) {
		int argc = 0, cut_args = 0, cut_bytes = 0;

		while (r->env.cmd[argc])
			argc++;
		json_argv(s.f, r->env.cmd, argc, &cut_args, &cut_bytes);
		if ((cut_args || cut_bytes) && !r->env.quiet)
			fprintf(stderr, "iowhy-record: the command line is longer than a trace keeps: "
					"%s%s%s cut (the trace's command says where)\n",
				cut_bytes ? "arguments over 65,536 bytes" : "",
				cut_bytes && cut_args ? " and " : "",
				cut_args ? "arguments past the 65,535th" : "");
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
		fprintf(s.f, "%s\"%u:%u\"", i ? ", " : "", iowhy_dev_major(r->env.devs[i]),
			iowhy_dev_minor(r->env.devs[i]));
	fprintf(s.f, "], \"clock\": {\"realtime_minus_monotonic_ns\": %lld}, \"probes\": {",
		(long long)(rt - mono));
	for (int i = 0; i < r->nprobes; i++) {
		fprintf(s.f, "%s\"%s\": ", i ? ", " : "", r->probes[i].tp);
		json_str(s.f, r->probes[i].how);
	}
	fprintf(s.f, "}}");
	sb_close_write(r, &s, IOWHY_CHUNK_RECORDER);
}

/* The TRAILER, the exit status, and what the user is told. */
void write_trailer(struct rec *r)
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
		     "\"sleeps_open_at_stop\": %llu, "
		     "\"write_probes_ns\": %llu, \"rq_seq_stride\": %d, "
		     "\"recorder_cpu_ns\": {\"user\": %llu, \"system\": %llu}, "
		     "\"chunk_zstd\": {\"level\": %d, \"data_bytes\": %llu, \"stored_bytes\": %llu, "
		     "\"cpu_ns\": %llu}, ",
		(unsigned long long)r->end_ns, r->stop_reason, status,
		(unsigned long long)r->w.incomplete_requests, (unsigned long long)r->w.open_calls,
		(unsigned long long)r->w.open_sleeps,
		(unsigned long long)(r->lazy_writes ? r->write_probes_ns : r->start_ns),
		libbpf_num_possible_cpus(), (unsigned long long)(r->cpu1_user - r->cpu0_user),
		(unsigned long long)(r->cpu1_sys - r->cpu0_sys), r->w.zlevel,
		(unsigned long long)r->w.zstd_in_bytes, (unsigned long long)r->w.zstd_out_bytes,
		(unsigned long long)r->w.zstd_cpu_ns);
	stats_write(r, s.f);
	write_counts_json(r, s.f, r->counters_fd);
	cgroups_json(r, s.f, 0);
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
