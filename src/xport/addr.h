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
 * which blocks; the first result is the one used.
 */
#ifndef BE_XPORT_ADDR_H
#define BE_XPORT_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/*
 * be__inet_resolve() - parse and resolve @addr into @ss (*@sslen bytes
 * used). @passive: for listening (empty host = any, port 0 allowed).
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
 * be__inet_canon() - the canonical form of a connect address: resolved as
 * connect() does, an IPv4-mapped IPv6 address folded to IPv4, formatted
 * numerically. Two addresses with the same canonical form reach the same
 * listener. Blocks while a name resolves. Returns 0 or as
 * be__inet_resolve() and be__inet_format().
 */
int be__inet_canon(const char *addr, char *buf, size_t len);

#endif /* BE_XPORT_ADDR_H */
