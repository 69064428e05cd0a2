/*
 * Check the shared receive queue contract on verbs: the armed low-water
 * mark raises one SRQ_LIMIT event; a SEND larger than the receive buffer
 * fails on both ends (LOC_LEN_ERR / REM_OP_ERR) and disconnects; a SEND
 * that finds no receive fails at once with RNR_RETRY_EXC (rnr_retry 0);
 * destroying an SRQ hands every still-posted receive back as a flush.
 */
#include "xtest.h"

#define TV_REGION (1u << 20) /* the test's registered memory */
#define TV_RECV_SIZE 4096u

static struct xt_mem mem; /* TV_REGION bytes, registered */

#define SRC_OFF (512u << 10)

static void src_send(struct be_xconn *c, uint64_t id, uint32_t len)
{
	ASSERT_OK(xt_mem_post(c, BE_XWR_SEND, &mem, SRC_OFF, len, 0, 0, 0, BE_XWR_F_SIGNALED, id));
}

int main(int argc, char **argv)
{
	struct xt e;
	struct xt_side cli, srv;
	struct be_xlistener *lst;
	struct be_xconn *cc, *sc;
	struct be_xwc wc[16];
	struct be_xevent ev;
	uint64_t seen = 0;
	int i, n;

	xt_init(&e, argc, argv);
	xt_mem_reg(&e, &mem, TV_REGION);
	xt_side_init(&e, &srv, 256, 32);
	xt_mem_recvs(&srv, &mem, 0, 8, TV_RECV_SIZE);
	xt_side_init(&e, &cli, 256, 32);
	lst = xt_listen(&e, &srv);
	xt_connect_pair(&e, &cli, &srv, lst, 64, &cc, &sc);

	/* Limit 6 with 8 posted: the third receive crosses it. */
	ASSERT_OK(e.ops->srq_arm_limit(srv.srq, 6));
	for (i = 0; i < 3; i++)
		src_send(cc, 100 + (uint64_t)i, 64);
	xt_side_wc(&cli, wc, 3);
	xt_side_wc(&srv, wc, 3);
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(wc[i].status, BE_XWC_SUCCESS);
		ASSERT_EQ(wc[i].opcode, BE_XWC_RECV);
		seen |= 1ull << (wc[i].wr_id / TV_RECV_SIZE);
	}
	ev = xt_side_wait_event(&srv, BE_XEV_SRQ_LIMIT, 1);
	ASSERT(ev.srq == srv.srq);

	/* Too large for a 4 KiB receive buffer. */
	src_send(cc, 200, TV_RECV_SIZE + 1000);
	xt_side_wc(&cli, wc, 1);
	fprintf(stderr, "  oversized SEND: sender %s\n", be__xwc_status_str(wc[0].status));
	ASSERT_EQ(wc[0].status, BE_XWC_REM_OP_ERR);
	xt_side_wc(&srv, wc, 1);
	fprintf(stderr, "  oversized SEND: receiver %s\n", be__xwc_status_str(wc[0].status));
	/* rxe reports IBV_WC_LOC_QP_OP_ERR here (a general error), real
	 * NICs IBV_WC_LOC_LEN_ERR: either way the receive failed. */
	ASSERT(wc[0].status == BE_XWC_LOC_LEN_ERR || wc[0].status == BE_XWC_GENERAL_ERR);
	ASSERT(wc[0].conn == sc);
	seen |= 1ull << (wc[0].wr_id / TV_RECV_SIZE);
	xt_side_disconnected(&cli, cc, &srv, sc);
	e.ops->conn_destroy(cc);
	e.ops->conn_destroy(sc);

	/* Reversed: the client's SRQ is empty, so the server's SEND finds
	 * no receive and fails at once. */
	e.ops->listener_close(lst);
	lst = xt_listen(&e, &srv);
	xt_connect_pair(&e, &cli, &srv, lst, 64, &cc, &sc);
	src_send(sc, 300, 64);
	xt_side_wc(&srv, wc, 1);
	fprintf(stderr, "  SEND without receive: %s\n", be__xwc_status_str(wc[0].status));
	ASSERT_EQ(wc[0].status, BE_XWC_RNR_RETRY_EXC);
	ASSERT_UEQ(wc[0].wr_id, 300);
	xt_side_disconnected(&srv, sc, &cli, cc);
	e.ops->conn_destroy(cc);
	e.ops->conn_destroy(sc);
	e.ops->listener_close(lst);

	/* The 4 receives never consumed come back as flushes, once each. */
	e.ops->srq_destroy(srv.srq);
	n = 0;
	for (;;) {
		int r = e.ops->cq_poll(srv.cq, wc + n, 16 - n);

		ASSERT_OK(r);
		if (r == 0)
			break;
		n += r;
	}
	ASSERT_EQ(n, 4);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(wc[i].status, BE_XWC_WR_FLUSH_ERR);
		ASSERT_EQ(wc[i].opcode, BE_XWC_RECV);
		ASSERT(wc[i].conn == NULL);
		ASSERT_EQ(seen & (1ull << (wc[i].wr_id / TV_RECV_SIZE)), 0);
		seen |= 1ull << (wc[i].wr_id / TV_RECV_SIZE);
	}
	ASSERT_UEQ(seen, 0xff);
	e.ops->cq_destroy(srv.cq);
	e.ops->evch_destroy(srv.ch);
	xt_side_fini(&e, &cli);
	xt_mem_unreg(&mem);
	xt_fini(&e);
	fprintf(stderr, "ok\n");
	return 0;
}
