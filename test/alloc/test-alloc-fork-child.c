/*
 * A forked child gets a fresh, empty bemalloc.
 *
 * The parent attaches a device (the recording hook), allocates small,
 * large and huge buffers (one huge region also in the huge cache), and
 * forks. In the child: every statistic starts from zero and no device is
 * attached; the parent's pointers are refused by be_free(),
 * be_alloc_usable_size() and be_alloc_lookup(); the child attaches a
 * device of its own at index 0, allocates, frees and trims like a new
 * process, its blocks come from a memfd of its own (not the parent's
 * file), and the parent's device hook is never called. The parent then
 * finds its buffers, keys and counters as they were.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"
#include "forkwait.h"

#define NP 5

static struct th_dev pdev, cdev;
static const size_t psizes[NP] = { 64, 3000, 200000, (5u << 20) + 1, 100 };

/* Every counter of @st is 0 (devices too: a uint32_t, read as such). */
static void stats_zero(const struct be_alloc_stats *st)
{
#define ZF(f) { #f, offsetof(struct be_alloc_stats, f) }
	static const struct {
		const char *name;
		size_t off;
	} u64[] = {
		ZF(blocks), ZF(huge_regions), ZF(mapped_bytes), ZF(registered_bytes),
		ZF(bytes_in_use), ZF(allocations), ZF(frees), ZF(registrations),
		ZF(deregistrations), ZF(failures), ZF(reg_failures),
	};
#undef ZF
	size_t i;

	for (i = 0; i < sizeof(u64) / sizeof(u64[0]); i++) {
		uint64_t v;

		memcpy(&v, (const char *)st + u64[i].off, sizeof(v));
		if (v)
			TEST_FAIL("%s is %llu, not 0", u64[i].name, (unsigned long long)v);
	}
	ASSERT_UEQ(st->devices, 0);
}

static int child(void *const *pbufs, ino_t parent_ino)
{
	int preg = atomic_load(&pdev.nreg), pdereg = atomic_load(&pdev.ndereg);
	struct be_alloc_region r;
	struct be_alloc_stats st;
	void *mine[64];
	struct stat sb;
	int d, i;

	be_alloc_stats(&st);
	stats_zero(&st);
	/* The parent's device index means nothing here. */
	ASSERT_EQ(be_alloc_lookup(pbufs[0], 0, &r), -EINVAL);
	ASSERT_EQ(be_alloc_detach_device(0), -EINVAL);

	th_init(&cdev, "child", 2);
	d = th_attach(&cdev);
	ASSERT_EQ(d, 0);
	ASSERT_EQ(atomic_load(&cdev.nreg), 0); /* nothing to register yet */

	/* The parent's pointers are not the child's. */
	for (i = 0; i < NP; i++) {
		ASSERT_EQ(be_alloc_lookup(pbufs[i], d, &r), -ENOENT);
		ASSERT_EQ(be_alloc_usable_size(pbufs[i]), 0);
		be_free(pbufs[i]); /* logged and ignored */
	}
	be_alloc_stats(&st);
	ASSERT_UEQ(st.frees, 0);

	for (i = 0; i < 64; i++) {
		size_t sz = i == 63 ? (6u << 20) : (size_t)(i % 8 + 1) * 9000;

		mine[i] = be_alloc(sz);
		if (!mine[i])
			TEST_FAIL("child be_alloc(%zu): %s", sz, be_alloc_last_error());
		th_fill(mine[i], sz, 500 + (uint32_t)i);
		ASSERT_OK(be_alloc_lookup(mine[i], d, &r));
		ASSERT(th_find(&cdev, mine[i]) != NULL);
		ASSERT_EQ(fstat(r.fd, &sb), 0);
		ASSERT(sb.st_ino != parent_ino);
	}
	be_alloc_stats(&st);
	ASSERT_UEQ(st.allocations, 64);
	ASSERT_UEQ(st.huge_regions, 1);
	ASSERT_UEQ(st.devices, 1);
	ASSERT_UEQ(st.registrations, st.blocks + st.huge_regions);
	ASSERT_UEQ(atomic_load(&cdev.nreg), st.registrations);
	for (i = 0; i < 64; i++) {
		size_t sz = i == 63 ? (6u << 20) : (size_t)(i % 8 + 1) * 9000;

		ASSERT(th_check(mine[i], sz, 500 + (uint32_t)i));
		be_free(mine[i]);
	}
	be_alloc_stats(&st);
	ASSERT_UEQ(st.frees, 64);
	ASSERT_UEQ(st.bytes_in_use, 0);
	ASSERT_GT(be_alloc_trim(), 0);
	be_alloc_stats(&st);
	ASSERT_UEQ(st.mapped_bytes, 0);
	ASSERT_UEQ(st.deregistrations, st.registrations);
	ASSERT_OK(be_alloc_detach_device(d));
	/* The parent's hook was never called from here (our copy of it would
	 * have counted). */
	ASSERT_EQ(atomic_load(&pdev.nreg), preg);
	ASSERT_EQ(atomic_load(&pdev.ndereg), pdereg);
	return 0;
}

int main(void)
{
	struct be_alloc_stats before, after;
	struct be_alloc_region r, r2;
	void *p[NP], *cached;
	struct stat sb;
	int d, i;
	pid_t pid;

	th_init(&pdev, "parent", 1);
	d = th_attach(&pdev);
	ASSERT_EQ(d, 0);
	cached = be_alloc(7u << 20);
	ASSERT(cached);
	be_free(cached); /* into the huge cache, still registered */
	for (i = 0; i < NP; i++) {
		p[i] = be_alloc(psizes[i]);
		ASSERT(p[i]);
		th_fill(p[i], psizes[i], (uint32_t)i);
	}
	ASSERT_OK(be_alloc_lookup(p[0], d, &r));
	ASSERT_EQ(fstat(r.fd, &sb), 0);
	be_alloc_stats(&before);

	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0)
		_exit(child(p, sb.st_ino));
	tf_wait_ok(pid, 60);

	/* The parent: nothing changed. */
	be_alloc_stats(&after);
	ASSERT_UEQ(after.blocks, before.blocks);
	ASSERT_UEQ(after.huge_regions, before.huge_regions);
	ASSERT_UEQ(after.registrations, before.registrations);
	ASSERT_UEQ(after.deregistrations, before.deregistrations);
	ASSERT_UEQ(after.bytes_in_use, before.bytes_in_use);
	ASSERT_UEQ(after.devices, 1);
	for (i = 0; i < NP; i++) {
		ASSERT(th_check(p[i], psizes[i], (uint32_t)i));
		ASSERT_OK(be_alloc_lookup(p[i], d, &r2));
		ASSERT(th_find(&pdev, p[i]) != NULL);
		ASSERT_EQ(r2.lkey, th_find(&pdev, p[i])->lkey);
		be_free(p[i]);
	}
	be_alloc_trim();
	be_alloc_stats(&after);
	ASSERT_UEQ(after.mapped_bytes, 0);
	ASSERT_EQ(atomic_load(&pdev.live), 0);
	ASSERT_OK(be_alloc_detach_device(d));
	return 0;
}
