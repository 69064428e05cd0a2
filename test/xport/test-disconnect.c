/*
 * Check disconnect(): every outstanding WR on the local side completes
 * with WR_FLUSH_ERR (signaled or not), DISCONNECTED (status 0) arrives on
 * both sides, later posts flush at once, a second disconnect is harmless,
 * and the peer's own outstanding WRs complete with errors too.
 */
#include "xtest.h"

#define BIG (8u << 20)

int main(int argc, char **argv)
{
	struct xt t;
	struct xt_side cli, srv;
	struct be_xlistener *l;
	struct be_xconn *c, *s;
	struct be_xevent ev;
	struct be_xwc wc[8];
	uint8_t *src, *dst;
	int i, n;

	xt_init(&t, argc, argv);
	xt_side_init(&t, &cli, 64, 16);
	xt_side_init(&t, &srv, 64, 16);
	l = xt_listen(&t, &srv);
	src = xt_alloc(&t, BIG);
	dst = xt_alloc(&t, BIG);

	/* Idle conn: disconnect, both sides see it. */
	xt_connect_pair(&t, &cli, &srv, l, 16, &c, &s);
	ASSERT_OK(t.ops->disconnect(c));
	xt_expect_event(&t, &cli, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, c);
	ASSERT_EQ(ev.status, 0);
	xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, s);
	ASSERT_OK(t.ops->disconnect(c));
	ASSERT_OK(t.ops->disconnect(s));
	xt_post(&t, s, BE_XWR_SEND, 9, src, 8, 0, 0, 0, 0);
	xt_wait_wc(&t, &srv, wc, 1);
	ASSERT_UEQ(wc[0].wr_id, 9);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
	xt_spin(&t, 10);
	ASSERT_EQ(cli.nev + srv.nev + cli.nwc + srv.nwc, 0);
	t.ops->conn_destroy(c);
	t.ops->conn_destroy(s);

	/* Busy both ways: disconnect with WRs outstanding on each side. */
	xt_connect_pair(&t, &cli, &srv, l, 16, &c, &s);
	for (i = 0; i < 4; i++) {
		xt_post(&t, c, BE_XWR_WRITE, (uint64_t)i, src, BIG, i % 2 ? BE_XWR_F_SIGNALED : 0,
			(uint64_t)(uintptr_t)dst, xt_rkey(&t, dst), 0);
		xt_post(&t, s, BE_XWR_WRITE, (uint64_t)i, src, BIG, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)dst, xt_rkey(&t, dst), 0);
	}
	ASSERT_OK(t.ops->disconnect(c));
	/* Locally: all 4 flush, in order, before anything else of c. */
	xt_wait_wc(&t, &cli, wc, 4);
	for (i = 0; i < 4; i++) {
		ASSERT_UEQ(wc[i].wr_id, i);
		ASSERT_EQ(wc[i].status, BE_XWC_WR_FLUSH_ERR);
		ASSERT_PTR_EQ(wc[i].conn, c);
	}
	xt_expect_event(&t, &cli, BE_XEV_DISCONNECTED, &ev);
	/* The peer: each of its 4 WRs completes once, successes first. */
	xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, s);
	xt_spin(&t, 10);
	n = srv.nwc;
	ASSERT_EQ(n, 4);
	xt_wait_wc(&t, &srv, wc, n);
	for (i = 0; i < n; i++) {
		ASSERT_UEQ(wc[i].wr_id, i);
		if (i && wc[i - 1].status != BE_XWC_SUCCESS)
			ASSERT_NE(wc[i].status, BE_XWC_SUCCESS);
	}
	ASSERT_EQ(cli.nwc, 0);
	t.ops->conn_destroy(c);
	t.ops->conn_destroy(s);

	/* Not connected: refused. */
	{
		struct be_xconn_attr ca = xt_attr(&cli, 4);
		char addr[BE_XPORT_ADDR_MAX];

		xt_dead_addr(&t, addr, sizeof(addr));
		ASSERT_OK(t.ops->connect(cli.ch, addr, &ca, NULL, 0, &c));
		xt_expect_event(&t, &cli, BE_XEV_UNREACHABLE, &ev);
		ASSERT(t.ops->disconnect(c) < 0);
		t.ops->conn_destroy(c);
	}

	t.ops->listener_close(l);
	xt_side_fini(&t, &cli);
	xt_side_fini(&t, &srv);
	xt_fini(&t);
	return 0;
}
