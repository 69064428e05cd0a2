/*
 * dedup.c - exactly-once pushes: the window of sequence numbers each
 * trainer has had applied on one shard (model in ps_int.h, the rules in
 * docs/PS.md, "Exactly-once pushes").
 *
 * A trainer (a 64-bit id, fresh for each incarnation of the trainer)
 * numbers its pushes to each shard 1, 2, 3, ... and keeps at most 64 of
 * them unanswered per shard. The shard remembers, per trainer, the
 * highest number applied and which of the 63 below it were, so a retried
 * or hedged copy of a push is recognised and a push overtaken by a later
 * one is still applied once. What is older than that is refused, because
 * whether it was applied is no longer known.
 *
 * The table of trainers is bounded (max_trainers). An entry is evicted
 * for a new trainer only when it has seen no push while the shard applied
 * evict_idle others: by then a retry of its pushes would be far past any
 * deadline. If no entry is that idle, the new trainer is refused
 * (-ENOSPC) rather than weakening the guarantee for an active one.
 *
 * Open addressing by trainer id with linear probing, at most half full;
 * eviction deletes with backward shifting, so no tombstones.
 */
#include <errno.h>
#include <stdlib.h>

#include "ps/ps_int.h"

int be__ps_dedup_init(struct be__ps_dedup *d, const struct be__ps_dedup_cfg *cfg)
{
	uint32_t cap = 4;

	memset(d, 0, sizeof(*d));
	if (!cfg->max_trainers || cfg->max_trainers > (1u << 24))
		return -EINVAL;
	while (cap < 2 * cfg->max_trainers)
		cap *= 2;
	d->slots = calloc(cap, sizeof(*d->slots));
	if (!d->slots)
		return -ENOMEM;
	d->cap = cap;
	d->max = cfg->max_trainers;
	d->evict_idle = cfg->evict_idle;
	return 0;
}

void be__ps_dedup_close(struct be__ps_dedup *d)
{
	free(d->slots);
	memset(d, 0, sizeof(*d));
}

static uint32_t dedup_home(const struct be__ps_dedup *d, uint64_t trainer)
{
	return (uint32_t)be__ps_mix64(trainer) & (d->cap - 1);
}

/* The slot of @trainer, or the free slot where it would go. */
static uint32_t dedup_slot(const struct be__ps_dedup *d, uint64_t trainer)
{
	uint32_t pos = dedup_home(d, trainer);

	while (d->slots[pos].trainer && d->slots[pos].trainer != trainer)
		pos = (pos + 1) & (d->cap - 1);
	return pos;
}

/* The least recently active entry, if it is idle enough to evict. */
static int dedup_victim(const struct be__ps_dedup *d, uint64_t now, uint32_t *out)
{
	uint32_t i, best = UINT32_MAX;

	for (i = 0; i < d->cap; i++)
		if (d->slots[i].trainer &&
		    (best == UINT32_MAX || d->slots[i].last < d->slots[best].last))
			best = i;
	if (best == UINT32_MAX || now - d->slots[best].last < d->evict_idle)
		return -ENOSPC;
	*out = best;
	return 0;
}

/* Backward-shift deletion: move later members of the cluster into the
 * hole when their home is not between the hole and them. */
static void dedup_delete(struct be__ps_dedup *d, uint32_t hole)
{
	uint32_t mask = d->cap - 1, j = hole;

	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!d->slots[j].trainer)
			break;
		home = dedup_home(d, d->slots[j].trainer);
		/* j may move to hole iff home is not cyclically in (hole, j]. */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			d->slots[hole] = d->slots[j];
			hole = j;
		}
	}
	memset(&d->slots[hole], 0, sizeof(d->slots[hole]));
	d->count--;
}

int be__ps_dedup_check(const struct be__ps_dedup *d, uint64_t trainer, uint64_t seq,
		       uint64_t now)
{
	const struct be__ps_dedup_entry *e;
	uint32_t victim;

	if (!trainer || !seq)
		return -EINVAL;
	e = &d->slots[dedup_slot(d, trainer)];
	if (!e->trainer)
		return d->count < d->max ? 0 : dedup_victim(d, now, &victim);
	if (seq > e->hi)
		return 0;
	if (e->hi - seq >= BE_PS_DEDUP_WINDOW)
		return -ERANGE;
	return (e->map >> (e->hi - seq)) & 1 ? -EALREADY : 0;
}

void be__ps_dedup_commit(struct be__ps_dedup *d, uint64_t trainer, uint64_t seq, uint64_t now)
{
	uint32_t pos = dedup_slot(d, trainer), victim;
	struct be__ps_dedup_entry *e = &d->slots[pos];

	if (!e->trainer) {
		if (d->count >= d->max && !dedup_victim(d, now, &victim)) {
			dedup_delete(d, victim);
			d->evictions++;
			pos = dedup_slot(d, trainer);
			e = &d->slots[pos];
		}
		*e = (struct be__ps_dedup_entry){ .trainer = trainer, .hi = seq, .map = 1 };
		d->count++;
	} else if (seq > e->hi) {
		uint64_t up = seq - e->hi;

		e->map = up >= BE_PS_DEDUP_WINDOW ? 1 : (e->map << up) | 1;
		e->hi = seq;
	} else {
		e->map |= 1ull << (e->hi - seq);
	}
	e->last = now;
}

int be__ps_dedup_restore(struct be__ps_dedup *d, const struct be__ps_dedup_entry *e)
{
	uint32_t pos;

	if (!e->trainer || !e->hi || !(e->map & 1) ||
	    (e->hi < BE_PS_DEDUP_WINDOW && (e->map >> e->hi)))
		return -EBADMSG; /* hi applied; no bits below seq 1 */
	pos = dedup_slot(d, e->trainer);
	if (d->slots[pos].trainer)
		return -EBADMSG;
	if (d->count >= d->max)
		return -ENOSPC;
	d->slots[pos] = *e;
	d->count++;
	return 0;
}
