/*
 * xport.c - what the transports share: the table of built-in transports,
 * names for messages, address text, and the event queue of an evch.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "xport/fake/fake.h"
#include "xport/wake.h"
#include "xport/xport.h"

static const struct be_xport_ops *const xport_builtin[] = {
#if BE_HAVE_VERBS
	&be__xport_verbs_ops,
#endif
	&be__xport_shm_ops,
	&be__xport_tcp_ops,
	&be__xport_fake_ops, /* tests: faults over tcp or shm (fake/fake.h) */
};

const struct be_xport_ops *be__xport_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(xport_builtin) / sizeof(xport_builtin[0]); i++)
		if (name && strcmp(xport_builtin[i]->name, name) == 0)
			return xport_builtin[i];
	return NULL;
}

const struct be_xport_ops *be__xport_at(int i)
{
	if (i < 0 || (size_t)i >= sizeof(xport_builtin) / sizeof(xport_builtin[0]))
		return NULL;
	return xport_builtin[i];
}

const char *be__xwc_status_str(enum be_xwc_status st)
{
	switch (st) {
	case BE_XWC_SUCCESS: return "success";
	case BE_XWC_LOC_LEN_ERR: return "local length error";
	case BE_XWC_LOC_PROT_ERR: return "local protection error";
	case BE_XWC_WR_FLUSH_ERR: return "flushed";
	case BE_XWC_REM_ACCESS_ERR: return "remote access error";
	case BE_XWC_REM_OP_ERR: return "remote operation error";
	case BE_XWC_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case BE_XWC_RNR_RETRY_EXC: return "receiver not ready";
	case BE_XWC_GENERAL_ERR: return "general error";
	case BE_XWC_REM_ABORT_ERR: return "remote aborted: the peer closed the connection";
	}
	return "unknown status";
}

const char *be__xev_type_str(enum be_xev_type t)
{
	switch (t) {
	case BE_XEV_CONNECT_REQUEST: return "CONNECT_REQUEST";
	case BE_XEV_ESTABLISHED: return "ESTABLISHED";
	case BE_XEV_REJECTED: return "REJECTED";
	case BE_XEV_UNREACHABLE: return "UNREACHABLE";
	case BE_XEV_DISCONNECTED: return "DISCONNECTED";
	case BE_XEV_SRQ_LIMIT: return "SRQ_LIMIT";
	case BE_XEV_PORT_CHANGE: return "PORT_CHANGE";
	}
	return "?";
}

int be__xaddr_printf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	return (size_t)n >= len ? -ENOSPC : 0;
}

void be__xevq_init(struct be__evq *q)
{
	be__evq_init(q, sizeof(struct be_xevent));
}

int be__xevq_push(struct be__evq *q, int efd, const struct be_xevent *ev)
{
	/* A connection's events and an SRQ's low-water event come out of
	 * the reserve (BE_XPORT_CONN_EVENTS, BE_XPORT_SRQ_EVENTS) when memory
	 * is short; the others are lost, and said so. */
	int ret = be__evq_push(q, ev, ev->conn || ev->type == BE_XEV_SRQ_LIMIT);

	if (ret < 0) {
		be_log_err("xport: out of memory queueing a %s event; lost",
			   be__xev_type_str(ev->type));
		return ret;
	}
	/* Readable since the first event; the kicks after it add nothing. */
	if (ret)
		be__wake_kick(efd);
	return 0;
}

int be__xevq_pop(struct be__evq *q, int efd, struct be_xevent *ev)
{
	if (!be__evq_pop(q, ev))
		return 0;
	if (be__evq_empty(q))
		be__wake_drain(efd);
	return 1;
}

/* What an event is looked for by: the objects it may name, and a type. */
struct xevq_filter {
	const struct be_xconn *conn;
	const struct be_xlistener *listener;
	const struct be_xsrq *srq;
	enum be_xev_type type; /* 0: any */
};

static bool xevq_match(const void *rec, const void *arg)
{
	const struct be_xevent *ev = rec;
	const struct xevq_filter *f = arg;

	if (f->type && ev->type != f->type)
		return false;
	return (f->conn && ev->conn == f->conn) || (f->listener && ev->listener == f->listener) ||
	       (f->srq && ev->srq == f->srq);
}

void be__xevq_purge(struct be__evq *q, int efd, const struct be_xconn *conn,
		    const struct be_xlistener *listener, const struct be_xsrq *srq)
{
	const struct xevq_filter f = { .conn = conn, .listener = listener, .srq = srq };

	if (be__evq_drop_if(q, xevq_match, &f) && be__evq_empty(q))
		be__wake_drain(efd);
}

bool be__xevq_has(const struct be__evq *q, const struct be_xconn *conn, enum be_xev_type type)
{
	const struct xevq_filter f = { .conn = conn, .type = type };

	return conn && be__evq_any(q, xevq_match, &f);
}
