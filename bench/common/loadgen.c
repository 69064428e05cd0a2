/*
 * loadgen.c - random numbers, open-loop arrivals, the Zipf sampler, the
 * latency histogram and the deterministic rows of the fetch benchmarks
 * (contracts in loadgen.h).
 *
 * The Zipf sampler is the rejection-inversion method of Hörmann and
 * Derflinger ("Rejection-inversion to generate variates from monotone
 * discrete distributions", ACM TOMACS 6(3), 1996), because the obvious
 * alternative, a table of the n cumulative probabilities searched by
 * bisection, costs 8 bytes per key (32 MiB for a 2^22-row table) and a
 * cache miss per level: it would measure the sampler, not the fetch.
 * Rejection-inversion treats the probabilities h(x) = x^-alpha (ranks from
 * 1) as a continuous density, draws x by inverting its integral H, rounds
 * to the nearest rank k, and accepts k unless x fell in the sliver between
 * the continuous and the discrete mass. About 0.2 % of draws are rejected
 * at alpha 1.09 and under 2 % up to alpha 5 (2^22 ranks), so a draw costs
 * a log and an exp or two: 100-200 ns here, which a client with 16k keys
 * per query must still keep off its measured path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"

uint64_t lg_splitmix64(uint64_t x)
{
	uint64_t z = x + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- random numbers -------------------------------------------------- */

/* The generator is the splitmix64 sequence: the state steps by the golden
 * gamma and each output is the finaliser of the previous state. Period
 * 2^64; passes BigCrush; one multiply-xorshift chain per number. */
void lg_rng_seed(struct lg_rng *r, uint64_t seed)
{
	r->state = seed;
}

uint64_t lg_rng_next(struct lg_rng *r)
{
	uint64_t x = r->state;

	r->state += 0x9e3779b97f4a7c15ull;
	return lg_splitmix64(x);
}

double lg_rng_double(struct lg_rng *r)
{
	return (double)(lg_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- open-loop arrivals ---------------------------------------------- */

int lg_poisson_init(struct lg_poisson *p, double rate, uint64_t start_ns, uint64_t seed)
{
	if (!(rate > 0) || !isfinite(rate))
		return -EINVAL;
	lg_rng_seed(&p->rng, seed);
	p->mean_gap_ns = 1e9 / rate;
	p->next_ns = (double)start_ns;
	return 0;
}

/* Exponential gaps by inversion: -ln(1 - U) with U in [0, 1), so the
 * argument of log is in (0, 1] and never 0. The time is kept as a double
 * so rounding to ns does not accumulate (a double holds ns exactly for
 * 104 days). */
uint64_t lg_poisson_next(struct lg_poisson *p)
{
	p->next_ns += -log1p(-lg_rng_double(&p->rng)) * p->mean_gap_ns;
	return (uint64_t)p->next_ns;
}

uint64_t lg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void lg_sleep_until(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- Zipf ------------------------------------------------------------- */

/* log1p(t) / t and expm1(t) / t, continued to 1 at t = 0 without the
 * cancellation the plain quotients suffer near it (alpha close to 1). */
static double zipf_log1p_div(double t)
{
	if (fabs(t) > 1e-8)
		return log1p(t) / t;
	return 1 - t * (0.5 - t / 3);
}

static double zipf_expm1_div(double t)
{
	if (fabs(t) > 1e-8)
		return expm1(t) / t;
	return 1 + t * (0.5 + t / 6);
}

/* h(x) = x^-alpha, the unnormalised probability of rank x (from 1). */
static double zipf_h(const struct lg_zipf *z, double x)
{
	return exp(-z->alpha * log(x));
}

/* H(x) = the integral of h from 1 to x: (x^(1-alpha) - 1) / (1 - alpha),
 * or ln x at alpha = 1; written as ln x * expm1(t) / t, t = (1-alpha) ln x. */
static double zipf_H(const struct lg_zipf *z, double x)
{
	double lx = log(x);

	return zipf_expm1_div((1 - z->alpha) * lx) * lx;
}

/* The inverse of H: x = (1 + (1-alpha) y)^(1/(1-alpha)), or e^y at 1. */
static double zipf_H_inv(const struct lg_zipf *z, double y)
{
	double t = y * (1 - z->alpha);

	if (t < -1) /* rounding at the very top of the range */
		t = -1;
	return exp(zipf_log1p_div(t) * y);
}

int lg_zipf_init(struct lg_zipf *z, uint64_t n, double alpha)
{
	if (!n || !(alpha > 0) || !isfinite(alpha))
		return -EINVAL;
	z->n = n;
	z->alpha = alpha;
	/* The continuous mass of rank 1 is taken as exactly h(1) = 1 (the
	 * interval [1.5 - 1, 1.5]); ranks k >= 2 own [k - 0.5, k + 0.5]. */
	z->h_x1 = zipf_H(z, 1.5) - 1;
	z->h_n = zipf_H(z, (double)n + 0.5);
	/* The paper's squeeze: a draw with k - x <= s is accepted without
	 * evaluating H again. */
	z->s = 2 - zipf_H_inv(z, zipf_H(z, 2.5) - zipf_h(z, 2));
	return 0;
}

uint64_t lg_zipf_next(const struct lg_zipf *z, struct lg_rng *r)
{
	for (;;) {
		double u = z->h_n + lg_rng_double(r) * (z->h_x1 - z->h_n);
		double x = zipf_H_inv(z, u);
		double kd = floor(x + 0.5);
		uint64_t k;

		if (kd < 1)
			kd = 1;
		else if (kd > (double)z->n)
			kd = (double)z->n;
		k = (uint64_t)kd;
		if (kd - x <= z->s || u >= zipf_H(z, kd + 0.5) - zipf_h(z, kd))
			return k - 1;
	}
}

/* ---- latency histogram ----------------------------------------------- */

/* Values below LG_HIST_SUB have a bucket each. Above, a value with its top
 * bit at position e (>= SUB_BITS) goes to group e - SUB_BITS + 1, sub-
 * bucket = the SUB_BITS bits below the top one: buckets are 2^(e-SUB_BITS)
 * wide, at most 1/128 of their lower bound. */
static unsigned hist_index(uint64_t v)
{
	unsigned e, shift;

	if (v < LG_HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	shift = e - LG_HIST_SUB_BITS;
	return ((shift + 1) << LG_HIST_SUB_BITS) | (unsigned)((v >> shift) - LG_HIST_SUB);
}

/* The midpoint of bucket @i. */
static uint64_t hist_value(unsigned i)
{
	unsigned group = i >> LG_HIST_SUB_BITS, shift;
	uint64_t lo;

	if (!group)
		return i;
	shift = group - 1;
	lo = (uint64_t)(LG_HIST_SUB + (i & (LG_HIST_SUB - 1))) << shift;
	return lo + (((uint64_t)1 << shift) - 1) / 2;
}

struct lg_hist *lg_hist_create(void)
{
	struct lg_hist *h = malloc(sizeof(*h));

	if (h)
		lg_hist_reset(h);
	return h;
}

void lg_hist_reset(struct lg_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void lg_hist_add(struct lg_hist *h, uint64_t v)
{
	h->b[hist_index(v)]++;
	h->count++;
	if (__builtin_add_overflow(h->sum, v, &h->sum))
		h->sum = UINT64_MAX;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void lg_hist_merge(struct lg_hist *dst, const struct lg_hist *src)
{
	unsigned i;

	if (!src->count)
		return;
	for (i = 0; i < LG_HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->count += src->count;
	if (__builtin_add_overflow(dst->sum, src->sum, &dst->sum))
		dst->sum = UINT64_MAX;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t lg_hist_pct(const struct lg_hist *h, double q)
{
	uint64_t rank, seen = 0, v;
	unsigned i;

	if (!h->count)
		return 0;
	if (!(q > 0))
		return h->min;
	if (q >= 1)
		return h->max;
	rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < LG_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank)
			break;
	}
	v = hist_value(i < LG_HIST_BUCKETS ? i : LG_HIST_BUCKETS - 1);
	if (v < h->min)
		v = h->min;
	if (v > h->max)
		v = h->max;
	return v;
}

double lg_hist_avg(const struct lg_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0;
}

int lg_hist_write_cdf(const struct lg_hist *h, const char *path)
{
	uint64_t seen = 0, v;
	FILE *f = fopen(path, "w");
	unsigned i;
	int rc;

	if (!f)
		return -errno;
	fprintf(f, "# latency_us fraction_at_or_below (%llu samples)\n",
		(unsigned long long)h->count);
	for (i = 0; i < LG_HIST_BUCKETS && seen < h->count; i++) {
		if (!h->b[i])
			continue;
		seen += h->b[i];
		/* The bucket's midpoint, clamped as lg_hist_pct() does, so the
		 * curve and the reported percentiles agree. */
		v = hist_value(i);
		if (v < h->min)
			v = h->min;
		if (v > h->max)
			v = h->max;
		fprintf(f, "%.3f %.6f\n", (double)v / 1e3, (double)seen / (double)h->count);
	}
	rc = ferror(f) ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

/* ---- rows ------------------------------------------------------------- */

void lg_row_fill(uint32_t table, uint64_t key, uint32_t dim, float *out)
{
	uint64_t h = lg_splitmix64(key ^ lg_splitmix64(table));
	float frac = (float)(h >> 48) / 65536.0f;
	uint32_t j;

	for (j = 0; j < dim; j++)
		out[j] = frac + (float)j;
}

int lg_row_check(uint32_t table, uint64_t key, uint32_t dim, const float *row)
{
	uint64_t h = lg_splitmix64(key ^ lg_splitmix64(table));
	float frac = (float)(h >> 48) / 65536.0f;
	uint32_t j;

	/* Bitwise, not ==, so a NaN in the reply is a mismatch too. */
	for (j = 0; j < dim; j++) {
		float want = frac + (float)j;

		if (memcmp(&want, &row[j], sizeof(want)))
			return 0;
	}
	return 1;
}

/* ---- CPU accounting -------------------------------------------------- */

double lg_proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	struct rusage ru;
	long hz;
	ssize_t n;
	FILE *f;

	if (pid == 0) {
		if (getrusage(RUSAGE_SELF, &ru))
			return -1;
		return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* The command name (field 2) is in parentheses and may hold spaces
	 * or ')': fields are counted after the last ')'. There, field 3
	 * (state) comes first, and utime and stime are fields 14 and 15. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	return (double)(ut + st) / (double)hz;
}
