/*
 * stats.c - the worker's counters as JSON: one object with the worker's
 * engine count and an array of Engines, each with every field of struct
 * be_engine_stats. Written into the caller's buffer (util/jsonw.h); the
 * return value is the length needed, so a caller can size its buffer.
 */
#include <errno.h>
#include <inttypes.h>

#include <be/sock.h>
#include "engine/engine.h"
#include "util/jsonw.h"

static void json_engine(struct be__jsonw *o, struct be__engine *e)
{
	struct be_engine_stats s;

	be__engine_stats(e, &s);
	be__jsonw_put(o, "{\"addr\":\"%s\",\"connector\":%s,\"state\":%d,\"error\":%d,", e->addr,
		 e->connector ? "true" : "false", s.state, s.error);
#define F(x) be__jsonw_put(o, "\"" #x "\":%" PRIu64 ",", (uint64_t)s.x)
	F(msgs_sent); F(bytes_sent); F(msgs_recv); F(bytes_recv);
	F(eager_sent); F(large_sent); F(eager_recv); F(large_recv);
	F(sends_posted); F(frames_batched); F(fragments); F(write_imm_recv);
	F(credits_granted); F(credits_peer_max); F(credits_granted_now);
	F(credits_peer_now); F(max_credits_in_use); F(max_peer_credits_in_use);
	F(credit_grows); F(credit_grow_denied); F(credit_revokes); F(credits_reclaimed);
	F(credit_stalls); F(credit_frames_sent);
	F(send_window); F(max_bytes_in_flight); F(window_stalls);
	F(mixed_window); F(max_mixed_in_flight); F(mixed_stalls);
	F(keepalives_sent); F(keepalives_recv); F(nomem_sent); F(nomem_recv);
	F(alloc_backoffs); F(oneway_sent); F(reqs_ahead); F(grant_key_short);
	F(protocol_errors); F(sockets); F(sockets_opened);
#undef F
	be__jsonw_put(o, "\"frag_size\":%u}", s.frag_size);
}

int be_sock_stats_json(struct be_sock *s, char *buf, size_t len)
{
	struct be__jsonw o = { buf, len, 0 };
	const struct be_sock_stats *st;

	if (!s || (!buf && len))
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(s->w);
	st = &s->st;
	be__jsonw_put(&o, "{\"id\":%u,\"opener\":%s,\"state\":%d,", s->id,
		 s->mine ? "true" : "false", s->state);
#define F(x) be__jsonw_put(&o, "\"" #x "\":%" PRIu64 ",", (uint64_t)st->x)
	F(msgs_sent); F(bytes_sent); F(msgs_recv); F(bytes_recv);
	F(eager_sent); F(large_sent); F(eager_recv); F(large_recv);
	F(send_errors);
#undef F
	be__jsonw_put(&o, "\"queued\":%" PRIu64 "}", st->queued);
	return (int)o.pos;
}

int be_worker_stats_json(struct be_worker *w, char *buf, size_t len)
{
	struct be__jsonw o = { buf, len, 0 };
	struct be__list *p;
	bool first = true;
	int i;

	if (!w || (!buf && len))
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(w);
	be__jsonw_put(&o, "{\"engines\":%u,\"cq_arm_errors\":%" PRIu64 ",\"spin_ns\":%" PRIu64
		     ",\"admit_refused\":%" PRIu64 ",\"limit_refused\":%" PRIu64
		     ",\"grant_bytes\":%" PRIu64
		     ",\"grant_bytes_max\":%" PRIu64 ",\"recv\":[",
		 w->nengines, w->cq_arm_errors, w->spin_ns, w->admit_refused, w->limit_refused,
		 w->grant_bytes,
		 w->grant_bytes_max);
	/* Receive buffers of each transport: posted (they never shrink) and
	 * reserved by the Engines' grants (elastic: they do). */
	for (i = 0; i < w->nopen; i++) {
		const struct be__wdev *wd = w->open[i];

		be__jsonw_put(&o, "%s{\"transport\":\"%s\",\"buffers\":%u,\"reserved\":%u,"
			 "\"bytes\":%" PRIu64 ",\"repost_errors\":%" PRIu64 "}", i ? "," : "",
			 wd->cd->name, wd->nbufs, wd->reserved,
			 (uint64_t)wd->nbufs * w->ctx->cfg.recv_buf_size, wd->repost_errors);
	}
	be__jsonw_put(&o, "],\"engine\":[");
	for (p = w->engines.next; p != &w->engines; p = p->next) {
		if (!first)
			be__jsonw_put(&o, ",");
		first = false;
		json_engine(&o, be__list_entry(p, struct be__engine, wlink));
	}
	be__jsonw_put(&o, "]}");
	return (int)o.pos;
}
