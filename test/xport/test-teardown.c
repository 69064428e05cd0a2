/*
 * Check teardown with operations outstanding: conns destroyed with large
 * WRITEs and SENDs in flight (in both directions, with receives taken
 * mid-frame), then the srq, cq, evch and device, produce no completion or
 * event naming a destroyed conn, no crash and no leak (run under ASan).
 * Also: a conn destroyed while its peer still streams makes the peer fail
 * cleanly; a listener closed with requests pending; and parents destroyed
 * before their children (a caller bug) detach instead of crashing.
 */
#include "xtest.h"

#define BIG (16u << 20)

static void stream(struct xt *t, struct be_xconn *c, struct be_xconn *peer, uint8_t *src,
		   uint8_t *dst, int n)
{
	uint32_t rkey = xt_grant(t, peer, dst);
	int i;

	for (i = 0; i < n; i++) {
		xt_post(t, c, BE_XWR_WRITE, (uint64_t)i, src, BIG, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)dst, rkey, 0);
		xt_post(t, c, BE_XWR_SEND, 100 + (uint64_t)i, src, 1000, BE_XWR_F_SIGNALED, 0, 0, 0);
		xt_post(t, c, BE_XWR_WRITE_IMM, 200 + (uint64_t)i, src, 1 << 20, 0,
			(uint64_t)(uintptr_t)dst, rkey, 1);
	}
}

/* What was polled before a destroy was the user's to handle: forget it. */
static void forget(struct xt_side *a, struct xt_side *b)
{
	a->nwc = a->nev = 0;
	b->nwc = b->nev = 0;
}

static void no_wc_names(struct xt_side *s, struct be_xconn *c)
{
	int i;

	for (i = 0; i < s->nwc; i++)
		ASSERT(s->wc[i].conn != c);
	for (i = 0; i < s->nev; i++)
		ASSERT(s->ev[i].conn != c);
}

int main(int argc, char **argv)
{
	struct xt t;
	struct xt_side cli, srv;
	struct be_xlistener *l;
	struct be_xconn *c, *s, *c2, *s2;
	struct be_xconn_attr ca;
	struct be_xevent ev;
	char addr[BE_XPORT_ADDR_MAX];
	uint8_t *src, *dst;

	xt_init(&t, argc, argv);
	xt_side_init(&t, &cli, 64, 64);
	xt_side_init(&t, &srv, 64, 64);
	src = xt_alloc(&t, BIG);
	dst = xt_alloc(&t, BIG);
	xt_post_recvs(&t, &cli, 32, 4096);
	xt_post_recvs(&t, &srv, 32, 4096);
	l = xt_listen(&t, &srv);

	/* 1. Both directions busy, a little progress, destroy both ends. */
	xt_connect_pair(&t, &cli, &srv, l, 64, &c, &s);
	stream(&t, c, s, src, dst, 4);
	stream(&t, s, c, src, dst, 4);
	xt_spin(&t, 5);
	forget(&cli, &srv);
	t.ops->conn_destroy(c);
	t.ops->conn_destroy(s);
	no_wc_names(&cli, c);
	no_wc_names(&srv, s);
	xt_spin(&t, 20);
	no_wc_names(&cli, c);
	no_wc_names(&srv, s);

	/* 2. One end destroyed mid-stream: the other fails cleanly. */
	xt_connect_pair(&t, &cli, &srv, l, 64, &c, &s);
	stream(&t, c, s, src, dst, 4);
	xt_spin(&t, 5);
	forget(&cli, &srv);
	t.ops->conn_destroy(s);
	do
		xt_next_event(&t, &cli, &ev);
	while (ev.type != BE_XEV_DISCONNECTED);
	ASSERT_PTR_EQ(ev.conn, c);
	no_wc_names(&srv, s);
	forget(&cli, &srv);
	t.ops->conn_destroy(c);
	no_wc_names(&cli, c);

	/* 3. A request pending, a connect in flight, then everything goes
	 * with WRs outstanding, in the documented order. */
	xt_connect_pair(&t, &cli, &srv, l, 64, &c, &s);
	ASSERT_OK(t.ops->listener_addr(l, addr, sizeof(addr)));
	ca = xt_attr(&cli, 16);
	ASSERT_OK(t.ops->connect(cli.ch, addr, &ca, NULL, 0, &c2));
	stream(&t, c, s, src, dst, 2);
	xt_spin(&t, 5);
	t.ops->conn_destroy(c);
	t.ops->conn_destroy(s);
	t.ops->conn_destroy(c2);
	/* A request handed out (polled) is the user's to destroy. */
	{
		int i;

		for (i = 0; i < srv.nev; i++)
			if (srv.ev[i].type == BE_XEV_CONNECT_REQUEST)
				t.ops->conn_destroy(srv.ev[i].conn);
	}
	t.ops->listener_close(l);
	xt_side_fini(&t, &cli);
	xt_side_fini(&t, &srv);

	/* 4. Caller bug: parents first. Must not crash or leak. */
	xt_side_init(&t, &cli, 64, 64);
	xt_side_init(&t, &srv, 64, 64);
	l = xt_listen(&t, &srv);
	xt_connect_pair(&t, &cli, &srv, l, 64, &c, &s);
	xt_connect_pair(&t, &cli, &srv, l, 64, &c2, &s2);
	stream(&t, c, s, src, dst, 1);
	t.ops->srq_destroy(srv.srq);
	srv.srq = NULL;
	t.ops->cq_destroy(srv.cq);
	t.ops->evch_destroy(srv.ch);
	ASSERT(t.nsides == 2 && t.sides[1] == &srv);
	t.nsides = 1; /* only cli is polled from here */
	xt_spin(&t, 5);
	t.ops->conn_destroy(s);
	t.ops->conn_destroy(s2);
	t.ops->conn_destroy(c);
	t.ops->conn_destroy(c2);
	xt_side_fini(&t, &cli);
	free(srv.wc);

	xt_fini(&t);
	return 0;
}
