/*
 * loopback.h - TCP on 127.0.0.1 for the paper's plain-TCP programs
 * (tcp_fetch.c, tcp_relay.c): one way to listen and to connect, so the
 * baseline and the relay in front of it use the same socket options.
 */
#ifndef BE_BENCH_PAPER_LOOPBACK_H
#define BE_BENCH_PAPER_LOOPBACK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* TCP_NODELAY on @fd: requests and replies go out as they are written. */
static inline void lo_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * lo_listen() - a close-on-exec socket (plus @flags, e.g. SOCK_NONBLOCK)
 * listening on 127.0.0.1:@port (0: any free port) with SO_REUSEADDR; the
 * port it got in *@bound. Returns the fd, or -1 with errno set.
 */
static inline int lo_listen(int port, int flags, int *bound)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int one = 1, err, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	*bound = ntohs(a.sin_port);
	return fd;
}

/* lo_connect() - a blocking, close-on-exec connection to 127.0.0.1:@port
 * with TCP_NODELAY. Returns the fd, or -1 with errno set. */
static inline int lo_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int err, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	lo_nodelay(fd);
	return fd;
}

#endif /* BE_BENCH_PAPER_LOOPBACK_H */
