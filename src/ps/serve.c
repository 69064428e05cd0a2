/*
 * serve.c - a shard (its stores, its dedup window, its model version) and
 * the pull and push requests executed against it (model in ps_int.h).
 *
 * A pull writes each value straight from its row into the reply buffer,
 * and a missing key's value (initializer or default) straight there too:
 * nothing is allocated per key or per request. A push is all or nothing:
 * it is checked against the dedup window, every key is looked up, room is
 * reserved for the missing ones in every table, and only then is anything
 * written, so a push refused for memory or max_rows leaves the shard as
 * it was and may be retried with the same sequence number.
 *
 * Lookups run as a short pipeline over the request's keys: the index slot
 * of key j + 2D is prefetched, the row that slot names for key j + D is
 * prefetched, and key j is looked up, so with D keys in flight a lookup
 * rarely waits for memory (a batch of random keys over a large table
 * otherwise takes two cache misses per key, one after the other).
 */
#include <errno.h>
#include <stdlib.h>

#include "ps/serve.h"
#include "util/common.h"

#define SERVE_PF 8u /* D: keys between the stages of the pipeline */

int be__ps_shard_create(const struct be__ps_config *cfg, uint32_t id, struct be__ps_shard **out)
{
	struct be__ps_shard *sh;
	uint32_t i;
	int err;

	if (id >= cfg->n_shards || cfg->n_tables > BE_PS_MAX_TABLES)
		return -EINVAL;
	sh = calloc(1, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	sh->cfg = cfg;
	sh->id = id;
	if ((err = be__ps_dedup_init(&sh->dedup, &cfg->dedup)))
		goto fail_dedup;
	for (i = 0; i < cfg->n_tables; i++)
		if ((err = be__ps_store_init(&sh->stores[i], &cfg->tables[i])))
			goto fail_stores;
	*out = sh;
	return 0;

fail_stores:
	while (i--)
		be__ps_store_close(&sh->stores[i]);
	be__ps_dedup_close(&sh->dedup);
fail_dedup:
	free(sh);
	return err;
}

void be__ps_shard_destroy(struct be__ps_shard *sh)
{
	uint32_t i;

	if (!sh)
		return;
	for (i = 0; i < sh->cfg->n_tables; i++)
		be__ps_store_close(&sh->stores[i]);
	be__ps_dedup_close(&sh->dedup);
	free(sh->scratch);
	free(sh);
}

/*
 * The lookup pipeline over the keys of one section. serve_pipe_row()
 * must be called for j = 0, 1, 2, ... in order; it returns the row of key
 * j (or BE_PS_NO_ROW) after starting the loads for keys j + D and j + 2D.
 * Hashes are computed once and kept in a ring of 2D.
 */
struct serve_pipe {
	const struct be__ps_store *st;
	const struct be__ps_sec *sec;
	uint64_t h[2 * SERVE_PF];
};

/* Stage 2: the home slot of @h should be cached by now; if it names a
 * row with the same tag, start loading that row. */
static inline void serve_prefetch_row(const struct be__ps_store *st, uint64_t h)
{
	uint64_t slot = st->index[(h >> 32) >> st->shift];

	if ((uint32_t)slot != BE_PS_NO_ROW && (slot >> 32) == (h >> 32))
		__builtin_prefetch(be__ps_store_row(st, (uint32_t)slot));
}

static inline void serve_pipe_start(struct serve_pipe *p, const struct be__ps_store *st,
				    const struct be__ps_sec *sec)
{
	uint32_t k;

	p->st = st;
	p->sec = sec;
	for (k = 0; k < sec->n && k < 2 * SERVE_PF; k++) {
		p->h[k] = be__ps_index_hash(be__ps_wire_key(sec, k));
		be__ps_store_prefetch(st, p->h[k]);
	}
	for (k = 0; k < sec->n && k < SERVE_PF; k++)
		serve_prefetch_row(st, p->h[k]);
}

static inline uint32_t serve_pipe_row(struct serve_pipe *p, uint32_t j)
{
	uint64_t h = p->h[j % (2 * SERVE_PF)];

	if (j + 2 * SERVE_PF < p->sec->n) {
		uint64_t hn = be__ps_index_hash(be__ps_wire_key(p->sec, j + 2 * SERVE_PF));

		p->h[j % (2 * SERVE_PF)] = hn;
		be__ps_store_prefetch(p->st, hn);
	}
	if (j + SERVE_PF < p->sec->n)
		serve_prefetch_row(p->st, p->h[(j + SERVE_PF) % (2 * SERVE_PF)]);
	return be__ps_store_find_h(p->st, be__ps_wire_key(p->sec, j), h);
}

/* @req was decoded against this shard's config (be__ps_req_decode()):
 * check the little that would otherwise index out of bounds. */
static bool serve_req_ok(const struct be__ps_shard *sh, const struct be__ps_msg *req, uint8_t op)
{
	uint32_t i;

	if (req->op != op || req->shard != sh->id || !req->nsec || req->nsec > BE_PS_MAX_SECTIONS)
		return false;
	for (i = 0; i < req->nsec; i++)
		if (req->sec[i].table >= sh->cfg->n_tables ||
		    req->sec[i].dim != sh->cfg->tables[req->sec[i].table].dim)
			return false;
	return true;
}

static void serve_pull_section(struct be__ps_shard *sh, const struct be__ps_msg *req,
			       const struct be__ps_sec *sec, uint8_t *p)
{
	const struct be__ps_store *st = &sh->stores[sec->table];
	const struct be__ps_table *t = st->t;
	struct be__ps_table_stats *ts = &sh->tstats[sec->table];
	bool inference = req->flags & BE_PS_PULL_F_INFERENCE;
	bool want_map = req->flags & BE_PS_PULL_F_MISSING_MAP;
	size_t row_len = (size_t)sec->dim * sizeof(float);
	uint64_t vals_len = (uint64_t)sec->n * row_len, word = 0;
	float *out = (float *)(void *)(p + BE_PS_SEC_HDR_LEN);
	uint8_t *map = p + BE_PS_SEC_HDR_LEN + be__ps_pad8(vals_len);
	struct serve_pipe pipe;
	uint32_t j, missing = 0;

	serve_pipe_start(&pipe, st, sec);
	for (j = 0; j < sec->n; j++) {
		uint32_t r = serve_pipe_row(&pipe, j);
		float *w = out + (size_t)j * sec->dim;

		if (r != BE_PS_NO_ROW) {
			memcpy(w, be__ps_row_values(be__ps_store_row(st, r)), row_len);
		} else {
			if (be__ps_missing_row(t, be__ps_wire_key(sec, j), inference, w))
				ts->missing_default++;
			else
				ts->missing_init++;
			missing++;
			word |= 1ull << (j & 63);
		}
		if (want_map && ((j & 63) == 63 || j + 1 == sec->n)) {
			memcpy(map + 8 * (size_t)(j / 64), &word, sizeof(word));
			word = 0;
		}
	}
	memset((uint8_t *)out + vals_len, 0, be__ps_pad8(vals_len) - vals_len);
	be__ps_sec_put(p, sec->table, sec->dim, sec->n, missing);
	ts->pull_keys += sec->n;
}

int64_t be__ps_shard_pull(struct be__ps_shard *sh, const struct be__ps_msg *req, uint8_t *out,
			  size_t cap)
{
	struct be__ps_msg hdr = { .op = BE_PS_OP_PULL_REPLY };
	uint64_t len = be__ps_pull_reply_len(req), off = BE_PS_HDR_LEN;
	uint32_t i;

	if (!serve_req_ok(sh, req, BE_PS_OP_PULL) || ((uintptr_t)out & 7)) {
		sh->stats.errors++;
		return -EINVAL;
	}
	if (req->version > sh->version) {
		sh->stats.stale++;
		return -ESTALE;
	}
	if (len > cap) {
		sh->stats.errors++;
		return -ENOBUFS;
	}
	for (i = 0; i < req->nsec; i++) {
		serve_pull_section(sh, req, &req->sec[i], out + off);
		off += be__ps_sec_len(BE_PS_OP_PULL_REPLY, req->flags, req->sec[i].n,
				      req->sec[i].dim);
	}
	hdr.flags = req->flags;
	hdr.shard = sh->id;
	hdr.version = sh->version;
	hdr.nsec = req->nsec;
	be__ps_hdr_put(out, &hdr);
	sh->stats.pulls++;
	return (int64_t)len;
}

static int serve_scratch(struct be__ps_shard *sh, uint32_t n)
{
	return be__grow(&sh->scratch, &sh->scratch_cap, n, sizeof(*sh->scratch), n);
}

/* Phase 1 of a push: find every key's row (into @rows) and make room for
 * the missing ones. Changes no row. */
static int serve_push_prepare(struct be__ps_shard *sh, const struct be__ps_msg *req, uint32_t *rows)
{
	struct serve_pipe pipe;
	uint32_t i, j;
	int err;

	for (i = 0; i < req->nsec; i++) {
		const struct be__ps_sec *sec = &req->sec[i];
		struct be__ps_store *st = &sh->stores[sec->table];
		uint64_t missing = 0;

		serve_pipe_start(&pipe, st, sec);
		for (j = 0; j < sec->n; j++) {
			rows[j] = serve_pipe_row(&pipe, j);
			missing += rows[j] == BE_PS_NO_ROW;
		}
		if (missing && (err = be__ps_store_reserve(st, missing)))
			return err;
		rows += sec->n;
	}
	return 0;
}

/* Phase 2: create the missing rows (room is reserved: cannot fail) and
 * apply every gradient. */
static void serve_push_apply(struct be__ps_shard *sh, const struct be__ps_msg *req, uint32_t *rows)
{
	float gbuf[BE_PS_MAX_DIM];
	uint32_t i, j;

	for (i = 0; i < req->nsec; i++) {
		const struct be__ps_sec *sec = &req->sec[i];
		struct be__ps_store *st = &sh->stores[sec->table];
		const struct be__ps_table *t = st->t;
		struct be__ps_table_stats *ts = &sh->tstats[sec->table];
		size_t row_len = (size_t)sec->dim * sizeof(float);
		bool aligned = !((uintptr_t)sec->vals & 3);

		for (j = 0; j < sec->n; j++) {
			const uint8_t *gp = sec->vals + (size_t)j * row_len;
			const float *g = aligned ? (const float *)(const void *)gp : gbuf;
			uint32_t r = rows[j];
			uint8_t *row;

			if (r == BE_PS_NO_ROW) {
				/* Also finds a key repeated in this push,
				 * created a few keys earlier. */
				uint64_t key = be__ps_wire_key(sec, j);

				if (be__ps_store_add(st, key, &r) == 1) {
					row = be__ps_store_row(st, r);
					be__ps_init_row(t, key, be__ps_row_values(row));
					be__ps_opt_init_state(&t->opt, t->dim,
							      be__ps_row_state(st, row));
					ts->rows_created++;
				}
			}
			row = be__ps_store_row(st, r);
			if (!aligned)
				memcpy(gbuf, gp, row_len);
			be__ps_opt_apply(&t->opt, t->dim, be__ps_row_values(row),
					 be__ps_row_state(st, row), g);
		}
		ts->push_keys += sec->n;
		rows += sec->n;
	}
}

int be__ps_shard_push(struct be__ps_shard *sh, const struct be__ps_msg *req)
{
	uint64_t total = 0;
	uint32_t i;
	int err;

	if (!serve_req_ok(sh, req, BE_PS_OP_PUSH)) {
		sh->stats.errors++;
		return -EINVAL;
	}
	for (i = 0; i < req->nsec; i++)
		total += req->sec[i].n;
	if (total > sh->cfg->limits.max_keys) {
		sh->stats.errors++;
		return -E2BIG;
	}
	err = be__ps_dedup_check(&sh->dedup, req->trainer, req->seq, sh->version);
	if (!err)
		err = serve_scratch(sh, (uint32_t)total);
	if (!err)
		err = serve_push_prepare(sh, req, sh->scratch);
	switch (err) {
	case 0:
		break;
	case -EALREADY:
		sh->stats.push_dups++;
		return err;
	case -ERANGE:
		sh->stats.push_too_old++;
		return err;
	case -ENOSPC:
		sh->stats.push_full++;
		return err;
	default:
		sh->stats.errors++;
		return err;
	}
	serve_push_apply(sh, req, sh->scratch);
	sh->version++;
	be__ps_dedup_commit(&sh->dedup, req->trainer, req->seq, sh->version);
	sh->stats.pushes++;
	return 0;
}
