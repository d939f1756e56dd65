// SPDX-License-Identifier: GPL-2.0-only
/*
 * emudisk: an emulated disk with exact ground truth.
 *
 * A FUSE daemon serving one regular file, disk.img, backed by a sparse local file.
 * Attach disk.img to a loop device and real filesystems run on it; every read, write
 * and flush the loop device sends arrives here (each open sets direct_io, so there
 * is no FUSE page cache), is charged what a modelled disk would charge, really takes
 * that long (an absolute CLOCK_MONOTONIC deadline), and is logged as one fixed-width
 * ground-truth record.
 *
 *   emudisk --image BACKING --size BYTES --preset hdd-7200|ssd|ram --cache on|off \
 *           --truth FILE [--pidfile FILE] [--rt] [overrides] [-s] [-d] [-o opt,...] MOUNTPOINT
 *
 * Build: gcc -O2 -Wall lab/emudisk.c -o lab/emudisk $(pkg-config --cflags --libs fuse3) -lm
 * (libraries after the source: Debian links --as-needed).
 * Always runs in the foreground; SIGTERM/SIGINT/SIGHUP unmount and exit 0; SIGUSR1
 * appends a MARK record and writes the buffered records out.
 *
 * THE MODEL (all times integer ns; one request at a time: a single head)
 *
 * Requests are served strictly one at a time, in arrival order (a FIFO ticket lock
 * around the model and the sleep); queue_ns is the time a request waited for the head.
 * (A loop device's worker already sends one request at a time per cgroup, so queue_ns
 * is usually near zero: requests wait in the kernel, where iowhy sees them.)
 *
 * Positioning. The head sits where the last media access ended. An access starting
 * exactly there is contiguous and costs nothing. Any other access pays a seek plus
 * a rotational latency:
 *     seek(d)  = t2t + (full - t2t) * sqrt(d / span)     d = distance in 512 B sectors
 *                                                         (at least 1), span = disk size
 *     rot      = half a revolution = 30e9 / rpm           (deterministic mean latency)
 * For hdd-7200 (t2t 1 ms, full stroke 18 ms): seek(1 sector) ~ 1.0 ms, seek(span/4)
 * = 9.5 ms, seek(span) = 18 ms, rot = 4.167 ms. Between two uniformly random points
 * E[sqrt(d/span)] = 8/15, so the implied average seek is t2t + (full - t2t) * 8/15
 * = 10.07 ms, and an average random access costs ~14.2 ms plus transfer (~70 IOPS).
 * The header of the truth file records the implied average seek for the parameters
 * in force. Presets ssd and ram have no positioning cost at all.
 *
 * Transfer. Media: bytes * 1e9 / media_rate (floor). Interface: bytes * 1e9 / iface_rate.
 *
 * Volatile write cache (--cache on). A write is absorbed: it costs only its interface
 * transfer, does not move the head, and its extent joins a dirty list (newer data
 * replaces any overlapped dirty bytes; a write contiguous with the newest extent
 * extends it, up to 1 MiB). If the dirty bytes would exceed the cache size, the
 * oldest extents are destaged first, synchronously inside that write (positioning +
 * media transfer each, moving the head). A flush (FUSE fsync, data-only or not)
 * destages every dirty extent in elevator order -- ascending offset starting at the
 * head, wrapping once to the lowest (C-SCAN), contiguous extents merged -- paying
 * positioning + media transfer for each, then the fixed flush overhead. A write
 * larger than the whole cache bypasses it. A read entirely covered by dirty extents
 * is served from the cache at interface rate without moving the head; any other read
 * goes to the media.
 * Write cache off: every write pays positioning + media transfer; a flush costs only
 * the fixed overhead.
 *
 * Not modelled: FUSE "flush" (sent at close(2), it is not a cache flush: ignored and
 * not logged), power loss (the backing file is never fsynced: durability is emulated).
 * fallocate: PUNCH_HOLE (loop discard, and write-zeroes with unmap) is logged as
 * DISCARD at no cost and drops overlapped dirty bytes; ZERO_RANGE is charged as a
 * write. Both punch the hole in the backing file.
 *
 * The daemon does the real pread/pwrite inside the modelled window, so a request
 * whose real I/O outlasts its modelled cost ends late: end_ns - start_ns >= model_ns
 * always; the excess is the emulation's own overhead.
 *
 * GROUND TRUTH (--truth FILE, truncated at start, little-endian)
 *
 * A 256-byte header, then 128-byte records in serving order. Records are buffered
 * and written as whole records when the buffer fills (512 records), when a record
 * arrives more than a second after the oldest buffered one, on SIGUSR1 and at exit;
 * a reader must still tolerate a torn last record (a crash or a full disk mid-write).
 *
 * header:  0 char[8] magic "EMUDTRU1"   8 u32 version (1)   12 u32 header_size (256)
 *         16 u32 record_size (128)      20 u32 cache_on     24 u64 size_bytes
 *         32 u64 rpm    40 u64 t2t_ns   48 u64 full_stroke_ns   56 u64 rot_ns
 *         64 u64 media_rate (B/s)       72 u64 iface_rate (B/s) 80 u64 cache_bytes
 *         88 u64 flush_ns               96 u64 span_sectors    104 u64 avg_seek_ns
 *        112 u64 started_ns (CLOCK_MONOTONIC)  120 char[16] preset   136.. zero
 * record:  0 u32 kind: 1 read, 2 write, 3 flush, 4 discard, 5 mark (SIGUSR1)
 *          4 u32 flags: 1 cache on, 2 served by the cache (absorbed write, read hit),
 *                       4 bypassed the cache (write larger than it), 8 zero-range,
 *                       16 datasync flush, 32 backing I/O failed (error returned)
 *          8 u64 seq (0, 1, 2, ... in file order)
 *         16 u64 start_ns (got the head)     24 u64 end_ns (about to reply)
 *         32 u64 offset_bytes                40 u64 len_bytes
 *         48 u64 positioning_ns (this request's own seek + rotation)
 *         56 u64 transfer_ns (media, or interface when served by the cache)
 *         64 u64 destage_ns (positioning + transfer of extents destaged by this request)
 *         72 u64 destage_positioning_ns (the positioning part of destage_ns)
 *         80 u64 queue_ns (waiting for the head; arrival = start_ns - queue_ns)
 *         88 u64 overhead_ns (fixed flush overhead)
 *         96 u64 model_ns = positioning + transfer + destage + overhead
 *        104 u64 destage_bytes      112 u32 destage_extents (after merging)
 *        116 u32 backing_ns: time from start_ns to the sleep: the model's bookkeeping
 *                and the real pread/pwrite/fallocate on the backing file (saturates at
 *                2^32-1); when it exceeds model_ns the request ends late because of
 *                the backing storage, not the model
 *        120 u64 head_after (byte offset of the head)
 */

#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000ULL
#define SECTOR 512ULL
#define MERGE_CAP (1ULL << 20)
#define IMG_NAME "disk.img"
#define IMG_PATH "/" IMG_NAME

enum { K_READ = 1, K_WRITE = 2, K_FLUSH = 3, K_DISCARD = 4, K_MARK = 5 };
enum {
	F_CACHE_ON = 1, F_CACHED = 2, F_BYPASS = 4, F_ZERO = 8, F_DATASYNC = 16, F_IOERR = 32,
};

struct params {
	char preset[16];
	uint64_t rpm, t2t_ns, full_ns, media_rate, iface_rate, cache_bytes, flush_ns;
};

/* The on-disk record: layout fixed by the comment above (checked below). */
struct rec {
	uint32_t kind, flags;
	uint64_t seq, start_ns, end_ns, offset_bytes, len_bytes;
	uint64_t positioning_ns, transfer_ns, destage_ns, destage_positioning_ns;
	uint64_t queue_ns, overhead_ns, model_ns, destage_bytes;
	uint32_t destage_extents, backing_ns;
	uint64_t head_after;
};
_Static_assert(sizeof(struct rec) == 128, "record must stay 128 bytes");
_Static_assert(offsetof(struct rec, head_after) == 120, "record layout");

struct hdr {
	char magic[8];
	uint32_t version, header_size, record_size, cache_on;
	uint64_t size_bytes, rpm, t2t_ns, full_ns, rot_ns, media_rate, iface_rate;
	uint64_t cache_bytes, flush_ns, span_sectors, avg_seek_ns, started_ns;
	char preset[16];
	char pad[256 - 136];
};
_Static_assert(sizeof(struct hdr) == 256, "header must stay 256 bytes");

/* A dirty cache extent; the list is kept oldest first. */
struct extent {
	uint64_t off, len;
};

static const struct params PRESETS[] = {
	{ "hdd-7200", 7200, 1000000, 18000000, 120000000, 300000000, 16ULL << 20, 100000 },
	{ "ssd", 0, 0, 0, 500000000, 1000000000, 16ULL << 20, 500000 },
	{ "ram", 0, 0, 0, 4000000000ULL, 4000000000ULL, 16ULL << 20, 10000 },
};

static struct {
	struct params p;
	int cache_on;
	uint64_t size, span, rot_ns;
	int fd;

	/* The head: FIFO tickets; everything below is touched only by its holder. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next_ticket, serving;
	uint64_t head;
	struct extent *dirty;
	size_t ndirty, cap;
	uint64_t dirty_bytes;

	/* Truth log, under tmu (taken inside the head, or alone by the signal thread). */
	pthread_mutex_t tmu;
	int tfd;
	char *tbuf;
	size_t tlen, tcap;
	uint64_t tfirst_ns;
	uint64_t seq;
	int twrite_failed;
} D = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.tmu = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
	.tfd = -1,
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline)
{
	struct timespec ts = { .tv_sec = deadline / NS, .tv_nsec = deadline % NS };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- the model ------------------------------------------------------------------ */

static uint64_t xfer_ns(uint64_t bytes, uint64_t rate)
{
	if (!rate)
		return 0;
	return (uint64_t)((unsigned __int128)bytes * NS / rate);
}

static uint64_t seek_ns(uint64_t sectors)
{
	double frac;

	if (!D.p.t2t_ns && !D.p.full_ns)
		return 0;
	frac = sqrt((double)sectors / (double)D.span);
	if (frac > 1.0)
		frac = 1.0;
	return D.p.t2t_ns + (uint64_t)llround((double)(D.p.full_ns - D.p.t2t_ns) * frac);
}

static uint64_t positioning_ns(uint64_t from, uint64_t to)
{
	uint64_t a = from / SECTOR, b = to / SECTOR, d;

	if (from == to)
		return 0;
	d = a > b ? a - b : b - a;
	if (!d)
		d = 1;
	return seek_ns(d) + D.rot_ns;
}

/* A media access: moves the head; returns transfer, stores positioning in *pos. */
static uint64_t media(uint64_t off, uint64_t len, uint64_t *pos)
{
	*pos = positioning_ns(D.head, off);
	D.head = off + len;
	return xfer_ns(len, D.p.media_rate);
}

static void dirty_reserve(size_t n)
{
	if (n <= D.cap)
		return;
	D.cap = D.cap ? D.cap * 2 : 256;
	if (D.cap < n)
		D.cap = n;
	D.dirty = realloc(D.dirty, D.cap * sizeof(*D.dirty));
	if (!D.dirty) {
		fprintf(stderr, "emudisk: out of memory\n");
		abort();
	}
}

static void dirty_remove_at(size_t i)
{
	D.dirty_bytes -= D.dirty[i].len;
	memmove(&D.dirty[i], &D.dirty[i + 1], (D.ndirty - i - 1) * sizeof(*D.dirty));
	D.ndirty--;
}

/* Forget dirty bytes in [off, off+len): newer data or a discard replaces them. */
static void dirty_drop(uint64_t off, uint64_t len)
{
	uint64_t end = off + len;

	for (size_t i = 0; i < D.ndirty;) {
		struct extent *e = &D.dirty[i];
		uint64_t eend = e->off + e->len;

		if (eend <= off || e->off >= end) {
			i++;
		} else if (e->off >= off && eend <= end) {
			dirty_remove_at(i);
		} else if (e->off < off && eend > end) {
			/* split: the tail keeps the same age, so it goes right after */
			dirty_reserve(D.ndirty + 1);
			e = &D.dirty[i];
			memmove(&D.dirty[i + 2], &D.dirty[i + 1],
				(D.ndirty - i - 1) * sizeof(*D.dirty));
			D.dirty[i + 1].off = end;
			D.dirty[i + 1].len = eend - end;
			e->len = off - e->off;
			D.ndirty++;
			D.dirty_bytes -= len;
			i += 2;
		} else if (e->off < off) {
			D.dirty_bytes -= eend - off;
			e->len = off - e->off;
			i++;
		} else {
			D.dirty_bytes -= end - e->off;
			e->len = eend - end;
			e->off = end;
			i++;
		}
	}
}

static void dirty_add(uint64_t off, uint64_t len)
{
	struct extent *last = D.ndirty ? &D.dirty[D.ndirty - 1] : NULL;

	if (last && last->off + last->len == off && last->len + len <= MERGE_CAP) {
		last->len += len;
	} else {
		dirty_reserve(D.ndirty + 1);
		D.dirty[D.ndirty].off = off;
		D.dirty[D.ndirty].len = len;
		D.ndirty++;
	}
	D.dirty_bytes += len;
}

/* Is [off, off+len) entirely dirty? (Extents never overlap.) */
static int dirty_covers(uint64_t off, uint64_t len)
{
	uint64_t end = off + len, covered = 0;

	for (size_t i = 0; i < D.ndirty; i++) {
		uint64_t lo = D.dirty[i].off, hi = D.dirty[i].off + D.dirty[i].len;

		if (lo < off)
			lo = off;
		if (hi > end)
			hi = end;
		if (hi > lo)
			covered += hi - lo;
	}
	return len && covered == len;
}

static void destage_one(struct rec *r, uint64_t off, uint64_t len)
{
	uint64_t pos, x = media(off, len, &pos);

	r->destage_ns += pos + x;
	r->destage_positioning_ns += pos;
	r->destage_bytes += len;
	r->destage_extents++;
}

static int cmp_extent(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Destage everything in C-SCAN order from the head, merging contiguous extents. */
static void destage_all(struct rec *r)
{
	size_t n = 0, start = 0;

	if (!D.ndirty)
		return;
	qsort(D.dirty, D.ndirty, sizeof(*D.dirty), cmp_extent);
	for (size_t i = 0; i < D.ndirty; i++) {
		if (n && D.dirty[n - 1].off + D.dirty[n - 1].len == D.dirty[i].off)
			D.dirty[n - 1].len += D.dirty[i].len;
		else
			D.dirty[n++] = D.dirty[i];
	}
	while (start < n && D.dirty[start].off < D.head)
		start++;
	for (size_t k = 0; k < n; k++) {
		struct extent *e = &D.dirty[(start + k) % n];

		destage_one(r, e->off, e->len);
	}
	D.ndirty = 0;
	D.dirty_bytes = 0;
}

static void model_read(struct rec *r)
{
	if (D.cache_on && dirty_covers(r->offset_bytes, r->len_bytes)) {
		r->flags |= F_CACHED;
		r->transfer_ns = xfer_ns(r->len_bytes, D.p.iface_rate);
	} else {
		r->transfer_ns = media(r->offset_bytes, r->len_bytes, &r->positioning_ns);
	}
}

static void model_write(struct rec *r)
{
	if (!D.cache_on) {
		r->transfer_ns = media(r->offset_bytes, r->len_bytes, &r->positioning_ns);
		return;
	}
	dirty_drop(r->offset_bytes, r->len_bytes);
	if (r->len_bytes > D.p.cache_bytes) {
		r->flags |= F_BYPASS;
		r->transfer_ns = media(r->offset_bytes, r->len_bytes, &r->positioning_ns);
		return;
	}
	while (D.ndirty && D.dirty_bytes + r->len_bytes > D.p.cache_bytes) {
		destage_one(r, D.dirty[0].off, D.dirty[0].len);
		dirty_remove_at(0);
	}
	dirty_add(r->offset_bytes, r->len_bytes);
	r->flags |= F_CACHED;
	r->transfer_ns = xfer_ns(r->len_bytes, D.p.iface_rate);
}

static void model_flush(struct rec *r)
{
	if (D.cache_on)
		destage_all(r);
	r->overhead_ns = D.p.flush_ns;
}

/* ---- ground truth ---------------------------------------------------------------- */

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void truth_flush_locked(void)
{
	if (D.tfd >= 0 && D.tlen && write_full(D.tfd, D.tbuf, D.tlen) < 0 && !D.twrite_failed) {
		D.twrite_failed = 1;
		fprintf(stderr, "emudisk: writing the truth file failed: %s\n", strerror(errno));
	}
	D.tlen = 0;
}

/* Buffered; written out when full or when the oldest record waited a second. */
static void truth_append(struct rec *r)
{
	pthread_mutex_lock(&D.tmu);
	r->seq = D.seq++;
	if (D.tlen + sizeof(*r) > D.tcap || (D.tlen && r->end_ns - D.tfirst_ns > NS))
		truth_flush_locked();
	if (!D.tlen)
		D.tfirst_ns = r->end_ns;
	memcpy(D.tbuf + D.tlen, r, sizeof(*r));
	D.tlen += sizeof(*r);
	pthread_mutex_unlock(&D.tmu);
}

/* SIGUSR1 is blocked everywhere; this thread alone takes it. */
static void *signal_thread(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		struct rec r = { .kind = K_MARK, .head_after = 0 };

		r.start_ns = r.end_ns = now_ns();
		truth_append(&r);
		pthread_mutex_lock(&D.tmu);
		truth_flush_locked();
		pthread_mutex_unlock(&D.tmu);
	}
	return NULL;
}

/* ---- serving a request ------------------------------------------------------------ */

static void head_acquire(void)
{
	uint64_t t;

	pthread_mutex_lock(&D.mu);
	t = D.next_ticket++;
	while (D.serving != t)
		pthread_cond_wait(&D.cv, &D.mu);
	pthread_mutex_unlock(&D.mu);
}

static void head_release(void)
{
	pthread_mutex_lock(&D.mu);
	D.serving++;
	pthread_cond_broadcast(&D.cv);
	pthread_mutex_unlock(&D.mu);
}

static ssize_t pread_full(char *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(D.fd, buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			memset(buf + done, 0, len - done);
			break;
		}
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static ssize_t pwrite_full(const char *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(D.fd, buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return (ssize_t)len;
}

/*
 * Serve one request on the single head: wait for our turn, charge the model, do the
 * real I/O, sleep to the modelled deadline, log, release. Returns the FUSE result.
 */
static int serve(uint32_t kind, uint32_t flags, uint64_t off, uint64_t len,
		 char *rbuf, const char *wbuf, int punch)
{
	struct rec r = { .kind = kind, .flags = flags, .offset_bytes = off, .len_bytes = len };
	uint64_t arrive = now_ns(), io0;
	ssize_t res = 0;

	head_acquire();
	r.start_ns = now_ns();
	r.queue_ns = r.start_ns - arrive;
	if (D.cache_on)
		r.flags |= F_CACHE_ON;
	io0 = now_ns();
	switch (kind) {
	case K_READ:
		model_read(&r);
		res = pread_full(rbuf, len, (off_t)off);
		break;
	case K_WRITE:
		model_write(&r);
		if (wbuf)
			res = pwrite_full(wbuf, len, (off_t)off);
		else if (punch && fallocate(D.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					   (off_t)off, (off_t)len) < 0)
			res = -errno;
		break;
	case K_FLUSH:
		model_flush(&r);
		break;
	case K_DISCARD:
		if (D.cache_on)
			dirty_drop(off, len);
		if (fallocate(D.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)off, (off_t)len) < 0)
			res = -errno;
		break;
	}
	io0 = now_ns() - io0;
	r.backing_ns = io0 > UINT32_MAX ? UINT32_MAX : (uint32_t)io0;
	r.model_ns = r.positioning_ns + r.transfer_ns + r.destage_ns + r.overhead_ns;
	r.head_after = D.head;
	if (res < 0)
		r.flags |= F_IOERR;
	sleep_until(r.start_ns + r.model_ns);
	r.end_ns = now_ns();
	truth_append(&r);
	head_release();
	if (res < 0)
		return (int)res;
	return kind == K_READ || kind == K_WRITE ? (int)len : 0;
}

/* ---- FUSE operations ---------------------------------------------------------------- */

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->direct_io = 1;
	cfg->kernel_cache = 0;
	cfg->entry_timeout = 3600;
	cfg->attr_timeout = 3600;
	cfg->negative_timeout = 0;
	/* let one loop request of up to 1 MiB arrive as one write */
	conn->max_write = 1U << 20;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	return NULL;
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (!strcmp(path, IMG_PATH)) {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = (off_t)D.size;
		st->st_blksize = 4096;
		st->st_blocks = (blkcnt_t)(D.size / 512);
		return 0;
	}
	return -ENOENT;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/"))
		return -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, IMG_NAME, NULL, 0, 0);
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, IMG_PATH))
		return -ENOENT;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fi->noflush = 1;
	return 0;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)fi;
	if (strcmp(path, IMG_PATH))
		return -ENOENT;
	return (uint64_t)size == D.size ? 0 : -EPERM;
}

/* Clip a request to the disk; 0 if nothing of it lies on the disk. */
static uint64_t clip(off_t off, size_t len)
{
	if (off < 0 || (uint64_t)off >= D.size)
		return 0;
	return (uint64_t)len < D.size - (uint64_t)off ? (uint64_t)len : D.size - (uint64_t)off;
}

static int op_read(const char *path, char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	uint64_t n = clip(off, len);

	(void)path;
	(void)fi;
	if (!n)
		return 0;
	return serve(K_READ, 0, (uint64_t)off, n, buf, NULL, 0);
}

static int op_write(const char *path, const char *buf, size_t len, off_t off,
		    struct fuse_file_info *fi)
{
	uint64_t n = clip(off, len);

	(void)path;
	(void)fi;
	if (!n)
		return -ENOSPC;
	return serve(K_WRITE, 0, (uint64_t)off, n, NULL, buf, 0);
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	return serve(K_FLUSH, datasync ? F_DATASYNC : 0, 0, 0, NULL, NULL, 0);
}

/* close(2) of some descriptor: not a cache flush on any disk. */
static int op_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	return 0;
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	uint64_t n = len > 0 ? clip(off, (size_t)len) : 0;

	(void)path;
	(void)fi;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && (mode & FALLOC_FL_PUNCH_HOLE))
		return -EOPNOTSUPP;
	if (!n)
		return 0;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		return serve(K_DISCARD, 0, (uint64_t)off, n, NULL, NULL, 0);
	if (mode & FALLOC_FL_ZERO_RANGE) {
		int res = serve(K_WRITE, F_ZERO, (uint64_t)off, n, NULL, NULL, 1);

		return res < 0 ? res : 0;
	}
	return -EOPNOTSUPP;
}

static int op_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = 4096;
	sv->f_frsize = 4096;
	sv->f_blocks = D.size / 4096;
	sv->f_files = 2;
	sv->f_namemax = 255;
	return 0;
}

static const struct fuse_operations OPS = {
	.init = op_init,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.truncate = op_truncate,
	.read = op_read,
	.write = op_write,
	.fsync = op_fsync,
	.flush = op_flush,
	.fallocate = op_fallocate,
	.statfs = op_statfs,
};

/* ---- command line ------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: emudisk --image BACKING --size BYTES --truth FILE [options] MOUNTPOINT\n"
"  --preset hdd-7200|ssd|ram    disk model (default hdd-7200)\n"
"  --cache on|off               volatile write cache (default on)\n"
"  --pidfile FILE               write the daemon's pid once mounted\n"
"  --rt                         SCHED_FIFO threads: deadlines hold on a busy machine\n"
"  overrides: --rpm N --t2t-ns N --full-stroke-ns N --media-rate B/s\n"
"             --iface-rate B/s --cache-size BYTES --flush-ns N\n"
"  FUSE: -s (single-threaded), -d (debug), -o opt[,opt...]\n"
"  Always in the foreground. SIGTERM/SIGINT: unmount and exit. SIGUSR1: write out\n"
"  the buffered truth records (after a MARK record).\n");
}

static int parse_u64(const char *name, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-') {
		fprintf(stderr, "emudisk: %s: not a non-negative integer: '%s'\n", name, s);
		return -1;
	}
	*out = v;
	return 0;
}

struct cli {
	const char *image, *truth, *pidfile, *preset, *cache;
	uint64_t size;
	int have_size, rt;
	const char *ovr_name[8];
	const char *ovr_val[8];
	int novr;
};

static const char *OVERRIDES[] = {
	"--rpm", "--t2t-ns", "--full-stroke-ns", "--media-rate", "--iface-rate",
	"--cache-size", "--flush-ns", NULL,
};

static uint64_t *override_field(struct params *p, const char *name)
{
	if (!strcmp(name, "--rpm"))
		return &p->rpm;
	if (!strcmp(name, "--t2t-ns"))
		return &p->t2t_ns;
	if (!strcmp(name, "--full-stroke-ns"))
		return &p->full_ns;
	if (!strcmp(name, "--media-rate"))
		return &p->media_rate;
	if (!strcmp(name, "--iface-rate"))
		return &p->iface_rate;
	if (!strcmp(name, "--cache-size"))
		return &p->cache_bytes;
	return &p->flush_ns;
}

/* Take our --options out of argv; the rest (mountpoint, -o, -d, -s) goes to FUSE. */
static int parse_cli(int argc, char **argv, struct cli *c, struct fuse_args *fa)
{
	fuse_opt_add_arg(fa, argv[0]);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		const char *eq = strchr(a, '=');
		const char *ovr = NULL;
		char name[64];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(a, "--rt")) {
			c->rt = 1;
			continue;
		}
		if (strncmp(a, "--", 2) || !a[2]) {
			fuse_opt_add_arg(fa, a);
			continue;
		}
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			fprintf(stderr, "emudisk: %s needs a value\n", name);
			return -1;
		}
		for (int k = 0; OVERRIDES[k]; k++)
			if (!strcmp(name, OVERRIDES[k]))
				ovr = OVERRIDES[k];
		if (!strcmp(name, "--image")) {
			c->image = val;
		} else if (!strcmp(name, "--truth")) {
			c->truth = val;
		} else if (!strcmp(name, "--pidfile")) {
			c->pidfile = val;
		} else if (!strcmp(name, "--preset")) {
			c->preset = val;
		} else if (!strcmp(name, "--cache")) {
			c->cache = val;
		} else if (!strcmp(name, "--size")) {
			if (parse_u64(name, val, &c->size) < 0)
				return -1;
			c->have_size = 1;
		} else if (ovr && c->novr < 8) {
			c->ovr_name[c->novr] = ovr;
			c->ovr_val[c->novr++] = val;
		} else {
			fprintf(stderr, "emudisk: unknown option %s\n", name);
			return -1;
		}
	}
	return 0;
}

static int setup(struct cli *c)
{
	const struct params *pp = NULL;
	struct stat st;
	struct hdr h;

	for (size_t i = 0; i < sizeof(PRESETS) / sizeof(PRESETS[0]); i++)
		if (!strcmp(c->preset, PRESETS[i].preset))
			pp = &PRESETS[i];
	if (!pp) {
		fprintf(stderr, "emudisk: unknown preset '%s' (hdd-7200, ssd, ram)\n", c->preset);
		return -1;
	}
	D.p = *pp;
	for (int i = 0; i < c->novr; i++)
		if (parse_u64(c->ovr_name[i], c->ovr_val[i],
			      override_field(&D.p, c->ovr_name[i])) < 0)
			return -1;
	if (!strcmp(c->cache, "on")) {
		D.cache_on = 1;
	} else if (strcmp(c->cache, "off")) {
		fprintf(stderr, "emudisk: --cache must be on or off, not '%s'\n", c->cache);
		return -1;
	}
	if (!c->have_size || c->size < SECTOR || c->size % SECTOR) {
		fprintf(stderr, "emudisk: --size must be a positive multiple of 512 bytes\n");
		return -1;
	}
	if (!D.p.media_rate || !D.p.iface_rate) {
		fprintf(stderr, "emudisk: transfer rates must be positive\n");
		return -1;
	}
	if (D.p.full_ns < D.p.t2t_ns) {
		fprintf(stderr, "emudisk: full stroke must not be shorter than track-to-track\n");
		return -1;
	}
	D.size = c->size;
	D.span = c->size / SECTOR;
	D.rot_ns = D.p.rpm ? 30 * NS / D.p.rpm : 0;

	D.fd = open(c->image, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (D.fd < 0 || fstat(D.fd, &st) < 0) {
		fprintf(stderr, "emudisk: %s: %s\n", c->image, strerror(errno));
		return -1;
	}
	if ((uint64_t)st.st_size < D.size && ftruncate(D.fd, (off_t)D.size) < 0) {
		fprintf(stderr, "emudisk: sizing %s: %s\n", c->image, strerror(errno));
		return -1;
	}

	D.tfd = open(c->truth, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (D.tfd < 0) {
		fprintf(stderr, "emudisk: %s: %s\n", c->truth, strerror(errno));
		return -1;
	}
	D.tcap = 512 * sizeof(struct rec);
	D.tbuf = malloc(D.tcap);
	if (!D.tbuf)
		return -1;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, "EMUDTRU1", 8);
	h.version = 1;
	h.header_size = sizeof(struct hdr);
	h.record_size = sizeof(struct rec);
	h.cache_on = (uint32_t)D.cache_on;
	h.size_bytes = D.size;
	h.rpm = D.p.rpm;
	h.t2t_ns = D.p.t2t_ns;
	h.full_ns = D.p.full_ns;
	h.rot_ns = D.rot_ns;
	h.media_rate = D.p.media_rate;
	h.iface_rate = D.p.iface_rate;
	h.cache_bytes = D.p.cache_bytes;
	h.flush_ns = D.p.flush_ns;
	h.span_sectors = D.span;
	h.avg_seek_ns = D.p.t2t_ns || D.p.full_ns ?
		D.p.t2t_ns + (D.p.full_ns - D.p.t2t_ns) * 8 / 15 : 0;
	h.started_ns = now_ns();
	snprintf(h.preset, sizeof(h.preset), "%s", D.p.preset);
	if (write_full(D.tfd, &h, sizeof(h)) < 0) {
		fprintf(stderr, "emudisk: %s: %s\n", c->truth, strerror(errno));
		return -1;
	}
	fprintf(stderr,
		"emudisk: %s, %" PRIu64 " bytes, cache %s (%" PRIu64 " B), seek %.3f..%.3f ms "
		"(avg %.3f), rotation %.3f ms, media %" PRIu64 " B/s, interface %" PRIu64
		" B/s, flush %.3f ms\n",
		D.p.preset, D.size, D.cache_on ? "on" : "off", D.p.cache_bytes,
		D.p.t2t_ns / 1e6, D.p.full_ns / 1e6, h.avg_seek_ns / 1e6, D.rot_ns / 1e6,
		D.p.media_rate, D.p.iface_rate, D.p.flush_ns / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts co;
	struct cli c = { .preset = "hdd-7200", .cache = "on" };
	struct fuse_loop_config *lc;
	struct fuse *f;
	sigset_t set;
	pthread_t th;
	int ret = 1;

	if (parse_cli(argc, argv, &c, &fa) < 0)
		return 2;
	if (!c.image || !c.truth) {
		usage(stderr);
		return 2;
	}
	fuse_opt_add_arg(&fa, "-o");
	fuse_opt_add_arg(&fa, "fsname=emudisk,subtype=emudisk");
	if (fuse_parse_cmdline(&fa, &co) != 0)
		return 2;
	if (!co.mountpoint) {
		fprintf(stderr, "emudisk: no mountpoint\n");
		usage(stderr);
		return 2;
	}
	if (setup(&c) < 0)
		return 1;

	/* Sleeps are the model: keep the kernel from rounding them up (inherited). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	/* On a busy machine a woken request may wait ms for a CPU; SCHED_FIFO (inherited
	 * by FUSE's threads) makes the modelled deadlines hold. Threads only sleep or do
	 * short work, so they cannot starve the machine. */
	if (c.rt) {
		struct sched_param sp = { .sched_priority = 1 };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
			fprintf(stderr, "emudisk: --rt: %s (continuing)\n", strerror(errno));
	}
	/* Only the signal thread takes SIGUSR1; FUSE's threads inherit this mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&th, NULL, signal_thread, NULL) != 0) {
		fprintf(stderr, "emudisk: cannot start the signal thread\n");
		return 1;
	}
	pthread_detach(th);

	f = fuse_new(&fa, &OPS, sizeof(OPS), NULL);
	if (!f)
		goto out_args;
	if (fuse_mount(f, co.mountpoint) != 0)
		goto out_destroy;
	/* We are stopped by signals: undo a SIG_IGN inherited from a shell's `cmd &`
	 * (libfuse only takes over signals left at their default). */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (fuse_set_signal_handlers(fuse_get_session(f)) != 0)
		goto out_unmount;
	if (c.pidfile) {
		FILE *pf = fopen(c.pidfile, "w");

		if (!pf || fprintf(pf, "%ld\n", (long)getpid()) < 0 || fclose(pf) != 0) {
			fprintf(stderr, "emudisk: %s: %s\n", c.pidfile, strerror(errno));
			goto out_signals;
		}
	}
	if (co.singlethread) {
		ret = fuse_loop(f);
	} else {
		lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lc, 0);
		fuse_loop_cfg_set_max_threads(lc, 16);
		ret = fuse_loop_mt(f, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* a stop by signal (positive) is the normal way out */
	ret = ret < 0 ? 1 : 0;
	if (c.pidfile)
		unlink(c.pidfile);
out_signals:
	fuse_remove_signal_handlers(fuse_get_session(f));
out_unmount:
	fuse_unmount(f);
out_destroy:
	fuse_destroy(f);
out_args:
	pthread_mutex_lock(&D.tmu);
	truth_flush_locked();
	if (D.tfd >= 0)
		close(D.tfd);
	D.tfd = -1;
	pthread_mutex_unlock(&D.tmu);
	free(co.mountpoint);
	fuse_opt_free_args(&fa);
	return ret;
}
