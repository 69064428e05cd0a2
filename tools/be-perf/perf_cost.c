/*
 * perf_cost.c - be-perf cost: the software cost of a Socket round trip.
 *
 *   be-perf cost [--transport shm|tcp|verbs] [--size 64] [--iters N]
 *                [--timeout S] [--json]
 *
 * One thread drives two workers of one context: a client Socket on the
 * first, connected to a listener on the second, ping-pongs --size bytes
 * (the server callback sends each message back). Both ends run on one
 * core, so what is measured is the instructions of both ends (library,
 * transport and the tool's own loop), without the cross-core cache
 * traffic that dominates `lat` on shm. Reported: ns per round trip over
 * the measured iterations. Run it under
 *   valgrind --tool=callgrind be-perf cost --iters 100000
 * for an instruction count that does not depend on the machine's load
 * (see docs/PERFORMANCE.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <be/be.h>
#include <be/sock.h>

#include "perf.h"

static void cost_close(struct be_sock *s, int reason, void *user)
{
	((struct perf_echo *)user)->errors++;
}

/* Ping-pong @n times; 0, or -EIO / -ETIMEDOUT (no answer within
 * @timeout_s seconds). */
static int cost_run(struct be_worker *cw, struct be_worker *sw, struct be_sock *s,
		    struct perf_echo *c, size_t size, uint64_t n, uint64_t timeout_s)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		uint64_t start = perf_now_ns();
		int rc = perf_echo_send(s, size, c);

		if (rc)
			return rc == -ENOMEM ? rc : -EIO;
		rc = perf_echo_wait(cw, sw, c, i + 1, start, timeout_s);
		if (rc)
			return rc;
	}
	return 0;
}

static void cost_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: be-perf cost [--transport shm|tcp|verbs] [--size B] "
		   "[--iters N] [--timeout S] [--json]\n"
		   "  --transport T   shm, tcp or verbs (default " PERF_DEFAULT_TRANSPORT ")\n");
}

static int cost_main(int argc, char **argv)
{
	struct perf_duo_opts o = {
		.transport = PERF_DEFAULT_TRANSPORT, .size = 64, .timeout_s = 10,
	};
	uint64_t iters = 200000, warmup;
	struct be_sock_cbs scb = { .on_recv = perf_echo_serve, .on_close = cost_close,
				   .on_accept = perf_echo_accept };
	struct be_sock_cbs ccb = { .on_recv = perf_echo_answer, .on_close = cost_close };
	struct be_listener *l = NULL;
	struct be_sock *s = NULL;
	struct perf_duo d = { 0 };
	struct be_config cfg;
	char laddr[160], addr[200];
	double ns = 0;
	uint64_t t0;
	int rc;
	const struct perf_opt opts[] = {
		PERF_DUO_OPTS(o),
		PERF_OPT("--iters", SIZE, &iters),
		PERF_OPTS_END,
	};

	rc = perf_opts_parse("cost", argc, argv, opts, cost_usage);
	if (rc >= 0)
		return rc;
	if (!iters || !o.timeout_s || o.size > (64u << 20))
		return perf_opts_bad("cost");
	warmup = iters / 10 + 1;
	if (perf_listen_addr("cost", o.transport, "cost", addr, sizeof(addr)))
		return 2;
	be_config_init(&cfg);
	rc = perf_duo_open(&d, &cfg);
	if (!rc)
		rc = be_listen(d.sw, addr, &scb, &d.sc, &l);
	if (!rc)
		rc = be_listener_addr(l, laddr, sizeof(laddr));
	if (!rc)
		rc = be_sock_connect(d.cw, laddr, &ccb, &d.c, &s);
	if (!rc)
		rc = cost_run(d.cw, d.sw, s, &d.c, o.size, warmup, o.timeout_s);
	if (!rc) {
		d.c.answered = 0;
		t0 = perf_now_ns();
		rc = cost_run(d.cw, d.sw, s, &d.c, o.size, iters, o.timeout_s);
		ns = (double)(perf_now_ns() - t0) / (double)iters;
	}
	if (!rc && d.sc.errors)
		rc = -EIO;
	if (rc)
		fprintf(stderr, "be-perf cost: %s\n", be_strerror(rc));
	else if (o.json)
		printf("{\"test\":\"cost\",\"transport\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%" PRIu64 ",\"ns_per_round_trip\":%.1f}\n",
		       o.transport, o.size, iters, ns);
	else
		printf("be-perf cost: %s, %" PRIu64 " B, one thread, both ends: %.1f ns per "
		       "round trip (%" PRIu64 " round trips)\n",
		       o.transport, o.size, ns, iters);
	if (s)
		be_sock_close(s);
	if (l)
		be_listener_close(l);
	perf_duo_close(&d);
	return rc ? 1 : 0;
}

PERF_COMMAND(cost, "cost", "software cost of a Socket round trip: two workers, one thread",
	     cost_main)
