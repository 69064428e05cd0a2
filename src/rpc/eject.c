/*
 * eject.c - ejection of replicas that keep failing, and their return.
 *
 * A replica counts failures in a row: its path's connection lost, an
 * attempt timed out on it, a hedge overtook an attempt of it that was
 * outstanding past the hedge delay, a return probe failed. Any answer
 * (a reply, even an error status from its handler) resets the count. At
 * eject_failures in a row it is ejected: it takes no calls for
 * eject_min_ms, doubled with each ejection in a row up to eject_max_ms.
 * The doubling resets once the replica served eject_reset_ms since it
 * last came back, so a replica that fails once a day is not punished for
 * last week.
 *
 * Guards. At most eject_max_pct of a set is ejected at once, and never the
 * last usable replica: ejecting on soft signals (timeouts, hedges) must
 * not be able to empty a set that is merely slow everywhere. A replica
 * the cap keeps in is still steered around by selection (its attempts in
 * flight pile up, and least-outstanding avoids it).
 *
 * Return. When the ejection ends the replica is probed (a ping on its
 * path) before it takes calls again; a failed probe ejects it again, for
 * twice as long.
 *
 * Defaults (config.c: 3 failures, 100 ms doubling to 10 s, reset after
 * 10 s, half of a set) are three orders of magnitude below the 30-300 s
 * the common RPC frameworks eject for: a fetch deadline is tens of
 * milliseconds, and a replica that is back should take load within a
 * few of them (docs/RPC.md).
 */
#include <errno.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

bool be__rpc_rep_usable(const struct rpc_replica *rep)
{
	return rep->state == BE_RPC_REP_ACTIVE && rep->path >= 0 &&
	       rep->rec.version >= rep->ch->min_version;
}

static uint32_t chan_ejected(const struct be_rpc_chan *ch)
{
	uint32_t i, n = 0;

	for (i = 0; i < ch->nreps; i++)
		n += ch->reps[i]->state == BE_RPC_REP_EJECTED ||
		     ch->reps[i]->state == BE_RPC_REP_PROBING;
	return n;
}

static bool eject_allowed(const struct rpc_replica *rep)
{
	const struct be_rpc_chan *ch = rep->ch;
	uint32_t i;

	if ((uint64_t)(chan_ejected(ch) + 1) * 100 > (uint64_t)ch->nreps * ch->cfg.eject_max_pct)
		return false;
	for (i = 0; i < ch->nreps; i++)
		if (ch->reps[i] != rep && be__rpc_rep_usable(ch->reps[i]))
			return true;
	return false;
}

static void eject_fire(struct be_rpc *rpc, struct rpc_tmr *t);

static void eject(struct rpc_replica *rep)
{
	struct be_rpc_chan *ch = rep->ch;
	const struct be_rpc_config *cfg = &ch->cfg;
	uint64_t now = rpc_now(), ms;

	if (!eject_allowed(rep))
		return;
	if (now - rep->active_since_ns >= (uint64_t)cfg->eject_reset_ms * 1000000ull)
		rep->eject_level = 0;
	ms = (uint64_t)cfg->eject_min_ms << (rep->eject_level < 20 ? rep->eject_level : 20);
	if (ms > cfg->eject_max_ms)
		ms = cfg->eject_max_ms;
	rep->eject_level++;
	rep->state = BE_RPC_REP_EJECTED;
	rep->eject_start_ns = now;
	rep->fails_row = 0;
	rep->ejections++;
	ch->c.ejections++;
	be__log(BE_LOG_INFO, "rpc: replica %s ejected for %llu ms", rep->rec.replica,
		(unsigned long long)ms);
	if (be__rpc_tmr_arm(ch->rpc, &rep->eject_tmr, now + ms * 1000000ull, eject_fire)) {
		/* No timer, no way back: do not eject. */
		rep->state = BE_RPC_REP_ACTIVE;
	}
}

static void eject_fire(struct be_rpc *rpc, struct rpc_tmr *t)
{
	struct rpc_replica *rep = container_of(t, struct rpc_replica, eject_tmr);
	int rc;

	if (rep->state != BE_RPC_REP_EJECTED)
		return;
	if (rep->path < 0) {
		/* Every address is down: their own probes bring a path
		 * back; ask again then. */
		be__rpc_tmr_arm(rpc, &rep->eject_tmr,
				rpc_now() + (uint64_t)rep->ch->cfg.eject_min_ms * 1000000ull, eject_fire);
		return;
	}
	rep->state = BE_RPC_REP_PROBING;
	rc = be__rpc_probe_start(rep->ch, &rep->addrs[rep->path], rep, &rep->probe_call);
	if (rc) {
		rep->probe_call = 0;
		be__rpc_rep_probe_done(rep, rc);
	}
}

void be__rpc_rep_probe_done(struct rpc_replica *rep, int status)
{
	struct be_rpc_chan *ch = rep->ch;

	if (rep->state != BE_RPC_REP_PROBING || ch->destroying)
		return;
	rep->state = BE_RPC_REP_ACTIVE;
	if (!status) {
		rep->returns++;
		ch->c.returns++;
		rep->active_since_ns = rpc_now();
		rep->fails_row = 0;
		be__log(BE_LOG_INFO, "rpc: replica %s back", rep->rec.replica);
		return;
	}
	ch->c.probe_failures++;
	if (rep->path >= 0)
		rep->addrs[rep->path].c.probe_failures++;
	eject(rep);
}

void be__rpc_rep_failed(struct rpc_replica *rep)
{
	if (rep->state == BE_RPC_REP_REMOVED)
		return;
	rep->fails_row++;
	if (rep->state == BE_RPC_REP_ACTIVE && rep->fails_row >= rep->ch->cfg.eject_failures)
		eject(rep);
}

