/*
 * cq.c - the fake cq and srq.
 *
 * Model. A fake cq wraps an inner cq. cq_poll takes what the inner cq
 * has, hands send completions to their conn's shadow send queue and
 * receives to the receive faults (data.c), which queue what the engine is
 * to see on the fake cq's own FIFO, each entry due at a poll count. A
 * poll hands out the entries that are due, in FIFO order: an entry held
 * back lets later ones of other conns pass (the only reordering), never
 * later ones of its own conn (their due is never earlier: @last). The
 * cq's fd is an epoll set over the inner cq's fd and an eventfd, kicked
 * when entries are queued outside a poll and at cq_arm while entries are
 * waiting for polls, so a sleeping worker polls them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "xport/fake/fake.h"

#define FAKE_POLL_BATCH 64

static struct fake_cq *to_cq(struct be_xcq *x)
{
	return container_of(x, struct fake_cq, c.x);
}

uint64_t be__fake_delay(const struct fake_conn *c)
{
	uint64_t d = c->f.delay_polls;

	if (c->f.jitter_polls)
		d += be__fake_rand() % ((uint64_t)c->f.jitter_polls + 1);
	return d;
}

int be__fake_cq_push(struct fake_cq *cq, const struct be_xwc *wc, uint64_t *last, uint64_t extra)
{
	uint64_t due = extra == UINT64_MAX ? UINT64_MAX : cq->polls + extra;

	if (be__grow(&cq->q, &cq->cap, cq->count + 1, sizeof(*cq->q), 64))
		return -ENOMEM;
	if (last) {
		if (due < *last)
			due = *last;
		*last = due;
	}
	if (due > cq->polls)
		be__fake_count(&be__fake.st.held);
	cq->q[cq->count].wc = *wc;
	cq->q[cq->count].due = due;
	cq->count++;
	be__wake_kick(cq->c.wake.efd);
	return 0;
}

/* @c is destroyed: its send completions go, its receives stay without
 * it (their buffers are the owner's), held ones due now. */
void be__fake_cq_forget(struct fake_cq *cq, struct fake_conn *c)
{
	uint32_t i, n = 0;

	for (i = 0; i < cq->count; i++) {
		struct fake_cqe e = cq->q[i];

		if (e.wc.conn == &c->x) {
			if (e.wc.opcode != BE_XWC_RECV && e.wc.opcode != BE_XWC_RECV_IMM &&
			    !e.wc.srq)
				continue;
			e.wc.conn = NULL;
			e.due = 0;
		}
		cq->q[n++] = e;
	}
	cq->count = n;
}

struct fake_srq *be__fake_srq_of(struct fake_cq *cq, struct be_xsrq *in)
{
	struct be__list *p;

	if (!in)
		return NULL;
	be__list_for_each(p, &cq->srqs) {
		struct fake_srq *s = be__list_entry(p, struct fake_srq, link);

		if (s->in == in)
			return s;
	}
	return NULL;
}

int be__fake_cq_create(struct be_xdev *xd, uint32_t depth, struct be_xcq **out)
{
	const struct be_xport_ops *in = fake_in_ops(xd);
	struct fake_cq *cq;
	struct be_xcq *x;
	int rc;

	rc = be__xcq_new(sizeof(*cq), xd, NULL, &x);
	if (rc)
		return rc;
	cq = to_cq(x);
	be__list_init(&cq->srqs);
	be__list_init(&cq->sconns);
	be__list_init(&cq->rconns);
	rc = in->cq_create(container_of(xd, struct fake_dev, x)->in, depth, &cq->in);
	if (rc)
		goto err_free;
	rc = be__wake_watch(&cq->c.wake, in->cq_fd(cq->in), EPOLLIN, NULL);
	if (rc)
		goto err_cq;
	*out = x;
	return 0;

err_cq:
	in->cq_destroy(cq->in);
err_free:
	be__xcq_free(&cq->c);
	return rc;
}

void be__fake_cq_destroy(struct be_xcq *xcq)
{
	struct fake_cq *cq;
	struct be__list *p;

	if (!xcq)
		return;
	cq = to_cq(xcq);
	/* Conns still attached (a caller bug) forget it. */
	while ((p = be__list_pop(&cq->sconns)))
		be__list_entry(p, struct fake_conn, slink)->scq = NULL;
	while ((p = be__list_pop(&cq->rconns)))
		be__list_entry(p, struct fake_conn, rlink)->rcq = NULL;
	while (!be__list_empty(&cq->srqs))
		be__list_del_init(be__list_first(&cq->srqs));
	fake_in_ops(xcq->dev)->cq_destroy(cq->in);
	free(cq->q);
	be__xcq_free(&cq->c);
}

/* One completion of the inner cq: a receive (or a receive flushed from
 * an srq) to the receive faults, a send to its conn's shadow queue. */
static void cq_take(struct fake_cq *cq, struct be_xwc *wc)
{
	struct fake_conn *c;

	if (wc->opcode == BE_XWC_RECV || wc->opcode == BE_XWC_RECV_IMM ||
	    (wc->srq && wc->status != BE_XWC_SUCCESS)) {
		be__fake_on_recv_wc(cq, wc);
		return;
	}
	c = wc->conn ? wc->conn->user : NULL;
	if (c)
		be__fake_on_send_wc(c, wc);
}

int be__fake_cq_poll(struct be_xcq *xcq, struct be_xwc *wc, int n)
{
	const struct be_xport_ops *in;
	struct be_xwc tmp[FAKE_POLL_BATCH];
	struct fake_cq *cq;
	uint32_t i, j = 0;
	int got, k, round, out = 0;

	if (!xcq || n < 0 || (n && !wc))
		return -EINVAL;
	cq = to_cq(xcq);
	in = fake_in_ops(xcq->dev);
	cq->polls++;
	for (round = 0; round < 4; round++) {
		got = in->cq_poll(cq->in, tmp, FAKE_POLL_BATCH);
		if (got < 0)
			return got;
		for (k = 0; k < got; k++)
			cq_take(cq, &tmp[k]);
		if (got < FAKE_POLL_BATCH)
			break;
	}
	for (i = 0; i < cq->count; i++) {
		if (out < n && cq->q[i].due <= cq->polls) {
			wc[out] = cq->q[i].wc;
			if (wc[out].srq)
				container_of(wc[out].srq, struct fake_srq, x)->posted--;
			out++;
		} else
			cq->q[j++] = cq->q[i];
	}
	cq->count = j;
	/* Quiet the fd once nothing left here waits for a poll. */
	for (i = 0; i < cq->count; i++)
		if (cq->q[i].due != UINT64_MAX)
			break;
	if (i == cq->count)
		be__wake_drain(cq->c.wake.efd);
	return out;
}

int be__fake_cq_fd(struct be_xcq *xcq)
{
	return be__xcq_fd(xcq);
}

int be__fake_cq_arm(struct be_xcq *xcq)
{
	struct fake_cq *cq;
	uint32_t i;
	int rc;

	if (!xcq)
		return -EINVAL;
	cq = to_cq(xcq);
	rc = fake_in_ops(xcq->dev)->cq_arm(cq->in);
	/* Completions waiting for polls (not those held until their conn
	 * goes) must get them: wake the sleeper at once. */
	for (i = 0; i < cq->count; i++)
		if (cq->q[i].due != UINT64_MAX) {
			be__wake_kick(cq->c.wake.efd);
			break;
		}
	return rc;
}

int be__fake_cq_ack(struct be_xcq *xcq)
{
	struct fake_cq *cq;

	if (!xcq)
		return -EINVAL;
	cq = to_cq(xcq);
	be__wake_drain(cq->c.wake.efd);
	return fake_in_ops(xcq->dev)->cq_ack(cq->in);
}

/* ---- shared receive queue ---- */

int be__fake_srq_create(struct be_xcq *xcq, uint32_t depth, struct be_xsrq **out)
{
	struct fake_cq *cq;
	struct fake_srq *s;
	int rc;

	if (!xcq || !out)
		return -EINVAL;
	cq = to_cq(xcq);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = fake_in_ops(xcq->dev)->srq_create(cq->in, depth, &s->in);
	if (rc) {
		free(s);
		return rc;
	}
	s->in->user = s;
	s->x.dev = xcq->dev;
	s->x.cq = xcq;
	be__list_add_tail(&cq->srqs, &s->link);
	*out = &s->x;
	return 0;
}

void be__fake_srq_destroy(struct be_xsrq *xs)
{
	struct fake_srq *s;
	struct fake_cq *cq;
	uint32_t i;

	if (!xs)
		return;
	s = container_of(xs, struct fake_srq, x);
	cq = container_of(xs->cq, struct fake_cq, c.x);
	/* Receives still queued here no longer name it (unless its cq
	 * went first, a caller bug). */
	for (i = 0; be__list_linked(&s->link) && i < cq->count; i++)
		if (cq->q[i].wc.srq == xs)
			cq->q[i].wc.srq = NULL;
	be__list_del_init(&s->link);
	fake_in_ops(xs->dev)->srq_destroy(s->in);
	free(s);
}

/* Is this receive WR the one to refuse? */
static bool srq_post_fails(int *err)
{
	bool hit = false;

	pthread_mutex_lock(&be__fake.lock);
	if (be__fake.srq_fail_nth && ++be__fake.srq_posted == be__fake.srq_fail_nth) {
		be__fake.srq_fail_nth = 0;
		be__fake.st.srq_post_failed++;
		*err = be__fake.srq_fail_err;
		hit = true;
	}
	pthread_mutex_unlock(&be__fake.lock);
	return hit;
}

/* Count the WRs of @wr up to (not including) @stop as posted. */
static void srq_count(struct fake_srq *s, struct be_xrecv_wr *wr, struct be_xrecv_wr *stop)
{
	for (; wr && wr != stop; wr = wr->next)
		s->posted++;
}

int be__fake_srq_post_recv(struct be_xsrq *xs, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad)
{
	const struct be_xport_ops *in;
	struct be_xrecv_wr *w, *prev = NULL;
	struct fake_srq *s;
	int rc, err = 0;

	if (!xs || !wr || !bad)
		return -EINVAL;
	s = container_of(xs, struct fake_srq, x);
	in = fake_in_ops(xs->dev);
	for (w = wr; w; prev = w, w = w->next)
		if (srq_post_fails(&err))
			break;
	/* Post the WRs before the refused one, then refuse it. */
	if (prev)
		prev->next = NULL;
	rc = prev ? in->srq_post_recv(s->in, wr, bad) : 0;
	if (prev)
		prev->next = w;
	srq_count(s, wr, rc ? *bad : w);
	if (rc || !w)
		return rc;
	*bad = w;
	return err;
}

int64_t be__fake_srq_outstanding(struct be_xsrq *xs)
{
	return xs ? container_of(xs, struct fake_srq, x)->posted : 0;
}

int be__fake_srq_arm_limit(struct be_xsrq *xs, uint32_t limit)
{
	if (!xs)
		return -EINVAL;
	return fake_in_ops(xs->dev)->srq_arm_limit(container_of(xs, struct fake_srq, x)->in,
						    limit);
}
