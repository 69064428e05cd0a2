/*
 * cq.h - the part of a completion queue the shm, tcp and fake transports
 * share (internal), and the queue of completions a transport makes itself.
 *
 * Model. Each of those transports' cqs (shm_cq, tcp_cq, fake_cq) embeds a
 * struct be__xcq as its first member and adds its own fields, as their
 * evchs embed a struct be__xch (evch.h). The shared part is the handle
 * the ops hand out (x) and the fds the owner sleeps on (wake, wake.h:
 * wake.epfd is the cq_fd; each transport adds its own fds to the set and
 * decides when to kick wake.efd).
 *
 * A struct be__xrq is the ring of posted receives of an SRQ kept in
 * memory (shm's, tcp's): up to its depth of them, taken oldest first, and
 * the low-water mark srq_arm_limit armed, which fires once.
 *
 * A struct be__wcq is a FIFO of completions made here rather than read
 * from hardware or from a peer's ring: tcp's every completion, shm's
 * flushed receives. It grows (by doubling) when it is full, so a push
 * fails only for want of memory; its capacity is a power of two and its
 * indices run free, so a push and a pop cost a mask, not a division.
 *
 * Ownership: be__xcq_new() allocates the transport's whole object;
 * be__xcq_free() closes its wake fds and frees it. A be__xrq and a be__wcq
 * are embedded in their owner and hold copies of the receives posted and
 * the completions pushed; be__xrq_fini() and be__wcq_fini() free them.
 *
 * Threads: none of their own; the cq's owner serialises every call.
 */
#ifndef BE_XPORT_CQ_H
#define BE_XPORT_CQ_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport/wake.h"
#include "xport/xport.h"

struct be__xcq {
	struct be_xcq x;        /* the handle ops hand out */
	struct be__wake wake;   /* cq_fd = wake.epfd */
};

/*
 * be__xcq_new() - allocate a zeroed object of @size bytes (the transport's
 * cq, which starts with a struct be__xcq) for @dev, its wake made with
 * be__wake_init(0, @efd_tag, NULL). Returns 0 and its handle in *@out, or
 * -EINVAL (@dev or @out NULL), -ENOMEM, or the error of be__wake_init()
 * (nothing allocated, *@out untouched).
 */
int be__xcq_new(size_t size, struct be_xdev *dev, void *efd_tag, struct be_xcq **out);

/* be__xcq_free() - close @cq's wake fds and free the object be__xcq_new()
 * made (NULL: nothing). */
void be__xcq_free(struct be__xcq *cq);

/* be__xcq_fd() - the cq_fd of @x (a cq that starts with a struct
 * be__xcq), or -EINVAL for NULL. */
int be__xcq_fd(struct be_xcq *x);

struct be__xrq {
	struct be_xrecv_wr *ring; /* a copy of each posted receive, next NULL */
	uint32_t cap;             /* a power of two >= depth */
	uint32_t depth;
	uint32_t head, tail;      /* free-running: tail - head are posted */
	uint32_t limit;           /* armed low-water mark, 0 = off */
};

/* be__xrq_init() - an empty ring for up to @depth (> 0) receives.
 * Returns 0 or -ENOMEM. */
int be__xrq_init(struct be__xrq *q, uint32_t depth);

/* be__xrq_fini() - free @q's ring (the receives still in it are the
 * caller's to flush first, with be__xrq_take()). */
void be__xrq_fini(struct be__xrq *q);

static inline uint32_t be__xrq_len(const struct be__xrq *q)
{
	return q->tail - q->head;
}

/* be__xrq_post() - append a copy of @wr. Returns 0, or -ENOMEM when @q
 * holds depth receives already. */
static inline int be__xrq_post(struct be__xrq *q, const struct be_xrecv_wr *wr)
{
	struct be_xrecv_wr *r;

	if (q->tail - q->head >= q->depth)
		return -ENOMEM;
	r = &q->ring[q->tail++ & (q->cap - 1)];
	*r = *wr;
	r->next = NULL;
	return 0;
}

/* be__xrq_take() - the oldest posted receive, no longer in @q; NULL when
 * there is none. The pointer is good until the next be__xrq_post(). */
static inline struct be_xrecv_wr *be__xrq_take(struct be__xrq *q)
{
	if (q->head == q->tail)
		return NULL;
	return &q->ring[q->head++ & (q->cap - 1)];
}

/* be__xrq_arm() - srq_arm_limit: fire when fewer than @limit receives are
 * left (0: never). Returns 0, or -EINVAL when @limit is over the depth. */
int be__xrq_arm(struct be__xrq *q, uint32_t limit);

/* be__xrq_limit_hit() - true, once, when @q holds fewer receives than its
 * armed limit: the caller then reports BE_XEV_SRQ_LIMIT (the mark is off
 * until armed again, like IBV_EVENT_SRQ_LIMIT_REACHED). */
static inline bool be__xrq_limit_hit(struct be__xrq *q)
{
	if (!q->limit || q->tail - q->head >= q->limit)
		return false;
	q->limit = 0;
	return true;
}

struct be__wcq {
	struct be_xwc *ring;
	uint32_t cap;           /* a power of two; 0 until the first push */
	uint32_t head, tail;    /* free-running: tail - head are queued */
};

/* be__wcq_init() - an empty queue with room for @cap completions (rounded
 * up to a power of two; 0: none until the first push). Returns 0 or
 * -ENOMEM. A zeroed struct is an empty queue too. */
int be__wcq_init(struct be__wcq *q, uint32_t cap);

/* be__wcq_fini() - free what @q holds; it is empty (and unallocated)
 * afterwards. */
void be__wcq_fini(struct be__wcq *q);

/* Double @q's room (64 when it has none). Returns 0 or -ENOMEM (@q as
 * it was). For be__wcq_push(). */
int be__wcq_grow(struct be__wcq *q);

static inline uint32_t be__wcq_len(const struct be__wcq *q)
{
	return q->tail - q->head;
}

/* be__wcq_push() - queue a copy of @wc. Returns 0, or -ENOMEM when @q was
 * full and could not grow (nothing queued). */
static inline int be__wcq_push(struct be__wcq *q, const struct be_xwc *wc)
{
	if (q->tail - q->head == q->cap && be__wcq_grow(q))
		return -ENOMEM;
	q->ring[q->tail++ & (q->cap - 1)] = *wc;
	return 0;
}

/* be__wcq_pop() - move up to @n of the oldest completions into @wc.
 * Returns how many. */
static inline int be__wcq_pop(struct be__wcq *q, struct be_xwc *wc, int n)
{
	int i = 0;

	while (i < n && q->head != q->tail)
		wc[i++] = q->ring[q->head++ & (q->cap - 1)];
	return i;
}

/*
 * be__wcq_forget() - @conn is being destroyed: drop the completions of
 * its sends, keep those of its receives (their buffers are the owner's)
 * without it (conn NULL). The order of what stays is kept.
 */
void be__wcq_forget(struct be__wcq *q, const struct be_xconn *conn);

#endif /* BE_XPORT_CQ_H */
