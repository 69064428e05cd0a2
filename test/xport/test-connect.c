/*
 * Check connection setup: private data travels both ways on accept, a
 * reject reaches the connector as REJECTED with the reject's private
 * data, and a connect to an address where nobody listens ends in
 * UNREACHABLE. Every conn handed out can be destroyed afterwards.
 */
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xconn *c, *s;
	struct be_xconn_attr ca, sa;
	struct be_xevent ev;
	char addr[BE_XPORT_ADDR_MAX], peer[BE_XPORT_ADDR_MAX];
	uint8_t big[BE_XPORT_PRIV_MAX];
	int i;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 0);
	ca = xt_attr(&p.cli, 16);
	sa = xt_attr(&p.srv, 16);
	ASSERT_OK(t->ops->listener_addr(p.l, addr, sizeof(addr)));

	/* Accept, with the largest private data both ways. */
	for (i = 0; i < BE_XPORT_PRIV_MAX; i++)
		big[i] = (uint8_t)(i * 7 + 1);
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, big, sizeof(big), &c));
	xt_expect_event(t, &p.srv, BE_XEV_CONNECT_REQUEST, &ev);
	ASSERT_PTR_EQ(ev.listener, p.l);
	ASSERT_EQ(ev.priv_len, BE_XPORT_PRIV_MAX);
	ASSERT(memcmp(ev.priv, big, sizeof(big)) == 0);
	s = ev.conn;
	ASSERT(s != NULL);
	sa.user = &sa;
	ASSERT_OK(t->ops->accept(s, &sa, "welcome", 7));
	ASSERT_PTR_EQ(s->user, &sa);
	xt_expect_event(t, &p.srv, BE_XEV_ESTABLISHED, &ev);
	ASSERT_PTR_EQ(ev.conn, s);
	xt_expect_event(t, &p.cli, BE_XEV_ESTABLISHED, &ev);
	ASSERT_PTR_EQ(ev.conn, c);
	ASSERT_EQ(ev.priv_len, 7);
	ASSERT(memcmp(ev.priv, "welcome", 7) == 0);
	ASSERT_OK(t->ops->conn_peer_addr(c, peer, sizeof(peer)));
	ASSERT(peer[0] != '\0');
	/* Too much private data is refused up front. */
	ASSERT_EQ(t->ops->connect(p.cli.ch, addr, &ca, big, BE_XPORT_PRIV_MAX + 1, &c), -EINVAL);
	t->ops->conn_destroy(c);
	t->ops->conn_destroy(s);

	/* Reject with private data. */
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, "x", 1, &c));
	xt_expect_event(t, &p.srv, BE_XEV_CONNECT_REQUEST, &ev);
	ASSERT_EQ(ev.priv_len, 1);
	ASSERT_OK(t->ops->reject(ev.conn, "go away", 7));
	xt_expect_event(t, &p.cli, BE_XEV_REJECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, c);
	ASSERT_EQ(ev.status, -ECONNREFUSED);
	ASSERT_EQ(ev.priv_len, 7);
	ASSERT(memcmp(ev.priv, "go away", 7) == 0);
	/* A conn that never connected cannot send. */
	{
		struct be_xsend_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		ASSERT(t->ops->post_send(c, &wr, &bad) < 0);
		ASSERT_PTR_EQ(bad, &wr);
	}
	t->ops->conn_destroy(c);

	/* Nobody listening. */
	xt_dead_addr(t, addr, sizeof(addr));
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, NULL, 0, &c));
	xt_expect_event(t, &p.cli, BE_XEV_UNREACHABLE, &ev);
	ASSERT_PTR_EQ(ev.conn, c);
	ASSERT(ev.status < 0);
	t->ops->conn_destroy(c);

	/* Bad addresses fail at once. */
	ASSERT(t->ops->connect(p.cli.ch, "", &ca, NULL, 0, &c) < 0);
	ASSERT(t->ops->connect(p.cli.ch, NULL, &ca, NULL, 0, &c) < 0);

	/* A request the acceptor destroys unanswered fails the connect. */
	ASSERT_OK(t->ops->listener_addr(p.l, addr, sizeof(addr)));
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, NULL, 0, &c));
	xt_expect_event(t, &p.srv, BE_XEV_CONNECT_REQUEST, &ev);
	t->ops->conn_destroy(ev.conn);
	xt_next_event(t, &p.cli, &ev);
	ASSERT(ev.type == BE_XEV_UNREACHABLE || ev.type == BE_XEV_REJECTED);
	ASSERT_PTR_EQ(ev.conn, c);
	t->ops->conn_destroy(c);

	/* A connect still in flight when the listener closes fails too,
	 * and the closed listener reports nothing more. */
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, NULL, 0, &c));
	t->ops->listener_close(p.l);
	p.l = NULL;
	xt_next_event(t, &p.cli, &ev);
	ASSERT(ev.type == BE_XEV_UNREACHABLE || ev.type == BE_XEV_REJECTED);
	ASSERT_PTR_EQ(ev.conn, c);
	ASSERT_EQ(p.srv.nev, 0);
	t->ops->conn_destroy(c);

	xt_pair_close(&p);
	return 0;
}
