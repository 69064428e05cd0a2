/*
 * ps.h - the parameter server's client: rankers fetch embeddings, trainers
 * push gradients, over the RPC layer (rpc.h). The server is the be-ps
 * program; docs/PS.md is the reference for the model, the wire format and
 * the exactly-once rules.
 *
 * Model.
 *
 *   be_ps        a client of one model, on one be_rpc (so on one worker):
 *                the model's config file (tables, logical shards, their
 *                placement on servers, limits; the same file the servers
 *                read), and per server two channels: one for fetches over
 *                every replica of the server, one for pushes over its
 *                primary. Everything of a be_ps is used on its worker's
 *                thread ("Threads: worker"); callbacks run from the
 *                worker's progress.
 *   naming       server i of the model is the service "<service>.<i>" of
 *                a naming source (rpc.h: a static file, or records set in
 *                code): every record of it serves fetches. Pushes go to
 *                the records of "<service>.<i>.primary" when that service
 *                has any when the client is created, else to those of
 *                "<service>.<i>" (a server without replicas). Serving
 *                replicas refuse pushes (-EROFS).
 *   fetch        keys of one or more tables -> their values, in the
 *                caller's order: repeated keys are asked once, the keys
 *                are split by logical shard, and every shard's part goes
 *                in one scatter call (rpc.h) under one deadline (default
 *                30 ms); the replies are gathered into the caller's
 *                arrays. Every failover step of the RPC layer applies to
 *                every leg (a replica that dies during a fetch is retried
 *                on another within the deadline).
 *   push         keys and gradients of one or more tables: the gradients
 *                of a repeated key are summed, the keys split by shard,
 *                and each shard's part numbered with that shard's next
 *                sequence number of this client (its trainer id is random
 *                and fresh per be_ps), so the RPC layer's retries and
 *                hedges of a push are applied once (docs/PS.md, section
 *                5). At most 64 pushes per shard may be unanswered.
 *
 * Errors: negative errno, as rpc.h; the statuses of a fetch or push are
 * those of its first failed leg (rpc.h's call statuses, or a server's:
 * docs/PS.md "Statuses in replies"), or -EBADMSG for a reply that does
 * not answer its request. When a function that takes a callback returns an
 * error, the callback is never called.
 *
 * Structs that grow lead with `size` (docs/API.md): leave it 0, or let
 * the inline wrapper that fills the struct set it.
 */
#ifndef BE_PS_H
#define BE_PS_H

#include <stddef.h>
#include <stdint.h>

#include <be/export.h>
#include <be/rpc.h>

#ifdef __cplusplus
extern "C" {
#endif

struct be_ps;

/* The RPC service name every be-ps server registers its methods under
 * (be_rpc_service_id() of it is the id on the wire). */
#define BE_PS_SERVICE "be.ps"

/* Default deadline of a fetch, as a production ranker would use. */
#define BE_PS_FETCH_TIMEOUT_US 30000u

/*
 * be_ps_create() - a client of the model in the config file at
 * @config_path, whose servers are found in @n under @service (see the
 * top of this file). Borrows @n, which must outlive the client.
 * Returns 0, -EINVAL with a reason in the log (the config does not parse,
 * NULL argument, a service name too long), -ENOMEM, or be_rpc_chan_watch()'s
 * errors. Threads: worker.
 */
BE_EXPORT int be_ps_create(struct be_rpc *rpc, const char *config_path, struct be_rpc_naming *n,
			   const char *service, struct be_ps **out);

/*
 * be_ps_destroy() - destroy the client's channels: fetches and pushes in
 * flight complete with -ECANCELED inside this call. Threads: worker.
 */
BE_EXPORT void be_ps_destroy(struct be_ps *ps);

/*
 * be_ps_table() - the id of the table called @name, or -ENOENT.
 * be_ps_dim() - the dimension of table @table, or 0 if there is none.
 * be_ps_shards() - the number of logical shards of the model.
 */
BE_EXPORT int be_ps_table(const struct be_ps *ps, const char *name);
BE_EXPORT uint32_t be_ps_dim(const struct be_ps *ps, uint32_t table);
BE_EXPORT uint32_t be_ps_shards(const struct be_ps *ps);

/*
 * One table's part of a fetch or a push: @n keys of @table, and
 *   fetch: @vals receives n x dim floats, key by key in the keys' order;
 *   push:  @vals holds n x dim gradients, key by key (finite).
 */
struct be_ps_slice {
	uint32_t table;
	uint32_t n;
	const uint64_t *keys;
	float *vals;
};

/* Fetch flags. */
#define BE_PS_INFERENCE 0x1u /* missing keys follow each table's missing policy */
#define BE_PS_FRESH 0x2u     /* refuse replicas older than what this client saw */

struct be_ps_fetch_opts {
	uint32_t size;       /* 0 or sizeof (docs/API.md) */
	uint32_t timeout_us; /* 0: BE_PS_FETCH_TIMEOUT_US */
	uint32_t flags;      /* BE_PS_INFERENCE | BE_PS_FRESH */
};

struct be_ps_push_opts {
	uint32_t size;       /* 0 or sizeof (docs/API.md) */
	uint32_t timeout_us; /* 0: the channels' (rpc.h timeout_us) */
};

/* What a fetch or push did, for the completion. */
struct be_ps_result {
	uint32_t size;        /* the library's sizeof, or what it wrote */
	uint32_t legs;        /* messages sent (one per shard, more for a
			       * shard whose part exceeds the model's limits) */
	uint32_t legs_failed;
	uint32_t unique_keys; /* keys sent, over all tables */
	uint64_t missing;     /* fetch: keys the servers had no row for
			       * (answered with the initializer or default) */
	uint64_t duplicates;  /* push: legs the servers had applied before */
};

/*
 * Completion of a fetch or push, exactly once: @status 0 (every value
 * written / every gradient applied) or the first failure; @res (borrowed
 * for the call) counts what happened.
 */
typedef void (*be_ps_done_cb)(int status, const struct be_ps_result *res, void *arg);

/*
 * be_ps_fetch() - the values of the keys of @n slices (at most one per
 * table), in one scatter call under one deadline.
 *
 * Ownership: borrows @sl's array and the keys (copied into the requests
 * before it returns); lends every sl[i].vals until @cb runs (written when
 * the fetch succeeds, undefined after a failure). On error nothing was
 * sent and @cb never runs.
 * Returns 0, -EINVAL (no slice, an unknown table, a table twice, n 0 in
 * all, NULL @cb), -ENOMEM, or be_rpc_scatter()'s errors. Threads: worker.
 */
BE_EXPORT int be_ps_fetch(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
			  const struct be_ps_fetch_opts *opts, be_ps_done_cb cb, void *arg);

/*
 * be_ps_push() - apply the gradients of @n slices (at most one per
 * table), exactly once per shard, in one scatter call.
 *
 * Ownership: borrows @sl, the keys and the gradients (summed and copied
 * into the requests before it returns). On error nothing was sent and
 * @cb never runs.
 * Returns 0, -EINVAL (as be_ps_fetch(), or a gradient that is not
 * finite), -EAGAIN (a shard has 64 pushes of this client unanswered:
 * nothing sent), -ENOMEM, or be_rpc_scatter()'s errors. A push that
 * completes with an error was applied on the shards whose legs
 * succeeded, not on those that were refused; on a shard whose leg timed
 * out it may or may not have been (it was applied at most once).
 * Threads: worker.
 */
BE_EXPORT int be_ps_push(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
			 const struct be_ps_push_opts *opts, be_ps_done_cb cb, void *arg);

/*
 * be_ps_fetch_sync(), be_ps_push_sync() - the same, waiting: they run
 * be_worker_wait() on the client's worker until the operation completes,
 * so they must be called by the thread that drives that worker, outside
 * callbacks. @res (may be NULL) receives the result (the _sized forms
 * write at most @res->size bytes). Return the status.
 */
BE_EXPORT int be_ps_fetch_sync_sized(struct be_ps *ps, const struct be_ps_slice *sl,
				     unsigned int n, const struct be_ps_fetch_opts *opts,
				     struct be_ps_result *res);
BE_EXPORT int be_ps_push_sync_sized(struct be_ps *ps, const struct be_ps_slice *sl,
				    unsigned int n, const struct be_ps_push_opts *opts,
				    struct be_ps_result *res);
static inline int be_ps_fetch_sync(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
				   const struct be_ps_fetch_opts *opts, struct be_ps_result *res)
{
	if (res)
		res->size = sizeof(*res);
	return be_ps_fetch_sync_sized(ps, sl, n, opts, res);
}
static inline int be_ps_push_sync(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
				  const struct be_ps_push_opts *opts, struct be_ps_result *res)
{
	if (res)
		res->size = sizeof(*res);
	return be_ps_push_sync_sized(ps, sl, n, opts, res);
}

/*
 * be_ps_chan_stats() - the RPC layer's snapshot (rpc.h) of the channel to
 * server @server that carries its fetches (@push 0: every replica) or its
 * pushes (@push 1: the primary; the same channel when the server has no
 * primary record of its own). Returns 0 or -EINVAL (no such server).
 * The _sized form writes at most @out->size bytes. Threads: worker.
 */
BE_EXPORT int be_ps_chan_stats_sized(struct be_ps *ps, uint32_t server, int push,
				     struct be_rpc_chan_stats *out);
static inline int be_ps_chan_stats(struct be_ps *ps, uint32_t server, int push,
				   struct be_rpc_chan_stats *out)
{
	out->size = sizeof(*out);
	return be_ps_chan_stats_sized(ps, server, push, out);
}

/*
 * be_ps_version_seen() - the highest model version of logical @shard in
 * any reply this client received (0: none yet). Threads: worker.
 */
BE_EXPORT uint64_t be_ps_version_seen(const struct be_ps *ps, uint32_t shard);

#ifdef __cplusplus
}
#endif

#endif /* BE_PS_H */
