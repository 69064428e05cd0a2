/*
 * addr.h - "host:port" addresses of the IP transports (tcp, verbs).
 *
 * One parser for both, so that they accept the same spellings and the
 * core can compute, before it connects anything, the numeric address the
 * transport will connect to (the Engine reuse key, see engine.c).
 *
 * Forms: "host:port", "[v6]:port", and ":port" when listening (any
 * address). host is an IPv4 or IPv6 address in any form getaddrinfo()
 * takes, or a name; port is decimal (leading zeros allowed), 1..65535 to
 * connect, 0..65535 to listen. A name is resolved with getaddrinfo(),
 * which blocks. A connect tries its results in turn until one answers
 * (a stock Debian /etc/hosts makes "localhost" ::1, then 127.0.0.1); a
 * listener takes the first.
 *
 * Also the listening socket of the socket-based transports (tcp, shm).
 */
#ifndef BE_XPORT_ADDR_H
#define BE_XPORT_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* At most this many results of one name are kept (and tried). */
#define BE_INET_ADDRS_MAX 8

/* The addresses a name resolves to, in the resolver's order. */
struct be__inet_addrs {
	unsigned n; /* 1..BE_INET_ADDRS_MAX once resolved */
	socklen_t len[BE_INET_ADDRS_MAX];
	struct sockaddr_storage ss[BE_INET_ADDRS_MAX];
};

/*
 * be__inet_resolve_all() - parse and resolve @addr into @out: every IPv4
 * and IPv6 result, at most BE_INET_ADDRS_MAX, in getaddrinfo()'s order.
 * @passive as for be__inet_resolve(). Blocks while a name resolves.
 * Returns 0 (out->n >= 1) or as be__inet_resolve().
 */
int be__inet_resolve_all(const char *addr, bool passive, struct be__inet_addrs *out);

/*
 * be__inet_resolve() - parse and resolve @addr into @ss (*@sslen bytes
 * used): the first result only. @passive: for listening (empty host = any, port 0 allowed).
 * Blocks while a name resolves. Returns 0, -EINVAL (malformed, port out
 * of range), -EHOSTUNREACH (the name does not resolve), -ENOMEM, or
 * another -errno from the resolver.
 */
int be__inet_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
		     socklen_t *sslen);

/*
 * be__inet_format() - the numeric text of @sa into @buf: "a.b.c.d:port"
 * or "[v6%scope]:port", which be__inet_resolve() takes back without a
 * lookup. Returns 0, -ENOSPC (@len too small) or -EAFNOSUPPORT.
 */
int be__inet_format(const struct sockaddr *sa, char *buf, size_t len);

/*
 * be__inet_canon() - the canonical form of a connect address: its first
 * result, an IPv4-mapped IPv6 address folded to IPv4, formatted
 * numerically. Two addresses with the same canonical form reach the same
 * listener, except that a connect to a name falls back to the name's
 * later results when the first does not answer. Blocks while a name
 * resolves. Returns 0 or as be__inet_resolve() and be__inet_format().
 */
int be__inet_canon(const char *addr, char *buf, size_t len);

/*
 * be__listen_fd() - a socket of @type (SOCK_STREAM, SOCK_SEQPACKET) in
 * @sa's family, non-blocking and close-on-exec, bound to @sa (@len
 * bytes) and listening with @backlog (<= 0: 128); an IPv4 or IPv6 one
 * with SO_REUSEADDR. For the socket-based transports (tcp; shm's
 * AF_UNIX handshake). Returns the fd, or -errno of the call that failed
 * (nothing left open).
 */
int be__listen_fd(const struct sockaddr *sa, socklen_t len, int type, int backlog);

#endif /* BE_XPORT_ADDR_H */
