/*
 * Check the receiver's allocation failure and recovery: the server runs
 * in a child process whose bemalloc limit is exhausted by ballast; a
 * large message is answered "no memory" (the sender backs off and
 * retries), or on tcp and shm, where large messages go one-way, its data
 * waits in the connection while the receiver retries the allocation with
 * backoff (the variant nomem-req turns one-way off); an eager message that cannot be copied out holds its receive
 * buffer (and everything after it) and is retried with backoff while the
 * sender runs out of credits; once the child frees its
 * ballast every message arrives intact and in order, none is lost, and
 * the counters show the backoffs on both sides.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fork.h"

#define NBALLAST 4096
#define BIG (8u << 20)

static const size_t sizes[] = { BIG, 100, 200, BIG, 3000 };
#define NMSG 5

/* ---- child ---- */

static struct be_sock *csock;
static int crecv, cbad, cclosed;
static bool oneway; /* large messages go one-way, no "no memory" answer */

static void child_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	if (crecv >= NMSG || len != sizes[crecv] || !st_check(buf, len, (uint32_t)crecv))
		cbad++;
	crecv++;
	be_free(buf);
	if (crecv == NMSG) {
		char *ok = be_alloc(1);

		ASSERT(ok);
		*ok = cbad ? 'x' : 'k';
		ASSERT_OK(be_sock_send(s, ok, 1, st_send_cb, calloc(1, sizeof(struct st_sends))));
	}
}

static void child_close(struct be_sock *s, int reason, void *user)
{
	cclosed++;
}

static int child_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	csock = s;
	return 0;
}

static bool child_nomem_seen(void *arg)
{
	struct be_engine_stats es;

	return csock && be_sock_engine_stats(csock, &es) == 0 &&
	       (oneway || es.nomem_sent >= 1) && es.alloc_backoffs >= 3;
}

static bool child_done(void *arg)
{
	return cclosed == 1;
}

static void child_body(struct st *t, int wfd)
{
	static const struct be_sock_cbs cbs = {
		.on_recv = child_recv, .on_close = child_close, .on_accept = child_accept,
	};
	struct be_alloc_config ac = { .limit_bytes = 96u << 20 };
	static void *ballast[NBALLAST];
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];
	int n = 0, i;

	ASSERT_OK(be_alloc_configure(&ac));
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_listen(w, st_listen_addr(t), &cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	/* Exhaust the limit: large pieces, then small ones. */
	while (n < NBALLAST && (ballast[n] = be_alloc(1u << 20)))
		n++;
	while (n < NBALLAST && (ballast[n] = be_alloc(1024)))
		n++;
	ASSERT_LT(n, NBALLAST);
	ASSERT_EQ(write(wfd, addr, strlen(addr)), (ssize_t)strlen(addr));
	close(wfd);
	st_pump(&w, 1, child_nomem_seen, NULL);
	ASSERT_EQ(crecv, 0); /* nothing could be received yet */
	for (i = 0; i < n; i++)
		be_free(ballast[i]);
	st_pump(&w, 1, child_done, NULL);
	ASSERT_EQ(crecv, NMSG);
	ASSERT_EQ(cbad, 0);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	_exit(0);
}

/* ---- parent ---- */

static char reply;
static struct st_sends sends;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	ASSERT_UEQ(len, 1);
	reply = *(char *)buf;
	be_free(buf);
}

static bool got_reply(void *arg)
{
	return reply && sends.done == NMSG;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs cbs = { .on_recv = cli_recv };
	struct be_engine_stats es;
	struct be_worker *w;
	struct be_ctx *ctx;
	struct be_sock *s;
	struct st_child c;
	struct st t;
	int i;

	st_init(&t, argc, argv);
	/* Not verbs, nor the variant nomem-req (--oneway 0). */
	oneway = t.cfg.oneway && strcmp(t.transport, "verbs") != 0;
	t.cfg.srq_depth = 64;
	t.cfg.nomem_backoff_us = 500;
	t.cfg.nomem_backoff_max_us = 20000;
	st_child_start(&t, &c, child_body);
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_sock_connect(w, c.addr, &cbs, NULL, &s));
	for (i = 0; i < NMSG; i++)
		ASSERT_OK(be_sock_send(s, st_msg(sizes[i], (uint32_t)i), sizes[i], st_send_cb,
				       &sends));
	st_pump(&w, 1, got_reply, NULL);
	ASSERT_EQ(reply, 'k');
	ASSERT_EQ(sends.ok, NMSG);
	st_engine_stats(s, &es);
	if (oneway) {
		ASSERT_EQ(es.oneway_sent, 2);
		ASSERT_EQ(es.nomem_recv, 0);
	} else {
		ASSERT_GE(es.nomem_recv, 1);
	}
	st_check_limits(&es);
	be_sock_close(s);
	/* Close cleanly while the child still answers, then wait for it. */
	ASSERT_OK(be_worker_shutdown(w, -1));
	st_child_wait(&c);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	return 0;
}
