/*
 * Check a conn's grant table (src/xport/grant.c): every live grant is
 * found by its key and admits exactly its range (not a byte before or
 * after, no wrap-around); keys are never 0 and never shared by two live
 * grants; a revoked key admits nothing while the others still work,
 * through many adds and deletes in random order (the backward-shift
 * deletion keeps every cluster reachable); an unknown key admits nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "xport/grant.h"

#define N 4000

static uint32_t keys[N];
static int live[N];

static uint64_t addr_of(int i)
{
	return 0x100000000ull + (uint64_t)i * 8192;
}

static void check_all(struct be__xgrants *g)
{
	int i;

	for (i = 0; i < N; i++) {
		uint64_t a = addr_of(i);

		if (!keys[i])
			continue;
		if (live[i]) {
			ASSERT(be__xgrants_check(g, keys[i], a, 4096));
			ASSERT(be__xgrants_check(g, keys[i], a + 4095, 1));
			ASSERT(be__xgrants_check(g, keys[i], a + 4096, 0));
			ASSERT(!be__xgrants_check(g, keys[i], a - 1, 1));
			ASSERT(!be__xgrants_check(g, keys[i], a + 4095, 2));
			ASSERT(!be__xgrants_check(g, keys[i], a + 1, UINT64_MAX));
			ASSERT(!be__xgrants_check(g, keys[i], a + 8192, 1));
		} else {
			ASSERT(!be__xgrants_check(g, keys[i], a, 1));
		}
	}
}

int main(void)
{
	struct be__xgrants g;
	uint32_t k;
	int i, j, round;

	be__xgrants_init(&g);
	ASSERT(!be__xgrants_check(&g, 1, 0, 0));
	ASSERT_EQ(be__xgrants_add(&g, 0, 0, &k), -EINVAL);
	ASSERT_EQ(be__xgrants_add(&g, UINT64_MAX - 10, 100, &k), -EINVAL);
	srand(7);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < N; i++) {
			if (live[i] || rand() % 2)
				continue;
			ASSERT_OK(be__xgrants_add(&g, addr_of(i), 4096, &keys[i]));
			ASSERT(keys[i] != 0);
			live[i] = 1;
		}
		for (i = 0; i < N; i++)
			for (j = i + 1; live[i] && j < N; j++)
				if (live[j] && keys[i] == keys[j])
					TEST_FAIL("grants %d and %d share key 0x%x", i, j, keys[i]);
		check_all(&g);
		for (i = 0; i < N; i++) {
			if (!live[i] || rand() % 3)
				continue;
			ASSERT_OK(be__xgrants_del(&g, keys[i]));
			ASSERT_EQ(be__xgrants_del(&g, keys[i]), -ENOENT);
			live[i] = 0;
		}
		check_all(&g);
	}
	for (i = 0, j = 0; i < N; i++)
		j += live[i];
	ASSERT_EQ((int)g.n, j);
	for (i = 0; i < N; i++) {
		if (live[i])
			ASSERT_OK(be__xgrants_del(&g, keys[i]));
		live[i] = 0;
	}
	ASSERT_EQ((int)g.n, 0);
	check_all(&g);
	be__xgrants_fini(&g);
	return 0;
}
