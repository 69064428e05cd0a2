/*
 * Check that be_sock_close_notify() reports, once, when a close is done
 * and how: 0 once the peer answered, with every message whose send
 * completed with 0 already handed to the peer's on_recv and the peer's
 * on_close(0) queued; -ECONNRESET when the closes crossed or the peer had
 * closed first; -ECONNREFUSED for a refused socket; 0 for a socket closed
 * before its Engine connected (every send cancelled); -ECANCELED when
 * be_worker_destroy() gives up on a peer that never answers (within
 * close_timeout_ms); and that the callback never runs inside the call
 * and -EINVAL leaves no callback behind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define NMSG 20

struct done {
	int calls;
	int status;
	int srv_recvd;  /* what the server had received when the callback ran */
	int srv_closed; /* ... and its on_close calls */
};

static struct st_server srv;

static void done_cb(int status, void *arg)
{
	struct done *d = arg;

	d->calls++;
	d->status = status;
	d->srv_recvd = srv.recvd;
	d->srv_closed = srv.closed;
}

static bool is_done(void *arg)
{
	return ((struct done *)arg)->calls > 0;
}

static bool srv_has(void *arg)
{
	return srv.nsocks >= (int)(intptr_t)arg;
}

static int cli_closed, cli_reason;
static void cli_close(struct be_sock *s, int reason, void *user)
{
	cli_closed++;
	cli_reason = reason;
}

static bool cli_got_close(void *arg)
{
	return cli_closed >= (int)(intptr_t)arg;
}

static int refuse_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	return -EPERM;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_close = cli_close };
	struct be_worker *ws[2];
	struct be_listener *l, *lr;
	struct be_ctx *ctx;
	struct be_sock *s, *ss;
	struct st_sends sends = { 0 };
	struct done first = { 0 }, bad = { 0 }; /* checked again at the end */
	char addr[160], raddr[160];
	struct st t;
	int i;

	st_init(&t, argc, argv);
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));

	/* The close is done once the peer answered: by then the server got
	 * every message and reported on_close(0). */
	{
		struct done *d = &first;

		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s));
		for (i = 0; i < NMSG; i++) {
			size_t len = i % 5 == 4 ? 100000 : 64;

			ASSERT_OK(be_sock_send(s, st_msg(len, (uint32_t)i), len, st_send_cb,
					       &sends));
		}
		ST_PUMP_WHILE(ws, 2, sends.done < NMSG);
		ASSERT_EQ(sends.ok, NMSG);
		ASSERT_OK(be_sock_close_notify(s, done_cb, d));
		ASSERT_EQ(d->calls, 0); /* never inside the call */
		st_pump(ws, 2, is_done, d);
		ASSERT_EQ(d->status, 0);
		ASSERT_EQ(d->srv_recvd, NMSG);
		ASSERT_EQ(d->srv_closed, 1);
		ASSERT_EQ(srv.close_reason, 0);
		/* No on_close after a close: it would have come with the
		 * answer, before the callback. Once only: checked at the end. */
		ASSERT_EQ(cli_closed, 0);
	}

	/* Both sides close at once: the closes cross. */
	{
		struct done dc = { 0 }, dsv = { 0 };

		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s));
		ASSERT_OK(be_sock_send(s, st_msg(10, 1), 10, st_send_cb, &sends));
		st_pump(ws, 2, srv_has, (void *)(intptr_t)2);
		ss = srv.socks[1];
		srv.socks[1] = NULL;
		ASSERT_OK(be_sock_close_notify(s, done_cb, &dc));
		ASSERT_OK(be_sock_close_notify(ss, done_cb, &dsv));
		st_pump(ws, 2, is_done, &dc);
		st_pump(ws, 2, is_done, &dsv);
		ASSERT_EQ(dc.status, -ECONNRESET);
		ASSERT_EQ(dsv.status, -ECONNRESET);
	}

	/* The peer closed first: the close is done at once, -ECONNRESET. */
	{
		struct done d = { 0 };

		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s));
		ASSERT_OK(be_sock_send(s, st_msg(10, 2), 10, st_send_cb, &sends));
		st_pump(ws, 2, srv_has, (void *)(intptr_t)3);
		be_sock_close(srv.socks[2]);
		srv.socks[2] = NULL;
		st_pump(ws, 2, cli_got_close, (void *)(intptr_t)1);
		ASSERT_EQ(cli_reason, 0);
		ASSERT_OK(be_sock_close_notify(s, done_cb, &d));
		st_pump(ws, 2, is_done, &d);
		ASSERT_EQ(d.status, -ECONNRESET);
	}

	/* Closed before its Engine connected: nothing went, 0. */
	{
		struct done d = { 0 };
		struct st_sends c = { 0 };

		/* ws[0] has no Engine to its own listener yet: a new one. */
		ASSERT_OK(be_sock_connect(ws[0], addr, &ccbs, NULL, &s));
		ASSERT_OK(be_sock_send(s, st_msg(10, 3), 10, st_send_cb, &c));
		ASSERT_OK(be_sock_close_notify(s, done_cb, &d));
		st_pump(ws, 2, is_done, &d);
		ASSERT_EQ(d.status, 0);
		ST_PUMP_WHILE(ws, 2, c.done < 1);
		ASSERT_EQ(c.canceled, 1);
	}

	/* A refused socket: on_close(-ECONNREFUSED), then its close. */
	{
		struct be_sock_cbs rcbs = st_server_cbs;
		struct done d = { 0 };

		rcbs.on_accept = refuse_accept;
		ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &rcbs, &srv, &lr));
		ASSERT_OK(be_listener_addr(lr, raddr, sizeof(raddr)));
		ASSERT_OK(be_sock_connect(ws[1], raddr, &ccbs, NULL, &s));
		st_pump(ws, 2, cli_got_close, (void *)(intptr_t)2);
		ASSERT_EQ(cli_reason, -ECONNREFUSED);
		ASSERT_OK(be_sock_close_notify(s, done_cb, &d));
		st_pump(ws, 2, is_done, &d);
		ASSERT_EQ(d.status, -ECONNREFUSED);
		be_listener_close(lr);
	}

	/* Bad calls: -EINVAL, no callback (checked once the workers are
	 * gone, the socket's close long done). */
	ASSERT_EQ(be_sock_close_notify(NULL, done_cb, &bad), -EINVAL);
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s));
	ASSERT_EQ(be_sock_close_notify(s, NULL, &bad), -EINVAL);
	be_sock_close(s);
	st_unpair(ctx, ws, &srv, l);
	ASSERT_EQ(first.calls, 1);
	ASSERT_EQ(bad.calls, 0);

	/* A peer that never answers: be_worker_destroy() waits
	 * close_timeout_ms, then gives up: -ECANCELED, inside the call. */
	{
		struct be_worker *w2[2];
		struct done d = { 0 };

		memset(&srv, 0, sizeof(srv));
		t.cfg.close_timeout_ms = 200;
		st_pair(&t, &ctx, w2, &srv, &l, addr, sizeof(addr));
		ASSERT_OK(be_sock_connect(w2[1], addr, &ccbs, NULL, &s));
		ASSERT_OK(be_sock_send(s, st_msg(10, 4), 10, st_send_cb, &sends));
		st_pump(w2, 2, srv_has, (void *)(intptr_t)1);
		ASSERT_OK(be_sock_close_notify(s, done_cb, &d));
		ASSERT_EQ(be_worker_shutdown(w2[1], 50), -ETIMEDOUT); /* w2[0] is not run */
		ASSERT_EQ(d.calls, 0);
		be_worker_destroy(w2[1]);
		ASSERT_EQ(d.calls, 1);
		ASSERT_EQ(d.status, -ECANCELED);
		st_server_close(&srv, l);
		be_worker_destroy(w2[0]);
		be_ctx_destroy(ctx);
	}
	return 0;
}
