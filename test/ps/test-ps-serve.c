/*
 * Check pulls and pushes executed on a shard. A pull answers every key
 * in order, from its row or, for a key without one, with the
 * initializer's value (training, or inference on a table whose policy is
 * init) or the table's default (inference on a table with a default),
 * counts each, and marks them in the missing map; across the lookup
 * pipeline's edges (1 .. 5000 keys) it agrees with plain lookups. A push
 * applies each table's optimizer to exactly the rows named (a key twice
 * is applied twice, in order, one row created), also from a request at an
 * odd address. Refusals: a version below min_version (-ESTALE), a reply
 * buffer too small (-ENOBUFS) or misaligned, a request of another shard
 * (-EINVAL); none changes the shard.
 */
#include <math.h>
#include <stdlib.h>

#include "pstest.h"

static const char *cfg_text =
	"shards 4\n"
	"table s dim=4 optimizer=sgd lr=0.5 init=uniform lo=-1 hi=1 missing=0.25\n"
	"table a dim=8 optimizer=adagrad lr=0.1 init=uniform lo=-1 hi=1 init_accum=0.1\n"
	"table f dim=3 optimizer=ftrl lr=0.1 init=zeros l1=0.001\n";

static struct be__ps_config cfg;
static uint64_t keys[5000];
static float grads[5000 * 8];
static uint8_t req[5000 * 8 * 4 * 4] __attribute__((aligned(64)));
static uint8_t rep[5000 * 8 * 4 * 2] __attribute__((aligned(64)));

static int64_t pull(struct be__ps_shard *sh, uint16_t flags, uint64_t minv, uint32_t table,
		    const uint64_t *k, uint32_t n, struct be__ps_msg *out)
{
	struct be__ps_msg m, q;
	const char *why;
	size_t len = pt_pull(req, sizeof(req), sh->id, flags, minv, table, cfg.tables[table].dim,
			     k, n);
	int64_t r;

	pt_decode(req, len, &cfg, &m);
	r = be__ps_shard_pull(sh, &m, rep, sizeof(rep));
	if (r < 0)
		return r;
	q = m;
	ASSERT_OK(be__ps_reply_decode(rep, (size_t)r, &q, out, &why));
	return r;
}

static void push(struct be__ps_shard *sh, uint64_t seq, uint32_t table, const uint64_t *k,
		 const float *g, uint32_t n)
{
	struct be__ps_msg m;
	size_t len = pt_push(req, sizeof(req), sh->id, 1, seq, table, cfg.tables[table].dim, k, g,
			     n);

	pt_decode(req, len, &cfg, &m);
	ASSERT_OK(be__ps_shard_push(sh, &m));
}

static const float *row_of(struct be__ps_shard *sh, uint32_t table, uint64_t key)
{
	uint32_t r = be__ps_store_find(&sh->stores[table], key);

	return r == BE_PS_NO_ROW ? NULL : be__ps_row_values(be__ps_store_row(&sh->stores[table], r));
}

static bool map_bit(const struct be__ps_sec *s, uint32_t j)
{
	uint64_t w;

	memcpy(&w, s->map + 8 * (j / 64), 8);
	return (w >> (j % 64)) & 1;
}

static void test_missing(struct be__ps_shard *sh)
{
	struct be__ps_msg r;
	float want[8];
	uint32_t j;

	/* Training pull of table s: initializer, counted, mapped. */
	ASSERT_GT(pull(sh, BE_PS_PULL_F_MISSING_MAP, 0, 0, keys, 70, &r), 0);
	ASSERT_EQ(r.sec[0].n_missing, 70);
	for (j = 0; j < 70; j++) {
		be__ps_init_row(&cfg.tables[0], keys[j], want);
		ASSERT(!memcmp(r.sec[0].vals + 16 * j, want, 16));
		ASSERT(map_bit(&r.sec[0], j));
	}
	ASSERT_UEQ(sh->tstats[0].missing_init, 70);
	ASSERT_UEQ(sh->tstats[0].missing_default, 0);
	/* Inference on s: its default 0.25, counted apart. */
	ASSERT_GT(pull(sh, BE_PS_PULL_F_INFERENCE, 0, 0, keys, 5, &r), 0);
	ASSERT_EQ(r.sec[0].n_missing, 5);
	for (j = 0; j < 5 * 4; j++) {
		float v;

		memcpy(&v, r.sec[0].vals + 4 * j, 4);
		ASSERT(v == 0.25f);
	}
	ASSERT_UEQ(sh->tstats[0].missing_default, 5);
	/* Inference on a (policy init): the initializer. */
	ASSERT_GT(pull(sh, BE_PS_PULL_F_INFERENCE, 0, 1, keys, 3, &r), 0);
	be__ps_init_row(&cfg.tables[1], keys[2], want);
	ASSERT(!memcmp(r.sec[0].vals + 32 * 2, want, 32));
	ASSERT_UEQ(sh->tstats[1].missing_init, 3);
	ASSERT_UEQ(sh->stores[0].rows + sh->stores[1].rows, 0); /* pulls create nothing */
}

static void test_push_then_pull(struct be__ps_shard *sh)
{
	struct be__ps_msg r;
	float w[8], st[16], g[8];
	uint64_t twice[3] = { keys[0], keys[1], keys[0] };
	uint32_t j, d;

	/* Table s, SGD: keys[0] twice in one push. */
	for (j = 0; j < 12; j++)
		grads[j] = (float)j * 0.25f;
	push(sh, 1, 0, twice, grads, 3);
	ASSERT_UEQ(sh->stores[0].rows, 2);
	ASSERT_UEQ(sh->tstats[0].rows_created, 2);
	be__ps_init_row(&cfg.tables[0], keys[0], w);
	for (d = 0; d < 4; d++) {
		w[d] -= 0.5f * grads[d];
		w[d] -= 0.5f * grads[8 + d];
	}
	ASSERT(!memcmp(row_of(sh, 0, keys[0]), w, 16));
	/* Tables a and f through the optimizer on a copy. */
	for (j = 0; j < 8; j++)
		g[j] = 0.1f * (float)j - 0.3f;
	push(sh, 2, 1, keys + 5, g, 1);
	be__ps_init_row(&cfg.tables[1], keys[5], w);
	be__ps_opt_init_state(&cfg.tables[1].opt, 8, st);
	be__ps_opt_apply(&cfg.tables[1].opt, 8, w, st, g);
	ASSERT(!memcmp(row_of(sh, 1, keys[5]), w, 32));
	push(sh, 3, 2, keys + 6, g, 1);
	be__ps_init_row(&cfg.tables[2], keys[6], w);
	be__ps_opt_init_state(&cfg.tables[2].opt, 3, st);
	be__ps_opt_apply(&cfg.tables[2].opt, 3, w, st, g);
	ASSERT(!memcmp(row_of(sh, 2, keys[6]), w, 12));
	ASSERT_UEQ(sh->version, 3);

	/* A pull mixing present and missing keys. */
	ASSERT_GT(pull(sh, BE_PS_PULL_F_MISSING_MAP | BE_PS_PULL_F_INFERENCE, 3, 0, keys, 4, &r), 0);
	ASSERT_EQ(r.sec[0].n_missing, 2);
	ASSERT(!map_bit(&r.sec[0], 0) && !map_bit(&r.sec[0], 1));
	ASSERT(map_bit(&r.sec[0], 2) && map_bit(&r.sec[0], 3));
	ASSERT(!memcmp(r.sec[0].vals, row_of(sh, 0, keys[0]), 16));
	ASSERT(!memcmp(r.sec[0].vals + 16, row_of(sh, 0, keys[1]), 16));
	ASSERT_UEQ(r.version, 3);
}

static void test_pipeline(struct be__ps_shard *sh)
{
	static const uint32_t ns[] = { 1, 7, 8, 9, 15, 16, 17, 33, 5000 };
	struct be__ps_msg r;
	uint32_t i, j;

	/* Rows for every other key, then pulls of every length. */
	for (j = 0; j < 5000; j++)
		keys[j] = keys[j];
	{
		static uint64_t half[2500];

		for (j = 0; j < 2500; j++)
			half[j] = keys[2 * j];
		push(sh, 4, 1, half, grads, 2500);
	}
	for (i = 0; i < BE_ARRAY_SIZE(ns); i++) {
		uint32_t missing = 0;

		ASSERT_GT(pull(sh, BE_PS_PULL_F_MISSING_MAP, 0, 1, keys, ns[i], &r), 0);
		for (j = 0; j < ns[i]; j++) {
			const float *row = row_of(sh, 1, keys[j]);
			float want[8];

			if (!row) {
				be__ps_init_row(&cfg.tables[1], keys[j], want);
				row = want;
				missing++;
			}
			ASSERT(!memcmp(r.sec[0].vals + 32 * (size_t)j, row, 32));
			ASSERT_EQ(map_bit(&r.sec[0], j), !row_of(sh, 1, keys[j]));
		}
		ASSERT_EQ(r.sec[0].n_missing, missing);
	}
}

static void test_refusals(struct be__ps_shard *sh)
{
	struct be__ps_msg m, r, other;
	uint64_t version = sh->version;
	size_t len;

	ASSERT_EQ(pull(sh, 0, version + 1, 0, keys, 3, &r), -ESTALE);
	ASSERT_UEQ(sh->stats.stale, 1);
	ASSERT_GT(pull(sh, 0, version, 0, keys, 3, &r), 0);
	len = pt_pull(req, sizeof(req), sh->id, 0, 0, 0, 4, keys, 3);
	pt_decode(req, len, &cfg, &m);
	ASSERT_EQ(be__ps_shard_pull(sh, &m, rep, be__ps_pull_reply_len(&m) - 1), -ENOBUFS);
	ASSERT_EQ(be__ps_shard_pull(sh, &m, rep + 4, sizeof(rep) - 4), -EINVAL);
	other = m;
	other.shard = 0;
	ASSERT_EQ(be__ps_shard_pull(sh, &other, rep, sizeof(rep)), -EINVAL);
	len = pt_push(req, sizeof(req), sh->id, 1, 99, 0, 4, keys, grads, 3);
	pt_decode(req, len, &cfg, &m);
	ASSERT_EQ(be__ps_shard_pull(sh, &m, rep, sizeof(rep)), -EINVAL);
	other = m;
	other.shard = 0;
	ASSERT_EQ(be__ps_shard_push(sh, &other), -EINVAL);
	ASSERT_UEQ(sh->version, version);
}

/* A push decoded from an odd address: gradients unaligned. */
static void test_unaligned(struct be__ps_shard *sh)
{
	struct be__ps_msg m;
	float w[4];
	size_t len = pt_push(req + 1, sizeof(req) - 1, sh->id, 1, 50, 0, 4, keys + 3, grads, 1);

	pt_decode(req + 1, len, &cfg, &m);
	ASSERT_OK(be__ps_shard_push(sh, &m));
	be__ps_init_row(&cfg.tables[0], keys[3], w);
	w[0] -= 0.5f * grads[0];
	w[1] -= 0.5f * grads[1];
	w[2] -= 0.5f * grads[2];
	w[3] -= 0.5f * grads[3];
	ASSERT(!memcmp(row_of(sh, 0, keys[3]), w, 16));
}

int main(void)
{
	struct be__ps_shard *sh;

	pt_config(&cfg, cfg_text);
	pt_keys(keys, 5000, 2, 4, 9);
	ASSERT_OK(be__ps_shard_create(&cfg, 2, &sh));
	test_missing(sh);
	test_push_then_pull(sh);
	test_pipeline(sh);
	test_refusals(sh);
	test_unaligned(sh);
	be__ps_shard_destroy(sh);
	be__ps_config_close(&cfg);
	return 0;
}
