/*
 * data.c - the verbs data path: QPs, posting send WRs, and the sends an
 * acceptor holds until the RTU.
 *
 * QPs are ours, made with ibv_create_qp() on the worker's protection
 * domain (its thread domain's, when there is one: cq.c) and moved through
 * their states with rdma_cm's attributes (cm.c). Each conn keeps a ring of
 * its posted send WRs (wr_id, opcode, signaled), from which cq.c names the
 * sender-side opcode of a completion, which verbs does not report.
 *
 * Held sends. Between accept() and the RTU the connector's QP may not be
 * ready yet, so an acceptor's conn keeps copies of what is posted and
 * posts them at the RTU (cm.c, be__verbs_accept()); meanwhile cq_poll()
 * and post_send() also read the evch, where the RTU arrives.
 *
 * Grants (verbs.h). On a device with type-2B memory windows (unless
 * BE_VERBS_MW=0), grant binds a window of the conn to exactly [addr,
 * addr+len) of the block's MR (remote write only) with an IBV_WR_BIND_MW
 * on the conn's QP, under a key whose low 8 bits are random, and revoke
 * posts an IBV_WR_LOCAL_INV of it.
 * - The key reaches the peer in a SEND posted on the same QP after the
 *   bind (the Engine's WRITE_RESP). We rely on the ordering rule that
 *   ibv_bind_mw(3) states: "a send after a bind request on the same QP
 *   are always ordered", i.e. the peer cannot see the key before the
 *   bind took effect. So the bind is unsignaled (no completion to wait
 *   for); one that fails completes with an error and fails the conn.
 * - revoke returns 1: the grant ends when its LOCAL_INV completes, which
 *   is reported as a BE_XWC_REVOKE completion (cq.c) carrying the
 *   caller's cookie. Until then the LOCAL_INV may wait behind the WRs
 *   posted before it, and the peer can still write the range; the caller
 *   keeps the memory until that completion (large.c).
 * - A window is bound again only once its invalidate completed. A window
 *   is bound to this QP (type 2B): its key is worth nothing on any other
 *   conn, and nothing reaches it once the QP is in error or destroyed.
 * - Room: a conn has at most VERBS_MW_MAX windows, and its QP room for a
 *   bind and an invalidate of each beside the user's depth; every live
 *   window holds a CQE of its send CQ's mw_room for its invalidate's
 *   completion, so those never overrun the CQ. When either runs out, or
 *   the device allocates no more windows, grant fails with -ENOMEM and
 *   counts it (dev->mw_short): the Engine answers "no memory" and the
 *   peer asks again after a backoff. There is no fallback to the block's
 *   rkey: with windows the blocks are registered without remote access,
 *   so that a block's rkey, guessed or leaked, reaches nothing.
 * Without windows, grant hands out the rkey of the block's MR and revoke
 * returns 0 (nothing to end).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/log.h"
#include "xport/verbs/verbs.h"

static void verbs_held_free(struct verbs_conn *vc);

/* --------------------------------------------------------------- QPs */

int be__verbs_qp_create(struct verbs_conn *vc, const struct be_xconn_attr *attr)
{
	struct verbs_dev *dev = to_vdev(vc->base.dev);
	struct verbs_cq *scq, *rcq;
	struct verbs_srq *srq;
	struct ibv_qp_init_attr ia;
	uint32_t depth, slots;
	int ret;

	if (!attr || !attr->send_cq)
		return -EINVAL;
	scq = to_vcq(attr->send_cq);
	rcq = attr->recv_cq ? to_vcq(attr->recv_cq) : scq;
	srq = attr->srq ? to_vsrq(attr->srq) : NULL;
	if (srq && srq->base.cq != &rcq->base)
		return -EINVAL;
	if (scq->base.dev != vc->base.dev || rcq->base.dev != vc->base.dev)
		return -EINVAL;
	depth = attr->max_send_wr ? attr->max_send_wr : 128;
	depth = BE_MIN(depth, (uint32_t)dev->attr.max_qp_wr);

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = vc;
	ia.send_cq = scq->cq;
	ia.recv_cq = rcq->cq;
	ia.srq = srq ? srq->srq : NULL;
	ia.qp_type = IBV_QPT_RC;
	/* Room for a bind and an invalidate of every window beside. */
	ia.cap.max_send_wr = dev->has_mw ?
		BE_MIN(depth + 2 * VERBS_MW_MAX, (uint32_t)dev->attr.max_qp_wr) : depth;
	ia.cap.max_recv_wr = srq ? 0 : 1;
	ia.cap.max_send_sge = dev->max_sge;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = BE_MIN(attr->max_inline, dev->max_inline);
	/* The worker's thread domain, if it has one (its SRQ's, which is the
	 * recv CQ's, so QP and SRQ share a domain). */
	vc->qp = ibv_create_qp(rcq->qp_pd, &ia);
	if (!vc->qp) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_qp on %s (depth %u, inline %u): %s", dev->name,
			   depth, ia.cap.max_inline_data, strerror(-ret));
		return ret;
	}
	ret = be__verbs_qp_to(vc, IBV_QPS_INIT);
	if (ret) {
		be_log_err("verbs: QP to INIT on %s: %s", dev->name, strerror(-ret));
		goto err_qp;
	}
	vc->qp_num = vc->qp->qp_num;
	vc->max_inline = ia.cap.max_inline_data;
	vc->max_sge = BE_MIN(ia.cap.max_send_sge, dev->max_sge);
	vc->max_send_wr = BE_MIN(depth, ia.cap.max_send_wr);
	vc->mws = NULL;
	vc->nmws = 0;
	vc->mw_free = UINT32_MAX;
	vc->sq_mw = 0;
	memset(&vc->mw_keys, 0, sizeof(vc->mw_keys));
	vc->nrnd = 0;
	vc->held = NULL;
	vc->held_tail = &vc->held;
	be__list_init(&vc->hold_link);
	for (slots = 1; slots < ia.cap.max_send_wr; slots <<= 1)
		;
	vc->sq = calloc(slots, sizeof(*vc->sq));
	if (!vc->sq) {
		ret = -ENOMEM;
		goto err_qp;
	}
	vc->sq_mask = slots - 1;
	vc->sq_head = vc->sq_tail = 0;
	/* The SRQ's SRQ_LIMIT events go to our channel if it has none, from
	 * a node reserved there now, while we can still fail (dev.c). */
	if (srq && !srq->evch && vc->base.evch) {
		ret = be__verbs_srq_bind(srq, to_vevch(vc->base.evch));
		if (ret)
			goto err_sq;
	}
	ret = be__verbs_map_put(&scq->qps, vc->qp_num, (uintptr_t)vc);
	if (ret)
		goto err_sq;
	if (rcq != scq) {
		ret = be__verbs_map_put(&rcq->qps, vc->qp_num, (uintptr_t)vc);
		if (ret)
			goto err_map;
	}
	vc->send_cq = scq;
	vc->recv_cq = rcq;
	vc->srq = srq;
	return 0;

err_map:
	be__verbs_map_del(&scq->qps, vc->qp_num);
err_sq:
	free(vc->sq);
	vc->sq = NULL;
err_qp:
	ibv_destroy_qp(vc->qp);
	vc->qp = NULL;
	return ret;
}

void be__verbs_qp_destroy(struct verbs_conn *vc)
{
	struct verbs_cq *cq[2] = { vc->send_cq, vc->recv_cq };
	int i, n = vc->recv_cq == vc->send_cq ? 1 : 2;
	uint32_t k;

	if (!vc->qp)
		return;
	verbs_held_free(vc);
	/* The windows first: a bound one holds its QP (Soft-RoCE takes a
	 * reference, and destroying the QP under it did not return in the
	 * guest). Deallocating unbinds it: its key reaches nothing from now
	 * on. The CQEs kept for invalidates that will not come are free. */
	for (k = 0; k < vc->nmws; k++) {
		if (vc->mws[k].state == VERBS_MW_BOUND ||
		    vc->mws[k].state == VERBS_MW_INVALIDATING)
			vc->send_cq->mw_room++;
		if (ibv_dealloc_mw(vc->mws[k].mw))
			be_log_err("verbs: ibv_dealloc_mw: %s", strerror(errno));
	}
	if (ibv_destroy_qp(vc->qp))
		be_log_err("verbs: ibv_destroy_qp(%u): %s", vc->qp_num, strerror(errno));
	vc->qp = NULL;
	free(vc->mws);
	vc->mws = NULL;
	vc->nmws = 0;
	vc->mw_free = UINT32_MAX;
	be__verbs_map_free(&vc->mw_keys);
	/* The QP is gone: whatever it completed is on the CQs now. */
	for (i = 0; i < n; i++)
		be__verbs_cq_drop_qp(cq[i], vc);
	free(vc->sq);
	vc->sq = NULL;
	vc->send_cq = vc->recv_cq = NULL;
	vc->srq = NULL;
}

/* ------------------------------------------------------- data path */

static void verbs_sq_push(struct verbs_conn *vc, const struct be_xsend_wr *w)
{
	struct verbs_swr *s = &vc->sq[vc->sq_tail++ & vc->sq_mask];

	s->wr_id = w->wr_id;
	s->opcode = (uint8_t)(w->opcode == BE_XWR_SEND    ? BE_XWC_SEND :
			      w->opcode == BE_XWR_WRITE ? BE_XWC_WRITE :
							  BE_XWC_WRITE_IMM);
	s->signaled = !!(w->flags & BE_XWR_F_SIGNALED);
	s->mw = 0;
}

/* The checks ibv_post_send() would not make for us (or would make only
 * after posting the WRs before): 0 or -EINVAL. */
static int verbs_wr_check(const struct verbs_conn *vc, const struct be_xsend_wr *w)
{
	if (w->num_sge < 0 || (uint32_t)w->num_sge > vc->max_sge || (w->num_sge && !w->sg_list))
		return -EINVAL;
	if (w->opcode != BE_XWR_SEND && w->opcode != BE_XWR_WRITE && w->opcode != BE_XWR_WRITE_IMM)
		return -EINVAL;
	if (w->flags & BE_XWR_F_INLINE) {
		uint64_t len = 0;
		int k;

		for (k = 0; k < w->num_sge; k++)
			len += w->sg_list[k].length;
		if (len > vc->max_inline)
			return -EINVAL;
	}
	return 0;
}

/* Post the chain @wr to @vc's QP, whatever its state (in error it
 * flushes). *bad: the first WR not posted. */
static int verbs_post_now(struct verbs_conn *vc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct ibv_send_wr iw[VERBS_POST_BATCH], *ibad;
	struct be_xsend_wr *w = wr, *batch[VERBS_POST_BATCH];
	int n, i, ret, err, posted;
	uint32_t free_slots, used;

	while (w) {
		err = 0;
		/* The user's depth; the QP's room beyond it is the windows'. */
		used = vc->sq_tail - vc->sq_head - vc->sq_mw;
		free_slots = used < vc->max_send_wr ? vc->max_send_wr - used : 0;
		for (n = 0; w && n < VERBS_POST_BATCH; n++, w = w->next) {
			struct ibv_send_wr *x = &iw[n];

			if ((uint32_t)n >= free_slots) {
				err = -ENOMEM; /* send queue full, as ibv_post_send says */
				break;
			}
			err = verbs_wr_check(vc, w);
			if (err)
				break;
			memset(x, 0, sizeof(*x));
			x->wr_id = w->wr_id;
			x->sg_list = (struct ibv_sge *)(uintptr_t)w->sg_list;
			x->num_sge = w->num_sge;
			x->next = &iw[n + 1];
			if (w->flags & BE_XWR_F_SIGNALED)
				x->send_flags |= IBV_SEND_SIGNALED;
			if (w->flags & BE_XWR_F_INLINE)
				x->send_flags |= IBV_SEND_INLINE;
			switch (w->opcode) {
			case BE_XWR_SEND:
				x->opcode = IBV_WR_SEND;
				break;
			case BE_XWR_WRITE:
				x->opcode = IBV_WR_RDMA_WRITE;
				break;
			case BE_XWR_WRITE_IMM:
				x->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				x->imm_data = htonl(w->imm);
				break;
			}
			if (w->opcode != BE_XWR_SEND) {
				x->wr.rdma.remote_addr = w->remote_addr;
				x->wr.rdma.rkey = w->rkey;
			}
			batch[n] = w;
		}
		if (n) {
			iw[n - 1].next = NULL;
			ret = ibv_post_send(vc->qp, iw, &ibad);
			posted = ret ? (int)(ibad - iw) : n;
			for (i = 0; i < posted; i++)
				verbs_sq_push(vc, batch[i]);
			if (ret) {
				if (bad)
					*bad = batch[posted];
				return -ret;
			}
		}
		if (err) {
			if (bad)
				*bad = w;
			return err;
		}
	}
	return 0;
}

/*
 * Keep copies of the chain @wr on @vc until be__verbs_release_held(): the
 * acceptor before the RTU (cm.c). Checked as verbs_post_now() would, and
 * at most max_send_wr held (-ENOMEM), so that all of them fit the empty
 * send queue at release. Ownership: copies the WR and its scatter list,
 * and the data of an INLINE WR (its buffer is free on return, as verbs
 * promises); the buffers of the others stay lent until their completion.
 */
static int verbs_hold(struct verbs_conn *vc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct be_xsend_wr *w;
	int err = 0;

	for (w = wr; w; w = w->next) {
		struct verbs_held *h;
		size_t extra = (size_t)(w->num_sge > 0 ? w->num_sge : 0) * sizeof(struct be_xsge);
		uint64_t len = 0;
		int k;

		err = verbs_wr_check(vc, w);
		if (err)
			break;
		if (vc->nheld >= vc->max_send_wr) {
			err = -ENOMEM;
			break;
		}
		if (w->flags & BE_XWR_F_INLINE) {
			for (k = 0; k < w->num_sge; k++)
				len += w->sg_list[k].length;
			extra = sizeof(struct be_xsge) + (size_t)len; /* <= max_inline */
		}
		h = malloc(sizeof(*h) + extra);
		if (!h) {
			err = -ENOMEM;
			break;
		}
		h->next = NULL;
		h->wr = *w;
		h->wr.next = NULL;
		h->wr.sg_list = h->sge;
		if (w->flags & BE_XWR_F_INLINE) {
			uint8_t *p = (uint8_t *)(h->sge + 1);

			for (k = 0; k < w->num_sge; k++) {
				memcpy(p, (const void *)(uintptr_t)w->sg_list[k].addr,
				       w->sg_list[k].length);
				p += w->sg_list[k].length;
			}
			h->sge[0].addr = (uintptr_t)(h->sge + 1);
			h->sge[0].length = (uint32_t)len;
			h->sge[0].lkey = w->num_sge ? w->sg_list[0].lkey : 0;
			h->wr.num_sge = len ? 1 : 0;
		} else if (w->num_sge > 0) {
			memcpy(h->sge, w->sg_list, (size_t)w->num_sge * sizeof(*h->sge));
		}
		*vc->held_tail = h;
		vc->held_tail = &h->next;
		if (!vc->nheld++)
			be__list_add_head(&vc->send_cq->holding, &vc->hold_link);
	}
	if (err && bad)
		*bad = w;
	return err;
}

/* Forget @vc's held WRs without completing them (its QP is being
 * destroyed: no completion names it again). */
static void verbs_held_free(struct verbs_conn *vc)
{
	struct verbs_held *h;

	while ((h = vc->held)) {
		vc->held = h->next;
		free(h);
	}
	vc->held_tail = &vc->held;
	if (vc->nheld) {
		be__list_del_init(&vc->hold_link);
		vc->nheld = 0;
	}
	vc->hold = 0;
}

void be__verbs_release_held(struct verbs_conn *vc)
{
	struct be_xsend_wr *first = NULL, **tail = &first, *bad = NULL, *w;
	struct verbs_held *h;
	int ret;

	if (!vc->hold)
		return;
	vc->hold = 0;
	if (!vc->nheld || !vc->qp) {
		verbs_held_free(vc);
		return;
	}
	for (h = vc->held; h; h = h->next) {
		*tail = &h->wr;
		tail = &h->wr.next;
	}
	ret = verbs_post_now(vc, first, &bad);
	if (ret) {
		/* Cannot happen (checked, and the queue was empty); if it
		 * does, the WRs not posted still complete, as flushed. */
		be__verbs_conn_failed(vc, ret, "posting the sends held until the RTU");
		for (w = bad; w; w = w->next) {
			struct be_xwc wc;

			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w->wr_id;
			wc.status = BE_XWC_WR_FLUSH_ERR;
			wc.opcode = w->opcode == BE_XWR_SEND    ? BE_XWC_SEND :
				    w->opcode == BE_XWR_WRITE ? BE_XWC_WRITE :
								BE_XWC_WRITE_IMM;
			wc.conn = &vc->base;
			be__verbs_bl_push(vc->send_cq, &wc);
		}
	}
	verbs_held_free(vc);
}

int be__verbs_post_send(struct be_xconn *c, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct verbs_conn *vc = to_vconn(c);

	/* A conn in error still takes WRs: the QP (in the error state)
	 * flushes them in order, as the contract asks. */
	if (!vc->qp || !vc->was_established) {
		if (bad)
			*bad = wr;
		return -ENOTCONN;
	}
	if (BE_UNLIKELY(vc->hold)) {
		/* The acceptor before the RTU. It may be in already. */
		if (vc->base.evch)
			be__verbs_evch_pump(to_vevch(vc->base.evch));
		if (vc->hold)
			return verbs_hold(vc, wr, bad);
	}
	return verbs_post_now(vc, wr, bad);
}

/* ------------------------------------------------------------ grants */

/* Post the window WR @x (of window @idx) on @vc's QP. */
static int verbs_mw_post(struct verbs_conn *vc, struct ibv_send_wr *x, uint64_t idx)
{
	struct ibv_send_wr *ibad;
	struct verbs_swr *s;
	int ret;

	if (vc->sq_tail - vc->sq_head > vc->sq_mask)
		return -ENOMEM;
	x->wr_id = VERBS_MW_WRID | idx;
	x->next = NULL;
	ret = ibv_post_send(vc->qp, x, &ibad);
	if (ret)
		return -ret;
	s = &vc->sq[vc->sq_tail++ & vc->sq_mask];
	s->wr_id = x->wr_id;
	s->opcode = BE_XWC_SEND;
	s->signaled = !!(x->send_flags & IBV_SEND_SIGNALED);
	s->mw = 1;
	vc->sq_mw++;
	return 0;
}

/* A free window of @vc into *idx: one invalidated, else a new one. */
static int verbs_mw_get(struct verbs_conn *vc, uint32_t *idx)
{
	struct verbs_dev *dev = to_vdev(vc->base.dev);
	struct ibv_mw *mw;

	if (vc->mw_free != UINT32_MAX) {
		*idx = vc->mw_free;
		vc->mw_free = vc->mws[*idx].next_free;
		return 0;
	}
	if (vc->nmws >= VERBS_MW_MAX)
		return -ENOMEM;
	if (!vc->mws) {
		vc->mws = calloc(VERBS_MW_MAX, sizeof(*vc->mws));
		if (!vc->mws)
			return -ENOMEM;
	}
	mw = ibv_alloc_mw(dev->pd, IBV_MW_TYPE_2);
	if (!mw)
		return -ENOMEM; /* the device's windows are all taken */
	*idx = vc->nmws++;
	vc->mws[*idx].mw = mw;
	vc->mws[*idx].state = VERBS_MW_FREE;
	return 0;
}

static void verbs_mw_put(struct verbs_conn *vc, uint32_t idx)
{
	vc->mws[idx].state = VERBS_MW_FREE;
	vc->mws[idx].next_free = vc->mw_free;
	vc->mw_free = idx;
}

/* The next key of a window whose rkey is @old: its index part (high 24
 * bits) stays, the low 8 bits are random and differ from @old's. */
static int verbs_mw_key(struct verbs_conn *vc, uint32_t old, uint32_t *key)
{
	uint8_t b;

	do {
		if (!vc->nrnd) {
			ssize_t n = getrandom(vc->rnd, sizeof(vc->rnd), 0);

			if (n != (ssize_t)sizeof(vc->rnd))
				return n < 0 ? -errno : -EIO;
			vc->nrnd = sizeof(vc->rnd);
		}
		b = vc->rnd[--vc->nrnd];
	} while (b == (old & 0xff));
	*key = (old & ~0xffu) | b;
	return 0;
}

/* No window for a grant: -ENOMEM, counted (the Engine answers "no
 * memory" and the peer asks again). */
static int verbs_mw_short(struct verbs_conn *vc, const char *why)
{
	struct verbs_dev *dev = to_vdev(vc->base.dev);

	if (!__atomic_fetch_add(&dev->mw_short, 1, __ATOMIC_RELAXED))
		be_log_warn("verbs: %s: no memory window for a grant (%s); the peer waits "
			    "(logged once per device)", dev->name, why);
	return -ENOMEM;
}

int be__verbs_grant(struct be_xconn *c, void *addr, size_t len, uint32_t *rkey)
{
	struct verbs_conn *vc;
	struct verbs_dev *dev;
	struct ibv_send_wr wr;
	struct ibv_mr *mr;
	struct verbs_mw *m;
	uint32_t idx, key = 0;
	int ret;

	if (!c || !addr || !len || !rkey)
		return -EINVAL;
	vc = to_vconn(c);
	dev = to_vdev(c->dev);
	mr = be__verbs_mr_find(dev, addr, len);
	if (!mr)
		return -EINVAL;
	if (!dev->has_mw) {
		*rkey = mr->rkey; /* the whole block: docs/SECURITY.md */
		return 0;
	}
	if (!vc->qp || !vc->was_established)
		return -ENOTCONN;
	/* An acceptor before the RTU holds its sends (cm.c), but its QP is
	 * in RTS: the bind, a local operation, is posted at once, so it
	 * still precedes every SEND posted after it. */
	if (!vc->send_cq->mw_room)
		return verbs_mw_short(vc, "completion queue room");
	ret = verbs_mw_get(vc, &idx);
	if (ret)
		return verbs_mw_short(vc, vc->nmws >= VERBS_MW_MAX ? "windows per connection" :
								   "the device's windows");
	m = &vc->mws[idx];
	ret = verbs_mw_key(vc, m->mw->rkey, &key);
	if (ret)
		goto err;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = m->mw;
	wr.bind_mw.rkey = key;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ret = be__verbs_map_put(&vc->mw_keys, key, idx);
	if (ret)
		goto err;
	ret = verbs_mw_post(vc, &wr, idx);
	if (ret) {
		be__verbs_map_del(&vc->mw_keys, key);
		goto err;
	}
	m->mw->rkey = key; /* the provider names the window by it from now on */
	m->state = VERBS_MW_BOUND;
	vc->send_cq->mw_room--;
	*rkey = key;
	return 0;

err:
	verbs_mw_put(vc, idx);
	return ret;
}

int be__verbs_revoke(struct be_xconn *c, uint32_t rkey, uint64_t cookie)
{
	struct verbs_conn *vc;
	struct ibv_send_wr wr;
	uint64_t v;
	uint32_t idx;
	int ret;

	if (!c)
		return 0;
	vc = to_vconn(c);
	if (!be__verbs_map_get(&vc->mw_keys, rkey, &v))
		return 0; /* not a live window (a block's rkey: nothing to end) */
	be__verbs_map_del(&vc->mw_keys, rkey);
	idx = (uint32_t)v;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = rkey;
	wr.send_flags = IBV_SEND_SIGNALED;
	ret = verbs_mw_post(vc, &wr, VERBS_MW_INV | idx);
	if (ret) {
		/* Cannot happen (the QP keeps room for it). If it does, the
		 * window stays bound: put the QP in error, which no WRITE
		 * passes, and never bind the window again. */
		be__verbs_conn_failed(vc, -EIO, "posting the invalidate of a grant's window");
		return ret;
	}
	vc->mws[idx].state = VERBS_MW_INVALIDATING;
	vc->mws[idx].cookie = cookie;
	return 1;
}

int be__verbs_mw_done(struct verbs_conn *vc, const struct ibv_wc *iwc, struct be_xwc *wc)
{
	uint32_t idx = (uint32_t)(iwc->wr_id & VERBS_MW_IDX);
	struct verbs_mw *m;

	if (!(iwc->wr_id & VERBS_MW_INV) || idx >= vc->nmws)
		return 0; /* a bind that failed: the conn failed with it (cq.c) */
	m = &vc->mws[idx];
	if (m->state != VERBS_MW_INVALIDATING)
		return 0;
	/* Completed, or flushed with the QP in error (which no WRITE passes
	 * either): the grant is over. Only a window whose invalidate ran may
	 * be bound again. */
	vc->send_cq->mw_room++;
	wc->opcode = BE_XWC_REVOKE;
	wc->wr_id = m->cookie;
	if (iwc->status == IBV_WC_SUCCESS)
		verbs_mw_put(vc, idx);
	else
		m->state = VERBS_MW_DEAD;
	return 1;
}
