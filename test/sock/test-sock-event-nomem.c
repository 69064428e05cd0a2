/*
 * Check that a transport loses no connection event for want of memory:
 * with every event queue allocation failing (the be__evq_fail_allocs
 * hook, as malloc returning NULL), an Engine still connects (the
 * CONNECT_REQUEST and both ESTABLISHED events), a message still
 * arrives, and a shutdown still disconnects both sides (both
 * DISCONNECTED events): each connection's events come from the nodes its
 * transport reserved when it made the connection (BE_XPORT_CONN_EVENTS).
 * Without the reserve the CONNECT_REQUEST was lost and the connect hung.
 * On verbs rdma_cm queues most connection events in the kernel, but the
 * transport queues the acceptor's ESTABLISHED, the DISCONNECTED of a
 * disconnect and the events it reads early, from its conns' reserve too.
 */
#include <string.h>

#include "stest.h"
#include "util/evq.h"

int main(int argc, char **argv)
{
	struct st_server srv = { 0 };
	struct be_worker *ws[2];
	struct be_listener *l;
	struct st_sends sends = { 0 };
	struct be_sock *c;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;
	const int fail = 1 << 30;

	st_init(&t, argc, argv);
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	be__evq_fail_allocs = fail;
	ASSERT_OK(be_sock_connect(ws[1], addr, NULL, NULL, &c));
	st_send_recvd(ws, c, 100, 1, &sends, &srv, 1);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 1);
	be_sock_close(c);
	st_shutdown(ws, 2);
	ASSERT_EQ(be_worker_engine_count(ws[0]), 0);
	ASSERT_EQ(be_worker_engine_count(ws[1]), 0);
	/* Events were pushed while every allocation failed: on verbs at
	 * least the acceptor's ESTABLISHED (rdma_cm delivers the others). */
	ASSERT(be__evq_fail_allocs < fail - (strcmp(t.transport, "verbs") ? 3 : 1));
	be__evq_fail_allocs = 0;
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
