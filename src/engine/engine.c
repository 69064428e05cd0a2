/*
 * engine.c - Engines: one reliable connection each, its handshake, its
 * socket id tables, failure and teardown.
 *
 * Model. An Engine is created by be_sock_connect() (connector side,
 * reusable by later connects from the same worker to the same address,
 * however spelled: see be__engine_key; while it connects, only as long
 * as a Socket waits for it) or
 * by a CONNECT_REQUEST on a listener (acceptor side). Both sides send a
 * hello in the connect private data (proto.h); the acceptor validates the
 * connector's in the request and rejects with a reason, the connector
 * validates the acceptor's at ESTABLISHED. Credits granted to the peer are
 * reserved from the worker's SRQ before the hello promises them.
 *
 * Failure. be__engine_fail() is the single way an Engine dies (transport
 * disconnect, completion error, protocol violation, keepalive timeout,
 * connect failure). It records the error, fails everything not yet posted,
 * queues on_close for the sockets, disconnects, and puts the Engine on the
 * worker's reap list. Reaping runs after the current batch of completions
 * (which may still name the connection): it destroys the connection (after
 * which the transport reports nothing more about it), completes every
 * posted-but-unretired WR with the error, frees the buffers lent to the
 * peer, and detaches the sockets. Every pending operation thus completes
 * exactly once, promptly, with the Engine's error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

/* Our transport lets a receiver allocate as data arrives (oneway.c). */
static bool engine_can_oneway(const struct be__engine *e)
{
	return e->w->ctx->cfg.oneway && e->wd->cd->attr.max_rx_alloc >= BE_ONEWAY_SLOTS &&
	       e->ops->conn_rx_resume;
}

static void engine_hello(struct be__engine *e, struct be__hello *h)
{
	const struct be_config *cfg = &e->w->ctx->cfg;

	*h = (struct be__hello){
		.magic = BE_PROTO_MAGIC,
		.version = BE_PROTO_VERSION,
		.flags = (uint16_t)((cfg->auth_secret_len ? BE_HELLO_F_AUTH : 0) |
				    (engine_can_oneway(e) ? BE_HELLO_F_ONEWAY : 0)),
		.recv_buf_size = cfg->recv_buf_size,
		.eager_max = cfg->eager_max,
		.credits = e->granted_to_peer,
		.max_sockets = cfg->max_sockets,
		.max_msg_size = cfg->max_msg_size,
		.keepalive_ms = cfg->keepalive_ms,
		.sock_window = cfg->sock_window,
	};
}

static void engine_set_peer(struct be__engine *e, const struct be__hello *h)
{
	const struct be_config *cfg = &e->w->ctx->cfg;

	e->peer = *h;
	be__credit_init(&e->cr, h->credits, e->granted_to_peer);
	e->cr.grant_max = BE_MAX(cfg->credits, e->granted_to_peer);
	/* Until admitted only AUTH frames go: staging buffers of the least
	 * size a peer may announce, whatever this one asked for (admit.c). */
	e->sbuf_size = BE_MIN(h->recv_buf_size, BE_PROTO_MIN_RECV_BUF);
	e->eager_max = BE_MIN(cfg->eager_max, h->recv_buf_size - BE_FRAME_HDR);
	e->oneway = (h->flags & BE_HELLO_F_ONEWAY) && engine_can_oneway(e);
}

/*
 * be__engine_admitted() - @e admitted its peer (admit.c): its staging
 * buffers take the peer's size, and once the transport is up too the
 * Engine is established, announces its one-way budget (oneway.c) and
 * sends what waited. No transport shares
 * anything with a peer because it was admitted (docs/SECURITY.md).
 */
void be__engine_admitted(struct be__engine *e)
{
	e->sbuf_size = e->peer.recv_buf_size;
	/* Staging buffers for control frames even when bemalloc is at its
	 * limit later: a receiver out of memory must still say so. */
	be__sendbuf_free_all(e);
	be__sendbuf_prealloc(e, 2);
	e->state = BE_ES_ESTABLISHED;
	e->st.state = BE_ES_ESTABLISHED;
	e->last_rx_ns = e->last_tx_ns = be__now_ns();
	be_log_dbg("engine %s: established", e->addr);
	be__oneway_announce(e);
	be__engine_kick(e);
}

static struct be__engine *engine_new(struct be_worker *w, struct be__wdev *wd, const char *addr)
{
	const struct be_config *cfg = &w->ctx->cfg;
	struct be__engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	if (be__window_init(&e->win, wd->cd->sq_depth, wd->cd->send_window)) {
		free(e);
		return NULL;
	}
	be__window_set_soft(&e->win, wd->cd->mixed_window);
	e->w = w;
	e->wd = wd;
	e->ops = wd->cd->ops;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	e->refs = 1;
	be__list_init(&e->wlink);
	be__list_init(&e->klink);
	be__list_init(&e->rlink);
	be__list_init(&e->wdlink);
	be__list_init(&e->fifo.txq);
	be__list_init(&e->fifo.fragq);
	be__list_init(&e->fifo.link);
	e->fifo.fifo = true;
	be__list_init(&e->active);
	be__list_init(&e->ctrlq);
	be__list_init(&e->sbfree);
	be__list_init(&e->backoff);
	be__list_init(&e->rxlog);
	e->frag_size = wd->cd->frag_size;
	e->frag_bulk = wd->cd->frag_bulk;
	e->max_inline = BE_MIN(wd->cd->attr.max_inline, 256u);
	e->gather3 = wd->cd->attr.max_sge >= 3;
	e->last_rx_ns = e->last_tx_ns = be__now_ns();
	e->deadline_ns = e->last_rx_ns + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
	be__worker_timer_at(w, e->deadline_ns + 1);
	e->st.send_window = wd->cd->send_window;
	e->st.frag_size = e->frag_size;
	return e;
}

/* Link a fully set up engine into the worker. */
static void engine_link(struct be__engine *e)
{
	be__list_add_tail(&e->w->engines, &e->wlink);
	e->w->nengines++;
}

static void engine_free(struct be__engine *e)
{
	be__sendbuf_free_all(e);
	be__window_free(&e->win);
	free(e->mine);
	free(e->theirs);
	free(e->free_ids);
	free(e->grants);
	be__oneway_free(e);
	be__peer_put(e);
	free(e);
}

void be__engine_unref(struct be__engine *e)
{
	if (--e->refs == 0)
		engine_free(e);
}

static struct be_xconn_attr engine_conn_attr(struct be__engine *e)
{
	const struct be_config *cfg = &e->w->ctx->cfg;

	return (struct be_xconn_attr){
		.send_cq = e->wd->cq,
		.recv_cq = e->wd->cq,
		.srq = e->wd->srq,
		.max_send_wr = e->wd->cd->sq_depth,
		.rx_alloc = be__oneway_rx_alloc,
		.rx_free = be__oneway_rx_free,
		.max_inline = 256,
		.timeout_ms = (int)BE_MIN(cfg->connect_timeout_ms, (uint32_t)INT32_MAX),
		.user = e,
	};
}

/*
 * be__engine_key() - the reuse key of a connect to "@scheme://@rest" on
 * transport @ops into @key (@len bytes): "scheme://" + the transport's
 * canonical form of @rest (addr_canon: for tcp and verbs the resolved
 * numeric "ip:port", so "localhost:05000" and "127.0.0.1:5000" give one
 * key where localhost is 127.0.0.1; shm names are their own). A name
 * with several results is keyed by its first: when the connect falls
 * back to a later one, a connect spelled as that later address opens
 * an Engine of its own. Blocks while a host name resolves.
 * Returns 0, -EINVAL (bad address, key too long) or the transport's
 * -errno for an address it cannot use (-EHOSTUNREACH: name unknown).
 */
int be__engine_key(const struct be_xport_ops *ops, const char *scheme, const char *rest,
		   char *key, size_t len)
{
	size_t n;
	int rc;

	rc = snprintf(key, len, "%s://", scheme);
	if (rc < 0 || (size_t)rc >= len)
		return -EINVAL;
	n = (size_t)rc;
	if (ops->addr_canon)
		return ops->addr_canon(rest, key + n, len - n);
	rc = snprintf(key + n, len - n, "%s", rest);
	return rc < 0 || (size_t)rc >= len - n ? -EINVAL : 0;
}

/* Start the transport connect of @e, a connector, to its address with
 * its hello. 0 or the transport's -errno (logged). */
static int engine_xconnect(struct be__engine *e)
{
	struct be_xconn_attr attr = engine_conn_attr(e);
	int rc;

	rc = e->ops->connect(e->wd->evch, strstr(e->addr, "://") + 3, &attr, e->hello_c,
			     sizeof(e->hello_c), &e->conn);
	if (rc) {
		be_log_err("engine %s: connect failed: %s", e->addr, be_strerror(rc));
		return rc;
	}
	e->conn->user = e;
	return 0;
}

void be__engine_queues_ready(struct be__engine *e, int rc)
{
	if (e->state == BE_ES_FAILED)
		return;
	if (!rc)
		rc = engine_xconnect(e);
	if (rc)
		be__engine_fail(e, rc, "cannot start connecting");
}

/*
 * be__engine_connect() - start connecting a reusable Engine. @addr is the
 * address as the application gave it (logs, stats), and the transport
 * connects to it as given: a host name's results are tried in turn
 * (addr.h), so "localhost" reaches a listener on 127.0.0.1 even where it
 * resolves to ::1 first. @key is from be__engine_key(): the name's first
 * result, which is what the Engine reaches unless that one fails.
 */
int be__engine_connect(struct be_worker *w, struct be__wdev *wd, const char *addr,
		       const char *key, struct be__engine **out)
{
	const struct be_config *cfg = &w->ctx->cfg;
	struct be__hello h;
	struct be__engine *e;
	int rc;

	if (!strstr(addr, "://") || strlen(key) >= sizeof(e->key))
		return -EINVAL;
	e = engine_new(w, wd, addr);
	if (!e)
		return -ENOMEM;
	snprintf(e->key, sizeof(e->key), "%s", key);
	rc = be__wdev_reserve(wd, cfg->credits_init);
	if (rc) {
		be_log_err("engine %s: no receive buffers for %u credits", addr, cfg->credits_init);
		goto err_free;
	}
	e->granted_to_peer = cfg->credits_init;
	e->connector = true;
	e->reusable = true;
	e->admit = BE_ADM_WAIT_XPORT;
	engine_hello(e, &h);
	be__hello_encode(&h, e->hello_c);
	if (wd->building) {
		/* The worker's queues are still being set up (wdev.c): the
		 * transport connect starts once they are there. */
		be__list_add_tail(&wd->waiting, &e->wdlink);
	} else {
		rc = engine_xconnect(e);
		if (rc)
			goto err_unreserve;
	}
	engine_link(e);
	be_log_dbg("engine %s (%s): connecting", addr, key);
	*out = e;
	return 0;

err_unreserve:
	be__wdev_unreserve(wd, e->granted_to_peer);
err_free:
	engine_free(e);
	return rc;
}

/* A live connector Engine of @w whose key (be__engine_key) is @key. A
 * list scan: it runs once per be_sock_connect, not per message. */
struct be__engine *be__engine_find(struct be_worker *w, const char *key)
{
	struct be__list *p;

	for (p = w->engines.next; p != &w->engines; p = p->next) {
		struct be__engine *e = be__list_entry(p, struct be__engine, wlink);

		if (e->reusable && e->state != BE_ES_FAILED && strcmp(e->key, key) == 0)
			return e;
	}
	return NULL;
}

static void engine_reject(struct be__wdev *wd, struct be_xconn *conn, uint32_t reason)
{
	uint8_t priv[BE_PROTO_HELLO_LEN];
	struct be__hello h = {
		.magic = BE_PROTO_MAGIC,
		.version = BE_PROTO_VERSION,
		.reason = reason,
	};

	be__hello_encode(&h, priv);
	if (wd->cd->ops->reject(conn, priv, sizeof(priv)))
		wd->cd->ops->conn_destroy(conn);
}

static void engine_on_request(struct be__wdev *wd, struct be_xevent *ev)
{
	const struct be_config *cfg = &wd->w->ctx->cfg;
	struct be_listener *l = ev->listener ? ev->listener->user : NULL;
	uint8_t priv[BE_PROTO_HELLO_LEN];
	struct be_xconn_attr attr;
	struct be__hello peer, h;
	struct be__engine *e;
	struct be__peer *pid;
	char key[BE_XPORT_ADDR_MAX + 16] = "";
	const char *why = "";
	int reason, rc;

	if (!l || wd->w->shutdown) {
		engine_reject(wd, ev->conn, BE_REJECT_SHUTDOWN);
		return;
	}
	reason = be__hello_decode(ev->priv, ev->priv_len, 0, &peer, &why);
	if (reason) {
		be_log_warn("engine: rejecting a connection on %s: %s", l->scheme, why);
		engine_reject(wd, ev->conn, (uint32_t)reason);
		return;
	}
	snprintf(key, sizeof(key), "%s://", l->scheme);
	wd->cd->ops->conn_peer_addr(ev->conn, key + strlen(key), sizeof(key) - strlen(key));
	reason = be__admit_request(wd->w, l, ev, &peer, key);
	if (!reason)
		reason = be__peer_request(wd->w, ev, key, &pid);
	if (reason) {
		engine_reject(wd, ev->conn, (uint32_t)reason);
		return;
	}
	e = engine_new(wd->w, wd, key);
	if (!e) {
		be__peer_forget(wd->w, pid);
		engine_reject(wd, ev->conn, BE_REJECT_RESOURCES);
		return;
	}
	if (be__wdev_reserve(wd, cfg->credits_init)) {
		be_log_warn("engine %s: rejected: no receive buffers left", key);
		engine_free(e);
		be__peer_forget(wd->w, pid);
		engine_reject(wd, ev->conn, BE_REJECT_RESOURCES);
		return;
	}
	e->granted_to_peer = cfg->credits_init;
	e->conn = ev->conn;
	e->acb = l->cbs;
	e->auser = l->user;
	e->listener = l;
	e->auth = cfg->auth_secret_len && (peer.flags & BE_HELLO_F_AUTH);
	e->admit = e->auth ? BE_ADM_WAIT_HELLO : BE_ADM_DONE;
	e->has_cred = ev->has_cred;
	e->peer_uid = ev->peer_uid;
	e->peer_gid = ev->peer_gid;
	e->peer_pid = ev->peer_pid;
	engine_set_peer(e, &peer);
	engine_hello(e, &h);
	be__hello_encode(&h, priv);
	memcpy(e->hello_c, ev->priv, sizeof(e->hello_c));
	memcpy(e->hello_s, priv, sizeof(e->hello_s));
	attr = engine_conn_attr(e);
	rc = wd->cd->ops->accept(ev->conn, &attr, priv, sizeof(priv));
	if (rc) {
		be_log_warn("engine %s: accept failed: %s", key, be_strerror(rc));
		be__wdev_unreserve(wd, e->granted_to_peer);
		wd->cd->ops->conn_destroy(ev->conn);
		engine_free(e);
		be__peer_forget(wd->w, pid);
		return;
	}
	e->conn->user = e;
	engine_link(e);
	be__peer_attach(e, pid);
	be_log_dbg("engine %s: accepted", key);
}

static void engine_on_established(struct be__engine *e, struct be_xevent *ev)
{
	struct be__hello peer;
	const char *why = "";

	if (e->state != BE_ES_CONNECTING || e->xestab)
		return;
	if (e->connector) {
		int reason = be__hello_decode(ev->priv, ev->priv_len, 0, &peer, &why);

		if (reason) {
			be__engine_fail(e, BE_EPROTO_PEER, why);
			return;
		}
		engine_set_peer(e, &peer);
	}
	e->xestab = true;
	e->refs++;
	be__admit_established(e, ev);
	be__engine_unref(e);
}

/* Port @port of @wd's device went down: the Engines of @wd on it fail
 * now (-ENETDOWN), as be_sock_fail_engine() would end them, rather than
 * after their QPs' retries (about 2 s) or a keepalive, so the layer
 * above moves their calls to another port at once. A port that comes
 * back needs nothing: new connects use it. */
static void engine_port_down(struct be__wdev *wd, int port)
{
	struct be__list *p, *t;
	char why[96];

	snprintf(why, sizeof(why), "port %d of %s went down", port + 1, wd->cd->attr.name);
	be__list_for_each_safe(p, t, &wd->w->engines) {
		struct be__engine *e = be__list_entry(p, struct be__engine, wlink);

		if (e->wd == wd && e->conn && e->conn->port == port && e->state != BE_ES_FAILED)
			be__engine_fail(e, -ENETDOWN, why);
	}
}

void be__engine_on_event(struct be__wdev *wd, struct be_xevent *ev)
{
	struct be__engine *e = ev->conn ? ev->conn->user : NULL;
	struct be__hello h;
	const char *why = "";
	char msg[96];

	switch (ev->type) {
	case BE_XEV_CONNECT_REQUEST:
		engine_on_request(wd, ev);
		return;
	case BE_XEV_SRQ_LIMIT:
	case BE_XEV_PORT_CHANGE:
		be_log_info("engine: %s event on %s (port %d up %d)",
			    ev->type == BE_XEV_SRQ_LIMIT ? "srq limit" : "port change",
			    wd->cd->name, ev->port, ev->up);
		if (ev->type == BE_XEV_PORT_CHANGE && !ev->up)
			engine_port_down(wd, ev->port);
		return;
	default:
		break;
	}
	if (!e)
		return;
	switch (ev->type) {
	case BE_XEV_ESTABLISHED:
		engine_on_established(e, ev);
		break;
	case BE_XEV_REJECTED:
		if (be__hello_decode(ev->priv, ev->priv_len, 1, &h, &why) == 0)
			snprintf(msg, sizeof(msg), "rejected by the peer: %s",
				 be__reject_str(h.reason));
		else
			snprintf(msg, sizeof(msg), "rejected by the peer");
		/* Not admitted: the connect fails with -EACCES, so an
		 * application tells it from a peer out of room. */
		be__engine_fail(e, h.reason == BE_REJECT_ADMISSION || h.reason == BE_REJECT_AUTH ?
					   -EACCES : -ECONNREFUSED, msg);
		break;
	case BE_XEV_UNREACHABLE:
		be__engine_fail(e, ev->status ? ev->status : -EHOSTUNREACH, "peer unreachable");
		break;
	case BE_XEV_DISCONNECTED:
		be__engine_fail(e, ev->status ? ev->status : -ECONNRESET, "disconnected");
		break;
	default:
		break;
	}
}

/* ---- socket id tables ---- */

static int engine_grow(struct be_sock ***tab, uint32_t *cap, uint32_t need)
{
	uint32_t ncap = *cap ? *cap : 64;
	struct be_sock **t;

	while (ncap < need)
		ncap *= 2;
	if (ncap == *cap)
		return 0;
	t = realloc(*tab, ncap * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t + *cap, 0, (ncap - *cap) * sizeof(*t));
	*tab = t;
	*cap = ncap;
	return 0;
}

int be__engine_sock_attach(struct be__engine *e, struct be_sock *s, bool mine, uint32_t id)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	int rc;

	if (e->state == BE_ES_FAILED)
		return -ENOTCONN;
	if (e->nsocks >= cfg->max_sockets)
		return -EMFILE;
	if (mine) {
		if (e->nfree_ids)
			id = e->free_ids[--e->nfree_ids];
		else if (e->next_id < BE_MIN(cfg->max_sockets,
						  e->peer.max_sockets ? e->peer.max_sockets : UINT32_MAX))
			id = e->next_id++;
		else
			return -EMFILE;
		rc = engine_grow(&e->mine, &e->cap_mine, id + 1);
		if (rc) {
			if (id == e->next_id - 1)
				e->next_id--;
			else
				e->free_ids[e->nfree_ids++] = id;
			return rc;
		}
		e->mine[id] = s;
	} else {
		rc = engine_grow(&e->theirs, &e->cap_theirs, id + 1);
		if (rc)
			return rc;
		e->theirs[id] = s;
	}
	s->e = e;
	s->id = id;
	s->mine = mine;
	s->state = BE_SS_OPEN;
	s->refs++;
	e->refs++;
	e->nsocks++;
	if (!mine && e->pid)
		e->pid->socks++;
	e->st.sockets_opened++;
	return 0;
}

void be__engine_sock_detach(struct be__engine *e, struct be_sock *s)
{
	if (s->e != e)
		return;
	if (s->mine) {
		e->mine[s->id] = NULL;
		/* Without memory for the free list the id is just not reused. */
		if (!be__grow(&e->free_ids, &e->cap_free_ids, e->nfree_ids + 1,
			      sizeof(*e->free_ids), 64))
			e->free_ids[e->nfree_ids++] = s->id;
	} else {
		e->theirs[s->id] = NULL;
		if (e->pid)
			e->pid->socks--;
	}
	be__list_del_init(&s->sq.link);
	s->e = NULL;
	s->state = BE_SS_DEAD;
	e->nsocks--;
	be__sock_unref(s);
	/* A connect no Socket waits for any more is abandoned now rather
	 * than at connect_timeout_ms: be__engine_find() would hand it to
	 * every later connect to the address, and one that hangs (a Soft-RoCE
	 * request lost while a port's address comes back is resent only
	 * seconds later) would make each of them wait for it too. The next
	 * connect opens a fresh Engine. */
	if (e->state == BE_ES_CONNECTING && e->connector && !e->nsocks)
		be__engine_fail(e, -ECANCELED, "connect abandoned: no socket left");
	be__engine_unref(e);
}

struct be_sock *be__engine_sock_lookup(struct be__engine *e, bool peer_opened, uint32_t id)
{
	if (peer_opened)
		return id < e->cap_theirs ? e->theirs[id] : NULL;
	return id < e->cap_mine ? e->mine[id] : NULL;
}

/* ---- failure and teardown ---- */

void be__engine_fail(struct be__engine *e, int err, const char *why)
{
	struct be__list *p;
	uint32_t i;

	if (e->state == BE_ES_FAILED)
		return;
	/* An Engine no Socket uses ends without harm to anyone (an idle
	 * close, or the peer's): not worth a warning. */
	if (e->nsocks)
		be_log_warn("engine %s: failed: %s (%s)", e->addr, why, be_strerror(err));
	else
		be_log_info("engine %s: closed: %s (%s)", e->addr, why, be_strerror(err));
	e->state = BE_ES_FAILED;
	e->st.state = BE_ES_FAILED;
	e->err = err;
	e->st.error = err;
	e->reusable = false;
	if (err == BE_EPROTO_PEER)
		e->st.protocol_errors++;
	e->refs++;
	for (i = 0; i < e->cap_mine; i++)
		if (e->mine[i])
			be__sock_engine_gone(e->mine[i], err);
	for (i = 0; i < e->cap_theirs; i++)
		if (e->theirs[i])
			be__sock_engine_gone(e->theirs[i], err);
	while ((p = be__list_pop(&e->ctrlq)))
		free(be__list_entry(p, struct be__ctrl, link));
	if (e->cur) {
		struct be__sendbuf *sb = e->cur;

		e->cur = NULL;
		while ((p = be__list_pop(&sb->msgs)))
			be__worker_defer_msg(e->w, be__list_entry(p, struct be__msg, link), err);
		be__list_add_tail(&e->sbfree, &sb->link);
		e->nsbfree++;
	}
	if (e->conn)
		e->ops->disconnect(e->conn);
	be__list_del_init(&e->klink);
	e->kicked = false;
	be__list_add_tail(&e->w->reap, &e->rlink);
	be__engine_unref(e);
}

/*
 * be__engine_close() - close @e cleanly (its worker shuts down): it takes
 * no new socket from the peer (rx_open refuses them), no connect reuses
 * it, and once be__engine_close_check() finds nothing left of it, it
 * disconnects. Its sockets are closed by the caller, each with its own
 * handshake.
 */
void be__engine_close(struct be__engine *e)
{
	if (e->state == BE_ES_FAILED || e->closing)
		return;
	e->closing = true;
	e->reusable = false;
	be__engine_close_check(e);
}

/*
 * Disconnect a closing Engine once every socket's close handshake is over
 * (the peer answered our SOCK_CLOSE: it handled every frame we sent
 * before, so no message whose send completed is lost by the disconnect)
 * and nothing it posted still matters: no frame queued or staged, no
 * buffer lent either way, and every SEND answering a peer's close known
 * to have arrived (be__window_busy()), so the peer's own close completes
 * cleanly too. A connect still under way is abandoned at once.
 */
void be__engine_close_check(struct be__engine *e)
{
	if (!e->closing || e->state == BE_ES_FAILED || e->nsocks)
		return;
	if (e->state == BE_ES_ESTABLISHED &&
	    (e->cur || e->grants_live || !be__list_empty(&e->ctrlq) ||
	     !be__list_empty(&e->active) || be__window_busy(&e->win)))
		return;
	be__engine_fail(e, -ESHUTDOWN, "worker shut down");
}

void be__engine_reap(struct be__engine *e)
{
	uint32_t i;

	if (e->reaped)
		return;
	e->reaped = true;
	if (e->conn) {
		e->ops->conn_destroy(e->conn);
		e->conn = NULL;
	}
	/* No completion names the connection any more: finish what it had. */
	be__engine_retire_all(e);
	be__engine_rx_free(e);
	for (i = 0; i < e->cap_mine; i++)
		if (e->mine[i]) {
			be__large_release_sock(e, e->mine[i]);
			be__engine_sock_detach(e, e->mine[i]);
		}
	for (i = 0; i < e->cap_theirs; i++)
		if (e->theirs[i]) {
			be__large_release_sock(e, e->theirs[i]);
			be__engine_sock_detach(e, e->theirs[i]);
		}
	be__large_free_grants(e);
	be__wdev_unreserve(e->wd, e->granted_to_peer);
	be__list_del_init(&e->wdlink);
	be__list_del_init(&e->wlink);
	e->w->nengines--;
	be__oneway_reap(e);
	be__peer_engine_gone(e);
	be__engine_unref(e);
}

/*
 * Close an Engine we connected once no Socket used it for engine_idle_ms,
 * so QPs follow the peers in use, not every peer ever used. Nothing may
 * be in flight (queued frames, posted WRs, buffers lent to the peer); it
 * stops being reusable first, so a connect from here on opens a new one.
 */
static void engine_idle_tick(struct be__engine *e, uint64_t now)
{
	uint64_t limit = (uint64_t)e->w->ctx->cfg.engine_idle_ms * 1000000ull;

	if (!limit || !e->connector || e->nsocks || e->grants_live || e->cur ||
	    !be__list_empty(&e->active) || be__window_busy(&e->win)) {
		e->idle_since_ns = 0;
		return;
	}
	if (!e->idle_since_ns) {
		e->idle_since_ns = now;
		return;
	}
	if (now - e->idle_since_ns < limit)
		return;
	e->reusable = false;
	be__engine_fail(e, -ECANCELED, "no socket for engine_idle_ms");
}

void be__engine_tick(struct be__engine *e, uint64_t now)
{
	if (e->state == BE_ES_CONNECTING) {
		if (now > e->deadline_ns)
			be__engine_fail(e, -ETIMEDOUT, "connect timed out");
		return;
	}
	if (e->state != BE_ES_ESTABLISHED)
		return;
	be__keepalive_tick(e, now);
	if (e->state != BE_ES_ESTABLISHED)
		return;
	be__credit_elastic_tick(e);
	be__large_backoff_tick(e, now);
	be__oneway_tick(e, now);
	be__engine_rx_retry(e, now);
	engine_idle_tick(e, now);
	if (e->state != BE_ES_ESTABLISHED)
		return;
	/* Work held back by a failed allocation has no other wakeup. */
	if (be__credit_update_due(&e->cr) || !be__list_empty(&e->active) ||
	    !be__list_empty(&e->ctrlq))
		be__engine_kick(e);
}

void be__engine_stats(struct be__engine *e, struct be_engine_stats *out)
{
	*out = e->st;
	out->credits_granted = e->cr.granted_peak;
	out->credits_peer_max = e->cr.peer_granted_peak;
	out->credits_granted_now = e->cr.granted;
	out->credits_peer_now = e->granted_to_peer;
	out->max_credits_in_use = e->cr.max_in_use;
	out->max_peer_credits_in_use = e->cr.max_peer_in_use;
	out->credit_stalls = e->cr.stalls;
	out->send_window = e->win.limit;
	out->max_bytes_in_flight = e->win.max_in_flight;
	out->window_stalls = e->win.stalls;
	out->mixed_window = e->win.soft_limit;
	out->max_mixed_in_flight = e->win.soft_max;
	out->mixed_stalls = e->win.soft_stalls;
	out->sockets = e->nsocks;
	out->frag_size = e->frag_size;
	out->state = e->state;
	out->error = e->err;
}
