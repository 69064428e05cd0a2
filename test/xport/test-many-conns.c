/*
 * Check many connections on one worker: 64 conns between two sides (one
 * evch, cq and srq each), all set up concurrently, then every conn sends
 * a SEND and a WRITE_IMM; each arrives once, on the right conn, with the
 * right data, and each sender completion names its conn.
 */
#include "xtest.h"

#define NCONN 64

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xconn *c[NCONN], *s[NCONN];
	struct be_xconn_attr ca, sa;
	struct be_xevent ev;
	static struct be_xwc wc[NCONN * 2];
	char addr[BE_XPORT_ADDR_MAX];
	uint8_t *src, *dst;
	int seen[NCONN][2];
	int i, k, nreq = 0, nest_c = 0, nest_s = 0;

	xt_pair_open(&p, argc, argv, 1024, 0, NCONN * 2 + 8, 0);
	ASSERT_OK(t->ops->listener_addr(p.l, addr, sizeof(addr)));
	ca = xt_attr(&p.cli, 8);
	sa = xt_attr(&p.srv, 8);

	/* All connects at once; accept requests as they come. */
	for (i = 0; i < NCONN; i++) {
		uint8_t id = (uint8_t)i;

		ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, &id, 1, &c[i]));
		s[i] = NULL;
	}
	while (nreq < NCONN || nest_s < NCONN) {
		xt_next_event(t, &p.srv, &ev);
		if (ev.type == BE_XEV_CONNECT_REQUEST) {
			ASSERT_EQ(ev.priv_len, 1);
			ASSERT_LT(ev.priv[0], NCONN);
			ASSERT(s[ev.priv[0]] == NULL);
			s[ev.priv[0]] = ev.conn;
			ASSERT_OK(t->ops->accept(ev.conn, &sa, NULL, 0));
			nreq++;
		} else {
			ASSERT_EQ(ev.type, BE_XEV_ESTABLISHED);
			nest_s++;
		}
	}
	while (nest_c < NCONN) {
		xt_expect_event(t, &p.cli, BE_XEV_ESTABLISHED, &ev);
		nest_c++;
	}
	xt_post_recvs(t, &p.srv, NCONN * 2, 256);

	src = xt_alloc(t, NCONN * 256);
	dst = xt_alloc(t, NCONN * 256);
	memset(dst, 0, NCONN * 256);
	for (i = 0; i < NCONN; i++) {
		xt_fill(src + i * 256, 256, (uint32_t)i);
		xt_post(t, c[i], BE_XWR_SEND, (uint64_t)i, src + i * 256, 100 + (uint32_t)i,
			BE_XWR_F_SIGNALED, 0, 0, 0);
		xt_post(t, c[i], BE_XWR_WRITE_IMM, 1000 + (uint64_t)i, src + i * 256, 256,
			BE_XWR_F_SIGNALED, (uint64_t)(uintptr_t)(dst + i * 256),
			xt_grant(t, s[i], dst), (uint32_t)i);
	}
	memset(seen, 0, sizeof(seen));
	xt_wait_wc(t, &p.srv, wc, NCONN * 2);
	for (k = 0; k < NCONN * 2; k++) {
		ASSERT_EQ(wc[k].status, BE_XWC_SUCCESS);
		for (i = 0; i < NCONN; i++)
			if (wc[k].conn == s[i])
				break;
		ASSERT_LT(i, NCONN);
		if (wc[k].opcode == BE_XWC_RECV) {
			ASSERT_EQ(wc[k].byte_len, 100 + i);
			ASSERT(xt_check((void *)(uintptr_t)wc[k].wr_id, 100 + (size_t)i, (uint32_t)i));
			ASSERT_EQ(seen[i][1], 0); /* SEND before WRITE_IMM on a conn */
			seen[i][0]++;
		} else {
			ASSERT_EQ(wc[k].opcode, BE_XWC_RECV_IMM);
			ASSERT_EQ(wc[k].imm, i);
			ASSERT(xt_check(dst + i * 256, 256, (uint32_t)i));
			seen[i][1]++;
		}
	}
	for (i = 0; i < NCONN; i++)
		ASSERT(seen[i][0] == 1 && seen[i][1] == 1);
	xt_wait_wc(t, &p.cli, wc, NCONN * 2);
	for (k = 0; k < NCONN * 2; k++) {
		i = (int)(wc[k].wr_id % 1000);
		ASSERT_EQ(wc[k].status, BE_XWC_SUCCESS);
		ASSERT_PTR_EQ(wc[k].conn, c[i]);
	}
	for (i = 0; i < NCONN; i++) {
		t->ops->conn_destroy(c[i]);
		t->ops->conn_destroy(s[i]);
	}
	xt_pair_close(&p);
	return 0;
}
