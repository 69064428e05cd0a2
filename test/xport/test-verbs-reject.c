/*
 * Check that a refused connect is reported once, with the reason: a reject
 * by the listener arrives as REJECTED with its private data, a connect to
 * a port nobody listens on as UNREACHABLE (-ECONNREFUSED), and a malformed
 * address or oversized private data fail at once with nothing to destroy.
 */
#include "xtest.h"

#define TV_REGION (1u << 20) /* the test's registered memory */
#define TV_RECV_SIZE 4096u

static struct xt_mem mem; /* TV_REGION bytes, registered */

int main(int argc, char **argv)
{
	struct xt e;
	struct xt_side cli, srv;
	struct be_xconn_attr ca = { 0 };
	struct be_xlistener *lst;
	struct be_xconn *cc, *sc;
	struct be_xevent ev;
	char addr[128], laddr[128], big[64];
	int i;

	xt_init(&e, argc, argv);
	xt_mem_reg(&e, &mem, TV_REGION);
	xt_side_init(&e, &srv, 256, 16);
	xt_mem_recvs(&srv, &mem, 0, 4, TV_RECV_SIZE);
	xt_side_init(&e, &cli, 256, 16);
	xt_mem_recvs(&cli, &mem, 64u << 10, 4, TV_RECV_SIZE);
	ca.send_cq = cli.cq;
	ca.recv_cq = cli.cq;
	ca.srq = cli.srq;
	ca.max_send_wr = 16;

	/* Bad input: no connection object comes out. */
	cc = NULL;
	ASSERT_EQ(e.ops->connect(cli.ch, "no-port-here", &ca, NULL, 0, &cc), -EINVAL);
	snprintf(addr, sizeof(addr), "%s:0", getenv("BE_RXE_IP0"));
	ASSERT_EQ(e.ops->connect(cli.ch, addr, &ca, NULL, 0, &cc), -EINVAL);
	memset(big, 1, sizeof(big));
	snprintf(addr, sizeof(addr), "%s:1", getenv("BE_RXE_IP0"));
	ASSERT_EQ(e.ops->connect(cli.ch, addr, &ca, big, BE_XPORT_PRIV_MAX + 1, &cc), -EINVAL);
	ASSERT(cc == NULL);

	/* The listener rejects, with a reason. */
	snprintf(addr, sizeof(addr), "%s:0", getenv("BE_RXE_IP0"));
	ASSERT_OK(e.ops->listen(srv.ch, addr, 4, &lst));
	ASSERT_OK(e.ops->listener_addr(lst, laddr, sizeof(laddr)));
	ASSERT_OK(e.ops->connect(cli.ch, laddr, &ca, big, BE_XPORT_PRIV_MAX, &cc));
	ev = xt_side_wait_event(&srv, BE_XEV_CONNECT_REQUEST, 1);
	ASSERT_EQ(ev.priv_len, BE_XPORT_PRIV_MAX);
	for (i = 0; i < BE_XPORT_PRIV_MAX; i++)
		ASSERT_EQ(ev.priv[i], 1);
	sc = ev.conn;
	ASSERT_OK(e.ops->reject(sc, "busy", 4));
	ev = xt_side_wait_event(&cli, BE_XEV_REJECTED, 1);
	ASSERT(ev.conn == cc);
	ASSERT_EQ(ev.status, -ECONNREFUSED);
	ASSERT_EQ(ev.priv_len, 4);
	ASSERT(memcmp(ev.priv, "busy", 4) == 0);
	e.ops->conn_destroy(cc);

	/* Nobody listens: unreachable, refused, as TCP would say. */
	e.ops->listener_close(lst);
	ASSERT_OK(e.ops->connect(cli.ch, laddr, &ca, "x", 1, &cc));
	ev = xt_side_wait_event(&cli, BE_XEV_UNREACHABLE, 1);
	ASSERT(ev.conn == cc);
	ASSERT_EQ(ev.status, -ECONNREFUSED);
	ASSERT_EQ(ev.priv_len, 0);
	e.ops->conn_destroy(cc);

	/* Nothing else was reported for those conns. */
	xt_side_pump(&e, 100);
	ASSERT_EQ(cli.nev, 0);
	ASSERT_EQ(srv.nev, 0);

	xt_sides_close(&cli, &srv, &mem, NULL);
	xt_fini(&e);
	return 0;
}
