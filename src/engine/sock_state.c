/*
 * sock_state.c - a socket's life: creation, the close handshake,
 * cancellation, on_close, and the references that keep it alive.
 *
 * Model. A socket is a logical channel on one Engine, identified on the
 * wire by an id its opener chose, in the opener's id space (a frame says
 * with BE_FRF_OPENER from which side's space the id comes). Opening is
 * one SOCK_OPEN frame queued ahead of the socket's data, so data never
 * waits a round trip. Closing is a handshake: each side sends SOCK_CLOSE
 * once; a side frees what it lent the peer (buffers granted for large
 * messages) and drops the id only when the peer's SOCK_CLOSE arrives,
 * because the peer posts nothing for the socket after it and RC order
 * guarantees its earlier RDMA WRITEs landed before. A refusal (on_accept
 * returning an error) is a SOCK_OPEN_ACK with the error in place of the
 * acceptor's SOCK_CLOSE.
 *
 * References: the application handle (until be_sock_close), the engine's
 * id table (until the socket is detached), each queued message, each
 * queued on_close, and callbacks in progress.
 *
 * Who calls what. The public entry points (src/sock/sock.c) check the
 * application's arguments, open sockets (be_sock_connect queues the
 * SOCK_OPEN) and queue sends; the acceptor's side of an open is rx_open()
 * in rx.c. Everything else of a socket's life is here, for the Engine to
 * call from its receive path and its failure path. Threads: the worker's.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine/engine.h"

void be__sock_ref(struct be_sock *s)
{
	s->refs++;
}

void be__sock_unref(struct be_sock *s)
{
	if (--s->refs > 0)
		return;
	be__list_del_init(&s->wlink);
	free(s);
}

struct be_sock *be__sock_new(struct be_worker *w, const struct be_sock_cbs *cbs, void *user)
{
	struct be_sock *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->w = w;
	if (cbs)
		s->cbs = *cbs;
	s->user = user;
	s->refs = 1;
	be__list_init(&s->sq.txq);
	be__list_init(&s->sq.fragq);
	be__list_init(&s->sq.link);
	be__list_init(&s->rxq);
	be__list_init(&s->clink);
	be__list_init(&s->cdlink);
	be__list_add_tail(&w->socks, &s->wlink);
	return s;
}

/* Remove @m from whatever queue holds it before it was posted. */
static void sock_msg_unqueue(struct be__msg *m)
{
	be__list_del_init(&m->link);
	be__list_del_init(&m->blink);
	if (m->state >= BE_MS_REQ && m->state <= BE_MS_GRANTED)
		m->sq->nfrag--;
}

/*
 * be__sock_cancel_tx() - complete every send of @s not yet on the wire
 * with @status. Messages with fragments posted stop fragmenting and
 * complete with @status when those retire (the transport still reads
 * their buffers until then).
 */
void be__sock_cancel_tx(struct be_sock *s, int status)
{
	struct be__sq *sq = be__sock_sq(s);
	struct be__list *p, *t;
	struct be__list *qs[2] = { &sq->txq, &sq->fragq };
	int i;

	for (i = 0; i < 2; i++) {
		be__list_for_each_safe(p, t, qs[i]) {
			struct be__msg *m = be__list_entry(p, struct be__msg, link);

			if (m->sock != s)
				continue;
			sock_msg_unqueue(m);
			if (m->unretired) {
				m->state = BE_MS_POSTED;
				m->status = status;
			} else {
				be__worker_defer_msg(s->w, m, status);
			}
		}
	}
}

/* Drop what the socket received but did not deliver. Granted buffers stay
 * (the peer may still write them) unless @all. */
static void sock_free_rx(struct be_sock *s, bool all)
{
	struct be__list *p, *t;

	if (all && s->e) {
		be__large_release_sock(s->e, s);
		return;
	}
	be__list_for_each_safe(p, t, &s->rxq) {
		struct be__rxmsg *r = be__list_entry(p, struct be__rxmsg, link);

		if (r->granted || r->oneway)
			continue;
		be__sock_rxq_del(s, r);
		be_free(r->buf);
		free(r);
	}
}

void be__sock_engine_gone(struct be_sock *s, int reason)
{
	be__sock_cancel_tx(s, reason);
	sock_free_rx(s, false);
	s->end_status = reason;
	if (s->state == BE_SS_OPEN)
		be__worker_defer_close(s->w, s, reason);
	else
		be__worker_defer_close_done(s->w, s, reason); /* the peer never answered */
	/* Granted buffers are freed by the engine once its connection is
	 * destroyed (be__large_free_grants), then the socket detaches. */
}

static int sock_ctrl_close(struct be_sock *s, bool ack)
{
	struct be__frame f = {
		.type = BE_FR_SOCK_CLOSE,
		.flags = (uint8_t)((s->mine ? BE_FRF_OPENER : 0) | (ack ? BE_FRF_ACK : 0)),
		.sock = s->id,
	};

	return be__engine_ctrl(s->e, &f);
}

/*
 * The peer closed @s (SOCK_CLOSE, or a refusal: SOCK_OPEN_ACK): its sends
 * fail, what it sent before arrived and is delivered now, even behind a
 * large message it cancelled (a message whose send completed with 0 is
 * never lost to a clean close), then we answer and report on_close.
 */
void be__sock_on_peer_close(struct be_sock *s, int reason)
{
	struct be__engine *e = s->e;

	be__sock_cancel_tx(s, reason == -ECONNREFUSED ? -ECONNREFUSED : -ECONNRESET);
	/* No longer open: a be_sock_close() from an on_recv below only
	 * releases the handle (the answer is ours to send). */
	s->state = BE_SS_CLOSING;
	s->end_status = reason ? reason : -ECONNRESET;
	be__sock_ref(s);
	be__sock_deliver_rest(s);
	if (e->state != BE_ES_FAILED) {
		be__large_release_sock(e, s);
		if (sock_ctrl_close(s, true))
			be__engine_fail(e, -ENOMEM, "no memory for a control frame");
	}
	be__worker_defer_close(s->w, s, reason);
	if (e->state != BE_ES_FAILED)
		be__engine_sock_detach(e, s);
	if (s->app_closed) /* closed from an on_recv above */
		be__worker_defer_close_done(s->w, s, s->end_status);
	be__sock_unref(s);
}

/*
 * The peer's last word on @s, which we closed (or refused): its close
 * completes with @status, 0 when the peer answered our SOCK_CLOSE (it
 * handled everything we sent before), -ECONNRESET when the closes crossed
 * (the peer closed its socket first and discarded what came after),
 * -ECONNREFUSED when it refused the socket.
 */
void be__sock_finish_close(struct be_sock *s, int status)
{
	struct be__engine *e = s->e;

	be__large_release_sock(e, s);
	s->end_status = status;
	be__worker_defer_close_done(s->w, s, status);
	be__engine_sock_detach(e, s);
}

/*
 * Close @s toward the peer: sends not yet on the wire complete with
 * -ECANCELED, SOCK_CLOSE follows what is on the wire, and the close is
 * done when the peer answers (be__sock_finish_close). A socket the peer
 * never heard of (its OPEN still queued) or whose Engine failed is done
 * at once; one that already ended reports how it ended.
 */
static void sock_close(struct be_sock *s)
{
	struct be__engine *e = s->e;
	bool open_sent = true;
	struct be__list *p;

	if (!e || s->state != BE_SS_OPEN) {
		if (s->state == BE_SS_DEAD)
			be__worker_defer_close_done(s->w, s, s->end_status);
		return; /* CLOSING: the answer completes it */
	}
	/* An OPEN still queued means the peer never heard of us. */
	for (p = be__sock_sq(s)->txq.next; p != &be__sock_sq(s)->txq; p = p->next) {
		struct be__msg *m = be__list_entry(p, struct be__msg, link);

		if (m->sock == s && m->kind == BE_MSG_OPEN)
			open_sent = false;
	}
	be__sock_cancel_tx(s, -ECANCELED);
	sock_free_rx(s, !open_sent);
	if (e->state == BE_ES_FAILED) {
		be__worker_defer_close_done(s->w, s, e->err);
	} else if (!open_sent) {
		be__worker_defer_close_done(s->w, s, 0);
		be__engine_sock_detach(e, s);
	} else if (s->accepting) {
		/* Closed inside on_accept: the refusal path answers. */
	} else {
		s->state = BE_SS_CLOSING;
		if (sock_ctrl_close(s, false))
			be__engine_fail(e, -ENOMEM, "no memory for a control frame");
	}
}

/*
 * be__sock_close() - the application lets go of @s (be_sock_close). What
 * is not on the wire yet completes with -ECANCELED and undelivered
 * messages are dropped; a socket the peer knows of starts the close
 * handshake (SOCK_CLOSE; the id is dropped when the peer's arrives), one
 * it never heard of is detached at once. Drops the handle's reference.
 */
void be__sock_close(struct be_sock *s)
{
	if (!s || s->app_closed)
		return;
	s->app_closed = true;
	sock_close(s);
	be__sock_unref(s);
}

/*
 * be__sock_shutdown() - the worker shuts down: close @s as be_sock_close()
 * would, but the application keeps its handle (until be_sock_close() or
 * be_worker_destroy()) and learns of it by on_close(-ESHUTDOWN).
 */
void be__sock_shutdown(struct be_sock *s)
{
	if (s->app_closed || s->state != BE_SS_OPEN)
		return;
	be__sock_ref(s);
	be__worker_defer_close(s->w, s, -ESHUTDOWN);
	sock_close(s);
	be__sock_unref(s);
}
