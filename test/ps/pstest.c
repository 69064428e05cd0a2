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
