/*
 * Check the discovery thread end to end against a real etcd, with two
 * workers running on library threads: both receive the same snapshots in
 * order through be_worker_call(); a replica that registers appears, one
 * written by another client appears; when etcd is killed the workers are
 * told the membership is stale and keep every member; when etcd is back
 * they get a fresh snapshot with the same members (the registration's
 * lease survived through its keepalives); a replica that shuts down
 * cleanly disappears at once (its lease revoked); a replica process
 * killed with kill -9 disappears once its lease expires (a bounded wait).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "discovery/disc.h"
#include "etcd_harness.h"
#include "test.h"

#define WAIT_S 60
#define MAXK 8

/* What one worker was told last. */
struct rec {
	pthread_mutex_t mu;
	uint64_t seq;
	uint64_t views;
	int stale;
	size_t n;
	char keys[MAXK][32];
};

static void on_view(struct be_worker *w, const struct be_disc_view *v, void *arg)
{
	struct rec *r = arg;
	size_t i;

	pthread_mutex_lock(&r->mu);
	ASSERT_GT(v->seq, r->seq); /* in order, each once */
	r->seq = v->seq;
	r->views++;
	r->stale = v->stale;
	ASSERT_LE(v->n, MAXK);
	r->n = v->n;
	for (i = 0; i < v->n; i++) {
		ASSERT_LT(v->m[i].key_len, 32);
		memcpy(r->keys[i], v->m[i].key, v->m[i].key_len + 1);
		if (i)
			ASSERT_LT(strcmp(r->keys[i - 1], r->keys[i]), 0);
	}
	pthread_mutex_unlock(&r->mu);
}

/* Whether @r's last view is @stale with exactly the keys in @want
 * (comma-separated, ascending). */
static int rec_is(struct rec *r, int stale, const char *want)
{
	char got[MAXK * 33] = "";
	size_t i;
	int ok;

	pthread_mutex_lock(&r->mu);
	for (i = 0; i < r->n; i++) {
		if (i)
			strcat(got, ",");
		strcat(got, r->keys[i]);
	}
	ok = r->views && r->stale == stale && !strcmp(got, want);
	pthread_mutex_unlock(&r->mu);
	return ok;
}

static void wait_both(struct rec *a, struct rec *b, int stale, const char *want)
{
	time_t until = time(NULL) + WAIT_S;

	while (!rec_is(a, stale, want) || !rec_is(b, stale, want)) {
		if (time(NULL) >= until)
			TEST_FAIL("workers never saw stale=%d [%s] (a: %d/%zu, b: %d/%zu)", stale,
				  want, a->stale, a->n, b->stale, b->n);
		usleep(50000);
	}
}

static struct be_disc *disc(const char *url, int64_t ttl)
{
	struct be_disc_opts o;
	struct be_disc *d;

	be__disc_opts_default(&o);
	o.etcd.endpoints = url;
	o.prefix = "svc/";
	o.prefix_len = 4;
	o.ttl_s = ttl;
	ASSERT_OK(be__disc_create(&o, &d));
	return d;
}

/* A replica in its own process, forked while this one has no threads yet
 * (a child must not start threads after a multi-threaded fork). It
 * registers @key when told to (replica_go()), then waits to be killed. */
struct replica {
	pid_t pid;
	int go, ready;
};

static struct replica replica_fork(const char *url, const char *key)
{
	struct replica r;
	int go[2], ready[2];
	char c;

	ASSERT(pipe(go) == 0 && pipe(ready) == 0);
	fflush(NULL);
	r.pid = fork();
	ASSERT(r.pid >= 0);
	if (!r.pid) {
		struct be_disc_stats st;
		struct be_disc *d;

		close(go[1]);
		close(ready[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(0);
		d = disc(url, 2);
		ASSERT_OK(be__disc_register(d, key, strlen(key), "rec", 3));
		ASSERT_OK(be__disc_start(d));
		do {
			usleep(20000);
			be__disc_stats(d, &st);
		} while (!st.registrations);
		ASSERT(write(ready[1], "r", 1) == 1);
		for (;;)
			pause();
	}
	close(go[0]);
	close(ready[1]);
	r.go = go[1];
	r.ready = ready[0];
	return r;
}

/* Let the replica register, and wait until it has. */
static void replica_go(struct replica *r)
{
	char c;

	ASSERT(write(r->go, "g", 1) == 1);
	ASSERT(read(r->ready, &c, 1) == 1);
}

int main(void)
{
	struct eh *h = eh_start(1);
	const char *url = eh_url(h, 0);
	struct rec ra = { .mu = PTHREAD_MUTEX_INITIALIZER }, rb = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct be_worker *wa, *wb;
	struct be_disc *client, *r1;
	struct be_disc_stats st;
	struct be_etcd *plain;
	struct replica r3 = replica_fork(url, "svc/r3");
	struct be_ctx *ctx;

	ASSERT_OK(be_ctx_create(NULL, &ctx));
	ASSERT_OK(be_worker_create(ctx, &wa));
	ASSERT_OK(be_worker_create(ctx, &wb));
	ASSERT_OK(be_worker_start(wa));
	ASSERT_OK(be_worker_start(wb));
	plain = eh_client(h, 0);

	/* A client of the prefix: first an empty membership. */
	client = disc(url, 3);
	ASSERT_OK(be__disc_subscribe(client, wa, on_view, &ra));
	ASSERT_OK(be__disc_subscribe(client, wb, on_view, &rb));
	ASSERT_OK(be__disc_start(client));
	ASSERT_EQ(be__disc_subscribe(client, wa, on_view, &ra), -EBUSY);
	wait_both(&ra, &rb, 0, "");

	/* A replica registers; another record is written by hand. */
	r1 = disc(url, 2);
	ASSERT_OK(be__disc_register(r1, "svc/r1", 6, "{\"v\":1}", 7));
	ASSERT_OK(be__disc_start(r1));
	wait_both(&ra, &rb, 0, "svc/r1");
	ASSERT_OK(be__etcd_put(plain, "svc/r2", 6, "{}", 2, 0, NULL));
	ASSERT_OK(be__etcd_put(plain, "other", 5, "{}", 2, 0, NULL));
	wait_both(&ra, &rb, 0, "svc/r1,svc/r2");

	/* etcd dies: stale, nobody removed. */
	eh_kill9(h, 0);
	wait_both(&ra, &rb, 1, "svc/r1,svc/r2");
	/* etcd returns: fresh, the same members. */
	eh_restart(h, 0, 1);
	wait_both(&ra, &rb, 0, "svc/r1,svc/r2");

	/* A replica process killed with kill -9: gone after its TTL. */
	replica_go(&r3);
	wait_both(&ra, &rb, 0, "svc/r1,svc/r2,svc/r3");
	kill(r3.pid, SIGKILL);
	waitpid(r3.pid, NULL, 0);
	wait_both(&ra, &rb, 0, "svc/r1,svc/r2");

	/* A clean shutdown deregisters at once. */
	be__disc_destroy(r1);
	wait_both(&ra, &rb, 0, "svc/r2");

	be__disc_stats(client, &st);
	ASSERT_GE(st.outages, 1);
	ASSERT_GE(st.reads, 2);
	ASSERT_EQ(st.refused, 0);
	be__disc_destroy(client);
	ASSERT_OK(be_worker_stop(wa));
	ASSERT_OK(be_worker_stop(wb));
	be_worker_destroy(wa);
	be_worker_destroy(wb);
	be_ctx_destroy(ctx);
	be__etcd_destroy(plain);
	eh_stop(h);
	return 0;
}
