/*
 * worker.c - workers: progress, adaptive waiting, deferred callbacks and
 * reposts, timers, the message record cache and cross-thread calls. The
 * public entry points and the library thread are src/sock/worker.c.
 *
 * Model. A worker is a thread domain: for each transport it uses it owns
 * one event channel, one completion queue and one shared receive queue
 * with its receive buffers (struct be__wdev, wdev.c), and it owns every
 * Engine, Listener and Socket made on it. Only the thread running the
 * worker touches them, so the data path has no locks. Other threads
 * reach a worker through be_worker_call(): a lock-free multi-producer
 * stack drained (in order) by progress, plus an eventfd that wakes a
 * sleeping worker. The Engines call down into it (deferred completions,
 * reposts, timers, message records); it calls them from progress
 * (completions, events, scheduler passes, ticks).
 *
 * Waiting. be_worker_wait() polls for a while (the spin), then arms every
 * CQ, polls once more (a completion may have slipped in before arming;
 * not when every CQ's arm covers that, as tcp's does), and sleeps in
 * epoll on the CQ fds, the event channel fds and the
 * eventfd, bounded by the next timer tick (keepalives, backoffs) while
 * Engines exist.
 *
 * The spin adapts between 0 and spin_us: it halves after a spin that
 * found nothing (it was pure cost, and on a shared core it also delays
 * the very peer we wait for) and doubles, from WORKER_SPIN_MIN_NS, after
 * one that found work within WORKER_SPIN_WORTH_NS. One that found work
 * only later halves too: it spent more CPU than the sleep it saved (an
 * epoll_wait() and a wakeup), and the wakeup's latency is what a
 * blocking peer pays anyway (a PS pull's 64 KiB reply comes 15-25 us
 * after its request: spinning for it doubled the caller's CPU and made
 * the call no faster). Work found by the spin's first poll changes
 * nothing: it was there before the spin began (on tcp a loopback peer's
 * reply is often queued by the time the request's sendmsg() returns),
 * and growing the spin for it made the waits it did not cover spin the
 * whole spin_us for nothing. A spin shrunk to nothing probes with
 * WORKER_SPIN_MIN_NS every WORKER_SPIN_PROBE waits, so it grows back
 * when answers come fast again; each probe that finds nothing doubles
 * that interval, up to WORKER_SPIN_PROBE_MAX (a probe costs a transport
 * poll, on tcp a syscall, and on a loaded host it keeps failing). A ping-pong whose answers come within
 * the spin keeps spinning; a worker whose traffic comes slower, or whose
 * host is too busy to answer within it, stops paying for it within a few
 * waits. A sleep that ends with work does not grow the spin: on a loaded
 * host that would keep it spinning for wakeups a spin would not catch.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

#define WORKER_POLL_BATCH 32
#define WORKER_EV_WAKE 0xffu
#define WORKER_EV_CQ 0x100u
#define WORKER_EV_EVERY 1024
#define WORKER_EV_MAX_NS 1000000ull /* and at least once a millisecond */
#define WORKER_CLOCK_EVERY 16
/* The longest sleep of a wait whose CQ could not be armed: completions
 * are then found by polling, so keep that prompt. */
#define WORKER_UNARMED_SLEEP_MS 1
#define WORKER_SPIN_MIN_NS 2000ull /* the spin a useful wait grows back from */
#define WORKER_SPIN_WORTH_NS 10000ull /* a spin that finds work later was not worth it */
#define WORKER_SPIN_PROBE 8        /* waits without spin between two probes, */
#define WORKER_SPIN_PROBE_MAX 256  /* doubling up to this while probes fail */

/* The periodic tick serves keepalive (a quarter of its interval is
 * precise enough); anything due sooner (a backoff retry, a connect
 * deadline) asks for its own time with be__worker_timer_at(). */
static uint64_t worker_tick_ns(const struct be_worker *w)
{
	uint64_t t = (uint64_t)w->ctx->cfg.keepalive_ms * 1000000ull / 4;

	return BE_MAX(BE_MIN(t, 1000000000ull), 1000000ull);
}

void be__worker_timer_at(struct be_worker *w, uint64_t when)
{
	if (when < w->next_tick_ns)
		w->next_tick_ns = when;
}

/* epoll tags of the worker's set (epoll_data.ptr holds a number). */
static void *worker_tag(uint64_t tag)
{
	return (void *)(uintptr_t)tag;
}

int be__worker_create(struct be_ctx *ctx, struct be_worker **out)
{
	struct be_worker *w;
	int rc, i;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->spin_ns = (uint64_t)ctx->cfg.spin_us * 1000;
	w->spin_probe_every = WORKER_SPIN_PROBE;
	be__list_init(&w->engines);
	be__list_init(&w->peers);
	be__list_init(&w->reap);
	be__list_init(&w->kick);
	be__list_init(&w->later);
	be__list_init(&w->listeners);
	be__list_init(&w->socks);
	be__list_init(&w->done);
	be__list_init(&w->closeq);
	be__list_init(&w->closedone);
	rc = be__wake_init(&w->wake, 0, worker_tag(WORKER_EV_WAKE), NULL);
	if (rc) {
		free(w);
		return rc;
	}
	/* RDMA queues are set up off the worker's thread (wdev.c); without
	 * that thread they are made on it. */
	for (i = 0; i < ctx->ndev; i++)
		if (ctx->dev[i].dev && ctx->dev[i].ops->dev_name) {
			rc = be__wsetup_start(&w->setup);
			if (rc)
				be_log_err("worker: no set-up thread: %s", be_strerror(rc));
			break;
		}
	atomic_fetch_add(&ctx->workers, 1);
	*out = w;
	return 0;
}

/* ---- receive buffers: reposted at the end of progress ---- */

/* Repost @buf, then owe @e its credit. A receive that could not be
 * reposted has no credit to return: the Engine that held it fails with
 * the transport's error (its sockets see it in on_close). */
static void worker_repost_one(struct be__engine *e, void *buf, bool trig)
{
	int rc = be__wdev_repost(e->wd, buf);

	if (e->state == BE_ES_FAILED)
		return;
	if (rc) {
		be__engine_fail(e, rc, "cannot repost a receive buffer");
		return;
	}
	be__credit_repost(&e->cr, trig);
	if (be__credit_update_due(&e->cr))
		be__engine_kick(e);
}

static void worker_flush_reposts(struct be_worker *w)
{
	uint32_t i, n = w->nrepost;

	w->nrepost = 0;
	for (i = 0; i < n; i++) {
		struct be__repost *r = &w->repost[i];

		worker_repost_one(r->e, r->buf, r->trig);
		be__engine_unref(r->e);
	}
}

/*
 * be__worker_repost_later() - @buf, a receive of @e whose frames were
 * handled, goes back to the SRQ at the end of this progress call, and
 * only then is its credit owed to the peer (a credit must never reach
 * the peer before its receive is posted). Deferred so that replies the
 * receive callbacks sent are posted first: the repost is not on the
 * round trip's critical path. Outside progress: at once.
 */
void be__worker_repost_later(struct be__engine *e, void *buf, bool trig)
{
	struct be_worker *w = e->w;
	struct be__repost *r;

	if (!w->in_progress) {
		worker_repost_one(e, buf, trig);
		return;
	}
	if (w->nrepost == BE_WORKER_REPOST_MAX)
		worker_flush_reposts(w);
	r = &w->repost[w->nrepost++];
	r->e = e;
	r->buf = buf;
	r->trig = trig;
	e->refs++;
}

/* Watch @wd's event channel and CQ, and poll them from progress. */
static int worker_wdev_open(struct be_worker *w, int idx, struct be__wdev *wd)
{
	const struct be_xport_ops *ops = wd->cd->ops;
	int rc;

	rc = be__wake_watch(&w->wake, ops->evch_fd(wd->evch), EPOLLIN, worker_tag((uint64_t)idx));
	if (rc)
		goto err;
	rc = be__wake_watch(&w->wake, ops->cq_fd(wd->cq), EPOLLIN,
			    worker_tag(WORKER_EV_CQ | (uint64_t)idx));
	if (rc) {
		epoll_ctl(w->wake.epfd, EPOLL_CTL_DEL, ops->evch_fd(wd->evch), NULL);
		goto err;
	}
	w->open[w->nopen++] = wd;
	return 0;

err:
	be_log_err("worker: cannot watch %s queues: %s", wd->cd->name, be_strerror(rc));
	return rc;
}

/* The set-up thread built w->wd[@idx] (or, for a listen, is waited
 * for): take its queues, and start (or
 * fail) the connects that waited for them. On error the wdev stays,
 * without queues, until no Engine holds a reservation on it. */
static void worker_wdev_built(struct be_worker *w, int idx)
{
	struct be__wdev *wd = w->wd[idx];
	int rc;

	w->nbuilding--;
	rc = be__wdev_finish(wd);
	if (!rc)
		rc = worker_wdev_open(w, idx, wd);
	wd->failed = rc;
	while (!be__list_empty(&wd->waiting)) {
		struct be__engine *e = be__list_entry(wd->waiting.next, struct be__engine, wdlink);

		be__list_del_init(&e->wdlink);
		be__engine_queues_ready(e, rc);
	}
}

static int worker_check_builds(struct be_worker *w)
{
	int i, n = 0;

	for (i = 0; i < BE_CTX_MAX_DEVS; i++) {
		struct be__wdev *wd = w->wd[i];

		if (wd && wd->building &&
		    atomic_load_explicit(&wd->built, memory_order_acquire)) {
			worker_wdev_built(w, i);
			n++;
		}
	}
	return n;
}

/* The wdev of the device @addr is on: created on first use, its event
 * channel and CQ added to the worker's epoll set; for a connect on an
 * RDMA device (one of a transport with several: dev_name) built by the
 * worker's set-up thread (wdev.c) while the caller goes on. */
int be__worker_wdev(struct be_worker *w, const char *xport, const char *addr, bool passive,
		    struct be__wdev **out)
{
	struct be__cdev *cd;
	struct be__wdev *wd;
	int rc, idx;

	rc = be__ctx_dev(w->ctx, xport, addr, passive, &cd);
	if (rc)
		return rc;
	idx = (int)(cd - w->ctx->dev);
	wd = w->wd[idx];
	if (wd && wd->building && passive)
		worker_wdev_built(w, idx); /* a listen needs the queues now */
	if (wd && wd->failed) {
		/* A set-up that failed: try again once no Engine is left on it. */
		if (wd->reserved || wd->cq_reserved)
			return wd->failed;
		be__wdev_destroy(wd);
		w->wd[idx] = wd = NULL;
	}
	if (wd) {
		*out = wd;
		return 0;
	}
	rc = passive || !cd->ops->dev_name ? -EAGAIN : be__wdev_start(w, cd, &wd);
	if (!rc) {
		w->nbuilding++;
	} else if (rc != -EAGAIN) {
		return rc;
	} else {
		rc = be__wdev_create(w, cd, &wd);
		if (rc)
			return rc;
		rc = worker_wdev_open(w, idx, wd);
		if (rc) {
			be__wdev_destroy(wd);
			return rc;
		}
	}
	w->wd[idx] = wd;
	*out = wd;
	return 0;
}

/* ---- deferred callbacks ---- */

/* Message records are the one allocation of every send: keep freed
 * ones for reuse (bounded), as a stack threaded through m->link.next. */
#define WORKER_MSG_CACHE 256

/*
 * Zero a reused record field by field: every send takes one, and GCC
 * turns a memset (or a zero struct assignment) of its 152 bytes into a
 * `rep stos`, whose start-up costs more than these stores (a tenth of
 * be_sock_send()'s samples in `perf record` of `be-perf lat`). The
 * lists are set up by the caller. A field added to struct be__msg must be
 * added here: the size check below is the reminder.
 */
static void msg_zero(struct be__msg *m)
{
#if UINTPTR_MAX == UINT64_MAX && defined(__x86_64__)
	_Static_assert(sizeof(struct be__msg) == 152, "zero the new field in msg_zero()");
#endif
	m->sock = NULL;
	m->sq = NULL;
	m->buf = NULL;
	m->len = 0;
	m->cb = NULL;
	m->arg = NULL;
	m->id = 0;
	m->kind = 0;
	m->state = 0;
	m->large = false;
	m->status = 0;
	m->raddr = 0;
	m->rkey = 0;
	m->token = 0;
	m->off = 0;
	m->lkey = 0;
	m->unretired = 0;
	m->win_at = 0;
	m->retry_at = 0;
	m->backoff_us = 0;
}

struct be__msg *be__worker_msg_get(struct be_worker *w)
{
	struct be__msg *m = w->msg_cache;

	if (m) {
		w->msg_cache = (struct be__msg *)(void *)m->link.next;
		w->nmsg_cache--;
		msg_zero(m);
	} else {
		m = calloc(1, sizeof(*m));
		if (!m)
			return NULL;
	}
	be__list_init(&m->link);
	be__list_init(&m->blink);
	return m;
}

void be__worker_msg_put(struct be_worker *w, struct be__msg *m)
{
	if (w->nmsg_cache >= WORKER_MSG_CACHE) {
		free(m);
		return;
	}
	m->link.next = (struct be__list *)(void *)w->msg_cache;
	w->msg_cache = m;
	w->nmsg_cache++;
}

static void worker_msg_cache_free(struct be_worker *w)
{
	while (w->msg_cache) {
		struct be__msg *m = w->msg_cache;

		w->msg_cache = (struct be__msg *)(void *)m->link.next;
		free(m);
	}
	w->nmsg_cache = 0;
}

/* @e stopped its scheduler pass with work left (its fair share of this
 * progress is done): run it again in the next progress, after the CQ. */
void be__worker_later(struct be_worker *w, struct be__engine *e)
{
	if (e->kicked)
		return;
	e->kicked = true;
	be__list_add_tail(&w->later, &e->klink);
}

void be__worker_defer_msg(struct be_worker *w, struct be__msg *m, int status)
{
	m->status = status;
	m->state = BE_MS_DONE;
	be__list_add_tail(&w->done, &m->link);
}

void be__worker_defer_close(struct be_worker *w, struct be_sock *s, int reason)
{
	if (s->notified || s->app_closed)
		return;
	s->notified = true;
	s->close_reason = reason;
	be__sock_ref(s);
	be__list_add_tail(&w->closeq, &s->clink);
}

/* The close of @s is done with @status: its be_sock_close_notify()
 * callback, if any, runs from progress (once). */
void be__worker_defer_close_done(struct be_worker *w, struct be_sock *s, int status)
{
	if (!s->close_cb || be__list_linked(&s->cdlink))
		return;
	s->close_status = status;
	be__sock_ref(s);
	be__list_add_tail(&w->closedone, &s->cdlink);
}

static int worker_run_close_done(struct be_worker *w)
{
	struct be__list *p;
	int n = 0;

	while ((p = be__list_pop(&w->closedone))) {
		struct be_sock *s = be__list_entry(p, struct be_sock, cdlink);
		be_close_cb cb = s->close_cb;

		s->close_cb = NULL;
		cb(s->close_status, s->close_arg);
		be__sock_unref(s);
		n++;
	}
	return n;
}

int be__worker_run_deferred(struct be_worker *w)
{
	int n = 0;

	while (!be__list_empty(&w->done) || !be__list_empty(&w->closeq) ||
	       !be__list_empty(&w->closedone)) {
		struct be__list *p = be__list_first(&w->done);

		if (p) {
			struct be__msg *m = be__list_entry(p, struct be__msg, link);
			struct be_sock *s = m->sock;

			be__list_del_init(p);
			if (m->kind == BE_MSG_DATA) {
				if (m->status == 0) {
					s->st.msgs_sent++;
					s->st.bytes_sent += m->len;
				} else {
					s->st.send_errors++;
				}
				s->st.queued--;
				m->cb(s, m->buf, m->status, m->arg);
				n++;
			}
			be__sock_unref(s);
			be__worker_msg_put(w, m);
			continue;
		}
		p = be__list_first(&w->closeq);
		if (p) {
			struct be_sock *s = be__list_entry(p, struct be_sock, clink);

			be__list_del_init(p);
			if (!s->app_closed && s->cbs.on_close) {
				s->cbs.on_close(s, s->close_reason, s->user);
				n++;
			}
			be__sock_unref(s);
			continue;
		}
		n += worker_run_close_done(w);
	}
	return n;
}

/* ---- cross-thread calls ---- */

int be__worker_call(struct be_worker *w, void (*fn)(struct be_worker *w, void *arg), void *arg)
{
	struct be__call *c = malloc(sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->fn = fn;
	c->arg = arg;
	c->next = atomic_load_explicit(&w->calls, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&w->calls, &c->next, c, memory_order_release,
						      memory_order_relaxed))
		;
	be__wake_kick(w->wake.efd);
	return 0;
}

static int worker_run_calls(struct be_worker *w)
{
	struct be__call *c, *rev = NULL;
	int n = 0;

	/* A plain load first: the exchange is a locked instruction, and this
	 * runs on every progress call. */
	if (!atomic_load_explicit(&w->calls, memory_order_relaxed))
		return 0;
	c = atomic_exchange_explicit(&w->calls, NULL, memory_order_acquire);

	/* The stack holds the newest first; run them in submission order. */
	while (c) {
		struct be__call *next = c->next;

		c->next = rev;
		rev = c;
		c = next;
	}
	while (rev) {
		struct be__call *next = rev->next;

		rev->fn(w, rev->arg);
		free(rev);
		rev = next;
		n++;
	}
	return n;
}

/* ---- progress ---- */

static int worker_poll_cq(struct be__wdev *wd)
{
	const struct be_xport_ops *ops = wd->cd->ops;
	struct be_xwc wc[WORKER_POLL_BATCH];
	int n = 0, round, got, i;

	for (round = 0; round < 8; round++) {
		got = ops->cq_poll(wd->cq, wc, WORKER_POLL_BATCH);
		if (got < 0) {
			be_log_err("worker: cq_poll failed: %s", be_strerror(got));
			return got;
		}
		for (i = 0; i < got; i++) {
			if (wc[i].opcode == BE_XWC_RECV || wc[i].opcode == BE_XWC_RECV_IMM ||
			    (wc[i].srq && wc[i].status != BE_XWC_SUCCESS)) {
				be__engine_on_recv_wc(wd, &wc[i]);
			} else if (wc[i].conn && wc[i].conn->user) {
				be__engine_on_send_wc(wc[i].conn->user, &wc[i]);
			}
		}
		n += got;
		if (got < WORKER_POLL_BATCH)
			break;
	}
	return n;
}

static int worker_poll_events(struct be__wdev *wd)
{
	const struct be_xport_ops *ops = wd->cd->ops;
	struct be_xevent ev;
	int n = 0, rc;

	while (n < 64) {
		rc = ops->evch_get(wd->evch, &ev);
		if (rc <= 0) {
			if (rc < 0 && rc != -EAGAIN)
				be_log_warn("worker: evch_get failed: %s", be_strerror(rc));
			break;
		}
		be__engine_on_event(wd, &ev);
		n++;
	}
	return n;
}

static int worker_run_kicks(struct be_worker *w)
{
	struct be__list *p;
	int n = 0;

	for (; (p = be__list_pop(&w->kick)); n++) {
		struct be__engine *e = be__list_entry(p, struct be__engine, klink);

		e->kicked = false;
		be__engine_run(e);
	}
	return n;
}

static void worker_timers(struct be_worker *w)
{
	struct be__list *p, *t;
	uint64_t now;

	/* Reading the clock on every call would be the busiest thing a
	 * busy-polling worker does; timers have tick granularity anyway. */
	if (w->npolls % WORKER_CLOCK_EVERY && !w->timers_due)
		return;
	w->timers_due = false;
	now = be__now_ns();
	/* A caller that polls rarely still sees connection events soon. A
	 * caller that slept needs no such poll: the sleep's epoll set holds
	 * the event channels' fds, and it reported every ready one. */
	if (w->ev_slept) {
		w->ev_slept = false;
		w->ev_polled_ns = now;
	} else if (now - w->ev_polled_ns > WORKER_EV_MAX_NS) {
		w->ev_ready = true;
		w->ev_polled_ns = now;
	}
	if (now < w->next_tick_ns)
		return;
	w->next_tick_ns = now + worker_tick_ns(w);
	be__list_for_each_safe(p, t, &w->engines)
		be__engine_tick(be__list_entry(p, struct be__engine, wlink), now);
}

/* Returns how many Engines it tore down. */
static int worker_reap(struct be_worker *w)
{
	struct be__list *p;
	int n = 0;

	for (; (p = be__list_pop(&w->reap)); n++)
		be__engine_reap(be__list_entry(p, struct be__engine, rlink));
	return n;
}

/* Nothing queued for the rounds of be_worker_progress(). */
static bool worker_idle(const struct be_worker *w)
{
	return be__list_empty(&w->kick) && !w->nrepost && be__list_empty(&w->reap) &&
	       be__list_empty(&w->done) && be__list_empty(&w->closeq) &&
	       be__list_empty(&w->closedone);
}

/* A shutting-down worker disconnects each Engine once it has nothing
 * left (be__engine_close_check). Returns how many it disconnected. */
static int worker_close_engines(struct be_worker *w)
{
	struct be__list *p, *t;
	int n = 0;

	if (!w->shutdown)
		return 0;
	be__list_for_each_safe(p, t, &w->engines) {
		struct be__engine *e = be__list_entry(p, struct be__engine, wlink);
		uint8_t was = e->state;

		be__engine_close_check(e);
		n += e->state != was;
	}
	return n;
}

int be__worker_progress(struct be_worker *w)
{
	int n = 0, i, rc, round;
	/* Connection events are rare and polling an event channel may cost a
	 * syscall (shm, tcp): poll them every WORKER_EV_EVERY progress calls
	 * or WORKER_EV_MAX_NS (see worker_timers), and at once after epoll
	 * reported one. */
	bool events = (++w->npolls % WORKER_EV_EVERY) == 0 || w->ev_ready;
	uint64_t delivered = w->delivered;

	if (!w->in_progress++)
		w->progress_thread = pthread_self();
	w->ev_ready = false;
	n += worker_run_calls(w);
	if (w->nbuilding)
		n += worker_check_builds(w);
	for (i = 0; i < w->nopen; i++) {
		struct be__wdev *wd = w->open[i];

		if (wd->nunposted)
			be__wdev_retry_reposts(wd);
		if (events)
			n += worker_poll_events(wd);
		rc = worker_poll_cq(wd);
		if (rc < 0) {
			worker_flush_reposts(w);
			w->in_progress--;
			return rc;
		}
		n += rc;
	}
	worker_timers(w);
	/* Engines that yielded in the last progress go again, after this
	 * progress polled the CQ (so a pass of fragments never keeps the
	 * worker from its completions for long). Not when this progress
	 * handed messages to the application, though: it returns to the
	 * caller first, who may answer them (a run-to-completion loop
	 * sends after progress returns), and the fragments go in the next
	 * call; never twice in a row, so a stream cannot starve. */
	if (w->delivered != delivered && !w->later_held && !be__list_empty(&w->later)) {
		w->later_held = true;
	} else {
		be__list_splice_tail(&w->kick, &w->later);
		w->later_held = false;
	}
	/* Callbacks may queue more sends, which may complete more messages:
	 * a few rounds batch what the callbacks queued into this progress.
	 * An idle poll (the busy-polling loop's usual case) skips them. */
	for (round = 0; round < 4; round++) {
		int k = worker_close_engines(w);

		if (!k && worker_idle(w))
			break;
		k += worker_run_kicks(w);
		worker_flush_reposts(w);
		k += worker_reap(w);
		k += be__worker_run_deferred(w);
		n += k;
		if (!k && be__list_empty(&w->kick))
			break;
	}
	w->in_progress--;
	return n;
}

static inline void worker_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The spin (@probe: a probe of a spin shrunk to nothing) found work
 * (@useful), or was wasted. */
static void worker_spin_adapt(struct be_worker *w, bool useful, bool probe)
{
	uint64_t max = (uint64_t)w->ctx->cfg.spin_us * 1000;

	if (useful) {
		w->spin_ns = BE_MIN(BE_MAX(w->spin_ns * 2, WORKER_SPIN_MIN_NS), max);
		w->spin_probe_every = WORKER_SPIN_PROBE;
	} else {
		w->spin_ns /= 2;
		if (probe)
			w->spin_probe_every = BE_MIN(w->spin_probe_every * 2,
						     WORKER_SPIN_PROBE_MAX);
	}
}

int be__worker_wait(struct be_worker *w, int timeout_ms)
{
	struct epoll_event evs[8];
	uint64_t start, now, spin_ns;
	int n, i, nev, sleep_ms, arm_err = 0, rc;
	bool probe = false, covered = true;

	n = be__worker_progress(w);
	if (n)
		goto out;
	/* Spin only when traffic is likely: not right after a sleep that
	 * ended with nothing to do (a timer tick of an idle worker). */
	spin_ns = w->idle_wake ? 0 : w->spin_ns;
	/* A spin shrunk to nothing probes again now and then. */
	if (!spin_ns && !w->idle_wake && ++w->spin_probe >= w->spin_probe_every) {
		w->spin_probe = 0;
		probe = true;
		spin_ns = BE_MIN(WORKER_SPIN_MIN_NS, (uint64_t)w->ctx->cfg.spin_us * 1000);
	}
	if (timeout_ms >= 0 && (uint64_t)timeout_ms * 1000000ull < spin_ns)
		spin_ns = (uint64_t)timeout_ms * 1000000ull;
	/* No clock read for a wait that does not spin (the usual one once
	 * answers come slower than WORKER_SPIN_WORTH_NS). */
	if (spin_ns) {
		bool polled = false;

		start = be__now_ns();
		while ((now = be__now_ns()) - start < spin_ns) {
			n = be__worker_progress(w);
			/* Work its first poll finds says nothing of the spin:
			 * the poll after arming would have found it too. */
			if (n && polled)
				worker_spin_adapt(w, now - start <= WORKER_SPIN_WORTH_NS, probe);
			if (n)
				goto out;
			polled = true;
			worker_cpu_relax();
		}
		worker_spin_adapt(w, false, probe);
	}
	if (timeout_ms == 0)
		return 0;
	for (i = 0; i < w->nopen; i++) {
		struct be__wdev *wd = w->open[i];

		/* Arm every time, even if a previous arm has not fired: arming
		 * is where a transport flushes what it owes the peer before we
		 * sleep (tcp's deferred acks), besides asking for a wakeup. */
		rc = wd->cd->ops->cq_arm(wd->cq);
		covered &= wd->cd->ops->cq_arm_covers;
		if (rc == 0) {
			wd->cq_armed = true;
		} else {
			/* No wakeup will come from this CQ: count it, sleep
			 * briefly instead of until the next tick, and tell the
			 * caller (below) rather than degrade silently. */
			w->cq_arm_errors++;
			arm_err = rc < 0 ? rc : -EIO;
			be_log_err("worker: cq_arm on %s failed: %s", wd->cd->name,
				   be_strerror(arm_err));
		}
	}
	/* The poll after arming catches what came between the last poll
	 * (which found nothing) and the arm without a wakeup; CQs whose arm
	 * covers that (xport.h, cq_arm_covers) need none, nor does the
	 * worker: whatever another thread queues for it wakes its fd. */
	if (!covered || arm_err) {
		n = be__worker_progress(w);
		if (n)
			goto out;
	}
	sleep_ms = timeout_ms;
	if (arm_err && (sleep_ms < 0 || sleep_ms > WORKER_UNARMED_SLEEP_MS))
		sleep_ms = WORKER_UNARMED_SLEEP_MS;
	if (!be__list_empty(&w->engines)) {
		now = be__now_ns();
		int tick_ms = w->next_tick_ns > now ?
				      (int)((w->next_tick_ns - now + 999999) / 1000000) : 0;

		if (sleep_ms < 0 || tick_ms < sleep_ms)
			sleep_ms = tick_ms;
	}
	nev = epoll_wait(w->wake.epfd, evs, BE_ARRAY_SIZE(evs), sleep_ms);
	if (nev < 0 && errno != EINTR)
		return -errno;
	w->ev_slept = nev >= 0 && nev < (int)BE_ARRAY_SIZE(evs);
	for (i = 0; i < nev; i++) {
		uint64_t tag = (uintptr_t)evs[i].data.ptr;

		if (tag == WORKER_EV_WAKE) {
			be__wake_drain(w->wake.efd);
		} else if (!(tag & WORKER_EV_CQ)) {
			w->ev_ready = true; /* an event channel */
		} else {
			struct be__wdev *wd = w->wd[tag & 0xff];

			if (wd && wd->cq_armed) {
				wd->cd->ops->cq_ack(wd->cq);
				wd->cq_armed = false;
			}
		}
	}
	w->timers_due = true;
	n = be__worker_progress(w);
	w->idle_wake = n == 0;
	return n || !arm_err ? n : arm_err;
out:
	w->idle_wake = false;
	return n;
}

/* ---- which thread may use a worker ---- */

/* The worker whose library thread this is (NULL on other threads). */
static __thread struct be_worker *worker_lib_self;

void be__worker_lib_thread_enter(struct be_worker *w)
{
	worker_lib_self = w;
}

bool be__worker_busy_here(struct be_worker *w)
{
	if (worker_lib_self == w)
		return true;
	/* Off the library thread: in_progress is ours to read only if this
	 * thread runs the worker; another thread reading it is the race the
	 * debug check below is for. */
	return !atomic_load(&w->running) && w->in_progress > 0 &&
	       pthread_equal(w->progress_thread, pthread_self());
}

#ifndef NDEBUG
void be__worker_assert_thread(struct be_worker *w, const char *fn)
{
	bool ok;

	if (atomic_load_explicit(&w->running, memory_order_relaxed))
		ok = worker_lib_self == w;
	else
		ok = !w->in_progress || pthread_equal(w->progress_thread, pthread_self());
	if (!ok)
		be_log_err("%s() called off the thread of worker %p (include/be/sock.h, "
			   "\"Threads\")", fn, (void *)w);
	assert(ok && "a worker's functions run on its thread");
}
#endif

/* ---- shutdown and teardown ---- */

/* Begin the shutdown: no new Engine or Socket, every Socket closed
 * toward its peer, every Engine closing. @quiet: no on_close for the
 * sockets it closes (the worker is being destroyed). */
static void worker_close_start(struct be_worker *w, bool quiet)
{
	struct be__list *p, *t;

	if (quiet)
		be__list_for_each_safe(p, t, &w->socks)
			be__list_entry(p, struct be_sock, wlink)->notified = true;
	if (w->shutdown)
		return;
	w->shutdown = true;
	be__list_for_each_safe(p, t, &w->socks)
		be__sock_shutdown(be__list_entry(p, struct be_sock, wlink));
	be__list_for_each_safe(p, t, &w->engines)
		be__engine_close(be__list_entry(p, struct be__engine, wlink));
}

/* Shut down: no Engine left, no callback pending. */
static bool worker_shut(const struct be_worker *w)
{
	return be__list_empty(&w->engines) && worker_idle(w);
}

int be__worker_close(struct be_worker *w, int timeout_ms, bool quiet)
{
	uint64_t deadline, now;
	int rc;

	worker_close_start(w, quiet);
	if (worker_shut(w))
		return 0;
	if (w->in_progress)
		return -EINPROGRESS; /* inside a callback: progress goes on after it */
	deadline = timeout_ms < 0 ? UINT64_MAX :
				    be__now_ns() + (uint64_t)timeout_ms * 1000000ull;
	do {
		if (timeout_ms == 0) {
			rc = be__worker_progress(w);
		} else {
			now = be__now_ns();
			rc = be__worker_wait(w, deadline == UINT64_MAX ? -1 :
					     now >= deadline ? 0 :
					     (int)BE_MIN((deadline - now + 999999) / 1000000,
							 (uint64_t)INT32_MAX));
		}
		if (rc < 0)
			return rc;
		if (worker_shut(w))
			return 0;
	} while (be__now_ns() < deadline);
	return -ETIMEDOUT;
}

/* The first step of teardown (be_worker_destroy): from here on the worker
 * counts as inside progress for good (kicks and callbacks are queued, not
 * run), and the calls queued so far run. The caller closes its listeners
 * next, then calls be__worker_destroy(). */
void be__worker_destroy_begin(struct be_worker *w)
{
	if (!w->in_progress++)
		w->progress_thread = pthread_self();
	worker_run_calls(w);
}

/* Fail every Engine: queued and posted sends complete with -ECANCELED;
 * on_close is not delivered while destroying. Then release the socket
 * handles the application did not close, and free the rest. */
void be__worker_destroy(struct be_worker *w)
{
	struct be__list *p, *t;
	int i;

	be__list_for_each_safe(p, t, &w->socks)
		be__list_entry(p, struct be_sock, wlink)->notified = true;
	be__list_for_each_safe(p, t, &w->engines) {
		struct be__engine *e = be__list_entry(p, struct be__engine, wlink);

		if (e->state != BE_ES_FAILED)
			be__engine_fail(e, -ECANCELED, "worker destroyed");
	}
	worker_reap(w);
	be__worker_run_deferred(w);
	/* Release the application's handles of sockets it did not close. */
	be__list_for_each_safe(p, t, &w->socks) {
		struct be_sock *s = be__list_entry(p, struct be_sock, wlink);

		if (!s->app_closed)
			be__sock_close(s);
	}
	be__worker_run_deferred(w);
	worker_run_calls(w);
	for (i = 0; i < BE_CTX_MAX_DEVS; i++)
		if (w->wd[i])
			be__wdev_destroy(w->wd[i]);
	be__wsetup_stop(&w->setup);
	worker_msg_cache_free(w);
	be__wake_close(&w->wake);
	atomic_fetch_sub(&w->ctx->workers, 1);
	free(w);
}
