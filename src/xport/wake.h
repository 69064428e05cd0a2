/*
 * wake.h - the fds a worker sleeps on: one per evch and one per cq.
 *
 * Model. xport.h hands out one fd per evch (evch_fd) and one per cq
 * (cq_fd); a worker adds them to its own epoll set or polls them, and
 * sleeps until one is readable. Every transport makes that fd the same
 * way, so it lives here:
 *
 *   epfd   the fd handed out: an epoll set over the fds below and the
 *          transport's own ones (sockets, rdma_cm's channel, a completion
 *          channel), added with be__wake_watch().
 *   efd    an eventfd (non-blocking) the transport makes readable itself
 *          with be__wake_kick() when it has queued work that no other fd
 *          signals (queued events, completions made locally), and clears
 *          with be__wake_drain(). Its counter is not a count of anything:
 *          one drain clears it however often it was kicked.
 *   tfd    optional (BE__WAKE_TIMER): a CLOCK_MONOTONIC timerfd for
 *          deadlines, armed at an absolute be__now_ns() time with
 *          be__wake_arm_timer(); -1 when not asked for.
 *
 * Each entry of the epoll set carries a tag (epoll_data.ptr) chosen by its
 * owner, so a transport that reads its own epoll set (shm, tcp) can tell
 * the eventfd and the timerfd from its sockets; verbs only hands its sets
 * out and passes NULL.
 *
 * Ownership: a struct be__wake is embedded in its owner (init/close, no
 * allocation); the fds are its own, and be__wake_close() closes them. The
 * fds it watches stay their owners': close() removes an fd from the epoll
 * set by itself, so they may be closed before or after the wake.
 *
 * Threads: the functions keep no state of their own. Kicking an eventfd is
 * safe from any thread (shm kicks the peer process's eventfds); the rest
 * follows its owner's rule (evch and cq: one thread at a time).
 */
#ifndef BE_XPORT_WAKE_H
#define BE_XPORT_WAKE_H

#include <stdint.h>

struct be__wake {
	int epfd;   /* the fd handed out: an epoll set over efd, tfd and more */
	int efd;    /* eventfd: readable from a kick until drained */
	int tfd;    /* timerfd for deadlines, -1 without BE__WAKE_TIMER */
};

/* be__wake_init() flags. */
#define BE__WAKE_TIMER 0x1 /* also make the timerfd */

/*
 * be__wake_init() - make @w's epoll set, its eventfd and, with
 * BE__WAKE_TIMER in @flags, its timerfd, each close-on-exec and
 * non-blocking, both watched for input with the tags @efd_tag and
 * @tfd_tag (epoll_data.ptr; @tfd_tag is unused without the timer).
 *
 * Returns 0, or -errno from epoll_create1(), eventfd(), timerfd_create()
 * or epoll_ctl() (-EMFILE, -ENOMEM, ...), or -EINVAL for unknown @flags;
 * on error nothing is left open and @w holds -1 in every field.
 */
int be__wake_init(struct be__wake *w, unsigned int flags, void *efd_tag, void *tfd_tag);

/*
 * be__wake_close() - close @w's fds (those that are >= 0) and set them to
 * -1, so a second call does nothing. The fds added with be__wake_watch()
 * stay open: they belong to the caller.
 */
void be__wake_close(struct be__wake *w);

/*
 * be__wake_watch() - add @fd (the caller's, borrowed: it stays open and
 * the caller's) to @w's epoll set, for @events, reported with @tag as
 * epoll_data.ptr. Returns 0 or -errno from epoll_ctl() (-EEXIST when @fd
 * is already there, -EBADF, -ENOMEM, ...).
 */
int be__wake_watch(struct be__wake *w, int fd, uint32_t events, void *tag);

/*
 * be__wake_kick() - make the eventfd @efd readable (add 1 to its counter).
 * @efd may be another object's or another process's (shm passes its
 * eventfds to the peer); a negative @efd is ignored (a peer that sent
 * none). Returns 0; -EAGAIN never (a counter that would overflow is
 * readable already); another -errno from write() is logged and returned.
 * Threads: any.
 */
int be__wake_kick(int efd);

/*
 * be__wake_drain() - make the eventfd or timerfd @fd unreadable again by
 * reading its counter (one read clears both kinds). Returns 0 (also when
 * there was nothing to read) or, logged, another -errno from read().
 */
int be__wake_drain(int fd);

/*
 * be__wake_take() - be__wake_drain(), telling whether @fd was readable:
 * returns 1 (it was, and is not now), 0 (it was not) or, logged, another
 * -errno from read().
 */
int be__wake_take(int fd);

/*
 * be__wake_arm_timer() - make @w's timerfd readable at @at_ns, an absolute
 * be__now_ns() (CLOCK_MONOTONIC) time, replacing any earlier setting;
 * @at_ns 0 disarms it. A time already past fires at once. Returns 0,
 * -EBADF when @w has no timer, or, logged, -errno from timerfd_settime().
 */
int be__wake_arm_timer(struct be__wake *w, uint64_t at_ns);

#endif /* BE_XPORT_WAKE_H */
