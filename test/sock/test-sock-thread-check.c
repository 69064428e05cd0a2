/*
 * Check that a debug build (no NDEBUG) stops a worker's function called
 * off the worker's thread: while the library thread runs the worker, a
 * be_sock_connect() or be_worker_progress() from the main thread fails
 * an assertion (SIGABRT) that names the function, instead of racing the
 * library thread on the worker's lists. Each case runs in a child
 * process. Release builds compile the check out: skipped (77).
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stest.h"

static void child(struct st *t, int which)
{
	const struct be_sock_cbs ccbs = { 0 };
	struct be_worker *w;
	struct be_sock *s;
	struct be_ctx *ctx;

	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_worker_start(w));
	if (which == 0)
		be_sock_connect(w, "tcp://127.0.0.1:1", &ccbs, NULL, &s);
	else
		be_worker_progress(w);
	_exit(0); /* not reached in a debug build */
}

int main(int argc, char **argv)
{
	struct st t;
	int which;

	st_init(&t, argc, argv);
#ifdef NDEBUG
	fprintf(stderr, "release build: the thread check is compiled out: skipped\n");
	return 77;
#endif
	for (which = 0; which < 2; which++) {
		int status;
		pid_t pid = fork();

		ASSERT(pid >= 0);
		if (pid == 0)
			child(&t, which);
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		ASSERT(WIFSIGNALED(status));
		ASSERT_EQ(WTERMSIG(status), SIGABRT);
	}
	return 0;
}
