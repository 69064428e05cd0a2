/*
 * Check receive credit accounting: data never takes the reserve credit,
 * credit frames may; returns beyond what was spent and receives beyond
 * the grant are protocol errors; owed credits are collected once; the
 * counters record the peaks. Also a two-sided simulation with random
 * traffic checks that neither side ever deadlocks with credits owed, and
 * a second one adds elastic grants (grow, revoke, release) and checks
 * that no receive ever arrives beyond its receiver's grant, that a grant
 * stays within its bounds, and that nothing deadlocks.
 */
#include <errno.h>
#include <string.h>
#include <stdio.h>

#include <be/be.h>
#include "engine/credit.h"
#include "engine/proto.h"
#include "test.h"

static void test_basic(void)
{
	struct be__credit c;

	be__credit_init(&c, 4, 4);
	ASSERT_EQ(be__credit_take(&c, false), 0);
	ASSERT_EQ(be__credit_take(&c, false), 0);
	ASSERT_EQ(be__credit_take(&c, false), 0);
	ASSERT_EQ(be__credit_take(&c, false), -EAGAIN); /* the reserve */
	ASSERT_EQ(c.stalls, 1);
	ASSERT_EQ(be__credit_take(&c, true), 0);
	ASSERT_EQ(be__credit_take(&c, true), -EAGAIN);
	ASSERT_EQ(c.max_in_use, 4);
	ASSERT_EQ(be__credit_return(&c, 5), BE_EPROTO_PEER);
	ASSERT_EQ(be__credit_return(&c, 4), 0);
	ASSERT_EQ(be__credit_return(&c, 1), BE_EPROTO_PEER);

	ASSERT_EQ(be__credit_consume(&c), 0);
	ASSERT_EQ(be__credit_consume(&c), 0);
	ASSERT_EQ(be__credit_consume(&c), 0);
	ASSERT_EQ(be__credit_consume(&c), 0);
	ASSERT_EQ(be__credit_consume(&c), BE_EPROTO_PEER);
	ASSERT(!be__credit_update_due(&c));
	/* A credit-only frame alone does not trigger while the peer has
	 * credits left... */
	be__credit_repost(&c, false);
	ASSERT(be__credit_update_due(&c)); /* ...but here it has none: starved */
	ASSERT_EQ(be__credit_collect(&c), 1);
	ASSERT_EQ(be__credit_collect(&c), 0);
	ASSERT_EQ(c.max_peer_in_use, 4);

	be__credit_init(&c, 8, 8);
	ASSERT_EQ(be__credit_consume(&c), 0);
	be__credit_repost(&c, false);
	ASSERT(!be__credit_update_due(&c)); /* in use 1 of 8: not starved */
	ASSERT_EQ(be__credit_consume(&c), 0);
	be__credit_repost(&c, true);
	ASSERT(!be__credit_update_due(&c)); /* 1 triggering < 8/4 */
	ASSERT_EQ(be__credit_consume(&c), 0);
	be__credit_repost(&c, true);
	ASSERT(be__credit_update_due(&c));
	ASSERT_EQ(be__credit_collect(&c), 3);
	ASSERT_EQ(c.owed_trig, 0);
}

/* Two peers A and B exchanging frames through in-order queues. */
struct side {
	struct be__credit c;
	int want;          /* data frames still to send */
	int queue[4096];   /* in flight toward the other: credits carried */
	bool pure[4096];   /* a credit-only frame */
	int qh, qt;
};

static void step(struct side *me, struct side *peer, int *progress)
{
	/* Receive one frame from the peer. */
	if (peer->qh != peer->qt) {
		bool pure = peer->pure[peer->qh % 4096];
		int credits = peer->queue[peer->qh++ % 4096];

		ASSERT_EQ(be__credit_consume(&me->c), 0);
		be__credit_repost(&me->c, !pure);
		ASSERT_EQ(be__credit_return(&me->c, (uint32_t)credits), 0);
		(*progress)++;
	}
	if (me->want && be__credit_take(&me->c, false) == 0) {
		me->pure[me->qt % 4096] = false;
		me->queue[me->qt++ % 4096] = be__credit_collect(&me->c);
		me->want--;
		(*progress)++;
	} else if (be__credit_update_due(&me->c) && be__credit_take(&me->c, true) == 0) {
		me->pure[me->qt % 4096] = true;
		me->queue[me->qt++ % 4096] = be__credit_collect(&me->c);
		(*progress)++;
	}
}

static void test_no_deadlock(void)
{
	int trial;

	srand(7);
	for (trial = 0; trial < 200; trial++) {
		struct side a = { .want = rand() % 500 }, b = { .want = rand() % 500 };
		uint32_t ca = 4 + (uint32_t)(rand() % 10), cb = 4 + (uint32_t)(rand() % 10);
		int idle = 0, steps = 0;

		be__credit_init(&a.c, cb, ca);
		be__credit_init(&b.c, ca, cb);
		while (a.want || b.want || a.qh != a.qt || b.qh != b.qt) {
			int progress = 0;

			if (rand() & 1)
				step(&a, &b, &progress);
			else
				step(&b, &a, &progress);
			idle = progress ? 0 : idle + 1;
			ASSERT_LT(idle, 1000); /* stuck with work left: deadlock */
			ASSERT_LT(++steps, 1000000); /* credit frames ping-ponging */
			ASSERT_LE(a.c.granted - a.c.avail, a.c.granted);
		}
	}
}

/* The elastic calls one by one, and the violations they must refuse. */
static void test_elastic_basic(void)
{
	struct be__credit r, t; /* r grants to its peer; t is that peer */
	int i, k;

	be__credit_init(&r, 8, 8);
	r.grant_max = 64;
	be__credit_init(&t, 8, 8);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(be__credit_consume(&r), 0);
	ASSERT(!be__credit_want_grow(&r, false)); /* 5 of 8: below three quarters */
	ASSERT(be__credit_want_grow(&r, true)); /* ...but the peer starved */
	ASSERT_EQ(be__credit_consume(&r), 0);
	ASSERT(be__credit_want_grow(&r, false));
	ASSERT_EQ(be__credit_grow_step(&r), 8); /* doubling */
	be__credit_grow(&r, 8);
	ASSERT_EQ(r.peer_granted, 16);
	ASSERT_EQ(r.peer_granted_peak, 16);
	ASSERT_EQ(be__credit_on_grow(&t, 8), 0);
	ASSERT_EQ(t.granted, 16);
	ASSERT_EQ(t.avail, 16);
	ASSERT_EQ(be__credit_on_grow(&t, 0), BE_EPROTO_PEER);
	ASSERT_EQ(be__credit_on_grow(&t, 65535), BE_EPROTO_PEER);
	r.peer_granted = 60;
	ASSERT_EQ(be__credit_grow_step(&r), 4); /* within grant_max */
	r.peer_granted = 16;

	/* Shrink: the peer returned everything and stays quiet. */
	for (i = 0; i < 6; i++)
		be__credit_repost(&r, true);
	(void)be__credit_collect(&r);
	ASSERT_EQ(r.peer_in_use, 0);
	ASSERT_EQ(be__credit_tick(&r, 8, 2), 0); /* the peak of 6 is not idle */
	ASSERT_EQ(be__credit_tick(&r, 8, 2), 0); /* idle 1 of 2 */
	ASSERT_EQ(be__credit_tick(&r, 8, 2), 8); /* halve: 16 -> 8 */
	ASSERT_EQ(r.revoking, 8);
	ASSERT(!be__credit_want_grow(&r, true)); /* no growth while revoking */
	ASSERT_EQ(be__credit_tick(&r, 8, 2), 0); /* one revoke at a time */
	ASSERT_EQ(be__credit_release(&r, 9), BE_EPROTO_PEER); /* more than asked */

	/* The sender holds 16, spends 13: it can give back only 1 of 8. */
	for (i = 0; i < 13; i++)
		ASSERT_EQ(be__credit_take(&t, i >= 14), 0);
	ASSERT_EQ(be__credit_on_revoke(&t, 0), BE_EPROTO_PEER);
	ASSERT_EQ(be__credit_on_revoke(&t, 13), BE_EPROTO_PEER); /* below 4 */
	k = be__credit_on_revoke(&t, 8);
	ASSERT_EQ(k, 1);
	ASSERT_EQ(t.granted, 15);
	ASSERT_EQ(t.avail, 2);
	ASSERT_EQ(be__credit_release(&r, (uint32_t)k), 0);
	ASSERT_EQ(r.peer_granted, 15);
	ASSERT_EQ(r.revoking, 0);
	ASSERT_EQ(be__credit_release(&r, 0), BE_EPROTO_PEER); /* none pending */

	/* A release that would leave the peer holding more than its grant. */
	be__credit_init(&r, 8, 8);
	for (i = 0; i < 7; i++)
		ASSERT_EQ(be__credit_consume(&r), 0);
	r.revoking = 4;
	ASSERT_EQ(be__credit_release(&r, 4), BE_EPROTO_PEER);
}

enum { EF_DATA, EF_CREDIT, EF_GROW, EF_REVOKE, EF_RELEASE };

/* A frame in flight; and a side of the elastic simulation. */
struct eframe {
	uint8_t kind, flags;
	uint32_t credits, count;
};

struct eside {
	struct be__credit c;
	uint32_t reserved;            /* receives "posted" for the peer */
	uint32_t held;                /* consumed, not yet reposted */
	bool held_trig[1 << 12];
	int want;
	struct eframe ctrl[64];       /* control frames waiting for a credit */
	int nctrl;
	struct eframe q[1 << 16];     /* in flight toward the peer */
	int qh, qt;
};

static bool eside_send(struct eside *me, uint8_t kind, uint32_t count, bool reserve)
{
	if (be__credit_take(&me->c, reserve))
		return false;
	me->q[me->qt % (1 << 16)] =
		(struct eframe){ kind, be__credit_flags(&me->c), be__credit_collect(&me->c), count };
	me->qt++;
	return true;
}

static void eside_ctrl(struct eside *me, uint8_t kind, uint32_t count)
{
	ASSERT_LT(me->nctrl, 64);
	me->ctrl[me->nctrl++] = (struct eframe){ kind, 0, 0, count };
}

static void estep(struct eside *me, struct eside *peer, int *progress)
{
	int r = rand() % 8;

	if (r == 0 && me->held) {
		/* Repost what was held back: its credits become owed. */
		while (me->held) {
			me->held--;
			be__credit_repost(&me->c, me->held_trig[me->held]);
		}
		(*progress)++;
	} else if (r == 1) {
		/* A timer tick: maybe ask an idle grant back. */
		uint32_t n = be__credit_tick(&me->c, 4, 1 + (uint32_t)(rand() % 3));

		if (n)
			eside_ctrl(me, EF_REVOKE, n);
	} else if (peer->qh != peer->qt) {
		struct eframe f = peer->q[peer->qh++ % (1 << 16)];
		int k;

		/* Never beyond the grant: that is RNR on verbs. */
		ASSERT_EQ(be__credit_consume(&me->c), 0);
		ASSERT_LE(me->c.peer_granted, me->reserved);
		ASSERT_LT(me->held, 1 << 12);
		me->held_trig[me->held++] = f.kind == EF_DATA;
		ASSERT_EQ(be__credit_return(&me->c, f.credits), 0);
		if (be__credit_want_grow(&me->c, f.flags & BE_FRF_STARVED) && rand() % 4) {
			uint32_t n = be__credit_grow_step(&me->c);

			me->reserved += n; /* posted first, then granted */
			be__credit_grow(&me->c, n);
			eside_ctrl(me, EF_GROW, n);
		}
		if (f.kind == EF_GROW) {
			ASSERT_EQ(be__credit_on_grow(&me->c, f.count), 0);
		} else if (f.kind == EF_REVOKE) {
			k = be__credit_on_revoke(&me->c, f.count);
			ASSERT_GE(k, 0);
			eside_ctrl(me, EF_RELEASE, (uint32_t)k);
		} else if (f.kind == EF_RELEASE) {
			ASSERT_EQ(be__credit_release(&me->c, f.count), 0);
			me->reserved -= f.count;
		}
		(*progress)++;
	}
	/* Control frames first, in order; then data; then owed credits. */
	while (me->nctrl) {
		if (!eside_send(me, me->ctrl[0].kind, me->ctrl[0].count, false))
			break;
		memmove(me->ctrl, me->ctrl + 1, sizeof(me->ctrl[0]) * (size_t)--me->nctrl);
		(*progress)++;
	}
	if (me->want && eside_send(me, EF_DATA, 0, false)) {
		me->want--;
		(*progress)++;
	} else if (be__credit_update_due(&me->c) && eside_send(me, EF_CREDIT, 0, true)) {
		(*progress)++;
	}
	ASSERT_GE(me->c.granted, BE_PROTO_MIN_CREDITS);
	ASSERT_LE(me->c.granted, 64);
	ASSERT_LE(me->c.granted - me->c.avail, me->c.granted);
}

/* The state of a side, printed before a deadlock fails the test. */
static void eside_dump(const char *name, const struct eside *x)
{
	fprintf(stderr,
		"%s: want %d, in flight %d, control frames %d (first kind %d), held %u; "
		"granted %u avail %u; peer_granted %u in_use %u owed %u trig %u "
		"revoking %u reserved %u\n",
		name, x->want, x->qt - x->qh, x->nctrl, x->nctrl ? x->ctrl[0].kind : -1, x->held,
		x->c.granted, x->c.avail, x->c.peer_granted, x->c.peer_in_use, x->c.owed,
		x->c.owed_trig, x->c.revoking, x->reserved);
}

static void test_elastic_no_deadlock(void)
{
	static struct eside a, b;
	uint32_t grows = 0, releases = 0;
	int trial;

	srand(11);
	for (trial = 0; trial < 300; trial++) {
		int idle = 0, steps = 0;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.want = rand() % 2000;
		b.want = rand() % 2000;
		be__credit_init(&a.c, 4, 4);
		be__credit_init(&b.c, 4, 4);
		a.c.grant_max = b.c.grant_max = 64;
		a.reserved = b.reserved = 4;
		while (a.want || b.want || a.qh != a.qt || b.qh != b.qt || a.nctrl || b.nctrl ||
		       a.c.revoking || b.c.revoking) {
			int progress = 0;

			if (rand() & 1)
				estep(&a, &b, &progress);
			else
				estep(&b, &a, &progress);
			idle = progress ? 0 : idle + 1;
			if (idle == 999) {
				eside_dump("a", &a);
				eside_dump("b", &b);
			}
			ASSERT_LT(idle, 1000); /* stuck with work left: deadlock */
			ASSERT_LT(++steps, 2000000);
		}
		grows += (a.c.peer_granted_peak > 4) + (b.c.peer_granted_peak > 4);
		releases += (a.reserved < a.c.peer_granted_peak) + (b.reserved < b.c.peer_granted_peak);
		ASSERT_EQ(a.reserved, a.c.peer_granted);
		ASSERT_EQ(b.reserved, b.c.peer_granted);
	}
	/* The simulation did exercise both directions of the grants. */
	ASSERT_GT(grows, 50);
	ASSERT_GT(releases, 20);
}

int main(void)
{
	test_basic();
	test_no_deadlock();
	test_elastic_basic();
	test_elastic_no_deadlock();
	return 0;
}
