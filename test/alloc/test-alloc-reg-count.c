/*
 * Check that registration happens per block, never per allocation: after
 * a million allocations and frees of mixed sizes (with a bounded number
 * alive), the counting device has seen exactly one registration per block
 * the pool ever mapped, and the pool's registration counter agrees.
 */
#include <stdlib.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev dev;

int main(void)
{
	enum { OPS = 1000000, WINDOW = 1024 };
	static void *p[WINDOW];
	struct be_alloc_stats st;
	unsigned seed = 42;
	int i;

	th_init(&dev, "count", 1);
	ASSERT_OK(th_attach(&dev));
	for (i = 0; i < OPS; i++) {
		int k = rand_r(&seed) % WINDOW;
		unsigned r = (unsigned)rand_r(&seed);

		be_free(p[k]);
		p[k] = be_alloc(r % 8 ? r % 2048 : r % 200000);
		ASSERT(p[k] != NULL);
		*(volatile char *)p[k] = 1;
	}
	be_alloc_stats(&st);
	ASSERT_UEQ(st.allocations, OPS);
	ASSERT_UEQ(st.huge_regions, 0);
	ASSERT_UEQ(st.registrations, st.blocks);
	ASSERT_EQ(atomic_load(&dev.nreg), (int)st.blocks);
	ASSERT_LT(st.blocks, 64); /* a few dozen MiB alive at most */
	for (i = 0; i < WINDOW; i++)
		be_free(p[i]);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.registrations, st.blocks);
	ASSERT_UEQ(st.bytes_in_use, 0);
	return 0;
}
