/*
 * Check deadlines: a call whose server never answers completes with
 * -ETIMEDOUT exactly once, and the reply that comes later is dropped and
 * counted as late; the handler sees the caller's remaining deadline
 * (propagated in the header) and may refuse work that cannot finish; a
 * method registered with a minimum refuses shorter deadlines without
 * running; and a stream of calls answered right around their deadline
 * completes each call exactly once (ok + timed out = calls, and every
 * timed-out one's reply is a late reply).
 */
#include <string.h>

#include "rtest.h"

#define SVC 11u
#define M_HOLD 1u
#define M_MIN 2u
#define M_REFUSE 3u

struct held {
	struct be_rpc_req *req;
	void *buf;
	size_t len;
	uint64_t due_ms;
	int64_t remaining_at_arrival;
};

static struct held held[512];
static int nheld, min_ran;
static uint64_t hold_ms; /* 0: hold until the test says */

static void hold(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	ASSERT_LT(nheld, 512);
	held[nheld] = (struct held){ req, buf, len, hold_ms ? rt_ms() + hold_ms : UINT64_MAX,
				     be_rpc_req_remaining_us(req) };
	nheld++;
}

static void min_handler(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	min_ran++;
	rt_echo(req, buf, len, NULL);
}

static void refuse(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	be_rpc_buf_free(buf);
	/* This work would take a second. */
	if (be_rpc_req_remaining_us(req) < 1000000)
		ASSERT_OK(be_rpc_req_fail(req, -ETIMEDOUT));
	else
		ASSERT_OK(be_rpc_req_reply(req, NULL, 0));
}

/* Answer the held requests that are due. */
static void answer_due(void)
{
	uint64_t now = rt_ms();
	int i;

	for (i = 0; i < nheld;) {
		if (held[i].due_ms <= now) {
			int rc = be_rpc_req_reply(held[i].req, held[i].buf, held[i].len);

			ASSERT(rc == 0 || rc == -ENOTCONN);
			held[i] = held[--nheld];
		} else {
			i++;
		}
	}
}

static struct rt_duo duo;

static bool r_done(void *arg)
{
	return ((struct rt_result *)arg)->calls > 0;
}

static bool server_deadline_passed(void *arg)
{
	return be_rpc_req_remaining_us(held[0].req) <= 0;
}

static bool have_held(void *arg)
{
	return nheld >= *(int *)arg;
}

struct stream {
	struct rt_result r[300];
	int n;
	struct be_rpc_chan *ch;
};

int main(int argc, char **argv)
{
	struct rt t;
	struct be_rpc_chan *ch;
	struct be_rpc_chan_stats cs;
	struct be_rpc_server_stats ss;
	static struct stream st;
	int one = 1, i, ok = 0, to = 0;

	rt_init(&t, argc, argv);
	rt_duo_start(&t, &duo);
	ch = duo.ch;
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC, M_HOLD, hold, NULL, 0));
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC, M_MIN, min_handler, NULL, 1000000));
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC, M_REFUSE, refuse, NULL, 0));

	/* A server that does not answer: -ETIMEDOUT once, then a late reply. */
	{
		struct be_rpc_call_opts o = { .timeout_us = 200000 };
		struct rt_result r = { 0 };
		struct rt_late late = { ch, 1 };
		uint64_t t0 = rt_ms();

		hold_ms = 0;
		ASSERT_OK(be_rpc_call(ch, SVC, M_HOLD, rt_req(64, 1), 64, &o, rt_done_cb, &r, NULL));
		rt_pump(duo.ws, 2, have_held, &one);
		/* Propagation: the handler saw at most the caller's 200 ms,
		 * and some of it. */
		ASSERT_LE(held[0].remaining_at_arrival, 200000);
		ASSERT_GT(held[0].remaining_at_arrival, 0);
		rt_pump(duo.ws, 2, r_done, &r);
		ASSERT_EQ(r.status, -ETIMEDOUT);
		ASSERT_PTR_EQ(r.reply, NULL);
		/* Not before its deadline. */
		ASSERT_GE(rt_ms() - t0, 200);
		/* The server's view ends no earlier than the caller's (it was
		 * stamped when the request was queued, before the connection
		 * even came up), and it does end. */
		rt_pump(duo.ws, 2, server_deadline_passed, NULL);
		held[0].due_ms = 0;
		answer_due();
		rt_pump(duo.ws, 2, rt_late_replies, &late);
		ASSERT_EQ(r.calls, 1);
		be_rpc_chan_stats(ch, &cs);
		ASSERT_EQ(cs.c.timeouts, 1);
		ASSERT_EQ(cs.c.late_replies, 1);
		ASSERT_EQ(cs.c.outstanding, 0);
	}
	/* A method that needs a second refuses a 100 ms call unseen. */
	{
		struct be_rpc_call_opts o = { .timeout_us = 100000 };
		struct rt_result r = { 0 };

		ASSERT_OK(be_rpc_call(ch, SVC, M_MIN, rt_req(8, 1), 8, &o, rt_done_cb, &r, NULL));
		rt_pump(duo.ws, 2, r_done, &r);
		ASSERT_EQ(r.status, -ETIMEDOUT);
		ASSERT_EQ(min_ran, 0);
		be_rpc_server_stats(duo.srv.rpc, &ss);
		ASSERT_EQ(ss.refused_deadline, 1);
	}
	/* ... and with two seconds it runs. */
	{
		struct be_rpc_call_opts o = { .timeout_us = 2000000 };
		struct rt_result r = { 0 };

		ASSERT_OK(be_rpc_call(ch, SVC, M_MIN, rt_req(8, 1), 8, &o, rt_done_cb, &r, NULL));
		rt_pump(duo.ws, 2, r_done, &r);
		ASSERT_OK(r.status);
		ASSERT_EQ(min_ran, 1);
		be_rpc_buf_free(r.reply);
	}
	/* A handler that refuses what it cannot finish in time. */
	{
		struct be_rpc_call_opts shortc = { .timeout_us = 50000 };
		struct be_rpc_call_opts longc = { .timeout_us = 5000000 };
		struct rt_result a = { 0 }, b = { 0 };

		ASSERT_OK(be_rpc_call(ch, SVC, M_REFUSE, NULL, 0, &shortc, rt_done_cb, &a, NULL));
		ASSERT_OK(be_rpc_call(ch, SVC, M_REFUSE, NULL, 0, &longc, rt_done_cb, &b, NULL));
		rt_pump(duo.ws, 2, r_done, &a);
		rt_pump(duo.ws, 2, r_done, &b);
		ASSERT_EQ(a.status, -ETIMEDOUT);
		ASSERT_OK(b.status);
		be_rpc_buf_free(b.reply);
	}
	/* Answers right around the deadline: each call once. */
	{
		struct be_rpc_call_opts o = { .timeout_us = 20000 };
		struct be_rpc_chan_stats before;

		be_rpc_chan_stats(ch, &before);
		hold_ms = 20;
		st.ch = ch;
		st.n = 300;
		for (i = 0; i < st.n; i++) {
			ASSERT_OK(be_rpc_call(ch, SVC, M_HOLD, rt_req(32, (uint32_t)i), 32, &o,
					      rt_done_cb, &st.r[i], NULL));
			if (i % 10 == 9)
				rt_pump_ms(duo.ws, 2, 1);
		}
		/* Late replies are counted across the whole test: count from
		 * before the stream. */
		{
			struct be_rpc_chan_stats now;

			for (;;) {
				int done = 0, tmo = 0;

				rt_pump_ms(duo.ws, 2, 1);
				answer_due();
				for (i = 0; i < st.n; i++) {
					done += st.r[i].calls;
					tmo += st.r[i].status == -ETIMEDOUT;
				}
				be_rpc_chan_stats(ch, &now);
				if (done == st.n && !nheld &&
				    now.c.late_replies - before.c.late_replies == (uint64_t)tmo)
					break;
			}
		}
		for (i = 0; i < st.n; i++) {
			ASSERT_EQ(st.r[i].calls, 1);
			if (!st.r[i].status) {
				ok++;
				ASSERT(rt_check(st.r[i].reply, 32, (uint32_t)i));
				be_rpc_buf_free(st.r[i].reply);
			} else {
				ASSERT_EQ(st.r[i].status, -ETIMEDOUT);
				to++;
			}
		}
		ASSERT_EQ(ok + to, st.n);
		be_rpc_chan_stats(ch, &cs);
		ASSERT_EQ(cs.c.timeouts - before.c.timeouts, (uint64_t)to);
		ASSERT_EQ(cs.c.ok - before.c.ok, (uint64_t)ok);
		ASSERT_EQ(cs.c.outstanding, 0);
		fprintf(stderr, "around the deadline: %d ok, %d timed out\n", ok, to);
	}
	rt_duo_stop(&duo);
	return 0;
}
