/*
 * Check connect timeouts: a connect to a listener whose owner never
 * answers (its evch is never polled) ends in UNREACHABLE once
 * attr.timeout_ms passes, with a negative status (-ETIMEDOUT on tcp),
 * and the conn can be destroyed; the listener's side, polled again
 * later, copes with the abandoned request.
 */
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xconn *c;
	struct be_xconn_attr ca;
	struct be_xevent ev;
	char addr[BE_XPORT_ADDR_MAX];
	int i;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 0);
	ASSERT_OK(t->ops->listener_addr(p.l, addr, sizeof(addr)));
	ASSERT(t->nsides == 2 && t->sides[1] == &p.srv);
	t->nsides = 1; /* p.srv is not polled */

	ca = xt_attr(&p.cli, 16);
	ca.timeout_ms = 300;
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, "late", 4, &c));
	xt_expect_event(t, &p.cli, BE_XEV_UNREACHABLE, &ev);
	ASSERT_PTR_EQ(ev.conn, c);
	ASSERT(ev.status < 0);
	if (!strcmp(t->transport, "tcp"))
		ASSERT_EQ(ev.status, -ETIMEDOUT);
	t->ops->conn_destroy(c);

	/* The server wakes up later: whatever it sees of the dead request,
	 * answering it must not crash, and nothing reaches the client. */
	t->nsides = 2;
	xt_spin(t, 50);
	for (i = 0; i < p.srv.nev; i++) {
		if (p.srv.ev[i].type == BE_XEV_CONNECT_REQUEST) {
			struct be_xconn_attr sa = xt_attr(&p.srv, 16);

			if (t->ops->accept(p.srv.ev[i].conn, &sa, NULL, 0) == 0)
				xt_spin(t, 50);
			t->ops->conn_destroy(p.srv.ev[i].conn);
		}
	}
	ASSERT_EQ(p.cli.nev, 0);

	xt_pair_close(&p);
	return 0;
}
