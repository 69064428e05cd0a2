/*
 * server.h - the shards of one server process and the requests routed to
 * them (internal). The RPC-facing program (be-ps) hands every request it
 * receives to be__ps_server_handle() and sends what comes back; nothing
 * here knows about the RPC layer, so the same code runs under a test that
 * feeds it bytes.
 *
 * Model. A server is process number @index of the model's placement
 * (config.h): it hosts every logical shard placed on it, one struct
 * be__ps_shard each, found by shard id. It is either the primary of its
 * shards (pulls and pushes) or a serving replica (pulls only: training
 * writes go to one primary per shard; a replica follows the primary's
 * checkpoints, be__ps_server_follow()). Every reply carries the model
 * version of its shard, and INFO answers the versions of all of them, so a
 * client can tell a stale replica from a fresh one.
 *
 * Threads. A server and its shards are used by one thread at a time (the
 * thread that runs the worker serving them); nothing here locks.
 *
 * Methods (docs/PS.md, "Serving"): PULL and PUSH carry the messages of
 * wire.h; INFO has an empty request and the reply described by
 * be__ps_info_decode(); CHECKPOINT has an empty request and an empty
 * reply, sent once every hosted shard has been written.
 */
#ifndef BE_PS_SERVER_H
#define BE_PS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <be/ps.h>

#include "ps/ps_int.h"
#include "ps/wire.h"

/* The methods of the RPC service BE_PS_SERVICE (include/be/ps.h). */
enum be__ps_method {
	BE_PS_M_PULL = 1,
	BE_PS_M_PUSH = 2,
	BE_PS_M_INFO = 3,
	BE_PS_M_CHECKPOINT = 4,
};

#define BE_PS_SERVER_REPLICA 0x1u /* a serving replica: pushes are refused */

struct be__ps_server_stats {
	uint64_t requests;    /* handed to be__ps_server_handle() */
	uint64_t malformed;   /* refused by the decoder */
	uint64_t not_hosted;  /* a shard placed on another server (-ENXIO) */
	uint64_t stale;       /* pulls refused for their min version (-EAGAIN) */
	uint64_t read_only;   /* pushes refused by a replica (-EROFS) */
	uint64_t no_memory;   /* no reply buffer (-ENOMEM) */
	uint64_t checkpoints; /* shards written */
	uint64_t ckpt_errors; /* shards whose checkpoint failed */
	uint64_t reloads;     /* shards replaced by a newer checkpoint (replicas) */
	uint64_t reload_errors;
};

struct be__ps_server {
	const struct be__ps_config *cfg; /* borrowed; outlives the server */
	uint32_t index;                  /* in the placement */
	uint32_t flags;                  /* BE_PS_SERVER_REPLICA */
	uint32_t n_local;                /* shards hosted */
	uint32_t *local;                 /* their ids, ascending */
	struct be__ps_shard **shards;    /* n_shards entries, NULL where not hosted */
	uint64_t *ckpt_stamp;            /* replicas: per hosted shard, the checkpoint
					  * file's (mtime ns ^ size) last loaded or tried */
	struct be__ps_server_stats stats;
};

/*
 * be__ps_server_create() - server @index of @cfg (borrowed) with @flags,
 * its shards empty. Returns 0, -EINVAL (@index >= n_servers, unknown
 * flags), -ENOMEM.
 */
int be__ps_server_create(const struct be__ps_config *cfg, uint32_t index, uint32_t flags,
			 struct be__ps_server **out);
void be__ps_server_destroy(struct be__ps_server *s);

/*
 * be__ps_server_load() - replace every hosted shard by its checkpoint in
 * @dir, where there is one (a shard without a file stays as it is).
 * Every file is checked before any shard is replaced, so a refused file
 * leaves the server unchanged. Returns the number of shards loaded, or
 * the checkpoint loader's error (ckpt.h) with the shard in *@bad_shard
 * and the reason in *@why.
 */
int be__ps_server_load(struct be__ps_server *s, const char *dir, uint32_t *bad_shard,
		       const char **why);

/*
 * be__ps_server_save() - checkpoint every hosted shard into @dir (each
 * atomically, ckpt.h). Returns 0 or the first error, with the shard in
 * *@bad_shard and the step in *@why; the shards after it are still
 * written (each file stands alone).
 */
int be__ps_server_save(struct be__ps_server *s, const char *dir, uint32_t *bad_shard,
		       const char **why);

/*
 * be__ps_server_follow() - (replicas) load every hosted shard's
 * checkpoint in @dir that changed since the last call and holds a newer
 * model version than the shard has. A file that fails to load (being
 * replaced, truncated, another model) is counted in reload_errors and
 * tried again when it changes. Returns the number of shards replaced.
 * Runs on the serving thread: the load of a shard delays its requests.
 */
int be__ps_server_follow(struct be__ps_server *s, const char *dir);

/* Where replies are built: the caller's RPC buffers, so that a reply
 * leaves without a copy. @alloc returns NULL when out of memory. */
struct be__ps_alloc {
	void *(*alloc)(size_t size, void *arg);
	void (*free)(void *p, void *arg);
	void *arg;
};

/*
 * be__ps_server_handle() - answer one request of @method with the @len
 * bytes at @req.
 *
 * Ownership: borrows @req. On success returns the reply in *@reply
 * (*@len_out bytes, from @a; the caller owns it; NULL when the reply is
 * empty). A pull's values are written straight from the rows into it.
 * Returns 0 (the reply may carry a parameter-server status: -EALREADY,
 * -ENOSPC, -ENOMEM, -ERANGE of a push, docs/PS.md), or an error to fail
 * the call with, *@reply untouched: the decoder's codes for a malformed
 * request (-EBADMSG, -EINVAL, -ENOENT, -E2BIG, -EMSGSIZE, -ENOTSUP),
 * -ENOSYS (unknown method), -ENXIO (a shard not hosted here), -EAGAIN (a
 * pull whose min version this replica has not reached: the RPC layer
 * retries it on another replica), -EROFS (a push to a replica), -ENOMEM
 * (no reply buffer), or a checkpoint's error (CHECKPOINT, which needs a
 * directory: @ckpt_dir, NULL when the server has none: -ENOTSUP).
 */
int be__ps_server_handle(struct be__ps_server *s, uint32_t method, const uint8_t *req,
			 size_t len, const struct be__ps_alloc *a, const char *ckpt_dir,
			 void **reply, size_t *len_out);

/* ---- INFO: the model versions a server has applied */

#define BE_PS_INFO_VERSION 1u
#define BE_PS_INFO_HDR_LEN 16u
#define BE_PS_INFO_ENT_LEN 16u

struct be__ps_info {
	uint32_t index;    /* the server's place in the placement */
	uint32_t flags;    /* BE_PS_SERVER_REPLICA */
	uint32_t n_shards; /* of the model */
	uint32_t count;    /* shards hosted, entries at @ents */
	const uint8_t *ents; /* count x (u32 shard, u32 zero, u64 version) */
};

/* Bytes of the INFO reply of @s. */
size_t be__ps_info_len(const struct be__ps_server *s);

/* be__ps_info_put() - the INFO reply of @s into @buf (be__ps_info_len()
 * bytes). */
void be__ps_info_put(const struct be__ps_server *s, uint8_t *buf);

/*
 * be__ps_info_decode() - check an INFO reply of @len bytes: version,
 * zero reserved fields, exact length, shards ascending and < n_shards.
 * Borrows @buf (@out->ents points into it). Returns 0 or -EBADMSG with a
 * reason in *@why.
 */
int be__ps_info_decode(const uint8_t *buf, size_t len, struct be__ps_info *out,
		       const char **why);

/* Entry @i of a decoded INFO reply. */
static inline void be__ps_info_ent(const struct be__ps_info *in, uint32_t i, uint32_t *shard,
				   uint64_t *version)
{
	*shard = be__ps_get32(in->ents + (size_t)i * BE_PS_INFO_ENT_LEN);
	*version = be__ps_get64(in->ents + (size_t)i * BE_PS_INFO_ENT_LEN + 8);
}

#endif /* BE_PS_SERVER_H */
