/*
 * list.h - intrusive circular doubly-linked lists (internal), the one list
 * of the library.
 *
 * Every list of objects (the core's socket send queues, the round-robin
 * ring of active sockets, deferred callbacks; a transport's conns per
 * event channel, cq and srq; bemalloc's blocks and huge regions) is a
 * struct be__list head and objects that embed a struct be__list, so
 * queueing never allocates and unlinking is O(1).
 *
 * A head is empty when it points at itself: initialise it with
 * be__list_init() (or BE__LIST_INIT for a static one) before use. An
 * element is unlinked when it points at itself: be__list_del_init() leaves
 * it so, and deleting an unlinked element again does nothing. Threads: no
 * locking; the owner of the head serialises.
 */
#ifndef BE_UTIL_LIST_H
#define BE_UTIL_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct be__list {
	struct be__list *next, *prev;
};

/* Static initialiser of an empty head: struct be__list h = BE__LIST_INIT(h). */
#define BE__LIST_INIT(h) { &(h), &(h) }

static inline void be__list_init(struct be__list *h)
{
	h->next = h->prev = h;
}

static inline bool be__list_empty(const struct be__list *h)
{
	return h->next == h;
}

/* An element that was initialised or removed with be__list_del_init(). */
static inline bool be__list_linked(const struct be__list *n)
{
	return n->next != n;
}

static inline void be__list_insert(struct be__list *n, struct be__list *prev,
				   struct be__list *next)
{
	n->next = next;
	n->prev = prev;
	prev->next = n;
	next->prev = n;
}

static inline void be__list_add_tail(struct be__list *h, struct be__list *n)
{
	be__list_insert(n, h->prev, h);
}

static inline void be__list_add_head(struct be__list *h, struct be__list *n)
{
	be__list_insert(n, h, h->next);
}

static inline void be__list_del_init(struct be__list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* Move every entry of @from to the tail of @h; @from ends empty. */
static inline void be__list_splice_tail(struct be__list *h, struct be__list *from)
{
	if (be__list_empty(from))
		return;
	from->next->prev = h->prev;
	h->prev->next = from->next;
	from->prev->next = h;
	h->prev = from->prev;
	be__list_init(from);
}

/* Move every entry of @from to the head of @h, in order; @from ends empty. */
static inline void be__list_splice_head(struct be__list *h, struct be__list *from)
{
	if (be__list_empty(from))
		return;
	from->prev->next = h->next;
	h->next->prev = from->prev;
	h->next = from->next;
	from->next->prev = h;
	be__list_init(from);
}

static inline struct be__list *be__list_first(const struct be__list *h)
{
	return be__list_empty(h) ? NULL : h->next;
}

static inline struct be__list *be__list_last(const struct be__list *h)
{
	return be__list_empty(h) ? NULL : h->prev;
}

/* Unlink the first element of @h and return it (unlinked), or NULL when
 * @h is empty: the head of a queue drained with
 * while ((n = be__list_pop(h))) { ... }. */
static inline struct be__list *be__list_pop(struct be__list *h)
{
	struct be__list *n = be__list_first(h);

	if (n)
		be__list_del_init(n);
	return n;
}

#define be__list_entry(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* Visit every entry; the body must not unlink @pos. */
#define be__list_for_each(pos, h) for ((pos) = (h)->next; (pos) != (h); (pos) = (pos)->next)

/* Visit every entry; the body may unlink @pos (not @tmp). */
#define be__list_for_each_safe(pos, tmp, h) \
	for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h); (pos) = (tmp), (tmp) = (pos)->next)

#endif /* BE_UTIL_LIST_H */
