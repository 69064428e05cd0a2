/*
 * Check that a socket whose receiver holds its messages back does not
 * stall the other sockets of its Engine, and that its sender stops at the
 * socket receive window instead of filling the receiver: socket A sends a
 * large message the receiver has no memory for (answered "no memory",
 * retried with backoff) and eager messages behind it, socket B of the
 * same Engine eager messages only. Every message of B arrives while A's
 * large one cannot; none of A's eager messages leaves its sender while
 * the receiver holds the large one (it alone exceeds the window), and
 * once memory is back A's messages all arrive, intact and in order.
 *
 * Not on tcp: there a large message goes one-way, and a receiver out of
 * memory for it stops reading the whole connection (docs/PROTOCOL.md,
 * section 4), so no socket goes on.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define BIG (16u << 20)
#define SMALL 4000u
#define N 40

/* What the server saw of one client socket. */
struct seen {
	int got;      /* messages after the first */
	int bad;      /* out of order or corrupt */
	uint32_t seed0;
};

static struct seen seen_a = { .seed0 = 1000 }, seen_b = { .seed0 = 2000 };

/* The first message names the socket (length 11: A, 22: B); then A gets
 * BIG (seed 1000) and N small ones (1001..), B N small ones (2001..). */
static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct seen *x = be_sock_user(s);

	if (!x) {
		be_sock_set_user(s, len == 11 ? &seen_a : &seen_b);
	} else {
		uint32_t seed = x->seed0 + (uint32_t)x->got;
		size_t want = x == &seen_a && x->got == 0 ? BIG : SMALL;

		if (x == &seen_b)
			seed++;
		if (len != want || !st_check(buf, len, seed))
			x->bad++;
		x->got++;
	}
	be_free(buf);
}

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	struct be_sock **socks = user;

	socks[socks[0] ? 1 : 0] = s;
	be_sock_set_user(s, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct be_sock_cbs cbs = { .on_recv = srv_recv, .on_accept = srv_accept };
	struct be_sock *ssock[2] = { NULL, NULL }, *a, *b;
	struct st_sends sa = { 0 }, sb = { 0 }, warm = { 0 };
	struct be_worker *ws[2];
	struct be_alloc_config ac = { 0 };
	struct be_alloc_stats as;
	struct be_engine_stats es;
	struct be_listener *l;
	struct be_ctx *ctx;
	void *ma[N], *mb[N], *big;
	char addr[160];
	struct st t;
	int i;

	st_init(&t, argc, argv);
	if (!strcmp(t.transport, "tcp")) {
		fprintf(stderr, "tcp: large messages go one-way, see the comment: skipped\n");
		return 77;
	}
	t.cfg.oneway = 0; /* shm: the WriteRequest path, as on verbs */
	t.cfg.sock_window = 64u << 10;
	t.cfg.nomem_backoff_max_us = 20000;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &cbs, ssock, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(be_sock_connect(ws[1], addr, NULL, NULL, &a));
	ASSERT_OK(be_sock_connect(ws[1], addr, NULL, NULL, &b));
	ASSERT_OK(be_sock_send(a, st_msg(11, 0), 11, st_send_cb, &warm));
	ASSERT_OK(be_sock_send(b, st_msg(22, 0), 22, st_send_cb, &warm));
	ST_PUMP_WHILE(ws, 2, warm.done < 2 || !ssock[1] || !be_sock_user(ssock[0]) ||
				     !be_sock_user(ssock[1]));
	ASSERT_EQ(warm.ok, 2);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1); /* one Engine carries both */

	/* Every buffer the client sends is made now; then bemalloc may map
	 * one more block (the receiver's copies of small messages), never
	 * the receiver's BIG buffer. */
	big = st_msg(BIG, 1000);
	for (i = 0; i < N; i++) {
		ma[i] = st_msg(SMALL, 1001 + (uint32_t)i);
		mb[i] = st_msg(SMALL, 2001 + (uint32_t)i);
	}
	be_alloc_trim();
	be_alloc_stats(&as);
	ac.limit_bytes = as.mapped_bytes + (4u << 20);
	ASSERT_OK(be_alloc_configure(&ac));

	ASSERT_OK(be_sock_send(a, big, BIG, st_send_cb, &sa));
	for (i = 0; i < N; i++) {
		ASSERT_OK(be_sock_send(a, ma[i], SMALL, st_send_cb, &sa));
		ASSERT_OK(be_sock_send(b, mb[i], SMALL, st_send_cb, &sb));
	}
	/* B goes on while A's large message waits for memory. */
	ST_PUMP_WHILE(ws, 2, seen_b.got < N);
	ASSERT_EQ(seen_b.bad, 0);
	ASSERT_EQ(sb.ok, N);
	ASSERT_OK(be_sock_engine_stats(ssock[0], &es));
	ASSERT_GE(es.nomem_sent, 1);
	ASSERT_EQ(seen_a.got, 0);
	/* BIG alone is more than A's window: nothing of A went behind it. */
	ASSERT_EQ(sa.done, 0);

	/* Memory back: A's messages all arrive, in order. */
	ac.limit_bytes = 0;
	ASSERT_OK(be_alloc_configure(&ac));
	ST_PUMP_WHILE(ws, 2, seen_a.got < N + 1 || sa.done < N + 1);
	ASSERT_EQ(seen_a.bad, 0);
	ASSERT_EQ(sa.ok, N + 1);

	be_sock_close(a);
	be_sock_close(b);
	for (i = 0; i < 2; i++)
		be_sock_close(ssock[i]);
	be_listener_close(l);
	st_destroy(ws, 2);
	ASSERT_OK(be_ctx_destroy(ctx));
	return 0;
}
