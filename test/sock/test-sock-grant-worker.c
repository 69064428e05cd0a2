/*
 * Check that a worker bounds the bytes it lends to the large messages of
 * all its peers together (max_worker_grant_bytes, docs/SECURITY.md): three
 * clients, each on an Engine of its own, send four 768 KiB messages at
 * once to one server worker bounded at 1 MiB; the server never lends more
 * than 1 MiB at a time (one message: "no memory" holds the others back),
 * and every message arrives intact. Before, the bound was per Engine
 * only, so the peers together made the server lend up to 9 MiB here.
 * Not on tcp: its large messages go one-way (WRITE_ONEWAY, no grant).
 */
#include <string.h>

#include "stest.h"

#define NCLI 3
#define NMSG 4
#define MSG (768u << 10)

static int got, bad;

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	if (len != MSG || !st_check(buf, len, 99))
		bad++;
	got++;
	be_free(buf);
}

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	return 0;
}

static const struct be_sock_cbs srv_cbs = { .on_recv = srv_recv, .on_accept = srv_accept };

static bool all_in(void *arg)
{
	return got == NCLI * NMSG;
}

int main(int argc, char **argv)
{
	const struct be_sock_cbs ccbs = { 0 };
	struct be_worker *ws[1 + NCLI];
	struct be_sock *c[NCLI];
	struct st_sends sends = { 0 };
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160], json[16384];
	struct st t;
	int i, k;

	st_init(&t, argc, argv);
	if (strcmp(t.transport, "tcp") == 0)
		return 77;
	t.cfg.oneway = 0; /* shm: the WriteRequest path, as on verbs */
	t.cfg.max_worker_grant_bytes = 1u << 20;
	t.cfg.nomem_backoff_max_us = 10000;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	for (i = 0; i <= NCLI; i++)
		ASSERT_OK(be_worker_create(ctx, &ws[i]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &srv_cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	for (i = 0; i < NCLI; i++) {
		ASSERT_OK(be_sock_connect(ws[1 + i], addr, &ccbs, NULL, &c[i]));
		for (k = 0; k < NMSG; k++)
			ASSERT_OK(be_sock_send(c[i], st_msg(MSG, 99), MSG, st_send_cb, &sends));
	}
	st_pump(ws, 1 + NCLI, all_in, NULL);
	ASSERT_EQ(bad, 0);
	ASSERT_GT(be_worker_stats_json(ws[0], json, sizeof(json)), 0);
	ASSERT_LE(st_json_num(json, "grant_bytes_max"), 1 << 20);
	ASSERT_GE(st_json_num(json, "grant_bytes_max"), MSG);
	ASSERT_EQ(st_json_num(json, "grant_bytes"), 0);
	for (i = 0; i < NCLI; i++)
		be_sock_close(c[i]);
	be_listener_close(l);
	st_destroy(ws, 1 + NCLI);
	ASSERT_OK(be_ctx_destroy(ctx));
	return 0;
}
