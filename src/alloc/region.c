/*
 * region.c - bemalloc's regions: memfd-backed aligned mappings, their
 * registration on every attached device, and the page map.
 *
 * Model. Blocks are block_size slots of one "arena" memfd (grown with
 * ftruncate, a freed slot is hole-punched and reused), so a process needs
 * one descriptor for all its blocks however much memory it uses. Each huge
 * region has a memfd of its own. A region is mapped MAP_SHARED at a
 * block-aligned address: reserve twice the length PROT_NONE, map the memfd
 * MAP_FIXED over the aligned part, unmap the slack.
 *
 * Registration happens here, under the pool lock, once per region and
 * device: when a region is created (every attached device) and when a device
 * attaches (every existing region, see pool.c). Order on the way out is
 * always: leave the page map, deregister on every device, unmap, then give
 * the file pages back. Nothing here ever unmaps or punches a region that is
 * still registered.
 *
 * The page map: a static root of 2^16 pointers to lazily allocated leaves,
 * indexed by address >> log2(block_size) over a 48-bit address space.
 * Writers hold the pool lock; readers are lock-free (acquire loads).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc/alloc_int.h"
#include "util/log.h"

_Atomic(_Atomic(struct be__region *) *) be__pagemap_root[1u << ALLOC_PAGEMAP_ROOT_BITS];

/*
 * One pass over the pagemap entries of [@base, @base + @len): with @grow,
 * allocate the leaves that are missing (-ENOMEM when one cannot be);
 * without, point the entries at @r (NULL clears them), skipping a leaf
 * never allocated (only a clear can meet one).
 */
static int pagemap_pass_locked(uintptr_t base, size_t len, bool grow, struct be__region *r)
{
	unsigned shift = be__pool.block_shift;
	unsigned leaf_bits = ALLOC_ADDR_BITS - shift - ALLOC_PAGEMAP_ROOT_BITS;
	uintptr_t idx, end = (base + len - 1) >> shift;

	for (idx = base >> shift; idx <= end; idx++) {
		_Atomic(struct be__region *) *leaf;

		leaf = atomic_load_explicit(&be__pagemap_root[idx >> leaf_bits],
					    memory_order_relaxed);
		if (grow && !leaf) {
			leaf = calloc((size_t)1 << leaf_bits, sizeof(*leaf));
			if (!leaf)
				return -ENOMEM;
			atomic_store_explicit(&be__pagemap_root[idx >> leaf_bits], leaf,
					      memory_order_release);
		} else if (!grow && leaf) {
			atomic_store_explicit(&leaf[idx & (((uintptr_t)1 << leaf_bits) - 1)], r,
					      memory_order_release);
		}
	}
	return 0;
}

static int pagemap_set_locked(uintptr_t base, size_t len, struct be__region *r)
{
	/* Allocate every leaf first so a failure leaves no half entry. */
	int rc = pagemap_pass_locked(base, len, true, NULL);

	if (!rc)
		pagemap_pass_locked(base, len, false, r);
	return rc;
}

static void pagemap_clear_locked(uintptr_t base, size_t len)
{
	pagemap_pass_locked(base, len, false, NULL);
}

/*
 * Keep @len bytes at @base out of fork() children (MADV_DONTFORK): a child
 * that inherited a MAP_SHARED region would write the parent's pages.
 * Returns 0 or -errno with the thread's message set.
 */
static int region_dontfork(uintptr_t base, size_t len)
{
	int e;

	if (!madvise((void *)base, len, MADV_DONTFORK))
		return 0;
	e = errno;
	be__alloc_error("bemalloc: madvise(MADV_DONTFORK) on %zu bytes at %p failed: %s", len,
			(void *)base, strerror(e));
	return -e;
}

/*
 * Map @len bytes of @fd at @off MAP_SHARED at an @align-aligned address,
 * kept out of fork() children. Returns the address, or NULL with the
 * thread's message set (@what names the region in it).
 */
static void *region_map(int fd, uint64_t off, size_t len, size_t align, const char *what)
{
	size_t res_len = len + align;
	uintptr_t res, a;
	void *p;

	p = mmap(NULL, res_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		goto err;
	res = (uintptr_t)p;
	a = BE_ALIGN_UP(res, (uintptr_t)align);
	p = mmap((void *)a, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		 (off_t)off);
	if (p == MAP_FAILED) {
		int e = errno;

		munmap((void *)res, res_len);
		errno = e;
		goto err;
	}
	if (a > res)
		munmap((void *)res, a - res);
	if (res + res_len > a + len)
		munmap((void *)(a + len), res + res_len - (a + len));
	if ((a + len - 1) >> ALLOC_ADDR_BITS) {
		munmap((void *)a, len);
		errno = ENOMEM;
		goto err;
	}
	if (region_dontfork(a, len)) {
		munmap((void *)a, len);
		return NULL;
	}
	return (void *)a;

err:
	be__alloc_error("bemalloc: mapping a %zu-byte %s failed: %s", len, what, strerror(errno));
	return NULL;
}

/* Register @r on device @d; on failure set the thread's message. */
static int region_reg_one_locked(struct be__region *r, int d)
{
	struct be__alloc_dev *dev = &be__pool.dev[d];
	char err[160] = "";
	int rc;

	memset(&r->mr[d], 0, sizeof(r->mr[d]));
	rc = dev->hook.reg(dev->hook.dev, (void *)r->base, r->len, r->fd, r->fd_offset,
			   &r->mr[d], err, sizeof(err));
	if (rc == 0) {
		atomic_fetch_add_explicit(&be__pool.registrations, 1, memory_order_relaxed);
		return 0;
	}
	if (rc > 0)
		rc = -rc;
	err[sizeof(err) - 1] = '\0';
	atomic_fetch_add_explicit(&be__pool.reg_failures, 1, memory_order_relaxed);
	be__alloc_error("bemalloc: registering %zu bytes at %p on device %d (%s) failed: %s",
			r->len, (void *)r->base, d, dev->name,
			err[0] ? err : strerror(rc < 0 && rc > -4096 ? -rc : EIO));
	return rc ? rc : -EIO;
}

static void region_dereg_one_locked(struct be__region *r, int d)
{
	struct be__alloc_dev *dev = &be__pool.dev[d];

	dev->hook.dereg(dev->hook.dev, &r->mr[d]);
	memset(&r->mr[d], 0, sizeof(r->mr[d]));
	atomic_fetch_add_explicit(&be__pool.deregistrations, 1, memory_order_relaxed);
}

/* Register @r on every attached device; all or nothing. */
int be__region_reg_all_locked(struct be__region *r)
{
	int d, rc;

	for (d = 0; d < BE_ALLOC_MAX_DEVICES; d++) {
		if (!atomic_load_explicit(&be__pool.dev[d].attached, memory_order_relaxed))
			continue;
		rc = region_reg_one_locked(r, d);
		if (rc)
			goto err_undo;
	}
	return 0;

err_undo:
	while (--d >= 0)
		if (atomic_load_explicit(&be__pool.dev[d].attached, memory_order_relaxed))
			region_dereg_one_locked(r, d);
	return rc;
}

void be__region_dereg_all_locked(struct be__region *r)
{
	int d;

	for (d = BE_ALLOC_MAX_DEVICES - 1; d >= 0; d--)
		if (atomic_load_explicit(&be__pool.dev[d].attached, memory_order_relaxed))
			region_dereg_one_locked(r, d);
}

int be__region_reg_dev_locked(struct be__region *r, int d)
{
	return region_reg_one_locked(r, d);
}

/*
 * Deregister @r from device @d alone (detach); @r stays mapped. A verbs
 * library set up with ibv_fork_init() clears MADV_DONTFORK on dereg
 * (MADV_DOFORK), so it is set again: the region must still stay out of
 * children. A failure there cannot undo the detach; it is logged.
 */
void be__region_dereg_dev_locked(struct be__region *r, int d)
{
	region_dereg_one_locked(r, d);
	region_dontfork(r->base, r->len);
}

/* A free slot of the arena memfd, growing the file if needed. */
static int arena_slot_get(uint64_t *slot)
{
	struct be__pool *p = &be__pool;

	if (p->arena_fd < 0) {
		p->arena_fd = memfd_create("bemalloc-blocks", MFD_CLOEXEC);
		if (p->arena_fd < 0) {
			int e = errno;

			be__alloc_error("bemalloc: memfd_create failed: %s", strerror(e));
			return -e;
		}
	}
	if (p->nfree_slots) {
		*slot = p->free_slots[--p->nfree_slots];
		return 0;
	}
	if (ftruncate(p->arena_fd, (off_t)((p->arena_slots + 1) * p->block_size))) {
		int e = errno;

		be__alloc_error("bemalloc: growing the block memfd to %llu bytes failed: %s",
				(unsigned long long)((p->arena_slots + 1) * p->block_size),
				strerror(e));
		return -e;
	}
	*slot = p->arena_slots++;
	return 0;
}

/* Give a slot's pages back to the OS and keep the slot for reuse. */
static void arena_slot_put(uint64_t slot)
{
	struct be__pool *p = &be__pool;

	fallocate(p->arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		  (off_t)(slot * p->block_size), (off_t)p->block_size);
	if (p->nfree_slots == p->cap_free_slots) {
		size_t cap = p->cap_free_slots ? 2 * p->cap_free_slots : 16;
		uint64_t *n = realloc(p->free_slots, cap * sizeof(*n));

		if (!n)
			return; /* the slot is lost, the file only stays larger */
		p->free_slots = n;
		p->cap_free_slots = cap;
	}
	p->free_slots[p->nfree_slots++] = slot;
}

static bool limit_allows_locked(size_t more)
{
	uint64_t limit = atomic_load_explicit(&be__pool.limit, memory_order_relaxed);
	uint64_t mapped = atomic_load_explicit(&be__pool.mapped_bytes, memory_order_relaxed);

	if (!limit || mapped + more <= limit)
		return true;
	/* Free huge regions we only keep for reuse are worth less than this. */
	be__huge_cache_drop_locked(mapped + more - limit);
	mapped = atomic_load_explicit(&be__pool.mapped_bytes, memory_order_relaxed);
	if (mapped + more <= limit)
		return true;
	be__alloc_error("bemalloc: limit of %llu bytes reached (%llu mapped, %zu more needed)",
			(unsigned long long)limit, (unsigned long long)mapped, more);
	return false;
}

/* Free @b's descriptor and its arrays (malloc memory, never mapped). */
void be__block_free_meta(struct be__block *b)
{
	free(b->links);
	free(b->spans);
	free(b->bitmap);
	free(b);
}

/*
 * be__block_create_locked() - map, describe and register a new block and
 * enter it in the page map and the block list. Returns NULL with the
 * thread's error message set on failure (limit, memfd, mmap, registration);
 * nothing is left behind then.
 */
struct be__block *be__block_create_locked(void)
{
	struct be__pool *p = &be__pool;
	size_t bs = p->block_size;
	uint32_t units = p->units;
	struct be__block *b;
	uint64_t slot = 0;
	void *base;
	int rc;

	if (!limit_allows_locked(bs))
		return NULL;
	b = calloc(1, sizeof(*b) + units * sizeof(b->unit_span[0]));
	if (!b)
		goto err_nomem;
	b->bitmap = calloc((units + 63) / 64, sizeof(uint64_t));
	b->spans = aligned_alloc(64, units * sizeof(*b->spans));
	b->links = malloc((size_t)units * ALLOC_UNIT_OBJS * sizeof(uint16_t));
	if (!b->bitmap || !b->spans || !b->links)
		goto err_free;
	memset(b->spans, 0, units * sizeof(*b->spans));
	if (arena_slot_get(&slot))
		goto err_free_quiet;
	base = region_map(p->arena_fd, slot * bs, bs, bs, "block");
	if (!base)
		goto err_slot;
	b->r.kind = ALLOC_REGION_BLOCK;
	b->r.base = (uintptr_t)base;
	b->r.len = bs;
	b->r.fd = p->arena_fd;
	b->r.fd_offset = slot * bs;
	b->slot = slot;
	b->units = units;
	b->free_units = units;
	rc = be__region_reg_all_locked(&b->r);
	if (rc)
		goto err_unmap;
	if (pagemap_set_locked(b->r.base, bs, &b->r)) {
		be__alloc_error("bemalloc: out of memory for the page map");
		goto err_dereg;
	}
	/* Oldest first: runs are searched first-fit in this order, and
	 * packing old blocks lets new ones become free for trim. */
	be__list_add_tail(&p->blocks, &b->r.link);
	atomic_fetch_add_explicit(&p->blocks_n, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->mapped_bytes, bs, memory_order_relaxed);
	return b;

err_dereg:
	be__region_dereg_all_locked(&b->r);
err_unmap:
	munmap(base, bs);
err_slot:
	arena_slot_put(slot);
	goto err_free_quiet;
err_free:
	be__alloc_error("bemalloc: out of memory for block metadata");
err_free_quiet:
	be__block_free_meta(b);
	return NULL;
err_nomem:
	be__alloc_error("bemalloc: out of memory for block metadata");
	return NULL;
}

/* Leave the page map, deregister, unmap, punch: in that order. */
void be__block_destroy_locked(struct be__block *b)
{
	struct be__pool *p = &be__pool;

	be__list_del_init(&b->r.link);
	pagemap_clear_locked(b->r.base, b->r.len);
	be__region_dereg_all_locked(&b->r);
	munmap((void *)b->r.base, b->r.len);
	arena_slot_put(b->slot);
	atomic_fetch_sub_explicit(&p->blocks_n, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&p->mapped_bytes, b->r.len, memory_order_relaxed);
	be__block_free_meta(b);
}

/*
 * be__huge_create_locked() - a dedicated region of @len bytes (a multiple
 * of the page size), block-aligned, registered, in the page map for every
 * block-sized unit it touches. Not on any list yet. NULL + message on
 * failure.
 */
struct be__region *be__huge_create_locked(size_t len)
{
	struct be__pool *p = &be__pool;
	struct be__region *r;
	void *base;
	int fd;

	if (!limit_allows_locked(len))
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		be__alloc_error("bemalloc: out of memory for a region descriptor");
		return NULL;
	}
	fd = memfd_create("bemalloc-huge", MFD_CLOEXEC);
	if (fd < 0) {
		be__alloc_error("bemalloc: memfd_create failed: %s", strerror(errno));
		goto err_free;
	}
	if (ftruncate(fd, (off_t)len)) {
		be__alloc_error("bemalloc: sizing a %zu-byte memfd failed: %s", len,
				strerror(errno));
		goto err_close;
	}
	base = region_map(fd, 0, len, p->block_size, "region");
	if (!base)
		goto err_close;
	r->kind = ALLOC_REGION_HUGE;
	r->base = (uintptr_t)base;
	r->len = len;
	r->fd = fd;
	r->fd_offset = 0;
	if (be__region_reg_all_locked(r))
		goto err_unmap;
	if (pagemap_set_locked(r->base, len, r)) {
		be__alloc_error("bemalloc: out of memory for the page map");
		goto err_dereg;
	}
	atomic_fetch_add_explicit(&p->huge_n, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->mapped_bytes, len, memory_order_relaxed);
	return r;

err_dereg:
	be__region_dereg_all_locked(r);
err_unmap:
	munmap(base, len);
err_close:
	close(fd);
err_free:
	free(r);
	return NULL;
}

/* @r is on no list. Leave the page map, deregister, unmap, close. */
void be__huge_destroy_locked(struct be__region *r)
{
	pagemap_clear_locked(r->base, r->len);
	be__region_dereg_all_locked(r);
	munmap((void *)r->base, r->len);
	close(r->fd);
	atomic_fetch_sub_explicit(&be__pool.huge_n, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&be__pool.mapped_bytes, r->len, memory_order_relaxed);
	free(r);
}

/*
 * be__region_fork_forget_locked() - in a fork() child, where @r is one of
 * the parent's regions and is not mapped (MADV_DONTFORK): take it out of
 * the page map, so be_free() and be_alloc_lookup() refuse its pointers,
 * and reserve its address range PROT_NONE, so no later mapping of the
 * child lands there and a stale pointer of the parent faults instead of
 * reaching a buffer of the child. Closes the child's copy of a huge
 * region's memfd. Neither deregisters nor unmaps: the registrations and
 * the mapping are the parent's. Only system calls: it runs in the atfork
 * child handler.
 */
void be__region_fork_forget_locked(struct be__region *r)
{
	void *p;

	pagemap_clear_locked(r->base, r->len);
	p = mmap((void *)r->base, r->len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != MAP_FAILED && p != (void *)r->base)
		munmap(p, r->len); /* a kernel before 4.17 took the address as a hint */
	if (r->kind == ALLOC_REGION_HUGE)
		close(r->fd);
}
