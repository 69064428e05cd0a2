/*
 * Check the has-leader requirement against a real two-member etcd: when
 * one member is killed the other loses its leader, and a watch on it ends
 * with BE_ETCD_ENOLEADER (instead of hanging on a member that can no
 * longer see changes), a new watch and a read are refused the same way at
 * once; once the killed member is back, reads and watches work again.
 * This is what the gateway's "Grpc-Metadata-hasleader: true" header does
 * with Debian's etcd 3.4: without it the same watch stays open, silent.
 */
#include <errno.h>
#include <string.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"


int main(void)
{
	struct eh *h = eh_start(2);
	struct be_etcd_watch_opts wo = { .idle_ms = 120000 }; /* only has-leader may end it */
	struct be_etcd_watch *w;
	struct be_etcd *c = eh_client(h, 0);
	struct be_etcd_range r;
	int64_t rev;
	int n = 0;

	ASSERT_OK(be__etcd_put(c, "svc/a", 5, "1", 1, 0, &rev));
	wo.start_revision = rev + 1;
	ASSERT_OK(be__etcd_watch_create(c, "svc/", 4, BE_ETCD_PREFIX, &wo, eh_count_events, &n, &w));
	ASSERT_OK(be__etcd_put(c, "svc/b", 5, "2", 1, 0, NULL));
	eh_watch_until(w, &n, 1);

	/* Member 1 dies: member 0 loses its leader; the watch ends. */
	eh_kill9(h, 1);
	ASSERT_EQ(eh_watch_end(w), BE_ETCD_ENOLEADER);
	ASSERT(strstr(be__etcd_watch_error(w), "no leader"));
	be__etcd_watch_destroy(w);

	/* New requests are refused at once, not after a timeout. */
	ASSERT_EQ(be__etcd_get(c, "svc/", 4, BE_ETCD_PREFIX, 0, 0, &r), BE_ETCD_ENOLEADER);
	ASSERT_OK(be__etcd_watch_create(c, "svc/", 4, BE_ETCD_PREFIX, &wo, eh_count_events, &n, &w));
	ASSERT_EQ(eh_watch_end(w), BE_ETCD_ENOLEADER);
	be__etcd_watch_destroy(w);

	/* Member 1 returns: a leader again. */
	eh_restart(h, 1, 0);
	ASSERT(eh_healthy(h, 0, EH_WAIT_S * 1000));
	ASSERT_OK(be__etcd_get(c, "svc/", 4, BE_ETCD_PREFIX, 0, 0, &r));
	ASSERT_EQ(r.n, 2);
	be__etcd_range_free(&r);
	be__etcd_destroy(c);
	eh_stop(h);
	return 0;
}
