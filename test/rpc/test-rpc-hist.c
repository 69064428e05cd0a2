/*
 * Check the latency histogram: quantiles of sample sets (uniform,
 * log-uniform over six decades, a bimodal tail, constant, tiny values)
 * are within 1 % of the exact nearest-rank quantile of the sorted
 * samples, for p50, p90, p99 and p99.9; min, max, count and sum are
 * exact; an empty histogram answers 0. (Values from 2^38 ns, 275 s,
 * share the last bucket: rpc.h.)
 */
#include <math.h>
#include <string.h>

#include "rtest.h"

#define N 200000

static uint64_t rnd = 0x9e3779b97f4a7c15ull;

static uint64_t xr(void)
{
	return test_rand(&rnd);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t v[N];

static void check(const char *name, int n)
{
	static const double qs[] = { 0.5, 0.9, 0.99, 0.999 };
	static struct be_rpc_hist h;
	uint64_t sum = 0;
	unsigned int i;

	memset(&h, 0, sizeof(h));
	for (i = 0; i < (unsigned int)n; i++) {
		be_rpc_hist_add(&h, v[i]);
		sum += v[i];
	}
	qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
	ASSERT_UEQ(h.count, (uint64_t)n);
	ASSERT_UEQ(h.sum_ns, sum);
	ASSERT_UEQ(h.min_ns, v[0]);
	ASSERT_UEQ(h.max_ns, v[n - 1]);
	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t rank = (uint64_t)ceil(qs[i] * n), exact = v[rank - 1];
		uint64_t got = be_rpc_hist_quantile(&h, qs[i]);
		double err = fabs((double)got - (double)exact) / (double)exact;

		if (err > 0.01)
			TEST_FAIL("%s p%g: %llu vs exact %llu (%.3f %%)", name, qs[i] * 100,
				  (unsigned long long)got, (unsigned long long)exact, err * 100);
	}
	ASSERT_UEQ(be_rpc_hist_quantile(&h, 1.0), v[n - 1]);
}

int main(void)
{
	struct be_rpc_hist e;
	int i;

	memset(&e, 0, sizeof(e));
	ASSERT_UEQ(be_rpc_hist_quantile(&e, 0.5), 0);
	for (i = 0; i < N; i++)
		v[i] = 1000 + xr() % 1000000;
	check("uniform", N);
	for (i = 0; i < N; i++)
		v[i] = (uint64_t)pow(10.0, 2.0 + 6.0 * (double)(xr() % 1000000) / 1e6);
	check("log-uniform", N);
	for (i = 0; i < N; i++)
		v[i] = i % 100 == 0 ? 50000000 + xr() % 1000000 : 20000 + xr() % 3000;
	check("bimodal", N);
	for (i = 0; i < 1000; i++)
		v[i] = 123456;
	check("constant", 1000);
	for (i = 0; i < N; i++)
		v[i] = 1 + xr() % 200;
	check("tiny", N);
	for (i = 0; i < 10; i++)
		v[i] = ((uint64_t)1 << (28 + i)) + (uint64_t)i * 12345;
	check("huge", 10);
	return 0;
}
