/*
 * Check that a receive buffer the SRQ refuses to take back (injected:
 * the server's next receive repost fails with -ENOMEM) is not lost: the
 * Engine whose receive it was fails with that error (its socket's
 * on_close), the worker counts it ("repost_errors"), keeps the buffer
 * and posts it again once the SRQ takes it, so every receive buffer is
 * back; the client's sends each complete exactly once, and a new
 * connection is served.
 */
#include <errno.h>

#include "engine/worker.h"
#include "ftest.h"

#define MSG 1000

static struct st_server srv;
static struct st_server cli, cli2;
static struct st_sends sends;

int main(int argc, char **argv)
{
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_sock *c, *c2;
	struct be_ctx *ctx;
	struct be__wdev *wd;
	struct be__fake_stats fs;
	char addr[160], json[4096];
	struct ft t;

	ft_init(&t, argc, argv);
	ft_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	c = ft_connect_send(ws[1], addr, &cli, MSG, 1, &sends);
	ST_PUMP_WHILE(ws, 2, srv.recvd != 1);
	ASSERT_OK(be__worker_wdev(ws[0], "fake", NULL, false, &wd));

	be__fake_srq_post_fail(1, -ENOMEM);
	ASSERT_OK(be_sock_send(c, st_msg(MSG, 2), MSG, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, srv.closed != 1 || cli.closed != 1 || sends.done != 2);
	be__fake_stats(&fs);
	ASSERT_EQ(fs.srq_post_failed, 1);
	ASSERT_EQ(srv.recvd, 2); /* the message itself was delivered */
	ASSERT_EQ(srv.close_reason, -ENOMEM);
	ASSERT_NE(cli.close_reason, 0);
	ASSERT_EQ(sends.done, 2);
	ASSERT_GT(be_worker_stats_json(ws[0], json, sizeof(json)), 0);
	ASSERT_EQ(st_json_num(json, "repost_errors"), 1);

	/* The SRQ takes buffers again: a new connection works, and the
	 * refused buffer is posted again. */
	be_sock_close(c);
	c2 = ft_connect_send(ws[1], addr, &cli2, MSG, 3, &sends);
	ST_PUMP_WHILE(ws, 2, srv.recvd != 3);
	st_pump_ms(ws, 2, 20);
	ASSERT_EQ(wd->nunposted, 0);
	ft_check_srq(ws[0]);
	ft_check_srq(ws[1]);
	be_sock_close(c2);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
