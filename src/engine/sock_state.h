/*
 * sock_state.h - a socket, its messages and its scheduling queue
 * (internal).
 *
 *   be_sock ── sq: txq    messages whose first frame is not sent
 *     │            fragq  large messages past WRITE_REQ, in order
 *     └─ rxq             messages announced, not yet delivered
 *
 * Model. A socket is a logical channel on one Engine, named on the wire
 * by an id its opener chose. Opening is one SOCK_OPEN frame that
 * be_sock_connect queues ahead of the data and the peer's rx.c answers;
 * the rest of a socket's life, closing included, is the state machine of
 * sock_state.c. A message record (be__msg) is one send: queued on its
 * socket's scheduling queue (or its Engine's FIFO when frag_sched is
 * off), then on the staging SEND that carries it or in the fragment
 * scheduler, then on the worker's done list until its callback runs.
 * Records come from the worker's cache (be__worker_msg_get).
 *
 * Ownership. A socket belongs to its worker's thread. It is reference
 * counted with a plain int: held by the application handle (until
 * be_sock_close), by its Engine's id table (until detached), by each of
 * its messages, by a queued on_close and while a callback runs. Freed at
 * zero.
 */
#ifndef BE_ENGINE_SOCK_STATE_H
#define BE_ENGINE_SOCK_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <be/sock.h>
#include "util/list.h"

struct be__engine;

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
	bool oneway;               /* large, sent one-way: rkey holds its slot */
	int status;                /* final status once cancelled or failed */
	/* large path */
	uint64_t raddr;
	uint32_t rkey, token;
	size_t off;                /* bytes posted */
	uint32_t lkey;             /* of buf, found by be_sock_send */
	uint32_t unretired;        /* posted WRs not yet retired */
	uint64_t win_at;           /* its socket's tx_win before it was announced */
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
	BE_SS_CLOSING,             /* we sent SOCK_CLOSE (or a refusal); waiting for theirs;
				    * or the peer's SOCK_CLOSE is being handled */
	BE_SS_DEAD,                /* detached from the engine */
};

struct be__rxmsg {
	struct be__list link;      /* s->rxq, in message id order */
	uint32_t id;
	void *buf;
	size_t len;
	bool done;                 /* payload complete */
	bool granted;              /* buf lent to the peer (slot valid) */
	bool oneway;               /* waits for its one-way data (e->ow_rx slot) */
	bool nomem_due;            /* our WRITE_NOMEM for it is queued, not yet sent */
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
	int end_status;            /* what a close would report once the socket ended
				    * without one: -ECONNRESET (peer closed), the Engine's error */
	be_close_cb close_cb;      /* be_sock_close_notify(); NULL once queued */
	void *close_arg;
	int close_status;
	struct be__list cdlink;    /* w->closedone */
	uint32_t tx_next_id;
	uint32_t rx_next_id;
	struct be__sq sq;
	struct be__list rxq;       /* messages announced, not yet delivered */
	uint32_t nrx;
	/* The socket receive window (docs/PROTOCOL.md): rx_held is what rxq
	 * counts against our sock_window; tx_win counts every message we
	 * announced, so that tx_win - win_at of our oldest large message not
	 * yet fully posted is what the peer holds of ours. */
	uint64_t rx_held;
	uint64_t tx_win;
	struct be__list wlink;     /* w->socks */
	struct be__list clink;     /* w->closeq */
	struct be_sock_stats st;
};

void be__sock_ref(struct be_sock *s);
void be__sock_unref(struct be_sock *s);
struct be_sock *be__sock_new(struct be_worker *w, const struct be_sock_cbs *cbs, void *user);
void be__sock_cancel_tx(struct be_sock *s, int status);
void be__sock_engine_gone(struct be_sock *s, int reason);
void be__sock_on_peer_close(struct be_sock *s, int reason);
void be__sock_finish_close(struct be_sock *s, int status);
void be__sock_close(struct be_sock *s);
void be__sock_shutdown(struct be_sock *s);

#endif /* BE_ENGINE_SOCK_STATE_H */
