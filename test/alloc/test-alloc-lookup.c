/*
 * Check pointer -> keys lookup: for buffers of many sizes, the first,
 * middle and last byte map to the region that holds the buffer, with the
 * keys, handle, fd and offset the device returned when it registered that
 * region. Pointers bemalloc did not hand out give -ENOENT; bad device
 * indices and a NULL result give -EINVAL.
 */
#include <errno.h>
#include <stdlib.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

static struct th_dev dev;

int main(void)
{
	enum { N = 600 };
	static void *p[N];
	static size_t n[N];
	struct be_alloc_region r;
	unsigned seed = 7;
	int d, i, j, stack_var = 0;
	void *m;

	th_init(&dev, "lookup", 3);
	d = th_attach(&dev);
	ASSERT_OK(d);
	for (i = 0; i < N; i++) {
		unsigned x = (unsigned)rand_r(&seed);

		n[i] = i % 100 == 99 ? (4u << 20) + x % (8u << 20) :
		       i % 10 == 9 ? 32769 + x % 1000000 : 1 + x % 32768;
		p[i] = be_alloc(n[i]);
		ASSERT(p[i] != NULL);
	}
	for (i = 0; i < N; i++) {
		size_t offs[3] = { 0, n[i] / 2, n[i] - 1 };

		for (j = 0; j < 3; j++) {
			const char *q = (const char *)p[i] + offs[j];
			const struct th_call *c = th_find(&dev, q);

			ASSERT(c != NULL);
			ASSERT_OK(be_alloc_lookup(q, d, &r));
			ASSERT_EQ((uintptr_t)r.base, c->addr);
			ASSERT_EQ(r.len, c->len);
			ASSERT_EQ(r.lkey, c->lkey);
			ASSERT_EQ(r.rkey, c->rkey);
			ASSERT_EQ((uintptr_t)r.handle, c->lkey);
			ASSERT_EQ(r.fd, c->fd);
			ASSERT_EQ(r.fd_offset, c->fd_offset);
			ASSERT((uintptr_t)p[i] + n[i] <= (uintptr_t)r.base + r.len);
		}
	}
	m = malloc(100);
	ASSERT_EQ(be_alloc_lookup(m, d, &r), -ENOENT);
	ASSERT_EQ(be_alloc_lookup(&stack_var, d, &r), -ENOENT);
	ASSERT_EQ(be_alloc_lookup(NULL, d, &r), -ENOENT);
	ASSERT_EQ(be_alloc_lookup((void *)~(uintptr_t)0, d, &r), -ENOENT);
	ASSERT_EQ(be_alloc_lookup(p[0], -1, &r), -EINVAL);
	ASSERT_EQ(be_alloc_lookup(p[0], BE_ALLOC_MAX_DEVICES, &r), -EINVAL);
	ASSERT_EQ(be_alloc_lookup(p[0], d + 1, &r), -EINVAL); /* not attached */
	ASSERT_EQ(be_alloc_lookup(p[0], d, NULL), -EINVAL);
	/* Unknown pointers are ignored by be_free(), not crashed on. */
	be_free(m == NULL ? NULL : (char *)p[0] + 1);
	free(m);
	for (i = 0; i < N; i++)
		be_free(p[i]);
	return 0;
}
