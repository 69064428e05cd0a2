/*
 * ids.c - handles of calls and attempts: 64-bit ids that name a slot and
 * the generation it had when the id was issued.
 *
 * An attempt's id is the request id on the wire, so a reply finds its
 * attempt in O(1) without a hash, and an id whose slot has moved on to a
 * later generation is a reply that came too late (its call completed):
 * dropped and counted, never matched to the wrong call. An id that names
 * a slot or generation never issued is a peer making ids up: a protocol
 * error. Call ids work the same way, so be_rpc_cancel() of a call that
 * already completed is a clean -ENOENT, never a use after free.
 *
 * Generations are 32 bits and start at 1 (id 0 is never issued); a slot
 * reused 2^32 times wraps to 1 again, which would make an ancient late
 * reply look current only if it came back after four billion reuses of
 * the same slot.
 */
#include <errno.h>
#include <stdlib.h>

#include "rpc/rpc_int.h"

/* A new slot at the end of @t, in *@slot (the free list is empty). */
int be__rpc_ids_grow(struct rpc_ids *t, uint32_t *slot)
{
	uint32_t i;

	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		struct rpc_id_slot *v;

		if (cap <= t->cap)
			return -ENOMEM;
		v = realloc(t->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	i = t->n++;
	t->v[i].gen = 1;
	*slot = i;
	return 0;
}

void be__rpc_ids_free(struct rpc_ids *t)
{
	free(t->v);
	t->v = NULL;
	t->n = t->cap = 0;
	t->free_head = RPC_IDS_NONE;
}
