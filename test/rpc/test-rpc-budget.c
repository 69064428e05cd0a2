/*
 * Check the retry budget on its own: within a one-second window,
 * retries and hedges never exceed retry_budget_pct % of the calls plus
 * retry_budget_min; the floor alone allows retry_budget_min with no
 * calls; the budget comes back once the window has moved on.
 */
#include "rpc/rpc_int.h"
#include "rtest.h"

int main(void)
{
	struct be_rpc_config cfg;
	struct rpc_budget b = { 0 };
	uint64_t t0 = 1000000000ull, now = t0;
	int i, ok = 0;

	be_rpc_config_init(&cfg);
	cfg.retry_budget_pct = 10;
	cfg.retry_budget_min = 5;
	/* No calls: the floor. */
	for (i = 0; i < 100; i++)
		ok += be__rpc_budget_withdraw(&b, &cfg, now);
	ASSERT_EQ(ok, 5);
	/* 1000 calls in the same window: 10 % more. */
	for (i = 0; i < 1000; i++)
		be__rpc_budget_deposit(&b, now);
	for (i = 0; i < 1000; i++)
		ok += be__rpc_budget_withdraw(&b, &cfg, now);
	ASSERT_EQ(ok, 100 + 5);
	/* Half a second on, still the same window. */
	now += 500000000ull;
	ASSERT(!be__rpc_budget_withdraw(&b, &cfg, now));
	/* A second and a bit on: all forgotten, the floor again. */
	now += 600000000ull;
	for (ok = 0, i = 0; i < 100; i++)
		ok += be__rpc_budget_withdraw(&b, &cfg, now);
	ASSERT_EQ(ok, 5);
	/* A steady stream: 100 calls every 10 ms, retrying everything it
	 * may; over 10 s the retries stay within 10 % + 5 per second. */
	{
		struct rpc_budget s = { 0 };
		uint64_t calls = 0, retries = 0;

		now = t0 * 100;
		for (i = 0; i < 1000; i++) {
			int k;

			for (k = 0; k < 100; k++) {
				be__rpc_budget_deposit(&s, now);
				calls++;
				retries += be__rpc_budget_withdraw(&s, &cfg, now);
			}
			now += 10000000ull;
		}
		ASSERT_LE(retries, calls / 10 + 5 * 11);
		ASSERT_GE(retries, calls / 10);
	}
	return 0;
}
