/*
 * Check that be__etcd_watch_run() hands events on at once: a run with a
 * timeout far beyond the test's own (ctest's 180 s) returns as soon as
 * the pass that delivered a put is over, so that the discovery thread
 * publishes a change when it happens, not at the end of its pass. Before,
 * a new replica waited up to a second for its first call. Without the
 * early return this test runs into ctest's timeout.
 */
#include <string.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"

#define LONG_RUN_MS (600 * 1000) /* ten minutes: ctest ends the test first */

static int n_events;

int main(void)
{
	struct eh *h = eh_start(1);
	struct be_etcd *c = eh_client(h, 0);
	struct be_etcd_watch_opts o = { 0 };
	struct be_etcd_watch *w;
	int i;

	w = eh_watch_next(c, "svc/", &o, &n_events);
	for (i = 1; i <= 3; i++) {
		ASSERT_OK(be__etcd_put(c, "svc/a", 5, "v", 1, 0, NULL));
		while (n_events < i)
			ASSERT_EQ(be__etcd_watch_run(w, LONG_RUN_MS), 0);
		ASSERT_EQ(n_events, i);
	}
	be__etcd_watch_destroy(w);
	be__etcd_destroy(c);
	eh_stop(h);
	return 0;
}
