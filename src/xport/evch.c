/*
 * evch.c - the part of an event channel every transport shares: its
 * allocation, its wake fds and its queue of events (evch.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/common.h"
#include "util/log.h"
#include "xport/addr.h"
#include "xport/evch.h"

int be__xch_new(size_t size, struct be_xdev *dev, unsigned int wake_flags, void *efd_tag,
		void *tfd_tag, struct be_xevch **out)
{
	struct be__xch *ch;
	int ret;

	if (!dev || !out)
		return -EINVAL;
	ch = calloc(1, size);
	if (!ch)
		return -ENOMEM;
	ch->x.dev = dev;
	be__list_init(&ch->conns);
	be__list_init(&ch->listeners);
	be__evq_init(&ch->evq, sizeof(struct be_xevent));
	ret = be__wake_init(&ch->wake, wake_flags, efd_tag, tfd_tag);
	if (ret) {
		free(ch);
		return ret;
	}
	*out = &ch->x;
	return 0;
}

void be__xch_free(struct be__xch *ch)
{
	if (!ch)
		return;
	be__evq_clear(&ch->evq);
	be__wake_close(&ch->wake);
	free(ch);
}

int be__xch_fd(struct be_xevch *x)
{
	return x ? container_of(x, struct be__xch, x)->wake.epfd : -EINVAL;
}

int be__xch_conn_reserve(struct be__xch *ch)
{
	return be__evq_reserve(&ch->evq, BE_XPORT_CONN_EVENTS + BE_XPORT_SRQ_EVENTS);
}

void be__xch_conn_release(struct be__xch *ch, const struct be_xconn *conn)
{
	be__xch_purge(ch, conn, NULL, NULL);
	be__evq_unreserve(&ch->evq, BE_XPORT_CONN_EVENTS + BE_XPORT_SRQ_EVENTS);
}

int be__xch_listen_fd(struct be__xch *ch, const struct sockaddr *sa, socklen_t len, int type,
		      int backlog, void *tag)
{
	int fd = be__listen_fd(sa, len, type, backlog);
	int ret;

	if (fd < 0)
		return fd;
	ret = be__wake_watch(&ch->wake, fd, EPOLLIN, tag);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int be__xch_push(struct be__xch *ch, const struct be_xevent *ev)
{
	/* A connection's events and an SRQ's low-water event come out of
	 * the reserve (BE_XPORT_CONN_EVENTS, BE_XPORT_SRQ_EVENTS) when memory
	 * is short; the others are lost, and said so. */
	int ret = be__evq_push(&ch->evq, ev, ev->conn || ev->type == BE_XEV_SRQ_LIMIT);

	if (ret < 0) {
		be_log_err("xport: out of memory queueing a %s event; lost",
			   be__xev_type_str(ev->type));
		return ret;
	}
	/* Readable since the first event; the kicks after it add nothing. */
	if (ret)
		be__wake_kick(ch->wake.efd);
	return 0;
}

int be__xch_pop(struct be__xch *ch, struct be_xevent *ev)
{
	if (!be__evq_pop(&ch->evq, ev))
		return 0;
	if (be__evq_empty(&ch->evq))
		be__wake_drain(ch->wake.efd);
	return 1;
}

/* What an event is looked for by: the objects it may name, and a type. */
struct xch_filter {
	const struct be_xconn *conn;
	const struct be_xlistener *listener;
	const struct be_xsrq *srq;
	enum be_xev_type type; /* 0: any */
};

static bool xch_match(const void *rec, const void *arg)
{
	const struct be_xevent *ev = rec;
	const struct xch_filter *f = arg;

	if (f->type && ev->type != f->type)
		return false;
	return (f->conn && ev->conn == f->conn) || (f->listener && ev->listener == f->listener) ||
	       (f->srq && ev->srq == f->srq);
}

void be__xch_purge(struct be__xch *ch, const struct be_xconn *conn,
		   const struct be_xlistener *listener, const struct be_xsrq *srq)
{
	const struct xch_filter f = { .conn = conn, .listener = listener, .srq = srq };

	if (be__evq_drop_if(&ch->evq, xch_match, &f) && be__evq_empty(&ch->evq))
		be__wake_drain(ch->wake.efd);
}

bool be__xch_has(const struct be__xch *ch, const struct be_xconn *conn, enum be_xev_type type)
{
	const struct xch_filter f = { .conn = conn, .type = type };

	return conn && be__evq_any(&ch->evq, xch_match, &f);
}
