/*
 * wake.c - the epoll set, eventfd and timerfd behind every evch_fd and
 * cq_fd (the model is in wake.h).
 *
 * All three transports used to build these fds themselves, with the same
 * unwind ladder and the same eventfd writes and reads; they differ only in
 * what else they watch and in the tags they give epoll, which the caller
 * passes in. Nothing here allocates memory or keeps state: a wake is three
 * fds in its owner's struct.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/wake.h"

int be__wake_init(struct be__wake *w, unsigned int flags, void *efd_tag, void *tfd_tag)
{
	int ret;

	w->epfd = w->efd = w->tfd = -1;
	if (flags & ~BE__WAKE_TIMER)
		return -EINVAL;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0) {
		ret = -errno;
		goto err;
	}
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0) {
		ret = -errno;
		goto err_ep;
	}
	if (flags & BE__WAKE_TIMER) {
		w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (w->tfd < 0) {
			ret = -errno;
			goto err_efd;
		}
	}
	ret = be__wake_watch(w, w->efd, EPOLLIN, efd_tag);
	if (ret)
		goto err_tfd;
	if (w->tfd >= 0) {
		ret = be__wake_watch(w, w->tfd, EPOLLIN, tfd_tag);
		if (ret)
			goto err_tfd;
	}
	return 0;

err_tfd:
	if (w->tfd >= 0)
		close(w->tfd);
err_efd:
	close(w->efd);
err_ep:
	close(w->epfd);
err:
	w->epfd = w->efd = w->tfd = -1;
	return ret;
}

void be__wake_close(struct be__wake *w)
{
	if (w->tfd >= 0)
		close(w->tfd);
	if (w->efd >= 0)
		close(w->efd);
	if (w->epfd >= 0)
		close(w->epfd);
	w->epfd = w->efd = w->tfd = -1;
}

int be__wake_watch(struct be__wake *w, int fd, uint32_t events, void *tag)
{
	struct epoll_event e = { .events = events, .data.ptr = tag };

	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
		return -errno;
	return 0;
}

int be__wake_kick(int efd)
{
	uint64_t one = 1;
	int ret;

	if (efd < 0)
		return 0;
	if (write(efd, &one, sizeof(one)) >= 0 || errno == EAGAIN)
		return 0;
	ret = -errno;
	be_log_warn("xport: eventfd write: %s", strerror(-ret));
	return ret;
}

int be__wake_take(int fd)
{
	uint64_t v;
	int ret;

	if (read(fd, &v, sizeof(v)) >= 0)
		return 1;
	if (errno == EAGAIN)
		return 0;
	ret = -errno;
	be_log_warn("xport: eventfd/timerfd read: %s", strerror(-ret));
	return ret;
}

int be__wake_drain(int fd)
{
	int ret = be__wake_take(fd);

	return ret < 0 ? ret : 0;
}

int be__wake_arm_timer(struct be__wake *w, uint64_t at_ns)
{
	struct itimerspec its;
	int ret;

	if (w->tfd < 0)
		return -EBADF;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(at_ns / 1000000000ull);
	its.it_value.tv_nsec = (long)(at_ns % 1000000000ull);
	if (timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		return 0;
	ret = -errno;
	be_log_warn("xport: timerfd_settime: %s", strerror(-ret));
	return ret;
}
