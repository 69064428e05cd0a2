/*
 * Check attaching a device after blocks exist: every existing block and
 * huge region is registered on it at attach time (one registration each,
 * with the region's fd and offset), later blocks are registered when the
 * pool grows, and lookups before the attach fail with -EINVAL.
 */
#include <errno.h>
#include <string.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev dev;

int main(void)
{
	const size_t block = 1u << 20;
	struct be_alloc_config cfg = { .block_size = block };
	struct be_alloc_region r;
	struct be_alloc_stats st;
	void *p[8], *huge, *more;
	int d, i;

	ASSERT_OK(be_alloc_configure(&cfg));
	for (i = 0; i < 8; i++) { /* 8 x 512 KiB: 4 blocks */
		p[i] = be_alloc(512u << 10);
		ASSERT(p[i] != NULL);
	}
	huge = be_alloc(3u << 20);
	ASSERT(huge != NULL);
	ASSERT_EQ(be_alloc_lookup(p[0], 0, &r), -EINVAL);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.blocks, 4);
	ASSERT_UEQ(st.registrations, 0);
	ASSERT_UEQ(st.registered_bytes, 0);

	th_init(&dev, "late", 5);
	d = th_attach(&dev);
	ASSERT_OK(d);
	ASSERT_EQ(atomic_load(&dev.nreg), 5);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.registrations, 5);
	ASSERT_UEQ(st.registered_bytes, st.mapped_bytes);
	ASSERT_EQ(st.devices, 1);
	for (i = 0; i < 8; i++) {
		const struct th_call *c = th_find(&dev, p[i]);

		ASSERT(c != NULL);
		ASSERT_EQ(c->len, block);
		ASSERT(c->fd >= 0);
		ASSERT_EQ(c->addr % block, 0);
		ASSERT_OK(be_alloc_lookup(p[i], d, &r));
		ASSERT_EQ((uintptr_t)r.base, c->addr);
		ASSERT_EQ(r.lkey, c->lkey);
		ASSERT_EQ(r.fd_offset, c->fd_offset);
	}
	ASSERT(th_find(&dev, huge) != NULL);
	ASSERT_EQ(th_find(&dev, huge)->addr, (uintptr_t)huge);

	/* Growth after the attach registers the new block once. */
	more = be_alloc(1u << 20);
	ASSERT(more != NULL);
	ASSERT_EQ(atomic_load(&dev.nreg), 6);
	ASSERT_EQ(th_find(&dev, more)->addr, (uintptr_t)more);
	be_free(more);
	be_free(huge);
	for (i = 0; i < 8; i++)
		be_free(p[i]);
	be_alloc_trim();
	ASSERT_EQ(atomic_load(&dev.live), 0);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.mapped_bytes, 0);
	return 0;
}
