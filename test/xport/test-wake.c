/*
 * Check the wakeup fds every transport hands out (src/xport/wake.c): the
 * epoll set is readable exactly while its eventfd was kicked and not yet
 * drained (one drain clears many kicks), reports the tags given for the
 * eventfd, the timerfd and watched fds, a timer armed at a time already
 * past fires and one far ahead does not, a wake without a timer refuses
 * to arm one, bad flags fail with nothing left open, and close leaves the
 * watched fds (the caller's) open and may be called twice.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "test.h"
#include "util/common.h"
#include "xport/wake.h"

static int efd_tag, tfd_tag, pipe_tag;

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0);
}

/* The tag of the one ready entry of @w's set (waits up to 10 s, a guard
 * against a hang, not a timing check), NULL if none. */
static void *ready_tag(struct be__wake *w, int timeout_ms)
{
	struct epoll_event e[4];
	int n = epoll_wait(w->epfd, e, 4, timeout_ms);

	ASSERT(n >= 0 && n <= 1);
	return n ? e[0].data.ptr : NULL;
}

int main(void)
{
	struct be__wake w, t;
	int pfd[2], i;

	/* Bad flags: -EINVAL, nothing open. */
	ASSERT_EQ(be__wake_init(&w, 0x80, NULL, NULL), -EINVAL);
	ASSERT_EQ(w.epfd, -1);
	ASSERT_EQ(w.efd, -1);
	ASSERT_EQ(w.tfd, -1);

	/* No timer asked for: no timerfd, arming one is refused. */
	ASSERT_OK(be__wake_init(&w, 0, &efd_tag, &tfd_tag));
	ASSERT_GE(w.epfd, 0);
	ASSERT_GE(w.efd, 0);
	ASSERT_EQ(w.tfd, -1);
	ASSERT_EQ(be__wake_arm_timer(&w, 1), -EBADF);
	ASSERT_EQ(fcntl(w.epfd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ASSERT_EQ(fcntl(w.efd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);

	/* Kicks make it readable until one drain; draining twice is fine. */
	ASSERT_EQ(readable(w.epfd), 0);
	ASSERT_OK(be__wake_drain(w.efd));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(be__wake_kick(w.efd), 0);
	ASSERT_EQ(readable(w.epfd), 1);
	ASSERT_PTR_EQ(ready_tag(&w, 0), &efd_tag);
	ASSERT_EQ(be__wake_drain(w.efd), 0);
	ASSERT_EQ(readable(w.epfd), 0);
	ASSERT_EQ(be__wake_drain(w.efd), 0);
	ASSERT_EQ(be__wake_kick(-1), 0); /* a peer that sent no eventfd */

	/* A watched fd reports its own tag; it stays the caller's. */
	ASSERT_OK(pipe2(pfd, O_NONBLOCK | O_CLOEXEC));
	ASSERT_OK(be__wake_watch(&w, pfd[0], EPOLLIN, &pipe_tag));
	ASSERT_EQ(be__wake_watch(&w, pfd[0], EPOLLIN, &pipe_tag), -EEXIST);
	ASSERT_EQ(be__wake_watch(&w, -1, EPOLLIN, NULL), -EBADF);
	ASSERT_EQ(write(pfd[1], "x", 1), 1);
	ASSERT_PTR_EQ(ready_tag(&w, 0), &pipe_tag);
	be__wake_close(&w);
	ASSERT_EQ(w.epfd, -1);
	ASSERT_EQ(w.efd, -1);
	be__wake_close(&w); /* twice: nothing */
	{
		char c;

		ASSERT_EQ(read(pfd[0], &c, 1), 1); /* still open */
	}
	close(pfd[0]);
	close(pfd[1]);

	/* Timer: far ahead does not fire, past fires, disarm stops it. */
	ASSERT_OK(be__wake_init(&t, BE__WAKE_TIMER, &efd_tag, &tfd_tag));
	ASSERT_GE(t.tfd, 0);
	ASSERT_OK(be__wake_arm_timer(&t, be__now_ns() + 3600ull * 1000000000ull));
	ASSERT_EQ(readable(t.epfd), 0);
	ASSERT_OK(be__wake_arm_timer(&t, 0));
	ASSERT_OK(be__wake_arm_timer(&t, be__now_ns()));
	ASSERT_PTR_EQ(ready_tag(&t, 10000), &tfd_tag);
	ASSERT_OK(be__wake_drain(t.tfd));
	ASSERT_EQ(readable(t.epfd), 0);
	ASSERT_OK(be__wake_arm_timer(&t, be__now_ns() + 3600ull * 1000000000ull));
	ASSERT_OK(be__wake_arm_timer(&t, 0));
	ASSERT_EQ(readable(t.epfd), 0);
	/* The eventfd and the timerfd report apart. */
	ASSERT_OK(be__wake_kick(t.efd));
	ASSERT_PTR_EQ(ready_tag(&t, 0), &efd_tag);
	be__wake_close(&t);
	ASSERT_EQ(t.tfd, -1);
	fprintf(stderr, "ok\n");
	return 0;
}
