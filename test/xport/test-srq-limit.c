/*
 * Check the SRQ low-water event: with the limit armed at 4 and 8 receives
 * posted, the receive that leaves fewer than 4 posted raises one
 * BE_XEV_SRQ_LIMIT naming the srq (one shot: no more until re-armed);
 * re-arming works, and the re-armed event comes even when no memory is
 * left for event nodes (verbs: its channel reserved one for the SRQ; tcp
 * and shm: each connection reserved one). Receives are consumed in
 * posting order, an SRQ posted beyond its depth refuses with -ENOMEM, and srq_destroy flushes
 * what is still posted.
 */
#include "util/evq.h"
#include "xtest.h"

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xevent ev;
	struct be_xwc wc[8];
	struct be_xrecv_wr rwr[9], *bad = NULL;
	uint8_t *src, *rb;
	int i;

	xt_pair_open(&p, argc, argv, 64, 0, 8, 16);
	src = xt_alloc(t, 4096);
	rb = xt_alloc(t, 9 * 256);
	for (i = 0; i < 9; i++) {
		memset(&rwr[i], 0, sizeof(rwr[i]));
		rwr[i].wr_id = (uint64_t)i;
		rwr[i].sge.addr = (uint64_t)(uintptr_t)(rb + i * 256);
		rwr[i].sge.length = 256;
		rwr[i].sge.lkey = xt_lkey(t, rb);
		rwr[i].next = i < 8 ? &rwr[i + 1] : NULL;
	}
	/* Depth 8 holds 8; the chain is posted up to the first refused. */
	rwr[7].next = NULL;
	ASSERT_OK(t->ops->srq_post_recv(p.srv.srq, &rwr[0], &bad));
	ASSERT_OK(t->ops->srq_arm_limit(p.srv.srq, 4));

	for (i = 0; i < 4; i++)
		xt_post(t, p.c, BE_XWR_SEND, (uint64_t)i, src, 10, 0, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 4);
	for (i = 0; i < 4; i++)
		ASSERT_UEQ(wc[i].wr_id, i);
	/* 8 - 5 = 3 < 4 after the fifth. */
	ASSERT_EQ(p.srv.nev, 0);
	xt_post(t, p.c, BE_XWR_SEND, 4, src, 10, 0, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 1);
	xt_expect_event(t, &p.srv, BE_XEV_SRQ_LIMIT, &ev);
	ASSERT_PTR_EQ(ev.srq, p.srv.srq);
	xt_post(t, p.c, BE_XWR_SEND, 5, src, 10, 0, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 1);
	xt_spin(t, 5);
	ASSERT_EQ(p.srv.nev, 0);
	/* Re-arm at 3 with 2 left: the next receive (leaving 1) fires. */
	ASSERT_OK(t->ops->srq_arm_limit(p.srv.srq, 3));
	be__evq_fail_allocs = 1 << 20;
	xt_post(t, p.c, BE_XWR_SEND, 6, src, 10, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_wait_wc(t, &p.srv, wc, 1);
	ASSERT_UEQ(wc[0].wr_id, 6);
	xt_expect_event(t, &p.srv, BE_XEV_SRQ_LIMIT, &ev);
	be__evq_fail_allocs = 0;
	xt_wait_wc(t, &p.cli, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	/* A bad lkey is refused at post by the software transports (an RDMA
	 * NIC checks keys only when the receive is used). */
	if (strcmp(t->transport, "verbs") != 0) {
		rwr[0].next = NULL;
		rwr[0].sge.lkey ^= 0x0F0F0F0F;
		ASSERT_EQ(t->ops->srq_post_recv(p.srv.srq, &rwr[0], &bad), -EINVAL);
		ASSERT_PTR_EQ(bad, &rwr[0]);
		rwr[0].sge.lkey ^= 0x0F0F0F0F;
	}

	/* Posting beyond the depth: refused with -ENOMEM and *bad at the
	 * first WR not posted (a verbs provider may round the depth up, so
	 * only "at least 8" is required). */
	{
		struct be_xsrq *srq2;
		struct be_xrecv_wr r2[64];
		int rc;

		ASSERT_OK(t->ops->srq_create(p.srv.cq, 8, &srq2));
		for (i = 0; i < 64; i++) {
			r2[i] = rwr[1];
			r2[i].wr_id = 1000 + (uint64_t)i;
			r2[i].next = i < 63 ? &r2[i + 1] : NULL;
		}
		rc = t->ops->srq_post_recv(srq2, &r2[0], &bad);
		if (!strcmp(t->transport, "verbs") && rc == 0) {
			fprintf(stderr, "verbs srq took 64 for a depth of 8\n");
		} else {
			ASSERT_EQ(rc, -ENOMEM);
			ASSERT(bad >= &r2[8] && bad < &r2[64]);
		}
		t->ops->srq_destroy(srq2);
		/* Its receives are flushed, each once. */
		{
			int posted = rc == 0 ? 64 : (int)(bad - r2);
			uint64_t mask = 0;

			for (i = 0; i < posted; i++) {
				xt_wait_wc(t, &p.srv, wc, 1);
				ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
				ASSERT(wc[0].wr_id >= 1000 && wc[0].wr_id < 1000 + (uint64_t)posted);
				ASSERT(!(mask & 1ull << (wc[0].wr_id - 1000)));
				mask |= 1ull << (wc[0].wr_id - 1000);
			}
		}
	}

	xt_pair_destroy_conns(&p);
	t->ops->listener_close(p.l);
	/* The one receive left is flushed at srq_destroy. */
	t->ops->srq_destroy(p.srv.srq);
	p.srv.srq = NULL;
	xt_wait_wc(t, &p.srv, wc, 1);
	ASSERT_UEQ(wc[0].wr_id, 7);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
	xt_spin(t, 10);
	ASSERT_EQ(p.srv.nwc, 0);
	xt_side_fini(t, &p.cli);
	xt_side_fini(t, &p.srv);
	xt_fini(t);
	return 0;
}
