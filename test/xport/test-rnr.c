/*
 * Check receiver-not-ready: a SEND, or a WRITE_IMM, arriving when no
 * receive is posted completes on the sender with RNR_RETRY_EXC (as an RC
 * QP with rnr_retry 0), later WRs flush, and both ends see DISCONNECTED.
 * A WRITE_IMM refused this way leaves the target memory untouched.
 */
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	uint8_t *src, *dst;
	int imm;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 0);
	src = xt_alloc(t, 4096);
	dst = xt_alloc(t, 4096);
	xt_fill(src, 4096, 1);

	for (imm = 0; imm < 2; imm++) {
		struct be_xconn *c, *s;

		memset(dst, 0x11, 4096);
		xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c, &s);
		if (imm)
			xt_post(t, c, BE_XWR_WRITE_IMM, 1, src, 100, BE_XWR_F_SIGNALED,
				(uint64_t)(uintptr_t)dst, xt_grant(t, s, dst), 7);
		else
			xt_post(t, c, BE_XWR_SEND, 1, src, 100, BE_XWR_F_SIGNALED, 0, 0, 0);
		xt_post(t, c, BE_XWR_SEND, 2, src, 10, BE_XWR_F_SIGNALED, 0, 0, 0);
		xt_expect_wc(t, &p.cli, 1, BE_XWC_RNR_RETRY_EXC, NULL);
		xt_expect_wc(t, &p.cli, 2, BE_XWC_WR_FLUSH_ERR, NULL);
		xt_expect_disconnected(t, &p.cli, c, &p.srv, s);
		ASSERT_EQ(p.srv.nwc, 0);
		ASSERT_EQ(dst[0], 0x11);
		t->ops->conn_destroy(c);
		t->ops->conn_destroy(s);
	}

	xt_pair_close(&p);
	return 0;
}
