/*
 * oneway.c - large messages without a round trip, on transports whose
 * receiver allocates the destination as the data arrives (tcp, shm).
 *
 * Why. On verbs a large message must have its destination reserved
 * before the first RDMA WRITE (WRITE_REQ / WRITE_RESP, large.c): the NIC
 * writes into registered memory it was told about. A software transport
 * whose receiver places every byte itself (a byte stream on tcp, the
 * ring's records on shm) has no such constraint: it can ask for the
 * buffer when the header of the data arrives and place the payload
 * straight into it. The round trip then buys nothing, and on a PS pull
 * (a 64 KiB reply) it was most of the cost: on shm each of its turns is
 * a sleep and a wakeup of each side when they wait adaptively.
 *
 * Model. Used on an Engine when both hellos carry BE_HELLO_F_ONEWAY
 * (their transports report max_rx_alloc >= BE_ONEWAY_SLOTS, and
 * be_config.oneway is set). Sender: a
 * message above the eager limit takes a free slot (BE_ONEWAY_SLOTS per
 * Engine, a bit each in ow_tx_used), sends WRITE_ONEWAY(socket, message
 * id, length, slot) in a SEND, and at once its fragments as RX_ALLOC
 * WRITEs to offset @off of slot @slot, the last one a WRITE_WITH_IMM
 * whose immediate is the slot. The SEND is posted before the fragments
 * (tx.c posts a pass's staged SENDs before its fragments), so the peer
 * reads the frame first. The slot is free again when the last fragment
 * completes: the peer's transport placed it, and its Engine sees that
 * RECV_IMM after the frame (one connection, in order).
 *
 * Receiver: the transport calls be__oneway_rx_alloc() when the first
 * fragment's header arrives, reads the data into that buffer, and hands
 * the buffer over with the RECV_IMM of the last fragment. The frame
 * records the message in the socket's receive order and in ow_rx[slot];
 * the RECV_IMM completes it there. Both go through the receive backlog
 * when one exists (rx.c), so they are handled in arrival order.
 *
 * Budget. The receiver cannot refuse a one-way message: its data follows
 * the frame on the stream, and leaving a header unread stalls everything
 * behind it, our own half-read data and the peer's answers included (two
 * Engines waiting on each other). So it promises ahead what it will take:
 * once admitted it reserves a budget of bytes out of the grant bounds of
 * the peer's identity and of the worker (max_peer_grant_bytes,
 * max_worker_grant_bytes, as if lent to a WRITE_REQ) and announces it in
 * an ONEWAY_BUDGET frame. The budget is max_grant_bytes / 8 at most, and
 * all the budgets of an identity, or of a worker, take half its bound at
 * most, so WRITE_REQs keep the other half; what is left is announced
 * (0 once the bounds are exhausted). The reservation holds until the
 * Engine is reaped. The sender's large messages wait for the budget
 * (it left the peer when the peer admitted us), then keep its one-way
 * bytes in progress within it and the sender's own max_grant_bytes: a
 * message that would not fit alone takes the WRITE_REQ path, whose "no
 * memory" answer is the backpressure; one that fits waits for a
 * completion.
 *
 * The budget is checked twice. The WRITE_ONEWAY frame must fit it beside
 * the frames in progress. And the transport's rx_alloc, which may run
 * before the Engine handled the frame (the data is read in the same
 * completion batch), is held to it too: what rx_alloc lent and no
 * RECV_IMM gave back yet stays within the budget, so data sent without
 * its frame gets no more than the budget allocated before its RECV_IMM
 * is refused. A correct peer's data can find that sum over the budget
 * only while RECV_IMMs of earlier messages wait in the batch (its own
 * count fell when their writes left, before this data): the transport
 * then waits (-EAGAIN), and the RECV_IMM resumes it.
 *
 * Backpressure. Each one-way message costs the sender a receive credit
 * for its frame's SEND and one for its RECV_IMM, as a WRITE_REQ does;
 * at most BE_ONEWAY_SLOTS are in progress per Engine, within the budget.
 * When bemalloc has no memory for a buffer, the allocation fails with -EAGAIN:
 * the transport stops reading this connection, so the data waits in the
 * kernel's socket buffers (bounded) and TCP's own flow control stops the
 * sender; after a backoff (nomem_backoff_us doubling up to
 * nomem_backoff_max_us) be__oneway_tick() asks the transport to resume,
 * and the allocation is tried again. Nothing is dropped: if memory stays
 * short for conn_timeout_ms, the peer's traffic stops reaching us and
 * the Engine fails with BE_ECONNFAULT on both sides, every pending
 * message with it.
 *
 * Validation: WRITE_ONEWAY only when we advertised it; the socket's next
 * message id; a length within max_msg_size and, with the peer's other
 * one-way messages in progress, within the budget we announced (for a
 * socket we closed too: its data arrives all the same); a slot not in
 * use. The RECV_IMM must name a slot in use with the frame's length.
 * ONEWAY_BUDGET once, when both announced ONEWAY, socket, message and
 * flags 0. A violation is a protocol error on the Engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

static int oneway_fail(struct be__engine *e, const char *why, uint32_t slot)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "protocol error: %s (one-way slot %u)", why, slot);
	be__engine_fail(e, BE_EPROTO_PEER, msg);
	return BE_EPROTO_PEER;
}

/* What of @max a new budget may take, when @lent of it is lent and
 * @reserved of that reserved for budgets already: the rest, and no more
 * than the rest of half of @max (so that WRITE_REQs keep the other). */
static uint64_t oneway_room(uint64_t lent, uint64_t reserved, uint64_t max)
{
	uint64_t half = max / 2;

	if (lent >= max || reserved >= half)
		return 0;
	return BE_MIN(max - lent, half - reserved);
}

/*
 * be__oneway_announce() - @e admitted its peer: reserve the budget of the
 * peer's one-way messages and queue its ONEWAY_BUDGET frame (nothing when
 * one-way was not negotiated or the bounds leave nothing).
 */
void be__oneway_announce(struct be__engine *e)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be_worker *w = e->w;
	struct be__frame f = { .type = BE_FR_ONEWAY_BUDGET };
	uint64_t b;

	if (!e->oneway || e->ow_rx_budget)
		return;
	b = BE_MIN(cfg->max_grant_bytes / 8,
		   oneway_room(w->grant_bytes, w->ow_reserved, cfg->max_worker_grant_bytes));
	if (e->pid)
		b = BE_MIN(b, oneway_room(e->pid->grant_bytes, e->pid->ow_reserved,
					  cfg->max_peer_grant_bytes));
	/* Sent even when 0: the peer's large messages wait for it. */
	f.length = b;
	if (be__engine_ctrl(e, &f)) {
		be__engine_fail(e, -ENOMEM, "no memory for a control frame");
		return;
	}
	e->ow_rx_budget = b;
	w->grant_bytes += b;
	w->ow_reserved += b;
	if (w->grant_bytes > w->grant_bytes_max)
		w->grant_bytes_max = w->grant_bytes;
	if (e->pid) {
		e->pid->grant_bytes += b;
		e->pid->ow_reserved += b;
	}
}

/* The Engine is reaped: its budget goes back to the bounds. */
void be__oneway_reap(struct be__engine *e)
{
	uint64_t b = e->ow_rx_budget;

	if (!b)
		return;
	e->w->grant_bytes -= b;
	e->w->ow_reserved -= b;
	if (e->pid) {
		e->pid->grant_bytes -= b;
		e->pid->ow_reserved -= b;
	}
	e->ow_rx_budget = 0;
}

/* The peer's ONEWAY_BUDGET @f. Returns 0 or the Engine's failure. */
int be__oneway_on_budget(struct be__engine *e, const struct be__frame *f)
{
	uint64_t mine = e->w->ctx->cfg.max_grant_bytes;

	if (!e->oneway || e->ow_budget_got || f->sock || f->msg ||
	    (f->flags & ~BE_FRF_STARVED))
		return oneway_fail(e, "ONEWAY_BUDGET unexpected or malformed", 0);
	e->ow_budget_got = true;
	e->ow_tx_budget = BE_MIN(f->length, mine);
	/* Large messages waiting for a WRITE_RESP keep that way; the next
	 * ones may go one-way from now. */
	be__engine_kick(e);
	return 0;
}

/*
 * be__oneway_start() - make @m (a large message at the head of its turn,
 * on an Engine that negotiated one-way) one-way: take a slot and fill @f
 * with its WRITE_ONEWAY frame. Returns 0; 1 when @m does not fit the
 * budget alone (it takes the WRITE_REQ path); or -EAGAIN when the budget
 * has not come yet (it does, and kicks the Engine) or every slot, or the
 * budget, is in use (a completion frees some and kicks the Engine).
 */
int be__oneway_start(struct be__engine *e, struct be__msg *m, struct be__frame *f)
{
	uint32_t slot;

	if (!e->ow_budget_got)
		return -EAGAIN;
	if (m->len > e->ow_tx_budget)
		return 1;
	if (e->ow_tx_used == (BE_ONEWAY_SLOTS == 64 ? ~0ull : (1ull << BE_ONEWAY_SLOTS) - 1))
		return -EAGAIN;
	if (e->ow_tx_bytes + m->len > e->ow_tx_budget)
		return -EAGAIN;
	slot = (uint32_t)__builtin_ctzll(~e->ow_tx_used);
	*f = (struct be__frame){
		.type = BE_FR_WRITE_ONEWAY,
		.flags = m->sock->mine ? BE_FRF_OPENER : 0,
		.sock = m->sock->id,
		.msg = m->id,
		.length = m->len,
		.token = slot,
	};
	m->rkey = slot;
	m->token = slot;
	m->raddr = 0;
	return 0;
}

/* The frame of be__oneway_start() is staged: the slot is ours until the
 * last fragment completes. */
void be__oneway_sent(struct be__engine *e, struct be__msg *m)
{
	e->ow_tx_used |= 1ull << m->rkey;
	e->ow_tx_bytes += m->len;
	e->st.oneway_sent++;
	m->oneway = true;
	m->large = true;
	m->state = BE_MS_GRANTED;
}

static struct be__owslot *oneway_slot(struct be__engine *e, uint32_t slot)
{
	if (!e->ow_rx) {
		e->ow_rx = calloc(BE_ONEWAY_SLOTS, sizeof(*e->ow_rx));
		if (!e->ow_rx)
			return NULL;
	}
	return &e->ow_rx[slot];
}

int be__oneway_on_frame(struct be__engine *e, struct be_sock *s, const struct be__frame *f)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be__owslot *o;
	struct be__rxmsg *r;
	int rc;

	if (!e->oneway)
		return oneway_fail(e, "WRITE_ONEWAY not negotiated", f->token);
	if (f->length == 0 || f->length > cfg->max_msg_size || f->length > UINT32_MAX)
		return oneway_fail(e, "WRITE_ONEWAY length out of range", f->token);
	if (f->length > e->ow_rx_budget - e->ow_rx_bytes)
		return oneway_fail(e, "WRITE_ONEWAY beyond the budget we announced", f->token);
	o = oneway_slot(e, f->token);
	if (!o) {
		be__engine_fail(e, -ENOMEM, "no memory for one-way slots");
		return -ENOMEM;
	}
	if (o->busy)
		return oneway_fail(e, "WRITE_ONEWAY for a slot in use", f->token);
	o->busy = true;
	o->len = f->length;
	e->ow_rx_bytes += f->length;
	o->rx = NULL;
	o->sock = NULL;
	/* A socket we closed discards what still arrives: the data comes
	 * all the same, and is freed when it completes. */
	if (s->state != BE_SS_OPEN || s->app_closed)
		return 0;
	if (f->msg != s->rx_next_id)
		return oneway_fail(e, "WRITE_ONEWAY with an unexpected message id", f->token);
	rc = be__sock_rxq_new(e, s, f->msg, f->length, &r);
	if (rc == -ENOBUFS)
		return oneway_fail(e, "socket receive window exceeded", f->token);
	if (rc)
		return rc;
	r->oneway = true;
	s->rx_next_id++;
	o->rx = r;
	o->sock = s;
	return 0;
}

/*
 * be__oneway_on_imm() - the data of slot @slot is in @buf (@byte_len
 * bytes). Takes @buf: it completes the slot's message, or is freed when
 * its socket is gone. Returns 0 or the Engine's failure.
 */
int be__oneway_on_imm(struct be__engine *e, uint32_t slot, void *buf, uint32_t byte_len)
{
	struct be__owslot *o = slot < BE_ONEWAY_SLOTS && e->ow_rx ? &e->ow_rx[slot] : NULL;
	struct be__rxmsg *r;
	struct be_sock *s;

	/* @buf is rx_alloc's, of @byte_len bytes: lent no more. */
	e->ow_rx_alloc -= BE_MIN((uint64_t)byte_len, e->ow_rx_alloc);
	if (e->ow_alloc_wait) {
		e->ow_alloc_wait = false;
		if (e->ops->conn_rx_resume)
			e->ops->conn_rx_resume(e->conn);
	}

	if (!o || !o->busy || o->len != byte_len) {
		be_free(buf);
		return oneway_fail(e, "one-way data for no WRITE_ONEWAY of its length", slot);
	}
	r = o->rx;
	s = o->sock;
	e->ow_rx_bytes -= o->len;
	memset(o, 0, sizeof(*o));
	if (!r) {
		be_free(buf);
		return 0;
	}
	r->buf = buf;
	r->oneway = false;
	r->done = true;
	e->st.large_recv++;
	s->st.large_recv++;
	be__sock_deliver(s);
	return 0;
}

/* Socket @s is released: data still coming for it is discarded. */
void be__oneway_release_sock(struct be__engine *e, struct be_sock *s)
{
	uint32_t i;

	if (!e->ow_rx)
		return;
	for (i = 0; i < BE_ONEWAY_SLOTS; i++)
		if (e->ow_rx[i].busy && e->ow_rx[i].sock == s) {
			e->ow_rx[i].rx = NULL;
			e->ow_rx[i].sock = NULL;
		}
}

/* Our one-way message @m's last fragment retired: its slot is free. */
void be__oneway_done(struct be__engine *e, struct be__msg *m)
{
	if (!m->oneway || !(e->ow_tx_used & (1ull << m->rkey)))
		return;
	e->ow_tx_used &= ~(1ull << m->rkey);
	e->ow_tx_bytes -= m->len;
	m->oneway = false;
}

void be__oneway_tick(struct be__engine *e, uint64_t now)
{
	if (!e->ow_stalled || now < e->ow_retry_at)
		return;
	e->ow_stalled = false;
	if (e->ops->conn_rx_resume)
		e->ops->conn_rx_resume(e->conn);
}

void be__oneway_free(struct be__engine *e)
{
	free(e->ow_rx);
	e->ow_rx = NULL;
}

/*
 * be__oneway_rx_alloc() - the transport's rx_alloc hook (xport.h): a
 * bemalloc buffer of @len bytes for the one-way message whose data
 * starts arriving on @c. Returns 0 with *@out (the transport lends it
 * back in the RECV_IMM, or frees it with be__oneway_rx_free()), -EAGAIN
 * when memory is short or the budget is lent until RECV_IMMs come back
 * (the transport waits for conn_rx_resume), or -EMSGSIZE for a length we
 * never accept (beyond max_msg_size or the budget: the conn fails).
 */
int be__oneway_rx_alloc(struct be_xconn *c, uint64_t len, void **out)
{
	struct be__engine *e = c->user;
	const struct be_config *cfg;
	void *buf;

	if (!e || e->state != BE_ES_ESTABLISHED || !e->oneway)
		return -ECONNRESET;
	cfg = &e->w->ctx->cfg;
	if (!len || len > cfg->max_msg_size || len > UINT32_MAX || len > e->ow_rx_budget)
		return -EMSGSIZE;
	if (e->ow_rx_alloc + len > e->ow_rx_budget) {
		e->ow_alloc_wait = true;
		return -EAGAIN;
	}
	buf = be_alloc(len);
	/* Memory freed in other size classes counts against the limit until
	 * trimmed: trim once before backing off. */
	if (!buf && be_alloc_trim())
		buf = be_alloc(len);
	if (!buf) {
		e->ow_backoff_us = e->ow_backoff_us ?
					   BE_MIN(e->ow_backoff_us * 2, cfg->nomem_backoff_max_us) :
					   cfg->nomem_backoff_us;
		e->ow_retry_at = be__now_ns() + (uint64_t)e->ow_backoff_us * 1000;
		e->ow_stalled = true;
		e->st.alloc_backoffs++;
		be__worker_timer_at(e->w, e->ow_retry_at);
		return -EAGAIN;
	}
	e->ow_backoff_us = 0;
	e->ow_rx_alloc += len;
	*out = buf;
	return 0;
}

/* be__oneway_rx_free() - the transport's rx_free hook: a buffer of
 * be__oneway_rx_alloc() whose message will not complete (the connection
 * failed first). Takes @buf. */
void be__oneway_rx_free(struct be_xconn *c, void *buf)
{
	(void)c;
	be_free(buf);
}
