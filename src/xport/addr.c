/*
 * addr.c - "host:port" addresses of the IP transports (see addr.h).
 *
 * tcp/cm.c and verbs/cm.c both parse with be__inet_resolve_all(), and
 * the core keys Engine reuse on be__inet_canon() of the same text, so the
 * key is the first address the transport tries, whatever the spelling
 * ("localhost", "127.1", "[0:0::1]", port "05000"). tcp/cm.c and
 * shm/cm.c open their listening sockets with be__listen_fd() (through
 * evch.c's be__xch_listen_fd()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"
#include "xport/addr.h"
#include "xport/xport.h"

/* 0..65535 in decimal digits only (no sign, no spaces). */
static int inet_parse_port(const char *s, unsigned long *out)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*out = v;
	return 0;
}

static int inet_gai_err(int r)
{
	switch (r) {
	case EAI_NONAME:
	case EAI_AGAIN:
	case EAI_FAIL:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY:
#endif
		return -EHOSTUNREACH;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_SYSTEM:
		return errno > 0 ? -errno : -EHOSTUNREACH;
	default:
		return -EINVAL;
	}
}

/*
 * "[::ffff:a.b.c.d]" is the IPv4 address a.b.c.d: turn it into one, so
 * that every spelling reaches the listener the same way (rdma_cm on
 * Soft-RoCE resolves no route for a v4-mapped address).
 */
static void inet_unmap_v4(struct sockaddr_storage *ss, socklen_t *len)
{
	const struct sockaddr_in6 *in6 = (const void *)ss;
	struct sockaddr_in in4;

	if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	memset(&in4, 0, sizeof(in4));
	in4.sin_family = AF_INET;
	in4.sin_port = in6->sin6_port;
	memcpy(&in4.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &in4, sizeof(in4));
	*len = sizeof(in4);
}

int be__inet_resolve_all(const char *addr, bool passive, struct be__inet_addrs *out)
{
	char buf[BE_XPORT_ADDR_MAX], *host, *port, *colon;
	struct addrinfo hints, *res = NULL, *ai;
	unsigned long pnum;
	size_t hl;
	int r;

	if (!addr || !out || strlen(addr) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, addr);
	colon = strrchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	host = buf;
	port = colon + 1;
	if (inet_parse_port(port, &pnum) || (!passive && pnum == 0))
		return -EINVAL;
	hl = strlen(host);
	if (!hl && !passive)
		return -EINVAL; /* connect needs a host; listen may take any */
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		host++;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	errno = 0;
	r = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (r)
		return inet_gai_err(r);
	/* In the resolver's order (RFC 6724: "localhost" is ::1 before
	 * 127.0.0.1 where /etc/hosts lists both), IP addresses only. */
	out->n = 0;
	for (ai = res; ai && out->n < BE_INET_ADDRS_MAX; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		memset(&out->ss[out->n], 0, sizeof(out->ss[0]));
		out->len[out->n] = (socklen_t)BE_MIN((size_t)ai->ai_addrlen, sizeof(out->ss[0]));
		memcpy(&out->ss[out->n], ai->ai_addr, out->len[out->n]);
		inet_unmap_v4(&out->ss[out->n], &out->len[out->n]);
		out->n++;
	}
	freeaddrinfo(res);
	return out->n ? 0 : -EHOSTUNREACH;
}

int be__inet_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
		     socklen_t *sslen)
{
	struct be__inet_addrs all;
	int r;

	if (!ss || !sslen)
		return -EINVAL;
	r = be__inet_resolve_all(addr, passive, &all);
	if (r)
		return r;
	*ss = all.ss[0];
	*sslen = all.len[0];
	return 0;
}

int be__inet_format(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN], scope[IF_NAMESIZE + 12] = "";
	int n;

	if (!sa || !buf)
		return -EINVAL;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		n = snprintf(buf, len, "%s:%u", ip, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		char ifn[IF_NAMESIZE];

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		/* A link-local address means nothing without its interface. */
		if (in6->sin6_scope_id) {
			if (if_indextoname(in6->sin6_scope_id, ifn))
				snprintf(scope, sizeof(scope), "%%%s", ifn);
			else
				snprintf(scope, sizeof(scope), "%%%u", in6->sin6_scope_id);
		}
		n = snprintf(buf, len, "[%s%s]:%u", ip, scope, ntohs(in6->sin6_port));
	} else {
		return -EAFNOSUPPORT;
	}
	return (n < 0 || (size_t)n >= len) ? -ENOSPC : 0;
}

int be__inet_canon(const char *addr, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc;

	/* Resolved addresses are already unmapped: "[::ffff:a.b.c.d]"
	 * reaches the same listener as "a.b.c.d" and has its key. */
	rc = be__inet_resolve(addr, false, &ss, &sl);
	if (rc)
		return rc;
	return be__inet_format((const struct sockaddr *)&ss, buf, len);
}

int be__listen_fd(const struct sockaddr *sa, socklen_t len, int type, int backlog)
{
	int fd, one = 1, ret;

	if (!sa)
		return -EINVAL;
	fd = socket(sa->sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A restarted server takes its port back at once, past the old
	 * connections still in TIME_WAIT. */
	if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, sa, len) < 0 || listen(fd, backlog > 0 ? backlog : 128) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}
