/*
 * Check that a watch from a revision sees every change under its prefix,
 * in order, with no gap and no repeat, across a kill -9 and restart of
 * etcd: the watch ends with an error when etcd dies, changes made while no
 * watch runs (after the restart) are not lost, and a new watch from
 * be__etcd_watch_next_rev() continues exactly where the first stopped.
 * Changes outside the prefix are never reported.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"

#define MAX_EV 64

/* Events in order: those the watch delivered, and those the test wrote
 * (the expected ones). */
struct events {
	int n;
	int64_t rev[MAX_EV];
	int del[MAX_EV];
	char key[MAX_EV][16];
	char val[MAX_EV][16];
};

static void add(struct events *e, int64_t rev, int del, const char *k, size_t klen,
		const char *v, size_t vlen)
{
	ASSERT_LT(e->n, MAX_EV);
	ASSERT_LT(klen, 16);
	ASSERT_LT(vlen, 16);
	e->rev[e->n] = rev;
	e->del[e->n] = del;
	memcpy(e->key[e->n], k, klen);
	e->key[e->n][klen] = '\0';
	memcpy(e->val[e->n], v, vlen);
	e->val[e->n][vlen] = '\0';
	e->n++;
}

static void on_events(void *arg, const struct be_etcd_event *ev, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		add(arg, ev[i].kv.mod_revision, ev[i].type == BE_ETCD_EV_DELETE,
		    (const char *)ev[i].kv.key, ev[i].kv.key_len, (const char *)ev[i].kv.value,
		    ev[i].kv.value_len);
}

static void put(struct be_etcd *c, struct events *w, const char *k, const char *v)
{
	int64_t rev;

	ASSERT_OK(be__etcd_put(c, k, strlen(k), v, strlen(v), 0, &rev));
	if (strncmp(k, "svc/", 4))
		return; /* outside the prefix: must not be seen */
	add(w, rev, 0, k, strlen(k), v, strlen(v));
}

static void del(struct be_etcd *c, struct events *w, const char *k)
{
	int64_t rev, n;

	ASSERT_OK(be__etcd_delete(c, k, strlen(k), 0, &n, &rev));
	ASSERT_EQ(n, 1);
	add(w, rev, 1, k, strlen(k), "", 0);
}

int main(void)
{
	struct eh *h = eh_start(1);
	struct be_etcd *c = eh_client(h, 0);
	struct be_etcd_watch_opts wo = { 0 };
	struct be_etcd_watch *wt;
	struct be_etcd_range r;
	struct events w = { 0 };
	struct events s = { 0 };
	int64_t next;
	int i, rc;

	/* What is there before: read it, then watch from the read's revision. */
	put(c, &w, "svc/a", "0");
	ASSERT_OK(be__etcd_get(c, "svc/", 4, BE_ETCD_PREFIX, 0, 0, &r));
	ASSERT_EQ(r.n, 1);
	wo.start_revision = r.revision + 1;
	be__etcd_range_free(&r);
	w.n = 0; /* the read covered it */

	ASSERT_OK(be__etcd_watch_create(c, "svc/", 4, BE_ETCD_PREFIX, &wo, on_events, &s, &wt));
	put(c, &w, "svc/b", "1");
	put(c, &w, "other", "x");
	put(c, &w, "svc/a", "2");
	del(c, &w, "svc/b");
	put(c, &w, "svc/c", "3");
	eh_watch_until(wt, &s.n, w.n);

	/* kill -9: the watch ends with an error, within its bound. */
	eh_kill9(h, 0);
	rc = eh_watch_end(wt);
	ASSERT(rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -ECONNREFUSED);
	next = be__etcd_watch_next_rev(wt);
	ASSERT_EQ(next, w.rev[w.n - 1] + 1);
	be__etcd_watch_destroy(wt);

	/* Restart on the same data; write while nobody watches. */
	eh_restart(h, 0, 1);
	put(c, &w, "svc/d", "4");
	put(c, &w, "svc/a", "5");
	del(c, &w, "svc/c");

	/* Resume: nothing missed, nothing repeated. */
	wo.start_revision = next;
	ASSERT_OK(be__etcd_watch_create(c, "svc/", 4, BE_ETCD_PREFIX, &wo, on_events, &s, &wt));
	put(c, &w, "svc/e", "6");
	put(c, &w, "other", "y");
	eh_watch_until(wt, &s.n, w.n);
	/* Give an extra event or a repeat the chance to show. */
	ASSERT_EQ(be__etcd_watch_run(wt, 300), 0);
	be__etcd_watch_destroy(wt);

	ASSERT_EQ(s.n, w.n);
	for (i = 0; i < w.n; i++) {
		ASSERT_EQ(s.rev[i], w.rev[i]);
		ASSERT_EQ(s.del[i], w.del[i]);
		ASSERT(!strcmp(s.key[i], w.key[i]));
		ASSERT(!strcmp(s.val[i], w.val[i]));
		if (i)
			ASSERT_GT(s.rev[i], s.rev[i - 1]);
	}
	eh_client_close(c);
	eh_stop(h);
	return 0;
}
