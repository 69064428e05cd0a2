/*
 * heap.c - bemalloc's thread heaps: size classes, the lock-free fast
 * paths, deferred cross-thread frees and thread exit.
 *
 * Model. Each thread that allocates or frees gets a heap (thread-local
 * pointer, made on first use). A heap owns spans; for each small/medium
 * class it has one active span and a list of partial spans. Its owner
 * allocates from the active span's local free list, then from the span's
 * never-used tail ("bump"), and frees into the local free list: plain
 * loads and stores, no lock, no atomic read-modify-write. Free lists are
 * 16-bit object indices kept beside the block (span->links), never inside
 * buffers a peer could write.
 *
 * A free from any other thread pushes the index onto the span's atomic
 * deferred list (a lock-free stack: pushers CAS, only the owner takes the
 * whole list with one exchange, so there is no ABA). The owner collects it
 * when the local list runs dry. The list head is one 32-bit word: the
 * first index, the number of objects on the list, and a FULL bit. A span
 * with nothing left to hand out is detached from its heap by setting FULL
 * (a CAS, refused if a quarter of the span is already waiting: then the
 * owner keeps it and collects). The remote free whose push brings the
 * count to a quarter (defer_min) of a FULL span clears FULL in that same
 * CAS, which makes it the one thread that pushes the span onto the owner
 * heap's pending stack; the owner picks it up on its next slow path.
 * Because push, count and claim are one atomic step, no span is stranded
 * (one whose objects are all freed always reaches defer_min), and a remote
 * free that does not claim never touches the span after its CAS, so trim
 * may unmap a block the moment its last object is collected.
 *
 * Large allocations (above 32 KiB, up to a block) are runs of whole 64 KiB
 * units holding one object. Freed runs go to the heap's span cache (free
 * runs by unit count, bounded in bytes), which also takes small/medium spans
 * that became empty; a remote free of a large run pushes it onto the owner's
 * pending stack.
 *
 * Thread exit (pthread key destructor): the heap collects what it can,
 * gives empty spans and its cache back to the pool, and is put on the
 * orphan list; the next new thread adopts it with the spans still in use.
 * Heaps are never freed, so a late remote free always finds its heap.
 *
 * Statistics are per-heap counters written only by their owner with
 * relaxed atomics (no shared cache line on the fast path) and summed when
 * read. A free counts against the freeing thread's heap, so the sum is
 * exact once every call returned.
 */
#include <errno.h>
#include <string.h>

#include "alloc/alloc_int.h"
#include "util/log.h"

static __thread struct be__heap *tls_heap __attribute__((tls_model("initial-exec")));
static __thread bool tls_exited __attribute__((tls_model("initial-exec")));

/* Size (rounded up to 64) / 64 -> class, for sizes up to 32 KiB. */
static uint8_t class_of[ALLOC_MEDIUM_MAX / BE_ALLOC_MIN_ALIGN + 1];
/* Units per span of each small/medium class: at least 32 objects, at
 * most 8 units. */
static uint16_t class_units[ALLOC_NUM_SM];

void be__heap_classes_init(void);
void be__heap_thread_exit(void *arg);

void be__heap_classes_init(void)
{
	unsigned i, c = 0;

	/* The small/medium sizes do not depend on the block size. */
	for (i = 0; i < BE_ARRAY_SIZE(class_of); i++) {
		uint64_t sz = BE_MAX((uint64_t)i * BE_ALLOC_MIN_ALIGN, BE_ALLOC_MIN_ALIGN);

		while (be__pool.class_size[c] < sz)
			c++;
		class_of[i] = (uint8_t)c;
	}
	for (c = 0; c < ALLOC_NUM_SM; c++) {
		uint64_t u = (32 * be__pool.class_size[c] + ALLOC_UNIT_SIZE - 1) / ALLOC_UNIT_SIZE;

		class_units[c] = (uint16_t)BE_MIN(BE_MAX(u, 1), 8);
	}
}

struct be__heap *be__heap_self(void)
{
	return tls_heap;
}

/* In the atfork child handler: the one thread left forgets its heap (pool.c
 * sets it aside with the parent's others); it gets a fresh one on its next
 * call. */
void be__heap_fork_child(void)
{
	tls_heap = NULL;
	tls_exited = false;
	if (be__pool.key_ok)
		pthread_setspecific(be__pool.key, NULL);
}

static __attribute__((noinline)) struct be__heap *heap_get(void)
{
	struct be__heap *h;

	be__alloc_init();
	h = be__pool_heap_adopt();
	if (!h)
		return NULL;
	tls_heap = h;
	tls_exited = false;
	if (be__pool.key_ok)
		pthread_setspecific(be__pool.key, h);
	return h;
}

static inline bool span_has_free(const struct be__span *s)
{
	return s->free_head != ALLOC_NIL || s->bump < s->count;
}

/* Take the deferred list into the local one. True if anything is free. */
static bool span_collect(struct be__span *s)
{
	uint32_t head, tail, n = 1;

	if (atomic_load_explicit(&s->deferred, memory_order_relaxed) == ALLOC_NIL)
		return span_has_free(s);
	/* Only attached spans are collected: DEFER_FULL is clear. */
	head = atomic_exchange_explicit(&s->deferred, ALLOC_NIL, memory_order_acquire);
	head &= ALLOC_NIL; /* drop the count */
	if (head == ALLOC_NIL)
		return span_has_free(s);
	for (tail = head; s->links[tail] != ALLOC_NIL; tail = s->links[tail])
		n++;
	s->links[tail] = s->free_head;
	s->free_head = (uint16_t)head;
	s->used -= n;
	return true;
}

/*
 * Detach @s (nothing to hand out) from its heap: set DEFER_FULL in its
 * deferred word. Returns true, leaving @s attached, if enough remote frees
 * are already waiting (collect them then).
 */
static bool span_mark_full(struct be__span *s)
{
	uint32_t old = atomic_load_explicit(&s->deferred, memory_order_relaxed);

	do {
		if (DEFER_COUNT(old) >= s->defer_min)
			return true;
	} while (!atomic_compare_exchange_weak_explicit(&s->deferred, &old, old | DEFER_FULL,
							memory_order_acq_rel,
							memory_order_relaxed));
	s->flags |= SPAN_DETACHED;
	return false;
}

static void partial_add(struct be__heap_class *hc, struct be__span *s)
{
	s->flags |= SPAN_PARTIAL;
	s->prev = NULL;
	s->next = hc->partial;
	if (hc->partial)
		hc->partial->prev = s;
	hc->partial = s;
}

static void partial_del(struct be__heap_class *hc, struct be__span *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		hc->partial = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	s->flags &= ~SPAN_PARTIAL;
}

static void heap_cache_push(struct be__heap *h, struct be__span *s)
{
	s->next = h->cache[s->units];
	h->cache[s->units] = s;
	h->cache_bytes += (size_t)s->units << ALLOC_UNIT_SHIFT;
}

/*
 * A free run (no object in use) leaves the heap: onto @out if given (the
 * caller returns the list to the pool), else into the span cache. A cache
 * over its bound gives runs back to the pool down to half the bound, in
 * one batch, so a heap that frees more than it allocates takes the pool
 * lock once per many runs.
 */
static void heap_run_free(struct be__heap *h, struct be__span *s)
{
	/* A free run looks like a large run with nothing in use, so a stray
	 * second be_free() of it is caught by free_large_local(). */
	s->cls = ALLOC_CLASS_LARGE;
	s->flags = SPAN_LARGE;
	s->used = 0;
	if (h->ls == s)
		h->ls_len = 0;
}

static void heap_run_put(struct be__heap *h, struct be__span *s, struct be__span **out)
{
	struct be__span *back = NULL;
	unsigned k;

	heap_run_free(h, s);
	if (out) {
		s->next = *out;
		*out = s;
		return;
	}
	if (s->units > ALLOC_CACHE_UNITS) {
		s->next = NULL;
		be__pool_runs_put(s);
		return;
	}
	heap_cache_push(h, s);
	if (h->cache_bytes <= be__pool.heap_cache_max)
		return;
	for (k = ALLOC_CACHE_UNITS; k >= 1 && h->cache_bytes > be__pool.heap_cache_max / 2; k--) {
		while (h->cache[k] && h->cache_bytes > be__pool.heap_cache_max / 2) {
			struct be__span *r = h->cache[k];

			h->cache[k] = r->next;
			h->cache_bytes -= (size_t)k << ALLOC_UNIT_SHIFT;
			r->next = back;
			back = r;
		}
	}
	be__pool_runs_put(back);
}

static struct be__span *heap_cache_flush(struct be__heap *h, struct be__span *out)
{
	unsigned k;

	for (k = 1; k <= ALLOC_CACHE_UNITS; k++) {
		while (h->cache[k]) {
			struct be__span *s = h->cache[k];

			h->cache[k] = s->next;
			s->next = out;
			out = s;
		}
	}
	h->cache_bytes = 0;
	return out;
}

static void heap_drain_pending(struct be__heap *h, struct be__span **out, bool keep);

static struct be__span *heap_cache_pop(struct be__heap *h, uint32_t units)
{
	struct be__span *s = units <= ALLOC_CACHE_UNITS ? h->cache[units] : NULL;

	if (s) {
		h->cache[units] = s->next;
		h->cache_bytes -= (size_t)units << ALLOC_UNIT_SHIFT;
	}
	return s;
}

/*
 * A free run of @units units for @h: from its cache, from the runs other
 * threads freed for it, else from the pool, a few at a time (the extra
 * ones go to the cache) so the pool lock is taken once per several runs.
 */
static struct be__span *heap_run_get(struct be__heap *h, uint32_t units)
{
	size_t run = (size_t)units << ALLOC_UNIT_SHIFT, avail;
	struct be__span *s, *list;
	unsigned max = 1;

	s = heap_cache_pop(h, units);
	if (s)
		return s;
	if (atomic_load_explicit(&h->pending, memory_order_relaxed)) {
		heap_drain_pending(h, NULL, true);
		s = heap_cache_pop(h, units);
		if (s)
			return s;
	}
	avail = be__pool.heap_cache_max > h->cache_bytes ?
		be__pool.heap_cache_max - h->cache_bytes : 0;
	if (units <= ALLOC_CACHE_UNITS)
		max += (unsigned)BE_MIN(avail / 4 / run, 15);
	list = be__pool_runs_get(units, max);
	if (!list && h->cache_bytes) {
		/* Near the limit, our own cache may hold what the pool lacks. */
		be__pool_runs_put(heap_cache_flush(h, NULL));
		list = be__pool_runs_get(units, 1);
	}
	if (!list)
		return NULL;
	s = list;
	for (list = list->next; list; list = s->next) {
		s->next = list->next;
		heap_cache_push(h, list);
	}
	s->next = NULL;
	return s;
}

/* A small/medium span @s of @h, just made owned again (or freed into). */
static void span_owned(struct be__heap *h, struct be__span *s, struct be__span **out)
{
	if (!s->used)
		heap_run_put(h, s, out);
	else
		partial_add(&h->cls[s->cls], s);
}

/*
 * Take back the spans other threads pushed onto our pending stack. With
 * @keep (the heap needs a run now), freed large runs all go to the cache,
 * past its bound: they are this heap's own allocations coming back, and
 * handing them to the pool only to take them out again costs a lock each
 * (producer/consumer traffic). The next local free over the bound trims
 * the cache.
 */
static void heap_drain_pending(struct be__heap *h, struct be__span **out, bool keep)
{
	struct be__span *s, *next;

	if (!atomic_load_explicit(&h->pending, memory_order_relaxed))
		return;
	s = atomic_exchange_explicit(&h->pending, NULL, memory_order_acquire);
	for (; s; s = next) {
		next = s->pending_next;
		if (s->cls == ALLOC_CLASS_LARGE) {
			if (keep && !out && s->units <= ALLOC_CACHE_UNITS) {
				heap_run_free(h, s);
				heap_cache_push(h, s);
			} else {
				heap_run_put(h, s, out);
			}
			continue;
		}
		s->flags &= ~SPAN_DETACHED;
		span_collect(s);
		span_owned(h, s, out);
	}
}

static void span_init(struct be__heap *h, struct be__span *s, unsigned c)
{
	uint32_t size = (uint32_t)be__pool.class_size[c];

	s->cls = (uint8_t)c;
	s->size = size;
	s->magic = (((uint64_t)1 << 40) + size - 1) / size;
	s->count = (uint32_t)(((size_t)s->units << ALLOC_UNIT_SHIFT) / size);
	s->defer_min = (uint16_t)BE_MAX(s->count / 4, 1);
	s->bump = 0;
	s->used = 0;
	s->free_head = ALLOC_NIL;
	s->flags = 0;
	s->links = s->block->links + (size_t)s->first * ALLOC_UNIT_OBJS;
	atomic_store_explicit(&s->deferred, ALLOC_NIL, memory_order_relaxed);
	atomic_store_explicit(&s->heap, h, memory_order_relaxed);
}

/* An active span of class @c with something free, or NULL (error set). */
static struct be__span *heap_refill(struct be__heap *h, unsigned c)
{
	struct be__heap_class *hc = &h->cls[c];
	struct be__span *s = hc->active;

	if (s) {
		if (span_collect(s))
			return s;
		hc->active = NULL;
		s->flags &= ~SPAN_ACTIVE;
		if (span_mark_full(s)) {
			span_collect(s);
			goto activate;
		}
	}
	heap_drain_pending(h, NULL, false);
	while ((s = hc->partial)) {
		partial_del(hc, s);
		if (span_collect(s))
			goto activate;
		if (span_mark_full(s)) {
			span_collect(s);
			goto activate;
		}
	}
	s = heap_run_get(h, class_units[c]);
	if (!s)
		return NULL;
	span_init(h, s, c);
activate:
	s->flags |= SPAN_ACTIVE;
	hc->active = s;
	return s;
}

/* Statistics of a large or huge allocation of @bytes in class @c. */
static void count_alloc(struct be__heap *h, unsigned c, int64_t bytes)
{
	alloc_ctr_inc(&h->nalloc[c]);
	alloc_ctr_add(&h->bytes[c], bytes);
}

static void *heap_alloc_large(struct be__heap *h, size_t size)
{
	uint32_t units = (uint32_t)((size + ALLOC_UNIT_SIZE - 1) >> ALLOC_UNIT_SHIFT);
	struct be__span *s;

	s = heap_run_get(h, units);
	if (!s)
		return NULL;
	s->cls = ALLOC_CLASS_LARGE;
	s->flags = SPAN_LARGE;
	s->size = units << ALLOC_UNIT_SHIFT;
	s->used = 1;
	atomic_store_explicit(&s->heap, h, memory_order_relaxed);
	count_alloc(h, be__alloc_large_class(units), s->size);
	return (void *)s->start;
}

static __attribute__((noinline)) void *heap_alloc_slow(struct be__heap *h, size_t size)
{
	struct be__span *s;
	void *p;

	if (!h) {
		h = heap_get();
		if (!h)
			goto fail;
	}
	if (size <= ALLOC_MEDIUM_MAX) {
		uint32_t idx;

		s = heap_refill(h, class_of[(size + BE_ALLOC_MIN_ALIGN - 1) / BE_ALLOC_MIN_ALIGN]);
		if (!s)
			goto fail;
		idx = s->free_head;
		if (idx != ALLOC_NIL)
			s->free_head = s->links[idx];
		else
			idx = s->bump++;
		s->used++;
		alloc_ctr_inc(&h->nalloc[s->cls]);
		return (void *)(s->start + (uintptr_t)idx * s->size);
	}
	if (size <= be__pool.block_size) {
		p = heap_alloc_large(h, size);
	} else {
		size_t usable = 0;

		p = be__huge_alloc(size, &usable);
		if (p) {
			count_alloc(h, be__alloc_huge_class(), (int64_t)usable);
		}
	}
	if (p)
		return p;
fail:
	be__alloc_fail();
	return NULL;
}

void *be_alloc(size_t size)
{
	struct be__heap *h = tls_heap;

	if (BE_LIKELY(h != NULL && size <= ALLOC_MEDIUM_MAX)) {
		unsigned c = class_of[(size + BE_ALLOC_MIN_ALIGN - 1) / BE_ALLOC_MIN_ALIGN];
		struct be__span *s = h->cls[c].active;

		if (BE_LIKELY(s != NULL)) {
			uint32_t idx = s->free_head;

			if (idx != ALLOC_NIL)
				s->free_head = s->links[idx];
			else if (s->bump < s->count)
				idx = s->bump++;
			else
				goto slow;
			s->used++;
			alloc_ctr_inc(&h->nalloc[c]);
			return (void *)(s->start + (uintptr_t)idx * s->size);
		}
	}
slow:
	return heap_alloc_slow(h, size);
}

static __attribute__((noinline, cold)) void bad_free(const void *p)
{
	be_log_err("bemalloc: be_free(%p): not a live bemalloc buffer, ignored", p);
}

/* Statistics of a free of class @c (@bytes: large and huge only) by @h,
 * or by a thread whose heap is gone. */
static void free_count(struct be__heap *h, unsigned c, int64_t bytes)
{
	if (h) {
		alloc_ctr_inc(&h->nfree[c]);
		if (bytes)
			alloc_ctr_add(&h->bytes[c], -bytes);
	} else {
		atomic_fetch_add_explicit(&be__pool.nfree[c], 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&be__pool.bytes[c], bytes, memory_order_relaxed);
	}
}

static void heap_pending_push(struct be__heap *o, struct be__span *s)
{
	struct be__span *old = atomic_load_explicit(&o->pending, memory_order_relaxed);

	do {
		s->pending_next = old;
	} while (!atomic_compare_exchange_weak_explicit(&o->pending, &old, s,
							memory_order_release,
							memory_order_relaxed));
}

/* @p in span @s that another heap (or none) owns. */
static __attribute__((noinline)) void remote_free(struct be__heap *h, struct be__span *s,
						  uintptr_t a)
{
	uintptr_t off = a - s->start;
	uint32_t idx, old, next, cnt;
	bool claim;

	if (s->cls == ALLOC_CLASS_LARGE) {
		struct be__heap *o = atomic_load_explicit(&s->heap, memory_order_relaxed);

		if (a != s->start || !o) {
			bad_free((void *)a);
			return;
		}
		free_count(h, be__alloc_large_class(s->units), s->size);
		heap_pending_push(o, s);
		return;
	}
	idx = (uint32_t)((off * s->magic) >> 40);
	if (BE_UNLIKELY(idx >= s->count || (uintptr_t)idx * s->size != off)) {
		bad_free((void *)a);
		return;
	}
	free_count(h, s->cls, 0);
	/*
	 * One CAS pushes the index and, if the owner let go of @s (FULL) and
	 * enough is now free, also claims the span (clears FULL) for the trip
	 * back to its owner. Without a claim, this CAS is our last touch of
	 * the span: the owner may collect, release and even unmap it (trim)
	 * right after.
	 */
	old = atomic_load_explicit(&s->deferred, memory_order_relaxed);
	do {
		s->links[idx] = (uint16_t)old;
		cnt = DEFER_COUNT(old) + 1;
		claim = (old & DEFER_FULL) && cnt >= s->defer_min;
		next = (claim ? 0 : old & DEFER_FULL) | cnt << 16 | idx;
	} while (!atomic_compare_exchange_weak_explicit(&s->deferred, &old, next,
							memory_order_acq_rel,
							memory_order_relaxed));
	/* Claimed: nobody else can release @s until its owner drains it. */
	if (claim)
		heap_pending_push(atomic_load_explicit(&s->heap, memory_order_relaxed), s);
}

/* Owner free that needs more than the fast path. */
static __attribute__((noinline)) void span_free_slow(struct be__heap *h, struct be__span *s)
{
	if (s->flags & SPAN_DETACHED) {
		uint32_t old = atomic_load_explicit(&s->deferred, memory_order_relaxed);

		/* FULL gone: a remote free claimed it, it is on its way back
		 * through our pending stack. Else take it back ourselves. */
		do {
			if (!(old & DEFER_FULL))
				return;
		} while (!atomic_compare_exchange_weak_explicit(&s->deferred, &old,
								old & ~DEFER_FULL,
								memory_order_acq_rel,
								memory_order_relaxed));
		s->flags &= ~SPAN_DETACHED;
		span_owned(h, s, NULL);
		return;
	}
	if (!s->used && !(s->flags & SPAN_ACTIVE)) {
		if (s->flags & SPAN_PARTIAL)
			partial_del(&h->cls[s->cls], s);
		heap_run_put(h, s, NULL);
	}
}

static __attribute__((noinline)) void free_huge(struct be__heap *h, struct be__region *r, void *p)
{
	size_t len = be__huge_free(r, p);

	if (len)
		free_count(h, be__alloc_huge_class(), (int64_t)len);
}

static __attribute__((noinline)) void free_large_local(struct be__heap *h, struct be__span *s,
						       uintptr_t a)
{
	if (a != s->start || s->used != 1) {
		bad_free((void *)a);
		return;
	}
	s->used = 0;
	free_count(h, be__alloc_large_class(s->units), s->size);
	heap_run_put(h, s, NULL);
}

/* Owner free of small/medium @a in @s. */
static inline void span_free_local(struct be__heap *h, struct be__span *s, uintptr_t a)
{
	uintptr_t off = a - s->start;
	uint32_t idx = (uint32_t)((off * s->magic) >> 40);

	if (BE_UNLIKELY(idx >= s->bump || (uintptr_t)idx * s->size != off)) {
		bad_free((void *)a);
		return;
	}
	s->links[idx] = s->free_head;
	s->free_head = (uint16_t)idx;
	s->used--;
	alloc_ctr_inc(&h->nfree[s->cls]);
	if (BE_UNLIKELY((s->flags & SPAN_DETACHED) || (!s->used && !(s->flags & SPAN_ACTIVE))))
		span_free_slow(h, s);
}

void be_free(void *p)
{
	struct be__heap *h = tls_heap;
	uintptr_t a = (uintptr_t)p;
	struct be__region *r;
	struct be__span *s;

	if (BE_LIKELY(h != NULL) && a - h->ls_start < h->ls_len) {
		span_free_local(h, h->ls, a);
		return;
	}
	if (BE_UNLIKELY(!p))
		return;
	if (BE_UNLIKELY(!h) && !tls_exited)
		h = heap_get(); /* may stay NULL: the remote path copes */
	r = be__pagemap_get(a);
	if (BE_UNLIKELY(!r)) {
		bad_free(p);
		return;
	}
	if (BE_UNLIKELY(r->kind != ALLOC_REGION_BLOCK)) {
		free_huge(h, r, p);
		return;
	}
	s = atomic_load_explicit(
		&((struct be__block *)r)->unit_span[(a - r->base) >> ALLOC_UNIT_SHIFT],
		memory_order_relaxed);
	if (BE_UNLIKELY(!s)) {
		bad_free(p);
		return;
	}
	if (BE_LIKELY(h && atomic_load_explicit(&s->heap, memory_order_relaxed) == h)) {
		if (BE_UNLIKELY(s->flags & SPAN_LARGE)) {
			free_large_local(h, s, a);
			return;
		}
		h->ls = s;
		h->ls_start = s->start;
		h->ls_len = (size_t)s->units << ALLOC_UNIT_SHIFT;
		span_free_local(h, s, a);
		return;
	}
	remote_free(h, s, a);
}

size_t be_alloc_usable_size(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	struct be__region *r;
	struct be__span *s;

	if (!p)
		return 0;
	be__alloc_init();
	r = be__pagemap_get(a);
	if (!r || a >= r->base + r->len)
		return 0;
	if (r->kind != ALLOC_REGION_BLOCK)
		return r->len - (a - r->base);
	s = atomic_load_explicit(
		&((struct be__block *)r)->unit_span[(a - r->base) >> ALLOC_UNIT_SHIFT],
		memory_order_relaxed);
	if (!s)
		return 0;
	if (s->cls == ALLOC_CLASS_LARGE)
		return s->size - (a - s->start);
	return s->size - (size_t)((a - s->start) % s->size);
}

/*
 * be__heap_release() - collect @h and unlink whatever is free: empty
 * spans, the span cache and runs freed by other threads, returned as a list
 * for the pool. Spans still in use stay with @h (on its partial lists).
 * The caller owns @h: it is the heap's thread, or holds the pool lock and
 * @h is an orphan.
 */
struct be__span *be__heap_release(struct be__heap *h)
{
	struct be__span *out = NULL, *s, *next;
	unsigned c;

	heap_drain_pending(h, &out, false);
	for (c = 0; c < ALLOC_NUM_SM; c++) {
		struct be__heap_class *hc = &h->cls[c];

		s = hc->active;
		if (s) {
			hc->active = NULL;
			s->flags &= ~SPAN_ACTIVE;
			span_collect(s);
			span_owned(h, s, &out);
		}
		for (s = hc->partial; s; s = next) {
			next = s->next;
			span_collect(s);
			if (!s->used) {
				partial_del(hc, s);
				heap_run_put(h, s, &out);
			}
		}
	}
	return heap_cache_flush(h, out);
}

/* pthread key destructor: the thread is going away. */
void be__heap_thread_exit(void *arg)
{
	struct be__heap *h = arg;
	struct be__span *runs;

	if (!h)
		return;
	runs = be__heap_release(h);
	tls_heap = NULL;
	tls_exited = true;
	be__pool_heap_orphan(h, runs);
}
