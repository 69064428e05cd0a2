/*
 * huge.c - allocations larger than a block: one dedicated region each.
 *
 * Model. A huge allocation gets its own memfd, mapped block-aligned and
 * rounded up to the page size, registered on every attached device and
 * entered in the page map for every block-sized unit it touches (so
 * be_alloc_lookup() works for interior pointers). Registration is
 * expensive on verbs (pinning every page), so a freed region is kept,
 * still registered, in a small cache (at most ALLOC_HUGE_CACHE_MAX bytes,
 * newest first) and handed to a later huge allocation of similar size: at
 * least the size asked and at most half again as large. Regions that do
 * not fit in the cache, and the oldest ones when it overflows, are
 * deregistered and then unmapped. Everything here runs under the pool lock.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc/alloc_int.h"
#include "util/log.h"

/* Drop cached regions, oldest first, until @want bytes went back. */
size_t be__huge_cache_drop_locked(size_t want)
{
	struct be__pool *p = &be__pool;
	size_t freed = 0;

	while (freed < want && !be__list_empty(&p->huge_cache)) {
		struct be__region *r = be__list_entry(be__list_last(&p->huge_cache),
						      struct be__region, link);

		be__list_del_init(&r->link);
		p->huge_cache_bytes -= r->len;
		freed += r->len;
		be__huge_destroy_locked(r);
	}
	return freed;
}

/*
 * be__huge_alloc() - a region of at least @size bytes. Returns its base and
 * its length in *@usable, or NULL with the thread's message set.
 */
void *be__huge_alloc(size_t size, size_t *usable)
{
	struct be__pool *p = &be__pool;
	struct be__region *r = NULL;
	struct be__list *e;
	size_t len;

	if (size > ((size_t)1 << (ALLOC_ADDR_BITS - 1))) {
		be__alloc_error("bemalloc: %zu bytes is more than any allocation can be", size);
		return NULL;
	}
	len = BE_ALIGN_UP(size, p->page_size);
	pthread_mutex_lock(&p->lock);
	be__list_for_each(e, &p->huge_cache) {
		struct be__region *c = be__list_entry(e, struct be__region, link);

		if (c->len >= len && c->len - len <= len / 2) {
			r = c;
			break;
		}
	}
	if (r) {
		be__list_del_init(&r->link);
		p->huge_cache_bytes -= r->len;
	} else {
		r = be__huge_create_locked(len);
		if (!r) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
	}
	r->huge_free = false;
	be__list_add_head(&p->huge_live, &r->link);
	pthread_mutex_unlock(&p->lock);
	*usable = r->len;
	return (void *)r->base;
}

/* Free the huge allocation at @ptr in @r. Returns its length, 0 if @ptr
 * was not a live huge allocation. */
size_t be__huge_free(struct be__region *r, void *ptr)
{
	struct be__pool *p = &be__pool;
	size_t len;

	pthread_mutex_lock(&p->lock);
	if ((uintptr_t)ptr != r->base || r->huge_free) {
		pthread_mutex_unlock(&p->lock);
		be_log_err("bemalloc: be_free(%p): not a live allocation", ptr);
		return 0;
	}
	len = r->len;
	be__list_del_init(&r->link);
	if (len <= ALLOC_HUGE_CACHE_MAX) {
		if (p->huge_cache_bytes + len > ALLOC_HUGE_CACHE_MAX)
			be__huge_cache_drop_locked(p->huge_cache_bytes + len -
						   ALLOC_HUGE_CACHE_MAX);
		r->huge_free = true;
		be__list_add_head(&p->huge_cache, &r->link);
		p->huge_cache_bytes += len;
	} else {
		be__huge_destroy_locked(r);
	}
	pthread_mutex_unlock(&p->lock);
	return len;
}
