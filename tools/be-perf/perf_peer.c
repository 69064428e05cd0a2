/*
 * perf_peer.c - run the other end of a test in a child process (see
 * perf_peer.h for the model).
 *
 * fork() without exec: the child inherits the parsed options and runs the
 * server role directly, which keeps one code path for "--server" and the
 * self-spawned peer. The parent must not have opened a transport or used
 * bemalloc before forking; be-perf forks first, then sets up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"
#include "perf_peer.h"

int perf_peer_spawn(struct perf_peer *p, int cpu, int (*fn)(void *arg, int ready_fd), void *arg)
{
	int fds[2];
	pid_t pid;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = perf_fork_pinned(cpu, "be-perf peer");
	if (pid < 0) {
		int err = -errno;

		close(fds[0]);
		close(fds[1]);
		return err;
	}
	if (pid == 0) {
		int rc;

		close(fds[0]);
		rc = fn(arg, fds[1]);
		fflush(stdout);
		fflush(stderr);
		_exit(rc ? 1 : 0);
	}
	close(fds[1]);
	p->pid = pid;
	p->fd = fds[0];
	return 0;
}

int perf_peer_ready(int ready_fd, const char *addr)
{
	size_t len = strlen(addr), off = 0;
	char line[256];

	if (len + 2 > sizeof(line))
		return -ENAMETOOLONG;
	memcpy(line, addr, len);
	line[len++] = '\n';
	while (off < len) {
		ssize_t n = write(ready_fd, line + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(ready_fd);
			return -EPIPE;
		}
		off += (size_t)n;
	}
	close(ready_fd);
	return 0;
}

int perf_peer_addr(struct perf_peer *p, char *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = perf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	size_t off = 0;

	if (!len)
		return -EINVAL;
	for (;;) {
		struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
		uint64_t now = perf_now_ns();
		ssize_t n;
		int rc;

		if (now >= deadline)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, (int)((deadline - now) / 1000000ull) + 1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0)
			continue;
		n = read(p->fd, buf + off, len - 1 - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -ECHILD;
		off += (size_t)n;
		buf[off] = '\0';
		if (memchr(buf, '\n', off)) {
			*strchr(buf, '\n') = '\0';
			close(p->fd);
			p->fd = -1;
			return 0;
		}
		if (off == len - 1)
			return -ENAMETOOLONG;
	}
}

int perf_peer_wait(struct perf_peer *p, int timeout_ms)
{
	uint64_t deadline = perf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int killed = 0;

	if (p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
	if (!p->pid)
		return -ECHILD;
	for (;;) {
		pid_t r = wait4(p->pid, &p->status, WNOHANG, &p->ru);
		struct timespec ts = { 0, 2000000 };

		if (r == p->pid)
			break;
		if (r < 0 && errno != EINTR) {
			p->pid = 0;
			return -errno;
		}
		if (!killed && perf_now_ns() >= deadline) {
			kill(p->pid, SIGKILL);
			killed = 1;
		}
		nanosleep(&ts, NULL);
	}
	p->pid = 0;
	if (killed)
		return -ETIMEDOUT;
	if (WIFEXITED(p->status))
		return WEXITSTATUS(p->status);
	return -ECHILD;
}

void perf_peer_kill(struct perf_peer *p)
{
	if (p->pid)
		kill(p->pid, SIGKILL);
	perf_peer_wait(p, 1000);
}

int perf_peer_run(const struct perf_peer_opts *o, int (*server_fn)(void *arg, int ready_fd),
		  int (*client)(void *arg, const char *addr, struct perf_peer *peer), void *arg)
{
	struct perf_peer peer;
	char peer_addr[512];
	int rc;

	if (o->server)
		return server_fn(arg, -1);
	if (o->addr)
		return client(arg, o->addr, NULL);
	rc = perf_peer_spawn(&peer, -1, server_fn, arg);
	if (!rc)
		rc = perf_peer_addr(&peer, peer_addr, sizeof(peer_addr), o->timeout_s * 1000);
	if (rc) {
		fprintf(stderr, "be-perf %s: server did not start: %s\n", o->cmd, strerror(-rc));
		perf_peer_kill(&peer);
		return 1;
	}
	rc = client(arg, peer_addr, &peer);
	if (rc)
		perf_peer_kill(&peer);
	return rc;
}
