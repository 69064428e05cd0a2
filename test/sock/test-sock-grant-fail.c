/*
 * Check that a grant the transport cannot key (its grant op fails: on
 * verbs, no memory window left) is answered "no memory", counted
 * (grant_key_short, within nomem_sent) and asked again by the peer
 * after its backoff, never given the block's key nor dropped: with the
 * first three grants of the server failing (injected), a large message
 * still arrives whole and its send completes. On tcp the message is
 * larger than the one-way budget, so that it takes the WriteRequest
 * path too. Skipped where the transport has no grant op
 * (verbs with BE_VERBS_MW=0).
 */
#include <errno.h>

#include "stest.h"
#include "xport/xport.h"

#define NFAIL 3
#define BIG (4u << 20)

static int fails_left = NFAIL;
static struct st_fx f;

static bool both_sent(void *arg)
{
	return ((struct st_sends *)arg)->done == 2;
}

static int grant(struct be_xconn *xc, void *addr, size_t len, uint32_t *rkey)
{
	if (fails_left > 0) {
		fails_left--;
		return -ENOMEM;
	}
	return st_ops_real()->grant(xc, addr, len, rkey);
}

int main(int argc, char **argv)
{
	struct be_engine_stats es;
	struct be_xport_ops *ops;
	struct st_sends sends = { 0 };
	struct be_sock *c;

	st_fx_init(&f, argc, argv);
	f.t.cfg.max_grant_bytes = 4 * BIG; /* a one-way budget (tcp) of BIG / 2 */
	f.t.cfg.nomem_backoff_us = 100;
	st_fx_pair(&f);
	ops = st_ops_override(&f.t, f.ctx);
	if (!ops->grant) {
		fprintf(stderr, "%s has no grant op: skipped\n", f.t.transport);
		st_fx_unpair(&f);
		return 77;
	}
	ops->grant = grant;

	c = st_fx_connect(&f, NULL, NULL);
	st_send_recvd(f.ws, c, 64, 1, &sends, &f.srv, 1);
	st_send_recvd(f.ws, c, BIG, 2, &sends, &f.srv, 2);
	ASSERT_EQ(fails_left, 0);
	ASSERT_UEQ(f.srv.bytes, 64 + BIG);
	st_pump(f.ws, 2, both_sent, &sends);
	ASSERT_EQ(sends.ok, 2);

	ASSERT_EQ(f.srv.nsocks, 1);
	ASSERT_OK(be_sock_engine_stats(f.srv.socks[0], &es));
	ASSERT_UEQ(es.grant_key_short, NFAIL);
	ASSERT(es.nomem_sent >= NFAIL);
	ASSERT_OK(be_sock_engine_stats(c, &es));
	ASSERT(es.nomem_recv >= NFAIL);
	ASSERT_UEQ(es.oneway_sent, 0);

	be_sock_close(c);
	st_fx_unpair(&f);
	return 0;
}
