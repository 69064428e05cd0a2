/*
 * Check every way a watch ends, against a real etcd, and that none of them
 * blocks: a watch from a compacted revision ends with BE_ETCD_ECOMPACTED
 * and names the oldest revision kept, after which a read and a watch from
 * the read's revision carry on; a quiet watch stays open past its idle
 * bound because progress requests are answered; a watch on a frozen etcd
 * (SIGSTOP) ends with -ETIMEDOUT; be__etcd_watch_cancel() from another
 * thread ends a watch blocked in be__etcd_watch_run() with -ECANCELED.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"


static int n_events;

static void test_compacted(struct be_etcd *c)
{
	struct be_etcd_watch_opts o = { 0 };
	struct be_etcd_watch *w;
	int64_t first, last;

	ASSERT_OK(be__etcd_put(c, "svc/a", 5, "1", 1, 0, &first));
	ASSERT_OK(be__etcd_put(c, "svc/a", 5, "2", 1, 0, NULL));
	ASSERT_OK(be__etcd_put(c, "svc/a", 5, "3", 1, 0, &last));
	ASSERT_OK(be__etcd_compact(c, last));

	o.start_revision = first;
	ASSERT_OK(be__etcd_watch_create(c, "svc/", 4, BE_ETCD_PREFIX, &o, eh_count_events,
					&n_events, &w));
	ASSERT_EQ(eh_watch_end(w), BE_ETCD_ECOMPACTED);
	ASSERT_EQ(be__etcd_watch_compact_rev(w), last);
	ASSERT(strstr(be__etcd_watch_error(w), "compacted"));
	ASSERT_EQ(n_events, 0);
	/* An ended watch keeps saying so. */
	ASSERT_EQ(be__etcd_watch_run(w, 0), BE_ETCD_ECOMPACTED);
	be__etcd_watch_destroy(w);

	/* What the caller does: read again, watch from there. */
	w = eh_watch_next(c, "svc/", &o, &n_events);
	ASSERT_OK(be__etcd_put(c, "svc/b", 5, "4", 1, 0, NULL));
	eh_watch_until(w, &n_events, 1);
	ASSERT_EQ(n_events, 1);
	be__etcd_watch_destroy(w);
}

/* Quiet but alive: open well past idle_ms. Frozen: ends. */
static void test_idle(struct eh *h, struct be_etcd *c)
{
	struct be_etcd_watch_opts o = { .idle_ms = 3000 };
	struct be_etcd_watch *w;
	struct be_etcd_stats st0, st1;
	time_t until;

	be__etcd_stats(c, &st0);
	ASSERT_OK(be__etcd_watch_create(c, "quiet/", 6, BE_ETCD_PREFIX, &o, eh_count_events,
					&n_events, &w));
	until = time(NULL) + 10; /* over three idle bounds */
	while (time(NULL) < until)
		ASSERT_EQ(be__etcd_watch_run(w, 500), 0);
	be__etcd_stats(c, &st1);
	/* "created" and at least one answered progress request. */
	ASSERT_GE(st1.watch_msgs - st0.watch_msgs, 2);

	eh_signal(h, 0, SIGSTOP);
	ASSERT_EQ(eh_watch_end(w), -ETIMEDOUT);
	eh_signal(h, 0, SIGCONT);
	be__etcd_watch_destroy(w);
}

static void *canceler(void *arg)
{
	usleep(300000);
	be__etcd_watch_cancel(arg);
	return NULL;
}

static void test_cancel(struct be_etcd *c)
{
	struct be_etcd_watch_opts o = { 0 };
	struct be_etcd_watch *w;
	pthread_t t;

	ASSERT_OK(be__etcd_watch_create(c, "svc/", 4, BE_ETCD_PREFIX, &o, eh_count_events,
					&n_events, &w));
	ASSERT_EQ(pthread_create(&t, NULL, canceler, w), 0);
	/* One long run: only the cancel can end it before its timeout. */
	ASSERT_EQ(be__etcd_watch_run(w, EH_WAIT_S * 1000), -ECANCELED);
	pthread_join(t, NULL);
	be__etcd_watch_destroy(w);
}

int main(void)
{
	struct eh *h = eh_start(1);
	struct be_etcd *c = eh_client(h, 0);
	struct be_etcd_stats st;

	test_compacted(c);
	test_cancel(c);
	test_idle(h, c);
	be__etcd_stats(c, &st);
	ASSERT_EQ(st.watches, 4);
	eh_client_close(c);
	eh_stop(h);
	return 0;
}
