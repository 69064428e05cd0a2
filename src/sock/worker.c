/*
 * worker.c - the worker's public face: create and destroy, progress and
 * wait, the optional library thread, cross-thread calls, accessors.
 *
 * The worker itself (its queues per transport, the progress loop,
 * adaptive waiting, deferred callbacks, timers) is engine-layer code:
 * src/engine/worker.h says what it is. What is here is the application's
 * side: the library thread, which runs be_worker_wait() until stopped,
 * and teardown, which closes the application's listeners between the
 * worker's two teardown steps.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include <be/be.h>
#include <be/sock.h>
#include "engine/worker.h"
#include "sock/listener.h"
#include "util/common.h"
#include "util/log.h"

int be_worker_create(struct be_ctx *ctx, struct be_worker **out)
{
	return be__worker_create(ctx, out);
}

struct be_ctx *be_worker_ctx(struct be_worker *w)
{
	return w->ctx;
}

unsigned int be_worker_engine_count(struct be_worker *w)
{
	BE_WORKER_ASSERT_THREAD(w);
	return w->nengines;
}

int be_worker_progress(struct be_worker *w)
{
	BE_WORKER_ASSERT_THREAD(w);
	return be__worker_progress(w);
}

int be_worker_wait(struct be_worker *w, int timeout_ms)
{
	BE_WORKER_ASSERT_THREAD(w);
	return be__worker_wait(w, timeout_ms);
}

int be_worker_call(struct be_worker *w, void (*fn)(struct be_worker *w, void *arg), void *arg)
{
	return be__worker_call(w, fn, arg);
}

/* ---- library thread ---- */

static void *worker_thread(void *arg)
{
	struct be_worker *w = arg;

	be__worker_lib_thread_enter(w);
	while (!atomic_load_explicit(&w->stop, memory_order_acquire))
		be_worker_wait(w, 100);
	return NULL;
}

int be_worker_start(struct be_worker *w)
{
	int rc;

	if (atomic_load(&w->running))
		return -EALREADY;
	atomic_store(&w->stop, false);
	rc = -pthread_create(&w->thr, NULL, worker_thread, w);
	if (rc)
		return rc;
	atomic_store(&w->running, true);
	return 0;
}

int be_worker_stop(struct be_worker *w)
{
	if (!atomic_load(&w->running))
		return -EINVAL;
	/* The library thread cannot join itself. */
	if (be__worker_busy_here(w))
		return -EDEADLK;
	atomic_store_explicit(&w->stop, true, memory_order_release);
	be__wake_kick(w->wake.efd);
	pthread_join(w->thr, NULL);
	atomic_store(&w->running, false);
	return 0;
}

/* ---- shutdown and teardown ---- */

static void worker_stop_listeners(struct be_worker *w)
{
	struct be__list *p, *t;

	be__list_for_each_safe(p, t, &w->listeners)
		be__listener_stop(be__list_entry(p, struct be_listener, link));
}

int be_worker_shutdown(struct be_worker *w, int timeout_ms)
{
	if (!w)
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(w);
	worker_stop_listeners(w);
	return be__worker_close(w, timeout_ms, false);
}

int be_worker_destroy(struct be_worker *w)
{
	struct be__list *p, *t;
	uint32_t linger;
	int rc;

	if (!w)
		return 0;
	/* Inside a callback the progress call that runs it still uses the
	 * worker once the callback returns (and a library thread would join
	 * itself): refuse, and leave everything as it was. */
	if (be__worker_busy_here(w))
		return -EDEADLK;
	if (atomic_load(&w->running))
		be_worker_stop(w);
	BE_WORKER_ASSERT_THREAD(w);
	/* A clean shutdown first, within close_timeout_ms (0: none): every
	 * message whose send completed reaches the peer. on_close does not
	 * run while destroying. */
	linger = w->ctx->cfg.close_timeout_ms;
	worker_stop_listeners(w);
	rc = linger ? be__worker_close(w, (int)BE_MIN(linger, (uint32_t)INT32_MAX), true) : 0;
	if (rc)
		be_log_warn("worker: %u Engines did not close within %u ms (%s): disconnecting them",
			    w->nengines, linger, be_strerror(rc));
	be__worker_destroy_begin(w);
	be__list_for_each_safe(p, t, &w->listeners)
		be_listener_close(be__list_entry(p, struct be_listener, link));
	be__worker_destroy(w);
	return 0;
}
