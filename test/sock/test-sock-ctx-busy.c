/*
 * Check that be_ctx_destroy() refuses with -EBUSY while a worker of the
 * context is alive and changes nothing (the worker keeps working on the
 * context's devices), and succeeds once the workers are gone. Before the
 * fix it logged and freed the devices under the live workers.
 */
#include <errno.h>

#include "stest.h"

static struct st_server srv;

int main(int argc, char **argv)
{
	const struct be_sock_cbs ccbs = { 0 };
	struct be_worker *ws[2];
	struct st_sends sends = { 0 };
	struct be_listener *l;
	struct be_sock *c;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;

	st_init(&t, argc, argv);
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &c));
	st_send_recvd(ws, c, 64, 1, &sends, &srv, 1);

	ASSERT_EQ(be_ctx_destroy(ctx), -EBUSY);
	/* Nothing was closed: a large message still goes through. */
	st_send_recvd(ws, c, 1 << 20, 2, &sends, &srv, 2);

	be_sock_close(c);
	st_shutdown(ws, 2); /* together: each waits for the other's answers */
	ASSERT_EQ(be_worker_destroy(ws[1]), 0);
	ASSERT_EQ(be_ctx_destroy(ctx), -EBUSY); /* one worker left */
	ASSERT_EQ(be_worker_destroy(ws[0]), 0);
	ASSERT_EQ(be_ctx_destroy(ctx), 0);
	free(srv.socks);
	return 0;
}
