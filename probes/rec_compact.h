/* SPDX-License-Identifier: GPL-2.0 */
/*
 * iowhy-record: compacted record chunks (format version 6, docs/trace-format.md,
 * COMPACTED RECORD CHUNKS). Self-contained (only <linux/types.h> and iowhy.h), so the
 * unit tests compile it alone and compare it with analyzer/iowhy/tracedecode.py.
 */
#ifndef REC_COMPACT_H
#define REC_COMPACT_H

#include <stddef.h>
#include <linux/types.h>
#include "iowhy.h"

#define COMPACT_MAX_COUNT 0xffff /* group numbers are u16 */

/* Scratch space for chunks of up to max_bytes of records; reused for every chunk. */
struct compact_work {
	size_t max_bytes;
	__u32 *order;          /* per stored record: the number of the record written there */
	__u16 *group;          /* per record, in the order written */
	__u32 *next;           /* per group: where its next record goes */
	__u32 *hkey, *hval;    /* thread id -> group + 1 (0: empty slot) */
	__u32 hcap;
};

int compact_init(struct compact_work *cw, size_t max_bytes);
void compact_free(struct compact_work *cw);
/* Bytes compacted data of `count` records of `type` takes (0: the type is not compacted). */
size_t compact_bytes(int type, __u16 rec_size, __u32 count);
/*
 * The records compacted into out (compact_bytes() long): 0, or -1 if this chunk is not
 * compacted (a type without a compacted form, a count out of range, too large).
 */
int compact_records(struct compact_work *cw, int type, const void *recs, __u16 rec_size,
		    __u32 count, unsigned char *out);

#endif
