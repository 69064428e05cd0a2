/*
 * Check the send window at its tightest: a window of exactly one
 * fragment, with large and small messages mixed on two sockets of one
 * Engine. Every large fragment then needs the whole window, and small
 * messages (inline SENDs, which nothing may have to signal) go between
 * them: everything must still arrive intact and in order, and the window
 * is never exceeded. A stall here fails through the hang guard.
 */
#include <string.h>

#include "stest.h"

#define NMSG 24
#define WINDOW (64u << 10)

static size_t msg_len(int i)
{
	return i % 3 == 0 ? 3 * WINDOW + 123 : (size_t)(i % 5) * 40 + 1;
}

struct cli {
	int got;
	int bad;
};

static struct st_server srv;
static struct st_sends sends;
static struct cli cli[2];

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct cli *c = user;
	int k = (int)(c - cli);

	if (len != msg_len(c->got) || !st_check(buf, len, (uint32_t)(k * 1000 + c->got)))
		c->bad++;
	c->got++;
	be_free(buf);
}

static bool all_echoed(void *arg)
{
	return cli[0].got == NMSG && cli[1].got == NMSG && sends.done == 2 * NMSG;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	struct be_worker *ws[2];
	struct be_sock *s[2];
	struct be_listener *l;
	struct be_engine_stats es;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;
	int i, k;

	st_init(&t, argc, argv);
	t.cfg.send_window = WINDOW;
	t.cfg.frag_size = WINDOW;
	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	for (k = 0; k < 2; k++)
		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, &cli[k], &s[k]));
	for (i = 0; i < NMSG; i++)
		for (k = 0; k < 2; k++)
			ASSERT_OK(be_sock_send(s[k], st_msg(msg_len(i), (uint32_t)(k * 1000 + i)),
					       msg_len(i), st_send_cb, &sends));
	st_pump(ws, 2, all_echoed, NULL);
	ASSERT_EQ(cli[0].bad + cli[1].bad, 0);
	ASSERT_EQ(sends.ok, 2 * NMSG);
	st_engine_stats(s[0], &es);
	st_check_limits(&es);
	ASSERT_EQ(es.send_window, WINDOW);
	ASSERT_EQ(es.frag_size, WINDOW);
	ASSERT_LE(es.max_bytes_in_flight, WINDOW);

	for (k = 0; k < 2; k++)
		be_sock_close(s[k]);
	be_listener_close(l);
	st_destroy(ws, 2);
	free(srv.socks);
	be_ctx_destroy(ctx);
	return 0;
}
