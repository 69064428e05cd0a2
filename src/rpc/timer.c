/*
 * timer.c - the clock of a be_rpc: its timers (call deadlines, hedges,
 * probes, ejections) on the worker, in a run and a min-heap (below), and
 * one thread that sleeps until the earliest of them and then queues a
 * tick on the worker with be_worker_call().
 *
 * Why a thread. sock.h gives a higher layer no timer of the worker's, and
 * this layer may not reach inside it; a worker sleeping in
 * be_worker_wait(-1) must still wake for a deadline. be_worker_call() is
 * the one cross-thread door sock.h has: it queues a function and wakes
 * the worker's eventfd. The thread costs nothing while it sleeps, and it
 * wakes about once per deadline period, not once per call: the worker
 * publishes a new due time only when a timer is armed earlier than the
 * one the thread sleeps toward, which in a stream of calls with the same
 * timeout happens only after a tick (a later call's deadline is later).
 * A worker timer in sock.h (the core has one, be__worker_timer_at) would
 * make the thread unnecessary; see docs/RPC.md.
 *
 * Two places for a timer. Almost every timer is a call's deadline or
 * hedge, armed when the call starts and cancelled when its reply comes,
 * and in a stream of calls with the same timeout each is due no earlier
 * than the one armed before it. Those go to the run, a list sorted by due
 * time that is only ever appended to: arm and cancel are a few pointer
 * writes. A timer due earlier than the run's last (a shorter timeout, a
 * probe's backoff) goes to a min-heap, O(log n). The earliest timer is
 * the earlier of the two heads.
 *
 * Handshake. thr_due and stop are guarded by mu. The thread, when due,
 * sets ctl->tick_queued and thr_due = UINT64_MAX and queues the tick; the
 * tick clears tick_queued, runs what is due and publishes the earliest
 * left. ctl outlives the be_rpc while ticks or flushes are queued:
 * be_rpc_destroy() joins the thread, then leaves ctl to the last queued
 * function (ctl->rpc NULL tells it the be_rpc is gone).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

/* ---- heap */

static void heap_set(struct rpc_heap *h, uint32_t i, struct rpc_tmr *t)
{
	h->v[i] = t;
	t->idx = i + 1;
}

static void heap_up(struct rpc_heap *h, uint32_t i)
{
	struct rpc_tmr *t = h->v[i];

	while (i) {
		uint32_t p = (i - 1) / 2;

		if (h->v[p]->due <= t->due)
			break;
		heap_set(h, i, h->v[p]);
		i = p;
	}
	heap_set(h, i, t);
}

static void heap_down(struct rpc_heap *h, uint32_t i)
{
	struct rpc_tmr *t = h->v[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1]->due < h->v[c]->due)
			c++;
		if (t->due <= h->v[c]->due)
			break;
		heap_set(h, i, h->v[c]);
		i = c;
	}
	heap_set(h, i, t);
}

static void heap_del(struct rpc_heap *h, struct rpc_tmr *t)
{
	uint32_t i = t->idx - 1;

	t->idx = 0;
	if (--h->n == i)
		return;
	heap_set(h, i, h->v[h->n]);
	if (i && h->v[(i - 1) / 2]->due > h->v[i]->due)
		heap_up(h, i);
	else
		heap_down(h, i);
}

/* Tell the thread about @due when it is earlier than what it waits for. */
static void timer_publish(struct be_rpc *rpc, uint64_t due)
{
	if (due >= rpc->pub_due)
		return;
	rpc->pub_due = due;
	pthread_mutex_lock(&rpc->mu);
	if (due < rpc->thr_due) {
		rpc->thr_due = due;
		pthread_cond_signal(&rpc->cv);
	}
	pthread_mutex_unlock(&rpc->mu);
}

/* The earliest timer, or NULL. */
static struct rpc_tmr *tmr_first(struct rpc_heap *h)
{
	struct rpc_tmr *r = be__list_empty(&h->run) ?
				    NULL :
				    be__list_entry(h->run.next, struct rpc_tmr, link);

	if (h->n && (!r || h->v[0]->due < r->due))
		return h->v[0];
	return r;
}

static void tmr_del(struct rpc_heap *h, struct rpc_tmr *t)
{
	if (t->idx == RPC_TMR_IN_RUN) {
		be__list_del_init(&t->link);
		t->idx = 0;
	} else {
		heap_del(h, t);
	}
}

int be__rpc_tmr_arm(struct be_rpc *rpc, struct rpc_tmr *t, uint64_t due, rpc_tmr_fn fn)
{
	struct rpc_heap *h = &rpc->heap;

	t->fn = fn;
	if (t->idx == RPC_TMR_IN_RUN)
		tmr_del(h, t);
	if (!t->idx && (be__list_empty(&h->run) ||
			due >= be__list_entry(h->run.prev, struct rpc_tmr, link)->due)) {
		t->due = due;
		t->idx = RPC_TMR_IN_RUN;
		be__list_add_tail(&h->run, &t->link);
	} else if (t->idx) {
		uint64_t old = t->due;

		t->due = due;
		if (due < old)
			heap_up(h, t->idx - 1);
		else
			heap_down(h, t->idx - 1);
	} else {
		if (h->n == h->cap) {
			uint32_t cap = h->cap ? h->cap * 2 : 64;
			struct rpc_tmr **v = realloc(h->v, (size_t)cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			h->v = v;
			h->cap = cap;
		}
		t->due = due;
		h->v[h->n] = t;
		t->idx = ++h->n;
		heap_up(h, h->n - 1);
	}
	timer_publish(rpc, due);
	return 0;
}

/* be__rpc_tmr_cancel() of a timer in the heap. The thread keeps its
 * wake-up time (either way): waking once for nothing is cheaper than a
 * lock per completed call. */
void be__rpc_tmr_cancel_heap(struct be_rpc *rpc, struct rpc_tmr *t)
{
	heap_del(&rpc->heap, t);
}

/* ---- ticks and deferred work, on the worker */

static void ctl_done(struct rpc_ctl *ctl)
{
	if (atomic_fetch_sub(&ctl->queued, 1) == 1 && !ctl->rpc)
		free(ctl);
}

static void timer_tick(struct be_worker *w, void *arg)
{
	struct rpc_ctl *ctl = arg;
	struct be_rpc *rpc = ctl->rpc;
	struct rpc_tmr *first;
	struct rpc_heap *h;
	uint64_t now;

	atomic_store(&ctl->tick_queued, false);
	if (!rpc) {
		ctl_done(ctl);
		return;
	}
	h = &rpc->heap;
	rpc->pub_due = UINT64_MAX;
	now = rpc_now();
	/* A timer function may arm or cancel others (a hedge that ends in
	 * completion cancels the deadline): take the top each time. */
	for (;;) {
		struct rpc_tmr *t = tmr_first(h);

		if (!t || t->due > now)
			break;
		tmr_del(h, t);
		t->fn(rpc, t);
	}
	if (!be__list_empty(&rpc->deferred))
		be__rpc_flush(rpc);
	first = tmr_first(h);
	timer_publish(rpc, first ? first->due : UINT64_MAX);
	ctl_done(ctl);
}

static void rpc_flush_cb(struct be_worker *w, void *arg)
{
	struct rpc_ctl *ctl = arg;

	if (ctl->rpc) {
		ctl->rpc->kick_queued = false;
		be__rpc_flush(ctl->rpc);
	}
	ctl_done(ctl);
}

void be__rpc_kick(struct be_rpc *rpc)
{
	if (rpc->kick_queued)
		return;
	atomic_fetch_add(&rpc->ctl->queued, 1);
	if (be_worker_call(rpc->w, rpc_flush_cb, rpc->ctl)) {
		/* No memory for the queue entry: the next tick flushes. */
		atomic_fetch_sub(&rpc->ctl->queued, 1);
		be__log(BE_LOG_WARN, "rpc: cannot queue completions, retrying at the next tick");
		timer_publish(rpc, 0);
		return;
	}
	rpc->kick_queued = true;
}

/* ---- the thread */

static void *timer_main(void *arg)
{
	struct be_rpc *rpc = arg;
	struct rpc_ctl *ctl = rpc->ctl;

	pthread_mutex_lock(&rpc->mu);
	while (!rpc->stop) {
		uint64_t due = rpc->thr_due, now;

		if (due == UINT64_MAX) {
			pthread_cond_wait(&rpc->cv, &rpc->mu);
			continue;
		}
		now = rpc_now();
		if (now < due) {
			struct timespec ts = { .tv_sec = (time_t)(due / 1000000000ull),
					       .tv_nsec = (long)(due % 1000000000ull) };

			pthread_cond_timedwait(&rpc->cv, &rpc->mu, &ts);
			continue;
		}
		rpc->thr_due = UINT64_MAX;
		if (atomic_exchange(&ctl->tick_queued, true))
			continue; /* the queued tick will publish again */
		atomic_fetch_add(&ctl->queued, 1);
		pthread_mutex_unlock(&rpc->mu);
		if (be_worker_call(rpc->w, timer_tick, ctl)) {
			/* Out of memory: try again in a millisecond. */
			atomic_fetch_sub(&ctl->queued, 1);
			atomic_store(&ctl->tick_queued, false);
			pthread_mutex_lock(&rpc->mu);
			if (rpc->thr_due > now + 1000000ull)
				rpc->thr_due = now + 1000000ull;
			continue;
		}
		pthread_mutex_lock(&rpc->mu);
	}
	pthread_mutex_unlock(&rpc->mu);
	return NULL;
}

int be__rpc_timer_start(struct be_rpc *rpc)
{
	pthread_condattr_t ca;
	int rc;

	rpc->ctl = calloc(1, sizeof(*rpc->ctl));
	if (!rpc->ctl)
		return -ENOMEM;
	rpc->ctl->rpc = rpc;
	rpc->thr_due = rpc->pub_due = UINT64_MAX;
	be__list_init(&rpc->heap.run);
	pthread_mutex_init(&rpc->mu, NULL);
	pthread_condattr_init(&ca);
	/* The clock of be__now_ns(), so a due time needs no conversion. */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rpc->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&rpc->thr, NULL, timer_main, rpc);
	if (rc) {
		pthread_cond_destroy(&rpc->cv);
		pthread_mutex_destroy(&rpc->mu);
		free(rpc->ctl);
		rpc->ctl = NULL;
		return -rc;
	}
	rpc->thr_started = true;
	return 0;
}

void be__rpc_timer_stop(struct be_rpc *rpc)
{
	struct rpc_ctl *ctl = rpc->ctl;

	if (!rpc->thr_started)
		return;
	pthread_mutex_lock(&rpc->mu);
	rpc->stop = true;
	pthread_cond_signal(&rpc->cv);
	pthread_mutex_unlock(&rpc->mu);
	pthread_join(rpc->thr, NULL);
	rpc->thr_started = false;
	pthread_cond_destroy(&rpc->cv);
	pthread_mutex_destroy(&rpc->mu);
	free(rpc->heap.v);
	rpc->heap.v = NULL;
	rpc->heap.n = rpc->heap.cap = 0;
	be__list_init(&rpc->heap.run);
	/* The thread is gone; only this thread touches ctl now. */
	ctl->rpc = NULL;
	if (atomic_load(&ctl->queued) == 0)
		free(ctl);
	rpc->ctl = NULL;
}
