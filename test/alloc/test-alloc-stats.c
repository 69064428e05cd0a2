/*
 * Check that the statistics are exact after known sequences: bytes in use
 * per class and in total (class sizes, large runs, huge regions),
 * allocations, frees, blocks, mapped and registered bytes, registrations,
 * and that the JSON form carries the same numbers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev dev;

static unsigned class_of(const struct be_alloc_stats *st, uint64_t size)
{
	unsigned c;

	for (c = 0; c < st->num_classes; c++)
		if (st->class_size[c] == size)
			return c;
	TEST_FAIL("no class of size %" PRIu64, size);
}

int main(void)
{
	const size_t block = 4u << 20;
	struct be_alloc_config cfg = { .block_size = block };
	struct be_alloc_stats st;
	void *small[10], *med[3], *large[2], *huge;
	char json[8192], want[128];
	unsigned c128, c5120, c128k, chuge;
	int i, n;

	ASSERT_OK(be_alloc_configure(&cfg));
	th_init(&dev, "stats", 1);
	ASSERT_OK(th_attach(&dev));
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	ASSERT_UEQ(st.blocks, 0);
	ASSERT_EQ(st.num_classes, 44); /* 36 + 7 large + huge at 4 MiB blocks */
	c128 = class_of(&st, 128);
	c5120 = class_of(&st, 5120);
	c128k = class_of(&st, 131072);
	chuge = st.num_classes - 1;
	ASSERT_UEQ(st.class_size[chuge], 0);

	for (i = 0; i < 10; i++)
		small[i] = be_alloc(100);
	for (i = 0; i < 3; i++)
		med[i] = be_alloc(5000);
	for (i = 0; i < 2; i++)
		large[i] = be_alloc(100000); /* 2 units */
	huge = be_alloc((5u << 20) + 1);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.class_in_use[c128], 1280);
	ASSERT_UEQ(st.class_in_use[c5120], 3 * 5120);
	ASSERT_UEQ(st.class_in_use[c128k], 2 * 131072);
	ASSERT_UEQ(st.class_in_use[chuge], (5u << 20) + 4096);
	ASSERT_UEQ(st.bytes_in_use, 1280 + 3 * 5120 + 2 * 131072 + (5u << 20) + 4096);
	ASSERT_UEQ(st.allocations, 16);
	ASSERT_UEQ(st.frees, 0);
	ASSERT_UEQ(st.blocks, 1);
	ASSERT_UEQ(st.huge_regions, 1);
	ASSERT_UEQ(st.mapped_bytes, block + (5u << 20) + 4096);
	ASSERT_UEQ(st.registered_bytes, st.mapped_bytes);
	ASSERT_UEQ(st.registrations, 2);
	ASSERT_EQ(atomic_load(&dev.nreg), 2);

	for (i = 0; i < 5; i++)
		be_free(small[i]);
	be_free(med[1]);
	be_free(large[0]);
	be_free(NULL); /* a no-op, not counted */
	be_alloc_stats(&st);
	ASSERT_UEQ(st.class_in_use[c128], 640);
	ASSERT_UEQ(st.class_in_use[c5120], 2 * 5120);
	ASSERT_UEQ(st.class_in_use[c128k], 131072);
	ASSERT_UEQ(st.bytes_in_use, 640 + 2 * 5120 + 131072 + (5u << 20) + 4096);
	ASSERT_UEQ(st.frees, 7);

	n = be_alloc_stats_json(NULL, 0);
	ASSERT_GT(n, 0);
	ASSERT_LT(n, (int)sizeof(json));
	ASSERT_EQ(be_alloc_stats_json(json, sizeof(json)), n);
	ASSERT_EQ((int)strlen(json), n);
	snprintf(want, sizeof(want), "\"bytes_in_use\":%" PRIu64 ",", st.bytes_in_use);
	ASSERT(strstr(json, want) != NULL);
	ASSERT(strstr(json, "\"blocks\":1,") != NULL);
	ASSERT(strstr(json, "\"registrations\":2,") != NULL);
	ASSERT(strstr(json, "{\"size\":128,\"in_use\":640}") != NULL);
	/* Truncation: still NUL-terminated, still reports the full length. */
	ASSERT_EQ(be_alloc_stats_json(json, 10), n);
	ASSERT_EQ(strlen(json), 9);
	ASSERT_EQ(be_alloc_stats_json(NULL, 10), -EINVAL);

	for (i = 5; i < 10; i++)
		be_free(small[i]);
	be_free(med[0]);
	be_free(med[2]);
	be_free(large[1]);
	be_free(huge);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	for (i = 0; i < (int)st.num_classes; i++)
		ASSERT_UEQ(st.class_in_use[i], 0);
	ASSERT_UEQ(st.allocations, 16);
	ASSERT_UEQ(st.frees, 16);
	ASSERT_UEQ(st.failures, 0);
	return 0;
}
