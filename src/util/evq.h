/*
 * evq.h - a FIFO queue of fixed-size records (internal): the event queue
 * of every transport's event channel.
 *
 * Model. A queue holds copies of records of one size, set at
 * be__evq_init(): be__evq_push() copies a record in at the tail,
 * be__evq_pop() copies the oldest one out. Each record sits in a node of
 * its own on a util/list.h list, so a push allocates once, never moves
 * the records already queued, and records can be dropped from the middle
 * (be__evq_drop_if()) in one pass. The queue does not look inside a
 * record: the caller's @match functions do.
 *
 * Reserve. A push allocates a node, and could find no memory, while the
 * owner cannot lose the record (an event of a connection: its user
 * would wait for it forever). So an owner reserves nodes ahead, when it
 * can still refuse what it is asked (be__evq_reserve(), at a connection's
 * creation, as many as that connection will ever push); an owner's push
 * that finds no memory takes a reserved node, and a node coming off the
 * queue refills the reserve before it is freed. The reserve plus the
 * queued nodes never drop below what was reserved, so as long as no
 * owner pushes more than it reserved, an owner's push cannot fail.
 *
 * Ownership: the queue owns its copies; be__evq_clear() frees them. The
 * records pushed and the buffers popped into are the caller's (borrowed
 * for the call).
 *
 * Threads: none of its own; the owner serialises every call (verbs: under
 * its lock, since other threads queue events).
 */
#ifndef BE_UTIL_EVQ_H
#define BE_UTIL_EVQ_H

#include <stdbool.h>
#include <stddef.h>

#include "util/list.h"

struct be__evq {
	struct be__list nodes;  /* oldest first */
	size_t size;            /* bytes of a record */
	struct be__list spare;  /* reserved nodes not in use */
	size_t nspare, reserved;
};

/* Test hook: the next be__evq_fail_allocs pushes of any queue find no
 * memory (as malloc failing; a reserved node is taken if there is one). */
extern int be__evq_fail_allocs;

/* be__evq_init() - an empty queue of @size-byte records (no allocation). */
void be__evq_init(struct be__evq *q, size_t size);

/*
 * be__evq_push() - copy @rec to the tail; @reserved: a record of an owner
 * that reserved nodes, which takes one when no memory is left. Returns 1
 * when the queue was empty before (the caller may have to signal it), 0
 * when it was not, -ENOMEM when no node could be had (nothing queued).
 */
int be__evq_push(struct be__evq *q, const void *rec, bool reserved);

/*
 * be__evq_reserve() - reserve @n more nodes for pushes that find no
 * memory. Returns 0 or -ENOMEM (nothing reserved).
 * be__evq_unreserve() - give @n of them back (an owner that will push no
 * more).
 */
int be__evq_reserve(struct be__evq *q, size_t n);
void be__evq_unreserve(struct be__evq *q, size_t n);

/*
 * be__evq_pop() - copy the oldest record into @rec and drop it. Returns 1,
 * or 0 when the queue is empty (@rec untouched).
 */
int be__evq_pop(struct be__evq *q, void *rec);

static inline bool be__evq_empty(const struct be__evq *q)
{
	return be__list_empty(&q->nodes);
}

/* be__evq_match_fn - true when @rec (a queued record) is the one sought. */
typedef bool (*be__evq_match_fn)(const void *rec, const void *arg);

/* be__evq_drop_if() - drop every record that @match(rec, @arg) accepts,
 * keeping the order of the others. Returns how many were dropped. */
size_t be__evq_drop_if(struct be__evq *q, be__evq_match_fn match, const void *arg);

/* be__evq_any() - true when some queued record is accepted by @match. */
bool be__evq_any(const struct be__evq *q, be__evq_match_fn match, const void *arg);

/* be__evq_clear() - drop every record and the reserve; the queue stays
 * usable (with nothing reserved). */
void be__evq_clear(struct be__evq *q);

#endif /* BE_UTIL_EVQ_H */
