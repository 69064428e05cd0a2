/*
 * Check the store of one table: every inserted key is found with its own
 * values through many doublings of the index (keys 0, UINT64_MAX, runs of
 * consecutive keys and keys one bit apart among random ones), absent keys
 * are not found, adding an existing key finds it, rows never move, the
 * row stride and memory accounting are as documented, and max_rows is
 * enforced with -ENOSPC without disturbing what is there.
 */
#include "pstest.h"

#define N 200000u

static const char *cfg_text =
	"shards 1\n"
	"table t dim=16 optimizer=adagrad lr=0.1 init=zeros\n"
	"table s dim=3 optimizer=sgd lr=0.1 init=zeros\n"
	"table f dim=5 optimizer=ftrl lr=0.1 init=zeros max_rows=100\n";

static uint64_t key_of(uint32_t i)
{
	uint64_t s = i;

	if (i == 0)
		return 0;
	if (i == 1)
		return UINT64_MAX;
	if (i < 1000)
		return 1000000 + i;                /* a run */
	if (i < 1064)
		return 1ull << (i - 1000);         /* one bit apart */
	return pt_rand(&s) | (1ull << 63); /* random, away from the others */
}

static void fill(float *w, uint64_t key)
{
	uint32_t d;

	for (d = 0; d < 16; d++)
		w[d] = (float)(key % 1000003) + (float)d;
}

static void test_many(const struct be__ps_config *c)
{
	struct be__ps_store st;
	struct be__ps_store_mem mem;
	uint8_t *row0 = NULL;
	float want[16];
	uint32_t i, r;

	ASSERT_OK(be__ps_store_init(&st, &c->tables[0]));
	ASSERT_EQ(st.row_bytes, 80); /* 8 + 4 * (16 + 1) = 76, padded to 8 */
	for (i = 0; i < N; i++) {
		ASSERT_EQ(be__ps_store_add(&st, key_of(i), &r), 1);
		ASSERT_EQ(r, i);
		fill(be__ps_row_values(be__ps_store_row(&st, r)), key_of(i));
		be__ps_row_state(&st, be__ps_store_row(&st, r))[0] = (float)i;
		if (i == 0)
			row0 = be__ps_store_row(&st, 0);
	}
	ASSERT_PTR_EQ(be__ps_store_row(&st, 0), row0);
	ASSERT_UEQ(st.rows, N);
	for (i = 0; i < N; i++) {
		uint8_t *row;

		r = be__ps_store_find(&st, key_of(i));
		ASSERT_EQ(r, i);
		row = be__ps_store_row(&st, r);
		ASSERT_UEQ(be__ps_row_key(row), key_of(i));
		fill(want, key_of(i));
		ASSERT(!memcmp(be__ps_row_values(row), want, sizeof(want)));
		ASSERT(be__ps_row_state(&st, row)[0] == (float)i);
		ASSERT_EQ(be__ps_store_add(&st, key_of(i), &r), 0);
		ASSERT_EQ(r, i);
	}
	for (i = 0; i < 100000; i++)
		ASSERT_EQ(be__ps_store_find(&st, 3000000000u + (uint64_t)i), BE_PS_NO_ROW);
	be__ps_store_mem(&st, &mem);
	ASSERT_UEQ(mem.rows, N);
	ASSERT_UEQ(mem.row_bytes, (uint64_t)N * 80);
	ASSERT_GE(mem.slab_bytes, mem.row_bytes);
	ASSERT_LT(mem.slab_bytes - mem.row_bytes, st.slab_bytes);
	ASSERT_LE(st.slab_bytes, 2u << 20);
	ASSERT_UEQ(mem.index_bytes, st.cap * 8);
	ASSERT_EQ(st.cap & (st.cap - 1), 0);
	ASSERT_LE((uint64_t)N * 4, st.cap * 3);     /* at most 3/4 full */
	ASSERT_GT((uint64_t)N * 8, st.cap * 3);     /* and not needlessly large */
	be__ps_store_close(&st);
}

static void test_strides(const struct be__ps_config *c)
{
	struct be__ps_store s, f;

	ASSERT_OK(be__ps_store_init(&s, &c->tables[1]));
	ASSERT_OK(be__ps_store_init(&f, &c->tables[2]));
	ASSERT_EQ(s.row_bytes, 24); /* 8 + 12 -> 24 */
	ASSERT_EQ(s.state_floats, 0);
	ASSERT_EQ(f.row_bytes, 72); /* 8 + 4 * (5 + 10) = 68 -> 72 */
	ASSERT_EQ(f.state_floats, 10);
	be__ps_store_close(&s);
	be__ps_store_close(&f);
}

static void test_max_rows(const struct be__ps_config *c)
{
	struct be__ps_store st;
	uint32_t i, r;

	ASSERT_OK(be__ps_store_init(&st, &c->tables[2]));
	ASSERT_EQ(be__ps_store_reserve(&st, 101), -ENOSPC);
	ASSERT_EQ(be__ps_store_reserve(&st, UINT64_MAX), -ENOSPC);
	ASSERT_OK(be__ps_store_reserve(&st, 100));
	for (i = 0; i < 100; i++)
		ASSERT_EQ(be__ps_store_add(&st, 7 * (uint64_t)i, &r), 1);
	ASSERT_EQ(be__ps_store_add(&st, 1, &r), -ENOSPC);
	ASSERT_EQ(be__ps_store_reserve(&st, 1), -ENOSPC);
	ASSERT_OK(be__ps_store_reserve(&st, 0));
	ASSERT_EQ(be__ps_store_add(&st, 7 * 99, &r), 0);
	ASSERT_EQ(r, 99);
	ASSERT_UEQ(st.rows, 100);
	ASSERT_EQ(be__ps_store_find(&st, 1), BE_PS_NO_ROW);
	be__ps_store_close(&st);
}

int main(void)
{
	struct be__ps_config c;

	pt_config(&c, cfg_text);
	test_many(&c);
	test_strides(&c);
	test_max_rows(&c);
	be__ps_config_close(&c);
	return 0;
}
