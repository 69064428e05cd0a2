/*
 * Check scatter calls (one request to each of N servers under one
 * deadline, completing once): every leg's reply lands in its own item;
 * without fail-fast a failed leg does not stop the others and the
 * status is the first failure; with fail-fast the scatter completes at
 * the first failure and the legs still running end -ECANCELED (their
 * replies come late and are counted); a leg the deadline catches ends
 * -ETIMEDOUT; a leg that cannot start (no usable replica) is a failed
 * leg, and a scatter whose every leg failed to start still calls back
 * once, from progress; be_rpc_cancel() ends a scatter; bad arguments
 * take nothing.
 */
#include <string.h>

#include "rtest.h"

#define NS 4
#define SVC 13u
#define M_HOLD 1u
#define M_FAIL 2u

static void fail(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	be_rpc_buf_free(buf);
	be_rpc_req_fail(req, -EPERM);
}

struct sres {
	int calls, status;
	unsigned int n;
	struct be_rpc_scatter_item *items;
};

static void scatter_cb(struct be_rpc_scatter_item *items, unsigned int n, int status, void *arg)
{
	struct sres *r = arg;

	r->calls++;
	ASSERT_EQ(r->calls, 1);
	r->status = status;
	r->n = n;
	r->items = items;
}

static struct be_worker *ws[NS + 1];

static bool s_done(void *arg)
{
	return ((struct sres *)arg)->calls > 0;
}

/* Every leg an echo of its own length and pattern on chs[i]. */
static void fill(struct be_rpc_scatter_item *it, struct be_rpc_chan **chs)
{
	int i;

	memset(it, 0, sizeof(*it) * NS);
	for (i = 0; i < NS; i++) {
		it[i].ch = chs[i];
		it[i].service = RT_SVC;
		it[i].method = RT_ECHO;
		it[i].len = 100u + (size_t)i * 3000;
		it[i].req = rt_req(it[i].len, (uint32_t)(50 + i));
	}
}

/* Leg @i calls method @m of service SVC instead. */
static void leg_calls(struct be_rpc_scatter_item *it, int i, uint32_t m)
{
	it[i].service = SVC;
	it[i].method = m;
}

/* Scatter @it over @rpc with @o and pump until it called back (into @r);
 * returns its status. */
static int scatter_wait(struct be_rpc *rpc, struct be_rpc_scatter_item *it,
			const struct be_rpc_call_opts *o, struct sres *r)
{
	ASSERT_OK(be_rpc_scatter(rpc, it, NS, o, scatter_cb, r, NULL));
	rt_pump(ws, NS + 1, s_done, r);
	return r->status;
}

static void free_replies(struct be_rpc_scatter_item *it, int n)
{
	int i;

	for (i = 0; i < n; i++)
		be_rpc_buf_free(it[i].reply);
}

/* The late replies counted on @chs[0..NS) in all; checks that none of
 * them has a call outstanding. */
static uint64_t late_replies(struct be_rpc_chan **chs)
{
	struct be_rpc_chan_stats cs;
	uint64_t n = 0;
	int i;

	for (i = 0; i < NS; i++) {
		be_rpc_chan_stats(chs[i], &cs);
		n += cs.c.late_replies;
		ASSERT_EQ(cs.c.outstanding, 0);
	}
	return n;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct rt_server srv[NS];
	struct rt_client cli;
	struct be_rpc_chan *chs[NS], *dead;
	struct be_rpc_scatter_item it[NS];
	struct be_rpc_record rec;
	struct be_ctx *ctx;
	uint64_t late = 0, id;
	int i, want;

	rt_init(&t, argc, argv);
	rt_fleet_start(&t, &ctx, srv, NS, &cli, ws);
	for (i = 0; i < NS; i++) {
		ASSERT_OK(be_rpc_register(srv[i].rpc, SVC, M_HOLD, rt_hold, NULL, 0));
		ASSERT_OK(be_rpc_register(srv[i].rpc, SVC, M_FAIL, fail, NULL, 0));
	}
	for (i = 0; i < NS; i++)
		ASSERT_OK(be_rpc_chan_open(cli.rpc, srv[i].addr, &chs[i]));

	/* Every leg answers. */
	{
		struct sres r = { 0 };

		fill(it, chs);
		ASSERT_OK(scatter_wait(cli.rpc, it, NULL, &r));
		ASSERT_PTR_EQ(r.items, it);
		ASSERT_EQ(r.n, NS);
		for (i = 0; i < NS; i++) {
			ASSERT_OK(it[i].status);
			ASSERT_EQ(it[i].reply_len, 100u + (size_t)i * 3000);
			ASSERT(rt_check(it[i].reply, it[i].reply_len, (uint32_t)(50 + i)));
			ASSERT_EQ(srv[i].echoed, 1);
		}
		free_replies(it, NS);
	}
	/* One leg fails, the others still complete. */
	{
		struct sres r = { 0 };

		fill(it, chs);
		leg_calls(it, 2, M_FAIL);
		ASSERT_EQ(scatter_wait(cli.rpc, it, NULL, &r), -EPERM);
		for (i = 0; i < NS; i++) {
			if (i == 2) {
				ASSERT_EQ(it[i].status, -EPERM);
				ASSERT_PTR_EQ(it[i].reply, NULL);
			} else {
				ASSERT_OK(it[i].status);
				ASSERT(rt_check(it[i].reply, it[i].reply_len, (uint32_t)(50 + i)));
			}
		}
		free_replies(it, NS);
	}
	/* Fail-fast: legs 0 and 1 are held, leg 3 fails: done at once. */
	{
		struct be_rpc_call_opts o = { .flags = BE_RPC_SCATTER_FAIL_FAST };
		struct sres r = { 0 };

		fill(it, chs);
		leg_calls(it, 0, M_HOLD);
		leg_calls(it, 1, M_HOLD);
		leg_calls(it, 3, M_FAIL);
		ASSERT_EQ(scatter_wait(cli.rpc, it, &o, &r), -EPERM);
		ASSERT_EQ(it[3].status, -EPERM);
		/* The held legs were stopped; leg 2 answered or was stopped. */
		ASSERT_EQ(it[0].status, -ECANCELED);
		ASSERT_EQ(it[1].status, -ECANCELED);
		ASSERT(it[2].status == 0 || it[2].status == -ECANCELED);
		late += 2 + (it[2].status == -ECANCELED);
		free_replies(it, NS);
		want = 2;
		rt_pump(ws, NS + 1, rt_held_count, &want);
		rt_held_release();
	}
	/* The deadline catches one leg. */
	{
		struct be_rpc_call_opts o = { .timeout_us = 100000 };
		struct sres r = { 0 };

		fill(it, chs);
		leg_calls(it, 1, M_HOLD);
		ASSERT_EQ(scatter_wait(cli.rpc, it, &o, &r), -ETIMEDOUT);
		ASSERT_EQ(it[1].status, -ETIMEDOUT);
		ASSERT_OK(it[0].status);
		ASSERT_OK(it[2].status);
		ASSERT_OK(it[3].status);
		free_replies(it, NS);
		rt_held_release();
		late += 1;
	}
	/* A leg with no usable replica: a draining one. */
	memset(&rec, 0, sizeof(rec));
	strcpy(rec.replica, "d");
	rec.shard_hi = UINT32_MAX;
	rec.state = BE_RPC_DRAINING;
	rec.naddrs = 1;
	snprintf(rec.addrs[0], sizeof(rec.addrs[0]), "%s", srv[0].addr);
	ASSERT_OK(be_rpc_chan_create(cli.rpc, &rec, 1, &dead));
	{
		struct sres r = { 0 };

		fill(it, chs);
		it[1].ch = dead;
		ASSERT_EQ(scatter_wait(cli.rpc, it, NULL, &r), -EHOSTUNREACH);
		ASSERT_EQ(it[1].status, -EHOSTUNREACH);
		ASSERT_OK(it[0].status);
		free_replies(it, NS);
	}
	/* Every leg fails to start: one callback, from progress. */
	{
		struct sres r = { 0 };

		fill(it, chs);
		for (i = 0; i < NS; i++)
			it[i].ch = dead;
		ASSERT_OK(be_rpc_scatter(cli.rpc, it, NS, NULL, scatter_cb, &r, NULL));
		ASSERT_EQ(r.calls, 0);
		rt_pump(ws, NS + 1, s_done, &r);
		ASSERT_EQ(r.status, -EHOSTUNREACH);
	}
	/* Cancelled. */
	{
		struct sres r = { 0 };

		fill(it, chs);
		for (i = 0; i < NS; i++)
			leg_calls(it, i, M_HOLD);
		ASSERT_OK(be_rpc_scatter(cli.rpc, it, NS, NULL, scatter_cb, &r, &id));
		want = NS;
		rt_pump(ws, NS + 1, rt_held_count, &want);
		ASSERT_OK(be_rpc_cancel(cli.rpc, id));
		ASSERT_EQ(be_rpc_cancel(cli.rpc, id), -ENOENT);
		ASSERT_EQ(r.calls, 0);
		rt_pump(ws, NS + 1, s_done, &r);
		ASSERT_EQ(r.status, -ECANCELED);
		for (i = 0; i < NS; i++)
			ASSERT_EQ(it[i].status, -ECANCELED);
		rt_held_release();
		late += NS;
	}
	/* Bad arguments take nothing. */
	fill(it, chs);
	ASSERT_EQ(be_rpc_scatter(cli.rpc, it, 0, NULL, scatter_cb, NULL, NULL), -EINVAL);
	ASSERT_EQ(be_rpc_scatter(cli.rpc, it, NS, NULL, NULL, NULL, NULL), -EINVAL);
	it[2].ch = NULL;
	ASSERT_EQ(be_rpc_scatter(cli.rpc, it, NS, NULL, scatter_cb, NULL, NULL), -EINVAL);
	for (i = 0; i < NS; i++)
		be_rpc_buf_free(it[i].req);

	/* Every late reply arrived and was counted. */
	ST_PUMP_WHILE(ws, NS + 1, late_replies(chs) < late);
	ASSERT_UEQ(late_replies(chs), late);
	be_rpc_chan_destroy(dead);
	for (i = 0; i < NS; i++)
		be_rpc_chan_destroy(chs[i]);
	rt_fleet_stop(ctx, srv, NS, &cli, ws);
	return 0;
}
