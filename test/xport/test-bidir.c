/*
 * Check backpressure in both directions at once: each side streams
 * 16 MiB WRITEs and small SENDs to the other while neither socket has
 * room (partial writes, EAGAIN, EPOLLOUT); everything completes, in
 * order, with the data intact, and nothing deadlocks.
 */
#include "xtest.h"

#define BIG (16u << 20)
#define NW 4

static void check_side(struct xt *t, struct xt_side *s, struct be_xconn *c)
{
	struct be_xwc wc[NW * 2];
	int i, sends = 0;
	uint64_t last = 0;

	xt_wait_wc(t, s, wc, NW * 2); /* NW sender + NW receive completions */
	for (i = 0; i < NW * 2; i++) {
		ASSERT_EQ(wc[i].status, BE_XWC_SUCCESS);
		if (wc[i].opcode == BE_XWC_RECV) {
			ASSERT_EQ(wc[i].byte_len, 512);
			sends++;
		} else {
			ASSERT_EQ(wc[i].opcode, BE_XWC_WRITE);
			ASSERT_PTR_EQ(wc[i].conn, c);
			ASSERT(wc[i].wr_id >= last);
			last = wc[i].wr_id;
		}
	}
	ASSERT_EQ(sends, NW);
}

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xwc wc[2];
	uint8_t *srca, *srcb, *dsta, *dstb;
	uint32_t ka, kb;
	int i;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 2 * NW);
	xt_post_recvs(t, &p.cli, NW + 1, 512);
	xt_post_recvs(t, &p.srv, NW + 1, 512);
	srca = xt_alloc(t, BIG);
	srcb = xt_alloc(t, BIG);
	dsta = xt_alloc(t, (size_t)BIG * NW);
	dstb = xt_alloc(t, (size_t)BIG * NW);
	xt_fill(srca, BIG, 1);
	xt_fill(srcb, BIG, 2);
	/* Each side's key reaches the other in a SEND posted after the grant
	 * (xport.h grant; on verbs the window's bind is ordered before it),
	 * received before the streams start: a grant posted behind a 16 MiB
	 * WRITE of its own conn took effect only after that WRITE. */
	kb = xt_grant(t, p.s, dstb);
	ka = xt_grant(t, p.c, dsta);
	xt_post(t, p.s, BE_XWR_SEND, 90, srcb, 512, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_post(t, p.c, BE_XWR_SEND, 90, srca, 512, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_wait_wc(t, &p.cli, wc, 2); /* its SEND and the other's */
	ASSERT(wc[0].status == BE_XWC_SUCCESS && wc[1].status == BE_XWC_SUCCESS);
	xt_wait_wc(t, &p.srv, wc, 2);
	ASSERT(wc[0].status == BE_XWC_SUCCESS && wc[1].status == BE_XWC_SUCCESS);
	for (i = 0; i < NW; i++) {
		xt_post(t, p.c, BE_XWR_WRITE, (uint64_t)i, srca, BIG, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)(dstb + (size_t)i * BIG), kb, 0);
		xt_post(t, p.c, BE_XWR_SEND, 100 + (uint64_t)i, srca, 512, 0, 0, 0, 0);
		xt_post(t, p.s, BE_XWR_WRITE, (uint64_t)i, srcb, BIG, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)(dsta + (size_t)i * BIG), ka, 0);
		xt_post(t, p.s, BE_XWR_SEND, 100 + (uint64_t)i, srcb, 512, 0, 0, 0, 0);
	}
	check_side(t, &p.cli, p.c);
	check_side(t, &p.srv, p.s);
	for (i = 0; i < NW; i++) {
		ASSERT(xt_check(dstb + (size_t)i * BIG, BIG, 1));
		ASSERT(xt_check(dsta + (size_t)i * BIG, BIG, 2));
	}
	xt_pair_close(&p);
	return 0;
}
