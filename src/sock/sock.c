/*
 * sock.c - the Socket API: connect, send, close, and the accessors.
 *
 * The public entry points over the socket state machine (src/engine/
 * sock_state.c) and the Engine: connecting parses the address, finds the
 * worker's Engine for it or starts one, and queues the socket's SOCK_OPEN
 * ahead of its data, so data never waits a round trip; sending checks the
 * message, takes a record from the worker's cache and hands it to the
 * Engine, which sends it at once when nothing waits and queues it
 * otherwise; closing starts the close handshake (be__sock_close).
 * Ownership of every buffer is stated in include/be/sock.h.
 * Threads: the worker's, like everything of a socket.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <be/sock.h>
#include "engine/engine.h"
#include "util/abi.h"
#include "util/common.h"
#include "util/log.h"

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
	struct be__sq *sq = be__sock_sq(s);

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
	BE_WORKER_ASSERT_THREAD(w);
	if (w->shutdown)
		return -ESHUTDOWN;
	rc = sock_parse_addr(addr, scheme, sizeof(scheme), &rest);
	if (rc)
		return rc;
	ops = be__xport_find(scheme);
	if (!ops)
		return -EPROTONOSUPPORT;
	/* The reuse key is the address the transport will connect to first,
	 * so every spelling of one listener shares one Engine. It resolves
	 * host names (blocking) before anything is created. */
	rc = be__engine_key(ops, scheme, rest, key, sizeof(key));
	if (rc) {
		be_log_err("connect %s: %s", addr, be_strerror(rc));
		return rc;
	}
	/* A new Engine goes on the device its address is reached through
	 * (one of several RDMA NICs); a live one already has its own. */
	e = be__engine_find(w, key);
	if (!e) {
		rc = be__worker_wdev(w, scheme, key + strlen(scheme) + 3, false, &wd);
		if (rc)
			return rc;
	}
	s = be__sock_new(w, cbs, user);
	if (!s)
		return -ENOMEM;
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
	BE_WORKER_ASSERT_THREAD(s->w);
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
	rc = be__engine_send_now(e, be__sock_sq(s), m);
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

void be_sock_close(struct be_sock *s)
{
	if (s)
		BE_WORKER_ASSERT_THREAD(s->w);
	be__sock_close(s);
}

int be_sock_close_notify(struct be_sock *s, be_close_cb cb, void *arg)
{
	if (!s || !cb || s->app_closed)
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(s->w);
	s->close_cb = cb;
	s->close_arg = arg;
	be__sock_close(s);
	return 0;
}

int be_sock_fail_engine(struct be_sock *s)
{
	struct be__engine *e;

	if (!s)
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(s->w);
	e = s->e;
	if (!e || e->state == BE_ES_FAILED || e->fail_asked)
		return -ENOTCONN;
	/* Failed from the Engine's own run, never under a callback that
	 * may be walking its sockets: at once outside progress, else later
	 * in this progress. */
	e->fail_asked = true;
	be__engine_kick(e);
	return 0;
}

void be_sock_set_user(struct be_sock *s, void *user)
{
	s->user = user;
}

void *be_sock_user(struct be_sock *s)
{
	return s->user;
}

/* The v1 layouts of the stats structs end with these fields. */
#define SOCK_STATS_V1 BE__V1_SIZE(struct be_sock_stats, queued)
#define ENGINE_STATS_V1 BE__V1_SIZE(struct be_engine_stats, error)

int be_sock_stats_sized(struct be_sock *s, struct be_sock_stats *out)
{
	BE_WORKER_ASSERT_THREAD(s->w);
	be__abi_write(out, &s->st, sizeof(s->st), SOCK_STATS_V1);
	return s->e ? 0 : -ENOTCONN;
}

int be_sock_engine_stats_sized(struct be_sock *s, struct be_engine_stats *out)
{
	struct be_engine_stats st = { 0 };

	BE_WORKER_ASSERT_THREAD(s->w);
	if (!s->e)
		return -ENOTCONN;
	be__engine_stats(s->e, &st);
	be__abi_write(out, &st, sizeof(st), ENGINE_STATS_V1);
	return 0;
}
