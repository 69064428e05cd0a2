/*
 * Check two devices at once: every block is registered once on each, a
 * lookup returns each device's own keys for the same buffer, detaching one
 * deregisters everything on it only (the other keeps working and new blocks
 * go to it alone), and attaching it again registers all existing blocks.
 */
#include <errno.h>
#include <string.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev da, db;

int main(void)
{
	const size_t block = 1u << 20;
	struct be_alloc_config cfg = { .block_size = block };
	struct be_alloc_region ra, rb;
	struct be_alloc_stats st;
	void *p[6], *q;
	int a, b, i;

	ASSERT_OK(be_alloc_configure(&cfg));
	th_init(&da, "devA", 1);
	th_init(&db, "devB", 2);
	a = th_attach(&da);
	b = th_attach(&db);
	ASSERT_OK(a);
	ASSERT_OK(b);
	for (i = 0; i < 6; i++) { /* 3 blocks */
		p[i] = be_alloc(500000);
		ASSERT(p[i] != NULL);
	}
	ASSERT_EQ(atomic_load(&da.nreg), 3);
	ASSERT_EQ(atomic_load(&db.nreg), 3);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.registrations, 6);
	ASSERT_EQ(st.devices, 2);
	for (i = 0; i < 6; i++) {
		ASSERT_OK(be_alloc_lookup((char *)p[i] + 1000, a, &ra));
		ASSERT_OK(be_alloc_lookup((char *)p[i] + 1000, b, &rb));
		ASSERT_EQ((uintptr_t)ra.base, (uintptr_t)rb.base);
		ASSERT_NE(ra.lkey, rb.lkey);
		ASSERT_EQ(ra.lkey >> 24, 1);
		ASSERT_EQ(rb.lkey >> 24, 2);
		ASSERT_EQ(ra.lkey, th_find(&da, p[i])->lkey);
		ASSERT_EQ(rb.rkey, th_find(&db, p[i])->rkey);
	}

	ASSERT_OK(be_alloc_detach_device(a));
	ASSERT_EQ(atomic_load(&da.live), 0);
	ASSERT_EQ(atomic_load(&db.live), 3);
	ASSERT_EQ(be_alloc_lookup(p[0], a, &ra), -EINVAL);
	ASSERT_OK(be_alloc_lookup(p[0], b, &rb));
	q = be_alloc(1u << 20); /* a new block: device B only */
	ASSERT(q != NULL);
	ASSERT_EQ(atomic_load(&da.nreg), 3);
	ASSERT_EQ(atomic_load(&db.nreg), 4);
	be_alloc_stats(&st);
	ASSERT_EQ(st.devices, 1);
	ASSERT_UEQ(st.registered_bytes, st.mapped_bytes);

	a = th_attach(&da);
	ASSERT_OK(a);
	ASSERT_EQ(atomic_load(&da.nreg), 7);
	ASSERT_EQ(atomic_load(&da.live), 4);
	ASSERT_OK(be_alloc_lookup(q, a, &ra));
	ASSERT_EQ(ra.lkey, th_find(&da, q)->lkey);

	be_free(q);
	for (i = 0; i < 6; i++)
		be_free(p[i]);
	ASSERT_OK(be_alloc_detach_device(a));
	ASSERT_OK(be_alloc_detach_device(b));
	ASSERT_EQ(atomic_load(&da.live) + atomic_load(&db.live), 0);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.deregistrations, st.registrations);
	return 0;
}
