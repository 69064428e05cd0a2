/*
 * Check that retries stay within the budget when every replica fails:
 * three replicas in other processes all draining (every attempt is
 * refused -ESHUTDOWN, which any call may retry) under a stream of calls:
 * every call completes exactly once with -ESHUTDOWN, and retries stay
 * within retry_budget_pct of the calls plus retry_budget_min per second.
 * Then every replica is killed: calls fail (at once, or with a
 * connection error), retries stay within the budget, and nothing hangs.
 */
#include <signal.h>
#include <string.h>

#include "rtest.h"

#define NR 3

static struct rt_stream st;
static struct be_rpc_chan *ch;
static uint64_t until_ms;

static bool timed(void *arg)
{
	rt_stream_fill(&st);
	return rt_ms() >= until_ms;
}

/* The stream going on, no replica has a path left. */
static bool all_down(void *arg)
{
	unsigned int i;

	rt_stream_fill(&st);
	for (i = 0; i < NR && rt_chan_replica(ch, i).path < 0; i++)
		;
	return i == NR;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct be_rpc_chan_stats cs, before;
	struct rt_env e;
	uint64_t t0, secs, allowed;
	int i;

	rt_init(&t, argc, argv);
	rt_env_fork(&t, &e, NR, NULL);
	for (i = 0; i < NR; i++)
		rt_replica_ctl(&e.reps[i], 'd');
	t.rcfg.timeout_us = 1000000;
	t.rcfg.retry_budget_pct = 10;
	t.rcfg.retry_budget_min = 10;
	rt_env_open(&t, &e, &t.rcfg);
	ch = e.ch;
	rt_stream_init(&st, ch, RT_ECHO, BE_RPC_IDEMPOTENT, 16);

	/* Let the drain commands land: until the first refusal. */
	until_ms = rt_ms() + 100;
	rt_pump(&e.w, 1, timed, NULL);
	rt_stream_drain(&st, &e.w, 1);
	be_rpc_chan_stats(ch, &before);
	st.ok = st.done = st.timeouts = st.other = 0;

	t0 = rt_ms();
	until_ms = t0 + 2000;
	rt_pump(&e.w, 1, timed, NULL);
	rt_stream_drain(&st, &e.w, 1);
	secs = (rt_ms() - t0 + 999) / 1000;
	be_rpc_chan_stats(ch, &cs);
	allowed = (cs.c.calls - before.c.calls) / 10 + 10 * (secs + 1);
	fprintf(stderr, "draining: calls %llu retries %llu allowed %llu denied %llu\n",
		(unsigned long long)(cs.c.calls - before.c.calls),
		(unsigned long long)(cs.c.retries - before.c.retries), (unsigned long long)allowed,
		(unsigned long long)(cs.c.budget_denied - before.c.budget_denied));
	ASSERT_EQ(st.ok, 0);
	ASSERT_EQ(st.other, st.done);
	ASSERT_EQ(st.last_err, -ESHUTDOWN);
	ASSERT_LE(cs.c.retries - before.c.retries, allowed);
	ASSERT_GT(cs.c.budget_denied, before.c.budget_denied);

	/* Every replica dies. */
	before = cs;
	t0 = rt_ms();
	for (i = 0; i < NR; i++)
		rt_replica_kill(&e.reps[i], SIGKILL);
	rt_pump(&e.w, 1, all_down, NULL);
	until_ms = rt_ms() + 500;
	rt_pump(&e.w, 1, timed, NULL);
	rt_stream_drain(&st, &e.w, 1);
	secs = (rt_ms() - t0 + 999) / 1000;
	be_rpc_chan_stats(ch, &cs);
	fprintf(stderr, "all dead: refused at once %llu, calls %llu retries %llu\n",
		(unsigned long long)st.refused, (unsigned long long)(cs.c.calls - before.c.calls),
		(unsigned long long)(cs.c.retries - before.c.retries));
	ASSERT_GT(st.refused, 0);
	ASSERT_LE(cs.c.retries - before.c.retries,
		  (cs.c.calls - before.c.calls) / 10 + 10 * (secs + 1));
	ASSERT_EQ(cs.c.outstanding, 0);

	rt_env_close(&e);
	return 0;
}
