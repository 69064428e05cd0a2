/*
 * window.c - the posted-WR ring and send window (model in window.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "engine/window.h"

int be__window_init(struct be__window *w, uint32_t cap, uint64_t limit)
{
	*w = (struct be__window){ .cap = cap, .limit = limit, .next_seq = 1,
				  .sig_count = cap / 4, .sig_bytes = limit / 4 };
	if (!cap || !limit)
		return -EINVAL;
	w->ring = calloc(cap, sizeof(*w->ring));
	return w->ring ? 0 : -ENOMEM;
}

void be__window_free(struct be__window *w)
{
	free(w->ring);
	w->ring = NULL;
}

/* Ring index of the record @i after the oldest (@i < cap): no division
 * on the send path. */
static inline uint32_t window_slot(const struct be__window *w, uint32_t i)
{
	uint32_t k = w->head + i;

	return k >= w->cap ? k - w->cap : k;
}

bool be__window_fits(struct be__window *w, uint64_t bytes)
{
	/* One WR larger than the whole window may go alone, or it would
	 * never go. */
	if (w->count < w->cap && (w->in_flight + bytes <= w->limit || w->in_flight == 0))
		return true;
	w->stalls++;
	return false;
}

void be__window_set_soft(struct be__window *w, uint64_t soft_limit)
{
	w->soft_limit = soft_limit;
	w->sig_bytes = (soft_limit ? soft_limit : w->limit) / 4;
}

bool be__window_soft_fits(struct be__window *w, uint64_t bytes)
{
	/* A signaled WR is in flight iff records older than the unsignaled
	 * run since the last signal are: its completion will reopen us. */
	if (!w->soft_on || !w->soft_limit || w->in_flight + bytes <= w->soft_limit ||
	    w->count <= w->unsig_count)
		return true;
	w->soft_stalls++;
	return false;
}

uint64_t be__window_push(struct be__window *w, enum be__wr_kind kind, uint32_t bytes, void *ptr,
			 bool *signal)
{
	struct be__wr_rec *r = &w->ring[window_slot(w, w->count)];

	r->seq = w->next_seq++;
	r->bytes = bytes;
	r->kind = kind;
	r->ptr = ptr;
	w->count++;
	w->in_flight += bytes;
	if (w->in_flight > w->max_in_flight)
		w->max_in_flight = w->in_flight;
	w->unsig_count++;
	w->unsig_bytes += bytes;
	*signal = (kind != BE_WR_FRAG && kind != BE_WR_SEND_INLINE) || w->unsig_count >= w->sig_count ||
		  w->unsig_bytes >= w->sig_bytes || w->count == w->cap;
	if (w->soft_on && (kind == BE_WR_FRAG || kind == BE_WR_FRAG_LAST) && w->in_flight > w->soft_max)
		w->soft_max = w->in_flight;
	if (*signal) {
		w->unsig_count = 0;
		w->unsig_bytes = 0;
	}
	return r->seq;
}

bool be__window_busy(const struct be__window *w)
{
	uint32_t i;

	for (i = 0; i < w->count; i++)
		if (w->ring[window_slot(w, i)].ptr ||
		    w->ring[window_slot(w, i)].kind == BE_WR_SEND_INLINE_SIG)
			return true;
	return false;
}

void be__window_unpush(struct be__window *w)
{
	struct be__wr_rec *r = &w->ring[window_slot(w, w->count - 1)];

	w->count--;
	w->in_flight -= r->bytes;
	w->next_seq--;
	/* The unsignaled counters only make signals more frequent when off
	 * by one; leave them. */
}

int be__window_pop(struct be__window *w, uint64_t upto, struct be__wr_rec *out)
{
	struct be__wr_rec *r;

	if (!w->count)
		return 0;
	r = &w->ring[w->head];
	if (r->seq > upto)
		return 0;
	*out = *r;
	w->head = window_slot(w, 1);
	w->count--;
	w->in_flight -= r->bytes;
	return 1;
}
