/*
 * Check that WRITEs stream through a small shm ring intact: many WRITEs of
 * sizes around every cut the producer makes (less than a line, around the
 * smallest record it cuts to free space, around the largest record, larger
 * than the whole ring) are in flight at once through a 64 KiB ring, so
 * records are cut at the end of the ring and to the space the consumer has
 * freed; each lands intact at its own offset, the bytes between them are
 * untouched, the completions come in order, and a WRITE_IMM behind them
 * finds all their data in place.
 */
#include <stdlib.h>

#include "xtest.h"

#define RING (64u << 10)
#define NWR 400
#define WINDOW 24
#define GAP 64 /* untouched bytes after each target */

static uint32_t wr_size(uint32_t i)
{
	/* The ring's cuts: 1/64 ring (smallest record to free space), 1/16
	 * ring (largest record), the ring itself; and odd sizes between. */
	static const uint32_t base[] = { 1,    31,   32,   33,     1023,   RING / 64 - 33,
					 RING / 64, RING / 64 + 1, RING / 16 - 32, RING / 16,
					 RING / 16 + 1, 5000, RING - 1, RING + 4095, 3 * RING + 7 };

	return base[(i * 7) % BE_ARRAY_SIZE(base)];
}

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	uint64_t off[NWR + 1], done = 0;
	struct be_xwc wc;
	uint8_t *src, *dst;
	uint32_t i, rkey, posted = 0;
	size_t total = 0;

	/* Before the device opens: rings of the conns it makes. */
	setenv("BE_SHM_RING_SIZE", "65536", 1);
	xt_pair_open(&p, argc, argv, 1024, 16, 16, WINDOW + 8);
	xt_post_recvs(t, &p.srv, 8, 64);

	for (i = 0; i < NWR; i++) {
		off[i] = total;
		total += wr_size(i) + GAP;
	}
	off[NWR] = total;
	src = xt_alloc(t, total);
	dst = xt_alloc(t, total);
	ASSERT(src && dst);
	memset(dst, 0xA5, total);
	for (i = 0; i < NWR; i++)
		xt_fill(src + off[i], wr_size(i), i + 1);
	rkey = xt_grant(t, p.s, dst);

	while (done < NWR) {
		while (posted < NWR && posted - done < WINDOW) {
			xt_post(t, p.c, BE_XWR_WRITE, posted, src + off[posted], wr_size(posted),
				BE_XWR_F_SIGNALED, (uint64_t)(uintptr_t)(dst + off[posted]), rkey,
				0);
			posted++;
		}
		xt_wait_wc(t, &p.cli, &wc, 1);
		ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
		ASSERT_EQ(wc.opcode, BE_XWC_WRITE);
		ASSERT_UEQ(wc.wr_id, done);
		ASSERT_EQ(wc.byte_len, wr_size((uint32_t)done));
		/* The completion means the data is in place. */
		ASSERT(xt_check(dst + off[done], wr_size((uint32_t)done), (uint32_t)done + 1));
		done++;
	}
	for (i = 0; i < NWR; i++) {
		uint32_t k;

		ASSERT(xt_check(dst + off[i], wr_size(i), i + 1));
		for (k = 0; k < GAP; k++)
			ASSERT_EQ(dst[off[i] + wr_size(i) + k], 0xA5);
	}

	/* A WRITE_IMM larger than the ring behind a full window of WRITEs:
	 * its receive completion comes after all of their data is in place. */
	memset(dst, 0xA5, total);
	for (i = 0; i < 8; i++)
		xt_post(t, p.c, i == 7 ? BE_XWR_WRITE_IMM : BE_XWR_WRITE, 1000 + i, src + off[i],
			wr_size(i), i == 7 ? BE_XWR_F_SIGNALED : 0,
			(uint64_t)(uintptr_t)(dst + off[i]), rkey, 0x77);
	xt_wait_wc(t, &p.srv, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc.opcode, BE_XWC_RECV_IMM);
	ASSERT_UEQ(wc.imm, 0x77);
	for (i = 0; i < 8; i++)
		ASSERT(xt_check(dst + off[i], wr_size(i), i + 1));
	xt_free(t, (void *)(uintptr_t)wc.wr_id);
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc.wr_id, 1007);

	xt_free(t, src);
	xt_free(t, dst);
	xt_pair_close(&p);
	return 0;
}
