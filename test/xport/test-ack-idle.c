/*
 * Check that a receiver that stops polling never stalls its sender: once
 * a plain WRITE (no completion on the receiver) has been placed by the
 * receiver's cq_poll, the sender's WR completes while the receiver makes
 * no further call at all (as a worker that goes to sleep without
 * re-arming). Likewise after a SEND whose completion was polled, once
 * the receiver polls and gets nothing.
 */
#include <unistd.h>

#include "xtest.h"

static void wait_sender(struct xt *t, struct be_xcq *cq, uint64_t wr_id)
{
	struct be_xwc wc;
	int i, n = 0;

	/* Up to ~10 s (a hang guard): the ack is already on its way. */
	for (i = 0; i < 100000 && n == 0; i++) {
		n = t->ops->cq_poll(cq, &wc, 1);
		ASSERT_OK(n);
		if (!n)
			usleep(100);
	}
	ASSERT_EQ(n, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc.wr_id, wr_id);
}

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xwc wc;
	volatile uint8_t *dst;
	uint8_t *src;
	int i, n;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 16);
	xt_post_recvs(t, &p.srv, 4, 256);
	src = xt_alloc(t, 65536);
	dst = xt_alloc(t, 65536);
	xt_fill(src, 65536, 4);
	memset((void *)dst, 0, 65536);
	t->nsides = 0; /* from here on, each side is polled by hand */

	/* WRITE: poll the receiver until the last byte is there, then never. */
	xt_post(t, p.c, BE_XWR_WRITE, 1, src, 65536, BE_XWR_F_SIGNALED,
		(uint64_t)(uintptr_t)dst, xt_grant(t, p.s, (void *)dst), 0);
	for (i = 0; i < 2000000 && dst[65535] != src[65535]; i++)
		ASSERT_EQ(t->ops->cq_poll(p.srv.cq, &wc, 1), 0);
	ASSERT_EQ(dst[65535], src[65535]);
	wait_sender(t, p.cli.cq, 1);

	/* SEND: the receiver polls its completion, then polls once more
	 * and gets nothing, then stops. */
	xt_post(t, p.c, BE_XWR_SEND, 2, src, 100, BE_XWR_F_SIGNALED, 0, 0, 0);
	for (i = 0, n = 0; i < 2000000 && n == 0; i++)
		n = t->ops->cq_poll(p.srv.cq, &wc, 1);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(wc.opcode, BE_XWC_RECV);
	ASSERT_EQ(t->ops->cq_poll(p.srv.cq, &wc, 1), 0);
	wait_sender(t, p.cli.cq, 2);

	xt_pair_close(&p);
	return 0;
}
