/*
 * Check large messages without a WriteRequest round trip: on tcp and shm
 * every message above eager_max goes one-way (the receiver's transport
 * allocates its buffer as the data arrives), on verbs through
 * WRITE_REQ / WRITE_RESP. Messages of many lengths (one
 * fragment, many fragments, a PS reply of 64 KiB + 32 B) on several
 * sockets of one Engine, both directions at once, arrive intact and in
 * order, eager ones between them keeping their place; more than
 * BE_ONEWAY_SLOTS (64) one-way messages in flight at once wait for
 * slots and none is lost; the counters say which path they took; a
 * socket closed while one-way data is still arriving loses nothing of
 * the others and leaks nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define NSOCK 4
#define NMSG 40

static size_t len_of(int i)
{
	static const size_t lens[] = { 8193, 65536 + 32, 100, 300000, 1 << 20, 16384, 5 };

	return lens[i % 7]; /* NMSG % 7 == 5: the last one is large too */
}

struct end {
	struct be_sock *s[NSOCK];
	int got[NSOCK], bad;
};

static struct end cli, srvend;
static struct st_sends sends;

static void on_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct end *e = be_sock_user(s);
	int k;

	for (k = 0; k < NSOCK; k++)
		if (e->s[k] == s)
			break;
	ASSERT_LT(k, NSOCK);
	if (len != len_of(e->got[k]) || !st_check(buf, len, (uint32_t)(k * 1000 + e->got[k])))
		e->bad++;
	e->got[k]++;
	be_free(buf);
}

static int on_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	int k;

	for (k = 0; k < NSOCK && srvend.s[k]; k++)
		;
	ASSERT_LT(k, NSOCK);
	srvend.s[k] = s;
	be_sock_set_user(s, &srvend);
	return 0;
}

static void on_close(struct be_sock *s, int reason, void *user)
{
}

static const struct be_sock_cbs cbs = {
	.on_recv = on_recv, .on_accept = on_accept, .on_close = on_close,
};

static bool all_done(void *arg)
{
	int k, want = *(int *)arg;

	for (k = 0; k < NSOCK; k++)
		if (cli.got[k] < want || srvend.got[k] < want)
			return false;
	return sends.done == 2 * NSOCK * want;
}

static bool opened(void *arg)
{
	(void)arg;
	return srvend.s[NSOCK - 1] && srvend.got[NSOCK - 1] >= 1;
}

/* The sockets left open got their last large message. */
static bool rest_done(void *arg)
{
	int k;

	(void)arg;
	for (k = 1; k < NSOCK; k++)
		if (srvend.got[k] < NMSG + 1)
			return false;
	return true;
}

int main(int argc, char **argv)
{
	struct be_engine_stats ec, es;
	struct be_listener *l;
	struct be_worker *ws[2];
	struct be_ctx *ctx;
	uint64_t nlarge = 0;
	struct st t;
	char addr[160];
	int i, k, want = NMSG;
	const char *mw;
	bool oneway;

	st_init(&t, argc, argv);
	oneway = strcmp(t.transport, "verbs") != 0;
	t.cfg.max_reqs = 64; /* many large messages per socket at once */
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	for (k = 0; k < NSOCK; k++) {
		ASSERT_OK(be_sock_connect(ws[1], addr, &cbs, &cli, &cli.s[k]));
		/* Open it on the server too before both sides send. */
		ASSERT_OK(be_sock_send(cli.s[k], st_msg(len_of(0), (uint32_t)(k * 1000)), len_of(0),
				       st_send_cb, &sends));
	}
	st_pump(ws, 2, opened, NULL);
	/* Both directions at once, every socket, all queued before any
	 * progress: far more than 64 large messages in flight. */
	for (i = 1; i < NMSG; i++)
		for (k = 0; k < NSOCK; k++) {
			ASSERT_OK(be_sock_send(cli.s[k], st_msg(len_of(i), (uint32_t)(k * 1000 + i)),
					       len_of(i), st_send_cb, &sends));
			nlarge += len_of(i) > t.cfg.eager_max;
		}
	for (i = 0; i < NMSG; i++)
		for (k = 0; k < NSOCK; k++)
			ASSERT_OK(be_sock_send(srvend.s[k], st_msg(len_of(i), (uint32_t)(k * 1000 + i)),
					       len_of(i), st_send_cb, &sends));
	st_pump(ws, 2, all_done, &want);
	ASSERT_EQ(cli.bad, 0);
	ASSERT_EQ(srvend.bad, 0);
	ASSERT_EQ(sends.ok, sends.done);
	st_engine_stats(cli.s[0], &ec);
	st_engine_stats(srvend.s[0], &es);
	nlarge += NSOCK; /* the first message of each socket */
	ASSERT_UEQ(ec.large_sent, nlarge);
	ASSERT_UEQ(es.large_recv, nlarge);
	ASSERT_UEQ(ec.oneway_sent, oneway ? nlarge : 0);
	ASSERT_UEQ(es.oneway_sent, oneway ? nlarge : 0);
	/* On verbs with memory windows a conn has 64 (xport/verbs/data.c):
	 * grants beyond them are answered "no memory" and asked again, and
	 * every message still arrived (above). */
	mw = getenv("BE_VERBS_MW");
	if (!strcmp(t.transport, "verbs") && !(mw && !strcmp(mw, "0")))
		fprintf(stderr, "verbs windows: %llu \"no memory\" answers\n",
			(unsigned long long)ec.nomem_recv);
	else
		ASSERT_UEQ(ec.nomem_recv, 0);
	st_check_limits(&ec);
	st_check_limits(&es);

	/* Close a socket while large messages to it are on the way: the
	 * others' still arrive whole. */
	for (k = 0; k < NSOCK; k++)
		ASSERT_OK(be_sock_send(cli.s[k], st_msg(len_of(NMSG), (uint32_t)(k * 1000 + NMSG)),
				       len_of(NMSG), st_send_cb, &sends));
	be_sock_close(srvend.s[0]);
	st_pump(ws, 2, rest_done, NULL);
	ASSERT_EQ(srvend.bad, 0);
	for (k = 1; k < NSOCK; k++)
		be_sock_close(cli.s[k]);
	be_sock_close(cli.s[0]);
	st_pump_ms(ws, 2, 50);
	be_listener_close(l);
	be_worker_destroy(ws[1]);
	be_worker_destroy(ws[0]);
	be_ctx_destroy(ctx);
	return 0;
}
