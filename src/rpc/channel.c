/*
 * channel.c - channels: replica sets, their updates, and the choice of a
 * replica for each attempt.
 *
 * A channel holds its replicas in an array (reps) that selection scans;
 * sets are small (the replicas of one shard group), so a scan is cheaper
 * than keeping an index of the usable ones. Selection is the power of two
 * choices over the usable replicas the call has not tried yet: two drawn
 * at random, the one with fewer attempts in flight wins. It needs no
 * global view, spreads load like least-outstanding, and, unlike a pure
 * least-outstanding pick, does not send every new call to a replica that
 * just came back empty.
 *
 * Updates (from code or a naming source) match replicas by name. A new
 * replica starts taking calls at once. A removed one leaves the array,
 * takes no new calls, and lives on the gone list until its attempts in
 * flight finished (it is drained, not cut). A record with a higher epoch,
 * or other addresses, is a new incarnation: its connections are closed
 * (attempts on them fail over) and its health starts afresh. One with a
 * lower epoch is stale and ignored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

/* ---- replicas */

static bool addr_valid(const char *a)
{
	const char *p = strstr(a, "://");

	return p && p > a && p[3] && strlen(a) < BE_RPC_ADDR_MAX;
}

static int record_check(const struct be_rpc_record *r)
{
	uint32_t i;

	if (!r->replica[0] || !memchr(r->replica, 0, sizeof(r->replica)) || !r->naddrs ||
	    r->naddrs > BE_RPC_MAX_ADDRS || r->shard_lo > r->shard_hi ||
	    (r->state != BE_RPC_SERVING && r->state != BE_RPC_DRAINING))
		return -EINVAL;
	for (i = 0; i < r->naddrs; i++)
		if (!memchr(r->addrs[i], 0, sizeof(r->addrs[i])) || !addr_valid(r->addrs[i]))
			return -EINVAL;
	return 0;
}

static void rep_addrs_init(struct rpc_replica *rep)
{
	uint32_t i;

	/* Closing an old incarnation's connections fails attempts over,
	 * which may arm a probe of one of its addresses again: never wipe
	 * or leave behind an armed timer (the heap would keep it). */
	for (i = 0; i < BE_RPC_MAX_ADDRS; i++)
		if (rep->addrs[i].rep)
			be__rpc_tmr_cancel(rep->ch->rpc, &rep->addrs[i].probe_tmr);
	for (i = 0; i < rep->rec.naddrs; i++) {
		struct rpc_addr *a = &rep->addrs[i];

		memset(a, 0, sizeof(*a));
		a->rep = rep;
		a->idx = i;
		memcpy(a->str, rep->rec.addrs[i], sizeof(a->str));
		a->rdma = strncmp(a->str, "tcp://", 6) != 0;
		a->state = BE_RPC_ADDR_IDLE;
		a->probe_ms = rep->ch->cfg.probe_min_ms;
	}
	rep->path = -1;
	be__rpc_rep_path(rep);
}

static struct rpc_replica *rep_new(struct be_rpc_chan *ch, const struct be_rpc_record *r)
{
	struct rpc_replica *rep = calloc(1, sizeof(*rep));

	if (!rep)
		return NULL;
	rep->ch = ch;
	rep->rec = *r;
	rep->last_path = -1;
	rep->state = r->state == BE_RPC_DRAINING ? BE_RPC_REP_DRAINING : BE_RPC_REP_ACTIVE;
	rep->active_since_ns = rpc_now();
	be__list_init(&rep->gone);
	rep_addrs_init(rep);
	return rep;
}

/* Close every connection of @rep; attempts on them fail over with @err. */
static void rep_close_conns(struct rpc_replica *rep, int err)
{
	struct be_rpc *rpc = rep->ch->rpc;
	uint32_t i;

	rep->outstanding++; /* pinned: failing attempts must not free it */
	for (i = 0; i < rep->rec.naddrs; i++) {
		struct rpc_addr *a = &rep->addrs[i];
		struct rpc_conn *c = a->conn;

		be__rpc_tmr_cancel(rpc, &a->probe_tmr);
		if (!c)
			continue;
		a->conn = NULL;
		c->addr = NULL;
		be__rpc_conn_failed(c, err);
		be__rpc_conn_close(c);
	}
	rep->outstanding--;
}

static void rep_free(struct rpc_replica *rep)
{
	be__rpc_tmr_cancel(rep->ch->rpc, &rep->eject_tmr);
	rep_close_conns(rep, -ECANCELED);
	be__list_del_init(&rep->gone);
	free(rep);
}

void be__rpc_replica_free(struct rpc_replica *rep)
{
	rep_free(rep);
}

/* Take @i out of the set; it drains on the gone list. */
static void rep_remove(struct be_rpc_chan *ch, uint32_t i)
{
	struct rpc_replica *rep = ch->reps[i];

	ch->reps[i] = ch->reps[--ch->nreps];
	rep->state = BE_RPC_REP_REMOVED;
	be__rpc_tmr_cancel(ch->rpc, &rep->eject_tmr);
	be__list_add_tail(&ch->gone, &rep->gone);
	be__rpc_replica_maybe_free(rep);
}

static bool addrs_equal(const struct be_rpc_record *a, const struct be_rpc_record *b)
{
	uint32_t i;

	if (a->naddrs != b->naddrs)
		return false;
	for (i = 0; i < a->naddrs; i++)
		if (strcmp(a->addrs[i], b->addrs[i]))
			return false;
	return true;
}

static void rep_update(struct rpc_replica *rep, const struct be_rpc_record *r)
{
	bool fresh = r->epoch > rep->rec.epoch || !addrs_equal(r, &rep->rec);

	if (r->epoch < rep->rec.epoch)
		return;
	if (fresh) {
		/* A new incarnation: old connections reach a process that is
		 * gone or an address that is no longer its. */
		rep_close_conns(rep, -ECONNRESET);
		rep->rec = *r;
		be__rpc_tmr_cancel(rep->ch->rpc, &rep->eject_tmr);
		rep->fails_row = 0;
		rep->eject_level = 0;
		rep->probe_call = 0;
		rep->srv_draining = false;
		rep->state = BE_RPC_REP_ACTIVE;
		rep->active_since_ns = rpc_now();
		rep_addrs_init(rep);
	}
	rep->rec = *r;
	if (r->state == BE_RPC_DRAINING) {
		be__rpc_tmr_cancel(rep->ch->rpc, &rep->eject_tmr);
		rep->state = BE_RPC_REP_DRAINING;
	} else if (rep->state == BE_RPC_REP_DRAINING) {
		rep->state = BE_RPC_REP_ACTIVE;
		rep->active_since_ns = rpc_now();
	}
}

/* Make the set of @ch be @recs (validated by the caller). */
static int chan_apply(struct be_rpc_chan *ch, const struct be_rpc_record *recs, unsigned int n)
{
	bool *seen;
	uint32_t i, j, old = ch->nreps;

	if (ch->nreps + n > ch->cap) {
		uint32_t cap = ch->nreps + n;
		struct rpc_replica **v = realloc(ch->reps, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ch->reps = v;
		ch->cap = cap;
	}
	seen = calloc(old + 1, sizeof(*seen));
	if (!seen)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		for (j = 0; j < old; j++) {
			if (!strcmp(ch->reps[j]->rec.replica, recs[i].replica)) {
				rep_update(ch->reps[j], &recs[i]);
				seen[j] = true;
				break;
			}
		}
		if (j < old)
			continue;
		ch->reps[ch->nreps] = rep_new(ch, &recs[i]);
		if (!ch->reps[ch->nreps]) {
			be__log(BE_LOG_WARN, "rpc: no memory for replica %s", recs[i].replica);
			continue;
		}
		ch->nreps++;
	}
	/* Remove from the end so the indices of unseen ones stay valid. */
	for (j = old; j-- > 0;)
		if (!seen[j])
			rep_remove(ch, j);
	free(seen);
	return 0;
}

static int records_check(const struct be_rpc_record *recs, unsigned int n)
{
	unsigned int i, j;

	for (i = 0; i < n; i++) {
		if (record_check(&recs[i]))
			return -EINVAL;
		for (j = 0; j < i; j++)
			if (!strcmp(recs[i].replica, recs[j].replica))
				return -EINVAL;
	}
	return 0;
}

/* ---- channels */

static int chan_new(struct be_rpc *rpc, struct be_rpc_chan **out)
{
	struct be_rpc_chan *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	ch->rpc = rpc;
	ch->cfg = rpc->cfg;
	be__list_init(&ch->gone);
	be__list_init(&ch->calls);
	be__list_add_tail(&rpc->chans, &ch->link);
	*out = ch;
	return 0;
}

int be_rpc_chan_create(struct be_rpc *rpc, const struct be_rpc_record *recs, unsigned int nrecs,
		       struct be_rpc_chan **out)
{
	struct be_rpc_chan *ch;
	int rc;

	if (!rpc || !out || !recs || !nrecs || records_check(recs, nrecs))
		return -EINVAL;
	rc = chan_new(rpc, &ch);
	if (rc)
		return rc;
	rc = chan_apply(ch, recs, nrecs);
	if (rc || ch->nreps != nrecs) {
		be_rpc_chan_destroy(ch);
		return -ENOMEM;
	}
	*out = ch;
	return 0;
}

int be_rpc_chan_open(struct be_rpc *rpc, const char *target, struct be_rpc_chan **out)
{
	struct be_rpc_record r;
	const char *p = target;

	if (!rpc || !target || !out)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	strcpy(r.replica, "r0");
	r.shard_hi = UINT32_MAX;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (!n || n >= BE_RPC_ADDR_MAX || r.naddrs == BE_RPC_MAX_ADDRS)
			return -EINVAL;
		memcpy(r.addrs[r.naddrs], p, n);
		r.addrs[r.naddrs++][n] = '\0';
		p += n;
		if (*p)
			p++;
	}
	return be_rpc_chan_create(rpc, &r, 1, out);
}

int be_rpc_chan_update(struct be_rpc_chan *ch, const struct be_rpc_record *recs, unsigned int n)
{
	if (!ch || (n && !recs) || ch->watch || records_check(recs, n))
		return -EINVAL;
	return chan_apply(ch, recs, n);
}

int be_rpc_chan_watch(struct be_rpc *rpc, struct be_rpc_naming *n, const char *service,
		      uint32_t shard, struct be_rpc_chan **out)
{
	struct be_rpc_chan *ch;
	int rc;

	if (!rpc || !n || !service || !out || strlen(service) >= BE_RPC_NAME_MAX)
		return -EINVAL;
	rc = chan_new(rpc, &ch);
	if (rc)
		return rc;
	rc = be__rpc_watch_start(ch, n, service, shard);
	if (rc) {
		be_rpc_chan_destroy(ch);
		return rc;
	}
	be__rpc_chan_refresh(ch);
	*out = ch;
	return 0;
}

void be__rpc_chan_refresh(struct be_rpc_chan *ch)
{
	struct be_rpc_record *recs = NULL;
	unsigned int n = 0, i, k = 0;

	if (!ch->watch || be__rpc_watch_snapshot(ch->watch, &recs, &n))
		return;
	/* A naming source validated its records; a channel still refuses
	 * what it cannot use, one record at a time. */
	for (i = 0; i < n; i++) {
		if (record_check(&recs[i])) {
			be__log(BE_LOG_WARN, "rpc: ignoring invalid record %s", recs[i].replica);
			continue;
		}
		recs[k++] = recs[i];
	}
	if (chan_apply(ch, recs, k))
		be__log(BE_LOG_WARN, "rpc: no memory to update a channel; keeping its set");
	free(recs);
}

void be_rpc_chan_destroy(struct be_rpc_chan *ch)
{
	struct be__list *p, *t;

	if (!ch)
		return;
	ch->destroying = true;
	if (ch->watch) {
		be__rpc_watch_stop(ch->watch);
		ch->watch = NULL;
	}
	while (!be__list_empty(&ch->calls))
		be__rpc_call_abort(be__list_entry(ch->calls.next, struct rpc_call, link));
	while (ch->nreps)
		rep_remove(ch, ch->nreps - 1);
	/* Nothing is in flight any more: drained replicas go now. */
	be__list_for_each_safe(p, t, &ch->gone)
	{
		struct rpc_replica *rep = be__list_entry(p, struct rpc_replica, gone);

		rep->outstanding = 0;
		rep_free(rep);
	}
	be__list_del_init(&ch->link);
	free(ch->reps);
	free(ch);
}

void be__rpc_chan_destroy_all(struct be_rpc *rpc)
{
	while (!be__list_empty(&rpc->chans))
		be_rpc_chan_destroy(be__list_entry(rpc->chans.next, struct be_rpc_chan, link));
}

int be_rpc_chan_set_config(struct be_rpc_chan *ch, const struct be_rpc_config *user)
{
	struct be_rpc_config cfg;

	if (!ch || !user)
		return -EINVAL;
	cfg = ch->cfg;
	if (be__abi_read(&cfg, sizeof(cfg), user, RPC_CONFIG_V1) || be__rpc_config_check(&cfg))
		return -EINVAL;
	ch->cfg = cfg;
	return 0;
}

void be_rpc_chan_set_min_version(struct be_rpc_chan *ch, uint64_t v)
{
	ch->min_version = v;
}

/* ---- selection */

/*
 * A replica whose server said it is draining is left out while another
 * one is eligible: it refuses new calls (-ESHUTDOWN), so sending it one
 * costs a retry and a budget token. With none other left it is still
 * chosen, and the call completes -ESHUTDOWN: every replica tried drains.
 */
static bool rep_eligible(const struct rpc_replica *rep, const struct rpc_call *call,
			 bool draining_too)
{
	uint32_t i;

	if (!be__rpc_rep_usable(rep) || (rep->srv_draining && !draining_too))
		return false;
	for (i = 0; i < call->natts && i < BE_ARRAY_SIZE(call->tried); i++)
		if (call->tried[i] == rep)
			return false;
	return true;
}

/* The @k-th eligible replica. */
static struct rpc_replica *pick_nth(struct be_rpc_chan *ch, struct rpc_call *call, uint32_t k,
				    bool draining_too)
{
	uint32_t i;

	for (i = 0; i < ch->nreps; i++)
		if (rep_eligible(ch->reps[i], call, draining_too) && k-- == 0)
			return ch->reps[i];
	return NULL;
}

struct rpc_replica *be__rpc_pick(struct be_rpc_chan *ch, struct rpc_call *call)
{
	struct rpc_replica *a, *b;
	uint32_t i, n = 0, r1, r2;
	bool draining_too = false;
	uint64_t r;

	if (ch->nreps == 1)
		return rep_eligible(ch->reps[0], call, true) ? ch->reps[0] : NULL;
	for (i = 0; i < ch->nreps; i++)
		n += rep_eligible(ch->reps[i], call, false);
	if (!n) {
		draining_too = true;
		for (i = 0; i < ch->nreps; i++)
			n += rep_eligible(ch->reps[i], call, true);
	}
	if (n <= 1)
		return n ? pick_nth(ch, call, 0, draining_too) : NULL;
	r = be__rpc_rand(ch->rpc);
	r1 = (uint32_t)(r % n);
	r2 = (uint32_t)((r >> 32) % (n - 1));
	if (r2 >= r1)
		r2++;
	a = pick_nth(ch, call, r1, draining_too);
	b = pick_nth(ch, call, r2, draining_too);
	return b->outstanding < a->outstanding ? b : a;
}

void be__rpc_rep_server_change(struct rpc_addr *a, bool draining)
{
	struct rpc_replica *rep = a->rep;

	rep->srv_draining = draining;
	if (draining) {
		a->c.drains++;
		rep->ch->c.drains++;
	}
	be__log(BE_LOG_INFO, "rpc: replica %s: its server %s", rep->rec.replica,
		draining ? "is draining" : "serves again");
}
