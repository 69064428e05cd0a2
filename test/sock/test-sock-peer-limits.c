/*
 * Check the limits per peer identity (docs/SECURITY.md, "Limits"): every
 * client here is this process, so one identity (its uid on shm, 127.0.0.1
 * on tcp), and the server allows it 2 Engines, 3 Sockets and 1 MiB lent
 * at once. Two clients, each on an Engine of its own, open two Sockets
 * each: three are accepted and one is refused; each accepted Socket sends
 * a small message and two of 768 KiB, which all arrive intact while the
 * server never lends more than 1 MiB (verbs, and the variant
 * peer-limits-req: tcp's and shm's large messages go one-way, without a
 * grant). A third client's Engine is refused
 * (-ECONNREFUSED, "limit_refused"); once one of the first two is gone, a
 * new client is served. Before, nothing bounded a peer across its
 * Engines: all four Sockets and the third Engine were accepted, and the
 * server lent up to 4.5 MiB at once.
 */
#include <errno.h>
#include <string.h>

#include "stest.h"

#define NCLI 2
#define NSOCK 2 /* per client */
#define BIG (768u << 10)

static struct st_server srv;
static int closed[NCLI * NSOCK + 1], reason[NCLI * NSOCK + 1];

static void cli_close(struct be_sock *s, int why, void *user)
{
	int i = (int)(intptr_t)user;

	closed[i]++;
	reason[i] = why;
}

static const struct be_sock_cbs cli_cbs = { .on_close = cli_close };

static int nclosed(void)
{
	int i, n = 0;

	for (i = 0; i < NCLI * NSOCK; i++)
		n += closed[i];
	return n;
}

/* Every Socket accepted or refused, and what the accepted ones sent in. */
static bool sockets_settled(void *arg)
{
	const int *per = arg;

	return srv.accepted + nclosed() == NCLI * NSOCK && srv.recvd == srv.accepted * *per;
}

static bool third_refused(void *arg)
{
	return closed[NCLI * NSOCK] > 0;
}

static bool one_engine(void *arg)
{
	struct be_worker *w = arg;

	return be_worker_engine_count(w) == 1;
}

int main(int argc, char **argv)
{
	struct be_worker *ws[2 + NCLI];
	struct be_sock *c[NCLI * NSOCK], *third;
	struct st_sends sends = { 0 };
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160], json[16384];
	bool big;
	int i, k, per;
	struct st t;

	st_init(&t, argc, argv);
	/* WriteRequests: verbs, and the variant peer-limits-req (--oneway 0). */
	big = !t.cfg.oneway || !strcmp(t.transport, "verbs");
	t.cfg.max_peer_engines = 2;
	t.cfg.max_peer_sockets = 3;
	t.cfg.max_peer_grant_bytes = 1u << 20;
	t.cfg.max_worker_grant_bytes = 0; /* only the identity's bound */
	t.cfg.nomem_backoff_max_us = 10000;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	for (i = 0; i < 2 + NCLI; i++)
		ASSERT_OK(be_worker_create(ctx, &ws[i]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &st_server_cbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));

	/* Two Engines of one identity, four Sockets: one is refused. */
	for (i = 0; i < NCLI * NSOCK; i++) {
		ASSERT_OK(be_sock_connect(ws[1 + i / NSOCK], addr, &cli_cbs, (void *)(intptr_t)i,
					  &c[i]));
		ASSERT_OK(be_sock_send(c[i], st_msg(64, 5), 64, st_send_cb, &sends));
		for (k = 0; big && k < 2; k++)
			ASSERT_OK(be_sock_send(c[i], st_msg(BIG, 99), BIG, st_send_cb, &sends));
	}
	per = big ? 3 : 1;
	st_pump(ws, 2 + NCLI, sockets_settled, &per);
	st_pump_ms(ws, 2 + NCLI, 50);
	ASSERT_EQ(srv.accepted, 3);
	ASSERT_EQ(srv.recvd, 3 * per);
	ASSERT_EQ(nclosed(), 1);
	for (i = 0; i < NCLI * NSOCK; i++)
		if (closed[i])
			ASSERT_EQ(reason[i], -ECONNREFUSED);
	ASSERT_GT(be_worker_stats_json(ws[0], json, sizeof(json)), 0);
	if (big) {
		ASSERT_LE(st_json_num(json, "grant_bytes_max"), 1 << 20);
		ASSERT_GE(st_json_num(json, "grant_bytes_max"), BIG);
		ASSERT_EQ(st_json_num(json, "grant_bytes"), 0);
	}

	/* A third Engine of the identity is refused. */
	ASSERT_OK(be_sock_connect(ws[1 + NCLI], addr, &cli_cbs, (void *)(intptr_t)(NCLI * NSOCK),
				  &third));
	st_pump(ws, 2 + NCLI, third_refused, NULL);
	ASSERT_EQ(reason[NCLI * NSOCK], -ECONNREFUSED);
	ASSERT_GT(be_worker_stats_json(ws[0], json, sizeof(json)), 0);
	ASSERT_EQ(st_json_num(json, "limit_refused"), 1);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 2);
	be_sock_close(third);

	/* Once the first client is gone, a new one is served. */
	for (i = 0; i < NSOCK; i++)
		be_sock_close(c[i]);
	while (be_worker_shutdown(ws[1], 0) == -ETIMEDOUT)
		ASSERT(be_worker_progress(ws[0]) >= 0);
	st_pump(ws, 1, one_engine, ws[0]);
	srv.echo = true;
	ASSERT_EQ(st_try_client(&t.cfg, ws[0], addr), 0);

	for (i = NSOCK; i < NCLI * NSOCK; i++)
		be_sock_close(c[i]);
	be_listener_close(l);
	for (i = 0; i < srv.nsocks; i++)
		be_sock_close(srv.socks[i]);
	st_destroy(ws, 2 + NCLI);
	ASSERT_OK(be_ctx_destroy(ctx));
	return 0;
}
