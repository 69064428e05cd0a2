/*
 * pstest.c - shared helpers of the parameter-server tests (pstest.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pstest.h"

void pt_config(struct be__ps_config *c, const char *text)
{
	char err[256];
	int rc = be__ps_config_parse(text, strlen(text), c, err, sizeof(err));

	if (rc)
		TEST_FAIL("config: %s (%d)", err, rc);
}

uint64_t pt_rand(uint64_t *state)
{
	*state += BE_PS_GOLDEN;
	return be__ps_mix64(*state);
}

float pt_randf(uint64_t *state)
{
	return (float)((double)(pt_rand(state) >> 40) * 0x1p-23 - 1.0);
}

void pt_keys(uint64_t *keys, uint32_t n, uint32_t shard, uint32_t n_shards, uint64_t seed)
{
	uint64_t s = seed * 0x100000001b3ull + 1;
	uint32_t i = 0;

	while (i < n) {
		uint64_t k = pt_rand(&s);

		if (be__ps_shard_of(k, n_shards) == shard)
			keys[i++] = k;
	}
}

size_t pt_pull(uint8_t *buf, size_t cap, uint32_t shard, uint16_t flags, uint64_t min_version,
	       uint32_t table, uint32_t dim, const uint64_t *keys, uint32_t n)
{
	struct be__ps_msg m = { .op = BE_PS_OP_PULL, .flags = flags, .shard = shard,
				.version = min_version, .nsec = 1 };
	int64_t len;

	m.sec[0] = (struct be__ps_sec){ .table = table, .dim = dim, .n = n,
					.keys = (const uint8_t *)keys };
	len = be__ps_msg_encode(&m, buf, cap);
	ASSERT_GT(len, 0);
	return (size_t)len;
}

size_t pt_push(uint8_t *buf, size_t cap, uint32_t shard, uint64_t trainer, uint64_t seq,
	       uint32_t table, uint32_t dim, const uint64_t *keys, const float *grads, uint32_t n)
{
	struct be__ps_msg m = { .op = BE_PS_OP_PUSH, .shard = shard, .trainer = trainer,
				.seq = seq, .nsec = 1 };
	int64_t len;

	m.sec[0] = (struct be__ps_sec){ .table = table, .dim = dim, .n = n,
					.keys = (const uint8_t *)keys,
					.vals = (const uint8_t *)grads };
	len = be__ps_msg_encode(&m, buf, cap);
	ASSERT_GT(len, 0);
	return (size_t)len;
}

void pt_decode(const uint8_t *buf, size_t len, const struct be__ps_config *c,
	       struct be__ps_msg *m)
{
	const char *why = "";
	int rc = be__ps_req_decode(buf, len, c, m, &why);

	if (rc)
		TEST_FAIL("decode: %s (%d)", why, rc);
}

void pt_tmpdir(char *out, size_t len)
{
	const char *base = getenv("TMPDIR");

	snprintf(out, len, "%s/be-ps-test-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(out))
		TEST_FAIL("mkdtemp %s", out);
}

void pt_rmdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}
