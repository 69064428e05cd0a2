/*
 * Check the load generator core of the fetch benchmarks (bench/common/
 * loadgen.c): splitmix64 and the row formula give their documented
 * values; Zipf draws stay in range and follow (r+1)^-alpha for alpha
 * below, at and above 1 (counts within 5 standard deviations of the
 * expectation, fixed seeds, so the test is deterministic); Poisson gaps
 * have the requested mean and the exponential's shape; histogram
 * percentiles are within 0.4 % of the exact nearest-rank sample, merging
 * equals adding, and the exact fields are exact; /proc/PID/stat is parsed
 * even when the command name holds ") ".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "loadgen.h"
#include "test.h"

static void check_splitmix_and_rows(void)
{
	float row[300];

	/* The first output of splitmix64 seeded with 0, as published. */
	ASSERT_UEQ(lg_splitmix64(0), 0xe220a8397b1dcdafull);
	/* Table 3, key 12345: h = 0xaeece0e0cbb13311, fraction 44780/65536. */
	lg_row_fill(3, 12345, 3, row);
	ASSERT(row[0] == 0.68328857421875f);
	ASSERT(row[1] == 1.68328857421875f);
	ASSERT(row[2] == 2.68328857421875f);
	ASSERT(lg_row_check(3, 12345, 3, row));
	ASSERT(!lg_row_check(2, 12345, 3, row));
	ASSERT(!lg_row_check(3, 12346, 3, row));
	lg_row_fill(7, 99, 300, row);
	ASSERT(lg_row_check(7, 99, 300, row));
	row[299] = nextafterf(row[299], 1e9f);
	ASSERT(!lg_row_check(7, 99, 300, row));
	row[299] = NAN;
	ASSERT(!lg_row_check(7, 99, 300, row));
}

/* Draw @draws ranks of Zipf(@n, @alpha); the first @top ranks and the
 * rest as one bin must each be within 5 sigma of their expected count. */
static void check_zipf(uint64_t n, double alpha, int top, uint64_t draws)
{
	struct lg_zipf z;
	struct lg_rng r;
	uint64_t count[16] = { 0 }, rest = 0, i;
	double norm = 0, p;
	int k;

	ASSERT(top <= 16 && (uint64_t)top < n);
	ASSERT_EQ(lg_zipf_init(&z, n, alpha), 0);
	lg_rng_seed(&r, 42 + n);
	for (i = 0; i < draws; i++) {
		uint64_t v = lg_zipf_next(&z, &r);

		ASSERT_LT(v, n);
		if (v < (uint64_t)top)
			count[v]++;
		else
			rest++;
	}
	for (i = 1; i <= n; i++)
		norm += pow((double)i, -alpha);
	double prest = 1;
	for (k = 0; k < top; k++) {
		p = pow(k + 1, -alpha) / norm;
		prest -= p;
		double want = p * (double)draws, sd = sqrt(want * (1 - p));
		if (fabs((double)count[k] - want) > 5 * sd)
			TEST_FAIL("zipf n=%" PRIu64 " alpha=%g: rank %d drawn %" PRIu64
				  " times, want %.0f +- %.0f", n, alpha, k, count[k], want, 5 * sd);
	}
	double want = prest * (double)draws, sd = sqrt(want * (1 - prest));
	if (fabs((double)rest - want) > 5 * sd)
		TEST_FAIL("zipf n=%" PRIu64 " alpha=%g: ranks >= %d drawn %" PRIu64
			  " times, want %.0f +- %.0f", n, alpha, top, rest, want, 5 * sd);
}

static void check_zipf_all(void)
{
	struct lg_zipf z;
	struct lg_rng r;
	int i;

	ASSERT_EQ(lg_zipf_init(&z, 0, 1.0), -EINVAL);
	ASSERT_EQ(lg_zipf_init(&z, 10, 0), -EINVAL);
	ASSERT_EQ(lg_zipf_init(&z, 10, -1), -EINVAL);
	ASSERT_EQ(lg_zipf_init(&z, 10, NAN), -EINVAL);
	ASSERT_EQ(lg_zipf_init(&z, 10, INFINITY), -EINVAL);
	ASSERT_EQ(lg_zipf_init(&z, 1, 1.09), 0);
	lg_rng_seed(&r, 1);
	for (i = 0; i < 1000; i++)
		ASSERT_UEQ(lg_zipf_next(&z, &r), 0);
	check_zipf(2, 1.0, 1, 200000);
	check_zipf(1000, 0.5, 16, 1000000);
	check_zipf(1000, 1.0, 16, 1000000);
	check_zipf(1000, 1.09, 16, 1000000);     /* the ranker's alpha */
	check_zipf(100000, 1.15, 16, 1000000);   /* the trainer's */
	check_zipf(1u << 22, 1.09, 16, 1000000); /* a 2^22-row table */
	check_zipf(1000, 2.5, 8, 1000000);
}

static void check_poisson(void)
{
	struct lg_poisson p;
	uint64_t prev = 1000, t, n = 1000000, i, above = 0;
	double sum = 0, sq = 0, mean, cv, frac;

	ASSERT_EQ(lg_poisson_init(&p, 0, 0, 1), -EINVAL);
	ASSERT_EQ(lg_poisson_init(&p, -5, 0, 1), -EINVAL);
	ASSERT_EQ(lg_poisson_init(&p, 1e6, prev, 7), 0); /* mean gap 1000 ns */
	for (i = 0; i < n; i++) {
		t = lg_poisson_next(&p);
		ASSERT_GE(t, prev);
		double g = (double)(t - prev);
		sum += g;
		sq += g * g;
		above += g > 1000;
		prev = t;
	}
	mean = sum / (double)n;
	cv = sqrt(sq / (double)n - mean * mean) / mean;
	frac = (double)above / (double)n;
	/* Standard error of the mean: 1000 / sqrt(n) = 1 ns; of P(gap > mean)
	 * = e^-1: 0.0005. Rounding to whole ns moves the mean by < 1 ns. */
	if (fabs(mean - 1000) > 6 || fabs(cv - 1) > 0.01 || fabs(frac - exp(-1)) > 0.0025)
		TEST_FAIL("poisson: mean gap %.2f ns (1000), cv %.4f (1), P(gap > mean) %.4f (%.4f)",
			  mean, cv, frac, exp(-1));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void check_hist(void)
{
	static const double qs[] = { 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999 };
	struct lg_hist *h = lg_hist_create(), *a = lg_hist_create(), *b = lg_hist_create();
	size_t n = 200000, i, q;
	uint64_t *v = malloc(n * sizeof(*v)), sum = 0;
	struct lg_rng r;

	ASSERT(h && a && b && v);
	ASSERT_UEQ(lg_hist_pct(h, 0.5), 0);
	ASSERT(lg_hist_avg(h) == 0);
	/* Log-uniform values from 0 to ~2^40 ns, plus the bucket edges. */
	lg_rng_seed(&r, 3);
	for (i = 0; i < n; i++) {
		v[i] = i < 64 ? (uint64_t)1 << (i % 63) : i < 200 ? i :
		       (uint64_t)exp(lg_rng_double(&r) * 40 * M_LN2);
		lg_hist_add(h, v[i]);
		lg_hist_add(i & 1 ? a : b, v[i]);
		sum += v[i];
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	ASSERT_UEQ(h->count, n);
	ASSERT_UEQ(h->sum, sum);
	ASSERT_UEQ(h->min, v[0]);
	ASSERT_UEQ(h->max, v[n - 1]);
	ASSERT_UEQ(lg_hist_pct(h, 0), v[0]);
	ASSERT_UEQ(lg_hist_pct(h, 1), v[n - 1]);
	ASSERT(fabs(lg_hist_avg(h) - (double)sum / (double)n) < 1e-6 * (double)sum / (double)n);
	for (q = 0; q < sizeof(qs) / sizeof(qs[0]); q++) {
		uint64_t want = v[(size_t)ceil(qs[q] * (double)n) - 1], got = lg_hist_pct(h, qs[q]);
		double err = fabs((double)got - (double)want) / (double)want;

		if (err > 1.0 / 256)
			TEST_FAIL("hist: p%g = %" PRIu64 ", exact %" PRIu64 " (error %.4f)",
				  qs[q] * 100, got, want, err);
	}
	/* Small values have a bucket each: exact. */
	lg_hist_reset(a);
	for (i = 1; i <= 100; i++)
		lg_hist_add(a, i);
	ASSERT_UEQ(lg_hist_pct(a, 0.5), 50);
	ASSERT_UEQ(lg_hist_pct(a, 0.99), 99);
	/* Merging the two halves gives the whole. */
	lg_hist_reset(a);
	lg_hist_reset(b);
	for (i = 0; i < n; i++)
		lg_hist_add(i & 1 ? a : b, v[i]);
	lg_hist_merge(a, b);
	ASSERT(!memcmp(a, h, sizeof(*h)));
	/* The largest value fits the last bucket. */
	lg_hist_add(a, UINT64_MAX);
	ASSERT_UEQ(lg_hist_pct(a, 1), UINT64_MAX);
	ASSERT_UEQ(a->sum, UINT64_MAX);
	free(v);
	free(h);
	free(a);
	free(b);
}

static void check_proc_cpu(void)
{
	volatile double x = 0;
	double before, proc, after;
	long hz = sysconf(_SC_CLK_TCK);
	int i;

	for (i = 0; i < 20000000; i++) /* some CPU time to account */
		x += i * 0.5;
	(void)x; /* read: the loop is the point, its sum is not */
	/* A command name with ") " in it must not shift the fields. */
	ASSERT_EQ(prctl(PR_SET_NAME, "a) b 1 2 3)", 0, 0, 0), 0);
	before = lg_proc_cpu_s(0);
	proc = lg_proc_cpu_s(getpid());
	after = lg_proc_cpu_s(0);
	ASSERT(before > 0);
	/* /proc/PID/stat counts whole clock ticks of the same accounting. */
	if (proc < before - 2.0 / (double)hz || proc > after + 1e-6)
		TEST_FAIL("cpu: /proc says %.4f s, getrusage %.4f..%.4f s", proc, before, after);
	ASSERT(lg_proc_cpu_s(0x7ffffff0) < 0); /* no such process */
}

int main(void)
{
	check_splitmix_and_rows();
	check_zipf_all();
	check_poisson();
	check_hist();
	check_proc_cpu();
	return 0;
}
