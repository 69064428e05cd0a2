/*
 * shard.c - keys over logical shards, logical shards over servers.
 *
 * The hash (be__ps_shard_of() in ps_int.h) is part of the protocol: a
 * client sends a key only to the shard it hashes to, and the server
 * refuses keys of other shards, so both must compute the same function
 * (docs/PS.md, "Sharding"). Scaling by a multiply instead of a modulo
 * keeps it to a few cycles per key; both are uniform to within 2^-64 for
 * any shard count we allow.
 *
 * The number of logical shards is fixed for the life of a model (it is in
 * every checkpoint). Capacity changes by moving whole logical shards
 * between server processes: the placement, default round-robin, can be
 * overridden shard by shard in the config file (config.c).
 */
#include <errno.h>

#include "ps/ps_int.h"

void be__ps_placement_default(uint32_t *placement, uint32_t n_shards, uint32_t n_servers)
{
	uint32_t s;

	for (s = 0; s < n_shards; s++)
		placement[s] = s % n_servers;
}

/* A counting sort on the shard of each key, stable, in two passes: count,
 * then place. The shard of each key is computed twice rather than stored,
 * so the only memory is the caller's. */
int be__ps_split(const uint64_t *keys, uint32_t n, uint32_t n_shards, uint32_t *offsets,
		 uint32_t *perm)
{
	uint32_t i, s, sum = 0;
	int touched = 0;

	if (!n_shards || n_shards > BE_PS_MAX_SHARDS)
		return -EINVAL;
	memset(offsets, 0, ((size_t)n_shards + 1) * sizeof(*offsets));
	for (i = 0; i < n; i++)
		offsets[be__ps_shard_of(keys[i], n_shards) + 1]++;
	for (s = 0; s < n_shards; s++) {
		touched += offsets[s + 1] != 0;
		sum += offsets[s + 1];
		offsets[s + 1] = sum;
	}
	/* offsets[s] is now the start of shard s; place and advance it,
	 * which leaves offsets[s] at the end of shard s, the start of
	 * s + 1; shifting down by one restores the starts. */
	for (i = 0; i < n; i++)
		perm[offsets[be__ps_shard_of(keys[i], n_shards)]++] = i;
	for (s = n_shards; s > 0; s--)
		offsets[s] = offsets[s - 1];
	offsets[0] = 0;
	return touched;
}
