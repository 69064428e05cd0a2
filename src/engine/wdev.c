/*
 * wdev.c - a worker's queues on one transport: its event channel,
 * completion queue and shared receive queue, and the receive buffers
 * posted on the SRQ.
 *
 * Model. A worker has one wdev per transport it uses (worker.h), created
 * on first use (be__worker_wdev) and destroyed with the worker; only the
 * worker's thread touches it, but for its set-up on an RDMA device.
 *
 * Set-up off the worker. Creating a CQ and an SRQ on an RDMA device and
 * posting the first receive buffers (growing the pool registers its new
 * blocks on every device) took 60-190 ms in the Soft-RoCE guest; on the
 * worker's thread that held every other Engine of the worker, tcp and shm
 * included, at its first verbs connect. So be__wdev_start() runs that
 * set-up on a thread of its own, which hands the queues over when done
 * (an acquire load of wd->built, then pthread_join); the Engines that
 * connect meanwhile reserve their grants at once (counters only: the
 * buffers for what they reserved beyond srq_depth are posted by
 * be__wdev_finish()) and start their transport connect when the queues
 * are there. A listener still sets up its queues in be_listen(): they
 * must exist before the listen does.
 *
 * Receive buffers. A wdev posts bemalloc buffers of recv_buf_size on
 * its SRQ and never frees them before the worker dies (they are listed in
 * wd->bufs). Engines reserve their peers' credits from the SRQ: the sum of
 * credits granted to live Engines never exceeds the buffers the wdev
 * owns, and a buffer is reposted (and only then its credit returned) at
 * the end of the progress call that handled its frames, after the replies
 * its callbacks sent went out, so a peer that respects its credits always
 * finds a posted receive. The SRQ grows (up to srq_max_depth and the
 * device's limit) when a new Engine needs more; the CQ is sized so that
 * all posted receives plus every Engine's send queue fit.
 *
 * Who calls what: Engines reserve and release grants (engine.c,
 * credit_elastic.c) and repost buffers whose frames they handled (rx.c,
 * at once or through be__worker_repost_later at the end of progress);
 * the worker creates and destroys wdevs and polls their queues.
 */
#define _GNU_SOURCE /* SCHED_BATCH */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

/* Completions drained from the CQ at a time on teardown. */
#define WDEV_DRAIN_BATCH 32

static int wdev_post(struct be__wdev *wd, void *buf)
{
	struct be_xrecv_wr wr, *bad;
	uintptr_t a = (uintptr_t)buf;
	int rc;

	if (a < wd->lkey_base || a >= wd->lkey_end) {
		struct be_alloc_region r;

		rc = be_alloc_lookup(buf, wd->cd->alloc_dev, &r);
		if (rc)
			return rc;
		wd->lkey_base = (uintptr_t)r.base;
		wd->lkey_end = (uintptr_t)r.base + r.len;
		wd->lkey = r.lkey;
	}
	wr.next = NULL;
	wr.wr_id = (uint64_t)a;
	wr.sge.addr = (uint64_t)a;
	wr.sge.length = wd->w->ctx->cfg.recv_buf_size;
	wr.sge.lkey = wd->lkey;
	rc = wd->cd->ops->srq_post_recv(wd->srq, &wr, &bad);
	return rc > 0 ? -rc : rc;
}

/* Keep @buf for a later retry. The list cannot outgrow wd->bufs, whose
 * capacity it follows; without memory for it the buffer is only lost to
 * the SRQ (still freed with the wdev), which the counter shows. */
static void wdev_keep_unposted(struct be__wdev *wd, void *buf)
{
	if (be__grow(&wd->unposted, &wd->capunposted, wd->nunposted + 1, sizeof(*wd->unposted),
		     16))
		return;
	wd->unposted[wd->nunposted++] = buf;
}

/*
 * A receive buffer that cannot go back on the SRQ must not be counted as
 * posted: a credit for it would let the peer SEND into nothing. So a
 * failure is reported to the caller (which fails the Engine the credit
 * belonged to instead of returning it), counted, and the buffer retried
 * from the next progress, so the SRQ recovers its depth once the
 * transport does.
 */
int be__wdev_repost(struct be__wdev *wd, void *buf)
{
	int rc = wdev_post(wd, buf);

	if (rc) {
		wd->repost_errors++;
		be_log_err("worker: cannot repost a %s receive buffer: %s", wd->cd->name,
			   be_strerror(rc));
		wdev_keep_unposted(wd, buf);
	}
	return rc;
}

void be__wdev_retry_reposts(struct be__wdev *wd)
{
	while (wd->nunposted) {
		if (wdev_post(wd, wd->unposted[wd->nunposted - 1]))
			return;
		wd->nunposted--;
	}
}

/*
 * Fault in the pages of a new receive buffer now, once. Otherwise the
 * first receive into each page takes a page fault on the data path: the
 * SRQ rotates through all its buffers, so a worker's first few thousand
 * receives each paid one (13 us apiece on the test VM, 5-6 % of a shm
 * be-perf bw run on the sender, which receives the acks). verbs pins
 * them when bemalloc registers the block; shm and tcp need this. One
 * write per page: the contents do not matter.
 */
static void wdev_touch(void *buf, uint32_t size)
{
	volatile uint8_t *p = buf;
	uint32_t off;

	for (off = 0; off < size; off += 4096)
		p[off] = 0;
	p[size - 1] = 0;
}

/* Allocate and post @n more receive buffers. */
static int wdev_grow(struct be__wdev *wd, uint32_t n)
{
	uint32_t size = wd->w->ctx->cfg.recv_buf_size, i;
	int rc;

	rc = be__grow(&wd->bufs, &wd->capbufs, wd->nbufs + n, sizeof(*wd->bufs), wd->nbufs + n);
	if (rc)
		return rc;
	for (i = 0; i < n; i++) {
		void *buf = be_alloc(size);

		if (!buf) {
			be_log_err("worker: no memory for receive buffers: %s",
				   be_alloc_last_error());
			return -ENOMEM;
		}
		wd->bufs[wd->nbufs++] = buf;
		wdev_touch(buf, size);
		rc = be__wdev_repost(wd, buf);
		if (rc)
			return rc;
	}
	return 0;
}

static uint32_t wdev_srq_cap(const struct be__wdev *wd)
{
	return wd->cd->srq_max_depth;
}

/* The depth of the CQ we create: the configured one, within the device's
 * limit (a verbs cq_create clamps it; our accounting must use the same). */
static uint32_t wdev_cq_depth(const struct be__wdev *wd)
{
	return wd->cd->cq_depth;
}

/* The receive buffers the first set-up posts. */
static uint32_t wdev_nbufs_init(const struct be__wdev *wd)
{
	return BE_MIN(wd->w->ctx->cfg.srq_depth, wdev_srq_cap(wd));
}

/* The buffers @wd owns, or will own once its builder is done (the
 * builder writes nbufs: the worker may not read it before). */
static uint32_t wdev_nbufs(const struct be__wdev *wd)
{
	return wd->building ? wdev_nbufs_init(wd) : wd->nbufs;
}

/* Reserve @credits receives, and @sq more CQ entries (a new Engine's
 * send queue). */
static int wdev_reserve(struct be__wdev *wd, uint32_t credits, uint32_t sq)
{
	uint64_t want = (uint64_t)wd->reserved + credits;
	int rc;

	/* The SRQ must hold every granted credit, and the CQ every posted
	 * receive plus every Engine's full send queue (a CQ overrun is fatal
	 * on verbs). */
	if (want > wdev_srq_cap(wd))
		return -ENOSPC;
	if (BE_MAX(want, (uint64_t)wdev_nbufs(wd)) + wd->cq_reserved + sq > wdev_cq_depth(wd))
		return -ENOSPC;
	if (want > wd->nbufs && !wd->building) {
		rc = wdev_grow(wd, (uint32_t)want - wd->nbufs);
		if (rc)
			return rc;
	}
	wd->reserved = (uint32_t)want;
	wd->cq_reserved += sq;
	return 0;
}

int be__wdev_reserve(struct be__wdev *wd, uint32_t credits)
{
	return wdev_reserve(wd, credits, wd->cd->sq_depth);
}

int be__wdev_reserve_recv(struct be__wdev *wd, uint32_t n)
{
	return wdev_reserve(wd, n, 0);
}

void be__wdev_unreserve_recv(struct be__wdev *wd, uint32_t n)
{
	wd->reserved -= n;
}

void be__wdev_unreserve(struct be__wdev *wd, uint32_t credits)
{
	be__wdev_unreserve_recv(wd, credits);
	wd->cq_reserved -= wd->cd->sq_depth;
}

/* Wait until the set-up thread built @wd. */
static void wdev_wait_built(struct be__wdev *wd)
{
	struct be__wsetup *ws = &wd->w->setup;

	if (atomic_load_explicit(&wd->built, memory_order_acquire))
		return;
	pthread_mutex_lock(&ws->mu);
	while (!atomic_load_explicit(&wd->built, memory_order_acquire))
		pthread_cond_wait(&ws->done, &ws->mu);
	pthread_mutex_unlock(&ws->mu);
}

/* Destroy @wd's queues and free every receive buffer it owns (the SRQ
 * goes first, so none is still posted); a builder still running is
 * waited for. */
void be__wdev_destroy(struct be__wdev *wd)
{
	const struct be_xport_ops *ops = wd->cd->ops;
	struct be_xwc wc[WDEV_DRAIN_BATCH];
	uint32_t i;

	if (wd->building)
		wdev_wait_built(wd);
	if (wd->srq)
		ops->srq_destroy(wd->srq);
	/* Drain the flushed receives; the buffers are freed below anyway. */
	if (wd->cq)
		while (ops->cq_poll(wd->cq, wc, WDEV_DRAIN_BATCH) > 0)
			;
	for (i = 0; i < wd->nbufs; i++)
		be_free(wd->bufs[i]);
	free(wd->bufs);
	free(wd->unposted);
	if (wd->cq)
		ops->cq_destroy(wd->cq);
	if (wd->evch)
		ops->evch_destroy(wd->evch);
	free(wd);
}

static struct be__wdev *wdev_new(struct be_worker *w, struct be__cdev *cd)
{
	struct be__wdev *wd = calloc(1, sizeof(*wd));

	if (!wd)
		return NULL;
	wd->w = w;
	wd->cd = cd;
	be__list_init(&wd->waiting);
	return wd;
}

/* The queues of @wd: event channel, CQ (cq_depth within the device's
 * limit), SRQ, and the first receive buffers posted. 0 or -errno (what
 * was made is freed by be__wdev_destroy). */
static int wdev_build(struct be__wdev *wd)
{
	const struct be_xport_ops *ops = wd->cd->ops;
	struct be__cdev *cd = wd->cd;
	int rc;

	rc = ops->evch_create(cd->dev, &wd->evch);
	if (!rc)
		rc = ops->cq_create(cd->dev, wdev_cq_depth(wd), &wd->cq);
	if (!rc)
		rc = ops->srq_create(wd->cq, wdev_srq_cap(wd), &wd->srq);
	if (rc)
		return rc;
	wd->srq->user = wd;
	return wdev_grow(wd, wdev_nbufs_init(wd));
}

/*
 * be__wdev_create() - the queues of @cd's transport for @w (wdev_build),
 * made on this thread. 0 or -errno, with nothing left behind.
 */
int be__wdev_create(struct be_worker *w, struct be__cdev *cd, struct be__wdev **out)
{
	struct be__wdev *wd = wdev_new(w, cd);
	int rc;

	if (!wd)
		return -ENOMEM;
	rc = wdev_build(wd);
	if (rc) {
		be_log_err("worker: cannot set up %s queues: %s", cd->name, be_strerror(rc));
		be__wdev_destroy(wd);
		return rc;
	}
	*out = wd;
	return 0;
}

/* The set-up thread of a worker: builds the wdevs queued on it, in
 * order, until told to stop with none left. */
static void *wdev_setup_main(void *arg)
{
	struct be__wsetup *ws = arg;

	pthread_mutex_lock(&ws->mu);
	for (;;) {
		struct be__wdev *wd;

		if (!ws->njobs) {
			if (ws->stop)
				break;
			pthread_cond_wait(&ws->cv, &ws->mu);
			continue;
		}
		wd = ws->jobs[0];
		memmove(ws->jobs, ws->jobs + 1, --ws->njobs * sizeof(ws->jobs[0]));
		pthread_mutex_unlock(&ws->mu);
		wd->build_rc = wdev_build(wd);
		pthread_mutex_lock(&ws->mu);
		atomic_store_explicit(&wd->built, true, memory_order_release);
		pthread_cond_broadcast(&ws->done);
		be__wake_kick(wd->w->wake.efd);
	}
	pthread_mutex_unlock(&ws->mu);
	return NULL;
}

int be__wsetup_start(struct be__wsetup *ws)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	/* Neither initialiser can fail on Linux: no unwinding. */
	ws->mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	ws->cv = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	ws->done = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	rc = -pthread_attr_init(&attr);
	if (rc)
		return rc;
	/* SCHED_BATCH: the thread does not take the CPU from the worker
	 * when it wakes up to build (where allowed; else as the caller). */
	if (pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED) ||
	    pthread_attr_setschedpolicy(&attr, SCHED_BATCH))
		pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
	/* Signals stay with the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&ws->thr, &attr, wdev_setup_main, ws);
	if (rc == -EPERM)
		rc = -pthread_create(&ws->thr, NULL, wdev_setup_main, ws);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	ws->running = !rc;
	return rc;
}

/* Queue @wd on the set-up thread; NULL: ask it to stop once the queue
 * is empty. */
static void wsetup_post(struct be__wsetup *ws, struct be__wdev *wd)
{
	pthread_mutex_lock(&ws->mu);
	if (wd)
		ws->jobs[ws->njobs++] = wd;
	else
		ws->stop = true;
	pthread_cond_signal(&ws->cv);
	pthread_mutex_unlock(&ws->mu);
}

void be__wsetup_stop(struct be__wsetup *ws)
{
	if (!ws->running)
		return;
	wsetup_post(ws, NULL);
	pthread_join(ws->thr, NULL);
	ws->running = false;
}

int be__wdev_start(struct be_worker *w, struct be__cdev *cd, struct be__wdev **out)
{
	struct be__wsetup *ws = &w->setup;
	struct be__wdev *wd;

	if (!ws->running)
		return -EAGAIN;
	wd = wdev_new(w, cd);
	if (!wd)
		return -ENOMEM;
	wd->building = true;
	wsetup_post(ws, wd);
	*out = wd;
	return 0;
}

int be__wdev_finish(struct be__wdev *wd)
{
	int rc;

	wdev_wait_built(wd);
	wd->building = false;
	rc = wd->build_rc;
	/* Engines that connected meanwhile may have reserved more. */
	if (!rc && wd->reserved > wd->nbufs)
		rc = wdev_grow(wd, wd->reserved - wd->nbufs);
	if (rc)
		be_log_err("worker: cannot set up %s queues: %s", wd->cd->name,
			   be_strerror(rc));
	return rc;
}
