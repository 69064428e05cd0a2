/*
 * Check exactly-once pushes. The window alone: a retry is recognised, a
 * push overtaken by later ones is applied once, 63 below the highest is
 * still remembered and 64 below is refused (-ERANGE), a jump of more
 * than the window forgets nothing that was applied, a full table refuses
 * a new trainer until an entry has been idle for evict_idle pushes and
 * then evicts the least recently active one, restore refuses bad entries,
 * and a random run against a naive model agrees (which exercises the
 * table's deletions). Through a shard: a retried and a hedged push change
 * a row once, reordered pushes all apply, a too-old one does not, a push
 * refused for max_rows applies nothing and records nothing, and after a
 * restart from a checkpoint the window is still there.
 */
#include <math.h>

#include "pstest.h"

static const struct be__ps_dedup_cfg dcfg = { .max_trainers = 1024, .evict_idle = 1u << 20 };

static void apply(struct be__ps_dedup *d, uint64_t t, uint64_t seq, uint64_t *now)
{
	ASSERT_EQ(be__ps_dedup_check(d, t, seq, *now), 0);
	be__ps_dedup_commit(d, t, seq, ++*now);
	ASSERT_EQ(be__ps_dedup_check(d, t, seq, *now), -EALREADY);
}

static void test_window(void)
{
	struct be__ps_dedup d;
	uint64_t now = 0, s;

	ASSERT_OK(be__ps_dedup_init(&d, &dcfg));
	ASSERT_EQ(be__ps_dedup_check(&d, 0, 1, now), -EINVAL);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 0, now), -EINVAL);
	/* Reordered: 5, 3, 4, 2, 1 all apply once. */
	apply(&d, 5, 5, &now);
	apply(&d, 5, 3, &now);
	apply(&d, 5, 4, &now);
	apply(&d, 5, 2, &now);
	apply(&d, 5, 1, &now);
	for (s = 1; s <= 5; s++)
		ASSERT_EQ(be__ps_dedup_check(&d, 5, s, now), -EALREADY);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 6, now), 0);
	/* Window edges: hi 100; 37 = 100 - 63 is remembered, 36 is not. */
	apply(&d, 5, 100, &now);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 37, now), 0);
	apply(&d, 5, 37, &now);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 36, now), -ERANGE);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 5, now), -ERANGE);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 99, now), 0);
	/* Jump ahead: 164 moves the window past 100 exactly to its edge. */
	apply(&d, 5, 164, &now);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 101, now), 0);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 100, now), -ERANGE);
	apply(&d, 5, 163 + 64 + 1000, &now);
	ASSERT_EQ(be__ps_dedup_check(&d, 5, 164, now), -ERANGE);
	/* Other trainers are independent. */
	ASSERT_EQ(be__ps_dedup_check(&d, 6, 1, now), 0);
	ASSERT_EQ(be__ps_dedup_check(&d, 6, 164, now), 0);
	ASSERT_EQ(d.count, 1);
	be__ps_dedup_close(&d);
}

static void test_full(void)
{
	struct be__ps_dedup_cfg small = { .max_trainers = 4, .evict_idle = 10 };
	struct be__ps_dedup d;
	uint64_t now = 0, t;

	ASSERT_OK(be__ps_dedup_init(&d, &small));
	for (t = 1; t <= 4; t++)
		apply(&d, t, 1, &now); /* trainer t last active at now = t */
	ASSERT_EQ(be__ps_dedup_check(&d, 99, 1, now), -ENOSPC);
	/* Keep 2..4 busy; trainer 1 idles. */
	while (now < 11) {
		for (t = 2; t <= 4 && now < 11; t++)
			apply(&d, t, now + 1, &now);
	}
	ASSERT_EQ(be__ps_dedup_check(&d, 99, 1, now), 0); /* 1 idle for 10 */
	be__ps_dedup_commit(&d, 99, 1, ++now);
	ASSERT_UEQ(d.evictions, 1);
	ASSERT_EQ(d.count, 4);
	ASSERT_EQ(be__ps_dedup_check(&d, 99, 1, now), -EALREADY);
	for (t = 2; t <= 4; t++)
		ASSERT_EQ(be__ps_dedup_check(&d, t, 1, now), -EALREADY);
	/* Trainer 1 was forgotten: it is a new trainer now. */
	ASSERT_EQ(be__ps_dedup_check(&d, 1, 1, now), -ENOSPC);
	be__ps_dedup_close(&d);
}

static void test_restore(void)
{
	struct be__ps_dedup_cfg small = { .max_trainers = 2, .evict_idle = 10 };
	struct be__ps_dedup d;
	struct be__ps_dedup_entry e = { .trainer = 3, .hi = 10, .map = 0x201, .last = 4 };

	ASSERT_OK(be__ps_dedup_init(&d, &small));
	ASSERT_OK(be__ps_dedup_restore(&d, &e));
	ASSERT_EQ(be__ps_dedup_check(&d, 3, 10, 5), -EALREADY);
	ASSERT_EQ(be__ps_dedup_check(&d, 3, 1, 5), -EALREADY);
	ASSERT_EQ(be__ps_dedup_check(&d, 3, 2, 5), 0);
	ASSERT_EQ(be__ps_dedup_restore(&d, &e), -EBADMSG); /* twice */
	e.trainer = 0;
	ASSERT_EQ(be__ps_dedup_restore(&d, &e), -EBADMSG);
	e = (struct be__ps_dedup_entry){ .trainer = 4, .hi = 10, .map = 0x400 };
	ASSERT_EQ(be__ps_dedup_restore(&d, &e), -EBADMSG); /* hi not applied */
	e.map = 0x401;
	ASSERT_EQ(be__ps_dedup_restore(&d, &e), -EBADMSG); /* bit for seq 0 */
	e = (struct be__ps_dedup_entry){ .trainer = 4, .hi = 0, .map = 1 };
	ASSERT_EQ(be__ps_dedup_restore(&d, &e), -EBADMSG);
	e = (struct be__ps_dedup_entry){ .trainer = 4, .hi = 1000, .map = ~0ull };
	ASSERT_OK(be__ps_dedup_restore(&d, &e));
	e.trainer = 5;
	ASSERT_EQ(be__ps_dedup_restore(&d, &e), -ENOSPC);
	be__ps_dedup_close(&d);
}

/* A naive model: an array of entries, linear search, evict the least
 * recently active one. */
struct model {
	struct be__ps_dedup_entry e[64];
	int n;
};

static struct be__ps_dedup_entry *model_find(struct model *m, uint64_t t)
{
	int i;

	for (i = 0; i < m->n; i++)
		if (m->e[i].trainer == t)
			return &m->e[i];
	return NULL;
}

static int model_check(struct model *m, uint64_t t, uint64_t seq)
{
	struct be__ps_dedup_entry *e = model_find(m, t);

	if (!e)
		return m->n < 64 ? 0 : 0; /* evict_idle 0: always room */
	if (seq > e->hi)
		return 0;
	if (e->hi - seq >= 64)
		return -ERANGE;
	return (e->map >> (e->hi - seq)) & 1 ? -EALREADY : 0;
}

static void model_commit(struct model *m, uint64_t t, uint64_t seq, uint64_t now)
{
	struct be__ps_dedup_entry *e = model_find(m, t);
	int i, lru = 0;

	if (!e) {
		if (m->n == 64) {
			for (i = 1; i < 64; i++)
				if (m->e[i].last < m->e[lru].last)
					lru = i;
			m->e[lru] = m->e[--m->n];
		}
		e = &m->e[m->n++];
		*e = (struct be__ps_dedup_entry){ .trainer = t, .hi = seq, .map = 1 };
	} else if (seq > e->hi) {
		e->map = seq - e->hi >= 64 ? 1 : (e->map << (seq - e->hi)) | 1;
		e->hi = seq;
	} else {
		e->map |= 1ull << (e->hi - seq);
	}
	e->last = now;
}

static void test_model(void)
{
	struct be__ps_dedup_cfg cfg = { .max_trainers = 64, .evict_idle = 0 };
	struct model m = { .n = 0 };
	uint64_t hi[200] = { 0 }, now = 0, st = 3;
	struct be__ps_dedup d;
	int i;

	ASSERT_OK(be__ps_dedup_init(&d, &cfg));
	for (i = 0; i < 300000; i++) {
		uint64_t r = pt_rand(&st), t = 1 + r % 200, seq;
		int want, got;

		/* Mostly new seqs a little ahead, some retries, some old. */
		switch ((r >> 16) % 8) {
		case 0:
			seq = hi[t - 1] + 1 + (r >> 24) % 100;
			break;
		case 1: case 2:
			seq = hi[t - 1] > 80 ? hi[t - 1] - (r >> 24) % 80 : 1 + (r >> 24) % 5;
			break;
		default:
			seq = hi[t - 1] + 1 + (r >> 24) % 3;
			break;
		}
		want = model_check(&m, t, seq);
		got = be__ps_dedup_check(&d, t, seq, now);
		ASSERT_EQ(got, want);
		if (!got) {
			now++;
			be__ps_dedup_commit(&d, t, seq, now);
			model_commit(&m, t, seq, now);
			if (seq > hi[t - 1])
				hi[t - 1] = seq;
		}
		ASSERT_EQ(d.count, (uint32_t)m.n);
	}
	be__ps_dedup_close(&d);
}

/* ---- through a shard ---- */

static const char *cfg_text =
	"shards 8\n"
	"dedup trainers=16 idle=1000\n"
	"table t dim=4 optimizer=sgd lr=0.5 init=uniform lo=-1 hi=1 max_rows=3\n";

static uint8_t buf[1 << 16];

static int push(struct be__ps_shard *sh, uint64_t trainer, uint64_t seq, const uint64_t *keys,
		uint32_t n, float g)
{
	float grads[16];
	struct be__ps_msg m;
	size_t len;
	uint32_t i;

	for (i = 0; i < 4 * n; i++)
		grads[i] = g;
	len = pt_push(buf, sizeof(buf), sh->id, trainer, seq, 0, 4, keys, grads, n);
	pt_decode(buf, len, sh->cfg, &m);
	return be__ps_shard_push(sh, &m);
}

/* Row value of coordinate 0 of @key, or NAN when the row is absent. */
static float value(struct be__ps_shard *sh, uint64_t key)
{
	uint32_t r = be__ps_store_find(&sh->stores[0], key);

	return r == BE_PS_NO_ROW ? NAN : be__ps_row_values(be__ps_store_row(&sh->stores[0], r))[0];
}

static void test_shard(void)
{
	struct be__ps_config c;
	struct be__ps_shard *sh, *back;
	struct be__ps_msg m1, m2;
	uint64_t keys[4];
	float w0[4], want;
	char dir[256];
	const char *why;
	size_t len;
	uint64_t s;

	pt_config(&c, cfg_text);
	ASSERT_OK(be__ps_shard_create(&c, 3, &sh));
	pt_keys(keys, 4, 3, 8, 1);
	be__ps_init_row(&c.tables[0], keys[0], w0);

	/* Applied once; its retry is recognised and changes nothing. */
	ASSERT_EQ(push(sh, 77, 1, keys, 1, 1.0f), 0);
	want = w0[0] - 0.5f;
	ASSERT(value(sh, keys[0]) == want);
	ASSERT_EQ(push(sh, 77, 1, keys, 1, 1.0f), -EALREADY);
	ASSERT(value(sh, keys[0]) == want);
	ASSERT_UEQ(sh->version, 1);
	ASSERT_UEQ(sh->stats.push_dups, 1);

	/* A hedge: two copies of one request, decoded separately. */
	{
		float g[4] = { 2, 2, 2, 2 };

		len = pt_push(buf, sizeof(buf), 3, 77, 2, 0, 4, keys, g, 1);
		pt_decode(buf, len, &c, &m1);
		pt_decode(buf, len, &c, &m2);
		ASSERT_EQ(be__ps_shard_push(sh, &m1), 0);
		ASSERT_EQ(be__ps_shard_push(sh, &m2), -EALREADY);
		want -= 1.0f;
		ASSERT(value(sh, keys[0]) == want);
	}

	/* Reordered: 5, 3, 4 all apply once. */
	ASSERT_EQ(push(sh, 77, 5, keys, 1, 0.25f), 0);
	ASSERT_EQ(push(sh, 77, 3, keys, 1, 0.25f), 0);
	ASSERT_EQ(push(sh, 77, 4, keys, 1, 0.25f), 0);
	ASSERT_EQ(push(sh, 77, 3, keys, 1, 0.25f), -EALREADY);
	want -= 0.125f; /* three steps, rounded as the shard rounds them */
	want -= 0.125f;
	want -= 0.125f;
	ASSERT(value(sh, keys[0]) == want);

	/* Too old: after seq 70, seq 6 is outside the window. */
	ASSERT_EQ(push(sh, 77, 70, keys, 1, 0.0f), 0);
	ASSERT_EQ(push(sh, 77, 6, keys, 1, 1.0f), -ERANGE);
	ASSERT(value(sh, keys[0]) == want);
	ASSERT_UEQ(sh->stats.push_too_old, 1);

	/* All or nothing: max_rows 3, this push needs 3 new rows: refused,
	 * nothing applied to the existing row, seq not recorded. */
	ASSERT_EQ(push(sh, 77, 71, keys, 4, 1.0f), -ENOSPC);
	ASSERT(value(sh, keys[0]) == want);
	ASSERT(isnan(value(sh, keys[1])));
	ASSERT_EQ(be__ps_dedup_check(&sh->dedup, 77, 71, sh->version), 0);
	ASSERT_EQ(push(sh, 77, 71, keys, 3, 1.0f), 0);
	want -= 0.5f;
	ASSERT(value(sh, keys[0]) == want);
	ASSERT_UEQ(sh->stores[0].rows, 3);

	/* Restart: the window survives the checkpoint. */
	pt_tmpdir(dir, sizeof(dir));
	ASSERT_OK(be__ps_ckpt_save(sh, dir, &why));
	ASSERT_OK(be__ps_ckpt_load(&c, 3, dir, &back, &why));
	ASSERT_UEQ(back->version, sh->version);
	/* 71 is the highest: 8 .. 71 are remembered, 1 .. 7 too old. */
	for (s = 1; s <= 8; s++)
		ASSERT_EQ(push(back, 77, s, keys, 1, 1.0f), s == 8 ? 0 : -ERANGE);
	ASSERT_EQ(push(back, 77, 8, keys, 1, 1.0f), -EALREADY);
	want -= 0.5f;
	ASSERT_EQ(push(back, 77, 70, keys, 1, 1.0f), -EALREADY);
	ASSERT_EQ(push(back, 77, 71, keys, 1, 1.0f), -EALREADY);
	ASSERT(value(back, keys[0]) == want);
	ASSERT_EQ(push(back, 77, 72, keys, 1, 1.0f), 0);
	ASSERT(value(back, keys[0]) == want - 0.5f);
	ASSERT_EQ(push(back, 77, 69, keys, 1, 0.0f), 0); /* never sent before */
	be__ps_shard_destroy(back);
	be__ps_shard_destroy(sh);
	pt_rmdir(dir);
	be__ps_config_close(&c);
}

int main(void)
{
	test_window();
	test_full();
	test_restore();
	test_model();
	test_shard();
	return 0;
}
