/*
 * Check leases against a real etcd: a key put with a 2 s lease stays while
 * the lease is kept alive (each keepalive restarts the full TTL), and
 * disappears once keepalives stop (a bounded wait for the condition, no
 * assertion on when); the lease then reports -ENOENT to keepalive and to
 * the TTL query. Revoking a lease deletes its key at once, and revoking it
 * again is -ENOENT.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"

#define TTL 2
#define GONE_WAIT_S 60 /* far above TTL: a bound, not an expectation */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int key_count(struct be_etcd *c, const char *k)
{
	struct be_etcd_range r;
	int n;

	ASSERT_OK(be__etcd_get(c, k, strlen(k), 0, 0, 0, &r));
	n = (int)r.n;
	if (n)
		ASSERT_GT(r.kvs[0].lease, 0);
	be__etcd_range_free(&r);
	return n;
}

static void test_expiry(struct be_etcd *c)
{
	int64_t id, granted, ttl, g;
	time_t until;
	int i;

	ASSERT_OK(be__etcd_lease_grant(c, TTL, &id, &granted));
	ASSERT_GT(id, 0);
	ASSERT_GE(granted, TTL);
	ASSERT_OK(be__etcd_put(c, "svc/r1", 6, "rec", 3, id, NULL));
	ASSERT_EQ(key_count(c, "svc/r1"), 1);

	/* Every keepalive restarts the whole TTL. */
	for (i = 0; i < 4; i++) {
		ASSERT_OK(be__etcd_lease_keepalive(c, id, &ttl));
		ASSERT_EQ(ttl, granted);
		ASSERT_OK(be__etcd_lease_ttl(c, id, &ttl, &g));
		ASSERT_EQ(g, granted);
		ASSERT_LE(ttl, granted);
		ASSERT_EQ(key_count(c, "svc/r1"), 1);
		sleep_ms(granted * 1000 / 3);
	}

	/* Stop: the key goes, within a bound. */
	until = time(NULL) + GONE_WAIT_S;
	while (key_count(c, "svc/r1")) {
		ASSERT(time(NULL) < until);
		sleep_ms(200);
	}
	ASSERT_EQ(be__etcd_lease_keepalive(c, id, &ttl), -ENOENT);
	ASSERT_EQ(be__etcd_lease_ttl(c, id, &ttl, &g), -ENOENT);
	ASSERT_EQ(be__etcd_lease_revoke(c, id), -ENOENT);
	/* A put on the dead lease is refused by etcd. */
	ASSERT_EQ(be__etcd_put(c, "svc/r1", 6, "rec", 3, id, NULL), -ENOENT);
}

static void test_revoke(struct be_etcd *c)
{
	int64_t id, ttl;

	ASSERT_OK(be__etcd_lease_grant(c, 30, &id, NULL));
	ASSERT_OK(be__etcd_put(c, "svc/r2", 6, "rec", 3, id, NULL));
	ASSERT_OK(be__etcd_put(c, "svc/r3", 6, "rec", 3, id, NULL));
	ASSERT_OK(be__etcd_lease_ttl(c, id, &ttl, NULL));
	ASSERT_GT(ttl, 0);
	ASSERT_OK(be__etcd_lease_revoke(c, id));
	ASSERT_EQ(key_count(c, "svc/r2"), 0);
	ASSERT_EQ(key_count(c, "svc/r3"), 0);
	ASSERT_EQ(be__etcd_lease_revoke(c, id), -ENOENT);
	ASSERT_EQ(be__etcd_lease_grant(c, 0, &id, NULL), -EINVAL);
}

int main(void)
{
	struct eh *h = eh_start(1);
	struct be_etcd *c = eh_client(h, 0);

	test_revoke(c);
	test_expiry(c);
	eh_client_close(c);
	eh_stop(h);
	return 0;
}
