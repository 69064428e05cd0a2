/*
 * Check tcp addressing: "host:port" with an IPv4 address, a name
 * ("localhost"), an IPv6 address in brackets (when the host has IPv6),
 * port 0 for listening; listener_addr reports a connectable address; bad
 * addresses (no port, port out of range, port 0 to connect, empty,
 * unresolvable name, too long) fail at once with a negative errno.
 * "localhost" is looked up in Debian's stock /etc/hosts where the test
 * can show it that (test/hosts.h): ::1 first, then 127.0.0.1, where the
 * listener is.
 */
#define _GNU_SOURCE
#include "hosts.h"
#include "xtest.h"

static void pair_via(struct xt *t, struct xt_side *cli, struct xt_side *srv,
		     const char *listen_addr, const char *connect_host)
{
	char addr[BE_XPORT_ADDR_MAX], caddr[BE_XPORT_ADDR_MAX];
	struct be_xconn_attr ca = xt_attr(cli, 4), sa = xt_attr(srv, 4);
	struct be_xlistener *l;
	struct be_xconn *c, *s;
	struct be_xevent ev;
	const char *port;

	if (t->ops->listen(srv->ch, listen_addr, 16, &l) < 0) {
		fprintf(stderr, "cannot listen on %s here: skipped that part\n", listen_addr);
		return;
	}
	ASSERT_OK(t->ops->listener_addr(l, addr, sizeof(addr)));
	port = strrchr(addr, ':');
	ASSERT(port && port[1] != '0');
	if (connect_host)
		snprintf(caddr, sizeof(caddr), "%s%s", connect_host, port);
	else
		snprintf(caddr, sizeof(caddr), "%s", addr);
	ASSERT_OK(t->ops->connect(cli->ch, caddr, &ca, NULL, 0, &c));
	xt_expect_event(t, srv, BE_XEV_CONNECT_REQUEST, &ev);
	s = ev.conn;
	ASSERT_OK(t->ops->accept(s, &sa, NULL, 0));
	xt_expect_event(t, srv, BE_XEV_ESTABLISHED, NULL);
	xt_expect_event(t, cli, BE_XEV_ESTABLISHED, NULL);
	ASSERT_OK(t->ops->conn_peer_addr(s, caddr, sizeof(caddr)));
	ASSERT(caddr[0]);
	t->ops->conn_destroy(c);
	t->ops->conn_destroy(s);
	t->ops->listener_close(l);
}

int main(int argc, char **argv)
{
	static const char *bad[] = {
		"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:0", "127.0.0.1:12x",
		":1234", "", "no-such-host.invalid:1234", "[::1:1234",
	};
	char longaddr[300];
	struct xt t;
	struct xt_side cli, srv;
	struct be_xconn_attr ca;
	struct be_xlistener *l;
	struct be_xconn *c;
	size_t i;
	int rc;

	xt_init(&t, argc, argv);
	if (strcmp(t.transport, "tcp") != 0)
		return 77;
	rc = test_stock_hosts(NULL);
	if (rc)
		fprintf(stderr, "the system's /etc/hosts is used: %s\n", strerror(-rc));
	xt_side_init(&t, &cli, 16, 4);
	xt_side_init(&t, &srv, 16, 4);
	pair_via(&t, &cli, &srv, "127.0.0.1:0", NULL);
	pair_via(&t, &cli, &srv, "127.0.0.1:0", "localhost");
	pair_via(&t, &cli, &srv, "0.0.0.0:0", "127.0.0.1");
	pair_via(&t, &cli, &srv, "[::1]:0", NULL);

	ca = xt_attr(&cli, 4);
	for (i = 0; i < BE_ARRAY_SIZE(bad); i++) {
		int r = t.ops->connect(cli.ch, bad[i], &ca, NULL, 0, &c);

		if (r >= 0)
			TEST_FAIL("connect(\"%s\") succeeded", bad[i]);
	}
	memset(longaddr, '1', sizeof(longaddr) - 1);
	longaddr[sizeof(longaddr) - 1] = '\0';
	ASSERT(t.ops->connect(cli.ch, longaddr, &ca, NULL, 0, &c) < 0);
	ASSERT(t.ops->listen(srv.ch, "127.0.0.1", 16, &l) < 0);
	ASSERT(t.ops->listen(srv.ch, "127.0.0.1:99999", 16, &l) < 0);
	ASSERT(t.ops->listen(srv.ch, NULL, 16, &l) < 0);
	/* A port in use. */
	{
		char addr[BE_XPORT_ADDR_MAX];
		struct be_xlistener *l2;

		ASSERT_OK(t.ops->listen(srv.ch, "127.0.0.1:0", 16, &l));
		ASSERT_OK(t.ops->listener_addr(l, addr, sizeof(addr)));
		ASSERT_EQ(t.ops->listen(srv.ch, addr, 16, &l2), -EADDRINUSE);
		ASSERT_EQ(t.ops->listener_addr(l, addr, 4), -ENOSPC);
		t.ops->listener_close(l);
	}
	ASSERT_EQ(cli.nev + srv.nev, 0);

	xt_side_fini(&t, &cli);
	xt_side_fini(&t, &srv);
	xt_fini(&t);
	return 0;
}
