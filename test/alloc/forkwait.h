/*
 * forkwait.h - waiting for a forked child in the bemalloc fork tests,
 * with a bound: a child that hangs (a lock held across fork(), say) is
 * killed and the test fails instead of running into ctest's timeout.
 */
#ifndef BE_TEST_ALLOC_FORKWAIT_H
#define BE_TEST_ALLOC_FORKWAIT_H

#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* The wait status of @pid; fails the test if it has not ended within
 * @timeout_s seconds (it is killed first). */
static inline int tf_wait(pid_t pid, int timeout_s)
{
	struct timespec start, now, nap = { 0, 2000000 };
	int status;
	pid_t r;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			TEST_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > timeout_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			TEST_FAIL("child %d still running after %d s: hung", (int)pid, timeout_s);
		}
		nanosleep(&nap, NULL);
	}
}

/* Wait for @pid and fail unless it exited with status 0. */
static inline void tf_wait_ok(pid_t pid, int timeout_s)
{
	int st = tf_wait(pid, timeout_s);

	if (WIFSIGNALED(st))
		TEST_FAIL("child %d died of signal %d", (int)pid, WTERMSIG(st));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		TEST_FAIL("child %d exited with status %d", (int)pid, WEXITSTATUS(st));
}

#endif /* BE_TEST_ALLOC_FORKWAIT_H */
