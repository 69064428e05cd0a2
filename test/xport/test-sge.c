/*
 * Check scatter lists: a SEND and a WRITE gathered from up to max_sge
 * pieces (different buffers, odd lengths, zero-length entries in between)
 * arrive as one contiguous message in order; more than max_sge entries is
 * refused at post with *bad at that WR.
 */
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xsge sge[64];
	struct be_xsend_wr wr, *bad;
	struct be_xwc wc;
	uint8_t *piece[16], *expect, *dst;
	uint32_t total = 0, nsge, i;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 16);
	xt_post_recvs(t, &p.srv, 4, 1 << 20);
	nsge = BE_MIN(t->attr.max_sge, 16u);
	ASSERT_GE(nsge, 2);

	expect = malloc(1 << 20);
	ASSERT(expect);
	for (i = 0; i < nsge; i++) {
		/* Entry lengths 1, 1000, 2001 ... ; every third one empty. */
		uint32_t len = i % 3 == 2 ? 0 : 1 + i * 1000;

		piece[i] = xt_alloc(t, len + 1);
		xt_fill(piece[i], len, 50 + i);
		memcpy(expect + total, piece[i], len);
		sge[i].addr = (uint64_t)(uintptr_t)piece[i];
		sge[i].length = len;
		sge[i].lkey = xt_lkey(t, piece[i]);
		total += len;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = BE_XWR_SEND;
	wr.flags = BE_XWR_F_SIGNALED;
	wr.sg_list = sge;
	wr.num_sge = (int)nsge;
	ASSERT_OK(t->ops->post_send(p.c, &wr, &bad));
	xt_wait_wc(t, &p.srv, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc.byte_len, total);
	ASSERT(memcmp((void *)(uintptr_t)wc.wr_id, expect, total) == 0);
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc.wr_id, 1);

	/* The same list as a WRITE. */
	dst = xt_alloc(t, total + 2);
	memset(dst, 0xEE, total + 2);
	wr.wr_id = 2;
	wr.opcode = BE_XWR_WRITE;
	wr.remote_addr = (uint64_t)(uintptr_t)(dst + 1);
	wr.rkey = xt_grant(t, p.s, dst);
	ASSERT_OK(t->ops->post_send(p.c, &wr, &bad));
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT(memcmp(dst + 1, expect, total) == 0);
	ASSERT_EQ(dst[0], 0xEE);
	ASSERT_EQ(dst[total + 1], 0xEE);

	/* Too many entries. */
	for (i = 0; i < BE_ARRAY_SIZE(sge); i++)
		sge[i] = sge[0];
	wr.num_sge = (int)t->attr.max_sge + 1;
	ASSERT(wr.num_sge <= (int)BE_ARRAY_SIZE(sge));
	bad = NULL;
	ASSERT_EQ(t->ops->post_send(p.c, &wr, &bad), -EINVAL);
	ASSERT_PTR_EQ(bad, &wr);
	/* The conn is still fine. */
	wr.num_sge = 1;
	wr.wr_id = 3;
	ASSERT_OK(t->ops->post_send(p.c, &wr, &bad));
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc.wr_id, 3);

	free(expect);
	xt_pair_close(&p);
	return 0;
}
