/*
 * credit_elastic.c - elastic receive grants of one Engine: the receiver
 * grows its peer's grant while the peer uses most of it and asks back
 * what stays unused; the three frames that say so (CREDIT_GROW,
 * CREDIT_REVOKE, CREDIT_RELEASE). The accounting and the argument that
 * no receive is ever used before it is posted are in credit.h; this file
 * ties them to the worker's SRQ reservation (be__wdev_reserve_recv()) and
 * to the control queue.
 *
 * Why: a fixed grant of `credits` receives per Engine caps a worker at
 * srq_max_depth / credits Engines (128 with the defaults) and pins 512 KiB
 * of receive buffers per peer, even for the many peers of a fan-out that
 * each have one or two requests in flight. Starting at credits_init and
 * following the traffic gives the buffers to the peers that use them.
 *
 * When: growth is decided on the receive that brings the peer to three
 * quarters of its grant (no clock, one comparison on the data path), or
 * on a frame flagged STARVED (the peer waited for a credit); a
 * growth the SRQ or CQ could not take is not retried before the next
 * timer tick. Shrinking is decided at the timer tick (keepalive / 4),
 * after CREDIT_IDLE_TICKS ticks in a row in which the peer held at most a
 * quarter of its grant.
 *
 * Threads: the worker's, like the rest of the Engine.
 */
#include <errno.h>

#include "engine/engine.h"

/* Ticks of low use before a grant is halved: 2 keepalive intervals. */
#define CREDIT_IDLE_TICKS 8

void be__credit_elastic_grow(struct be__engine *e, bool starved)
{
	struct be__frame f;
	uint32_t n;

	/* Not while receives wait for memory (e->rxlog): the peer is meant
	 * to stop then, and more buffers would take more of that memory. */
	if (e->grow_denied || !be__credit_want_grow(&e->cr, starved) ||
	    !be__list_empty(&e->rxlog) || e->rx_backoff_us)
		return;
	n = be__credit_grow_step(&e->cr);
	/* The receives are posted before the grant leaves: the peer never
	 * finds one missing (credit.h). */
	if (!n || be__wdev_reserve_recv(e->wd, n))
		goto denied;
	f = (struct be__frame){ .type = BE_FR_CREDIT_GROW, .count = n };
	if (be__engine_ctrl(e, &f))
		goto err_unreserve;
	/* Reserved (granted_to_peer) now, granted when the frame is encoded
	 * (be__engine_run()); a teardown before then unreserves it all. */
	be__credit_grow_begin(&e->cr, n);
	e->granted_to_peer += n;
	e->st.credit_grows++;
	return;

err_unreserve:
	be__wdev_unreserve_recv(e->wd, n);
denied:
	e->grow_denied = true;
	e->st.credit_grow_denied++;
}

void be__credit_elastic_tick(struct be__engine *e)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	struct be__frame f = { .type = BE_FR_CREDIT_REVOKE };

	e->grow_denied = false;
	f.count = be__credit_tick(&e->cr, cfg->credits_init, CREDIT_IDLE_TICKS);
	if (!f.count)
		return;
	if (be__engine_ctrl(e, &f)) {
		e->cr.revoking = 0; /* asked again at a later tick */
		return;
	}
	e->st.credit_revokes++;
}

const char *be__credit_elastic_frame(struct be__engine *e, const struct be__frame *f)
{
	struct be__frame a = { .type = BE_FR_CREDIT_RELEASE };
	int k;

	if (f->sock || f->msg || (f->flags & ~BE_FRF_STARVED))
		return "credit frame with a socket, message or flags";
	switch (f->type) {
	case BE_FR_CREDIT_GROW:
		if (be__credit_on_grow(&e->cr, f->count))
			return "CREDIT_GROW of 0 or beyond 65535 credits";
		if (!be__list_empty(&e->active) || !be__list_empty(&e->ctrlq))
			be__engine_kick(e);
		return NULL;
	case BE_FR_CREDIT_REVOKE:
		k = be__credit_on_revoke(&e->cr, f->count);
		if (k < 0)
			return "CREDIT_REVOKE of 0, below the smallest grant, or before our release";
		a.count = (uint32_t)k;
		if (be__engine_ctrl(e, &a))
			be__engine_fail(e, -ENOMEM, "no memory for a control frame");
		return NULL;
	case BE_FR_CREDIT_RELEASE:
		if (be__credit_release(&e->cr, f->count))
			return "CREDIT_RELEASE not asked for, or more than asked or held";
		be__wdev_unreserve_recv(e->wd, f->count);
		e->granted_to_peer -= f->count;
		e->st.credits_reclaimed += f->count;
		/* The peer may be down to its reserve now: owed credits go. */
		if (be__credit_update_due(&e->cr))
			be__engine_kick(e);
		return NULL;
	default:
		return "not a credit frame";
	}
}
