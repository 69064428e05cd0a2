/*
 * Check the limit on mapped bytes: allocations past it return NULL with
 * errno ENOMEM, count as failures and leave a message; they never abort.
 * After frees, allocations succeed again; huge allocations obey the limit
 * too, and raising the limit lets the pool grow again.
 */
#include <errno.h>
#include <string.h>

#include <be/alloc.h>
#include "test.h"

enum { MAXP = 4096 };

int main(void)
{
	const size_t block = 1u << 20, limit = 8u << 20;
	struct be_alloc_config cfg = { .block_size = block, .limit_bytes = limit };
	struct be_alloc_stats st;
	static void *p[MAXP];
	int n = 0, i;
	void *q;

	ASSERT_OK(be_alloc_configure(&cfg));
	ASSERT_EQ(strlen(be_alloc_last_error()), 0);
	for (n = 0; n < MAXP; n++) {
		p[n] = be_alloc(60000 + (n % 3) * 1000); /* one 64 KiB unit each */
		if (!p[n])
			break;
		memset(p[n], n, 60000);
	}
	ASSERT_LT(n, MAXP);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT(strstr(be_alloc_last_error(), "limit") != NULL);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.failures, 1);
	ASSERT_UEQ(st.limit_bytes, limit);
	ASSERT_LE(st.mapped_bytes, limit);
	/* Every unit of every block went to a buffer before the limit hit. */
	ASSERT_EQ(n, (int)(limit / 65536));
	ASSERT_UEQ(st.blocks, limit / block);

	/* Small sizes need a new span, and there is no room either. */
	errno = 0;
	ASSERT(be_alloc(100) == NULL);
	ASSERT_EQ(errno, ENOMEM);
	q = be_alloc(2u << 20); /* huge */
	ASSERT(q == NULL);
	ASSERT_EQ(errno, ENOMEM);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.failures, 3);
	ASSERT_UEQ(st.huge_regions, 0);

	/* Free some: allocation works again, without mapping more. */
	for (i = 0; i < n; i += 2)
		be_free(p[i]);
	q = be_alloc(100); /* its span takes one of the freed units */
	ASSERT(q != NULL);
	be_free(q);
	p[0] = NULL;
	for (i = 2; i < n; i += 2) {
		p[i] = be_alloc(60000);
		ASSERT(p[i] != NULL);
	}
	be_alloc_stats(&st);
	ASSERT_LE(st.mapped_bytes, limit);

	/* A higher limit lets a huge region through. */
	cfg.limit_bytes = limit + (4u << 20);
	ASSERT_OK(be_alloc_configure(&cfg));
	q = be_alloc(3u << 20);
	ASSERT(q != NULL);
	memset(q, 1, 3u << 20);
	be_free(q);
	for (i = 0; i < n; i++)
		be_free(p[i]);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	/* Block size is fixed once allocations happened. */
	cfg.block_size = 2u << 20;
	ASSERT_EQ(be_alloc_configure(&cfg), -EBUSY);
	cfg.block_size = 3u << 20;
	ASSERT_EQ(be_alloc_configure(&cfg), -EINVAL);
	return 0;
}
