/*
 * Check that Engine reuse does not depend on how the address is spelled:
 * Sockets opened to one listener under different spellings of its
 * address (tcp, verbs: "127.0.0.1:P", port "00P", "2130706433:P",
 * "0x7f000001:P", "[::ffff:127.0.0.1]:P", "localhost:P" where it
 * resolves to the listener's address, "[::1]" / "[0:0::1]" for an IPv6
 * listener; shm: the name) share ONE Engine on the connecting worker, and
 * every one of them carries its messages. A second listener gets a second
 * Engine. The worker's stats keep the address as the application gave
 * it. A host name that does not resolve fails be_sock_connect() with
 * -EHOSTUNREACH and creates nothing. The canonical form (be__inet_canon)
 * is numeric, reads back as itself, and rejects malformed ports.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stest.h"
#include "util/common.h"
#include "xport/addr.h"

#define MAXSPELL 16
#define NMSG 3

struct cli {
	struct be_sock *socks[2 * MAXSPELL + 1];
	int got[2 * MAXSPELL + 1];
	int n, bad;
};

static struct cli cli;
static struct st_server srv;
static struct st_sends sends;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int i;

	(void)user;
	for (i = 0; i < cli.n; i++)
		if (cli.socks[i] == s)
			break;
	ASSERT_LT(i, cli.n);
	ASSERT_LT(cli.got[i], NMSG);
	if (len != 64 + (size_t)cli.got[i] || !st_check(buf, len, (uint32_t)(i * 10 + cli.got[i])))
		cli.bad++;
	cli.got[i]++;
	be_free(buf);
}

static bool all_echoed(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < cli.n; i++)
		if (cli.got[i] < NMSG)
			return false;
	return sends.done == cli.n * NMSG;
}

/* Split "scheme://host:port" at its last colon. */
static void split(const char *addr, char *pre, size_t plen, char *host, size_t hlen,
		  unsigned *port)
{
	const char *h = strstr(addr, "://"), *c = strrchr(addr, ':');

	ASSERT(h && c && c > h + 3);
	ASSERT_LT((size_t)(h + 3 - addr), plen);
	snprintf(pre, plen, "%.*s", (int)(h + 3 - addr), addr);
	ASSERT_LT((size_t)(c - (h + 3)), hlen);
	snprintf(host, hlen, "%.*s", (int)(c - (h + 3)), h + 3);
	*port = (unsigned)atoi(c + 1);
}

/* 1 if the first address @name resolves to (as the transports resolve
 * it) is the IPv4 address @ip. */
static int resolves_first_to(const char *name, struct in_addr ip)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	int ok;

	if (getaddrinfo(name, NULL, &hints, &res))
		return 0;
	ok = res->ai_family == AF_INET &&
	     ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr == ip.s_addr;
	freeaddrinfo(res);
	return ok;
}

#define SPLEN 256

/* Append a spelling to @sp. */
static void __attribute__((format(printf, 3, 4))) add(char sp[][SPLEN], int *n, const char *fmt, ...)
{
	va_list ap;
	int r;

	ASSERT_LT(*n, MAXSPELL);
	va_start(ap, fmt);
	r = vsnprintf(sp[*n], SPLEN, fmt, ap);
	va_end(ap);
	ASSERT(r > 0 && r < SPLEN);
	(*n)++;
}

/* Fill @sp with spellings of the listener address @addr; returns how many. */
static int spellings(const char *transport, const char *addr, char sp[][SPLEN])
{
	char pre[32], host[128];
	struct in_addr ip;
	struct in6_addr ip6;
	unsigned port;
	uint32_t h;
	int n = 0;

	add(sp, &n, "%s", addr);
	if (!strcmp(transport, "shm"))
		return n; /* a name is used as given: it has one spelling */
	split(addr, pre, sizeof(pre), host, sizeof(host), &port);
	add(sp, &n, "%s%s:00%u", pre, host, port);
	if (inet_pton(AF_INET, host, &ip) == 1) {
		h = ntohl(ip.s_addr);
		add(sp, &n, "%s%u:%u", pre, h, port);
		add(sp, &n, "%s0x%08x:%u", pre, h, port);
		add(sp, &n, "%s%u.%u:%u", pre, h >> 24, h & 0xffffff, port);
		add(sp, &n, "%s[%s]:%u", pre, host, port);
		add(sp, &n, "%s[::ffff:%s]:%u", pre, host, port);
		if (resolves_first_to("localhost", ip))
			add(sp, &n, "%slocalhost:%u", pre, port);
	} else {
		char h6[128];

		ASSERT(host[0] == '[');
		snprintf(h6, sizeof(h6), "%.*s", (int)strlen(host) - 2, host + 1);
		ASSERT_EQ(inet_pton(AF_INET6, h6, &ip6), 1);
		/* Every 16-bit group written out in full, in upper case. */
		add(sp, &n, "%s[%04X:%04X:%04X:%04X:%04X:%04X:%04X:%04X]:%u", pre,
			 ip6.s6_addr[0] << 8 | ip6.s6_addr[1], ip6.s6_addr[2] << 8 | ip6.s6_addr[3],
			 ip6.s6_addr[4] << 8 | ip6.s6_addr[5], ip6.s6_addr[6] << 8 | ip6.s6_addr[7],
			 ip6.s6_addr[8] << 8 | ip6.s6_addr[9], ip6.s6_addr[10] << 8 | ip6.s6_addr[11],
			 ip6.s6_addr[12] << 8 | ip6.s6_addr[13], ip6.s6_addr[14] << 8 | ip6.s6_addr[15],
			 port);
		if (IN6_IS_ADDR_LOOPBACK(&ip6))
			add(sp, &n, "%s[0:0::1]:%u", pre, port);
	}
	/* Connect first with a spelling other than the listener's own. */
	memmove(sp[0], sp[n - 1], SPLEN);
	snprintf(sp[n - 1], SPLEN, "%s", addr);
	return n;
}

/* Open a socket under each spelling; all must land on one Engine. */
static void connect_all(struct be_worker *w, char sp[][SPLEN], int n, unsigned engines_before)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	int i;

	for (i = 0; i < n; i++) {
		int rc = be_sock_connect(w, sp[i], &ccbs, NULL, &cli.socks[cli.n]);

		if (rc)
			TEST_FAIL("connect \"%s\": %s", sp[i], be_strerror(rc));
		cli.n++;
		if (be_worker_engine_count(w) != engines_before + 1)
			TEST_FAIL("\"%s\" (spelling %d of \"%s\") opened Engine %u", sp[i], i + 1,
				  sp[0], be_worker_engine_count(w));
	}
}

/* The canonical form itself (tcp runs it; it is the same for verbs):
 * numeric, idempotent, and strict about ports. */
static void check_canon(void)
{
	static const struct {
		const char *in, *out;
	} ok[] = {
		{ "127.0.0.1:5000", "127.0.0.1:5000" },
		{ "127.1:05000", "127.0.0.1:5000" },
		{ "[127.0.0.1]:5000", "127.0.0.1:5000" },
		{ "[::FFFF:7F00:1]:5000", "127.0.0.1:5000" },
		{ "[0:0:0:0:0:0:0:1]:1", "[::1]:1" },
		{ "[2001:DB8::0:1]:65535", "[2001:db8::1]:65535" },
	};
	static const char *bad[] = {
		"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:+5",
		"127.0.0.1: 5", "127.0.0.1:5x", ":5000", "",
	};
	char buf[128], again[128];
	size_t i;

	for (i = 0; i < BE_ARRAY_SIZE(ok); i++) {
		ASSERT_OK(be__inet_canon(ok[i].in, buf, sizeof(buf)));
		if (strcmp(buf, ok[i].out))
			TEST_FAIL("canon(\"%s\") = \"%s\", want \"%s\"", ok[i].in, buf, ok[i].out);
	}
	for (i = 0; i < BE_ARRAY_SIZE(bad); i++)
		if (be__inet_canon(bad[i], buf, sizeof(buf)) != -EINVAL)
			TEST_FAIL("canon(\"%s\") did not fail with -EINVAL", bad[i]);
	ASSERT_EQ(be__inet_canon("no such host:1", buf, sizeof(buf)), -EHOSTUNREACH);
	ASSERT_EQ(be__inet_canon("127.0.0.1:5000", buf, 8), -ENOSPC);
	/* A scoped (link-local) address keeps its interface, and the
	 * canonical form reads back as itself. */
	if (be__inet_canon("[FE80::1%1]:7", buf, sizeof(buf)) == 0) {
		ASSERT(strncmp(buf, "[fe80::1%", 9) == 0);
		ASSERT_OK(be__inet_canon(buf, again, sizeof(again)));
		ASSERT(strcmp(again, buf) == 0);
	}
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	char addr[160], addr2[160], json[16384], want[SPLEN + 16];
	char sp[MAXSPELL][SPLEN], sp6[MAXSPELL][SPLEN];
	struct be_listener *l, *l2, *l6 = NULL;
	struct be_engine_stats es;
	struct be_worker *ws[2];
	struct be_ctx *ctx;
	struct be_sock *bad;
	struct st t;
	int i, j, n, n6 = 0, first6 = 0;
	unsigned engines;

	st_init(&t, argc, argv);
	if (!strcmp(t.transport, "tcp"))
		check_canon();
	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));

	n = spellings(t.transport, addr, sp);
	connect_all(ws[1], sp, n, 0);
	engines = 1;

	/* A second listener is another peer endpoint: a second Engine. */
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &st_server_cbs, &srv, &l2));
	ASSERT_OK(be_listener_addr(l2, addr2, sizeof(addr2)));
	ASSERT(strcmp(addr, addr2) != 0);
	ASSERT_OK(be_sock_connect(ws[1], addr2, &ccbs, NULL, &cli.socks[cli.n]));
	cli.n++;
	ASSERT_EQ(be_worker_engine_count(ws[1]), ++engines);

	/* IPv6, where the host has it (tcp; the rxe guest is IPv4 only). */
	if (!strcmp(t.transport, "tcp")) {
		char a6[160];

		if (be_listen(ws[0], "tcp://[::1]:0", &st_server_cbs, &srv, &l6) == 0) {
			ASSERT_OK(be_listener_addr(l6, a6, sizeof(a6)));
			n6 = spellings(t.transport, a6, sp6);
			first6 = cli.n;
			connect_all(ws[1], sp6, n6, engines);
			engines++;
		} else {
			fprintf(stderr, "no IPv6 loopback here: skipped that part\n");
		}
	}

	/* A name that does not resolve fails at once and creates nothing. */
	if (strcmp(t.transport, "shm") != 0) {
		char pre[32], host[128], nx[200];
		unsigned port;

		split(addr, pre, sizeof(pre), host, sizeof(host), &port);
		/* Not a valid host name: no resolver asks the network about it. */
		snprintf(nx, sizeof(nx), "%sno such host:%u", pre, port);
		bad = NULL;
		ASSERT_EQ(be_sock_connect(ws[1], nx, &ccbs, NULL, &bad), -EHOSTUNREACH);
		ASSERT(!bad);
		snprintf(nx, sizeof(nx), "%s%s:65536", pre, host);
		ASSERT_EQ(be_sock_connect(ws[1], nx, &ccbs, NULL, &bad), -EINVAL);
		snprintf(nx, sizeof(nx), "%s%s:0", pre, host);
		ASSERT_EQ(be_sock_connect(ws[1], nx, &ccbs, NULL, &bad), -EINVAL);
		ASSERT(!bad);
		ASSERT_EQ(be_worker_engine_count(ws[1]), engines);
	}

	/* Every socket, under every spelling, carries its messages. */
	for (j = 0; j < NMSG; j++)
		for (i = 0; i < cli.n; i++) {
			size_t len = 64 + (size_t)j;

			ASSERT_OK(be_sock_send(cli.socks[i], st_msg(len, (uint32_t)(i * 10 + j)), len,
					       st_send_cb, &sends));
		}
	st_pump(ws, 2, all_echoed, NULL);
	ASSERT_EQ(cli.bad, 0);
	ASSERT_EQ(sends.ok, cli.n * NMSG);
	ASSERT_EQ(srv.accepted, cli.n);
	ASSERT_EQ(be_worker_engine_count(ws[1]), engines);
	ASSERT_EQ(be_worker_engine_count(ws[0]), engines);
	st_engine_stats(cli.socks[0], &es);
	ASSERT_EQ(es.sockets, n);
	ASSERT_EQ(es.msgs_sent, n * NMSG);
	if (n6) {
		st_engine_stats(cli.socks[first6], &es);
		ASSERT_EQ(es.sockets, n6);
	}

	/* The stats show the address as the first connect spelled it. */
	ASSERT_GT(be_worker_stats_json(ws[1], json, sizeof(json)), 0);
	snprintf(want, sizeof(want), "\"addr\":\"%s\"", sp[0]);
	ASSERT(strstr(json, want));

	for (i = 0; i < cli.n; i++)
		be_sock_close(cli.socks[i]);
	for (i = 0; i < srv.nsocks; i++)
		be_sock_close(srv.socks[i]);
	free(srv.socks);
	if (l6)
		be_listener_close(l6);
	be_listener_close(l2);
	be_listener_close(l);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
	return 0;
}
