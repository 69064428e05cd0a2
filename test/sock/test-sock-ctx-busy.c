/*
 * Check that be_ctx_destroy() refuses with -EBUSY while a worker of the
 * context is alive and changes nothing (the worker keeps working on the
 * context's devices), and succeeds once the workers are gone. Before the
 * fix it logged and freed the devices under the live workers.
 */
#include <errno.h>

#include "stest.h"

static struct st_fx f;

int main(int argc, char **argv)
{
	struct st_sends sends = { 0 };
	struct be_sock *c;

	st_fx_init(&f, argc, argv);
	st_fx_pair(&f);
	c = st_fx_connect(&f, NULL, NULL);
	st_send_recvd(f.ws, c, 64, 1, &sends, &f.srv, 1);

	ASSERT_EQ(be_ctx_destroy(f.ctx), -EBUSY);
	/* Nothing was closed: a large message still goes through. */
	st_send_recvd(f.ws, c, 1 << 20, 2, &sends, &f.srv, 2);

	be_sock_close(c);
	st_shutdown(f.ws, 2); /* together: each waits for the other's answers */
	ASSERT_EQ(be_worker_destroy(f.ws[1]), 0);
	ASSERT_EQ(be_ctx_destroy(f.ctx), -EBUSY); /* one worker left */
	ASSERT_EQ(be_worker_destroy(f.ws[0]), 0);
	ASSERT_EQ(be_ctx_destroy(f.ctx), 0);
	free(f.srv.socks);
	return 0;
}
