/*
 * Check that calls carry requests and replies intact, each completing
 * exactly once: payloads from 0 bytes to above the eager size (the
 * large-message path), many calls in flight at once, a handler that
 * answers later from another callback, an error status from a handler,
 * an unknown method (-ENOSYS), one-way calls, the blocking wrapper, and
 * the counters and JSON of a channel and a server.
 */
#include <string.h>

#include "rtest.h"

#define SVC_LATER 3u
#define SVC_FAIL 4u
#define SVC_ONEWAY 5u

static struct be_rpc_req *held_req;
static void *held_buf;
static size_t held_len;
static int oneway_seen;

static void later(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	held_req = req;
	held_buf = buf;
	held_len = len;
}

static void failing(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	be_rpc_buf_free(buf);
	ASSERT_OK(be_rpc_req_fail(req, -EPERM));
}

static void oneway(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	struct be_rpc_req_info ri;

	be_rpc_req_info(req, &ri);
	ASSERT(ri.flags & BE_RPC_ONEWAY);
	ASSERT(rt_check(buf, len, 77));
	oneway_seen++;
	/* Completing a one-way request sends nothing. */
	ASSERT_OK(be_rpc_req_reply(req, buf, len));
}

static struct rt_duo duo;

static bool r_done(void *arg)
{
	return ((struct rt_result *)arg)->calls > 0;
}

static int ndone;
static bool all_done(void *arg)
{
	return ndone >= *(int *)arg;
}

struct many {
	uint32_t seed;
	size_t len;
};

static void many_cb(int status, void *reply, size_t len, void *arg)
{
	struct many *m = arg;

	ASSERT_OK(status);
	ASSERT_EQ(len, m->len);
	ASSERT(rt_check(reply, len, m->seed));
	be_rpc_buf_free(reply);
	ndone++;
}

static bool held(void *arg)
{
	return held_req != NULL;
}

static struct be_rpc_chan *oneway_chan;

static bool oneway_arrived(void *arg)
{
	return oneway_seen >= *(int *)arg;
}

/* A one-way call counts as ok once its send completed, which may come
 * after the server has the message. */
static bool chan_ok_reached(void *arg)
{
	struct be_rpc_chan_stats cs;

	be_rpc_chan_stats(oneway_chan, &cs);
	return cs.c.ok >= 8 + 1 + 200 + 1 + 10;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 0, 1, 64, 4000, 4096, 8192, 65536, 1 << 20 };
	struct rt t;
	struct be_rpc_chan *ch;
	struct be_rpc_chan_stats cs;
	struct be_rpc_server_stats ss;
	struct be_rpc_replica_stats rs;
	struct be_rpc_call_opts ow = { .flags = BE_RPC_ONEWAY };
	static struct many m[200];
	char json[8192];
	unsigned int i;
	int want;

	rt_init(&t, argc, argv);
	rt_duo_start(&t, &duo);
	ch = duo.ch;
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC_LATER, 1, later, NULL, 0));
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC_FAIL, 1, failing, NULL, 0));
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC_ONEWAY, 1, oneway, NULL, 0));
	ASSERT_EQ(be_rpc_register(duo.srv.rpc, 0, 1, oneway, NULL, 0), -EINVAL);

	/* Every size, one at a time, contents checked. */
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct rt_result r = { 0 };

		ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, rt_req(sizes[i], i), sizes[i], NULL,
				      rt_done_cb, &r, NULL));
		rt_pump(duo.ws, 2, r_done, &r);
		ASSERT_OK(r.status);
		ASSERT_EQ(r.len, sizes[i]);
		ASSERT(r.reply);
		ASSERT(rt_check(r.reply, r.len, i));
		ASSERT_GE(be_rpc_buf_size(r.reply), r.len);
		be_rpc_buf_free(r.reply);
	}
	/* A NULL request of 0 bytes. */
	{
		struct rt_result r = { 0 };

		ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, NULL, 0, NULL, rt_done_cb, &r, NULL));
		rt_pump(duo.ws, 2, r_done, &r);
		ASSERT_OK(r.status);
		ASSERT_EQ(r.len, 0);
		be_rpc_buf_free(r.reply);
	}
	/* Many in flight, mixed sizes. */
	ndone = 0;
	for (i = 0; i < 200; i++) {
		m[i].seed = 1000 + i;
		m[i].len = (i % 7) * 1500 + (i % 3 ? 0 : 20000);
		ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, rt_req(m[i].len, m[i].seed), m[i].len,
				      NULL, many_cb, &m[i], NULL));
	}
	want = 200;
	rt_pump(duo.ws, 2, all_done, &want);

	/* A handler that answers later, from outside its own callback. */
	{
		struct rt_result r = { 0 };

		ASSERT_OK(be_rpc_call(ch, SVC_LATER, 1, rt_req(100, 5), 100, NULL, rt_done_cb, &r,
				      NULL));
		rt_pump(duo.ws, 2, held, NULL);
		rt_pump_ms(duo.ws, 2, 20);
		ASSERT_EQ(r.calls, 0);
		be_rpc_server_stats(duo.srv.rpc, &ss);
		ASSERT_EQ(ss.in_flight, 1);
		ASSERT_OK(be_rpc_req_reply(held_req, held_buf, held_len));
		rt_pump(duo.ws, 2, r_done, &r);
		ASSERT_OK(r.status);
		ASSERT(rt_check(r.reply, r.len, 5));
		be_rpc_buf_free(r.reply);
	}
	/* A handler's error, and a method nobody serves. */
	{
		struct rt_result r = { 0 }, u = { 0 };

		ASSERT_OK(be_rpc_call(ch, SVC_FAIL, 1, rt_req(10, 1), 10, NULL, rt_done_cb, &r, NULL));
		ASSERT_OK(be_rpc_call(ch, 99, 1, rt_req(10, 1), 10, NULL, rt_done_cb, &u, NULL));
		rt_pump(duo.ws, 2, r_done, &r);
		rt_pump(duo.ws, 2, r_done, &u);
		ASSERT_EQ(r.status, -EPERM);
		ASSERT_PTR_EQ(r.reply, NULL);
		ASSERT_EQ(u.status, -ENOSYS);
	}
	/* One-way calls: no callback needed, nothing comes back. */
	for (i = 0; i < 10; i++)
		ASSERT_OK(be_rpc_call(ch, SVC_ONEWAY, 1, rt_req(300, 77), 300, &ow, NULL, NULL, NULL));
	want = 10;
	rt_pump(duo.ws, 2, oneway_arrived, &want);
	oneway_chan = ch;
	rt_pump(duo.ws, 2, chan_ok_reached, NULL);
	/* Bad arguments leave the buffer with the caller. */
	{
		void *p = rt_req(8, 1);

		ASSERT_EQ(be_rpc_call(ch, RT_SVC, RT_ECHO, p, 8, NULL, NULL, NULL, NULL), -EINVAL);
		ASSERT_EQ(be_rpc_call(ch, RT_SVC, RT_ECHO, NULL, 8, NULL, rt_done_cb, NULL, NULL),
			  -EINVAL);
		be_rpc_buf_free(p);
	}

	be_rpc_chan_stats(ch, &cs);
	/* One-way calls count as ok once sent, but not in the latency. */
	ASSERT_EQ(cs.c.ok, 8 + 1 + 200 + 1 + 10);
	ASSERT_EQ(cs.c.errors, 2);
	ASSERT_EQ(cs.c.server_errors, 2);
	ASSERT_EQ(cs.c.calls, cs.c.ok + cs.c.errors);
	ASSERT_EQ(cs.c.outstanding, 0);
	ASSERT_EQ(cs.c.retries + cs.c.hedges + cs.c.late_replies, 0);
	ASSERT_EQ(cs.lat.count, cs.c.ok - 10);
	ASSERT_LE(be_rpc_hist_quantile(&cs.lat, 0.5), be_rpc_hist_quantile(&cs.lat, 0.99));
	ASSERT_OK(be_rpc_chan_replica_stats(ch, 0, &rs));
	ASSERT_EQ(rs.path, 0);
	ASSERT_EQ(rs.addrs[0].state, BE_RPC_ADDR_UP);
	ASSERT_EQ(rs.addrs[0].c.calls, cs.c.calls);
	ASSERT_EQ(be_rpc_chan_replica_stats(ch, 1, &rs), -ENOENT);
	ASSERT_GT(be_rpc_chan_stats_json(ch, json, sizeof(json)), 0);
	ASSERT_LT(be_rpc_chan_stats_json(ch, json, sizeof(json)), (int)sizeof(json));
	ASSERT(strstr(json, "\"ok\":220"));
	ASSERT(strstr(json, "\"p99\":"));
	ASSERT(strstr(json, "\"state\":\"up\""));
	/* A short buffer: the length it needs, and a NUL-terminated prefix. */
	{
		char small[10];

		ASSERT_EQ(be_rpc_chan_stats_json(ch, small, sizeof(small)), (int)strlen(json));
		ASSERT_EQ(strlen(small), sizeof(small) - 1);
	}
	be_rpc_server_stats(duo.srv.rpc, &ss);
	ASSERT_EQ(ss.requests, 8 + 1 + 200 + 1 + 1 + 10);
	ASSERT_EQ(ss.no_method, 1);
	ASSERT_EQ(ss.oneway, 10);
	ASSERT_EQ(ss.in_flight, 0);
	ASSERT_GT(be_rpc_server_stats_json(duo.srv.rpc, json, sizeof(json)), 0);
	ASSERT(strstr(json, "\"no_method\":1"));

	/* The blocking wrapper (this thread drives the client worker; the
	 * server runs on a library thread meanwhile). */
	ASSERT_OK(be_worker_start(duo.srv.w));
	{
		void *rep = NULL;
		size_t rl = 0;

		ASSERT_OK(be_rpc_call_sync(ch, RT_SVC, RT_ECHO, rt_req(5000, 9), 5000, NULL, &rep,
					   &rl));
		ASSERT_EQ(rl, 5000);
		ASSERT(rt_check(rep, rl, 9));
		be_rpc_buf_free(rep);
		ASSERT_EQ(be_rpc_call_sync(ch, 99, 2, rt_req(5, 9), 5, NULL, &rep, &rl), -ENOSYS);
		ASSERT_PTR_EQ(rep, NULL);
	}
	ASSERT_OK(be_worker_stop(duo.srv.w));

	rt_duo_stop(&duo);
	return 0;
}
