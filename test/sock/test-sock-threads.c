/*
 * Check the threaded model: both workers run on library threads
 * (be_worker_start); the main thread reaches the client worker only
 * through be_worker_call(), connects, sends, and waits for echoes
 * counted by the client's callbacks; closing and stopping are clean.
 * Run under ThreadSanitizer (label threads).
 */
#include <stdatomic.h>
#include <unistd.h>

#include "stest.h"
#include "util/common.h"

#define NMSG 2000

static atomic_int echoed, sent_ok;
static struct be_sock *cs;
static char addr[160];
static struct st_server srv;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	if (st_check(buf, len, 7))
		atomic_fetch_add(&echoed, 1);
	be_free(buf);
}

static void cli_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	if (status == 0)
		atomic_fetch_add(&sent_ok, 1);
	be_free(buf);
}

static void do_connect(struct be_worker *w, void *arg)
{
	static const struct be_sock_cbs cbs = { .on_recv = cli_recv };

	ASSERT_OK(be_sock_connect(w, addr, &cbs, NULL, &cs));
}

static void do_send(struct be_worker *w, void *arg)
{
	size_t len = (size_t)(uintptr_t)arg;

	ASSERT_OK(be_sock_send(cs, st_msg(len, 7), len, cli_sent, NULL));
}

static void do_close(struct be_worker *w, void *arg)
{
	be_sock_close(cs);
}

static void wait_for(atomic_int *v, int n)
{
	uint64_t start = be__now_ns();

	while (atomic_load(v) < n) {
		usleep(1000);
		if (be__now_ns() - start > 60000000000ull)
			TEST_FAIL("hang: %d of %d", atomic_load(v), n);
	}
}



int main(int argc, char **argv)
{
	struct be_worker *ws, *wc;
	struct be_listener *l;
	struct be_ctx *ctx;
	struct st t;
	int i;

	st_init(&t, argc, argv);
	t.cfg.spin_us = 20;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws));
	ASSERT_OK(be_worker_create(ctx, &wc));
	srv.echo = true;
	ASSERT_OK(be_listen(ws, st_listen_addr(&t), &st_server_cbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(be_worker_start(ws));
	ASSERT_EQ(be_worker_start(ws), -EALREADY);
	ASSERT_OK(be_worker_start(wc));
	ASSERT_OK(be_worker_call(wc, do_connect, NULL));
	for (i = 0; i < NMSG; i++)
		ASSERT_OK(be_worker_call(wc, do_send,
					 (void *)(uintptr_t)(i % 100 == 0 ? 300000 : i % 1000)));
	wait_for(&echoed, NMSG);
	wait_for(&sent_ok, NMSG);
	ASSERT_OK(be_worker_call(wc, do_close, NULL));
	ASSERT_OK(be_worker_stop(wc));
	ASSERT_OK(be_worker_stop(ws));
	ASSERT_EQ(be_worker_stop(ws), -EINVAL);
	ASSERT_EQ(srv.recvd, NMSG);
	st_server_close(&srv, l);
	{
		struct be_worker *both[2] = { ws, wc };

		st_destroy(both, 2);
	}
	be_ctx_destroy(ctx);
	return 0;
}
