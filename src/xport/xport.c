/*
 * xport.c - what the transports share: the table of built-in transports,
 * names for messages and address text.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "xport/fake/fake.h"
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
