/*
 * Check RDMA WRITE and WRITE_WITH_IMM from 1 byte to 16 MiB: the data
 * arrives intact at the requested offset, the bytes around it are not
 * touched, a WRITE_IMM consumes one receive (buffer untouched) and
 * reports the immediate and the written length, and the signaled sender
 * completion comes once per WR with its wr_id.
 */
#include "xtest.h"

static const uint32_t sizes[] = { 1, 63, 64, 4095, 4096, 65537, 1u << 20, 16u << 20 };

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xwc wc;
	size_t i, max = 16u << 20;
	uint8_t *src, *dst;
	int imm;

	xt_pair_open(&p, argc, argv, 256, 16, 64, 64);
	xt_post_recvs(t, &p.srv, 32, 64);

	src = xt_alloc(t, max);
	dst = xt_alloc(t, max + 128);
	for (imm = 0; imm < 2; imm++) {
		for (i = 0; i < BE_ARRAY_SIZE(sizes); i++) {
			uint32_t n = sizes[i], seed = (uint32_t)(i * 2 + imm + 1);

			memset(dst, 0xA5, max + 128);
			xt_fill(src, n, seed);
			xt_post(t, p.c, imm ? BE_XWR_WRITE_IMM : BE_XWR_WRITE, 100 + i, src, n,
				BE_XWR_F_SIGNALED, (uint64_t)(uintptr_t)(dst + 64),
				xt_grant(t, p.s, dst), 0x1000 + (uint32_t)i);
			xt_wait_wc(t, &p.cli, &wc, 1);
			ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
			ASSERT_UEQ(wc.wr_id, 100 + i);
			ASSERT_EQ(wc.opcode, imm ? BE_XWC_WRITE_IMM : BE_XWC_WRITE);
			ASSERT_PTR_EQ(wc.conn, p.c);
			if (imm) {
				uint8_t *rb;

				xt_wait_wc(t, &p.srv, &wc, 1);
				ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
				ASSERT_EQ(wc.opcode, BE_XWC_RECV_IMM);
				ASSERT_EQ(wc.imm, 0x1000 + i);
				ASSERT_EQ(wc.byte_len, n);
				ASSERT_PTR_EQ(wc.conn, p.s);
				ASSERT_PTR_EQ(wc.srq, p.srv.srq);
				rb = (uint8_t *)(uintptr_t)wc.wr_id;
				ASSERT_EQ(rb[0], 0); /* receive buffer untouched */
				xt_free(t, rb);
			}
			/* The completion means the data is at the remote. */
			ASSERT(xt_check(dst + 64, n, seed));
			ASSERT_EQ(dst[63], 0xA5);
			ASSERT_EQ(dst[64 + n], 0xA5);
		}
	}
	ASSERT_EQ(p.srv.nwc, 0);
	ASSERT_EQ(p.cli.nwc, 0);

	/* Several in flight at once, unsignaled but the last. */
	for (i = 0; i < 8; i++) {
		xt_fill(src + i * (1u << 20), 1u << 20, 77 + (uint32_t)i);
		xt_post(t, p.c, BE_XWR_WRITE, i, src + i * (1u << 20), 1u << 20,
			i == 7 ? BE_XWR_F_SIGNALED : 0,
			(uint64_t)(uintptr_t)(dst + i * (1u << 20)), xt_grant(t, p.s, dst), 0);
	}
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc.wr_id, 7);
	for (i = 0; i < 8; i++)
		ASSERT(xt_check(dst + i * (1u << 20), 1u << 20, 77 + (uint32_t)i));
	xt_spin(t, 20);
	ASSERT_EQ(p.cli.nwc, 0);

	xt_pair_close(&p);
	return 0;
}
