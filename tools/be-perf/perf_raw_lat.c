/*
 * perf_raw_lat.c - be-perf raw-lat: the WRITE_WITH_IMM (or WRITE + memory
 * poll) ping-pong of two ends, and its report. One-way latency = RTT / 2,
 * one sample per round trip.
 */
#include <inttypes.h>
#include <stdio.h>

#include "perf_raw.h"

/*
 * A round of the ping-pong. By default a WRITE_WITH_IMM, awaited as a
 * RECV_IMM (what the core's large-message path does). With --write-poll a
 * plain WRITE whose last byte carries the round's mark, awaited by
 * spinning on that byte, as ib_write_lat does; the CQ is still polled
 * between spins (send completions, and tcp makes its progress there).
 */
static uint8_t raw_mark(uint64_t i)
{
	return (uint8_t)(i % 255 + 1); /* never 0, the buffer's initial value */
}

struct raw_mark_wait {
	const uint8_t *p;
	uint8_t want;
};

static int raw_done_mark(struct raw_ctx *c, void *arg)
{
	const struct raw_mark_wait *w = arg;
	int k;

	for (k = 0; k < 16; k++)
		if (__atomic_load_n(w->p, __ATOMIC_ACQUIRE) == w->want)
			return 1;
	return 0;
}

static int raw_lat_send(struct raw_ctx *c, const struct raw_hello *h, uint64_t i)
{
	if (!(h->flags & RAW_F_WRITE_POLL))
		return raw_write(c, h->size, 1, (uint32_t)i, 0);
	/* The previous round's write has landed (the peer answered it), so
	 * the source buffer is ours to change. */
	c->sbuf[h->size - 1] = raw_mark(i);
	return raw_write(c, h->size, 0, 0, 0);
}

static int raw_lat_wait(struct raw_ctx *c, const struct raw_hello *h, uint64_t i)
{
	uint64_t want = i + 1;
	struct raw_mark_wait w = { c->rbuf + h->size - 1, raw_mark(i) };

	if (!(h->flags & RAW_F_WRITE_POLL))
		return raw_progress(c, raw_done_rx, &want);
	return raw_progress(c, raw_done_mark, &w);
}

/* Round trip @i: the client sends, then waits for the echo; the server
 * waits, then echoes. */
static int raw_lat_round(struct raw_ctx *c, const struct raw_hello *h, uint64_t i, bool client)
{
	int rc = client ? raw_lat_send(c, h, i) : raw_lat_wait(c, h, i);

	if (!rc)
		rc = client ? raw_lat_wait(c, h, i) : raw_lat_send(c, h, i);
	return rc;
}

int raw_lat_client(struct raw_ctx *c, const struct raw_hello *h, double *samples)
{
	uint64_t i, t, prev = 0;
	int rc;

	for (i = 0; i < h->total; i++) {
		if (i == h->warmup)
			prev = perf_now_ns();
		rc = raw_lat_round(c, h, i, true);
		if (rc)
			return rc;
		if (i >= h->warmup) {
			/* One clock read per round trip: the loop time is the RTT. */
			t = perf_now_ns();
			samples[i - h->warmup] = (double)(t - prev) / 2e3;
			prev = t;
		}
	}
	return 0;
}

int raw_lat_server(struct raw_ctx *c, const struct raw_hello *h)
{
	uint64_t i;
	int rc;

	for (i = 0; i < h->total; i++) {
		rc = raw_lat_round(c, h, i, false);
		if (rc)
			return rc;
	}
	return 0;
}

void raw_report_lat(const struct raw_opts *o, const struct perf_summary *s)
{
	char cpu[32];
	double mb_s = s->avg > 0 ? (double)o->size / s->avg : 0;

	raw_cpu_str(o, cpu, sizeof(cpu));
	if (o->json) {
		printf("{\"test\":\"raw-lat\",\"transport\":\"%s\",\"op\":\"%s\",\"poll\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%zu,\"warmup\":%" PRIu64 ",\"cpu\":\"%s\""
		       ",\"p50_us\":%.4f,\"p99_us\":%.4f,\"avg_us\":%.4f,\"min_us\":%.4f"
		       ",\"p25_us\":%.4f,\"p75_us\":%.4f,\"max_us\":%.4f,\"mb_s\":%.2f}\n",
		       o->transport, o->write_poll ? "write_poll" : "write_imm",
		       o->sleep ? "sleep" : "busy", o->size, s->n,
		       o->warmup, cpu, s->p50, s->p99, s->avg,
		       s->min, s->p25, s->p75, s->max, mb_s);
		return;
	}
	printf("raw-lat: %s %s ping-pong, %" PRIu64 " B, %zu iterations, cpu %s\n",
	       o->transport, o->write_poll ? "WRITE + memory poll" : "WRITE_WITH_IMM", o->size,
	       s->n, cpu);
	printf("one-way latency (RTT/2), us:\n");
	printf("%9s %9s %9s %9s %9s %9s %9s %10s\n", "min", "p25", "p50", "p75", "p99", "max",
	       "avg", "MB/s");
	printf("%9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.1f\n", s->min, s->p25, s->p50,
	       s->p75, s->p99, s->max, s->avg, mb_s);
}
