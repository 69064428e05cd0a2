/*
 * Check that every size from 0 to 9 KiB, and the sizes around every class
 * boundary up to a block, get a 64-byte aligned buffer whose usable size is
 * at least the size asked, and that no two live buffers overlap (each is
 * filled with its own pattern, all are checked once all are allocated).
 */
#include <stdint.h>
#include <stdlib.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"
#include "util/common.h"

struct buf {
	uintptr_t p;
	size_t n;
};

static int cmp_buf(const void *a, const void *b)
{
	const struct buf *x = a, *y = b;

	return x->p < y->p ? -1 : x->p > y->p;
}

int main(void)
{
	enum { SMALL_N = 9 * 1024 + 1 };
	static struct buf bufs[SMALL_N + 3 * BE_ALLOC_NUM_CLASSES];
	struct be_alloc_stats st;
	size_t n = 0, i;
	unsigned c;

	for (i = 0; i < SMALL_N; i++) {
		void *p = be_alloc(i);

		ASSERT(p != NULL);
		ASSERT_EQ((uintptr_t)p % BE_ALLOC_MIN_ALIGN, 0);
		ASSERT_GE(be_alloc_usable_size(p), i ? i : 1);
		bufs[n].p = (uintptr_t)p;
		bufs[n].n = i;
		th_fill(p, i, (uint32_t)n);
		n++;
	}
	be_alloc_stats(&st);
	ASSERT_GT(st.num_classes, 36);
	for (c = 0; c < st.num_classes; c++) {
		uint64_t cs = st.class_size[c];
		int d;

		if (!cs)
			continue; /* huge */
		if (c)
			ASSERT_GT(cs, st.class_size[c - 1]);
		for (d = -1; d <= 1; d++) {
			size_t sz = (size_t)((int64_t)cs + d);
			void *p = be_alloc(sz);

			ASSERT(p != NULL);
			ASSERT_EQ((uintptr_t)p % BE_ALLOC_MIN_ALIGN, 0);
			ASSERT_GE(be_alloc_usable_size(p), sz);
			if (d <= 0) /* fits its class exactly */
				ASSERT_EQ(be_alloc_usable_size(p), cs);
			bufs[n].p = (uintptr_t)p;
			bufs[n].n = sz;
			th_fill(p, sz, (uint32_t)n);
			n++;
		}
	}
	for (i = 0; i < n; i++)
		ASSERT(th_check((void *)bufs[i].p, bufs[i].n, (uint32_t)i));
	qsort(bufs, n, sizeof(bufs[0]), cmp_buf);
	for (i = 1; i < n; i++)
		ASSERT_LE(bufs[i - 1].p + BE_MAX(bufs[i - 1].n, 1), bufs[i].p);
	for (i = 0; i < n; i++)
		be_free((void *)bufs[i].p);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	ASSERT_UEQ(st.allocations, st.frees);
	ASSERT_UEQ(st.allocations, n);
	ASSERT_UEQ(st.failures, 0);
	return 0;
}
