/*
 * sock.h - the BE core: Sockets multiplexed over Engines, driven by Workers.
 *
 * Model.
 *
 *   be_ctx      the configuration and the transport devices, opened on
 *               first use and attached to bemalloc, so every bemalloc
 *               buffer is registered on them.
 *   be_worker   a thread domain: per transport in use one event channel,
 *               one completion queue and one shared receive queue, and
 *               every Engine, Listener and Socket created on it. Its
 *               progress runs on the application's thread
 *               (be_worker_progress(), be_worker_wait()) or on a library
 *               thread (be_worker_start()).
 *   Engine      (internal) one reliable connection (an RC QP on verbs) to
 *               one remote endpoint, shared by every Socket of the worker
 *               to that endpoint. It owns the receive credits, the send
 *               window, the fragment scheduler and the keepalive.
 *   be_sock     a logical, ordered, message-oriented channel (one per RPC
 *               connection). Many Sockets share one Engine.
 *   be_listener accepts Engines and the Sockets peers open on them.
 *
 * docs/ARCHITECTURE.md explains the design, docs/TUNING.md the defaults.
 *
 * Threads. A worker and everything created on it (listeners, sockets) is
 * used by one thread at a time: the thread that runs its progress. When
 * be_worker_start() runs the worker on a library thread, only callbacks
 * (which run on that thread) and functions submitted with be_worker_call()
 * may use its objects; be_worker_call() is the one function that may be
 * called from any thread. Functions below say "Threads: worker" for that
 * rule. Callbacks never run inside a be_* call other than
 * be_worker_progress()/be_worker_wait() (and the library thread's loop), so
 * every function may be called from inside a callback, including
 * be_sock_close() on the socket the callback is about. Two refuse there
 * with -EDEADLK, since the progress call that runs the callback still
 * uses the worker: be_worker_destroy() and be_worker_stop() of the
 * callback's own worker.
 *
 * Closing. A send that completed with status 0 will be delivered: closing
 * the socket (be_sock_close), shutting the worker down
 * (be_worker_shutdown) or destroying it (be_worker_destroy, within
 * close_timeout_ms) hands every such message to the peer's on_recv before
 * its on_close(0). Only a peer that dies or closes its socket first, or an
 * Engine that fails, loses messages in flight, and then an error says so:
 *   on_close    0 peer closed cleanly, -ESHUTDOWN our worker shut down,
 *               -ECONNREFUSED refused, else the Engine's error;
 *   be_close_cb 0 the peer answered (it has everything), -ECONNRESET the
 *               closes crossed, -ECONNREFUSED, the Engine's error,
 *               -ECANCELED be_worker_destroy() gave up waiting.
 * be_sock_close_notify() tells when one close is done, be_worker_shutdown()
 * when all of a worker's are (so a program knows when it may exit). A
 * clean close needs the peer's answer, hence its progress: two workers
 * driven by one thread are shut down together, not destroyed in turn.
 *
 * Buffers. Message buffers come from be_alloc() (include/be/alloc.h). Each
 * function states ownership with four verbs: borrows (used during the call
 * only), takes (the library frees it), lends until ... (the library uses it
 * until the named event, then it is the caller's again), returns (the
 * caller receives ownership).
 *
 * Errors: negative errno, or BE_EPROTO_PEER / BE_ECONNFAULT (be.h). When a
 * function that takes a callback returns an error, that callback is never
 * called for that request.
 *
 * Structs that grow lead with `size` (docs/API.md): leave it 0, or let
 * the inline wrapper that fills the struct set it.
 *
 * Debug builds (no NDEBUG) check the thread rule: a worker's function
 * called on the wrong thread logs which and fails an assert().
 */
#ifndef BE_SOCK_H
#define BE_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include <be/export.h>

#ifdef __cplusplus
extern "C" {
#endif


struct be_ctx;
struct be_worker;
struct be_listener;
struct be_sock;

/*
 * Configuration. be_config_init() fills the defaults below, then applies
 * the BE_* environment variable of each field when it is set (sizes accept
 * K/M/G suffixes; times are plain integers). A malformed variable is
 * ignored with a warning in the log. be_ctx_create() rejects impossible
 * values with -EINVAL and clamps the others as stated, each clamp once
 * as a warning in the log ("config: eager_max 8192 clamped to 8176
 * (...)"); be_ctx_config() returns what is in effect. The limits of a
 * transport's device (sq_depth, cq_depth, srq_max_depth) apply when a
 * worker first uses it, and are logged then: a value the application set
 * as a warning, a default the device cannot take as information.
 */
/* The default send window, in fragments (see be_config.send_window). */
#define BE_WINDOW_FRAGS 16
/* be_config.send_window = BE_SEND_WINDOW_OFF: no send window (nor mixed
 * window); only the send queue (sq_depth WRs) bounds what an Engine has
 * posted. No transport's default (docs/TUNING.md says why). */
#define BE_SEND_WINDOW_OFF UINT64_MAX

struct be_config {
	/* 0 or sizeof (docs/API.md); be_config_init() sets it. */
	uint32_t size;
	/* Largest message sent eagerly (copied into a SEND); larger ones are
	 * written with RDMA WRITE into a buffer the receiver allocates.
	 * Clamped to recv_buf_size - 16 (logged). BE_EAGER_MAX, default 8192. */
	uint32_t eager_max;
	/* Bytes of each buffer on a worker's shared receive queue: the
	 * largest SEND a peer may send. 256 B .. 16 MiB, rounded up to a
	 * multiple of 8. BE_RECV_BUF_SIZE, default 10240. */
	uint32_t recv_buf_size;
	/* Receive buffers a worker posts per transport at start (raised to
	 * credits), and the most its shared receive queue grows to (raised to
	 * srq_depth; clamped to the device). BE_SRQ_DEPTH default 512,
	 * BE_SRQ_MAX_DEPTH default 8192. */
	uint32_t srq_depth;
	uint32_t srq_max_depth;
	/* Receive credits: the most SENDs and WRITE_WITH_IMMs the peer of an
	 * Engine may have outstanding toward it (credits, 4..65535), and the
	 * grant an Engine starts with (credits_init, 4..credits; 0 or more
	 * than credits: credits, a fixed grant). In between, grants grow and
	 * shrink with the traffic (docs/PROTOCOL.md, "Elastic grants").
	 * BE_CREDITS default 64, BE_CREDITS_INIT default 8. */
	uint32_t credits;
	uint32_t credits_init;
	/* Bytes one Engine may have posted and not yet completed. 0 picks
	 * it per transport: BE_WINDOW_FRAGS fragments, on shm at least four
	 * bulk fragments; BE_SEND_WINDOW_OFF turns it off. BE_SEND_WINDOW
	 * (a size, or "off"), default 0. */
	uint64_t send_window;
	/* Fragment size of large messages. 0 picks it per transport and link
	 * speed and lets a stream alone on its Engine use larger fragments;
	 * a value set here is used for every fragment (clamped to
	 * send_window and the device's largest message). BE_FRAG_SIZE,
	 * default 0. */
	uint32_t frag_size;
	/* 1: the fragments of different Sockets of an Engine take turns
	 * (round-robin); 0: one FIFO per Engine. BE_FRAG_SCHED, default 1. */
	int frag_sched;
	/* Send queue depth per Engine (at least 8; at most the transport's
	 * max_qp_wr: 4096 on shm and tcp) and completion queue depth per
	 * worker and transport (clamped to the device). The completion queue
	 * holds every posted receive and every Engine's send queue.
	 * BE_SQ_DEPTH default 128, BE_CQ_DEPTH default 65536. */
	uint32_t sq_depth;
	uint32_t cq_depth;
	/* An Engine that posted no SEND for keepalive_ms sends a keepalive;
	 * one that received nothing from its peer for conn_timeout_ms fails
	 * with BE_ECONNFAULT. Both > 0. BE_KEEPALIVE_MS default 1000,
	 * BE_CONN_TIMEOUT_MS default 10000. */
	uint32_t keepalive_ms;
	uint32_t conn_timeout_ms;
	/* A connect (address resolution, handshake) must finish within this;
	 * 0 means conn_timeout_ms. BE_CONNECT_TIMEOUT_MS, default 0. */
	uint32_t connect_timeout_ms;
	/* be_worker_wait() polls at most this long before sleeping on
	 * events: the spin halves after each one that found nothing (or
	 * found it only after 10 us) and doubles after one that found work
	 * within 10 us (be_worker_stats_json() shows it; docs/TUNING.md).
	 * BE_SPIN_US, default 50. */
	uint32_t spin_us;
	/* Sockets per Engine, > 0, at most 2^24. BE_MAX_SOCKETS, default
	 * 65536. */
	uint32_t max_sockets;
	/* Largest message accepted from a peer, > 0. BE_MAX_MSG, default
	 * 1 GiB. */
	uint64_t max_msg_size;
	/* Bytes an Engine lends at once to its peer's large messages; beyond
	 * it the peer is told "no memory" and retries later (one message
	 * always fits). 0: no limit. BE_MAX_GRANT_BYTES, default 256 MiB. */
	uint64_t max_grant_bytes;
	/* Bytes a worker lends at once to the large messages of all its
	 * peers together; beyond it they are told "no memory" and retry (a
	 * message always fits while the worker lends nothing). 0: no limit.
	 * BE_MAX_WORKER_GRANT_BYTES, default 1 GiB. */
	uint64_t max_worker_grant_bytes;
	/*
	 * Limits per peer identity, over all the Engines a listener accepted
	 * from it (docs/SECURITY.md): on shm the peer's uid, on tcp and verbs
	 * its host address (port aside); a shared secret names no one. 0: no
	 * limit. Engines: beyond, a new connection is refused (the peer's
	 * connect fails with -ECONNREFUSED; counted as "limit_refused" in
	 * be_worker_stats_json()); BE_MAX_PEER_ENGINES, default 128.
	 * Sockets the peer opened: beyond, a new one is refused as on_accept
	 * would (the opener gets on_close(-ECONNREFUSED));
	 * BE_MAX_PEER_SOCKETS, default 65536. Bytes lent to its large
	 * messages: beyond, "no memory" and a retry, as above (one message
	 * always fits while the identity holds none);
	 * BE_MAX_PEER_GRANT_BYTES, default 256 MiB.
	 */
	uint32_t max_peer_engines;
	uint32_t max_peer_sockets;
	uint64_t max_peer_grant_bytes;
	/* Large messages of one Socket in progress at once, from their
	 * WriteRequest to their last fragment (0: 1). BE_MAX_REQS, default 4. */
	uint32_t max_reqs;
	/* Retry delay after "no memory", doubling from nomem_backoff_us to
	 * nomem_backoff_max_us. BE_NOMEM_BACKOFF_US default 1000,
	 * BE_NOMEM_BACKOFF_MAX_US default 100000. */
	uint32_t nomem_backoff_us;
	uint32_t nomem_backoff_max_us;
	/* An Engine this side connected is closed once it had no Socket for
	 * this long; the next be_sock_connect() to the peer opens a new one.
	 * 0 keeps Engines until they fail or the worker is destroyed.
	 * BE_ENGINE_IDLE_MS, default 30000. */
	uint32_t engine_idle_ms;
	/* be_worker_destroy() closes everything cleanly first (as
	 * be_worker_shutdown() does) and waits at most this long for the
	 * peers to answer; then it disconnects what is left, and messages
	 * still in flight there may be lost. 0: no wait.
	 * BE_CLOSE_TIMEOUT_MS, default 10000. */
	uint32_t close_timeout_ms;
	/*
	 * Admission (docs/SECURITY.md). A shared secret of 1 to
	 * BE_AUTH_SECRET_MAX bytes: when set, every Engine this context
	 * makes proves it to its peer, and has the peer prove it, before
	 * anything else crosses (a challenge-response, docs/PROTOCOL.md,
	 * "Admission"); a peer without it is refused, and a connect to one
	 * fails with -EACCES. auth_secret_len 0: no secret. Set the bytes
	 * here, or the text of BE_AUTH_SECRET, or name a file in
	 * auth_secret_file (BE_AUTH_SECRET_FILE): be_ctx_create() reads it
	 * (its first line, without the newline) and fails with -EACCES when
	 * group or others may read or write it (mode must be 0600 or 0400),
	 * -EINVAL when it is empty or longer than BE_AUTH_SECRET_MAX, or
	 * its open()'s -errno. A secret set here wins over the file.
	 */
	uint8_t auth_secret[64];
	uint32_t auth_secret_len;
	char auth_secret_file[256];
	/*
	 * Which local users may connect over shm, by the uid the kernel
	 * reports for the peer process (SO_PEERCRED): "" (the default) only
	 * this process's effective uid, "*" anyone, or a comma-separated list
	 * of uids ("0,1000"; "self" names ours). A listener refuses other
	 * peers with reason "not admitted" and a connector refuses a listener
	 * of another uid (-EACCES): an abstract socket name is anyone's to
	 * take. BE_ADMIT_UIDS.
	 */
	char admit_uids[128];
	/*
	 * Bytes one Socket may hold for its peer: messages that arrived
	 * complete, or announced and still being written, behind a large
	 * message of the Socket that is not complete yet (they wait for it,
	 * messages are delivered in order), each counted as its length plus
	 * 64 bytes. The value is announced to the peer at connect; the
	 * peer's Socket then stops sending (its messages wait in its queue,
	 * nothing is dropped) until the large message completes here, and a
	 * peer that sends beyond it is a protocol error that fails its
	 * Engine (BE_EPROTO_PEER). One message always goes when the Socket
	 * holds nothing, and the other Sockets of the Engine are not held
	 * up. At least 4096 (raised, logged); 0: no bound. BE_SOCK_WINDOW,
	 * default 16 MiB (docs/SECURITY.md, "Limits").
	 */
	uint64_t sock_window;
	/* 1: a large message goes one-way where both ends' transport lets
	 * the receiver allocate as the data arrives (tcp, shm: no
	 * WriteRequest round trip, docs/PROTOCOL.md section 4); 0: every
	 * large message asks for its buffer first, as on verbs (for
	 * measuring what one-way buys, and testing that path without RDMA).
	 * BE_ONEWAY, default 1. */
	uint32_t oneway;
};

/* Longest shared secret (be_config.auth_secret). */
#define BE_AUTH_SECRET_MAX 64

/* be_config_init() - defaults + BE_* environment. Borrows @cfg.
 * be_config_init_sized() writes at most @cfg->size bytes. */
BE_EXPORT void be_config_init_sized(struct be_config *cfg);
static inline void be_config_init(struct be_config *cfg)
{
	cfg->size = sizeof(*cfg);
	be_config_init_sized(cfg);
}

/*
 * be_ctx_create() - a context with configuration @cfg (copied; NULL means
 * be_config_init()). Opens every RDMA device here (in an RDMA host's
 * first context this loads libibverbs' providers: it may take a second),
 * so that no worker's first connect or listen waits for it; the tcp and
 * shm devices open on first use. An RDMA device that does not open is
 * logged and left out: addresses on it fail with -ENODEV. Returns 0 or
 * -EINVAL (invalid configuration), -ENOMEM.
 * Threads: any; the context itself is thread-safe.
 */
BE_EXPORT int be_ctx_create(const struct be_config *cfg, struct be_ctx **out);

/*
 * be_ctx_destroy() - detach the devices from bemalloc and close them.
 * Returns 0 (also for NULL), or -EBUSY while a worker of @ctx is alive:
 * then nothing is done; destroy the workers first.
 */
BE_EXPORT int be_ctx_destroy(struct be_ctx *ctx);

/* be_ctx_config() - the configuration in effect (after clamping). Its
 * size is 0 (the v1 layout; docs/API.md), so a copy passed back is read
 * safely; set size to sizeof in a copy to pass back later fields. */
BE_EXPORT const struct be_config *be_ctx_config(const struct be_ctx *ctx);

/*
 * be_worker_create() - a worker on @ctx. Its per-transport queues are
 * created when it first listens or connects on a transport.
 * Returns 0, -ENOMEM, or -errno of eventfd/epoll.
 */
BE_EXPORT int be_worker_create(struct be_ctx *ctx, struct be_worker **out);

/*
 * be_worker_shutdown() - close everything on @w cleanly and wait until it
 * is done, at most @timeout_ms (0: run progress once and report; -1: no
 * bound of our own, though a peer that stops answering still fails its
 * Engine after conn_timeout_ms). From the first call on, the worker takes
 * no new Engine (listeners stop listening, connection requests under way
 * are rejected; listener handles stay valid until be_listener_close() or
 * be_worker_destroy(), and be_listener_addr() returns -ESHUTDOWN) and no
 * new Socket (be_sock_connect() and be_listen() return -ESHUTDOWN; a
 * peer's new Socket is refused). Every Socket the application has not
 * closed is closed as be_sock_close() would (unsent messages complete
 * with -ECANCELED, what the peer sends from then on is discarded), except
 * that its handle stays valid (until be_sock_close() or
 * be_worker_destroy()) and it gets on_close(-ESHUTDOWN). Each Engine
 * disconnects once every close handshake on it is over: its peer has then
 * received every message whose send completed with 0 and reported
 * on_close(0). Callbacks run inside this call (it runs progress).
 *
 * Returns 0 once no Engine is left and no callback is pending,
 * -ETIMEDOUT when @timeout_ms passed first (the shutdown goes on with
 * progress: call again, or be_worker_destroy() disconnects the rest),
 * -EINPROGRESS when called from a callback (the shutdown is started and
 * goes on once that progress call returns), or a progress error. Two
 * workers driven by one thread must both be shut down before either is
 * destroyed: call be_worker_shutdown(w, 0) on each in turn until both
 * return 0, since each needs the other's answers. With a library thread
 * running, stop it first (be_worker_stop()), or call this from a callback
 * or a be_worker_call() function (it then only starts the shutdown).
 * Threads: worker.
 */
BE_EXPORT int be_worker_shutdown(struct be_worker *w, int timeout_ms);

/*
 * be_worker_destroy() - close and free everything on @w. First a clean
 * shutdown, as be_worker_shutdown(), bounded by the configuration's
 * close_timeout_ms: a message whose send completed with 0 reaches its
 * peer unless the peer dies (or closes its socket first) or that time
 * passes. Then every Engine left disconnects, pending sends complete
 * with -ECANCELED (their callbacks, and those of be_sock_close_notify(),
 * run inside this call, the only exception to the rule above; on_close
 * does not run), sockets and listeners are freed (handles become
 * invalid). A running library thread is stopped first. Returns 0 (also
 * for NULL), or -EDEADLK when called inside a callback of @w or a
 * be_worker_call() function it runs (on its library thread or in its
 * progress): the progress call running it still uses @w, so nothing is
 * done; destroy it after progress returns. Threads: worker, or any
 * thread while the library thread runs it.
 */
BE_EXPORT int be_worker_destroy(struct be_worker *w);

/*
 * be_worker_progress() - run everything that is ready without blocking:
 * connection events, completions, scheduled sends, timers, callbacks.
 * Returns the number of things done (0 when idle), or -errno when a
 * transport queue failed. Threads: worker.
 */
BE_EXPORT int be_worker_progress(struct be_worker *w);

/*
 * be_worker_wait() - progress, sleeping until something happens or
 * @timeout_ms passes (-1: no limit, but timers still wake it). Polls for
 * up to spin_us first. Returns the work done (>= 0) or -errno: a failed
 * transport queue, or a completion queue that could not be armed for a
 * wakeup (the transport's error; counted as "cq_arm_errors" in
 * be_worker_stats_json()), in which case the wait slept at most 1 ms
 * instead of until an event, and calling it again is safe.
 * Threads: worker.
 */
BE_EXPORT int be_worker_wait(struct be_worker *w, int timeout_ms);

/*
 * be_worker_start() - run progress + wait on a library thread until
 * be_worker_stop(). From then on the worker's objects are used only from
 * callbacks and be_worker_call() functions. Returns 0, -EALREADY, -errno.
 */
BE_EXPORT int be_worker_start(struct be_worker *w);

/* be_worker_stop() - stop and join the library thread. 0, -EINVAL (not
 * running), or -EDEADLK on the library thread itself (a callback; the
 * thread keeps running). Threads: any but the library thread. */
BE_EXPORT int be_worker_stop(struct be_worker *w);

/*
 * be_worker_call() - run @fn(@w, @arg) on the worker's thread at its next
 * progress, waking it if it sleeps. Functions still queued when the
 * worker is destroyed run inside be_worker_destroy(). Returns 0 or
 * -ENOMEM (then @fn never runs). Threads: any.
 */
BE_EXPORT int be_worker_call(struct be_worker *w, void (*fn)(struct be_worker *w, void *arg),
			     void *arg);

/* be_worker_ctx() - the context of @w. */
BE_EXPORT struct be_ctx *be_worker_ctx(struct be_worker *w);

/* be_worker_engine_count() - live Engines of @w. Threads: worker. */
BE_EXPORT unsigned int be_worker_engine_count(struct be_worker *w);

/*
 * Callbacks of a socket. They run on the worker's thread, from progress.
 *
 * on_recv: a message arrived. Returns @buf (from bemalloc) to the
 *   application, which may keep it, hand it to another thread, and must
 *   be_free() it eventually (from any thread). A 0-byte message comes
 *   with a valid minimal buffer. Messages arrive in the order they were
 *   sent on the peer's socket.
 * on_close: the socket stopped working: @reason 0 when the peer closed
 *   it (every message the peer sent before, whose send completed with 0,
 *   was handed to on_recv first), -ECONNREFUSED when the peer refused
 *   it, -ESHUTDOWN when be_worker_shutdown() closed it, or the Engine's
 *   error (BE_ECONNFAULT, BE_EPROTO_PEER, -ECONNRESET, ...: messages in
 *   flight either way may be lost). It runs at most once and never after
 *   be_sock_close(); the handle stays valid until the application calls
 *   be_sock_close(), which it must do.
 * on_accept: listeners only: the peer opened @s on an Engine accepted by
 *   listener @l (NULL if that listener was closed since; the Engine keeps
 *   its callbacks). @s starts with the listener's callbacks and user
 *   pointer. Return 0 to accept, or a negative errno to refuse (the peer
 *   gets on_close(-ECONNREFUSED) and @s is freed on return).
 */
struct be_sock_cbs {
	void (*on_recv)(struct be_sock *s, void *buf, size_t len, void *user);
	void (*on_close)(struct be_sock *s, int reason, void *user);
	int (*on_accept)(struct be_listener *l, struct be_sock *s, void *user);
};

/*
 * be_listen() - listen on @addr: "tcp://host:port" (port 0 picks one),
 * "shm://name", "verbs://ip:port". Borrows @cbs (copied; on_accept is
 * required). Returns 0, -EINVAL (bad address, no on_accept),
 * -EPROTONOSUPPORT (transport not built in), or the transport's -errno.
 * Threads: worker.
 */
BE_EXPORT int be_listen(struct be_worker *w, const char *addr, const struct be_sock_cbs *cbs,
			void *user, struct be_listener **out);

/*
 * The peer of a connection a listener is asked to admit. @addr is its
 * address with scheme ("tcp://10.0.0.2:41822", "shm://pid:4242"); on shm
 * (@has_cred) the kernel's word for its process: @uid, @gid, @pid;
 * @authenticated is 1 when it proved the context's shared secret.
 * Borrowed for the call.
 */
struct be_peer_info {
	const char *addr;
	int has_cred;
	uint32_t uid, gid;
	int32_t pid;
	int authenticated;
};

/*
 * Admission hook of a listener: return 0 to admit @peer, or a negative
 * errno to refuse it (the Engine is not made; the peer's connect fails
 * with -EACCES, and the refusal is logged and counted as "admit_refused"
 * in be_worker_stats_json()). It runs on the worker's thread, once per
 * connection, after the uid rule (shm) and the shared secret (if any)
 * passed and before any Socket, credit or memory reaches the peer; it
 * must not block. Every be_* function but be_listener_close() of @l and
 * be_worker_destroy() may be called from it.
 */
typedef int (*be_admit_cb)(struct be_listener *l, const struct be_peer_info *peer, void *user);

/*
 * be_listener_set_admit() - install @cb (NULL: none) with @user on @l for
 * the connections it accepts from now on. Returns 0 or -EINVAL.
 * Threads: worker.
 */
BE_EXPORT int be_listener_set_admit(struct be_listener *l, be_admit_cb cb, void *user);

/* be_listener_addr() - the bound address, with scheme, into @buf.
 * Returns 0 or -ENOSPC / -errno. Threads: worker. */
BE_EXPORT int be_listener_addr(struct be_listener *l, char *buf, size_t len);

/* be_listener_close() - stop accepting; existing Engines and Sockets stay.
 * Threads: worker. */
BE_EXPORT void be_listener_close(struct be_listener *l);

/*
 * be_sock_connect() - open a Socket to @addr. Reuses this worker's live
 * Engine to the same endpoint, however @addr spells it (tcp, verbs: the
 * same resolved IP address and port; shm: the same name), else starts
 * connecting a new Engine. A host name is resolved here with
 * getaddrinfo(), which blocks; the rest returns at once. The connect
 * tries the name's addresses in turn until one answers ("localhost" may
 * be ::1 first and 127.0.0.1 next); the Engine is reused by the name's
 * first address, so spell a name consistently. Sends queue
 * until the Engine is established; a failed connect reaches the socket as
 * on_close(err) and fails its queued sends. An Engine still connecting
 * whose last Socket is closed is abandoned, so a connect after that
 * starts afresh instead of waiting on one that may hang. Borrows @cbs (copied;
 * on_accept unused).
 * Returns 0, -EINVAL (malformed address, port 0), -EHOSTUNREACH (a name
 * that does not resolve), -EPROTONOSUPPORT, -EMFILE (max_sockets
 * reached), -ENOSPC (a new Engine is needed and this worker has no
 * receive buffers or completion entries left for its first grant), -ENOMEM,
 * or the transport's -errno; nothing is created on error (on a worker's
 * first connect through an RDMA device, whose queues its set-up thread
 * is still making, the transport's error reaches on_close instead). A peer worker
 * out of room refuses the connection: the socket gets
 * on_close(-ECONNREFUSED). Threads: worker.
 */
BE_EXPORT int be_sock_connect(struct be_worker *w, const char *addr, const struct be_sock_cbs *cbs,
			      void *user, struct be_sock **out);

/* Completion of a send: returns @buf to the application; @status is 0
 * (the transport took the message: a small one sent inline was copied
 * into the send queue, any other reached the peer's transport),
 * -ECANCELED (socket closed first), -ECONNRESET (peer closed the socket)
 * or the Engine's error. 0 is a promise of delivery: the message reaches
 * the peer's on_recv, even if @s is closed right after (be_sock_close(),
 * be_worker_destroy()), unless the peer closes its socket first or the
 * Engine fails (the peer dies, the connection breaks: on_close then
 * reports the error). It is not an acknowledgement by the peer
 * application, and requests are the RPC layer's to retry. */
typedef void (*be_send_cb)(struct be_sock *s, void *buf, int status, void *arg);

/*
 * be_sock_send() - send @len bytes at @buf as one message.
 *
 * Ownership: lends @buf (from be_alloc(); may be NULL when @len is 0)
 * until @cb runs, exactly once; do not write or free it before then. On
 * error the caller keeps @buf and @cb never runs. Messages of one socket
 * arrive in order. Closing @s completes pending sends with -ECANCELED.
 * Returns 0, -EINVAL (NULL cb, NULL @buf with @len > 0, or a buffer not
 * from be_alloc() for a message sent before the Engine is established or
 * larger than its eager size: eager_max, less when the peer's receive
 * buffers are smaller), -EMSGSIZE (above max_msg_size or 4 GiB - 1),
 * -ENOTCONN (socket closed by the peer or the Engine failed), -ENOMEM.
 * Threads: worker.
 */
BE_EXPORT int be_sock_send(struct be_sock *s, void *buf, size_t len, be_send_cb cb, void *arg);

/*
 * be_sock_close() - close @s and release the handle. Pending sends
 * complete with -ECANCELED from the next progress (those already on the
 * wire complete with their transport result); no callback of @s runs
 * after this call, except those send completions. The close is clean:
 * the peer's socket receives every message whose send completed with 0
 * (before and after this call) and then gets on_close(0). The worker
 * finishes the close handshake in its progress (or in
 * be_worker_shutdown() / be_worker_destroy()); be_sock_close_notify()
 * says when it is done. Safe inside any callback of @s. Threads: worker.
 */
BE_EXPORT void be_sock_close(struct be_sock *s);

/*
 * Completion of a close (be_sock_close_notify()), run from progress once:
 * @status 0 when the peer answered the close, having received every
 * message of the socket whose send completed with 0; -ECONNRESET when the
 * peer had closed its socket first (the closes crossed, or its on_close
 * came before: what reached it after its own close was discarded);
 * -ECONNREFUSED when the peer refused the socket; the Engine's error when
 * the connection failed first (delivery of what was in flight unknown);
 * -ECANCELED when be_worker_destroy() gave up waiting. 0 also when the
 * peer never heard of the socket (closed before its Engine connected:
 * every send was cancelled).
 */
typedef void (*be_close_cb)(int status, void *arg);

/*
 * be_sock_close_notify() - be_sock_close(@s), then @cb(status, @arg) when
 * the close is done (see be_close_cb): the event a program waits for
 * before it exits or reports its last messages sent. Returns 0, or
 * -EINVAL (NULL @s or @cb, @s already closed: @cb never runs).
 * Threads: worker.
 */
BE_EXPORT int be_sock_close_notify(struct be_sock *s, be_close_cb cb, void *arg);

/*
 * be_sock_fail_engine() - end @s's Engine as its keepalive would after
 * conn_timeout_ms: the connection is dropped, every Socket on it (@s
 * included, and other Sockets to the same peer) gets
 * on_close(BE_ECONNFAULT), and its unsent messages complete with that
 * error; messages whose send completed may be lost, as when a connection
 * dies. For an application that found the connection silent sooner
 * than the keepalive can; the next be_sock_connect() to the peer opens a
 * new Engine. @s stays valid until be_sock_close(). Returns 0 (an
 * established Engine outside progress ends at once, any other in this
 * progress or the next), -EINVAL (NULL @s) or -ENOTCONN (@s has no
 * Engine, or it failed or is failing already). Safe in callbacks.
 * Threads: worker.
 */
BE_EXPORT int be_sock_fail_engine(struct be_sock *s);

/* be_sock_set_user() / be_sock_user() - the pointer handed to callbacks. */
BE_EXPORT void be_sock_set_user(struct be_sock *s, void *user);
BE_EXPORT void *be_sock_user(struct be_sock *s);

/* Counters of one Socket. */
struct be_sock_stats {
	uint32_t size;                        /* set by be_sock_stats() */
	uint64_t msgs_sent, bytes_sent;       /* completed with status 0 */
	uint64_t msgs_recv, bytes_recv;       /* handed to on_recv */
	uint64_t eager_sent, large_sent;
	uint64_t eager_recv, large_recv;
	uint64_t send_errors;                 /* sends completed with an error */
	uint64_t queued;                      /* sends not yet completed (now) */
};

/* Counters of one Engine. */
struct be_engine_stats {
	uint32_t size;                /* set by be_sock_engine_stats() */
	uint64_t msgs_sent, bytes_sent, msgs_recv, bytes_recv;
	uint64_t eager_sent, large_sent, eager_recv, large_recv;
	uint64_t sends_posted;        /* SEND work requests (each one credit) */
	uint64_t frames_batched;      /* frames that shared a SEND with another */
	uint64_t fragments;           /* RDMA WRITE fragments posted */
	uint64_t write_imm_recv;      /* WRITE_WITH_IMM completions received */
	uint64_t credits_granted;     /* peak grant our peer gave us */
	uint64_t credits_peer_max;    /* peak grant we gave the peer */
	uint64_t credits_granted_now; /* the peer's grant to us now */
	uint64_t credits_peer_now;    /* our grant to the peer now (receives reserved) */
	uint64_t max_credits_in_use;  /* peak credits held by our sends; <= credits_granted */
	uint64_t max_peer_credits_in_use; /* peak receives the peer held here; <= credits_peer_max */
	uint64_t credit_grows;        /* times we grew the peer's grant (CREDIT_GROW) */
	uint64_t credit_grow_denied;  /* ... wanted to, but the SRQ or CQ could not take
				       * more, or there was no memory for the frame */
	uint64_t credit_revokes;      /* times we asked receives back (CREDIT_REVOKE) */
	uint64_t credits_reclaimed;   /* receives the peer gave back (CREDIT_RELEASE) */
	uint64_t credit_stalls;       /* times a SEND waited for a credit */
	uint64_t credit_frames_sent;  /* explicit CREDIT frames */
	uint64_t send_window;         /* configured window in bytes */
	uint64_t max_bytes_in_flight; /* peak posted-not-completed bytes; <= send_window */
	uint64_t window_stalls;       /* times the window held a WR back */
	uint64_t mixed_window;        /* bound on bytes in flight when a fragment goes beside
				       * small messages of other sockets (0: send_window) */
	uint64_t max_mixed_in_flight; /* peak bytes in flight after such a fragment; <= mixed_window */
	uint64_t mixed_stalls;        /* times the mixed window held a fragment back */
	uint64_t keepalives_sent, keepalives_recv;
	uint64_t nomem_sent;          /* WriteResponses "no memory" we answered */
	uint64_t nomem_recv;          /* ... we received */
	uint64_t alloc_backoffs;      /* receive-side allocation retries (eager copies,
				       * one-way buffers the transport waits for) */
	uint64_t oneway_sent;         /* large messages sent one-way (tcp: no WriteRequest
				       * round trip, docs/PROTOCOL.md section 4) */
	uint64_t protocol_errors;
	uint64_t sockets;             /* sockets on the engine now */
	uint64_t sockets_opened;      /* ever */
	uint32_t frag_size;
	int state;                    /* 0 connecting, 1 established, 2 failed */
	int error;                    /* the failure, 0 while alive */
	uint64_t reqs_ahead;          /* WriteRequests sent while an earlier granted
				       * message of the socket queue still streamed */
	uint64_t grant_key_short;     /* "no memory" answers (in nomem_sent) because the
				       * transport had no key for the grant: on verbs
				       * no memory window left (docs/SECURITY.md) */
};

/* be_sock_stats() / be_sock_engine_stats() - snapshots. Return 0 or
 * -ENOTCONN when the socket has no Engine any more (closed by either
 * side, or its Engine failed). be_sock_stats() fills @out in both cases
 * (the socket's counters outlive its Engine); be_sock_engine_stats()
 * leaves it alone on error. Threads: worker. */
BE_EXPORT int be_sock_stats_sized(struct be_sock *s, struct be_sock_stats *out);
BE_EXPORT int be_sock_engine_stats_sized(struct be_sock *s, struct be_engine_stats *out);
static inline int be_sock_stats(struct be_sock *s, struct be_sock_stats *out)
{
	out->size = sizeof(*out);
	return be_sock_stats_sized(s, out);
}
static inline int be_sock_engine_stats(struct be_sock *s, struct be_engine_stats *out)
{
	out->size = sizeof(*out);
	return be_sock_engine_stats_sized(s, out);
}

/*
 * be_sock_stats_json() - the socket's counters as one JSON object into
 * @buf, NUL-terminated. Returns the length it needs (like snprintf) or
 * -EINVAL. Threads: worker.
 */
BE_EXPORT int be_sock_stats_json(struct be_sock *s, char *buf, size_t len);

/*
 * be_worker_stats_json() - the worker's Engines (each with its counters),
 * its failed CQ arms ("cq_arm_errors", see be_worker_wait()), the spin
 * be_worker_wait() uses now ("spin_ns": adaptive, 0 .. spin_us) and its
 * receive buffers per transport ("recv": buffers posted, receives
 * reserved by the Engines' grants, bytes, failed reposts
 * "repost_errors"), the connections its listeners refused
 * ("admit_refused": uid rule, shared secret, hook; "limit_refused":
 * max_peer_engines), and the bytes it
 * lends to its peers' large messages ("grant_bytes", peak
 * "grant_bytes_max", see max_worker_grant_bytes; they include the
 * one-way budgets reserved for tcp peers) as one JSON object into @buf,
 * NUL-terminated. Returns the length it needs without the NUL (like
 * snprintf), or -EINVAL. Threads: worker.
 */
BE_EXPORT int be_worker_stats_json(struct be_worker *w, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* BE_SOCK_H */
