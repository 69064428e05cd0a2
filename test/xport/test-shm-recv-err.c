/*
 * Check the receive-side failures of an RC QP on shm: a SEND with no
 * receive posted completes with BE_XWC_RNR_RETRY_EXC on the sender; a SEND
 * larger than the receive buffer completes with BE_XWC_LOC_LEN_ERR on the
 * receiver and BE_XWC_REM_OP_ERR on the sender. Both put the conn in error
 * on both sides (DISCONNECTED), the SENDs before the failing one succeed
 * and the ones after it flush. Also checks the SRQ low-water event, that
 * destroying an SRQ flushes its receives, and a WRITE_IMM that finds no
 * receive because another conn of the SRQ took the last one: it fails
 * with RNR; a small one (one record) left the target untouched, a large
 * one (its data in WRITE records before the immediate) wrote it, as
 * documented; the conn fails on both sides (DISCONNECTED, later WRs
 * flush).
 */
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

static void run(int too_long)
{
	struct xt_side a, b;
	struct xt_mem ma, mb;
	struct be_xevent ev;
	struct be_xwc wc[4];
	char name[64];

	xt_side_init(&xt, &a, 4096, 64);
	xt_side_init(&xt, &b, 4096, 64);
	xt_mem_reg(&xt, &ma, 65536);
	xt_mem_reg(&xt, &mb, 65536);
	snprintf(name, sizeof(name), "rerr-%d-%d", (int)getpid(), too_long);
	xt_side_connect(&a, &b, name, 16);

	xt_mem_recv(&a, &ma, 0, 4096, 1);
	if (too_long)
		xt_mem_recv(&a, &ma, 4096, 100, 2);
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_SEND, &mb, 0, 100, 0, 0, 0, BE_XWR_F_SIGNALED, 10));
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_SEND, &mb, 0, 101, 0, 0, 0, BE_XWR_F_SIGNALED, 11));
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_SEND, &mb, 0, 10, 0, 0, 0, 0, 12));
	xt_side_wc(&a, wc, too_long ? 2 : 1);
	ASSERT_UEQ(wc[0].wr_id, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	if (too_long) {
		ASSERT_UEQ(wc[1].wr_id, 2);
		ASSERT_EQ(wc[1].status, BE_XWC_LOC_LEN_ERR);
	}
	/* The receiver meets the failing SEND when it polls on. */
	ASSERT_EQ(ops->cq_poll(a.cq, wc, 4), 0);
	xt_side_expect(&a, BE_XEV_DISCONNECTED, &ev, NULL);
	xt_side_wc(&b, wc, 3);
	ASSERT_UEQ(wc[0].wr_id, 10);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc[1].wr_id, 11);
	ASSERT_EQ(wc[1].status, too_long ? BE_XWC_REM_OP_ERR : BE_XWC_RNR_RETRY_EXC);
	ASSERT_UEQ(wc[2].wr_id, 12);
	ASSERT_EQ(wc[2].status, BE_XWC_WR_FLUSH_ERR);
	xt_side_expect(&b, BE_XEV_DISCONNECTED, &ev, NULL);

	xt_sides_close(&a, &b, &ma, &mb);
}

static void run_srq(void)
{
	struct xt_side a, b;
	struct xt_mem ma, mb;
	struct be_xevent ev;
	struct be_xwc wc[8];
	int i;

	xt_sides_open(&xt, &a, &b, 8, &ma, &mb, 65536, 16);
	for (i = 0; i < 6; i++)
		xt_mem_recv(&a, &ma, 1024 * (uint64_t)i, 1024, 100 + (uint64_t)i);
	ASSERT_OK(ops->srq_arm_limit(a.srq, 4));
	for (i = 0; i < 2; i++)
		ASSERT_OK(xt_mem_post(b.conn, BE_XWR_SEND, &mb, 0, 8, 0, 0, 0, 0, (uint64_t)i));
	xt_side_wc(&a, wc, 2);
	ASSERT_EQ(ops->evch_get(a.ch, &ev), 0); /* 4 left: not below 4 */
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_SEND, &mb, 0, 8, 0, 0, 0, 0, 2));
	xt_side_wc(&a, wc, 1);
	xt_side_expect(&a, BE_XEV_SRQ_LIMIT, &ev, NULL);
	ASSERT((const void *)ev.srq == (const void *)a.srq);
	ops->disconnect(a.conn);
	xt_side_expect(&a, BE_XEV_DISCONNECTED, &ev, NULL);
	ops->conn_destroy(a.conn);
	a.conn = NULL;
	/* Three receives left: destroying the srq flushes them. */
	ops->srq_destroy(a.srq);
	xt_side_wc(&a, wc, 3);
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(wc[i].status, BE_XWC_WR_FLUSH_ERR);
		ASSERT_UEQ(wc[i].wr_id, 103 + (uint64_t)i);
	}
	ASSERT_OK(ops->srq_create(a.cq, 8, &a.srq));
	xt_mem_unreg(&ma);
	xt_mem_unreg(&mb);
	xt_side_fini(&xt, &a);
	xt_side_fini(&xt, &b);
}

static void run_race(uint32_t len)
{
	struct xt_side a, b1, b2;
	struct xt_mem ma, mb1, mb2;
	struct be_xconn_attr aa;
	struct be_xconn *a2;
	struct be_xevent ev;
	struct be_xwc wc[4];
	uint32_t rkey1, rkey2;
	char name[64];

	xt_side_init(&xt, &a, 4096, 8);
	xt_side_init(&xt, &b1, 4096, 8);
	xt_side_init(&xt, &b2, 4096, 8);
	xt_mem_reg(&xt, &ma, 65536);
	xt_mem_reg(&xt, &mb1, 65536);
	xt_mem_reg(&xt, &mb2, 65536);
	snprintf(name, sizeof(name), "rrace-%d-%u", (int)getpid(), len);
	xt_side_connect(&a, &b1, name, 16);
	/* A second conn into the same srq of a. */
	aa = xt_attr(&b2, 16);
	ASSERT_OK(ops->connect(b2.ch, name, &aa, NULL, 0, &b2.conn));
	xt_side_expect(&a, BE_XEV_CONNECT_REQUEST, &ev, NULL);
	a2 = ev.conn;
	aa = xt_attr(&a, 16);
	ASSERT_OK(ops->accept(a2, &aa, NULL, 0));
	xt_side_expect(&a, BE_XEV_ESTABLISHED, &ev, NULL);
	xt_side_expect(&b2, BE_XEV_ESTABLISHED, &ev, NULL);

	rkey1 = xt_mem_grant(&ma, a.conn);
	rkey2 = xt_mem_grant(&ma, a2);
	xt_mem_recv(&a, &ma, 0, 0, 1);
	xt_mem_recv(&a, &ma, 0, 0, 2);
	/* b1's first WRITE_IMM: a then has one receive left. */
	ASSERT_OK(xt_mem_post(b1.conn, BE_XWR_WRITE_IMM, &mb1, 0, 64, xt_mem_addr(&ma, 4096), rkey1,
			   1, BE_XWR_F_SIGNALED, 10));
	xt_side_wc(&a, wc, 1);
	xt_side_ack(&a);
	xt_side_wc(&b1, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	/* b2 takes the last receive. */
	ASSERT_OK(xt_mem_post(b2.conn, BE_XWR_WRITE_IMM, &mb2, 0, 64, xt_mem_addr(&ma, 8192), rkey2,
			   2, 0, 20));
	xt_side_wc(&a, wc, 1);
	ASSERT_UEQ(wc[0].imm, 2);
	/* b1's next one finds no receive. */
	memset(mb1.p, 0x77, len);
	ASSERT_OK(xt_mem_post(b1.conn, BE_XWR_WRITE_IMM, &mb1, 0, len, xt_mem_addr(&ma, 16384),
			   rkey1, 3, BE_XWR_F_SIGNALED, 11));
	ASSERT_EQ(ops->cq_poll(a.cq, wc, 4), 0);
	xt_side_wc(&b1, wc, 1);
	ASSERT_UEQ(wc[0].wr_id, 11);
	ASSERT_EQ(wc[0].status, BE_XWC_RNR_RETRY_EXC);
	/* Large: written, as documented; small: untouched. */
	ASSERT_EQ(ma.p[16384], len > 4096 ? 0x77 : 0);
	ASSERT_EQ(ma.p[16384 + len - 1], len > 4096 ? 0x77 : 0);
	xt_side_expect(&a, BE_XEV_DISCONNECTED, &ev, NULL);
	ASSERT((const void *)ev.conn == (const void *)a.conn);
	xt_side_expect(&b1, BE_XEV_DISCONNECTED, &ev, NULL);
	ASSERT_OK(xt_mem_post(b1.conn, BE_XWR_WRITE, &mb1, 0, 64, xt_mem_addr(&ma, 0), rkey1, 0,
			   BE_XWR_F_SIGNALED, 12));
	xt_side_wc(&b1, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);

	ops->conn_destroy(a2);
	xt_mem_unreg(&ma);
	xt_mem_unreg(&mb1);
	xt_mem_unreg(&mb2);
	xt_side_fini(&xt, &a);
	xt_side_fini(&xt, &b1);
	xt_side_fini(&xt, &b2);
}

int main(int argc, char **argv)
{
	xt_init(&xt, argc, argv);
	ops = xt.ops;
	run(0);
	run(1);
	run_srq();
	run_race(64);
	run_race(8192);
	xt_fini(&xt);
	return 0;
}
