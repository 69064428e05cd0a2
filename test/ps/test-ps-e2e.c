/*
 * Check fetch and push end to end between real processes, over the
 * test's transport: two be-ps servers host eight logical shards of two
 * tables. A fetch of keys with repeats, over both tables, answers every
 * position in the caller's order with the initializer's value and counts
 * each unique key as missing once; a push with repeated keys sums their
 * gradients and applies them once; the next fetch sees exactly
 * init - lr * sum. Pushes and fetches carry the shards' model versions
 * back (be_ps_version_seen). A server stopped with SIGTERM checkpoints;
 * restarted on a new address (announced through naming), it serves the
 * same values, and the same client's next push is applied once. A fetch
 * in flight when the client is destroyed completes once, -ECANCELED.
 */
#include <math.h>
#include <stdlib.h>

#include "pscluster.h"

static const char *conf = "shards 8\n"
			  "servers 2\n"
			  "table user dim=8 optimizer=sgd lr=0.5 init=uniform lo=-1 hi=1\n"
			  "table item dim=3 optimizer=sgd lr=0.25 init=uniform lo=-1 hi=1\n";

#define NK 300
#define NREP 50 /* the fetch batch repeats its first NREP keys at its end */

/* Deadlines of seconds: this test is about what is answered, on a
 * machine that may be loaded (the default 30 ms is a ranker's). */
static const struct be_ps_fetch_opts fo = { .timeout_us = 10000000 };
static const struct be_ps_push_opts po = { .timeout_us = 10000000 };
static struct be__ps_config cfg;
static uint64_t keys[NK + NREP], pk[2 * NK];
static float vals[(NK + NREP) * 8], pg[2 * NK * 8];

/* How often a key is listed in each push below: twice when it is a
 * multiple of 3, so the client must sum. */
static int times(uint64_t key)
{
	return key % 3 == 0 ? 2 : 1;
}

/* Every value against init(key) - lr * (gradient 1, summed) * pushes. */
static void check(uint32_t table, const uint64_t *k, const float *v, uint32_t n, int pushes)
{
	const struct be__ps_table *t = &cfg.tables[table];
	float w[8];
	uint32_t j, i;

	for (j = 0; j < n; j++) {
		be__ps_init_row(t, k[j], w);
		for (i = 0; i < t->dim; i++) {
			float want = w[i] - t->opt.lr * (float)(times(k[j]) * pushes);

			if (fabsf(v[(size_t)j * t->dim + i] - want) > 1e-5f)
				TEST_FAIL("table %u position %u coord %u: %g, want %g", table, j, i,
					  v[(size_t)j * t->dim + i], want);
		}
	}
}

/* Fetch the batch from both tables (item: its first NK / 2 keys) and
 * check it against @pushes pushes. */
static void fetch_check(struct pc *c, int pushes, struct be_ps_result *res)
{
	static float ivals[NK / 2 * 3];
	struct be_ps_slice sl[2] = {
		{ 0, NK + NREP, keys, vals },
		{ 1, NK / 2, keys, ivals },
	};

	ASSERT_OK(be_ps_fetch_sync(c->ps, sl, 2, &fo, res));
	check(0, keys, vals, NK + NREP, pushes);
	check(1, keys, ivals, NK / 2, pushes);
	ASSERT_EQ(res->unique_keys, NK + NK / 2);
}

/* Push gradient 1 to every key of both tables, listed times(key) times. */
static void push(struct pc *c, struct be_ps_result *res)
{
	struct be_ps_slice sl[2];
	uint32_t j, n = 0, ni = 0;

	for (j = 0; j < NK; j++) {
		pk[n++] = keys[j];
		if (times(keys[j]) == 2)
			pk[n++] = keys[j];
		if (j + 1 == NK / 2)
			ni = n;
	}
	for (j = 0; j < 2 * NK * 8; j++)
		pg[j] = 1.0f;
	sl[0] = (struct be_ps_slice){ 0, n, pk, pg };
	sl[1] = (struct be_ps_slice){ 1, ni, pk, pg };
	ASSERT_OK(be_ps_push_sync(c->ps, sl, 2, &po, res));
	ASSERT_EQ(res->unique_keys, NK + NK / 2);
	ASSERT_EQ(res->duplicates, 0);
}

static int cancel_status = 1, cancel_calls;

static void cancel_cb(int status, const struct be_ps_result *res, void *arg)
{
	cancel_status = status;
	cancel_calls++;
}

int main(int argc, char **argv)
{
	struct pc c;
	struct pc_server srv[2];
	struct be_ps_slice sl[2];
	struct be_ps_result res;
	uint64_t s = 7, v;
	uint32_t j, sh;
	float g = NAN;

	pc_init(&c, argc, argv, conf);
	pt_config(&cfg, conf);
	pc_server_start(&c, &srv[0], 0, false, "p0");
	pc_server_start(&c, &srv[1], 1, false, "p1");
	pc_client_start(&c, srv, 2);
	ASSERT_EQ(be_ps_table(c.ps, "item"), 1);
	ASSERT_EQ(be_ps_dim(c.ps, 0), 8);
	ASSERT_EQ(be_ps_shards(c.ps), 8);
	for (j = 0; j < NK; j++)
		keys[j] = pt_rand(&s);
	for (j = 0; j < NREP; j++)
		keys[NK + j] = keys[j];

	/* Before any push: the initializer's values, every key missing. */
	fetch_check(&c, 0, &res);
	ASSERT_EQ(res.missing, res.unique_keys);
	ASSERT_GE(res.legs, 8);

	push(&c, &res);
	fetch_check(&c, 1, &res);
	ASSERT_EQ(res.missing, 0);
	for (sh = 0, v = 0; sh < 8; sh++)
		v += be_ps_version_seen(c.ps, sh);
	ASSERT_EQ(v, 8); /* every shard applied one push */

	/* Stop server 0 (it checkpoints) and start it again on a new
	 * address, announced with a new epoch: the same values; the same
	 * client's next push (its sequence numbers go on) is applied. */
	pc_server_stop(&c, &srv[0]);
	pc_server_start(&c, &srv[0], 0, false, "p0");
	pc_announce(&c, &srv[0], 2);
	/* Let the channels take the new record (naming tells them on
	 * their worker) before calling: rpc.h does not say what becomes
	 * of a call sent to the old incarnation meanwhile. */
	be_worker_progress(c.w);
	fetch_check(&c, 1, &res);
	ASSERT_EQ(res.missing, 0);
	push(&c, &res);
	fetch_check(&c, 2, &res);

	/* Bad calls are refused before anything is sent. */
	sl[0] = (struct be_ps_slice){ 5, 1, keys, vals };
	ASSERT_EQ(be_ps_fetch_sync(c.ps, sl, 1, NULL, &res), -EINVAL);
	sl[1] = sl[0] = (struct be_ps_slice){ 0, 1, keys, vals };
	ASSERT_EQ(be_ps_fetch_sync(c.ps, sl, 2, NULL, &res), -EINVAL);
	sl[0] = (struct be_ps_slice){ 1, 1, keys, &g };
	ASSERT_EQ(be_ps_push_sync(c.ps, sl, 1, NULL, &res), -EINVAL);

	/* A fetch in flight when the client is destroyed completes with
	 * -ECANCELED inside be_ps_destroy(), once. */
	sl[0] = (struct be_ps_slice){ 0, NK, keys, vals };
	ASSERT_OK(be_ps_fetch(c.ps, sl, 1, &fo, cancel_cb, NULL));
	ASSERT_EQ(cancel_calls, 0);
	be_ps_destroy(c.ps);
	c.ps = NULL;
	ASSERT_EQ(cancel_calls, 1);
	ASSERT_EQ(cancel_status, -ECANCELED);

	pc_client_stop(&c);
	ASSERT_EQ(cancel_calls, 1);
	pc_server_stop(&c, &srv[0]);
	pc_server_stop(&c, &srv[1]);
	be__ps_config_close(&cfg);
	pc_fini(&c);
	return 0;
}
