/*
 * Check the connect path when connection events go missing or come late
 * (injected): a connection request that never reaches the listener's
 * worker (dropped) makes the connect time out: the socket gets
 * on_close(-ETIMEDOUT) exactly once and its queued send completes with
 * -ETIMEDOUT; the next connect to the same listener works. ESTABLISHED
 * events held back for a while delay the connect but lose nothing. The
 * dropped request is refused when its listener closes (the ASan build
 * checks nothing of it leaks).
 */
#include <errno.h>

#include "ftest.h"

static struct st_server srv, srv2;
static struct st_server cli, cli2, cli3;
static struct st_sends sends, sends2, sends3;

int main(int argc, char **argv)
{
	struct be_worker *ws[2], *wq[3];
	struct be_ctx *qctx;
	struct be_listener *l, *l2;
	struct be_sock *c, *c2, *c3;
	struct be_ctx *ctx;
	struct be__fake_stats fs;
	char addr[160], addr2[160];
	struct ft t;
	int i;

	ft_init(&t, argc, argv);
	ft_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));

	/* 1: the request is lost: the connect times out. The client is a
	 * worker of its own context with a short connect timeout, so the
	 * other connects, which must succeed however loaded the machine,
	 * keep the usual one. */
	t.st.cfg.connect_timeout_ms = 300;
	ASSERT_OK(be_ctx_create(&t.st.cfg, &qctx));
	ASSERT_OK(be_worker_create(qctx, &wq[0]));
	wq[1] = ws[0];
	wq[2] = ws[1];
	ASSERT_OK(be__fake_event_rule(BE_XEV_CONNECT_REQUEST, 1, -1));
	c = ft_connect_send(wq[0], addr, &cli, 100, 1, &sends);
	ST_PUMP_WHILE(wq, 3, !cli.closed || sends.done != 1);
	be__fake_stats(&fs);
	ASSERT_EQ(fs.ev_dropped, 1);
	ASSERT_EQ(cli.closed, 1);
	ASSERT_EQ(cli.close_reason, -ETIMEDOUT);
	ASSERT_EQ(sends.done, 1);
	ASSERT_EQ(sends.last_err, -ETIMEDOUT);
	ASSERT_EQ(srv.accepted, 0);
	be_sock_close(c);
	st_destroy(wq, 1);
	be_ctx_destroy(qctx);

	/* 2: the next connect to the same listener works. */
	c2 = ft_connect_send(ws[1], addr, &cli2, 100, 2, &sends2);
	ST_PUMP_WHILE(ws, 2, srv.recvd != 1 || sends2.ok != 1);
	ASSERT_EQ(cli2.closed, 0);

	/* 3: both ESTABLISHED events of a new Engine come 50 polls late:
	 * nothing is lost. */
	ft_listen(&t, ws[0], &srv2, &l2, addr2, sizeof(addr2));
	ASSERT_OK(be__fake_event_rule(BE_XEV_ESTABLISHED, 2, 50));
	c3 = ft_connect_send(ws[1], addr2, &cli3, 100, 3, &sends3);
	ST_PUMP_WHILE(ws, 2, srv2.recvd != 1 || sends3.ok != 1);
	be__fake_stats(&fs);
	ASSERT_EQ(fs.ev_delayed, 2);
	ASSERT_EQ(cli3.closed, 0);

	be_sock_close(c2);
	be_sock_close(c3);
	be_listener_close(l2);
	for (i = 0; i < srv2.nsocks; i++)
		be_sock_close(srv2.socks[i]);
	free(srv2.socks);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
