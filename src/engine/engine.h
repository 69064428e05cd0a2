/*
 * engine.h - an Engine: one reliable connection to one peer, carrying
 * many Sockets (internal).
 *
 *   be__engine (one xconn) ──< be_sock (by id, two id spaces)
 *     ├─ ctrlq      control frames, sent first
 *     ├─ active     round-robin ring of be__sq
 *     ├─ window     ring of posted WRs
 *     ├─ cr         receive credits both ways (credit.h)
 *     └─ grants     buffers lent to the peer's WRITEs
 *
 * Ownership and lifetime. An Engine belongs to one worker (worker.h) and
 * is touched only by its thread. It is reference counted with a plain
 * int: held by the worker (until it is reaped), by each socket attached
 * to it, and by whatever runs on it across a call that may fail it.
 * Freed at zero. be__engine_fail() is the one way it dies.
 *
 * Files: engine.c (handshake, socket ids, failure), tx.c, rx.c, large.c,
 * credit.c / credit_elastic.c, window.c, keepalive.c.
 */
#ifndef BE_ENGINE_ENGINE_H
#define BE_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <be/be.h>
#include <be/sock.h>
#include "engine/credit.h"
#include "util/list.h"
#include "engine/proto.h"
#include "engine/sock_state.h"
#include "engine/window.h"
#include "engine/worker.h"
#include "xport/xport.h"

/* "scheme://" + canonical address: the Engine reuse key. */
#define BE_ENGINE_KEY_MAX (BE_XPORT_ADDR_MAX + 32)

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
	uint32_t size;             /* bytes of buf: the Engine's sbuf_size when made */
	bool reserve;              /* opened with the reserve credit: credit frames only */
	bool close_ack;            /* holds a SOCK_CLOSE(ACK): its arrival must be seen */
	struct be__list msgs;      /* eager messages to complete with it */
};

struct be__ctrl {
	struct be__list link;
	struct be__frame f;
	uint8_t auth[BE_AUTH_BODY]; /* f.auth of an AUTH frame */
};

struct be__grant {
	struct be__rxmsg *rx;      /* NULL: slot free */
	struct be_sock *sock;
	uint32_t gen;
	uint32_t next_free;
	uint32_t rkey;             /* the transport's grant (xport.h grant) ... */
	bool xgrant;               /* ... if it has grants: revoke at the end */
	uint8_t end;               /* enum be__grant_end (large.c) */
};

/* How far a grant's end has come (large.c, "Lifetime"). */
enum be__grant_end {
	BE_GRANT_LIVE = 0,         /* the peer may write it */
	BE_GRANT_REVOKING,         /* revoke pending: the peer may still write it */
	BE_GRANT_REVOKED,          /* its BE_XWC_REVOKE came: nothing lands any more */
};

struct be__rxbacklog {
	struct be__list link;
	uint8_t *buf;              /* an SRQ buffer, not yet reposted; NULL: a one-way imm */
	uint32_t len;
	size_t off;                /* frames before this were handled */
	void *ow_buf;              /* one-way imm: the message's buffer (owned) */
	uint32_t ow_slot;          /* one-way imm: its slot */
	bool revoking;             /* a large imm whose grant's revoke is pending: ... */
	uint32_t token;            /* ... this one's (large.c); later receives wait */
};

/* A one-way large message the peer is writing to us (oneway.c): from its
 * WRITE_ONEWAY frame to its WRITE_WITH_IMM. */
struct be__owslot {
	bool busy;
	struct be__rxmsg *rx;      /* NULL: discard the data (socket gone) */
	struct be_sock *sock;
	uint64_t len;
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
	bool fail_asked;           /* be_sock_fail_engine(): fail at the next run */
	bool retry_pass;           /* blocked only by our own unposted SEND */
	bool kicked;
	bool reaped;
	bool closing;              /* be__engine_close(): disconnect once nothing is left */
	struct be__list wlink, klink, rlink;
	struct be__list wdlink;    /* wd->waiting: its connect waits for the queues */

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
	struct tx_held *tx_held;   /* in a pass: a SEND the next post takes along (tx.c) */
	struct be__list sbfree;
	uint32_t nsbfree;
	struct be__list backoff;   /* msgs in BE_MS_BACKOFF */
	struct be__list rxlog;     /* receive buffers waiting for memory */
	uint64_t rx_retry_at;
	uint32_t rx_backoff_us;

	struct be__grant *grants;
	uint32_t ngrants, cap_grants, grant_free, grants_live;
	uint64_t grant_bytes;      /* bytes lent to the peer's WRITEs now */

	/* One-way large messages (oneway.c), when both sides' transports
	 * let the receiver allocate (tcp). */
	bool oneway;
	uint64_t ow_tx_used;       /* our slots in use, a bit each */
	uint64_t ow_tx_bytes;      /* bytes of our one-way messages in progress */
	uint64_t ow_tx_budget;     /* ... at most: the peer's budget, within our
				    * max_grant_bytes (0: none came, WRITE_REQ only) */
	bool ow_budget_got;        /* the peer's ONEWAY_BUDGET came (once) */
	uint64_t ow_rx_budget;     /* announced to the peer, reserved in the grant
				    * bounds of its identity and our worker */
	uint64_t ow_rx_bytes;      /* the peer's one-way bytes in progress */
	uint64_t ow_rx_alloc;      /* ... lent by rx_alloc, no RECV_IMM yet */
	bool ow_alloc_wait;        /* rx_alloc waits for a RECV_IMM (budget) */
	struct be__owslot *ow_rx;  /* the peer's slots (BE_ONEWAY_SLOTS), lazily */
	bool ow_stalled;           /* the transport waits for memory to place one */
	uint64_t ow_retry_at;
	uint32_t ow_backoff_us;

	/* Keepalive clock: rx_seen/tx_seen note traffic on the data path
	 * (no clock read there); the tick turns them into last_*_ns. */
	uint64_t last_rx_ns, last_tx_ns, deadline_ns;
	bool rx_seen, tx_seen;
	uint64_t idle_since_ns;    /* connector with no Socket: since when (0: busy) */
	struct be_engine_stats st;

	/* Admission (admit.c): nothing but AUTH frames crosses until admit
	 * is DONE. */
	uint8_t admit;             /* enum be__admit_state */
	bool xestab;               /* the transport reported ESTABLISHED */
	bool auth;                 /* both hold a secret: AUTH frames prove it */
	bool has_cred;             /* acceptor on shm: the peer's uid, gid, pid */
	uint32_t peer_uid, peer_gid;
	int32_t peer_pid;
	uint8_t nonce_c[BE_AUTH_NONCE], nonce_s[BE_AUTH_NONCE];
	uint8_t hello_c[BE_PROTO_HELLO_LEN], hello_s[BE_PROTO_HELLO_LEN]; /* as sent */

	/* The peer's identity (peer.c): acceptor side only, else NULL. */
	struct be__peer *pid;
	bool pid_gone;             /* no longer counted in pid->engines */
};

/* A peer identity (peer.c): what the Engines one client opened to this
 * worker hold together. */
struct be__peer {
	struct be__list link;      /* w->peers */
	char id[BE_XPORT_ADDR_MAX + 16]; /* "uid:1000", "tcp://10.0.0.2" */
	uint32_t refs;             /* Engines of it not yet freed */
	uint32_t engines;          /* ... not yet reaped (max_peer_engines) */
	uint32_t socks;            /* Sockets it opened on them (max_peer_sockets) */
	uint64_t grant_bytes;      /* lent to its WRITEs (max_peer_grant_bytes) */
	uint64_t ow_reserved;      /* ... of them one-way budgets (oneway.c) */
};

enum be__admit_state {
	BE_ADM_DONE = 0,           /* admitted (or no admission left to run) */
	BE_ADM_WAIT_XPORT,         /* connector: until the transport's ESTABLISHED */
	BE_ADM_WAIT_HELLO,         /* acceptor: for the connector's nonce */
	BE_ADM_GOT_HELLO,          /* acceptor: ... came before our ESTABLISHED */
	BE_ADM_WAIT_CHALLENGE,     /* connector: for the acceptor's nonce */
	BE_ADM_WAIT_PROOF,         /* acceptor: for the connector's MAC */
	BE_ADM_WAIT_ACCEPT,        /* connector: for the acceptor's MAC */
	BE_ADM_REFUSING,           /* acceptor: REFUSED queued; the Engine ends once it left */
};

/* A socket's scheduling queue: its own, or its Engine's FIFO when
 * frag_sched is off. */
static inline struct be__sq *be__sock_sq(struct be_sock *s)
{
	return s->e && !s->w->ctx->cfg.frag_sched ? &s->e->fifo : &s->sq;
}

/* ---- functions ---- */

/* engine.c */
int be__engine_key(const struct be_xport_ops *ops, const char *scheme, const char *rest,
		   char *key, size_t len);
int be__engine_connect(struct be_worker *w, struct be__wdev *wd, const char *addr,
		       const char *key, struct be__engine **out);
struct be__engine *be__engine_find(struct be_worker *w, const char *key);
/* The queues @e's connect waited for are set up (@rc 0: the transport
 * connect starts now) or could not be (@rc: @e fails with it). */
void be__engine_queues_ready(struct be__engine *e, int rc);
void be__engine_on_event(struct be__wdev *wd, struct be_xevent *ev);
void be__engine_fail(struct be__engine *e, int err, const char *why);
void be__engine_close(struct be__engine *e);
void be__engine_close_check(struct be__engine *e);
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
void be__sock_deliver_rest(struct be_sock *s);
int be__sock_rxq_new(struct be__engine *e, struct be_sock *s, uint32_t id, size_t len,
		     struct be__rxmsg **out);
void be__sock_rxq_del(struct be_sock *s, struct be__rxmsg *r);

/* credit_elastic.c: growing and shrinking the peer's grant (credit.h).
 * grow after each receive the peer spent (@starved: a frame of it said it
 * waited for a credit); tick at each timer tick; frame handles
 * CREDIT_GROW / _REVOKE / _RELEASE and returns NULL or the protocol
 * violation. */
void be__credit_elastic_grow(struct be__engine *e, bool starved);
void be__credit_elastic_tick(struct be__engine *e);
const char *be__credit_elastic_frame(struct be__engine *e, const struct be__frame *f);

/* admit.c: admission (docs/SECURITY.md). request: an acceptor's checks
 * before it makes an Engine (uid rule, the secret offered, the hook when
 * no secret runs): 0 or a reject reason, counted and logged. established:
 * the transport is up (the connector checked its peer's hello); runs or
 * starts the rest. frame: a frame while not admitted, or an AUTH frame;
 * NULL or the protocol violation. sent: a send completed (an Engine that
 * refused ends once its REFUSED left). */
int be__admit_request(struct be_worker *w, struct be_listener *l, const struct be_xevent *ev,
		      const struct be__hello *peer, const char *addr);
void be__admit_established(struct be__engine *e, const struct be_xevent *ev);
const char *be__admit_frame(struct be__engine *e, const struct be__frame *f);
void be__admit_sent(struct be__engine *e);
/* engine.c: the Engine admitted its peer: it goes ESTABLISHED. */
void be__engine_admitted(struct be__engine *e);

/* peer.c: limits per peer identity (docs/SECURITY.md). request: an
 * acceptor's check before it makes an Engine: 0 and the identity in
 * *@out (to attach, or to forget when no Engine is made), or a reject
 * reason (logged, counted as limit_refused). attach: @e counts toward
 * @p. engine_gone: @e stops counting as live (reaped). put: @e is freed.
 * sock_ok: may the peer of @e open one more Socket. */
int be__peer_request(struct be_worker *w, const struct be_xevent *ev, const char *addr,
		     struct be__peer **out);
void be__peer_attach(struct be__engine *e, struct be__peer *p);
void be__peer_forget(struct be_worker *w, struct be__peer *p);
void be__peer_engine_gone(struct be__engine *e);
void be__peer_put(struct be__engine *e);
bool be__peer_sock_ok(struct be__engine *e);

/* large.c */
/* A WRITE_REQ, WRITE_RESP or WRITE_NOMEM for @s, open and not closed by
 * the application. */
int be__large_on_frame(struct be__engine *e, struct be_sock *s, const struct be__frame *f);
int be__large_on_imm(struct be__engine *e, uint32_t token, uint32_t byte_len);
void be__large_release_sock(struct be__engine *e, struct be_sock *s);
void be__large_nomem_sent(struct be__engine *e, const struct be__frame *f);
void be__large_free_grants(struct be__engine *e);
void be__large_on_revoke(struct be__engine *e, const struct be_xwc *wc);
bool be__large_imm_ready(struct be__engine *e, uint32_t token);
void be__large_imm_finish(struct be__engine *e, uint32_t token);
void be__large_backoff_tick(struct be__engine *e, uint64_t now);

/* oneway.c: large messages without a round trip, on transports whose
 * receiver allocates (docs/PROTOCOL.md, section 4). */
void be__oneway_announce(struct be__engine *e);
int be__oneway_on_budget(struct be__engine *e, const struct be__frame *f);
void be__oneway_reap(struct be__engine *e);
int be__oneway_start(struct be__engine *e, struct be__msg *m, struct be__frame *f);
void be__oneway_sent(struct be__engine *e, struct be__msg *m);
void be__oneway_done(struct be__engine *e, struct be__msg *m);
int be__oneway_on_frame(struct be__engine *e, struct be_sock *s, const struct be__frame *f);
int be__oneway_on_imm(struct be__engine *e, uint32_t slot, void *buf, uint32_t byte_len);
void be__oneway_release_sock(struct be__engine *e, struct be_sock *s);
void be__oneway_tick(struct be__engine *e, uint64_t now);
void be__oneway_free(struct be__engine *e);
int be__oneway_rx_alloc(struct be_xconn *c, uint64_t len, void **out);
void be__oneway_rx_free(struct be_xconn *c, void *buf);

/* keepalive.c */
void be__keepalive_tick(struct be__engine *e, uint64_t now);
void be__keepalive_on_frame(struct be__engine *e, const struct be__frame *f);

#endif /* BE_ENGINE_ENGINE_H */
