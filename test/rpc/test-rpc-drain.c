/*
 * Check that a draining server moves its clients away by itself, with
 * be_rpc_drain() alone: three replicas in other processes under a stream
 * of calls that are not idempotent; one starts draining. Its notice
 * reaches the channel, which stops choosing it (not one attempt more
 * goes there) while the calls go on elsewhere without a failure: the few
 * that reached it first are refused -ESHUTDOWN and retried. Drain off:
 * its "serving" notice brings it back and it answers calls again. A
 * channel that connects to it while it drains (no notice on a new
 * connection) learns it from the flag on the first reply and stops
 * choosing it too, again without a failed call.
 */
#include <string.h>

#include "rtest.h"

#define NR 3

struct goal {
	struct rt_stream *st;
	struct be_rpc_chan *ch;
	uint64_t done;            /* at least this many calls completed */
	int draining;             /* replica 0's server_draining, -1: any */
	uint64_t r0_ok;           /* replica 0 answered at least this many */
	uint64_t each_ok;         /* every replica answered at least this many */
};

static bool reached(void *arg)
{
	struct goal *g = arg;
	unsigned int i;

	rt_stream_fill(g->st);
	if (g->st->done < g->done)
		return false;
	if (g->draining >= 0 && rt_chan_replica(g->ch, 0).server_draining != g->draining)
		return false;
	if (rt_chan_replica(g->ch, 0).addrs[0].c.ok < g->r0_ok)
		return false;
	for (i = 0; i < NR; i++)
		if (rt_chan_replica(g->ch, i).addrs[0].c.ok < g->each_ok)
			return false;
	return true;
}

static void no_failure(const struct rt_stream *st)
{
	ASSERT_EQ(st->ok, st->done);
	ASSERT_EQ(st->timeouts, 0);
	ASSERT_EQ(st->other, 0);
	ASSERT_EQ(st->refused, 0);
}

int main(int argc, char **argv)
{
	static struct rt_stream st, st2;
	struct be_rpc_record recs[NR];
	struct be_rpc_chan_stats cs;
	struct be_rpc_chan *ch2;
	uint64_t sent;
	struct goal g;
	struct rt_env e;
	struct rt t;

	rt_init(&t, argc, argv);
	rt_env_fork(&t, &e, NR, NULL);
	rt_env_open(&t, &e, &t.rcfg);
	rt_stream_init(&st, e.ch, RT_ECHO, 0, 16);

	/* Every replica answers. */
	g = (struct goal){ &st, e.ch, 0, 0, 0, 20 };
	rt_pump(&e.w, 1, reached, &g);

	/* r0 drains: the channel hears of it while the stream runs. */
	rt_replica_ctl(&e.reps[0], 'd');
	g = (struct goal){ &st, e.ch, 0, 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	sent = rt_chan_replica(e.ch, 0).addrs[0].c.calls;
	g = (struct goal){ &st, e.ch, st.done + 1000, 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	ASSERT_EQ(rt_chan_replica(e.ch, 0).addrs[0].c.calls, sent);
	ASSERT_EQ(rt_chan_replica(e.ch, 0).state, BE_RPC_REP_ACTIVE);
	no_failure(&st);
	be_rpc_chan_stats(e.ch, &cs);
	ASSERT_EQ(cs.c.drains, 1);
	fprintf(stderr, "drain: %llu calls, none failed, %llu retries\n",
		(unsigned long long)st.done, (unsigned long long)cs.c.retries);

	/* Drain off: r0 says so and takes calls again. */
	rt_replica_ctl(&e.reps[0], 'u');
	g = (struct goal){ &st, e.ch, 0, 0, rt_chan_replica(e.ch, 0).addrs[0].c.ok + 20, 0 };
	rt_pump(&e.w, 1, reached, &g);
	no_failure(&st);

	/* Draining again, a channel connecting now learns it from the first
	 * reply r0 gives it: a flag, not a notice. */
	rt_replica_ctl(&e.reps[0], 'd');
	g = (struct goal){ &st, e.ch, 0, 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	rt_env_records(&e, recs);
	ASSERT_OK(be_rpc_chan_create(e.rpc, recs, NR, &ch2));
	rt_stream_init(&st2, ch2, RT_ECHO, 0, 16);
	g = (struct goal){ &st2, ch2, 0, 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	sent = rt_chan_replica(ch2, 0).addrs[0].c.calls;
	g = (struct goal){ &st2, ch2, st2.done + 1000, 1, 0, 0 };
	rt_pump(&e.w, 1, reached, &g);
	ASSERT_EQ(rt_chan_replica(ch2, 0).addrs[0].c.calls, sent);
	rt_stream_drain(&st2, &e.w, 1);
	no_failure(&st2);
	ASSERT_GT(st2.done, 1000);
	be_rpc_chan_destroy(ch2);

	rt_stream_drain(&st, &e.w, 1);
	no_failure(&st);
	rt_env_close(&e);
	return 0;
}
