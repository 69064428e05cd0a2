/*
 * Check that be_sock_stats() returns -ENOTCONN once the socket has no
 * Engine any more (here: the peer closed it), as sock.h documents, and
 * 0 while it has one; the counters it fills stay the socket's either way.
 * Before the fix it always returned 0.
 */
#include <errno.h>

#include "stest.h"

static struct st_fx f;
static int closed = 1;

static void cli_close(struct be_sock *s, int reason, void *user)
{
	closed = reason;
}

static bool echoed(void *arg)
{
	return f.srv.recvd == 1 && *(int *)arg == 1;
}

static bool peer_closed(void *arg)
{
	return closed != 1;
}

static void done_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	*(int *)arg = 1;
	be_free(buf);
}

int main(int argc, char **argv)
{
	const struct be_sock_cbs ccbs = { .on_close = cli_close };
	struct be_sock_stats st;
	struct be_engine_stats es;
	struct be_sock *c;
	int sent = 0;

	st_fx_init(&f, argc, argv);
	st_fx_pair(&f);
	c = st_fx_connect(&f, &ccbs, NULL);
	ASSERT_OK(be_sock_send(c, st_msg(100, 1), 100, done_cb, &sent));
	st_pump(f.ws, 2, echoed, &sent);
	ASSERT_EQ(be_sock_stats(c, &st), 0);
	ASSERT_UEQ(st.msgs_sent, 1);

	/* The server closes its end: the client's socket loses its Engine. */
	be_sock_close(f.srv.socks[0]);
	f.srv.nsocks = 0;
	st_pump(f.ws, 2, peer_closed, NULL);
	ASSERT_EQ(closed, 0);
	memset(&st, 0, sizeof(st));
	ASSERT_EQ(be_sock_stats(c, &st), -ENOTCONN);
	ASSERT_UEQ(st.msgs_sent, 1);
	ASSERT_UEQ(st.bytes_sent, 100);
	ASSERT_EQ(be_sock_engine_stats(c, &es), -ENOTCONN);
	be_sock_close(c);
	st_fx_unpair(&f);
	return 0;
}
