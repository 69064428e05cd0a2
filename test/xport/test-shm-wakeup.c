/*
 * Check cq wakeups on shm: an armed cq's fd is not readable while nothing
 * is pending, becomes readable when the peer posts a SEND (receiver side),
 * when the peer acknowledges a signaled SEND it consumed (sender side: at
 * the receiver's next poll, post or arm), both ways for a WRITE (the
 * receiver places it, then acknowledges it); cq_ack clears it. Arming while something
 * is already pending makes the fd readable at once (no lost wakeup).
 */
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

static int readable(struct xt_side *s)
{
	struct pollfd p = { .fd = ops->cq_fd(s->cq), .events = POLLIN };

	return poll(&p, 1, 0);
}

static void arm_clear(struct xt_side *s)
{
	ASSERT_OK(ops->cq_ack(s->cq));
	ASSERT_OK(ops->cq_arm(s->cq));
}

/* Both sides cleared and armed: neither fd readable. */
static void both_asleep(struct xt_side *a, struct xt_side *b)
{
	arm_clear(a);
	arm_clear(b);
	ASSERT_EQ(readable(a), 0);
	ASSERT_EQ(readable(b), 0);
}

/* The receiver @a's next poll acknowledges what it took: the sender @b
 * wakes and completes its signaled WR @wr_id. */
static void sender_wakes(struct xt_side *a, struct xt_side *b, uint64_t wr_id)
{
	struct be_xwc wc;

	xt_side_ack(a);
	ASSERT_EQ(readable(b), 1);
	xt_side_wc(b, &wc, 1);
	ASSERT_UEQ(wc.wr_id, wr_id);
}

int main(int argc, char **argv)
{
	struct xt_side a, b;
	struct xt_mem ma, mb;
	struct be_xwc wc[4];
	uint32_t rkey;

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	xt_sides_open(&xt, &a, &b, 64, &ma, &mb, 65536, 16);
	rkey = xt_mem_grant(&ma, a.conn);
	for (int i = 0; i < 8; i++)
		xt_mem_recv(&a, &ma, 1024 * (uint64_t)i, 1024, (uint64_t)i);

	/* Receiver asleep, sender posts. */
	both_asleep(&a, &b);
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_SEND, &mb, 0, 10, 0, 0, 0, BE_XWR_F_SIGNALED, 1));
	ASSERT_EQ(readable(&a), 1);
	ASSERT_EQ(readable(&b), 0);
	arm_clear(&a);
	/* Still pending (not polled): re-arming wakes at once. */
	ASSERT_EQ(readable(&a), 1);
	xt_side_wc(&a, wc, 1);
	/* The receiver took the signaled SEND; its next poll acknowledges
	 * it, and the sender wakes. */
	ASSERT_EQ(readable(&b), 0);
	sender_wakes(&a, &b, 1);
	both_asleep(&a, &b);

	/* A WRITE wakes the receiver, which places it (no completion there);
	 * its next poll acknowledges it and wakes the writer. */
	memset(mb.p, 0x3c, 64);
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_WRITE, &mb, 0, 64, xt_mem_addr(&ma, 0), rkey, 0,
			   BE_XWR_F_SIGNALED, 2));
	ASSERT_EQ(readable(&a), 1);
	ASSERT_EQ(readable(&b), 0);
	xt_side_ack(&a);
	ASSERT_EQ(ma.p[63], 0x3c);
	sender_wakes(&a, &b, 2);
	both_asleep(&a, &b);

	/* WRITE_IMM wakes the receiver too. */
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_WRITE_IMM, &mb, 0, 64, xt_mem_addr(&ma, 0), rkey, 9, 0, 3));
	ASSERT_EQ(readable(&a), 1);
	xt_side_wc(&a, wc, 1);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV_IMM);
	ASSERT_UEQ(wc[0].imm, 9);
	ASSERT_EQ(readable(&b), 0); /* unsignaled: no reason to wake */

	xt_sides_close(&a, &b, &ma, &mb);
	xt_fini(&xt);
	return 0;
}
