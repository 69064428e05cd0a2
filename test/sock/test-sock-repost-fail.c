/*
 * Check that a receive buffer the transport refuses to take back (a
 * failed srq_post_recv, injected on the server's SRQ) is not silently
 * lost: the Engine whose receive it was fails with the transport's error
 * (its socket's on_close gets it) instead of returning a credit for a
 * receive that is not posted, the worker counts it ("repost_errors" in
 * be_worker_stats_json()), and once the transport works again the buffer
 * goes back on the SRQ and new connections are served. Before the fix
 * the failure was only logged and the credit returned anyway.
 */
#include <errno.h>

#include "engine/worker.h"
#include "stest.h"
#include "xport/xport.h"

static struct be_xsrq *fail_srq;
static int fail_post;
static struct st_server srv;
static int cli_closed = 1;

static int post_recv(struct be_xsrq *srq, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad)
{
	if (fail_post && srq == fail_srq) {
		*bad = wr;
		return -ENOMEM;
	}
	return st_ops_real()->srq_post_recv(srq, wr, bad);
}

static void cli_close(struct be_sock *s, int reason, void *user)
{
	cli_closed = reason;
}

static bool both_closed(void *arg)
{
	return srv.closed == *(int *)arg && cli_closed != 1;
}

int main(int argc, char **argv)
{
	const struct be_sock_cbs ccbs = { .on_close = cli_close };
	struct be_worker *ws[2];
	struct st_sends sends = { 0 };
	struct be_listener *l;
	struct be_sock *c;
	struct be_ctx *ctx;
	struct be__wdev *wd;
	char addr[160], json[4096];
	struct st t;
	int want;

	st_init(&t, argc, argv);
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	st_ops_override(&t, ctx)->srq_post_recv = post_recv;
	ASSERT_OK(be__worker_wdev(ws[0], t.transport, NULL, false, &wd));
	fail_srq = wd->srq;

	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &c));
	st_send_recvd(ws, c, 64, 1, &sends, &srv, 1);

	/* The next receive cannot be reposted. */
	fail_post = 1;
	ASSERT_OK(be_sock_send(c, st_msg(64, 2), 64, st_send_cb, &sends));
	want = 1;
	st_pump(ws, 2, both_closed, &want);
	ASSERT_EQ(srv.recvd, 2);            /* the message itself was delivered */
	ASSERT_EQ(srv.close_reason, -ENOMEM);
	ASSERT(cli_closed != 0);            /* the client saw its Engine go */
	ASSERT_GT(be_worker_stats_json(ws[0], json, sizeof(json)), 0);
	ASSERT_EQ(st_json_num(json, "repost_errors"), 1);
	ASSERT_EQ(wd->nunposted, 1);

	/* The transport recovers: the buffer is posted again, and a new
	 * connection works. */
	fail_post = 0;
	be_sock_close(c);
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &c));
	st_send_recvd(ws, c, 64, 3, &sends, &srv, 3);
	ASSERT_EQ(wd->nunposted, 0);
	be_sock_close(c);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
