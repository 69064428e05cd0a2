/*
 * Check that a receiver grants a socket's large messages in order. With
 * at most 8 MiB lent to the Engine (max_grant_bytes): socket 1 sends C
 * (4 MiB), then socket 2 sends A (6 MiB) and B (3 MiB), all at once. C
 * is granted; A does not fit beside it and is answered "no memory"; B
 * would fit beside C, but granted first it would hold 3 MiB until A,
 * which it must follow, is delivered, and A (6 MiB) could then never fit
 * beside it: a standstill (the hang guard fails the test). In order, B
 * waits for A: C, then A, then B arrive, each intact. On tcp too: its
 * one-way path takes messages up to max_grant_bytes / 8, these ask.
 */
#include <string.h>

#include "stest.h"

#define MIB (1u << 20)

static struct {
	struct be_sock *socks[2];
	int n;
	size_t got[2][2];
	int ngot[2];
	int bad;
} srv;

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	(void)l;
	(void)user;
	ASSERT_LT(srv.n, 2);
	be_sock_set_user(s, &srv.socks[srv.n]);
	srv.socks[srv.n++] = s;
	return 0;
}

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int i = (int)((struct be_sock **)user - srv.socks);

	(void)s;
	ASSERT_LT(srv.ngot[i], 2);
	if (!st_check(buf, len, (uint32_t)len))
		srv.bad++;
	srv.got[i][srv.ngot[i]++] = len;
	be_free(buf);
}

static const struct be_sock_cbs srv_cbs = { .on_accept = srv_accept, .on_recv = srv_recv };

int main(int argc, char **argv)
{
	static const struct be_sock_cbs cli_cbs = { 0 };
	struct be_sock *c[2];
	struct be_worker *ws[2];
	struct be_listener *l;
	struct st_sends sends = { 0 };
	struct be_ctx *ctx;
	char addr[160];
	struct st t;
	int i;

	st_init(&t, argc, argv);
	t.cfg.max_grant_bytes = 8 * MIB;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &srv_cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	for (i = 0; i < 2; i++) {
		ASSERT_OK(be_sock_connect(ws[1], addr, &cli_cbs, NULL, &c[i]));
		/* Each socket open at the server before the test's traffic. */
		ASSERT_OK(be_sock_send(c[i], st_msg(8, 8), 8, st_send_cb, &sends));
	}
	ST_PUMP_WHILE(ws, 2, srv.ngot[0] + srv.ngot[1] < 2 || sends.done < 2);
	memset(&srv.ngot, 0, sizeof(srv.ngot));
	ASSERT_EQ(sends.ok, 2);

	ASSERT_OK(be_sock_send(c[0], st_msg(4 * MIB, 4 * MIB), 4 * MIB, st_send_cb, &sends));
	ASSERT_OK(be_sock_send(c[1], st_msg(6 * MIB, 6 * MIB), 6 * MIB, st_send_cb, &sends));
	ASSERT_OK(be_sock_send(c[1], st_msg(3 * MIB, 3 * MIB), 3 * MIB, st_send_cb, &sends));
	ST_PUMP_WHILE(ws, 2, srv.ngot[0] < 1 || srv.ngot[1] < 2 || sends.done < 5);
	ASSERT_EQ(sends.ok, 5);
	ASSERT_EQ(srv.bad, 0);
	ASSERT_EQ(srv.got[0][0], 4 * MIB);
	ASSERT_EQ(srv.got[1][0], 6 * MIB);
	ASSERT_EQ(srv.got[1][1], 3 * MIB);

	for (i = 0; i < 2; i++)
		be_sock_close(c[i]);
	for (i = 0; i < srv.n; i++)
		be_sock_close(srv.socks[i]);
	be_listener_close(l);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
	return 0;
}
