/*
 * Check registration failures: a device that refuses its Nth registration
 * makes the allocation that needed the new block return NULL (ENOMEM),
 * counts reg_failures and failures, says which device failed and why, and
 * leaves no block behind (unmapped, deregistered on the devices where it
 * had succeeded). Attaching a device that fails part-way registers nothing.
 */
#include <errno.h>
#include <string.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev good, bad, late;

int main(void)
{
	const size_t block = 1u << 20;
	struct be_alloc_config cfg = { .block_size = block };
	struct be_alloc_stats st;
	void *p[64];
	int n, i, dg, db, rc;

	ASSERT_OK(be_alloc_configure(&cfg));
	th_init(&good, "good", 1);
	th_init(&bad, "flaky", 2);
	bad.fail_at = 3;
	bad.fail_errno = EAGAIN;
	dg = th_attach(&good);
	ASSERT_OK(dg);
	db = th_attach(&bad);
	ASSERT_OK(db);
	ASSERT_NE(dg, db);

	/* 512 KiB runs: two per block, the 5th needs the 3rd block. */
	for (n = 0; n < 64; n++) {
		p[n] = be_alloc(512u << 10);
		if (!p[n])
			break;
	}
	ASSERT_EQ(n, 4);
	ASSERT_EQ(errno, ENOMEM);
	fprintf(stderr, "message: %s\n", be_alloc_last_error());
	ASSERT(strstr(be_alloc_last_error(), "flaky") != NULL);
	ASSERT(strstr(be_alloc_last_error(), "refuses registration #3") != NULL);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.reg_failures, 1);
	ASSERT_UEQ(st.failures, 1);
	ASSERT_UEQ(st.blocks, 2);
	ASSERT_UEQ(st.mapped_bytes, 2 * block);
	/* The good device had registered the third block first: undone. */
	ASSERT_EQ(atomic_load(&good.nreg), 3);
	ASSERT_EQ(atomic_load(&good.live), 2);
	ASSERT_EQ(good.calls[good.ncalls - 1].op, 'd');
	ASSERT(good.calls[good.ncalls - 1].mapped);
	ASSERT_EQ(atomic_load(&bad.live), 2);

	/* The device works again: the next allocation grows the pool. */
	p[n] = be_alloc(512u << 10);
	ASSERT(p[n] != NULL);
	n++;
	be_alloc_stats(&st);
	ASSERT_UEQ(st.blocks, 3);
	ASSERT_EQ(atomic_load(&bad.live), 3);

	/* Attach fails on its 2nd region: nothing stays registered. */
	th_init(&late, "late", 3);
	late.fail_at = 2;
	rc = th_attach(&late);
	ASSERT_LT(rc, 0);
	ASSERT_EQ(rc, -ENOMEM);
	ASSERT(strstr(be_alloc_last_error(), "late") != NULL);
	ASSERT_EQ(atomic_load(&late.nreg), 1);
	ASSERT_EQ(atomic_load(&late.live), 0);
	be_alloc_stats(&st);
	ASSERT_EQ(st.devices, 2);
	ASSERT_UEQ(st.reg_failures, 2);

	for (i = 0; i < n; i++)
		be_free(p[i]);
	ASSERT_OK(be_alloc_detach_device(db));
	ASSERT_OK(be_alloc_detach_device(dg));
	ASSERT_EQ(be_alloc_detach_device(dg), -EINVAL);
	ASSERT_EQ(atomic_load(&good.live), 0);
	ASSERT_EQ(atomic_load(&bad.live), 0);
	return 0;
}
