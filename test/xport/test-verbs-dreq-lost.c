/*
 * Check that a verbs conn learns of a dead peer whose DREQ never came.
 * The kernel sends a dying cm_id's DREQ once and drops its retries with
 * the id, so when that one packet is lost the survivor's rdma_cm stays
 * silent: only its own QP can tell, through the retry timeout of a WR.
 *
 * The client's QP is moved to error behind the transport's back, as the
 * QP of a killed process is destroyed, and no DREQ goes out. The server
 * then posts a signaled SEND, an unsignaled one and a signaled one: the
 * client's QP acknowledges nothing, so after its retries the first
 * completes with RETRY_EXC_ERR and the two behind it flush
 * (WR_FLUSH_ERR), DISCONNECTED (-ETIMEDOUT) reaches the server's evch,
 * and the server's DREQ gives the client DISCONNECTED too. Soft-RoCE's
 * retry_exceeded_err counter moves. No time is measured (the retries
 * take about 2 s with the default ACK timeout; the hang guard is 40 s).
 */
#include <stdio.h>

#include "xtest.h"
#include "xport/verbs/verbs.h"

#define NRECV 4

static unsigned long long ctr_read(const char *name)
{
	const char *dev = getenv("BE_RXE_DEV0");
	unsigned long long v = 0;
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
		 dev ? dev : "rxe0", name);
	f = fopen(path, "r");
	if (!f)
		TEST_FAIL("%s: %s (not Soft-RoCE?)", path, strerror(errno));
	ASSERT_EQ(fscanf(f, "%llu", &v), 1);
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xevent ev;
	struct be_xwc wc;
	unsigned long long retry_exc;
	uint8_t *buf;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 16);
	xt_post_recvs(t, &p.cli, NRECV, 64);
	buf = xt_alloc(t, 64);
	memset(buf, 7, 64);

	/* One SEND through: the RTU is in, the server's sends go straight
	 * to its QP. */
	xt_post(t, p.s, BE_XWR_SEND, 1, buf, 64, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_expect_wc(t, &p.srv, 1, BE_XWC_SUCCESS, NULL);
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 64);
	xt_free(t, (void *)(uintptr_t)wc.wr_id);

	/* The client's QP dies without a DREQ. */
	retry_exc = ctr_read("retry_exceeded_err");
	ASSERT_OK(ibv_modify_qp(to_vconn(p.c)->qp, &qa, IBV_QP_STATE));

	xt_post(t, p.s, BE_XWR_SEND, 2, buf, 64, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_post(t, p.s, BE_XWR_SEND, 3, buf, 64, 0, 0, 0, 0);
	xt_post(t, p.s, BE_XWR_SEND, 4, buf, 64, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_expect_event(t, &p.srv, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, p.s);
	ASSERT_EQ(ev.status, -ETIMEDOUT);
	xt_expect_wc(t, &p.srv, 2, BE_XWC_RETRY_EXC_ERR, NULL);
	xt_expect_wc(t, &p.srv, 3, BE_XWC_WR_FLUSH_ERR, NULL);
	xt_expect_wc(t, &p.srv, 4, BE_XWC_WR_FLUSH_ERR, NULL);
	ASSERT(ctr_read("retry_exceeded_err") > retry_exc);

	/* The server told the client (its DREQ). */
	xt_expect_event(t, &p.cli, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, p.c);
	xt_spin(t, 20);
	ASSERT_EQ(p.srv.nwc, 0);
	ASSERT_EQ(p.srv.nev, 0);

	xt_free(t, buf);
	xt_pair_close(&p);
	return 0;
}
