/*
 * Check that be_rpc_destroy() from inside a callback of the same be_rpc
 * is refused with a logged error and leaves it working: from a handler
 * (which then still replies) and from a call's completion. Under ASan a
 * destroy that went ahead would be a use after free in the frames that
 * called back. Afterwards both are destroyed normally.
 */
#include <string.h>

#include "rtest.h"

#define SVC 13u

static int refused;

static void on_log(int level, const char *msg)
{
	if (strstr(msg, "be_rpc_destroy() refused"))
		refused++;
}

static void destroying_echo(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	be_rpc_destroy(user);
	ASSERT_OK(be_rpc_req_reply(req, buf, len));
}

struct self {
	struct be_rpc *rpc;
	struct rt_result r;
};

static void destroying_done(int status, void *reply, size_t len, void *arg)
{
	struct self *s = arg;

	be_rpc_destroy(s->rpc);
	rt_done_cb(status, reply, len, &s->r);
}

static bool self_done(void *arg)
{
	return ((struct self *)arg)->r.calls > 0;
}

int main(int argc, char **argv)
{
	struct rt_duo duo;
	struct rt t;
	struct be_rpc_chan *ch;
	struct self s = { 0 };
	int i;

	rt_init(&t, argc, argv);
	be_log_set_fn(on_log);
	rt_duo_start(&t, &duo);
	ch = duo.ch;
	ASSERT_OK(be_rpc_register(duo.srv.rpc, SVC, 1, destroying_echo, duo.srv.rpc, 0));

	/* Twice each: both be_rpcs still serve and call after a refusal. */
	for (i = 0; i < 2; i++) {
		memset(&s, 0, sizeof(s));
		s.rpc = duo.cli.rpc;
		ASSERT_OK(be_rpc_call(ch, SVC, 1, rt_req(64, (uint32_t)i), 64, NULL,
				      destroying_done, &s, NULL));
		rt_pump(duo.ws, 2, self_done, &s);
		ASSERT_EQ(s.r.status, 0);
		ASSERT_EQ(s.r.len, 64);
		rt_check(s.r.reply, 64, (uint32_t)i);
		be_rpc_buf_free(s.r.reply);
	}
	ASSERT_EQ(refused, 4); /* the handler's and the completion's, twice */

	rt_duo_stop(&duo);
	be_log_set_fn(NULL);
	return 0;
}
