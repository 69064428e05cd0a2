/*
 * Check the first steps of the failover ladder on one replica with two
 * addresses: the preferred one on the test's transport, the second on
 * tcp, served by two workers of the server. When the preferred address
 * breaks (its worker goes, and with it every Engine on that path) a
 * stream of idempotent calls continues on the other one without
 * a failed call, counted as a TCP fallback (shm -> tcp) or a port switch
 * (tcp -> tcp); while the address stays broken its probes fail; once it
 * listens again a probe succeeds and calls return to it (a fallback
 * return or a port return). Also: a call that is not idempotent and was
 * in flight on the broken connection fails rather than run twice.
 */
#include <string.h>

#include "rtest.h"

#define SVC 15u
#define M_HOLD 1u

static struct be_worker *ws[3];
static int nws = 3;
static int ndone, nfail, inflight;
static struct be_rpc_chan *ch;
static struct be_rpc_req *held;
static void *held_buf;

static void hold(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	held = req;
	held_buf = buf;
}

static void count_cb(int status, void *reply, size_t len, void *arg)
{
	if (status) {
		nfail++;
		fprintf(stderr, "call failed: %s\n", be_strerror(status));
	}
	ndone++;
	inflight--;
	be_rpc_buf_free(reply);
}

/* Keep 8 idempotent calls in flight. */
static void keep_streaming(void)
{
	struct be_rpc_call_opts o = { .flags = BE_RPC_IDEMPOTENT };

	while (inflight < 8) {
		ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, rt_req(256, 3), 256, &o, count_cb, NULL,
				      NULL));
		inflight++;
	}
}

/* Keep the stream going, then the replica's stats: what the waits of
 * this test read (ST_PUMP_WHILE conditions). */
static struct be_rpc_replica_stats streaming(void)
{
	keep_streaming();
	return rt_chan_replica(ch, 0);
}

/* Progress the workers still running (the last @nws of ws) while @cond
 * holds, the stream going on. */
#define STREAM_WHILE(cond) ST_PUMP_WHILE(ws + 3 - nws, nws, (cond))

static bool held_arrived(void *arg)
{
	return held != NULL;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct rt_server sa, sb;
	struct rt_client cli;
	struct be_rpc_replica_stats rs;
	struct be_rpc_chan_stats cs;
	struct be_rpc_config cfg;
	struct be_ctx *ctx;
	char a1[BE_RPC_ADDR_MAX], target[2 * BE_RPC_ADDR_MAX + 2];
	bool fallback;
	uint64_t calls_a0;

	rt_init(&t, argc, argv);
	/* Destroying a worker is how this test breaks a path: no clean close
	 * first (it would wait for the client, which this thread drives). */
	t.cfg.close_timeout_ms = 0;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	rt_server_start(&t, &sa, ctx);
	ASSERT_OK(be_rpc_register(sa.rpc, SVC, M_HOLD, hold, NULL, 0));
	snprintf(a1, sizeof(a1), "%s", sa.addr);
	rt_server_start_at(&t, &sb, ctx, rt_listen_addr(&t, "tcp"));
	fallback = strncmp(a1, "tcp://", 6) != 0;
	rt_client_start(&t, &cli, ctx);
	ws[0] = sa.w;
	ws[1] = sb.w;
	ws[2] = cli.w;
	snprintf(target, sizeof(target), "%s,%s", a1, sb.addr);
	ASSERT_OK(be_rpc_chan_open(cli.rpc, target, &ch));
	cfg = t.rcfg;
	cfg.probe_min_ms = 2;
	cfg.probe_max_ms = 20;
	ASSERT_OK(be_rpc_chan_set_config(ch, &cfg));

	/* Healthy: everything on the preferred address. */
	ndone = 0;
	STREAM_WHILE((keep_streaming(), ndone < 200));
	rs = rt_chan_replica(ch, 0);
	ASSERT_EQ(rs.path, 0);
	ASSERT_EQ(rs.addrs[1].c.calls, 0);

	/* A call that is not idempotent, held by the server when the path
	 * breaks: it may have run, so it fails instead of running again. */
	{
		struct rt_result r = { 0 };

		ASSERT_OK(be_rpc_call(ch, SVC, M_HOLD, rt_req(8, 1), 8, NULL, rt_done_cb, &r, NULL));
		rt_pump(ws + 3 - nws, nws, held_arrived, NULL);
		/* The break: the preferred path's worker and Engines go. */
		be_rpc_destroy(sa.rpc);
		be_worker_destroy(sa.w);
		nws = 2;
		rt_pump(ws + 3 - nws, nws, rt_result_done, &r);
		ASSERT(r.status == -ECONNRESET || r.status == BE_ECONNFAULT);
		ASSERT_EQ(be_rpc_req_reply(held, held_buf, 8), -ENOTCONN);
	}
	/* The stream goes on over the second address; probes of the first
	 * fail while nothing listens there. */
	STREAM_WHILE(streaming().path != 1);
	STREAM_WHILE(streaming().addrs[0].c.probe_failures < 2);
	rs = rt_chan_replica(ch, 0);
	ASSERT_EQ(rs.addrs[0].state == BE_RPC_ADDR_DOWN || rs.addrs[0].state == BE_RPC_ADDR_PROBING,
		  1);
	ASSERT_GT(rs.addrs[1].c.calls, 0);
	calls_a0 = rs.addrs[0].c.calls;
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(cs.c.fallbacks, fallback ? 1 : 0);
	ASSERT_EQ(cs.c.port_switches, fallback ? 0 : 1);
	ASSERT_EQ(nfail, 0);

	/* Repaired: back to the preferred address. */
	rt_server_start_at(&t, &sa, ctx, a1);
	ws[0] = sa.w;
	nws = 3;
	STREAM_WHILE(streaming().path != 0);
	ndone = 0;
	STREAM_WHILE((keep_streaming(), ndone < 200));
	rs = rt_chan_replica(ch, 0);
	ASSERT_GT(rs.addrs[0].c.calls, calls_a0);
	ASSERT_EQ(rs.addrs[0].state, BE_RPC_ADDR_UP);
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(cs.c.fallback_returns, fallback ? 1 : 0);
	ASSERT_EQ(cs.c.port_returns, fallback ? 0 : 1);
	ASSERT_EQ(nfail, 0);
	/* Every call of the stream succeeded; only the held one failed. */
	ASSERT_EQ(cs.c.errors, 1);
	{
		char json[8192];

		ASSERT_GT(be_rpc_chan_stats_json(ch, json, sizeof(json)), 0);
		ASSERT(strstr(json, fallback ? "\"fallback_returns\":1" : "\"port_returns\":1"));
	}
	while (inflight) {
		be_worker_progress(sa.w);
		be_worker_progress(sb.w);
		be_worker_progress(cli.w);
	}
	be_rpc_chan_destroy(ch);
	rt_client_stop(&cli);
	rt_server_stop(&sa);
	rt_server_stop(&sb);
	be_ctx_destroy(ctx);
	return 0;
}
