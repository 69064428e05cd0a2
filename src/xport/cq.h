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
 * A struct be__wcq is a FIFO of completions made here rather than read
 * from hardware or from a peer's ring: tcp's every completion, shm's
 * flushed receives. It grows (by doubling) when it is full, so a push
 * fails only for want of memory; its capacity is a power of two and its
 * indices run free, so a push and a pop cost a mask, not a division.
 *
 * Ownership: be__xcq_new() allocates the transport's whole object;
 * be__xcq_free() closes its wake fds and frees it. A be__wcq is embedded
 * in its owner and holds copies of the completions pushed;
 * be__wcq_fini() frees them.
 *
 * Threads: none of their own; the cq's owner serialises every call.
 */
#ifndef BE_XPORT_CQ_H
#define BE_XPORT_CQ_H

#include <errno.h>
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
