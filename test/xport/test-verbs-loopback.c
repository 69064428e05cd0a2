/*
 * Check the verbs transport end to end on Soft-RoCE, over the guest's own
 * IP: connect with private data both ways, a SEND (inline) lands in an SRQ
 * buffer, a WRITE_WITH_IMM lands in remote memory and completes as
 * RECV_IMM with the immediate, an unsignaled WRITE is covered by a later
 * signaled SEND, the CQ fd wakes up after cq_arm, and a WRITE with a bad
 * rkey fails with REM_ACCESS_ERR and disconnects both ends; later posts
 * flush.
 */
#include <poll.h>

#include "xtest.h"

#define TV_REGION (1u << 20) /* the test's registered memory */
#define TV_RECV_SIZE 4096u

static struct xt_mem mem; /* TV_REGION bytes, registered */

#define SRV_RECV_OFF 0               /* 16 receives of the server */
#define CLI_RECV_OFF (128u << 10)    /* 16 receives of the client */
#define SRC_OFF (256u << 10)         /* client's source data */
#define DST_OFF (512u << 10)         /* server's WRITE target */

int main(int argc, char **argv)
{
	struct xt e;
	struct xt_side cli, srv;
	struct be_xlistener *lst;
	struct be_xconn *cc, *sc;
	struct be_xsend_wr w[2], *bad;
	struct be_xsge sge[2];
	struct be_xwc wc[4];
	struct be_xevent ev;
	char peer[128];
	int p, i;

	/* Block rkeys (no grant windows): this test posts to the peer's
	 * memory by its MR's rkey, as before any grant could be made. */
	setenv("BE_VERBS_MW", "0", 1);
	xt_init(&e, argc, argv);
	xt_mem_reg(&e, &mem, TV_REGION);
	fprintf(stderr, "device %s: %d port(s), max_inline %u, max_sge %u, max_qp_wr %u, "
		"max_srq_wr %u, max_msg %llu, thread domains %d\n",
		e.attr.name, e.attr.num_ports, e.attr.max_inline, e.attr.max_sge,
		e.attr.max_qp_wr, e.attr.max_srq_wr, (unsigned long long)e.attr.max_msg_size,
		e.attr.has_thread_domain);
	ASSERT(strcmp(e.attr.transport, "verbs") == 0);
	ASSERT_GE(e.attr.num_ports, 1);
	for (p = 0; p < e.attr.num_ports; p++)
		fprintf(stderr, "  port %d: up %d, %u Mb/s, mtu %u, netdev %s\n", p + 1,
			e.attr.port[p].up, e.attr.port[p].speed_mbps, e.attr.port[p].mtu,
			e.attr.port[p].netdev);
	ASSERT(e.attr.port[0].up);
	ASSERT_GE(e.attr.port[0].mtu, 256);
	ASSERT(e.attr.port[0].netdev[0] != '\0');
	ASSERT_GT(e.attr.max_qp_wr, 0);

	xt_side_init(&e, &srv, 256, 64);
	xt_mem_recvs(&srv, &mem, SRV_RECV_OFF, 16, TV_RECV_SIZE);
	xt_side_init(&e, &cli, 256, 64);
	xt_mem_recvs(&cli, &mem, CLI_RECV_OFF, 16, TV_RECV_SIZE);
	lst = xt_listen(&e, &srv);
	xt_connect_pair(&e, &cli, &srv, lst, 64, &cc, &sc);
	ASSERT_OK(e.ops->conn_peer_addr(cc, peer, sizeof(peer)));
	fprintf(stderr, "  client's peer: %s\n", peer);
	ASSERT(strncmp(peer, getenv("BE_RXE_IP0"), strlen(getenv("BE_RXE_IP0"))) == 0);

	/* SEND, inline when the device allows it. */
	memset(mem.p + SRC_OFF, 'a', 100);
	sge[0] = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF), 100, mem.mr.lkey };
	w[0] = xt_wr(BE_XWR_SEND, 1,
		     BE_XWR_F_SIGNALED | (e.attr.max_inline >= 100 ? BE_XWR_F_INLINE : 0), sge, 1);
	ASSERT_OK(e.ops->post_send(cc, w, &bad));
	if (w[0].flags & BE_XWR_F_INLINE)
		memset(mem.p + SRC_OFF, 'z', 100); /* inline: the buffer is free again */
	xt_side_wc(&cli, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_SEND);
	ASSERT_UEQ(wc[0].wr_id, 1);
	ASSERT((const void *)(wc[0].conn) == (const void *)(cc));
	xt_side_wc(&srv, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV);
	ASSERT_EQ(wc[0].byte_len, 100);
	ASSERT((const void *)(wc[0].conn) == (const void *)(sc));
	ASSERT((const void *)(wc[0].srq) == (const void *)(srv.srq));
	for (i = 0; i < 100; i++)
		ASSERT_EQ(mem.p[wc[0].wr_id + (uint64_t)i], 'a');

	/* WRITE_WITH_IMM of 8 KiB into the server's memory, after arming the
	 * server's CQ: its fd must wake up. */
	ASSERT_OK(e.ops->cq_arm(srv.cq));
	for (i = 0; i < 8192; i++)
		mem.p[SRC_OFF + i] = (char)(i * 7);
	sge[0] = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF), 8192, mem.mr.lkey };
	w[0] = xt_wr(BE_XWR_WRITE_IMM, 2, BE_XWR_F_SIGNALED, sge, 1);
	w[0].remote_addr = (uintptr_t)(mem.p + DST_OFF);
	w[0].rkey = mem.mr.rkey;
	w[0].imm = 0xdeadbeef;
	ASSERT_OK(e.ops->post_send(cc, w, &bad));
	{
		struct pollfd pfd = { .fd = e.ops->cq_fd(srv.cq), .events = POLLIN };

		ASSERT_EQ(poll(&pfd, 1, XT_WAIT_S * 1000), 1);
		ASSERT_OK(e.ops->cq_ack(srv.cq));
	}
	xt_side_wc(&srv, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV_IMM);
	ASSERT_UEQ(wc[0].imm, 0xdeadbeef);
	ASSERT_EQ(wc[0].byte_len, 8192);
	ASSERT((const void *)(wc[0].conn) == (const void *)(sc));
	ASSERT(memcmp(mem.p + SRC_OFF, mem.p + DST_OFF, 8192) == 0);
	xt_side_wc(&cli, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_WRITE_IMM);
	ASSERT_UEQ(wc[0].wr_id, 2);

	/* An unsignaled WRITE then a signaled SEND of two SGEs: one
	 * completion on the sender, in posting order. */
	sge[0] = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF), 16, mem.mr.lkey };
	sge[1] = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF + 1000), 16, mem.mr.lkey };
	w[0] = xt_wr(BE_XWR_WRITE, 3, 0, sge, 1);
	w[0].remote_addr = (uintptr_t)(mem.p + DST_OFF + 65536);
	w[0].rkey = mem.mr.rkey;
	w[0].next = &w[1];
	w[1] = xt_wr(BE_XWR_SEND, 4, BE_XWR_F_SIGNALED, sge, 2);
	ASSERT_OK(e.ops->post_send(cc, w, &bad));
	xt_side_wc(&cli, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_UEQ(wc[0].wr_id, 4);
	ASSERT_EQ(wc[0].opcode, BE_XWC_SEND);
	xt_side_wc(&srv, wc, 1);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV);
	ASSERT_EQ(wc[0].byte_len, 32);
	ASSERT(memcmp(mem.p + DST_OFF + 65536, mem.p + SRC_OFF, 16) == 0);
	ASSERT_EQ(e.ops->cq_poll(cli.cq, wc, 4), 0);

	/* Inline larger than the conn allows: refused, nothing posted. */
	sge[0] = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF), 4096, mem.mr.lkey };
	w[0] = xt_wr(BE_XWR_SEND, 5, BE_XWR_F_SIGNALED | BE_XWR_F_INLINE, sge, 1);
	bad = NULL;
	ASSERT_EQ(e.ops->post_send(cc, w, &bad), -EINVAL);
	ASSERT((const void *)(bad) == (const void *)(&w[0]));

	/* A WRITE with a bad rkey: REM_ACCESS_ERR, the conn goes down on
	 * both ends, the server's memory is untouched. */
	memset(mem.p + DST_OFF + 131072, 0x5a, 64);
	sge[0] = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF), 64, mem.mr.lkey };
	w[0] = xt_wr(BE_XWR_WRITE, 6, BE_XWR_F_SIGNALED, sge, 1);
	w[0].remote_addr = (uintptr_t)(mem.p + DST_OFF + 131072);
	w[0].rkey = mem.mr.rkey ^ 0x5a5a00;
	ASSERT_OK(e.ops->post_send(cc, w, &bad));
	xt_side_wc(&cli, wc, 1);
	fprintf(stderr, "  bad rkey: %s (vendor %#x)\n", be__xwc_status_str(wc[0].status),
		wc[0].vendor_err);
	ASSERT_EQ(wc[0].status, BE_XWC_REM_ACCESS_ERR);
	ASSERT_UEQ(wc[0].wr_id, 6);
	ASSERT((const void *)(wc[0].conn) == (const void *)(cc));
	for (i = 0; i < 64; i++)
		ASSERT_EQ(mem.p[DST_OFF + 131072 + i], 0x5a);
	ev = xt_side_wait_event(&cli, BE_XEV_DISCONNECTED, 1);
	ASSERT((const void *)(ev.conn) == (const void *)(cc));
	ASSERT_EQ(ev.status, -EACCES);
	ev = xt_side_wait_event(&srv, BE_XEV_DISCONNECTED, 1);
	ASSERT((const void *)(ev.conn) == (const void *)(sc));
	/* Posting on a dead conn flushes. */
	w[0].wr_id = 7;
	w[0].flags = 0;
	ASSERT_OK(e.ops->post_send(cc, w, &bad));
	xt_side_wc(&cli, wc, 1);
	ASSERT_UEQ(wc[0].wr_id, 7);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);

	e.ops->conn_destroy(cc);
	e.ops->conn_destroy(sc);
	e.ops->listener_close(lst);
	/* No completion names a destroyed conn. */
	while ((i = e.ops->cq_poll(cli.cq, wc, 4)) > 0)
		for (p = 0; p < i; p++)
			ASSERT(wc[p].conn != cc);
	while ((i = e.ops->cq_poll(srv.cq, wc, 4)) > 0)
		for (p = 0; p < i; p++)
			ASSERT(wc[p].conn != sc);
	xt_sides_close(&cli, &srv, &mem, NULL);
	xt_fini(&e);
	return 0;
}
