/*
 * Check receiver-not-ready: a SEND, or a WRITE_IMM, arriving when no
 * receive is posted completes on the sender with RNR_RETRY_EXC (as an RC
 * QP with rnr_retry 0), later WRs flush, and both ends see DISCONNECTED.
 * A WRITE_IMM refused this way leaves the target memory untouched.
 */
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt t;
	struct xt_side cli, srv;
	struct be_xlistener *l;
	struct be_xevent ev;
	struct be_xwc wc[2];
	uint8_t *src, *dst;
	int imm;

	xt_init(&t, argc, argv);
	xt_side_init(&t, &cli, 64, 0);
	xt_side_init(&t, &srv, 64, 16);
	l = xt_listen(&t, &srv);
	src = xt_alloc(&t, 4096);
	dst = xt_alloc(&t, 4096);
	xt_fill(src, 4096, 1);

	for (imm = 0; imm < 2; imm++) {
		struct be_xconn *c, *s;

		memset(dst, 0x11, 4096);
		xt_connect_pair(&t, &cli, &srv, l, 16, &c, &s);
		if (imm)
			xt_post(&t, c, BE_XWR_WRITE_IMM, 1, src, 100, BE_XWR_F_SIGNALED,
				(uint64_t)(uintptr_t)dst, xt_rkey(&t, dst), 7);
		else
			xt_post(&t, c, BE_XWR_SEND, 1, src, 100, BE_XWR_F_SIGNALED, 0, 0, 0);
		xt_post(&t, c, BE_XWR_SEND, 2, src, 10, BE_XWR_F_SIGNALED, 0, 0, 0);
		xt_wait_wc(&t, &cli, wc, 2);
		ASSERT_UEQ(wc[0].wr_id, 1);
		ASSERT_EQ(wc[0].status, BE_XWC_RNR_RETRY_EXC);
		ASSERT_UEQ(wc[1].wr_id, 2);
		ASSERT_EQ(wc[1].status, BE_XWC_WR_FLUSH_ERR);
		xt_expect_event(&t, &cli, BE_XEV_DISCONNECTED, &ev);
		ASSERT_PTR_EQ(ev.conn, c);
		xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
		ASSERT_PTR_EQ(ev.conn, s);
		ASSERT_EQ(srv.nwc, 0);
		ASSERT_EQ(dst[0], 0x11);
		t.ops->conn_destroy(c);
		t.ops->conn_destroy(s);
	}

	t.ops->listener_close(l);
	xt_side_fini(&t, &cli);
	xt_side_fini(&t, &srv);
	xt_fini(&t);
	return 0;
}
