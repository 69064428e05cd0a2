/*
 * cq.c - verbs CQs and SRQs, and the completions handed out.
 *
 * Thread domains. Each CQ (one per worker) tries ibv_alloc_td() and a
 * parent domain over the device's PD; the worker's SRQs and QPs are created
 * on it so the provider can drop its locks. Providers without thread
 * domains (rxe, siw) make ibv_alloc_td() fail: the worker then uses the
 * plain PD, which is correct, only with uncontended locks.
 *
 * Completions. A CQ maps qp_num -> conn in a table owned by its worker. To
 * keep "no completion names a destroyed conn" even when a QP number is
 * reused, conn_destroy() drains the CQ right after the QP is destroyed and
 * keeps the other conns' completions in a backlog that cq_poll() returns
 * first. An SRQ remembers the wr_ids of its posted receives, because
 * ibv_destroy_srq() silently drops them and the contract says they flush.
 *
 * Errors on a conn. The first error completion of a conn that was not being
 * torn down puts a BE_XEV_DISCONNECTED (with a status derived from the
 * completion) on the conn's evch and starts rdma_disconnect(), so the peer
 * learns it too. Fatal QP async events do the same through the evch queue.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "util/log.h"
#include "xport/verbs/verbs.h"

#define VERBS_POLL_BATCH 32
#define VERBS_CQ_ACK_BATCH 64

/* ------------------------------------------------------ completions */

void be__verbs_bl_push(struct verbs_cq *cq, const struct be_xwc *wc)
{
	if (cq->bl_len == cq->bl_cap) {
		if (cq->bl_head) {
			memmove(cq->backlog, cq->backlog + cq->bl_head,
				(cq->bl_len - cq->bl_head) * sizeof(*wc));
			cq->bl_len -= cq->bl_head;
			cq->bl_head = 0;
		} else {
			size_t ncap = cq->bl_cap ? cq->bl_cap * 2 : 64;
			struct be_xwc *n = realloc(cq->backlog, ncap * sizeof(*wc));

			if (!n) {
				be_log_err("verbs: out of memory: completion of wr_id %#llx lost",
					   (unsigned long long)wc->wr_id);
				return;
			}
			cq->backlog = n;
			cq->bl_cap = ncap;
		}
	}
	if (cq->bl_head == cq->bl_len)
		be__wake_kick(cq->wake.efd);
	cq->backlog[cq->bl_len++] = *wc;
}

static enum be_xwc_status verbs_wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return BE_XWC_SUCCESS;
	case IBV_WC_LOC_LEN_ERR: return BE_XWC_LOC_LEN_ERR;
	case IBV_WC_LOC_PROT_ERR: return BE_XWC_LOC_PROT_ERR;
	case IBV_WC_WR_FLUSH_ERR: return BE_XWC_WR_FLUSH_ERR;
	case IBV_WC_REM_ACCESS_ERR: return BE_XWC_REM_ACCESS_ERR;
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_INV_REQ_ERR: return BE_XWC_REM_OP_ERR;
	case IBV_WC_RETRY_EXC_ERR: return BE_XWC_RETRY_EXC_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR: return BE_XWC_RNR_RETRY_EXC;
	case IBV_WC_REM_ABORT_ERR: return BE_XWC_REM_ABORT_ERR;
	default: return BE_XWC_GENERAL_ERR;
	}
}

static int verbs_status_errno(enum be_xwc_status s)
{
	switch (s) {
	case BE_XWC_SUCCESS: return 0;
	case BE_XWC_LOC_LEN_ERR: return -EMSGSIZE;
	case BE_XWC_LOC_PROT_ERR: return -EFAULT;
	case BE_XWC_WR_FLUSH_ERR: return -ECONNRESET;
	case BE_XWC_REM_ACCESS_ERR: return -EACCES;
	case BE_XWC_REM_OP_ERR: return -EPROTO;
	case BE_XWC_RETRY_EXC_ERR: return -ETIMEDOUT;
	case BE_XWC_RNR_RETRY_EXC: return -ENOBUFS;
	case BE_XWC_REM_ABORT_ERR: return -ECONNRESET;
	default: return -EIO;
	}
}

static void verbs_srq_unrecord(struct verbs_srq *srq, uint64_t wr_id)
{
	uint64_t cnt = 0;

	if (!be__verbs_map_get(&srq->posted, wr_id, &cnt))
		return;
	if (cnt > 1)
		be__verbs_map_put(&srq->posted, wr_id, cnt - 1);
	else
		be__verbs_map_del(&srq->posted, wr_id);
	srq->nposted--;
}

/* Find the send WR of @wr_id among @vc's outstanding ones; 1 if found. */
static int verbs_sq_has(const struct verbs_conn *vc, uint64_t wr_id)
{
	uint32_t i;

	for (i = vc->sq_head; i != vc->sq_tail; i++)
		if (vc->sq[i & vc->sq_mask].wr_id == wr_id)
			return 1;
	return 0;
}

/*
 * The send WR a send completion belongs to: unsignaled WRs before it
 * completed silently (on success) and leave the ring with it. On error
 * every WR has its own completion, signaled or not.
 */
static enum be_xwc_opcode verbs_sq_complete(struct verbs_conn *vc, const struct ibv_wc *iwc,
					    int *mw)
{
	enum be_xwc_opcode op = BE_XWC_SEND;

	*mw = 0;
	while (vc->sq_head != vc->sq_tail) {
		struct verbs_swr *s = &vc->sq[vc->sq_head & vc->sq_mask];

		vc->sq_head++;
		vc->sq_mw -= s->mw;
		if (s->wr_id == iwc->wr_id && (s->signaled || iwc->status != IBV_WC_SUCCESS)) {
			op = (enum be_xwc_opcode)s->opcode;
			*mw = s->mw;
			break;
		}
	}
	return op;
}

/*
 * Turn one ibv_wc into a be_xwc; 1 if it is to be delivered. Error
 * completions carry only wr_id, status and qp_num (ibv_poll_cq(3)), so a
 * failed WR is a send when its wr_id is outstanding on the conn's send
 * queue, and otherwise a receive if its SRQ holds that wr_id.
 */
static int verbs_wc_map(struct verbs_cq *cq, const struct ibv_wc *iwc, struct be_xwc *wc)
{
	struct verbs_conn *vc = NULL;
	uint64_t v, cnt;
	int is_recv, mw = 0;

	if (be__verbs_map_get(&cq->qps, iwc->qp_num, &v))
		vc = (struct verbs_conn *)(uintptr_t)v;
	if (iwc->status == IBV_WC_SUCCESS)
		is_recv = !!(iwc->opcode & IBV_WC_RECV);
	else
		is_recv = vc && !verbs_sq_has(vc, iwc->wr_id) && vc->srq &&
			  be__verbs_map_get(&vc->srq->posted, iwc->wr_id, &cnt);
	if (!vc) {
		/* Cannot happen: conn_destroy() drains the CQ first. */
		be_log_dbg("verbs: completion for unknown QP %u dropped", iwc->qp_num);
		return 0;
	}
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = iwc->wr_id;
	wc->status = verbs_wc_status(iwc->status);
	/* rxe reports local buffer faults as LOC_QP_OP_ERR: a receive that
	 * cannot hold the message (NICs: LOC_LEN_ERR), a send whose lkey or
	 * range is bad (NICs: LOC_PROT_ERR). */
	if (iwc->status == IBV_WC_LOC_QP_OP_ERR && to_vdev(cq->base.dev)->quirk_rxe)
		wc->status = is_recv ? BE_XWC_LOC_LEN_ERR : BE_XWC_LOC_PROT_ERR;
	wc->vendor_err = iwc->vendor_err;
	wc->conn = &vc->base;
	if (is_recv) {
		wc->srq = vc->srq ? &vc->srq->base : NULL;
		wc->byte_len = iwc->byte_len;
		if (iwc->status == IBV_WC_SUCCESS && iwc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			wc->opcode = BE_XWC_RECV_IMM;
			wc->imm = ntohl(iwc->imm_data);
		} else {
			wc->opcode = BE_XWC_RECV;
		}
		if (vc->srq)
			verbs_srq_unrecord(vc->srq, iwc->wr_id);
	} else {
		wc->opcode = verbs_sq_complete(vc, iwc, &mw);
	}
	if (wc->status != BE_XWC_SUCCESS && !vc->reported_down && !vc->disconnect_sent) {
		char why[96];

		snprintf(why, sizeof(why), "%s completion: %s (vendor error %#x)",
			 is_recv ? "receive" : "send", ibv_wc_status_str(iwc->status),
			 iwc->vendor_err);
		be__verbs_conn_failed(vc, verbs_status_errno(wc->status), why);
	}
	if (mw) /* a grant's bind or invalidate (data.c) */
		return be__verbs_mw_done(vc, iwc, wc);
	return 1;
}

/* Move everything on @cq's CQ into its backlog. */
static void verbs_cq_drain(struct verbs_cq *cq)
{
	struct ibv_wc iwc[VERBS_POLL_BATCH];
	struct be_xwc wc;
	int k, i;

	do {
		k = ibv_poll_cq(cq->cq, VERBS_POLL_BATCH, iwc);
		for (i = 0; i < k; i++)
			if (verbs_wc_map(cq, &iwc[i], &wc))
				be__verbs_bl_push(cq, &wc);
	} while (k == VERBS_POLL_BATCH);
}

/* Backlog entries of @vc: sends vanish, receives become flushes with no conn
 * (the buffer goes back to its owner). */
static void verbs_bl_forget(struct verbs_cq *cq, const struct verbs_conn *vc)
{
	size_t i, o = cq->bl_head;

	for (i = cq->bl_head; i < cq->bl_len; i++) {
		struct be_xwc *w = &cq->backlog[i];

		if (w->conn == &vc->base) {
			if (w->opcode != BE_XWC_RECV && w->opcode != BE_XWC_RECV_IMM)
				continue;
			w->conn = NULL;
			w->status = BE_XWC_WR_FLUSH_ERR;
			w->opcode = BE_XWC_RECV;
			w->byte_len = 0;
		}
		cq->backlog[o++] = *w;
	}
	cq->bl_len = o;
	if (cq->bl_head == cq->bl_len) {
		cq->bl_head = cq->bl_len = 0;
		be__wake_drain(cq->wake.efd);
	}
}

/* @vc's QP is gone: whatever it completed is on @cq now. Take that off
 * (other conns' completions wait in the backlog) and forget the conn. */
void be__verbs_cq_drop_qp(struct verbs_cq *cq, const struct verbs_conn *vc)
{
	verbs_cq_drain(cq);
	verbs_bl_forget(cq, vc);
	be__verbs_map_del(&cq->qps, vc->qp_num);
}

/* --------------------------------------------------------------- CQs */

int be__verbs_cq_create(struct be_xdev *d, uint32_t depth, struct be_xcq **out)
{
	struct verbs_dev *dev = to_vdev(d);
	struct verbs_cq *cq;
	int ret;

	if (!depth || !out)
		return -EINVAL;
	if (depth > be__verbs_cq_max(dev))
		depth = be__verbs_cq_max(dev);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	/* Room for the completions of window invalidates (data.c), beyond
	 * what the caller counts on. */
	if (dev->has_mw) {
		cq->mw_room = (uint32_t)dev->attr.max_cqe - be__verbs_cq_max(dev);
		depth += cq->mw_room;
	}
	cq->base.dev = d;
	be__list_init(&cq->srqs);
	be__list_init(&cq->holding);
	cq->ch = ibv_create_comp_channel(dev->ctx);
	if (!cq->ch) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_comp_channel(%s): %s", dev->name, strerror(-ret));
		goto err_free;
	}
	ret = be__verbs_set_nonblock(cq->ch->fd);
	if (ret)
		goto err_ch;
	cq->cq = ibv_create_cq(dev->ctx, (int)depth, cq, cq->ch, 0);
	if (!cq->cq) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_cq(%s, %u): %s", dev->name, depth, strerror(-ret));
		goto err_ch;
	}
	cq->qp_pd = dev->pd;
	if (dev->has_td) {
		struct ibv_td_init_attr ta = { 0 };

		cq->td = ibv_alloc_td(dev->ctx, &ta);
		if (cq->td) {
			struct ibv_parent_domain_init_attr pa = { .pd = dev->pd, .td = cq->td };
			struct ibv_pd *ppd = ibv_alloc_parent_domain(dev->ctx, &pa);

			if (ppd) {
				cq->qp_pd = ppd;
			} else {
				be_log_info("verbs: %s: no parent domain (%s), using the plain PD",
					    dev->name, strerror(errno));
				ibv_dealloc_td(cq->td);
				cq->td = NULL;
			}
		}
	}
	/* The set is only handed out, never read here: no tags. */
	ret = be__wake_init(&cq->wake, 0, NULL, NULL);
	if (ret)
		goto err_cq;
	ret = be__wake_watch(&cq->wake, cq->ch->fd, EPOLLIN, NULL);
	if (ret)
		goto err_wake;
	*out = &cq->base;
	return 0;

err_wake:
	be__wake_close(&cq->wake);
err_cq:
	if (cq->td) {
		ibv_dealloc_pd(cq->qp_pd);
		ibv_dealloc_td(cq->td);
	}
	ibv_destroy_cq(cq->cq);
err_ch:
	ibv_destroy_comp_channel(cq->ch);
err_free:
	free(cq);
	return ret;
}

/* Destroy the QP of every conn on @cq (only those using @srq, if set): a
 * caller destroys a parent before its children. */
static void verbs_cq_detach_conns(struct verbs_cq *cq, struct verbs_srq *srq)
{
	struct verbs_conn **list;
	uint64_t k, v;
	size_t pos = 0, n = 0, i;

	list = calloc(cq->qps.count ? cq->qps.count : 1, sizeof(*list));
	if (!list)
		return;
	while (be__verbs_map_next(&cq->qps, &pos, &k, &v)) {
		struct verbs_conn *vc = (struct verbs_conn *)(uintptr_t)v;

		if (!srq || vc->srq == srq)
			list[n++] = vc;
	}
	for (i = 0; i < n; i++)
		be__verbs_conn_detach(list[i]);
	free(list);
}

void be__verbs_cq_destroy(struct be_xcq *c)
{
	struct verbs_cq *cq = to_vcq(c);
	struct verbs_dev *dev = to_vdev(c->dev);
	int ret;

	if (cq->qps.count) {
		be_log_err("verbs: destroying a CQ of %s with %zu connection(s) still on it; "
			   "their QPs go first", dev->name, cq->qps.count);
		verbs_cq_detach_conns(cq, NULL);
	}
	while (!be__list_empty(&cq->srqs)) {
		struct verbs_srq *srq = be__list_entry(cq->srqs.next, struct verbs_srq, cq_link);

		be_log_err("verbs: destroying a CQ of %s before its SRQ", dev->name);
		be__list_del_init(&srq->cq_link);
		srq->base.cq = NULL;
	}
	if (cq->unacked)
		ibv_ack_cq_events(cq->cq, cq->unacked);
	ret = ibv_destroy_cq(cq->cq);
	if (ret)
		be_log_err("verbs: ibv_destroy_cq(%s): %s", dev->name, strerror(ret));
	if (cq->td) {
		ibv_dealloc_pd(cq->qp_pd);
		ibv_dealloc_td(cq->td);
	}
	ibv_destroy_comp_channel(cq->ch);
	be__wake_close(&cq->wake);
	be__verbs_map_free(&cq->qps);
	free(cq->backlog);
	free(cq);
}

/*
 * Conns of @cq hold sends until their RTU (cm.c), which arrives on their
 * evch: a worker that polls only its cq for a while must not keep them
 * waiting, so read those evchs here (the evch and the cq have one owner).
 */
static void verbs_cq_pump_holders(struct verbs_cq *cq)
{
	struct verbs_evch *chs[4];
	struct be__list *e;
	int n = 0, i;

	for (e = cq->holding.next; e != &cq->holding && n < 4; e = e->next) {
		struct verbs_conn *vc = be__list_entry(e, struct verbs_conn, hold_link);
		struct verbs_evch *ch = to_vevch(vc->base.evch);

		for (i = 0; i < n && chs[i] != ch; i++)
			;
		if (i == n)
			chs[n++] = ch;
	}
	for (i = 0; i < n; i++)
		be__verbs_evch_pump(chs[i]);
}

int be__verbs_cq_poll(struct be_xcq *c, struct be_xwc *wc, int n)
{
	struct verbs_cq *cq = to_vcq(c);
	struct ibv_wc iwc[VERBS_POLL_BATCH];
	int got = 0, k, i, want;

	if (n < 0 || (n && !wc))
		return -EINVAL;
	if (BE_UNLIKELY(!be__list_empty(&cq->holding)))
		verbs_cq_pump_holders(cq);
	if (cq->bl_head != cq->bl_len) {
		while (got < n && cq->bl_head < cq->bl_len)
			wc[got++] = cq->backlog[cq->bl_head++];
		if (cq->bl_head == cq->bl_len) {
			cq->bl_head = cq->bl_len = 0;
			be__wake_drain(cq->wake.efd);
		}
	}
	while (got < n) {
		want = BE_MIN(n - got, VERBS_POLL_BATCH);
		k = ibv_poll_cq(cq->cq, want, iwc);
		if (k < 0) {
			be_log_err("verbs: ibv_poll_cq: %d", k);
			return got ? got : -EIO;
		}
		for (i = 0; i < k; i++)
			got += verbs_wc_map(cq, &iwc[i], &wc[got]);
		if (k < want)
			break;
	}
	return got;
}

int be__verbs_cq_fd(struct be_xcq *c)
{
	return to_vcq(c)->wake.epfd;
}

/*
 * A CQ event fires only for completions added after arming, but the
 * contract wakes an armed cq at once when completions are already there:
 * take them into the backlog, whose eventfd is readable while non-empty.
 */
int be__verbs_cq_arm(struct be_xcq *c)
{
	struct verbs_cq *cq = to_vcq(c);
	int ret = ibv_req_notify_cq(cq->cq, 0);

	if (ret)
		return -ret;
	verbs_cq_drain(cq);
	return 0;
}

int be__verbs_cq_ack(struct be_xcq *c)
{
	struct verbs_cq *cq = to_vcq(c);
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (ibv_get_cq_event(cq->ch, &ev_cq, &ev_ctx) == 0) {
		/* ibv_ack_cq_events() takes a lock: ack in batches. */
		if (++cq->unacked >= VERBS_CQ_ACK_BATCH) {
			ibv_ack_cq_events(cq->cq, cq->unacked);
			cq->unacked = 0;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	return 0;
}

/* ---------------------------------------------------- receive queues */

int be__verbs_srq_create(struct be_xcq *c, uint32_t depth, struct be_xsrq **out)
{
	struct verbs_cq *cq = to_vcq(c);
	struct verbs_dev *dev = to_vdev(c->dev);
	struct ibv_srq_init_attr ia;
	struct verbs_srq *srq;
	int ret;

	if (!depth || !out)
		return -EINVAL;
	if (depth > (uint32_t)dev->attr.max_srq_wr)
		return -EINVAL;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = srq;
	ia.attr.max_wr = depth;
	ia.attr.max_sge = 1;
	srq->srq = ibv_create_srq(cq->qp_pd, &ia);
	if (!srq->srq) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_srq(%s, %u): %s", dev->name, depth, strerror(-ret));
		free(srq);
		return ret;
	}
	srq->base.dev = c->dev;
	srq->base.cq = c;
	srq->depth = depth;
	be__list_add_head(&cq->srqs, &srq->cq_link);
	*out = &srq->base;
	return 0;
}

void be__verbs_srq_destroy(struct be_xsrq *s)
{
	struct verbs_srq *srq = to_vsrq(s);
	struct verbs_cq *cq = s->cq ? to_vcq(s->cq) : NULL;
	struct verbs_dev *dev = to_vdev(s->dev);
	uint64_t wr_id, cnt;
	size_t pos = 0;
	int ret;

	if (cq && cq->qps.count)
		verbs_cq_detach_conns(cq, srq);
	ret = ibv_destroy_srq(srq->srq);
	if (ret) {
		be_log_err("verbs: ibv_destroy_srq(%s): %s; leaked", dev->name, strerror(ret));
		return;
	}
	/* Hand every posted receive back as a flush, as the contract says
	 * (verbs drops them silently). */
	while (cq && be__verbs_map_next(&srq->posted, &pos, &wr_id, &cnt)) {
		struct be_xwc wc = {
			.wr_id = wr_id,
			.status = BE_XWC_WR_FLUSH_ERR,
			.opcode = BE_XWC_RECV,
		};

		while (cnt--)
			be__verbs_bl_push(cq, &wc);
	}
	be__list_del_init(&srq->cq_link);
	be__verbs_map_free(&srq->posted);
	be__verbs_dev_purge_srq(dev, s);
	free(srq);
}

int be__verbs_srq_post_recv(struct be_xsrq *s, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad)
{
	struct verbs_srq *srq = to_vsrq(s);
	struct verbs_dev *dev = to_vdev(s->dev);
	struct ibv_recv_wr iw[VERBS_POST_BATCH], *ibad;
	struct be_xrecv_wr *w = wr, *batch[VERBS_POST_BATCH];
	uint64_t cnt;
	int n, i, ret, err = 0, posted;

	while (w) {
		err = 0;
		for (n = 0; w && n < VERBS_POST_BATCH; n++, w = w->next) {
			if (srq->nposted >= srq->depth) {
				err = -ENOMEM;
				break;
			}
			if (!be__verbs_lkey_ok(dev, &w->sge)) {
				err = -EINVAL;
				break;
			}
			/* Record first: the receive may complete right after. */
			cnt = 0;
			be__verbs_map_get(&srq->posted, w->wr_id, &cnt);
			err = be__verbs_map_put(&srq->posted, w->wr_id, cnt + 1);
			if (err)
				break;
			srq->nposted++;
			batch[n] = w;
			iw[n].wr_id = w->wr_id;
			iw[n].sg_list = (struct ibv_sge *)(uintptr_t)&w->sge;
			iw[n].num_sge = 1;
			iw[n].next = &iw[n + 1];
		}
		if (n) {
			iw[n - 1].next = NULL;
			ret = ibv_post_srq_recv(srq->srq, iw, &ibad);
			if (ret) {
				/* It comes before the WR refused here, if any. */
				posted = (int)(ibad - iw);
				for (i = posted; i < n; i++)
					verbs_srq_unrecord(srq, batch[i]->wr_id);
				w = batch[posted];
				err = -ret;
			}
		}
		if (err)
			break;
	}
	if (err && bad)
		*bad = w;
	return err;
}

int be__verbs_srq_arm_limit(struct be_xsrq *s, uint32_t limit)
{
	struct ibv_srq_attr a = { .srq_limit = limit };

	return -ibv_modify_srq(to_vsrq(s)->srq, &a, IBV_SRQ_LIMIT);
}
