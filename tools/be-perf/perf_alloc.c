/*
 * perf_alloc.c - be-perf alloc: bemalloc against glibc malloc, side by side.
 *
 *   pair     alloc + free in one thread, ns per pair
 *   xthread  alloc in one thread, free in another, handed over through a
 *            lock-free single-producer/single-consumer ring; ns per item
 *            (wall time of the whole transfer / items)
 *
 * Each allocation has one byte written to it, for both allocators: an
 * allocator that hands out fresh pages pays the page fault it causes, as an
 * application writing a message would. Each measurement runs --runs times
 * (default 5), bemalloc and malloc alternating so drift hits both alike;
 * the report gives medians with min/max.
 *
 * bemalloc runs with a counting registration device attached (a no-op
 * "NIC" that counts reg() calls), so "registrations" shows what a real
 * device would have paid: one per block, never one per allocation.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <be/be.h>
#include "alloc/reg.h"
#include "perf.h"

#define ALLOC_MAX_SIZES 16
#define ALLOC_MAX_RUNS 51
#define BE_PERF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BE_PERF_MAX(a, b) ((a) > (b) ? (a) : (b))

static atomic_ulong count_regs;

static int count_reg(void *dev, void *addr, size_t len, int fd, uint64_t off,
		     struct be_alloc_mr *out, char *err, size_t err_len)
{
	unsigned long n = atomic_fetch_add(&count_regs, 1) + 1;

	out->lkey = (uint32_t)n;
	out->rkey = (uint32_t)n;
	out->handle = NULL;
	return 0;
}

static void count_dereg(void *dev, struct be_alloc_mr *mr)
{
}

struct alloc_ops {
	const char *name;
	void *(*alloc)(size_t);
	void (*free)(void *);
};

static const struct alloc_ops ops_be = { "bemalloc", be_alloc, be_free };
static const struct alloc_ops ops_libc = { "malloc", malloc, free };

/* @o's allocation of @size bytes, its first byte written (@i); a failed
 * one ends the run (exit 1). */
static void *alloc_touch(const struct alloc_ops *o, size_t size, uint64_t i)
{
	char *p = o->alloc(size);

	if (!p) {
		fprintf(stderr, "be-perf alloc: %s(%zu) failed\n", o->name, size);
		exit(1);
	}
	*(volatile char *)p = (char)i;
	return p;
}

/* One run of @iters alloc+free pairs; ns per pair. */
static double run_pair(const struct alloc_ops *o, size_t size, uint64_t iters)
{
	uint64_t t0, i;

	/* Warm-up: the first allocation may map and register a block. */
	o->free(o->alloc(size));
	t0 = perf_now_ns();
	for (i = 0; i < iters; i++)
		o->free(alloc_touch(o, size, i));
	return (double)(perf_now_ns() - t0) / (double)iters;
}

struct xring {
	_Alignas(64) _Atomic uint64_t head;
	_Alignas(64) _Atomic uint64_t tail;
	_Alignas(64) void **slot;
	uint64_t cap;
	const struct alloc_ops *o;
	size_t size;
	uint64_t iters;
};

static void *xthread_consumer(void *arg)
{
	struct xring *q = arg;
	uint64_t t, spins;

	for (t = 0; t < q->iters; t++) {
		for (spins = 0; atomic_load_explicit(&q->head, memory_order_acquire) == t; spins++)
			if (spins > 1000)
				sched_yield();
		q->o->free(q->slot[t % q->cap]);
		atomic_store_explicit(&q->tail, t + 1, memory_order_release);
	}
	return NULL;
}

/* One run of @iters items produced here and freed by a consumer thread. */
static double run_xthread(const struct alloc_ops *o, size_t size, uint64_t iters)
{
	struct xring q;
	pthread_t th;
	uint64_t t0, h, spins;

	memset(&q, 0, sizeof(q));
	/* Deep enough to decouple the threads, bounded to 64 MiB in flight. */
	q.cap = BE_PERF_MIN(1024, BE_PERF_MAX(4, (64u << 20) / size));
	q.slot = calloc(q.cap, sizeof(*q.slot));
	q.o = o;
	q.size = size;
	q.iters = iters;
	if (!q.slot || pthread_create(&th, NULL, xthread_consumer, &q)) {
		fprintf(stderr, "be-perf alloc: cannot start the consumer\n");
		exit(1);
	}
	t0 = perf_now_ns();
	for (h = 0; h < iters; h++) {
		void *p = alloc_touch(o, size, h);

		for (spins = 0;
		     h - atomic_load_explicit(&q.tail, memory_order_acquire) >= q.cap; spins++)
			if (spins > 1000)
				sched_yield();
		q.slot[h % q.cap] = p;
		atomic_store_explicit(&q.head, h + 1, memory_order_release);
	}
	pthread_join(th, NULL);
	t0 = perf_now_ns() - t0;
	free(q.slot);
	return (double)t0 / (double)iters;
}

static void usage(FILE *f, const char *cmd)
{
	fprintf(f,
		"usage: be-perf alloc [--iters N] [--size S]... [--runs R] [--json]\n"
		"  bemalloc vs glibc malloc: alloc+free pairs in one thread (pair) and\n"
		"  alloc in one thread, free in another (xthread). Sizes default to\n"
		"  64, 4K, 64K, 1M; --size may repeat. Medians of R runs (default 5).\n");
}

struct alloc_sizes {
	size_t n[ALLOC_MAX_SIZES];
	unsigned count;
	bool given; /* the first --size replaces the defaults */
};

static int alloc_parse_size(void *dst, const char *v)
{
	struct alloc_sizes *sz = dst;

	if (!sz->given)
		sz->count = 0;
	sz->given = true;
	if (sz->count == ALLOC_MAX_SIZES) {
		fprintf(stderr, "be-perf alloc: at most %d sizes\n", ALLOC_MAX_SIZES);
		return -1;
	}
	sz->n[sz->count++] = perf_parse_size(v);
	return 0;
}

int perf_alloc_main(int argc, char **argv);
int perf_alloc_main(int argc, char **argv)
{
	struct alloc_sizes sz = { { 64, 4096, 65536, 1 << 20 }, 4, false };
	unsigned runs, s, r, t;
	uint32_t runs_opt = 5;
	int json = 0;
	uint64_t iters = 1000000;
	struct be_alloc_reg_hook hook = { "count", count_reg, count_dereg, NULL };
	const struct perf_opt opts[] = {
		PERF_OPT("--iters", SIZE, &iters),
		PERF_FN("--size", &sz, alloc_parse_size),
		PERF_OPT("--runs", U32, &runs_opt),
		PERF_FLAG("--json", &json, 1),
		PERF_OPTS_END,
	};
	size_t *sizes = sz.n;
	unsigned nsizes;
	int c, dev;

	c = perf_opts_parse("alloc", argc, argv, opts, usage);
	if (c >= 0)
		return c;
	runs = runs_opt;
	nsizes = sz.count;
	if (!iters || !runs || runs > ALLOC_MAX_RUNS) {
		fprintf(stderr, "be-perf alloc: --iters >= 1, --runs 1..%d\n", ALLOC_MAX_RUNS);
		return 2;
	}
	dev = be_alloc_attach_device(&hook);
	if (dev < 0) {
		fprintf(stderr, "be-perf alloc: attach: %s\n", be_strerror(dev));
		return 1;
	}
	if (!json)
		printf("%-8s %9s %7s %22s %22s %6s %5s %6s %10s\n", "test", "size", "threads",
		       "bemalloc ns (min-max)", "malloc ns (min-max)", "ratio", "regs",
		       "blocks", "allocs");
	for (t = 0; t < 2; t++) {
		for (s = 0; s < nsizes; s++) {
			double vb[ALLOC_MAX_RUNS], vm[ALLOC_MAX_RUNS];
			struct perf_summary sb, sm;
			struct be_alloc_stats st;
			/* Large cross-thread items cost mostly page traffic: fewer. */
			uint64_t n = iters;

			if (t == 1 && sizes[s] >= (256u << 10))
				n = BE_PERF_MAX(n / 16, 1);
			for (r = 0; r < runs; r++) {
				if (t == 0) {
					vb[r] = run_pair(&ops_be, sizes[s], n);
					vm[r] = run_pair(&ops_libc, sizes[s], n);
				} else {
					vb[r] = run_xthread(&ops_be, sizes[s], n);
					vm[r] = run_xthread(&ops_libc, sizes[s], n);
				}
			}
			perf_summarize(vb, runs, &sb);
			perf_summarize(vm, runs, &sm);
			be_alloc_stats(&st);
			if (json)
				printf("{\"test\":\"%s\",\"size\":%zu,\"threads\":%d,\"iters\":%llu,"
				       "\"runs\":%u,\"bemalloc_ns\":%.2f,\"bemalloc_min\":%.2f,"
				       "\"bemalloc_max\":%.2f,\"malloc_ns\":%.2f,\"malloc_min\":%.2f,"
				       "\"malloc_max\":%.2f,\"ratio\":%.3f,\"registrations\":%lu,"
				       "\"allocations\":%llu,\"blocks\":%llu,\"huge_regions\":%llu}\n",
				       t ? "xthread" : "pair", sizes[s], t ? 2 : 1,
				       (unsigned long long)n, runs, sb.p50, sb.min, sb.max, sm.p50,
				       sm.min, sm.max, sb.p50 / sm.p50, atomic_load(&count_regs),
				       (unsigned long long)st.allocations,
				       (unsigned long long)st.blocks,
				       (unsigned long long)st.huge_regions);
			else
				printf("%-8s %9zu %7d %8.1f (%5.1f-%5.1f) %8.1f (%5.1f-%5.1f) %6.2f %5lu %6llu %10llu\n",
				       t ? "xthread" : "pair", sizes[s], t ? 2 : 1, sb.p50, sb.min,
				       sb.max, sm.p50, sm.min, sm.max, sb.p50 / sm.p50,
				       atomic_load(&count_regs), (unsigned long long)st.blocks,
				       (unsigned long long)st.allocations);
			fflush(stdout);
		}
	}
	be_alloc_detach_device(dev);
	return 0;
}

PERF_COMMAND(alloc, "alloc", "bemalloc vs glibc malloc (pair, xthread)", perf_alloc_main)
