/*
 * Check SIGSTOP of one replica of three during a stream of idempotent
 * calls: the frozen replica's calls are hedged or time out (each call
 * still completes exactly once, with its reply or -ETIMEDOUT, nothing
 * else); the replica is ejected, probed while it stays frozen (ejected
 * again), and after SIGCONT it returns and serves calls again.
 */
#include <signal.h>
#include <string.h>

#include "rtest.h"

#define NR 3

static struct rt_stream st;
static struct be_rpc_chan *ch;

struct goal {
	uint64_t done, ejections, returns, victim_ok;
};

static bool reached(void *arg)
{
	struct goal *g = arg;
	struct be_rpc_replica_stats rs;

	rt_stream_fill(&st);
	rs = rt_chan_replica(ch, 2);
	return st.done >= g->done && rs.ejections >= g->ejections && rs.returns >= g->returns &&
	       rs.addrs[0].c.ok >= g->victim_ok;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct be_rpc_replica_stats rs;
	struct be_rpc_chan_stats cs;
	struct rt_env e;
	struct goal g;
	uint64_t t_stop, t_eject, t_cont, ej_before_cont, ej0, ret0;

	rt_init(&t, argc, argv);
	rt_env_fork(&t, &e, NR, NULL);
	t.rcfg.timeout_us = 300000 * rt_slow_factor(); /* hedge at half */
	t.rcfg.eject_min_ms = 100;
	t.rcfg.eject_max_ms = 800;
	rt_env_open(&t, &e, &t.rcfg);
	ch = e.ch;
	rt_stream_init(&st, ch, RT_SLOW, BE_RPC_IDEMPOTENT, 12);
	st.slow_us = 1000;

	g = (struct goal){ 300, 0, 0, 1 };
	rt_pump(&e.w, 1, reached, &g);

	/* Under a loaded machine a healthy replica may have been overtaken
	 * and ejected before: count from here. */
	rs = rt_chan_replica(ch, 2);
	ej0 = rs.ejections;
	ret0 = rs.returns;
	t_stop = rt_ms();
	rt_replica_kill(&e.reps[2], SIGSTOP);
	g = (struct goal){ st.done + 100, ej0 + 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	t_eject = rt_ms();
	rs = rt_chan_replica(ch, 2);
	ASSERT(rs.state == BE_RPC_REP_EJECTED || rs.state == BE_RPC_REP_PROBING);
	/* Frozen for a while: probes fail, it stays out. */
	g = (struct goal){ st.done + 500, ej0 + 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	rs = rt_chan_replica(ch, 2);
	ej_before_cont = rs.ejections - ej0;

	t_cont = rt_ms();
	rt_replica_kill(&e.reps[2], SIGCONT);
	g = (struct goal){ st.done + 100, ej0 + 1, ret0 + 1, rs.addrs[0].c.ok + 20 };
	rt_pump(&e.w, 1, reached, &g);
	rt_stream_drain(&st, &e.w, 1);

	be_rpc_chan_stats(ch, &cs);
	fprintf(stderr,
		"SIGSTOP: ejected after %llu ms, %llu ejections while frozen; SIGCONT: back "
		"and serving after %llu ms; calls %llu ok %llu timeouts %llu hedges %llu "
		"wins %llu\n",
		(unsigned long long)(t_eject - t_stop), (unsigned long long)ej_before_cont,
		(unsigned long long)(rt_ms() - t_cont), (unsigned long long)st.done,
		(unsigned long long)st.ok, (unsigned long long)st.timeouts,
		(unsigned long long)cs.c.hedges, (unsigned long long)cs.c.hedge_wins);
	ASSERT_EQ(st.other, 0);
	ASSERT_EQ(st.refused, 0);
	ASSERT_EQ(st.ok + st.timeouts, st.done);
	rs = rt_chan_replica(ch, 2);
	ASSERT_GE(rs.returns, ret0 + 1);
	ASSERT_EQ(cs.c.ok, st.ok);
	rt_env_close(&e);
	return 0;
}
