/*
 * Check SEND through one SRQ shared by many connections: every message
 * consumes one posted receive, arrives intact with the right byte_len,
 * names the conn it came in on, and per conn the messages arrive in
 * posting order. Inline SENDs (buffer reusable at once) and zero-length
 * SENDs work too.
 */
#include "xtest.h"

#define NCONN 8
#define PER_CONN 32

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xconn *c[NCONN], *s[NCONN];
	struct be_xwc wc[NCONN * PER_CONN];
	int next[NCONN] = { 0 };
	uint8_t *src;
	int i, j, k;

	xt_pair_open(&p, argc, argv, 1024, 0, NCONN * PER_CONN + 8, 0);
	for (i = 0; i < NCONN; i++)
		xt_connect_pair(t, &p.cli, &p.srv, p.l, PER_CONN, &c[i], &s[i]);
	xt_post_recvs(t, &p.srv, NCONN * PER_CONN, 4096);

	/* Message j of conn i: length 1 + 100 * j + i, pattern seed i*1000+j. */
	src = xt_alloc(t, (size_t)NCONN * PER_CONN * 4096);
	for (j = 0; j < PER_CONN; j++) {
		for (i = 0; i < NCONN; i++) {
			uint8_t *m = src + ((size_t)i * PER_CONN + (size_t)j) * 4096;
			uint32_t len = 1 + 100 * (uint32_t)j + (uint32_t)i;

			xt_fill(m, len, (uint32_t)(i * 1000 + j));
			xt_post(t, c[i], BE_XWR_SEND, (uint64_t)(i * 1000 + j), m, len,
				BE_XWR_F_SIGNALED, 0, 0, 0);
		}
	}
	xt_wait_wc(t, &p.srv, wc, NCONN * PER_CONN);
	for (k = 0; k < NCONN * PER_CONN; k++) {
		ASSERT_EQ(wc[k].status, BE_XWC_SUCCESS);
		ASSERT_EQ(wc[k].opcode, BE_XWC_RECV);
		ASSERT_PTR_EQ(wc[k].srq, p.srv.srq);
		for (i = 0; i < NCONN; i++)
			if (wc[k].conn == s[i])
				break;
		ASSERT_LT(i, NCONN);
		j = next[i]++;
		ASSERT_EQ(wc[k].byte_len, 1 + 100 * j + i);
		ASSERT(xt_check((void *)(uintptr_t)wc[k].wr_id, wc[k].byte_len,
				(uint32_t)(i * 1000 + j)));
		xt_free(t, (void *)(uintptr_t)wc[k].wr_id);
	}
	xt_wait_wc(t, &p.cli, wc, NCONN * PER_CONN);
	for (i = 0; i < NCONN; i++)
		next[i] = 0;
	for (k = 0; k < NCONN * PER_CONN; k++) {
		ASSERT_EQ(wc[k].status, BE_XWC_SUCCESS);
		ASSERT_EQ(wc[k].opcode, BE_XWC_SEND);
		i = (int)(wc[k].wr_id / 1000);
		ASSERT_LT(i, NCONN);
		ASSERT_PTR_EQ(wc[k].conn, c[i]);
		ASSERT_UEQ(wc[k].wr_id % 1000, next[i]++);
	}

	/* Inline: the buffer may change right after post. Zero length too. */
	xt_post_recvs(t, &p.srv, 2, 4096);
	xt_fill(src, 200, 5);
	xt_post(t, c[0], BE_XWR_SEND, 1, src, 200, BE_XWR_F_SIGNALED | BE_XWR_F_INLINE, 0, 0, 0);
	memset(src, 0, 200);
	xt_post(t, c[0], BE_XWR_SEND, 2, NULL, 0, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 2);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].byte_len, 200);
	ASSERT(xt_check((void *)(uintptr_t)wc[0].wr_id, 200, 5));
	ASSERT_EQ(wc[1].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[1].byte_len, 0);
	ASSERT_PTR_EQ(wc[1].conn, s[0]);
	xt_free(t, (void *)(uintptr_t)wc[0].wr_id);
	xt_free(t, (void *)(uintptr_t)wc[1].wr_id);
	xt_wait_wc(t, &p.cli, wc, 2);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[1].status, BE_XWC_SUCCESS);
	/* Inline beyond the conn's max_inline is refused at post. */
	{
		struct be_xsend_wr wr, *bad;
		struct be_xsge sge = { (uint64_t)(uintptr_t)src, 100000, xt_lkey(t, src) };

		memset(&wr, 0, sizeof(wr));
		wr.opcode = BE_XWR_SEND;
		wr.flags = BE_XWR_F_INLINE;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		ASSERT_EQ(t->ops->post_send(c[0], &wr, &bad), -EINVAL);
		ASSERT_PTR_EQ(bad, &wr);
	}

	for (i = 0; i < NCONN; i++) {
		t->ops->conn_destroy(c[i]);
		t->ops->conn_destroy(s[i]);
	}
	xt_pair_close(&p);
	return 0;
}
