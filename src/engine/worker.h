/*
 * worker.h - the worker: a thread domain and everything that runs on it
 * (internal).
 *
 *   be_worker ──< be__wdev (per transport used: evch, cq, srq + buffers)
 *     ├──< be_listener
 *     ├──< be__engine (engine.h) ──< be_sock (sock_state.h)
 *     ├─ kick/later   Engines whose scheduler runs in this progress / next
 *     ├─ done/closeq/closedone  callbacks deferred to the end of progress
 *     ├─ repost       receive buffers to repost at the end of progress
 *     └─ calls        functions other threads asked it to run
 *
 * Ownership and threads. Everything of a worker belongs to it and is
 * touched only by the thread running its progress (no locks): its
 * queues, Engines, Sockets and Listeners. The exceptions are atomics:
 * the call stack (be_worker_call), pushed lock-free from any thread and
 * drained by progress, and the library thread's running and stop flags
 * (src/sock/worker.c). Callbacks run only from progress: API calls
 * queue them (done, closeq, closedone), so be_sock_close() and friends are safe
 * inside any callback.
 *
 * Receive buffers. A wdev owns every buffer it ever posted on its SRQ
 * (wd->bufs) until the worker dies. Engines reserve their peers' grants
 * from it: the credits granted to live Engines never exceed the buffers
 * posted, and the CQ holds every posted receive plus every Engine's send
 * queue. Limits: srq_max_depth and the device's max_srq_wr; cq_depth and
 * the device's max_cqe.
 */
#ifndef BE_ENGINE_WORKER_H
#define BE_ENGINE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <be/sock.h>
#include "engine/ctx.h"
#include "util/list.h"
#include "xport/wake.h"
#include "xport/xport.h"

struct be__engine;
struct be__msg;
struct be_sock;

struct be__wdev {
	struct be_worker *w;
	struct be__cdev *cd;
	struct be_xevch *evch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	void **bufs;                     /* every receive buffer we own */
	uint32_t nbufs, capbufs;
	uint32_t reserved;               /* credits granted to peers of live engines */
	uint32_t cq_reserved;            /* cq entries promised to engines' send queues */
	bool cq_armed;
	/* Receive buffers whose repost failed: posted again at the next
	 * progress (be__wdev_retry_reposts), so the SRQ does not shrink. */
	void **unposted;
	uint32_t nunposted, capunposted;
	uint64_t repost_errors;          /* failed srq_post_recv of a receive */
	/* The region of the last buffer reposted: every receive buffer
	 * lives until the wdev dies, so neither can its region. */
	uintptr_t lkey_base, lkey_end;
	uint32_t lkey;
	/* Queues set up off the worker's thread (be__wdev_start): until
	 * be__wdev_finish() joins the builder, the worker touches only the
	 * counters above (reserved, cq_reserved) and the list below. */
	bool building;                   /* queued on w->setup, not yet taken */
	atomic_bool built;               /* the set-up thread is done (release) */
	int build_rc;                    /* its result, read once built */
	int failed;                      /* -errno: no queues; see be__worker_wdev */
	struct be__list waiting;         /* Engines whose connect waits (wdlink) */
};

/* A receive buffer whose frames were handled, to go back to its SRQ (and
 * its credit to @e) at the end of the progress call. */
struct be__repost {
	struct be__engine *e;            /* holds a reference */
	void *buf;
	bool trig;                       /* see be__credit_repost() */
};

#define BE_WORKER_REPOST_MAX 64

/* A worker's set-up thread (wdev.c): builds wdevs off the worker's
 * thread. Started with the worker when its context has RDMA devices. */
struct be__wsetup {
	pthread_t thr;
	pthread_mutex_t mu;              /* guards jobs, njobs, stop */
	pthread_cond_t cv;               /* jobs queued or stop */
	pthread_cond_t done;             /* a wdev was built */
	struct be__wdev *jobs[BE_CTX_MAX_DEVS]; /* one wdev per device at most */
	int njobs;
	bool stop;
	bool running;                    /* started, not stopped (worker) */
};

struct be__call {
	struct be__call *next;
	void (*fn)(struct be_worker *w, void *arg);
	void *arg;
};

struct be_worker {
	struct be_ctx *ctx;
	struct be__wdev *wd[BE_CTX_MAX_DEVS]; /* by the context's device index */
	struct be__wdev *open[BE_CTX_MAX_DEVS]; /* the non-NULL of wd[], for progress */
	int nopen;
	int nbuilding;                   /* wd[] building, not yet taken over */
	struct be__wsetup setup;
	struct be__list engines;         /* live and failed-not-reaped */
	struct be__list reap;            /* failed engines awaiting teardown */
	struct be__list kick;            /* engines with sends to schedule */
	struct be__list later;           /* engines to run again next progress */
	struct be__list listeners;
	struct be__list socks;           /* every socket handle not yet freed */
	struct be__list done;            /* be__msg: send callbacks to run */
	struct be__list closeq;          /* be_sock: on_close to run */
	struct be__list closedone;       /* be_sock: close callbacks to run */
	bool shutdown;                   /* be__worker_close() began */
	struct be__wake wake;            /* epoll over CQs, event channels, calls */
	_Atomic(struct be__call *) calls;
	pthread_t thr;
	atomic_bool running, stop;
	int in_progress;                 /* > 0 while progress runs (callbacks) */
	pthread_t progress_thread;       /* who runs it then (debug builds check it) */
	uint64_t npolls;                 /* progress calls, for periodic work */
	uint64_t delivered;              /* messages handed to on_recv */
	bool later_held;                 /* the last progress left w->later alone */
	struct be__repost repost[BE_WORKER_REPOST_MAX];
	uint32_t nrepost;
	struct be__msg *msg_cache;       /* free message records (a stack) */
	uint32_t nmsg_cache;
	bool ev_ready;                   /* epoll saw an event channel readable */
	uint64_t cq_arm_errors;          /* cq_arm failures (be_worker_wait returned them) */
	uint64_t admit_refused;          /* connections not admitted (admit.c) */
	uint64_t limit_refused;          /* ... refused by a per-peer limit (peer.c) */
	struct be__list peers;           /* be__peer: identities of accepted peers */
	uint64_t grant_bytes;            /* lent to all peers' WRITEs now (large.c) */
	uint64_t grant_bytes_max;        /* ... its peak */
	uint64_t ow_reserved;            /* ... of grant_bytes: one-way budgets (oneway.c) */
	bool timers_due;                 /* read the clock at the next progress */
	uint64_t ev_polled_ns;           /* last timed poll of the event channels */
	bool ev_slept;                   /* a sleep's epoll covered them since */
	bool idle_wake;                  /* the last wait slept and found nothing */
	uint64_t spin_ns;                /* be_worker_wait's spin now (adaptive, <= spin_us) */
	uint32_t spin_probe;             /* waits with no spin, to probe now and then */
	uint32_t spin_probe_every;       /* ... after this many (backs off) */
	uint64_t next_tick_ns;
	unsigned int nengines;
};

/* A listener: connection requests on its transport listener become
 * acceptor-side Engines of its worker (engine.c), whose sockets are
 * offered to cbs.on_accept. */
struct be_listener {
	struct be_worker *w;
	struct be__wdev *wd;
	struct be_xlistener *xl;
	struct be_sock_cbs cbs;
	void *user;
	be_admit_cb admit;               /* be_listener_set_admit(), NULL: none */
	void *admit_user;
	char scheme[16];
	struct be__list link;            /* w->listeners */
};

/* ---- the worker (worker.c) ---- */

/* The entry points of include/be/sock.h's be_worker_create,
 * be_worker_progress, be_worker_wait and be_worker_call, with their
 * contracts. */
int be__worker_create(struct be_ctx *ctx, struct be_worker **out);
int be__worker_progress(struct be_worker *w);
int be__worker_wait(struct be_worker *w, int timeout_ms);
int be__worker_call(struct be_worker *w, void (*fn)(struct be_worker *w, void *arg), void *arg);
/* be_worker_shutdown() without the listeners (the caller stops them
 * first): every Socket closed with its handshake (on_close(-ESHUTDOWN)
 * for those the application holds, none if @quiet), every Engine
 * disconnected once nothing is left on it, new Engines and Sockets
 * refused. Progresses until done or @timeout_ms (-1: no bound) passed;
 * 0, -ETIMEDOUT, -EINPROGRESS from inside progress, or progress' error. */
int be__worker_close(struct be_worker *w, int timeout_ms, bool quiet);
/* Teardown in two steps, with the library thread stopped: the first
 * counts the worker as inside progress from then on (kicks and callbacks
 * are queued, not run) and runs the calls queued so far; the caller then
 * closes its listeners; destroy fails every Engine (sends complete with
 * -ECANCELED, on_close is not delivered), runs the send callbacks,
 * releases the socket handles still open, and frees the queues and the
 * worker. */
void be__worker_destroy_begin(struct be_worker *w);
void be__worker_destroy(struct be_worker *w);

/*
 * The thread rule of include/be/sock.h, checked in debug builds (no
 * NDEBUG): while the library thread runs @w only that thread may use it,
 * and while progress runs (callbacks) only the thread running it. An
 * application that breaks the rule corrupts the worker's lists, so a
 * debug build stops at the first call that does: assert() names the
 * function. Cheap: an atomic load and pthread_self(). Release builds
 * check nothing.
 */
#ifndef NDEBUG
#define BE_WORKER_ASSERT_THREAD(w) be__worker_assert_thread((w), __func__)
void be__worker_assert_thread(struct be_worker *w, const char *fn);
#else
#define BE_WORKER_ASSERT_THREAD(w) ((void)0)
#endif
/* Inside @w's progress on this thread (a callback, a be_worker_call()
 * function), or on @w's library thread: where @w cannot be stopped or
 * destroyed. */
bool be__worker_busy_here(struct be_worker *w);
/* The library thread of @w marks itself (src/sock/worker.c). */
void be__worker_lib_thread_enter(struct be_worker *w);

/* ---- a worker's queues on one transport (wdev.c) ---- */

int be__wdev_create(struct be_worker *w, struct be__cdev *cd, struct be__wdev **out);
/* be__wdev_create() on @w's set-up thread: *@out at once, building;
 * when done that thread sets wd->built and kicks the worker's eventfd.
 * Engines may reserve from it meanwhile. 0, -ENOMEM, or -EAGAIN (no
 * set-up thread: build it here). */
int be__wdev_start(struct be_worker *w, struct be__cdev *cd, struct be__wdev **out);
/* Wait until @wd is built and post the receive buffers reserved
 * meanwhile. 0 or -errno (@wd has no queues then). Worker's thread. */
int be__wdev_finish(struct be__wdev *wd);
void be__wdev_destroy(struct be__wdev *wd);
/* Start and stop a worker's set-up thread. start: 0 or -errno. stop:
 * once the wdevs queued are built (a no-op if not running). */
int be__wsetup_start(struct be__wsetup *ws);
void be__wsetup_stop(struct be__wsetup *ws);

/* The wdev of the device of transport @xport that @addr is on (as
 * be__ctx_dev(): @passive for a listen address; NULL: any device), set
 * up on first use (tcp or shm device opened, queues created, srq_depth
 * buffers posted, fds watched); worker.c. For a connect on an RDMA
 * device the queues are set up by a thread of their own: the wdev comes
 * back building, and the Engine's transport connect waits for them
 * (be__engine_connect). 0 or -errno. */
int be__worker_wdev(struct be_worker *w, const char *xport, const char *addr, bool passive,
		    struct be__wdev **out);
/* An Engine's first grant (@credits receives) and its send queue's CQ
 * entries; -ENOSPC when the SRQ or the CQ cannot take them. */
int be__wdev_reserve(struct be__wdev *wd, uint32_t credits);
/* Undo be__wdev_reserve() for an Engine whose grant is now @credits. */
void be__wdev_unreserve(struct be__wdev *wd, uint32_t credits);
/* A grant growing or shrinking by @n receives (elastic credits). */
int be__wdev_reserve_recv(struct be__wdev *wd, uint32_t n);
void be__wdev_unreserve_recv(struct be__wdev *wd, uint32_t n);
/* Post @buf, one of wd->bufs, on the SRQ again. 0, or the transport's
 * -errno: then the failure is counted (repost_errors, in the worker's
 * stats) and @buf kept for be__wdev_retry_reposts(); the caller must not
 * owe its credit to the peer. */
int be__wdev_repost(struct be__wdev *wd, void *buf);
/* Post the buffers whose repost failed again (progress calls it while
 * wd->nunposted). */
void be__wdev_retry_reposts(struct be__wdev *wd);

/* ---- deferred work and timers ---- */

void be__worker_repost_later(struct be__engine *e, void *buf, bool trig);
void be__worker_defer_msg(struct be_worker *w, struct be__msg *m, int status);
void be__worker_later(struct be_worker *w, struct be__engine *e);
void be__worker_timer_at(struct be_worker *w, uint64_t when);
struct be__msg *be__worker_msg_get(struct be_worker *w);
void be__worker_msg_put(struct be_worker *w, struct be__msg *m);
void be__worker_defer_close(struct be_worker *w, struct be_sock *s, int reason);
void be__worker_defer_close_done(struct be_worker *w, struct be_sock *s, int status);
int be__worker_run_deferred(struct be_worker *w);

#endif /* BE_ENGINE_WORKER_H */
