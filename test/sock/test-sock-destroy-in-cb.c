/*
 * Check that be_worker_destroy() and be_worker_stop() called inside a
 * callback of their own worker refuse with -EDEADLK and change nothing
 * (the progress call running the callback still uses the worker): the
 * worker keeps serving, and destroying it after progress returned works.
 * Both ways a worker runs: progress on the application's thread (from
 * on_recv), and the library thread (from a be_worker_call() function).
 * Before the fix the destroy freed the worker under its own progress.
 */
#include <errno.h>
#include <stdatomic.h>

#include "stest.h"

static struct st_fx f;
static int destroy_rc = 1, stop_rc = 1, got;
static atomic_int lib_destroy_rc = 1, lib_stop_rc = 1;

static void free_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	be_free(buf);
}

/* The server's on_recv: try to destroy and stop its worker, then echo. */
static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	destroy_rc = be_worker_destroy(f.ws[0]);
	stop_rc = be_worker_stop(f.ws[0]);
	ASSERT_OK(be_sock_send(s, buf, len, free_cb, NULL));
}

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	return 0;
}

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	got++;
	be_free(buf);
}

static bool echoed(void *arg)
{
	return got == *(int *)arg;
}

static void lib_call(struct be_worker *w, void *arg)
{
	atomic_store(&lib_destroy_rc, be_worker_destroy(w));
	atomic_store(&lib_stop_rc, be_worker_stop(w));
}

int main(int argc, char **argv)
{
	const struct be_sock_cbs scbs = { .on_recv = srv_recv, .on_accept = srv_accept };
	const struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	struct be_sock *c;
	int want = 1;

	st_fx_init(&f, argc, argv);
	f.scbs = &scbs;
	st_fx_pair(&f);
	c = st_fx_connect(&f, &ccbs, NULL);

	/* Application thread: refused inside on_recv, the echo still goes. */
	ASSERT_OK(be_sock_send(c, st_msg(100, 1), 100, free_cb, NULL));
	st_pump(f.ws, 2, echoed, &want);
	ASSERT_EQ(destroy_rc, -EDEADLK);
	ASSERT_EQ(stop_rc, -EINVAL); /* no library thread to stop */
	want = 2;
	ASSERT_OK(be_sock_send(c, st_msg(5000, 2), 5000, free_cb, NULL));
	st_pump(f.ws, 2, echoed, &want);

	/* Library thread: refused inside a be_worker_call() function; the
	 * thread keeps running and serving until stopped from outside. */
	ASSERT_OK(be_worker_start(f.ws[0]));
	ASSERT_OK(be_worker_call(f.ws[0], lib_call, NULL));
	ST_PUMP_WHILE(&f.ws[1], 1, atomic_load(&lib_stop_rc) == 1);
	ASSERT_EQ(atomic_load(&lib_destroy_rc), -EDEADLK);
	ASSERT_EQ(atomic_load(&lib_stop_rc), -EDEADLK);
	want = 3;
	ASSERT_OK(be_sock_send(c, st_msg(64, 3), 64, free_cb, NULL));
	st_pump(&f.ws[1], 1, echoed, &want);

	/* From outside: the thread is stopped and the worker freed. */
	ASSERT_EQ(be_worker_destroy(f.ws[0]), 0);
	be_sock_close(c);
	ASSERT_EQ(be_worker_destroy(f.ws[1]), 0);
	ASSERT_EQ(be_ctx_destroy(f.ctx), 0);
	return 0;
}
