/*
 * rx.c - the receive side of an Engine: SRQ completions, frame dispatch
 * and validation, in-order delivery to sockets.
 *
 * Model. A receive completes on the worker's CQ with the sender's
 * connection, hence the Engine. Every receive (SEND or WRITE_WITH_IMM)
 * spends a credit we granted; more than granted is a protocol error. A
 * SEND buffer holds one or more frames; each is decoded by proto.c, then
 * checked against Engine state here (socket ids, message ids), and any
 * violation fails the Engine with BE_EPROTO_PEER and a logged reason:
 * never a crash. Nothing received is dropped unless its socket is going
 * away: DATA for a socket the application closed (or that is closing) is
 * freed, as the peer learns of the close from our SOCK_CLOSE.
 *
 * Eager payloads are copied out of the SRQ buffer into fresh be_alloc()
 * buffers of the exact size, and the SRQ buffer is reposted at the end
 * of the progress call (be__worker_repost_later()), not kept. We
 * chose the copy over handing the SRQ buffer itself to the application:
 * a copy of at most eager_max (8 KiB) bytes costs about a
 * microsecond, whereas lending SRQ buffers would pin 10 KiB per small
 * message for as long as the application keeps it, drain the SRQ under a
 * slow consumer, and make batched frames (several messages per buffer)
 * impossible to hand out separately.
 *
 * When that allocation fails (bemalloc limit), the buffer is not reposted
 * and its credit not returned: it waits on e->rxlog, together with every
 * later buffer of the Engine (order), and is retried with backoff from
 * the timer. The peer runs out of credits and stops: backpressure, not
 * loss.
 *
 * Ordering. Message ids per socket are consecutive. A DATA frame whose
 * socket has nothing pending is delivered at once; otherwise it queues on
 * s->rxq behind the large messages (announced by WRITE_REQ, completed by
 * WRITE_WITH_IMM) that precede it.
 *
 * The socket receive window bounds that queue (docs/PROTOCOL.md, "Socket
 * receive window"). Credits cannot: an eager message queued behind a
 * large one has been copied out of its receive buffer, whose credit is
 * returned at once, and credits are the Engine's, so withholding them for
 * one socket would stop its others. So the bound is the sender's to keep,
 * per socket: it knows which of its messages we hold (those announced
 * behind a large one whose last fragment it has not posted), and stops
 * that socket at our sock_window; a message that would take us past it
 * is a protocol error here (be__sock_rxq_new()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

/*
 * be__sock_rxq_new() - a new message @id of @len bytes joins @s's receive
 * queue, counted against our sock_window; *@out is it (buf NULL, not done),
 * owned by the queue. A message that finds the queue empty always may;
 * past the window the peer broke the protocol: returns -ENOBUFS and
 * queues nothing (the caller fails the Engine with its reason). Out of
 * memory it fails @e itself and returns -ENOMEM.
 */
int be__sock_rxq_new(struct be__engine *e, struct be_sock *s, uint32_t id, size_t len,
		     struct be__rxmsg **out)
{
	uint64_t c = be__sock_win_charge(len);
	struct be__rxmsg *r;

	r = calloc(1, sizeof(*r));
	if (!r) {
		be__engine_fail(e, -ENOMEM, "no memory for a receive");
		return -ENOMEM;
	}
	if (!be__list_empty(&s->rxq) && s->rx_held + c > s->w->ctx->cfg.sock_window) {
		free(r);
		return -ENOBUFS;
	}
	r->id = id;
	r->len = len;
	s->rx_held += c;
	be__list_add_tail(&s->rxq, &r->link);
	s->nrx++;
	*out = r;
	return 0;
}

/* be__sock_rxq_del() - @r leaves @s's receive queue (the caller frees it). */
void be__sock_rxq_del(struct be_sock *s, struct be__rxmsg *r)
{
	be__list_del_init(&r->link);
	s->nrx--;
	s->rx_held -= be__sock_win_charge(r->len);
}

static void rx_deliver_one(struct be_sock *s, void *buf, size_t len)
{
	struct be__engine *e = s->e;

	s->st.msgs_recv++;
	s->st.bytes_recv += len;
	if (e) {
		e->st.msgs_recv++;
		e->st.bytes_recv += len;
	}
	if (!s->cbs.on_recv) {
		be_free(buf);
		return;
	}
	s->w->delivered++;
	be__sock_ref(s);
	s->cbs.on_recv(s, buf, len, s->user);
	be__sock_unref(s);
}

/*
 * be__sock_deliver_rest() - the peer closed @s: hand the application every
 * message that arrived complete, in order, skipping the large ones the
 * peer's close cancelled (they never complete, and the peer's application
 * saw them fail). Incomplete ones stay queued for be__large_release_sock().
 * Stops when the application closes @s from on_recv.
 */
void be__sock_deliver_rest(struct be_sock *s)
{
	struct be__list done, *p, *t;

	be__list_init(&done);
	be__list_for_each_safe(p, t, &s->rxq) {
		struct be__rxmsg *r = be__list_entry(p, struct be__rxmsg, link);

		if (!r->done)
			continue;
		be__sock_rxq_del(s, r);
		be__list_add_tail(&done, p);
	}
	while ((p = be__list_first(&done))) {
		struct be__rxmsg *r = be__list_entry(p, struct be__rxmsg, link);
		void *buf = r->buf;
		size_t len = r->len;

		be__list_del_init(p);
		free(r);
		if (s->app_closed)
			be_free(buf);
		else
			rx_deliver_one(s, buf, len);
	}
}

void be__sock_deliver(struct be_sock *s)
{
	be__sock_ref(s);
	while (!s->app_closed && s->state == BE_SS_OPEN) {
		struct be__list *p = be__list_first(&s->rxq);
		struct be__rxmsg *r;
		void *buf;
		size_t len;

		if (!p)
			break;
		r = be__list_entry(p, struct be__rxmsg, link);
		if (!r->done)
			break;
		be__sock_rxq_del(s, r);
		buf = r->buf;
		len = r->len;
		free(r);
		rx_deliver_one(s, buf, len);
	}
	be__sock_unref(s);
}

static int rx_fail(struct be__engine *e, const struct be__frame *f, const char *why)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "protocol error: %s (%s frame, socket %u, message %u)", why,
		 be__frame_type_str(f->type), f->sock, f->msg);
	be__engine_fail(e, BE_EPROTO_PEER, msg);
	return BE_EPROTO_PEER;
}

static int rx_data(struct be__engine *e, const struct be__frame *f, struct be_sock *s, void *nb)
{
	struct be__rxmsg *r;
	int rc;

	if (s->state != BE_SS_OPEN || s->app_closed) {
		be_free(nb);
		return 0; /* closing: the peer learns it from our SOCK_CLOSE */
	}
	if (f->msg != s->rx_next_id) {
		be_free(nb);
		return rx_fail(e, f, "unexpected message id");
	}
	s->rx_next_id++;
	e->st.eager_recv++;
	s->st.eager_recv++;
	if (f->len)
		memcpy(nb, f->body, f->len);
	if (be__list_empty(&s->rxq)) {
		rx_deliver_one(s, nb, f->len);
		return 0;
	}
	rc = be__sock_rxq_new(e, s, f->msg, f->len, &r);
	if (rc) {
		be_free(nb);
		return rc == -ENOBUFS ? rx_fail(e, f, "socket receive window exceeded") : rc;
	}
	r->buf = nb;
	r->done = true;
	return 0;
}

static int rx_open(struct be__engine *e, const struct be__frame *f)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be_sock *s;
	bool over;
	int rc;

	if (!(f->flags & BE_FRF_OPENER))
		return rx_fail(e, f, "SOCK_OPEN not from the opener");
	if (f->sock >= cfg->max_sockets)
		return rx_fail(e, f, "socket id above the limit we advertised");
	if (be__engine_sock_lookup(e, true, f->sock))
		return rx_fail(e, f, "socket id already open");
	if (!e->acb.on_accept)
		return rx_fail(e, f, "SOCK_OPEN toward the connecting side");
	/* Beyond max_peer_sockets the socket is refused, as on_accept would:
	 * it keeps its id (and counts) until the opener's SOCK_CLOSE. */
	over = !be__peer_sock_ok(e);
	s = be__sock_new(e->w, &e->acb, e->auser);
	if (!s) {
		be__engine_fail(e, -ENOMEM, "no memory for a socket");
		return -ENOMEM;
	}
	rc = be__engine_sock_attach(e, s, false, f->sock);
	if (rc) {
		be__sock_unref(s);
		be__engine_fail(e, rc, "cannot attach a socket");
		return rc;
	}
	s->accepting = true;
	be__sock_ref(s);
	/* A closing Engine (its worker shuts down) takes no new socket. */
	if (over)
		be_log_warn("engine %s: socket %u refused: its peer %s holds %u sockets "
			    "(max_peer_sockets)", e->addr, f->sock, e->pid->id, e->pid->socks - 1);
	rc = e->closing ? -ESHUTDOWN : over ? -EMFILE : s->cbs.on_accept(e->listener, s, s->user);
	s->accepting = false;
	if (e->state == BE_ES_FAILED) {
		be__sock_unref(s);
		return 0;
	}
	if (rc < 0 || s->app_closed || e->closing) {
		struct be__frame a = {
			.type = BE_FR_SOCK_OPEN_ACK,
			.sock = s->id,
			.status = rc < 0 ? rc : e->closing ? -ESHUTDOWN : -ECONNREFUSED,
		};

		/* Refused: keep the id until the opener's SOCK_CLOSE. */
		be__sock_cancel_tx(s, -ECONNREFUSED);
		s->state = BE_SS_CLOSING;
		if (rc < 0 && !s->app_closed) {
			s->app_closed = true;
			be__sock_unref(s);
		} else if (!s->app_closed) {
			/* Accepted, but the worker began shutting down inside
			 * on_accept: the application keeps its handle. */
			be__worker_defer_close(s->w, s, -ESHUTDOWN);
		}
		if (be__engine_ctrl(e, &a))
			be__engine_fail(e, -ENOMEM, "no memory for a control frame");
	}
	be__sock_unref(s);
	return 0;
}

/* Handle one frame. -EAGAIN: retry this frame later (no side effect
 * happened); other negative values: the engine failed. */
static int rx_frame(struct be__engine *e, const struct be__frame *f)
{
	bool peer_opened = f->flags & BE_FRF_OPENER;
	struct be_sock *s = NULL;
	void *nb = NULL;
	int rc = 0;

	/* Before admission only AUTH frames (admit.c). */
	if (BE_UNLIKELY(e->admit != BE_ADM_DONE || f->type == BE_FR_AUTH)) {
		const char *why = be__admit_frame(e, f);

		return why ? rx_fail(e, f, why) : 0;
	}
	switch (f->type) {
	case BE_FR_DATA:
	case BE_FR_SOCK_OPEN_ACK:
	case BE_FR_SOCK_CLOSE:
	case BE_FR_WRITE_REQ:
	case BE_FR_WRITE_RESP:
	case BE_FR_WRITE_NOMEM:
	case BE_FR_WRITE_ONEWAY:
		s = be__engine_sock_lookup(e, peer_opened, f->sock);
		if (!s)
			return rx_fail(e, f, "unknown socket");
		break;
	default:
		break;
	}
	if (f->type == BE_FR_DATA) {
		nb = be_alloc(f->len);
		/* Memory freed in other size classes counts against the limit
		 * until trimmed: trim once before backing off. */
		if (!nb && e->rx_backoff_us && be_alloc_trim())
			nb = be_alloc(f->len);
		if (!nb) {
			e->st.alloc_backoffs++;
			return -EAGAIN;
		}
	}
	if (be__credit_return(&e->cr, f->credits)) {
		be_free(nb);
		return rx_fail(e, f, "credit overflow: more credits returned than used");
	}
	/* Returned credits matter to sends waiting for them, if any. */
	if (f->credits && (!be__list_empty(&e->active) || !be__list_empty(&e->ctrlq)))
		be__engine_kick(e);
	switch (f->type) {
	case BE_FR_DATA:
		rc = rx_data(e, f, s, nb);
		break;
	case BE_FR_SOCK_OPEN:
		rc = rx_open(e, f);
		break;
	case BE_FR_SOCK_OPEN_ACK:
		if (peer_opened || f->status >= 0)
			return rx_fail(e, f, "SOCK_OPEN_ACK must refuse a socket we opened");
		if (s->state == BE_SS_OPEN)
			be__sock_on_peer_close(s, -ECONNREFUSED);
		else
			be__sock_finish_close(s, -ECONNREFUSED);
		break;
	case BE_FR_SOCK_CLOSE:
		if (s->state == BE_SS_OPEN)
			be__sock_on_peer_close(s, 0);
		else
			be__sock_finish_close(s, f->flags & BE_FRF_ACK ? 0 : -ECONNRESET);
		break;
	case BE_FR_WRITE_REQ:
	case BE_FR_WRITE_RESP:
	case BE_FR_WRITE_NOMEM:
		if (s->state == BE_SS_OPEN && !s->app_closed)
			rc = be__large_on_frame(e, s, f);
		break;
	case BE_FR_WRITE_ONEWAY:
		rc = be__oneway_on_frame(e, s, f);
		break;
	case BE_FR_ONEWAY_BUDGET:
		rc = be__oneway_on_budget(e, f);
		break;
	case BE_FR_CREDIT:
		break;
	case BE_FR_CREDIT_GROW:
	case BE_FR_CREDIT_REVOKE:
	case BE_FR_CREDIT_RELEASE: {
		const char *why = be__credit_elastic_frame(e, f);

		if (why)
			return rx_fail(e, f, why);
		break;
	}
	case BE_FR_KEEPALIVE:
		be__keepalive_on_frame(e, f);
		break;
	default:
		return rx_fail(e, f, "unexpected frame type");
	}
	/* After the frame: a RELEASE flagged STARVED ends the revoke that
	 * would have refused the growth. */
	if (!rc && (f->flags & BE_FRF_STARVED) && e->state == BE_ES_ESTABLISHED)
		be__credit_elastic_grow(e, true);
	return rc;
}

static void rx_backlog(struct be__engine *e, uint8_t *buf, uint32_t len, size_t off, bool head)
{
	struct be__rxbacklog *b = calloc(1, sizeof(*b));

	if (!b) {
		be__wdev_repost(e->wd, buf);
		be__engine_fail(e, -ENOMEM, "no memory to hold a receive");
		return;
	}
	b->buf = buf;
	b->len = len;
	b->off = off;
	if (head)
		be__list_add_head(&e->rxlog, &b->link);
	else
		be__list_add_tail(&e->rxlog, &b->link);
}

/* A one-way RECV_IMM behind the backlog waits its turn there, so that it
 * is handled after its WRITE_ONEWAY frame (oneway.c). */
static void rx_backlog_imm(struct be__engine *e, const struct be_xwc *wc)
{
	struct be__rxbacklog *b = calloc(1, sizeof(*b));

	if (!b) {
		be_free(wc->rx_buf);
		be__engine_fail(e, -ENOMEM, "no memory to hold a receive");
		return;
	}
	b->ow_buf = wc->rx_buf;
	b->ow_slot = wc->imm;
	b->len = wc->byte_len;
	be__list_add_tail(&e->rxlog, &b->link);
}

/* Handle the frames of an SRQ buffer from @off. Returns false when it had
 * to stop for memory (the buffer then sits at the head of e->rxlog). */
static bool rx_process(struct be__engine *e, uint8_t *buf, uint32_t len, size_t off)
{
	uint32_t max_data = e->w->ctx->cfg.recv_buf_size - BE_FRAME_HDR;
	struct be__frame f;
	const char *why = "";
	bool ok = true, trig = false;
	int rc;

	e->refs++;
	for (;;) {
		size_t at = off;

		rc = be__frame_next(buf, len, &off, max_data, &f, &why);
		if (rc <= 0)
			break;
		if (!be__frame_credit_only(f.type))
			trig = true;
		rc = rx_frame(e, &f);
		if (rc == -EAGAIN) {
			const struct be_config *cfg = &e->w->ctx->cfg;

			e->rx_backoff_us = e->rx_backoff_us ?
						   BE_MIN(e->rx_backoff_us * 2, cfg->nomem_backoff_max_us) :
						   cfg->nomem_backoff_us;
			e->rx_retry_at = be__now_ns() + (uint64_t)e->rx_backoff_us * 1000;
			be__worker_timer_at(e->w, e->rx_retry_at);
			rx_backlog(e, buf, len, at, true);
			ok = false;
			break;
		}
		if (e->state == BE_ES_FAILED)
			break;
	}
	if (rc < 0 && rc != -EAGAIN && e->state != BE_ES_FAILED) {
		f.type = 0;
		f.sock = f.msg = 0;
		rx_fail(e, &f, why);
	}
	if (ok) {
		e->rx_backoff_us = 0;
		be__worker_repost_later(e, buf, trig || off > 0);
	}
	be__engine_unref(e);
	return ok;
}

void be__engine_on_recv_wc(struct be__wdev *wd, const struct be_xwc *wc)
{
	struct be__engine *e = wc->conn ? wc->conn->user : NULL;
	uint8_t *buf = (uint8_t *)(uintptr_t)wc->wr_id;

	if (wc->status != BE_XWC_SUCCESS) {
		if (wc->status == BE_XWC_WR_FLUSH_ERR && !e)
			return; /* SRQ destroyed: the worker frees its buffers */
		if (e && e->state != BE_ES_FAILED) {
			char why[80];

			snprintf(why, sizeof(why), "receive completion: %s",
				 be__xwc_status_str(wc->status));
			be__engine_fail(e, wc->status == BE_XWC_LOC_LEN_ERR ? BE_EPROTO_PEER :
									      -ECONNRESET, why);
		}
		be__wdev_repost(wd, buf);
		return;
	}
	if (!e || e->state == BE_ES_FAILED || !e->peer.magic) {
		be__wdev_repost(wd, buf);
		be_free(wc->rx_buf); /* one-way data nobody will take */
		return;
	}
	if (be__credit_consume(&e->cr)) {
		be__wdev_repost(wd, buf);
		be_free(wc->rx_buf);
		be__engine_fail(e, BE_EPROTO_PEER,
				"protocol error: peer used more receives than it was granted");
		return;
	}
	if (e->state == BE_ES_ESTABLISHED)
		be__credit_elastic_grow(e, false);
	e->rx_seen = true;
	if (wc->opcode == BE_XWC_RECV_IMM) {
		be__worker_repost_later(e, buf, true);
		e->st.write_imm_recv++;
		if (!e->oneway || !wc->rx_buf)
			be__large_on_imm(e, wc->imm, wc->byte_len);
		else if (!be__list_empty(&e->rxlog))
			rx_backlog_imm(e, wc); /* its WRITE_ONEWAY may be in there */
		else
			be__oneway_on_imm(e, wc->imm, wc->rx_buf, wc->byte_len);
		return;
	}
	if (wc->byte_len > wd->w->ctx->cfg.recv_buf_size) {
		be__wdev_repost(wd, buf);
		be__engine_fail(e, BE_EPROTO_PEER, "protocol error: SEND larger than our buffers");
		return;
	}
	if (!be__list_empty(&e->rxlog)) {
		rx_backlog(e, buf, wc->byte_len, 0, false);
		return;
	}
	rx_process(e, buf, wc->byte_len, 0);
}

void be__engine_rx_retry(struct be__engine *e, uint64_t now)
{
	while (!be__list_empty(&e->rxlog) && e->state != BE_ES_FAILED) {
		struct be__rxbacklog *b = be__list_entry(be__list_first(&e->rxlog),
							 struct be__rxbacklog, link);
		uint8_t *buf = b->buf;
		uint32_t len = b->len;
		size_t off = b->off;

		if (b->revoking) {
			/* A large message waits for its grant's revoke, and
			 * what arrived after it waits behind (large.c). */
			uint32_t token = b->token;

			if (!be__large_imm_ready(e, token))
				break;
			be__list_del_init(&b->link);
			free(b);
			be__large_imm_finish(e, token);
			continue;
		}
		if (now < e->rx_retry_at)
			break;
		be__list_del_init(&b->link);
		if (!buf) {
			void *ob = b->ow_buf;
			uint32_t slot = b->ow_slot;

			free(b);
			be__oneway_on_imm(e, slot, ob, len);
			continue;
		}
		free(b);
		if (!rx_process(e, buf, len, off))
			break;
	}
}

void be__engine_rx_free(struct be__engine *e)
{
	struct be__list *p;

	while ((p = be__list_pop(&e->rxlog))) {
		struct be__rxbacklog *b = be__list_entry(p, struct be__rxbacklog, link);

		if (b->buf)
			be__wdev_repost(e->wd, b->buf);
		else if (!b->revoking) /* a revoking one's grant ends at the reap */
			be_free(b->ow_buf);
		free(b);
	}
}
