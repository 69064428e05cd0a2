/*
 * pstest.h - shared helpers of the parameter-server tests: a config from
 * text, keys of a given shard, pull and push requests of one section,
 * a temporary directory.
 */
#ifndef BE_TEST_PS_PSTEST_H
#define BE_TEST_PS_PSTEST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "ps/ckpt.h"
#include "ps/config.h"
#include "ps/ps_int.h"
#include "ps/serve.h"
#include "ps/wire.h"
#include "util/common.h"
#include "test.h"

/* Parse @text into @c; fails the test with the parser's message. */
void pt_config(struct be__ps_config *c, const char *text);

/* @n distinct keys of @shard among @n_shards, from a sequence seeded
 * with @seed (so different seeds give different keys, mostly). */
void pt_keys(uint64_t *keys, uint32_t n, uint32_t shard, uint32_t n_shards, uint64_t seed);

/* A pull (one section) into @buf; returns its length. */
size_t pt_pull(uint8_t *buf, size_t cap, uint32_t shard, uint16_t flags, uint64_t min_version,
	       uint32_t table, uint32_t dim, const uint64_t *keys, uint32_t n);

/* A push (one section) into @buf; returns its length. */
size_t pt_push(uint8_t *buf, size_t cap, uint32_t shard, uint64_t trainer, uint64_t seq,
	       uint32_t table, uint32_t dim, const uint64_t *keys, const float *grads, uint32_t n);

/* Decode @buf as a request of @c (must succeed). */
void pt_decode(const uint8_t *buf, size_t len, const struct be__ps_config *c,
	       struct be__ps_msg *m);

/* A fresh directory under $TMPDIR or /tmp, and its removal with what is in it. */
void pt_tmpdir(char *out, size_t len);
void pt_rmdir(const char *dir);

/* splitmix64: a deterministic stream for test data. */
uint64_t pt_rand(uint64_t *state);
/* A float in [-1, 1) from the stream. */
float pt_randf(uint64_t *state);

#endif /* BE_TEST_PS_PSTEST_H */
