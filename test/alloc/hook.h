/*
 * hook.h - a registration hook for the bemalloc tests: a fake device that
 * records every reg()/dereg() call (address, length, fd, offset, whether
 * the region was still mapped), hands out synthetic keys, and can be told
 * to fail its Nth registration.
 */
#ifndef BE_TEST_ALLOC_HOOK_H
#define BE_TEST_ALLOC_HOOK_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc/reg.h"

#define TH_MAX_CALLS 4096

struct th_call {
	char op;          /* 'r' reg, 'd' dereg */
	uintptr_t addr;
	size_t len;
	int fd;
	uint64_t fd_offset;
	uint32_t lkey, rkey;
	bool mapped;      /* the region was mapped during the call */
	uint64_t seq;     /* global order across devices */
};

struct th_dev {
	const char *name;
	uint32_t id;              /* goes into the keys */
	int fail_at;              /* fail the Nth reg() (1-based); 0 never */
	int fail_errno;
	pthread_mutex_t mu;
	atomic_int nreg, ndereg, live, attempts;
	uint32_t next_key;
	struct th_call calls[TH_MAX_CALLS];
	int ncalls;
};

static atomic_uint_fast64_t th_seq;

static inline bool th_mapped(uintptr_t addr, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v;
	size_t off;

	/* mincore() fails with ENOMEM on any unmapped page. */
	for (off = 0; off < len; off += (size_t)pg * 64)
		if (mincore((void *)(addr + off), (size_t)pg, &v))
			return false;
	return mincore((void *)(addr + len - (size_t)pg), (size_t)pg, &v) == 0;
}

static inline void th_record(struct th_dev *d, char op, uintptr_t addr, size_t len, int fd,
			     uint64_t off, uint32_t lkey, uint32_t rkey)
{
	pthread_mutex_lock(&d->mu);
	if (d->ncalls < TH_MAX_CALLS)
		d->calls[d->ncalls++] = (struct th_call){
			.op = op, .addr = addr, .len = len, .fd = fd, .fd_offset = off,
			.lkey = lkey, .rkey = rkey, .mapped = th_mapped(addr, len),
			.seq = atomic_fetch_add(&th_seq, 1),
		};
	pthread_mutex_unlock(&d->mu);
}

static inline int th_reg(void *dev, void *addr, size_t len, int fd, uint64_t fd_offset,
			 struct be_alloc_mr *out, char *err, size_t err_len)
{
	struct th_dev *d = dev;
	int n = atomic_fetch_add(&d->attempts, 1) + 1;
	uint32_t k;

	if (d->fail_at && n == d->fail_at) {
		snprintf(err, err_len, "test device %s refuses registration #%d", d->name, n);
		return -(d->fail_errno ? d->fail_errno : ENOMEM);
	}
	pthread_mutex_lock(&d->mu);
	k = (d->id << 24) | ++d->next_key;
	pthread_mutex_unlock(&d->mu);
	out->lkey = k;
	out->rkey = ~k;
	out->handle = (void *)(uintptr_t)k;
	th_record(d, 'r', (uintptr_t)addr, len, fd, fd_offset, k, ~k);
	atomic_fetch_add(&d->nreg, 1);
	atomic_fetch_add(&d->live, 1);
	return 0;
}

static inline void th_dereg(void *dev, struct be_alloc_mr *mr)
{
	struct th_dev *d = dev;
	uintptr_t addr = 0;
	size_t len = 0;
	int i;

	/* Find the region this key was given to, to check it is still mapped. */
	pthread_mutex_lock(&d->mu);
	for (i = d->ncalls - 1; i >= 0; i--)
		if (d->calls[i].op == 'r' && d->calls[i].lkey == mr->lkey) {
			addr = d->calls[i].addr;
			len = d->calls[i].len;
			break;
		}
	pthread_mutex_unlock(&d->mu);
	if ((uint32_t)(uintptr_t)mr->handle != mr->lkey || mr->rkey != ~mr->lkey) {
		fprintf(stderr, "th_dereg: handle/keys mismatch\n");
		abort();
	}
	th_record(d, 'd', addr, len, -1, 0, mr->lkey, mr->rkey);
	atomic_fetch_add(&d->ndereg, 1);
	atomic_fetch_sub(&d->live, 1);
}

static inline void th_init(struct th_dev *d, const char *name, uint32_t id)
{
	memset(d, 0, sizeof(*d));
	d->name = name;
	d->id = id;
	pthread_mutex_init(&d->mu, NULL);
}

/* Attach @d (th_init() first) to the allocator: be_alloc_attach_device()
 * with a hook of th_reg/th_dereg on it; returns what that returns. */
static inline int th_attach(struct th_dev *d)
{
	struct be_alloc_reg_hook h = { d->name, th_reg, th_dereg, d };

	return be_alloc_attach_device(&h);
}

/* The reg() record of the region holding @p, or NULL. */
static inline const struct th_call *th_find(struct th_dev *d, const void *p)
{
	uintptr_t a = (uintptr_t)p;
	const struct th_call *found = NULL;
	int i;

	pthread_mutex_lock(&d->mu);
	for (i = 0; i < d->ncalls; i++)
		if (d->calls[i].op == 'r' && a >= d->calls[i].addr &&
		    a < d->calls[i].addr + d->calls[i].len)
			found = &d->calls[i];
	pthread_mutex_unlock(&d->mu);
	return found;
}

/*
 * A mix of allocation sizes: 1 draw in @one_in large (@large_min plus
 * less than @large_span), 2 medium (1025 plus less than @medium_span),
 * the rest small (1 to 1024). th_pick_size() draws one with @seed.
 */
struct th_mix {
	unsigned int one_in;
	size_t large_min, large_span, medium_span;
};

static inline size_t th_pick_size(unsigned int *seed, const struct th_mix *m)
{
	unsigned int r = (unsigned int)rand_r(seed);

	switch (r % m->one_in) {
	case 0: return m->large_min + r % m->large_span;
	case 1: case 2: return 1025 + r % m->medium_span;
	default: return 1 + r % 1024;
	}
}

/* Fill @p with a pattern derived from @seed; check it. */
static inline void th_fill(void *p, size_t n, uint32_t seed)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static inline bool th_check(const void *p, size_t n, uint32_t seed)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 8)))
			return false;
	return true;
}

#endif /* BE_TEST_ALLOC_HOOK_H */
