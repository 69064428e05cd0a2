/*
 * stats.c - bemalloc's statistics: pool counters plus the per-heap
 * counters summed over every heap ever made (heaps are never freed, the
 * list is append-only and walked without the lock).
 *
 * The pool counters are relaxed atomics; the per-heap ones are written only
 * by their owning thread. A snapshot taken while other threads allocate is
 * therefore approximate; one taken when they are quiet is exact.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc_int.h"
#include "util/abi.h"

/* The v1 layout of struct be_alloc_stats ends with class_in_use. */
#define ALLOC_STATS_V1 BE__V1_SIZE(struct be_alloc_stats, class_in_use)

static void alloc_stats_fill(struct be_alloc_stats *out)
{
	struct be__pool *p = &be__pool;
	int64_t bytes[BE_ALLOC_NUM_CLASSES];
	uint64_t nalloc[BE_ALLOC_NUM_CLASSES], nfree[BE_ALLOC_NUM_CLASSES];
	struct be__heap *h;
	unsigned c;

	be__alloc_init();
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	for (c = 0; c < BE_ALLOC_NUM_CLASSES; c++) {
		nalloc[c] = 0;
		nfree[c] = atomic_load_explicit(&p->nfree[c], memory_order_relaxed);
		bytes[c] = atomic_load_explicit(&p->bytes[c], memory_order_relaxed);
	}
	for (h = atomic_load_explicit(&p->heaps, memory_order_acquire); h;
	     h = atomic_load_explicit(&h->next_all, memory_order_relaxed)) {
		for (c = 0; c < BE_ALLOC_NUM_CLASSES; c++) {
			nalloc[c] += atomic_load_explicit(&h->nalloc[c], memory_order_relaxed);
			nfree[c] += atomic_load_explicit(&h->nfree[c], memory_order_relaxed);
			bytes[c] += atomic_load_explicit(&h->bytes[c], memory_order_relaxed);
		}
	}
	for (c = 0; c < BE_ALLOC_NUM_CLASSES; c++) {
		out->allocations += nalloc[c];
		out->frees += nfree[c];
	}
	out->blocks = atomic_load_explicit(&p->blocks_n, memory_order_relaxed);
	out->huge_regions = atomic_load_explicit(&p->huge_n, memory_order_relaxed);
	out->mapped_bytes = atomic_load_explicit(&p->mapped_bytes, memory_order_relaxed);
	out->devices = atomic_load_explicit(&p->devices, memory_order_relaxed);
	/* Every region is registered on every attached device (pool.c). */
	out->registered_bytes = out->devices ? out->mapped_bytes : 0;
	out->registrations = atomic_load_explicit(&p->registrations, memory_order_relaxed);
	out->deregistrations = atomic_load_explicit(&p->deregistrations, memory_order_relaxed);
	out->failures = atomic_load_explicit(&p->failures, memory_order_relaxed);
	out->reg_failures = atomic_load_explicit(&p->reg_failures, memory_order_relaxed);
	out->limit_bytes = atomic_load_explicit(&p->limit, memory_order_relaxed);
	pthread_mutex_lock(&p->lock);
	out->num_classes = p->num_classes;
	for (c = 0; c < p->num_classes; c++)
		out->class_size[c] = p->class_size[c];
	pthread_mutex_unlock(&p->lock);
	for (c = 0; c < out->num_classes; c++) {
		int64_t v = c < ALLOC_NUM_SM ?
			(int64_t)(nalloc[c] - nfree[c]) * (int64_t)out->class_size[c] : bytes[c];

		/* A snapshot may catch a free counted before its allocation. */
		out->class_in_use[c] = v > 0 ? (uint64_t)v : 0;
		out->bytes_in_use += out->class_in_use[c];
	}
}

void be_alloc_stats_sized(struct be_alloc_stats *out)
{
	struct be_alloc_stats st;

	if (!out)
		return;
	alloc_stats_fill(&st);
	be__abi_write(out, &st, sizeof(st), ALLOC_STATS_V1);
}

int be_alloc_stats_json(char *buf, size_t len)
{
	struct be_alloc_stats st;
	size_t off = 0;
	unsigned c;
	int n;

	if (!buf && len)
		return -EINVAL;
	alloc_stats_fill(&st);
#define EMIT(...)                                                               \
	do {                                                                    \
		n = snprintf(off < len ? buf + off : NULL, off < len ? len - off : 0, \
			     __VA_ARGS__);                                      \
		if (n < 0)                                                      \
			return -EINVAL;                                         \
		off += (size_t)n;                                               \
	} while (0)
	EMIT("{\"blocks\":%" PRIu64 ",\"huge_regions\":%" PRIu64 ",\"mapped_bytes\":%" PRIu64
	     ",\"registered_bytes\":%" PRIu64 ",\"bytes_in_use\":%" PRIu64
	     ",\"allocations\":%" PRIu64 ",\"frees\":%" PRIu64 ",\"registrations\":%" PRIu64
	     ",\"deregistrations\":%" PRIu64 ",\"failures\":%" PRIu64
	     ",\"reg_failures\":%" PRIu64 ",\"limit_bytes\":%" PRIu64 ",\"devices\":%u"
	     ",\"classes\":[",
	     st.blocks, st.huge_regions, st.mapped_bytes, st.registered_bytes, st.bytes_in_use,
	     st.allocations, st.frees, st.registrations, st.deregistrations, st.failures,
	     st.reg_failures, st.limit_bytes, st.devices);
	for (c = 0; c < st.num_classes; c++) {
		if (st.class_size[c])
			EMIT("%s{\"size\":%" PRIu64 ",\"in_use\":%" PRIu64 "}", c ? "," : "",
			     st.class_size[c], st.class_in_use[c]);
		else
			EMIT("%s{\"size\":\"huge\",\"in_use\":%" PRIu64 "}", c ? "," : "",
			     st.class_in_use[c]);
	}
	EMIT("]}");
#undef EMIT
	return (int)off;
}
