/*
 * etcd.h - a client of etcd's v3 API through its HTTP/JSON gateway
 * (internal; the naming backend etcd:// is built on it).
 *
 * Model. A struct be_etcd is one client: a list of endpoints
 * ("http://127.0.0.1:2379,http://10.0.0.2:2379"), timeouts, limits and
 * one libcurl easy handle that keeps its connection open between calls.
 * Unary calls (KV, leases) block the calling thread for at most
 * request_timeout_ms. A struct be_etcd_watch is one /v3/watch stream with
 * its own connection, driven by be__etcd_watch_run() from whichever thread
 * owns it; its callback runs on that thread. docs/DISCOVERY.md has the
 * API subset used, the key layout and the threading model of discovery.
 *
 * Threads. A client is used by one thread at a time, and so is a watch;
 * be__etcd_watch_cancel() is the one function that may be called from any
 * thread. A watch borrows its client's options and counters: destroy
 * every watch before its client. Counters are atomic, so a watch and its
 * client may run on different threads.
 *
 * Validation. Every field of every response is checked before anything
 * is believed: types, ranges of the 64-bit integers (which arrive as
 * decimal strings), base64 of keys and values, sizes against the limits,
 * keys inside the range asked for, revisions in order on a watch. A
 * response that fails is refused with -EBADMSG and a reason
 * (be__etcd_last_error()), counted in stats.refused, and logged at warn
 * level. Fields the client does not know are ignored (etcd may add some).
 *
 * Errors. Negative errno, or:
 * - BE_ETCD_ECOMPACTED: the revision asked for was compacted away; read
 *   again (a range gives a fresh revision) and watch from there;
 * - BE_ETCD_ENOLEADER: the member answering has no leader (a partition);
 *   every request carries the has-leader requirement, so this comes at
 *   once instead of a hang;
 * - -ECONNREFUSED, -ETIMEDOUT, -ECONNRESET, -EHOSTUNREACH: transport;
 *   the client moves to its next endpoint for the following call;
 * - etcd's own errors by gRPC code: -ENOENT (lease not found), -EINVAL,
 *   -ERANGE (future revision), -ENOSPC, -EACCES, -EAGAIN (unavailable).
 */
#ifndef BE_DISCOVERY_ETCD_H
#define BE_DISCOVERY_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include <be/be.h>

#define BE_ETCD_ECOMPACTED (BE_ERRNO_BASE - 100) /* revision compacted: re-read */
#define BE_ETCD_ENOLEADER (BE_ERRNO_BASE - 101)  /* member has no leader */

/* Sizes a response may not exceed; a response over any is refused. */
struct be_etcd_limits {
	size_t max_response; /* bytes of one response or one watch line (16 MiB) */
	size_t max_key;      /* decoded bytes of one key (64 KiB) */
	size_t max_value;    /* decoded bytes of one value (1 MiB) */
	size_t max_kvs;      /* kvs of one range, events of one watch message (100000) */
};

struct be_etcd_opts {
	const char *endpoints;           /* comma-separated http:// URLs */
	unsigned int request_timeout_ms; /* one unary call, all included (2000) */
	unsigned int connect_timeout_ms; /* TCP connect (1000) */
	struct be_etcd_limits limits;    /* 0 fields take the defaults */
};

/* Counters of one client and its watches (monotonic). */
struct be_etcd_stats {
	uint64_t requests;   /* unary calls sent */
	uint64_t failed;     /* unary calls and watches ended by an error */
	uint64_t refused;    /* responses refused as malformed (also in failed) */
	uint64_t watches;    /* watch streams opened */
	uint64_t watch_msgs; /* watch messages accepted */
	uint64_t events;     /* watch events delivered */
};

struct be_etcd;
struct be_etcd_watch;

/* be__etcd_opts_default() - fill @o with the defaults (no endpoint). */
void be__etcd_opts_default(struct be_etcd_opts *o);

/*
 * be__etcd_create() - a client of the endpoints in @o (copied; @o is
 * borrowed). Nothing is sent yet. Returns 0, -EINVAL (no endpoint, or one
 * that is not http:// or https://), -ENOMEM, -EIO (libcurl failed).
 */
int be__etcd_create(const struct be_etcd_opts *o, struct be_etcd **out);
void be__etcd_destroy(struct be_etcd *c);

/* be__etcd_last_error() - why the last call on @c failed, in words. */
const char *be__etcd_last_error(const struct be_etcd *c);

/* be__etcd_stats() - a snapshot of the counters. Threads: any. */
void be__etcd_stats(const struct be_etcd *c, struct be_etcd_stats *out);

/* ---- KV ---------------------------------------------------------------- */

/* One key's state. key and value are NUL-terminated beyond their lengths
 * (they may contain NULs themselves). lease 0: none. */
struct be_etcd_kv {
	const uint8_t *key;
	size_t key_len;
	const uint8_t *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
};

/* A range read: the kvs in ascending key order, and the store's revision
 * at the read, from which a watch continues with no gap. */
struct be_etcd_range {
	int64_t revision;
	int64_t count; /* keys in the range (more than n when limited) */
	int more;      /* 1 when a limit left keys out */
	size_t n;
	struct be_etcd_kv *kvs;
};

/* be__etcd_range_free() - free what a range returned; @r is zeroed. */
void be__etcd_range_free(struct be_etcd_range *r);

#define BE_ETCD_PREFIX 1u /* the key is a prefix: every key starting with it */

/*
 * be__etcd_put() - set @key to @value, attached to @lease (0: none).
 * Borrows @key and @value. *@revision (may be NULL) is the store's revision
 * after the write. Returns 0, -ENOENT (no such lease), -errno.
 */
int be__etcd_put(struct be_etcd *c, const void *key, size_t key_len, const void *value,
		 size_t value_len, int64_t lease, int64_t *revision);

/*
 * be__etcd_get() - read @key, or every key under it with BE_ETCD_PREFIX,
 * at most @limit kvs (0: all). @at_revision > 0 reads the store as it was
 * then (BE_ETCD_ECOMPACTED once compacted away). Returns *@out (free it
 * with be__etcd_range_free()), n = 0 when nothing matched. Borrows @key.
 */
int be__etcd_get(struct be_etcd *c, const void *key, size_t key_len, unsigned int flags,
		 int64_t limit, int64_t at_revision, struct be_etcd_range *out);

/*
 * be__etcd_delete() - delete @key, or every key under it with
 * BE_ETCD_PREFIX. *@deleted and *@revision may be NULL. Borrows @key.
 */
int be__etcd_delete(struct be_etcd *c, const void *key, size_t key_len, unsigned int flags,
		    int64_t *deleted, int64_t *revision);

/* What a compare-and-swap compares: the key's mod_revision, version or
 * create_revision (all 0 when the key does not exist). */
enum be_etcd_target { BE_ETCD_MOD, BE_ETCD_VERSION, BE_ETCD_CREATE };

/* One compare-and-swap on one key: if target == expect, put value (with
 * lease) or, with del set, delete the key. */
struct be_etcd_cas {
	enum be_etcd_target target;
	int64_t expect;
	int del;
	const void *value;
	size_t value_len;
	int64_t lease;
};

struct be_etcd_cas_result {
	int succeeded;        /* 1: the write happened */
	int64_t revision;     /* the store's revision after the transaction */
	int64_t mod_revision; /* on failure: the key's, 0 if absent */
	int64_t version;      /* on failure: the key's, 0 if absent */
};

/*
 * be__etcd_cas() - one transaction: compare, then write on success or read
 * the key on failure. A failed compare is not an error: 0 with
 * succeeded = 0. Borrows @key and @op's value.
 */
int be__etcd_cas(struct be_etcd *c, const void *key, size_t key_len, const struct be_etcd_cas *op,
		 struct be_etcd_cas_result *res);

/* be__etcd_compact() - drop the history before @revision. */
int be__etcd_compact(struct be_etcd *c, int64_t revision);

/* ---- Leases -------------------------------------------------------------- */

/*
 * be__etcd_lease_grant() - a lease of @ttl_s seconds (etcd may raise it to
 * its minimum). *@id its id, *@granted (may be NULL) the TTL granted.
 */
int be__etcd_lease_grant(struct be_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted);

/*
 * be__etcd_lease_keepalive() - one keepalive, as its own request. *@ttl
 * (may be NULL) is the TTL it restarted. -ENOENT when the lease is gone
 * (expired or revoked): its keys are deleted, register again.
 */
int be__etcd_lease_keepalive(struct be_etcd *c, int64_t id, int64_t *ttl);

/* be__etcd_lease_revoke() - end a lease now, deleting its keys. -ENOENT
 * when it was already gone. */
int be__etcd_lease_revoke(struct be_etcd *c, int64_t id);

/* be__etcd_lease_ttl() - seconds left (*@ttl) and granted (*@granted, may
 * be NULL). -ENOENT when the lease is gone. */
int be__etcd_lease_ttl(struct be_etcd *c, int64_t id, int64_t *ttl, int64_t *granted);

/* ---- Watch --------------------------------------------------------------- */

enum be_etcd_ev_type { BE_ETCD_EV_PUT, BE_ETCD_EV_DELETE };

/* One change. For a DELETE, kv has the key and mod_revision (the revision
 * of the deletion) only. */
struct be_etcd_event {
	enum be_etcd_ev_type type;
	struct be_etcd_kv kv;
};

/*
 * Called from be__etcd_watch_run() with the @n events of one watch message,
 * in revision order; events of one revision (one transaction) always come
 * in one call. Borrows @ev. It may call be__etcd_watch_cancel() but must
 * not destroy the watch.
 */
typedef void (*be_etcd_watch_cb)(void *arg, const struct be_etcd_event *ev, size_t n);

struct be_etcd_watch_opts {
	int64_t start_revision; /* first revision to report (0: from now) */
	unsigned int idle_ms;   /* end with -ETIMEDOUT after this long without a
				   byte from etcd (6000); a progress request is
				   sent after idle_ms / 3 of silence */
};

/*
 * be__etcd_watch_create() - open a watch of @key (a prefix with
 * BE_ETCD_PREFIX) on @c's current endpoint. Borrows @key and @o. Events
 * go to @cb; nothing arrives before be__etcd_watch_run(). Returns 0,
 * -EINVAL, -ENOMEM, -EIO.
 */
int be__etcd_watch_create(struct be_etcd *c, const void *key, size_t key_len, unsigned int flags,
			  const struct be_etcd_watch_opts *o, be_etcd_watch_cb cb, void *arg,
			  struct be_etcd_watch **out);

/*
 * be__etcd_watch_run() - drive @w for up to @timeout_ms (0: once, without
 * waiting), delivering events to the callback; it returns early, after
 * the pass that delivered events, so that the caller can act on them
 * at once (the rest of a burst read in that pass comes with it). Returns 0 while the watch
 * is open, or the error that ended it (from then on, every call returns
 * it): BE_ETCD_ECOMPACTED (read again), BE_ETCD_ENOLEADER, -ECONNREFUSED,
 * -ECONNRESET (etcd closed the stream), -ETIMEDOUT (idle bound),
 * -EBADMSG, -ECANCELED (be__etcd_watch_cancel()). To go on after
 * an end, destroy it and create a new one from be__etcd_watch_next_rev():
 * nothing is missed and nothing is repeated.
 */
int be__etcd_watch_run(struct be_etcd_watch *w, int timeout_ms);

/*
 * be__etcd_watch_next_rev() - the first revision not yet delivered: one
 * past the last event's, or the start revision. Progress notifications
 * never move it: etcd 3.4.23 may send one ahead of events it has not sent
 * yet (etcd issue 15220), so only events prove what was delivered.
 */
int64_t be__etcd_watch_next_rev(const struct be_etcd_watch *w);

/* be__etcd_watch_compact_rev() - after BE_ETCD_ECOMPACTED: the oldest
 * revision still kept. */
int64_t be__etcd_watch_compact_rev(const struct be_etcd_watch *w);

/* be__etcd_watch_error() - why the watch ended, in words. */
const char *be__etcd_watch_error(const struct be_etcd_watch *w);

/* be__etcd_watch_cancel() - end @w: the next (or current) run returns
 * -ECANCELED. Threads: any. */
void be__etcd_watch_cancel(struct be_etcd_watch *w);

void be__etcd_watch_destroy(struct be_etcd_watch *w);

/* ---- Pure parsers (no I/O; what the fuzz targets call) ------------------- */

/* One message of a watch stream. */
enum be_etcd_wmsg_kind {
	BE_ETCD_WMSG_CREATED,  /* the watch exists */
	BE_ETCD_WMSG_EVENTS,   /* events */
	BE_ETCD_WMSG_PROGRESS, /* nothing new (liveness only, see next_rev) */
	BE_ETCD_WMSG_CANCELED, /* etcd ended the watch: error says why */
	BE_ETCD_WMSG_ERROR,    /* the stream failed: error says why */
};

struct be_etcd_wmsg {
	enum be_etcd_wmsg_kind kind;
	int64_t revision;         /* the header's (0 when absent) */
	int64_t watch_id;
	int64_t compact_revision; /* CANCELED by compaction: > 0 */
	int error;                /* CANCELED, ERROR: negative code */
	size_t n;
	struct be_etcd_event *events;
};

/*
 * be__etcd_parse_range() - parse and validate one /v3/kv/range response
 * body of @len bytes (not NUL-terminated). Borrows @buf. Returns 0 and
 * *@out (free with be__etcd_range_free()), or -EBADMSG with the
 * reason in @err (@errlen bytes, NUL-terminated) and *@out zeroed.
 */
int be__etcd_parse_range(const char *buf, size_t len, const struct be_etcd_limits *lim,
			 struct be_etcd_range *out, char *err, size_t errlen);

/*
 * be__etcd_parse_watch() - parse and validate one line of a /v3/watch
 * stream, without its newline. As be__etcd_parse_range(); free *@out with
 * be__etcd_wmsg_free().
 */
int be__etcd_parse_watch(const char *line, size_t len, const struct be_etcd_limits *lim,
			 struct be_etcd_wmsg *out, char *err, size_t errlen);
void be__etcd_wmsg_free(struct be_etcd_wmsg *m);

#endif /* BE_DISCOVERY_ETCD_H */
