/*
 * stest.h - shared helper of the socket tests.
 *
 * Every test in test/sock/ runs against one transport, chosen with
 * --transport NAME (tcp, shm, verbs; default tcp) and optionally --addr
 * (where to listen; defaults: tcp://127.0.0.1:0, shm://be-st-<pid>-<n>,
 * verbs://$BE_RXE_IP0:0). A transport that is not built in skips the test
 * (exit 77). Most tests run client and server workers in one process and
 * drive both from one thread; st_pump() alternates progress on them until
 * a condition holds, bounded by a generous hang guard (ST_HANG_S, default
 * 60 s: not a speed assertion, it turns a hang into a clear failure).
 */
#ifndef BE_TEST_SOCK_STEST_H
#define BE_TEST_SOCK_STEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <be/be.h>
#include "test.h"

struct st {
	const char *transport;
	char addr[160];          /* listen address */
	struct be_config cfg;    /* be_config_init() + test settings */
	int naddr;
};

struct st_server;

/* Parse the arguments; fill t->cfg with defaults (tests adjust it). */
void st_init(struct st *t, int argc, char **argv);
/* The tests' configuration: be_config_init() with a short keepalive, a
 * connection timeout generous enough for a loaded machine, no spinning. */
void st_config_init(struct be_config *cfg);
/* A fresh listen address (shm names must be unique per listener). */
const char *st_listen_addr(struct st *t);

/* Progress @ws until @done(@arg) is true; fails the test on a hang. */
void st_pump(struct be_worker **ws, int n, bool (*done)(void *arg), void *arg);
/* Progress @ws for about @ms milliseconds. */
void st_pump_ms(struct be_worker **ws, int n, int ms);
/* ST_PUMP_WHILE(ws, n, cond): progress @ws a millisecond at a time while
 * the expression @cond holds: st_pump() for a condition written in place,
 * with the same hang guard. */
#define ST_PUMP_WHILE(ws, n, cond)                                   \
	do {                                                         \
		uint64_t st_start_ = st_hang_start();                \
		while (cond) {                                       \
			st_pump_ms(ws, n, 1);                        \
			st_hang_check(st_start_, #cond);             \
		}                                                    \
	} while (0)
uint64_t st_hang_start(void);
void st_hang_check(uint64_t start, const char *cond); /* fails on a hang */

/* A bemalloc buffer of @len bytes filled with a pattern of @seed. */
void *st_msg(size_t len, uint32_t seed);
void st_fill(void *p, size_t len, uint32_t seed);
/* 1 if @p holds the pattern of @seed. */
int st_check(const void *p, size_t len, uint32_t seed);

/* Listener callbacks that accept everything (user: counters below); also
 * a client socket's callbacks and record (on_accept is never called). */
struct st_server {
	struct be_sock **socks;
	int nsocks, cap;
	int accepted, closed, recvd;
	uint64_t bytes;
	bool echo;                /* send every message back */
	int close_reason;
};
extern const struct be_sock_cbs st_server_cbs;

/*
 * st_pair() - the usual setup: a context from t->cfg, worker ws[0] with
 * listener *@l on a fresh address (callbacks st_server_cbs, user @srv),
 * worker ws[1] for the client side; the listener's address in @addr
 * (@len bytes). Fails the test on any error.
 */
void st_pair(struct st *t, struct be_ctx **ctx, struct be_worker *ws[2], struct st_server *srv,
	     struct be_listener **l, char *addr, size_t len);
/* st_shutdown() - shut @ws[0..n) down together. Each worker's clean
 * shutdown waits for its peers' answers, so workers that talk to each
 * other and are driven by this one thread must be shut down in turn
 * (be_worker_shutdown(w, 0) on each until all are done) rather than
 * destroyed one after the other. Fails the test on a hang.
 * st_destroy() - st_shutdown(), then destroy them. */
void st_shutdown(struct be_worker **ws, int n);
void st_destroy(struct be_worker **ws, int n);
/* st_server_close() - close the sockets @srv accepted (its array freed,
 * nsocks back to 0, so that it may serve again), then listener @l. */
void st_server_close(struct st_server *srv, struct be_listener *l);
/* st_unpair() - undo st_pair(): close the sockets @srv accepted, then
 * listener @l, both workers (st_destroy) and the context. */
void st_unpair(struct be_ctx *ctx, struct be_worker *ws[2], struct st_server *srv,
	       struct be_listener *l);

/*
 * struct st_fx - the usual two-worker fixture in one place: st_fx_init()
 * is st_init() into f->t (the test may then adjust f->t.cfg, or set
 * f->scbs and f->suser to listen with callbacks of its own), st_fx_pair()
 * is st_pair() into the other fields, st_fx_connect() connects a client
 * socket of ws[1] to the listener (callbacks @cbs, NULL for none, user
 * @user), st_fx_unpair() is st_unpair(). All fail the test on any error.
 */
struct st_fx {
	struct st t;
	const struct be_sock_cbs *scbs; /* the listener's (NULL: st_server_cbs, user srv) */
	void *suser;
	struct be_ctx *ctx;
	struct be_worker *ws[2];  /* ws[0] listens on l (user srv); ws[1] connects */
	struct be_listener *l;
	struct st_server srv;
	char addr[160];           /* l's address */
};
void st_fx_init(struct st_fx *f, int argc, char **argv);
void st_fx_pair(struct st_fx *f);
struct be_sock *st_fx_connect(struct st_fx *f, const struct be_sock_cbs *cbs, void *user);
void st_fx_unpair(struct st_fx *f);

/*
 * st_serve() - a server on a context of its own: a context from @cfg
 * (t->cfg or a variant of it), worker *@w with listener *@l on a fresh
 * address (callbacks st_server_cbs, user @srv); the listener's address
 * in @addr (@len bytes). st_serve_end() undoes it: closes the sockets
 * @srv accepted (its nsocks back to 0, so @srv may serve again), the
 * listener, shuts the worker down (st_shutdown), destroys it and the
 * context. Both fail the test on any error.
 */
void st_serve(const struct be_config *cfg, struct st *t, struct st_server *srv,
	      struct be_ctx **ctx, struct be_worker **w, struct be_listener **l, char *addr,
	      size_t len);
void st_serve_end(struct be_ctx *ctx, struct be_worker *w, struct st_server *srv,
		  struct be_listener *l);

/* Sum of send callbacks seen, with the count per status. */
struct st_sends {
	int done, ok, canceled, other;
	int last_err;
};
void st_send_cb(struct be_sock *s, void *buf, int status, void *arg); /* arg: st_sends; frees buf */
/* st_send_recvd() - send st_msg(@len, @seed) on @c (st_send_cb into
 * @sends) and progress @ws[0..2) until @srv has received @want messages
 * in all. Fails the test on an error or a hang. */
void st_send_recvd(struct be_worker **ws, struct be_sock *c, size_t len, uint32_t seed,
		   struct st_sends *sends, struct st_server *srv, int want);

/* Engine counters of @s (asserts it still has an engine). */
void st_engine_stats(struct be_sock *s, struct be_engine_stats *st);
/* Check the core's invariants from the counters. */
void st_check_limits(const struct be_engine_stats *st);

/*
 * st_ops_override() - fault injection with the real transport: @ctx's
 * device of t->transport is opened and from now on calls through a copy
 * of the transport's ops table, returned for the test to replace entries
 * (wrappers that fail on demand and call st_ops_real() otherwise).
 */
struct be_xport_ops;
struct be_xport_ops *st_ops_override(struct st *t, struct be_ctx *ctx);
const struct be_xport_ops *st_ops_real(void);
/* The number after "@key": in a JSON text (the first one), or -1. */
long long st_json_num(const char *json, const char *key);
/* The counter @key of @w's be_worker_stats_json(), or -1. */
long long st_worker_num(struct be_worker *w, const char *key);

/*
 * st_try_client() - a client of its own (a context from @cfg, a worker)
 * connects to @addr, where worker @sw listens with st_server_cbs and
 * echo on, and sends one message; both workers progress until the echo
 * comes back or the socket closes, then the client is shut down and
 * freed. Returns 0 (echoed) or the reason of the socket's on_close.
 */
int st_try_client(const struct be_config *cfg, struct be_worker *sw, const char *addr);

#endif /* BE_TEST_SOCK_STEST_H */
