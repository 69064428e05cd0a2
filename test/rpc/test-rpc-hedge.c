/*
 * Check hedged requests and ejection on two replicas, one fast and one
 * that answers after 300 ms: idempotent calls that reach the slow one
 * get a hedged copy after the hedge delay and complete from the fast
 * one (no call fails); the slow replica, overtaken again and again, is
 * ejected, probed, returns, and is ejected again; hedges and retries
 * stay within the budget; calls that are not idempotent are never
 * hedged; with the budget nearly empty, hedges are refused and counted.
 */
#include <string.h>

#include "rtest.h"

#define SVC 16u
#define M_WORK 1u
#define SLOW_MS 300

static struct rt_delayed held[4096];
static int nheld;
static struct be_worker *ws[3];
static struct be_rpc_chan *ch;
static int ndone, nfail, inflight, sent;
static uint32_t call_flags;

static void fast(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	rt_echo(req, buf, len, NULL);
}

static void slow(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	ASSERT_LT(nheld, 4096);
	held[nheld++] = (struct rt_delayed){ .req = req, .buf = buf, .len = len,
					     .due_ms = rt_ms() + SLOW_MS };
}

static void answer_due(void)
{
	rt_reply_due(held, &nheld, rt_ms(), NULL);
}

static void count_cb(int status, void *reply, size_t len, void *arg)
{
	if (status)
		nfail++;
	ndone++;
	inflight--;
	be_rpc_buf_free(reply);
}

struct goal {
	int calls;
	uint64_t ejections, returns, denied;
};

static bool reached(void *arg)
{
	struct goal *g = arg;
	struct be_rpc_chan_stats cs;
	struct be_rpc_call_opts o = { .flags = call_flags };

	answer_due();
	while (inflight < 8) {
		ASSERT_OK(be_rpc_call(ch, SVC, M_WORK, rt_req(64, 1), 64, &o, count_cb, NULL, NULL));
		inflight++;
		sent++;
	}
	be_rpc_chan_stats(ch, &cs);
	return ndone >= g->calls && cs.c.ejections >= g->ejections && cs.c.returns >= g->returns &&
	       cs.c.budget_denied >= g->denied;
}

static void drain(void)
{
	while (inflight || nheld) {
		int i;

		answer_due();
		for (i = 0; i < 3; i++)
			be_worker_progress(ws[i]);
	}
}

int main(int argc, char **argv)
{
	struct rt t;
	struct rt_server sf, ss;
	struct rt_client cli;
	struct be_rpc_record recs[2];
	struct be_rpc_chan_stats cs, before;
	struct be_rpc_config cfg;
	struct be_ctx *ctx;
	struct goal g;
	uint64_t t0;
	int i;

	rt_init(&t, argc, argv);
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	rt_server_start(&t, &sf, ctx);
	rt_server_start(&t, &ss, ctx);
	ASSERT_OK(be_rpc_register(sf.rpc, SVC, M_WORK, fast, NULL, 0));
	ASSERT_OK(be_rpc_register(ss.rpc, SVC, M_WORK, slow, NULL, 0));
	rt_client_start(&t, &cli, ctx);
	ws[0] = sf.w;
	ws[1] = ss.w;
	ws[2] = cli.w;
	memset(recs, 0, sizeof(recs));
	for (i = 0; i < 2; i++) {
		snprintf(recs[i].replica, sizeof(recs[i].replica), "%s", i ? "slow" : "fast");
		recs[i].shard_hi = UINT32_MAX;
		recs[i].naddrs = 1;
		snprintf(recs[i].addrs[0], sizeof(recs[i].addrs[0]), "%s", i ? ss.addr : sf.addr);
	}
	ASSERT_OK(be_rpc_chan_create(cli.rpc, recs, 2, &ch));
	cfg = t.rcfg;
	cfg.timeout_us = 2000000;
	cfg.hedge_us = 20000;
	cfg.eject_failures = 3;
	cfg.eject_min_ms = 100;
	cfg.eject_max_ms = 400;
	ASSERT_OK(be_rpc_chan_set_config(ch, &cfg));

	/* Idempotent calls: hedged, the slow replica ejected and back. */
	t0 = rt_ms();
	call_flags = BE_RPC_IDEMPOTENT;
	g = (struct goal){ 400, 2, 1, 0 };
	rt_pump(ws, 3, reached, &g);
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(nfail, 0);
	ASSERT_GT(cs.c.hedges, 0);
	ASSERT_GT(cs.c.hedge_wins, 0);
	ASSERT_LE(cs.c.hedge_wins, cs.c.hedges);
	ASSERT_GE(cs.c.ejections, 2);
	ASSERT_GE(cs.c.returns, 1);
	ASSERT_LE(cs.c.hedges + cs.c.retries,
		  cs.c.calls / 10 + 10 * ((rt_ms() - t0) / 1000 + 1));
	fprintf(stderr, "calls %llu hedges %llu wins %llu ejections %llu returns %llu\n",
		(unsigned long long)cs.c.calls, (unsigned long long)cs.c.hedges,
		(unsigned long long)cs.c.hedge_wins, (unsigned long long)cs.c.ejections,
		(unsigned long long)cs.c.returns);
	drain();

	/* Not idempotent: never hedged (slow answers still succeed). */
	be_rpc_chan_stats(ch, &before);
	call_flags = 0;
	sent = ndone = 0;
	g = (struct goal){ 40, 0, 0, 0 };
	rt_pump(ws, 3, reached, &g);
	drain();
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(nfail, 0);
	ASSERT_EQ(cs.c.hedges, before.c.hedges);

	/* An almost empty budget: one hedge per second at most. */
	cfg.retry_budget_pct = 0;
	cfg.retry_budget_min = 1;
	cfg.eject_failures = 1000; /* keep the slow one in the set */
	ASSERT_OK(be_rpc_chan_set_config(ch, &cfg));
	rt_pump_ms(ws, 3, 1100); /* let the window forget */
	be_rpc_chan_stats(ch, &before);
	call_flags = BE_RPC_IDEMPOTENT;
	sent = ndone = 0;
	t0 = rt_ms();
	g = (struct goal){ 100, 0, 0, before.c.budget_denied + 3 };
	rt_pump(ws, 3, reached, &g);
	drain();
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(nfail, 0);
	ASSERT_LE(cs.c.hedges - before.c.hedges, (rt_ms() - t0) / 1000 + 1);
	ASSERT_GT(cs.c.budget_denied, before.c.budget_denied);

	be_rpc_chan_destroy(ch);
	st_shutdown(ws, 3); /* together: each waits for the other */
	rt_client_stop(&cli);
	rt_server_stop(&sf);
	rt_server_stop(&ss);
	be_ctx_destroy(ctx);
	return 0;
}
