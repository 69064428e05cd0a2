/*
 * Check that a socket asks for its next grant while a granted large
 * message still streams (tx.c, tx_req_ahead()): NMSG large messages
 * queued at once on one socket, more than max_reqs, must send some of
 * their WriteRequests ahead (the Engine counter reqs_ahead), and all
 * arrive.
 *
 * Twice: with the default configuration, and with a max_grant_bytes that
 * makes the receiver's one-way budget (max_grant_bytes / 8, oneway.c)
 * smaller than one message. On tcp and shm, where large messages go
 * one-way, the first run asks for no grant at all (reqs_ahead 0, every
 * message one-way); in the second no message fits the budget, so every
 * one takes the WriteRequest path and must ask ahead like on verbs. That
 * bound also lends fewer messages at once (3) than max_reqs asks for
 * (4): one is answered "no memory" while later ones may not take the
 * memory it waits for (the socket stood still: a hang here). Counters,
 * not timing.
 */
#include <string.h>

#include "stest.h"

#define NMSG 24
#define BIG ((2u << 20) + 100)
#define SMALL_GRANT (8ull << 20) /* one-way budget 1 MiB < BIG */

static struct st_sends sends;

static bool all_sent(void *arg)
{
	const struct st_server *srv = arg;

	return srv->recvd == NMSG && sends.done == NMSG;
}

/* NMSG messages of BIG bytes from a client to a server of a context made
 * with @t's configuration and @max_grant_bytes; the client Engine's
 * counters in @es. */
static void run(struct st *t, uint64_t max_grant_bytes, struct be_engine_stats *es)
{
	struct be_sock_cbs ccbs = { 0 };
	struct st_server srv = { 0 };
	struct be_worker *ws[2];
	struct be_listener *l;
	struct be_ctx *ctx;
	struct be_sock *s;
	char addr[160];
	int i;

	memset(&sends, 0, sizeof(sends));
	t->cfg.max_grant_bytes = max_grant_bytes;
	st_pair(t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &s));
	/* Open the socket and let the one-way budget arrive first. */
	st_send_recvd(ws, s, 100, 1, &sends, &srv, 1);
	srv.recvd = 0;
	memset(&sends, 0, sizeof(sends));
	for (i = 0; i < NMSG; i++)
		ASSERT_OK(be_sock_send(s, st_msg(BIG, (uint32_t)i), BIG, st_send_cb, &sends));
	st_pump(ws, 2, all_sent, &srv);
	ASSERT_EQ(sends.ok, NMSG);
	ASSERT_UEQ(srv.bytes, 100 + (uint64_t)NMSG * BIG);
	st_engine_stats(s, es);
	st_check_limits(es);
	ASSERT_UEQ(es->large_sent, NMSG);
	fprintf(stderr, "%s, max_grant_bytes %llu: %llu one-way, %llu WriteRequests ahead\n",
		t->transport, (unsigned long long)max_grant_bytes,
		(unsigned long long)es->oneway_sent, (unsigned long long)es->reqs_ahead);
	be_sock_close(s);
	st_unpair(ctx, ws, &srv, l);
}

int main(int argc, char **argv)
{
	struct be_engine_stats es;
	struct st t;
	bool oneway;

	st_init(&t, argc, argv);
	oneway = t.cfg.oneway && strcmp(t.transport, "verbs") != 0;
	ASSERT_LT(t.cfg.max_reqs, NMSG);

	run(&t, t.cfg.max_grant_bytes, &es);
	ASSERT(BIG <= t.cfg.max_grant_bytes / 8); /* fits the default budget */
	if (oneway) {
		ASSERT_UEQ(es.oneway_sent, NMSG);
		ASSERT_UEQ(es.reqs_ahead, 0);
	} else {
		ASSERT_UEQ(es.oneway_sent, 0);
		ASSERT_GT(es.reqs_ahead, 0);
	}

	run(&t, SMALL_GRANT, &es);
	ASSERT_UEQ(es.oneway_sent, 0);
	ASSERT_GT(es.reqs_ahead, 0);
	return 0;
}
