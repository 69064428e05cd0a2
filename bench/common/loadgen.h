/*
 * loadgen.h - the core of the ranker-like load generators, in plain C so
 * every implementation of the parameter-server fetch (be, kernel TCP, the
 * gRPC baseline in bench/grpc/) draws the same load and reports it the
 * same way.
 *
 * Pieces, each independent of the others:
 *   lg_rng       a 64-bit generator (splitmix64 sequence); seeded, so a
 *                run is reproducible.
 *   lg_poisson   open-loop arrivals: the scheduled send times of a Poisson
 *                process at a given rate. Latency is measured from the
 *                scheduled time, not from when the sender got round to it,
 *                so a stalled client or server shows up as latency instead
 *                of as a quietly lower rate (coordinated omission).
 *                lg_sleep_until() waits for a scheduled time.
 *   lg_zipf      ranks 0..n-1 drawn Zipf(alpha), rank 0 the most frequent:
 *                P(rank r) is proportional to 1 / (r + 1)^alpha. O(1) time
 *                and memory per draw for any n and alpha > 0.
 *   lg_hist      a log-linear latency histogram of integer values (ns):
 *                128 linear sub-buckets per power of two, so a percentile
 *                is within 0.4 % of the true sample; mergeable across
 *                threads; count, sum, min and max are exact.
 *   lg_row_*     the deterministic embedding rows every fetch server
 *                serves and every client can verify (formula below).
 *   lg_proc_cpu_s  user + system CPU seconds of a process.
 *
 * Threads: none of these objects is shared; give each thread its own and
 * merge histograms at the end. Nothing here allocates except
 * lg_hist_create().
 */
#ifndef BE_BENCH_LOADGEN_H
#define BE_BENCH_LOADGEN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- random numbers -------------------------------------------------- */

/*
 * lg_splitmix64() - the splitmix64 finaliser (Steele, Lea, Flood 2014):
 *   z = x + 0x9e3779b97f4a7c15
 *   z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
 *   z = (z ^ (z >> 27)) * 0x94d049bb133111eb
 *   return z ^ (z >> 31)
 * (all arithmetic modulo 2^64). A bijection of 64-bit integers.
 */
uint64_t lg_splitmix64(uint64_t x);

struct lg_rng {
	uint64_t state;
};

void lg_rng_seed(struct lg_rng *r, uint64_t seed);
uint64_t lg_rng_next(struct lg_rng *r);
/* A double uniform in [0, 1), 53 random bits. */
double lg_rng_double(struct lg_rng *r);

/* ---- open-loop arrivals ---------------------------------------------- */

struct lg_poisson {
	struct lg_rng rng;
	double mean_gap_ns; /* 1e9 / rate */
	double next_ns;     /* the last scheduled time, as a double */
};

/*
 * lg_poisson_init() - arrivals at @rate per second on average, starting
 * after @start_ns (any clock, in ns; the first arrival is one random gap
 * after it). Returns 0, or -EINVAL if @rate is not > 0.
 */
int lg_poisson_init(struct lg_poisson *p, double rate, uint64_t start_ns, uint64_t seed);

/* lg_poisson_next() - the next scheduled time in ns (never decreasing). */
uint64_t lg_poisson_next(struct lg_poisson *p);

/* lg_now_ns() - CLOCK_MONOTONIC in ns, the clock of the schedule. */
uint64_t lg_now_ns(void);

/*
 * lg_sleep_until() - sleep until CLOCK_MONOTONIC reaches @ns (returns at
 * once if it has). It sleeps rather than spins, so on a loaded host the
 * wakeup comes late: measure latency from @ns, never from the wakeup, and
 * report the lag (the time sent minus @ns) beside it.
 */
void lg_sleep_until(uint64_t ns);

/* ---- Zipf ------------------------------------------------------------- */

struct lg_zipf {
	uint64_t n;
	double alpha;
	double h_x1, h_n, s; /* constants of the rejection-inversion method */
};

/*
 * lg_zipf_init() - ranks 0..@n-1 with P(r) proportional to (r+1)^-@alpha.
 * Returns 0, or -EINVAL if @n is 0 or @alpha is not > 0 (or not finite).
 */
int lg_zipf_init(struct lg_zipf *z, uint64_t n, double alpha);

/* lg_zipf_next() - one rank in [0, n), drawn with @r. */
uint64_t lg_zipf_next(const struct lg_zipf *z, struct lg_rng *r);

/* ---- latency histogram ----------------------------------------------- */

#define LG_HIST_SUB_BITS 7 /* 128 sub-buckets per power of two */
#define LG_HIST_SUB (1u << LG_HIST_SUB_BITS)
#define LG_HIST_BUCKETS ((64 - LG_HIST_SUB_BITS + 1) * LG_HIST_SUB)

struct lg_hist {
	uint64_t count;
	uint64_t sum; /* of the values; saturates at UINT64_MAX */
	uint64_t min, max;
	uint64_t b[LG_HIST_BUCKETS];
};

/* lg_hist_create() - a zeroed histogram on the heap (it is ~59 KiB), or
 * NULL. Free with free(). lg_hist_reset() zeroes one in place. */
struct lg_hist *lg_hist_create(void);
void lg_hist_reset(struct lg_hist *h);

void lg_hist_add(struct lg_hist *h, uint64_t v);
/* lg_hist_merge() - add every value of @src to @dst. */
void lg_hist_merge(struct lg_hist *dst, const struct lg_hist *src);

/*
 * lg_hist_pct() - the value of nearest rank ceil(@q * count) (q in [0, 1]),
 * as the midpoint of its bucket clamped to [min, max]: within 0.4 % of
 * the sample itself. 0 when the histogram is empty.
 */
uint64_t lg_hist_pct(const struct lg_hist *h, double q);
/* lg_hist_avg() - the exact mean (0 when empty). */
double lg_hist_avg(const struct lg_hist *h);

/*
 * lg_hist_write_cdf() - the histogram's cumulative distribution into the
 * file @path (created or truncated), for a plot: a comment line, then one
 * line "latency_us fraction" per non-empty bucket, latency the bucket's
 * value as lg_hist_pct() gives it (ns / 1e3), fraction the share of values
 * at or below it (the last line 1). Values are ns as added. Returns 0 or a
 * negative errno.
 */
int lg_hist_write_cdf(const struct lg_hist *h, const char *path);

/* ---- the embedding rows of the fetch benchmarks ---------------------- */

/*
 * Row @key of table @table, dimension dim, element j (0 <= j < dim):
 *
 *   seed     = lg_splitmix64((uint64_t)table)
 *   h        = lg_splitmix64(key ^ seed)
 *   value[j] = (float)(h >> 48) / 65536.0f + (float)j
 *
 * computed in IEEE single precision (float + float, round to nearest). The
 * fraction has 16 bits, so for j < 256 every value is exact and any
 * language gets the same bits; beyond that the single-precision sum is
 * still deterministic. A server fills its tables with lg_row_fill() (or
 * computes rows on demand); a client checks what it got with
 * lg_row_check().
 */
void lg_row_fill(uint32_t table, uint64_t key, uint32_t dim, float *out);

/* lg_row_check() - 1 if @row (@dim floats) is row @key of @table, else 0. */
int lg_row_check(uint32_t table, uint64_t key, uint32_t dim, const float *row);

/* ---- CPU accounting -------------------------------------------------- */

/*
 * lg_proc_cpu_s() - user + system CPU seconds used so far by every thread
 * of process @pid (0: this process, from getrusage(); others from
 * /proc/PID/stat, clock-tick resolution). Returns a negative value if the
 * process cannot be read (it exited, or is not ours to see).
 */
double lg_proc_cpu_s(pid_t pid);

#ifdef __cplusplus
}
#endif

#endif /* BE_BENCH_LOADGEN_H */
