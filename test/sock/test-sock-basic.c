/*
 * Check the basic life of sockets: connecting several sockets to one
 * address reuses one Engine on each side; eager, empty and large
 * messages are echoed intact and in order; buffers bemalloc does not know
 * are refused where they would be sent in place; a lone message of every
 * length up to past the inline limit (each alone on an idle Engine: sent
 * from its own buffer with the padding gathered from elsewhere, or past
 * the limit through a staging buffer) comes back intact; the stats JSON
 * lists the engine; closing the client's sockets gives the server's
 * on_close(0).
 */
#include <string.h>

#include "stest.h"

#define NSOCK 3
#define NMSG 6
#define LONE_MAX 300 /* past the inline limit (256 bytes of frame) */

static const size_t sizes[NMSG] = { 5, 0, 8192, 8193, 1 << 20, 100 }; /* eager_max 8192 */

struct cli {
	int got[NSOCK];
	int bad;
	int lone;      /* >= 0: the length of the lone message in flight */
	int lone_got;  /* lone messages echoed */
};

static struct be_sock *socks[NSOCK];
static struct st_sends sends;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct cli *c = user;
	int i;

	for (i = 0; i < NSOCK; i++)
		if (socks[i] == s)
			break;
	ASSERT_LT(i, NSOCK);
	if (c->lone >= 0) {
		ASSERT_EQ(len, (size_t)c->lone);
		if (!st_check(buf, len, 7000u + (uint32_t)len))
			c->bad++;
		c->lone = -1;
		c->lone_got++;
		be_free(buf);
		return;
	}
	ASSERT_LT(c->got[i], NMSG);
	ASSERT_EQ(len, sizes[c->got[i]]);
	ASSERT(buf);
	if (!st_check(buf, len, (uint32_t)(i * 100 + c->got[i])))
		c->bad++;
	c->got[i]++;
	be_free(buf);
}

static struct cli cli;
static struct st_server srv;

static bool all_echoed(void *arg)
{
	int i;

	for (i = 0; i < NSOCK; i++)
		if (cli.got[i] < NMSG)
			return false;
	return sends.done == NSOCK * NMSG;
}

static bool lone_echoed(void *arg)
{
	return cli.lone < 0 && sends.done == *(int *)arg;
}

static bool all_closed(void *arg)
{
	return srv.closed == NSOCK;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160], json[8192];
	struct be_engine_stats es;
	struct st t;
	int i, j, n;

	st_init(&t, argc, argv);
	cli.lone = -1;
	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	ASSERT(strncmp(addr, t.transport, strlen(t.transport)) == 0);

	/* Bad arguments fail without side effects. */
	ASSERT_EQ(be_sock_connect(ws[1], "nonsense", &ccbs, &cli, &socks[0]), -EINVAL);
	ASSERT_EQ(be_sock_connect(ws[1], "nope://x", &ccbs, &cli, &socks[0]), -EPROTONOSUPPORT);

	for (i = 0; i < NSOCK; i++)
		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, &cli, &socks[i]));
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	{
		char notmine[16];

		/* Before the handshake any size may turn out large: every
		 * buffer is looked up. */
		ASSERT_EQ(be_sock_send(socks[0], notmine, sizeof(notmine), st_send_cb, &sends),
			  -EINVAL);
		ASSERT_EQ(be_sock_send(socks[0], NULL, 0, NULL, NULL), -EINVAL);
	}
	for (j = 0; j < NMSG; j++)
		for (i = 0; i < NSOCK; i++) {
			void *m = st_msg(sizes[j], (uint32_t)(i * 100 + j));

			ASSERT_OK(be_sock_send(socks[i], m, sizes[j], st_send_cb, &sends));
		}
	st_pump(ws, 2, all_echoed, NULL);
	{
		static char notmine[16384]; /* above the default eager_max */

		/* A large message is sent from where it is: registered
		 * memory only. */
		ASSERT_EQ(be_sock_send(socks[0], notmine, sizeof(notmine), st_send_cb, &sends),
			  -EINVAL);
	}
	ASSERT_EQ(cli.bad, 0);
	ASSERT_EQ(sends.ok, NSOCK * NMSG);
	ASSERT_EQ(srv.accepted, NSOCK);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 1);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);

	st_engine_stats(socks[0], &es);
	st_check_limits(&es);
	ASSERT_EQ(es.msgs_sent, NSOCK * NMSG);
	ASSERT_EQ(es.msgs_recv, NSOCK * NMSG);
	ASSERT_EQ(es.large_sent, NSOCK * 2);
	ASSERT_EQ(es.sockets, NSOCK);
	n = be_worker_stats_json(ws[1], json, sizeof(json));
	ASSERT_GT(n, 0);
	ASSERT_LT(n, (int)sizeof(json));
	ASSERT(strstr(json, "\"engines\":1"));
	ASSERT(strstr(json, "\"max_bytes_in_flight\":"));
	ASSERT_EQ(be_worker_stats_json(ws[1], NULL, 0), n);
	n = be_sock_stats_json(socks[1], json, sizeof(json));
	ASSERT_GT(n, 0);
	ASSERT(strstr(json, "\"msgs_sent\":6,"));
	ASSERT(strstr(json, "\"large_sent\":2,"));
	ASSERT(strstr(json, "\"queued\":0}"));

	/* One message at a time, each alone on an idle Engine. */
	for (j = 0; j <= LONE_MAX; j++) {
		int want = sends.done + 1;

		cli.lone = j;
		ASSERT_OK(be_sock_send(socks[0], st_msg((size_t)j, 7000u + (uint32_t)j), (size_t)j,
				       st_send_cb, &sends));
		st_pump(ws, 2, lone_echoed, &want);
	}
	ASSERT_EQ(cli.lone_got, LONE_MAX + 1);
	ASSERT_EQ(cli.bad, 0);
	ASSERT_EQ(sends.ok, NSOCK * NMSG + LONE_MAX + 1);

	for (i = 0; i < NSOCK; i++)
		be_sock_close(socks[i]);
	st_pump(ws, 2, all_closed, NULL);
	ASSERT_EQ(srv.close_reason, 0);
	for (i = 0; i < srv.nsocks; i++)
		ASSERT_EQ(be_sock_send(srv.socks[i], NULL, 0, st_send_cb, &sends), -ENOTCONN);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
