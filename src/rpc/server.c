/*
 * server.c - the server side: handlers by (service, method), listeners,
 * incoming requests and their reply handles.
 *
 * A request arrives as one message in a bemalloc buffer the transport
 * wrote; after its header is validated the handler receives the payload
 * pointer inside that buffer (no copy) and a struct be_rpc_req, the
 * reply handle. The handler answers now or later, from any callback of
 * the worker (a parameter-server shard answers after its lookup), exactly
 * once: be_rpc_req_reply() or be_rpc_req_fail(). The handle holds the
 * conn, so an answer after the caller hung up is dropped and counted, not
 * sent into a closed socket; it also holds the be_rpc, so a request still
 * held when the application destroys the be_rpc stays valid.
 *
 * What the server refuses without calling a handler, each with a status
 * the caller can act on: a malformed request (BE_EPROTO_PEER; a message
 * that is not even our header closes the connection), an unknown method
 * (-ENOSYS), a deadline that has passed or leaves less than the method's
 * min_remaining_us (-ETIMEDOUT), anything while draining (-ESHUTDOWN: the
 * caller retries on another replica). Service 0 is ours: method 0 is the
 * ping probes use.
 *
 * The deadline a request carries is what its caller had left when it
 * sent it; the server counts it down from when its handler first asks
 * (be_rpc_req_remaining_us()) or returns still holding the request,
 * whichever comes first. It does not date every arrival: a handler that
 * answers at once never needs the time, and a clock read is the dearest
 * step of a call. What the count leaves out, the time before the handler
 * asks, adds to what it already leaves out: the request's way here.
 *
 * Methods live in an open-addressing table keyed by service << 32 |
 * method (never 0: service 0 is not registered), kept at most half full.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

static uint32_t method_slot(uint64_t key, uint32_t cap)
{
	key ^= key >> 29;
	key *= 0xbf58476d1ce4e5b9ull;
	key ^= key >> 32;
	return (uint32_t)key & (cap - 1);
}

int be__rpc_method_lookup(struct be_rpc *rpc, uint64_t key, struct rpc_method **out)
{
	uint32_t i;

	if (!rpc->mcap)
		return -ENOENT;
	for (i = method_slot(key, rpc->mcap);; i = (i + 1) & (rpc->mcap - 1)) {
		struct rpc_method *m = &rpc->methods[i];

		if (m->key == key) {
			*out = rpc->mlast = m;
			return 0;
		}
		if (!m->key)
			return -ENOENT;
	}
}

static int methods_grow(struct be_rpc *rpc)
{
	uint32_t cap = rpc->mcap ? rpc->mcap * 2 : 16, i;
	struct rpc_method *v = calloc(cap, sizeof(*v)), *old = rpc->methods;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < rpc->mcap; i++) {
		uint32_t j;

		if (!old[i].key)
			continue;
		for (j = method_slot(old[i].key, cap); v[j].key; j = (j + 1) & (cap - 1))
			;
		v[j] = old[i];
	}
	free(old);
	rpc->methods = v;
	rpc->mcap = cap;
	rpc->mlast = NULL; /* it pointed into the old table */
	return 0;
}

int be_rpc_register(struct be_rpc *rpc, uint32_t service, uint32_t method, be_rpc_handler fn,
		    void *user, uint32_t min_remaining_us)
{
	uint64_t key = (uint64_t)service << 32 | method;
	struct rpc_method *m;
	uint32_t i;
	int rc;

	if (!rpc || !fn || service == BE_RPC_SVC_BUILTIN)
		return -EINVAL;
	if (!be__rpc_method_find(rpc, service, method, &m)) {
		m->fn = fn;
		m->user = user;
		m->min_remaining_us = min_remaining_us;
		return 0;
	}
	if ((rpc->mcount + 1) * 2 > rpc->mcap) {
		rc = methods_grow(rpc);
		if (rc)
			return rc;
	}
	for (i = method_slot(key, rpc->mcap); rpc->methods[i].key; i = (i + 1) & (rpc->mcap - 1))
		;
	m = &rpc->methods[i];
	m->key = key;
	m->fn = fn;
	m->user = user;
	m->min_remaining_us = min_remaining_us;
	rpc->mcount++;
	return 0;
}

int be_rpc_listen(struct be_rpc *rpc, const char *addr, struct be_listener **out)
{
	struct be_listener *l;
	struct rpc_lst *rl;
	int rc;

	if (!rpc || !addr)
		return -EINVAL;
	rc = be_listen(rpc->w, addr, &be__rpc_server_cbs, rpc, &l);
	if (rc)
		return rc;
	rl = malloc(sizeof(*rl));
	if (!rl) {
		be_listener_close(l);
		return -ENOMEM;
	}
	rl->l = l;
	be__list_add_tail(&rpc->lsts, &rl->link);
	if (out)
		*out = rl->l;
	return 0;
}

static void lst_close(struct be_rpc *rpc, struct rpc_lst *rl, bool close_conns)
{
	struct be__list *p, *t;

	be__list_for_each_safe(p, t, &rpc->sconns)
	{
		struct rpc_conn *c = be__list_entry(p, struct rpc_conn, link);

		if (c->lst != rl)
			continue;
		c->lst = NULL;
		if (close_conns)
			be__rpc_conn_close(c);
	}
	be_listener_close(rl->l);
	be__list_del_init(&rl->link);
	free(rl);
}

int be_rpc_unlisten(struct be_rpc *rpc, struct be_listener *l, int close_conns)
{
	struct be__list *p;

	for (p = rpc->lsts.next; p != &rpc->lsts; p = p->next) {
		struct rpc_lst *rl = be__list_entry(p, struct rpc_lst, link);

		if (rl->l == l) {
			lst_close(rpc, rl, close_conns);
			return 0;
		}
	}
	return -ENOENT;
}

void be__rpc_server_close_all(struct be_rpc *rpc)
{
	struct be__list *p, *t;

	be__list_for_each_safe(p, t, &rpc->lsts)
		lst_close(rpc, be__list_entry(p, struct rpc_lst, link), false);
	be__list_for_each_safe(p, t, &rpc->sconns)
		be__rpc_conn_close(be__list_entry(p, struct rpc_conn, link));
}

/* ---- replies */

static void reply_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	be_free(buf);
}

/*
 * Tell the client of @c what our state is now: a NOTICE whose only
 * content is the draining flag. Best effort: a notice that cannot be
 * sent (no memory, connection gone) is made up for by the flag on the
 * next reply on @c.
 */
static void notice_send(struct be_rpc *rpc, struct rpc_conn *c)
{
	struct be_rpc_hdr nh = { .type = BE_RPC_T_NOTICE,
				 .flags = rpc->draining ? BE_RPC_F_DRAINING : 0 };
	void *p;

	if (!c->s)
		return;
	p = be_rpc_buf_alloc(0);
	if (!p)
		return;
	be__rpc_hdr_put(p, &nh);
	if (be_sock_send(c->s, (uint8_t *)p - BE_RPC_HDR_LEN, BE_RPC_HDR_LEN, reply_sent, NULL)) {
		be_rpc_buf_free(p);
		return;
	}
	rpc->ss.notices++;
}

/*
 * Refusing new requests is not enough by itself: a client would go on
 * choosing this server and spend a retry on each call it sends here. So
 * every client connected is told at once, and a reply says it too (a
 * client that connects later, or missed the notice, learns it from its
 * first answer), and channels choose other replicas while any is usable.
 */
void be_rpc_drain(struct be_rpc *rpc, int on)
{
	struct be__list *p, *t;

	if (rpc->draining == (on != 0))
		return;
	rpc->draining = on != 0;
	be__list_for_each_safe(p, t, &rpc->sconns)
		notice_send(rpc, be__list_entry(p, struct rpc_conn, link));
}

/* Send the reply to request @rq on @c: @len bytes at @payload (an RPC
 * buffer, taken) with @status, its header written in place. Returns 0
 * or -ENOTCONN (dropped). */
static int reply_send(struct be_rpc *rpc, struct rpc_conn *c, const struct be_rpc_hdr *rq,
		      int status, void *payload, uint32_t len)
{
	struct be_rpc_hdr h = { .type = BE_RPC_T_REPLY,
				.flags = rpc->draining ? BE_RPC_F_DRAINING : 0,
				.id = rq->id, .service = rq->service, .method = rq->method,
				.status = status, .len = len };

	if (!c->s)
		goto drop;
	be__rpc_hdr_put(payload, &h);
	if (be_sock_send(c->s, (uint8_t *)payload - BE_RPC_HDR_LEN, (size_t)len + BE_RPC_HDR_LEN,
			 reply_sent, NULL))
		goto drop;
	rpc->ss.replies++;
	if (status)
		rpc->ss.errors++;
	return 0;
drop:
	rpc->ss.replies_dropped++;
	be_rpc_buf_free(payload);
	return -ENOTCONN;
}

/* A header-only reply with @status to request @h on @c. */
static int reply_status(struct be_rpc *rpc, struct rpc_conn *c, const struct be_rpc_hdr *h,
			int status)
{
	void *p;

	if (h->flags & BE_RPC_ONEWAY)
		return 0;
	p = be_rpc_buf_alloc(0);
	if (!p) {
		/* The caller's deadline answers for us. */
		rpc->ss.replies_dropped++;
		return -ENOMEM;
	}
	return reply_send(rpc, c, h, status, p, 0);
}

static void req_release(struct be_rpc_req *req)
{
	struct be_rpc *rpc = req->rpc;

	if (rpc->req_cur == req)
		rpc->req_cur = NULL;
	be__rpc_conn_put(req->conn);
	rpc->ss.in_flight--;
	be__list_add_head(&rpc->req_free, &req->free_link);
	be__rpc_unref(rpc);
}

int be_rpc_req_reply(struct be_rpc_req *req, void *buf, size_t len)
{
	struct be_rpc *rpc = req->rpc;
	int rc;

	if (req->h.flags & BE_RPC_ONEWAY) {
		be_rpc_buf_free(buf);
		req_release(req);
		return 0;
	}
	if (len > UINT32_MAX - BE_RPC_HDR_LEN) {
		be_rpc_buf_free(buf);
		reply_status(rpc, req->conn, &req->h, -EMSGSIZE);
		req_release(req);
		return -EMSGSIZE;
	}
	if (!buf) {
		buf = be_rpc_buf_alloc(0);
		if (!buf || len) {
			be_rpc_buf_free(buf);
			rc = len ? -EINVAL : -ENOMEM;
			reply_status(rpc, req->conn, &req->h, rc);
			req_release(req);
			return rc;
		}
	}
	rc = reply_send(rpc, req->conn, &req->h, 0, buf, (uint32_t)len);
	req_release(req);
	return rc;
}

int be_rpc_req_fail(struct be_rpc_req *req, int status)
{
	int rc = 0, st = status;

	if (st >= 0 || !be__rpc_status_valid(st)) {
		rc = st >= 0 ? -EINVAL : 0;
		st = -EIO;
	}
	if (reply_status(req->rpc, req->conn, &req->h, st) == -ENOTCONN && !rc)
		rc = -ENOTCONN;
	req_release(req);
	return rc;
}

/* Start @req's deadline at @now unless it started; its end. */
static uint64_t req_date(struct be_rpc_req *req, uint64_t now)
{
	if (!req->deadline_ns)
		req->deadline_ns = now + (uint64_t)req->h.deadline_us * 1000ull;
	return req->deadline_ns;
}

int64_t be_rpc_req_remaining_us(const struct be_rpc_req *req)
{
	uint64_t now;

	if (req->deadline_ns == UINT64_MAX)
		return INT64_MAX;
	now = rpc_now();
	/* The handle is the library's: dating it is no change the
	 * application can see but the answer. */
	return ((int64_t)req_date((struct be_rpc_req *)req, now) - (int64_t)now) / 1000;
}

void be_rpc_req_info_sized(const struct be_rpc_req *req, struct be_rpc_req_info *out)
{
	struct be_rpc_req_info i = {
		.size = sizeof(i),
		.service = req->h.service,
		.method = req->h.method,
		.flags = req->h.flags,
		.attempt = req->h.attempt,
		.id = req->h.id,
		.remaining_us = be_rpc_req_remaining_us(req),
	};

	be__abi_write(out, &i, sizeof(i), RPC_REQ_INFO_V1);
}

/* ---- incoming requests */

static void server_builtin(struct be_rpc *rpc, struct rpc_conn *c, const struct be_rpc_hdr *h,
			   void *payload)
{
	if (h->method != BE_RPC_METHOD_PING) {
		rpc->ss.no_method++;
		be_rpc_buf_free(payload);
		reply_status(rpc, c, h, -ENOSYS);
		return;
	}
	rpc->ss.pings++;
	if (rpc->draining) {
		be_rpc_buf_free(payload);
		reply_status(rpc, c, h, -ESHUTDOWN);
		return;
	}
	if (h->flags & BE_RPC_ONEWAY) {
		be_rpc_buf_free(payload);
		return;
	}
	/* Answer with the request's own buffer, emptied. */
	reply_send(rpc, c, h, 0, payload, 0);
}

void be__rpc_server_recv(struct rpc_conn *c, void *buf, size_t len)
{
	struct be_rpc *rpc = c->rpc;
	void *payload = (uint8_t *)buf + BE_RPC_HDR_LEN;
	struct rpc_method *m;
	struct be_rpc_req *req, *prev;
	struct be__list *p;
	struct be_rpc_hdr h;
	const char *why;

	if (be__rpc_hdr_decode(buf, len, &h, &why)) {
		rpc->ss.proto_errors++;
		be__log(BE_LOG_WARN, "rpc server: malformed request: %s", why);
		/* Our header with a bad field: the caller learns which request
		 * was refused. Anything else is not an RPC peer: hang up. */
		if (!be__rpc_hdr_peek(buf, len, &h) && h.type == BE_RPC_T_REQUEST) {
			h.flags = 0;
			be_free(buf);
			reply_status(rpc, c, &h, BE_EPROTO_PEER);
		} else {
			be_free(buf);
			be__rpc_conn_close(c);
		}
		return;
	}
	if (h.type != BE_RPC_T_REQUEST) {
		rpc->ss.proto_errors++;
		be__log(BE_LOG_WARN, "rpc server: a reply on a server connection");
		be_free(buf);
		be__rpc_conn_close(c);
		return;
	}
	if (h.service == BE_RPC_SVC_BUILTIN) {
		server_builtin(rpc, c, &h, payload);
		return;
	}
	if (h.flags & BE_RPC_ONEWAY)
		rpc->ss.oneway++;
	if (rpc->draining) {
		rpc->ss.refused_draining++;
		be_free(buf);
		reply_status(rpc, c, &h, -ESHUTDOWN);
		return;
	}
	if (be__rpc_method_find(rpc, h.service, h.method, &m)) {
		rpc->ss.no_method++;
		be_free(buf);
		reply_status(rpc, c, &h, -ENOSYS);
		return;
	}
	if (h.deadline_us == 0 ||
	    (h.deadline_us != BE_RPC_NO_DEADLINE && h.deadline_us < m->min_remaining_us)) {
		rpc->ss.refused_deadline++;
		be_free(buf);
		reply_status(rpc, c, &h, -ETIMEDOUT);
		return;
	}
	p = be__list_pop(&rpc->req_free);
	req = p ? be__list_entry(p, struct be_rpc_req, free_link) : malloc(sizeof(*req));
	if (!req) {
		be_free(buf);
		reply_status(rpc, c, &h, -ENOMEM);
		return;
	}
	req->rpc = rpc;
	req->conn = c;
	req->h = h;
	/* 0: the deadline starts when first asked for, or when the handler
	 * returns holding the request (see the top of the file). */
	req->deadline_ns = h.deadline_us == BE_RPC_NO_DEADLINE ? UINT64_MAX : 0;
	c->refs++;
	rpc->refs++;
	rpc->ss.in_flight++;
	rpc->ss.requests++;
	prev = rpc->req_cur;
	rpc->req_cur = req;
	RPC_APP_CB(rpc, m->fn(req, payload, h.len, m->user));
	if (rpc->req_cur == req)
		req_date(req, rpc_now());
	rpc->req_cur = prev;
}

void be__rpc_server_free(struct be_rpc *rpc)
{
	struct be__list *p;

	while ((p = be__list_pop(&rpc->req_free)))
		free(be__list_entry(p, struct be_rpc_req, free_link));
	free(rpc->methods);
	rpc->methods = NULL;
	rpc->mlast = NULL;
}

void be_rpc_server_stats_sized(struct be_rpc *rpc, struct be_rpc_server_stats *out)
{
	be__abi_write(out, &rpc->ss, sizeof(rpc->ss), RPC_SERVER_STATS_V1);
}
