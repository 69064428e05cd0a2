/*
 * ps_int.h - the parameter server's storage core (internal): tables,
 * stores, optimizers, initializers, sharding, the dedup window and the
 * shard that holds them. docs/PS.md is the reference; the wire codec is in
 * wire.h, checkpoints in ckpt.h, the config file in config.h.
 *
 * Model. A model is a set of embedding tables (struct be__ps_table: name,
 * dimension, optimizer, initializer). Its uint64 keys are spread over N
 * logical shards by a fixed hash (be__ps_shard_of()), and logical shards
 * are placed on server processes (struct be__ps_config.placement). A
 * process hosts any number of shards. A shard (struct be__ps_shard) owns
 * one store per table (struct be__ps_store: rows of float32 values and
 * optimizer state in large slabs, found through an open-addressing index),
 * the dedup window of the trainers that push to it (struct be__ps_dedup)
 * and its model version, the number of pushes it has applied.
 *
 * Threads. A shard and everything in it is used by one thread at a time
 * (the server runs each shard on one worker); nothing here takes a lock.
 * The config is read-only once parsed and may be shared by every thread.
 *
 * Limits. Tables <= BE_PS_MAX_TABLES, dim <= BE_PS_MAX_DIM, shards <=
 * BE_PS_MAX_SHARDS, rows per store < BE_PS_STORE_MAX_ROWS. Rows are never
 * deleted (there is no eviction); a table's max_rows bounds each store.
 *
 * Errors are negative errno codes; docs/PS.md lists which means what.
 */
#ifndef BE_PS_PS_INT_H
#define BE_PS_PS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
/* Rows go to the wire and into checkpoints with memcpy: both are
 * little-endian (docs/PS.md), and so is every host we build for. */
#error "src/ps assumes a little-endian host"
#endif

/* Little-endian fields of the wire format and of checkpoints, at any
 * alignment (the host is little-endian, so a copy is the conversion). */
static inline uint16_t be__ps_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t be__ps_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t be__ps_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void be__ps_put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline void be__ps_put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline void be__ps_put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

#define BE_PS_MAX_TABLES 64u
#define BE_PS_NAME_MAX 63u /* bytes of a table name, without the NUL */
#define BE_PS_MAX_DIM 4096u
#define BE_PS_MAX_SHARDS 65536u
#define BE_PS_STORE_MAX_ROWS (1u << 31) /* index slots stay below 2^32 */

/* ---- tables ---- */

enum be__ps_opt_kind {
	BE_PS_OPT_SGD = 1,     /* w -= lr g */
	BE_PS_OPT_ADAGRAD = 2, /* row-wise: one accumulator per row */
	BE_PS_OPT_FTRL = 3,    /* FTRL-Proximal: z and n per coordinate */
};

/* Optimizer and its hyperparameters (docs/PS.md, "Optimizers"). */
struct be__ps_opt {
	uint32_t kind;    /* enum be__ps_opt_kind */
	float lr;         /* SGD, Adagrad: learning rate; FTRL: alpha */
	float eps;        /* Adagrad: added to sqrt(G) */
	float init_accum; /* Adagrad: G of a new row */
	float beta;       /* FTRL */
	float l1;         /* FTRL */
	float l2;         /* FTRL */
};

enum be__ps_init_kind {
	BE_PS_INIT_ZEROS = 1,
	BE_PS_INIT_UNIFORM = 2, /* lo + (hi - lo) u, u from (seed, key, i) */
};

struct be__ps_init {
	uint32_t kind; /* enum be__ps_init_kind */
	float lo, hi;  /* UNIFORM */
	uint64_t seed; /* UNIFORM */
};

/* What a pull answers for a key the store does not hold. */
enum be__ps_missing {
	BE_PS_MISSING_INIT = 1,    /* the initializer's value (what a push would start from) */
	BE_PS_MISSING_DEFAULT = 2, /* inference pulls get missing_value in every coordinate */
};

struct be__ps_table {
	char name[BE_PS_NAME_MAX + 1];
	uint32_t id;  /* position in the config, the id on the wire */
	uint32_t dim; /* 1 .. BE_PS_MAX_DIM */
	struct be__ps_opt opt;
	struct be__ps_init init;
	uint32_t missing; /* enum be__ps_missing */
	float missing_value;
	uint64_t max_rows; /* per shard store, 1 .. BE_PS_STORE_MAX_ROWS */
};

/* Bounds on what one request may ask (wire.c). */
struct be__ps_limits {
	uint32_t max_keys;        /* keys in one request, all sections */
	uint64_t max_reply_bytes; /* a pull whose reply would be larger is refused */
};

/* The dedup window's table of trainers (dedup.c). */
struct be__ps_dedup_cfg {
	uint32_t max_trainers; /* entries per shard */
	uint64_t evict_idle;   /* an entry may be evicted after this many pushes of others */
};

/*
 * The model: tables, sharding, placement, limits. Built by config.c from a
 * file (or by hand in tests: be__ps_config_init() then fill tables).
 * Ownership: placement is malloc'd and freed by be__ps_config_close().
 */
struct be__ps_config {
	uint32_t n_shards;   /* logical shards, 1 .. BE_PS_MAX_SHARDS */
	uint32_t n_servers;  /* server processes the shards are placed on */
	uint32_t *placement; /* n_shards entries: the server of each shard */
	uint32_t n_tables;
	struct be__ps_table tables[BE_PS_MAX_TABLES];
	struct be__ps_limits limits;
	struct be__ps_dedup_cfg dedup;
};

/* ---- hashes and sharding (shard.c) ---- */

/* The splitmix64 output function (Steele, Lea, Flood 2014): a bijection
 * of uint64 with full avalanche. */
static inline uint64_t be__ps_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define BE_PS_GOLDEN 0x9e3779b97f4a7c15ull /* splitmix64's increment */

/*
 * be__ps_shard_of() - the logical shard of @key among @n_shards: the first
 * output of splitmix64 seeded with the key, h = mix64(key + GOLDEN), scaled
 * to [0, n) as floor(h * n / 2^64). Part of the protocol: clients and
 * servers must agree (docs/PS.md, "Sharding").
 */
static inline uint32_t be__ps_shard_of(uint64_t key, uint32_t n_shards)
{
	uint64_t h = be__ps_mix64(key + BE_PS_GOLDEN);

	return (uint32_t)(((unsigned __int128)h * n_shards) >> 64);
}

/* The server process of logical @shard (< n_shards). */
static inline uint32_t be__ps_server_of(const struct be__ps_config *c, uint32_t shard)
{
	return c->placement[shard];
}

/*
 * be__ps_placement_default() - shard s on server s % n_servers, into
 * @placement (n_shards entries).
 */
void be__ps_placement_default(uint32_t *placement, uint32_t n_shards, uint32_t n_servers);

/*
 * be__ps_split() - group @n keys by shard without moving them: on return
 * offsets[s] .. offsets[s + 1] - 1 index @perm, and perm[i] are the
 * positions in @keys of shard s's keys, in their original order.
 * Borrows @keys; writes @offsets (n_shards + 1 entries) and @perm (@n).
 * No allocation. Returns the number of shards that got keys, or -EINVAL.
 */
int be__ps_split(const uint64_t *keys, uint32_t n, uint32_t n_shards, uint32_t *offsets,
		 uint32_t *perm);

/* ---- initializers (init.c) ---- */

/* be__ps_init_row() - the initial values of @key's row of @t into @w (dim). */
void be__ps_init_row(const struct be__ps_table *t, uint64_t key, float *w);

/*
 * be__ps_missing_row() - what a pull answers for a key that has no row:
 * the table's default when @inference and its policy is DEFAULT, else the
 * initializer's value. Returns 1 when the default was used, 0 for the
 * initializer.
 */
int be__ps_missing_row(const struct be__ps_table *t, uint64_t key, bool inference, float *w);

/* ---- optimizers (optimizer.c) ---- */

/* Floats of optimizer state per row: SGD 0, Adagrad 1, FTRL 2 * dim. */
uint32_t be__ps_opt_state_floats(uint32_t kind, uint32_t dim);

/* be__ps_opt_init_state() - the state of a new row into @state. */
void be__ps_opt_init_state(const struct be__ps_opt *o, uint32_t dim, float *state);

/*
 * be__ps_opt_apply() - apply gradient @g (dim floats, finite) to the
 * weights @w and the optimizer state @state of one row. Borrows all three.
 */
void be__ps_opt_apply(const struct be__ps_opt *o, uint32_t dim, float *w, float *state,
		      const float *g);

/* "sgd", "adagrad", "ftrl", or NULL. */
const char *be__ps_opt_name(uint32_t kind);

/* ---- the store: rows of one table in one shard (table.c) ---- */

#define BE_PS_NO_ROW UINT32_MAX

/*
 * A row is [u64 key][f32 value x dim][f32 state x state_floats], padded to
 * 8 bytes; rows sit back to back in slabs of 2^slab_shift rows, mapped
 * from the OS, never moved and never freed before the store is. The index
 * is open addressing with linear probing, power-of-two capacity, at most
 * 3/4 full: one uint64 slot per entry, (tag << 32) | row, where tag is the
 * high half of the key's index hash and also selects the home slot (its
 * top bits), so growing rehashes from the slots alone. An empty slot has
 * row == BE_PS_NO_ROW.
 */
struct be__ps_store {
	const struct be__ps_table *t; /* borrowed; outlives the store */
	uint32_t dim;
	uint32_t state_floats;
	uint32_t row_bytes;  /* stride */
	uint32_t slab_shift; /* rows per slab = 1 << slab_shift */
	size_t slab_bytes;
	uint8_t **slabs;
	uint32_t n_slabs, slabs_cap;
	uint64_t rows;    /* rows in use: row indexes 0 .. rows - 1 */
	uint64_t *index;  /* slots */
	uint64_t cap;     /* slots, a power of two */
	uint32_t shift;   /* 32 - log2(cap): home slot = tag >> shift */
	uint64_t max_rows;
};

/* The index hash: the second output of splitmix64 seeded with the key, so
 * it is independent of the shard hash (the first). */
static inline uint64_t be__ps_index_hash(uint64_t key)
{
	return be__ps_mix64(key + 2 * BE_PS_GOLDEN);
}

/* be__ps_store_init() - an empty store for table @t (borrowed). 0 / -ENOMEM. */
int be__ps_store_init(struct be__ps_store *s, const struct be__ps_table *t);
void be__ps_store_close(struct be__ps_store *s);

static inline uint8_t *be__ps_store_row(const struct be__ps_store *s, uint32_t r)
{
	return s->slabs[r >> s->slab_shift] +
	       (size_t)(r & ((1u << s->slab_shift) - 1)) * s->row_bytes;
}

static inline uint64_t be__ps_row_key(const uint8_t *row)
{
	return be__ps_get64(row);
}

static inline float *be__ps_row_values(uint8_t *row)
{
	return (float *)(void *)(row + 8);
}

static inline float *be__ps_row_state(const struct be__ps_store *s, uint8_t *row)
{
	return (float *)(void *)(row + 8) + s->dim;
}

/* The row of @key whose index hash is @h, or BE_PS_NO_ROW. */
static inline uint32_t be__ps_store_find_h(const struct be__ps_store *s, uint64_t key, uint64_t h)
{
	uint64_t tag = h >> 32, mask = s->cap - 1, pos = tag >> s->shift;

	for (;;) {
		uint64_t slot = s->index[pos];
		uint32_t r = (uint32_t)slot;

		if (r == BE_PS_NO_ROW)
			return BE_PS_NO_ROW;
		if ((slot >> 32) == tag && be__ps_row_key(be__ps_store_row(s, r)) == key)
			return r;
		pos = (pos + 1) & mask;
	}
}

static inline uint32_t be__ps_store_find(const struct be__ps_store *s, uint64_t key)
{
	return be__ps_store_find_h(s, key, be__ps_index_hash(key));
}

/* Start loading the home slot of index hash @h into the cache. */
static inline void be__ps_store_prefetch(const struct be__ps_store *s, uint64_t h)
{
	__builtin_prefetch(&s->index[(h >> 32) >> s->shift]);
}

/*
 * be__ps_store_reserve() - make room for @n more rows, so that the next @n
 * be__ps_store_add() calls cannot fail. Returns 0, -ENOSPC (the table's
 * max_rows) or -ENOMEM; on error the store holds the same rows as before.
 */
int be__ps_store_reserve(struct be__ps_store *s, uint64_t n);

/*
 * be__ps_store_add() - the row of @key, created when absent. A new row has
 * its key set and its values and state uninitialised: the caller fills
 * them. Returns 1 (created), 0 (existed), -ENOSPC or -ENOMEM; *@row is set
 * when the result is >= 0.
 */
int be__ps_store_add(struct be__ps_store *s, uint64_t key, uint32_t *row);

/* Bytes the store holds: slabs mapped (rows + slack of the last slab) and
 * the index. */
struct be__ps_store_mem {
	uint64_t rows;
	uint64_t row_bytes;   /* rows * stride */
	uint64_t slab_bytes;  /* mapped slabs */
	uint64_t index_bytes; /* slots */
};
void be__ps_store_mem(const struct be__ps_store *s, struct be__ps_store_mem *out);

/* ---- exactly-once pushes (dedup.c) ---- */

#define BE_PS_DEDUP_WINDOW 64u /* sequence numbers remembered below the highest */

/* One trainer's window on one shard: seq hi was applied, and seq hi - i
 * was applied iff bit i of map is set (i < 64; bit 0 is always set).
 * last: the shard's model version after this trainer's latest push. */
struct be__ps_dedup_entry {
	uint64_t trainer; /* 0 marks a free slot */
	uint64_t hi;
	uint64_t map;
	uint64_t last;
};

struct be__ps_dedup {
	struct be__ps_dedup_entry *slots; /* open addressing by trainer */
	uint32_t cap;                     /* power of two >= 2 * max */
	uint32_t count;
	uint32_t max;
	uint64_t evict_idle;
	uint64_t evictions; /* entries dropped for a new trainer */
};

int be__ps_dedup_init(struct be__ps_dedup *d, const struct be__ps_dedup_cfg *cfg);
void be__ps_dedup_close(struct be__ps_dedup *d);

/*
 * be__ps_dedup_check() - may push @seq of @trainer be applied now, at
 * model version @now? Returns 0 (apply it, then commit), -EALREADY (it was
 * applied: do nothing, answer success), -ERANGE (seq is 64 or more below
 * the trainer's highest: whether it was applied is forgotten, refuse) or
 * -ENOSPC (a new trainer, the table is full and no entry is idle enough
 * to evict). Changes nothing.
 */
int be__ps_dedup_check(const struct be__ps_dedup *d, uint64_t trainer, uint64_t seq,
		       uint64_t now);

/*
 * be__ps_dedup_commit() - record that push @seq of @trainer was applied
 * and the model version became @now. Only after a check that returned 0,
 * with nothing changed in between; cannot fail then.
 */
void be__ps_dedup_commit(struct be__ps_dedup *d, uint64_t trainer, uint64_t seq, uint64_t now);

/*
 * be__ps_dedup_restore() - put back an entry read from a checkpoint.
 * Returns 0, -EBADMSG (invalid or duplicate entry) or -ENOSPC (more
 * entries than max_trainers).
 */
int be__ps_dedup_restore(struct be__ps_dedup *d, const struct be__ps_dedup_entry *e);

/* ---- a shard: stores, dedup window, model version (serve.c) ---- */

struct be__ps_table_stats {
	uint64_t pull_keys;
	uint64_t missing_init;    /* missing keys answered with the initializer's value */
	uint64_t missing_default; /* missing keys answered with the table's default */
	uint64_t push_keys;
	uint64_t rows_created;
};

struct be__ps_shard_stats {
	uint64_t pulls;
	uint64_t pushes;       /* applied */
	uint64_t push_dups;    /* -EALREADY: a retry or hedge of an applied push */
	uint64_t push_too_old; /* -ERANGE */
	uint64_t push_full;    /* -ENOSPC: dedup table or max_rows */
	uint64_t stale;        /* pulls refused for min_version (-ESTALE) */
	uint64_t errors;       /* any other refusal */
};

struct be__ps_shard {
	const struct be__ps_config *cfg; /* borrowed; outlives the shard */
	uint32_t id;
	uint64_t version; /* pushes applied, ever (restored from checkpoints) */
	struct be__ps_store stores[BE_PS_MAX_TABLES];
	struct be__ps_dedup dedup;
	uint32_t *scratch; /* row of each key of a push; grows up to max_keys */
	uint32_t scratch_cap;
	struct be__ps_table_stats tstats[BE_PS_MAX_TABLES];
	struct be__ps_shard_stats stats;
};

/* be__ps_shard_create() - an empty shard @id of @cfg (borrowed). 0 / -EINVAL / -ENOMEM. */
int be__ps_shard_create(const struct be__ps_config *cfg, uint32_t id, struct be__ps_shard **out);
void be__ps_shard_destroy(struct be__ps_shard *sh);

#endif /* BE_PS_PS_INT_H */
