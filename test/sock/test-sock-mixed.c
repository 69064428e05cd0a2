/*
 * Check the mixed window: NSTREAM sockets stream large messages while
 * socket B of the same Engine keeps a small ping-pong going from before
 * the first fragment to after the last, so every fragment goes beside
 * small messages. One scheduler pass gives each stream a fragment, more
 * than the mixed window (on tcp and shm: 4 fragments) holds: the streams
 * must be held back by it (mixed stalls), and the Engine's peak bytes in
 * flight, over the whole run, must stay within it (verbs has no mixed
 * window: there the send window is the bound). All data arrives intact.
 * Counters, not timing.
 */
#include <string.h>

#include "stest.h"

#define NSTREAM 8
#define NBIG (2 * NSTREAM)
#define BIG (4u << 20)
#define SMALL 48

static struct be_sock *ca[NSTREAM], *cb;
static struct st_sends sends;
static struct st_server srv;
static int big_ok, big_bad, pongs, pings;
static bool stop;

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	if (len == BIG) {
		if (st_check(buf, len, 7))
			big_ok++;
		else
			big_bad++;
		be_free(buf);
		return;
	}
	ASSERT_OK(be_sock_send(s, buf, len, st_send_cb, &sends)); /* echo */
}

static void ping(void)
{
	pings++;
	ASSERT_OK(be_sock_send(cb, st_msg(SMALL, (uint32_t)pings), SMALL, st_send_cb, &sends));
}

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	ASSERT_EQ(len, SMALL);
	ASSERT(st_check(buf, len, (uint32_t)pings));
	be_free(buf);
	pongs++;
	if (!stop)
		ping();
}

static bool first_pong(void *arg)
{
	return pongs > 0;
}

static bool bigs_done(void *arg)
{
	return big_ok + big_bad == NBIG;
}

static bool quiet(void *arg)
{
	return pongs == pings && sends.done == NBIG + 2 * pings;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs scbs = st_server_cbs, ccbs = { .on_recv = cli_recv };
	struct be_engine_stats es;
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_ctx *ctx;
	uint64_t limit;
	char addr[160];
	struct st t;
	int i;

	st_init(&t, argc, argv);
	scbs.on_recv = srv_recv;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &scbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	for (i = 0; i < NSTREAM; i++)
		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &ca[i]));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &cb));
	/* The ping-pong runs first, so the stream is never alone. */
	ping();
	st_pump(ws, 2, first_pong, NULL);
	for (i = 0; i < NBIG; i++)
		ASSERT_OK(be_sock_send(ca[i % NSTREAM], st_msg(BIG, 7), BIG, st_send_cb, &sends));
	st_pump(ws, 2, bigs_done, NULL);
	stop = true;
	st_pump(ws, 2, quiet, NULL);
	ASSERT_EQ(big_bad, 0);
	ASSERT_EQ(sends.ok, sends.done);

	st_engine_stats(cb, &es);
	st_check_limits(&es);
	ASSERT_UEQ(es.large_sent, NBIG);
	limit = es.mixed_window ? es.mixed_window : es.send_window;
	ASSERT_LE(es.max_bytes_in_flight, limit);
	ASSERT_GT(es.max_mixed_in_flight, 0);
	ASSERT_LE(es.max_mixed_in_flight, limit);
	if (strcmp(t.transport, "verbs") != 0) {
		ASSERT_UEQ(es.mixed_window, 4ull * es.frag_size);
		ASSERT_LT(es.mixed_window, es.send_window);
		ASSERT_GT(es.mixed_stalls, 0);
	}
	fprintf(stderr, "%s: %d round trips beside %d x %u B; peak in flight %llu (mixed window "
		"%llu, send window %llu), %llu mixed stalls\n", t.transport, pongs, NBIG, BIG,
		(unsigned long long)es.max_bytes_in_flight, (unsigned long long)es.mixed_window,
		(unsigned long long)es.send_window, (unsigned long long)es.mixed_stalls);

	for (i = 0; i < NSTREAM; i++)
		be_sock_close(ca[i]);
	be_sock_close(cb);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
