/*
 * keepalive.c - connection health of an Engine.
 *
 * Model. Progress from the peer means a frame (or a WRITE_WITH_IMM) from
 * it arrived: a completion of our own send proves nothing on transports
 * that complete a WR when the local kernel took it (tcp). An Engine that
 * has not posted a SEND for keepalive_ms sends a KEEPALIVE; when it has
 * not heard from the peer for a keepalive interval either, the KEEPALIVE
 * asks for an answer (BE_FRF_REPLY_REQ), so a peer that is alive but idle
 * answers even when its own interval is longer. An Engine that heard
 * nothing for conn_timeout_ms is faulty: every pending operation fails
 * with BE_ECONNFAULT. This catches a peer that stopped without closing
 * its connection (SIGSTOP, a hung host); a killed peer is caught earlier
 * by the transport's disconnect.
 *
 * Bound. At most one KEEPALIVE of ours waits in the control queue at a
 * time, whether we asked or answer: a frame from us proves progress
 * whatever it answers, so one queued answers every REPLY_REQ that comes
 * before it leaves. Otherwise a peer packing hundreds of REPLY_REQ
 * frames into each SEND would make us queue a reply per frame, faster
 * than its credits let them leave (test-sock-hostile).
 *
 * This is the connection timeout only; request deadlines belong to the
 * RPC layer and neither replaces the other.
 */
#include <errno.h>
#include <stdio.h>

#include "engine/engine.h"
#include "util/log.h"

/* A KEEPALIVE of ours is queued and not yet sent. */
static bool keepalive_queued(const struct be__engine *e)
{
	const struct be__list *p;

	for (p = e->ctrlq.next; p != &e->ctrlq; p = p->next)
		if (be__list_entry(p, struct be__ctrl, link)->f.type == BE_FR_KEEPALIVE)
			return true;
	return false;
}

/*
 * be__keepalive_on_frame() - the peer's KEEPALIVE @f arrived: answer it
 * when it asks, unless a KEEPALIVE of ours is queued already (it answers
 * this one too).
 */
void be__keepalive_on_frame(struct be__engine *e, const struct be__frame *f)
{
	struct be__frame k = { .type = BE_FR_KEEPALIVE };

	e->st.keepalives_recv++;
	if (!(f->flags & BE_FRF_REPLY_REQ) || keepalive_queued(e))
		return;
	if (be__engine_ctrl(e, &k))
		be__engine_fail(e, -ENOMEM, "no memory for a control frame");
}

void be__keepalive_tick(struct be__engine *e, uint64_t now)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	uint64_t ka = (uint64_t)cfg->keepalive_ms * 1000000ull;
	uint64_t to = (uint64_t)cfg->conn_timeout_ms * 1000000ull;
	struct be__frame f = { .type = BE_FR_KEEPALIVE };

	/* Traffic since the last tick counts as of now (tick resolution). */
	if (e->rx_seen) {
		e->rx_seen = false;
		e->last_rx_ns = now;
	}
	if (e->tx_seen) {
		e->tx_seen = false;
		e->last_tx_ns = now;
	}
	if (now - e->last_rx_ns > to) {
		char why[96];

		snprintf(why, sizeof(why), "no progress from the peer for %u ms",
			 (unsigned int)((now - e->last_rx_ns) / 1000000ull));
		be__engine_fail(e, BE_ECONNFAULT, why);
		return;
	}
	if (now - e->last_tx_ns < ka)
		return;
	/* One keepalive queued at a time. */
	if (keepalive_queued(e))
		return;
	if (now - e->last_rx_ns >= ka)
		f.flags = BE_FRF_REPLY_REQ;
	if (be__engine_ctrl(e, &f))
		be__engine_fail(e, -ENOMEM, "no memory for a keepalive");
}
