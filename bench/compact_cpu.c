// SPDX-License-Identifier: GPL-2.0
/*
 * What the recorder's writer spends on the record chunks of a trace, and what they
 * become, both ways: byte-transposed (format 5) or compacted (format 6), then zstd at
 * level 3 as the recorder does, on the very same chunks. Give it a trace recorded with
 * IOWHY_ZSTD_LEVEL=0 (plain chunks, as the recorder filled them):
 *
 *   cc -O2 -Iprobes -o /tmp/compact_cpu bench/compact_cpu.c probes/rec_compact.c -lzstd
 *   /tmp/compact_cpu T.iowt
 *
 * Prints, per way, the thread CPU time of one pass over every record chunk (median of
 * 5 passes) and the bytes in and out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>
#include "rec_compact.h"

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	size_t tcap = 2 << 20, zcap = ZSTD_compressBound(2 << 20);
	unsigned char *buf, *t = malloc(tcap), *z = malloc(zcap);
	struct compact_work cw;
	ZSTD_CCtx *c = ZSTD_createCCtx();
	FILE *f;
	long sz;

	if (argc != 2 || !(f = fopen(argv[1], "rb"))) {
		fprintf(stderr, "usage: compact_cpu TRACE (recorded with IOWHY_ZSTD_LEVEL=0)\n");
		return 2;
	}
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(sz);
	if (!buf || fread(buf, 1, sz, f) != (size_t)sz || !t || !z || !c ||
	    compact_init(&cw, 1 << 20))
		return 2;
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	for (int mode = 0; mode < 2; mode++) {
		double runs[5];
		size_t in = 0, out = 0;

		for (int rep = 0; rep < 5; rep++) {
			double t0 = cpu_s();

			in = out = 0;
			for (long off = 64; off + 32 <= sz;) {
				struct iowhy_chunk_hdr *h = (void *)(buf + off);
				unsigned char *p = buf + off + 32;
				size_t len = h->data_bytes, dl = len;
				__u32 n = h->count;
				__u16 rs = h->rec_size_bytes;

				if (off + 32 + (long)h->payload_bytes > sz || h->type & IOWHY_CHUNK_ZSTD)
					return 2; /* cut, or not a plain trace */
				off += 32 + h->payload_bytes;
				if (!rs || n < 2 || (size_t)rs * n != len || len > tcap / 2)
					continue;
				if (mode && compact_bytes(h->type, rs, n) &&
				    !compact_records(&cw, h->type, p, rs, n, t)) {
					dl = compact_bytes(h->type, rs, n);
				} else {
					for (__u32 i = 0; i < n; i++)
						for (__u16 b = 0; b < rs; b++)
							t[(size_t)b * n + i] = p[(size_t)i * rs + b];
				}
				out += ZSTD_compress2(c, z, zcap, t, dl);
				in += len;
			}
			runs[rep] = cpu_s() - t0;
		}
		qsort(runs, 5, sizeof(runs[0]), cmp);
		printf("%-10s %8.1f ms CPU  %10zu -> %9zu bytes (ratio %.2f)\n",
		       mode ? "compacted" : "transposed", runs[2] * 1e3, in, out, (double)in / out);
	}
	return 0;
}
