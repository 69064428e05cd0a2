/*
 * Check a SEND larger than the receive buffer: the receiver's receive
 * completes with LOC_LEN_ERR (on the conn it came in on), the sender's WR
 * with REM_OP_ERR, later WRs flush, both ends see DISCONNECTED, and the
 * SRQ keeps serving other conns.
 */
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xconn *c, *s, *c2, *s2;
	struct be_xwc wc[2];
	uint8_t *src;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 0);
	xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c, &s);
	xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c2, &s2);
	xt_post_recvs(t, &p.srv, 1, 64);
	src = xt_alloc(t, 4096);
	xt_fill(src, 4096, 1);

	xt_post(t, c, BE_XWR_SEND, 1, src, 65, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_post(t, c, BE_XWR_SEND, 2, src, 10, 0, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_LOC_LEN_ERR);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV);
	ASSERT_PTR_EQ(wc[0].conn, s);
	xt_free(t, (void *)(uintptr_t)wc[0].wr_id);
	xt_expect_wc(t, &p.cli, 1, BE_XWC_REM_OP_ERR, NULL);
	xt_expect_wc(t, &p.cli, 2, BE_XWC_WR_FLUSH_ERR, NULL);
	xt_expect_disconnected(t, &p.cli, c, &p.srv, s);

	/* The other conn on the same SRQ is unaffected; exactly full fits. */
	xt_post_recvs(t, &p.srv, 1, 64);
	xt_post(t, c2, BE_XWR_SEND, 3, src, 64, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].byte_len, 64);
	ASSERT_PTR_EQ(wc[0].conn, s2);
	ASSERT(xt_check((void *)(uintptr_t)wc[0].wr_id, 64, 1));
	xt_free(t, (void *)(uintptr_t)wc[0].wr_id);
	xt_wait_wc(t, &p.cli, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);

	t->ops->conn_destroy(c);
	t->ops->conn_destroy(s);
	t->ops->conn_destroy(c2);
	t->ops->conn_destroy(s2);
	xt_pair_close(&p);
	return 0;
}
