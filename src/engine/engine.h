/*
 * engine.h - the objects of the BE core and how they point at each other
 * (internal; shared by src/engine and src/sock).
 *
 *   be_ctx ──< be__cdev (one per transport: device, bemalloc index)
 *     │
 *   be_worker ──< be__wdev (per transport used: evch, cq, srq + buffers)
 *     │  ├──< be_listener
 *     │  └──< be__engine (one xconn) ──< be_sock (by id, two id spaces)
 *     │                     ├─ ctrlq      control frames, sent first
 *     │                     ├─ active     round-robin ring of be__sq
 *     │                     ├─ window     ring of posted WRs
 *     │                     └─ grants     buffers lent to the peer's WRITEs
 *     └─ done/closeq: callbacks deferred to the end of progress
 *
 * Ownership and lifetime. Everything belongs to one worker and is touched
 * only by the thread running it (no locks). Engines and sockets are
 * reference-counted with plain ints: a socket is held by the application
 * handle (until be_sock_close), by its engine's id table, by each of its
 * messages, and while a callback runs; an engine by the worker (until it
 * is reaped) and by each socket attached to it. Freed at zero.
 *
 * Callbacks run only from progress: API calls queue them (done list,
 * close list), so be_sock_close() and friends are safe anywhere.
 */
#ifndef BE_ENGINE_ENGINE_H
#define BE_ENGINE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <be/be.h>
#include <be/sock.h>
#include "engine/credit.h"
#include "engine/list.h"
#include "engine/proto.h"
#include "engine/window.h"
#include "xport/wake.h"
#include "xport/xport.h"

#define BE_CTX_MAX_XPORTS 4
/* "scheme://" + canonical address: the Engine reuse key. */
#define BE_ENGINE_KEY_MAX (BE_XPORT_ADDR_MAX + 32)

/* ---- context and worker ---- */

struct be__cdev {
	const char *name;                /* "tcp", "shm", "verbs" */
	const struct be_xport_ops *ops;
	struct be_xdev *dev;             /* NULL until opened */
	int alloc_dev;                   /* bemalloc device index */
	struct be_xdev_attr attr;
	uint32_t frag_size;              /* default fragment size on this device */
	uint64_t send_window;            /* default send window of its Engines */
	uint32_t frag_bulk;              /* fragment size with no small messages about */
	uint64_t mixed_window;           /* soft limit of its Engines' windows (0: none) */
};

struct be_ctx {
	struct be_config cfg;
	pthread_mutex_t lock;            /* guards opening devices */
	struct be__cdev dev[BE_CTX_MAX_XPORTS];
	int ndev;
	atomic_int workers;
};

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
	/* The region of the last buffer reposted: every receive buffer
	 * lives until the wdev dies, so neither can its region. */
	uintptr_t lkey_base, lkey_end;
	uint32_t lkey;
};

/* A receive buffer whose frames were handled, to go back to its SRQ (and
 * its credit to @e) at the end of the progress call. */
struct be__repost {
	struct be__engine *e;            /* holds a reference */
	void *buf;
	bool trig;                       /* see be__credit_repost() */
};

#define BE_WORKER_REPOST_MAX 64

struct be__call {
	struct be__call *next;
	void (*fn)(struct be_worker *w, void *arg);
	void *arg;
};

struct be_worker {
	struct be_ctx *ctx;
	struct be__wdev *wd[BE_CTX_MAX_XPORTS]; /* by the context's device index */
	struct be__wdev *open[BE_CTX_MAX_XPORTS]; /* the non-NULL of wd[], for progress */
	int nopen;
	struct be__list engines;         /* live and failed-not-reaped */
	struct be__list reap;            /* failed engines awaiting teardown */
	struct be__list kick;            /* engines with sends to schedule */
	struct be__list later;           /* engines to run again next progress */
	struct be__list listeners;
	struct be__list socks;           /* every socket handle not yet freed */
	struct be__list done;            /* be__msg: send callbacks to run */
	struct be__list closeq;          /* be_sock: on_close to run */
	struct be__wake wake;            /* epoll over CQs, event channels, calls */
	_Atomic(struct be__call *) calls;
	pthread_t thr;
	atomic_bool running, stop;
	int in_progress;                 /* > 0 while progress runs (callbacks) */
	uint64_t npolls;                 /* progress calls, for periodic work */
	uint64_t delivered;              /* messages handed to on_recv */
	bool later_held;                 /* the last progress left w->later alone */
	struct be__repost repost[BE_WORKER_REPOST_MAX];
	uint32_t nrepost;
	struct be__msg *msg_cache;       /* free message records (a stack) */
	uint32_t nmsg_cache;
	bool ev_ready;                   /* epoll saw an event channel readable */
	bool timers_due;                 /* read the clock at the next progress */
	uint64_t ev_polled_ns;           /* last timed poll of the event channels */
	bool idle_wake;                  /* the last wait slept and found nothing */
	uint64_t next_tick_ns;
	unsigned int nengines;
};

struct be_listener {
	struct be_worker *w;
	struct be__wdev *wd;
	struct be_xlistener *xl;
	struct be_sock_cbs cbs;
	void *user;
	char scheme[16];
	struct be__list link;
};

/* ---- messages, scheduling queues, sockets ---- */

enum be__msg_kind {
	BE_MSG_DATA = 0,   /* application message (eager or large, decided when sent) */
	BE_MSG_OPEN,       /* SOCK_OPEN of its socket */
};

enum be__msg_state {
	BE_MS_QUEUED = 0,  /* in sq->txq */
	BE_MS_SENT_EAGER,  /* copied into a staging SEND, waits for its completion */
	BE_MS_REQ,         /* WRITE_REQ sent, in sq->fragq, waits for WRITE_RESP */
	BE_MS_BACKOFF,     /* got WRITE_NOMEM; on e->backoff until retry_at */
	BE_MS_RETRY,       /* WRITE_REQ must be sent again */
	BE_MS_GRANTED,     /* WRITE_RESP arrived: fragments may go */
	BE_MS_POSTED,      /* every fragment posted; completes when they retire */
	BE_MS_DONE,        /* on w->done */
};

struct be__msg {
	struct be__list link;      /* txq, fragq, sendbuf->msgs, w->done */
	struct be__list blink;     /* e->backoff */
	struct be_sock *sock;      /* holds a reference */
	struct be__sq *sq;
	void *buf;
	size_t len;
	be_send_cb cb;
	void *arg;
	uint32_t id;               /* per-socket message id */
	uint8_t kind, state;
	bool large;
	int status;                /* final status once cancelled or failed */
	/* large path */
	uint64_t raddr;
	uint32_t rkey, token;
	size_t off;                /* bytes posted */
	uint32_t lkey;             /* of buf, found by be_sock_send */
	uint32_t unretired;        /* posted WRs not yet retired */
	uint64_t retry_at;
	uint32_t backoff_us;
};

/* A scheduling queue: a socket's own, or the engine's FIFO. */
struct be__sq {
	struct be__list txq;       /* messages whose first frame is not sent */
	struct be__list fragq;     /* large messages past WRITE_REQ, in order */
	uint32_t nfrag;
	struct be__list link;      /* in e->active */
	bool fifo;                 /* engine FIFO: strict order, no interleave */
};

enum be__sock_state {
	BE_SS_OPEN = 0,
	BE_SS_CLOSING,             /* we sent SOCK_CLOSE (or a refusal); waiting for theirs */
	BE_SS_DEAD,                /* detached from the engine */
};

struct be__rxmsg {
	struct be__list link;      /* s->rxq, in message id order */
	uint32_t id;
	void *buf;
	size_t len;
	bool done;                 /* payload complete */
	bool granted;              /* buf lent to the peer (slot valid) */
	uint32_t slot;
};

struct be_sock {
	struct be_worker *w;
	struct be__engine *e;      /* NULL once dead */
	struct be_sock_cbs cbs;
	void *user;
	uint32_t id;
	bool mine;                 /* we opened it: our id space */
	uint8_t state;
	bool app_closed;           /* be_sock_close() called */
	bool notified;             /* on_close queued or ran */
	bool accepting;            /* inside on_accept */
	int refs;
	int close_reason;
	uint32_t tx_next_id;
	uint32_t rx_next_id;
	struct be__sq sq;
	struct be__list rxq;       /* messages announced, not yet delivered */
	uint32_t nrx;
	struct be__list wlink;     /* w->socks */
	struct be__list clink;     /* w->closeq */
	struct be_sock_stats st;
};

/* ---- engines ---- */

enum be__engine_state {
	BE_ES_CONNECTING = 0,
	BE_ES_ESTABLISHED = 1,
	BE_ES_FAILED = 2,
};

struct be__sendbuf {
	struct be__list link;      /* e->sbfree */
	uint8_t *buf;
	uint32_t used;
	uint32_t nframes;
	uint32_t lkey;             /* of buf on the Engine's device */
	bool reserve;              /* opened with the reserve credit: credit frames only */
	struct be__list msgs;      /* eager messages to complete with it */
};

struct be__ctrl {
	struct be__list link;
	struct be__frame f;
};

struct be__grant {
	struct be__rxmsg *rx;      /* NULL: slot free */
	struct be_sock *sock;
	uint32_t gen;
	uint32_t next_free;
};

struct be__rxbacklog {
	struct be__list link;
	uint8_t *buf;              /* an SRQ buffer, not yet reposted */
	uint32_t len;
	size_t off;                /* frames before this were handled */
};

struct be__engine {
	struct be_worker *w;
	struct be__wdev *wd;
	const struct be_xport_ops *ops;
	struct be_xconn *conn;
	char addr[BE_XPORT_ADDR_MAX + 16]; /* "scheme://rest" as given, for logs and stats */
	char key[BE_ENGINE_KEY_MAX]; /* connector: reuse key (be__engine_key); else "" */
	bool connector;
	bool reusable;             /* connector side and not failed: be_sock_connect may reuse */
	uint8_t state;
	int err;
	int refs;
	bool in_pass;              /* the scheduler runs (no reentry) */
	bool retry_pass;           /* blocked only by our own unposted SEND */
	bool kicked;
	bool reaped;
	struct be__list wlink, klink, rlink;

	struct be__hello peer;     /* peer's handshake */
	struct be_sock_cbs acb;    /* acceptor side: callbacks for sockets the peer opens */
	void *auser;
	struct be_listener *listener; /* for on_accept; NULL once closed */

	struct be__credit cr;
	struct be__window win;
	uint32_t eager_max;        /* largest DATA payload we send */
	uint32_t sbuf_size;        /* = peer's receive buffer size */
	uint32_t frag_size;        /* while other Sockets send small messages */
	uint32_t frag_bulk;        /* while they do not (>= frag_size) */
	uint32_t small_seq;        /* small messages sent, and by which queue */
	uint32_t small_seen;
	struct be__sq *small_sq;
	uint32_t mixed_left;       /* fragments still sent at frag_size */
	uint32_t max_inline;
	bool gather3;              /* WRs take 3 SGEs: tx_send_alone() may be used */
	uint32_t granted_to_peer;  /* credits reserved in wd: our grant to the peer */
	bool grow_denied;          /* a grant growth failed: not again before the tick */

	struct be_sock **mine, **theirs;
	uint32_t cap_mine, cap_theirs;
	uint32_t *free_ids;
	uint32_t nfree_ids, cap_free_ids, next_id;
	uint32_t nsocks;

	struct be__sq fifo;        /* frag_sched off: every message, in order */
	struct be__list active;    /* be__sq with work, round-robin */
	struct be__list ctrlq;
	struct be__sendbuf *cur;   /* open batch */
	struct be__list sbfree;
	uint32_t nsbfree;
	struct be__list backoff;   /* msgs in BE_MS_BACKOFF */
	struct be__list rxlog;     /* receive buffers waiting for memory */
	uint64_t rx_retry_at;
	uint32_t rx_backoff_us;

	struct be__grant *grants;
	uint32_t ngrants, cap_grants, grant_free, grants_live;
	uint64_t grant_bytes;      /* bytes lent to the peer's WRITEs now */

	/* Keepalive clock: rx_seen/tx_seen note traffic on the data path
	 * (no clock read there); the tick turns them into last_*_ns. */
	uint64_t last_rx_ns, last_tx_ns, deadline_ns;
	bool rx_seen, tx_seen;
	uint64_t idle_since_ns;    /* connector with no Socket: since when (0: busy) */
	struct be_engine_stats st;
};

/* ---- shared internal functions ---- */

/* config.c */
int be__config_check(struct be_config *cfg);

/* ctx.c: open (once) the device of transport @name. */
int be__ctx_dev(struct be_ctx *ctx, const char *name, struct be__cdev **out);

/* worker.c */
int be__worker_wdev(struct be_worker *w, const char *xport, struct be__wdev **out);
/* An Engine's first grant (@credits receives) and its send queue's CQ
 * entries; -ENOSPC when the SRQ or the CQ cannot take them. */
int be__wdev_reserve(struct be__wdev *wd, uint32_t credits);
/* Undo be__wdev_reserve() for an Engine whose grant is now @credits. */
void be__wdev_unreserve(struct be__wdev *wd, uint32_t credits);
/* A grant growing or shrinking by @n receives (elastic credits). */
int be__wdev_reserve_recv(struct be__wdev *wd, uint32_t n);
void be__wdev_unreserve_recv(struct be__wdev *wd, uint32_t n);
void be__wdev_repost(struct be__wdev *wd, void *buf);
void be__worker_repost_later(struct be__engine *e, void *buf, bool trig);
void be__worker_defer_msg(struct be_worker *w, struct be__msg *m, int status);
void be__worker_later(struct be_worker *w, struct be__engine *e);
void be__worker_timer_at(struct be_worker *w, uint64_t when);
struct be__msg *be__worker_msg_get(struct be_worker *w);
void be__worker_msg_put(struct be_worker *w, struct be__msg *m);
void be__worker_defer_close(struct be_worker *w, struct be_sock *s, int reason);
int be__worker_run_deferred(struct be_worker *w);

/* engine.c */
int be__engine_key(const struct be_xport_ops *ops, const char *scheme, const char *rest,
		   char *key, size_t len);
int be__engine_connect(struct be_worker *w, struct be__wdev *wd, const char *addr,
		       const char *key, struct be__engine **out);
struct be__engine *be__engine_find(struct be_worker *w, const char *key);
void be__engine_on_event(struct be__wdev *wd, struct be_xevent *ev);
void be__engine_fail(struct be__engine *e, int err, const char *why);
void be__engine_reap(struct be__engine *e);
void be__engine_unref(struct be__engine *e);
void be__engine_tick(struct be__engine *e, uint64_t now);
int be__engine_sock_attach(struct be__engine *e, struct be_sock *s, bool mine, uint32_t id);
void be__engine_sock_detach(struct be__engine *e, struct be_sock *s);
struct be_sock *be__engine_sock_lookup(struct be__engine *e, bool peer_opened, uint32_t id);
void be__engine_stats(struct be__engine *e, struct be_engine_stats *out);

/* tx.c */
void be__engine_kick(struct be__engine *e);
void be__engine_run(struct be__engine *e);
int be__engine_send_now(struct be__engine *e, struct be__sq *sq, struct be__msg *m);
int be__engine_lkey(const struct be__engine *e, const void *p, size_t len, uint32_t *lkey);
void be__sq_activate(struct be__engine *e, struct be__sq *sq);
int be__engine_ctrl(struct be__engine *e, const struct be__frame *f);
void be__engine_on_send_wc(struct be__engine *e, const struct be_xwc *wc);
void be__engine_retire_all(struct be__engine *e);
void be__msg_finish(struct be__engine *e, struct be__msg *m, int status);
void be__sendbuf_free_all(struct be__engine *e);
void be__sendbuf_prealloc(struct be__engine *e, int n);

/* rx.c */
void be__engine_on_recv_wc(struct be__wdev *wd, const struct be_xwc *wc);
void be__engine_rx_retry(struct be__engine *e, uint64_t now);
void be__engine_rx_free(struct be__engine *e);
void be__sock_deliver(struct be_sock *s);

/* credit_elastic.c: growing and shrinking the peer's grant (credit.h).
 * grow after each receive the peer spent (@starved: a frame of it said it
 * waited for a credit); tick at each timer tick; frame handles
 * CREDIT_GROW / _REVOKE / _RELEASE and returns NULL or the protocol
 * violation. */
void be__credit_elastic_grow(struct be__engine *e, bool starved);
void be__credit_elastic_tick(struct be__engine *e);
const char *be__credit_elastic_frame(struct be__engine *e, const struct be__frame *f);

/* large.c */
int be__large_on_req(struct be__engine *e, struct be_sock *s, const struct be__frame *f);
int be__large_on_resp(struct be__engine *e, struct be_sock *s, const struct be__frame *f);
int be__large_on_nomem(struct be__engine *e, struct be_sock *s, const struct be__frame *f);
int be__large_on_imm(struct be__engine *e, uint32_t token, uint32_t byte_len);
void be__large_release_sock(struct be__engine *e, struct be_sock *s);
void be__large_free_grants(struct be__engine *e);
void be__large_backoff_tick(struct be__engine *e, uint64_t now);

/* sock.c */
void be__sock_ref(struct be_sock *s);
void be__sock_unref(struct be_sock *s);
struct be_sock *be__sock_new(struct be_worker *w, const struct be_sock_cbs *cbs, void *user);
void be__sock_cancel_tx(struct be_sock *s, int status);
void be__sock_engine_gone(struct be_sock *s, int reason);
void be__sock_on_peer_close(struct be_sock *s, int reason);
void be__sock_finish_close(struct be_sock *s);

/* keepalive.c */
void be__keepalive_tick(struct be__engine *e, uint64_t now);

#endif /* BE_ENGINE_ENGINE_H */
