/*
 * oneway.c - large messages without a round trip, on transports whose
 * receiver allocates the destination as the data arrives (tcp).
 *
 * Why. On verbs a large message must have its destination reserved
 * before the first RDMA WRITE (WRITE_REQ / WRITE_RESP, large.c): the NIC
 * writes into registered memory it was told about. A software transport
 * reading a byte stream has no such constraint: it can ask for the
 * buffer when the header of the data arrives and read the payload
 * straight into it. The round trip then buys nothing, and on a PS pull
 * (a 64 KiB reply) it was most of the cost.
 *
 * Model. Used on an Engine when both hellos carry BE_HELLO_F_ONEWAY
 * (their transports report max_rx_alloc >= BE_ONEWAY_SLOTS). Sender: a
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
 * Backpressure. Each one-way message costs the sender a receive credit
 * for its frame's SEND and one for its RECV_IMM, as a WRITE_REQ does;
 * at most BE_ONEWAY_SLOTS are in progress per Engine, and a sender keeps
 * at most max_grant_bytes of them in progress (one always may go). When
 * bemalloc has no memory for a buffer, the allocation fails with -EAGAIN:
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
 * message id; a length within max_msg_size; a slot not in use. The
 * RECV_IMM must name a slot in use with the frame's length. A violation
 * is a protocol error on the Engine.
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

/*
 * be__oneway_start() - make @m (a large message at the head of its turn)
 * one-way: take a slot and fill @f with its WRITE_ONEWAY frame.
 * Returns 0, or -EAGAIN when every slot (or max_grant_bytes) is in use:
 * a completion frees one and kicks the Engine.
 */
int be__oneway_start(struct be__engine *e, struct be__msg *m, struct be__frame *f)
{
	uint64_t limit = e->w->ctx->cfg.max_grant_bytes;
	uint32_t slot;

	if (e->ow_tx_used == (BE_ONEWAY_SLOTS == 64 ? ~0ull : (1ull << BE_ONEWAY_SLOTS) - 1))
		return -EAGAIN;
	if (e->ow_tx_bytes && e->ow_tx_bytes + m->len > limit)
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

	if (!e->oneway)
		return oneway_fail(e, "WRITE_ONEWAY not negotiated", f->token);
	if (f->length == 0 || f->length > cfg->max_msg_size || f->length > UINT32_MAX)
		return oneway_fail(e, "WRITE_ONEWAY length out of range", f->token);
	o = oneway_slot(e, f->token);
	if (!o) {
		be__engine_fail(e, -ENOMEM, "no memory for one-way slots");
		return -ENOMEM;
	}
	if (o->busy)
		return oneway_fail(e, "WRITE_ONEWAY for a slot in use", f->token);
	o->busy = true;
	o->len = f->length;
	o->rx = NULL;
	o->sock = NULL;
	/* A socket we closed discards what still arrives: the data comes
	 * all the same, and is freed when it completes. */
	if (s->state != BE_SS_OPEN || s->app_closed)
		return 0;
	if (f->msg != s->rx_next_id)
		return oneway_fail(e, "WRITE_ONEWAY with an unexpected message id", f->token);
	r = calloc(1, sizeof(*r));
	if (!r) {
		be__engine_fail(e, -ENOMEM, "no memory for a receive");
		return -ENOMEM;
	}
	r->id = f->msg;
	r->len = f->length;
	r->oneway = true;
	if (!be__sock_rxq_add(s, r)) {
		free(r);
		return oneway_fail(e, "socket receive window exceeded", f->token);
	}
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

	if (!o || !o->busy || o->len != byte_len) {
		be_free(buf);
		return oneway_fail(e, "one-way data for no WRITE_ONEWAY of its length", slot);
	}
	r = o->rx;
	s = o->sock;
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
 * when memory is short (the transport waits for conn_rx_resume), or
 * -EMSGSIZE for a length we never accept.
 */
int be__oneway_rx_alloc(struct be_xconn *c, uint64_t len, void **out)
{
	struct be__engine *e = c->user;
	const struct be_config *cfg;
	void *buf;

	if (!e || e->state != BE_ES_ESTABLISHED || !e->oneway)
		return -ECONNRESET;
	cfg = &e->w->ctx->cfg;
	if (!len || len > cfg->max_msg_size || len > UINT32_MAX)
		return -EMSGSIZE;
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
