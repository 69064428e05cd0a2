/*
 * Check that memory goes back to the OS only after deregistration: trim
 * deregisters every entirely free block (and cached huge region) on every
 * device while it is still mapped, and only then unmaps it. Blocks with a
 * live buffer stay registered and mapped, and a freed huge region waits in
 * the cache, still registered, until trim.
 */
#include <errno.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev da, db;

int main(void)
{
	const size_t block = 1u << 20;
	struct be_alloc_config cfg = { .block_size = block };
	struct be_alloc_stats st;
	void *p[40], *keep, *huge;
	uintptr_t keep_base;
	size_t freed;
	int i, ra, rb;

	ASSERT_OK(be_alloc_configure(&cfg));
	th_init(&da, "A", 1);
	th_init(&db, "B", 2);
	ASSERT_OK(th_attach(&da));
	ASSERT_OK(th_attach(&db));
	for (i = 0; i < 40; i++) { /* 20 blocks */
		p[i] = be_alloc(512u << 10);
		ASSERT(p[i] != NULL);
	}
	keep = be_alloc(100);
	keep_base = th_find(&da, keep)->addr;
	huge = be_alloc(3u << 20);
	ASSERT(huge != NULL);
	for (i = 0; i < 40; i++)
		be_free(p[i]);
	be_free(huge);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.huge_regions, 1); /* cached */
	ASSERT_EQ(atomic_load(&da.ndereg), 0);
	ra = atomic_load(&da.nreg);
	rb = atomic_load(&db.nreg);

	freed = be_alloc_trim();
	be_alloc_stats(&st);
	ASSERT_UEQ(st.blocks, 1); /* the one holding @keep */
	ASSERT_UEQ(st.huge_regions, 0);
	ASSERT_UEQ(freed, 20 * block + (3u << 20)); /* 20 blocks, the huge region */
	ASSERT_EQ(atomic_load(&da.ndereg), ra - 1);
	ASSERT_EQ(atomic_load(&db.ndereg), rb - 1);
	/* Every dereg saw its region mapped; after trim it is gone. */
	for (i = 0; i < da.ncalls; i++) {
		if (da.calls[i].op != 'd')
			continue;
		ASSERT(da.calls[i].mapped);
		ASSERT(da.calls[i].addr != keep_base);
		ASSERT(!th_mapped(da.calls[i].addr, da.calls[i].len));
	}
	for (i = 0; i < db.ncalls; i++)
		if (db.calls[i].op == 'd')
			ASSERT(db.calls[i].mapped);
	ASSERT(th_mapped(keep_base, block));
	*(volatile char *)keep = 1;
	be_free(keep);
	be_alloc_trim();
	be_alloc_stats(&st);
	ASSERT_UEQ(st.mapped_bytes, 0);
	ASSERT_EQ(atomic_load(&da.live), 0);
	ASSERT_EQ(atomic_load(&db.live), 0);
	ASSERT_UEQ(st.deregistrations, st.registrations);
	return 0;
}
