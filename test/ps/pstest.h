/*
 * pstest.h - shared helpers of the parameter-server tests: a config from
 * text, keys of a given shard, a temporary directory.
 */
#ifndef BE_TEST_PS_PSTEST_H
#define BE_TEST_PS_PSTEST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "ps/config.h"
#include "ps/ps_int.h"
#include "util/common.h"
#include "test.h"

/* Parse @text into @c; fails the test with the parser's message. */
void pt_config(struct be__ps_config *c, const char *text);

/* @n distinct keys of @shard among @n_shards, from a sequence seeded
 * with @seed (so different seeds give different keys, mostly). */
void pt_keys(uint64_t *keys, uint32_t n, uint32_t shard, uint32_t n_shards, uint64_t seed);

/* A fresh directory under $TMPDIR or /tmp, and its removal with what is in it. */
void pt_tmpdir(char *out, size_t len);
void pt_rmdir(const char *dir);

/* splitmix64: a deterministic stream for test data. */
uint64_t pt_rand(uint64_t *state);
/* A float in [-1, 1) from the stream. */
float pt_randf(uint64_t *state);

#endif /* BE_TEST_PS_PSTEST_H */
