/*
 * ctx.c - the context's public face: create one from a configuration,
 * read the configuration back, destroy it.
 *
 * Model. A context is a checked configuration plus the devices its
 * workers opened (src/engine/ctx.h, ctx_dev.c). It outlives its workers:
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
	if (cfg)
		ctx->cfg = *cfg;
	else
		be_config_init(&ctx->cfg);
	rc = be__config_check(&ctx->cfg);
	if (rc)
		goto err_free;
	rc = -pthread_mutex_init(&ctx->lock, NULL);
	if (rc)
		goto err_free;
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

void be_ctx_destroy(struct be_ctx *ctx)
{
	if (!ctx)
		return;
	if (atomic_load(&ctx->workers))
		be_log_err("ctx: destroyed with %d workers alive", atomic_load(&ctx->workers));
	be__ctx_dev_close_all(ctx);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}
