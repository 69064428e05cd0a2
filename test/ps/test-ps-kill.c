/*
 * Check that a serving replica killed during fetches costs no fetch: one
 * shard set served by a primary and a replica that follows the
 * primary's checkpoints. A push to the primary and a CHECKPOINT reach
 * the replica (its INFO reports the new model versions); then a stream
 * of fetches, each asking for the versions the client has seen
 * (BE_PS_FRESH), runs over both while the replica is killed with
 * SIGKILL: every fetch completes once, successfully, with the pushed
 * values, those in flight on the dead replica retried (or hedged) on the
 * primary within their deadline (counted by the fetch channel).
 */
#include <signal.h>
#include <stdlib.h>

#include "pscluster.h"

static const char *conf = "shards 4\n"
			  "table t dim=4 optimizer=sgd lr=0.5 init=uniform lo=-1 hi=1\n";

#define NKEY 128 /* keys per fetch */

static struct be__ps_config cfg;
static struct pc c;
static uint64_t keys[1024];

/* The fetched rows are the pushed ones: every key got a gradient of 1. */
static void check(const struct pc_fetch_slot *q, unsigned int nkey)
{
	float w[4];
	unsigned int j, i;

	for (j = 0; j < nkey; j++) {
		be__ps_init_row(&cfg.tables[0], q->k[j], w);
		for (i = 0; i < 4; i++)
			if (q->v[j * 4 + i] != w[i] - 0.5f)
				TEST_FAIL("key %u coord %u: %g, want %g", j, i, q->v[j * 4 + i],
					  w[i] - 0.5f);
	}
}

static uint64_t key(struct pc_fetches *f)
{
	return keys[pt_rand(&f->rng) % 1024];
}

int main(int argc, char **argv)
{
	struct pc_server srv[2];
	struct be_ps_push_opts po = { .timeout_us = 10000000 };
	struct be_rpc_call_opts o = { .timeout_us = 10000000 };
	struct be_ps_slice sl;
	struct be_ps_result res;
	struct be_rpc_chan *ch;
	struct be_rpc_chan_stats cs;
	struct be__ps_info info;
	static float g[1024 * 4];
	const char *why;
	uint64_t s = 9, v, before;
	uint32_t i, shard, fresh;
	void *rep;
	size_t rl;
	struct pc_fetches f = { .c = &c, .nkey = NKEY, .flags = BE_PS_FRESH, .key = key,
				.check = check, .rng = 3 };

	pc_init(&c, argc, argv, conf);
	pt_config(&cfg, conf);
	pc_server_start(&c, &srv[0], 0, false, "primary");
	pc_server_start(&c, &srv[1], 0, true, "replica");
	pc_client_start(&c, srv, 2);
	for (i = 0; i < 1024; i++)
		keys[i] = pt_rand(&s);
	for (i = 0; i < 1024 * 4; i++)
		g[i] = 1.0f;
	sl = (struct be_ps_slice){ 0, 1024, keys, g };
	ASSERT_OK(be_ps_push_sync(c.ps, &sl, 1, &po, &res));

	/* Checkpoint on request; the replica follows (every 20 ms). */
	ch = pc_chan(&c, &srv[0]);
	ASSERT_OK(be_rpc_call_sync(ch, be_rpc_service_id(BE_PS_SERVICE), BE_PS_M_CHECKPOINT, NULL,
				   0, &o, NULL, NULL));
	be_rpc_chan_destroy(ch);
	ch = pc_chan(&c, &srv[1]);
	do {
		ASSERT_OK(be_rpc_call_sync(ch, be_rpc_service_id(BE_PS_SERVICE), BE_PS_M_INFO, NULL,
					   0, &o, &rep, &rl));
		ASSERT_OK(be__ps_info_decode(rep, rl, &info, &why));
		ASSERT(info.flags & BE_PS_SERVER_REPLICA);
		for (i = 0, fresh = 0; i < info.count; i++) {
			be__ps_info_ent(&info, i, &shard, &v);
			fresh += v == 1;
		}
		be_rpc_buf_free(rep);
	} while (fresh < 4);
	be_rpc_chan_destroy(ch);

	pc_fetches_run(&f, 200);
	ASSERT_EQ(f.failed, 0);
	ASSERT_OK(be_ps_chan_stats(c.ps, 0, 0, &cs));
	before = cs.c.retries + cs.c.hedges;
	pc_server_kill(&srv[1]);
	pc_fetches_run(&f, f.done + 600);
	pc_fetches_finish(&f);
	ASSERT_OK(be_ps_chan_stats(c.ps, 0, 0, &cs));
	fprintf(stderr, "legs retried %llu, hedged %llu\n", (unsigned long long)cs.c.retries,
		(unsigned long long)cs.c.hedges);
	/* Some legs were in flight on the replica when it died (8 fetches
	 * are always in flight, about half of their legs on it): the RPC
	 * layer sent them again, to the primary. */
	ASSERT_GT(cs.c.retries + cs.c.hedges, before);

	pc_client_stop(&c);
	pc_server_stop(&c, &srv[0]);
	be__ps_config_close(&cfg);
	pc_fini(&c);
	return 0;
}
