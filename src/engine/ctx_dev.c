/*
 * ctx_dev.c - the devices of a context: each device of a transport, and
 * the defaults its Engines start from.
 *
 * Which device. tcp and shm have one. verbs has one per RDMA NIC; the
 * address a worker listens on or connects to names the one it uses (the
 * transport's addr_dev op: the device rdma_cm will bind the connection
 * to), so one context serves addresses on every NIC, each on its own
 * device, CQs and SRQs; that is what lets a replica's calls move from a
 * port on one NIC to a port on another (docs/RPC.md, port switch). An
 * address that names no device (a wildcard listen address) takes the
 * transport's device opened first.
 *
 * When. Finding and opening a verbs device is slow: the first listing in
 * a process loads libibverbs' providers (0.4-1 s in the Soft-RoCE guest),
 * then each open, its probes and the registration of every pool block
 * on it take tens of milliseconds more. A worker's thread must not pay
 * that on its first connect or listen: it also serves the other peers
 * of its Engines. So be__ctx_dev_open_all() opens every device of each
 * transport that has several (the dev_name op: verbs) when the context is
 * created, on the application's thread, best effort (one that does not
 * open is logged and left out), and a worker only looks them up: an
 * address on a device that is not open fails at once with -ENODEV. A
 * device that appears later needs a new context. tcp and shm have one
 * device each, opened on first use: a calloc and a table entry per pool
 * block, no discovery and no call into a kernel driver.
 *
 * Model. Each device is opened once per context, queried (link speed
 * decides the default fragment size, the transport the send and mixed
 * windows), and attached to bemalloc so every block is registered on it.
 * Devices stay open until the context is destroyed
 * (be__ctx_dev_close_all). Workers of any thread ask for devices: the
 * context's mutex guards the table (lookups and the single-device
 * transports' opening, nothing slow), and a be__cdev is not written again
 * once handed out, so the data path never takes it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <be/be.h>
#include <be/sock.h>
#include "engine/ctx.h"
#include "util/common.h"
#include "util/log.h"

/* Default fragment size: small enough that a fragment occupies the link
 * for about a microsecond on RDMA (so a small message waits little behind
 * one), large enough to keep per-WR overhead low; software transports pay
 * per WR in syscalls/copies, so they get large fragments. */
static uint32_t ctx_frag_default(const struct be_xdev_attr *a)
{
	uint32_t speed = a->num_ports > 0 ? a->port[0].speed_mbps : 0;

	/* shm: a fragment is a memcpy (16 KiB: about 1.5 us); tcp: a frame
	 * in the stream (32 KiB: about 8 us) with syscalls at both ends; bulk
	 * fragments (4x) win back the bandwidth when no Socket is waiting. */
	if (!strcmp(a->transport, "shm"))
		return 16u << 10;
	if (strcmp(a->transport, "verbs") != 0)
		return 32u << 10;
	if (speed && speed <= 25000)
		return 2u << 10;
	if (speed && speed <= 100000)
		return 8u << 10;
	return 16u << 10;
}

/*
 * Bulk fragments: how many fragments one grows to while a stream is alone
 * on its Engine. On shm a fragment is a memcpy in post_send plus a pass of
 * the scheduler and a progress call, ~0.5 us in all: 16 of them per MiB
 * at 64 KiB were ~12 % of a lone 1 MiB stream. 256 KiB took be-perf bw
 * --window 1 from 11.9 to 14.2 GB/s (8 interleaved pairs, faster in 8);
 * the price is a copy of ~20 us during which the worker does not poll,
 * like a 128 KiB write on tcp. A small message of the same Engine never
 * waits for one (frag_size while any is about). Elsewhere 4x.
 */
static uint32_t ctx_bulk_mult(const struct be_xdev_attr *a)
{
	return strcmp(a->transport, "shm") ? 4 : 16;
}

/* The default send window: BE_WINDOW_FRAGS fragments, and on shm room for
 * four bulk fragments (shm has no link for bytes in flight to queue on). */
static uint64_t ctx_window_default(const struct be_xdev_attr *a, uint32_t frag_size)
{
	uint64_t w = (uint64_t)frag_size * BE_WINDOW_FRAGS;

	if (!strcmp(a->transport, "shm"))
		w = BE_MAX(w, (uint64_t)frag_size * ctx_bulk_mult(a) * 4);
	return w;
}

/*
 * The queue depths this device's workers and Engines use: the
 * configuration's, within the device's limits (tcp and shm allow 4096 WRs
 * per send queue, verbs what the NIC reports). Each clamp is logged once,
 * here, when the context opens the device.
 */
/* @*v within the device's @limit (0: none); a clamp is logged, as a
 * warning unless @*v is the default @dflt (the application asked for
 * nothing the device refused). */
static void ctx_dev_clamp(const char *name, uint32_t *v, uint32_t limit, uint32_t dflt,
			  const char *why)
{
	if (!limit || *v <= limit)
		return;
	if (*v == dflt)
		be_log_info("config: %s default %u lowered to %u (%s)", name, *v, limit, why);
	else
		be__log_clamped(name, *v, limit, why);
	*v = limit;
}

static void ctx_dev_limits(const struct be_ctx *ctx, struct be__cdev *cd)
{
	const struct be_config *cfg = &ctx->cfg;
	const struct be_xdev_attr *a = &cd->attr;
	char why[96];

	snprintf(why, sizeof(why), "the %s device's limit", cd->name);
	cd->sq_depth = cfg->sq_depth;
	ctx_dev_clamp("sq_depth", &cd->sq_depth, a->max_qp_wr, BE_CTX_DEFAULT_SQ_DEPTH, why);
	cd->cq_depth = cfg->cq_depth;
	ctx_dev_clamp("cq_depth", &cd->cq_depth, a->max_cqe, BE_CTX_DEFAULT_CQ_DEPTH, why);
	cd->srq_max_depth = cfg->srq_max_depth;
	ctx_dev_clamp("srq_max_depth", &cd->srq_max_depth, a->max_srq_wr,
		      BE_CTX_DEFAULT_SRQ_MAX_DEPTH, why);
}

/* Mixed window: what a stream may keep in flight while other Sockets of
 * its Engine send small messages (window.h, soft limit). On tcp every
 * byte in flight waits in the two kernels' socket buffers ahead of a
 * small message, and the receiver reads through all of it first: with the
 * full window (16 fragments) a small message's round trip grew with the
 * stream's bytes in flight. 4 fragments took be-perf hol's p99 from about
 * 3.4x to 2.2x the idle p99, with the stream beside it as fast as before
 * (2 or 3 fragments: no lower p99, a slower stream). shm streams WRITEs
 * through the ring, so a small message waits there behind every byte in
 * flight, copied out by the peer first: 4 fragments (64 KiB) took hol's
 * p99 from 14-45 us to 9-10 us (1 fragment: 4-5 us, with the stream
 * beside it at less than half its speed). verbs has not been measured:
 * no bound (0). A send window turned off (BE_SEND_WINDOW_OFF) turns it
 * off too: no byte bound at all. */
#define CTX_MIXED_FRAGS 4

static uint64_t ctx_mixed_window(const struct be_xdev_attr *a, uint32_t frag_size,
				 uint64_t send_window)
{
	uint64_t mw = (uint64_t)frag_size * CTX_MIXED_FRAGS;

	if (!strcmp(a->transport, "verbs") || mw >= send_window ||
	    send_window == BE_SEND_WINDOW_OFF)
		return 0;
	return mw;
}

/* Is @cd the device @want (a device name; "": any) of transport @ops? */
static bool ctx_dev_match(const struct be__cdev *cd, const struct be_xport_ops *ops,
			  const char *want)
{
	return !strcmp(cd->name, ops->name) && (!want[0] || !strcmp(cd->attr.name, want));
}

/* Open device @want ("": the first) of transport @ops as the context's
 * next device. The caller holds the lock and checked the room. */
static int ctx_dev_open_locked(struct be_ctx *ctx, const struct be_xport_ops *ops,
			       const char *want, struct be__cdev **out)
{
	struct be__cdev *cd = &ctx->dev[ctx->ndev];
	struct be_alloc_reg_hook hook;
	int rc;

	memset(cd, 0, sizeof(*cd));
	cd->name = ops->name;
	cd->ops = ops;
	rc = ops->dev_open(want, &cd->dev);
	if (rc) {
		be_log_err("ctx: cannot open the %s device %s: %s", ops->name, want[0] ? want : "",
			   be_strerror(rc));
		return rc;
	}
	rc = ops->dev_query(cd->dev, &cd->attr);
	if (rc)
		goto err_close;
	ops->dev_reg_hook(cd->dev, &hook);
	rc = be_alloc_attach_device(&hook);
	if (rc < 0) {
		be_log_err("ctx: cannot attach %s to bemalloc: %s", cd->attr.name, be_strerror(rc));
		goto err_close;
	}
	cd->alloc_dev = rc;
	ctx_dev_limits(ctx, cd);
	cd->frag_size = ctx->cfg.frag_size ? ctx->cfg.frag_size : ctx_frag_default(&cd->attr);
	if (ctx->cfg.send_window && cd->frag_size > ctx->cfg.send_window)
		cd->frag_size = (uint32_t)ctx->cfg.send_window;
	if (cd->attr.max_msg_size && cd->frag_size > cd->attr.max_msg_size) {
		if (ctx->cfg.frag_size)
			be__log_clamped("frag_size", cd->frag_size, cd->attr.max_msg_size,
					"the device's largest message");
		cd->frag_size = (uint32_t)cd->attr.max_msg_size;
	}
	cd->send_window = ctx->cfg.send_window ? ctx->cfg.send_window :
						 ctx_window_default(&cd->attr, cd->frag_size);
	/* Bulk fragments, within a quarter of the window and the device's WR
	 * limit; an explicit frag_size is kept as it is. */
	cd->frag_bulk = cd->frag_size;
	if (!ctx->cfg.frag_size) {
		uint64_t bulk = BE_MIN((uint64_t)cd->frag_size * ctx_bulk_mult(&cd->attr),
				       cd->send_window / 4);

		if (cd->attr.max_msg_size && bulk > cd->attr.max_msg_size)
			bulk = cd->attr.max_msg_size;
		cd->frag_bulk = (uint32_t)BE_MAX(bulk, (uint64_t)cd->frag_size);
	}
	cd->mixed_window = ctx_mixed_window(&cd->attr, cd->frag_size, cd->send_window);
	ctx->ndev++;
	be_log_info("ctx: opened %s device %s, fragment size %u (bulk %u), send window %llu, "
		    "mixed window %llu", ops->name, cd->attr.name, cd->frag_size, cd->frag_bulk,
		    (unsigned long long)cd->send_window, (unsigned long long)cd->mixed_window);
	*out = cd;
	return 0;

err_close:
	ops->dev_close(cd->dev);
	cd->dev = NULL;
	return rc;
}

/*
 * Every device of a transport that has several (verbs), all opened
 * together: a port switch to another NIC must not wait for the device to
 * open and every block of the pool to register on it. Best effort: a
 * device that does not open is logged and left out (an address on it
 * fails with -ENODEV), and the room for other transports is kept.
 */
static void ctx_dev_open_each_locked(struct be_ctx *ctx, const struct be_xport_ops *ops)
{
	char dn[sizeof(ctx->dev[0].attr.name)];
	struct be__cdev *cd;
	int i, j, rc;

	for (i = 0; (rc = ops->dev_name(i, dn, sizeof(dn))) == 0; i++) {
		bool open = false;

		for (j = 0; j < ctx->ndev; j++)
			open |= ctx_dev_match(&ctx->dev[j], ops, dn);
		if (open)
			continue;
		if (ctx->ndev >= BE_CTX_MAX_DEVS - 2) {
			be_log_warn("ctx: %s device %s and later ones not opened: %d devices open",
				    ops->name, dn, ctx->ndev);
			return;
		}
		ctx_dev_open_locked(ctx, ops, dn, &cd);
	}
	if (rc != -ENODEV)
		be_log_dbg("ctx: no %s devices: %s", ops->name, be_strerror(rc));
}

int be__ctx_dev(struct be_ctx *ctx, const char *name, const char *addr, bool passive,
		struct be__cdev **out)
{
	const struct be_xport_ops *ops = be__xport_find(name);
	struct be__cdev *cd = NULL;
	char want[sizeof(ctx->dev[0].attr.name)] = "";
	int i, rc = 0;

	if (!ops)
		return -EPROTONOSUPPORT;
	/* Which device: outside the lock, it may resolve a name. */
	if (addr && ops->addr_dev) {
		rc = ops->addr_dev(addr, passive, want, sizeof(want));
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&ctx->lock);
	/* By name: a transport's devices, whatever ops table it calls
	 * through (a test may wrap it to inject faults). */
	for (i = 0; i < ctx->ndev; i++)
		if (ctx_dev_match(&ctx->dev[i], ops, want)) {
			cd = &ctx->dev[i];
			goto out;
		}
	if (ctx->ndev == BE_CTX_MAX_DEVS) {
		be_log_err("ctx: cannot open a %s device%s%s: %d devices open already", name,
			   want[0] ? " " : "", want, BE_CTX_MAX_DEVS);
		rc = -ENOSPC;
		goto out;
	}
	/* A transport with several devices opened them all with the
	 * context: finding one now would hold the worker (above). */
	if (ops->dev_name) {
		be_log_err("ctx: no %s device%s%s is open: a context uses the devices that "
			   "opened when it was created", name, want[0] ? " " : "", want);
		rc = -ENODEV;
		goto out;
	}
	rc = ctx_dev_open_locked(ctx, ops, want, &cd);
out:
	pthread_mutex_unlock(&ctx->lock);
	if (!rc)
		*out = cd;
	return rc;
}

void be__ctx_dev_open_all(struct be_ctx *ctx)
{
	const struct be_xport_ops *ops;
	int i;

	pthread_mutex_lock(&ctx->lock);
	for (i = 0; (ops = be__xport_at(i)) != NULL; i++)
		if (ops->dev_name)
			ctx_dev_open_each_locked(ctx, ops);
	pthread_mutex_unlock(&ctx->lock);
}

/* Last opened first; each is detached from bemalloc before it closes. */
void be__ctx_dev_close_all(struct be_ctx *ctx)
{
	int i;

	for (i = ctx->ndev - 1; i >= 0; i--) {
		struct be__cdev *cd = &ctx->dev[i];

		be_alloc_detach_device(cd->alloc_dev);
		cd->ops->dev_close(cd->dev);
	}
}
