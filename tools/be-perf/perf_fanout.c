/*
 * perf_fanout.c - be-perf fanout: one worker talking to many peers, the
 * shape of a ranker fetching from every parameter-server shard.
 *
 *   be-perf fanout [--transport shm|tcp|verbs] [--engines N] [--rounds R]
 *                  [--size B] [--credits-init K] [--timeout S] [--json]
 *
 * One thread drives two workers of one context: a server worker with N
 * listeners and a client worker that opens a Socket to each, so each
 * worker holds N Engines (one per peer). Each round sends one --size
 * request on every Socket and waits for all N echoes, so every Engine has
 * one message in flight, as in a fan-out. Reported: how many Engines
 * connected (a worker refuses Engines whose first grant its receive queue
 * cannot hold: -ENOSPC on connect, a refusal on accept), the receive
 * buffers each worker posted and reserved (be_worker_stats_json(), "recv")
 * and their bytes per Engine, and the round time (median). With
 * --credits-init equal to the config's credits (64) the grants are fixed,
 * as before elastic grants: the comparison for docs/PERFORMANCE.md.
 *
 * Both ends run on one core, so the round time is software cost, not
 * latency. Listeners: shm names, tcp ports of 127.0.0.1, and on verbs
 * ports of $BE_RXE_IP0. The limit per peer identity is off (all the
 * peers are this process).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <be/be.h>
#include <be/sock.h>

#include "perf.h"

static void fan_close(struct be_sock *s, int reason, void *user)
{
	(void)s;
	(void)reason;
	((struct perf_echo *)user)->closed++;
}

/* Receive buffers of @w (the first transport in its stats): posted and
 * their bytes. 0, or -EIO when the stats do not say. */
static int fan_recv_stats(struct be_worker *w, uint64_t *buffers, uint64_t *reserved,
			  uint64_t *bytes)
{
	static char json[1 << 22];
	const char *p;

	if (be_worker_stats_json(w, json, sizeof(json)) <= 0)
		return -EIO;
	p = strstr(json, "\"recv\":[{");
	if (!p || sscanf(p, "\"recv\":[{\"transport\":\"%*[^\"]\",\"buffers\":%" SCNu64
			    ",\"reserved\":%" SCNu64 ",\"bytes\":%" SCNu64,
			    buffers, reserved, bytes) != 3)
		return -EIO;
	return 0;
}

/* One round: a request on each of @n Sockets, then all echoes back. */
static int fan_round(struct be_worker *cw, struct be_worker *sw, struct be_sock **socks,
		     uint32_t n, size_t size, struct perf_echo *c, uint64_t timeout_s)
{
	uint64_t want = c->answered + n, start = perf_now_ns();
	uint32_t i;

	for (i = 0; i < n; i++) {
		int rc = perf_echo_send(socks[i], size, c);

		if (rc)
			return rc;
	}
	return perf_echo_wait(cw, sw, c, want, start, timeout_s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Many Sockets need many descriptors (tcp: three per Engine pair). */
static void fan_raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &r);
	}
}

static void fanout_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: be-perf fanout [--transport shm|tcp|verbs] "
		   "[--engines N] [--rounds R] [--size B] [--credits-init K] "
		   "[--timeout S] [--json]\n"
		   "  --transport T   shm, tcp or verbs (default " PERF_DEFAULT_TRANSPORT ")\n");
}

static int fanout_main(int argc, char **argv)
{
	struct be_sock_cbs scb = { .on_recv = perf_echo_serve, .on_accept = perf_echo_accept };
	struct be_sock_cbs ccb = { .on_recv = perf_echo_answer, .on_close = fan_close };
	struct perf_duo_opts o = {
		.transport = PERF_DEFAULT_TRANSPORT, .size = 64, .timeout_s = 20,
	};
	uint64_t engines = 256, rounds = 200, credits_init = 0;
	uint64_t cb = 0, cr = 0, cbytes = 0, sb = 0, sr = 0, sbytes = 0, *times = NULL;
	struct be_listener **ls = NULL;
	struct be_sock **socks = NULL;
	struct perf_duo d = { 0 };
	struct be_config cfg;
	uint32_t n = 0, i;
	int rc;
	const struct perf_opt opts[] = {
		PERF_DUO_OPTS(o),
		PERF_OPT("--engines", SIZE, &engines),
		PERF_OPT("--rounds", SIZE, &rounds),
		PERF_OPT("--credits-init", SIZE, &credits_init),
		PERF_OPTS_END,
	};

	rc = perf_opts_parse("fanout", argc, argv, opts, fanout_usage);
	if (rc >= 0)
		return rc;
	if (!engines || engines > 100000 || !rounds || !o.timeout_s || o.size > 4096)
		return perf_opts_bad("fanout");
	{
		char addr[160];

		if (perf_listen_addr("fanout", o.transport, NULL, addr, sizeof(addr)))
			return 2;
	}
	fan_raise_nofile();
	be_config_init(&cfg);
	/* The N peers are this one process standing in for N hosts: the
	 * limit per peer identity (max_peer_engines) would count them as
	 * one and bound the run at 128 Engines. */
	cfg.max_peer_engines = 0;
	if (credits_init)
		cfg.credits_init = (uint32_t)credits_init;
	if (!cfg.credits_init || cfg.credits_init > cfg.credits)
		cfg.credits_init = cfg.credits; /* as the context will */
	ls = calloc(engines, sizeof(*ls));
	socks = calloc(engines, sizeof(*socks));
	times = calloc(rounds, sizeof(*times));
	rc = ls && socks && times ? 0 : -ENOMEM;
	if (!rc)
		rc = perf_duo_open(&d, &cfg);
	/* Connect one peer at a time and check it answers: the count that
	 * stops at the first refusal is the number of Engines a worker
	 * holds. */
	for (i = 0; !rc && i < engines; i++) {
		char addr[160], laddr[160], name[32];
		int crc;

		snprintf(name, sizeof(name), "fan-%u", i);
		(void)perf_listen_addr("fanout", o.transport, name, addr, sizeof(addr)); /* checked above */
		rc = be_listen(d.sw, addr, &scb, &d.sc, &ls[i]);
		if (!rc)
			rc = be_listener_addr(ls[i], laddr, sizeof(laddr));
		if (rc)
			break;
		crc = be_sock_connect(d.cw, laddr, &ccb, &d.c, &socks[i]);
		if (crc) {
			socks[i] = NULL;
			break; /* the client worker is full */
		}
		if (fan_round(d.cw, d.sw, &socks[i], 1, o.size, &d.c, o.timeout_s)) {
			int k;

			/* Refused by the server worker: it is full. Let the
			 * refused send complete before counting errors anew. */
			be_sock_close(socks[i]);
			socks[i] = NULL;
			for (k = 0; k < 10000; k++) {
				be_worker_progress(d.cw);
				be_worker_progress(d.sw);
			}
			d.c.closed = 0;
			d.c.errors = 0;
			break;
		}
		n++;
	}
	if (!rc && n) {
		rc = fan_round(d.cw, d.sw, socks, n, o.size, &d.c, o.timeout_s); /* warmup */
		for (i = 0; !rc && i < rounds; i++) {
			uint64_t t0 = perf_now_ns();

			rc = fan_round(d.cw, d.sw, socks, n, o.size, &d.c, o.timeout_s);
			times[i] = perf_now_ns() - t0;
		}
	}
	if (!rc)
		rc = fan_recv_stats(d.cw, &cb, &cr, &cbytes);
	if (!rc)
		rc = fan_recv_stats(d.sw, &sb, &sr, &sbytes);
	if (rc) {
		fprintf(stderr, "be-perf fanout: %s\n", be_strerror(rc));
	} else if (!n) {
		fprintf(stderr, "be-perf fanout: no Engine connected\n");
		rc = -EIO;
	} else {
		double us;

		qsort(times, rounds, sizeof(*times), cmp_u64);
		us = (double)times[rounds / 2] / 1e3;
		if (o.json)
			printf("{\"test\":\"fanout\",\"transport\":\"%s\",\"engines_wanted\":%" PRIu64
			       ",\"engines\":%u,\"credits_init\":%u,\"credits\":%u,\"size\":%" PRIu64
			       ",\"recv_bytes_client\":%" PRIu64 ",\"recv_bytes_server\":%" PRIu64
			       ",\"recv_reserved_server\":%" PRIu64
			       ",\"recv_bytes_per_engine\":%" PRIu64 ",\"round_us_p50\":%.2f}\n",
			       o.transport, engines, n, cfg.credits_init, cfg.credits, o.size, cbytes,
			       sbytes, sr, sbytes / n, us);
		else
			printf("be-perf fanout: %s, %u of %" PRIu64 " Engines on one worker (credits "
			       "%u at first, up to %u): receive buffers %.1f MiB client, %.1f MiB "
			       "server (%" PRIu64 " of %" PRIu64 " reserved), %" PRIu64
			       " B per Engine; a round of %u requests %.1f us (median, both ends "
			       "on one thread)\n",
			       o.transport, n, engines, cfg.credits_init, cfg.credits,
			       (double)cbytes / 1048576.0, (double)sbytes / 1048576.0, sr, sb,
			       sbytes / n, n, us);
	}
	for (i = 0; i < engines && socks; i++)
		if (socks[i])
			be_sock_close(socks[i]);
	for (i = 0; i < engines && ls; i++)
		if (ls[i])
			be_listener_close(ls[i]);
	perf_duo_close(&d);
	free(ls);
	free(socks);
	free(times);
	return rc ? 1 : 0;
}

PERF_COMMAND(fanout, "fanout", "one worker, many peers: Engines per worker, receive memory",
	     fanout_main)
