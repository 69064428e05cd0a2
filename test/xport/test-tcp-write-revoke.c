/*
 * tcp only: a WRITE's destination is checked once, at its frame header,
 * and its payload is placed over several reads; a grant revoked in
 * between (its buffer about to be reused) must not take the rest. The
 * sender posts a WRITE larger than the kernel buffers hold; the receiver
 * reads until part of it is in place, then revokes the grant: its conn
 * fails at once, not one more byte lands however long both sides go on,
 * the WR completes with an error and both ends see DISCONNECTED.
 * (Issue 14, section 4: the grant is pinned for the write's life.)
 */
#include <string.h>

#include "xtest.h"

#define BIG (24u << 20)

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xevent ev;
	struct be_xwc wc;
	volatile uint8_t *dst;
	uint8_t *src, *snap;
	size_t placed = 0;
	uint32_t rkey;
	int i, n;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 16);
	if (strcmp(t->transport, "tcp")) {
		printf("tcp only: skipped\n");
		return 77;
	}
	src = xt_alloc(t, BIG);
	dst = xt_alloc(t, BIG);
	snap = malloc(BIG);
	ASSERT(snap);
	memset(src, 0x5a, BIG);
	memset((void *)dst, 0, BIG);
	rkey = xt_grant(t, p.s, (void *)dst);

	/* Only the sender makes progress for a while: the socket fills up
	 * with the start of the WRITE, far from all of it. */
	xt_post(t, p.c, BE_XWR_WRITE, 1, src, BIG, BE_XWR_F_SIGNALED, (uint64_t)(uintptr_t)dst,
		rkey, 0);
	t->nsides = 1;
	xt_spin(t, 200);
	t->nsides = 0;

	/* The receiver alone reads until some of the payload is in place. */
	for (i = 0; i < 20000000 && !placed; i++) {
		n = t->ops->cq_poll(p.srv.cq, &wc, 1);
		ASSERT_GE(n, 0);
		ASSERT_EQ(n, 0);
		placed = xt_nonzero(dst, 65536);
	}
	ASSERT(placed > 0);
	placed = xt_nonzero(dst, BIG);
	ASSERT(placed < BIG);
	fprintf(stderr, "%zu of %u bytes placed when the grant is revoked\n", placed, BIG);

	/* Revoked mid-payload: the conn fails, the rest never lands. */
	ASSERT_EQ(t->ops->revoke(p.s, rkey, 0), 0); /* tcp: ends at once */
	memcpy(snap, (const void *)dst, BIG);
	t->nsides = 2;
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_UEQ(wc.wr_id, 1);
	ASSERT(wc.status != BE_XWC_SUCCESS);
	fprintf(stderr, "the WRITE completed with %s\n", be__xwc_status_str(wc.status));
	xt_expect_event(t, &p.srv, BE_XEV_DISCONNECTED, &ev);
	xt_expect_event(t, &p.cli, BE_XEV_DISCONNECTED, &ev);
	xt_spin(t, 50);
	ASSERT(memcmp(snap, (const void *)dst, BIG) == 0);
	ASSERT_EQ(xt_nonzero(dst, BIG), placed);

	free(snap);
	xt_free(t, src);
	xt_free(t, (void *)dst);
	xt_pair_close(&p);
	return 0;
}
