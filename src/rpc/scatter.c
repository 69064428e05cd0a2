/*
 * scatter.c - one request to each of N channels under one deadline,
 * completing once: the fan-out of a ranker to its shards.
 *
 * A scatter is a set of ordinary calls (legs, kind RPC_CALL_LEG), each
 * with the whole failover ladder of its channel, and one record that
 * counts them down. Every leg has the same timeout, started within the
 * same call, so they share the deadline. It completes when the last leg
 * is done, or, with BE_RPC_SCATTER_FAIL_FAST, at the first failed leg:
 * the others are then completed with -ECANCELED at once (their late
 * replies are dropped and counted), since a ranker that cannot use a
 * partial answer should not wait for the rest of it.
 *
 * Its callback runs once. When the scatter ends inside an API call
 * (every leg failed to start, be_rpc_cancel()) the callback is deferred
 * to the next progress, like every callback of this layer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

static struct rpc_scatter *to_sc(struct rpc_call *c)
{
	return container_of(c, struct rpc_scatter, base);
}

/* Stop every leg still running (their results become -ECANCELED). */
static void scatter_stop_legs(struct rpc_scatter *sc)
{
	uint32_t i;

	for (i = 0; i < sc->n; i++) {
		struct rpc_call *leg;

		if (!sc->legs[i])
			continue;
		leg = be__rpc_ids_get(&sc->base.rpc->calls, sc->legs[i], NULL);
		sc->legs[i] = 0;
		if (leg && !leg->done)
			be__rpc_call_complete(leg, -ECANCELED);
	}
}

/* Mark the scatter complete with @status; nothing is told yet. */
static void scatter_finish(struct rpc_scatter *sc, int status)
{
	sc->base.done = true;
	sc->base.status = status;
	be__rpc_ids_del(&sc->base.rpc->calls, sc->base.id);
	scatter_stop_legs(sc);
}

void be__rpc_scatter_notify(struct rpc_call *c)
{
	struct rpc_scatter *sc = to_sc(c);
	struct be_rpc *rpc = c->rpc;

	RPC_APP_CB(rpc, sc->cb(sc->items, sc->n, c->status, sc->arg));
	free(sc->legs);
	free(sc);
}

static void scatter_defer(struct rpc_scatter *sc)
{
	struct be_rpc *rpc = sc->base.rpc;

	sc->base.deferred = true;
	be__list_add_tail(&rpc->deferred, &sc->base.link);
	be__rpc_kick(rpc);
}

void be__rpc_scatter_leg_done(struct rpc_call *leg, int status, void *reply, size_t len)
{
	struct rpc_scatter *sc = leg->sc;
	struct be_rpc_scatter_item *it = &sc->items[leg->leg];

	it->status = status;
	it->reply = reply;
	it->reply_len = reply ? len : 0;
	sc->legs[leg->leg] = 0;
	sc->left--;
	if (status && !sc->first_err)
		sc->first_err = status;
	if (sc->base.done)
		return; /* a fail-fast stop or a cancel is under way */
	if (sc->left && !(sc->fail_fast && status))
		return;
	scatter_finish(sc, sc->first_err);
	be__rpc_scatter_notify(&sc->base);
}

void be__rpc_scatter_cancel(struct rpc_call *c)
{
	struct rpc_scatter *sc = to_sc(c);

	if (!sc->first_err)
		sc->first_err = -ECANCELED;
	scatter_finish(sc, -ECANCELED);
	scatter_defer(sc);
}

int be_rpc_scatter(struct be_rpc *rpc, struct be_rpc_scatter_item *items, unsigned int n,
		   const struct be_rpc_call_opts *opts, be_rpc_scatter_cb cb, void *arg,
		   uint64_t *id)
{
	struct be_rpc_call_opts o;
	struct rpc_scatter *sc;
	unsigned int i;

	if (!rpc || !items || !n || n > 65536 || !cb || be__rpc_opts(&o, opts))
		return -EINVAL;
	if (o.flags & BE_RPC_ONEWAY)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		struct be_rpc_chan *ch = items[i].ch;

		if (!ch || ch->rpc != rpc || ch->destroying || (!items[i].req && items[i].len) ||
		    items[i].len > UINT32_MAX - BE_RPC_HDR_LEN)
			return -EINVAL;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->legs = calloc(n, sizeof(*sc->legs));
	if (!sc->legs || be__rpc_ids_add(&rpc->calls, &sc->base, &sc->base.id)) {
		free(sc->legs);
		free(sc);
		return -ENOMEM;
	}
	sc->base.kind = RPC_CALL_SCATTER;
	sc->base.rpc = rpc;
	sc->base.refs = 1;
	be__list_init(&sc->base.link);
	sc->items = items;
	sc->n = sc->left = n;
	sc->fail_fast = (o.flags & BE_RPC_SCATTER_FAIL_FAST) != 0;
	sc->cb = cb;
	sc->arg = arg;
	o.flags &= ~BE_RPC_SCATTER_FAIL_FAST;
	if (!o.timeout_us)
		o.timeout_us = items[0].ch->cfg.timeout_us;
	for (i = 0; i < n; i++) {
		items[i].status = 0;
		items[i].reply = NULL;
		items[i].reply_len = 0;
	}
	for (i = 0; i < n && !sc->base.done; i++) {
		struct be_rpc_scatter_item *it = &items[i];
		struct rpc_call *leg;
		int rc;

		rc = be__rpc_call_start(it->ch, RPC_CALL_LEG, it->service, it->method, it->req,
					it->len, &o, NULL, NULL, true, &leg);
		if (rc) {
			/* The leg never started: it failed, and its request,
			 * ours since we returned 0, goes now. */
			be_rpc_buf_free(it->req);
			it->status = rc;
			sc->left--;
			if (!sc->first_err)
				sc->first_err = rc;
			if (sc->fail_fast)
				break;
			continue;
		}
		leg->sc = sc;
		leg->leg = i;
		sc->legs[i] = leg->id;
	}
	for (i++; i < n && sc->fail_fast && sc->first_err; i++) {
		/* Not started after a fail-fast stop: cancelled, request freed. */
		be_rpc_buf_free(items[i].req);
		items[i].status = -ECANCELED;
		sc->left--;
	}
	if (id)
		*id = sc->base.id;
	if (!sc->left || (sc->fail_fast && sc->first_err)) {
		scatter_finish(sc, sc->first_err);
		scatter_defer(sc);
	}
	return 0;
}
