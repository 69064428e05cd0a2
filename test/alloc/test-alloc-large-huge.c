/*
 * Check large runs (above 32 KiB, up to a block) and huge regions (above a
 * block): data integrity, interior-pointer lookup (region bounds and the
 * keys the device handed out for that region), and that a freed huge
 * region is reused by a later huge allocation of the same size without a
 * new registration.
 */
#include <stdint.h>
#include <stdlib.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev dev;

static void check_lookup(int d, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t offs[3] = { 0, n / 2, n - 1 };
	int i;

	for (i = 0; i < 3; i++) {
		struct be_alloc_region r;
		const struct th_call *c;

		ASSERT_OK(be_alloc_lookup(b + offs[i], d, &r));
		ASSERT((uintptr_t)r.base <= (uintptr_t)(b + offs[i]));
		ASSERT((uintptr_t)(b + offs[i]) < (uintptr_t)r.base + r.len);
		ASSERT((uintptr_t)r.base <= (uintptr_t)b);
		ASSERT((uintptr_t)b + n <= (uintptr_t)r.base + r.len);
		c = th_find(&dev, b + offs[i]);
		ASSERT(c != NULL);
		ASSERT_EQ(c->addr, (uintptr_t)r.base);
		ASSERT_EQ(c->len, r.len);
		ASSERT_EQ(c->lkey, r.lkey);
		ASSERT_EQ(c->rkey, r.rkey);
		ASSERT_EQ(c->fd, r.fd);
		ASSERT_EQ(c->fd_offset, r.fd_offset);
	}
}

int main(void)
{
	const size_t block = 4u << 20;
	const size_t sizes[] = { 32769, 40000, 65536, 65537, 100000, 1 << 20, (1 << 20) + 1,
				 block / 2, block - 1, block, block + 1, 10u << 20, 33u << 20 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	struct be_alloc_config cfg = { .block_size = block };
	struct be_alloc_stats st;
	struct be_alloc_region r;
	void *p[N];
	uint64_t regs;
	int d, i;

	ASSERT_OK(be_alloc_configure(&cfg));
	th_init(&dev, "test0", 1);
	d = th_attach(&dev);
	ASSERT_OK(d);
	for (i = 0; i < N; i++) {
		p[i] = be_alloc(sizes[i]);
		ASSERT(p[i] != NULL);
		ASSERT_EQ((uintptr_t)p[i] % BE_ALLOC_MIN_ALIGN, 0);
		ASSERT_GE(be_alloc_usable_size(p[i]), sizes[i]);
		th_fill(p[i], sizes[i], (uint32_t)i);
		check_lookup(d, p[i], sizes[i]);
	}
	be_alloc_stats(&st);
	ASSERT_UEQ(st.huge_regions, 3);
	for (i = 0; i < N; i++)
		ASSERT(th_check(p[i], sizes[i], (uint32_t)i));
	/* A huge region is its own registration, exactly the region. */
	ASSERT_OK(be_alloc_lookup((char *)p[N - 1] + 5, d, &r));
	ASSERT_EQ((uintptr_t)r.base, (uintptr_t)p[N - 1]);
	ASSERT_GE(r.len, sizes[N - 1]);
	ASSERT_EQ(be_alloc_lookup((char *)p[N - 1] + r.len, d, &r) == -ENOENT ||
		  r.base != p[N - 1], 1);
	for (i = 0; i < N; i++)
		be_free(p[i]);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	regs = st.registrations;
	ASSERT_EQ(regs, (uint64_t)atomic_load(&dev.nreg));

	/* Same huge size again: the cached, still registered region. */
	p[0] = be_alloc(10u << 20);
	ASSERT(p[0] != NULL);
	th_fill(p[0], 10u << 20, 7);
	ASSERT(th_check(p[0], 10u << 20, 7));
	be_alloc_stats(&st);
	ASSERT_UEQ(st.registrations, regs);
	check_lookup(d, p[0], 10u << 20);
	be_free(p[0]);
	ASSERT_OK(be_alloc_detach_device(d));
	ASSERT_EQ(atomic_load(&dev.live), 0);
	return 0;
}
