/*
 * Check that put, range, delete, compare-and-swap and compaction round-trip
 * through a real etcd: binary keys and values (NUL, 0xff) survive base64,
 * a prefix read returns exactly its keys in order with the store's
 * revision, a compare-and-swap writes only when its compare holds and
 * otherwise reports the key's current state, a read of a compacted
 * revision fails with BE_ETCD_ECOMPACTED, a value over the client's limit
 * is refused and counted, and a dead endpoint fails with -ECONNREFUSED.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"

static struct be_etcd *client(const char *url, size_t max_value)
{
	struct be_etcd_opts o;
	struct be_etcd *c;

	be__etcd_opts_default(&o);
	o.endpoints = url;
	o.request_timeout_ms = EH_REQUEST_MS;
	o.limits.max_value = max_value;
	ASSERT_OK(be__etcd_create(&o, &c));
	return c;
}

#define PUT(c, k, v, rev) ASSERT_OK(be__etcd_put(c, k, strlen(k), v, strlen(v), 0, rev))

static void check_kv(const struct be_etcd_kv *kv, const char *k, const char *v)
{
	ASSERT_EQ(kv->key_len, strlen(k));
	ASSERT(!memcmp(kv->key, k, kv->key_len));
	ASSERT_EQ(kv->value_len, strlen(v));
	ASSERT(!memcmp(kv->value, v, kv->value_len));
}

static void test_put_get_delete(struct be_etcd *c)
{
	static const uint8_t bkey[] = { 'b', 0, 0xff, 0xfe, '/', 0 };
	static const uint8_t bval[] = { 0, 1, 2, 0xff, 0x80, 0 };
	struct be_etcd_range r;
	int64_t rev1, rev2, rev3, n;

	PUT(c, "svc/a", "1", &rev1);
	PUT(c, "svc/b", "2", &rev2);
	PUT(c, "svc/c", "", &rev3);
	PUT(c, "svd", "outside", NULL);
	ASSERT_EQ(rev2, rev1 + 1);
	ASSERT_EQ(rev3, rev2 + 1);

	ASSERT_OK(be__etcd_get(c, "svc/b", 5, 0, 0, 0, &r));
	ASSERT_EQ(r.n, 1);
	ASSERT_GE(r.revision, rev3 + 1);
	check_kv(&r.kvs[0], "svc/b", "2");
	ASSERT_EQ(r.kvs[0].mod_revision, rev2);
	ASSERT_EQ(r.kvs[0].create_revision, rev2);
	ASSERT_EQ(r.kvs[0].version, 1);
	ASSERT_EQ(r.kvs[0].lease, 0);
	be__etcd_range_free(&r);

	/* A prefix: exactly its keys, in order; "svd" is not under "svc/". */
	ASSERT_OK(be__etcd_get(c, "svc/", 4, BE_ETCD_PREFIX, 0, 0, &r));
	ASSERT_EQ(r.n, 3);
	ASSERT_EQ(r.count, 3);
	check_kv(&r.kvs[0], "svc/a", "1");
	check_kv(&r.kvs[1], "svc/b", "2");
	check_kv(&r.kvs[2], "svc/c", "");
	be__etcd_range_free(&r);
	ASSERT_OK(be__etcd_get(c, "svc/", 4, BE_ETCD_PREFIX, 2, 0, &r));
	ASSERT_EQ(r.n, 2);
	ASSERT_EQ(r.count, 3);
	ASSERT_EQ(r.more, 1);
	be__etcd_range_free(&r);

	/* Binary bytes round-trip. */
	ASSERT_OK(be__etcd_put(c, bkey, sizeof(bkey), bval, sizeof(bval), 0, NULL));
	ASSERT_OK(be__etcd_get(c, bkey, sizeof(bkey), 0, 0, 0, &r));
	ASSERT_EQ(r.n, 1);
	ASSERT_EQ(r.kvs[0].key_len, sizeof(bkey));
	ASSERT(!memcmp(r.kvs[0].key, bkey, sizeof(bkey)));
	ASSERT_EQ(r.kvs[0].value_len, sizeof(bval));
	ASSERT(!memcmp(r.kvs[0].value, bval, sizeof(bval)));
	be__etcd_range_free(&r);
	/* A prefix ending in 0xff bytes. */
	ASSERT_OK(be__etcd_get(c, bkey, 3, BE_ETCD_PREFIX, 0, 0, &r));
	ASSERT_EQ(r.n, 1);
	be__etcd_range_free(&r);

	/* Nothing there: n = 0, still a revision. */
	ASSERT_OK(be__etcd_get(c, "nothing", 7, 0, 0, 0, &r));
	ASSERT_EQ(r.n, 0);
	ASSERT_GT(r.revision, 0);
	be__etcd_range_free(&r);

	/* Reading the past. */
	PUT(c, "svc/a", "1bis", NULL);
	ASSERT_OK(be__etcd_get(c, "svc/a", 5, 0, 0, rev1, &r));
	check_kv(&r.kvs[0], "svc/a", "1");
	be__etcd_range_free(&r);
	ASSERT_OK(be__etcd_get(c, "svc/a", 5, 0, 0, 0, &r));
	check_kv(&r.kvs[0], "svc/a", "1bis");
	ASSERT_EQ(r.kvs[0].version, 2);
	be__etcd_range_free(&r);
	ASSERT_EQ(be__etcd_get(c, "svc/a", 5, 0, 0, 1000000, &r), -ERANGE);

	ASSERT_OK(be__etcd_delete(c, "svc/a", 5, 0, &n, NULL));
	ASSERT_EQ(n, 1);
	ASSERT_OK(be__etcd_delete(c, "svc/a", 5, 0, &n, NULL));
	ASSERT_EQ(n, 0);
	ASSERT_OK(be__etcd_delete(c, "svc/", 4, BE_ETCD_PREFIX, &n, NULL));
	ASSERT_EQ(n, 2);
	ASSERT_OK(be__etcd_get(c, "sv", 2, BE_ETCD_PREFIX, 0, 0, &r));
	ASSERT_EQ(r.n, 1); /* svd */
	be__etcd_range_free(&r);
}

static void test_cas(struct be_etcd *c)
{
	struct be_etcd_cas op = { .target = BE_ETCD_CREATE, .expect = 0, .value = "v1",
				  .value_len = 2 };
	struct be_etcd_cas_result res;
	struct be_etcd_range r;
	int64_t created;

	/* Create if absent: once. */
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 1);
	created = res.revision;
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 0);
	ASSERT_EQ(res.mod_revision, created);
	ASSERT_EQ(res.version, 1);

	/* On mod_revision: a stale one fails and reports the current. */
	op = (struct be_etcd_cas){ .target = BE_ETCD_MOD, .expect = created, .value = "v2",
				   .value_len = 2 };
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 1);
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 0);
	ASSERT_GT(res.mod_revision, created);
	ASSERT_EQ(res.version, 2);

	/* On version. */
	op = (struct be_etcd_cas){ .target = BE_ETCD_VERSION, .expect = 2, .value = "v3",
				   .value_len = 2 };
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 1);
	ASSERT_OK(be__etcd_get(c, "lock", 4, 0, 0, 0, &r));
	check_kv(&r.kvs[0], "lock", "v3");
	ASSERT_EQ(r.kvs[0].version, 3);

	/* Delete only what we last wrote. */
	op = (struct be_etcd_cas){ .target = BE_ETCD_MOD, .expect = r.kvs[0].mod_revision - 1,
				   .del = 1 };
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 0);
	op.expect = r.kvs[0].mod_revision;
	be__etcd_range_free(&r);
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 1);
	ASSERT_OK(be__etcd_get(c, "lock", 4, 0, 0, 0, &r));
	ASSERT_EQ(r.n, 0);
	be__etcd_range_free(&r);

	/* A compare on an absent key sees zeros. */
	op = (struct be_etcd_cas){ .target = BE_ETCD_VERSION, .expect = 1, .value = "x",
				   .value_len = 1 };
	ASSERT_OK(be__etcd_cas(c, "lock", 4, &op, &res));
	ASSERT_EQ(res.succeeded, 0);
	ASSERT_EQ(res.mod_revision, 0);
	ASSERT_EQ(res.version, 0);
}

static void test_compact(struct be_etcd *c)
{
	struct be_etcd_range r;
	int64_t old, now;

	PUT(c, "cmp", "old", &old);
	PUT(c, "cmp", "new", &now);
	ASSERT_OK(be__etcd_compact(c, now));
	ASSERT_EQ(be__etcd_get(c, "cmp", 3, 0, 0, old, &r), BE_ETCD_ECOMPACTED);
	ASSERT_EQ(be__etcd_compact(c, old), BE_ETCD_ECOMPACTED);
	ASSERT_OK(be__etcd_get(c, "cmp", 3, 0, 0, now, &r));
	check_kv(&r.kvs[0], "cmp", "new");
	be__etcd_range_free(&r);
}

/* A value bigger than the client accepts: refused, counted, no crash. */
static void test_huge_value(struct be_etcd *c, const char *url)
{
	struct be_etcd *small = client(url, 1024);
	struct be_etcd_stats st;
	struct be_etcd_range r;
	size_t n = 256 << 10;
	char *big = malloc(n);

	ASSERT(big);
	memset(big, 'x', n);
	ASSERT_OK(be__etcd_put(c, "big", 3, big, n, 0, NULL));
	ASSERT_OK(be__etcd_get(c, "big", 3, 0, 0, 0, &r));
	ASSERT_EQ(r.kvs[0].value_len, n);
	ASSERT(!memcmp(r.kvs[0].value, big, n));
	be__etcd_range_free(&r);

	ASSERT_EQ(be__etcd_get(small, "big", 3, 0, 0, 0, &r), -EBADMSG);
	ASSERT(strstr(be__etcd_last_error(small), "value"));
	ASSERT_EQ(r.n, 0);
	be__etcd_stats(small, &st);
	ASSERT_EQ(st.refused, 1);
	ASSERT_EQ(st.failed, 1);
	ASSERT_EQ(st.requests, 1);
	be__etcd_destroy(small);
	free(big);
}

static void test_errors(struct be_etcd *c, const char *url)
{
	struct be_etcd_opts o;
	struct be_etcd *bad;
	struct be_etcd_range r;

	/* A lease that does not exist. */
	ASSERT_EQ(be__etcd_put(c, "k", 1, "v", 1, 12345, NULL), -ENOENT);
	ASSERT(strstr(be__etcd_last_error(c), "lease"));
	ASSERT_EQ(be__etcd_put(c, "", 0, "v", 1, 0, NULL), -EINVAL);

	/* Bad endpoints. */
	be__etcd_opts_default(&o);
	o.endpoints = "ftp://127.0.0.1:1";
	ASSERT_EQ(be__etcd_create(&o, &bad), -EINVAL);
	o.endpoints = "";
	ASSERT_EQ(be__etcd_create(&o, &bad), -EINVAL);

	/* Nothing listens on port 1; the second endpoint is etcd, and the
	 * client moves there after the first fails. */
	{
		char list[160];

		snprintf(list, sizeof(list), "http://127.0.0.1:1,%s", url);
		o.endpoints = list;
		ASSERT_OK(be__etcd_create(&o, &bad));
		ASSERT_EQ(be__etcd_get(bad, "k", 1, 0, 0, 0, &r), -ECONNREFUSED);
		ASSERT_OK(be__etcd_get(bad, "k", 1, 0, 0, 0, &r));
		be__etcd_range_free(&r);
		be__etcd_destroy(bad);
	}
}

int main(void)
{
	struct eh *h = eh_start(1);
	struct be_etcd *c = client(eh_url(h, 0), 0);

	test_put_get_delete(c);
	test_cas(c);
	test_compact(c);
	test_huge_value(c, eh_url(h, 0));
	test_errors(c, eh_url(h, 0));
	eh_client_close(c);
	eh_stop(h);
	return 0;
}
