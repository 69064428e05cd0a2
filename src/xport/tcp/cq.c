/*
 * cq.c - the tcp cq and srq.
 *
 * Model. A cq is an epoll set (its cq_fd) over the sockets of its
 * established conns and an eventfd; a growable ring of completions; the
 * conns with work their fd does not signal (kick) and those that owe
 * their peer an ACK frame (ackq). cq_poll is where the data path runs:
 * when the ring holds fewer completions than asked, it sends the owed
 * ACKs, progresses the kicked conns and the conns epoll reports ready
 * (data.c), then returns what the ring holds. An srq is a ring of posted
 * receives, taken from in arrival order by every conn attached to it.
 *
 * Syscalls. A poll asks the kernel once at most: with one conn in the
 * set that waits to read, it reads that conn (cq_sole_conn: where data
 * came, the epoll_wait() would only have named it); with more, one
 * epoll_wait(0). The first poll after cq_arm asks nothing: the owner
 * sleeps on the cq fd next, which is readable while a socket is. Nor
 * does a poll of a sole conn whose last read emptied its socket
 * (rx_idle), unless a wakeup came since: the owner polls right after its
 * own work (it sent a request, it answered one), where a recv() would
 * return EAGAIN; the poll after it, or the sleep, finds what comes.
 *
 * Wakeups. After cq_arm the eventfd is written (once) for work the owner
 * would not find by polling: a completion or kick made outside cq_poll,
 * or left behind by a poll that returned less. What a poll makes, it
 * returns: the owner is awake then, so that costs no eventfd write (and
 * no read later). cq_ack, called when the sleeper woke on the cq fd,
 * disarms and reads the eventfd only if it was written.
 *
 * Threads: the owner of the cq (see xport.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "util/log.h"
#include "xport/tcp/tcp.h"

/* ---- completion queue ------------------------------------------------ */

/* Wake a sleeper on the cq fd. Not while the owner is polling this cq:
 * it returns what the ring holds, and it arms again (which notifies for
 * what is left) before it sleeps. */
static void cq_notify(struct tcp_cq *cq)
{
	if (!cq->armed || cq->polling)
		return;
	cq->armed = 0;
	if (!cq->efd_set) {
		cq->efd_set = 1;
		be__wake_kick(cq->c.wake.efd);
	}
}

static void cq_drain_efd(struct tcp_cq *cq)
{
	if (cq->efd_set) {
		cq->efd_set = 0;
		be__wake_drain(cq->c.wake.efd);
	}
}

void be__tcp_cq_push(struct tcp_cq *cq, const struct be_xwc *wc)
{
	if (be__wcq_push(&cq->wcq, wc)) {
		be_log_err("tcp: out of memory growing a cq; completion %llu lost",
			   (unsigned long long)wc->wr_id);
		return;
	}
	cq_notify(cq);
}

void be__tcp_cq_kick(struct tcp_cq *cq, struct tcp_conn *c)
{
	if (be__list_linked(&c->kick_link))
		return;
	be__list_add_head(&cq->kick, &c->kick_link);
	cq_notify(cq);
}

int be__tcp_cq_create(struct be_xdev *xdev, uint32_t depth, struct be_xcq **out)
{
	struct be_xcq *x;
	struct tcp_cq *cq;
	int ret;

	/* The eventfd's tag is NULL: cq_progress() skips it. */
	ret = be__xcq_new(sizeof(*cq), xdev, NULL, &x);
	if (ret)
		return ret;
	cq = container_of(x, struct tcp_cq, c.x);
	be__list_init(&cq->conns);
	be__list_init(&cq->epset);
	be__list_init(&cq->kick);
	be__list_init(&cq->ackq);
	ret = be__wcq_init(&cq->wcq, BE_MAX(depth, 64u));
	if (ret) {
		be__xcq_free(&cq->c);
		return ret;
	}
	*out = x;
	return 0;
}

void be__tcp_cq_destroy(struct be_xcq *xcq)
{
	struct tcp_cq *cq;

	if (!xcq)
		return;
	cq = container_of(xcq, struct tcp_cq, c.x);
	while (!be__list_empty(&cq->conns)) {
		struct be__list *p = cq->conns.next;
		struct tcp_conn *c;

		be__list_del_init(p);
		/* A conn is on this list by scq_link, or by rcq_link when
		 * its rcq differs from its scq. */
		c = container_of(p, struct tcp_conn, scq_link);
		if (c->scq != cq)
			c = container_of(p, struct tcp_conn, rcq_link);
		be_log_err("tcp: cq destroyed with conn %s attached; detaching it", c->peer);
		be__tcp_conn_close_fd(c);
		if (c->state == TCP_C_ESTABLISHED)
			c->state = TCP_C_ERROR;
		be__list_del_init(&c->scq_link);
		be__list_del_init(&c->rcq_link);
		be__list_del_init(&c->kick_link);
		be__list_del_init(&c->ack_link);
		c->scq = c->rcq = NULL;
	}
	be__wcq_fini(&cq->wcq);
	be__xcq_free(&cq->c);
}

/*
 * The conn to read without asking the epoll set: the one conn in it, when
 * it waits only to read. Its recv() costs what an epoll_wait() that finds
 * nothing costs, and when data is there it saves the epoll_wait(); with
 * two or more conns one epoll_wait() is cheaper than a recv() each, and a
 * conn waiting for room to write is left to EPOLLOUT. NULL: use epoll.
 * O(1): the cq counts the conns in its set as they join and leave it.
 */
static struct tcp_conn *cq_sole_conn(struct tcp_cq *cq)
{
	struct tcp_conn *c;

	if (cq->nep != 1)
		return NULL;
	/* In the set by sep_link, or by rep_link when its rcq differs
	 * from its scq (cm.c, cq_ep_member). */
	c = container_of(cq->epset.next, struct tcp_conn, sep_link);
	if (c->scq != cq)
		c = container_of(cq->epset.next, struct tcp_conn, rep_link);
	return c->ep_events == EPOLLIN ? c : NULL;
}

static void cq_progress(struct tcp_cq *cq, int armed_now)
{
	struct epoll_event evs[64];
	struct tcp_conn *one;
	int n, i;

	cq->polling = 1;
	be__tcp_cq_flush_acks(cq);
	while (!be__list_empty(&cq->kick)) {
		struct tcp_conn *c = be__list_entry(cq->kick.next, struct tcp_conn, kick_link);

		be__list_del_init(&c->kick_link);
		be__tcp_conn_progress(c);
	}
	/* The first poll after cq_arm leaves the sockets to the sleep that
	 * follows it: the cq fd is readable while one of them is (the set
	 * is level-triggered), so the owner's epoll returns at once if data
	 * came, and a poll that would find nothing costs no syscall. */
	if (armed_now) {
		cq->polling = 0;
		return;
	}
	one = cq_sole_conn(cq);
	if (one) {
		cq_drain_efd(cq); /* we are awake: stop it waking us */
		/* Its last read found the socket empty, and nothing woke us
		 * since: this poll comes right after the owner's own work (a
		 * send, a callback), too soon for an answer, so asking the
		 * kernel again would only return EAGAIN. The sleep's epoll
		 * or the next poll (a spin, a busy loop) reads it. */
		if (one->rx_idle)
			one->rx_idle = 0;
		else
			be__tcp_conn_progress(one);
		cq->polling = 0;
		return;
	}
	n = epoll_wait(cq->c.wake.epfd, evs, (int)BE_ARRAY_SIZE(evs), 0);
	for (i = 0; i < n; i++) {
		if (!evs[i].data.ptr) {
			cq_drain_efd(cq); /* we are awake: stop it waking us */
			continue;
		}
		be__tcp_conn_progress(evs[i].data.ptr);
	}
	cq->polling = 0;
}

int be__tcp_cq_poll(struct be_xcq *xcq, struct be_xwc *wc, int n)
{
	struct tcp_cq *cq;
	int i, armed_now;

	if (!xcq || n < 0 || (n && !wc))
		return -EINVAL;
	cq = container_of(xcq, struct tcp_cq, c.x);
	armed_now = cq->armed_now;
	cq->armed_now = 0;
	if (be__wcq_len(&cq->wcq) < (uint32_t)n)
		cq_progress(cq, armed_now);
	i = be__wcq_pop(&cq->wcq, wc, n);
	/* A caller that gets nothing may go to sleep (without cq_arm if it
	 * is still armed): owe no peer an ack then. One that gets work
	 * polls again soon and may answer first, carrying the ack. */
	if (!i && n)
		be__tcp_cq_flush_acks(cq);
	/* Armed, and work left that this poll did not return: wake. */
	if (be__wcq_len(&cq->wcq) || !be__list_empty(&cq->kick))
		cq_notify(cq);
	return i;
}

int be__tcp_cq_fd(struct be_xcq *xcq)
{
	return be__xcq_fd(xcq);
}

int be__tcp_cq_arm(struct be_xcq *xcq)
{
	struct tcp_cq *cq;

	if (!xcq)
		return -EINVAL;
	cq = container_of(xcq, struct tcp_cq, c.x);
	/* About to sleep: owe no peer an ack, or its sender may stall. */
	be__tcp_cq_flush_acks(cq);
	cq->armed = 1;
	cq->armed_now = 1;
	/* Work already waiting must wake the sleeper, not be lost. */
	if (be__wcq_len(&cq->wcq) || !be__list_empty(&cq->kick))
		cq_notify(cq);
	return 0;
}

/* The sleeper woke on the cq fd: it is awake now (no more notifies until
 * it arms again), and the eventfd is read only if it was written. */
int be__tcp_cq_ack(struct be_xcq *xcq)
{
	struct tcp_conn *one;
	struct tcp_cq *cq;

	if (!xcq)
		return -EINVAL;
	cq = container_of(xcq, struct tcp_cq, c.x);
	cq->armed = 0;
	cq->armed_now = 0;
	cq_drain_efd(cq);
	/* Woken on the cq fd: the sole conn's socket is the likely reason;
	 * read it at the next poll. */
	one = cq_sole_conn(cq);
	if (one)
		one->rx_idle = 0;
	return 0;
}

/* ---- shared receive queue -------------------------------------------- */

int be__tcp_srq_create(struct be_xcq *xcq, uint32_t depth, struct be_xsrq **out)
{
	struct tcp_srq *srq;

	if (!xcq || !out || depth == 0 || depth > TCP_MAX_SRQ_WR)
		return -EINVAL;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	if (be__xrq_init(&srq->rq, depth)) {
		free(srq);
		return -ENOMEM;
	}
	srq->cq = container_of(xcq, struct tcp_cq, c.x);
	srq->x.dev = xcq->dev;
	srq->x.cq = xcq;
	be__list_init(&srq->conns);
	*out = &srq->x;
	return 0;
}

void be__tcp_srq_destroy(struct be_xsrq *xsrq)
{
	struct tcp_srq *srq;
	struct be_xrecv_wr *r;
	struct be_xwc wc;

	if (!xsrq)
		return;
	srq = container_of(xsrq, struct tcp_srq, x);
	while (!be__list_empty(&srq->conns)) {
		struct tcp_conn *c = container_of(srq->conns.next, struct tcp_conn, srq_link);

		be_log_err("tcp: srq destroyed with conn %s attached; detaching it", c->peer);
		be__list_del_init(&c->srq_link);
		c->srq = NULL;
	}
	/* Flush posted receives so their buffers go back to the owner. */
	memset(&wc, 0, sizeof(wc));
	wc.status = BE_XWC_WR_FLUSH_ERR;
	wc.opcode = BE_XWC_RECV;
	while ((r = be__xrq_take(&srq->rq))) {
		wc.wr_id = r->wr_id;
		be__tcp_cq_push(srq->cq, &wc);
	}
	be__xrq_fini(&srq->rq);
	free(srq);
}

/*
 * be__tcp_srq_post_recv() - post receives on @xsrq.
 *
 * Ownership: borrows @wr (copied); lends each receive buffer until its
 * completion (RECV, RECV_IMM or a flush) was polled: a SEND from any conn
 * on this srq is read straight into it. Buffers of WRs from *bad on were
 * not posted. Returns 0, -EINVAL (bad lkey or range) or -ENOMEM (full).
 */
int be__tcp_srq_post_recv(struct be_xsrq *xsrq, struct be_xrecv_wr *wr,
			  struct be_xrecv_wr **bad)
{
	struct tcp_srq *srq;
	struct tcp_dev *d;

	if (bad)
		*bad = NULL;
	if (!xsrq) {
		if (bad)
			*bad = wr;
		return -EINVAL;
	}
	srq = container_of(xsrq, struct tcp_srq, x);
	d = container_of(xsrq->dev, struct tcp_dev, x);
	for (; wr; wr = wr->next) {
		int rc = -EINVAL;

		if (!wr->sge.length || be__tcp_reg_check(d, wr->sge.lkey, wr->sge.addr, wr->sge.length))
			rc = be__xrq_post(&srq->rq, wr);
		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}

int be__tcp_srq_arm_limit(struct be_xsrq *xsrq, uint32_t limit)
{
	if (!xsrq)
		return -EINVAL;
	return be__xrq_arm(&container_of(xsrq, struct tcp_srq, x)->rq, limit);
}
