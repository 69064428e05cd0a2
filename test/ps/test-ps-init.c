/*
 * Check the initializers: a uniform row depends only on (seed, key) (two
 * tables with the same seed agree, as replicas must; another seed or key
 * differs), lies in [lo, hi], matches the formula of docs/PS.md computed
 * here independently, and has a plausible mean and spread; zeros are
 * zeros. A missing key answers the initializer's value, or under
 * inference the table's configured default when it has one.
 */
#include <math.h>

#include "pstest.h"

static const char *cfg_text =
	"shards 4\n"
	"table a dim=32 optimizer=sgd lr=0.1 init=uniform lo=-0.5 hi=0.25 seed=7\n"
	"table b dim=32 optimizer=sgd lr=0.1 init=uniform lo=-0.5 hi=0.25 seed=7\n"
	"table c dim=32 optimizer=sgd lr=0.1 init=uniform lo=-0.5 hi=0.25 seed=8\n"
	"table z dim=8 optimizer=adagrad lr=0.1 init=zeros missing=0.75\n"
	"table u dim=8 optimizer=sgd lr=0.1 init=uniform lo=0 hi=1 missing=-2\n";

static void test_uniform(const struct be__ps_config *c)
{
	const struct be__ps_table *a = &c->tables[0], *b = &c->tables[1], *cc = &c->tables[2];
	float wa[32], wb[32], wc[32], wk[32];
	double sum = 0, sq = 0;
	uint64_t key, n = 0;
	uint32_t i;

	for (key = 0; key < 2000; key++) {
		uint64_t k = key * 0x9e3779b97f4a7c15ull ^ (key << 7);
		uint64_t s = be__ps_mix64(k ^ 7);

		be__ps_init_row(a, k, wa);
		be__ps_init_row(b, k, wb);
		be__ps_init_row(cc, k, wc);
		be__ps_init_row(a, k + 1, wk);
		ASSERT(!memcmp(wa, wb, sizeof(wa)));
		ASSERT(memcmp(wa, wc, sizeof(wa)));
		ASSERT(memcmp(wa, wk, sizeof(wa)));
		for (i = 0; i < 32; i++) {
			uint64_t z = be__ps_mix64(s + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
			float want = (float)(-0.5 + 0.75 * ((double)(z >> 40) / 16777216.0));

			ASSERT(wa[i] == want);
			ASSERT(wa[i] >= -0.5f && wa[i] <= 0.25f);
			sum += wa[i];
			sq += (double)wa[i] * wa[i];
			n++;
		}
	}
	/* Uniform on [-0.5, 0.25]: mean -0.125, variance 0.75^2 / 12. */
	sum /= (double)n;
	sq = sq / (double)n - sum * sum;
	ASSERT(fabs(sum + 0.125) < 0.01);
	ASSERT(fabs(sq - 0.75 * 0.75 / 12) < 0.005);
}

static void test_zeros_and_missing(const struct be__ps_config *c)
{
	const struct be__ps_table *z = &c->tables[3], *u = &c->tables[4], *a = &c->tables[0];
	float w[32], init[32];
	uint32_t i;

	for (i = 0; i < 8; i++)
		w[i] = 9;
	be__ps_init_row(z, 42, w);
	for (i = 0; i < 8; i++)
		ASSERT(w[i] == 0.0f);
	/* Training pulls get the initializer; inference the default. */
	ASSERT_EQ(be__ps_missing_row(z, 42, false, w), 0);
	for (i = 0; i < 8; i++)
		ASSERT(w[i] == 0.0f);
	ASSERT_EQ(be__ps_missing_row(z, 42, true, w), 1);
	for (i = 0; i < 8; i++)
		ASSERT(w[i] == 0.75f);
	ASSERT_EQ(be__ps_missing_row(u, 5, true, w), 1);
	ASSERT(w[0] == -2.0f && w[7] == -2.0f);
	be__ps_init_row(u, 5, init);
	ASSERT_EQ(be__ps_missing_row(u, 5, false, w), 0);
	ASSERT(!memcmp(w, init, 8 * sizeof(float)));
	/* Policy init: inference gets the initializer too. */
	be__ps_init_row(a, 5, init);
	ASSERT_EQ(be__ps_missing_row(a, 5, true, w), 0);
	ASSERT(!memcmp(w, init, sizeof(init)));
}

int main(void)
{
	struct be__ps_config c;

	pt_config(&c, cfg_text);
	test_uniform(&c);
	test_zeros_and_missing(&c);
	be__ps_config_close(&c);
	return 0;
}
