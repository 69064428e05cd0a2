/*
 * config.h - the model's config file: tables, shards, placement, limits
 * (internal). The format is in docs/PS.md ("Config file"): one directive
 * per line, `#` comments, parsed strictly, so a typo is an error with its
 * line number, never a silently different model.
 */
#ifndef BE_PS_CONFIG_H
#define BE_PS_CONFIG_H

#include <stddef.h>

#include "ps/ps_int.h"

#define BE_PS_CONFIG_MAX_BYTES (1u << 20)

/* Defaults of what a config file may leave out. */
#define BE_PS_DEFAULT_MAX_KEYS (1u << 20)
#define BE_PS_DEFAULT_MAX_REPLY (64ull << 20)
#define BE_PS_DEFAULT_MAX_TRAINERS 1024u
#define BE_PS_DEFAULT_EVICT_IDLE (1ull << 20)

/*
 * be__ps_config_parse() - parse @len bytes of config text into @c.
 * Returns 0, -EINVAL with "line N: what" in @err (NUL-terminated, at most
 * @err_len bytes), or -ENOMEM. On success the caller owns @c's memory
 * (be__ps_config_close()); on error @c holds nothing to free.
 */
int be__ps_config_parse(const char *text, size_t len, struct be__ps_config *c, char *err,
			size_t err_len);

/*
 * be__ps_config_load() - read and parse the file at @path (at most
 * BE_PS_CONFIG_MAX_BYTES). As be__ps_config_parse(), plus -errno of
 * open/read and -EFBIG.
 */
int be__ps_config_load(const char *path, struct be__ps_config *c, char *err, size_t err_len);

void be__ps_config_close(struct be__ps_config *c);

/* The table called @name, or NULL. */
const struct be__ps_table *be__ps_config_table(const struct be__ps_config *c, const char *name);

#endif /* BE_PS_CONFIG_H */
