/*
 * Check fragment scheduling: with scheduling on, a small message sent on
 * socket B after a 64 MiB message on socket A (same Engine) arrives
 * before the large one; with scheduling off (FIFO per Engine) it arrives
 * after it. Ordering of arrival, not timing.
 */
#include <string.h>

#include "stest.h"

static struct be_sock *ca, *cb;
static struct st_sends sends;
static int order[2], norder;
static struct st_server srv;

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	ASSERT_LT(norder, 2);
	order[norder++] = len > 100 ? 'A' : 'B';
	if (len > 100)
		ASSERT(st_check(buf, len, 1));
	be_free(buf);
}

static bool done(void *arg)
{
	return norder == 2 && sends.done == 2;
}

static int run(struct st *t, int sched)
{
	struct be_sock_cbs scbs = st_server_cbs, ccbs = { 0 };
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160];

	scbs.on_recv = srv_recv;
	memset(&srv, 0, sizeof(srv));
	memset(&sends, 0, sizeof(sends));
	norder = 0;
	t->cfg.frag_sched = sched;
	t->cfg.frag_size = 64 << 10;
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(t), &scbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &ca));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &cb));
	ASSERT_OK(be_sock_send(ca, st_msg(64u << 20, 1), 64u << 20, st_send_cb, &sends));
	ASSERT_OK(be_sock_send(cb, st_msg(10, 2), 10, st_send_cb, &sends));
	st_pump(ws, 2, done, NULL);
	ASSERT_EQ(sends.ok, 2);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 1);
	be_sock_close(ca);
	be_sock_close(cb);
	st_unpair(ctx, ws, &srv, l);
	return order[0];
}

int main(int argc, char **argv)
{
	struct st t;

	st_init(&t, argc, argv);
	ASSERT_EQ(run(&t, 1), 'B');
	ASSERT_EQ(run(&t, 0), 'A');
	return 0;
}
