/*
 * Check the send window at both ends of its range, with large and small
 * messages mixed on two sockets of one Engine; everything must arrive
 * intact and in order. A stall here fails through the hang guard.
 *
 * --window tight (the default): a window of exactly one fragment. Every
 * large fragment then needs the whole window, and small messages (inline
 * SENDs, which nothing may have to signal) go between them; the window is
 * never exceeded.
 *
 * --window off: the window turned off (BE_SEND_WINDOW=off, what
 * bench/paper/incast.sh compares against). The setting reaches the
 * Engine as BE_SEND_WINDOW_OFF with no mixed window either, and large
 * messages, bounded only by the send queue, go beside the small ones. A
 * stall here would be an overflow in the window's arithmetic.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define WINDOW (64u << 10)

static bool window_off;
static int nmsg = 24;

static size_t msg_len(int i)
{
	size_t big = window_off ? (4u << 20) + 123 : 3 * WINDOW + 123;

	return i % 3 == 0 ? big : (size_t)(i % 5) * 40 + 1;
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
	return cli[0].got == nmsg && cli[1].got == nmsg && sends.done == 2 * nmsg;
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

	for (i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--window"))
			window_off = !strcmp(argv[i + 1], "off");
	if (window_off) {
		nmsg = 12;
		setenv("BE_SEND_WINDOW", "off", 1);
	}
	st_init(&t, argc, argv);
	if (window_off) {
		ASSERT(t.cfg.send_window == BE_SEND_WINDOW_OFF);
	} else {
		t.cfg.send_window = WINDOW;
		t.cfg.frag_size = WINDOW;
	}
	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	ASSERT(be_ctx_config(ctx)->send_window == t.cfg.send_window);
	for (k = 0; k < 2; k++)
		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, &cli[k], &s[k]));
	for (i = 0; i < nmsg; i++)
		for (k = 0; k < 2; k++)
			ASSERT_OK(be_sock_send(s[k], st_msg(msg_len(i), (uint32_t)(k * 1000 + i)),
					       msg_len(i), st_send_cb, &sends));
	st_pump(ws, 2, all_echoed, NULL);
	ASSERT_EQ(cli[0].bad + cli[1].bad, 0);
	ASSERT_EQ(sends.ok, 2 * nmsg);
	st_engine_stats(s[0], &es);
	if (window_off) {
		/* st_check_limits() but for the window, which has no bound now. */
		ASSERT_LE(es.max_credits_in_use, es.credits_granted);
		ASSERT_LE(es.max_peer_credits_in_use, es.credits_peer_max);
		ASSERT_EQ(es.protocol_errors, 0);
		ASSERT(es.send_window == BE_SEND_WINDOW_OFF);
		ASSERT_EQ(es.mixed_window, 0);
		fprintf(stderr, "window off: at most %llu bytes in flight\n",
			(unsigned long long)es.max_bytes_in_flight);
	} else {
		st_check_limits(&es);
		ASSERT_EQ(es.send_window, WINDOW);
		ASSERT_EQ(es.frag_size, WINDOW);
		ASSERT_LE(es.max_bytes_in_flight, WINDOW);
	}

	for (k = 0; k < 2; k++)
		be_sock_close(s[k]);
	be_listener_close(l);
	st_destroy(ws, 2);
	free(srv.socks);
	be_ctx_destroy(ctx);
	return 0;
}
