/*
 * evch.h - the part of an event channel every transport shares (internal).
 *
 * Model. Each transport's evch (shm_evch, tcp_evch, verbs_evch,
 * fake_evch) embeds a struct be__xch as its first member and adds its own
 * fields. The shared part is the handle the ops hand out (x), the
 * fds a worker sleeps on (wake, wake.h: wake.epfd is the evch_fd), the
 * queue of events made but not yet taken (evq: util/evq.h records of
 * struct be_xevent; wake.efd is readable while it is not empty), and the
 * lists of the transport's own conns and listeners on the channel (each
 * transport links its own objects and says through which member). fake
 * keeps its own queue, ordered by when an event is due, and leaves evq
 * empty.
 *
 * Ownership: be__xch_new() allocates the transport's whole object;
 * be__xch_free() frees it with its queued events and its wake fds. The
 * conns and listeners still on the lists are the transport's to take off
 * first.
 *
 * Threads: none of its own; the evch's owner serialises every call
 * (verbs: the queue under verbs_lock, since other threads queue events).
 */
#ifndef BE_XPORT_EVCH_H
#define BE_XPORT_EVCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "util/evq.h"
#include "util/list.h"
#include "xport/wake.h"
#include "xport/xport.h"

struct be__xch {
	struct be_xevch x;          /* the handle ops hand out */
	struct be__wake wake;       /* evch_fd = wake.epfd; efd: evq not empty */
	struct be__evq evq;         /* queued events, oldest first */
	struct be__list conns;      /* the transport's conns on this evch */
	struct be__list listeners;  /* its listeners, closed by evch_destroy */
};

/*
 * be__xch_new() - allocate a zeroed object of @size bytes (the transport's
 * evch, which starts with a struct be__xch) for @dev, with empty lists and
 * queue and its wake made with be__wake_init(@wake_flags, @efd_tag,
 * @tfd_tag). Returns 0 and its handle in *@out, or -EINVAL (@dev or @out
 * NULL), -ENOMEM, or the error of be__wake_init() (nothing allocated).
 */
int be__xch_new(size_t size, struct be_xdev *dev, unsigned int wake_flags, void *efd_tag,
		void *tfd_tag, struct be_xevch **out);

/* be__xch_free() - free @ch (NULL: nothing): its queued events, its wake
 * fds and the object be__xch_new() made. */
void be__xch_free(struct be__xch *ch);

/* be__xch_fd() - the evch_fd of @x (an evch that starts with a struct
 * be__xch), or -EINVAL for NULL. */
int be__xch_fd(struct be_xevch *x);

/*
 * be__xch_conn_reserve() - reserve the events a new conn of @ch may queue
 * (BE_XPORT_CONN_EVENTS + BE_XPORT_SRQ_EVENTS; verbs counts its own), so
 * that none is lost for want of memory later (evq.h). Returns 0 or
 * -ENOMEM (nothing reserved).
 * be__xch_conn_release() - a conn @conn of @ch is going: drop the events
 * that name it and give its reserve back.
 */
int be__xch_conn_reserve(struct be__xch *ch);
void be__xch_conn_release(struct be__xch *ch, const struct be_xconn *conn);

/*
 * be__xch_listen_fd() - a listener's socket for the socket-based
 * transports (shm, tcp): be__listen_fd(@sa, @len, @type, @backlog)
 * (addr.h), watched for input in @ch's epoll set with @tag. Returns the
 * fd, or -errno (nothing left open).
 */
int be__xch_listen_fd(struct be__xch *ch, const struct sockaddr *sa, socklen_t len, int type,
		      int backlog, void *tag);

/* Queue a copy of @ev and make wake.efd readable. Returns 0, or -ENOMEM
 * (logged: the event is lost). */
int be__xch_push(struct be__xch *ch, const struct be_xevent *ev);

/* The oldest event into @ev: 1, or 0 when there is none; wake.efd is
 * drained when the queue becomes empty. */
int be__xch_pop(struct be__xch *ch, struct be_xevent *ev);

/* Drop the events that name @conn, @listener or @srq (NULL: none of that
 * kind); wake.efd is drained when the queue becomes empty. */
void be__xch_purge(struct be__xch *ch, const struct be_xconn *conn,
		   const struct be_xlistener *listener, const struct be_xsrq *srq);

/* True when an event for @conn is queued, of type @type (0: any type). */
bool be__xch_has(const struct be__xch *ch, const struct be_xconn *conn, enum be_xev_type type);

#endif /* BE_XPORT_EVCH_H */
