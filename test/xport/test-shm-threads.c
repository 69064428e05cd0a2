/*
 * Check the shm transport with each end owned by its own thread: a
 * ping-pong of WRITE_IMM (with data) one way and SEND the other, where
 * both threads alternate between busy polling and sleeping on their armed
 * cq fd, so every wakeup path races with the peer. Every message must
 * arrive once, in order, with its data (and TSan must stay quiet).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

#define ROUNDS 5000

struct ctx {
	struct xt_side s;
	struct xt_mem m;
	uint64_t peer_addr;
	uint32_t peer_rkey;
};

/* Wait for one completion of @opcode (others are send completions). */
static void wait_wc(struct xt_side *s, struct be_xwc *out, enum be_xwc_opcode opcode, int round)
{
	uint64_t end = xt_now_ms() + 20000;

	for (;;) {
		struct be_xwc wc;
		int spins = round % 3 == 0 ? 0 : 200, r = 0;

		for (int i = 0; i <= spins && !r; i++)
			r = ops->cq_poll(s->cq, &wc, 1);
		if (!r) {
			struct pollfd p = { .fd = ops->cq_fd(s->cq), .events = POLLIN };

			ASSERT_OK(ops->cq_arm(s->cq));
			r = ops->cq_poll(s->cq, &wc, 1);
			if (!r) {
				poll(&p, 1, 100);
				ASSERT_OK(ops->cq_ack(s->cq));
				ASSERT(xt_now_ms() < end);
				continue;
			}
		}
		ASSERT_OK(r);
		ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
		if (wc.opcode == opcode) {
			*out = wc;
			return;
		}
	}
}

static void *server(void *arg)
{
	struct ctx *x = arg;
	struct be_xwc wc;

	for (int i = 0; i < ROUNDS; i++) {
		wait_wc(&x->s, &wc, BE_XWC_RECV_IMM, i);
		ASSERT_UEQ(wc.imm, (uint32_t)i);
		ASSERT_EQ(wc.byte_len, 64);
		ASSERT_EQ(x->m.p[4096 + (i % 64) * 64], (uint8_t)i);
		ASSERT_EQ(x->m.p[4096 + (i % 64) * 64 + 63], (uint8_t)i);
		xt_mem_recv(&x->s, &x->m, 0, 64, (uint64_t)i);
		memcpy(x->m.p + 8192, &i, sizeof(i));
		ASSERT_OK(xt_mem_post(x->s.conn, BE_XWR_SEND, &x->m, 8192, sizeof(i), 0, 0, 0,
				   BE_XWR_F_SIGNALED, (uint64_t)i));
	}
	return NULL;
}

static void *client(void *arg)
{
	struct ctx *x = arg;
	struct be_xwc wc;

	for (int i = 0; i < ROUNDS; i++) {
		int v;

		memset(x->m.p + 4096, (uint8_t)i, 64);
		ASSERT_OK(xt_mem_post(x->s.conn, BE_XWR_WRITE_IMM, &x->m, 4096, 64,
				   x->peer_addr + 4096 + (uint64_t)(i % 64) * 64, x->peer_rkey,
				   (uint32_t)i, BE_XWR_F_SIGNALED, (uint64_t)i));
		wait_wc(&x->s, &wc, BE_XWC_RECV, i + 1);
		ASSERT_EQ(wc.byte_len, sizeof(v));
		memcpy(&v, x->m.p + wc.wr_id * 64, sizeof(v));
		ASSERT_EQ(v, i);
		xt_mem_recv(&x->s, &x->m, wc.wr_id * 64, 64, wc.wr_id);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct ctx a, b;
	pthread_t ta, tb;
	char name[64];

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	xt_side_init(&xt, &a.s, 4096, 64);
	xt_side_init(&xt, &b.s, 4096, 64);
	xt_mem_reg(&xt, &a.m, 65536);
	xt_mem_reg(&xt, &b.m, 65536);
	snprintf(name, sizeof(name), "threads-%d", (int)getpid());
	xt_side_connect(&a.s, &b.s, name, 64);
	for (int i = 0; i < 32; i++) {
		xt_mem_recv(&a.s, &a.m, 0, 64, 1000 + (uint64_t)i);
		xt_mem_recv(&b.s, &b.m, (uint64_t)i * 64, 64, (uint64_t)i);
	}
	b.peer_addr = xt_mem_addr(&a.m, 0);
	b.peer_rkey = xt_mem_grant(&a.m, a.s.conn);
	ASSERT_OK(pthread_create(&ta, NULL, server, &a));
	ASSERT_OK(pthread_create(&tb, NULL, client, &b));
	ASSERT_OK(pthread_join(ta, NULL));
	ASSERT_OK(pthread_join(tb, NULL));

	ops->conn_destroy(a.s.conn);
	ops->conn_destroy(b.s.conn);
	a.s.conn = b.s.conn = NULL;
	xt_mem_unreg(&a.m);
	xt_mem_unreg(&b.m);
	xt_side_fini(&xt, &a.s);
	xt_side_fini(&xt, &b.s);
	xt_fini(&xt);
	return 0;
}
