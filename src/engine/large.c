/*
 * large.c - the large-message path: WriteRequest, WriteResponse (or "no
 * memory"), RDMA WRITE fragments, and the WRITE_WITH_IMM that completes
 * the message.
 *
 * Model. Sender: a message above the eager limit sends WRITE_REQ(socket,
 * message id, length) and waits in its queue's fragq. Receiver: allocates
 * the destination with be_alloc(), records it in the Engine's grant table
 * and answers WRITE_RESP(address, rkey, token); the token (slot and
 * generation of the grant) comes back as the immediate of the last
 * fragment. If be_alloc() fails the receiver answers WRITE_NOMEM and
 * forgets nothing: the message keeps its place in the socket's receive
 * order, and the sender retries the WRITE_REQ after a backoff that doubles
 * from nomem_backoff_us to nomem_backoff_max_us. A message is never
 * dropped: it fails only when its socket closes or its Engine dies.
 * Grants follow a socket's order: while one of its messages waits for
 * memory, the later ones are answered "no memory" too.
 *
 * Keys: each grant gets a key of its own from the transport (xport.h
 * grant: tcp and shm check WRITEs against their tables, verbs binds a
 * memory window), valid on this connection only, for exactly the
 * message's bytes, and revoked when the grant ends (the WRITE_WITH_IMM,
 * the socket's release, the Engine's reap); a peer's WRITE anywhere else
 * fails its connection. On verbs without memory windows (a device without
 * them, or BE_VERBS_MW=0) the key is the one of the bemalloc block the
 * buffer lies in (docs/SECURITY.md, "Remote keys").
 *
 * Bound: at most max_grant_bytes are lent to one Engine at once,
 * max_peer_grant_bytes to all the Engines of one peer identity (peer.c),
 * and max_worker_grant_bytes to all the peers of a worker together; a
 * request beyond any is answered WRITE_NOMEM like a failed allocation, so a
 * peer (hostile or just eager), or many, cannot make us allocate without
 * bound. One message always fits when nothing is lent (one-way budgets
 * aside, oneway.c), so every message up to max_msg_size goes eventually.
 *
 * Lifetime of a granted buffer: the peer may write it until it sends the
 * WRITE_WITH_IMM, or until it sends SOCK_CLOSE for the socket (RC order:
 * its earlier WRITEs landed before that SEND), or until the connection is
 * destroyed. Then the grant is revoked, and only once the revoke has
 * taken effect is the buffer freed or handed to the application: at once
 * on tcp and shm; on verbs with memory windows when the window's
 * LOCAL_INV completes (xport.h revoke returns 1, then a BE_XWC_REVOKE
 * completion names the grant), since until then a hostile peer could
 * still write it (docs/SECURITY.md, "Remote keys").
 * - A WRITE_WITH_IMM whose revoke is pending leaves a marker on the
 *   Engine's receive backlog (rx.c): what arrives after it waits there,
 *   so the message is delivered, and a SOCK_CLOSE behind it handled, in
 *   arrival order, once the revoke completed.
 * - A grant whose socket goes away (closed by us or the peer) while its
 *   revoke is pending leaves the socket: its buffer is freed when the
 *   revoke completes, or at the reap (be__large_free_grants()) once the
 *   connection is destroyed.
 * - A revoke that fails, or completes with an error, fails the Engine:
 *   the buffer is freed at the reap.
 *
 * The records of messages a peer announced sit on the socket's receive
 * queue until delivered, counted against the socket receive window (rx.c),
 * the ones answered "no memory" too: a record is made once per message,
 * never per answer, and a message holds at most one answer not yet sent,
 * so neither the records nor the control frames answering them grow past
 * what the window allows, however fast a peer repeats its requests.
 *
 * Validation: a WRITE_REQ must carry the socket's next message id (or the
 * id of a message whose "no memory" answer we sent), a length within our
 * limits, and fit the socket receive window;
 * a WRITE_RESP must match a request we sent, length included; an
 * immediate must name a live grant with its generation; a violation is a
 * protocol error on the Engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

static int large_fail(struct be__engine *e, const struct be__frame *f, const char *why)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "protocol error: %s (socket %u, message %u)", why,
		 f ? f->sock : 0, f ? f->msg : 0);
	be__engine_fail(e, BE_EPROTO_PEER, msg);
	return BE_EPROTO_PEER;
}

static int large_slot_get(struct be__engine *e, uint32_t *slot)
{
	uint32_t i;

	if (e->grant_free < e->cap_grants) {
		*slot = e->grant_free;
		e->grant_free = e->grants[*slot].next_free;
		return 0;
	}
	if (e->cap_grants >= BE_TOKEN_MAX_SLOTS)
		return -ENOSPC;
	{
		uint32_t cap = e->cap_grants ? e->cap_grants * 2 : 64;
		struct be__grant *g = realloc(e->grants, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		memset(g + e->cap_grants, 0, (cap - e->cap_grants) * sizeof(*g));
		for (i = e->cap_grants; i < cap; i++)
			g[i].next_free = i + 1;
		e->grants = g;
		e->grant_free = e->cap_grants;
		e->cap_grants = cap;
	}
	*slot = e->grant_free;
	e->grant_free = e->grants[*slot].next_free;
	return 0;
}

/* Grant @slot is over (its revoke took effect): the slot is free. */
static void large_slot_put(struct be__engine *e, uint32_t slot)
{
	struct be__grant *g = &e->grants[slot];

	g->xgrant = false;
	g->end = BE_GRANT_LIVE;
	e->grant_bytes -= g->rx->len;
	e->w->grant_bytes -= g->rx->len;
	if (e->pid)
		e->pid->grant_bytes -= g->rx->len;
	g->rx = NULL;
	g->sock = NULL;
	g->next_free = e->grant_free;
	e->grant_free = slot;
	e->grants_live--;
}

/*
 * End the peer's access to grant @slot: 0 when it ended at once (no
 * transport grant, the connection destroyed, or a transport that ends
 * grants at once), 1 when it is pending (BE_GRANT_REVOKING: the
 * transport's BE_XWC_REVOKE ends it, or the reap).
 */
static int large_revoke(struct be__engine *e, uint32_t slot)
{
	struct be__grant *g = &e->grants[slot];
	int rc;

	if (g->end != BE_GRANT_LIVE)
		return g->end == BE_GRANT_REVOKING;
	/* After the reap the connection, and every grant with it, is gone. */
	if (!g->xgrant || !e->conn) {
		g->xgrant = false;
		return 0;
	}
	g->xgrant = false;
	rc = e->ops->revoke(e->conn, g->rkey, be__token_make(slot, g->gen));
	if (rc == 0)
		return 0;
	g->end = BE_GRANT_REVOKING;
	if (rc < 0)
		be__engine_fail(e, rc, "revoking a grant failed");
	return 1;
}

/* Answer "no memory" for @r: frame @a, queued. Until it is sent (see
 * be__large_nomem_sent) the peer cannot have seen it, so a repeated
 * WRITE_REQ for @r is a protocol error. */
static int large_nomem(struct be__engine *e, struct be__rxmsg *r, struct be__frame *a)
{
	a->type = BE_FR_WRITE_NOMEM;
	e->st.nomem_sent++;
	r->nomem_due = true;
	return be__engine_ctrl(e, a);
}

/*
 * be__large_nomem_sent() - our WRITE_NOMEM frame @f was encoded into a
 * SEND: the peer may retry its message from now on. The record may be
 * gone (socket closed); then nothing is to be done.
 */
void be__large_nomem_sent(struct be__engine *e, const struct be__frame *f)
{
	struct be_sock *s = be__engine_sock_lookup(e, !(f->flags & BE_FRF_OPENER), f->sock);
	struct be__list *p;

	if (!s)
		return;
	for (p = s->rxq.next; p != &s->rxq; p = p->next) {
		struct be__rxmsg *r = be__list_entry(p, struct be__rxmsg, link);

		if (r->id == f->msg) {
			r->nomem_due = false;
			return;
		}
	}
}

/*
 * An earlier message of @s than @r waits for memory (answered "no
 * memory", not granted yet). Grants go in a socket's order: @r is
 * delivered after it anyway, so memory lent to @r first would only be
 * held, and could be what keeps the earlier one from ever fitting the
 * bounds below (a standstill).
 */
static bool large_earlier_waits(const struct be_sock *s, const struct be__rxmsg *r)
{
	const struct be__list *p;

	for (p = s->rxq.next; p != &r->link; p = p->next) {
		const struct be__rxmsg *x = be__list_entry(p, struct be__rxmsg, link);

		if (!x->done && !x->granted && !x->oneway)
			return true;
	}
	return false;
}

/* Try to allocate and grant the destination of @r; answers the peer. */
static int large_grant(struct be__engine *e, struct be_sock *s, struct be__rxmsg *r)
{
	struct be__frame a = {
		.flags = s->mine ? BE_FRF_OPENER : 0,
		.sock = s->id,
		.msg = r->id,
		.length = r->len,
	};
	struct be_alloc_region reg;
	uint32_t slot;
	void *buf;

	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be_worker *w = e->w;

	/* Bound what a peer's Engine, all the Engines of its identity, and
	 * all peers of the worker can make us allocate (one grant always
	 * fits: one-way budgets, reserved for as long as their Engines
	 * live, do not count as grants there, oneway.c). */
	if (large_earlier_waits(s, r) ||
	    (e->grants_live && e->grant_bytes + r->len > cfg->max_grant_bytes) ||
	    (e->pid && e->pid->grant_bytes > e->pid->ow_reserved &&
	     e->pid->grant_bytes + r->len > cfg->max_peer_grant_bytes) ||
	    (w->grant_bytes > w->ow_reserved &&
	     w->grant_bytes + r->len > cfg->max_worker_grant_bytes))
		return large_nomem(e, r, &a);
	buf = be_alloc(r->len);
	if (!buf && be_alloc_trim())
		buf = be_alloc(r->len); /* free blocks went back; the limit has room */
	if (buf && be_alloc_lookup(buf, e->wd->cd->alloc_dev, &reg)) {
		be_free(buf);
		buf = NULL;
	}
	if (buf && large_slot_get(e, &slot)) {
		be_free(buf);
		buf = NULL;
	}
	if (buf && e->ops->grant && e->ops->grant(e->conn, buf, r->len, &reg.rkey)) {
		/* Out of memory for the table (or keys): like a failed
		 * allocation, the peer backs off and asks again. */
		e->st.grant_key_short++;
		e->grants[slot].next_free = e->grant_free;
		e->grant_free = slot;
		be_free(buf);
		buf = NULL;
	}
	if (!buf)
		return large_nomem(e, r, &a);
	e->grants[slot].rx = r;
	e->grants[slot].sock = s;
	e->grants[slot].rkey = reg.rkey;
	e->grants[slot].xgrant = e->ops->grant != NULL;
	e->grants[slot].gen = (e->grants[slot].gen + 1) & ((1u << (32 - BE_TOKEN_SLOT_BITS)) - 1);
	e->grants_live++;
	e->grant_bytes += r->len;
	w->grant_bytes += r->len;
	if (e->pid)
		e->pid->grant_bytes += r->len;
	if (w->grant_bytes > w->grant_bytes_max)
		w->grant_bytes_max = w->grant_bytes;
	r->buf = buf;
	r->granted = true;
	r->slot = slot;
	a.type = BE_FR_WRITE_RESP;
	a.addr = (uint64_t)(uintptr_t)buf;
	a.rkey = reg.rkey;
	a.token = be__token_make(slot, e->grants[slot].gen);
	return be__engine_ctrl(e, &a);
}

static int large_on_req(struct be__engine *e, struct be_sock *s, const struct be__frame *f)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be__rxmsg *r = NULL;
	struct be__list *p;
	int rc;

	if (f->length == 0 || f->length > cfg->max_msg_size || f->length > UINT32_MAX)
		return large_fail(e, f, "WRITE_REQ length out of range");
	if (f->msg == s->rx_next_id) {
		rc = be__sock_rxq_new(e, s, f->msg, f->length, &r);
		if (rc == -ENOBUFS)
			return large_fail(e, f, "socket receive window exceeded");
		if (rc)
			return rc;
		s->rx_next_id++;
	} else {
		for (p = s->rxq.next; p != &s->rxq; p = p->next) {
			struct be__rxmsg *x = be__list_entry(p, struct be__rxmsg, link);

			if (x->id == f->msg && !x->granted && !x->done && !x->oneway &&
			    x->len == f->length) {
				r = x;
				break;
			}
		}
		if (!r)
			return large_fail(e, f, "WRITE_REQ with an unexpected message id");
		if (r->nomem_due)
			return large_fail(e, f, "WRITE_REQ repeated before our WRITE_NOMEM was sent");
	}
	rc = large_grant(e, s, r);
	if (rc)
		be__engine_fail(e, rc, "no memory for a control frame");
	return rc;
}

static struct be__msg *large_find(struct be_sock *s, uint32_t id)
{
	struct be__sq *sq = s->e && !s->w->ctx->cfg.frag_sched ? &s->e->fifo : &s->sq;
	struct be__list *p;

	for (p = sq->fragq.next; p != &sq->fragq; p = p->next) {
		struct be__msg *m = be__list_entry(p, struct be__msg, link);

		if (m->sock == s && m->id == id)
			return m;
	}
	return NULL;
}

static int large_on_resp(struct be__engine *e, struct be_sock *s, const struct be__frame *f)
{
	struct be__msg *m = large_find(s, f->msg);

	if (!m || m->state != BE_MS_REQ)
		return large_fail(e, f, "WRITE_RESP for no outstanding WRITE_REQ");
	if (f->length != m->len)
		return large_fail(e, f, "WRITE_RESP length differs from the request");
	m->raddr = f->addr;
	m->rkey = f->rkey;
	m->token = f->token;
	m->state = BE_MS_GRANTED;
	m->backoff_us = 0;
	be__sq_activate(e, m->sq);
	be__engine_kick(e);
	return 0;
}

static int large_on_nomem(struct be__engine *e, struct be_sock *s, const struct be__frame *f)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be__msg *m = large_find(s, f->msg);

	if (!m || m->state != BE_MS_REQ || f->length != m->len)
		return large_fail(e, f, "WRITE_NOMEM for no outstanding WRITE_REQ");
	e->st.nomem_recv++;
	m->backoff_us = m->backoff_us ? BE_MIN(m->backoff_us * 2, cfg->nomem_backoff_max_us) :
					cfg->nomem_backoff_us;
	m->retry_at = be__now_ns() + (uint64_t)m->backoff_us * 1000;
	be__worker_timer_at(e->w, m->retry_at);
	m->state = BE_MS_BACKOFF;
	be__list_add_tail(&e->backoff, &m->blink);
	return 0;
}

int be__large_on_frame(struct be__engine *e, struct be_sock *s, const struct be__frame *f)
{
	switch (f->type) {
	case BE_FR_WRITE_REQ:
		return large_on_req(e, s, f);
	case BE_FR_WRITE_RESP:
		return large_on_resp(e, s, f);
	default: /* BE_FR_WRITE_NOMEM */
		return large_on_nomem(e, s, f);
	}
}

void be__large_backoff_tick(struct be__engine *e, uint64_t now)
{
	struct be__list *p, *t;

	be__list_for_each_safe(p, t, &e->backoff) {
		struct be__msg *m = be__list_entry(p, struct be__msg, blink);

		if (now < m->retry_at)
			continue;
		be__list_del_init(p);
		m->state = BE_MS_RETRY;
		be__sq_activate(e, m->sq);
		be__engine_kick(e);
	}
}

/* The message of grant @slot arrived whole and the peer can no longer
 * write it: deliver it (or drop it, its socket closing). */
static void large_imm_done(struct be__engine *e, uint32_t slot)
{
	struct be__grant *g = &e->grants[slot];
	struct be__rxmsg *r = g->rx;
	struct be_sock *s = g->sock;

	large_slot_put(e, slot);
	r->granted = false;
	r->done = true;
	e->st.large_recv++;
	s->st.large_recv++;
	if (s->state != BE_SS_OPEN || s->app_closed) {
		be__sock_rxq_del(s, r);
		be_free(r->buf);
		free(r);
		return;
	}
	be__sock_deliver(s);
}

int be__large_on_imm(struct be__engine *e, uint32_t token, uint32_t byte_len)
{
	uint32_t slot = be__token_slot(token);
	struct be__rxbacklog *b;
	struct be__grant *g;
	char why[96];

	if (slot >= e->cap_grants || !e->grants[slot].rx ||
	    e->grants[slot].gen != be__token_gen(token) || e->grants[slot].end != BE_GRANT_LIVE) {
		snprintf(why, sizeof(why), "WRITE_WITH_IMM token %#x matches no grant", token);
		return large_fail(e, NULL, why);
	}
	g = &e->grants[slot];
	if (byte_len > g->rx->len)
		return large_fail(e, NULL, "WRITE_WITH_IMM longer than the granted buffer");
	if (!large_revoke(e, slot)) {
		large_imm_done(e, slot);
		return 0;
	}
	/* Wait for the revoke, and hold what arrives after it (rx.c). */
	b = calloc(1, sizeof(*b));
	if (!b) {
		be__engine_fail(e, -ENOMEM, "no memory to hold a receive");
		return -ENOMEM;
	}
	b->revoking = true;
	b->token = token;
	be__list_add_tail(&e->rxlog, &b->link);
	return 0;
}

/* Is the message of @token, whose revoke was pending, ready to go on
 * (revoked, or its grant gone with its socket)? */
bool be__large_imm_ready(struct be__engine *e, uint32_t token)
{
	uint32_t slot = be__token_slot(token);
	const struct be__grant *g = &e->grants[slot];

	return slot >= e->cap_grants || !g->rx || g->gen != be__token_gen(token) || !g->sock ||
	       g->end != BE_GRANT_REVOKING;
}

void be__large_imm_finish(struct be__engine *e, uint32_t token)
{
	uint32_t slot = be__token_slot(token);
	const struct be__grant *g = &e->grants[slot];

	/* Its socket may have gone meanwhile, taking the grant with it. */
	if (slot < e->cap_grants && g->rx && g->gen == be__token_gen(token) && g->sock &&
	    g->end == BE_GRANT_REVOKED)
		large_imm_done(e, slot);
}

/* The transport's word that the revoke of grant @wc->wr_id (a token)
 * took effect. */
void be__large_on_revoke(struct be__engine *e, const struct be_xwc *wc)
{
	uint32_t slot = be__token_slot((uint32_t)wc->wr_id);
	struct be__grant *g = &e->grants[slot];
	struct be__rxmsg *r;

	if (wc->wr_id > UINT32_MAX || slot >= e->cap_grants || !g->rx ||
	    g->gen != be__token_gen((uint32_t)wc->wr_id) || g->end != BE_GRANT_REVOKING)
		return; /* cannot happen: one completion per pending revoke */
	if (wc->status != BE_XWC_SUCCESS) {
		/* The connection failed first: nothing lands any more, but
		 * the reap, after it destroyed the connection, frees it. */
		if (e->state != BE_ES_FAILED)
			be__engine_fail(e, -ECONNRESET, "revoking a grant: connection failed");
		return;
	}
	g->end = BE_GRANT_REVOKED;
	if (!g->sock) {
		/* Its socket went away: nobody wants the buffer. */
		r = g->rx;
		large_slot_put(e, slot);
		be_free(r->buf);
		free(r);
		return;
	}
	/* The marker its WRITE_WITH_IMM left goes on when it reaches the
	 * head of the backlog. */
	be__engine_rx_retry(e, be__now_ns());
}

/*
 * be__large_free_grants() - at the reap, the connection destroyed: free
 * the buffers of grants whose socket went away while their revoke was
 * pending (no BE_XWC_REVOKE comes for them any more).
 */
void be__large_free_grants(struct be__engine *e)
{
	uint32_t slot;

	for (slot = 0; slot < e->cap_grants; slot++) {
		struct be__grant *g = &e->grants[slot];
		struct be__rxmsg *r = g->rx;

		if (!r || g->sock)
			continue;
		large_slot_put(e, slot);
		be_free(r->buf);
		free(r);
	}
}

void be__large_release_sock(struct be__engine *e, struct be_sock *s)
{
	be__oneway_release_sock(e, s);
	while (!be__list_empty(&s->rxq)) {
		struct be__rxmsg *r = be__list_entry(be__list_first(&s->rxq), struct be__rxmsg,
						     link);

		be__sock_rxq_del(s, r);
		if (r->granted && large_revoke(e, r->slot)) {
			/* The peer may still write it: it leaves the socket and
			 * goes when the revoke completes (or at the reap). */
			e->grants[r->slot].sock = NULL;
			continue;
		}
		if (r->granted)
			large_slot_put(e, r->slot);
		be_free(r->buf);
		free(r);
	}
}
