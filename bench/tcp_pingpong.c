/*
 * tcp_pingpong.c - plain kernel TCP on loopback, the baseline the tcp
 * transport (and everything else) is compared with.
 *
 *   tcp_pingpong lat [--size 64] [--iters N] [--warmup N] [--cpu A,B] [--json]
 *   tcp_pingpong bw  [--size 1M] [--iters N] [--cpu A,B] [--json]
 *
 * lat: blocking ping-pong of @size bytes with TCP_NODELAY; one-way latency
 *      = RTT/2, one sample per round trip.
 * bw:  the client write()s @iters blocks of @size bytes as fast as it can;
 *      the server read()s them all and answers one byte, which stops the
 *      clock. MB/s with MB = 1e6 bytes.
 *
 * The server is a fork()ed child on 127.0.0.1 (ephemeral port, bound
 * before the fork so there is no start-up race). With --cpu A,B the
 * client is pinned to core A and the server to core B.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf.h" /* perf_summarize(), perf_now_ns(), perf_pin_cpu(): perf_stats.c */

static int xfer_all(int fd, void *buf, size_t len, int wr)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = wr ? write(fd, (char *)buf + off, len - off) :
				 read(fd, (char *)buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Server: serve one connection, lat or bw, then exit. */
static int serve(int lfd, int bw, size_t size, uint64_t total)
{
	char *buf = malloc(size);
	int fd = accept(lfd, NULL, NULL);
	uint64_t i;

	if (fd < 0 || !buf)
		return 1;
	nodelay(fd);
	for (i = 0; i < total; i++) {
		if (xfer_all(fd, buf, size, 0))
			return 1;
		if (!bw && xfer_all(fd, buf, size, 1))
			return 1;
	}
	if (bw && xfer_all(fd, buf, 1, 1))
		return 1;
	close(fd);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	struct perf_bench_opts o = { .cpu = { -1, -1 } };
	int bw, lfd, fd, status;
	uint64_t size, i, prev = 0, t0;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct rusage ru0, ru1;
	char *buf;
	double *v = NULL;
	pid_t pid;

	if (argc < 2 || (strcmp(argv[1], "lat") && strcmp(argv[1], "bw"))) {
		fprintf(stderr, "usage: %s lat|bw [--size N] [--iters N] [--warmup N] "
			"[--cpu A,B] [--json]\n", argv[0]);
		return 2;
	}
	bw = !strcmp(argv[1], "bw");
	size = bw ? 1u << 20 : 64;
	o.iters = bw ? 4000 : 20000;
	o.warmup = bw ? 100 : 1000;
	for (int a = 2; a < argc; a++) {
		if (!strcmp(argv[a], "--size") && a + 1 < argc)
			size = perf_parse_size(argv[++a]);
		else if (!perf_bench_arg(argc, argv, &a, &o)) {
			fprintf(stderr, "tcp_pingpong: bad option '%s'\n", argv[a]);
			return 2;
		}
	}
	if (!size || !o.iters) {
		fprintf(stderr, "tcp_pingpong: --size and --iters must be > 0\n");
		return 2;
	}

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
		perror("tcp_pingpong: listen");
		return 1;
	}
	pid = perf_fork_pinned(o.cpu[1], "tcp_pingpong: peer");
	if (pid < 0) {
		perror("tcp_pingpong: fork");
		return 1;
	}
	if (pid == 0)
		_exit(serve(lfd, bw, size, o.warmup + o.iters));
	close(lfd);
	buf = malloc(size);
	v = bw ? NULL : calloc(o.iters, sizeof(*v));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (!buf || (!bw && !v) || (o.cpu[0] >= 0 && perf_pin_cpu(o.cpu[0])) || fd < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("tcp_pingpong: connect");
		kill(pid, SIGKILL);
		return 1;
	}
	nodelay(fd);
	memset(buf, 0xa5, size);

	if (!bw) {
		for (i = 0; i < o.warmup + o.iters; i++) {
			if (i == o.warmup)
				prev = perf_now_ns();
			if (xfer_all(fd, buf, size, 1) || xfer_all(fd, buf, size, 0))
				goto io_err;
			if (i >= o.warmup) {
				uint64_t t = perf_now_ns();

				v[i - o.warmup] = (double)(t - prev) / 2e3;
				prev = t;
			}
		}
	} else {
		for (i = 0; i < o.warmup; i++)
			if (xfer_all(fd, buf, size, 1))
				goto io_err;
		getrusage(RUSAGE_SELF, &ru0);
		t0 = perf_now_ns();
		for (i = 0; i < o.iters; i++)
			if (xfer_all(fd, buf, size, 1))
				goto io_err;
		if (xfer_all(fd, buf, 1, 0))
			goto io_err;
		prev = perf_now_ns() - t0;
		getrusage(RUSAGE_SELF, &ru1);
	}
	close(fd);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "tcp_pingpong: server failed\n");
		return 1;
	}

	if (!bw) {
		struct perf_summary sm;

		perf_summarize(v, o.iters, &sm);
		if (o.json)
			printf("{\"test\":\"tcp-lat\",\"size\":%llu,\"iters\":%llu"
			       ",\"p50_us\":%.4f,\"p99_us\":%.4f,\"avg_us\":%.4f,\"min_us\":%.4f"
			       ",\"p25_us\":%.4f,\"p75_us\":%.4f,\"max_us\":%.4f}\n",
			       (unsigned long long)size, (unsigned long long)o.iters, sm.p50,
			       sm.p99, sm.avg, sm.min, sm.p25, sm.p75, sm.max);
		else
			printf("kernel TCP ping-pong %llu B, %llu iterations, one-way us:\n"
			       "  min %.3f  p25 %.3f  p50 %.3f  p75 %.3f  p99 %.3f  avg %.3f\n",
			       (unsigned long long)size, (unsigned long long)o.iters, sm.min,
			       sm.p25, sm.p50, sm.p75, sm.p99, sm.avg);
	} else {
		double sec = (double)prev / 1e9;
		double bytes = (double)size * (double)o.iters;
		double cpu_s = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
			       (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
			       (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
			       (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;

		if (o.json)
			printf("{\"test\":\"tcp-bw\",\"size\":%llu,\"iters\":%llu,\"mb_s\":%.2f"
			       ",\"seconds\":%.6f,\"cpu_s_per_gb\":%.4f}\n",
			       (unsigned long long)size, (unsigned long long)o.iters,
			       bytes / sec / 1e6, sec, cpu_s / (bytes / 1e9));
		else
			printf("kernel TCP stream %llu B x %llu: %.1f MB/s, %.4f s, "
			       "%.4f cpu s/GB (sender)\n",
			       (unsigned long long)size, (unsigned long long)o.iters,
			       bytes / sec / 1e6, sec, cpu_s / (bytes / 1e9));
	}
	free(buf);
	free(v);
	return 0;

io_err:
	perror("tcp_pingpong: io");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 1;
}
