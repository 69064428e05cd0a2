/*
 * call.c - client calls: attempts, replies, deadlines, retries, hedges,
 * cancellation, and the blocking wrapper.
 *
 * A call is one request and exactly one outcome. It makes attempts: the
 * first, retries after an attempt failed, and at most one hedged copy
 * when the first is slow. Each attempt has its own request id (ids.c), so
 * a reply names the attempt it answers, and the call completes at the
 * first reply; the others are dropped as late replies when they come.
 *
 *   start ──> attempt ──> reply ok ───────────────> complete(0, reply)
 *               │   └──> reply -EAGAIN/-ESHUTDOWN ─> retry or complete
 *               │   └──> reply other error ───────> complete(status)
 *               ├──> connection failed ───────────> retry or complete
 *               ├──> hedge delay ──> one more attempt elsewhere
 *               └──> deadline ────────────────────> complete(-ETIMEDOUT)
 *
 * Exactly once: complete() sets done, detaches every attempt (so nothing
 * can find the call through an id any more), cancels both timers, and
 * only then runs the callback. A reply arriving after that finds no
 * attempt behind its id and is counted as late.
 *
 * Buffers: the request buffer stays with the call until the call
 * completed and the last send of it came back (refs), so retries and the
 * hedge send the same buffer again without a copy. Its header is
 * rewritten for each attempt (id, flags, remaining deadline), which is
 * safe only while no send of it is in flight (busy); an attempt made
 * while one is, a rare case (a hedge of a large request still being
 * written), sends a copy, counted as req_copies.
 *
 * Retry rules. An attempt that failed on its connection is retried on
 * another replica when the call is idempotent, or when the server cannot
 * have run it: no send of it completed and its connection never answered
 * or completed a send. A server reply -EAGAIN or -ESHUTDOWN means the
 * work was not done, so any call is retried. A retry needs time left
 * before the deadline, an attempt left (max_attempts) and a token of the
 * budget (budget.c); a hedge the same, and an idempotent call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

enum { ATT_FIRST, ATT_RETRY, ATT_HEDGE };

/* ---- objects */

/* A zeroed call (its free_link aside): calls on the free list were
 * zeroed when they went there (call_put()), after their caller was told,
 * not on the way to a send. */
static struct rpc_call *call_get(struct be_rpc *rpc)
{
	struct be__list *p = be__list_pop(&rpc->call_free);

	if (!p)
		return calloc(1, sizeof(struct rpc_call));
	return be__list_entry(p, struct rpc_call, free_link);
}

/* Drop one reference; the last frees the request buffer and the call. */
static void call_put(struct rpc_call *c)
{
	struct be_rpc *rpc = c->rpc;

	if (--c->refs)
		return;
	be_rpc_buf_free(c->req);
	if (rpc->destroyed || c->kind == RPC_CALL_SCATTER) {
		free(c);
		return;
	}
	*c = (struct rpc_call){ 0 };
	be__list_add_head(&rpc->call_free, &c->free_link);
}

static struct rpc_attempt *att_get(struct be_rpc *rpc)
{
	struct be__list *p = be__list_pop(&rpc->att_free);

	if (!p)
		return malloc(sizeof(struct rpc_attempt));
	return be__list_entry(p, struct rpc_attempt, free_link);
}

static void att_put(struct be_rpc *rpc, struct rpc_attempt *a)
{
	be__list_add_head(&rpc->att_free, &a->free_link);
}

void be__rpc_call_free_all(struct be_rpc *rpc)
{
	struct be__list *p;

	while ((p = be__list_pop(&rpc->call_free)))
		free(be__list_entry(p, struct rpc_call, free_link));
	while ((p = be__list_pop(&rpc->att_free)))
		free(be__list_entry(p, struct rpc_attempt, free_link));
}

/* Unlink @a from its call, its conn and the id table; the replica's
 * count of attempts in flight drops (a removed replica may go). */
static void att_detach(struct rpc_call *call, struct rpc_attempt *a)
{
	struct be_rpc *rpc = call->rpc;
	struct rpc_attempt **pp;
	struct rpc_replica *rep = a->addr->rep;

	for (pp = &call->atts; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
	be__list_del_init(&a->clink);
	be__rpc_ids_del(&rpc->atts, a->id);
	a->addr->c.outstanding--;
	be__rpc_conn_put(a->conn);
	att_put(rpc, a);
	rep->outstanding--;
	be__rpc_replica_maybe_free(rep);
}

/* ---- completion */

static bool call_counts(const struct rpc_call *c)
{
	return c->kind == RPC_CALL_USER || c->kind == RPC_CALL_LEG;
}

/* Detach everything, count, but do not tell anyone yet. */
static void call_finish(struct rpc_call *call, int status, uint64_t now)
{
	struct be_rpc *rpc = call->rpc;
	struct be_rpc_chan *ch = call->ch;

	call->done = true;
	call->status = status;
	be__rpc_tmr_cancel(rpc, &call->dl_tmr);
	be__rpc_tmr_cancel(rpc, &call->hedge_tmr);
	while (call->atts)
		att_detach(call, call->atts);
	be__rpc_ids_del(&rpc->calls, call->id);
	be__list_del_init(&call->link);
	if (!call_counts(call))
		return;
	ch->c.outstanding--;
	if (!status) {
		ch->c.ok++;
		if (!(call->flags & BE_RPC_ONEWAY))
			be__rpc_hist_add(&ch->lat, now - call->start_ns);
	} else {
		be__rpc_count_error(&ch->c, status);
	}
}

/* Tell the owner of a finished call; drops the completion reference. */
static void call_notify(struct rpc_call *call, void *reply, size_t len)
{
	struct be_rpc *rpc = call->rpc;
	int status = call->status;

	switch (call->kind) {
	case RPC_CALL_USER:
		if (call->cb)
			RPC_APP_CB(rpc, call->cb(status, reply, len, call->arg));
		else
			be_rpc_buf_free(reply);
		break;
	case RPC_CALL_PROBE:
		be_rpc_buf_free(reply);
		be__rpc_probe_done(call, status);
		break;
	case RPC_CALL_LEG:
		be__rpc_scatter_leg_done(call, status, reply, len);
		break;
	}
	call_put(call);
}

void be__rpc_call_complete(struct rpc_call *call, int status)
{
	if (call->done)
		return;
	call_finish(call, status, rpc_now());
	call_notify(call, NULL, 0);
}

/* Complete now, tell at the next progress (be_rpc_cancel()). */
static void call_defer(struct rpc_call *call, int status)
{
	struct be_rpc *rpc = call->rpc;

	call_finish(call, status, rpc_now());
	call->deferred = true;
	be__list_add_tail(&rpc->deferred, &call->link);
	be__rpc_kick(rpc);
}

void be__rpc_flush(struct be_rpc *rpc)
{
	struct be__list *p;

	while ((p = be__list_pop(&rpc->deferred))) {
		struct rpc_call *call = be__list_entry(p, struct rpc_call, link);

		call->deferred = false;
		if (call->kind == RPC_CALL_SCATTER)
			be__rpc_scatter_notify(call);
		else
			call_notify(call, NULL, 0);
	}
}

/* ---- attempts */

static uint32_t call_remaining_us(const struct rpc_call *call, uint64_t now)
{
	uint64_t left;

	if (now >= call->deadline_ns)
		return 0;
	left = (call->deadline_ns - now + 999) / 1000;
	return left >= BE_RPC_NO_DEADLINE ? BE_RPC_NO_DEADLINE - 1 : (uint32_t)left;
}

/* The remaining deadline the first attempt carries: all of it. */
static uint32_t call_first_us(const struct rpc_call *call)
{
	return call->timeout_us >= BE_RPC_NO_DEADLINE ? BE_RPC_NO_DEADLINE - 1 : call->timeout_us;
}

/*
 * The first request of @call left: its start. Read after the send, so
 * on a busy-polled path the clock is read while the request travels and
 * the server works, not before it leaves (a clock read costs 20-60 ns,
 * more than any other step of a call). The latency histogram counts
 * from here, and the deadline too: it ends no earlier than the one the
 * request carries.
 */
static uint64_t call_sent(struct rpc_call *call)
{
	uint64_t now = rpc_now();

	call->start_ns = now;
	call->deadline_ns = now + (uint64_t)call->timeout_us * 1000ull;
	return now;
}

static bool call_tried(const struct rpc_call *call, const struct rpc_replica *rep)
{
	uint32_t i;

	for (i = 0; i < call->natts && i < BE_ARRAY_SIZE(call->tried); i++)
		if (call->tried[i] == rep)
			return true;
	return false;
}

/* Where the attempt goes: a probe's own address, else a replica of the
 * channel and its current address. */
static struct rpc_addr *att_target(struct rpc_call *call, int kind)
{
	struct rpc_replica *rep;

	if (call->kind == RPC_CALL_PROBE)
		return call->probe_addr;
	rep = be__rpc_pick(call->ch, call);
	if (!rep && kind == ATT_RETRY) {
		/* No replica this call has not tried: a replica whose path
		 * moved on (a port switch) is worth the retry. */
		uint32_t i;

		for (i = 0; i < call->ch->nreps; i++) {
			struct rpc_replica *r = call->ch->reps[i];

			if (be__rpc_rep_usable(r) && r->path >= 0 &&
			    (!rep || r->outstanding < rep->outstanding))
				rep = r;
		}
	}
	if (rep && kind == ATT_HEDGE && call_tried(call, rep))
		rep = NULL;
	if (!rep && kind == ATT_HEDGE) {
		/* No other replica: the same one is worth a hedge only over
		 * another path than its attempts in flight took (the path
		 * moved because the one they took fell silent). */
		struct rpc_attempt *a;

		for (a = call->atts; a; a = a->next) {
			struct rpc_replica *r = a->addr->rep;
			struct rpc_attempt *b;

			if (!be__rpc_rep_usable(r))
				continue;
			for (b = call->atts; b; b = b->next)
				if (b->addr == &r->addrs[r->path])
					break;
			if (!b)
				return &r->addrs[r->path];
		}
		return NULL;
	}
	if (!rep)
		return NULL;
	return &rep->addrs[rep->path];
}

/*
 * Send one attempt of @call. Returns 0, -EHOSTUNREACH (nowhere to send
 * it), -EAGAIN (the budget said no), -ETIMEDOUT (no time left), or a
 * send error that is not the connection's (-ENOMEM, -EMSGSIZE).
 */
static int call_attempt(struct rpc_call *call, int kind)
{
	struct be_rpc *rpc = call->rpc;
	struct be_rpc_chan *ch = call->ch;
	struct be_rpc_hdr h;
	struct rpc_attempt *a;
	struct rpc_addr *addr;
	struct rpc_conn *conn;
	/* The first attempt has its whole timeout left and reads the clock
	 * only once its request left (call_sent()); the others read it now. */
	uint64_t now = kind == ATT_FIRST ? 0 : rpc_now();
	void *payload;
	bool budgeted = kind == ATT_FIRST || call->kind == RPC_CALL_PROBE;
	int tries, rc = -EHOSTUNREACH;

	if (call->natts >= BE_ARRAY_SIZE(call->tried) || call->natts > BE_RPC_MAX_ATTEMPT)
		return -EHOSTUNREACH;
	/* A connection that fails at once (a malformed address, a closed
	 * socket) takes its address down, which moves the replica's path
	 * on: try again, at most once per address of the set. */
	for (tries = 0; tries < BE_RPC_MAX_ADDRS * 4; tries++) {
		h.deadline_us = kind == ATT_FIRST ? call_first_us(call) :
						    call_remaining_us(call, now);
		if (!h.deadline_us)
			return -ETIMEDOUT;
		addr = att_target(call, kind);
		if (!addr)
			return rc;
		if (!budgeted) {
			if (!be__rpc_budget_withdraw(&ch->budget, &ch->cfg, now)) {
				ch->c.budget_denied++;
				return -EAGAIN;
			}
			budgeted = true;
		}
		/* The address's open connection, else a new one. */
		conn = addr->conn;
		rc = conn && conn->s ? 0 : be__rpc_addr_conn(addr, &conn);
		if (rc && call->kind == RPC_CALL_PROBE)
			return -EHOSTUNREACH; /* the probe's failure handles it */
		if (rc) {
			be__rpc_addr_down(addr, rc);
			rc = -EHOSTUNREACH;
			continue;
		}
		payload = call->req;
		if (call->busy) {
			payload = be_rpc_buf_alloc(call->len);
			if (!payload)
				return -ENOMEM;
			memcpy(payload, call->req, call->len);
			ch->c.req_copies++;
		}
		a = att_get(rpc);
		if (!a || be__rpc_ids_add(&rpc->atts, a, &a->id)) {
			if (a)
				att_put(rpc, a);
			if (payload != call->req)
				be_rpc_buf_free(payload);
			return -ENOMEM;
		}
		h.type = BE_RPC_T_REQUEST;
		h.flags = (uint16_t)(call->flags & (BE_RPC_ONEWAY | BE_RPC_IDEMPOTENT));
		if (kind == ATT_HEDGE)
			h.flags |= BE_RPC_HEDGED;
		else if (call->natts)
			h.flags |= BE_RPC_RETRY;
		h.attempt = (uint8_t)call->natts;
		h.id = a->id;
		h.service = call->service;
		h.method = call->method;
		h.status = 0;
		h.len = call->len;
		be__rpc_hdr_put(payload, &h);
		rc = be_sock_send(conn->s, (uint8_t *)payload - BE_RPC_HDR_LEN,
				  (size_t)call->len + BE_RPC_HDR_LEN, be__rpc_send_cb, call);
		if (rc) {
			be__rpc_ids_del(&rpc->atts, a->id);
			att_put(rpc, a);
			if (payload != call->req)
				be_rpc_buf_free(payload);
			if (rc == -ENOMEM || rc == -EMSGSIZE || rc == -EINVAL)
				return rc;
			/* The socket is closed or its Engine failed: its
			 * on_close is on the way; do not wait for it. */
			if (call->kind == RPC_CALL_PROBE)
				return -EHOSTUNREACH;
			be__rpc_addr_down(addr, rc);
			rc = -EHOSTUNREACH;
			continue;
		}
		if (kind == ATT_FIRST)
			now = call_sent(call);
		call->refs++;
		rpc->refs++;
		if (payload == call->req)
			call->busy = true;
		addr->c.calls++;
		if (kind == ATT_RETRY)
			addr->c.retries++;
		else if (kind == ATT_HEDGE)
			addr->c.hedges++;
		if (call->natts < BE_ARRAY_SIZE(call->tried))
			call->tried[call->natts] = addr->rep;
		call->natts++;
		if (call->flags & BE_RPC_ONEWAY) {
			/* Nothing will answer: the send completion completes the
			 * call, so the attempt needs no record. */
			be__rpc_ids_del(&rpc->atts, a->id);
			att_put(rpc, a);
			return 0;
		}
		a->call = call;
		a->conn = conn;
		a->addr = addr;
		a->sent_ns = now;
		a->no = h.attempt;
		a->hedge = kind == ATT_HEDGE;
		a->sent = false;
		conn->refs++;
		be__list_add_tail(&conn->atts, &a->clink);
		a->next = call->atts;
		call->atts = a;
		addr->c.outstanding++;
		addr->rep->outstanding++;
		return 0;
	}
	return rc;
}

/* After attempt failures: retry if the rules allow, else complete with
 * @err once no attempt is left in flight. @ran: the server may have run
 * the failed attempt. */
static void call_retry(struct rpc_call *call, int err, bool ran)
{
	const struct be_rpc_config *cfg = &call->ch->cfg;
	bool may = !(call->flags & BE_RPC_NO_RETRY) && call->kind != RPC_CALL_PROBE &&
		   !(call->flags & BE_RPC_ONEWAY) && call->natts < cfg->max_attempts &&
		   ((call->flags & BE_RPC_IDEMPOTENT) || !ran);

	if (call->done)
		return;
	if (!call->last_err || err != -EHOSTUNREACH)
		call->last_err = err;
	if (may) {
		int rc = call_attempt(call, ATT_RETRY);

		if (!rc) {
			call->ch->c.retries++;
			return;
		}
	}
	if (call->atts)
		return; /* a hedge or another attempt may still answer */
	be__rpc_call_complete(call, call->last_err);
}

static bool status_retryable(int status)
{
	return status == -EAGAIN || status == -ESHUTDOWN;
}

void be__rpc_conn_failed(struct rpc_conn *c, int err)
{
	struct be__list *p, *t;

	c->refs++;
	be__list_for_each_safe(p, t, &c->atts)
	{
		struct rpc_attempt *a = be__list_entry(p, struct rpc_attempt, clink);
		struct rpc_call *call = a->call;
		bool ran = a->sent || c->established || c->heard;

		/* The attempt list may change under us (a retry on this very
		 * conn is impossible: its address is down), so restart from
		 * the head after each. */
		att_detach(call, a);
		call_retry(call, err, ran);
		t = c->atts.next;
	}
	be__rpc_conn_put(c);
}

/* The application's send came back: release the buffer's hold. */
void be__rpc_send_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	struct rpc_call *call = arg;
	struct be_rpc *rpc = call->rpc;
	void *payload = (uint8_t *)buf + BE_RPC_HDR_LEN;

	if (!status && !rpc->destroyed) {
		struct rpc_attempt *a;

		/* Our own header: its id names the attempt, if it is still
		 * waiting (usually the reply came first); the request left. */
		a = be__rpc_ids_get(&rpc->atts, be__rpc_hdr_id(buf), NULL);
		if (a && a->call == call) {
			a->sent = true;
			a->conn->established = true;
		}
	}
	if (payload == call->req)
		call->busy = false;
	else
		be_rpc_buf_free(payload);
	if ((call->flags & BE_RPC_ONEWAY) && !call->done)
		be__rpc_call_complete(call, status);
	call_put(call);
	be__rpc_unref(rpc);
}

/* ---- replies */

static void client_proto_error(struct rpc_conn *c, void *buf, const char *why)
{
	be__log(BE_LOG_WARN, "rpc client: %s: %s", c->addr ? c->addr->str : "(closed)", why);
	be_free(buf);
	if (c->addr) {
		c->addr->c.proto_errors++;
		be__rpc_addr_down(c->addr, BE_EPROTO_PEER);
	} else {
		be__rpc_conn_failed(c, BE_EPROTO_PEER);
		be__rpc_conn_close(c);
	}
}

/* The hedge won, or the first reply came while another attempt was
 * outstanding past the hedge delay: the slower replica counts a failure
 * (a replica that is only ever overtaken gets ejected). */
static void call_slow_losers(struct rpc_call *call, struct rpc_attempt *winner, uint64_t now)
{
	struct rpc_attempt *a;
	uint64_t delay;

	if (!call->hedged)
		return;
	delay = call->hedge_ns;
	for (a = call->atts; a; a = a->next)
		if (a != winner && now - a->sent_ns >= delay)
			be__rpc_rep_failed(a->addr->rep);
}

void be__rpc_client_recv(struct rpc_conn *c, void *buf, size_t len)
{
	struct be_rpc *rpc = c->rpc;
	struct rpc_attempt *a;
	struct rpc_call *call;
	struct rpc_addr *addr;
	struct be_rpc_hdr h;
	const char *why;
	bool late;
	uint64_t now;

	if (be__rpc_hdr_decode(buf, len, &h, &why)) {
		client_proto_error(c, buf, why);
		return;
	}
	if (h.type == BE_RPC_T_REQUEST) {
		client_proto_error(c, buf, "a request on a client connection");
		return;
	}
	now = rpc_now();
	c->heard = true;
	c->last_rx_ns = now;
	/* Replies and notices say whether the server is draining. */
	if (c->addr)
		be__rpc_rep_server_state(c->addr, h.flags & BE_RPC_F_DRAINING);
	if (h.type == BE_RPC_T_NOTICE) {
		be_free(buf);
		return;
	}
	a = be__rpc_ids_get(&rpc->atts, h.id, &late);
	if (!a) {
		if (!late) {
			client_proto_error(c, buf, "reply to a request never sent");
			return;
		}
		/* The call completed (deadline, cancel, another attempt). */
		be_free(buf);
		if (c->addr) {
			c->addr->c.late_replies++;
			c->addr->rep->ch->c.late_replies++;
		}
		return;
	}
	if (a->conn != c) {
		client_proto_error(c, buf, "reply on another connection than its request");
		return;
	}
	call = a->call;
	if (h.service != call->service || h.method != call->method) {
		client_proto_error(c, buf, "reply names another method than its request");
		return;
	}
	addr = a->addr;
	be__rpc_addr_ok(addr, c);
	if (!h.status) {
		addr->c.ok++;
		be__rpc_rep_ok(addr->rep);
		if (a->hedge && call_counts(call))
			call->ch->c.hedge_wins++;
		call_slow_losers(call, a, now);
		call_finish(call, 0, now);
		call_notify(call, (uint8_t *)buf + BE_RPC_HDR_LEN, h.len);
		return;
	}
	be_free(buf);
	addr->c.errors++;
	if (status_retryable(h.status)) {
		att_detach(call, a);
		call_retry(call, h.status, false);
		return;
	}
	addr->c.server_errors++;
	be__rpc_rep_ok(addr->rep); /* it answered: alive */
	be__rpc_call_complete(call, h.status);
}

/* ---- timers */

static void call_deadline(struct be_rpc *rpc, struct rpc_tmr *t)
{
	struct rpc_call *call = container_of(t, struct rpc_call, dl_tmr);
	struct rpc_addr *hit[BE_ARRAY_SIZE(call->tried)];
	bool silent[BE_ARRAY_SIZE(call->tried)];
	struct rpc_attempt *a;
	unsigned int i, n = 0;

	/* Pin the replicas of the attempts in flight: completing the call
	 * detaches them, and only then may their addresses react (which
	 * can close conns and fail other calls' attempts). An address that
	 * answered anything since the attempt was sent is slow, not silent. */
	for (a = call->atts; a && n < BE_ARRAY_SIZE(hit); a = a->next) {
		silent[n] = a->conn->last_rx_ns < a->sent_ns;
		hit[n++] = a->addr;
		a->addr->rep->outstanding++;
	}
	be__rpc_call_complete(call, -ETIMEDOUT);
	for (i = 0; i < n; i++) {
		struct rpc_replica *rep = hit[i]->rep;

		be__rpc_addr_timeout(hit[i], silent[i]);
		rep->outstanding--;
		be__rpc_replica_maybe_free(rep);
	}
}

static void call_hedge(struct be_rpc *rpc, struct rpc_tmr *t)
{
	struct rpc_call *call = container_of(t, struct rpc_call, hedge_tmr);

	struct rpc_attempt *a;

	if (call->done || !call->atts || call->natts >= call->ch->cfg.max_attempts)
		return;
	/* Half the deadline and nothing at all back on the connection since
	 * the attempt left: a path dropping traffic (a port down, an RDMA
	 * path broken) rather than a slow server, which answers other calls.
	 * Move the replica off it before hedging, so the hedge (and the
	 * calls after it) take another path. A connection that never
	 * answered anything is not silent but still coming up (rdma_cm takes
	 * its time), and its calls wait for it. */
	for (a = call->atts; a; a = a->next)
		if (a->conn->heard && a->conn->last_rx_ns < a->sent_ns)
			be__rpc_addr_suspect(a->addr);
	if (!call_attempt(call, ATT_HEDGE)) {
		call->hedged = true;
		call->ch->c.hedges++;
	}
}

/* ---- starting */

/* A call that has not been sent yet (kind, buffer, deadline). */
static inline int call_new(struct be_rpc_chan *ch, int kind, uint32_t service, uint32_t method,
			   void *req, size_t len, const struct be_rpc_call_opts *o,
			   be_rpc_done_cb cb, void *arg, bool want_id, struct rpc_call **out)
{
	struct be_rpc *rpc = ch->rpc;
	uint32_t flags = o ? o->flags : 0;
	struct rpc_call *call;

	if (len > UINT32_MAX - BE_RPC_HDR_LEN || (!req && len))
		return -EINVAL;
	if (flags & ~(BE_RPC_ONEWAY | BE_RPC_IDEMPOTENT | BE_RPC_NO_HEDGE | BE_RPC_NO_RETRY))
		return -EINVAL;
	/* A callback run by be_rpc_chan_destroy() calling again on the same
	 * channel would keep the destroy busy forever. */
	if (ch->destroying)
		return -ESHUTDOWN;
	call = call_get(rpc);
	if (!call)
		return -ENOMEM;
	/* What the caller asked; the rest starts at 0 (call_get()), and
	 * start_ns and deadline_ns are set when the request leaves. */
	call->kind = kind;
	call->rpc = rpc;
	call->ch = ch;
	call->service = service;
	call->method = method;
	call->flags = flags;
	call->req = req;
	call->len = (uint32_t)len;
	call->refs = 1;
	call->timeout_us = o && o->timeout_us ? o->timeout_us : ch->cfg.timeout_us;
	call->cb = cb;
	call->arg = arg;
	/* A call nobody can name (its caller did not ask for the id) needs
	 * no entry in the table: id 0 is never issued, and deleting it is a
	 * no-op. */
	if (want_id && be__rpc_ids_add(&rpc->calls, call, &call->id)) {
		call->req = NULL; /* the caller keeps its buffer */
		call_put(call);
		return -ENOMEM;
	}
	be__list_init(&call->link);
	*out = call;
	return 0;
}

/* Undo call_new(): the caller keeps its buffer. */
static void call_drop(struct rpc_call *call)
{
	be__rpc_ids_del(&call->rpc->calls, call->id);
	call->req = NULL;
	call->refs = 1;
	call_put(call);
}

/* Arm the deadline, send the first attempt, arm the hedge. */
static inline int call_launch(struct rpc_call *call)
{
	struct be_rpc *rpc = call->rpc;
	struct be_rpc_chan *ch = call->ch;
	const struct be_rpc_config *cfg = &ch->cfg;
	uint32_t flags = call->flags;
	int rc;

	rc = call_attempt(call, ATT_FIRST);
	if (rc) {
		if (rc == -EAGAIN || rc == -ETIMEDOUT)
			rc = -EHOSTUNREACH;
		if (rc == -EHOSTUNREACH && call_counts(call))
			ch->c.unavailable++;
		return rc;
	}
	be__list_add_tail(&ch->calls, &call->link);
	if (call_counts(call)) {
		ch->c.calls++;
		ch->c.outstanding++;
		be__rpc_budget_deposit(&ch->budget, call->start_ns);
	}
	/* Without its deadline timer a call could wait forever for a
	 * frozen server: no timer, no call. The timer starts with the
	 * request's send; arming fails only when the heap cannot grow,
	 * and then the call, already sent, ends at the next progress. */
	if (be__rpc_tmr_arm(rpc, &call->dl_tmr, call->deadline_ns, call_deadline)) {
		call_defer(call, -ENOMEM);
		return 0;
	}
	if (call->kind != RPC_CALL_PROBE && !(flags & (BE_RPC_ONEWAY | BE_RPC_NO_HEDGE |
						       BE_RPC_NO_RETRY)) &&
	    (flags & BE_RPC_IDEMPOTENT) && cfg->max_attempts > 1 &&
	    (cfg->hedge_us || cfg->hedge_pct)) {
		uint64_t d = cfg->hedge_us ? (uint64_t)cfg->hedge_us * 1000ull :
					     (uint64_t)call->timeout_us * 10ull * cfg->hedge_pct;

		call->hedge_ns = d;
		/* Without the timer the call is only not hedged. */
		if (d < (uint64_t)call->timeout_us * 1000ull)
			be__rpc_tmr_arm(rpc, &call->hedge_tmr, call->start_ns + d, call_hedge);
	}
	return 0;
}

/* be__rpc_call_start(), inline in be_rpc_call(). */
static inline int call_start(struct be_rpc_chan *ch, int kind, uint32_t service, uint32_t method,
			     void *req, size_t len, const struct be_rpc_call_opts *o,
			     be_rpc_done_cb cb, void *arg, bool want_id, struct rpc_call **out)
{
	struct rpc_call *call;
	bool own_buf = false;
	int rc;

	if (!req && !len) {
		/* Even an empty request needs room for its header. */
		req = be_rpc_buf_alloc(0);
		if (!req)
			return -ENOMEM;
		own_buf = true;
	}
	rc = call_new(ch, kind, service, method, req, len, o, cb, arg, want_id, &call);
	if (rc)
		goto err_buf;
	rc = call_launch(call);
	if (rc) {
		call_drop(call);
		goto err_buf;
	}
	*out = call;
	return 0;

err_buf:
	if (own_buf)
		be_rpc_buf_free(req);
	return rc;
}

int be__rpc_call_start(struct be_rpc_chan *ch, int kind, uint32_t service, uint32_t method,
		       void *req, size_t len, const struct be_rpc_call_opts *o, be_rpc_done_cb cb,
		       void *arg, bool want_id, struct rpc_call **out)
{
	return call_start(ch, kind, service, method, req, len, o, cb, arg, want_id, out);
}

int be_rpc_call(struct be_rpc_chan *ch, uint32_t service, uint32_t method, void *req, size_t len,
		const struct be_rpc_call_opts *opts, be_rpc_done_cb cb, void *arg, uint64_t *id)
{
	struct be_rpc_call_opts o;
	struct rpc_call *call;
	int rc;

	/* Without options (the common call) there is nothing to copy:
	 * call_new() reads NULL as all 0. */
	if (!ch || (opts && be__rpc_opts(&o, opts)) ||
	    (!cb && !(opts && (o.flags & BE_RPC_ONEWAY))))
		return -EINVAL;
	rc = call_start(ch, RPC_CALL_USER, service, method, req, len, opts ? &o : NULL, cb, arg,
			id != NULL, &call);
	if (rc)
		return rc;
	if (id)
		*id = call->id;
	return 0;
}

int be__rpc_probe_start(struct be_rpc_chan *ch, struct rpc_addr *a, struct rpc_replica *rep,
			uint64_t *id)
{
	struct be_rpc_call_opts o = { .timeout_us = ch->cfg.probe_timeout_ms * 1000u,
				      .flags = BE_RPC_NO_RETRY | BE_RPC_NO_HEDGE };
	struct rpc_call *call;
	void *req = be_rpc_buf_alloc(0);
	int rc;

	if (!req)
		return -ENOMEM;
	rc = call_new(ch, RPC_CALL_PROBE, BE_RPC_SVC_BUILTIN, BE_RPC_METHOD_PING, req, 0, &o,
		      NULL, NULL, true, &call);
	if (rc) {
		be_rpc_buf_free(req);
		return rc;
	}
	call->probe_addr = a;
	call->probe_rep = rep;
	rc = call_launch(call);
	if (rc) {
		call_drop(call);
		be_rpc_buf_free(req);
		return rc;
	}
	a->c.probes++;
	ch->c.probes++;
	*id = call->id;
	return 0;
}

/* ---- cancellation and the blocking wrapper */

int be_rpc_cancel(struct be_rpc *rpc, uint64_t id)
{
	struct rpc_call *call = be__rpc_ids_get(&rpc->calls, id, NULL);

	if (!call || call->done || call->kind == RPC_CALL_PROBE || call->kind == RPC_CALL_LEG)
		return -ENOENT;
	if (call->kind == RPC_CALL_SCATTER)
		be__rpc_scatter_cancel(call);
	else
		call_defer(call, -ECANCELED);
	return 0;
}

void be__rpc_call_defer(struct rpc_call *call, int status)
{
	call_defer(call, status);
}

/* Complete a call the channel is dropping (destroy): at once. */
void be__rpc_call_abort(struct rpc_call *call)
{
	be__rpc_call_complete(call, -ECANCELED);
}

struct sync_res {
	bool done;
	int status;
	void *reply;
	size_t len;
};

static void sync_cb(int status, void *reply, size_t len, void *arg)
{
	struct sync_res *r = arg;

	r->done = true;
	r->status = status;
	r->reply = reply;
	r->len = len;
}

int be_rpc_call_sync(struct be_rpc_chan *ch, uint32_t service, uint32_t method, void *req,
		     size_t len, const struct be_rpc_call_opts *opts, void **reply,
		     size_t *reply_len)
{
	struct sync_res r = { 0 };
	struct be_rpc *rpc;
	uint64_t id;
	int rc;

	if (reply)
		*reply = NULL;
	if (reply_len)
		*reply_len = 0;
	if (!ch) {
		be_rpc_buf_free(req);
		return -EINVAL;
	}
	rpc = ch->rpc;
	if (rpc->cb_depth) {
		be_rpc_buf_free(req);
		return -EDEADLK;
	}
	rc = be_rpc_call(ch, service, method, req, len, opts, sync_cb, &r, &id);
	if (rc) {
		be_rpc_buf_free(req);
		return rc;
	}
	while (!r.done) {
		rc = be_worker_wait(rpc->w, 100);
		if (rc < 0 && !r.done) {
			/* The worker is broken: end the call here, since its
			 * result lives on this stack. */
			be_rpc_cancel(rpc, id);
			be__rpc_flush(rpc);
			if (!r.done)
				return rc;
		}
	}
	if (r.status) {
		be_rpc_buf_free(r.reply);
		return r.status;
	}
	if (reply)
		*reply = r.reply;
	else
		be_rpc_buf_free(r.reply);
	if (reply_len)
		*reply_len = r.len;
	return 0;
}
