/*
 * rpc.c - the RPC state of a worker: configuration, creation, teardown.
 *
 * Teardown order matters because callbacks may still be queued on the
 * worker: channels first (their calls complete with -ECANCELED inside
 * be_rpc_destroy(), as documented), then the server side (listeners,
 * accepted sockets), then the timer thread. Requests a handler still
 * holds keep the struct alive (rpc->refs); completing them later only
 * frees memory, because every socket is closed by then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

static void env_u32(const char *name, uint32_t *v)
{
	const char *s = getenv(name);
	unsigned long long x;
	char *end;

	if (!s || !*s)
		return;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end || x > UINT32_MAX || *s == '-') {
		be__log(BE_LOG_WARN, "rpc: ignoring malformed %s=%s", name, s);
		return;
	}
	*v = (uint32_t)x;
}

void be_rpc_config_init_sized(struct be_rpc_config *out)
{
	struct be_rpc_config cfg, *c = &cfg;

	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->timeout_us = 100000;
	c->max_attempts = 3;
	c->hedge_pct = 50;
	c->hedge_us = 0;
	c->retry_budget_pct = 10;
	c->retry_budget_min = 10;
	c->addr_timeouts = 2;
	c->eject_failures = 3;
	c->eject_min_ms = 100;
	c->eject_max_ms = 10000;
	c->eject_reset_ms = 10000;
	c->eject_max_pct = 50;
	c->probe_min_ms = 5;
	c->probe_max_ms = 1000;
	c->probe_timeout_ms = 100;
	c->standby = 1;
	env_u32("BE_RPC_TIMEOUT_US", &c->timeout_us);
	env_u32("BE_RPC_MAX_ATTEMPTS", &c->max_attempts);
	env_u32("BE_RPC_HEDGE_PCT", &c->hedge_pct);
	env_u32("BE_RPC_HEDGE_US", &c->hedge_us);
	env_u32("BE_RPC_RETRY_BUDGET_PCT", &c->retry_budget_pct);
	env_u32("BE_RPC_RETRY_BUDGET_MIN", &c->retry_budget_min);
	env_u32("BE_RPC_ADDR_TIMEOUTS", &c->addr_timeouts);
	env_u32("BE_RPC_EJECT_FAILURES", &c->eject_failures);
	env_u32("BE_RPC_EJECT_MIN_MS", &c->eject_min_ms);
	env_u32("BE_RPC_EJECT_MAX_MS", &c->eject_max_ms);
	env_u32("BE_RPC_EJECT_RESET_MS", &c->eject_reset_ms);
	env_u32("BE_RPC_EJECT_MAX_PCT", &c->eject_max_pct);
	env_u32("BE_RPC_PROBE_MIN_MS", &c->probe_min_ms);
	env_u32("BE_RPC_PROBE_MAX_MS", &c->probe_max_ms);
	env_u32("BE_RPC_PROBE_TIMEOUT_MS", &c->probe_timeout_ms);
	env_u32("BE_RPC_STANDBY", &c->standby);
	if (out)
		be__abi_write(out, c, sizeof(*c), RPC_CONFIG_V1);
}

int be__rpc_config_check(const struct be_rpc_config *c)
{
	if (!c->timeout_us || c->timeout_us == BE_RPC_NO_DEADLINE)
		return -EINVAL;
	if (c->max_attempts < 1 || c->max_attempts > 8 || c->hedge_pct > 100 ||
	    c->retry_budget_pct > 100 || c->eject_max_pct > 100)
		return -EINVAL;
	if (!c->addr_timeouts || !c->eject_failures || !c->eject_min_ms ||
	    c->eject_max_ms < c->eject_min_ms || !c->probe_min_ms ||
	    c->probe_max_ms < c->probe_min_ms || !c->probe_timeout_ms || c->standby > 1)
		return -EINVAL;
	return 0;
}

int be_rpc_create(struct be_worker *w, const struct be_rpc_config *cfg, struct be_rpc **out)
{
	struct be_rpc *rpc;
	int rc;

	if (!w || !out)
		return -EINVAL;
	rpc = calloc(1, sizeof(*rpc));
	if (!rpc)
		return -ENOMEM;
	be_rpc_config_init(&rpc->cfg);
	rc = cfg ? be__abi_read(&rpc->cfg, sizeof(rpc->cfg), cfg, RPC_CONFIG_V1) : 0;
	if (!rc)
		rc = be__rpc_config_check(&rpc->cfg);
	if (rc)
		goto err_free;
	rpc->w = w;
	rpc->refs = 1;
	rpc->calls.free_head = RPC_IDS_NONE;
	rpc->atts.free_head = RPC_IDS_NONE;
	be__list_init(&rpc->att_free);
	be__list_init(&rpc->call_free);
	be__list_init(&rpc->req_free);
	rpc->rnd = (uint64_t)rpc_now() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)rpc;
	if (!rpc->rnd)
		rpc->rnd = 1;
	be__list_init(&rpc->deferred);
	be__list_init(&rpc->lsts);
	be__list_init(&rpc->sconns);
	be__list_init(&rpc->chans);
	rc = be__rpc_timer_start(rpc);
	if (rc)
		goto err_free;
	*out = rpc;
	return 0;

err_free:
	free(rpc);
	return rc;
}

void be__rpc_unref(struct be_rpc *rpc)
{
	if (--rpc->refs)
		return;
	be__rpc_server_free(rpc);
	free(rpc);
}

void be_rpc_destroy(struct be_rpc *rpc)
{
	if (!rpc)
		return;
	/* From inside one of its callbacks the caller's frames still use
	 * @rpc: refuse, as be_worker_destroy() does, rather than free it. */
	if (rpc->cb_depth) {
		be_log_err("rpc: be_rpc_destroy() refused inside a callback of the same be_rpc; "
			   "call it once the callback returned");
		return;
	}
	rpc->destroyed = true;
	be__rpc_chan_destroy_all(rpc);
	/* Calls cancelled above may sit on the deferred list. */
	be__rpc_flush(rpc);
	be__rpc_server_close_all(rpc);
	be__rpc_timer_stop(rpc);
	be__rpc_call_free_all(rpc);
	be__rpc_ids_free(&rpc->calls);
	be__rpc_ids_free(&rpc->atts);
	be__rpc_unref(rpc);
}

struct be_worker *be_rpc_worker(struct be_rpc *rpc)
{
	return rpc->w;
}

uint64_t be__rpc_rand(struct be_rpc *rpc)
{
	/* xorshift64*: selection needs speed, not quality. */
	uint64_t x = rpc->rnd;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rpc->rnd = x;
	return x * 0x2545f4914f6cdd1dull;
}
