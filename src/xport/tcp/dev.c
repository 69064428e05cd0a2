/*
 * dev.c - the tcp device and its memory registration.
 *
 * Model. The device is "tcp": one port, no link speed (the route
 * decides), the limits of tcp.h, and a table of registered regions. A
 * registration is an entry (addr, len, key) in the device's hash table,
 * chained by key. The key is both lkey and rkey. Keys are random
 * looking 32-bit ids, never pointers: a multiplicative permutation of a
 * counter xored with a per-device random seed, so a peer cannot guess
 * another region's key from its own and keys do not repeat until 2^32
 * registrations. Registration runs under bemalloc's pool lock on any
 * thread; lookups run on the workers for every WR (lkey) and every
 * incoming WRITE (rkey), so the table sits under a rwlock. A thread
 * keeps the last regions it found (reg_hits): a worker posts from and
 * receives into a few bemalloc regions, over and over, and skips the
 * lock for those until any region of any device is deregistered or a
 * device closes (reg_epoch moves).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/tcp/tcp.h"

/* ---- device ---------------------------------------------------------- */

int be__tcp_dev_open(const char *name, struct be_xdev **out)
{
	struct tcp_dev *d;
	int ret;

	if (!out)
		return -EINVAL;
	if (name && *name && strcmp(name, "tcp") != 0)
		return -ENODEV;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	ret = be__tcp_reg_init(d);
	if (ret) {
		free(d);
		return ret;
	}
	d->x.ops = &be__xport_tcp_ops;
	*out = &d->x;
	return 0;
}

void be__tcp_dev_close(struct be_xdev *xdev)
{
	struct tcp_dev *d;

	if (!xdev)
		return;
	d = container_of(xdev, struct tcp_dev, x);
	be__tcp_reg_fini(d);
	free(d);
}

int be__tcp_dev_query(struct be_xdev *xdev, struct be_xdev_attr *out)
{
	if (!xdev || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "tcp");
	snprintf(out->transport, sizeof(out->transport), "tcp");
	out->num_ports = 1;
	out->port[0].up = 1;
	out->port[0].speed_mbps = 0; /* the route decides; unknown */
	out->port[0].mtu = TCP_MTU;
	out->max_inline = TCP_MAX_INLINE;
	out->max_sge = TCP_MAX_SGE;
	out->max_qp_wr = TCP_MAX_QP_WR;
	out->max_srq_wr = TCP_MAX_SRQ_WR;
	out->max_msg_size = TCP_MAX_MSG;
	out->has_thread_domain = 0;
	out->max_rx_alloc = TCP_MAX_RX_ALLOC;
	return 0;
}

/* ---- registration ---------------------------------------------------- */

/* Moves on every deregistration and device close: what a thread found
 * before (reg_hits) may be gone. */
static _Atomic uint64_t reg_epoch = 1;

#define REG_HITS 4
struct reg_hit {
	const struct tcp_dev *d;
	uint64_t epoch;           /* reg_epoch when found; 0: empty */
	uintptr_t addr;
	size_t len;
	uint32_t key;
};
static __thread struct reg_hit reg_hits[REG_HITS];
static __thread unsigned reg_hit_next;

static uint32_t reg_hash(uint32_t key, uint32_t nbuckets)
{
	return (key * 0x9E3779B1u) >> 7 & (nbuckets - 1);
}

int be__tcp_reg_init(struct tcp_dev *d)
{
	uint32_t seed;

	d->nbuckets = 256;
	d->buckets = calloc(d->nbuckets, sizeof(*d->buckets));
	if (!d->buckets)
		return -ENOMEM;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = (uint32_t)be__now_ns() ^ (uint32_t)getpid() * 2654435761u;
	d->key_seed = seed;
	d->key_ctr = 0;
	d->nregions = 0;
	if (pthread_rwlock_init(&d->lock, NULL)) {
		free(d->buckets);
		return -ENOMEM;
	}
	return 0;
}

void be__tcp_reg_fini(struct tcp_dev *d)
{
	uint32_t i;

	for (i = 0; i < d->nbuckets; i++) {
		while (d->buckets[i]) {
			struct tcp_region *r = d->buckets[i];

			d->buckets[i] = r->next;
			free(r);
		}
	}
	atomic_fetch_add_explicit(&reg_epoch, 1, memory_order_release);
	if (d->nregions)
		be_log_warn("tcp: device closed with %u regions registered", d->nregions);
	free(d->buckets);
	d->buckets = NULL;
	pthread_rwlock_destroy(&d->lock);
}

static struct tcp_region *reg_find_locked(struct tcp_dev *d, uint32_t key)
{
	struct tcp_region *r = d->buckets[reg_hash(key, d->nbuckets)];

	while (r && r->key != key)
		r = r->next;
	return r;
}

/* Double the table when it is more than full on average. */
static void reg_grow_locked(struct tcp_dev *d)
{
	uint32_t n = d->nbuckets * 2, i;
	struct tcp_region **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* keep the longer chains; still correct */
	for (i = 0; i < d->nbuckets; i++) {
		while (d->buckets[i]) {
			struct tcp_region *r = d->buckets[i];
			uint32_t h = reg_hash(r->key, n);

			d->buckets[i] = r->next;
			r->next = b[h];
			b[h] = r;
		}
	}
	free(d->buckets);
	d->buckets = b;
	d->nbuckets = n;
}

/* [addr, +len) inside [base, +rlen); overflow-safe: addr >= base, and
 * len fits in what is left. */
static int reg_in(uintptr_t base, size_t rlen, uint64_t addr, uint64_t len)
{
	return addr >= base && addr - base <= rlen && len <= rlen - (addr - base);
}

int be__tcp_reg_check(struct tcp_dev *d, uint32_t key, uint64_t addr, uint64_t len)
{
	/* Read before the lock: a region found under it after a
	 * deregistration moved the epoch is remembered as already stale. */
	uint64_t epoch = atomic_load_explicit(&reg_epoch, memory_order_acquire);
	struct tcp_region *r;
	struct reg_hit *h;
	int ok = 0, i;

	for (i = 0; i < REG_HITS; i++) {
		h = &reg_hits[i];
		if (h->epoch == epoch && h->d == d && h->key == key)
			return reg_in(h->addr, h->len, addr, len);
	}
	pthread_rwlock_rdlock(&d->lock);
	r = reg_find_locked(d, key);
	if (r) {
		ok = reg_in(r->addr, r->len, addr, len);
		h = &reg_hits[reg_hit_next++ % REG_HITS];
		*h = (struct reg_hit){ .d = d, .epoch = epoch, .addr = r->addr, .len = r->len,
				       .key = key };
	}
	pthread_rwlock_unlock(&d->lock);
	return ok;
}

static int tcp_reg(void *dev, void *addr, size_t len, int fd, uint64_t fd_offset,
		   struct be_alloc_mr *out, char *err, size_t err_len)
{
	struct tcp_dev *d = dev;
	struct tcp_region *r;

	if (!addr || !len) {
		if (err && err_len)
			snprintf(err, err_len, "tcp: empty region");
		return -EINVAL;
	}
	r = malloc(sizeof(*r));
	if (!r) {
		if (err && err_len)
			snprintf(err, err_len, "tcp: out of memory for a region");
		return -ENOMEM;
	}
	r->addr = (uintptr_t)addr;
	r->len = len;
	pthread_rwlock_wrlock(&d->lock);
	do {
		/* An odd multiplier permutes 32-bit values: no repeats. */
		r->key = (++d->key_ctr * 0x2545F491u) ^ d->key_seed;
	} while (r->key == 0 || reg_find_locked(d, r->key));
	if (d->nregions >= d->nbuckets)
		reg_grow_locked(d);
	{
		uint32_t h = reg_hash(r->key, d->nbuckets);

		r->next = d->buckets[h];
		d->buckets[h] = r;
	}
	d->nregions++;
	pthread_rwlock_unlock(&d->lock);
	out->lkey = r->key;
	out->rkey = r->key;
	out->handle = r;
	return 0;
}

static void tcp_dereg(void *dev, struct be_alloc_mr *mr)
{
	struct tcp_dev *d = dev;
	struct tcp_region *r = mr->handle, **pp;

	if (!r)
		return;
	pthread_rwlock_wrlock(&d->lock);
	for (pp = &d->buckets[reg_hash(r->key, d->nbuckets)]; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			d->nregions--;
			break;
		}
	}
	atomic_fetch_add_explicit(&reg_epoch, 1, memory_order_release);
	pthread_rwlock_unlock(&d->lock);
	free(r);
	mr->handle = NULL;
}

void be__tcp_dev_reg_hook(struct be_xdev *xdev, struct be_alloc_reg_hook *out)
{
	out->name = "tcp";
	out->reg = tcp_reg;
	out->dereg = tcp_dereg;
	out->dev = container_of(xdev, struct tcp_dev, x);
}
