/*
 * Check that a connect no Socket waits for any more is abandoned: an
 * Engine still connecting (its peer's worker is not progressed, so the
 * handshake is not answered) stays while one of its Sockets is open, goes
 * once the last one is closed, long before connect_timeout_ms, and the
 * next connect to the same address opens a fresh Engine, which works once
 * the peer answers. Before, the abandoned Engine stayed until its connect
 * timed out and every later connect reused it: a connect that hung (a
 * Soft-RoCE request lost while a port's address came back) made each
 * later one, such as the RPC layer's probes, hang as long.
 *
 * No timing assertion: connect_timeout_ms is ten minutes, so the wait for
 * the Engine to go (bounded by the hang guard) ends only by the abandon.
 */
#include "stest.h"

static struct st_server srv;
static struct st_sends sends;
static struct be_worker *ws[2];
static int got;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	(void)s;
	(void)user;
	ASSERT_EQ(len, 64);
	ASSERT(st_check(buf, len, 9));
	got++;
	be_free(buf);
}

static bool client_engines_gone(void *arg)
{
	(void)arg;
	return be_worker_engine_count(ws[1]) == 0;
}

static bool echoed(void *arg)
{
	(void)arg;
	return got == 1;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	struct be_sock *s1, *s2, *s3;
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;

	st_init(&t, argc, argv);
	t.cfg.connect_timeout_ms = 600000;
	srv.echo = true;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));

	/* Two Sockets on one Engine that cannot finish connecting: only the
	 * client's worker runs. Closing one leaves the Engine to the other. */
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s1));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s2));
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	st_pump_ms(&ws[1], 1, 50);
	be_sock_close(s1);
	st_pump_ms(&ws[1], 1, 50);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);

	/* The last one closed: the connect is abandoned. */
	be_sock_close(s2);
	st_pump(&ws[1], 1, client_engines_gone, NULL);

	/* A fresh connect gets a fresh Engine, and it carries messages. */
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s3));
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	ASSERT_OK(be_sock_send(s3, st_msg(64, 9), 64, st_send_cb, &sends));
	st_pump(ws, 2, echoed, NULL);
	ASSERT_EQ(sends.ok, 1);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	be_sock_close(s3);

	st_unpair(ctx, ws, &srv, l);
	return 0;
}
