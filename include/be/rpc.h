/*
 * rpc.h - the RPC layer: calls with deadlines over replica sets, and the
 * failover ladder (port switch, replica reselection, TCP fallback and back,
 * ejection), on top of the BE core (sock.h).
 *
 * Model.
 *
 *   be_rpc       the RPC state of one worker (sock.h): its server side
 *                (listeners, handlers by (service, method), requests being
 *                served) and its client side (channels, calls in flight),
 *                one timer for deadlines, hedges, probes and ejections.
 *                Everything of a be_rpc is used on its worker's thread
 *                ("Threads: worker", as in sock.h). Callbacks run from the
 *                worker's progress, never inside another be_rpc_* call.
 *   channel      (be_rpc_chan) a client's handle on one service: a set of
 *                replicas, each with its addresses in order of preference
 *                (verbs port 1, verbs port 2, tcp, ...). A call picks a
 *                replica (least outstanding calls of two chosen at random)
 *                and that replica's current address. Replica sets come
 *                from code, from one address string, or from a naming
 *                source (be_rpc_naming: a static file or etcd).
 *   call         one request and at most one outcome: its reply, or an
 *                error no later than its deadline. A call may make several
 *                attempts (retries, one hedged copy); the first reply wins,
 *                later ones are dropped and counted as late replies.
 *   request      (be_rpc_req) the server's handle of one incoming call:
 *                the handler completes it exactly once, at once or later
 *                from any callback of the same worker.
 *
 * Failover (docs/RPC.md has the reasons and the defaults). On a failure a
 * channel climbs a ladder, cheapest step first, and climbs back down:
 *   1. port switch: the connection on a replica's current address fails
 *      (or its calls keep timing out) -> the replica continues on its next
 *      address; the failed one is probed with backoff and used again once
 *      a probe succeeds;
 *   2. replica reselection: a failed attempt of a call is retried on
 *      another replica while the deadline allows; a call that is slow
 *      gets one hedged copy on another replica;
 *   3. TCP fallback: a port switch from an RDMA-class address (verbs,
 *      shm) to a tcp one, at run time; back to RDMA once a probe of the
 *      preferred address succeeds;
 *   4. ejection: a replica failing repeatedly is left out for a backoff
 *      that doubles up to a cap, never more than a share of the set, and
 *      is probed before it returns.
 * Retries and hedges draw from one budget per channel: over any second,
 * at most retry_budget_pct % of the calls plus retry_budget_min. Nothing
 * is retried once its deadline is spent.
 *
 * Buffers. Request and reply payloads live in RPC buffers: bemalloc
 * buffers with BE_RPC_HDR_LEN bytes of headroom before the payload, where
 * the library writes the header. be_rpc_buf_alloc() returns the payload
 * pointer, so a caller builds a request in place and nothing is copied
 * on the way to the wire; a received request or reply is handed over as
 * the same kind of pointer into the buffer the transport wrote. Every
 * pointer passed as a request or reply, and every one received, is freed
 * with be_rpc_buf_free() (never be_free(): it points into the buffer).
 * A server may answer with the request's own buffer. Ownership uses the
 * verbs of sock.h: borrows, takes, lends until, returns.
 *
 * Errors: negative errno, or BE_EPROTO_PEER / BE_ECONNFAULT (be.h). When a
 * function that takes a callback returns an error, that callback is never
 * called. Statuses a call completes with:
 *   0                 the reply
 *   -ETIMEDOUT        the deadline passed (also: the server refused work
 *                     it could not finish in time)
 *   -ECANCELED        be_rpc_cancel(), or the channel was destroyed
 *   -ENOSYS           the server has no handler for (service, method)
 *   -ESHUTDOWN        every replica tried is draining
 *   -EHOSTUNREACH     no replica could be tried (all down or ejected)
 *   BE_EPROTO_PEER    the peer broke the RPC protocol
 *   connection errors (-ECONNRESET, -ECONNREFUSED, BE_ECONNFAULT, ...)
 *                     when no retry was possible
 *   any other status a handler passed to be_rpc_req_fail()
 *
 * Structs that grow lead with `size` (docs/API.md): leave it 0, or let
 * the inline wrapper that fills the struct set it.
 */
#ifndef BE_RPC_H
#define BE_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <be/export.h>
#include <be/sock.h>

#ifdef __cplusplus
extern "C" {
#endif

struct be_rpc;
struct be_rpc_chan;
struct be_rpc_req;
struct be_rpc_naming;

/* ------------------------------------------------------------ buffers */

/* Bytes of headroom before every RPC payload: the wire header. */
#define BE_RPC_HDR_LEN 32

/*
 * be_rpc_buf_alloc() - an RPC buffer with @len usable payload bytes
 * (bemalloc, registered for RDMA; the payload is 32-byte aligned).
 * Ownership: returns the payload pointer; the caller owns it until it
 * passes it to a function that takes it or to be_rpc_buf_free().
 * Returns NULL (errno ENOMEM) when bemalloc is out of memory.
 * Threads: any.
 */
BE_EXPORT void *be_rpc_buf_alloc(size_t len);

/* be_rpc_buf_free() - takes @p (an RPC payload pointer); NULL is a no-op.
 * Threads: any. */
BE_EXPORT void be_rpc_buf_free(void *p);

/* be_rpc_buf_size() - the payload bytes usable at @p (>= what was asked). */
BE_EXPORT size_t be_rpc_buf_size(const void *p);

/* ------------------------------------------------------------ configuration */

/*
 * Configuration of a be_rpc; every channel starts with a copy of it
 * (be_rpc_chan_set_config() changes one channel). be_rpc_config_init()
 * fills the defaults below, then applies the BE_RPC_* environment
 * variable named beside each field when it is set. Defaults are meant for
 * millisecond-scale calls (parameter fetches under a deadline of a few to
 * tens of milliseconds); docs/RPC.md says why each is what it is.
 */
struct be_rpc_config {
	/* 0 or sizeof (docs/API.md); be_rpc_config_init() sets it. */
	uint32_t size;
	/* Deadline of a call that does not give its own. BE_RPC_TIMEOUT_US,
	 * default 100000 (100 ms). */
	uint32_t timeout_us;
	/* Attempts a call may make in all (first + retries + hedge), 1..8.
	 * BE_RPC_MAX_ATTEMPTS, default 3. */
	uint32_t max_attempts;
	/* An idempotent call not answered after this share of its timeout
	 * (percent) sends one hedged copy to another replica; 0 disables
	 * hedging. BE_RPC_HEDGE_PCT, default 50. */
	uint32_t hedge_pct;
	/* ... or after this many microseconds when set (overrides hedge_pct).
	 * BE_RPC_HEDGE_US, default 0. */
	uint32_t hedge_us;
	/* Retry budget: over any one-second window, retries + hedges <=
	 * retry_budget_pct % of the calls made in it + retry_budget_min.
	 * BE_RPC_RETRY_BUDGET_PCT default 10, BE_RPC_RETRY_BUDGET_MIN
	 * default 10. */
	uint32_t retry_budget_pct;
	uint32_t retry_budget_min;
	/* A replica's address whose calls time out this many times in a row
	 * while nothing at all comes back on its connection (a silent path,
	 * not a slow server) is given up like a failed connection (port
	 * switch / TCP fallback), when the replica has another usable
	 * address. BE_RPC_ADDR_TIMEOUTS, default 2. */
	uint32_t addr_timeouts;
	/* A replica that fails this many times in a row (connection
	 * failures, timeouts, hedges that overtook it, failed probes) is
	 * ejected. BE_RPC_EJECT_FAILURES, default 3. */
	uint32_t eject_failures;
	/* Ejection lasts eject_min_ms, doubling with each ejection in a row up
	 * to eject_max_ms; the doubling resets once the replica has served
	 * for eject_reset_ms without being ejected. BE_RPC_EJECT_MIN_MS
	 * default 100, BE_RPC_EJECT_MAX_MS default 10000,
	 * BE_RPC_EJECT_RESET_MS default 10000. */
	uint32_t eject_min_ms;
	uint32_t eject_max_ms;
	uint32_t eject_reset_ms;
	/* At most this share (percent) of a set is ejected at once, and never
	 * its last usable replica. BE_RPC_EJECT_MAX_PCT, default 50. */
	uint32_t eject_max_pct;
	/* A failed address is probed after probe_min_ms, doubling up to
	 * probe_max_ms while probes fail; a probe (a connect and a ping) must
	 * answer within probe_timeout_ms. BE_RPC_PROBE_MIN_MS default 5,
	 * BE_RPC_PROBE_MAX_MS default 1000, BE_RPC_PROBE_TIMEOUT_MS default
	 * 100. */
	uint32_t probe_min_ms;
	uint32_t probe_max_ms;
	uint32_t probe_timeout_ms;
	/* 1: once a replica's path is connected, its next address is
	 * connected too and kept so without calls (one more Engine per
	 * replica), so that a port switch or a TCP fallback does not wait for
	 * a connection handshake. 0: addresses connect when first used.
	 * BE_RPC_STANDBY, default 1. */
	uint32_t standby;
};

/* be_rpc_config_init() - defaults + BE_RPC_* environment. Borrows @cfg.
 * be_rpc_config_init_sized() writes at most @cfg->size bytes. */
BE_EXPORT void be_rpc_config_init_sized(struct be_rpc_config *cfg);
static inline void be_rpc_config_init(struct be_rpc_config *cfg)
{
	cfg->size = sizeof(*cfg);
	be_rpc_config_init_sized(cfg);
}

/* ------------------------------------------------------------ the RPC state of a worker */

/*
 * be_rpc_create() - the RPC state of worker @w with configuration @cfg
  * (copied; NULL: be_rpc_config_init()). Starts one timer thread that only
 * sleeps until the next deadline and then queues a tick on @w with
 * be_worker_call().
 * Returns 0, -EINVAL (bad configuration), -ENOMEM, -errno of
 * pthread_create. Threads: worker.
 */
BE_EXPORT int be_rpc_create(struct be_worker *w, const struct be_rpc_config *cfg,
			    struct be_rpc **out);

/*
 * be_rpc_destroy() - close every listener, channel and connection of
 * @rpc. Calls in flight complete with -ECANCELED inside this call (the
 * one exception to the callback rule). Requests still held by handlers
 * stay valid: completing them later only frees their buffers. Must run
 * before be_worker_destroy(@w). From a callback of @rpc (a handler, a
 * call's or a scatter's completion) it is refused: an error is logged
 * and @rpc stays as it was. Threads: worker.
 */
BE_EXPORT void be_rpc_destroy(struct be_rpc *rpc);

/* be_rpc_worker() - the worker of @rpc. */
BE_EXPORT struct be_worker *be_rpc_worker(struct be_rpc *rpc);

/* ------------------------------------------------------------ server */

/* Service 0 is the library's own (method 0: ping, answered by every
 * be_rpc that listens; probes use it). */
#define BE_RPC_SVC_BUILTIN 0u
#define BE_RPC_METHOD_PING 0u

/*
 * be_rpc_service_id() - a stable 32-bit id for a service name (FNV-1a,
 * never 0), for applications that name their services. Threads: any.
 */
BE_EXPORT uint32_t be_rpc_service_id(const char *name);

/*
 * A handler: the request @buf of @len payload bytes arrived for @req.
 * Ownership: returns @buf to the handler (free it with be_rpc_buf_free(),
 * or pass it on, e.g. as the reply). The handler completes @req exactly
 * once, now or later from any callback of the same worker, with
 * be_rpc_req_reply() or be_rpc_req_fail(); one-way requests too (their
 * completion sends nothing). @user is the pointer given at registration.
 */
typedef void (*be_rpc_handler)(struct be_rpc_req *req, void *buf, size_t len, void *user);

/*
 * be_rpc_register() - handle (@service, @method) with @fn. A request
 * whose remaining deadline is below @min_remaining_us when it arrives is
 * refused with -ETIMEDOUT without calling @fn (0: refuse only requests
 * whose deadline has passed). Registering a pair again replaces it.
 * Returns 0, -EINVAL (NULL fn, service 0), -ENOMEM. Threads: worker.
 */
BE_EXPORT int be_rpc_register(struct be_rpc *rpc, uint32_t service, uint32_t method,
			      be_rpc_handler fn, void *user, uint32_t min_remaining_us);

/*
 * be_rpc_listen() - accept calls on @addr (as be_listen(): "tcp://h:p",
 * "shm://name", "verbs://ip:port"). *@out (may be NULL) is the listener,
 * for be_listener_addr() only: close it with be_rpc_unlisten(), not
 * be_listener_close(). Returns be_listen()'s codes. Threads: worker.
 */
BE_EXPORT int be_rpc_listen(struct be_rpc *rpc, const char *addr, struct be_listener **out);

/*
 * be_rpc_unlisten() - stop accepting on @l, including new sockets peers
 * open on the Engines it accepted earlier (an Engine outlives its
 * listener: its peer may keep reusing it); with @close_conns also close
 * the connections it accepted (their callers see the connection fail;
 * replies of requests still held are then dropped and counted).
 * Returns 0 or -ENOENT (not a listener of @rpc). Threads: worker.
 */
BE_EXPORT int be_rpc_unlisten(struct be_rpc *rpc, struct be_listener *l, int close_conns);

/*
 * be_rpc_drain() - with @on, answer new requests -ESHUTDOWN (callers
 * retry them on another replica) while requests already taken finish,
 * and tell every client connected: a notice on each accepted connection
 * now, and the draining flag on every reply from now on, so their
 * channels stop choosing this server while another replica of the set
 * is usable (docs/PROTOCOL.md, section 8). Off: serve again, and say so
 * the same way. A client that ignores the notice and the flag (one not
 * built on be_rpc channels) goes on sending here: each request it sends
 * is answered -ESHUTDOWN, unrun, and a one-way request is dropped
 * unrun (counted in refused_draining); a be_rpc channel that cannot
 * choose another replica does the same, and retries each refusal
 * elsewhere as its budget allows. Threads: worker.
 */
BE_EXPORT void be_rpc_drain(struct be_rpc *rpc, int on);

/* Request flags, on the wire and in be_rpc_req_info.flags. */
#define BE_RPC_ONEWAY 0x0001u     /* no reply (the call completes once sent) */
#define BE_RPC_IDEMPOTENT 0x0002u /* may run more than once: retries and hedges allowed */
#define BE_RPC_HEDGED 0x0004u     /* (server view) this copy is a hedge */
#define BE_RPC_RETRY 0x0008u      /* (server view) this copy is a retry */

struct be_rpc_req_info {
	uint32_t size;         /* set by be_rpc_req_info() */
	uint32_t service, method;
	uint32_t flags;        /* BE_RPC_ONEWAY | IDEMPOTENT | HEDGED | RETRY */
	uint32_t attempt;      /* 0 for the caller's first attempt */
	uint64_t id;           /* the caller's request id */
	int64_t remaining_us;  /* of the caller's deadline, now (<= 0: passed);
				* INT64_MAX when the caller has none */
};

/* be_rpc_req_info() - what @req is. Borrows @req. Threads: worker.
 * be_rpc_req_info_sized() writes at most @out->size bytes. */
BE_EXPORT void be_rpc_req_info_sized(const struct be_rpc_req *req, struct be_rpc_req_info *out);
static inline void be_rpc_req_info(const struct be_rpc_req *req, struct be_rpc_req_info *out)
{
	out->size = sizeof(*out);
	be_rpc_req_info_sized(req, out);
}

/* be_rpc_req_remaining_us() - how long the caller still waits (<= 0: it
 * stopped waiting; INT64_MAX: no deadline), counted down from the first
 * time the handler asks or returns holding @req. Threads: worker. */
BE_EXPORT int64_t be_rpc_req_remaining_us(const struct be_rpc_req *req);

/*
 * be_rpc_req_reply() - answer @req with @len bytes at @buf and release
 * @req. Ownership: takes @buf (an RPC buffer, e.g. the request's own; NULL
 * when @len is 0) and @req, in every case. Returns 0 (queued), -ENOTCONN
 * (the caller's connection is gone: reply dropped and counted), -EMSGSIZE,
 * -EINVAL (NULL @buf with @len > 0; the caller gets the error instead),
 * -ENOMEM (for a 0-byte reply without a buffer). A one-way request sends
 * nothing and returns 0. Threads: worker.
 */
BE_EXPORT int be_rpc_req_reply(struct be_rpc_req *req, void *buf, size_t len);

/*
 * be_rpc_req_fail() - answer @req with @status (< 0; the caller's call
 * completes with it) and release @req. Takes @req. -EAGAIN and -ESHUTDOWN
 * tell the caller the work was not done, so it may retry on another
 * replica. Returns 0, -EINVAL (status >= 0: treated as -EIO), -ENOTCONN.
 * Threads: worker.
 */
BE_EXPORT int be_rpc_req_fail(struct be_rpc_req *req, int status);

/* ------------------------------------------------------------ naming */

#define BE_RPC_NAME_MAX 64  /* service and replica names, with the NUL */
#define BE_RPC_ADDR_MAX 128 /* one address, with the NUL */
#define BE_RPC_MAX_ADDRS 8  /* addresses of one replica */
#define BE_RPC_LINE_MAX 2048 /* longest record line */

enum be_rpc_replica_state {
	BE_RPC_SERVING = 0,
	BE_RPC_DRAINING = 1, /* takes no new calls; calls in flight finish */
};

/*
 * One replica of a service, as a naming source knows it. The text form
 * (one line; docs/RPC.md, "Records") is the format of the static file and
 * of discovery values:
 *
 *   <service> <replica> [shards=LO-HI] [state=serving|draining]
 *             [version=N] [epoch=N] addr=URI [addr=URI ...]
 *
 * addrs are in order of preference (e.g. verbs port 1, verbs port 2,
 * tcp); shards LO..HI inclusive (default 0-4294967295, every shard);
 * version is the model version the replica serves, epoch its incarnation
 * (a record with a lower epoch than one already known for the replica is
 * stale and ignored; a higher one restarts its health state).
 */
struct be_rpc_record {
	char service[BE_RPC_NAME_MAX];
	char replica[BE_RPC_NAME_MAX];
	uint32_t shard_lo, shard_hi;
	int state;              /* enum be_rpc_replica_state */
	uint64_t version;
	uint64_t epoch;
	uint32_t naddrs;        /* 1..BE_RPC_MAX_ADDRS */
	char addrs[BE_RPC_MAX_ADDRS][BE_RPC_ADDR_MAX];
};

/*
 * be_rpc_record_parse() - parse one record line (@len bytes, no NUL
 * needed; a trailing newline is allowed). A pure function over bytes.
 * Returns 0, -ENOENT (blank or comment line), -EINVAL with a static
 * reason in *@why (may be NULL). Threads: any.
 */
BE_EXPORT int be_rpc_record_parse(const char *line, size_t len, struct be_rpc_record *out,
				  const char **why);

/* be_rpc_record_format() - @r as one line (no newline) into @buf; returns
 * the length it needs (like snprintf) or -EINVAL (invalid record). */
BE_EXPORT int be_rpc_record_format(const struct be_rpc_record *r, char *buf, size_t len);

/*
 * A naming source: the replicas of every service it knows, thread-safe,
 * fed by a backend (in code with be_rpc_naming_set/put/del; the static
 * file through be_rpc_naming_open("file://PATH"); etcd through
 * be_rpc_naming_open("etcd://HOST:PORT/PREFIX")) and read by channels,
 * which follow its changes
 * (be_rpc_chan_watch()). One source may feed channels of many workers.
 */

/* be_rpc_naming_create() - an empty source fed in code. 0 or -ENOMEM. */
BE_EXPORT int be_rpc_naming_create(struct be_rpc_naming **out);

/*
 * be_rpc_naming_open() - a source with a backend: "file://PATH" loads
 * the static file (one record per line, '#' comments) and reloads it when
 * it changes (checked every @poll_ms, 0: 1000, on a thread of the source);
 * a file that fails to parse on reload is refused with a log line and a
 * counted error, and the last good set stays.
 * "etcd://HOST:PORT[,HOST:PORT...]/PREFIX" follows the keys under /PREFIX
 * in etcd (over its v3 JSON gateway, from a thread of the source), one
 * record per key in the same text format: the source is the whole
 * membership there, changed as keys are put and deleted. A key whose
 * value does not parse (or names a replica an earlier key gave) is
 * refused alone, logged and counted; while etcd cannot be reached the
 * last membership stays. It waits up to @poll_ms (0: 2000) for the first
 * membership and returns 0 without it (empty until etcd answers: see
 * the log). Built with the etcd client (BE_WITH_ETCD), else
 * -EPROTONOSUPPORT. Returns 0, -EINVAL (bad uri, or the first load failed
 * to parse: see the log), -ENOENT, -EPROTONOSUPPORT (another scheme),
 * -ENOMEM.
 */
BE_EXPORT int be_rpc_naming_open(const char *uri, uint32_t poll_ms, struct be_rpc_naming **out);

/* be_rpc_naming_destroy() - stop its backend and free it. Every channel
 * watching it must be destroyed first. */
BE_EXPORT void be_rpc_naming_destroy(struct be_rpc_naming *n);

/*
 * be_rpc_naming_set() - replace every replica of @service with @recs
 * (whose service must be @service). be_rpc_naming_put() adds or updates
 * one (the epoch rule above; -ESTALE when older than the known one),
 * be_rpc_naming_del() removes one (-ENOENT when unknown). Borrows the
 * records (copied). Watching channels are told on their own workers.
 * Returns 0, -EINVAL, -ENOMEM. Threads: any.
 */
BE_EXPORT int be_rpc_naming_set(struct be_rpc_naming *n, const char *service,
				const struct be_rpc_record *recs, unsigned int nrecs);
BE_EXPORT int be_rpc_naming_put(struct be_rpc_naming *n, const struct be_rpc_record *r);
BE_EXPORT int be_rpc_naming_del(struct be_rpc_naming *n, const char *service, const char *replica);

/*
 * be_rpc_naming_get() - copy up to @max records of @service into @out.
 * Returns how many there are (may exceed @max). Threads: any.
 */
BE_EXPORT int be_rpc_naming_get(struct be_rpc_naming *n, const char *service,
				struct be_rpc_record *out, unsigned int max);

/* Counters of a source. */
struct be_rpc_naming_stats {
	uint32_t size;         /* set by be_rpc_naming_stats() */
	uint64_t version;      /* bumped by every change */
	uint64_t records;      /* known now */
	uint64_t updates;      /* set/put/del calls and reloads that changed something */
	uint64_t stale;        /* records refused for an older epoch */
	uint64_t reloads;      /* file reloads and etcd memberships applied */
	uint64_t errors;       /* file reloads refused (parse errors, unreadable);
				* etcd records refused (one per key and membership) */
};
/* be_rpc_naming_stats() - a snapshot of @n's counters; the _sized form
 * writes at most @out->size bytes. Threads: any. */
BE_EXPORT void be_rpc_naming_stats_sized(struct be_rpc_naming *n, struct be_rpc_naming_stats *out);
static inline void be_rpc_naming_stats(struct be_rpc_naming *n, struct be_rpc_naming_stats *out)
{
	out->size = sizeof(*out);
	be_rpc_naming_stats_sized(n, out);
}

/*
 * A registration: a server's own records kept in a registry, for as long
 * as the process lives (a lease) or until it deregisters.
 *
 * be_rpc_reg_create() - keep @recs (borrowed, copied) in the registry
 * @uri, "etcd://HOST:PORT[,HOST:PORT...]/PREFIX": each record under the
 * key PREFIX/<service>/<replica>, its value the record's text form, all
 * under one lease of @ttl_s seconds (0: 3) refreshed from a thread of
 * the registration every TTL/3; a lease lost while etcd was unreachable
 * is granted again and the records written again. Returns at once: the
 * records are written by that thread (be_rpc_reg_count() says when).
 * A process that dies leaves the registry one TTL later, when etcd
 * expires its lease.
 * Returns 0, -EINVAL (bad uri, invalid record), -ENOMEM,
 * -EPROTONOSUPPORT (another scheme, or built without the etcd client).
 *
 * be_rpc_reg_set_state() - rewrite every record with @state
 * (BE_RPC_SERVING or BE_RPC_DRAINING), within a second: channels that
 * follow the registry give a draining replica no new calls and let it
 * finish those it has. Returns 0, -EINVAL, -ENOMEM. Threads: any.
 *
 * be_rpc_reg_count() - how many times the records were written to etcd
 * (each registration, each rewrite): 0 until the first write reached
 * it, and it grows once a be_rpc_reg_set_state() is written.
 * Threads: any.
 *
 * be_rpc_reg_destroy() - deregister: revoke the lease, which deletes the
 * records at once, and stop the thread. A clean shutdown drains first:
 * be_rpc_reg_set_state(BE_RPC_DRAINING) so that callers stop choosing
 * this server, a moment for the calls they had sent, be_rpc_drain() and
 * a wait until be_rpc_server_stats().in_flight is 0; then deregister.
 * Threads: any (one call at a time on one registration).
 */
struct be_rpc_reg;
BE_EXPORT int be_rpc_reg_create(const char *uri, const struct be_rpc_record *recs,
				unsigned int nrecs, uint32_t ttl_s, struct be_rpc_reg **out);
BE_EXPORT int be_rpc_reg_set_state(struct be_rpc_reg *r, int state);
BE_EXPORT uint64_t be_rpc_reg_count(const struct be_rpc_reg *r);
BE_EXPORT void be_rpc_reg_destroy(struct be_rpc_reg *r);

/* ------------------------------------------------------------ channels */

/* Any shard (be_rpc_chan_watch()). */
#define BE_RPC_ANY_SHARD UINT32_MAX

/*
 * be_rpc_chan_open() - a channel to one replica whose addresses are
 * @target, comma-separated in order of preference ("tcp://h:p", or
 * "verbs://a:1,verbs://b:1,tcp://a:2"). Connections open on first use.
 * Returns 0, -EINVAL, -ENOMEM. Threads: worker.
 */
BE_EXPORT int be_rpc_chan_open(struct be_rpc *rpc, const char *target, struct be_rpc_chan **out);

/*
 * be_rpc_chan_create() - a channel over the replicas @recs (borrowed,
 * copied; their service fields are not used). Returns 0, -EINVAL (no
 * record, a record without address, two with the same replica name),
 * -ENOMEM. Threads: worker.
 */
BE_EXPORT int be_rpc_chan_create(struct be_rpc *rpc, const struct be_rpc_record *recs,
				 unsigned int nrecs, struct be_rpc_chan **out);

/*
 * be_rpc_chan_watch() - a channel over the replicas of @service in @n
 * whose shard range holds @shard (BE_RPC_ANY_SHARD: all), following @n's
 * changes: a new replica starts taking calls, a removed or draining one
 * takes no new ones and finishes those it has. An empty set is allowed
 * (calls then fail with -EHOSTUNREACH). Returns 0, -EINVAL, -ENOMEM.
 * Threads: worker.
 */
BE_EXPORT int be_rpc_chan_watch(struct be_rpc *rpc, struct be_rpc_naming *n, const char *service,
				uint32_t shard, struct be_rpc_chan **out);

/*
 * be_rpc_chan_update() - replace the replica set of a channel made with
 * be_rpc_chan_create() (same rules as a naming change: replicas are
 * matched by name). Returns 0, -EINVAL, -ENOMEM. Threads: worker.
 */
BE_EXPORT int be_rpc_chan_update(struct be_rpc_chan *ch, const struct be_rpc_record *recs,
				 unsigned int nrecs);

/*
 * be_rpc_chan_destroy() - complete the channel's calls in flight with
 * -ECANCELED (inside this call), close its connections and free it.
 * Threads: worker.
 */
BE_EXPORT void be_rpc_chan_destroy(struct be_rpc_chan *ch);

/* be_rpc_chan_set_config() - the failover settings of @ch (copied; the
 * counters stay). Returns 0 or -EINVAL. Threads: worker. */
BE_EXPORT int be_rpc_chan_set_config(struct be_rpc_chan *ch, const struct be_rpc_config *cfg);

/* be_rpc_chan_set_min_version() - replicas whose record version is below
 * @v take no calls (a client refusing stale replicas). Threads: worker. */
BE_EXPORT void be_rpc_chan_set_min_version(struct be_rpc_chan *ch, uint64_t v);

/* ------------------------------------------------------------ calls */

/* Per-call options; NULL means all 0. */
struct be_rpc_call_opts {
	uint32_t size;         /* 0 or sizeof (docs/API.md) */
	uint32_t timeout_us;   /* 0: the channel's timeout_us */
	uint32_t flags;        /* BE_RPC_ONEWAY, BE_RPC_IDEMPOTENT, BE_RPC_NO_HEDGE,
				* BE_RPC_NO_RETRY */
};
#define BE_RPC_NO_HEDGE 0x0100u /* never hedge this call */
#define BE_RPC_NO_RETRY 0x0200u /* one attempt only */

/*
 * Completion of a call, exactly once: @status (0 or the error, see the
 * top of this file) and, when @status is 0, the reply. Ownership: returns
 * @reply (an RPC buffer of @len payload bytes; NULL on error and for
 * one-way calls) to the callback, which frees it with be_rpc_buf_free()
 * or keeps it.
 */
typedef void (*be_rpc_done_cb)(int status, void *reply, size_t len, void *arg);

/*
 * be_rpc_call() - call (@service, @method) on @ch with @len bytes at
 * @req, completing once through @cb (required unless BE_RPC_ONEWAY).
 *
 * Ownership: takes @req (an RPC buffer, or NULL when @len is 0) when it
 * returns 0: the library keeps it while the call may still send it
 * (retries, a hedge) and frees it after the last send of it has
 * completed, which may be after @cb. On error the caller keeps @req and
 * @cb never runs.
 *
 * Retries: an attempt that fails on its connection, or that a server
 * refused with -EAGAIN/-ESHUTDOWN, is tried again on another replica
 * while the deadline, max_attempts and the budget allow; a call without
 * BE_RPC_IDEMPOTENT is tried again only when the server cannot have run
 * it (refused, or its connection was never established). An idempotent
 * call unanswered after the hedge delay gets one hedged copy. A one-way
 * call completes when its message left (status 0) or failed.
 * *@id (may be NULL) identifies the call for be_rpc_cancel().
 * Returns 0, -EINVAL, -EHOSTUNREACH (no replica is usable now),
 * -ESHUTDOWN (the channel is being destroyed), -EMSGSIZE, -ENOMEM.
 * Threads: worker.
 */
BE_EXPORT int be_rpc_call(struct be_rpc_chan *ch, uint32_t service, uint32_t method, void *req,
			  size_t len, const struct be_rpc_call_opts *opts, be_rpc_done_cb cb,
			  void *arg, uint64_t *id);

/*
 * be_rpc_cancel() - complete call (or scatter) @id with -ECANCELED from
 * the next progress; its replies arriving later are dropped and counted.
 * Returns 0, -ENOENT (unknown or already completed: its callback has run
 * or is queued). Threads: worker.
 */
BE_EXPORT int be_rpc_cancel(struct be_rpc *rpc, uint64_t id);

/*
 * be_rpc_call_sync() - be_rpc_call() and wait: runs be_worker_wait() on
 * @rpc's worker until the call completes, so it must be called by the
 * thread that drives that worker, outside callbacks (-EDEADLK inside one).
 * Ownership: takes @req in every case (on an error the library frees
 * it); on 0 returns the reply in *@reply (free with be_rpc_buf_free();
 * @reply may be NULL to drop it), else *@reply is NULL.
 * Returns the call's status, or be_rpc_call()'s error.
 */
BE_EXPORT int be_rpc_call_sync(struct be_rpc_chan *ch, uint32_t service, uint32_t method,
			       void *req, size_t len, const struct be_rpc_call_opts *opts,
			       void **reply, size_t *reply_len);

/* One leg of a scatter call. */
struct be_rpc_scatter_item {
	struct be_rpc_chan *ch;   /* in */
	uint32_t service, method; /* in */
	void *req;                /* in: taken when be_rpc_scatter() returns 0 */
	size_t len;               /* in */
	int status;               /* out: the leg's status (-ECANCELED when a
				   * fail-fast scatter stopped it) */
	void *reply;              /* out: returned to the caller (NULL on error) */
	size_t reply_len;         /* out */
};

/* Complete the scatter at the first failed leg, cancelling the others. */
#define BE_RPC_SCATTER_FAIL_FAST 0x10000u

/* Completion of a scatter: @status 0 when every leg succeeded, else the
 * first failure; each item holds its own result and reply. */
typedef void (*be_rpc_scatter_cb)(struct be_rpc_scatter_item *items, unsigned int n, int status,
				  void *arg);

/*
 * be_rpc_scatter() - @n calls at once, one per item (each on its own
 * channel: the fan-out of a ranker to its shards), under one deadline,
 * completing once through @cb: when every leg is done, or with
 * BE_RPC_SCATTER_FAIL_FAST in @opts->flags at the first failure. Other
 * flags apply to every leg. A leg that cannot start (no usable replica)
 * is a failed leg, not an error of this function.
 * Ownership: lends @items until @cb runs (the library writes the
 * results); takes every items[i].req when it returns 0; the replies are
 * the caller's from @cb on. On error nothing was taken and @cb never runs.
 * Returns 0, -EINVAL (n 0 or > 65536, NULL cb or channel, a channel of
 * another be_rpc), -ENOMEM. Threads: worker.
 */
BE_EXPORT int be_rpc_scatter(struct be_rpc *rpc, struct be_rpc_scatter_item *items,
			     unsigned int n, const struct be_rpc_call_opts *opts,
			     be_rpc_scatter_cb cb, void *arg, uint64_t *id);

/* ------------------------------------------------------------ wire header */

/* Message types of the RPC header (docs/PROTOCOL.md, section 8). */
#define BE_RPC_T_REQUEST 1
#define BE_RPC_T_REPLY 2
#define BE_RPC_T_NOTICE 3 /* server to client: its state changed (flags) */
/* Flag of replies and notices: the server is draining (takes no new
 * calls). A reply or notice without it: the server serves. */
#define BE_RPC_F_DRAINING 0x0001u

/* The header of one RPC message, decoded. */
struct be_rpc_hdr {
	uint8_t type;          /* BE_RPC_T_REQUEST, _REPLY or _NOTICE */
	uint16_t flags;        /* requests: BE_RPC_ONEWAY | IDEMPOTENT | HEDGED | RETRY;
				* replies, notices: BE_RPC_F_DRAINING */
	uint8_t attempt;       /* requests: 0..BE_RPC_MAX_ATTEMPT */
	uint64_t id;
	uint32_t service, method;
	uint32_t deadline_us;  /* requests: remaining; BE_RPC_NO_DEADLINE: none */
	int32_t status;        /* replies: 0 or a negative error code */
	uint32_t len;          /* payload bytes after the header */
};
#define BE_RPC_NO_DEADLINE UINT32_MAX
#define BE_RPC_MAX_ATTEMPT 15

/*
 * be_rpc_hdr_decode() - decode and validate the header of one message of
 * @len bytes at @msg (every field; docs/PROTOCOL.md). A pure function of
 * its input, for fuzzing. Returns 0, or BE_EPROTO_PEER with a static
 * reason in *@why (may be NULL). Threads: any.
 */
BE_EXPORT int be_rpc_hdr_decode(const void *msg, size_t len, struct be_rpc_hdr *out,
				const char **why);

/* be_rpc_hdr_encode() - write @h (validated as on receipt) into the
 * BE_RPC_HDR_LEN bytes at @out. Returns 0 or -EINVAL. Threads: any. */
BE_EXPORT int be_rpc_hdr_encode(const struct be_rpc_hdr *h, void *out);

/* ------------------------------------------------------------ observability */

/* Log-linear latency histogram: values in nanoseconds; below 64 one
 * bucket per value, above 64 buckets per power of two, so a bucket spans
 * less than 1/64 of its values and a quantile read at its middle is off
 * by less than 0.8 %. Values from 2^38 ns (275 s) on share the last. */
#define BE_RPC_HIST_SUB 64
#define BE_RPC_HIST_BUCKETS (BE_RPC_HIST_SUB + 32 * BE_RPC_HIST_SUB)
struct be_rpc_hist {
	uint64_t count, sum_ns, min_ns, max_ns;
	uint64_t b[BE_RPC_HIST_BUCKETS];
};

/* be_rpc_hist_add() - count one value. Borrows @h. Threads: the owner's. */
BE_EXPORT void be_rpc_hist_add(struct be_rpc_hist *h, uint64_t ns);

/* be_rpc_hist_quantile() - the value at rank ceil(@q * count) (0 < q <= 1),
 * within 1 %; 0 when empty. */
BE_EXPORT uint64_t be_rpc_hist_quantile(const struct be_rpc_hist *h, double q);

/* Counters of a channel (all calls) or of one address (attempts on it). */
struct be_rpc_counters {
	uint64_t calls;           /* calls started (channel) / attempts sent (address) */
	uint64_t ok;              /* completed with a reply */
	uint64_t errors;          /* completed with an error (all kinds below) */
	uint64_t timeouts;        /* deadline passed (address: attempts outstanding then) */
	uint64_t canceled;
	uint64_t conn_errors;     /* connection failed (address: connections lost) */
	uint64_t proto_errors;    /* the peer broke the protocol */
	uint64_t server_errors;   /* a handler's error status */
	uint64_t unavailable;     /* no replica usable (-EHOSTUNREACH) */
	uint64_t retries;         /* attempts after the first, hedges excluded */
	uint64_t hedges;          /* hedged copies sent */
	uint64_t hedge_wins;      /* calls the hedged copy answered first */
	uint64_t budget_denied;   /* retries or hedges the budget refused */
	uint64_t late_replies;    /* replies after their call completed (dropped) */
	uint64_t req_copies;      /* requests copied for an attempt because the
				   * previous send of their buffer was still in flight */
	uint64_t port_switches;   /* to a less preferred address of a replica, same kind */
	uint64_t port_returns;    /* back to a more preferred address, same kind */
	uint64_t fallbacks;       /* from an RDMA-class address (verbs, shm) to tcp */
	uint64_t fallback_returns;/* from tcp back to an RDMA-class address */
	uint64_t ejections;
	uint64_t returns;         /* ejected replicas back after a probe */
	uint64_t probes, probe_failures;
	uint64_t drains;          /* a replica's server said it is draining (from serving) */
	uint64_t outstanding;     /* now: calls (channel) / attempts (address) in flight */
};

/* State of an address: not connected yet, connected (or connecting),
 * failed (probed with backoff), being probed. */
enum be_rpc_addr_state { BE_RPC_ADDR_IDLE, BE_RPC_ADDR_UP, BE_RPC_ADDR_DOWN, BE_RPC_ADDR_PROBING };
/* State of a replica in a channel. */
enum be_rpc_rep_state { BE_RPC_REP_ACTIVE, BE_RPC_REP_EJECTED, BE_RPC_REP_PROBING,
			BE_RPC_REP_DRAINING, BE_RPC_REP_REMOVED };

struct be_rpc_addr_stats {
	char addr[BE_RPC_ADDR_MAX];
	int state;                /* enum be_rpc_addr_state */
	struct be_rpc_counters c;
};

struct be_rpc_replica_stats {
	uint32_t size;            /* set by be_rpc_chan_replica_stats() */
	char name[BE_RPC_NAME_MAX];
	int state;                /* enum be_rpc_rep_state */
	int path;                 /* index of the address in use; -1: none usable */
	uint64_t version, epoch;
	uint32_t naddrs;
	uint64_t outstanding;     /* attempts in flight */
	uint64_t ejections, returns;
	uint32_t fails_in_row;
	int server_draining;      /* 1: its server said it is draining (not chosen
				   * while another replica is usable) */
	struct be_rpc_addr_stats addrs[BE_RPC_MAX_ADDRS];
};

struct be_rpc_chan_stats {
	uint32_t size;            /* set by be_rpc_chan_stats() */
	struct be_rpc_counters c;
	uint32_t replicas;        /* in the set now (removed ones still draining excluded) */
	uint32_t ejected;         /* ejected now */
	struct be_rpc_hist lat;   /* completion time of successful calls, from
				   * the first request's send to the reply */
};

/* be_rpc_chan_stats() - a snapshot of @ch; be_rpc_chan_replica_stats()
 * of its replica @i (0 <= i < replicas), -ENOENT past the end. The
 * _sized forms write at most @out->size bytes. Threads: worker. */
BE_EXPORT void be_rpc_chan_stats_sized(struct be_rpc_chan *ch, struct be_rpc_chan_stats *out);
BE_EXPORT int be_rpc_chan_replica_stats_sized(struct be_rpc_chan *ch, unsigned int i,
					      struct be_rpc_replica_stats *out);
static inline void be_rpc_chan_stats(struct be_rpc_chan *ch, struct be_rpc_chan_stats *out)
{
	out->size = sizeof(*out);
	be_rpc_chan_stats_sized(ch, out);
}
static inline int be_rpc_chan_replica_stats(struct be_rpc_chan *ch, unsigned int i,
					    struct be_rpc_replica_stats *out)
{
	out->size = sizeof(*out);
	return be_rpc_chan_replica_stats_sized(ch, i, out);
}

/*
 * be_rpc_chan_stats_json() - the channel's counters, latency quantiles
 * (p50/p90/p99/p999 in microseconds), and every replica with its state,
 * path and addresses with their counters, as one JSON object (no
 * newline) into @buf. Returns the length it needs (like snprintf) or
 * -EINVAL. Threads: worker.
 */
BE_EXPORT int be_rpc_chan_stats_json(struct be_rpc_chan *ch, char *buf, size_t len);

/* Counters of the server side of a be_rpc. */
struct be_rpc_server_stats {
	uint32_t size;            /* set by be_rpc_server_stats() */
	uint64_t requests;        /* requests handed to handlers */
	uint64_t replies;         /* replies sent (errors included) */
	uint64_t errors;          /* replies with an error status */
	uint64_t oneway;          /* one-way requests */
	uint64_t refused_deadline;/* refused: deadline passed or below min_remaining_us */
	uint64_t refused_draining;/* refused while draining */
	uint64_t no_method;       /* unknown (service, method) */
	uint64_t proto_errors;    /* malformed requests */
	uint64_t replies_dropped; /* the caller's connection was gone */
	uint64_t pings;
	uint64_t notices;         /* drain / serve notices sent */
	uint64_t in_flight;       /* requests held by handlers now */
	uint64_t conns;           /* accepted connections now */
};

/* be_rpc_server_stats() / be_rpc_server_stats_json(): the server side of
 * @rpc. The JSON form returns the length it needs or -EINVAL; the _sized
 * form writes at most @out->size bytes. Threads: worker. */
BE_EXPORT void be_rpc_server_stats_sized(struct be_rpc *rpc, struct be_rpc_server_stats *out);
static inline void be_rpc_server_stats(struct be_rpc *rpc, struct be_rpc_server_stats *out)
{
	out->size = sizeof(*out);
	be_rpc_server_stats_sized(rpc, out);
}
BE_EXPORT int be_rpc_server_stats_json(struct be_rpc *rpc, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* BE_RPC_H */
