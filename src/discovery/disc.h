/*
 * disc.h - the discovery thread (internal): the membership of one etcd
 * prefix, handed to workers as immutable snapshots through
 * be_worker_call(), and this process's own records kept registered under
 * a lease. The naming backend (etcd://) sits on it; records are bytes
 * here, parsed by the RPC layer's naming interface.
 *
 * Model. A struct be_disc owns one thread and one etcd client. The thread
 * reads the prefix, watches it from the read's revision, keeps a sorted
 * copy of its keys, and after every change makes a snapshot (struct
 * be_disc_view) that it hands to each subscribed worker with
 * be_worker_call(): the callback runs on the worker's thread, between two
 * progress calls, so a worker never blocks on etcd and never sees a
 * half-applied change. Snapshots are whole memberships, not deltas: a
 * worker that could not be reached (be_worker_call() failing) gets the
 * latest snapshot on the next pass, and nothing is lost by skipping one.
 *
 * When etcd cannot be reached (refused, timed out, no leader), the thread
 * keeps the last membership and says so: it hands on the same members
 * with stale = 1, once per outage, and retries with backoff. No member is
 * ever removed because etcd is unreachable. When etcd answers again it
 * reads the prefix and hands on a fresh snapshot (stale = 0). The first
 * snapshot comes after the first read that succeeds: before it, nothing
 * is known, and nothing is handed on.
 *
 * Registration. Records given to be__disc_register() are written under
 * one lease of ttl_s seconds, refreshed every ttl_s / 3 by a keepalive of
 * its own request. A keepalive answering that the lease is gone (the
 * process was cut off from etcd for a TTL) makes the thread grant a new
 * lease and write the records again. be__disc_update() changes a
 * record's value while the thread runs (a server about to drain says so
 * in its record): the thread writes it under the lease on its next pass,
 * within DISC_MAX_PASS_MS (1 s). be__disc_destroy() revokes the lease,
 * which deletes the records at once.
 *
 * Threads. Set up (subscribe, register) before be__disc_start(); after
 * it, only be__disc_update(), be__disc_stats() and be__disc_destroy()
 * may be called, from any thread (one at a time). Destroy a be_disc before any worker it delivers to.
 */
#ifndef BE_DISCOVERY_DISC_H
#define BE_DISCOVERY_DISC_H

#include <stddef.h>
#include <stdint.h>

#include <be/sock.h>
#include "discovery/etcd.h"

#define BE_DISC_MAX_SUBS 256

struct be_disc;

/* One member: a key under the prefix and its value (the record). */
struct be_disc_member {
	const uint8_t *key; /* NUL-terminated beyond key_len */
	size_t key_len;
	const uint8_t *value; /* NUL-terminated beyond value_len */
	size_t value_len;
	int64_t mod_revision;
	int64_t lease;
};

/* One snapshot of the membership. */
struct be_disc_view {
	uint64_t seq;     /* 1, 2, ...: the snapshots of one be_disc, in order */
	int64_t revision; /* the etcd revision it reflects */
	int stale;        /* 1: etcd cannot be reached; the last membership known */
	size_t n;
	const struct be_disc_member *m; /* ascending key order */
};

/* Runs on @w's thread, from its progress (@w NULL: on the discovery
 * thread itself). Borrows @v for the call only. */
typedef void (*be_disc_fn)(struct be_worker *w, const struct be_disc_view *v, void *arg);

struct be_disc_opts {
	struct be_etcd_opts etcd; /* request timeout 0: ttl_s / 3 */
	const void *prefix;       /* the membership watched */
	size_t prefix_len;
	int64_t ttl_s;              /* lease of the registered records (3) */
	unsigned int retry_min_ms;  /* backoff while etcd is unreachable (100) */
	unsigned int retry_max_ms;  /* ... doubling up to (2000) */
	unsigned int idle_ms;       /* the watch's idle bound (6000) */
};

struct be_disc_stats {
	uint64_t views;         /* snapshots made */
	uint64_t reads;         /* prefix reads that succeeded */
	uint64_t watches;       /* watches opened */
	uint64_t outages;       /* times etcd became unreachable (a stale snapshot) */
	uint64_t registrations; /* leases granted and records written */
	uint64_t keepalive_errors;
	uint64_t delivery_retries; /* be_worker_call() failed; retried */
	uint64_t updates;       /* be__disc_update() values written to etcd */
	uint64_t refused;       /* etcd responses refused as malformed */
};

/* be__disc_opts_default() - the defaults; no endpoint, no prefix. */
void be__disc_opts_default(struct be_disc_opts *o);

/* be__disc_create() - borrows @o. -EINVAL, -ENOMEM, -EIO. */
int be__disc_create(const struct be_disc_opts *o, struct be_disc **out);

/* be__disc_subscribe() - deliver every snapshot to @fn on @w, or with @w
 * NULL on the discovery thread, synchronously (@fn must not block: it
 * delays the watch; the RPC layer's etcd:// naming copies the records
 * under its lock). Before start: -EBUSY after, -ENOSPC past
 * BE_DISC_MAX_SUBS. */
int be__disc_subscribe(struct be_disc *d, struct be_worker *w, be_disc_fn fn, void *arg);

/* be__disc_register() - keep @key = @value (both copied) in etcd under
 * this be_disc's lease. Before start. */
int be__disc_register(struct be_disc *d, const void *key, size_t key_len, const void *value,
		      size_t value_len);

/* be__disc_update() - replace the value of the registered @key with
 * @value (copied); written by the thread on its next pass (stats:
 * updates). Before or after start. 0, -ENOENT (not registered), -EINVAL,
 * -ENOMEM. */
int be__disc_update(struct be_disc *d, const void *key, size_t key_len, const void *value,
		    size_t value_len);

/* be__disc_start() - start the thread. 0, -EALREADY, -errno. */
int be__disc_start(struct be_disc *d);

/* be__disc_destroy() - stop the thread, revoke the lease, free. Snapshots
 * already queued on workers are still delivered. Threads: any. */
void be__disc_destroy(struct be_disc *d);

/* be__disc_stats() - the counters. Threads: any. */
void be__disc_stats(const struct be_disc *d, struct be_disc_stats *out);

#endif /* BE_DISCOVERY_DISC_H */
