/*
 * Check be_worker_shutdown(): a server worker shutting down closes every
 * Socket cleanly, so its clients receive every message whose send
 * completed and then get on_close(0), and it receives theirs; its own
 * Sockets get on_close(-ESHUTDOWN) and their handles stay valid; from the
 * first call it takes no new Socket or Engine (connect and listen return
 * -ESHUTDOWN, a peer's new Socket on an existing Engine and a new
 * connection are refused); it returns 0 once every Engine is gone; and
 * called from a callback it starts the shutdown and returns -EINPROGRESS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define NSOCK 4
#define NMSG 30
#define NLAST 5 /* small messages sent right before the shutdown */

static struct st_server srv;
static struct be_worker *ws[2];

struct cli {
	int recvd, closed, reason, bad;
	uint32_t next;
};

static struct cli clis[NSOCK + 2];

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct cli *c = user;

	if (!st_check(buf, len, c->next))
		c->bad++;
	c->next++;
	c->recvd++;
	be_free(buf);
}

static void cli_close(struct be_sock *s, int reason, void *user)
{
	struct cli *c = user;

	c->closed++;
	c->reason = reason;
}

static size_t msg_len(uint32_t j)
{
	return j % 7 == 6 ? 50000 : 100 + j;
}

/* The server's sockets: what they received, how they closed. */
static int srv_recvd, srv_closed, srv_reason, srv_bad;
static uint32_t srv_next[NSOCK + 2];
static bool shut_in_recv;
static int shut_in_recv_rc = 1;

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	ASSERT_LT(srv.nsocks, NSOCK);
	return st_server_cbs.on_accept(l, s, user);
}

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int i;

	for (i = 0; i < srv.nsocks && srv.socks[i] != s; i++)
		;
	if (!st_check(buf, len, 1000u * (uint32_t)i + srv_next[i]))
		srv_bad++;
	srv_next[i]++;
	srv_recvd++;
	be_free(buf);
	if (shut_in_recv) {
		shut_in_recv = false;
		shut_in_recv_rc = be_worker_shutdown(ws[0], 1000);
	}
}

static void srv_close(struct be_sock *s, int reason, void *user)
{
	srv_closed++;
	srv_reason = reason;
}

static bool all_sent(void *arg)
{
	struct st_sends *c = arg;

	return c->done == NSOCK * NMSG;
}

static bool cli_all_closed(void *arg)
{
	int i;

	for (i = 0; i < NSOCK; i++)
		if (!clis[i].closed)
			return false;
	return true;
}

static bool cli0_closed(void *arg)
{
	return clis[0].closed > 0;
}

static int srv_shutdown_rc;
static bool srv_shut(void *arg)
{
	srv_shutdown_rc = be_worker_shutdown(ws[0], 0);
	if (srv_shutdown_rc != -ETIMEDOUT)
		ASSERT_OK(srv_shutdown_rc);
	return srv_shutdown_rc == 0;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs scbs = { .on_recv = srv_recv, .on_close = srv_close,
				    .on_accept = srv_accept };
	struct be_sock_cbs ccbs = { .on_recv = cli_recv, .on_close = cli_close };
	struct st_sends csends = { 0 }, ssends = { 0 }, last[NSOCK] = { 0 };
	struct be_sock *cs[NSOCK + 2];
	struct be_listener *l, *l2;
	struct be_worker *w3;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;
	uint32_t j;
	int i, nlast_ok = 0;

	st_init(&t, argc, argv);
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &scbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));

	/* Traffic both ways; every send completes with 0. */
	for (i = 0; i < NSOCK; i++) {
		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, &clis[i], &cs[i]));
		for (j = 0; j < NMSG; j++)
			ASSERT_OK(be_sock_send(cs[i], st_msg(msg_len(j), 1000u * (uint32_t)i + j),
					       msg_len(j), st_send_cb, &csends));
	}
	st_pump(ws, 2, all_sent, &csends);
	ASSERT_EQ(csends.ok, NSOCK * NMSG);
	ASSERT_EQ(srv.nsocks, NSOCK);
	/* The server answers on each socket, sends a few more messages and
	 * shuts down before the client has run again: what completed with
	 * 0 must arrive, the rest completes with -ECANCELED. */
	for (i = 0; i < NSOCK; i++)
		for (j = 0; j < NMSG; j++)
			ASSERT_OK(be_sock_send(srv.socks[i], st_msg(msg_len(j), j), msg_len(j),
					       st_send_cb, &ssends));
	ST_PUMP_WHILE(ws, 2, ssends.done < NSOCK * NMSG);
	ASSERT_EQ(ssends.ok, NSOCK * NMSG);
	for (i = 0; i < NSOCK; i++)
		for (j = NMSG; j < NMSG + NLAST; j++)
			ASSERT_OK(be_sock_send(srv.socks[i], st_msg(64, j), 64, st_send_cb, &last[i]));
	ASSERT_OK(be_worker_progress(ws[0]));

	ASSERT_EQ(be_worker_shutdown(ws[0], 0), -ETIMEDOUT); /* the client must answer */
	ASSERT_EQ(be_worker_engine_count(ws[0]), 1);
	/* Nothing new from here on. */
	{
		struct be_sock *x;

		ASSERT_EQ(be_sock_connect(ws[0], addr, &ccbs, NULL, &x), -ESHUTDOWN);
		ASSERT_EQ(be_listen(ws[0], st_listen_addr(&t), &scbs, &srv, &l2), -ESHUTDOWN);
		/* A new socket on the existing Engine, and a new Engine. */
		ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, &clis[NSOCK], &cs[NSOCK]));
		ASSERT_OK(be_worker_create(ctx, &w3));
		ASSERT_OK(be_sock_connect(w3, addr, &ccbs, &clis[NSOCK + 1], &cs[NSOCK + 1]));
	}
	{
		struct be_worker *all[3] = { ws[0], ws[1], w3 };

		st_pump(all, 3, srv_shut, NULL);
		st_pump(all, 3, cli_all_closed, NULL);
		/* The listener stopped listening; a connection request
		 * already under way is rejected. */
		ST_PUMP_WHILE(all, 3, !clis[NSOCK].closed || !clis[NSOCK + 1].closed);
	}
	ASSERT_EQ(be_worker_engine_count(ws[0]), 0);
	ASSERT_EQ(be_worker_shutdown(ws[0], 0), 0); /* done stays done */

	/* Everything arrived both ways, and the clients saw clean closes. */
	ASSERT_EQ(srv_recvd, NSOCK * NMSG);
	ASSERT_EQ(srv_bad, 0);
	for (i = 0; i < NSOCK; i++) {
		ASSERT_EQ(last[i].done, NLAST);
		ASSERT_EQ(last[i].ok + last[i].canceled, NLAST);
		ASSERT_EQ(clis[i].recvd, NMSG + last[i].ok);
		nlast_ok += last[i].ok;
		ASSERT_EQ(clis[i].bad, 0);
		ASSERT_EQ(clis[i].closed, 1);
		ASSERT_EQ(clis[i].reason, 0);
	}
	ASSERT_EQ(clis[NSOCK].reason, -ECONNREFUSED);
	ASSERT_EQ(clis[NSOCK + 1].reason, -ECONNREFUSED);
	ASSERT_GE(nlast_ok, 1); /* some were in flight at the shutdown */
	/* The server's handles are still valid, their sockets closed. */
	ASSERT_EQ(srv_closed, NSOCK);
	ASSERT_EQ(srv_reason, -ESHUTDOWN);
	for (i = 0; i < NSOCK; i++)
		ASSERT_EQ(be_sock_send(srv.socks[i], NULL, 0, st_send_cb, &ssends), -ENOTCONN);
	for (i = 0; i < NSOCK + 2; i++)
		be_sock_close(cs[i]);
	st_server_close(&srv, l);
	be_worker_destroy(ws[0]);
	be_worker_destroy(w3);

	/* From a callback: the shutdown starts, -EINPROGRESS; progress
	 * finishes it. */
	memset(&srv, 0, sizeof(srv));
	memset(srv_next, 0, sizeof(srv_next));
	memset(clis, 0, sizeof(clis));
	srv_recvd = srv_closed = 0;
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_listen(ws[0], st_listen_addr(&t), &scbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, &clis[0], &cs[0]));
	shut_in_recv = true;
	ASSERT_OK(be_sock_send(cs[0], st_msg(msg_len(0), 0), msg_len(0), st_send_cb, &csends));
	st_pump(ws, 2, cli0_closed, NULL);
	ASSERT_EQ(shut_in_recv_rc, -EINPROGRESS);
	ASSERT_EQ(clis[0].reason, 0);
	ASSERT_EQ(srv_reason, -ESHUTDOWN);
	st_pump(ws, 2, srv_shut, NULL);
	be_sock_close(cs[0]);
	be_sock_close(srv.socks[0]);
	free(srv.socks);
	be_listener_close(l);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
	return 0;
}
