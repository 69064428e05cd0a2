/*
 * perf_sock.c - be-perf lat|bw|hol|mux: the BE core measured through the
 * public Socket API (include/be/sock.h), on any transport.
 *
 *   lat  one socket, ping-pong of --size bytes; one-way latency = RTT/2.
 *        The client sends each request from its receive callback, in the
 *        answer's buffer (as the server echoes); --after-progress sends
 *        from its loop once be_worker_progress() returned, in a new one.
 *   bw   --sockets sockets stream --size-byte messages, --window messages
 *        in flight per socket; the server answers each with an 8-byte
 *        ack. Throughput, and the send->ack time per message, after
 *        --warmup messages per socket were answered (as raw-bw).
 *   hol  head-of-line blocking: one socket streams --big messages (acked)
 *        while another does --size ping-pongs on the same Engine. Reports
 *        the small ping-pong's latency; run with --no-sched to see FIFO.
 *   mux  --sockets sockets on one Engine; each round sends one --size
 *        message on every socket and waits for all echoes.
 *   idle --sockets sockets on one Engine, one echo each, then both ends
 *        wait with adaptive polling for --seconds: the CPU an idle
 *        Engine costs (keepalives included).
 *
 * The first byte of each message tells the server what to do: 'E' echo
 * it back, 'A' answer with an 8-byte ack (large messages). Without --addr
 * the client fork()s the server (perf_peer.c), so one command measures
 * both ends, and CPU time covers both processes; with --server --addr A
 * a server runs alone, and a client elsewhere uses --addr A.
 *
 * Output: a table, or with --json one object per line with the fields
 * test, transport, size, iters, p50_us, p99_us, avg_us, mb_s,
 * cpu_s_per_gb, sockets, bytes_per_socket (library memory one more Socket
 * costs on the client: glibc heap + bemalloc in use), scheduling, polling,
 * and for bw cpu_tx_s_per_gb (the sender's CPU in the measured part, as
 * raw-bw's cpu s/GB(tx); cpu_s_per_gb counts the server's whole run).
 *
 * Polling: lat, hol and mux busy-poll both ends by default (like the raw
 * tests and perftest: the library's latency, not the scheduler's wakeup);
 * bw uses adaptive polling (be_worker_wait) by default, because two
 * processes spinning on a loaded host starve each other. --busy and
 * --adaptive override.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <be/be.h>

#include "perf.h"
#include "perf_peer.h"

enum sk_mode { SK_LAT, SK_BW, SK_HOL, SK_MUX, SK_IDLE };

struct sk_opts {
	struct perf_peer_opts p;
	enum sk_mode mode;
	int sched, stats;
	int after_progress;    /* lat: send from the loop, not the callback */
	uint64_t big;
	uint32_t sockets, window;
};

/* ---- server ---- */

struct sk_srv {
	int accepted, closed;
};

static void sk_free_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	be_free(buf);
}

static void sk_srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	if (len == 0 || ((char *)buf)[0] == 'E') {
		if (be_sock_send(s, buf, len, sk_free_cb, NULL))
			be_free(buf);
		return;
	}
	be_free(buf);
	buf = be_alloc(8);
	if (buf && be_sock_send(s, buf, 8, sk_free_cb, NULL))
		be_free(buf);
}

static int sk_srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	((struct sk_srv *)user)->accepted++;
	return 0;
}

static void sk_srv_close(struct be_sock *s, int reason, void *user)
{
	((struct sk_srv *)user)->closed++;
	be_sock_close(s);
}


/* The no-progress timeout of a polling loop. It reads the clock only
 * every 4096 idle busy polls (the loop stays a tight progress loop, as in
 * the raw tests), at every idle poll when polling adaptively (a poll may
 * have slept). */
struct sk_idle {
	unsigned int polls;   /* idle polls in a row */
	uint64_t since;       /* clock at the first reading of this idle run */
};

static bool sk_idle_expired(const struct sk_opts *o, struct sk_idle *d, bool progressed)
{
	unsigned int every = o->p.adaptive ? 1 : 4096;
	uint64_t now;

	if (progressed) {
		d->polls = 0;
		return false;
	}
	if (++d->polls % every)
		return false;
	now = perf_now_ns();
	if (d->polls == every) {
		d->since = now;
		return false;
	}
	return now - d->since > (uint64_t)o->p.timeout_s * 1000000000ull;
}

static void sk_config(const struct sk_opts *o, struct be_config *cfg)
{
	be_config_init(cfg);
	cfg->frag_sched = o->sched;
	cfg->conn_timeout_ms = (uint32_t)o->p.timeout_s * 1000;
}

static int sk_server_run(const struct sk_opts *o, int ready_fd)
{
	static const struct be_sock_cbs cbs = {
		.on_recv = sk_srv_recv, .on_close = sk_srv_close, .on_accept = sk_srv_accept,
	};
	struct sk_srv sv = { 0 };
	struct be_listener *l;
	struct be_worker *w;
	struct be_config cfg;
	struct be_ctx *ctx;
	char addr[160], def[160];
	const char *la = o->p.addr;
	struct sk_idle idle = { 0 };
	int rc;

	sk_config(o, &cfg);
	if (!la) {
		if (perf_listen_addr(o->p.cmd, o->p.transport, NULL, def, sizeof(def)))
			return 1;
		la = def;
	}
	if ((rc = be_ctx_create(&cfg, &ctx)) || (rc = be_worker_create(ctx, &w))) {
		fprintf(stderr, "be-perf %s: server setup: %s\n", o->p.cmd, be_strerror(rc));
		return 1;
	}
	rc = be_listen(w, la, &cbs, &sv, &l);
	if (!rc)
		rc = be_listener_addr(l, addr, sizeof(addr));
	if (rc) {
		fprintf(stderr, "be-perf %s: listen on %s: %s\n", o->p.cmd, la, be_strerror(rc));
		return 1;
	}
	if (ready_fd >= 0)
		perf_peer_ready(ready_fd, addr);
	else
	{
		printf("be-perf %s: listening on %s\n", o->p.cmd, addr);
		fflush(stdout);
	}
	/* Serve until every socket the client opened is closed (one client
	 * when spawned; forever with --server). */
	while (ready_fd < 0 || sv.accepted == 0 || sv.closed < sv.accepted)
		if (sk_idle_expired(o, &idle, perf_peer_poll(&o->p, w) > 0) && ready_fd >= 0)
			break;
	be_listener_close(l);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	return sv.closed == sv.accepted ? 0 : 1;
}

static int sk_server_fn(void *arg, int ready_fd)
{
	return sk_server_run(arg, ready_fd);
}

/* ---- client ---- */

#define SK_MAXQ 4096
#define SK_HOL_WARM_BIG 4 /* hol: large messages before measuring */

struct sk_sock {
	struct be_sock *s;
	uint64_t sent_ns[SK_MAXQ]; /* FIFO of send times of outstanding messages */
	uint32_t head, tail;
	uint64_t answered;
	/* lat from the callback: the client, and the answers to wait for
	 * before the callback stops sending (0: not in that mode). */
	struct sk_cli *cli;
	uint64_t cb_total;
};

struct sk_cli {
	const struct sk_opts *o;
	/* The clock read when the last answers arrived, for the next send:
	 * one clock read per round trip, as in raw-lat. 0: read it anew. */
	uint64_t now;
	struct sk_sock *socks;
	double *samples;
	size_t nsamples, cap;
	uint64_t measure_from;    /* answers numbered below this are warmup */
	uint64_t answered;        /* all sockets */
	int errors;
	int closed;
	uint64_t mem_per_sock;    /* bytes one more Socket costs (client side) */
	uint64_t cb_t0;           /* lat from the callback: clock and CPU when */
	double cb_cpu0;           /* the last warmup answer arrived */
	double cpu_tx0, cpu_tx;   /* bw: the sender's CPU, measured phase */
};

static void sk_sample(struct sk_cli *c, double us);
static void sk_cli_lat_cb(struct sk_sock *k, void *buf, size_t len);

static void sk_cli_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	struct sk_cli *c = arg;

	if (status)
		c->errors++;
	be_free(buf);
}

/* Send @b (@len bytes, taken) on @k, its send time noted: c->now, the
 * clock of the answer just received, or read now. */
static int sk_post(struct sk_cli *c, struct sk_sock *k, void *b, size_t len)
{
	int rc;

	k->sent_ns[k->tail++ % SK_MAXQ] = c->now ? c->now : perf_now_ns();
	c->now = 0;
	rc = be_sock_send(k->s, b, len, sk_cli_sent, c);
	if (rc) {
		be_free(b);
		k->tail--;
	}
	return rc;
}

/* A fresh message of @len bytes whose first byte is @tag, sent on @k. */
static int sk_send(struct sk_cli *c, struct sk_sock *k, size_t len, char tag)
{
	char *b = be_alloc(len ? len : 1);

	if (!b)
		return -ENOMEM;
	if (len) {
		memset(b, 0x5a, len > 4096 ? 4096 : len);
		b[0] = tag;
	}
	return sk_post(c, k, b, len);
}

static void sk_cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct sk_sock *k = user;

	if (k->cb_total) {
		sk_cli_lat_cb(k, buf, len);
		return;
	}
	be_free(buf);
	k->answered++;
	k->head++;
}

/*
 * sk_cli_lat_cb() - lat's client answering from its receive callback, as
 * the server does and as a run-to-completion application would: one
 * clock read per round trip (as in raw-lat), then the echo goes straight
 * back out in the buffer it came in (the application owns it now), before
 * the rest of the progress call. Without --after-progress this is lat's
 * loop; with it, the client sends from its loop after be_worker_progress()
 * returned, in a fresh buffer.
 */
static void sk_cli_lat_cb(struct sk_sock *k, void *buf, size_t len)
{
	struct sk_cli *c = k->cli;
	uint64_t now = perf_now_ns();
	int rc;

	k->answered++;
	k->head++;
	if (k->answered > c->o->p.warmup)
		sk_sample(c, (double)(now - k->sent_ns[(k->answered - 1) % SK_MAXQ]) / 2e3);
	else if (k->answered == c->o->p.warmup) {
		c->cb_t0 = now;
		c->cb_cpu0 = perf_cpu_seconds();
	}
	if (k->answered >= k->cb_total) {
		be_free(buf);
		return;
	}
	if (len != c->o->p.size || (len && ((char *)buf)[0] != 'E')) {
		/* Not the echo of what was sent: counted, and the loop stops. */
		be_free(buf);
		c->errors++;
		return;
	}
	c->now = now;
	if (len) {
		rc = sk_post(c, k, buf, len);
	} else {
		be_free(buf);
		rc = sk_send(c, k, 0, 'E');
	}
	if (rc)
		c->errors++;
}

static void sk_cli_close(struct be_sock *s, int reason, void *user)
{
	fprintf(stderr, "be-perf: socket closed by the peer: %s\n", be_strerror(reason));
	exit(1);
}

static void sk_sample(struct sk_cli *c, double us)
{
	if (c->nsamples == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 4096;
		c->samples = realloc(c->samples, c->cap * sizeof(double));
		if (!c->samples) {
			fprintf(stderr, "be-perf: out of memory\n");
			exit(1);
		}
	}
	c->samples[c->nsamples++] = us;
}

/* Progress until socket @k has @n answers; records RTT samples (halved
 * when @half) for answers past warmup. Returns 0 or -ETIMEDOUT. */
static int sk_wait(struct be_worker *w, struct sk_cli *c, struct sk_sock *k, uint64_t n,
		   bool half, bool record)
{
	struct sk_idle idle = { 0 };

	while (k->answered < n) {
		uint64_t before = k->answered;

		perf_peer_poll(&c->o->p, w);
		if (sk_idle_expired(c->o, &idle, k->answered != before))
			return -ETIMEDOUT;
		if (k->answered != before) {
			uint64_t now = perf_now_ns();
			uint64_t i;

			c->now = now;
			for (i = before; i < k->answered; i++) {
				double us = (double)(now - k->sent_ns[i % SK_MAXQ]) / 1000.0;

				if (record)
					sk_sample(c, half ? us / 2 : us);
			}
		}
		if (c->errors)
			return -EIO;
	}
	return 0;
}

static void sk_report(const struct sk_opts *o, struct sk_cli *c, double secs, uint64_t bytes,
		      double cpu)
{
	static const char *const names[] = { "lat", "bw", "hol", "mux", "idle" };
	struct perf_summary s;
	double mb_s = secs > 0 ? (double)bytes / secs / 1e6 : 0;
	double cpu_gb = bytes ? cpu / ((double)bytes / 1e9) : 0;
	char tx[64] = "";

	perf_summarize(c->samples, c->nsamples, &s);
	if (o->mode == SK_BW)
		snprintf(tx, sizeof(tx), ",\"cpu_tx_s_per_gb\":%.4f",
			 bytes ? c->cpu_tx / ((double)bytes / 1e9) : 0);
	if (o->mode == SK_IDLE) {
		double pct = secs > 0 ? cpu / secs * 100.0 : 0;

		if (o->p.json)
			printf("{\"test\":\"idle\",\"transport\":\"%s\",\"sockets\":%u"
			       ",\"seconds\":%.3f,\"cpu_s\":%.4f,\"cpu_pct\":%.3f"
			       ",\"polling\":\"adaptive\"}\n",
			       o->p.transport, o->sockets, secs, cpu, pct);
		else
			printf("be-perf idle: %s, %u socket(s) on one Engine, %.1f s: CPU %.4f s "
			       "= %.3f %% of one core (both processes)\n",
			       o->p.transport, o->sockets, secs, cpu, pct);
		return;
	}
	if (o->p.json) {
		printf("{\"test\":\"%s\",\"transport\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%" PRIu64 ",\"p50_us\":%.3f,\"p99_us\":%.3f,\"avg_us\":%.3f"
		       ",\"mb_s\":%.2f,\"cpu_s_per_gb\":%.4f,\"sockets\":%u"
		       ",\"bytes_per_socket\":%" PRIu64 ",\"scheduling\":\"%s\""
		       ",\"polling\":\"%s\"%s%s}\n",
		       names[o->mode], o->p.transport, o->p.size, o->p.iters, s.p50, s.p99, s.avg,
		       mb_s, cpu_gb, o->sockets, c->mem_per_sock,
		       o->sched ? "round-robin" : "fifo", o->p.adaptive ? "adaptive" : "busy",
		       o->mode != SK_LAT ? "" :
		       o->after_progress ? ",\"client\":\"after-progress\"" :
					   ",\"client\":\"callback\"", tx);
		return;
	}
	printf("be-perf %s: %s, %" PRIu64 " B, %u socket(s), scheduling %s, %s polling%s\n",
	       names[o->mode], o->p.transport, o->p.size, o->sockets,
	       o->sched ? "round-robin" : "fifo", o->p.adaptive ? "adaptive" : "busy",
	       o->mode != SK_LAT ? "" :
	       o->after_progress ? ", client sends after progress" :
				   ", client sends from its callback");
	printf("  latency us (%s): p50 %.3f  p99 %.3f  avg %.3f  (n=%zu)\n",
	       o->mode == SK_BW ? "send->ack" : "one-way", s.p50, s.p99, s.avg, s.n);
	printf("  throughput %.2f MB/s, CPU %.4f s/GB (both processes)", mb_s, cpu_gb);
	if (o->mode == SK_BW)
		printf(", %.4f s/GB (sender, measured part)",
		       bytes ? c->cpu_tx / ((double)bytes / 1e9) : 0);
	printf("\n");
	if (o->sockets > 1)
		printf("  memory per further Socket (client): %" PRIu64 " B\n", c->mem_per_sock);
}

/*
 * Library memory in use in this process: glibc heap (sbrk'd and mmap'd
 * chunks) plus bemalloc buffers handed out. Used to derive the memory one
 * more Socket costs, without counting the Engine the first one created.
 */
static uint64_t sk_mem_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	struct be_alloc_stats st;

	be_alloc_stats(&st);
	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd + st.bytes_in_use;
}

static int sk_client(const struct sk_opts *o, const char *addr, struct perf_peer *peer)
{
	static const struct be_sock_cbs cbs = { .on_recv = sk_cli_recv, .on_close = sk_cli_close };
	struct sk_cli c = { .o = o };
	struct be_worker *w;
	struct be_config cfg;
	struct be_ctx *ctx;
	double cpu0 = perf_cpu_seconds(), secs = 0;
	uint64_t bytes = 0, t0, i, total = o->p.iters + o->p.warmup;
	uint32_t nsock = o->mode == SK_HOL ? 2 : o->sockets, j;
	uint64_t mem0 = 0;
	int rc;

	sk_config(o, &cfg);
	if ((rc = be_ctx_create(&cfg, &ctx)) || (rc = be_worker_create(ctx, &w))) {
		fprintf(stderr, "be-perf %s: setup: %s\n", o->p.cmd, be_strerror(rc));
		return 1;
	}
	c.socks = calloc(nsock, sizeof(*c.socks));
	if (!c.socks)
		return 1;
	for (j = 0; j < nsock; j++) {
		/* Socket 0 creates the Engine; the memory of sockets 1..n-1
		 * is what each further Socket costs. */
		if (j == 1)
			mem0 = sk_mem_in_use();
		rc = be_sock_connect(w, addr, &cbs, &c.socks[j], &c.socks[j].s);
		if (rc) {
			fprintf(stderr, "be-perf %s: connect %s: %s\n", o->p.cmd, addr,
				be_strerror(rc));
			return 1;
		}
	}
	if (nsock > 1)
		c.mem_per_sock = (sk_mem_in_use() - mem0) / (nsock - 1);
	t0 = perf_now_ns();
	switch (o->mode) {
	case SK_LAT:
		if (!o->after_progress) {
			struct sk_sock *k = &c.socks[0];
			struct sk_idle idle = { 0 };

			k->cli = &c;
			k->cb_total = total;
			c.cb_t0 = t0;
			c.cb_cpu0 = cpu0;
			rc = sk_send(&c, k, o->p.size, 'E');
			while (!rc && k->answered < total) {
				uint64_t before = k->answered;

				perf_peer_poll(&o->p, w);
				if (c.errors)
					rc = -EIO;
				else if (sk_idle_expired(o, &idle, k->answered != before))
					rc = -ETIMEDOUT;
			}
			t0 = c.cb_t0;
			cpu0 = c.cb_cpu0;
			bytes = 2 * o->p.size * o->p.iters;
			break;
		}
		for (i = 0; i < total && !rc; i++) {
			if (i == o->p.warmup) {
				t0 = perf_now_ns();
				cpu0 = perf_cpu_seconds();
			}
			rc = sk_send(&c, &c.socks[0], o->p.size, 'E');
			if (!rc)
				rc = sk_wait(w, &c, &c.socks[0], i + 1, true, i >= o->p.warmup);
		}
		bytes = 2 * o->p.size * o->p.iters;
		break;
	case SK_IDLE:
		for (j = 0; j < nsock && !rc; j++)
			rc = sk_send(&c, &c.socks[j], o->p.size, 'E');
		for (j = 0; j < nsock && !rc; j++)
			rc = sk_wait(w, &c, &c.socks[j], 1, false, false);
		t0 = perf_now_ns();
		cpu0 = perf_cpu_seconds();
		while (!rc && perf_now_ns() - t0 < (uint64_t)o->p.seconds * 1000000000ull)
			rc = be_worker_wait(w, 100) < 0 ? -EIO : 0;
		break;
	case SK_MUX:
		for (i = 0; i < total && !rc; i++) {
			if (i == o->p.warmup) {
				t0 = perf_now_ns();
				cpu0 = perf_cpu_seconds();
			}
			for (j = 0; j < nsock && !rc; j++)
				rc = sk_send(&c, &c.socks[j], o->p.size, 'E');
			for (j = 0; j < nsock && !rc; j++)
				rc = sk_wait(w, &c, &c.socks[j], i + 1, true, i >= o->p.warmup);
		}
		bytes = 2 * o->p.size * o->p.iters * nsock;
		break;
	case SK_BW: {
		/* As raw-bw: --warmup messages per socket first, all answered
		 * (the first touch of every buffer, on both sides, is not the
		 * stream), then the clock, the CPU and the samples. */
		uint64_t warm = o->p.warmup, per = warm + (o->p.iters + nsock - 1) / nsock;

		for (i = 0; i < per && !rc; i++) {
			if (i == warm) {
				for (j = 0; j < nsock && !rc; j++)
					rc = sk_wait(w, &c, &c.socks[j], warm, false, false);
				t0 = perf_now_ns();
				cpu0 = perf_cpu_seconds();
				c.cpu_tx0 = cpu0;
			}
			for (j = 0; j < nsock && !rc; j++) {
				struct sk_sock *k = &c.socks[j];
				uint64_t from = i >= warm ? warm : 0;

				if (i >= from + o->window)
					rc = sk_wait(w, &c, k, i - o->window + 1, false, i >= warm);
				if (!rc)
					rc = sk_send(&c, k, o->p.size, 'A');
			}
		}
		for (j = 0; j < nsock && !rc; j++)
			rc = sk_wait(w, &c, &c.socks[j], per, false, true);
		bytes = o->p.size * (per - warm) * nsock;
		c.cpu_tx = perf_cpu_seconds() - c.cpu_tx0;
		break;
	}
	case SK_HOL: {
		struct sk_sock *big = &c.socks[0], *ping = &c.socks[1];
		uint64_t nbig = 0;

		/* Keep two large messages in flight on the first socket while the
		 * second ping-pongs. Warmup lasts --warmup pings and the first
		 * SK_HOL_WARM_BIG large messages: until then every large buffer
		 * is new memory, and its first touch (page faults, on both
		 * sides) is not the steady state being measured. */
		cpu0 = perf_cpu_seconds();
		for (i = 0; c.nsamples < o->p.iters && !rc; i++) {
			while (big->tail - big->head < 2 && !rc) {
				rc = sk_send(&c, big, o->big, 'A');
				nbig++;
			}
			if (!rc)
				rc = sk_send(&c, ping, o->p.size, 'E');
			if (!rc)
				rc = sk_wait(w, &c, ping, i + 1, true,
					     i >= o->p.warmup && big->answered >= SK_HOL_WARM_BIG);
			/* The big socket's acks are consumed by sk_cli_recv. */
		}
		if (!rc)
			rc = sk_wait(w, &c, big, nbig, false, false);
		bytes = o->big * nbig + 2 * o->p.size * i;
		break;
	}
	}
	secs = (double)(perf_now_ns() - t0) / 1e9;
	if (o->stats) {
		static char json[65536];

		if (be_worker_stats_json(w, json, sizeof(json)) > 0)
			fprintf(stderr, "%s\n", json);
	}
	if (rc) {
		fprintf(stderr, "be-perf %s: %s\n", o->p.cmd,
			rc == -ETIMEDOUT ? "no progress: timed out" : be_strerror(rc));
		return 1;
	}
	for (j = 0; j < nsock; j++)
		be_sock_close(c.socks[j].s);
	/* Close cleanly: done when the server answered every close, so it
	 * is not left waiting for us while we wait for it to exit. */
	rc = be_worker_shutdown(w, o->p.timeout_s * 1000);
	if (rc)
		fprintf(stderr, "be-perf %s: shutdown: %s\n", o->p.cmd, be_strerror(rc));
	{
		double cpu = perf_cpu_seconds() - cpu0;

		if (peer) {
			int prc = perf_peer_wait(peer, o->p.timeout_s * 1000);

			if (prc != 0)
				fprintf(stderr, "be-perf %s: server exited with %d\n", o->p.cmd,
					prc);
			cpu += (double)peer->ru.ru_utime.tv_sec + peer->ru.ru_utime.tv_usec / 1e6 +
			       (double)peer->ru.ru_stime.tv_sec + peer->ru.ru_stime.tv_usec / 1e6;
		}
		sk_report(o, &c, secs, bytes, cpu);
	}
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	free(c.socks);
	free(c.samples);
	return 0;
}

static int sk_client_fn(void *arg, const char *addr, struct perf_peer *peer)
{
	return sk_client(arg, addr, peer);
}

static void sk_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: be-perf %s [options]\n"
	       "  --transport T   shm, tcp or verbs (default: the scheme of --addr, else "
	       PERF_DEFAULT_TRANSPORT ")\n"
	       "  --addr A        client: connect to A (scheme://...); server: listen on A\n"
	       "  --server        run only the server (needs --addr)\n"
	       "  --size N        message size (K/M/G suffixes)\n"
	       "  --big N         hol: size of the large messages (default 16M)\n"
	       "  --iters N       measured iterations; --warmup N before them\n"
	       "  --sockets N     bw/mux: sockets on the one Engine\n"
	       "  --window N      bw: messages in flight per socket (default 16)\n"
	       "  --no-sched      FIFO per Engine instead of round-robin fragments\n"
	       "  --after-progress lat: the client sends each request from its loop after\n"
	       "                  progress returned, in a fresh buffer (default: from its\n"
	       "                  receive callback, echoing the answer's buffer)\n"
	       "  --timeout S     give up after S seconds without progress (default 30)\n"
	       "  --seconds S     idle: how long both ends wait (default 10)\n"
	       "  --busy          poll without sleeping (default except bw)\n"
	       "  --adaptive      spin, then sleep on events: be_worker_wait() (default for bw)\n"
	       "  --stats         print the client worker's counters (JSON) to stderr\n"
	       "  --json          one JSON object per line\n",
	       cmd);
}

static int sk_main(int argc, char **argv, int mode)
{
	struct sk_opts o = {
		.p = { .cmd = argv[0], .transport = NULL, .timeout_s = 30, .seconds = 10,
		       .size = mode == SK_BW ? 1u << 20 : 64, .warmup = 100,
		       .iters = mode == SK_BW ? 2000 : mode == SK_MUX ? 100 : 10000,
		       .adaptive = mode == SK_BW || mode == SK_IDLE },
		.mode = mode, .sched = 1, .big = 16u << 20,
		.sockets = mode == SK_MUX ? 1000 : 1, .window = 16,
	};
	const struct perf_opt opts[] = {
		PERF_PEER_OPTS(o.p),
		PERF_FLAG("--stats", &o.stats, 1),
		PERF_FLAG("--no-sched", &o.sched, 0),
		PERF_FLAG("--after-progress", &o.after_progress, 1),
		PERF_OPT("--big", SIZE, &o.big),
		PERF_OPT("--sockets", U32, &o.sockets),
		PERF_OPT("--window", U32, &o.window),
		PERF_OPTS_END,
	};
	char scheme[16];
	int rc;

	rc = perf_opts_parse(o.p.cmd, argc, argv, opts, sk_usage);
	if (rc >= 0)
		return rc;
	if (!o.p.iters || !o.sockets || !o.window || o.window >= SK_MAXQ || o.p.timeout_s <= 0 ||
	    o.p.seconds <= 0 ||
	    (mode == SK_HOL && o.big <= 4096) || (o.p.server && !o.p.addr))
		return perf_opts_bad(o.p.cmd);
	if (!o.p.transport) {
		/* The transport --addr names, else the default. */
		const char *sep = o.p.addr ? strstr(o.p.addr, "://") : NULL;

		if (sep && (size_t)(sep - o.p.addr) < sizeof(scheme)) {
			memcpy(scheme, o.p.addr, (size_t)(sep - o.p.addr));
			scheme[sep - o.p.addr] = '\0';
			o.p.transport = scheme;
		} else {
			o.p.transport = PERF_DEFAULT_TRANSPORT;
		}
	}
	if (mode == SK_HOL)
		o.sockets = 2;
	return perf_peer_run(&o.p, sk_server_fn, sk_client_fn, &o);
}

#define SK_COMMAND(id, name, mode, help) PERF_COMMAND_MODE(id, name, help, sk_main, mode)
SK_COMMAND(sock_lat, "lat", SK_LAT, "Socket ping-pong latency (one-way = RTT/2)")
SK_COMMAND(sock_bw, "bw", SK_BW, "Socket streaming throughput, --sockets on one Engine")
SK_COMMAND(sock_hol, "hol", SK_HOL, "small ping-pong beside a large stream (--no-sched: FIFO)")
SK_COMMAND(sock_idle, "idle", SK_IDLE, "CPU of an idle Engine with adaptive polling (--seconds)")
SK_COMMAND(sock_mux, "mux", SK_MUX, "many sockets on one Engine, a message on each per round")
