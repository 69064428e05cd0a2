/*
 * data.c - the fake data path: post_send through a shadow send queue,
 * and the WR and receive faults.
 *
 * Model. Every WR the engine posts gets a shadow entry, in posting
 * order. A WR that is delivered is posted to the inner conn signaled
 * (its wr_id: the entry's sequence number), so each one completes
 * exactly once there and the shadow queue knows when every WR before a
 * given one is done; its completion is handed on only when the engine
 * asked for one or it failed. A WR chosen to fail (fail_wr, break_after)
 * is not posted: its entry completes with its status once it reaches the
 * front, the conn is then in error, and the inner conn is disconnected
 * (the peer sees DISCONNECTED; nothing after the failed WR reached it).
 * WRs posted while a failing one waits, or once the conn is in error,
 * are not posted either and flush in order behind it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xport/fake/fake.h"

static int sq_push(struct fake_conn *c, const struct fake_swr *e)
{
	if (c->sq_count == c->sq_cap) {
		uint32_t cap = c->sq_cap ? c->sq_cap * 2 : 64, i;
		struct fake_swr *q = malloc(cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		for (i = 0; i < c->sq_count; i++)
			q[i] = c->sq[(c->sq_head + i) % c->sq_cap];
		free(c->sq);
		c->sq = q;
		c->sq_head = 0;
		c->sq_cap = cap;
	}
	c->sq[(c->sq_head + c->sq_count) % c->sq_cap] = *e;
	c->sq_count++;
	return 0;
}

static struct fake_swr *sq_front(struct fake_conn *c)
{
	return c->sq_count ? &c->sq[c->sq_head] : NULL;
}

static void sq_pop(struct fake_conn *c)
{
	c->sq_head = (c->sq_head + 1) % c->sq_cap;
	c->sq_count--;
}

void be__fake_sq_free(struct fake_conn *c)
{
	free(c->sq);
	c->sq = NULL;
	c->sq_count = c->sq_cap = c->sq_head = 0;
}

static void conn_emit(struct fake_conn *c, const struct be_xwc *wc)
{
	if (c->scq)
		be__fake_cq_push(c->scq, wc, &c->sdue, be__fake_delay(c));
}

/* The conn is in error: disconnect the inner one (once), so the peer
 * sees it and nothing more is exchanged. */
static void conn_error(struct fake_conn *c)
{
	c->failed = true;
	if (c->in && !c->disc) {
		c->disc = true;
		fake_in_ops(c->x.dev)->disconnect(c->in);
	}
}

/* Complete the failing entries at the front: the first with its status
 * (the conn then is in error), the others flushed. */
static void sq_advance(struct fake_conn *c)
{
	struct fake_swr *e;
	bool err = false;

	while ((e = sq_front(c)) && e->kind == FAKE_SWR_FAIL) {
		struct be_xwc wc = {
			.wr_id = e->wr_id,
			.status = c->failed ? BE_XWC_WR_FLUSH_ERR : e->st,
			.opcode = e->op,
			.conn = &c->x,
		};

		sq_pop(c);
		c->failed = true;
		err = true;
		conn_emit(c, &wc);
	}
	if (err)
		conn_error(c);
}

void be__fake_conn_break(struct fake_conn *c, enum be_xwc_status st)
{
	if (c->failed || c->disc)
		return;
	c->brk_st = st;
	if (c->in) {
		c->disc = true;
		fake_in_ops(c->x.dev)->disconnect(c->in);
	}
}

void be__fake_on_send_wc(struct fake_conn *c, const struct be_xwc *iwc)
{
	struct fake_swr *e;

	while ((e = sq_front(c)) && e->kind == FAKE_SWR_POSTED) {
		struct fake_swr s = *e;
		struct be_xwc wc = *iwc;

		sq_pop(c);
		if (s.seq != iwc->wr_id) {
			/* Cannot happen (every inner WR is signaled and they
			 * complete in order); retire it as the inner one did. */
			continue;
		}
		wc.wr_id = s.wr_id;
		wc.conn = &c->x;
		if (wc.status != BE_XWC_SUCCESS) {
			if (!c->failed && c->brk_st)
				wc.status = c->brk_st;
			c->failed = true;
		}
		if (wc.status != BE_XWC_SUCCESS || s.signaled)
			conn_emit(c, &wc);
		break;
	}
	sq_advance(c);
}

static uint64_t wr_bytes(const struct be_xsend_wr *w)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < w->num_sge; i++)
		n += w->sg_list[i].length;
	return n;
}

static enum be_xwc_opcode wr_wc_op(enum be_xwr_opcode op)
{
	return op == BE_XWR_SEND ? BE_XWC_SEND :
	       op == BE_XWR_WRITE ? BE_XWC_WRITE : BE_XWC_WRITE_IMM;
}

static void fake_count_fail(enum be_xwc_opcode op)
{
	pthread_mutex_lock(&be__fake.lock);
	be__fake.st.wr_failed++;
	be__fake.st.failed_op = op;
	pthread_mutex_unlock(&be__fake.lock);
}

int be__fake_post_send(struct be_xconn *xc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	const struct be_xport_ops *in;
	struct be_xsend_wr *w;
	struct fake_conn *c;
	int rc;

	if (!xc || !wr || !bad)
		return -EINVAL;
	c = to_fconn(xc);
	in = fake_in_ops(xc->dev);
	for (w = wr; w; w = w->next) {
		struct fake_swr e = {
			.wr_id = w->wr_id,
			.kind = FAKE_SWR_POSTED,
			.signaled = w->flags & BE_XWR_F_SIGNALED,
			.op = wr_wc_op(w->opcode),
		};
		uint64_t len = wr_bytes(w);

		c->nwr++;
		if (c->f.fail_wr && c->nwr == c->f.fail_wr && c->f.fail_post) {
			be__fake_count(&be__fake.st.post_failed);
			*bad = w;
			return c->f.fail_post;
		}
		if (c->halted || c->failed || c->disc || !c->in) {
			/* Nothing is posted on a conn in error or going: a
			 * broken one's first error is the break's. */
			e.kind = FAKE_SWR_FAIL;
			e.st = !c->halted && c->brk_st ? c->brk_st : BE_XWC_WR_FLUSH_ERR;
		} else if (c->f.fail_wr && c->nwr == c->f.fail_wr) {
			e.kind = FAKE_SWR_FAIL;
			e.st = c->f.fail_status ? c->f.fail_status : BE_XWC_GENERAL_ERR;
			fake_count_fail(e.op);
		} else if (c->f.do_break && c->bytes + len > c->f.break_after) {
			e.kind = FAKE_SWR_FAIL;
			e.st = BE_XWC_RETRY_EXC_ERR;
			fake_count_fail(e.op);
		}
		c->bytes += len;
		if (e.kind == FAKE_SWR_FAIL) {
			c->halted = true;
			rc = sq_push(c, &e);
			if (rc) {
				*bad = w;
				return rc;
			}
			continue;
		}
		e.seq = c->seq++;
		rc = sq_push(c, &e);
		if (!rc) {
			struct be_xsend_wr one = *w;
			struct be_xsend_wr *ibad = NULL;

			one.next = NULL;
			one.wr_id = e.seq;
			one.flags |= BE_XWR_F_SIGNALED;
			rc = in->post_send(c->in, &one, &ibad);
			if (rc) {
				c->sq_count--; /* the entry just pushed */
				c->seq--;
			}
		}
		if (rc) {
			*bad = w;
			return rc;
		}
	}
	sq_advance(c);
	return 0;
}

void be__fake_on_recv_wc(struct fake_cq *cq, struct be_xwc *wc)
{
	struct fake_conn *c = wc->conn ? wc->conn->user : NULL;
	struct fake_srq *s = be__fake_srq_of(cq, wc->srq);
	uint64_t extra;

	wc->srq = s ? &s->x : NULL;
	wc->conn = c ? &c->x : NULL;
	if (!c) {
		be__fake_cq_push(cq, wc, NULL, 0);
		return;
	}
	if (wc->status == BE_XWC_SUCCESS) {
		bool fail = false;

		if (!c->failed && c->f.fail_recv && ++c->nrecv == c->f.fail_recv) {
			fail = true;
			wc->status = c->f.recv_status ? c->f.recv_status : BE_XWC_LOC_LEN_ERR;
			be__fake_count(&be__fake.st.recv_failed);
		} else if (c->failed) {
			fail = true;
			wc->status = BE_XWC_WR_FLUSH_ERR;
		}
		if (fail) {
			wc->byte_len = 0;
			if (wc->rx_buf && c->rx_free)
				c->rx_free(&c->x, wc->rx_buf);
			wc->rx_buf = NULL;
			conn_error(c);
		}
	}
	extra = c->f.stall_rx ? UINT64_MAX : be__fake_delay(c);
	be__fake_cq_push(cq, wc, &c->rdue, extra);
}
