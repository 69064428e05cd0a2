/*
 * Check cancellation and teardown: a cancelled call completes with
 * -ECANCELED exactly once, from progress (not inside be_rpc_cancel()),
 * and its reply, when it comes, is dropped and counted as late;
 * cancelling a completed or unknown call is -ENOENT; a call may be
 * cancelled from another call's callback; destroying a channel completes
 * its calls with -ECANCELED; a request a handler still holds when the
 * server's be_rpc is destroyed stays valid, and answering it is a clean
 * -ENOTCONN.
 */
#include "rtest.h"

#define SVC 12u

static struct be_rpc_req *held[16];
static void *held_buf[16];
static int nheld;

static void hold(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	ASSERT_LT(nheld, 16);
	held[nheld] = req;
	held_buf[nheld++] = buf;
}

static struct rt_duo duo;

static bool r_done(void *arg)
{
	return ((struct rt_result *)arg)->calls > 0;
}

static bool have_held(void *arg)
{
	return nheld >= *(int *)arg;
}

struct chain {
	struct be_rpc *rpc;
	uint64_t victim;
	int rc;
	struct rt_result r;
};

static void chain_cb(int status, void *reply, size_t len, void *arg)
{
	struct chain *c = arg;

	rt_done_cb(status, reply, len, &c->r);
	c->rc = be_rpc_cancel(c->rpc, c->victim);
}

static bool chain_done(void *arg)
{
	return ((struct chain *)arg)->r.calls > 0;
}

int main(int argc, char **argv)
{
	struct rt t;
	struct be_rpc_chan *ch, *ch2;
	struct be_rpc_chan_stats cs;
	struct rt_result r = { 0 }, v = { 0 }, d1 = { 0 }, d2 = { 0 };
	struct chain c = { 0 };
	uint64_t id;
	int want;

	rt_init(&t, argc, argv);
	rt_duo_start(&t, &duo);
	ch = duo.ch;
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC, 1, hold, NULL, 0));

	/* Cancel a call the server holds. */
	ASSERT_OK(be_rpc_call(ch, SVC, 1, rt_req(100, 1), 100, NULL, rt_done_cb, &r, &id));
	want = 1;
	rt_pump(duo.ws, 2, have_held, &want);
	ASSERT_OK(be_rpc_cancel(duo.cli.rpc, id));
	ASSERT_EQ(r.calls, 0); /* not inside the cancel */
	ASSERT_EQ(be_rpc_cancel(duo.cli.rpc, id), -ENOENT);
	rt_pump(duo.ws, 2, r_done, &r);
	ASSERT_EQ(r.status, -ECANCELED);
	ASSERT_PTR_EQ(r.reply, NULL);
	/* Its reply now is late. */
	ASSERT_OK(be_rpc_req_reply(held[0], held_buf[0], 100));
	nheld = 0;
	{
		struct rt_late late = { ch, 1 };

		rt_pump(duo.ws, 2, rt_late_replies, &late);
	}
	ASSERT_EQ(r.calls, 1);
	be_rpc_chan_stats(ch, &cs);
	ASSERT_EQ(cs.c.canceled, 1);
	ASSERT_EQ(cs.c.late_replies, 1);
	ASSERT_EQ(be_rpc_cancel(duo.cli.rpc, 0), -ENOENT);
	ASSERT_EQ(be_rpc_cancel(duo.cli.rpc, 12345678901ull), -ENOENT);

	/* Cancel one call from the callback of another. */
	c.rpc = duo.cli.rpc;
	ASSERT_OK(be_rpc_call(ch, SVC, 1, rt_req(10, 2), 10, NULL, rt_done_cb, &v, &c.victim));
	ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, rt_req(10, 3), 10, NULL, chain_cb, &c, NULL));
	rt_pump(duo.ws, 2, chain_done, &c);
	ASSERT_OK(c.r.status);
	be_rpc_buf_free(c.r.reply);
	ASSERT_OK(c.rc);
	rt_pump(duo.ws, 2, r_done, &v);
	ASSERT_EQ(v.status, -ECANCELED);

	/* Destroying a channel completes its calls, inside the destroy. */
	ASSERT_OK(be_rpc_chan_open(duo.cli.rpc, duo.srv.addr, &ch2));
	ASSERT_OK(be_rpc_call(ch2, SVC, 1, rt_req(10, 4), 10, NULL, rt_done_cb, &d1, NULL));
	ASSERT_OK(be_rpc_call(ch2, SVC, 1, rt_req(10, 5), 10, NULL, rt_done_cb, &d2, NULL));
	want = 3;
	rt_pump(duo.ws, 2, have_held, &want);
	be_rpc_chan_destroy(ch2);
	ASSERT_EQ(d1.calls, 1);
	ASSERT_EQ(d2.calls, 1);
	ASSERT_EQ(d1.status, -ECANCELED);
	ASSERT_EQ(d2.status, -ECANCELED);

	/* The server's be_rpc goes while its handler holds requests: they
	 * stay valid, answering them is -ENOTCONN. */
	rt_pump_ms(duo.ws, 2, 20);
	be_rpc_destroy(duo.srv.rpc);
	duo.srv.rpc = NULL;
	ASSERT_EQ(be_rpc_req_reply(held[0], held_buf[0], 10), -ENOTCONN);
	ASSERT_EQ(be_rpc_req_fail(held[1], -EIO), -ENOTCONN);
	ASSERT_EQ(be_rpc_req_reply(held[2], held_buf[2], 10), -ENOTCONN);
	be_rpc_buf_free(held_buf[1]);

	rt_duo_stop(&duo); /* its be_rpc is gone already */
	return 0;
}
