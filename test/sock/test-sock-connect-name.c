/*
 * Check that a connect to a host name tries the addresses the name
 * resolves to in turn until one answers: with Debian's stock /etc/hosts
 * "localhost" resolves to ::1 first, then 127.0.0.1, and a Socket to
 * tcp://localhost:P must reach a listener on 127.0.0.1:P (verbs: a
 * listener on the guest's address, which the test adds to localhost's
 * names), carry messages both ways, and share its Engine with a second
 * Socket to the same name. When no address answers, the Socket closes
 * with an error once, and nothing hangs. The test sees the stock file in
 * a mount namespace of its own (test/hosts.h); where it cannot and the
 * system's file does not put another address first, it skips (77). shm
 * takes no host names (77).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h"
#include "stest.h"

#define NMSG 3

struct cli {
	struct be_sock *s[2];
	int got[2], bad, closed, close_reason;
};

static struct cli cli;
static struct st_server srv;
static struct st_sends sends;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int i = s == cli.s[0] ? 0 : 1;

	(void)user;
	if (len != 64 || !st_check(buf, len, (uint32_t)(i * 100 + cli.got[i])))
		cli.bad++;
	cli.got[i]++;
	be_free(buf);
}

static void cli_close(struct be_sock *s, int reason, void *user)
{
	(void)s;
	(void)user;
	cli.closed++;
	cli.close_reason = reason;
}

static bool all_echoed(void *arg)
{
	(void)arg;
	return cli.got[0] == NMSG && cli.got[1] == NMSG && sends.done == 2 * NMSG;
}

static bool closed(void *arg)
{
	(void)arg;
	return cli.closed > 0;
}

/* 1 if "localhost" resolves first to something other than @ip and later
 * to @ip: the case under test. */
static int localhost_has_ip_later(const char *ip)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	char buf[INET6_ADDRSTRLEN];
	int pos = 0, at = -1;

	if (getaddrinfo("localhost", NULL, &hints, &res))
		return 0;
	for (ai = res; ai; ai = ai->ai_next, pos++) {
		const void *a = ai->ai_family == AF_INET ?
					(const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr :
					(const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;

		if (!inet_ntop(ai->ai_family, a, buf, sizeof(buf)))
			continue;
		fprintf(stderr, "localhost: %s\n", buf);
		if (at < 0 && !strcmp(buf, ip))
			at = pos;
	}
	freeaddrinfo(res);
	return at > 0;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv, .on_close = cli_close };
	char addr[160], name[200], scheme[16], ip[64], extra[100];
	struct be_listener *l, *l2;
	struct be_worker *ws[2];
	struct be_ctx *ctx;
	struct be_sock *dead;
	const char *host, *port;
	struct st t;
	int i, j, r;

	st_init(&t, argc, argv);
	if (!strcmp(t.transport, "shm"))
		return 77;
	/* scheme://ip:0 -> the listener's ip, before any lookup. */
	host = strstr(st_listen_addr(&t), "://");
	ASSERT(host);
	snprintf(scheme, sizeof(scheme), "%.*s", (int)(host - t.addr), t.addr);
	host += 3;
	port = strrchr(host, ':');
	ASSERT(port);
	snprintf(ip, sizeof(ip), "%.*s", (int)(port - host), host);
	extra[0] = '\0';
	if (strcmp(ip, "127.0.0.1") != 0)
		snprintf(extra, sizeof(extra), "%s\tlocalhost\n", ip);
	r = test_stock_hosts(extra);
	if (r)
		fprintf(stderr, "cannot show this process Debian's stock /etc/hosts: %s\n",
			strerror(-r));
	if (!localhost_has_ip_later(ip)) {
		fprintf(stderr, "localhost does not resolve to another address before %s here: "
				"skipped\n", ip);
		return 77;
	}

	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	port = strrchr(addr, ':');
	ASSERT(port);
	snprintf(name, sizeof(name), "%s://localhost%s", scheme, port);
	for (i = 0; i < 2; i++) {
		r = be_sock_connect(ws[1], name, &ccbs, NULL, &cli.s[i]);
		if (r)
			TEST_FAIL("connect %s: %s", name, be_strerror(r));
	}
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	for (j = 0; j < NMSG; j++)
		for (i = 0; i < 2; i++)
			ASSERT_OK(be_sock_send(cli.s[i], st_msg(64, (uint32_t)(i * 100 + j)), 64,
					       st_send_cb, &sends));
	st_pump(ws, 2, all_echoed, NULL);
	ASSERT_EQ(cli.bad, 0);
	ASSERT_EQ(sends.ok, 2 * NMSG);
	ASSERT_EQ(srv.accepted, 2);
	ASSERT_EQ(cli.closed, 0);
	for (i = 0; i < 2; i++)
		be_sock_close(cli.s[i]);

	/* Nobody listens on any of localhost's addresses at the port of a
	 * closed listener: one close with an error, after every address was
	 * tried. */
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &st_server_cbs, &srv, &l2));
	ASSERT_OK(be_listener_addr(l2, addr, sizeof(addr)));
	be_listener_close(l2);
	port = strrchr(addr, ':');
	ASSERT(port);
	snprintf(name, sizeof(name), "%s://localhost%s", scheme, port);
	ASSERT_OK(be_sock_connect(ws[1], name, &ccbs, NULL, &dead));
	st_pump(ws, 2, closed, NULL);
	ASSERT_EQ(cli.closed, 1);
	ASSERT_LT(cli.close_reason, 0);
	be_sock_close(dead);

	st_server_close(&srv, l);
	be_worker_destroy(ws[1]);
	be_worker_destroy(ws[0]);
	be_ctx_destroy(ctx);
	return 0;
}
