/*
 * Check disconnect(): every outstanding WR on the local side completes
 * with WR_FLUSH_ERR (signaled or not), DISCONNECTED (status 0) arrives on
 * both sides, later posts fail or flush at once, a second disconnect is
 * harmless, and the peer's own outstanding WRs complete with errors too.
 */
#include "xtest.h"

#define BIG (8u << 20)

/*
 * Completions of WRs 0..3 on @conn (odd ones signaled when @local, all
 * signaled otherwise) after the conn went down: in order, each at most
 * once, each signaled one exactly once, successes (signaled only) before
 * errors; locally every error is a flush. Waits for WR 3 (signaled).
 */
static void check_stream(struct xt *t, struct xt_side *sd, struct be_xconn *conn, int local)
{
	struct be_xwc w;
	int seen[4] = { 0 }, err = 0, i;
	int64_t prev = -1;

	do {
		xt_wait_wc(t, sd, &w, 1);
		ASSERT_PTR_EQ(w.conn, conn);
		ASSERT_LT(w.wr_id, 4);
		ASSERT((int64_t)w.wr_id > prev);
		prev = (int64_t)w.wr_id;
		seen[w.wr_id]++;
		if (w.status == BE_XWC_SUCCESS) {
			ASSERT(!err);
			ASSERT(!local || w.wr_id % 2);
		} else {
			err = 1;
			if (local)
				ASSERT_EQ(w.status, BE_XWC_WR_FLUSH_ERR);
		}
		if (local && !strcmp(t->transport, "tcp"))
			ASSERT_EQ(w.status, BE_XWC_WR_FLUSH_ERR);
	} while (w.wr_id != 3);
	for (i = 0; i < 4; i++)
		if (!local || i % 2)
			ASSERT_EQ(seen[i], 1);
}

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xevent ev;
	uint8_t *src, *dst;
	int i;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 0);
	src = xt_alloc(t, BIG);
	dst = xt_alloc(t, BIG);

	/* Idle conn: disconnect, both sides see it. */
	xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &p.c, &p.s);
	ASSERT_OK(t->ops->disconnect(p.c));
	xt_expect_event(t, &p.cli, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, p.c);
	ASSERT_EQ(ev.status, 0);
	xt_expect_event(t, &p.srv, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, p.s);
	ASSERT_OK(t->ops->disconnect(p.c));
	ASSERT_OK(t->ops->disconnect(p.s));
	xt_post_on_error(t, &p.srv, p.s, 9, src);
	xt_spin(t, 10);
	ASSERT_EQ(p.cli.nev + p.srv.nev + p.cli.nwc + p.srv.nwc, 0);
	xt_pair_destroy_conns(&p);

	/* Busy both ways: disconnect with WRs outstanding on each side. */
	xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &p.c, &p.s);
	for (i = 0; i < 4; i++) {
		xt_post(t, p.c, BE_XWR_WRITE, (uint64_t)i, src, BIG, i % 2 ? BE_XWR_F_SIGNALED : 0,
			(uint64_t)(uintptr_t)dst, xt_grant(t, p.s, dst), 0);
		xt_post(t, p.s, BE_XWR_WRITE, (uint64_t)i, src, BIG, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)dst, xt_grant(t, p.c, dst), 0);
	}
	ASSERT_OK(t->ops->disconnect(p.c));
	/* Locally, every WR not complete yet flushes (on tcp, all four:
	 * none was acked); the peer's fail or flush. */
	check_stream(t, &p.cli, p.c, 1);
	xt_expect_disconnected(t, &p.cli, p.c, &p.srv, p.s);
	check_stream(t, &p.srv, p.s, 0);
	ASSERT_EQ(p.cli.nwc, 0);
	xt_pair_destroy_conns(&p);

	/* Never connected: disconnect refuses or does nothing; no event. */
	{
		struct be_xconn_attr ca = xt_attr(&p.cli, 4);
		char addr[BE_XPORT_ADDR_MAX];
		struct be_xconn *c;

		xt_dead_addr(t, addr, sizeof(addr));
		ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, NULL, 0, &c));
		xt_expect_event(t, &p.cli, BE_XEV_UNREACHABLE, &ev);
		t->ops->disconnect(c);
		xt_spin(t, 20);
		ASSERT_EQ(p.cli.nev, 0);
		t->ops->conn_destroy(c);
	}

	xt_pair_close(&p);
	return 0;
}
