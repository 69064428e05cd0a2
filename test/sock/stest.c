/*
 * stest.c - helper of the socket tests (see stest.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ctx.h"
#include "xport/xport.h"
#include "util/common.h"
#include "stest.h"

void st_config_init(struct be_config *cfg)
{
	be_config_init(cfg);
	/* Short enough that a broken test fails fast, long enough for a
	 * loaded CI machine (sanitizers) never to trip it falsely. */
	cfg->keepalive_ms = 500;
	cfg->conn_timeout_ms = 20000;
	cfg->spin_us = 0;
}

void st_init(struct st *t, int argc, char **argv)
{
	const char *addr = test_arg(argc, argv, "--addr", NULL);

	memset(t, 0, sizeof(*t));
	t->transport = test_arg(argc, argv, "--transport", "tcp");
	if (!be__xport_find(t->transport)) {
		fprintf(stderr, "transport %s not built in: skipped\n", t->transport);
		exit(77);
	}
	if (addr)
		snprintf(t->addr, sizeof(t->addr), "%s", addr);
	st_config_init(&t->cfg);
	/* --oneway 0: every large message through WriteRequest (tcp, shm). */
	if (test_arg(argc, argv, "--oneway", NULL))
		t->cfg.oneway = atoi(test_arg(argc, argv, "--oneway", NULL)) != 0;
}

const char *st_listen_addr(struct st *t)
{
	if (t->addr[0] && t->naddr++ == 0)
		return t->addr;
	if (!strcmp(t->transport, "shm")) {
		snprintf(t->addr, sizeof(t->addr), "shm://be-st-%d-%d", (int)getpid(), t->naddr++);
	} else if (!strcmp(t->transport, "verbs")) {
		const char *ip = getenv("BE_RXE_IP0");

		snprintf(t->addr, sizeof(t->addr), "verbs://%s:0", ip ? ip : "127.0.0.1");
	} else {
		snprintf(t->addr, sizeof(t->addr), "%s://127.0.0.1:0", t->transport);
	}
	return t->addr;
}

static uint64_t st_hang_ns(void)
{
	const char *h = getenv("ST_HANG_S");

	return (uint64_t)(h ? atoi(h) : 60) * 1000000000ull;
}

void st_pump(struct be_worker **ws, int n, bool (*done)(void *arg), void *arg)
{
	uint64_t start = be__now_ns(), hang = st_hang_ns();
	int i, idle = 0;

	while (!done(arg)) {
		int work = 0;

		for (i = 0; i < n; i++) {
			int rc = be_worker_progress(ws[i]);

			ASSERT_OK(rc);
			work += rc;
		}
		if (be__now_ns() - start > hang)
			TEST_FAIL("hang: condition not reached in %d s", (int)(hang / 1000000000ull));
		/* Idle: give the kernel (tcp, shm peers) a moment. */
		if (!work && ++idle > 100) {
			usleep(100);
			idle = 0;
		}
	}
}

uint64_t st_hang_start(void)
{
	return be__now_ns();
}

void st_hang_check(uint64_t start, const char *cond)
{
	uint64_t hang = st_hang_ns();

	if (be__now_ns() - start > hang)
		TEST_FAIL("hang: still %s after %d s", cond, (int)(hang / 1000000000ull));
}

void st_pump_ms(struct be_worker **ws, int n, int ms)
{
	uint64_t end = be__now_ns() + (uint64_t)ms * 1000000ull;
	int i;

	while (be__now_ns() < end) {
		int work = 0;

		for (i = 0; i < n; i++)
			work += be_worker_progress(ws[i]);
		if (!work)
			usleep(100);
	}
}

void st_fill(void *p, size_t len, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	uint8_t *b = p;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		test_rand(&x);
		memcpy(b + i, &x, 8);
	}
	for (; i < len; i++)
		b[i] = (uint8_t)(seed + i);
}

int st_check(const void *p, size_t len, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		test_rand(&x);
		if (memcmp(b + i, &x, 8))
			return 0;
	}
	for (; i < len; i++)
		if (b[i] != (uint8_t)(seed + i))
			return 0;
	return 1;
}

void *st_msg(size_t len, uint32_t seed)
{
	void *p = be_alloc(len);

	ASSERT(p);
	st_fill(p, len, seed);
	return p;
}

static void st_free_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	be_free(buf);
}

static int st_srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	struct st_server *sv = user;

	if (sv->nsocks == sv->cap) {
		sv->cap = sv->cap ? sv->cap * 2 : 64;
		sv->socks = realloc(sv->socks, (size_t)sv->cap * sizeof(*sv->socks));
		ASSERT(sv->socks);
	}
	sv->socks[sv->nsocks++] = s;
	sv->accepted++;
	return 0;
}

static void st_srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct st_server *sv = user;

	sv->recvd++;
	sv->bytes += len;
	if (sv->echo) {
		ASSERT_OK(be_sock_send(s, buf, len, st_free_cb, NULL));
		return;
	}
	be_free(buf);
}

static void st_srv_close(struct be_sock *s, int reason, void *user)
{
	struct st_server *sv = user;

	sv->closed++;
	sv->close_reason = reason;
}

const struct be_sock_cbs st_server_cbs = {
	.on_recv = st_srv_recv,
	.on_close = st_srv_close,
	.on_accept = st_srv_accept,
};

/* st_pair() with listener callbacks @cbs (user @user). */
static void pair(struct st *t, const struct be_sock_cbs *cbs, void *user, struct be_ctx **ctx,
		 struct be_worker *ws[2], struct be_listener **l, char *addr, size_t len)
{
	ASSERT_OK(be_ctx_create(&t->cfg, ctx));
	ASSERT_OK(be_worker_create(*ctx, &ws[0]));
	ASSERT_OK(be_worker_create(*ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(t), cbs, user, l));
	ASSERT_OK(be_listener_addr(*l, addr, len));
}

void st_pair(struct st *t, struct be_ctx **ctx, struct be_worker *ws[2], struct st_server *srv,
	     struct be_listener **l, char *addr, size_t len)
{
	pair(t, &st_server_cbs, srv, ctx, ws, l, addr, len);
}

void st_fx_init(struct st_fx *f, int argc, char **argv)
{
	memset(f, 0, sizeof(*f));
	st_init(&f->t, argc, argv);
}

void st_fx_pair(struct st_fx *f)
{
	if (!f->scbs) {
		f->scbs = &st_server_cbs;
		f->suser = &f->srv;
	}
	pair(&f->t, f->scbs, f->suser, &f->ctx, f->ws, &f->l, f->addr, sizeof(f->addr));
}

struct be_sock *st_fx_connect(struct st_fx *f, const struct be_sock_cbs *cbs, void *user)
{
	static const struct be_sock_cbs none;
	struct be_sock *c;

	ASSERT_OK(be_sock_connect(f->ws[1], f->addr, cbs ? cbs : &none, user, &c));
	return c;
}

void st_fx_unpair(struct st_fx *f)
{
	st_unpair(f->ctx, f->ws, &f->srv, f->l);
}

void st_serve(const struct be_config *cfg, struct st *t, struct st_server *srv,
	      struct be_ctx **ctx, struct be_worker **w, struct be_listener **l, char *addr,
	      size_t len)
{
	ASSERT_OK(be_ctx_create(cfg, ctx));
	ASSERT_OK(be_worker_create(*ctx, w));
	ASSERT_OK(be_listen(*w, st_listen_addr(t), &st_server_cbs, srv, l));
	ASSERT_OK(be_listener_addr(*l, addr, len));
}

void st_serve_end(struct be_ctx *ctx, struct be_worker *w, struct st_server *srv,
		  struct be_listener *l)
{
	int i;

	for (i = 0; i < srv->nsocks; i++)
		be_sock_close(srv->socks[i]);
	srv->nsocks = 0;
	be_listener_close(l);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
}

void st_shutdown(struct be_worker **ws, int n)
{
	uint64_t start = be__now_ns(), hang = st_hang_ns();
	int i, left;

	do {
		left = 0;
		for (i = 0; i < n; i++) {
			int rc = be_worker_shutdown(ws[i], 0);

			if (rc == -ETIMEDOUT)
				left++;
			else
				ASSERT_OK(rc);
		}
		if (be__now_ns() - start > hang)
			TEST_FAIL("hang: %d workers did not shut down in %d s", left,
				  (int)(hang / 1000000000ull));
	} while (left);
}

void st_destroy(struct be_worker **ws, int n)
{
	int i;

	st_shutdown(ws, n);
	for (i = n - 1; i >= 0; i--)
		be_worker_destroy(ws[i]);
}

void st_unpair(struct be_ctx *ctx, struct be_worker *ws[2], struct st_server *srv,
	       struct be_listener *l)
{
	int i;

	for (i = 0; i < srv->nsocks; i++)
		be_sock_close(srv->socks[i]);
	free(srv->socks);
	be_listener_close(l);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
}

void st_send_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	struct st_sends *c = arg;

	c->done++;
	if (status == 0)
		c->ok++;
	else if (status == -ECANCELED)
		c->canceled++;
	else {
		c->other++;
		c->last_err = status;
	}
	be_free(buf);
}

struct st_recvd_goal {
	const struct st_server *srv;
	int want;
};

static bool st_recvd_reached(void *arg)
{
	const struct st_recvd_goal *g = arg;

	return g->srv->recvd == g->want;
}

void st_send_recvd(struct be_worker **ws, struct be_sock *c, size_t len, uint32_t seed,
		   struct st_sends *sends, struct st_server *srv, int want)
{
	struct st_recvd_goal g = { srv, want };

	ASSERT_OK(be_sock_send(c, st_msg(len, seed), len, st_send_cb, sends));
	st_pump(ws, 2, st_recvd_reached, &g);
}

void st_engine_stats(struct be_sock *s, struct be_engine_stats *st)
{
	ASSERT_OK(be_sock_engine_stats(s, st));
}

void st_check_limits(const struct be_engine_stats *st)
{
	ASSERT_LE(st->max_credits_in_use, st->credits_granted);
	ASSERT_LE(st->max_peer_credits_in_use, st->credits_peer_max);
	/* A single WR larger than the window may go alone; fragments and
	 * staging buffers are never larger than the window here. */
	ASSERT_LE(st->max_bytes_in_flight, st->send_window);
	ASSERT_EQ(st->protocol_errors, 0);
}

static struct be_xport_ops st_ops_copy;
static const struct be_xport_ops *st_ops_orig;

struct be_xport_ops *st_ops_override(struct st *t, struct be_ctx *ctx)
{
	struct be__cdev *cd;

	ASSERT_OK(be__ctx_dev(ctx, t->transport, NULL, false, &cd));
	st_ops_orig = cd->ops;
	st_ops_copy = *cd->ops;
	cd->ops = &st_ops_copy;
	return &st_ops_copy;
}

const struct be_xport_ops *st_ops_real(void)
{
	return st_ops_orig;
}

long long st_json_num(const char *json, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

long long st_worker_num(struct be_worker *w, const char *key)
{
	char json[8192];

	ASSERT_GT(be_worker_stats_json(w, json, sizeof(json)), 0);
	return st_json_num(json, key);
}

struct st_try {
	int closed; /* 1 until on_close */
	int reason;
	int recvd;
};

static void st_try_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	((struct st_try *)user)->recvd++;
	be_free(buf);
}

static void st_try_close(struct be_sock *s, int reason, void *user)
{
	struct st_try *c = user;

	c->closed = 0;
	c->reason = reason;
}

static bool st_try_done(void *arg)
{
	struct st_try *c = arg;

	return !c->closed || c->recvd > 0;
}

int st_try_client(const struct be_config *cfg, struct be_worker *sw, const char *addr)
{
	static const struct be_sock_cbs cbs = { .on_recv = st_try_recv, .on_close = st_try_close };
	struct st_try c = { .closed = 1 };
	struct st_sends sends = { 0 };
	struct be_worker *ws[2];
	struct be_ctx *ctx;
	struct be_sock *s;

	ASSERT_OK(be_ctx_create(cfg, &ctx));
	ws[0] = sw;
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_sock_connect(ws[1], addr, &cbs, &c, &s));
	ASSERT_OK(be_sock_send(s, st_msg(64, 7), 64, st_send_cb, &sends));
	st_pump(ws, 2, st_try_done, &c);
	be_sock_close(s);
	/* Shut the client down; the server's worker only runs for it. */
	while (be_worker_shutdown(ws[1], 0) == -ETIMEDOUT)
		ASSERT(be_worker_progress(ws[0]) >= 0);
	be_worker_destroy(ws[1]);
	ASSERT_OK(be_ctx_destroy(ctx));
	return c.recvd ? 0 : c.reason;
}
