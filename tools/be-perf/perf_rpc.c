/*
 * perf_rpc.c - be-perf rpc-lat | rpc-rate: the RPC layer measured through
 * its public API (include/be/rpc.h), on any transport.
 *
 *   rpc-lat   one call at a time of --size bytes (echoed), the next one
 *             issued from the completion callback in the reply's buffer
 *             (zero copy, as the server echoes in the request's). Beside
 *             it, in the same run and against the same server process, the
 *             Socket ping-pong of the same size (sent from the receive
 *             callback in the answer's buffer): the RPC layer's overhead is
 *             the difference. The two alternate in blocks of --block round
 *             trips so that a noisy host weighs on both alike. Reported as
 *             round trips (not halved), as an RPC caller sees them.
 *   rpc-rate  --depth calls in flight for --seconds, each completion
 *             issuing the next: calls per second, and per core (calls
 *             divided by the CPU seconds both processes spent meanwhile;
 *             the server reports its own through a call).
 *   rpc-cost  one thread drives both ends (two workers of one process,
 *             as be-perf cost does for Sockets): ns per call of the
 *             software alone. Under valgrind --tool=callgrind it gives the
 *             instructions per call, whatever the host's load.
 *
 * Without --addr the client fork()s the server (perf_peer.c); with
 * --server --addr "RPC SOCK" a server runs alone (two listen addresses:
 * one for RPC, one for the Socket echo), and a client elsewhere uses
 * --addr "RPC SOCK" with the addresses it printed.
 *
 * Output: a table, or with --json one object per line with the fields
 * test ("rpc-lat", "sock-lat", "rpc-rate"), impl ("be"), transport,
 * size, iters, p50_us, p99_us, avg_us, calls_per_s, calls_per_s_per_core,
 * depth, polling.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <be/be.h>

#include "perf.h"
#include "perf_peer.h"

#define PR_SVC 1u
#define PR_ECHO 1u
#define PR_QUIT 2u
#define PR_CPU 3u

enum pr_mode { PR_LAT, PR_RATE, PR_COST };

struct pr_opts {
	struct perf_peer_opts p;
	enum pr_mode mode;
	uint64_t block;
	uint32_t depth;
};

/* ---- server ---- */

struct pr_srv {
	int quit;
	struct perf_echo echo;
};

static void pr_echo(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	be_rpc_req_reply(req, buf, len);
}

static void pr_quit(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	((struct pr_srv *)user)->quit = 1;
	be_rpc_buf_free(buf);
	be_rpc_req_reply(req, NULL, 0);
}

static void pr_cpu(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	double cpu = perf_cpu_seconds();
	void *r = be_rpc_buf_alloc(sizeof(cpu));

	be_rpc_buf_free(buf);
	if (!r) {
		be_rpc_req_fail(req, -ENOMEM);
		return;
	}
	memcpy(r, &cpu, sizeof(cpu));
	be_rpc_req_reply(req, r, sizeof(cpu));
}

static int pr_server_run(const struct pr_opts *o, int ready_fd)
{
	static const struct be_sock_cbs echo_cbs = {
		.on_recv = perf_echo_serve, .on_accept = perf_echo_accept,
	};
	struct pr_srv sv = { 0 };
	struct be_listener *lr, *ls;
	struct be_rpc_config rc;
	struct be_worker *w;
	struct be_config cfg;
	struct be_ctx *ctx;
	struct be_rpc *rpc;
	char ra[160], sa[160], line[330];
	int err;

	if (o->p.addr) {
		if (sscanf(o->p.addr, "%159s %159s", ra, sa) != 2) {
			fprintf(stderr, "be-perf %s: --server needs --addr \"RPC SOCK\"\n",
				o->p.cmd);
			return 1;
		}
	} else if (perf_listen_addr(o->p.cmd, o->p.transport, "rpc", ra, sizeof(ra)) ||
		   perf_listen_addr(o->p.cmd, o->p.transport, "sock", sa, sizeof(sa))) {
		return 1;
	}
	be_config_init(&cfg);
	cfg.conn_timeout_ms = (uint32_t)o->p.timeout_s * 1000;
	be_rpc_config_init(&rc);
	if ((err = be_ctx_create(&cfg, &ctx)) || (err = be_worker_create(ctx, &w)) ||
	    (err = be_rpc_create(w, &rc, &rpc))) {
		fprintf(stderr, "be-perf %s: server setup: %s\n", o->p.cmd, be_strerror(err));
		return 1;
	}
	be_rpc_register(rpc, PR_SVC, PR_ECHO, pr_echo, NULL, 0);
	be_rpc_register(rpc, PR_SVC, PR_QUIT, pr_quit, &sv, 0);
	be_rpc_register(rpc, PR_SVC, PR_CPU, pr_cpu, NULL, 0);
	err = be_rpc_listen(rpc, ra, &lr);
	if (!err)
		err = be_listener_addr(lr, ra, sizeof(ra));
	if (!err)
		err = be_listen(w, sa, &echo_cbs, &sv.echo, &ls);
	if (!err)
		err = be_listener_addr(ls, sa, sizeof(sa));
	if (err) {
		fprintf(stderr, "be-perf %s: listen: %s\n", o->p.cmd, be_strerror(err));
		return 1;
	}
	snprintf(line, sizeof(line), "%s %s", ra, sa);
	if (ready_fd >= 0) {
		perf_peer_ready(ready_fd, line);
	} else {
		printf("be-perf %s: listening on \"%s\"\n", o->p.cmd, line);
		fflush(stdout);
	}
	while (!sv.quit || ready_fd < 0)
		if (perf_peer_poll(&o->p, w) < 0)
			break;
	/* Let the quit's reply leave. */
	for (err = 0; err < 1000; err++)
		be_worker_progress(w);
	be_listener_close(ls);
	be_rpc_destroy(rpc);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	return 0;
}

static int pr_server_fn(void *arg, int ready_fd)
{
	return pr_server_run(arg, ready_fd);
}

/* ---- client ---- */

struct pr_cli {
	const struct pr_opts *o;
	struct be_rpc *rpc;
	struct be_rpc_chan *ch;
	struct be_sock *s;
	double *rpc_us, *sock_us;
	size_t nrpc, nsock;
	uint64_t left;       /* round trips left in the current block */
	uint64_t t_sent;     /* send time of the one in flight */
	uint64_t completed;  /* rate: completions */
	bool measure;        /* rate: count completions */
	bool stop;           /* rate: no new calls */
	int errors;
};

static void pr_rpc_lat_cb(int status, void *reply, size_t len, void *arg);

static int pr_call(struct pr_cli *c, void *req, size_t len, be_rpc_done_cb cb)
{
	int rc;

	c->t_sent = perf_now_ns();
	rc = be_rpc_call(c->ch, PR_SVC, PR_ECHO, req, len, NULL, cb, c, NULL);
	if (rc) {
		be_rpc_buf_free(req);
		c->errors++;
	}
	return rc;
}

static void pr_rpc_lat_cb(int status, void *reply, size_t len, void *arg)
{
	struct pr_cli *c = arg;
	uint64_t now = perf_now_ns();

	if (status || len != c->o->p.size) {
		c->errors++;
		be_rpc_buf_free(reply);
		return;
	}
	if (c->rpc_us)
		c->rpc_us[c->nrpc++] = (double)(now - c->t_sent) / 1e3;
	if (--c->left)
		pr_call(c, reply, len, pr_rpc_lat_cb);
	else
		be_rpc_buf_free(reply);
}

static void pr_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	if (status)
		((struct pr_cli *)arg)->errors++;
	be_free(buf);
}

static void pr_sock_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct pr_cli *c = user;
	uint64_t now = perf_now_ns();

	if (c->sock_us)
		c->sock_us[c->nsock++] = (double)(now - c->t_sent) / 1e3;
	if (--c->left) {
		c->t_sent = perf_now_ns();
		if (be_sock_send(s, buf, len, pr_sent, c)) {
			be_free(buf);
			c->errors++;
		}
	} else {
		be_free(buf);
	}
}

static void pr_sock_close(struct be_sock *s, int reason, void *user)
{
	fprintf(stderr, "be-perf: socket closed by the peer: %s\n", be_strerror(reason));
	exit(1);
}

/* Progress until the block is done; -ETIMEDOUT after timeout_s idle. */
static int pr_wait_block(struct pr_cli *c, struct be_worker *w)
{
	uint64_t start = perf_now_ns();
	unsigned int n = 0;

	while (c->left && !c->errors) {
		perf_peer_poll(&c->o->p, w);
		if (++n % 4096 == 0 &&
		    perf_now_ns() - start > (uint64_t)c->o->p.timeout_s * 1000000000ull)
			return -ETIMEDOUT;
	}
	return c->errors ? -EIO : 0;
}

static int pr_block(struct pr_cli *c, struct be_worker *w, bool rpc, uint64_t n)
{
	size_t len = c->o->p.size;

	c->left = n;
	if (rpc) {
		void *req = be_rpc_buf_alloc(len);

		if (!req)
			return -ENOMEM;
		memset(req, 0x5a, len);
		if (pr_call(c, req, len, pr_rpc_lat_cb))
			return -EIO;
	} else {
		void *b = be_alloc(len ? len : 1);

		if (!b)
			return -ENOMEM;
		memset(b, 0x5a, len ? len : 1);
		c->t_sent = perf_now_ns();
		if (be_sock_send(c->s, b, len, pr_sent, c)) {
			be_free(b);
			return -EIO;
		}
	}
	return pr_wait_block(c, w);
}

static void pr_rate_cb(int status, void *reply, size_t len, void *arg)
{
	struct pr_cli *c = arg;

	if (status) {
		c->errors++;
		be_rpc_buf_free(reply);
		return;
	}
	if (c->measure)
		c->completed++;
	if (c->stop) {
		be_rpc_buf_free(reply);
		c->left--;
		return;
	}
	if (be_rpc_call(c->ch, PR_SVC, PR_ECHO, reply, len, NULL, pr_rate_cb, c, NULL)) {
		be_rpc_buf_free(reply);
		c->errors++;
	}
}

/* The server's CPU seconds, through a call. */
static int pr_server_cpu(struct pr_cli *c, double *out)
{
	void *rep = NULL;
	size_t len = 0;
	int rc = be_rpc_call_sync(c->ch, PR_SVC, PR_CPU, NULL, 0, NULL, &rep, &len);

	if (!rc && len == sizeof(*out))
		memcpy(out, rep, sizeof(*out));
	be_rpc_buf_free(rep);
	return rc ? rc : len == sizeof(*out) ? 0 : -EPROTO;
}

static void pr_print_lat(const struct pr_opts *o, const char *test, double *v, size_t n)
{
	struct perf_summary s;

	perf_summarize(v, n, &s);
	if (o->p.json)
		printf("{\"test\":\"%s\",\"impl\":\"be\",\"transport\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%zu,\"p50_us\":%.3f,\"p99_us\":%.3f,\"avg_us\":%.3f"
		       ",\"polling\":\"%s\"}\n",
		       test, o->p.transport, o->p.size, n, s.p50, s.p99, s.avg,
		       o->p.adaptive ? "adaptive" : "busy");
	else
		printf("%-9s %-5s %8" PRIu64 " B  round trip p50 %8.2f us  p99 %8.2f us  avg %8.2f us"
		       "  (%zu)\n",
		       test, o->p.transport, o->p.size, s.p50, s.p99, s.avg, n);
}

static int pr_client(const struct pr_opts *o, const char *addrs, struct perf_peer *peer)
{
	static const struct be_sock_cbs sock_cbs = {
		.on_recv = pr_sock_recv, .on_close = pr_sock_close,
	};
	struct pr_cli c = { .o = o };
	struct be_rpc_config rc;
	struct be_worker *w;
	struct be_config cfg;
	struct be_ctx *ctx;
	char ra[160], sa[160];
	int err = 0;

	if (sscanf(addrs, "%159s %159s", ra, sa) != 2) {
		fprintf(stderr, "be-perf %s: --addr needs \"RPC SOCK\"\n", o->p.cmd);
		return 1;
	}
	be_config_init(&cfg);
	cfg.conn_timeout_ms = (uint32_t)o->p.timeout_s * 1000;
	be_rpc_config_init(&rc);
	rc.timeout_us = (uint32_t)o->p.timeout_s * 1000000u;
	if ((err = be_ctx_create(&cfg, &ctx)) || (err = be_worker_create(ctx, &w)) ||
	    (err = be_rpc_create(w, &rc, &c.rpc)) || (err = be_rpc_chan_open(c.rpc, ra, &c.ch))) {
		fprintf(stderr, "be-perf %s: client setup: %s\n", o->p.cmd, be_strerror(err));
		return 1;
	}
	c.rpc_us = NULL;
	if (o->mode == PR_LAT) {
		uint64_t done = 0;

		err = be_sock_connect(w, sa, &sock_cbs, &c, &c.s);
		/* Warm both paths up unrecorded, then alternate blocks. */
		if (!err)
			err = pr_block(&c, w, false, o->p.warmup ? o->p.warmup : 1);
		if (!err)
			err = pr_block(&c, w, true, o->p.warmup ? o->p.warmup : 1);
		c.rpc_us = calloc(o->p.iters, sizeof(double));
		c.sock_us = calloc(o->p.iters, sizeof(double));
		if (!c.rpc_us || !c.sock_us)
			err = -ENOMEM;
		while (!err && done < o->p.iters) {
			uint64_t n = o->p.iters - done < o->block ? o->p.iters - done : o->block;

			err = pr_block(&c, w, false, n);
			if (!err)
				err = pr_block(&c, w, true, n);
			done += n;
		}
		if (!err) {
			pr_print_lat(o, "sock-lat", c.sock_us, c.nsock);
			pr_print_lat(o, "rpc-lat", c.rpc_us, c.nrpc);
		}
		if (c.s)
			be_sock_close(c.s);
	} else {
		double s0 = 0, s1 = 0, c0, c1, secs;
		uint64_t t0, t1, calls;
		uint32_t i;

		err = pr_server_cpu(&c, &s0);
		for (i = 0; !err && i < o->depth; i++) {
			void *req = be_rpc_buf_alloc(o->p.size);

			if (!req) {
				err = -ENOMEM;
				break;
			}
			memset(req, 0x5a, o->p.size);
			err = be_rpc_call(c.ch, PR_SVC, PR_ECHO, req, o->p.size, NULL, pr_rate_cb,
					  &c, NULL);
			if (err)
				be_rpc_buf_free(req);
		}
		c.left = o->depth;
		/* A short warmup, then measure. */
		t0 = perf_now_ns();
		while (!err && !c.errors && perf_now_ns() - t0 < 200000000ull)
			perf_peer_poll(&o->p, w);
		err = pr_server_cpu(&c, &s0);
		c0 = perf_cpu_seconds();
		t0 = perf_now_ns();
		c.measure = true;
		while (!err && !c.errors &&
		       perf_now_ns() - t0 < (uint64_t)o->p.seconds * 1000000000ull)
			perf_peer_poll(&o->p, w);
		c.measure = false;
		calls = c.completed;
		t1 = perf_now_ns();
		c1 = perf_cpu_seconds();
		c.stop = true;
		while (!err && !c.errors && c.left)
			perf_peer_poll(&o->p, w);
		if (!err && !c.errors)
			err = pr_server_cpu(&c, &s1);
		secs = (double)(t1 - t0) / 1e9;
		if (!err && !c.errors) {
			double cpu = (c1 - c0) + (s1 - s0), rate = (double)calls / secs;
			double per_core = cpu > 0 ? (double)calls / cpu : 0;

			if (o->p.json)
				printf("{\"test\":\"rpc-rate\",\"impl\":\"be\",\"transport\":\"%s\""
				       ",\"size\":%" PRIu64 ",\"depth\":%u,\"seconds\":%.3f"
				       ",\"calls\":%" PRIu64 ",\"calls_per_s\":%.0f"
				       ",\"calls_per_s_per_core\":%.0f,\"cpu_s\":%.3f"
				       ",\"polling\":\"%s\"}\n",
				       o->p.transport, o->p.size, o->depth, secs, calls, rate,
				       per_core, cpu, o->p.adaptive ? "adaptive" : "busy");
			else
				printf("rpc-rate  %-5s %8" PRIu64 " B  depth %u: %.0f calls/s, "
				       "%.0f calls/s per core (CPU %.2f s of both ends in %.2f s)\n",
				       o->p.transport, o->p.size, o->depth, rate, per_core, cpu,
				       secs);
		}
	}
	if (!err && c.errors)
		err = -EIO;
	if (err)
		fprintf(stderr, "be-perf %s: %s\n", o->p.cmd, be_strerror(err));
	/* Tell a spawned server to go. */
	if (peer) {
		void *rep = NULL;

		be_rpc_call_sync(c.ch, PR_SVC, PR_QUIT, NULL, 0, NULL, &rep, NULL);
		be_rpc_buf_free(rep);
	}
	be_rpc_chan_destroy(c.ch);
	be_rpc_destroy(c.rpc);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	free(c.rpc_us);
	free(c.sock_us);
	if (peer && perf_peer_wait(peer, o->p.timeout_s * 1000) != 0 && !err) {
		fprintf(stderr, "be-perf %s: the server did not exit cleanly\n", o->p.cmd);
		return 1;
	}
	return err ? 1 : 0;
}

/* ---- rpc-cost: both ends in this thread ---- */

struct pr_cost {
	struct be_rpc_chan *ch;
	uint64_t left;
	int errors;
};

static void pr_cost_cb(int status, void *reply, size_t len, void *arg)
{
	struct pr_cost *c = arg;

	if (status) {
		c->errors++;
		c->left = 0;
		return;
	}
	if (--c->left && !be_rpc_call(c->ch, PR_SVC, PR_ECHO, reply, len, NULL, pr_cost_cb, c,
				      NULL))
		return;
	be_rpc_buf_free(reply);
}

static int pr_cost_run(struct pr_cost *c, struct be_worker *cw, struct be_worker *sw,
		       uint64_t n, size_t size)
{
	void *req = be_rpc_buf_alloc(size);

	if (!req)
		return -ENOMEM;
	memset(req, 0x5a, size);
	c->left = n;
	if (be_rpc_call(c->ch, PR_SVC, PR_ECHO, req, size, NULL, pr_cost_cb, c, NULL)) {
		be_rpc_buf_free(req);
		return -EIO;
	}
	while (c->left) {
		be_worker_progress(cw);
		be_worker_progress(sw);
	}
	return c->errors ? -EIO : 0;
}

static int pr_cost(const struct pr_opts *o)
{
	struct pr_cost c = { 0 };
	struct be_rpc *crpc, *srpc;
	struct be_listener *l;
	struct be_rpc_config rc;
	struct perf_duo d;
	char addr[160];
	uint64_t t0, t1;
	int err;

	if (perf_listen_addr(o->p.cmd, o->p.transport, "cost", addr, sizeof(addr)))
		return 1;
	be_rpc_config_init(&rc);
	rc.timeout_us = (uint32_t)o->p.timeout_s * 1000000u;
	if ((err = perf_duo_open(&d, NULL)) || (err = be_rpc_create(d.sw, &rc, &srpc)) ||
	    (err = be_rpc_create(d.cw, &rc, &crpc)) ||
	    (err = be_rpc_register(srpc, PR_SVC, PR_ECHO, pr_echo, NULL, 0)) ||
	    (err = be_rpc_listen(srpc, addr, &l)) ||
	    (err = be_listener_addr(l, addr, sizeof(addr))) ||
	    (err = be_rpc_chan_open(crpc, addr, &c.ch))) {
		fprintf(stderr, "be-perf %s: setup: %s\n", o->p.cmd, be_strerror(err));
		return 1;
	}
	err = pr_cost_run(&c, d.cw, d.sw, o->p.warmup ? o->p.warmup : 1, o->p.size);
	t0 = perf_now_ns();
	if (!err)
		err = pr_cost_run(&c, d.cw, d.sw, o->p.iters, o->p.size);
	t1 = perf_now_ns();
	if (err)
		fprintf(stderr, "be-perf %s: %s\n", o->p.cmd, be_strerror(err));
	else if (o->p.json)
		printf("{\"test\":\"rpc-cost\",\"impl\":\"be\",\"transport\":\"%s\""
		       ",\"size\":%" PRIu64 ",\"iters\":%" PRIu64 ",\"ns_per_call\":%.1f}\n",
		       o->p.transport, o->p.size, o->p.iters,
		       (double)(t1 - t0) / (double)o->p.iters);
	else
		printf("be-perf rpc-cost: %s, %" PRIu64 " B, one thread, both ends: %.1f ns per "
		       "call (%" PRIu64 " calls)\n",
		       o->p.transport, o->p.size, (double)(t1 - t0) / (double)o->p.iters,
		       o->p.iters);
	be_rpc_chan_destroy(c.ch);
	be_rpc_destroy(crpc);
	be_rpc_destroy(srpc);
	perf_duo_close(&d);
	return err ? 1 : 0;
}

static int pr_client_fn(void *arg, const char *addr, struct perf_peer *peer)
{
	return pr_client(arg, addr, peer);
}

static void pr_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: be-perf %s [options]\n"
	       "  --transport T   shm, tcp or verbs (default " PERF_DEFAULT_TRANSPORT ")\n"
	       "  --addr \"R S\"    client: the server's RPC and Socket addresses;\n"
	       "                  server: where to listen\n"
	       "  --server        run only the server (needs --addr)\n"
	       "  --size N        request = reply size (default 64)\n"
	       "  --iters N       rpc-lat, rpc-cost: measured round trips (default 10000);\n"
	       "  --warmup N      before them (default 1000), --block N alternation (1000)\n"
	       "  --depth N       rpc-rate: calls in flight (default 32)\n"
	       "  --seconds S     rpc-rate: how long (default 3)\n"
	       "  --timeout S     call deadline and idle limit (default 30)\n"
	       "  --busy          poll without sleeping (default for rpc-lat)\n"
	       "  --adaptive      spin, then sleep on events (default for rpc-rate: two\n"
	       "                  processes spinning on a loaded host starve each other)\n"
	       "  --json          one JSON object per line\n",
	       cmd);
}

static int pr_main(int argc, char **argv, int mode)
{
	struct pr_opts o = {
		.p = { .cmd = argv[0], .transport = PERF_DEFAULT_TRANSPORT, .timeout_s = 30,
		       .seconds = 3, .size = 64, .iters = 10000, .warmup = 1000,
		       .adaptive = mode == PR_RATE },
		.mode = mode, .block = 1000, .depth = 32,
	};
	const struct perf_opt opts[] = {
		PERF_PEER_OPTS(o.p),
		PERF_OPT("--block", SIZE, &o.block),
		PERF_OPT("--depth", U32, &o.depth),
		PERF_OPTS_END,
	};
	int rc;

	rc = perf_opts_parse(o.p.cmd, argc, argv, opts, pr_usage);
	if (rc >= 0)
		return rc;
	if (!o.p.iters || !o.block || !o.depth || o.depth > 65536 || o.p.timeout_s <= 0 ||
	    o.p.timeout_s > 4000 || o.p.seconds <= 0 || o.p.size > (1u << 30) ||
	    (o.p.server && !o.p.addr))
		return perf_opts_bad(o.p.cmd);
	if (mode == PR_COST)
		return pr_cost(&o);
	return perf_peer_run(&o.p, pr_server_fn, pr_client_fn, &o);
}

#define PR_COMMAND(id, name, mode, help) PERF_COMMAND_MODE(id, name, help, pr_main, mode)
PR_COMMAND(rpc_cost, "rpc-cost", PR_COST, "software cost of an RPC call, both ends in one thread")
PR_COMMAND(rpc_lat, "rpc-lat", PR_LAT, "RPC call round trip beside the Socket ping-pong (same run)")
PR_COMMAND(rpc_rate, "rpc-rate", PR_RATE, "RPC calls per second and per core, --depth in flight")
