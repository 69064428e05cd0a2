/*
 * failover.c - the health of a replica's addresses and the path a
 * replica's calls take: port switch, TCP fallback, probing, and the way
 * back.
 *
 * A replica's addresses are in order of preference. Its path is the
 * first address that is usable: IDLE (not connected yet: a call connects
 * it) or UP. An address goes DOWN when its connection fails (on_close of
 * its socket: a dead Engine, a port gone, the peer hanging up; a send
 * that fails at once; a protocol error) or when addr_timeouts attempts in
 * a row time out on it with nothing answered in between (a path that
 * drops traffic while the Engine's own keepalive, 10 s by default, has
 * not noticed yet). The path then moves to the next usable address: a
 * port switch, or a TCP fallback when it moves from an RDMA-class
 * address (verbs, shm) to tcp. The attempts that were on the failed
 * connection are failed over after the path moved, so their retries go
 * the new way at once.
 *
 * A DOWN address is probed while it matters: when it is preferred to the
 * current path, or when the replica has no usable address at all. A probe
 * opens a fresh connection (a failed Engine is never reused by the core)
 * and pings it (service 0, method 0) within probe_timeout_ms; the first
 * probe goes probe_min_ms after the failure, and the delay doubles up to
 * probe_max_ms while probes fail. A successful probe makes the address UP
 * and, when it is preferred to the current path, the replica returns to
 * it: a port return, or a fallback return from tcp to RDMA. While being
 * probed an address takes no calls, so a path that is still broken costs
 * one probe, not the calls of a deadline.
 *
 * Standby (cfg.standby): the address after the path is kept connected,
 * without calls, once the path is; a switch then costs no handshake. A
 * failed standby is probed back the same way.
 */
#include <errno.h>
#include <stdlib.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

static void rep_standby(struct rpc_replica *rep);

int be__rpc_addr_conn(struct rpc_addr *a, struct rpc_conn **out)
{
	struct be_rpc *rpc = a->rep->ch->rpc;
	struct rpc_conn *c;
	int rc;

	if (a->conn && a->conn->s) {
		*out = a->conn;
		return 0;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->rpc = rpc;
	c->role = RPC_CONN_CLIENT;
	c->refs = 1;
	c->addr = a;
	c->born_ns = rpc_now();
	be__list_init(&c->atts);
	be__list_init(&c->link);
	rc = be_sock_connect(rpc->w, a->str, &be__rpc_client_cbs, c, &c->s);
	if (rc) {
		be__log(BE_LOG_INFO, "rpc: connect %s: %s", a->str, be_strerror(rc));
		free(c);
		return rc;
	}
	a->conn = c;
	if (a->state == BE_RPC_ADDR_IDLE)
		a->state = BE_RPC_ADDR_UP;
	*out = c;
	if ((int)a->idx == a->rep->path)
		rep_standby(a->rep);
	return 0;
}

/* The standby of @rep: the address after its path, or NULL. */
static const struct rpc_addr *rep_standby_addr(const struct rpc_replica *rep)
{
	if (!rep->ch->cfg.standby || rep->path < 0 || rep->state != BE_RPC_REP_ACTIVE ||
	    rep->path + 1 >= (int)rep->rec.naddrs)
		return NULL;
	return &rep->addrs[rep->path + 1];
}

/*
 * Standby: once a replica's path is connected, the next address is
 * connected too, and kept so without calls, so that a port switch or a
 * TCP fallback finds its connection up instead of waiting for a
 * handshake (milliseconds on an RDMA NIC, up to a second in the
 * Soft-RoCE guest: longer than a deadline). A standby that fails goes
 * DOWN and is probed back like a preferred address (addr_wanted()).
 */
static void rep_standby(struct rpc_replica *rep)
{
	struct rpc_addr *a;
	struct rpc_conn *c;
	int rc;

	if (!rep_standby_addr(rep))
		return;
	a = &rep->addrs[rep->path + 1];
	if (a->conn || a->state == BE_RPC_ADDR_DOWN || a->state == BE_RPC_ADDR_PROBING ||
	    rep->ch->destroying || !rep->addrs[rep->path].conn)
		return;
	rc = be__rpc_addr_conn(a, &c);
	if (rc)
		be__log(BE_LOG_INFO, "rpc: standby %s: %s", a->str, be_strerror(rc));
}

/* Does probing @a matter now? */
static bool addr_wanted(const struct rpc_addr *a)
{
	const struct rpc_replica *rep = a->rep;

	if (rep->state == BE_RPC_REP_REMOVED || rep->ch->destroying)
		return false;
	return rep->path < 0 || (int)a->idx < rep->path || a == rep_standby_addr(rep);
}

static void addr_probe_fire(struct be_rpc *rpc, struct rpc_tmr *t);

void be__rpc_addr_schedule_probe(struct rpc_addr *a)
{
	struct be_rpc *rpc = a->rep->ch->rpc;

	if (a->state != BE_RPC_ADDR_DOWN || rpc_tmr_armed(&a->probe_tmr) || a->probe_call ||
	    !addr_wanted(a))
		return;
	be__rpc_tmr_arm(rpc, &a->probe_tmr, rpc_now() + (uint64_t)a->probe_ms * 1000000ull,
			addr_probe_fire);
}

/*
 * A probe's connection that never completed a send nor heard anything may
 * still be connecting: tens of milliseconds in the Soft-RoCE guest, more
 * than probe_timeout_ms when the machine is loaded. The next probe waits
 * on it instead of starting over, until it is probe_max_ms old. Then it
 * is closed, and since the core abandons a connect no Socket waits for,
 * the next probe connects afresh: a connect that hangs (a request lost
 * while a NIC's address came back is resent by the IB CM only seconds
 * later) holds the address for probe_max_ms, not connect_timeout_ms.
 */
static bool addr_conn_connecting(const struct rpc_conn *c, const struct be_rpc_config *cfg)
{
	return c->s && !c->established && !c->heard &&
	       rpc_now() - c->born_ns < (uint64_t)cfg->probe_max_ms * 1000000ull;
}

/*
 * A probe that timed out on a connection that has answered nothing for
 * the whole probe time: the path drops this connection's traffic (a
 * port that lost its address may leave an RC QP up but unanswered, yet
 * take a fresh connection). Closing our socket would not end its Engine,
 * and the next probe would reuse it until the keepalive fails it
 * (conn_timeout_ms); ending the Engine makes that probe connect afresh.
 */
static bool addr_conn_silent(const struct rpc_conn *c, const struct be_rpc_config *cfg, int status)
{
	return status == -ETIMEDOUT && c->s && c->established &&
	       rpc_now() - c->last_rx_ns >= (uint64_t)cfg->probe_timeout_ms * 1000000ull;
}

static void addr_probe_failed(struct rpc_addr *a, int status)
{
	const struct be_rpc_config *cfg = &a->rep->ch->cfg;

	a->c.probe_failures++;
	a->rep->ch->c.probe_failures++;
	a->probe_ms = a->probe_ms * 2 > cfg->probe_max_ms ? cfg->probe_max_ms : a->probe_ms * 2;
	if (a->state == BE_RPC_ADDR_PROBING)
		a->state = BE_RPC_ADDR_DOWN;
	if (a->conn && !addr_conn_connecting(a->conn, cfg)) {
		struct rpc_conn *c = a->conn;

		if (addr_conn_silent(c, cfg, status) && !be_sock_fail_engine(c->s))
			be__log(BE_LOG_INFO, "rpc: %s silent through a probe, ending its Engine",
				a->str);
		a->conn = NULL;
		c->addr = NULL;
		be__rpc_conn_failed(c, -ECONNRESET);
		be__rpc_conn_close(c);
	}
	be__rpc_addr_schedule_probe(a);
}

static void addr_probe_fire(struct be_rpc *rpc, struct rpc_tmr *t)
{
	struct rpc_addr *a = container_of(t, struct rpc_addr, probe_tmr);
	int rc;

	if (a->state != BE_RPC_ADDR_DOWN || !addr_wanted(a))
		return;
	a->state = BE_RPC_ADDR_PROBING;
	rc = be__rpc_probe_start(a->rep->ch, a, NULL, &a->probe_call);
	if (rc) {
		a->probe_call = 0;
		a->c.probes++;
		a->rep->ch->c.probes++;
		addr_probe_failed(a, rc);
	}
}

void be__rpc_probe_done(struct rpc_call *call, int status)
{
	struct rpc_replica *rep = call->probe_rep;
	struct rpc_addr *a = call->probe_addr;

	if (rep) {
		rep->probe_call = 0;
		be__rpc_rep_probe_done(rep, status);
		return;
	}
	a->probe_call = 0;
	if (a->rep->state == BE_RPC_REP_REMOVED || a->rep->ch->destroying)
		return;
	if (status) {
		addr_probe_failed(a, status);
		return;
	}
	a->state = BE_RPC_ADDR_UP;
	a->probe_ms = a->rep->ch->cfg.probe_min_ms;
	a->timeouts_row = 0;
	be__rpc_rep_path(a->rep);
}

void be__rpc_rep_path(struct rpc_replica *rep)
{
	struct be_rpc_chan *ch = rep->ch;
	int i, path = -1, last = rep->last_path;

	for (i = 0; i < (int)rep->rec.naddrs; i++) {
		int st = rep->addrs[i].state;

		if (st == BE_RPC_ADDR_IDLE || st == BE_RPC_ADDR_UP) {
			path = i;
			break;
		}
	}
	if (path != rep->path) {
		rep->path = path;
		if (path >= 0 && last >= 0 && path != last) {
			struct rpc_addr *from = &rep->addrs[last], *to = &rep->addrs[path];

			if (path > last && from->rdma && !to->rdma) {
				ch->c.fallbacks++;
				to->c.fallbacks++;
			} else if (path > last) {
				ch->c.port_switches++;
				to->c.port_switches++;
			} else if (!from->rdma && to->rdma) {
				ch->c.fallback_returns++;
				to->c.fallback_returns++;
			} else {
				ch->c.port_returns++;
				to->c.port_returns++;
			}
			be__log(BE_LOG_INFO, "rpc: replica %s: %s -> %s", rep->rec.replica, from->str,
				to->str);
		}
		if (path >= 0)
			rep->last_path = path;
	}
	for (i = 0; i < (int)rep->rec.naddrs; i++)
		be__rpc_addr_schedule_probe(&rep->addrs[i]);
	if (path >= 0)
		rep_standby(rep);
}

void be__rpc_addr_down(struct rpc_addr *a, int err)
{
	struct rpc_replica *rep = a->rep;
	struct rpc_conn *c = a->conn;
	bool was_path = (int)a->idx == rep->path;

	rep->outstanding++; /* pinned while its attempts fail over */
	if (c) {
		a->conn = NULL;
		c->addr = NULL;
	}
	if (a->state == BE_RPC_ADDR_UP || a->state == BE_RPC_ADDR_IDLE) {
		a->c.conn_errors++;
		be__log(BE_LOG_INFO, "rpc: %s down: %s", a->str, be_strerror(err));
	}
	if (a->state != BE_RPC_ADDR_PROBING)
		a->state = BE_RPC_ADDR_DOWN;
	a->timeouts_row = 0;
	be__rpc_rep_path(rep);
	if (c) {
		be__rpc_conn_failed(c, err);
		be__rpc_conn_close(c);
	}
	/* Losing the path is a failure of the replica (ejection counts it);
	 * a probe that fails is counted by its own completion. */
	if (was_path)
		be__rpc_rep_failed(rep);
	rep->outstanding--;
	be__rpc_replica_maybe_free(rep);
}

void be__rpc_addr_ok_down(struct rpc_addr *a, struct rpc_conn *c)
{
	/* An answer on the connection of a path left as silent: it is not
	 * (a false alarm, or it recovered); take it back without waiting
	 * for the probe. */
	if (a->conn == c && !a->probe_call) {
		be__rpc_tmr_cancel(a->rep->ch->rpc, &a->probe_tmr);
		a->state = BE_RPC_ADDR_UP;
		a->probe_ms = a->rep->ch->cfg.probe_min_ms;
		be__rpc_rep_path(a->rep);
	}
}

/* Has the replica of @a a usable address other than @a? */
static bool addr_has_alternative(const struct rpc_addr *a)
{
	const struct rpc_replica *rep = a->rep;
	uint32_t i;

	for (i = 0; i < rep->rec.naddrs; i++) {
		int st = rep->addrs[i].state;

		if (i != a->idx && (st == BE_RPC_ADDR_IDLE || st == BE_RPC_ADDR_UP))
			return true;
	}
	return false;
}

bool be__rpc_addr_suspect(struct rpc_addr *a)
{
	struct rpc_replica *rep = a->rep;

	if (a->state != BE_RPC_ADDR_UP || rep->state == BE_RPC_REP_REMOVED ||
	    !addr_has_alternative(a))
		return false;
	/* The path is left, its connection is not: the calls on it may still
	 * be answered (a false alarm costs a probe), and the probe runs on
	 * it. If the path is dead, the probe times out and closes it, or the
	 * Engine fails first. */
	be__log(BE_LOG_INFO, "rpc: %s silent, leaving it", a->str);
	a->state = BE_RPC_ADDR_DOWN;
	a->timeouts_row = 0;
	a->c.conn_errors++;
	be__rpc_rep_path(rep);
	be__rpc_rep_failed(rep);
	return true;
}

void be__rpc_addr_timeout(struct rpc_addr *a, bool silent)
{
	struct rpc_replica *rep = a->rep;

	a->c.timeouts++;
	be__rpc_rep_failed(rep);
	/* Replies to later requests came back: the path works and the
	 * server is slow; that is the replica's business (ejection), not a
	 * reason to leave the path. With nowhere else to go, waiting for the
	 * calls (or for the Engine's keepalive to fail it) is better than
	 * failing every call at once. */
	if (!silent || a->state != BE_RPC_ADDR_UP || rep->state == BE_RPC_REP_REMOVED)
		return;
	if (++a->timeouts_row >= rep->ch->cfg.addr_timeouts)
		be__rpc_addr_suspect(a);
}
