/*
 * Check be_sock_fail_engine(): called from inside an on_recv of one of
 * two Sockets sharing an Engine, it ends the Engine as its keepalive
 * would. Both Sockets get on_close(BE_ECONNFAULT) once, a send made
 * after the call completes once with that error, the peer's Sockets
 * close with an error, and a second call says -ENOTCONN. The next
 * be_sock_connect() to the listener opens a new Engine that carries
 * messages. A Socket that never had an Engine to end (connect refused
 * at once) is not a case: be_sock_connect() fails without a handle.
 */
#include <string.h>

#include "stest.h"

struct cli {
	struct be_sock *s;
	int closes, reason, recvd;
};

static struct cli cli[2];
static struct st_sends sends, after;
static int fail_rc = 1, again_rc = 1;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct cli *c = user;

	(void)len;
	be_free(buf);
	c->recvd++;
	if (c != &cli[0] || fail_rc != 1)
		return;
	/* Inside a callback, with a send right before (it may have left)
	 * and one right after (it cannot leave). */
	ASSERT_OK(be_sock_send(cli[1].s, st_msg(64, 9), 64, st_send_cb, &sends));
	fail_rc = be_sock_fail_engine(s);
	again_rc = be_sock_fail_engine(s);
	ASSERT_OK(be_sock_send(cli[1].s, st_msg(64, 10), 64, st_send_cb, &after));
}

static void cli_close(struct be_sock *s, int reason, void *user)
{
	struct cli *c = user;

	(void)s;
	c->closes++;
	c->reason = reason;
}

static const struct be_sock_cbs cli_cbs = { .on_recv = cli_recv, .on_close = cli_close };

static bool both_closed(void *arg)
{
	(void)arg;
	return cli[0].closes && cli[1].closes && sends.done == 2 && after.done == 1;
}

int main(int argc, char **argv)
{
	struct st_server srv = { .echo = true };
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_ctx *ctx;
	struct be_sock *fresh;
	char addr[160];
	struct st t;
	int i;

	st_init(&t, argc, argv);
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	for (i = 0; i < 2; i++)
		ASSERT_OK(be_sock_connect(ws[1], addr, &cli_cbs, &cli[i], &cli[i].s));
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	/* cli[1] first: its echo comes back before cli[0]'s, whose on_recv
	 * ends the Engine. */
	ASSERT_OK(be_sock_send(cli[1].s, st_msg(64, 1), 64, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, cli[1].recvd < 1);
	memset(&sends, 0, sizeof(sends));
	ASSERT_OK(be_sock_send(cli[0].s, st_msg(64, 2), 64, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, fail_rc == 1);
	ASSERT_EQ(fail_rc, 0);
	ASSERT_EQ(again_rc, -ENOTCONN);
	st_pump(ws, 2, both_closed, NULL);
	st_pump_ms(ws, 2, 20);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(cli[i].closes, 1);
		ASSERT_EQ(cli[i].reason, BE_ECONNFAULT);
	}
	/* Each send completes once: cli[0]'s and the one before the call
	 * with any status (they may have left), the one after it with the
	 * Engine's error. */
	ASSERT_EQ(sends.done, 2);
	ASSERT_EQ(after.done, 1);
	ASSERT_EQ(after.other, 1);
	ASSERT_EQ(after.last_err, BE_ECONNFAULT);
	ASSERT_EQ(be_sock_fail_engine(cli[0].s), -ENOTCONN);
	ASSERT_EQ(be_sock_fail_engine(NULL), -EINVAL);
	/* The peer sees its Sockets go. */
	ST_PUMP_WHILE(ws, 2, srv.closed < 2);
	for (i = 0; i < 2; i++)
		be_sock_close(cli[i].s);

	/* A new connect opens a new Engine, which works. */
	memset(&cli[0], 0, sizeof(cli[0]));
	fail_rc = 0;
	ASSERT_OK(be_sock_connect(ws[1], addr, &cli_cbs, &cli[0], &fresh));
	cli[0].s = fresh;
	memset(&sends, 0, sizeof(sends));
	ASSERT_OK(be_sock_send(fresh, st_msg(64, 3), 64, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, cli[0].recvd < 1);
	ASSERT_EQ(sends.ok, 1);
	ASSERT_EQ(cli[0].closes, 0);
	be_sock_close(fresh);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
