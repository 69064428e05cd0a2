/*
 * Check what happens when a worker has no receive buffers left for
 * another Engine (each Engine reserves its first grant, credits_init
 * buffers, of its worker's shared receive queue, which grows up to
 * srq_max_depth): here credits 4 and srq_max_depth 8, so two Engines per
 * worker.
 *
 * Connecting side: a worker with two Engines fails be_sock_connect() to a
 * third peer with -ENOSPC at once and creates nothing; its two Sockets
 * keep working.
 *
 * Accepting side: a server worker with two Engines rejects a third
 * connection; that client's Socket gets on_close(-ECONNREFUSED) and its
 * queued send completes exactly once, with an error. Once one of the
 * first two Engines has closed (its client's Socket closed, the Engine
 * idle past engine_idle_ms), its buffers are free again and a new
 * connection is accepted and carries messages.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define NSRV 3
#define NCLI 3

struct cli {
	struct be_sock *s;
	int got, bad, closed, reason;
};

static struct cli clis[NCLI + NSRV];
static struct st_sends sends;

static struct cli *cli_of(struct be_sock *s)
{
	int i;

	for (i = 0; i < NCLI + NSRV; i++)
		if (clis[i].s == s)
			return &clis[i];
	ASSERT(0);
	return NULL;
}

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct cli *c = cli_of(s);

	(void)user;
	if (len != 100 || !st_check(buf, len, (uint32_t)(c - clis)))
		c->bad++;
	c->got++;
	be_free(buf);
}

static void cli_close(struct be_sock *s, int reason, void *user)
{
	struct cli *c = cli_of(s);

	(void)user;
	c->closed++;
	c->reason = reason;
}

static const struct be_sock_cbs ccbs = { .on_recv = cli_recv, .on_close = cli_close };

static void cli_send(int i)
{
	ASSERT_OK(be_sock_send(clis[i].s, st_msg(100, (uint32_t)i), 100, st_send_cb, &sends));
}

struct wait {
	int idx;  /* client index */
	int got;  /* answers wanted */
};

static bool got_answers(void *arg)
{
	const struct wait *w = arg;

	return clis[w->idx].got >= w->got;
}

static bool third_refused(void *arg)
{
	(void)arg;
	return clis[0].got >= 1 && clis[1].got >= 1 && clis[2].closed && sends.done >= 3;
}

struct count {
	struct be_worker *srv, *cli;
};

/* The closed client's Engine is gone on both sides (the server's
 * reservation is returned when its Engine is reaped). */
static bool engine_gone(void *arg)
{
	const struct count *c = arg;

	return be_worker_engine_count(c->cli) == 0 && be_worker_engine_count(c->srv) == 1;
}

int main(int argc, char **argv)
{
	struct st_server srv[NSRV];
	struct be_listener *l[NSRV];
	struct be_worker *ws[NSRV + NCLI + 1], *all[NSRV + NCLI + 1];
	struct be_sock *extra;
	char addr[NSRV][160];
	struct be_ctx *ctx;
	struct st t;
	struct wait wt;
	struct count cnt;
	int i, nw = 0;

	st_init(&t, argc, argv);
	t.cfg.credits = 4;
	t.cfg.credits_init = 4;
	t.cfg.srq_depth = 8;
	t.cfg.srq_max_depth = 8;
	t.cfg.keepalive_ms = 100;
	t.cfg.engine_idle_ms = 50;
	memset(srv, 0, sizeof(srv));
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	for (i = 0; i < NSRV; i++) {
		srv[i].echo = true;
		ASSERT_OK(be_worker_create(ctx, &ws[i]));
		ASSERT_OK(be_listen(ws[i], st_listen_addr(&t), &st_server_cbs, &srv[i], &l[i]));
		ASSERT_OK(be_listener_addr(l[i], addr[i], sizeof(addr[i])));
	}
	for (i = 0; i < NCLI + 1; i++)
		ASSERT_OK(be_worker_create(ctx, &ws[NSRV + i]));
	for (i = 0; i < NSRV + NCLI + 1; i++)
		all[nw++] = ws[i];

	/* Accepting side: three clients (one worker each) to server 0, one
	 * after the other (so the third is the one refused). */
	for (i = 0; i < NCLI; i++) {
		ASSERT_OK(be_sock_connect(ws[NSRV + i], addr[0], &ccbs, NULL, &clis[i].s));
		cli_send(i);
		if (i < 2) {
			wt = (struct wait){ .idx = i, .got = 1 };
			st_pump(all, nw, got_answers, &wt);
		}
	}
	st_pump(all, nw, third_refused, NULL);
	ASSERT_EQ(clis[2].reason, -ECONNREFUSED);
	ASSERT_EQ(clis[2].got, 0);
	ASSERT_EQ(sends.ok, 2);
	ASSERT_EQ(sends.done, 3); /* the refused send completed once, with an error */
	ASSERT_EQ(srv[0].accepted, 2);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 2);
	be_sock_close(clis[2].s);
	clis[2].s = NULL;

	/* One of the two closes: its Engines go, and with them their
	 * receive buffers; a new client is then accepted. */
	be_sock_close(clis[0].s);
	clis[0].s = NULL;
	cnt = (struct count){ .srv = ws[0], .cli = ws[NSRV + 0] };
	st_pump(all, nw, engine_gone, &cnt);
	ASSERT_OK(be_sock_connect(ws[NSRV + 2], addr[0], &ccbs, NULL, &clis[2].s));
	cli_send(2);
	wt = (struct wait){ .idx = 2, .got = 1 };
	st_pump(all, nw, got_answers, &wt);
	ASSERT_EQ(srv[0].accepted, 3);

	/* Connecting side: the last worker connects to all three servers;
	 * the third connect has no buffers left on this worker. */
	for (i = 0; i < 2; i++) {
		ASSERT_OK(be_sock_connect(ws[NSRV + NCLI], addr[1 + i], &ccbs, NULL,
					  &clis[NCLI + i].s));
		cli_send(NCLI + i);
	}
	extra = NULL;
	ASSERT_EQ(be_sock_connect(ws[NSRV + NCLI], addr[0], &ccbs, NULL, &extra), -ENOSPC);
	ASSERT(extra == NULL);
	ASSERT_EQ(be_worker_engine_count(ws[NSRV + NCLI]), 2);
	for (i = 0; i < 2; i++) {
		wt = (struct wait){ .idx = NCLI + i, .got = 1 };
		st_pump(all, nw, got_answers, &wt);
	}

	for (i = 0; i < NCLI + NSRV; i++) {
		ASSERT_EQ(clis[i].bad, 0);
		if (clis[i].s)
			be_sock_close(clis[i].s);
	}
	for (i = 0; i < NSRV; i++) {
		int j;

		for (j = 0; j < srv[i].nsocks; j++)
			be_sock_close(srv[i].socks[j]);
		free(srv[i].socks);
		be_listener_close(l[i]);
	}
	st_destroy(all, nw);
	be_ctx_destroy(ctx);
	return 0;
}
