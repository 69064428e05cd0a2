/*
 * ctx.c - the context's public face: create one from a configuration,
 * read the configuration back, destroy it.
 *
 * Model. A context is a checked configuration plus its devices: the
 * verbs devices it opens as it is created, tcp and shm as its workers
 * first use them (src/engine/ctx.h, ctx_dev.c). It outlives its workers:
 * destroying it closes the devices, which no worker may still use.
 */
#include <errno.h>
#include <stdlib.h>

#include <be/sock.h>
#include "engine/ctx.h"
#include "sock/config.h"
#include "util/log.h"

int be_ctx_create(const struct be_config *cfg, struct be_ctx **out)
{
	struct be_ctx *ctx;
	int rc;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	be_config_init(&ctx->cfg);
	rc = cfg ? be__abi_read(&ctx->cfg, sizeof(ctx->cfg), cfg, BE__CONFIG_V1) : 0;
	if (rc)
		goto err_free;
	rc = be__config_check(&ctx->cfg);
	if (rc)
		goto err_free;
	/* be_ctx_config() hands this out: a caller that copies it and passes
	 * the copy back must not make us read past its own, perhaps shorter,
	 * struct (docs/API.md). */
	ctx->cfg.size = 0;
	rc = -pthread_mutex_init(&ctx->lock, NULL);
	if (rc)
		goto err_free;
	/* Here, not on a worker's first connect: that would hold every
	 * other Engine of the worker meanwhile (engine/ctx_dev.c). */
	be__ctx_dev_open_all(ctx);
	*out = ctx;
	return 0;

err_free:
	free(ctx);
	return rc;
}

const struct be_config *be_ctx_config(const struct be_ctx *ctx)
{
	return &ctx->cfg;
}

/* A live worker still polls the devices' queues and its receive buffers
 * are registered on them: closing them under it would be a use after
 * free, so refuse and change nothing. */
int be_ctx_destroy(struct be_ctx *ctx)
{
	int n;

	if (!ctx)
		return 0;
	n = atomic_load(&ctx->workers);
	if (n) {
		be_log_err("ctx: not destroyed: %d workers alive", n);
		return -EBUSY;
	}
	be__ctx_dev_close_all(ctx);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
	return 0;
}
