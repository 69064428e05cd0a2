/*
 * grant.c - a conn's remote-write grants (see grant.h).
 *
 * Keys are drawn 32 at a time with one getrandom() call and used once
 * each: a grant per large message must not cost a syscall per message,
 * and the unused rest of a draw is as secret as the draw itself. A key
 * equal to 0 or to a live grant's is drawn again.
 *
 * Lookup is linear probing from the key's low bits (the keys are uniform,
 * so they are their own hash) and ends at the first free slot; deletion
 * shifts the rest of the cluster back, so there are no tombstones and a
 * miss stays short whatever key a peer sends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "xport/grant.h"

void be__xgrants_init(struct be__xgrants *g)
{
	memset(g, 0, sizeof(*g));
}

void be__xgrants_fini(struct be__xgrants *g)
{
	free(g->tab);
	memset(g, 0, sizeof(*g));
}

static int grant_draw(struct be__xgrants *g, uint32_t *out)
{
	if (!g->nrnd) {
		ssize_t n;

		do
			n = getrandom(g->rnd, sizeof(g->rnd), 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
		if ((size_t)n != sizeof(g->rnd))
			return -EAGAIN;
		g->nrnd = (uint32_t)(sizeof(g->rnd) / sizeof(g->rnd[0]));
	}
	*out = g->rnd[--g->nrnd];
	g->rnd[g->nrnd] = 0; /* a used key does not stay behind */
	return 0;
}

static struct be__xgrant *grant_slot(const struct be__xgrants *g, uint32_t rkey)
{
	uint32_t i;

	if (!g->tab || !rkey)
		return NULL;
	for (i = rkey & g->mask; g->tab[i].rkey; i = (i + 1) & g->mask)
		if (g->tab[i].rkey == rkey)
			return &g->tab[i];
	return NULL;
}

static void grant_put(struct be__xgrant *tab, uint32_t mask, const struct be__xgrant *e)
{
	uint32_t i = e->rkey & mask;

	while (tab[i].rkey)
		i = (i + 1) & mask;
	tab[i] = *e;
}

static int grant_grow(struct be__xgrants *g)
{
	uint32_t cap = g->tab ? (g->mask + 1) * 2 : 16, i;
	struct be__xgrant *t;

	if (cap == 0 || cap > (1u << 30))
		return -ENOMEM;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	if (g->tab)
		for (i = 0; i <= g->mask; i++)
			if (g->tab[i].rkey)
				grant_put(t, cap - 1, &g->tab[i]);
	free(g->tab);
	g->tab = t;
	g->mask = cap - 1;
	return 0;
}

int be__xgrants_add(struct be__xgrants *g, uint64_t addr, uint64_t len, uint32_t *rkey)
{
	struct be__xgrant e = { .addr = addr, .len = len };
	int ret;

	if (!len || addr + len < addr || !rkey)
		return -EINVAL;
	if (!g->tab || (g->n + 1) * 2 > g->mask + 1) {
		ret = grant_grow(g);
		if (ret)
			return ret;
	}
	do {
		ret = grant_draw(g, &e.rkey);
		if (ret)
			return ret;
	} while (!e.rkey || grant_slot(g, e.rkey));
	grant_put(g->tab, g->mask, &e);
	g->n++;
	*rkey = e.rkey;
	return 0;
}

int be__xgrants_del(struct be__xgrants *g, uint32_t rkey)
{
	struct be__xgrant *s = grant_slot(g, rkey);
	uint32_t i, j;

	if (!s)
		return -ENOENT;
	i = (uint32_t)(s - g->tab);
	/* Backward shift: move up every later entry of the cluster whose
	 * home slot does not lie cyclically in (i, j]. */
	for (j = (i + 1) & g->mask; g->tab[j].rkey; j = (j + 1) & g->mask) {
		uint32_t home = g->tab[j].rkey & g->mask;

		if (((j - home) & g->mask) >= ((j - i) & g->mask)) {
			g->tab[i] = g->tab[j];
			i = j;
		}
	}
	memset(&g->tab[i], 0, sizeof(g->tab[i]));
	g->n--;
	return 0;
}

bool be__xgrants_check(const struct be__xgrants *g, uint32_t rkey, uint64_t addr, uint64_t len)
{
	const struct be__xgrant *s = grant_slot(g, rkey);

	/* Overflow-safe: addr >= start, and len fits in what is left. */
	return s && addr >= s->addr && addr - s->addr <= s->len &&
	       len <= s->len - (addr - s->addr);
}

const char *be__xaslot_check(const struct be__xaslot *slots, uint32_t slot, uint64_t off,
			     uint64_t len, uint64_t total, enum be__xaslot_end end,
			     uint64_t *open)
{
	const struct be__xaslot *a;
	uint64_t got, size;

	*open = 0;
	if (slot >= BE_XASLOTS)
		return "RX_ALLOC write to no slot";
	a = slots ? &slots[slot] : NULL;
	if (off == 0) {
		if ((a && a->buf) || total == 0 || total < len || total > UINT32_MAX)
			return "RX_ALLOC write opens a bad slot";
		got = 0;
		size = total;
	} else {
		if (!a || !a->buf || off != a->got)
			return "RX_ALLOC write out of order";
		got = a->got;
		size = a->len;
	}
	if (len > size - got || (end == BE_XASLOT_LAST && got + len != size) ||
	    (end == BE_XASLOT_MORE && got + len == size))
		return "RX_ALLOC write outside its buffer";
	if (off == 0)
		*open = total;
	return NULL;
}

void be__xaslots_free(struct be__xaslot **slots, struct be_xconn *conn,
		      void (*rx_free)(struct be_xconn *conn, void *buf))
{
	uint32_t i;

	if (!*slots)
		return;
	for (i = 0; i < BE_XASLOTS; i++)
		if ((*slots)[i].buf && rx_free)
			rx_free(conn, (*slots)[i].buf);
	free(*slots);
	*slots = NULL;
}
