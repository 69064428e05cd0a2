/*
 * tx.c - the send side of an Engine: the fragment scheduler, batching of
 * frames into SENDs, posting under credits and the send window, and
 * retiring completions.
 *
 * Model. One scheduler pass (be__engine_run) first emits queued control
 * frames (WriteResponses, closes, keepalives: they unblock the peer), then
 * gives turns round-robin to the scheduling queues on e->active. A turn
 * does one unit of work: one eager message, one WriteRequest, or one
 * fragment of a large message. Within a pass the small units go first and
 * their SEND is posted before the pass's fragments, so a small message
 * waits at most for the fragments already in flight, never for a whole
 * large transfer (no head-of-line blocking). With frag_sched off every message
 * goes through the Engine's single FIFO queue instead, and a large message
 * blocks everything behind it, for comparison (be-perf hol).
 *
 * Frames are appended to an open staging buffer (e->cur, a bemalloc buffer
 * of the peer's receive buffer size) and posted as one SEND when it is
 * full, when a WR of another kind must go, or at the end of the pass:
 * several queued messages share a SEND and a credit. Eager payloads are
 * copied there; their send callbacks run when that SEND completes.
 *
 * Limits: a SEND or WRITE_WITH_IMM needs a credit (credit.h); every WR
 * needs room in the send window and the WR ring (window.h). When either is
 * missing the pass stops; a completion, a returned credit, or a timer
 * kicks the Engine again. While other queues send small messages, a
 * fragment also needs room in the mixed window (the window's soft limit,
 * on devices that have one): a small message then waits behind at most
 * that many bytes of the stream, not the whole window.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

#define TX_SBFREE_MAX 16

/* What one turn of a queue did: nothing to do, a unit of work, a
 * fragment; TURN_WAIT: this queue's fragment does not fit the window now
 * (other queues' small messages may); TURN_BLOCKED: nothing can go. */
enum { TURN_IDLE = 0, TURN_DID, TURN_FRAG, TURN_WAIT, TURN_BLOCKED };

void be__engine_kick(struct be__engine *e)
{
	if (!e || e->state == BE_ES_FAILED)
		return;
	if (!e->w->in_progress && e->state == BE_ES_ESTABLISHED && !e->in_pass) {
		/* Called by the application outside progress: send at once. */
		be__list_del_init(&e->klink);
		e->kicked = false;
		be__engine_run(e);
		return;
	}
	if (!e->kicked) {
		e->kicked = true;
		be__list_add_tail(&e->w->kick, &e->klink);
	}
}

void be__sq_activate(struct be__engine *e, struct be__sq *sq)
{
	if (e && !be__list_linked(&sq->link))
		be__list_add_tail(&e->active, &sq->link);
}

int be__engine_ctrl(struct be__engine *e, const struct be__frame *f)
{
	struct be__ctrl *c;

	if (!e || e->state == BE_ES_FAILED)
		return 0;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->f = *f;
	if (f->type == BE_FR_AUTH) {
		memcpy(c->auth, f->auth, BE_AUTH_BODY);
		c->f.auth = c->auth;
	}
	be__list_add_tail(&e->ctrlq, &c->link);
	be__engine_kick(e);
	return 0;
}

/* ---- staging buffers ---- */

/*
 * be__engine_lkey() - the lkey on @e's device of [@p, @p + @len), which
 * must lie in one bemalloc region: what a WR may read in place. Returns
 * 0 or -EINVAL (bemalloc does not know @p, or the range leaves its
 * region).
 */
int be__engine_lkey(const struct be__engine *e, const void *p, size_t len, uint32_t *lkey)
{
	struct be_alloc_region r;

	if (be_alloc_lookup(p, e->wd->cd->alloc_dev, &r) ||
	    (const char *)p + len > (const char *)r.base + r.len)
		return -EINVAL;
	*lkey = r.lkey;
	return 0;
}

static struct be__sendbuf *tx_sendbuf_new(struct be__engine *e)
{
	struct be__sendbuf *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->size = e->sbuf_size;
	sb->buf = be_alloc(sb->size);
	if (!sb->buf || be__engine_lkey(e, sb->buf, sb->size, &sb->lkey)) {
		be_free(sb->buf);
		free(sb);
		return NULL;
	}
	be__list_init(&sb->link);
	be__list_init(&sb->msgs);
	return sb;
}

static struct be__sendbuf *tx_sendbuf_get(struct be__engine *e)
{
	struct be__list *p = be__list_first(&e->sbfree);
	struct be__sendbuf *sb;

	if (p) {
		be__list_del_init(p);
		e->nsbfree--;
		sb = be__list_entry(p, struct be__sendbuf, link);
	} else {
		sb = tx_sendbuf_new(e);
		if (!sb)
			return NULL;
	}
	sb->used = 0;
	sb->nframes = 0;
	sb->reserve = false;
	sb->close_ack = false;
	return sb;
}

void be__sendbuf_prealloc(struct be__engine *e, int n)
{
	while (n-- > 0) {
		struct be__sendbuf *sb = tx_sendbuf_new(e);

		if (!sb)
			return;
		be__list_add_tail(&e->sbfree, &sb->link);
		e->nsbfree++;
	}
}

static void tx_sendbuf_put(struct be__engine *e, struct be__sendbuf *sb)
{
	/* One of the small buffers of the admission (admit.c) is not kept. */
	if (e->nsbfree >= TX_SBFREE_MAX || sb->size != e->sbuf_size) {
		be_free(sb->buf);
		free(sb);
		return;
	}
	be__list_add_tail(&e->sbfree, &sb->link);
	e->nsbfree++;
}

void be__sendbuf_free_all(struct be__engine *e)
{
	struct be__list *p;

	while ((p = be__list_pop(&e->sbfree))) {
		struct be__sendbuf *sb = be__list_entry(p, struct be__sendbuf, link);

		be_free(sb->buf);
		free(sb);
	}
	e->nsbfree = 0;
}

/* The SEND of @sb completed (or, inline, was posted): its eager messages
 * complete with @err and it goes back to the free list. */
static void tx_sendbuf_done(struct be__engine *e, struct be__sendbuf *sb, int err)
{
	struct be__list *p;

	while ((p = be__list_pop(&sb->msgs)))
		be__msg_finish(e, be__list_entry(p, struct be__msg, link), err);
	tx_sendbuf_put(e, sb);
}

/* ---- posting ---- */

/*
 * A staged SEND held back for the pass's first fragment (be__engine_run):
 * the frames staged before a pass's fragments (a one-way message's
 * WRITE_ONEWAY, the WriteResponses a pass answers with) and that
 * fragment go to the transport as one chain, so one post_send covers
 * both: one sendmsg() on tcp instead of two, one doorbell on verbs. The
 * SEND stays first on the wire, as when it was posted alone.
 */
struct tx_held {
	struct be_xsend_wr wr;
	struct be_xsge sge;
	struct be__sendbuf *sb;
	bool inl;
};

/* The held SEND was posted: its Engine counts it, and an inline one's
 * buffer and messages are free at once (the transport copied it). */
static void tx_held_posted(struct be__engine *e, struct tx_held *h)
{
	e->st.sends_posted++;
	if (h->sb->nframes > 1)
		e->st.frames_batched += h->sb->nframes;
	e->tx_seen = true;
	if (h->inl)
		tx_sendbuf_done(e, h->sb, 0); /* may free sb */
}

/* The post of @wr behind the held SEND @h (either may be NULL) failed
 * with @rc, @bad the first WR refused. */
static void tx_post_failed(struct be__engine *e, struct be_xsend_wr *wr, struct tx_held *h,
			   const struct be_xsend_wr *bad, int rc)
{
	/* @wr (last in the window) did not go; nor the held SEND when it
	 * was refused first: it is the open batch again, whose messages
	 * the Engine's failure completes. */
	if (wr)
		be__window_unpush(&e->win);
	if (h && bad == &h->wr) {
		be__window_unpush(&e->win);
		e->cur = h->sb;
	} else if (h) {
		tx_held_posted(e, h);
	}
	be__engine_fail(e, rc, "post_send failed");
}

/* Inline: every eager send that goes alone posts here. */
static inline int tx_post(struct be__engine *e, struct be_xsend_wr *wr)
{
	struct tx_held *h = e->tx_held;
	struct be_xsend_wr *bad = NULL, *first = wr;
	int rc;

	if (h) {
		e->tx_held = NULL;
		h->wr.next = wr;
		first = &h->wr;
	}
	rc = e->ops->post_send(e->conn, first, &bad);
	if (BE_UNLIKELY(rc))
		tx_post_failed(e, wr, h, bad, rc);
	else if (h)
		tx_held_posted(e, h);
	return rc;
}

/* Build the SEND of the open staging buffer into @p (window record
 * pushed): the staging buffer is no longer open. */
static void tx_flush_build(struct be__engine *e, struct tx_held *p)
{
	struct be__sendbuf *sb = e->cur;
	bool sig;

	*p = (struct tx_held){ .sb = sb };
	p->sge.lkey = sb->lkey;
	p->sge.addr = (uint64_t)(uintptr_t)sb->buf;
	p->sge.length = sb->used;
	p->wr.opcode = BE_XWR_SEND;
	p->wr.sg_list = &p->sge;
	p->wr.num_sge = 1;
	/* An inline SEND was copied by the transport at post: its staging
	 * buffer and its messages are free at once, and nothing waits for
	 * its completion (it is signaled only by the quarter rule). */
	p->inl = sb->used <= e->max_inline;
	/* An unsignaled inline SEND counts no window bytes: its record may
	 * wait for a later signaled WR, and bytes nobody signals for must
	 * not keep a large fragment out of the window (it holds no memory
	 * of ours, and at most max_inline bytes of link). One that answers
	 * a peer's close is signaled: a closing Engine disconnects only
	 * once it arrived (be__engine_close_check). */
	p->wr.wr_id = be__window_push(&e->win,
				      !p->inl ? BE_WR_SEND :
				      sb->close_ack ? BE_WR_SEND_INLINE_SIG : BE_WR_SEND_INLINE,
				      p->inl ? 0 : sb->used, p->inl ? NULL : sb, &sig);
	p->wr.flags = (sig ? BE_XWR_F_SIGNALED : 0) | (p->inl ? BE_XWR_F_INLINE : 0);
	e->cur = NULL;
}

/* Post the open staging buffer as one SEND. Not while a SEND is held:
 * only fragments are posted then. */
static int tx_flush(struct be__engine *e)
{
	struct tx_held h;

	if (!e->cur)
		return 0;
	assert(!e->tx_held);
	tx_flush_build(e, &h);
	e->tx_held = &h;
	return tx_post(e, NULL); /* failed: the engine completes sb's messages */
}

/* Build the open staging buffer's SEND into @h, for the next post. */
static void tx_flush_hold(struct be__engine *e, struct tx_held *h)
{
	assert(!e->tx_held);
	tx_flush_build(e, h);
	e->tx_held = h;
}

/* Post a held SEND that no fragment took along. */
static void tx_post_held(struct be__engine *e)
{
	if (e->tx_held)
		tx_post(e, NULL);
}

/* Room in the window for @bytes more, counting the unposted staging
 * buffer and keeping a ring slot for it. */
static bool tx_room(struct be__engine *e, uint64_t bytes, bool new_wr)
{
	uint64_t pending = e->cur ? e->cur->used : 0;
	uint32_t slots = (e->cur ? 1u : 0u) + (new_wr ? 1u : 0u);

	if (e->win.count + slots > e->win.cap) {
		e->win.stalls++;
		return false;
	}
	if (e->win.in_flight + pending + bytes <= e->win.limit ||
	    (e->win.in_flight == 0 && pending == 0))
		return true;
	/* Only the unposted staging buffer is in the way: nothing in
	 * flight will complete to kick us, so retry once it is posted. */
	if (e->win.in_flight == 0)
		e->retry_pass = true;
	e->win.stalls++;
	return false;
}

/*
 * Append frame @f (payload @payload for DATA) to the staging buffer,
 * opening one (and taking a credit) when needed. @reserve: a
 * credit-returning frame that may take the last credit and may not share
 * a buffer with data. Returns 0, -EAGAIN (no credit, window or memory
 * right now) or the engine's failure.
 */
static int tx_emit(struct be__engine *e, struct be__frame *f, const void *payload, bool reserve)
{
	uint32_t size = be__frame_size(f->type == BE_FR_DATA ? f->len : be__frame_body_len(f->type));
	int rc;

	if (e->cur && (e->cur->used + size > e->cur->size || (e->cur->reserve && !reserve))) {
		rc = tx_flush(e);
		if (rc)
			return rc;
	}
	if (!e->cur) {
		if (!tx_room(e, size, true))
			return -EAGAIN;
		if (be__credit_take(&e->cr, reserve))
			return -EAGAIN;
		e->cur = tx_sendbuf_get(e);
		if (!e->cur) {
			/* Give the credit back; retry when memory frees up
			 * (the timer kicks Engines with work left). */
			e->cr.avail++;
			e->st.alloc_backoffs++;
			be__worker_timer_at(e->w, be__now_ns() +
						  (uint64_t)e->w->ctx->cfg.nomem_backoff_us * 1000);
			return -EAGAIN;
		}
		e->cur->reserve = reserve;
	} else if (!tx_room(e, size, false)) {
		return -EAGAIN;
	}
	f->credits = be__credit_collect(&e->cr);
	f->flags |= be__credit_flags(&e->cr);
	e->cur->used += be__frame_encode(e->cur->buf + e->cur->used, f, payload);
	e->cur->nframes++;
	return 0;
}

/*
 * Fragment size for queue @sq. A fragment is what a small message of
 * another Socket may wait behind (on the link; on shm and tcp also the
 * CPU copy that keeps the worker from its CQ), so fragments are frag_size
 * while other queues send small messages, and for TX_MIXED_FRAGS
 * fragments after the last one (also the span of the mixed window); with
 * the stream alone on the Engine they grow to frag_bulk, which costs fewer
 * WRs and passes per byte.
 */
#define TX_MIXED_FRAGS 64

static uint32_t tx_frag_size(struct be__engine *e, const struct be__sq *sq)
{
	if (e->small_seq != e->small_seen) {
		e->small_seen = e->small_seq;
		if (e->small_sq != sq)
			e->mixed_left = TX_MIXED_FRAGS;
	}
	return e->mixed_left ? e->frag_size : e->frag_bulk;
}

/* One fragment of the granted large message @m. */
static int tx_fragment(struct be__engine *e, struct be__msg *m)
{
	size_t left = m->len - m->off;
	uint32_t n = (uint32_t)BE_MIN(left, (size_t)tx_frag_size(e, m->sq));
	bool last = n == left, sig;
	struct be_xsend_wr wr = { 0 };
	struct be_xsge sge;
	int rc;

	if (!tx_room(e, n, true))
		return TURN_WAIT;
	/* Beside small messages, the stream keeps at most the mixed window
	 * in flight (the window's soft limit): that is what a small message
	 * posted now queues behind. */
	e->win.soft_on = e->mixed_left > 0;
	if (!be__window_soft_fits(&e->win, n))
		return TURN_WAIT;
	if (last && be__credit_take(&e->cr, false))
		return TURN_BLOCKED;
	sge.lkey = m->lkey;
	sge.addr = (uint64_t)(uintptr_t)m->buf + m->off;
	sge.length = n;
	wr.opcode = last ? BE_XWR_WRITE_IMM : BE_XWR_WRITE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.remote_addr = m->raddr + m->off;
	wr.rkey = m->rkey;
	wr.imm = m->token;
	/* One-way: the first fragment tells the receiver how much to
	 * allocate (xport.h, BE_XWR_F_RX_ALLOC). */
	if (m->oneway && m->off == 0 && !last)
		wr.imm = (uint32_t)m->len;
	wr.wr_id = be__window_push(&e->win, last ? BE_WR_FRAG_LAST : BE_WR_FRAG, n, m, &sig);
	wr.flags = (sig ? BE_XWR_F_SIGNALED : 0) | (m->oneway ? BE_XWR_F_RX_ALLOC : 0);
	rc = tx_post(e, &wr);
	if (rc)
		return TURN_BLOCKED;
	m->off += n;
	m->unretired++;
	e->st.fragments++;
	if (e->mixed_left)
		e->mixed_left--;
	if (last) {
		be__list_del_init(&m->link);
		m->sq->nfrag--;
		m->state = BE_MS_POSTED;
		e->tx_seen = true;
	}
	return TURN_FRAG;
}

static int tx_write_req(struct be__engine *e, struct be__msg *m)
{
	struct be__frame f = {
		.type = BE_FR_WRITE_REQ,
		.flags = m->sock->mine ? BE_FRF_OPENER : 0,
		.sock = m->sock->id,
		.msg = m->id,
		.length = m->len,
	};
	int rc = tx_emit(e, &f, NULL, false);

	return rc ? TURN_BLOCKED : TURN_DID;
}

/*
 * The socket receive window, sender side (docs/PROTOCOL.md, "Socket
 * receive window"). The peer holds a message of ours on its socket's
 * receive queue from its announcement (DATA, WRITE_REQ, WRITE_ONEWAY)
 * until every earlier large message of the socket completed there, which
 * happens in order after that message's last fragment. So while our
 * oldest large message of the socket waits for its last fragment to be
 * posted, everything announced since it (itself included: tx_win -
 * win_at) is held there, or was delivered already; once that fragment is
 * posted nothing announced afterwards waits for it. A message may be
 * announced when the socket holds nothing there, or when it fits the
 * peer's sock_window beside what it holds. The blocked socket's queue
 * leaves the round-robin (TURN_IDLE) and is activated again by what moves
 * that large message on (a WriteResponse, a retry, its last fragment).
 */
static bool tx_win_fits(const struct be__engine *e, const struct be__sq *sq,
			const struct be__msg *m)
{
	const struct be__list *p;
	uint64_t held = 0;

	for (p = sq->fragq.next; p != &sq->fragq; p = p->next) {
		const struct be__msg *x = be__list_entry(p, struct be__msg, link);

		if (x->sock == m->sock) {
			held = m->sock->tx_win - x->win_at;
			break;
		}
	}
	return !held || held + be__sock_win_charge(m->len) <= e->peer.sock_window;
}

/* @m was announced: it counts on its socket's window from now on. */
static void tx_win_add(struct be__msg *m)
{
	m->win_at = m->sock->tx_win;
	m->sock->tx_win += be__sock_win_charge(m->len);
}

/*
 * Does a large message of @sq wait for memory at the peer (answered "no
 * memory" and not granted since: large.c keeps its backoff until the
 * grant)? Then @sq asks no grant for a later one: the peer would lend
 * the later message the memory the earlier one waits for, and with
 * max_grant_bytes holding fewer messages than max_reqs the later ones
 * took it all, could not be sent before the earlier one, and the socket
 * stood still for good. They ask once it is granted.
 */
static bool tx_nomem_waits(const struct be__sq *sq)
{
	const struct be__list *p;

	for (p = sq->fragq.next; p != &sq->fragq; p = p->next) {
		const struct be__msg *m = be__list_entry(p, const struct be__msg, link);

		if (m->backoff_us || m->state == BE_MS_BACKOFF || m->state == BE_MS_RETRY)
			return true;
	}
	return false;
}

/* May large message @m go one-way (tx_turn: be__oneway_start())? Not
 * when the Engine did not negotiate it, nor once the peer's budget came
 * and @m does not fit it alone (a budget of 0 included): @m then takes
 * the WRITE_REQ path. Before the budget came, it may. */
static bool tx_oneway_may(const struct be__engine *e, const struct be__msg *m)
{
	return e->oneway && (!e->ow_budget_got || m->len <= e->ow_tx_budget);
}

/*
 * Grants asked for ahead: should @sq announce its next large message
 * (a WriteRequest) before the next fragment of its granted oldest one?
 * Yes while fewer than max_reqs are in progress, so the WriteResponse
 * comes back while the granted messages before it still stream. Asked
 * only once those were all posted, the WriteRequest queued behind their
 * bytes (a window on the link, the ring on shm) and the sender stood
 * still while the receiver drained them and answered: on shm a pause
 * every max_reqs messages, 19 % of a be-perf bw run (1 MiB messages).
 * Not on a strict FIFO queue (the large message goes first), nor for a
 * message that goes one-way (no grant to ask for): tx_oneway_may().
 */
static bool tx_req_ahead(const struct be__engine *e, const struct be__sq *sq)
{
	const struct be__list *p = be__list_first(&sq->txq);
	const struct be__msg *m;

	if (!p || sq->fifo || sq->nfrag >= e->w->ctx->cfg.max_reqs)
		return false;
	m = be__list_entry(p, struct be__msg, link);
	return m->kind != BE_MSG_OPEN && m->len > e->eager_max && m->len <= e->peer.max_msg_size &&
	       !tx_oneway_may(e, m) && tx_win_fits(e, sq, m) && !tx_nomem_waits(sq);
}

/* Announce large message @m, the head of @sq's txq, with a WriteRequest;
 * it waits on the fragq for the answer. */
static int tx_req(struct be__engine *e, struct be__sq *sq, struct be__msg *m)
{
	m->large = true;
	if (tx_write_req(e, m) == TURN_BLOCKED)
		return TURN_BLOCKED;
	m->state = BE_MS_REQ;
	tx_win_add(m);
	be__list_del_init(&m->link);
	be__list_add_tail(&sq->fragq, &m->link);
	sq->nfrag++;
	return TURN_DID;
}

/* One unit of work of queue @sq. */
static int tx_turn(struct be__engine *e, struct be__sq *sq)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be__list *p;
	struct be__msg *m;
	struct be__frame f = { 0 };
	int ow;

	p = be__list_first(&sq->fragq);
	if (p) {
		m = be__list_entry(p, struct be__msg, link);
		if (m->state == BE_MS_GRANTED) {
			if (!tx_req_ahead(e, sq))
				return tx_fragment(e, m);
			if (tx_req(e, sq, be__list_entry(be__list_first(&sq->txq), struct be__msg,
							 link)) == TURN_BLOCKED)
				return TURN_BLOCKED;
			e->st.reqs_ahead++;
			return TURN_DID;
		}
	}
	for (p = sq->fragq.next; p != &sq->fragq; p = p->next) {
		m = be__list_entry(p, struct be__msg, link);
		if (m->state == BE_MS_RETRY) {
			if (tx_write_req(e, m) == TURN_BLOCKED)
				return TURN_BLOCKED;
			m->state = BE_MS_REQ;
			return TURN_DID;
		}
	}
	p = be__list_first(&sq->txq);
	if (!p)
		return TURN_IDLE;
	if (sq->fifo && !be__list_empty(&sq->fragq))
		return TURN_IDLE; /* strict FIFO: the large message goes first */
	m = be__list_entry(p, struct be__msg, link);
	f.flags = m->sock->mine ? BE_FRF_OPENER : 0;
	f.sock = m->sock->id;
	if (m->kind == BE_MSG_OPEN) {
		f.type = BE_FR_SOCK_OPEN;
		if (tx_emit(e, &f, NULL, false))
			return TURN_BLOCKED;
		be__list_del_init(&m->link);
		be__sock_unref(m->sock);
		be__worker_msg_put(e->w, m);
		return TURN_DID;
	}
	if (m->len > e->peer.max_msg_size) {
		be__list_del_init(&m->link);
		be__worker_defer_msg(e->w, m, -EMSGSIZE);
		return TURN_DID;
	}
	if (!tx_win_fits(e, sq, m))
		return TURN_IDLE;
	if (m->len <= e->eager_max) {
		f.type = BE_FR_DATA;
		f.msg = m->id;
		f.len = (uint32_t)m->len;
		if (tx_emit(e, &f, m->buf, false))
			return TURN_BLOCKED;
		be__list_del_init(&m->link);
		m->state = BE_MS_SENT_EAGER;
		be__list_add_tail(&e->cur->msgs, &m->link);
		tx_win_add(m);
		e->small_seq++;
		e->small_sq = sq;
		return TURN_DID;
	}
	if (!sq->fifo && (sq->nfrag >= cfg->max_reqs ||
			  (!tx_oneway_may(e, m) && tx_nomem_waits(sq))))
		return TURN_IDLE; /* re-activated by the next WriteResponse */
	if (!e->oneway || (ow = be__oneway_start(e, m, &f)) > 0)
		return tx_req(e, sq, m);
	/* No round trip: the frame, then the fragments (oneway.c). */
	if (ow)
		return TURN_WAIT;
	if (tx_emit(e, &f, NULL, false))
		return TURN_BLOCKED;
	be__oneway_sent(e, m);
	tx_win_add(m);
	be__list_del_init(&m->link);
	be__list_add_tail(&sq->fragq, &m->link);
	sq->nfrag++;
	return TURN_DID;
}

/*
 * tx_send_alone() - post eager message @m (frame @f) as an inline SEND of
 * its own: the header from the stack, the payload from @m's buffer and
 * the padding from zeros, gathered and copied by the transport at post.
 * For a lone small message on an idle Engine (a request, an answer) this
 * skips the staging buffer and a copy. Borrows @m->buf only during the
 * post. Returns 0 (posted: @m's buffer is free again), -EAGAIN (no
 * credit or WR slot now: take the staging way, whose rules wait for
 * them), or -ENOTCONN (the post failed the Engine).
 */
static int tx_send_alone(struct be__engine *e, struct be__msg *m, struct be__frame *f)
{
	static const uint8_t zeros[BE_FRAME_ALIGN];
	uint8_t hdr[BE_FRAME_HDR];
	struct be_xsend_wr wr = { 0 };
	struct be_xsge sge[3];
	bool sig;

	/* Checked first: the staging way counts the stall, once. */
	if (e->win.count >= e->win.cap || !be__credit_can_take(&e->cr, false))
		return -EAGAIN;
	be__credit_take(&e->cr, false);
	f->credits = be__credit_collect(&e->cr);
	f->flags |= be__credit_flags(&e->cr);
	be__frame_encode_hdr(hdr, f);
	sge[0] = (struct be_xsge){ .addr = (uint64_t)(uintptr_t)hdr, .length = BE_FRAME_HDR };
	sge[1] = (struct be_xsge){ .addr = (uint64_t)(uintptr_t)m->buf, .length = f->len };
	sge[2] = (struct be_xsge){ .addr = (uint64_t)(uintptr_t)zeros,
				   .length = be__frame_size(f->len) - BE_FRAME_HDR - f->len };
	wr.opcode = BE_XWR_SEND;
	wr.sg_list = sge;
	wr.num_sge = sge[2].length ? 3 : 2;
	/* As tx_flush's inline SEND: no window bytes, no completion owed. */
	wr.wr_id = be__window_push(&e->win, BE_WR_SEND_INLINE, 0, NULL, &sig);
	wr.flags = BE_XWR_F_INLINE | (sig ? BE_XWR_F_SIGNALED : 0);
	if (tx_post(e, &wr))
		return -ENOTCONN;
	e->st.sends_posted++;
	e->tx_seen = true;
	return 0;
}

/*
 * tx_send_zc() - post eager message @m (frame @f) as a SEND of its own
 * that the transport reads from @m's buffer: the header and the padding
 * from a staging buffer, the payload in place. For a lone message too
 * large to go inline (a PS pull's 4 KiB request) this skips the copy
 * into the staging buffer; @m is lent until be_sock_send()'s callback
 * anyway, which runs when this SEND completes, as for a staged one.
 * Only from TX_ZC_MIN bytes: below, the copy costs less than the region
 * lookup and the gather. Returns 0 (posted: @m is on the staging
 * buffer's list), -EAGAIN (not here: @m's buffer is not bemalloc's, or
 * no credit, window or staging buffer now; take the staging way) or
 * -ENOTCONN (the post failed the Engine; @m untouched).
 */
#define TX_ZC_MIN 2048u

static int tx_send_zc(struct be__engine *e, struct be__msg *m, struct be__frame *f)
{
	uint32_t size = be__frame_size(f->len), pad = size - BE_FRAME_HDR - f->len, lkey;
	struct be_xsend_wr wr = { 0 };
	struct be__sendbuf *sb;
	struct be_xsge sge[3];
	bool sig;

	/* Checked first: the staging way counts the stall, once. */
	if (e->win.count >= e->win.cap ||
	    (e->win.in_flight && e->win.in_flight + size > e->win.limit) ||
	    !be__credit_can_take(&e->cr, false) || be__engine_lkey(e, m->buf, f->len, &lkey))
		return -EAGAIN;
	sb = tx_sendbuf_get(e);
	if (!sb)
		return -EAGAIN;
	be__credit_take(&e->cr, false);
	f->credits = be__credit_collect(&e->cr);
	f->flags |= be__credit_flags(&e->cr);
	be__frame_encode_hdr(sb->buf, f);
	memset(sb->buf + BE_FRAME_HDR, 0, pad);
	sb->used = size;
	sb->nframes = 1;
	sge[0] = (struct be_xsge){ .addr = (uint64_t)(uintptr_t)sb->buf, .length = BE_FRAME_HDR,
				   .lkey = sb->lkey };
	sge[1] = (struct be_xsge){ .addr = (uint64_t)(uintptr_t)m->buf, .length = f->len,
				   .lkey = lkey };
	sge[2] = (struct be_xsge){ .addr = (uint64_t)(uintptr_t)(sb->buf + BE_FRAME_HDR),
				   .length = pad, .lkey = sb->lkey };
	wr.opcode = BE_XWR_SEND;
	wr.sg_list = sge;
	wr.num_sge = pad ? 3 : 2;
	wr.wr_id = be__window_push(&e->win, BE_WR_SEND, size, sb, &sig);
	wr.flags = sig ? BE_XWR_F_SIGNALED : 0;
	if (tx_post(e, &wr)) {
		tx_sendbuf_put(e, sb);
		return -ENOTCONN;
	}
	be__list_add_tail(&sb->msgs, &m->link);
	e->st.sends_posted++;
	e->tx_seen = true;
	return 0;
}

/*
 * be__engine_send_now() - the short way for eager message @m of queue
 * @sq: when nothing of the Engine waits (no queue active, no control
 * frame), the message goes straight into the staging buffer, as its turn
 * would have put it there, and the pass that follows (kicked here) only
 * posts it. Order and fairness are those of the scheduler: @sq is empty,
 * so @m is next on its socket, and no other queue waits for a turn.
 * A lone message is even posted at once, from the application's buffer,
 * when no staging buffer is open: inline (tx_send_alone()), or, from
 * TX_ZC_MIN bytes, lent to the transport until the SEND completes
 * (tx_send_zc()).
 * Returns 0 (@m is posted or the staging buffer's now), -EAGAIN (queue
 * it: the scheduler's rules apply), or -ENOTCONN when the Engine failed
 * posting (@m untouched).
 */
int be__engine_send_now(struct be__engine *e, struct be__sq *sq, struct be__msg *m)
{
	struct be__frame f = { 0 };
	int rc = -EAGAIN;
	bool zc = false;

	if (e->state != BE_ES_ESTABLISHED || e->in_pass || e->fail_asked || m->len > e->eager_max ||
	    m->len > e->peer.max_msg_size || be__list_linked(&sq->link) ||
	    !be__list_empty(&sq->txq) || !be__list_empty(&sq->fragq) ||
	    !be__list_empty(&e->active) || !be__list_empty(&e->ctrlq))
		return -EAGAIN;
	f.type = BE_FR_DATA;
	f.flags = m->sock->mine ? BE_FRF_OPENER : 0;
	f.sock = m->sock->id;
	f.msg = m->id;
	f.len = (uint32_t)m->len;
	if (!e->cur && e->gather3) {
		zc = be__frame_size(f.len) > e->max_inline;
		if (!zc)
			rc = tx_send_alone(e, m, &f);
		else if (f.len >= TX_ZC_MIN)
			rc = tx_send_zc(e, m, &f);
		if (rc == -ENOTCONN)
			return rc;
	}
	if (rc && tx_emit(e, &f, m->buf, false))
		return e->state == BE_ES_ESTABLISHED ? -EAGAIN : -ENOTCONN;
	m->sq = sq;
	m->state = BE_MS_SENT_EAGER;
	e->small_seq++;
	e->small_sq = sq;
	if (!rc) {
		/* Posted on its own: done, as an inline staging buffer's
		 * messages are (the callback runs in the progress call);
		 * from its buffer: done when the SEND is. */
		if (!zc)
			be__msg_finish(e, m, 0);
		return 0;
	}
	be__list_add_tail(&e->cur->msgs, &m->link);
	/* The first message of a burst, if it goes inline, is posted now:
	 * a request or an answer is usually alone, and the end of the
	 * progress call is a few hundred cycles away. What the burst sends
	 * next batches into the next staging buffer, posted by the pass. */
	if (e->cur->nframes == 1 && e->cur->used <= e->max_inline) {
		tx_flush(e);
		return 0;
	}
	be__engine_kick(e);
	return 0;
}

/* Is @sq's next unit of work a fragment? */
static bool tx_next_is_frag(const struct be__engine *e, const struct be__sq *sq)
{
	const struct be__list *p = be__list_first(&sq->fragq);

	return p && be__list_entry(p, struct be__msg, link)->state == BE_MS_GRANTED &&
	       !tx_req_ahead(e, sq);
}

/* Give @sq its turn and requeue it by the outcome. Returns false when
 * nothing more can go in this pass. */
static bool tx_give_turn(struct be__engine *e, struct be__sq *sq, struct be__list *later,
			 struct be__list *waiting)
{
	int r = tx_turn(e, sq);

	if (e->state != BE_ES_ESTABLISHED)
		return false;
	if (r == TURN_BLOCKED) {
		be__list_add_head(&e->active, &sq->link);
		return false;
	}
	if (r == TURN_WAIT) {
		/* A completion reopens the window and kicks us; the others'
		 * small messages need not wait for it. */
		be__list_add_tail(waiting, &sq->link);
	} else if (r != TURN_IDLE && (!be__list_empty(&sq->txq) || !be__list_empty(&sq->fragq))) {
		/* One fragment per queue and pass: the rest waits for the
		 * next pass, after the worker polled its CQ. */
		be__list_add_tail(r == TURN_FRAG ? later : &e->active, &sq->link);
	}
	return true;
}

/* Before admission (admit.c) only the control queue goes, which then
 * holds AUTH frames alone; a REFUSED is signaled, since the Engine ends
 * once it arrived. */
static void tx_admit_pass(struct be__engine *e)
{
	e->in_pass = true;
	e->refs++;
	while (!be__list_empty(&e->ctrlq) && e->state == BE_ES_CONNECTING) {
		struct be__ctrl *c = be__list_entry(be__list_first(&e->ctrlq), struct be__ctrl,
						    link);

		if (tx_emit(e, &c->f, NULL, false))
			break;
		if (c->f.type == BE_FR_AUTH && c->f.msg == BE_AUTH_REFUSED)
			e->cur->close_ack = true;
		be__list_del_init(&c->link);
		free(c);
	}
	if (e->state == BE_ES_CONNECTING)
		tx_flush(e);
	e->in_pass = false;
	be__engine_unref(e);
}

void be__engine_run(struct be__engine *e)
{
	struct be__list later, waiting, frags, *p;
	struct tx_held held;
	bool blocked = false;

	if (e->fail_asked && !e->in_pass) {
		be__engine_fail(e, BE_ECONNFAULT, "ended by the application (be_sock_fail_engine)");
		return;
	}
	if (e->state == BE_ES_CONNECTING && e->xestab && !e->in_pass) {
		tx_admit_pass(e);
		return;
	}
	if (e->state != BE_ES_ESTABLISHED || e->in_pass)
		return;
	e->in_pass = true;
	e->refs++;
	be__list_init(&later);
	be__list_init(&waiting);
	be__list_init(&frags);
	while (!blocked && !be__list_empty(&e->ctrlq) && e->state == BE_ES_ESTABLISHED) {
		struct be__ctrl *c = be__list_entry(be__list_first(&e->ctrlq), struct be__ctrl,
						    link);
		/* The reserve goes only to a frame that returns credits, so
		 * the peer can always answer it (credit.h): a KEEPALIVE that
		 * would carry none waits like data. */
		bool reserve = (c->f.type == BE_FR_CREDIT || c->f.type == BE_FR_KEEPALIVE) &&
			       e->cr.owed > 0;

		if (tx_emit(e, &c->f, NULL, reserve)) {
			blocked = true;
			break;
		}
		if (c->f.type == BE_FR_SOCK_CLOSE && (c->f.flags & BE_FRF_ACK))
			e->cur->close_ack = true;
		if (c->f.type == BE_FR_KEEPALIVE)
			e->st.keepalives_sent++;
		else if (c->f.type == BE_FR_CREDIT_GROW)
			be__credit_grow(&e->cr); /* the peer may use it from now */
		else if (c->f.type == BE_FR_CREDIT_RELEASE)
			be__credit_release_sent(&e->cr);
		else if (c->f.type == BE_FR_WRITE_NOMEM)
			be__large_nomem_sent(e, &c->f);
		be__list_del_init(&c->link);
		free(c);
	}
	/* Small units first: queues whose turn is a fragment wait on @frags
	 * while the others go, and the SENDs those staged are posted before
	 * the fragments, so a small message never queues behind a fragment
	 * of the same pass on the link (or behind its copy, on shm and tcp). */
	while (!blocked && e->state == BE_ES_ESTABLISHED && (p = be__list_pop(&e->active))) {
		struct be__sq *sq = be__list_entry(p, struct be__sq, link);

		if (tx_next_is_frag(e, sq))
			be__list_add_tail(&frags, &sq->link);
		else
			blocked = !tx_give_turn(e, sq, &later, &waiting);
	}
	/* The staged SEND goes before the fragments, in the first one's
	 * post (tx_held). */
	if (!be__list_empty(&frags) && !blocked && e->state == BE_ES_ESTABLISHED && e->cur)
		tx_flush_hold(e, &held);
	while (!blocked && e->state == BE_ES_ESTABLISHED && (p = be__list_pop(&frags)))
		blocked = !tx_give_turn(e, be__list_entry(p, struct be__sq, link), &later, &waiting);
	tx_post_held(e);
	be__list_splice_head(&e->active, &frags); /* blocked: their turn comes first */
	be__list_splice_head(&e->active, &waiting); /* first in line next pass */
	if (!be__list_empty(&later)) {
		be__list_splice_tail(&e->active, &later);
		if (!blocked && e->state == BE_ES_ESTABLISHED)
			be__worker_later(e->w, e);
	}
	if (e->state == BE_ES_ESTABLISHED)
		tx_flush(e);
	if (e->retry_pass) {
		e->retry_pass = false;
		if (e->state == BE_ES_ESTABLISHED)
			be__worker_later(e->w, e);
	}
	/* Owed credits with nothing to carry them: an explicit CREDIT frame,
	 * unless the peer has plenty left; then the next pass sends it, if
	 * nothing of ours (the request or answer a callback is about to
	 * send) carried the credits by then (credit.h). */
	if (e->state == BE_ES_ESTABLISHED && be__credit_update_due(&e->cr) &&
	    be__credit_update_wait(&e->cr)) {
		be__worker_later(e->w, e);
	} else if (e->state == BE_ES_ESTABLISHED && be__credit_update_due(&e->cr)) {
		struct be__frame f = { .type = BE_FR_CREDIT };

		if (tx_emit(e, &f, NULL, true) == 0) {
			e->st.credit_frames_sent++;
			tx_flush(e);
		}
	}
	e->in_pass = false;
	be__engine_unref(e);
}

/* ---- completions ---- */

void be__msg_finish(struct be__engine *e, struct be__msg *m, int status)
{
	if (status == 0) {
		e->st.msgs_sent++;
		e->st.bytes_sent += m->len;
		if (m->large) {
			e->st.large_sent++;
			m->sock->st.large_sent++;
		} else {
			e->st.eager_sent++;
			m->sock->st.eager_sent++;
		}
	}
	be__worker_defer_msg(e->w, m, status);
}

static void tx_retire(struct be__engine *e, const struct be__wr_rec *r, int err)
{
	if (r->kind == BE_WR_SEND_INLINE || r->kind == BE_WR_SEND_INLINE_SIG) {
		return;
	} else if (r->kind == BE_WR_SEND) {
		tx_sendbuf_done(e, r->ptr, err);
	} else {
		struct be__msg *m = r->ptr;

		if (r->kind == BE_WR_FRAG_LAST)
			be__oneway_done(e, m);
		if (--m->unretired == 0 && m->state == BE_MS_POSTED)
			be__msg_finish(e, m, m->status ? m->status : err);
	}
}

static int tx_wc_err(enum be_xwc_status st)
{
	switch (st) {
	case BE_XWC_REM_ACCESS_ERR:
	case BE_XWC_REM_OP_ERR:
		return BE_EPROTO_PEER;
	case BE_XWC_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case BE_XWC_RNR_RETRY_EXC:
		return -EPROTO;
	default:
		return -ECONNRESET;
	}
}

void be__engine_on_send_wc(struct be__engine *e, const struct be_xwc *wc)
{
	struct be__wr_rec r;

	if (wc->opcode == BE_XWC_REVOKE) {
		be__large_on_revoke(e, wc); /* not a WR of ours */
		return;
	}
	if (wc->status != BE_XWC_SUCCESS) {
		if (e->state != BE_ES_FAILED) {
			char why[80];

			snprintf(why, sizeof(why), "send completion: %s",
				 be__xwc_status_str(wc->status));
			be__engine_fail(e, tx_wc_err(wc->status), why);
		}
		return; /* the records retire with the error at reap */
	}
	while (be__window_pop(&e->win, wc->wr_id, &r))
		tx_retire(e, &r, 0);
	if (BE_UNLIKELY(e->admit == BE_ADM_REFUSING)) {
		be__admit_sent(e);
		return;
	}
	if (!be__list_empty(&e->active) || !be__list_empty(&e->ctrlq) ||
	    be__credit_update_due(&e->cr))
		be__engine_kick(e);
}

void be__engine_retire_all(struct be__engine *e)
{
	struct be__wr_rec r;

	while (be__window_pop(&e->win, UINT64_MAX, &r))
		tx_retire(e, &r, e->err ? e->err : -ECONNRESET);
}
