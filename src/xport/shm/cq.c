/*
 * cq.c - the shm cq and srq: completion queues and shared receive queues.
 *
 * Model. A cq is an epoll set (its cq_fd) over its eventfd and, for
 * hang-up only, the sockets of its conns; the lists of the conns whose
 * sends and whose receives it completes, which cq_poll (data.c) walks;
 * and a growable ring of the completions made here rather than read from
 * a ring (srq flushes), which cq_poll returns first. An srq is a plain
 * local array of posted receives: only the owner thread takes from it.
 *
 * Threads: the owner of the cq (see xport.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "util/common.h"
#include "util/log.h"
#include "xport/shm/shm.h"

/* ---- cq ------------------------------------------------------------- */

/* The tag of every cq's eventfd in its epoll set (cq_check_hup). */
static struct shm_ph cq_efd_ph = { SHM_PH_EVFD };

int be__shm_cq_create(struct be_xdev *dev, uint32_t depth, struct be_xcq **out)
{
	struct shm_cq *cq;
	int ret;

	if (!depth)
		return -EINVAL;
	ret = be__xcq_new(sizeof(*cq), dev, &cq_efd_ph, out);
	if (ret)
		return ret;
	cq = to_scq(*out);
	be__list_init(&cq->send_conns);
	be__list_init(&cq->recv_conns);
	return 0;
}

void be__shm_cq_destroy(struct be_xcq *xcq)
{
	struct shm_cq *cq;

	if (!xcq)
		return;
	cq = to_scq(xcq);
	if (!be__list_empty(&cq->send_conns) || !be__list_empty(&cq->recv_conns))
		be_log_warn("shm: cq destroyed with conns attached");
	/* A caller bug, survived: the conns lose both their cqs. */
	while (!be__list_empty(&cq->send_conns) || !be__list_empty(&cq->recv_conns)) {
		struct shm_conn *c = !be__list_empty(&cq->send_conns) ?
			be__list_entry(cq->send_conns.next, struct shm_conn, s_link) :
			be__list_entry(cq->recv_conns.next, struct shm_conn, r_link);

		be__shm_conn_detach_cqs(c);
		c->scq = c->rcq = NULL;
		c->srq = NULL;
	}
	be__wcq_fini(&cq->lq);
	be__xcq_free(&cq->c);
}

int be__shm_cq_fd(struct be_xcq *cq)
{
	return be__xcq_fd(cq);
}

void be__shm_cq_kick(struct shm_cq *cq)
{
	if (cq->armed) {
		cq->armed = false;
		be__wake_kick(cq->c.wake.efd);
	}
}

int be__shm_conn_attach_cqs(struct shm_conn *c)
{
	int ret;

	if (be__list_linked(&c->s_link))
		return 0;
	ret = be__wake_watch(&c->scq->c.wake, c->fd, EPOLLRDHUP, &c->ph);
	if (ret)
		return ret;
	if (c->rcq != c->scq) {
		ret = be__wake_watch(&c->rcq->c.wake, c->fd, EPOLLRDHUP, &c->ph);
		if (ret) {
			epoll_ctl(c->scq->c.wake.epfd, EPOLL_CTL_DEL, c->fd, NULL);
			return ret;
		}
	}
	c->cq_watched = true;
	be__list_add_head(&c->scq->send_conns, &c->s_link);
	be__list_add_head(&c->rcq->recv_conns, &c->r_link);
	return 0;
}

void be__shm_conn_unwatch(struct shm_conn *c)
{
	if (!c->cq_watched)
		return;
	c->cq_watched = false;
	epoll_ctl(c->scq->c.wake.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->rcq != c->scq)
		epoll_ctl(c->rcq->c.wake.epfd, EPOLL_CTL_DEL, c->fd, NULL);
}

void be__shm_conn_detach_cqs(struct shm_conn *c)
{
	if (!be__list_linked(&c->s_link))
		return;
	be__shm_conn_unwatch(c);
	be__list_del_init(&c->s_link);
	be__list_del_init(&c->r_link);
}

/* ---- srq ------------------------------------------------------------ */

int be__shm_srq_create(struct be_xcq *xcq, uint32_t depth, struct be_xsrq **out)
{
	struct shm_srq *s;

	if (!xcq || !out || !depth || depth > SHM_MAX_SRQ_WR)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (be__xrq_init(&s->rq, depth)) {
		free(s);
		return -ENOMEM;
	}
	s->base.dev = xcq->dev;
	s->base.cq = xcq;
	*out = &s->base;
	return 0;
}

void be__shm_srq_destroy(struct be_xsrq *xsrq)
{
	struct shm_srq *s;
	struct shm_cq *cq;
	struct be__list *e;
	struct be_xrecv_wr *r;

	if (!xsrq)
		return;
	s = to_ssrq(xsrq);
	cq = to_scq(xsrq->cq);
	be__list_for_each(e, &cq->recv_conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, r_link);

		if (c->srq == s)
			c->srq = NULL;
	}
	while ((r = be__xrq_take(&s->rq))) {
		struct be_xwc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = r->wr_id;
		wc.status = BE_XWC_WR_FLUSH_ERR;
		wc.opcode = BE_XWC_RECV;
		if (be__wcq_push(&cq->lq, &wc))
			be_log_err("shm: out of memory flushing a receive");
	}
	be__shm_cq_kick(cq);
	be__xrq_fini(&s->rq);
	free(s);
}

int be__shm_srq_post_recv(struct be_xsrq *xsrq, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad)
{
	struct shm_srq *s;

	if (!xsrq) {
		if (bad)
			*bad = wr;
		return -EINVAL;
	}
	s = to_ssrq(xsrq);
	for (; wr; wr = wr->next) {
		if (be__xrq_len(&s->rq) >= s->rq.depth) {
			if (bad)
				*bad = wr;
			return -ENOMEM;
		}
		if (wr->sge.length &&
		    be__shm_local_check(to_sdev(xsrq->dev), wr->sge.lkey, wr->sge.addr,
					wr->sge.length)) {
			if (bad)
				*bad = wr;
			return -EINVAL;
		}
		(void)be__xrq_post(&s->rq, wr); /* there is room: checked above */
	}
	return 0;
}

int be__shm_srq_arm_limit(struct be_xsrq *xsrq, uint32_t limit)
{
	if (!xsrq)
		return -EINVAL;
	return be__xrq_arm(&to_ssrq(xsrq)->rq, limit);
}

int be__shm_cq_ack(struct be_xcq *xcq)
{
	struct shm_cq *cq;
	int ret;

	if (!xcq)
		return -EINVAL;
	cq = to_scq(xcq);
	/* cq_fd was readable without a kick: a conn's socket hung up, which
	 * the next poll looks for. After a kick it does not (a syscall per
	 * wakeup): a hang-up beside a kick keeps cq_fd readable, so the
	 * next wait comes back here at once, without one. */
	ret = be__wake_take(cq->c.wake.efd);
	if (ret == 0)
		cq->hup_check = true;
	return ret < 0 ? ret : 0;
}
