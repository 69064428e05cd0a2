/*
 * alloc_int.h - bemalloc internals shared by pool.c, region.c and heap.c.
 *
 * Model (docs/ALLOC.md has the long version).
 *
 *   region   a block-aligned mapping of a memfd, registered on every
 *            attached device: either a block (block_size bytes, carved into
 *            spans) or a huge region (one allocation larger than a block).
 *            Regions are found from any address in O(1) through the page
 *            map, indexed by address >> log2(block_size).
 *   unit     64 KiB; a block holds block_size / 64 KiB units.
 *   span     a run of 1..n contiguous units of one block. A span either
 *            serves objects of one small/medium size class to one heap, or
 *            is a "large" run holding exactly one object.
 *   heap     per thread (thread-local pointer). Owns spans; its owner
 *            allocates and frees in them without locks or atomics. Other
 *            threads free into a span through its atomic deferred list.
 *   pool     process-wide, one mutex: the list of blocks with their unit
 *            bitmaps, the huge regions, the attached devices, the orphaned
 *            heaps. Taken only when a heap needs a new span or gives
 *            spans back, for huge allocations, attach/detach and trim.
 *
 * Every descriptor (region, block, span, heap, free-list links) lives in
 * ordinary malloc memory, never inside a registered block: a peer holding
 * a block's rkey can scribble over buffers but not over the allocator.
 * Free lists are therefore arrays of 16-bit object indices beside the
 * block, not pointers threaded through free buffers.
 */
#ifndef BE_ALLOC_INT_H
#define BE_ALLOC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/reg.h"
#include "util/common.h"
#include "util/list.h"

#define ALLOC_UNIT_SHIFT 16
#define ALLOC_UNIT_SIZE ((size_t)1 << ALLOC_UNIT_SHIFT)
/* Objects (and so link slots) per unit at the smallest class. */
#define ALLOC_UNIT_OBJS (ALLOC_UNIT_SIZE / BE_ALLOC_MIN_ALIGN)
#define ALLOC_SMALL_MAX 1024u
#define ALLOC_MEDIUM_MAX 32768u
#define ALLOC_NUM_SMALL 16   /* 64 .. 1024 in 64-byte steps */
#define ALLOC_NUM_SM 36      /* + 4 per power of two up to 32 KiB */
#define ALLOC_CLASS_LARGE 255
#define ALLOC_CACHE_UNITS 64 /* heap span caches cover runs up to this */
#define ALLOC_NIL 0xffffu    /* end of an index list */

#define ALLOC_BLOCK_MIN ((size_t)1 << 20)
#define ALLOC_BLOCK_MAX ((size_t)1 << 30)
#define ALLOC_BLOCK_DEFAULT ((size_t)4 << 20)
#define ALLOC_ADDR_BITS 48
#define ALLOC_PAGEMAP_ROOT_BITS 16
#define ALLOC_HUGE_CACHE_MAX ((size_t)256 << 20)

enum alloc_region_kind { ALLOC_REGION_BLOCK = 1, ALLOC_REGION_HUGE = 2 };

struct be__region {
	enum alloc_region_kind kind;
	uintptr_t base;
	size_t len;
	int fd;
	uint64_t fd_offset;
	bool huge_free;        /* huge: in the huge cache (pool lock) */
	struct be_alloc_mr mr[BE_ALLOC_MAX_DEVICES]; /* written under pool lock */
	struct be__list link;  /* pool list it is on (pool lock) */
};

/* Span flags, owner-only. */
#define SPAN_LARGE 0x01    /* a large run: one object */
#define SPAN_ACTIVE 0x02   /* the heap's active span of its class */
#define SPAN_PARTIAL 0x04  /* on the heap's partial list of its class */
#define SPAN_DETACHED 0x08 /* the owner let go of it (DEFER_FULL set) */

/* The deferred word: first index (ALLOC_NIL: empty), count, FULL. */
#define DEFER_FULL 0x80000000u
#define DEFER_COUNT(w) (((w) >> 16) & 0x7fffu)

struct be__block;
struct be__heap;

struct be__span {
	/* Owner heap only (or the pool lock while the span is free). */
	uintptr_t start;
	uint64_t magic;       /* ceil(2^40 / size): offset -> index */
	uint16_t *links;      /* next-index of each object, outside the block */
	uint32_t size;        /* object size; large: run bytes */
	uint32_t count;       /* objects that fit */
	uint32_t bump;        /* objects handed out at least once */
	uint32_t used;        /* objects allocated and not collected as free */
	uint16_t free_head;   /* local free list */
	uint16_t defer_min;   /* remote frees that hand a FULL span back */
	uint16_t units;       /* units in the run (pool lock) */
	uint16_t first;       /* its first unit in the block (pool lock) */
	uint8_t cls;          /* size class, ALLOC_CLASS_LARGE for runs */
	uint8_t flags;        /* SPAN_* */
	struct be__span *prev, *next; /* partial list or span cache */
	struct be__block *block;

	/* Shared with remote threads, on their own cache line. */
	_Alignas(64) _Atomic(struct be__heap *) heap;
	/* Remote-freed objects: DEFER_FULL | count << 16 | index of the first
	 * (ALLOC_NIL ends the list). See heap.c for the handshake. */
	_Atomic uint32_t deferred;
	struct be__span *pending_next; /* on heap->pending (written by pusher) */
};

struct be__block {
	struct be__region r;  /* first: the page map points here */
	uint32_t units;
	uint32_t free_units;  /* pool lock */
	uint64_t slot;        /* offset of the block in the arena memfd / size */
	uint64_t *bitmap;     /* 1 = unit belongs to a span (pool lock) */
	struct be__span *spans; /* descriptor of a span starting at unit u */
	uint16_t *links;      /* ALLOC_UNIT_OBJS link slots per unit */
	/* Every unit -> its span; inline, one load less on be_free(). */
	_Atomic(struct be__span *) unit_span[];
};

struct be__heap_class {
	struct be__span *active;
	struct be__span *partial; /* spans with free objects, doubly linked */
};

struct be__heap {
	/* The span of the last local free: a free into it skips the page map.
	 * Cleared when the span leaves the heap (heap_run_put()). */
	struct be__span *ls;
	uintptr_t ls_start;
	size_t ls_len;
	struct be__heap_class cls[ALLOC_NUM_SM];
	struct be__span *cache[ALLOC_CACHE_UNITS + 1]; /* free runs by units */
	size_t cache_bytes;
	struct be__heap *next_orphan;  /* pool lock */
	_Atomic(struct be__heap *) next_all;
	/* Statistics: written only by the owning thread, relaxed. One counter
	 * per operation: objects allocated and freed per class (a small or
	 * medium class has one size), plus bytes for the large and huge
	 * classes, whose sizes vary. */
	_Atomic uint64_t nalloc[BE_ALLOC_NUM_CLASSES];
	_Atomic uint64_t nfree[BE_ALLOC_NUM_CLASSES];
	_Atomic int64_t bytes[BE_ALLOC_NUM_CLASSES];
	/* Spans handed back by other threads (full spans that got a remote
	 * free, and remote-freed large runs): a lock-free stack. */
	_Alignas(64) _Atomic(struct be__span *) pending;
};

struct be__alloc_dev {
	atomic_int attached;
	struct be_alloc_reg_hook hook;
	char name[48];
};

struct be__pool {
	pthread_mutex_t lock;
	/* Fixed once the first heap exists (pool.frozen). */
	size_t block_size;
	unsigned block_shift;
	unsigned pm_root_shift;  /* address >> this: page map root index */
	uintptr_t pm_leaf_mask;  /* (address >> block_shift) & this: leaf index */
	uint32_t units;
	bool frozen;
	bool block_size_set;  /* by be_alloc_configure() */
	_Atomic uint64_t limit;
	size_t page_size;
	size_t heap_cache_max;
	/* Size classes for stats. */
	uint32_t num_classes;
	uint64_t class_size[BE_ALLOC_NUM_CLASSES];
	/* Lists (pool lock). */
	struct be__list blocks;        /* all blocks, oldest first */
	struct be__list huge_live;     /* huge regions in use */
	struct be__list huge_cache;    /* free huge regions, newest first */
	size_t huge_cache_bytes;
	struct be__heap *orphans;
	_Atomic(struct be__heap *) heaps; /* every heap ever, never freed */
	/* Block arena: one memfd, one block-sized slot per block. */
	int arena_fd;
	uint64_t arena_slots;        /* slots the file is sized for */
	uint64_t *free_slots;
	size_t nfree_slots, cap_free_slots;
	/* Devices (pool lock, attached flag read atomically). */
	struct be__alloc_dev dev[BE_ALLOC_MAX_DEVICES];
	/* Counters. */
	_Atomic uint64_t blocks_n, huge_n, mapped_bytes;
	_Atomic uint64_t registrations, deregistrations;
	_Atomic uint64_t failures, reg_failures;
	_Atomic uint32_t devices;
	/* Stats of threads that free after their heap was orphaned. */
	_Atomic uint64_t nfree[BE_ALLOC_NUM_CLASSES];
	_Atomic int64_t bytes[BE_ALLOC_NUM_CLASSES];
	pthread_key_t key;
	bool key_ok;     /* pthread_key_create() succeeded */
	int atfork_err;  /* pthread_atfork() failed: no allocation (pool.c) */
	/* In a fork() child: the parent's descriptors, set aside by the atfork
	 * handler (which must not call free()), freed on the child's first use
	 * or next fork (pool lock). */
	struct {
		struct be__list blocks, huge_live, huge_cache;
		struct be__heap *heaps;
		uint64_t *free_slots;
	} forked;
};

extern struct be__pool be__pool;
extern _Atomic(_Atomic(struct be__region *) *) be__pagemap_root[1u << ALLOC_PAGEMAP_ROOT_BITS];

/* pool.c */
void be__alloc_init(void);
void be__alloc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void be__alloc_fail(void);
unsigned be__alloc_large_class(uint32_t units);
static inline unsigned be__alloc_huge_class(void)
{
	return be__pool.num_classes - 1;
}
/* A run of @units free units, descriptors set, or NULL (error set). */
struct be__span *be__pool_run_get(uint32_t units);
/* Up to @max runs of @units units in one go, linked by ->next; at least
 * one or NULL (error set). */
struct be__span *be__pool_runs_get(uint32_t units, unsigned max);
void be__pool_run_put_locked(struct be__span *s);
/* Return a list (linked by ->next) of runs; takes the pool lock. */
void be__pool_runs_put(struct be__span *list);
struct be__heap *be__pool_heap_adopt(void);
void be__pool_heap_orphan(struct be__heap *h, struct be__span *runs);

/* region.c: mapping, registration and the page map (pool lock held). */
struct be__block *be__block_create_locked(void);
void be__block_destroy_locked(struct be__block *b);
void be__block_free_meta(struct be__block *b);
void be__region_fork_forget_locked(struct be__region *r);
struct be__region *be__huge_create_locked(size_t len);
void be__huge_destroy_locked(struct be__region *r);
int be__region_reg_all_locked(struct be__region *r);
void be__region_dereg_all_locked(struct be__region *r);
/* Register @r on device @d alone (attach); the message is set on failure. */
int be__region_reg_dev_locked(struct be__region *r, int d);
void be__region_dereg_dev_locked(struct be__region *r, int d);

/* huge.c */
void *be__huge_alloc(size_t size, size_t *usable);
size_t be__huge_free(struct be__region *r, void *p);
size_t be__huge_cache_drop_locked(size_t want);

/* heap.c */
/* Collect what can be collected and unlink the heap's free runs into a
 * list for the pool; the caller owns @h (its thread, or the pool lock for
 * an orphan). */
struct be__span *be__heap_release(struct be__heap *h);
struct be__heap *be__heap_self(void);
/* fork() child: the forking thread forgets its heap (the parent's). */
void be__heap_fork_child(void);

static inline struct be__region *be__pagemap_get(uintptr_t a)
{
	_Atomic(struct be__region *) *leaf;

	if (BE_UNLIKELY(a >> ALLOC_ADDR_BITS))
		return NULL;
	leaf = atomic_load_explicit(&be__pagemap_root[a >> be__pool.pm_root_shift],
				    memory_order_acquire);
	if (BE_UNLIKELY(!leaf))
		return NULL;
	return atomic_load_explicit(&leaf[(a >> be__pool.block_shift) & be__pool.pm_leaf_mask],
				    memory_order_acquire);
}

/* Relaxed add by the single writer of a counter: no locked instruction. */
static inline void alloc_ctr_add(_Atomic int64_t *c, int64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
			      memory_order_relaxed);
}

static inline void alloc_ctr_inc(_Atomic uint64_t *c)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

#endif /* BE_ALLOC_INT_H */
