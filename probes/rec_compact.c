// SPDX-License-Identifier: GPL-2.0
/*
 * iowhy-record: compacted record chunks (format version 6). Before a chunk of requests,
 * fsync calls, journal events or off-CPU intervals is compressed, its records are
 *   - grouped by thread (tid): a stable counting sort, the threads numbered in the order
 *     they first appear; each record's group number, in the order written, is stored
 *     first (u16, byte-transposed), from which the reader puts the records back in order;
 *   - times stored as differences: ts_ns (and a few counters) from the previous stored
 *     record's, the other times of a record from its own ts_ns;
 *   - byte-transposed, except the task names (and the waker's identity), kept row-wise
 *     where zstd finds the repeats whole.
 * Exactly invertible; docs/trace-format.md has the definition, tracedecode.py the
 * reader's side (and the same encoder, for the test writers).
 */
#include <stdlib.h>
#include <string.h>
#include "rec_compact.h"

struct compact_spec {
	__u16 rec_size;
	__u16 key;          /* offset of the u32 the records are grouped by (tid) */
	__u8 nrel, nprev;
	__u16 rel[5];       /* 8-byte times stored as f(x, own ts_ns) */
	__u16 prev[2];      /* 8-byte fields stored as x - the previous stored record's x */
	__u16 row_a, row_b; /* bytes [row_a, row_b) kept row-wise */
};

#define OFF(s, f) ((__u16)offsetof(struct s, f))
#define END(s, f) ((__u16)(offsetof(struct s, f) + sizeof(((struct s *)0)->f)))

#define OFFCPU_SPEC(t) \
	[t] = {sizeof(struct iowhy_offcpu), OFF(iowhy_offcpu, tid), 3, 2, \
	       {OFF(iowhy_offcpu, start_ns), OFF(iowhy_offcpu, waking_ns), OFF(iowhy_offcpu, end_ns)}, \
	       {OFF(iowhy_offcpu, hdr.ts_ns), OFF(iowhy_offcpu, run_total_ns)}, \
	       OFF(iowhy_offcpu, waker_tgid), END(iowhy_offcpu, waker_comm)}

static const struct compact_spec specs[IOWHY_REC_MAX + 1] = {
	[IOWHY_REC_REQUEST] = {sizeof(struct iowhy_request), OFF(iowhy_request, tid), 5, 2,
			       {OFF(iowhy_request, submit_ns), OFF(iowhy_request, insert_ns),
				OFF(iowhy_request, issue_ns), OFF(iowhy_request, data_done_ns),
				OFF(iowhy_request, done_ns)},
			       {OFF(iowhy_request, hdr.ts_ns), OFF(iowhy_request, seq)},
			       OFF(iowhy_request, comm), END(iowhy_request, comm)},
	[IOWHY_REC_FSYNC] = {sizeof(struct iowhy_fsync), OFF(iowhy_fsync, tid), 2, 1,
			     {OFF(iowhy_fsync, enter_ns), OFF(iowhy_fsync, exit_ns)},
			     {OFF(iowhy_fsync, hdr.ts_ns)},
			     OFF(iowhy_fsync, comm), END(iowhy_fsync, comm)},
	[IOWHY_REC_JOURNAL] = {sizeof(struct iowhy_journal), OFF(iowhy_journal, tid), 0, 1, {},
			       {OFF(iowhy_journal, hdr.ts_ns)},
			       OFF(iowhy_journal, comm), END(iowhy_journal, comm)},
	OFFCPU_SPEC(IOWHY_REC_OFFCPU),
	OFFCPU_SPEC(IOWHY_REC_HELPER),
};

static const struct compact_spec *spec_of(int type, __u16 rec_size, __u32 count)
{
	const struct compact_spec *s;

	if (type <= 0 || type > IOWHY_REC_MAX)
		return NULL;
	s = &specs[type];
	if (!s->rec_size || s->rec_size != rec_size || !count || count > COMPACT_MAX_COUNT)
		return NULL;
	return s;
}

size_t compact_bytes(int type, __u16 rec_size, __u32 count)
{
	return spec_of(type, rec_size, count) ? (size_t)count * (rec_size + 2) : 0;
}

int compact_init(struct compact_work *cw, size_t max_bytes)
{
	size_t n = max_bytes / 8 + 1; /* no record is smaller than 8 bytes */

	memset(cw, 0, sizeof(*cw));
	if (n > COMPACT_MAX_COUNT + 1)
		n = COMPACT_MAX_COUNT + 1;
	cw->hcap = 1;
	while (cw->hcap < 2 * n)
		cw->hcap <<= 1;
	cw->max_bytes = max_bytes;
	cw->order = malloc(n * sizeof(*cw->order));
	cw->group = malloc(n * sizeof(*cw->group));
	cw->next = malloc(n * sizeof(*cw->next));
	cw->hkey = malloc(cw->hcap * sizeof(*cw->hkey));
	cw->hval = calloc(cw->hcap, sizeof(*cw->hval));
	if (!cw->order || !cw->group || !cw->next || !cw->hkey || !cw->hval) {
		compact_free(cw);
		return -1;
	}
	return 0;
}

void compact_free(struct compact_work *cw)
{
	free(cw->order);
	free(cw->group);
	free(cw->next);
	free(cw->hkey);
	free(cw->hval);
	memset(cw, 0, sizeof(*cw));
}

static inline __u64 rd64(const unsigned char *p)
{
	__u64 v;

	memcpy(&v, p, 8);
	return v;
}

static inline void wr64(unsigned char *p, __u64 v)
{
	memcpy(p, &v, 8);
}

int compact_records(struct compact_work *cw, int type, const void *recs, __u16 rec_size,
		    __u32 count, unsigned char *out)
{
	const struct compact_spec *s = spec_of(type, rec_size, count);
	const unsigned char *in = recs;
	size_t rs = rec_size, rowlen, ncols;
	unsigned char rec[8][256], *col, *row;
	__u64 last[2] = {0, 0};
	__u32 ngroups = 0, mask, hcap, *order = cw->order;

	if (!s || (size_t)count * rs > cw->max_bytes || !cw->order || rs > sizeof(rec[0]))
		return -1;
	/* Group numbers: a thread's is the number of threads that appeared before it. */
	for (hcap = 1; hcap < 2 * count; hcap <<= 1)
		;
	if (hcap > cw->hcap)
		return -1;
	mask = hcap - 1;
	memset(cw->hval, 0, hcap * sizeof(*cw->hval));
	for (__u32 i = 0; i < count; i++) {
		__u32 key, h;

		memcpy(&key, in + i * rs + s->key, 4);
		h = (key * 2654435761u) & mask;
		while (cw->hval[h] && cw->hkey[h] != key)
			h = (h + 1) & mask;
		if (!cw->hval[h]) {
			cw->hkey[h] = key;
			cw->hval[h] = ++ngroups;
			cw->next[ngroups - 1] = 0;
		}
		cw->group[i] = cw->hval[h] - 1;
		cw->next[cw->hval[h] - 1]++;
	}
	/* Stable counting sort by group: next[g] = where group g's next record goes;
	 * order[j] = the record stored j-th. */
	for (__u32 g = 0, at = 0; g < ngroups; g++) {
		__u32 n = cw->next[g];

		cw->next[g] = at;
		at += n;
	}
	for (__u32 i = 0; i < count; i++)
		order[cw->next[cw->group[i]]++] = i;
	/* Layout: group numbers (low bytes, high bytes), the other bytes byte-transposed,
	 * then the row-wise bytes record by record. */
	for (__u32 i = 0; i < count; i++) {
		out[i] = cw->group[i] & 0xff;
		out[count + i] = cw->group[i] >> 8;
	}
	rowlen = s->row_b - s->row_a;
	ncols = rs - rowlen;
	col = out + 2 * (size_t)count;
	row = col + ncols * count;
	/* Eight records at a time: each byte column gets 8 bytes in one store. */
	for (__u32 j0 = 0; j0 < count; j0 += 8) {
		__u32 nb = count - j0 < 8 ? count - j0 : 8;
		size_t c = 0;

		for (__u32 k = 0; k < nb; k++) {
			unsigned char *p = rec[k];
			__u64 b;

			memcpy(p, in + (size_t)order[j0 + k] * rs, rs);
			/* Times relative to the record's own ts_ns: ts + 1 - x, with 0 (unknown)
			 * kept 0 and ts + 1 (which that maps to 0) kept as is. */
			b = rd64(p + 8) + 1;
			for (int f = 0; f < s->nrel; f++) {
				__u64 x = rd64(p + s->rel[f]);

				if (x && x != b)
					wr64(p + s->rel[f], b - x);
			}
			/* Differences from the previous stored record. */
			for (int f = 0; f < s->nprev; f++) {
				__u64 x = rd64(p + s->prev[f]);

				wr64(p + s->prev[f], x - last[f]);
				last[f] = x;
			}
			memcpy(row + (size_t)(j0 + k) * rowlen, p + s->row_a, rowlen);
		}
		for (size_t o = 0; o < rs; o++) {
			if (o == s->row_a)
				o = s->row_b;
			if (o >= rs)
				break;
			if (nb == 8) {
				__u64 v = 0;

				for (int k = 7; k >= 0; k--)
					v = v << 8 | rec[k][o];
				memcpy(col + c * count + j0, &v, 8);
			} else {
				for (__u32 k = 0; k < nb; k++)
					col[c * count + j0 + k] = rec[k][o];
			}
			c++;
		}
	}
	return 0;
}
