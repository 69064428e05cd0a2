/*
 * Check the shm transport's data path on a loopback pair in one process:
 * SEND lands in the posted receive with its length, WRITE lands in the
 * peer's region, WRITE_IMM reports imm and length, completions come in
 * posting order, unsignaled WRs produce none, INLINE buffers are free on
 * return, the ring wraps and a full ring defers WRs without losing or
 * reordering any, and disconnect flushes and reaches both sides.
 */
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

#define RING_BYTES (1u << 20)

static void test_send_write(struct xt_side *a, struct xt_side *b, struct xt_mem *ma, struct xt_mem *mb)
{
	struct be_xwc wc[4];
	uint32_t rkey;
	uint32_t i;

	/* SEND b -> a */
	for (i = 0; i < 100; i++)
		mb->p[i] = (uint8_t)(i * 7 + 1);
	xt_mem_recv(a, ma, 0, 4096, 11);
	ASSERT_OK(xt_mem_post(b->conn, BE_XWR_SEND, mb, 0, 100, 0, 0, 0, BE_XWR_F_SIGNALED, 21));
	xt_side_wc(a, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV);
	ASSERT_UEQ(wc[0].wr_id, 11);
	ASSERT_EQ(wc[0].byte_len, 100);
	ASSERT((const void *)(wc[0].conn) == (const void *)(a->conn));
	ASSERT((const void *)(wc[0].srq) == (const void *)(a->srq));
	ASSERT(memcmp(ma->p, mb->p, 100) == 0);
	xt_side_ack(a);
	xt_side_wc(b, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_SEND);
	ASSERT_UEQ(wc[0].wr_id, 21);

	/* WRITE then WRITE_IMM b -> a */
	for (i = 0; i < 8192; i++)
		mb->p[4096 + i] = (uint8_t)(i ^ 0x5a);
	xt_mem_recv(a, ma, 0, 16, 12);
	rkey = xt_mem_grant(ma, a->conn);
	ASSERT_OK(xt_mem_post(b->conn, BE_XWR_WRITE, mb, 4096, 4096, xt_mem_addr(ma, 65536),
			   rkey, 0, BE_XWR_F_SIGNALED, 22));
	ASSERT_OK(xt_mem_post(b->conn, BE_XWR_WRITE_IMM, mb, 8192, 4096, xt_mem_addr(ma, 65536 + 4096),
			   rkey, 0xdeadbeef, BE_XWR_F_SIGNALED, 23));
	xt_side_wc(a, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV_IMM);
	ASSERT_UEQ(wc[0].imm, 0xdeadbeef);
	ASSERT_EQ(wc[0].byte_len, 4096);
	ASSERT_UEQ(wc[0].wr_id, 12);
	ASSERT(memcmp(ma->p + 65536, mb->p + 4096, 8192) == 0);
	xt_side_ack(a);
	xt_side_wc(b, wc, 2);
	ASSERT_UEQ(wc[0].wr_id, 22);
	ASSERT_EQ(wc[0].opcode, BE_XWC_WRITE);
	ASSERT_UEQ(wc[1].wr_id, 23);
	ASSERT_EQ(wc[1].opcode, BE_XWC_WRITE_IMM);
}

static void test_inline_unsignaled(struct xt_side *a, struct xt_side *b, struct xt_mem *ma)
{
	struct be_xsend_wr wr[3], *bad = NULL;
	struct be_xsge sge[3];
	uint8_t buf[3][64];
	struct be_xwc wc[4];
	int i;

	for (i = 0; i < 3; i++) {
		memset(buf[i], 'A' + i, sizeof(buf[i]));
		sge[i].addr = (uint64_t)(uintptr_t)buf[i];
		sge[i].length = sizeof(buf[i]);
		sge[i].lkey = 0; /* ignored for inline */
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].opcode = BE_XWR_SEND;
		wr[i].flags = BE_XWR_F_INLINE | (i == 2 ? BE_XWR_F_SIGNALED : 0);
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
		xt_mem_recv(a, ma, 4096 * (uint64_t)i, 4096, 200 + (uint64_t)i);
	}
	ASSERT_OK(ops->post_send(b->conn, wr, &bad));
	memset(buf, 0, sizeof(buf)); /* inline: ours again */
	xt_side_wc(a, wc, 3);
	for (i = 0; i < 3; i++) {
		ASSERT_UEQ(wc[i].wr_id, 200 + (uint64_t)i);
		ASSERT_EQ(wc[i].byte_len, 64);
		ASSERT_EQ(ma->p[4096 * i], 'A' + i);
		ASSERT_EQ(ma->p[4096 * i + 63], 'A' + i);
	}
	xt_side_ack(a);
	xt_side_wc(b, wc, 1); /* only the signaled one */
	ASSERT_UEQ(wc[0].wr_id, 102);
	xt_side_no_wc(b);
}

/* Many SENDs without polling the receiver: the ring fills, the rest are
 * deferred, and everything arrives in order once the receiver polls. */
static void test_wrap_defer(struct xt_side *a, struct xt_side *b, struct xt_mem *ma, struct xt_mem *mb)
{
	const uint32_t n = 3000, len = 1000; /* ~3 MB through a 1 MiB ring */
	struct be_xwc wc[64];
	uint32_t i, got = 0, sent = 0;

	for (i = 0; i < n; i++)
		xt_mem_recv(a, ma, (uint64_t)(i % 64) * 1024, 1024, i);
	for (i = 0; i < n; i++) {
		memset(mb->p + (uint64_t)i * len, (int)(i & 0xff), len);
		ASSERT_OK(xt_mem_post(b->conn, BE_XWR_SEND, mb, (uint64_t)i * len, len, 0, 0, 0,
				   BE_XWR_F_SIGNALED, i));
	}
	while (got < n || sent < n) {
		int r = ops->cq_poll(a->cq, wc, 1);

		ASSERT_OK(r);
		if (r) {
			ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
			ASSERT_UEQ(wc[0].wr_id, got);
			ASSERT_EQ(wc[0].byte_len, len);
			ASSERT_EQ(ma->p[(got % 64) * 1024], got & 0xff);
			ASSERT_EQ(ma->p[(got % 64) * 1024 + len - 1], got & 0xff);
			got++;
		}
		r = ops->cq_poll(b->cq, wc, 64);
		ASSERT_OK(r);
		for (int k = 0; k < r; k++) {
			ASSERT_EQ(wc[k].status, BE_XWC_SUCCESS);
			ASSERT_UEQ(wc[k].wr_id, sent);
			sent++;
		}
	}
	(void)RING_BYTES;
}

static void test_disconnect(struct xt_side *a, struct xt_side *b, struct xt_mem *ma, struct xt_mem *mb)
{
	struct be_xevent ev;
	struct be_xwc wc[4];

	/* Two SENDs a -> b that b never consumes: flushed by the disconnect. */
	xt_mem_recv(b, mb, 0, 4096, 1);
	ASSERT_OK(xt_mem_post(a->conn, BE_XWR_SEND, ma, 0, 10, 0, 0, 0, BE_XWR_F_SIGNALED, 7));
	ASSERT_OK(xt_mem_post(a->conn, BE_XWR_SEND, ma, 0, 10, 0, 0, 0, 0, 8));
	ASSERT_OK(ops->disconnect(a->conn));
	xt_side_expect(a, BE_XEV_DISCONNECTED, &ev, NULL);
	ASSERT((const void *)(ev.conn) == (const void *)(a->conn));
	xt_side_wc(a, wc, 2);
	ASSERT_UEQ(wc[0].wr_id, 7);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
	ASSERT_UEQ(wc[1].wr_id, 8);
	ASSERT_EQ(wc[1].status, BE_XWC_WR_FLUSH_ERR);
	xt_side_expect(b, BE_XEV_DISCONNECTED, &ev, NULL);
	ASSERT((const void *)(ev.conn) == (const void *)(b->conn));
	/* Posting on a conn in error flushes. */
	ASSERT_OK(xt_mem_post(b->conn, BE_XWR_SEND, mb, 0, 10, 0, 0, 0, 0, 9));
	xt_side_wc(b, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
	xt_side_no_wc(b);
}

int main(int argc, char **argv)
{
	struct xt_side a, b;
	struct xt_mem ma, mb;
	struct be_xdev_attr attr;
	char name[64], buf[64];

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	xt_side_init(&xt, &a, 4096, 4096);
	xt_side_init(&xt, &b, 4096, 4096);
	ASSERT_OK(ops->dev_query(xt.dev, &attr));
	ASSERT(strcmp(attr.transport, "shm") == 0);
	ASSERT_EQ(attr.num_ports, 1);
	ASSERT(attr.max_sge >= 1 && attr.max_inline >= 64);
	xt_mem_reg(&xt, &ma, 4u << 20);
	xt_mem_reg(&xt, &mb, 4u << 20);
	snprintf(name, sizeof(name), "basic-%d", (int)getpid());
	xt_side_connect(&a, &b, name, 4096);
	ASSERT_OK(ops->listener_addr(a.l, buf, sizeof(buf)));
	ASSERT(strcmp(buf, name) == 0);
	ASSERT_OK(ops->conn_peer_addr(b.conn, buf, sizeof(buf)));

	test_send_write(&a, &b, &ma, &mb);
	test_inline_unsignaled(&a, &b, &ma);
	test_wrap_defer(&a, &b, &ma, &mb);
	test_disconnect(&a, &b, &ma, &mb);

	xt_sides_close(&a, &b, &ma, &mb);
	xt_fini(&xt);
	return 0;
}
