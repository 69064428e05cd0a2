/*
 * Check elastic receive grants (src/engine/credit.h): an Engine's grant
 * to its peer starts at credits_init, grows while the peer keeps three
 * quarters of it in use, never beyond `credits`, and shrinks back to
 * credits_init once the traffic stops (the peer gives the receives back
 * and the worker's reservation drops with them); it grows again with new
 * traffic. A growth the worker's shared receive queue cannot take is
 * refused and counted, and the traffic still flows. A worker carries more
 * Engines than srq_max_depth / credits. Under churn (both ways, bursts,
 * one side starved while the other holds its receives, quiet spells)
 * grants grow and shrink in both directions and nothing hangs. Every
 * message arrives intact and in order, and the counters show that no
 * receive was used beyond its grant (on verbs, with rnr_retry 0, that
 * would also be an RNR error).
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"
#include "util/common.h"

#define NLIS 8      /* listeners (so Engines) on one server worker */
#define BURST 300   /* messages per burst */
#define MSG 4000    /* one eager frame per SEND: a credit per message */

struct rx {
	struct be_sock *s;
	uint32_t next;  /* seed expected next */
	int bad;
};

static struct rx rxs[NLIS];
static int nrx;

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct rx *r = user;

	(void)s;
	if (len != MSG || !st_check(buf, len, r->next))
		r->bad++;
	r->next++;
	be_free(buf);
}

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	(void)l;
	(void)user;
	ASSERT_LT(nrx, NLIS);
	rxs[nrx].s = s;
	be_sock_set_user(s, &rxs[nrx]);
	nrx++;
	return 0;
}

static void srv_close(struct be_sock *s, int reason, void *user)
{
	(void)s;
	(void)reason;
	(void)user;
}

static const struct be_sock_cbs srv_cbs = {
	.on_recv = srv_recv, .on_close = srv_close, .on_accept = srv_accept,
};

static struct st_sends sends;
static int issued; /* sends made; sends.done catches up */
static struct be_worker *ws[2]; /* server, client */

static void send_one(struct be_sock *s, uint32_t seed)
{
	ASSERT_OK(be_sock_send(s, st_msg(MSG, seed), MSG, st_send_cb, &sends));
	issued++;
}

static void burst(struct be_sock *s, uint32_t from)
{
	uint32_t i;

	for (i = 0; i < BURST; i++)
		send_one(s, from + i);
}

/*
 * Deliver what is queued in rounds: the client progresses alone for a
 * while (it sends what its credits allow), then the server once (it takes
 * everything, grows the grant if the peer held three quarters of it, and
 * returns the credits). So growth does not depend on how the two happen
 * to interleave.
 */
static void deliver(struct rx *r, uint32_t want)
{
	uint64_t start = be__now_ns();

	while (r->next < want || sends.done < issued) {
		int k;

		for (k = 0; k < 50; k++)
			ASSERT_OK(be_worker_progress(ws[1]));
		ASSERT_OK(be_worker_progress(ws[0]));
		if (be__now_ns() - start > 60000000000ull)
			TEST_FAIL("hang: %u of %u messages delivered", r->next, want);
	}
	ASSERT_EQ(r->bad, 0);
	ASSERT_EQ(sends.ok, sends.done);
}

static struct be_sock *grant_of;
static uint64_t grant_want;

static bool grant_is(void *arg)
{
	struct be_engine_stats st;

	(void)arg;
	st_engine_stats(grant_of, &st);
	return st.credits_peer_now == grant_want;
}

/* One Engine: the grant grows under a burst, shrinks when it stops, and
 * grows again. */
static void test_grow_shrink(struct st *t)
{
	struct be_engine_stats es, ec;
	struct be_listener *l;
	struct be_ctx *ctx;
	struct be_sock *c;
	char addr[160];
	uint64_t grows;

	t->cfg.credits = 64;
	t->cfg.credits_init = 4;
	t->cfg.keepalive_ms = 20; /* a tick every 5 ms: shrinking takes ~0.2 s */
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(t), &srv_cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(be_sock_connect(ws[1], addr, NULL, NULL, &c));
	burst(c, 0);
	deliver(&rxs[0], BURST);

	st_engine_stats(rxs[0].s, &es);
	st_engine_stats(c, &ec);
	fprintf(stderr, "grew: grant 4 -> %llu in %llu steps; peak in use %llu\n",
		(unsigned long long)es.credits_peer_max, (unsigned long long)es.credit_grows,
		(unsigned long long)es.max_peer_credits_in_use);
	ASSERT_GE(es.credit_grows, 1);
	ASSERT_GT(es.credits_peer_max, 4);
	ASSERT_LE(es.credits_peer_max, 64);
	ASSERT_UEQ(ec.credits_granted, es.credits_peer_max); /* both saw the same peak */
	ASSERT_EQ(es.credit_grow_denied, 0);
	st_check_limits(&es);
	st_check_limits(&ec);

	/* Quiet now: the grant comes back down to credits_init. */
	grant_of = rxs[0].s;
	grant_want = 4;
	st_pump(ws, 2, grant_is, NULL);
	st_engine_stats(rxs[0].s, &es);
	st_engine_stats(c, &ec);
	fprintf(stderr, "shrank: %llu revokes, %llu receives reclaimed\n",
		(unsigned long long)es.credit_revokes, (unsigned long long)es.credits_reclaimed);
	ASSERT_GE(es.credit_revokes, 1);
	ASSERT_UEQ(es.credits_reclaimed, es.credits_peer_max - 4);
	ASSERT_UEQ(ec.credits_granted_now, 4);
	ASSERT_EQ(es.protocol_errors, 0);
	ASSERT_EQ(ec.protocol_errors, 0);

	/* And it grows again with new traffic. */
	grows = es.credit_grows;
	burst(c, BURST);
	deliver(&rxs[0], 2 * BURST);
	st_engine_stats(rxs[0].s, &es);
	ASSERT_GT(es.credit_grows, grows);
	st_check_limits(&es);

	be_sock_close(c);
	be_sock_close(rxs[0].s);
	be_listener_close(l);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
}

/* Eight Engines on one worker whose SRQ holds 64 receives, with
 * credits 64: a fixed grant would allow one. One Engine's grant grows
 * until the SRQ is full; the next growth is refused and traffic goes on. */
static void test_many_and_denied(struct st *t)
{
	struct be_listener *l[NLIS];
	struct be_sock *c[NLIS];
	struct be_engine_stats es;
	struct be_ctx *ctx;
	char addr[160];
	int i;

	memset(rxs, 0, sizeof(rxs));
	nrx = 0;
	t->cfg.credits = 64;
	t->cfg.credits_init = 4;
	t->cfg.srq_depth = 64;
	t->cfg.srq_max_depth = 64;
	t->cfg.keepalive_ms = 500; /* no shrinking during the burst */
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	for (i = 0; i < NLIS; i++) {
		ASSERT_OK(be_listen(ws[0], st_listen_addr(t), &srv_cbs, NULL, &l[i]));
		ASSERT_OK(be_listener_addr(l[i], addr, sizeof(addr)));
		ASSERT_OK(be_sock_connect(ws[1], addr, NULL, NULL, &c[i]));
		/* One at a time, so rxs[i] is the peer of c[i]. */
		send_one(c[i], 0);
		deliver(&rxs[i], 1);
	}
	ASSERT_EQ(be_worker_engine_count(ws[0]), NLIS);
	ASSERT_EQ(be_worker_engine_count(ws[1]), NLIS);

	/* 8 x 4 reserved; Engine 0 grows 4 -> 8 -> 16 -> 32 (60 of 64);
	 * to 64 it cannot. */
	burst(c[0], 1);
	deliver(&rxs[0], BURST + 1);
	st_engine_stats(rxs[0].s, &es);
	fprintf(stderr, "srq of 64: grant of Engine 0 peaked at %llu, %llu growths refused\n",
		(unsigned long long)es.credits_peer_max, (unsigned long long)es.credit_grow_denied);
	ASSERT_GE(es.credit_grow_denied, 1);
	ASSERT_LE(es.credits_peer_max, 32);
	st_check_limits(&es);
	/* The others still carry messages. */
	for (i = 1; i < NLIS; i++) {
		send_one(c[i], 1);
		deliver(&rxs[i], 2);
		st_engine_stats(rxs[i].s, &es);
		st_check_limits(&es);
	}

	for (i = 0; i < NLIS; i++) {
		be_sock_close(c[i]);
		be_sock_close(rxs[i].s);
		be_listener_close(l[i]);
	}
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
}

/* ---- churn: both ways, grants growing and shrinking all the time ---- */

struct churn_end {
	struct be_sock *s;
	uint32_t sent, next; /* seeds sent; seed expected next */
	int bad;
};

static struct churn_end cend[2]; /* 0: the server's Socket, 1: the client's */

/* Length of message @seed: 1..4000 B, eager, so every message spends a
 * credit (several may share one SEND). */
static size_t churn_len(uint32_t seed)
{
	return 1 + (size_t)((seed * 2654435761u) % 4000u);
}

static void churn_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct churn_end *c = user;

	(void)s;
	if (len != churn_len(c->next) || !st_check(buf, len, c->next))
		c->bad++;
	c->next++;
	be_free(buf);
}

static int churn_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	(void)l;
	(void)user;
	cend[0].s = s;
	be_sock_set_user(s, &cend[0]);
	return 0;
}

static const struct be_sock_cbs churn_srv_cbs = {
	.on_recv = churn_recv, .on_close = srv_close, .on_accept = churn_accept,
};
static const struct be_sock_cbs churn_cli_cbs = { .on_recv = churn_recv, .on_close = srv_close };

static void churn_burst(struct churn_end *c, uint32_t n)
{
	while (n--) {
		size_t len = churn_len(c->sent);

		ASSERT_OK(be_sock_send(c->s, st_msg(len, c->sent), len, st_send_cb, &sends));
		c->sent++;
		issued++;
	}
}

static bool churn_done(void *arg)
{
	(void)arg;
	return cend[0].next == cend[1].sent && cend[1].next == cend[0].sent &&
	       sends.done == issued;
}

/* Both grants back at credits_init (4): what a quiet spell leads to. */
static bool churn_quiet(void *arg)
{
	struct be_engine_stats e0, e1;

	(void)arg;
	st_engine_stats(cend[0].s, &e0);
	st_engine_stats(cend[1].s, &e1);
	return sends.done == issued && e0.credits_peer_now == 4 && e1.credits_peer_now == 4;
}

/*
 * Both ends send bursts of 0-120 messages at random, each side is
 * progressed a random number of times in a row (so one holds the other's
 * receives while the other starves), and now and then both fall quiet
 * until every grant was asked back (a tick every 2 ms), as they do at the
 * end. Everything must arrive in order and intact both ways, the grants
 * must have grown and shrunk in both directions, and nothing may hang.
 * The quiet spells wait for the grants, not for a time: on a loaded
 * machine a fixed spell may see no tick at all.
 */
static void test_churn(struct st *t)
{
	struct be_engine_stats e0, e1;
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160];
	int round;

	memset(cend, 0, sizeof(cend));
	srand(42);
	t->cfg.credits = 32;
	t->cfg.credits_init = 4;
	t->cfg.srq_depth = 64;
	t->cfg.srq_max_depth = 512;
	t->cfg.keepalive_ms = 8;
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(t), &churn_srv_cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(be_sock_connect(ws[1], addr, &churn_cli_cbs, &cend[1], &cend[1].s));
	churn_burst(&cend[1], 1);
	ST_PUMP_WHILE(ws, 2, !cend[0].s || cend[0].next < 1);
	for (round = 0; round < 400; round++) {
		int side, k;

		for (side = 0; side < 2; side++)
			if (rand() % 3 == 0)
				churn_burst(&cend[side], (uint32_t)(rand() % 121));
		for (side = 0; side < 2; side++)
			for (k = rand() % 60; k > 0; k--)
				ASSERT_OK(be_worker_progress(ws[side]));
		if (rand() % 40 == 0)
			st_pump(ws, 2, churn_quiet, NULL); /* quiet: grants are asked back */
	}
	st_pump(ws, 2, churn_done, NULL);
	st_pump(ws, 2, churn_quiet, NULL);
	ASSERT_EQ(cend[0].bad, 0);
	ASSERT_EQ(cend[1].bad, 0);
	ASSERT_EQ(sends.ok, sends.done);
	st_engine_stats(cend[0].s, &e0);
	st_engine_stats(cend[1].s, &e1);
	fprintf(stderr,
		"churn: %u and %u messages; server grew %llu, revoked %llu; client grew %llu, "
		"revoked %llu\n",
		cend[1].sent, cend[0].sent, (unsigned long long)e0.credit_grows,
		(unsigned long long)e0.credit_revokes, (unsigned long long)e1.credit_grows,
		(unsigned long long)e1.credit_revokes);
	ASSERT_GE(e0.credit_grows, 1);
	ASSERT_GE(e1.credit_grows, 1);
	ASSERT_GE(e0.credit_revokes, 1);
	ASSERT_GE(e1.credit_revokes, 1);
	st_check_limits(&e0);
	st_check_limits(&e1);

	be_sock_close(cend[1].s);
	be_sock_close(cend[0].s);
	be_listener_close(l);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
	struct st t;

	st_init(&t, argc, argv);
	test_grow_shrink(&t);
	test_many_and_denied(&t);
	test_churn(&t);
	return 0;
}
