/*
 * Check that be-ps registers in etcd and leaves it cleanly: a primary and
 * a serving replica of two shards, each started with --register
 * etcd://.../PREFIX, write their records (the primary 4 keys, the
 * replica 2) and a client that knows them only through that registry
 * fetches from both. The replica is then stopped with SIGTERM while
 * fetches stream: it drains (new requests refused with -ESHUTDOWN and
 * retried on the primary, those in flight finished), deregisters and
 * exits 0. Its keys are gone the moment it has exited, not one TTL later
 * (the lease was revoked, not left to expire), and no fetch failed.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "discovery/etcd.h"
#include "discovery/etcd_harness.h"
#include "pscluster.h"

static const char *conf = "shards 2\n"
			  "table t dim=4 optimizer=sgd lr=0.5 init=zeros\n";

#define PFX "/be-test/ps/"
#define NKEY 64

static struct pc c;

/* Every row is still its initial zeros: nothing is pushed here. */
static void check(const struct pc_fetch_slot *q, unsigned int nkey)
{
	unsigned int i;

	for (i = 0; i < nkey * 4; i++)
		if (q->v[i] != 0.0f)
			TEST_FAIL("row value %g, want 0", q->v[i]);
}

static uint64_t key(struct pc_fetches *f)
{
	return pt_rand(&f->rng);
}

/* Keys under the prefix now, and how many of them name @replica. */
static int64_t keys_now(struct be_etcd *ec, const char *replica, int64_t *of_replica)
{
	struct be_etcd_range r;
	int64_t n;
	size_t i;

	ASSERT_OK(be__etcd_get(ec, PFX, strlen(PFX), BE_ETCD_PREFIX, 0, 0, &r));
	n = (int64_t)r.n;
	*of_replica = 0;
	for (i = 0; i < r.n; i++)
		if (strstr((const char *)r.kvs[i].key, replica))
			++*of_replica;
	be__etcd_range_free(&r);
	return n;
}

int main(int argc, char **argv)
{
	struct pc_server srv[2];
	struct be_rpc_record recs[4];
	struct be_etcd *ec;
	char uri[256];
	const char *pargs[] = { "--register", uri, "--name", "p0", NULL };
	const char *rargs[] = { "--register", uri, "--name", "r0", NULL };
	int64_t n, of_r0;
	uint64_t start;
	struct eh *h;
	struct pc_fetches f = { .c = &c, .nkey = NKEY, .key = key, .check = check, .rng = 5 };
	int st;
	pid_t r;

	h = eh_start(1); /* forks: before any context */
	ec = eh_client(h, 0);
	snprintf(uri, sizeof(uri), "etcd://%s" PFX, eh_url(h, 0) + strlen("http://"));
	pc_init(&c, argc, argv, conf);
	pc_server_start_args(&c, &srv[0], 0, false, "p0", pargs);
	pc_server_start_args(&c, &srv[1], 0, true, "r0", rargs);

	/* The client knows the servers only from etcd. */
	ASSERT_OK(be_ctx_create(NULL, &c.ctx));
	ASSERT_OK(be_worker_create(c.ctx, &c.w));
	ASSERT_OK(be_rpc_create(c.w, NULL, &c.rpc));
	ASSERT_OK(be_rpc_naming_open(uri, 20000, &c.naming));
	for (start = be__now_ns();;) {
		if (be_rpc_naming_get(c.naming, "be.ps.0", recs, 4) == 2 &&
		    be_rpc_naming_get(c.naming, "be.ps.1", recs, 4) == 2 &&
		    be_rpc_naming_get(c.naming, "be.ps.0.primary", recs, 4) == 1)
			break;
		if (be__now_ns() - start > EH_WAIT_S * 1000000000ull)
			TEST_FAIL("the servers' records never reached the client");
		usleep(10000);
	}
	n = keys_now(ec, "/r0", &of_r0);
	ASSERT_EQ(n, 6);
	ASSERT_EQ(of_r0, 2);
	ASSERT_OK(be_ps_create(c.rpc, c.config, c.naming, "be.ps", &c.ps));
	pc_fetches_run(&f, 300);
	ASSERT_EQ(f.failed, 0);

	/* A clean stop of the replica while fetches stream. */
	ASSERT_OK(kill(srv[1].pid, SIGTERM));
	for (start = be__now_ns();;) {
		pc_fetches_fill(&f);
		ASSERT(be_worker_wait(c.w, 10) >= 0);
		r = waitpid(srv[1].pid, &st, WNOHANG);
		ASSERT(r >= 0);
		if (r == srv[1].pid)
			break;
		if (be__now_ns() - start > EH_WAIT_S * 1000000000ull)
			TEST_FAIL("the replica did not stop");
	}
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
	/* Deregistered before it exited: no waiting for the lease. */
	n = keys_now(ec, "/r0", &of_r0);
	ASSERT_EQ(of_r0, 0);
	ASSERT_EQ(n, 4);
	pc_fetches_run(&f, f.done + 300);
	pc_fetches_finish(&f);

	pc_server_stop(&c, &srv[0]);
	be_ps_destroy(c.ps);
	be_rpc_destroy(c.rpc);
	be_rpc_naming_destroy(c.naming);
	be_worker_destroy(c.w);
	c.w = NULL;
	be_ctx_destroy(c.ctx);
	be__etcd_destroy(ec);
	eh_stop(h);
	pc_fini(&c);
	return 0;
}
