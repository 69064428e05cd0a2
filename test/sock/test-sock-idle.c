/*
 * Check the idle close of Engines: an Engine the client connected is kept
 * while any Socket uses it (however long), closed once no Socket used it
 * for engine_idle_ms (on both sides: the server's Engine follows the
 * disconnect), and a later connect to the same peer opens a new Engine
 * that works. With engine_idle_ms = 0 an unused Engine stays.
 *
 * No timing assertion: the test waits (bounded by the hang guard) for the
 * Engines to go, and "kept" is checked once an Engine of the worker sent
 * keepalives for several idle periods (the worker's timers ran through
 * them, however loaded the machine), which no schedule can turn into a
 * close.
 */
#include <string.h>

#include "stest.h"

#define IDLE_MS 200
#define KEEPALIVE_MS 40

static struct st_server srv;
static struct st_sends sends;
static int got;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	ASSERT_EQ(len, 64);
	ASSERT(st_check(buf, len, 7));
	got++;
	be_free(buf);
}

static struct be_worker *ws[2];

static uint64_t keepalives(struct be_sock *s)
{
	struct be_engine_stats es;

	st_engine_stats(s, &es);
	return es.keepalives_sent;
}

/* Progress until the Engine of @s (an idle one) sent keepalives for five
 * idle periods: its worker's timers ran through them. */
static void idle_periods(struct be_sock *s)
{
	uint64_t until = keepalives(s) + 5 * IDLE_MS / KEEPALIVE_MS;

	ST_PUMP_WHILE(ws, 2, keepalives(s) < until);
}

/* Progress until both workers' Engines are gone. */
static void engines_gone(void)
{
	ST_PUMP_WHILE(ws, 2, be_worker_engine_count(ws[0]) || be_worker_engine_count(ws[1]));
}

/* The client closed socket number @n: wait for the server's on_close and
 * close the server's handle too (the Engine is idle only then). */
static void close_pair(struct be_sock *s, int n)
{
	be_sock_close(s);
	ST_PUMP_WHILE(ws, 2, srv.closed != n);
	ASSERT_EQ(srv.nsocks, n);
	be_sock_close(srv.socks[n - 1]);
}

/* Open a socket to @addr, echo one message on it. */
static struct be_sock *echo_once(const char *addr)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	struct be_sock *s;
	int want = got + 1;

	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s));
	ASSERT_OK(be_sock_send(s, st_msg(64, 7), 64, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, got != want);
	return s;
}

int main(int argc, char **argv)
{
	struct be_listener *l, *l2;
	struct be_ctx *ctx, *ctx_keep;
	struct be_worker *wk;
	struct be_sock *s;
	char addr[160], addr2[160];
	struct st t;

	st_init(&t, argc, argv);
	t.cfg.engine_idle_ms = IDLE_MS;
	t.cfg.keepalive_ms = KEEPALIVE_MS; /* ticks every 10 ms */
	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));

	/* A Socket keeps its Engine through many idle periods. */
	s = echo_once(addr);
	idle_periods(s);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 1);

	/* The last Socket closed: both Engines go. */
	close_pair(s, 1);
	engines_gone();

	/* Connecting again opens a new Engine, which works. */
	s = echo_once(addr);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	close_pair(s, 2);
	engines_gone();
	ASSERT_EQ(sends.ok, 2);
	ASSERT_EQ(sends.done, 2);

	/* engine_idle_ms = 0: an unused Engine stays. */
	t.cfg.engine_idle_ms = 0;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx_keep));
	ASSERT_OK(be_worker_create(ctx_keep, &wk));
	be_worker_destroy(ws[1]);
	ws[1] = wk;
	s = echo_once(addr);
	close_pair(s, 3);
	/* The witness: a Socket on another Engine of the same worker, whose
	 * keepalives tell that the idle periods went by. */
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &st_server_cbs, &srv, &l2));
	ASSERT_OK(be_listener_addr(l2, addr2, sizeof(addr2)));
	s = echo_once(addr2);
	idle_periods(s);
	ASSERT_EQ(be_worker_engine_count(wk), 2);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 2);
	be_sock_close(s);

	be_listener_close(l2);
	be_listener_close(l);
	free(srv.socks);
	st_destroy(ws, 2); /* ws[1] is wk */
	be_ctx_destroy(ctx_keep);
	be_ctx_destroy(ctx);
	return 0;
}
