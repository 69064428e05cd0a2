/*
 * map.c - a small u64 -> u64 hash table for the verbs transport.
 *
 * Two uses, both owned by one worker thread: a CQ's qp_num -> conn table
 * (a completion names its QP only by number) and an SRQ's wr_id -> count
 * table of posted receives (verbs does not flush an SRQ when it is
 * destroyed, so the transport remembers what it must hand back).
 *
 * Open addressing with linear probing; deletion shifts later entries back
 * instead of leaving tombstones, so lookups stay short after churn. The
 * table doubles at half load and never shrinks.
 */
#include <errno.h>
#include <stdlib.h>

#include "xport/verbs/verbs.h"

static size_t map_hash(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

static int map_grow(struct verbs_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64, i;
	uint64_t *keys = calloc(ncap, sizeof(*keys));
	uint64_t *vals = calloc(ncap, sizeof(*vals));
	uint8_t *used = calloc(ncap, 1);

	if (!keys || !vals || !used) {
		free(keys);
		free(vals);
		free(used);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->used[i])
			continue;
		j = map_hash(m->keys[i], ncap);
		while (used[j])
			j = (j + 1) & (ncap - 1);
		used[j] = 1;
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	free(m->used);
	m->keys = keys;
	m->vals = vals;
	m->used = used;
	m->cap = ncap;
	return 0;
}

static size_t map_find(const struct verbs_map *m, uint64_t key, int *found)
{
	size_t i = map_hash(key, m->cap);

	while (m->used[i]) {
		if (m->keys[i] == key) {
			*found = 1;
			return i;
		}
		i = (i + 1) & (m->cap - 1);
	}
	*found = 0;
	return i;
}

int be__verbs_map_put(struct verbs_map *m, uint64_t key, uint64_t val)
{
	size_t i;
	int found, ret;

	if ((m->count + 1) * 2 > m->cap) {
		ret = map_grow(m);
		if (ret)
			return ret;
	}
	i = map_find(m, key, &found);
	if (!found) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->count++;
	}
	m->vals[i] = val;
	return 0;
}

int be__verbs_map_get(const struct verbs_map *m, uint64_t key, uint64_t *val)
{
	size_t i;
	int found;

	if (!m->cap)
		return 0;
	i = map_find(m, key, &found);
	if (found)
		*val = m->vals[i];
	return found;
}

int be__verbs_map_del(struct verbs_map *m, uint64_t key)
{
	size_t i, j, home;
	int found;

	if (!m->cap)
		return 0;
	i = map_find(m, key, &found);
	if (!found)
		return 0;
	m->used[i] = 0;
	m->count--;
	/* Shift back every later entry of the cluster that may no longer be
	 * reachable from its home slot across the hole at i. */
	j = i;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->used[j])
			break;
		home = map_hash(m->keys[j], m->cap);
		/* Leave j alone if its home lies cyclically in (i, j]. */
		if ((i <= j) ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		m->used[i] = 1;
		m->used[j] = 0;
		i = j;
	}
	return 1;
}

int be__verbs_map_next(const struct verbs_map *m, size_t *pos, uint64_t *key, uint64_t *val)
{
	while (*pos < m->cap) {
		size_t i = (*pos)++;

		if (m->used[i]) {
			*key = m->keys[i];
			*val = m->vals[i];
			return 1;
		}
	}
	return 0;
}

void be__verbs_map_free(struct verbs_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	m->keys = m->vals = NULL;
	m->used = NULL;
	m->cap = m->count = 0;
}
