/*
 * sock.c - the Socket API: connect, send, close, and a socket's life.
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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <be/sock.h>
#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

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
	be__list_add_tail(&w->socks, &s->wlink);
	return s;
}

/* Split "scheme://rest"; the scheme names the transport. */
static int sock_parse_addr(const char *addr, char *scheme, size_t slen, const char **rest)
{
	const char *p = addr ? strstr(addr, "://") : NULL;
	size_t n;

	if (!p)
		return -EINVAL;
	n = (size_t)(p - addr);
	if (!n || n >= slen || !p[3] || strlen(p + 3) >= BE_XPORT_ADDR_MAX)
		return -EINVAL;
	memcpy(scheme, addr, n);
	scheme[n] = '\0';
	*rest = p + 3;
	return 0;
}

static struct be__sq *sock_sq(struct be_sock *s)
{
	return s->e && !s->w->ctx->cfg.frag_sched ? &s->e->fifo : &s->sq;
}

static struct be__msg *sock_msg_new(struct be_sock *s, uint8_t kind)
{
	struct be__msg *m = be__worker_msg_get(s->w);

	if (!m)
		return NULL;
	m->sock = s;
	m->kind = kind;
	be__sock_ref(s);
	return m;
}

static void sock_enqueue(struct be_sock *s, struct be__msg *m)
{
	struct be__sq *sq = sock_sq(s);

	m->sq = sq;
	m->state = BE_MS_QUEUED;
	be__list_add_tail(&sq->txq, &m->link);
	be__sq_activate(s->e, sq);
}

int be_sock_connect(struct be_worker *w, const char *addr, const struct be_sock_cbs *cbs,
		    void *user, struct be_sock **out)
{
	const struct be_xport_ops *ops;
	char key[BE_ENGINE_KEY_MAX];
	struct be__engine *e;
	struct be__wdev *wd;
	struct be__msg *m;
	struct be_sock *s;
	const char *rest;
	char scheme[16];
	int rc;

	if (!w || !out)
		return -EINVAL;
	rc = sock_parse_addr(addr, scheme, sizeof(scheme), &rest);
	if (rc)
		return rc;
	ops = be__xport_find(scheme);
	if (!ops)
		return -EPROTONOSUPPORT;
	/* The reuse key is the address the transport will connect to, so
	 * every spelling of one listener shares one Engine. It resolves host
	 * names (blocking) before anything is created. */
	rc = be__engine_key(ops, scheme, rest, key, sizeof(key));
	if (rc) {
		be_log_err("connect %s: %s", addr, be_strerror(rc));
		return rc;
	}
	rc = be__worker_wdev(w, scheme, &wd);
	if (rc)
		return rc;
	s = be__sock_new(w, cbs, user);
	if (!s)
		return -ENOMEM;
	e = be__engine_find(w, key);
	if (!e) {
		rc = be__engine_connect(w, wd, addr, key, &e);
		if (rc)
			goto err_sock;
	}
	rc = be__engine_sock_attach(e, s, true, 0);
	if (rc)
		goto err_sock;
	m = sock_msg_new(s, BE_MSG_OPEN);
	if (!m) {
		rc = -ENOMEM;
		be__engine_sock_detach(e, s);
		goto err_sock;
	}
	sock_enqueue(s, m);
	be__engine_kick(e);
	*out = s;
	return 0;

err_sock:
	be__sock_unref(s);
	return rc;
}

int be_sock_send(struct be_sock *s, void *buf, size_t len, be_send_cb cb, void *arg)
{
	struct be__engine *e;
	struct be__msg *m;
	uint32_t lkey = 0;
	int rc;

	if (!s || !cb || s->app_closed || (len && !buf))
		return -EINVAL;
	e = s->e;
	if (!e || s->state != BE_SS_OPEN || e->state == BE_ES_FAILED)
		return -ENOTCONN;
	if (len > s->w->ctx->cfg.max_msg_size || len > UINT32_MAX)
		return -EMSGSIZE;
	/* The transport reads a large message where it is, so it must be
	 * registered memory: its lkey, found here, is what the fragments
	 * use. An eager one is copied into a staging buffer at once and
	 * needs no lookup. Until the handshake eager_max is 0: every
	 * buffer is looked up, as any may turn out large. */
	if (len > e->eager_max && be__engine_lkey(e, buf, len, &lkey))
		return -EINVAL;
	m = sock_msg_new(s, BE_MSG_DATA);
	if (!m)
		return -ENOMEM;
	m->lkey = lkey;
	m->buf = buf;
	m->len = len;
	m->cb = cb;
	m->arg = arg;
	m->id = s->tx_next_id;
	rc = be__engine_send_now(e, sock_sq(s), m);
	if (rc == -ENOTCONN) {
		be__sock_unref(s);
		be__worker_msg_put(s->w, m);
		return rc;
	}
	s->tx_next_id++;
	s->st.queued++;
	if (rc) {
		sock_enqueue(s, m);
		be__engine_kick(e);
	}
	return 0;
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
	struct be__sq *sq = sock_sq(s);
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

		if (r->granted)
			continue;
		be__list_del_init(p);
		s->nrx--;
		be_free(r->buf);
		free(r);
	}
}

void be__sock_engine_gone(struct be_sock *s, int reason)
{
	struct be__engine *e = s->e;

	be__sock_cancel_tx(s, reason);
	sock_free_rx(s, false);
	if (s->state == BE_SS_OPEN)
		be__worker_defer_close(s->w, s, reason);
	/* Granted buffers are freed by the engine once its connection is
	 * destroyed (be__large_free_grants), then the socket detaches. */
	(void)e;
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

void be__sock_on_peer_close(struct be_sock *s, int reason)
{
	struct be__engine *e = s->e;

	be__sock_cancel_tx(s, reason == -ECONNREFUSED ? -ECONNREFUSED : -ECONNRESET);
	be__large_release_sock(e, s);
	if (sock_ctrl_close(s, true))
		be__engine_fail(e, -ENOMEM, "no memory for a control frame");
	be__worker_defer_close(s->w, s, reason);
	be__engine_sock_detach(e, s);
}

void be__sock_finish_close(struct be_sock *s)
{
	struct be__engine *e = s->e;

	be__large_release_sock(e, s);
	be__engine_sock_detach(e, s);
}

void be_sock_close(struct be_sock *s)
{
	struct be__engine *e;
	bool open_sent = true;
	struct be__list *p;

	if (!s || s->app_closed)
		return;
	s->app_closed = true;
	e = s->e;
	if (e && s->state == BE_SS_OPEN) {
		/* An OPEN still queued means the peer never heard of us. */
		for (p = sock_sq(s)->txq.next; p != &sock_sq(s)->txq; p = p->next) {
			struct be__msg *m = be__list_entry(p, struct be__msg, link);

			if (m->sock == s && m->kind == BE_MSG_OPEN)
				open_sent = false;
		}
		be__sock_cancel_tx(s, -ECANCELED);
		sock_free_rx(s, !open_sent);
		if (!open_sent || e->state == BE_ES_FAILED) {
			if (e->state != BE_ES_FAILED)
				be__engine_sock_detach(e, s);
		} else if (s->accepting) {
			/* Closed inside on_accept: the refusal path answers. */
		} else {
			s->state = BE_SS_CLOSING;
			if (sock_ctrl_close(s, false))
				be__engine_fail(e, -ENOMEM, "no memory for a control frame");
		}
	}
	be__sock_unref(s);
}

void be_sock_set_user(struct be_sock *s, void *user)
{
	s->user = user;
}

void *be_sock_user(struct be_sock *s)
{
	return s->user;
}

int be_sock_stats(struct be_sock *s, struct be_sock_stats *out)
{
	*out = s->st;
	return 0;
}

int be_sock_engine_stats(struct be_sock *s, struct be_engine_stats *out)
{
	if (!s->e)
		return -ENOTCONN;
	be__engine_stats(s->e, out);
	return 0;
}
