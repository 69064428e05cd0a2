/*
 * tcp_relay.c - tcp-relay: a TCP relay on 127.0.0.1, the network path
 * that bench/paper/failover.sh breaks without root, iptables or ip rules:
 *
 *   tcp-relay --to PORT [--listen PORT]
 *
 * It accepts on --listen (0: any free port), connects each accepted
 * connection to 127.0.0.1:--to and copies bytes both ways. It prints
 * "listening PORT" and "ready" on stdout once it accepts. The faults are
 * done to the relay process, not to the server behind it:
 *   SIGSTOP   the path blackholes: connections stay up, nothing is
 *             forwarded or answered, new connections complete their
 *             handshake in the kernel and hang (a port dropping traffic,
 *             as a blackholed RDMA path); SIGCONT delivers what queued,
 *             as TCP's retransmissions would once a path comes back
 *   SIGKILL   the port goes down: every connection is reset or closed and
 *             new ones are refused until a relay listens on the port again
 *
 * Model: one thread, poll() over the listener and every pair of sockets,
 * a 64 KiB buffer per direction; a side is read only while its buffer is
 * empty, so a slow reader holds the writer back through TCP (no unbounded
 * memory). At most 256 pairs; beyond that, new connections are closed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback.h"

#define RL_PAIRS 256
#define RL_BUF 65536

struct rl_dir {
	char buf[RL_BUF];
	size_t off, len; /* pending bytes buf[off, off + len) */
};

struct rl_pair {
	int fd[2];           /* 0: accepted side, 1: the server's side */
	struct rl_dir d[2];  /* d[i]: read from fd[i], written to fd[!i] */
};

static struct rl_pair *pairs[RL_PAIRS];

static int rl_connect(int port)
{
	int fd = lo_connect(port);

	/* Non-blocking from here: a slow side must not stall the others. */
	if (fd >= 0)
		fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void rl_close(int i)
{
	close(pairs[i]->fd[0]);
	close(pairs[i]->fd[1]);
	free(pairs[i]);
	pairs[i] = NULL;
}

/* Move what can move on pair @p; -1 when it is done (a side closed). */
static int rl_pump(struct rl_pair *p, const short *rev)
{
	int s;

	for (s = 0; s < 2; s++) {
		struct rl_dir *d = &p->d[s];
		ssize_t n;

		if (!d->len && (rev[s] & (POLLIN | POLLHUP | POLLERR))) {
			n = read(p->fd[s], d->buf, RL_BUF);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				return -1;
			if (n > 0) {
				d->off = 0;
				d->len = (size_t)n;
			}
		}
		if (d->len) {
			n = write(p->fd[!s], d->buf + d->off, d->len);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (n > 0) {
				d->off += (size_t)n;
				d->len -= (size_t)n;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int i, to = -1, listen_port = 0, lfd, bound;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--to"))
			to = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--listen"))
			listen_port = atoi(argv[i + 1]);
		else
			break;
	}
	if (i != argc || to <= 0 || to > 65535 || listen_port < 0 || listen_port > 65535) {
		fprintf(stderr, "usage: tcp-relay --to PORT [--listen PORT]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = lo_listen(listen_port, SOCK_NONBLOCK, &bound);
	if (lfd < 0) {
		perror("tcp-relay: listen");
		return 1;
	}
	printf("listening %d\nready\n", bound);
	fflush(stdout);
	for (;;) {
		struct pollfd pf[1 + 2 * RL_PAIRS];
		int idx[RL_PAIRS], n = 1;

		pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (i = 0; i < RL_PAIRS; i++) {
			struct rl_pair *p = pairs[i];
			int s;

			idx[i] = -1;
			if (!p)
				continue;
			idx[i] = n;
			for (s = 0; s < 2; s++) {
				/* Read a side while its buffer is empty; wait
				 * for room on the other while it is not. */
				pf[n + s] = (struct pollfd){ .fd = p->fd[s] };
				pf[n + s].events |= p->d[s].len ? 0 : POLLIN;
				pf[n + s].events |= p->d[!s].len ? POLLOUT : 0;
			}
			n += 2;
		}
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("tcp-relay: poll");
			return 1;
		}
		for (i = 0; i < RL_PAIRS; i++) {
			short rev[2];

			if (idx[i] < 0 || !pairs[i])
				continue;
			rev[0] = pf[idx[i]].revents;
			rev[1] = pf[idx[i] + 1].revents;
			if ((rev[0] | rev[1]) && rl_pump(pairs[i], rev))
				rl_close(i);
		}
		if (pf[0].revents & POLLIN) {
			int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), sfd;

			if (cfd < 0)
				continue;
			for (i = 0; i < RL_PAIRS && pairs[i]; i++)
				;
			sfd = i < RL_PAIRS ? rl_connect(to) : -1;
			if (sfd < 0) {
				close(cfd);
				continue;
			}
			pairs[i] = calloc(1, sizeof(*pairs[i]));
			if (!pairs[i]) {
				close(cfd);
				close(sfd);
				continue;
			}
			lo_nodelay(cfd);
			pairs[i]->fd[0] = cfd;
			pairs[i]->fd[1] = sfd;
		}
	}
}
