/*
 * Check that the etcd response parsers survive arbitrary input: every
 * input is either refused with -EBADMSG or accepted with a result that
 * keeps the documented invariants (sizes within the limits, keys
 * NUL-terminated, revisions consistent and in order), and nothing reads
 * out of bounds or leaks (run under ASan in the sanitizer build).
 *
 * A harness of fuzz.h: the first byte picks the parser, the rest is the
 * response. The seeds (corpus/etcd-parse, written by --write-seeds) are
 * real etcd 3.4 responses; fuzz_dict() gives the driver pieces of JSON
 * and of etcd's encodings to splice in, without which blind mutation
 * seldom gets a response past jansson.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/etcd.h"
#include "fuzz/fuzz.h"
#include "test.h"

static const struct be_etcd_limits lim = {
	.max_response = 64 << 10, .max_key = 64, .max_value = 256, .max_kvs = 16,
};

static unsigned long n_ok, n_refused;

static int kv_cmp(const struct be_etcd_kv *a, const struct be_etcd_kv *b)
{
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, n);

	return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

/* Touch every byte (ASan checks the bounds) and check the limits. */
static unsigned kv_check(const struct be_etcd_kv *kv, int deleted)
{
	unsigned sum = 0;
	size_t i;

	ASSERT(kv->key_len >= 1 && kv->key_len <= lim.max_key);
	ASSERT(kv->value_len <= lim.max_value);
	ASSERT_EQ(kv->key[kv->key_len], 0);
	ASSERT_EQ(kv->value[kv->value_len], 0);
	for (i = 0; i < kv->key_len; i++)
		sum += kv->key[i];
	for (i = 0; i < kv->value_len; i++)
		sum += kv->value[i];
	ASSERT_GE(kv->mod_revision, 1);
	ASSERT_GE(kv->lease, 0);
	if (!deleted) {
		ASSERT_GE(kv->create_revision, 1);
		ASSERT_LE(kv->create_revision, kv->mod_revision);
		ASSERT_GE(kv->version, 1);
	}
	return sum;
}

/* The invariants of an accepted range response; frees it. */
static void range_check(struct be_etcd_range *r)
{
	size_t i;

	ASSERT(r->n <= lim.max_kvs && (uint64_t)r->count >= r->n && r->revision >= 1);
	for (i = 0; i < r->n; i++) {
		kv_check(&r->kvs[i], 0);
		ASSERT_LE(r->kvs[i].mod_revision, r->revision);
		if (i)
			ASSERT(kv_cmp(&r->kvs[i - 1], &r->kvs[i]) < 0);
	}
	be__etcd_range_free(r);
}

/* The invariants of an accepted watch line; frees it. */
static void watch_check(struct be_etcd_wmsg *m)
{
	size_t i;

	ASSERT(m->kind <= BE_ETCD_WMSG_ERROR && m->n <= lim.max_kvs);
	ASSERT_EQ(m->kind == BE_ETCD_WMSG_EVENTS, m->n > 0);
	ASSERT_EQ(m->kind == BE_ETCD_WMSG_CANCELED || m->kind == BE_ETCD_WMSG_ERROR,
		  m->error < 0);
	for (i = 0; i < m->n; i++) {
		kv_check(&m->events[i].kv, m->events[i].type == BE_ETCD_EV_DELETE);
		if (i)
			ASSERT_LE(m->events[i - 1].kv.mod_revision, m->events[i].kv.mod_revision);
	}
	be__etcd_wmsg_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	union {
		struct be_etcd_range r;
		struct be_etcd_wmsg m;
	} u;
	const char *in;
	char err[256];
	bool range;
	int rc;

	if (!size)
		return 0;
	range = data[0] & 1;
	in = (const char *)data + 1;
	rc = range ? be__etcd_parse_range(in, size - 1, &lim, &u.r, err, sizeof(err))
		   : be__etcd_parse_watch(in, size - 1, &lim, &u.m, err, sizeof(err));
	if (rc) {
		/* Refused: said why, and nothing left behind. */
		ASSERT_EQ(rc, -EBADMSG);
		ASSERT(err[0]);
		ASSERT(range ? u.r.n == 0 && !u.r.kvs : u.m.n == 0 && !u.m.events);
		n_refused++;
		return 0;
	}
	if (range)
		range_check(&u.r);
	else
		watch_check(&u.m);
	n_ok++;
	return 0;
}

/* Real responses of etcd 3.4.23: '1' + range, '0' + watch line. */
static const char *const seeds[] = {
	"1{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":\"13668033151171901709\","
	"\"revision\":\"3\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"c3ZjL2E=\",\"create_revision\":"
	"\"3\",\"mod_revision\":\"3\",\"version\":\"1\",\"value\":\"MQ==\",\"lease\":"
	"\"4111120380276976907\"},{\"key\":\"c3ZjL2I=\",\"create_revision\":\"2\",\"mod_revision\":"
	"\"3\",\"version\":\"2\"}],\"count\":\"2\"}",
	"1{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":\"13668033151171901709\","
	"\"revision\":\"2\",\"raft_term\":\"2\"}}",
	"0{\"result\":{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":"
	"\"13668033151171901709\",\"revision\":\"6\",\"raft_term\":\"2\"},\"created\":true}}",
	"0{\"result\":{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":"
	"\"13668033151171901709\",\"revision\":\"6\",\"raft_term\":\"2\"},\"events\":[{\"kv\":{\"key\":"
	"\"c3ZjL2E=\",\"create_revision\":\"3\",\"mod_revision\":\"3\",\"version\":\"1\",\"value\":"
	"\"MQ==\",\"lease\":\"4111120380276976907\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":"
	"\"c3ZjL2E=\",\"mod_revision\":\"6\"},\"prev_kv\":{\"key\":\"c3ZjL2E=\",\"create_revision\":"
	"\"3\",\"mod_revision\":\"3\",\"version\":\"1\",\"value\":\"MQ==\"}}]}}",
	"0{\"result\":{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":"
	"\"13668033151171901709\",\"raft_term\":\"2\"},\"canceled\":true,\"compact_revision\":\"7\"}}",
	"0{\"result\":{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":"
	"\"13668033151171901709\",\"revision\":\"8\",\"raft_term\":\"2\"},\"watch_id\":\"-1\"}}",
	"0{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"etcdserver: no leader\","
	"\"http_status\":\"Service Unavailable\"}}",
};

/* Pieces of JSON and of etcd's encodings that mutations splice in. */
static const char *const tokens[] = {
	"{", "}", "[", "]", ":", ",", "\"", "\\", "\\u0000", "null", "true", "false", "0", "-1",
	"\"-1\"", "\"0\"", "\"9223372036854775807\"", "\"9223372036854775808\"", "1e999", "1.5",
	"\"=\"", "==", "YQ==", "/w==", "\"DELETE\"", "\"PUT\"", "\"kv\"", "\"kvs\"", "\"key\"",
	"\"events\"", "\"header\"", "\"revision\"", "\"count\"", "\"created\"", "\"canceled\"",
	"\"error\"", "\"result\"", "\"fragment\"", "\xff", "\xc3\xa9", " ",
};

const char *const *fuzz_dict(size_t *n)
{
	*n = sizeof(tokens) / sizeof(tokens[0]);
	return tokens;
}

void fuzz_seeds(void (*put)(const char *dir, const char *name, const void *p, size_t n),
		const char *dir)
{
	char name[32];
	size_t s;

	for (s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		snprintf(name, sizeof(name), "seed-%zu", s);
		put(dir, name, seeds[s], strlen(seeds[s]));
	}
}

void fuzz_summary(unsigned long iters)
{
	printf("etcd-parse: %lu accepted, %lu refused\n", n_ok, n_refused);
	/* Both outcomes occur, or the mutations test nothing. */
	ASSERT_GT(n_refused, iters / 10);
	ASSERT_GT(n_ok, iters / 100);
}
