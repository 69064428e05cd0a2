/*
 * perf_raw.c - be-perf raw-lat and raw-bw: the transports measured on
 * their own, through the xport ops table, with nothing of the BE core.
 *
 *   raw-lat  WRITE_WITH_IMM ping-pong. The client writes @size bytes into
 *            the server's buffer with an immediate; the server busy-polls
 *            its CQ for the RECV_IMM, reposts the receive and writes back.
 *            One-way latency = RTT / 2, one sample per iteration.
 *   raw-bw   the client streams @size-byte WRITEs into one remote
 *            buffer, up to @window signaled WRs outstanding; every
 *            --imm-every-th (default: one per window) is a WRITE_WITH_IMM
 *            carrying its sequence number, as the core ends a large
 *            message's fragments with one. --bufs N rotates the writes
 *            over N source and N destination buffers, so the memory they
 *            touch matches a Socket stream with N messages in flight
 *            (be-perf bw --window N), not one hot buffer. The receiver returns credits
 *            (how many writes it has seen land) as small WRITE_WITH_IMMs,
 *            which keeps the sender from ever overrunning the receiver's
 *            SRQ (an RNR would kill the connection).
 *
 * Model. Two processes, one connection, one evch + CQ + SRQ each, all on
 * the main thread. The client sends a hello as connect private data (its
 * buffer address and rkey, the test and its parameters); the server sizes
 * its queues and buffers from it and answers with its own buffer in the
 * accept private data. Without --addr the client fork()s the server itself
 * (perf_peer.c), so one command measures both ends; with --addr it
 * connects to a "be-perf raw-lat --server --addr A" started elsewhere (the
 * server follows whichever test the client asks for).
 *
 * Buffers come from bemalloc with the device attached, exactly as the
 * core will use them. Small writes go inline when the device allows (as
 * ib_write_lat does); --no-inline turns that off.
 *
 * Bounded waits: every wait gives up after --timeout seconds without
 * progress, and a DISCONNECTED event ends the run, so a dead or wedged
 * peer fails the command instead of hanging it.
 *
 * This file has the options, the hello and the two roles; perf_raw.h
 * names the files that do the rest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_peer.h"
#include "perf_raw.h"

static void raw_usage(FILE *f, const char *cmd)
{
	int bw = !strcmp(cmd, "raw-bw");

	fprintf(f,
		"usage: be-perf %s [options]\n"
		"  --transport T   shm, tcp or verbs (default " PERF_DEFAULT_TRANSPORT ")\n"
		"  --size N        bytes per write (default %s; K/M/G suffixes)\n"
		"  --iters N       measured %s (default %s)\n"
		"  --warmup N      untimed ones first (default %s)\n"
		"%s"
		"  --addr A        connect to a server at A (\"host:port\", a name for shm);\n"
		"                  without it a peer process is started on this host\n"
		"  --server        be the server: listen on --addr and serve one client\n"
		"  --cpu A[,B]     pin this process to core A and the peer to core B\n"
		"  --dev NAME      transport device (default: the first)\n"
		"  --no-inline     never post small writes inline\n"
		"  --sleep         both ends spin briefly, then arm the CQ and sleep in\n"
		"                  poll() (default: busy-poll, as perftest and UCX do)\n"
		"%s"
		"  --timeout S     fail after S seconds without progress (default 10)\n"
		"  --json          one JSON object per line\n",
		cmd, bw ? "1M" : "64", bw ? "writes" : "round trips", bw ? "2000" : "20000",
		bw ? "100" : "1000",
		bw ? "  --window W      outstanding writes (default 16)\n"
		     "  --imm-every K   every K-th write is a WRITE_WITH_IMM, the others plain\n"
		     "                  WRITEs (default: the window; 1 = all)\n"
		     "  --bufs N        rotate over N buffers each side (default 1)\n" : "",
		bw ? "" : "  --write-poll    plain WRITEs; the receiver spins on the last byte\n"
			  "                  (ib_write_lat's method) instead of taking RECV_IMMs\n");
}

/* --cpu A[,B]: this process on core A, the peer on core B. */
static int raw_parse_cpu(void *dst, const char *v)
{
	int *cpu = dst;
	char *end;

	cpu[0] = (int)strtol(v, &end, 10);
	if (*end == ',')
		cpu[1] = (int)strtol(end + 1, &end, 10);
	if (*end || cpu[0] < 0) {
		fprintf(stderr, "be-perf: bad --cpu '%s' (A or A,B)\n", v);
		return -1;
	}
	return 0;
}

static int raw_parse(int argc, char **argv, struct raw_opts *o)
{
	int lat, rc, timeout_s = 10;

	memset(o, 0, sizeof(*o));
	o->cmd = argv[0];
	o->mode = strcmp(argv[0], "raw-bw") ? RAW_LAT : RAW_BW;
	lat = o->mode == RAW_LAT;
	o->transport = PERF_DEFAULT_TRANSPORT;
	o->dev = "";
	o->size = lat ? 64 : 1u << 20;
	o->iters = lat ? 20000 : 2000;
	o->warmup = lat ? 1000 : 100;
	o->window = 16;
	o->bufs = 1;
	o->cpu[0] = o->cpu[1] = -1;

	{
		const struct perf_opt opts[] = {
			PERF_FLAG("--server", &o->server, 1),
			PERF_FLAG("--json", &o->json, 1),
			PERF_FLAG("--no-inline", &o->no_inline, 1),
			PERF_FLAG("--sleep", &o->sleep, 1),
			PERF_FLAG(lat ? "--write-poll" : NULL, &o->write_poll, 1),
			PERF_OPT("--transport", STR, &o->transport),
			PERF_OPT("--addr", STR, &o->addr),
			PERF_OPT("--dev", STR, &o->dev),
			PERF_OPT("--size", SIZE, &o->size),
			PERF_OPT("--iters", SIZE, &o->iters),
			PERF_OPT("--warmup", SIZE, &o->warmup),
			PERF_OPT("--window", U32, &o->window),
			PERF_OPT(lat ? NULL : "--imm-every", U32, &o->imm_every),
			PERF_OPT(lat ? NULL : "--bufs", U32, &o->bufs),
			PERF_OPT("--timeout", INT, &timeout_s),
			PERF_FN("--cpu", o->cpu, raw_parse_cpu),
			PERF_OPTS_END,
		};

		rc = perf_opts_parse(o->cmd, argc, argv, opts, raw_usage);
	}
	if (rc == 0)
		exit(0);
	if (rc > 0)
		return -EINVAL;
	o->timeout_ms = timeout_s * 1000;
	if (!o->size || o->size > UINT32_MAX) {
		fprintf(stderr, "be-perf %s: --size must be 1..4G-1\n", o->cmd);
		return -EINVAL;
	}
	if (!o->iters || o->iters + o->warmup >= UINT32_MAX) {
		fprintf(stderr, "be-perf %s: --iters must be 1..2^32-2 (with --warmup)\n", o->cmd);
		return -EINVAL;
	}
	if (!o->window || o->window > 4096) {
		fprintf(stderr, "be-perf %s: --window must be 1..4096\n", o->cmd);
		return -EINVAL;
	}
	if (!o->bufs || o->bufs > 4096 || o->size * o->bufs > (1ull << 34)) {
		fprintf(stderr, "be-perf %s: --bufs must be 1..4096 and size x bufs <= 16G\n",
			o->cmd);
		return -EINVAL;
	}
	if (!o->imm_every)
		o->imm_every = o->window;
	if (o->imm_every > o->iters + o->warmup)
		o->imm_every = (uint32_t)(o->iters + o->warmup);
	if (o->timeout_ms <= 0) {
		fprintf(stderr, "be-perf %s: --timeout must be > 0 seconds\n", o->cmd);
		return -EINVAL;
	}
	if (o->server && !o->addr) {
		fprintf(stderr, "be-perf %s: --server needs --addr\n", o->cmd);
		return -EINVAL;
	}
	return 0;
}

/* ---- connection ----------------------------------------------------- */

static void raw_hello_fill(struct raw_ctx *c, const struct raw_opts *o, struct raw_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = RAW_MAGIC;
	h->version = RAW_VERSION;
	h->mode = (uint8_t)o->mode;
	h->flags = (o->write_poll ? RAW_F_WRITE_POLL : 0) | (o->sleep ? RAW_F_SLEEP : 0);
	h->addr = (uint64_t)(uintptr_t)c->rbuf;
	h->size = (uint32_t)o->size;
	h->total = (uint32_t)(o->warmup + o->iters);
	h->warmup = (uint32_t)o->warmup;
	h->window = o->window;
	h->nrecv = c->nrecv;
	h->imm_every = o->imm_every;
	h->bufs = o->bufs;
}

static int raw_hello_check(const struct raw_opts *o, const uint8_t *priv, size_t len,
			   struct raw_hello *h)
{
	if (len < sizeof(*h)) {
		fprintf(stderr, "be-perf %s: peer sent %zu bytes of private data, want %zu\n",
			o->cmd, len, sizeof(*h));
		return -EPROTO;
	}
	memcpy(h, priv, sizeof(*h));
	if (h->magic != RAW_MAGIC || h->version != RAW_VERSION || h->mode > RAW_BW ||
	    (h->flags & ~(RAW_F_WRITE_POLL | RAW_F_SLEEP)) ||
	    !h->size || !h->window || !h->imm_every || h->warmup > h->total ||
	    !h->bufs || h->bufs > 4096 || (uint64_t)h->size * h->bufs > (1ull << 34)) {
		fprintf(stderr, "be-perf %s: peer is not a be-perf raw client of this version\n",
			o->cmd);
		return -EPROTO;
	}
	return 0;
}

/* The server role: listen, serve one client, exit. */
static int raw_server(const struct raw_opts *o, int ready_fd)
{
	struct raw_ctx c;
	struct raw_hello h, mine;
	struct be_xconn_attr attr;
	struct be_xevent ev;
	char bound[BE_XPORT_ADDR_MAX + 1];
	uint32_t nrecv;
	int rc;

	rc = raw_open(&c, o);
	if (rc)
		goto out;
	rc = c.ops->listen(c.ch, o->addr, 4, &c.l);
	if (rc) {
		fprintf(stderr, "be-perf %s: listen on %s: %s\n", o->cmd, o->addr, strerror(-rc));
		goto out;
	}
	if (c.ops->listener_addr(c.l, bound, sizeof(bound)) < 0)
		snprintf(bound, sizeof(bound), "%s", o->addr);
	if (ready_fd >= 0) {
		rc = perf_peer_ready(ready_fd, bound);
		ready_fd = -1;
		if (rc)
			goto out;
	} else {
		printf("be-perf %s: listening on %s\n", o->cmd, bound);
		fflush(stdout);
	}

	/* A self-spawned peer gives up on its parent; a --server waits. */
	rc = raw_wait_event(&c, BE_XEV_CONNECT_REQUEST, &ev, o->server ? -1 : o->timeout_ms);
	if (rc)
		goto out;
	c.conn = ev.conn;
	rc = raw_hello_check(o, ev.priv, ev.priv_len, &h);
	if (rc) {
		c.ops->reject(c.conn, NULL, 0);
		c.conn = NULL; /* the transport destroys a rejected conn */
		goto out;
	}
	nrecv = h.mode == RAW_BW ? (h.window * 4 > 64 ? h.window * 4 : 64) : 64;
	rc = raw_queues(&c, h.size, h.bufs, nrecv, h.window);
	if (rc) {
		c.ops->reject(c.conn, NULL, 0);
		c.conn = NULL;
		goto out;
	}
	c.peer_addr = h.addr;
	c.peer_nrecv = h.nrecv;
	c.sleep = !!(h.flags & RAW_F_SLEEP);
	{
		struct raw_opts so = *o;

		so.mode = h.mode;
		so.size = h.size;
		so.iters = h.total - h.warmup;
		so.warmup = h.warmup;
		so.window = h.window;
		so.imm_every = h.imm_every;
		so.bufs = h.bufs;
		raw_hello_fill(&c, &so, &mine);
	}
	raw_conn_attr(&c, &attr);
	rc = c.ops->accept(c.conn, &attr, &mine, sizeof(mine));
	if (rc) {
		fprintf(stderr, "be-perf %s: accept: %s\n", o->cmd, strerror(-rc));
		goto out;
	}
	rc = raw_wait_event(&c, BE_XEV_ESTABLISHED, &ev, o->timeout_ms);
	if (rc)
		goto out;
	rc = raw_keys(&c);
	if (rc)
		goto out;

	rc = h.mode == RAW_LAT ? raw_lat_server(&c, &h) : raw_bw_server(&c, &h);
	if (rc)
		goto out;
	/* The client hangs up once it has everything it needs. */
	rc = raw_wait_disconnect(&c, o->timeout_ms);
out:
	if (ready_fd >= 0)
		close(ready_fd);
	raw_close(&c);
	return rc;
}

static int raw_server_fn(void *arg, int ready_fd)
{
	return raw_server(arg, ready_fd);
}

static int raw_connect(struct raw_ctx *c, const struct raw_opts *o, const char *addr,
		       struct raw_hello *h)
{
	struct be_xconn_attr attr;
	struct be_xevent ev;
	struct raw_hello peer;
	int rc;

	raw_hello_fill(c, o, h);
	raw_conn_attr(c, &attr);
	rc = c->ops->connect(c->ch, addr, &attr, h, sizeof(*h), &c->conn);
	if (rc) {
		fprintf(stderr, "be-perf %s: connect to %s: %s\n", o->cmd, addr, strerror(-rc));
		return rc;
	}
	rc = raw_wait_event(c, BE_XEV_ESTABLISHED, &ev, o->timeout_ms);
	if (rc)
		return rc;
	rc = raw_hello_check(o, ev.priv, ev.priv_len, &peer);
	if (rc)
		return rc;
	c->peer_addr = peer.addr;
	c->peer_nrecv = peer.nrecv;
	return raw_keys(c);
}

/* ---- client, report, subcommands ------------------------------------- */

void raw_cpu_str(const struct raw_opts *o, char *buf, size_t len)
{
	if (o->cpu[0] < 0)
		snprintf(buf, len, "none");
	else if (o->cpu[1] < 0)
		snprintf(buf, len, "%d", o->cpu[0]);
	else
		snprintf(buf, len, "%d,%d", o->cpu[0], o->cpu[1]);
}

/* The client role against @addr; prints the report on success. */
static int raw_client(const struct raw_opts *o, const char *addr)
{
	struct raw_ctx c;
	struct raw_hello h;
	struct raw_bw_result bw = { 0, 0 };
	struct perf_summary s;
	double *samples = NULL;
	uint32_t nrecv = 64;
	int rc;

	rc = raw_open(&c, o);
	if (rc)
		goto out;
	rc = raw_queues(&c, o->size, o->bufs, nrecv, o->window);
	if (rc)
		goto out;
	samples = calloc(o->iters, sizeof(*samples));
	if (!samples) {
		rc = -ENOMEM;
		goto out;
	}
	if (o->mode == RAW_BW)
		c.wr_lat = samples; /* write post-to-completion latencies */
	c.sleep = o->sleep;
	rc = raw_connect(&c, o, addr, &h);
	if (rc)
		goto out;
	if (o->mode == RAW_LAT)
		rc = raw_lat_client(&c, &h, samples);
	else
		rc = raw_bw_client(&c, &h, &bw);
	if (rc)
		goto out;
	raw_hangup(&c);
	if (o->mode == RAW_LAT) {
		perf_summarize(samples, o->iters, &s);
		raw_report_lat(o, &s);
	} else {
		perf_summarize(samples, c.wr_lat_n, &s);
		raw_report_bw(o, &bw, &s);
	}
out:
	if (c.wr_lat == samples)
		c.wr_lat = NULL;
	free(samples);
	raw_close(&c);
	return rc;
}

static int raw_main(int argc, char **argv)
{
	struct raw_opts o, so;
	struct perf_peer peer;
	char listen_addr[BE_XPORT_ADDR_MAX + 1], addr[BE_XPORT_ADDR_MAX + 1];
	int rc, prc;

	if (raw_parse(argc, argv, &o))
		return 2;
	if (!be__xport_find(o.transport)) {
		fprintf(stderr, "be-perf %s: transport '%s' is not built in\n", o.cmd, o.transport);
		return 2;
	}
	if (o.server) {
		if (o.cpu[0] >= 0 && (rc = perf_pin_cpu(o.cpu[0]))) {
			fprintf(stderr, "be-perf %s: pin to cpu %d: %s\n", o.cmd, o.cpu[0],
				strerror(-rc));
			return 1;
		}
		return raw_server(&o, -1) ? 1 : 0;
	}
	if (o.addr)
		return raw_client(&o, o.addr) ? 1 : 0;

	/* No address: start the server ourselves, before touching the
	 * library, and measure against it. */
	if (raw_local_addr(&o, listen_addr, sizeof(listen_addr)))
		return 2;
	so = o;
	so.addr = listen_addr;
	rc = perf_peer_spawn(&peer, o.cpu[1], raw_server_fn, &so);
	if (rc) {
		fprintf(stderr, "be-perf %s: starting the peer: %s\n", o.cmd, strerror(-rc));
		return 1;
	}
	rc = perf_peer_addr(&peer, addr, sizeof(addr), o.timeout_ms);
	if (rc) {
		fprintf(stderr, "be-perf %s: the peer did not start listening: %s\n", o.cmd,
			strerror(-rc));
		perf_peer_kill(&peer);
		return 1;
	}
	if (o.cpu[0] >= 0 && (rc = perf_pin_cpu(o.cpu[0]))) {
		fprintf(stderr, "be-perf %s: pin to cpu %d: %s\n", o.cmd, o.cpu[0], strerror(-rc));
		perf_peer_kill(&peer);
		return 1;
	}
	rc = raw_client(&o, addr);
	if (rc) {
		perf_peer_kill(&peer);
		return 1;
	}
	prc = perf_peer_wait(&peer, o.timeout_ms);
	if (prc) {
		fprintf(stderr, "be-perf %s: the peer failed (%s)\n", o.cmd,
			prc == -ETIMEDOUT ? "did not exit, killed" :
			prc < 0 ? "killed by a signal" : "non-zero exit");
		return 1;
	}
	return 0;
}

PERF_COMMAND(raw_lat, "raw-lat", "transport WRITE_WITH_IMM ping-pong latency (--transport)",
	     raw_main)
PERF_COMMAND(raw_bw, "raw-bw", "transport 1 MiB windowed WRITE bandwidth (--transport)",
	     raw_main)
