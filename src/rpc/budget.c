/*
 * budget.c - the retry budget of a channel: retries and hedges together,
 * over a sliding window of one second.
 *
 * Rule: within the window, retries + hedges <= retry_budget_pct % of the
 * calls started in it + retry_budget_min. The percentage keeps a failing
 * replica set from multiplying its load (with 10 %, a set where every
 * call fails carries at most 1.1x the calls, never 3x as max_attempts
 * would allow); the floor lets a channel with little traffic still
 * retry. The window is ten buckets of 100 ms: a burst of failures after a
 * quiet minute cannot spend savings from long ago, and a budget spent in
 * a storm comes back within a second.
 */
#include "rpc/rpc_int.h"

#define BUCKET_NS 100000000ull
#define BUCKETS 10u

static void budget_roll(struct rpc_budget *b, uint64_t now)
{
	uint64_t steps;

	if (!b->bucket_ns) {
		b->bucket_ns = now;
		return;
	}
	if (now < b->bucket_ns + BUCKET_NS)
		return;
	steps = (now - b->bucket_ns) / BUCKET_NS;
	if (steps >= BUCKETS) {
		uint32_t i;

		for (i = 0; i < BUCKETS; i++)
			b->calls[i] = b->spent[i] = 0;
		b->sum_calls = b->sum_spent = 0;
		b->cur = 0;
		b->bucket_ns = now;
		return;
	}
	b->bucket_ns += steps * BUCKET_NS;
	while (steps--) {
		b->cur = (b->cur + 1) % BUCKETS;
		b->sum_calls -= b->calls[b->cur];
		b->sum_spent -= b->spent[b->cur];
		b->calls[b->cur] = b->spent[b->cur] = 0;
	}
}

void be__rpc_budget_deposit(struct rpc_budget *b, uint64_t now)
{
	budget_roll(b, now);
	b->calls[b->cur]++;
	b->sum_calls++;
}

bool be__rpc_budget_withdraw(struct rpc_budget *b, const struct be_rpc_config *cfg, uint64_t now)
{
	uint64_t allowed;

	budget_roll(b, now);
	allowed = b->sum_calls * cfg->retry_budget_pct / 100 + cfg->retry_budget_min;
	if (b->sum_spent >= allowed)
		return false;
	b->spent[b->cur]++;
	b->sum_spent++;
	return true;
}
