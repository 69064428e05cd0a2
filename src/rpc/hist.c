/*
 * hist.c - the log-linear latency histogram (the HdrHistogram layout with
 * one significant binary digit group of 6 bits).
 *
 * Values below 64 ns get a bucket each. Above, every power of two
 * [2^k, 2^(k+1)) is cut into 64 equal buckets of width 2^(k-6), so a
 * bucket is never wider than 1/64 of its lower bound. A quantile is read
 * at the middle of the bucket holding its rank, so it is off by at most
 * half a bucket: less than 1/128 (0.8 %) of the true value. 2112 buckets
 * of 8 bytes cover 1 ns to 275 s; adding a value is a count-leading-zeros
 * and an increment, no floating point.
 */
#include "rpc/rpc_int.h"

#define SUB_BITS RPC_HIST_SUB_BITS
#define SUB (1u << SUB_BITS)

/* Lower bound and width of bucket @i. */
static void hist_bucket(uint32_t i, uint64_t *lo, uint64_t *width)
{
	uint32_t k, sub;

	if (i < SUB) {
		*lo = i;
		*width = 1;
		return;
	}
	k = (i - SUB) / SUB + SUB_BITS;
	sub = (i - SUB) % SUB;
	*width = 1ull << (k - SUB_BITS);
	*lo = (1ull << k) + (uint64_t)sub * *width;
}

void be_rpc_hist_add(struct be_rpc_hist *h, uint64_t ns)
{
	be__rpc_hist_add(h, ns);
}

uint64_t be_rpc_hist_quantile(const struct be_rpc_hist *h, double q)
{
	uint64_t rank, seen = 0, lo, width, v;
	uint32_t i;

	if (!h || !h->count || !(q > 0))
		return 0;
	if (q >= 1)
		return h->max_ns;
	rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (!rank)
		rank = 1;
	for (i = 0; i < BE_RPC_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank)
			break;
	}
	if (i == BE_RPC_HIST_BUCKETS)
		return h->max_ns;
	hist_bucket(i, &lo, &width);
	v = lo + width / 2;
	if (v < h->min_ns)
		v = h->min_ns;
	if (v > h->max_ns)
		v = h->max_ns;
	return v;
}
