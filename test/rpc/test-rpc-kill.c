/*
 * Check kill -9 of one replica of three during a stream of idempotent
 * calls (each held a few milliseconds by its server, so some are in
 * flight on the victim when it dies): every call completes exactly
 * once and successfully, those in flight on the dead replica retried on
 * the others within their deadline; the dead replica's address goes down
 * and takes no calls afterwards; and the channel keeps going on two.
 * Prints the time from the kill to the address going down and to the
 * last of the calls in flight at the kill succeeding (figures, not
 * assertions; with --json for bench/compare-rpc.sh).
 */
#include <signal.h>
#include <string.h>

#include "rtest.h"

#define NR 3

static struct rt_stream st;
static struct be_rpc_chan *ch;
static uint64_t goal;

static bool step(void *arg)
{
	rt_stream_fill(&st);
	return st.done >= goal;
}

/* The stream going on, every replica has answered a call. */
static bool all_serving(void *arg)
{
	unsigned int i;

	rt_stream_fill(&st);
	for (i = 0; i < NR && rt_chan_replica(ch, i).addrs[0].c.ok; i++)
		;
	return i == NR;
}

static bool victim_down(void *arg)
{
	int state;

	rt_stream_fill(&st);
	state = rt_chan_replica(ch, 1).addrs[0].state;
	return state == BE_RPC_ADDR_DOWN || state == BE_RPC_ADDR_PROBING;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct be_rpc_replica_stats rs;
	struct be_rpc_chan_stats cs;
	struct rt_env e;
	uint64_t ok_victim;
	double t_kill, t_down;

	rt_init(&t, argc, argv);
	rt_env_fork(&t, &e, NR, NULL);
	t.rcfg.timeout_us = 1000000 * rt_slow_factor();
	rt_env_open(&t, &e, &t.rcfg);
	ch = e.ch;
	rt_stream_init(&st, ch, RT_SLOW, BE_RPC_IDEMPOTENT, 24);
	st.slow_us = 2000;

	/* Every replica connected and serving before anything counts (a
	 * connection coming up in the guest may take a deadline). */
	rt_pump(&e.w, 1, all_serving, NULL);
	st.done = st.ok = st.timeouts = st.other = 0;
	goal = 300;
	rt_pump(&e.w, 1, step, NULL);

	t_kill = rt_us();
	st.mark_ms = rt_ms();
	st.mark_us = t_kill;
	rt_replica_kill(&e.reps[1], SIGKILL);
	rt_pump(&e.w, 1, victim_down, NULL);
	t_down = rt_us();
	ok_victim = rt_chan_replica(ch, 1).addrs[0].c.ok;
	goal = st.done + 600;
	rt_pump(&e.w, 1, step, NULL);
	rt_stream_drain(&st, &e.w, 1);

	be_rpc_chan_stats(ch, &cs);
	rs = rt_chan_replica(ch, 1);
	fprintf(stderr,
		"kill -9: down after %.1f ms, calls in flight done after %.1f ms; calls %llu ok %llu "
		"timeouts %llu other %llu retries %llu\n",
		(t_down - t_kill) / 1000, (st.caught_done_us - t_kill) / 1000,
		(unsigned long long)st.done, (unsigned long long)st.ok,
		(unsigned long long)st.timeouts, (unsigned long long)st.other,
		(unsigned long long)cs.c.retries);
	if (st.other)
		fprintf(stderr, "last error: %s\n", be_strerror(st.last_err));
	if (st.other + st.timeouts)
		fprintf(stderr, "last failure %lld ms after the kill\n",
			(long long)st.last_fail_ms - (long long)st.mark_ms);
	rt_failover_report(&t, "kill", t.transport, (t_down - t_kill) / 1000,
			   (st.caught_done_us - t_kill) / 1000, &st, t.rcfg.timeout_us);
	ASSERT_EQ(st.ok, st.done);
	ASSERT_EQ(st.refused, 0);
	ASSERT_GE(cs.c.ok, st.done);
	ASSERT_GE(cs.c.retries, 1);
	ASSERT_EQ(rs.addrs[0].c.ok, ok_victim);
	ASSERT(rs.path == -1);
	rt_env_close(&e);
	return 0;
}
