/*
 * evq.c - a FIFO queue of fixed-size records (see evq.h).
 *
 * A node is its list link followed by the record, aligned for any type,
 * so a record of a struct can be read in place by @match.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"
#include "util/evq.h"

struct evq_node {
	struct be__list link;
	alignas(max_align_t) unsigned char rec[];
};

int be__evq_fail_allocs;

static struct evq_node *evq_node(const struct be__list *e)
{
	return be__list_entry(e, struct evq_node, link);
}

/* A node off the queue (its link unlinked) refills the reserve first. */
static void evq_release(struct be__evq *q, struct evq_node *n)
{
	if (q->nspare < q->reserved) {
		be__list_add_tail(&q->spare, &n->link);
		q->nspare++;
	} else {
		free(n);
	}
}

void be__evq_init(struct be__evq *q, size_t size)
{
	be__list_init(&q->nodes);
	be__list_init(&q->spare);
	q->size = size;
	q->nspare = q->reserved = 0;
}

int be__evq_reserve(struct be__evq *q, size_t n)
{
	struct be__list got, *e;
	size_t i;

	be__list_init(&got);
	for (i = 0; i < n; i++) {
		struct evq_node *x = malloc(sizeof(*x) + q->size);

		if (!x) {
			while ((e = be__list_pop(&got)))
				free(evq_node(e));
			return -ENOMEM;
		}
		be__list_add_tail(&got, &x->link);
	}
	be__list_splice_tail(&q->spare, &got);
	q->nspare += n;
	q->reserved += n;
	return 0;
}

void be__evq_unreserve(struct be__evq *q, size_t n)
{
	q->reserved -= BE_MIN(n, q->reserved);
	while (q->nspare > q->reserved) {
		struct be__list *e = q->spare.next;

		be__list_del_init(e);
		free(evq_node(e));
		q->nspare--;
	}
}

int be__evq_push(struct be__evq *q, const void *rec, bool reserved)
{
	struct evq_node *n = NULL;
	bool was_empty = be__evq_empty(q);

	if (be__evq_fail_allocs > 0)
		be__evq_fail_allocs--;
	else
		n = malloc(sizeof(*n) + q->size);
	if (!n && reserved && q->nspare) {
		n = evq_node(q->spare.next);
		be__list_del_init(&n->link);
		q->nspare--;
	}
	if (!n)
		return -ENOMEM;
	memcpy(n->rec, rec, q->size);
	be__list_add_tail(&q->nodes, &n->link);
	return was_empty;
}

int be__evq_pop(struct be__evq *q, void *rec)
{
	struct evq_node *n;

	if (be__evq_empty(q))
		return 0;
	n = evq_node(q->nodes.next);
	be__list_del_init(&n->link);
	memcpy(rec, n->rec, q->size);
	evq_release(q, n);
	return 1;
}

size_t be__evq_drop_if(struct be__evq *q, be__evq_match_fn match, const void *arg)
{
	struct be__list *e, *next;
	size_t dropped = 0;

	be__list_for_each_safe(e, next, &q->nodes) {
		if (!match(evq_node(e)->rec, arg))
			continue;
		be__list_del_init(e);
		evq_release(q, evq_node(e));
		dropped++;
	}
	return dropped;
}

bool be__evq_any(const struct be__evq *q, be__evq_match_fn match, const void *arg)
{
	const struct be__list *e;

	be__list_for_each(e, &q->nodes)
		if (match(evq_node(e)->rec, arg))
			return true;
	return false;
}

void be__evq_clear(struct be__evq *q)
{
	struct be__list *e, *next;

	be__list_for_each_safe(e, next, &q->nodes)
		free(evq_node(e));
	be__list_init(&q->nodes);
	be__list_for_each_safe(e, next, &q->spare)
		free(evq_node(e));
	be__list_init(&q->spare);
	q->nspare = q->reserved = 0;
}
