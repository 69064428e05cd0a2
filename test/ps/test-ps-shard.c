/*
 * Check sharding: be__ps_split() puts every key exactly once in the shard
 * be__ps_shard_of() names, in the keys' original order, for shard counts
 * from 1 to 65536 (including primes and powers of two); keys spread
 * evenly (chi-square over 300 and 4096 shards, and over structured keys:
 * consecutive, multiples of 4096, one bit set); the hash matches its
 * documented formula; every logical shard is placed on exactly one
 * server, round-robin by default and as 'place' lines say.
 */
#include <math.h>
#include <stdlib.h>

#include "pstest.h"

#define NK 200000u

static uint64_t documented(uint64_t key, uint32_t n)
{
	/* docs/PS.md: h = mix64(key + 0x9e3779b97f4a7c15), shard = h * n >> 64. */
	uint64_t z = key + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint64_t)(((unsigned __int128)z * n) >> 64);
}

static void check_split(const uint64_t *keys, uint32_t n, uint32_t shards)
{
	/* @n may be 0 (the empty split): one spare entry, so that no
	 * allocation has size 0, which GCC's -Warray-bounds flags in a
	 * Release build once this is inlined with n = 0. */
	uint32_t *off = malloc(((size_t)shards + 1) * sizeof(*off));
	uint32_t *perm = malloc(((size_t)n + 1) * sizeof(*perm));
	uint8_t *seen = calloc((size_t)n + 1, 1);
	uint32_t s, i, touched = 0;
	int rc;

	ASSERT(off && perm && seen);
	rc = be__ps_split(keys, n, shards, off, perm);
	ASSERT_GE(rc, 0);
	ASSERT_EQ(off[0], 0);
	ASSERT_EQ(off[shards], n);
	for (s = 0; s < shards; s++) {
		ASSERT_LE(off[s], off[s + 1]);
		touched += off[s] != off[s + 1];
		for (i = off[s]; i < off[s + 1]; i++) {
			uint32_t k = perm[i];

			ASSERT_LT(k, n);
			ASSERT_EQ(seen[k], 0);
			seen[k] = 1;
			ASSERT_EQ(be__ps_shard_of(keys[k], shards), s);
			if (i > off[s])
				ASSERT_LT(perm[i - 1], k); /* original order kept */
		}
	}
	ASSERT_EQ((uint32_t)rc, touched);
	for (i = 0; i < n; i++)
		ASSERT_EQ(seen[i], 1);
	free(off);
	free(perm);
	free(seen);
}

/* Chi-square of the counts over @shards against uniform: fails only when
 * far outside its distribution (mean shards - 1, sd sqrt(2 (shards - 1))). */
static void check_even(const uint64_t *keys, uint32_t n, uint32_t shards)
{
	uint32_t *cnt = calloc(shards, sizeof(*cnt)), i;
	double e = (double)n / shards, chi = 0, df = shards - 1;

	ASSERT(cnt);
	for (i = 0; i < n; i++)
		cnt[be__ps_shard_of(keys[i], shards)]++;
	for (i = 0; i < shards; i++)
		chi += (cnt[i] - e) * (cnt[i] - e) / e;
	if (fabs(chi - df) > 6 * sqrt(2 * df))
		TEST_FAIL("chi-square %.1f over %u shards (df %.0f)", chi, shards, df);
	free(cnt);
}

static void test_split(void)
{
	static const uint32_t counts[] = { 1, 2, 3, 7, 8, 64, 300, 301, 1024, 4096, 65535, 65536 };
	uint64_t *keys = malloc(NK * sizeof(*keys)), st = 99;
	uint32_t i;

	ASSERT(keys);
	for (i = 0; i < NK; i++)
		keys[i] = i < 1000 ? i : pt_rand(&st);
	for (i = 0; i < BE_ARRAY_SIZE(counts); i++)
		check_split(keys, NK, counts[i]);
	check_split(keys, 0, 300);
	ASSERT_EQ(be__ps_split(keys, 10, 0, NULL, NULL), -EINVAL);
	ASSERT_EQ(be__ps_split(keys, 10, BE_PS_MAX_SHARDS + 1, NULL, NULL), -EINVAL);
	for (i = 0; i < 10000; i++)
		ASSERT_UEQ(be__ps_shard_of(keys[i], 300), documented(keys[i], 300));
	free(keys);
}

static void test_even(void)
{
	uint64_t *keys = malloc(NK * sizeof(*keys)), st = 7;
	uint32_t i;

	ASSERT(keys);
	for (i = 0; i < NK; i++)
		keys[i] = pt_rand(&st);
	check_even(keys, NK, 300);
	check_even(keys, NK, 4096);
	for (i = 0; i < NK; i++)
		keys[i] = i;
	check_even(keys, NK, 300);
	check_even(keys, NK, 64);
	for (i = 0; i < NK; i++)
		keys[i] = (uint64_t)i << 12;
	check_even(keys, NK, 300);
	check_even(keys, NK, 4096);
	for (i = 0; i < 64; i++)
		keys[i] = 1ull << i;
	check_even(keys, 64, 2);
	free(keys);
}

static void test_placement(void)
{
	struct be__ps_config c;
	uint32_t s, per[4] = { 0 };

	pt_config(&c, "shards 300\nservers 4\n"
		      "table t dim=4 optimizer=sgd lr=1 init=zeros\n");
	for (s = 0; s < 300; s++) {
		ASSERT_LT(be__ps_server_of(&c, s), 4);
		ASSERT_EQ(be__ps_server_of(&c, s), s % 4);
		per[be__ps_server_of(&c, s)]++;
	}
	ASSERT(per[0] == 75 && per[1] == 75 && per[2] == 75 && per[3] == 75);
	be__ps_config_close(&c);

	pt_config(&c, "shards 10\nservers 3\nplace 0-4 2\nplace 9 0\n"
		      "table t dim=4 optimizer=sgd lr=1 init=zeros\n");
	for (s = 0; s < 10; s++) {
		uint32_t want = s <= 4 ? 2 : s == 9 ? 0 : s % 3;

		ASSERT_EQ(be__ps_server_of(&c, s), want);
	}
	be__ps_config_close(&c);
}

int main(void)
{
	test_split();
	test_even();
	test_placement();
	return 0;
}
