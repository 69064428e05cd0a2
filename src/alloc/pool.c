/*
 * pool.c - bemalloc's process-wide pool: configuration, the blocks and
 * their unit bitmaps, orphaned heaps, devices, trim, and error reporting.
 *
 * Model. One mutex (be__pool.lock) guards everything here. It is taken
 * only on slow paths: a heap needs a run of units that its own cache does
 * not have, a heap gives runs back past its cache bound, a thread starts or
 * exits, a huge allocation, attach/detach, trim. The registration hooks run
 * under it (alloc.h says so), which is what makes "every region is
 * registered on every attached device" an invariant.
 *
 * Blocks are searched first-fit in list order (oldest first) for a run of
 * free units; a block is created only when none fits. A run stays marked in
 * its block's bitmap while a heap owns it, also while it sits in that heap's
 * span cache: such a block is not "entirely free" and trim leaves it.
 *
 * fork(). Every region is mapped MADV_DONTFORK (region.c), so a child does
 * not have the parent's blocks at all; what it inherits is a private copy
 * of this metadata, which describes them. pthread_atfork handlers,
 * registered at init, turn that copy into an empty pool: prepare takes the
 * pool lock (no list is half changed at the fork), the parent releases it,
 * and the child forgets every region (page map out, address range reserved,
 * huge memfds closed; no dereg hook and no munmap: those are the parent's),
 * closes the arena memfd (its slots are the parent's pages), drops the
 * devices and counters, makes the forking thread forget its heap, and
 * releases the lock. The child handler only stores and makes system calls;
 * the descriptors it sets aside (be__pool.forked) are freed by the child's
 * first use of the pool, or at its next fork (prepare).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/alloc_int.h"
#include "util/abi.h"
#include "util/log.h"

struct be__pool be__pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.blocks = BE__LIST_INIT(be__pool.blocks),
	.huge_live = BE__LIST_INIT(be__pool.huge_live),
	.huge_cache = BE__LIST_INIT(be__pool.huge_cache),
	.arena_fd = -1,
	.forked = {
		.blocks = BE__LIST_INIT(be__pool.forked.blocks),
		.huge_live = BE__LIST_INIT(be__pool.forked.huge_live),
		.huge_cache = BE__LIST_INIT(be__pool.forked.huge_cache),
	},
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static __thread char alloc_errbuf[256];
static size_t env_block_size;
static uint64_t env_limit;

void be__heap_thread_exit(void *arg);
void be__heap_classes_init(void);
static struct be__region *region_next(struct be__region *r, int *list);

void be__alloc_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(alloc_errbuf, sizeof(alloc_errbuf), fmt, ap);
	va_end(ap);
	be_log_warn("%s", alloc_errbuf);
}

const char *be_alloc_last_error(void)
{
	return alloc_errbuf;
}

/* An allocation returns NULL: count it, errno says ENOMEM. */
void be__alloc_fail(void)
{
	atomic_fetch_add_explicit(&be__pool.failures, 1, memory_order_relaxed);
	errno = ENOMEM;
}

static unsigned ceil_log2(uint64_t v)
{
	return v <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(v - 1);
}

unsigned be__alloc_large_class(uint32_t units)
{
	return ALLOC_NUM_SM + ceil_log2(units);
}

/* Block size and everything derived from it; pool lock or init. */
static void pool_set_block_size(size_t bs)
{
	struct be__pool *p = &be__pool;
	unsigned i, n;

	p->block_size = bs;
	p->block_shift = (unsigned)__builtin_ctzll(bs);
	p->pm_root_shift = ALLOC_ADDR_BITS - ALLOC_PAGEMAP_ROOT_BITS;
	p->pm_leaf_mask = ((uintptr_t)1 << (p->pm_root_shift - p->block_shift)) - 1;
	p->units = (uint32_t)(bs >> ALLOC_UNIT_SHIFT);
	p->heap_cache_max = BE_MIN(2 * bs, (size_t)16 << 20);
	for (i = 0; i < ALLOC_NUM_SMALL; i++)
		p->class_size[i] = (uint64_t)(i + 1) * BE_ALLOC_MIN_ALIGN;
	for (i = ALLOC_NUM_SMALL; i < ALLOC_NUM_SM; i++) {
		unsigned msb = 10 + (i - ALLOC_NUM_SMALL) / 4;
		unsigned sub = (i - ALLOC_NUM_SMALL) % 4;

		p->class_size[i] = (1ull << msb) + ((uint64_t)(sub + 1) << (msb - 2));
	}
	n = ceil_log2(p->units);
	for (i = 0; i <= n; i++)
		p->class_size[ALLOC_NUM_SM + i] = (uint64_t)ALLOC_UNIT_SIZE << i;
	p->num_classes = ALLOC_NUM_SM + n + 2;
	p->class_size[p->num_classes - 1] = 0; /* huge: sizes vary */
}

static bool block_size_valid(uint64_t bs)
{
	return bs >= ALLOC_BLOCK_MIN && bs <= ALLOC_BLOCK_MAX && !(bs & (bs - 1));
}

/* Free what a fork() child set aside of its parent's pool (lock held). */
static void pool_forked_free_locked(void)
{
	struct be__pool *p = &be__pool;
	struct be__list *e, *next;
	struct be__heap *h, *hn;

	be__list_for_each_safe(e, next, &p->forked.blocks)
		be__block_free_meta((struct be__block *)be__list_entry(e, struct be__region, link));
	be__list_for_each_safe(e, next, &p->forked.huge_live)
		free(be__list_entry(e, struct be__region, link));
	be__list_for_each_safe(e, next, &p->forked.huge_cache)
		free(be__list_entry(e, struct be__region, link));
	be__list_init(&p->forked.blocks);
	be__list_init(&p->forked.huge_live);
	be__list_init(&p->forked.huge_cache);
	for (h = p->forked.heaps; h; h = hn) {
		hn = atomic_load_explicit(&h->next_all, memory_order_relaxed);
		free(h);
	}
	p->forked.heaps = NULL;
	free(p->forked.free_slots);
	p->forked.free_slots = NULL;
}

static void pool_atfork_prepare(void)
{
	pthread_mutex_lock(&be__pool.lock);
	pool_forked_free_locked();
}

static void pool_atfork_parent(void)
{
	pthread_mutex_unlock(&be__pool.lock);
}

/*
 * The child of a fork(), its only thread, pool lock held since prepare:
 * become an empty pool. The parent's regions are not mapped here; their
 * descriptors are set aside, not freed (no free() in this handler).
 */
static void pool_atfork_child(void)
{
	struct be__pool *p = &be__pool;
	struct be__region *r;
	unsigned c;
	int list = 0;

	for (r = region_next(NULL, &list); r; r = region_next(r, &list))
		be__region_fork_forget_locked(r);
	if (p->arena_fd >= 0)
		close(p->arena_fd);
	p->arena_fd = -1;
	p->arena_slots = 0;
	be__list_splice_tail(&p->forked.blocks, &p->blocks);
	be__list_splice_tail(&p->forked.huge_live, &p->huge_live);
	be__list_splice_tail(&p->forked.huge_cache, &p->huge_cache);
	p->forked.heaps = atomic_load_explicit(&p->heaps, memory_order_relaxed);
	p->forked.free_slots = p->free_slots;
	p->huge_cache_bytes = 0;
	p->orphans = NULL;
	atomic_store_explicit(&p->heaps, NULL, memory_order_relaxed);
	p->free_slots = NULL;
	p->nfree_slots = p->cap_free_slots = 0;
	/* The devices are the parent's: forgotten, their hooks never called. */
	memset(p->dev, 0, sizeof(p->dev));
	atomic_store_explicit(&p->devices, 0, memory_order_relaxed);
	atomic_store_explicit(&p->blocks_n, 0, memory_order_relaxed);
	atomic_store_explicit(&p->huge_n, 0, memory_order_relaxed);
	atomic_store_explicit(&p->mapped_bytes, 0, memory_order_relaxed);
	atomic_store_explicit(&p->registrations, 0, memory_order_relaxed);
	atomic_store_explicit(&p->deregistrations, 0, memory_order_relaxed);
	atomic_store_explicit(&p->failures, 0, memory_order_relaxed);
	atomic_store_explicit(&p->reg_failures, 0, memory_order_relaxed);
	for (c = 0; c < BE_ALLOC_NUM_CLASSES; c++) {
		atomic_store_explicit(&p->nfree[c], 0, memory_order_relaxed);
		atomic_store_explicit(&p->bytes[c], 0, memory_order_relaxed);
	}
	be__heap_fork_child();
	pthread_mutex_unlock(&p->lock);
}

static void pool_init_once(void)
{
	struct be__pool *p = &be__pool;
	uint64_t v;
	int rc;

	p->page_size = (size_t)sysconf(_SC_PAGESIZE);
	env_block_size = ALLOC_BLOCK_DEFAULT;
	rc = be__env_size("BE_ALLOC_BLOCK_SIZE", &v);
	if (rc == 1 && block_size_valid(v))
		env_block_size = (size_t)v;
	else if (rc)
		be_log_warn("bemalloc: ignoring BE_ALLOC_BLOCK_SIZE (a power of two, 1M..1G)");
	rc = be__env_size("BE_ALLOC_LIMIT", &v);
	if (rc == 1)
		env_limit = v;
	else if (rc)
		be_log_warn("bemalloc: ignoring malformed BE_ALLOC_LIMIT");
	pool_set_block_size(env_block_size);
	atomic_store(&p->limit, env_limit);
	be__heap_classes_init();
	p->key_ok = !pthread_key_create(&p->key, be__heap_thread_exit);
	if (!p->key_ok)
		be_log_err("bemalloc: pthread_key_create failed; exited threads keep their heaps");
	/* Without the handlers a forked child would reuse the parent's arena
	 * slots: refuse to allocate at all rather than corrupt (heap adopt). */
	p->atfork_err = pthread_atfork(pool_atfork_prepare, pool_atfork_parent,
				       pool_atfork_child);
	if (p->atfork_err)
		be_log_err("bemalloc: pthread_atfork failed: %s; allocations will fail",
			   strerror(p->atfork_err));
}

void be__alloc_init(void)
{
	pthread_once(&pool_once, pool_init_once);
}

/* The v1 layout of struct be_alloc_config ends with limit_bytes. */
#define ALLOC_CONFIG_V1 BE__V1_SIZE(struct be_alloc_config, limit_bytes)

int be_alloc_configure(const struct be_alloc_config *user)
{
	struct be__pool *p = &be__pool;
	struct be_alloc_config c = { 0 }, *cfg = &c;
	int rc = 0;

	if (!user || be__abi_read(&c, sizeof(c), user, ALLOC_CONFIG_V1))
		return -EINVAL;
	if (cfg->block_size && !block_size_valid(cfg->block_size))
		return -EINVAL;
	be__alloc_init();
	pthread_mutex_lock(&p->lock);
	if (cfg->block_size && cfg->block_size != p->block_size) {
		if (p->frozen) {
			rc = -EBUSY;
			goto out;
		}
		pool_set_block_size(cfg->block_size);
	} else if (!cfg->block_size && !p->frozen && p->block_size != env_block_size) {
		pool_set_block_size(env_block_size);
	}
	atomic_store(&p->limit, cfg->limit_bytes ? (uint64_t)cfg->limit_bytes : env_limit);
out:
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* First run of @n clear bits in @b's bitmap, or -1. Word at a time. */
static int bitmap_find(const struct be__block *b, uint32_t n)
{
	uint32_t u = 0, start, units = b->units;

	while (u < units) {
		uint64_t w = ~b->bitmap[u / 64] >> (u % 64); /* 1 = free */

		if (!w) {
			u = (u / 64 + 1) * 64;
			continue;
		}
		u += (uint32_t)__builtin_ctzll(w);
		if (u >= units)
			break;
		start = u;
		for (;;) { /* the end of this free run */
			uint64_t x = b->bitmap[u / 64] >> (u % 64);

			if (x) {
				u += (uint32_t)__builtin_ctzll(x);
				break;
			}
			u = (u / 64 + 1) * 64;
			if (u >= units)
				break;
		}
		if (u > units)
			u = units;
		if (u - start >= n)
			return (int)start;
	}
	return -1;
}

static void bitmap_assign(struct be__block *b, uint32_t first, uint32_t n, bool set)
{
	uint32_t u;

	for (u = first; u < first + n; u++) {
		if (set)
			b->bitmap[u / 64] |= 1ull << (u % 64);
		else
			b->bitmap[u / 64] &= ~(1ull << (u % 64));
	}
}

/* Take @units units at @first of @b for a run; set its descriptor. */
static struct be__span *run_carve_locked(struct be__block *b, uint32_t first, uint32_t units)
{
	struct be__span *s = &b->spans[first];
	uint32_t u;

	bitmap_assign(b, first, units, true);
	b->free_units -= units;
	s->block = b;
	s->first = (uint16_t)first;
	s->units = (uint16_t)units;
	s->start = b->r.base + ((uintptr_t)first << ALLOC_UNIT_SHIFT);
	s->flags = 0;
	s->next = s->prev = NULL;
	for (u = first; u < first + units; u++)
		atomic_store_explicit(&b->unit_span[u], s, memory_order_relaxed);
	return s;
}

/*
 * be__pool_runs_get() - up to @max runs of @units contiguous free units,
 * first fit over the blocks, else from a new block (mapped and registered
 * on every device). Descriptors are set and every unit points at its run.
 * Returns a list linked by ->next, or NULL with the thread's message set.
 */
struct be__span *be__pool_runs_get(uint32_t units, unsigned max)
{
	struct be__pool *p = &be__pool;
	struct be__span *list = NULL, *s;
	struct be__list *e;
	unsigned got = 0;
	int first;

	pthread_mutex_lock(&p->lock);
	for (e = p->blocks.next; e != &p->blocks && got < max; e = e->next) {
		struct be__block *b = (struct be__block *)be__list_entry(e, struct be__region, link);

		while (got < max && b->free_units >= units && (first = bitmap_find(b, units)) >= 0) {
			s = run_carve_locked(b, (uint32_t)first, units);
			s->next = list;
			list = s;
			got++;
		}
	}
	if (!got) {
		struct be__block *b = be__block_create_locked();

		while (b && got < max && b->free_units >= units) {
			s = run_carve_locked(b, b->units - b->free_units, units);
			s->next = list;
			list = s;
			got++;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return list;
}

struct be__span *be__pool_run_get(uint32_t units)
{
	return be__pool_runs_get(units, 1);
}

void be__pool_run_put_locked(struct be__span *s)
{
	struct be__block *b = s->block;

	s->flags = 0;
	atomic_store_explicit(&s->heap, NULL, memory_order_relaxed);
	bitmap_assign(b, s->first, s->units, false);
	b->free_units += s->units;
}

void be__pool_runs_put(struct be__span *list)
{
	struct be__span *next;

	if (!list)
		return;
	pthread_mutex_lock(&be__pool.lock);
	for (; list; list = next) {
		next = list->next;
		be__pool_run_put_locked(list);
	}
	pthread_mutex_unlock(&be__pool.lock);
}

/* A heap for a new thread: an orphan if there is one, else a new one. */
struct be__heap *be__pool_heap_adopt(void)
{
	struct be__pool *p = &be__pool;
	struct be__heap *h;

	pthread_mutex_lock(&p->lock);
	if (BE_UNLIKELY(p->atfork_err)) {
		pthread_mutex_unlock(&p->lock);
		be__alloc_error("bemalloc: pthread_atfork failed at init: %s; no allocation is safe "
				"across fork()", strerror(p->atfork_err));
		return NULL;
	}
	pool_forked_free_locked();
	p->frozen = true;
	h = p->orphans;
	if (h) {
		p->orphans = h->next_orphan;
		h->next_orphan = NULL;
		pthread_mutex_unlock(&p->lock);
		return h;
	}
	h = aligned_alloc(64, BE_ALIGN_UP(sizeof(*h), (size_t)64));
	if (!h) {
		pthread_mutex_unlock(&p->lock);
		be__alloc_error("bemalloc: out of memory for a thread heap");
		return NULL;
	}
	memset(h, 0, sizeof(*h));
	/* Published last: be_alloc_stats() walks this list without the lock. */
	atomic_store_explicit(&h->next_all, atomic_load(&p->heaps), memory_order_relaxed);
	atomic_store_explicit(&p->heaps, h, memory_order_release);
	pthread_mutex_unlock(&p->lock);
	return h;
}

/* Thread exit: @runs go back to the pool, @h waits for the next thread. */
void be__pool_heap_orphan(struct be__heap *h, struct be__span *runs)
{
	struct be__pool *p = &be__pool;
	struct be__span *next;

	pthread_mutex_lock(&p->lock);
	for (; runs; runs = next) {
		next = runs->next;
		be__pool_run_put_locked(runs);
	}
	h->next_orphan = p->orphans;
	p->orphans = h;
	pthread_mutex_unlock(&p->lock);
}

size_t be_alloc_trim(void)
{
	struct be__pool *p = &be__pool;
	struct be__heap *self, *h;
	struct be__list *e, *next;
	struct be__span *runs, *rn;
	size_t freed = 0;

	be__alloc_init();
	/* The caller's own heap is ours to collect; other live threads' are not. */
	self = be__heap_self();
	runs = self ? be__heap_release(self) : NULL;
	pthread_mutex_lock(&p->lock);
	pool_forked_free_locked();
	for (; runs; runs = rn) {
		rn = runs->next;
		be__pool_run_put_locked(runs);
	}
	for (h = p->orphans; h; h = h->next_orphan) {
		for (runs = be__heap_release(h); runs; runs = rn) {
			rn = runs->next;
			be__pool_run_put_locked(runs);
		}
	}
	be__list_for_each_safe(e, next, &p->blocks) {
		struct be__block *b = (struct be__block *)be__list_entry(e, struct be__region, link);

		if (b->free_units != b->units)
			continue;
		freed += b->r.len;
		be__block_destroy_locked(b);
	}
	freed += be__huge_cache_drop_locked(SIZE_MAX);
	pthread_mutex_unlock(&p->lock);
	return freed;
}

/* Iterate over every region: blocks, live huge regions, cached ones. */
static struct be__region *region_next(struct be__region *r, int *list)
{
	struct be__pool *p = &be__pool;
	struct be__list *const heads[3] = { &p->blocks, &p->huge_live, &p->huge_cache };
	struct be__list *e = r ? r->link.next : NULL;

	/* *list counts the lists begun: @r is on heads[*list - 1]. */
	while (!e || (*list && e == heads[*list - 1])) {
		if (*list == 3)
			return NULL;
		e = heads[(*list)++]->next;
	}
	return be__list_entry(e, struct be__region, link);
}

int be_alloc_attach_device(const struct be_alloc_reg_hook *hook)
{
	struct be__pool *p = &be__pool;
	struct be__region *r, *u;
	int d, rc = 0, list = 0, ulist = 0;

	if (!hook || !hook->reg || !hook->dereg)
		return -EINVAL;
	be__alloc_init();
	pthread_mutex_lock(&p->lock);
	for (d = 0; d < BE_ALLOC_MAX_DEVICES; d++)
		if (!atomic_load_explicit(&p->dev[d].attached, memory_order_relaxed))
			break;
	if (d == BE_ALLOC_MAX_DEVICES) {
		rc = -ENOSPC;
		be__alloc_error("bemalloc: %d devices attached already", BE_ALLOC_MAX_DEVICES);
		goto out;
	}
	p->dev[d].hook = *hook;
	snprintf(p->dev[d].name, sizeof(p->dev[d].name), "%s",
		 hook->name ? hook->name : "?");
	for (r = region_next(NULL, &list); r; r = region_next(r, &list)) {
		rc = be__region_reg_dev_locked(r, d);
		if (rc)
			goto err_undo;
	}
	atomic_store_explicit(&p->dev[d].attached, 1, memory_order_release);
	atomic_fetch_add(&p->devices, 1);
	rc = d;
	goto out;

err_undo:
	for (u = region_next(NULL, &ulist); u != r; u = region_next(u, &ulist))
		be__region_dereg_dev_locked(u, d);
	memset(&p->dev[d], 0, sizeof(p->dev[d]));
out:
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int be_alloc_detach_device(int d)
{
	struct be__pool *p = &be__pool;
	struct be__region *r;
	int list = 0;

	if (d < 0 || d >= BE_ALLOC_MAX_DEVICES)
		return -EINVAL;
	be__alloc_init();
	pthread_mutex_lock(&p->lock);
	if (!atomic_load_explicit(&p->dev[d].attached, memory_order_relaxed)) {
		pthread_mutex_unlock(&p->lock);
		return -EINVAL;
	}
	for (r = region_next(NULL, &list); r; r = region_next(r, &list))
		be__region_dereg_dev_locked(r, d);
	atomic_store_explicit(&p->dev[d].attached, 0, memory_order_release);
	atomic_fetch_sub(&p->devices, 1);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int be_alloc_lookup(const void *ptr, int d, struct be_alloc_region *out)
{
	struct be__pool *p = &be__pool;
	uintptr_t a = (uintptr_t)ptr;
	struct be__region *r;

	if (d < 0 || d >= BE_ALLOC_MAX_DEVICES || !out)
		return -EINVAL;
	if (!atomic_load_explicit(&p->dev[d].attached, memory_order_acquire))
		return -EINVAL;
	r = be__pagemap_get(a);
	if (!r || a < r->base || a >= r->base + r->len)
		return -ENOENT;
	out->base = (void *)r->base;
	out->len = r->len;
	out->lkey = r->mr[d].lkey;
	out->rkey = r->mr[d].rkey;
	out->handle = r->mr[d].handle;
	out->fd = r->fd;
	out->fd_offset = r->fd_offset;
	return 0;
}
