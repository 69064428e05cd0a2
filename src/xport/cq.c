/*
 * cq.c - the part of a completion queue the shm, tcp and fake transports
 * share, the ring of an SRQ's posted receives and the queue of completions
 * a transport makes itself (cq.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "util/common.h"
#include "xport/cq.h"

int be__xcq_new(size_t size, struct be_xdev *dev, void *efd_tag, struct be_xcq **out)
{
	struct be__xcq *cq;
	int ret;

	if (!dev || !out)
		return -EINVAL;
	cq = calloc(1, size);
	if (!cq)
		return -ENOMEM;
	cq->x.dev = dev;
	ret = be__wake_init(&cq->wake, 0, efd_tag, NULL);
	if (ret) {
		free(cq);
		return ret;
	}
	*out = &cq->x;
	return 0;
}

void be__xcq_free(struct be__xcq *cq)
{
	if (!cq)
		return;
	be__wake_close(&cq->wake);
	free(cq);
}

int be__xcq_fd(struct be_xcq *x)
{
	return x ? container_of(x, struct be__xcq, x)->wake.epfd : -EINVAL;
}

int be__xrq_init(struct be__xrq *q, uint32_t depth)
{
	uint32_t cap = 1;

	while (cap < depth)
		cap <<= 1;
	*q = (struct be__xrq){ .cap = cap, .depth = depth };
	q->ring = calloc(cap, sizeof(*q->ring));
	return q->ring ? 0 : -ENOMEM;
}

void be__xrq_fini(struct be__xrq *q)
{
	free(q->ring);
	q->ring = NULL;
}

int be__xrq_arm(struct be__xrq *q, uint32_t limit)
{
	if (limit > q->depth)
		return -EINVAL;
	q->limit = limit;
	return 0;
}

/* Move @q's completions into a ring of @ncap (a power of two, at least
 * what @q holds), oldest first. */
static int wcq_resize(struct be__wcq *q, uint32_t ncap)
{
	uint32_t i, n = be__wcq_len(q);
	struct be_xwc *r = malloc((size_t)ncap * sizeof(*r));

	if (!r)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		r[i] = q->ring[(q->head + i) & (q->cap - 1)];
	free(q->ring);
	q->ring = r;
	q->cap = ncap;
	q->head = 0;
	q->tail = n;
	return 0;
}

int be__wcq_init(struct be__wcq *q, uint32_t cap)
{
	uint32_t n = 1;

	q->ring = NULL;
	q->cap = q->head = q->tail = 0;
	if (!cap)
		return 0;
	if (cap > UINT32_MAX / 2 + 1)
		return -ENOMEM;
	while (n < cap)
		n <<= 1;
	return wcq_resize(q, n);
}

void be__wcq_fini(struct be__wcq *q)
{
	free(q->ring);
	q->ring = NULL;
	q->cap = q->head = q->tail = 0;
}

int be__wcq_grow(struct be__wcq *q)
{
	if (q->cap > UINT32_MAX / 2)
		return -ENOMEM;
	return wcq_resize(q, q->cap ? q->cap * 2 : 64);
}

void be__wcq_forget(struct be__wcq *q, const struct be_xconn *conn)
{
	uint32_t i, n = q->head;

	for (i = q->head; i != q->tail; i++) {
		struct be_xwc wc = q->ring[i & (q->cap - 1)];

		if (wc.conn == conn) {
			if (wc.opcode != BE_XWC_RECV && wc.opcode != BE_XWC_RECV_IMM)
				continue;
			wc.conn = NULL;
		}
		q->ring[n++ & (q->cap - 1)] = wc;
	}
	q->tail = n;
}
