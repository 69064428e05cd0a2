/*
 * perf_raw_bw.c - be-perf raw-bw: a windowed stream of WRITEs, some of them
 * WRITE_WITH_IMMs, the credits the receiver returns, and the report.
 */
#include <inttypes.h>
#include <stdio.h>

#include "perf_raw.h"

/*
 * Which writes of a raw-bw stream carry an immediate: every imm_every-th,
 * the last of the warmup and the last of all, as the core's large message
 * path ends its fragments with one WRITE_WITH_IMM. The immediate is the
 * write's sequence number, so a RECV_IMM tells the receiver that every
 * write up to it has landed (in-order delivery).
 */
static int raw_bw_has_imm(const struct raw_hello *h, uint64_t seq)
{
	return (seq + 1) % h->imm_every == 0 || seq + 1 == h->warmup || seq + 1 == h->total;
}

struct raw_bw_state {
	uint64_t target;  /* writes the receiver must have credited */
};

/* The receiver's credit: how many writes it has seen land (0 before any). */
static uint64_t raw_bw_credit(const struct raw_ctx *c)
{
	return c->rx ? c->last_imm : 0;
}

static int raw_done_credit(struct raw_ctx *c, void *arg)
{
	struct raw_bw_state *s = arg;

	return raw_bw_credit(c) >= s->target;
}

/*
 * Stream writes @from..@to (exclusive). At most window writes outstanding
 * on the send queue, and never more uncredited writes than keep the
 * receiver's immediates within half its posted receives (each WRITE_IMM
 * consumes one there).
 */
static int raw_bw_stream(struct raw_ctx *c, const struct raw_hello *h, uint64_t from, uint64_t to)
{
	uint64_t seq = from;
	uint64_t room_w = (uint64_t)(c->peer_nrecv / 2 ? c->peer_nrecv / 2 : 1) * h->imm_every;
	struct raw_bw_state s = { .target = to };
	int rc;

	while (seq < to) {
		uint64_t credit = raw_bw_credit(c);

		while (seq < to && c->posted - c->completed < h->window && seq - credit < room_w) {
			c->post_ns[seq % h->window] = seq >= h->warmup ? perf_now_ns() : 0;
			rc = raw_write(c, h->size, raw_bw_has_imm(h, seq), (uint32_t)seq, 1);
			if (rc)
				return rc;
			seq++;
		}
		rc = raw_poll(c);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			uint64_t want = c->rx + 1;
			uint64_t room = h->window;

			/* Nothing came back: wait (bounded) for a completion
			 * or a credit, whichever frees room first. */
			if (c->posted - c->completed >= h->window && seq - credit < room_w)
				rc = raw_progress(c, raw_done_sq, &room);
			else if (seq < to && seq - credit >= room_w)
				rc = raw_progress(c, raw_done_rx, &want);
			if (rc)
				return rc;
		}
	}
	/* Everything posted: wait for the receiver to credit all of it. */
	return raw_progress(c, raw_done_credit, &s);
}

int raw_bw_client(struct raw_ctx *c, const struct raw_hello *h, struct raw_bw_result *r)
{
	uint64_t t0;
	double cpu0;
	int rc;

	c->peer_nrecv = c->peer_nrecv ? c->peer_nrecv : 1;
	if (h->warmup && (rc = raw_bw_stream(c, h, 0, h->warmup)))
		return rc;
	t0 = perf_now_ns();
	cpu0 = perf_cpu_seconds();
	rc = raw_bw_stream(c, h, h->warmup, h->total);
	if (rc)
		return rc;
	r->seconds = (double)(perf_now_ns() - t0) / 1e9;
	r->cpu_seconds = perf_cpu_seconds() - cpu0;
	return 0;
}

/*
 * Receiver: the immediates say how many writes have landed; credit that
 * count back after every quarter of the receives, at the end of warmup and
 * at the very end (the client's stop signal).
 */
int raw_bw_server(struct raw_ctx *c, const struct raw_hello *h)
{
	uint64_t every = c->nrecv / 4 ? c->nrecv / 4 : 1;
	uint64_t credited = 0, rx_credited = 0;
	uint32_t len = h->size < 8 ? h->size : 8;
	int rc;

	while (credited < h->total) {
		uint64_t got = c->rx ? (uint64_t)c->last_imm + 1 : 0;
		uint64_t want = c->rx + 1;

		if (got > credited && (c->rx - rx_credited >= every || got == h->total ||
				       (got == h->warmup && credited < h->warmup))) {
			credited = got;
			rx_credited = c->rx;
			rc = raw_write(c, len, 1, (uint32_t)credited, 0);
			if (rc)
				return rc;
			continue;
		}
		rc = raw_progress(c, raw_done_rx, &want);
		if (rc)
			return rc;
	}
	return 0;
}

void raw_report_bw(const struct raw_opts *o, const struct raw_bw_result *r,
		   const struct perf_summary *s)
{
	double bytes = (double)o->size * (double)o->iters;
	double mb_s = r->seconds > 0 ? bytes / r->seconds / 1e6 : 0;
	double cpu_gb = bytes > 0 ? r->cpu_seconds / (bytes / 1e9) : 0;
	char cpu[32];

	raw_cpu_str(o, cpu, sizeof(cpu));
	if (o->json) {
		printf("{\"test\":\"raw-bw\",\"transport\":\"%s\",\"op\":\"write\",\"poll\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%" PRIu64 ",\"warmup\":%" PRIu64 ",\"window\":%u,\"imm_every\":%u"
		       ",\"bufs\":%u,\"cpu\":\"%s\""
		       ",\"mb_s\":%.2f,\"seconds\":%.6f,\"cpu_s_per_gb\":%.4f"
		       ",\"p50_us\":%.3f,\"p99_us\":%.3f,\"avg_us\":%.3f}\n",
		       o->transport, o->sleep ? "sleep" : "busy", o->size, o->iters, o->warmup,
		       o->window, o->imm_every, o->bufs, cpu, mb_s,
		       r->seconds, cpu_gb, s->p50, s->p99, s->avg);
		return;
	}
	printf("raw-bw: %s WRITE stream, %" PRIu64 " B x %" PRIu64
	       ", window %u, WRITE_WITH_IMM every %u, cpu %s\n", o->transport, o->size, o->iters,
	       o->window, o->imm_every, cpu);
	printf("%12s %10s %14s %14s %14s\n", "MB/s", "seconds", "cpu s/GB(tx)",
	       "write p50 us", "write p99 us");
	printf("%12.1f %10.4f %14.4f %14.2f %14.2f\n", mb_s, r->seconds, cpu_gb, s->p50, s->p99);
}
