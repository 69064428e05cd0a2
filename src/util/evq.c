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

#include "util/evq.h"

struct evq_node {
	struct be__list link;
	alignas(max_align_t) unsigned char rec[];
};

static struct evq_node *evq_node(const struct be__list *e)
{
	return be__list_entry(e, struct evq_node, link);
}

void be__evq_init(struct be__evq *q, size_t size)
{
	be__list_init(&q->nodes);
	q->size = size;
}

int be__evq_push(struct be__evq *q, const void *rec)
{
	struct evq_node *n = malloc(sizeof(*n) + q->size);
	bool was_empty = be__evq_empty(q);

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
	free(n);
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
		free(evq_node(e));
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
}
