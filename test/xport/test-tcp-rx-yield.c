/*
 * tcp only: a completed receive is handed over before the stream behind
 * it is read. The sender posts a SEND and then a large WRITE and pushes
 * as much of both into the socket as the kernel takes while the receiver
 * does not poll. The receiver's first cq_poll that returns the SEND's
 * completion must not have read past it: of the WRITE behind it, at most
 * what one staging-buffer read brought along (TCP_RBUF_SIZE bytes) is in
 * place. The next polls place the rest, in order, and a SEND posted
 * behind the WRITE finds it whole (a completion never overtakes the data
 * before it).
 */
#include <string.h>

#include "xtest.h"
#include "xport/tcp/tcp.h"

#define BIG (4u << 20)

/* Poll only the receiver until it returns one completion. */
static void srv_wait_one(struct xt *t, struct xt_side *srv, struct be_xwc *wc)
{
	int i, n = 0;

	for (i = 0; i < 20000000 && n == 0; i++) {
		n = t->ops->cq_poll(srv->cq, wc, 1);
		ASSERT_OK(n);
	}
	ASSERT_EQ(n, 1);
}

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xwc wc;
	volatile uint8_t *dst;
	uint8_t *src, *msg;
	int i;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 16);
	if (strcmp(t->transport, "tcp")) {
		printf("tcp only: skipped\n");
		return 77;
	}
	xt_post_recvs(t, &p.srv, 4, 256);
	src = xt_alloc(t, BIG);
	msg = xt_alloc(t, 64);
	dst = xt_alloc(t, BIG);
	xt_fill(src, BIG, 7);
	for (i = 0; i < (int)BIG; i += 4096)
		src[i] |= 1; /* no zero byte every page: placement shows */
	xt_fill(msg, 64, 8);
	memset((void *)dst, 0, BIG);

	/* SEND, then the WRITE behind it; only the sender makes progress
	 * for a while (t->sides[0] is the client), so the socket fills up. */
	xt_post(t, p.c, BE_XWR_SEND, 1, msg, 64, 0, 0, 0, 0);
	xt_post(t, p.c, BE_XWR_WRITE, 2, src, BIG, BE_XWR_F_SIGNALED,
		(uint64_t)(uintptr_t)dst, xt_grant(t, p.s, (void *)dst), 0);
	t->nsides = 1;
	xt_spin(t, 200);
	t->nsides = 0;

	srv_wait_one(t, &p.srv, &wc);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc.opcode, BE_XWC_RECV);
	ASSERT_EQ(wc.byte_len, 64);
	/* Only the staging read that carried the SEND may have placed
	 * part of the WRITE: nothing past TCP_RBUF_SIZE. */
	ASSERT_UEQ(xt_nonzero(dst + TCP_RBUF_SIZE, BIG - TCP_RBUF_SIZE), 0);

	/* A SEND behind the WRITE: its completion comes with the WRITE whole. */
	xt_post(t, p.c, BE_XWR_SEND, 3, msg, 64, 0, 0, 0, 0);
	t->nsides = 2;
	xt_wait_wc(t, &p.srv, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc.opcode, BE_XWC_RECV);
	ASSERT_EQ(memcmp((const void *)dst, src, BIG), 0);
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc.wr_id, 2);

	xt_free(t, src);
	xt_free(t, msg);
	xt_free(t, (void *)dst);
	xt_pair_close(&p);
	return 0;
}
