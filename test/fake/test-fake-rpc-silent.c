/*
 * Check that an RPC path whose connection falls silent, while a fresh
 * connection to the same address would work, comes back well before the
 * Engine's keepalive gives up on the old connection: a port that lost
 * its address can leave an RC QP up and unanswered (seen in the
 * Soft-RoCE guest: the return waited 20 s for conn_timeout_ms). One
 * replica with two addresses, a fake one (preferred) and tcp; the
 * client's fake connection holds every receive from some point on
 * (stall_rx: the server still gets the calls and answers, the answers
 * never arrive). The calls move to tcp; the probe of the fake address
 * times out on the silent connection, which ends its Engine
 * (be_sock_fail_engine()), and the next probe connects afresh and takes
 * the path back. conn_timeout_ms is 10 minutes, far past the hang guard:
 * without the Engine ended, the probes would reuse it and the test fail.
 */
#include <string.h>

#include <be/be.h>
#include <be/rpc.h>

#include "engine/engine.h"
#include "engine/worker.h"
#include "ftest.h"

#define SVC 7u
#define ECHO 1u
#define DEPTH 8

static void echo(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	(void)user;
	ASSERT_OK(be_rpc_req_reply(req, buf, len));
}

struct stream {
	struct be_rpc_chan *ch;
	int inflight;
	uint64_t sent, done, ok, failed;
};

static void done(int status, void *reply, size_t len, void *arg)
{
	struct stream *s = arg;

	(void)len;
	s->inflight--;
	s->done++;
	if (status)
		s->failed++;
	else
		s->ok++;
	be_rpc_buf_free(reply);
}

static void fill(struct stream *s)
{
	const struct be_rpc_call_opts o = { .size = sizeof(o), .timeout_us = 300000,
					    .flags = BE_RPC_IDEMPOTENT };

	while (s->inflight < DEPTH) {
		void *req = be_rpc_buf_alloc(64);

		ASSERT(req);
		memset(req, 0x5a, 64);
		if (be_rpc_call(s->ch, SVC, ECHO, req, 64, &o, done, s, NULL)) {
			be_rpc_buf_free(req);
			return;
		}
		s->inflight++;
		s->sent++;
	}
}

static int path(struct be_rpc_chan *ch, uint64_t *ok0)
{
	struct be_rpc_replica_stats rs;

	ASSERT_OK(be_rpc_chan_replica_stats(ch, 0, &rs));
	if (ok0)
		*ok0 = rs.addrs[0].c.ok;
	return rs.path;
}

/* Hold the receives of every fake conn of @w's Engines. */
static int stall_all(struct be_worker *w)
{
	const struct be__fake_faults f = { .stall_rx = true };
	struct be__list *p;
	int n = 0;

	for (p = w->engines.next; p != &w->engines; p = p->next) {
		struct be__engine *e = be__list_entry(p, struct be__engine, wlink);

		if (e->conn && !be__fake_conn_set(e->conn, &f))
			n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	struct be_rpc_record rec = { .service = "svc", .replica = "r0", .shard_hi = UINT32_MAX,
				     .naddrs = 2 };
	struct be_rpc_config rc;
	struct be_worker *ws[2];
	struct be_rpc *srv, *cli;
	struct be_listener *l;
	struct stream s = { 0 };
	struct be_ctx *ctx;
	struct ft t;
	uint64_t ok0, ok0_silent;

	ft_init(&t, argc, argv);
	t.st.cfg.conn_timeout_ms = 600000;
	ASSERT_OK(be_ctx_create(&t.st.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	be_rpc_config_init(&rc);
	ASSERT_OK(be_rpc_create(ws[0], &rc, &srv));
	ASSERT_OK(be_rpc_register(srv, SVC, ECHO, echo, NULL, 0));
	ASSERT_OK(be_rpc_listen(srv, ft_addr(&t), &l));
	ASSERT_OK(be_listener_addr(l, rec.addrs[0], sizeof(rec.addrs[0])));
	ASSERT_OK(be_rpc_listen(srv, "tcp://127.0.0.1:0", &l));
	ASSERT_OK(be_listener_addr(l, rec.addrs[1], sizeof(rec.addrs[1])));
	ASSERT_OK(be_rpc_create(ws[1], &rc, &cli));
	ASSERT_OK(be_rpc_chan_create(cli, &rec, 1, &s.ch));

	/* Calls flow over the fake address. */
	ST_PUMP_WHILE(ws, 2, (fill(&s), path(s.ch, &ok0) != 0 || ok0 < 50));
	ASSERT_GE(stall_all(ws[1]), 1);
	ok0_silent = ok0;
	fprintf(stderr, "fake-rpc-silent: %llu calls ok over %s; its connection falls silent\n",
		(unsigned long long)ok0, rec.addrs[0]);

	/* The replica leaves the silent path ... */
	ST_PUMP_WHILE(ws, 2, (fill(&s), path(s.ch, NULL) != 1));
	fprintf(stderr, "fake-rpc-silent: over %s after %llu calls\n", rec.addrs[1],
		(unsigned long long)s.done);
	/* ... and comes back to it on a fresh connection. */
	ST_PUMP_WHILE(ws, 2, (fill(&s), path(s.ch, &ok0) != 0 || ok0 < ok0_silent + 50));
	fprintf(stderr, "fake-rpc-silent: back on %s, %llu calls, %llu failed\n", rec.addrs[0],
		(unsigned long long)s.done, (unsigned long long)s.failed);
	ST_PUMP_WHILE(ws, 2, s.inflight > 0);
	ASSERT_EQ(s.done, s.sent);

	be_rpc_chan_destroy(s.ch);
	st_shutdown(ws, 2);
	be_rpc_destroy(cli);
	be_rpc_destroy(srv);
	be_worker_destroy(ws[1]);
	be_worker_destroy(ws[0]);
	be_ctx_destroy(ctx);
	return 0;
}
