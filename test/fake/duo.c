/*
 * duo.c - the two-Engine scenario of the fault tests (see duo.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "duo.h"

void duo_init(struct duo *s, int argc, char **argv)
{
	ft_init(&s->t, argc, argv);
}

static bool warm(void *arg)
{
	struct duo *s = arg;

	return s->srv.recvd == 1 && s->srv2.recvd == 1 && s->sends.ok == 1 && s->sends2.ok == 1;
}

void duo_start(struct duo *s)
{
	char addr[160], addr2[160];

	ft_pair(&s->t, &s->ctx, s->ws, &s->srv, &s->l, addr, sizeof(addr));
	ft_listen(&s->t, s->ws[0], &s->srv2, &s->l2, addr2, sizeof(addr2));
	ASSERT_OK(be_sock_connect(s->ws[1], addr, &st_server_cbs, &s->cli, &s->c));
	ASSERT_OK(be_sock_connect(s->ws[1], addr2, &st_server_cbs, &s->cli2, &s->c2));
	ASSERT_OK(be_sock_send(s->c, st_msg(DUO_MSG, 1), DUO_MSG, st_send_cb, &s->sends));
	ASSERT_OK(be_sock_send(s->c2, st_msg(DUO_MSG, 2), DUO_MSG, st_send_cb, &s->sends2));
	st_pump(s->ws, 2, warm, s);
	ASSERT_EQ(s->srv.nsocks, 1);
	ASSERT_PTR_NE(ft_conn(s->c), ft_conn(s->c2));
}

int duo_send(struct duo *s, int n, size_t len, struct be_worker *w)
{
	int i;

	for (i = 0; i < n; i++) {
		void *m = st_msg(len, (uint32_t)(100 + i));
		int rc = be_sock_send(s->c, m, len, st_send_cb, &s->sends);

		if (rc == -ENOTCONN) {
			be_free(m);
			break;
		}
		ASSERT_OK(rc);
		if (w)
			be_worker_progress(w);
	}
	return i;
}

struct duo_want {
	struct duo *s;
	int n;
};

static bool failed(void *arg)
{
	const struct duo_want *w = arg;

	return w->s->sends.done == w->n && w->s->cli.closed && w->s->srv.closed;
}

void duo_wait_failed(struct duo *s, int n)
{
	struct duo_want w = { s, n };
	void *m;

	st_pump(s->ws, 2, failed, &w);
	ASSERT_EQ(s->sends.done, n);
	/* Whether any failed depends on the fault: a send the transport
	 * took before a receive failed on the other side completes with 0
	 * (the callers check last_err where a send must fail). */
	ASSERT_EQ(s->sends.ok + s->sends.other, n);
	ASSERT_EQ(s->cli.closed, 1);
	ASSERT_NE(s->cli.close_reason, 0);
	ASSERT_EQ(s->srv.closed, 1);
	ASSERT_NE(s->srv.close_reason, 0);
	ASSERT_EQ(s->cli2.closed, 0);
	m = st_msg(8, 0);
	ASSERT_EQ(be_sock_send(s->c, m, 8, st_send_cb, &s->sends), -ENOTCONN);
	be_free(m); /* refused: still ours */
}

void duo_large_fails(struct duo *s, const struct be__fake_faults *f, int err)
{
	ASSERT_OK(be__fake_conn_set(ft_conn(s->c), f));
	ASSERT_OK(be_sock_send(s->c, st_msg(DUO_LARGE, 3), DUO_LARGE, st_send_cb, &s->sends));
	duo_wait_failed(s, 2);
	ASSERT_EQ(s->sends.last_err, err);
	ASSERT_EQ(s->cli.close_reason, err);
	ASSERT_EQ(s->srv.recvd, 1); /* the warm-up only: nothing of it arrived */
}

static bool second_done(void *arg)
{
	struct duo *s = arg;

	return s->srv2.recvd == 3 && s->sends2.done == 3;
}

void duo_finish(struct duo *s)
{
	int i;

	ASSERT_OK(be_sock_send(s->c2, st_msg(DUO_MSG, 3), DUO_MSG, st_send_cb, &s->sends2));
	ASSERT_OK(be_sock_send(s->c2, st_msg(DUO_LARGE, 4), DUO_LARGE, st_send_cb, &s->sends2));
	st_pump(s->ws, 2, second_done, s);
	ASSERT_EQ(s->sends2.ok, 3);
	ASSERT_EQ(s->srv2.bytes, 2 * DUO_MSG + DUO_LARGE);
	ASSERT_EQ(s->cli2.closed, 0);
	st_pump_ms(s->ws, 2, 20);
	ft_check_srq(s->ws[0]);
	ft_check_srq(s->ws[1]);
	be_sock_close(s->c);
	be_sock_close(s->c2);
	be_listener_close(s->l2);
	for (i = 0; i < s->srv2.nsocks; i++)
		be_sock_close(s->srv2.socks[i]);
	free(s->srv2.socks);
	st_unpair(s->ctx, s->ws, &s->srv, s->l);
}
