/*
 * perf_pull.c - be-perf pull: a parameter-server pull, over be and over
 * plain blocking kernel TCP, side by side.
 *
 * A pull is what a ranker sends a parameter server: a request of --req
 * bytes (default 4,128: 512 keys x 8 B and a 32-byte header) answered
 * with --reply bytes (default 64 KiB + a 32-byte header: 512 rows of 32
 * floats). One call at a time on one connection; the client measures
 * each call (send to last byte of the reply) and its own CPU time per
 * call (user + system, this process only: the server is a forked child,
 * perf_peer.c).
 *
 *   --transport tcp|shm|verbs   be over that transport (Socket API)
 *   --transport kernel-tcp      the baseline alone: blocking send/recv on
 *                               one TCP connection with TCP_NODELAY, the
 *                               way a plain PS client is written
 *   --baseline kernel-tcp       after each be run, the baseline, and the
 *                               ratios be / kernel-tcp
 *   --rounds R                  R interleaved rounds (be, baseline, be,
 *                               ...), reported as medians with min and max
 *
 * be polls adaptively by default (be_worker_wait: spin, then sleep), as
 * an application that cares for CPU would and as the blocking baseline
 * does; --busy polls without sleeping.
 *
 * Output: a table, or with --json one object per line: each run
 * {"test":"pull","transport":..,"req":..,"reply":..,"iters":..,
 * "p50_us","p99_us","avg_us","cpu_us_per_call","polling","round"}, and
 * with --baseline a summary {"test":"pull-ratio", "transport", "rounds",
 * "p50_ratio", "p50_ratio_min", "p50_ratio_max", "cpu_ratio",
 * "cpu_ratio_min", "cpu_ratio_max", "be_p50_us", "kernel_p50_us",
 * "be_cpu_us_per_call", "kernel_cpu_us_per_call"} (medians over rounds;
 * a ratio below 1 means be is faster or cheaper). Latencies are whole
 * calls (round trips), not halved.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <be/be.h>

#include "perf.h"
#include "perf_peer.h"

#define PULL_MAX_ROUNDS 64

struct pull_opts {
	const char *transport;
	const char *baseline;
	uint64_t req, reply, iters, warmup;
	int rounds, json, busy, timeout_s;
};

struct pull_result {
	double p50, p99, avg, cpu_us; /* per call */
};

/* ---- be: server ---- */

struct pull_srv {
	const struct pull_opts *o;
	int accepted, closed, errors;
};

/* A reply's send completion. Its status is not counted: the last reply
 * may complete with -ECONNRESET when the client closes right after it
 * arrived; the client checks that every reply arrived whole. */
static void pull_free_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	be_free(buf);
}

/* Each request is answered with a fresh reply of --reply bytes. */
static void pull_srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct pull_srv *sv = user;
	void *rep = be_alloc(sv->o->reply);

	be_free(buf);
	if (!rep || be_sock_send(s, rep, sv->o->reply, pull_free_cb, sv)) {
		sv->errors++;
		be_free(rep);
	}
}

static int pull_srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	struct pull_srv *sv = user;

	sv->accepted++;
	be_sock_set_user(s, sv);
	return 0;
}

static void pull_srv_close(struct be_sock *s, int reason, void *user)
{
	((struct pull_srv *)user)->closed++;
	be_sock_close(s);
}

static int pull_poll(const struct pull_opts *o, struct be_worker *w)
{
	return o->busy ? be_worker_progress(w) : be_worker_wait(w, 100);
}

static int pull_be_server(void *arg, int ready_fd)
{
	static const struct be_sock_cbs cbs = {
		.on_recv = pull_srv_recv, .on_close = pull_srv_close,
		.on_accept = pull_srv_accept,
	};
	const struct pull_opts *o = arg;
	struct pull_srv sv = { .o = o };
	char def[160], addr[160];
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	uint64_t t0 = perf_now_ns();
	int rc;

	if (perf_listen_addr("pull", o->transport, "pull", def, sizeof(def)))
		return 2;
	if ((rc = be_ctx_create(NULL, &ctx)) || (rc = be_worker_create(ctx, &w)) ||
	    (rc = be_listen(w, def, &cbs, &sv, &l)) ||
	    (rc = be_listener_addr(l, addr, sizeof(addr)))) {
		fprintf(stderr, "be-perf pull: server on %s: %s\n", def, be_strerror(rc));
		return 1;
	}
	perf_peer_ready(ready_fd, addr);
	while (sv.accepted == 0 || sv.closed < sv.accepted) {
		pull_poll(o, w);
		if (sv.accepted == 0 &&
		    perf_now_ns() - t0 > (uint64_t)o->timeout_s * 1000000000ull)
			break;
	}
	be_listener_close(l);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	return sv.errors || sv.closed != sv.accepted;
}

/* ---- be: client ---- */

struct pull_cli {
	uint64_t answered;
	int errors, closed;
	size_t want;
};

static void pull_cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct pull_cli *c = user;

	if (len != c->want)
		c->errors++;
	be_free(buf);
	c->answered++;
}

static void pull_cli_close(struct be_sock *s, int reason, void *user)
{
	((struct pull_cli *)user)->closed = reason ? reason : -ECONNRESET;
}

static void pull_cli_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	if (status)
		((struct pull_cli *)arg)->errors++;
	be_free(buf);
}

static int pull_be_client(const struct pull_opts *o, const char *addr, double *lat,
			  double *cpu_s)
{
	static const struct be_sock_cbs cbs = {
		.on_recv = pull_cli_recv, .on_close = pull_cli_close,
	};
	struct pull_cli c = { .want = o->reply };
	struct be_worker *w;
	struct be_sock *s;
	struct be_ctx *ctx;
	double cpu0 = 0;
	uint64_t i;
	int rc;

	if ((rc = be_ctx_create(NULL, &ctx)) || (rc = be_worker_create(ctx, &w)) ||
	    (rc = be_sock_connect(w, addr, &cbs, &c, &s))) {
		fprintf(stderr, "be-perf pull: connect %s: %s\n", addr, be_strerror(rc));
		return 1;
	}
	for (i = 0; i < o->warmup + o->iters && !rc; i++) {
		uint64_t t0, deadline;
		char *req = be_alloc(o->req);

		if (i == o->warmup)
			cpu0 = perf_cpu_seconds();
		if (!req)
			return 1;
		memset(req, 0x5a, o->req);
		t0 = perf_now_ns();
		deadline = t0 + (uint64_t)o->timeout_s * 1000000000ull;
		rc = be_sock_send(s, req, o->req, pull_cli_sent, &c);
		if (rc) {
			be_free(req);
			break;
		}
		while (c.answered <= i && !c.errors && !c.closed) {
			if (!pull_poll(o, w) && perf_now_ns() > deadline) {
				rc = -ETIMEDOUT;
				break;
			}
		}
		if (c.errors || c.closed)
			rc = c.closed ? c.closed : -EIO;
		if (i >= o->warmup)
			lat[i - o->warmup] = (double)(perf_now_ns() - t0) / 1e3;
	}
	*cpu_s = perf_cpu_seconds() - cpu0;
	if (rc)
		fprintf(stderr, "be-perf pull: call %" PRIu64 ": %s\n", i, be_strerror(rc));
	be_sock_close(s);
	/* Let the close reach the server, so it exits at once. */
	for (i = 0; i < 1000; i++)
		be_worker_progress(w);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	return rc != 0;
}

/* ---- kernel TCP: the blocking baseline ---- */

static int full_io(int fd, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wr ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL) :
				 recv(fd, (char *)buf + done, len - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		done += (size_t)n;
	}
	return 0;
}

static void tcp_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int pull_kernel_server(void *arg, int ready_fd)
{
	const struct pull_opts *o = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct timeval tv = { .tv_sec = o->timeout_s };
	char addr[64], *req, *rep;
	int lfd, fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl))
		return 1;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	perf_peer_ready(ready_fd, addr);
	setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return 1;
	tcp_nodelay(fd);
	req = malloc(o->req);
	rep = calloc(1, o->reply);
	if (!req || !rep)
		return 1;
	/* A fresh reply per call, as the be server allocates one. */
	while (full_io(fd, req, o->req, false) == 0) {
		memset(rep, 0x33, 64);
		if (full_io(fd, rep, o->reply, true))
			break;
	}
	close(fd);
	close(lfd);
	free(req);
	free(rep);
	return 0;
}

static int pull_kernel_client(const struct pull_opts *o, const char *addr, double *lat,
			      double *cpu_s)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *colon = strrchr(addr, ':');
	char *req = malloc(o->req), *rep = malloc(o->reply);
	double cpu0 = 0;
	uint64_t i;
	int fd, rc = 0;

	if (!colon || !req || !rep)
		return 1;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("be-perf pull: connect");
		return 1;
	}
	tcp_nodelay(fd);
	for (i = 0; i < o->warmup + o->iters; i++) {
		uint64_t t0;

		if (i == o->warmup)
			cpu0 = perf_cpu_seconds();
		/* The request is written every call, as the be client writes
		 * its fresh buffer: the same work on both sides. */
		memset(req, 0x5a, o->req);
		t0 = perf_now_ns();
		rc = full_io(fd, req, o->req, true);
		if (!rc)
			rc = full_io(fd, rep, o->reply, false);
		if (rc)
			break;
		if (i >= o->warmup)
			lat[i - o->warmup] = (double)(perf_now_ns() - t0) / 1e3;
	}
	*cpu_s = perf_cpu_seconds() - cpu0;
	if (rc)
		fprintf(stderr, "be-perf pull: kernel-tcp call %" PRIu64 ": %s\n", i,
			strerror(-rc));
	close(fd);
	free(req);
	free(rep);
	return rc != 0;
}

/* ---- one run, rounds, report ---- */

static int pull_run(const struct pull_opts *o, const char *transport, int round,
		    struct pull_result *res)
{
	bool kernel = strcmp(transport, "kernel-tcp") == 0;
	struct pull_opts so = *o;
	struct perf_summary sum;
	struct perf_peer peer;
	double *lat = calloc(o->iters, sizeof(double)), cpu = 0;
	char addr[160];
	int rc, prc;

	if (!lat)
		return 1;
	so.transport = transport;
	/* Client and server share the host's cores, unpinned: the machine
	 * schedules both, as it would a client and a server of a PS host. */
	rc = perf_peer_spawn(&peer, -1, kernel ? pull_kernel_server : pull_be_server, &so);
	if (rc || perf_peer_addr(&peer, addr, sizeof(addr), o->timeout_s * 1000)) {
		fprintf(stderr, "be-perf pull: %s server did not start\n", transport);
		perf_peer_kill(&peer);
		free(lat);
		return 1;
	}
	rc = kernel ? pull_kernel_client(&so, addr, lat, &cpu) :
		      pull_be_client(&so, addr, lat, &cpu);
	prc = perf_peer_wait(&peer, o->timeout_s * 1000);
	if (rc || prc) {
		fprintf(stderr, "be-perf pull: %s run failed (client %d, server %d)\n", transport,
			rc, prc);
		free(lat);
		return 1;
	}
	perf_summarize(lat, o->iters, &sum);
	free(lat);
	res->p50 = sum.p50;
	res->p99 = sum.p99;
	res->avg = sum.avg;
	res->cpu_us = cpu * 1e6 / (double)o->iters;
	if (o->json)
		printf("{\"test\":\"pull\",\"transport\":\"%s\",\"req\":%" PRIu64
		       ",\"reply\":%" PRIu64 ",\"iters\":%" PRIu64 ",\"p50_us\":%.3f"
		       ",\"p99_us\":%.3f,\"avg_us\":%.3f,\"cpu_us_per_call\":%.3f"
		       ",\"polling\":\"%s\",\"round\":%d}\n",
		       transport, o->req, o->reply, o->iters, res->p50, res->p99, res->avg,
		       res->cpu_us, kernel ? "blocking" : o->busy ? "busy" : "adaptive", round);
	else
		printf("%-11s round %2d: p50 %8.2f us  p99 %8.2f us  avg %8.2f us  client CPU "
		       "%7.2f us/call\n", transport, round, res->p50, res->p99, res->avg,
		       res->cpu_us);
	fflush(stdout);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median, min and max of @v (@n values, sorted in place). */
static void med3(double *v, int n, double out[3])
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	out[1] = v[0];
	out[2] = v[n - 1];
}

static void pull_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: be-perf pull [--transport tcp|shm|verbs|kernel-tcp] "
		"[--baseline kernel-tcp] [--rounds R]\n"
		"                    [--req BYTES] [--reply BYTES] [--iters N] [--warmup N] "
		"[--busy] [--json] [--timeout S]\n"
		"A parameter-server pull (request 4128 B, reply 64 KiB + 32 B), one call at a\n"
		"time; p50/p99 per call and the client's CPU per call, side by side with plain\n"
		"blocking kernel TCP when --baseline kernel-tcp is given.\n");
}

static int pull_main(int argc, char **argv)
{
	struct pull_opts o = {
		.transport = "tcp", .req = 4128, .reply = 65536 + 32, .iters = 2000,
		.warmup = 200, .rounds = 1, .timeout_s = 20,
	};
	double p50r[PULL_MAX_ROUNDS], cpur[PULL_MAX_ROUNDS];
	double bp50[PULL_MAX_ROUNDS], kp50[PULL_MAX_ROUNDS];
	double bcpu[PULL_MAX_ROUNDS], kcpu[PULL_MAX_ROUNDS];
	double m[6][3];
	int i, r;
	const struct perf_opt opts[] = {
		PERF_FLAG("--json", &o.json, 1),
		PERF_FLAG("--busy", &o.busy, 1),
		PERF_OPT("--transport", STR, &o.transport),
		PERF_OPT("--baseline", STR, &o.baseline),
		PERF_OPT("--rounds", INT, &o.rounds),
		PERF_OPT("--req", SIZE, &o.req),
		PERF_OPT("--reply", SIZE, &o.reply),
		PERF_OPT("--iters", SIZE, &o.iters),
		PERF_OPT("--warmup", SIZE, &o.warmup),
		PERF_OPT("--timeout", INT, &o.timeout_s),
		PERF_OPTS_END,
	};

	i = perf_opts_parse("pull", argc, argv, opts, pull_usage);
	if (i >= 0)
		return i;
	if (o.rounds < 1 || o.rounds > PULL_MAX_ROUNDS || !o.iters || !o.req || !o.reply ||
	    o.timeout_s <= 0 || (o.baseline && strcmp(o.baseline, "kernel-tcp"))) {
		pull_usage(stderr, "pull");
		return 2;
	}
	for (r = 0; r < o.rounds; r++) {
		struct pull_result b, k;

		if (pull_run(&o, o.transport, r, &b))
			return 1;
		if (!o.baseline)
			continue;
		if (pull_run(&o, o.baseline, r, &k))
			return 1;
		bp50[r] = b.p50;
		kp50[r] = k.p50;
		bcpu[r] = b.cpu_us;
		kcpu[r] = k.cpu_us;
		p50r[r] = b.p50 / k.p50;
		cpur[r] = k.cpu_us > 0 ? b.cpu_us / k.cpu_us : 0;
	}
	if (!o.baseline)
		return 0;
	med3(p50r, o.rounds, m[0]);
	med3(cpur, o.rounds, m[1]);
	med3(bp50, o.rounds, m[2]);
	med3(kp50, o.rounds, m[3]);
	med3(bcpu, o.rounds, m[4]);
	med3(kcpu, o.rounds, m[5]);
	if (o.json)
		printf("{\"test\":\"pull-ratio\",\"transport\":\"%s\",\"baseline\":\"%s\""
		       ",\"rounds\":%d,\"p50_ratio\":%.3f,\"p50_ratio_min\":%.3f"
		       ",\"p50_ratio_max\":%.3f,\"cpu_ratio\":%.3f,\"cpu_ratio_min\":%.3f"
		       ",\"cpu_ratio_max\":%.3f,\"be_p50_us\":%.3f,\"kernel_p50_us\":%.3f"
		       ",\"be_cpu_us_per_call\":%.3f,\"kernel_cpu_us_per_call\":%.3f}\n",
		       o.transport, o.baseline, o.rounds, m[0][0], m[0][1], m[0][2], m[1][0],
		       m[1][1], m[1][2], m[2][0], m[3][0], m[4][0], m[5][0]);
	else
		printf("be over %s / %s, median of %d round(s) [min..max]: p50 %.2fx "
		       "[%.2f..%.2f], client CPU per call %.2fx [%.2f..%.2f]\n",
		       o.transport, o.baseline, o.rounds, m[0][0], m[0][1], m[0][2], m[1][0],
		       m[1][1], m[1][2]);
	return 0;
}

PERF_COMMAND(pull, "pull", "PS pull (4128 B -> 64 KiB), be vs kernel TCP (--baseline)",
	     pull_main)
