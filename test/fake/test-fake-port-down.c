/*
 * Check what a port going down does (injected on the fake device): the
 * device reports the port down, every Engine over it fails (on both
 * ends: the sockets get on_close with the Engine's error, -ENETDOWN from
 * the port event or a timeout or reset from the conn, exactly once) and every send, including those queued after the
 * port went, completes exactly once; a connect while the port is down
 * fails with on_close(-ENETDOWN); once the port is up again a new
 * connect works.
 */
#include <errno.h>

#include "engine/ctx.h"
#include "ftest.h"

#define MSG 1000

static struct st_server srv;
static struct st_server cli, cli2, cli3;
static struct st_sends sends, sends2, sends3;

static int port_up(struct be_ctx *ctx)
{
	struct be_xdev_attr a;
	struct be__cdev *cd;

	ASSERT_OK(be__ctx_dev(ctx, "fake", NULL, false, &cd));
	ASSERT_OK(cd->ops->dev_query(cd->dev, &a));
	return a.port[0].up;
}

/* The Engine's error: -ENETDOWN when the port event failed it, a timeout
 * or a reset when its conn's break came first. */
static bool is_err(int reason)
{
	return reason == -ENETDOWN || reason == -ETIMEDOUT || reason == -ECONNRESET;
}

int main(int argc, char **argv)
{
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_sock *c, *c2, *c3;
	struct be_ctx *ctx;
	char addr[160];
	struct ft t;
	int i, want;

	ft_init(&t, argc, argv);
	ft_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	c = ft_connect_send(ws[1], addr, &cli, MSG, 1, &sends);
	ST_PUMP_WHILE(ws, 2, srv.recvd != 1 || sends.ok != 1);
	ASSERT_EQ(port_up(ctx), 1);

	ASSERT_OK(be__fake_port(0, false));
	ASSERT_EQ(port_up(ctx), 0);
	for (i = 0; i < 5; i++)
		ASSERT_OK(be_sock_send(c, st_msg(MSG, 10 + i), MSG, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, !cli.closed || !srv.closed || sends.done != 6);
	ASSERT_EQ(cli.closed, 1);
	ASSERT(is_err(cli.close_reason));
	ASSERT_EQ(srv.closed, 1);
	ASSERT(is_err(srv.close_reason));
	ASSERT_EQ(sends.done, 6);
	ASSERT_EQ(sends.ok + sends.other, 6);

	/* Down: a connect cannot reach anything. */
	c2 = ft_connect_send(ws[1], addr, &cli2, MSG, 2, &sends2);
	ST_PUMP_WHILE(ws, 2, !cli2.closed || sends2.done != 1);
	ASSERT_EQ(cli2.closed, 1);
	ASSERT_EQ(cli2.close_reason, -ENETDOWN);
	ASSERT_EQ(sends2.last_err, -ENETDOWN);

	/* Up again: connects work. */
	ASSERT_OK(be__fake_port(0, true));
	ASSERT_EQ(port_up(ctx), 1);
	want = srv.recvd + 1;
	c3 = ft_connect_send(ws[1], addr, &cli3, MSG, 3, &sends3);
	ST_PUMP_WHILE(ws, 2, srv.recvd != want || sends3.ok != 1);
	ASSERT_EQ(cli3.closed, 0);
	st_pump_ms(ws, 2, 20);
	ft_check_srq(ws[0]);
	ft_check_srq(ws[1]);

	be_sock_close(c);
	be_sock_close(c2);
	be_sock_close(c3);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
