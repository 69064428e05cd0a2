/*
 * Check the TCP fallback (or, on tcp, the port switch) with a replica in
 * another process serving on two paths, the test's transport preferred
 * and tcp second: while a stream of idempotent calls runs, the preferred
 * path breaks (its worker and Engines go) -> the calls continue over the
 * second path without a failure; the path comes back -> the calls
 * return to it; both moves are counted. Prints the time from the break
 * to the first call answered over the second path, and from the repair
 * to the first call answered over the preferred one.
 */
#include <string.h>

#include "rtest.h"

static struct rt_stream st;
static struct be_worker *w;
static struct be_rpc_chan *ch;

struct goal {
	uint64_t done;
	int path;
	uint64_t ok0, ok1; /* answers over address 0 / 1 at least */
};

static bool reached(void *arg)
{
	struct goal *g = arg;
	struct be_rpc_replica_stats rs;

	rt_stream_fill(&st);
	ASSERT_OK(be_rpc_chan_replica_stats(ch, 0, &rs));
	return st.done >= g->done && rs.path == g->path && rs.addrs[0].c.ok >= g->ok0 &&
	       rs.addrs[1].c.ok >= g->ok1;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct rt_replica rep;
	struct be_rpc_record rec;
	struct be_rpc_replica_stats rs;
	struct be_rpc_chan_stats cs;
	struct be_rpc_config cfg;
	struct be_rpc *rpc;
	struct be_ctx *ctx;
	char trs[32];
	struct goal g;
	uint64_t t0, t_over, t_back;
	bool fallback;

	rt_init(&t, argc, argv);
	fallback = strcmp(t.transport, "tcp") != 0;
	snprintf(trs, sizeof(trs), "%s,tcp", t.transport);
	rt_replica_start(&t, &rep, trs);
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	cfg = t.rcfg;
	cfg.timeout_us = 1000000 * rt_slow_factor();
	cfg.probe_min_ms = 5;
	cfg.probe_max_ms = 50;
	ASSERT_OK(be_rpc_create(w, &cfg, &rpc));
	rt_replica_record(&rep, "r0", &rec);
	ASSERT_OK(be_rpc_chan_create(rpc, &rec, 1, &ch));
	st.ch = ch;
	st.service = RT_SVC;
	st.method = RT_ECHO;
	st.flags = BE_RPC_IDEMPOTENT;
	st.depth = 8;

	g = (struct goal){ 300, 0, 1, 0 };
	rt_pump(&w, 1, reached, &g);

	/* Break the preferred path. */
	t0 = rt_ms();
	rt_replica_ctl(&rep, 'c');
	g = (struct goal){ st.done + 300, 1, 0, 1 };
	rt_pump(&w, 1, reached, &g);
	ASSERT_OK(be_rpc_chan_replica_stats(ch, 0, &rs));
	t_over = rt_ms() - t0;
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(cs.c.fallbacks, fallback ? 1 : 0);
	ASSERT_EQ(cs.c.port_switches, fallback ? 0 : 1);

	/* Repair it. */
	t0 = rt_ms();
	rt_replica_ctl(&rep, 'o');
	g = (struct goal){ st.done + 300, 0, rs.addrs[0].c.ok + 1, 0 };
	rt_pump(&w, 1, reached, &g);
	t_back = rt_ms() - t0;
	rt_stream_drain(&st, &w, 1);

	be_rpc_chan_stats(ch, &cs);
	fprintf(stderr, "%s: over after %llu ms, back after %llu ms; calls %llu ok %llu\n",
		fallback ? "fallback" : "port switch", (unsigned long long)t_over,
		(unsigned long long)t_back, (unsigned long long)st.done, (unsigned long long)st.ok);
	ASSERT_EQ(st.ok, st.done);
	ASSERT_EQ(st.refused, 0);
	ASSERT_EQ(cs.c.fallback_returns, fallback ? 1 : 0);
	ASSERT_EQ(cs.c.port_returns, fallback ? 0 : 1);
	ASSERT_GT(cs.c.probe_failures + cs.c.probes, 0);

	be_rpc_chan_destroy(ch);
	be_rpc_destroy(rpc);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	rt_replica_reap(&rep);
	return 0;
}
