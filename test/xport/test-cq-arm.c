/*
 * Check the wakeup fds: after cq_arm, the cq fd becomes readable when a
 * message arrives from the peer, and when completions are made locally
 * (a disconnect flushing WRs); the evch fd becomes readable when a connection
 * request arrives and when an event is queued. A sleeper on these fds
 * never misses work.
 */
#include <poll.h>

#include "xtest.h"

/* One event of @type for @conn on @ch, taken when its fd woke (@revents):
 * 1 if it was there, 0 when the fd had not woken or nothing was queued. */
static int ev_take(struct xt *t, short revents, struct be_xevch *ch, int type,
		   struct be_xconn *conn)
{
	struct be_xevent ev;

	if (!revents || t->ops->evch_get(ch, &ev) != 1)
		return 0;
	ASSERT_EQ(ev.type, type);
	ASSERT_PTR_EQ(ev.conn, conn);
	return 1;
}

static int readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, ms) > 0;
}

/* Sleep on @fd (up to 10 s); fails (saying where) if it never wakes. */
#define wait_fd(fd)                                                           \
	do {                                                                  \
		if (!readable((fd), 10000))                                   \
			TEST_FAIL("%s never became readable", #fd);           \
	} while (0)

/*
 * Poll @cq until it gives a completion (up to 4 into @wc; at most 1000
 * polls), sleeping on its fd between polls: with @must_wake the fd must
 * become readable each time (wait_fd), otherwise up to 10 ms (an ack
 * already cleared it). Returns how many came.
 */
static int poll_wait(struct xt *t, struct be_xcq *cq, struct be_xwc *wc, bool must_wake)
{
	int i, n = 0;

	for (i = 0; i < 1000 && n == 0; i++) {
		n = t->ops->cq_poll(cq, wc, 4);
		ASSERT_OK(n);
		if (n)
			break;
		if (must_wake)
			wait_fd(t->ops->cq_fd(cq));
		else
			readable(t->ops->cq_fd(cq), 10);
	}
	return n;
}

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xconn_attr ca;
	struct be_xevent ev;
	struct be_xwc wc[4];
	char addr[BE_XPORT_ADDR_MAX];
	uint8_t *src;
	int i, n;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 0);
	ASSERT_OK(t->ops->listener_addr(p.l, addr, sizeof(addr)));
	src = xt_alloc(t, 4096);
	xt_post_recvs(t, &p.srv, 4, 4096);

	/* evch fd: a connect request wakes the acceptor. */
	ca = xt_attr(&p.cli, 16);
	ASSERT_OK(t->ops->connect(p.cli.ch, addr, &ca, NULL, 0, &p.c));
	for (i = 0; i < 1000 && !readable(t->ops->evch_fd(p.srv.ch), 0); i++) {
		/* The connector progresses only through its own evch. */
		n = t->ops->evch_get(p.cli.ch, &ev);
		ASSERT_OK(n);
		ASSERT_EQ(n, 0);
		readable(t->ops->evch_fd(p.cli.ch), 10);
	}
	wait_fd(t->ops->evch_fd(p.srv.ch));
	/* Each side progresses its own evch when its fd wakes. */
	for (i = 0, n = 0; i < 1000 && n == 0; i++) {
		struct pollfd pf[2] = { { t->ops->evch_fd(p.srv.ch), POLLIN, 0 },
				       { t->ops->evch_fd(p.cli.ch), POLLIN, 0 } };

		ASSERT(poll(pf, 2, 10000) > 0);
		if (pf[1].revents)
			ASSERT_EQ(t->ops->evch_get(p.cli.ch, &ev), 0);
		if (pf[0].revents)
			n = t->ops->evch_get(p.srv.ch, &ev);
	}
	ASSERT_EQ(n, 1);
	ASSERT_EQ(ev.type, BE_XEV_CONNECT_REQUEST);
	p.s = ev.conn;
	{
		struct be_xconn_attr sa = xt_attr(&p.srv, 16);

		ASSERT_OK(t->ops->accept(p.s, &sa, NULL, 0));
	}
	/* Both ESTABLISHED events wake their evch fds; each side progresses
	 * only when its fd says so (the handshake may need both). */
	{
		int est_s = 0, est_c = 0;

		for (i = 0; i < 1000 && !(est_s && est_c); i++) {
			struct pollfd pf[2] = { { t->ops->evch_fd(p.srv.ch), POLLIN, 0 },
					       { t->ops->evch_fd(p.cli.ch), POLLIN, 0 } };

			if (poll(pf, 2, 10000) <= 0)
				TEST_FAIL("no evch fd woke for ESTABLISHED");
			est_s += ev_take(t, pf[0].revents, p.srv.ch, BE_XEV_ESTABLISHED, p.s);
			est_c += ev_take(t, pf[1].revents, p.cli.ch, BE_XEV_ESTABLISHED, p.c);
		}
		ASSERT(est_s == 1 && est_c == 1);
	}

	/* cq fd: quiet, armed, then a message arrives. */
	xt_spin(t, 10);
	ASSERT_EQ(p.srv.nwc + p.cli.nwc, 0);
	ASSERT_OK(t->ops->cq_arm(p.srv.cq));
	ASSERT_EQ(t->ops->cq_poll(p.srv.cq, wc, 4), 0);
	xt_post(t, p.c, BE_XWR_SEND, 1, src, 100, BE_XWR_F_SIGNALED, 0, 0, 0);
	wait_fd(t->ops->cq_fd(p.srv.cq));
	ASSERT_OK(t->ops->cq_ack(p.srv.cq));
	ASSERT_EQ(poll_wait(t, p.srv.cq, wc, false), 1);
	ASSERT_EQ(wc[0].opcode, BE_XWC_RECV);
	ASSERT_EQ(wc[0].byte_len, 100);
	/* The receiver goes to sleep (arm sends the ack it owes); the
	 * sender's completion wakes the sender. */
	ASSERT_OK(t->ops->cq_arm(p.srv.cq));
	ASSERT_OK(t->ops->cq_arm(p.cli.cq));
	ASSERT_EQ(poll_wait(t, p.cli.cq, wc, true), 1);
	ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
	ASSERT_OK(t->ops->cq_ack(p.cli.cq));

	/* Local completions (flush at disconnect) wake an armed cq. */
	xt_spin(t, 10);
	ASSERT_EQ(p.srv.nwc + p.cli.nwc, 0);
	ASSERT_EQ(t->ops->cq_poll(p.srv.cq, wc, 4), 0);
	ASSERT_OK(t->ops->cq_ack(p.srv.cq));
	ASSERT_OK(t->ops->cq_arm(p.srv.cq));
	ASSERT(!readable(t->ops->cq_fd(p.srv.cq), 0));
	xt_post(t, p.s, BE_XWR_SEND, 2, src, 10, BE_XWR_F_SIGNALED, 0, 0, 0);
	ASSERT_OK(t->ops->disconnect(p.s));
	wait_fd(t->ops->cq_fd(p.srv.cq));
	ASSERT_OK(t->ops->cq_ack(p.srv.cq));
	/* Arm, then poll (the race-free order): the completion is there. */
	ASSERT_OK(t->ops->cq_arm(p.srv.cq));
	n = t->ops->cq_poll(p.srv.cq, wc, 4);
	ASSERT_GE(n, 1);
	ASSERT_UEQ(wc[0].wr_id, 2);
	ASSERT_OK(t->ops->cq_ack(p.srv.cq));
	/* The disconnect events wake the evch fds (both sides progressing
	 * on wakeups only, as the teardown may need the peer). */
	{
		int dis_s = 0, dis_c = 0;

		for (i = 0; i < 1000 && !(dis_s && dis_c); i++) {
			struct pollfd pf[3] = { { t->ops->evch_fd(p.srv.ch), POLLIN, 0 },
					       { t->ops->evch_fd(p.cli.ch), POLLIN, 0 },
					       { t->ops->cq_fd(p.cli.cq), POLLIN, 0 } };

			if (poll(pf, 3, 10000) <= 0)
				TEST_FAIL("no fd woke for DISCONNECTED");
			/* A peer's hang-up may need its cq polled (tcp). */
			t->ops->cq_poll(p.cli.cq, wc, 4);
			dis_s += ev_take(t, pf[0].revents, p.srv.ch, BE_XEV_DISCONNECTED, p.s);
			dis_c += ev_take(t, pf[1].revents, p.cli.ch, BE_XEV_DISCONNECTED, p.c);
		}
		ASSERT(dis_s == 1 && dis_c == 1);
	}

	xt_pair_close(&p);
	return 0;
}
