/*
 * Check the etcd:// naming backend against a real etcd (the harness of
 * test/discovery starts one on loopback ports): a channel watching a
 * source opened on etcd://HOST:PORT/PREFIX follows the records written
 * under the prefix, one per key in the static file's format.
 *
 * - open waits for the first membership: one replica, calls reach it;
 * - a second key: the channel grows to two replicas, both take calls;
 * - a key whose value is not a record, and a key naming a replica given
 *   by an earlier key: refused alone and counted, the set stays;
 * - a key deleted: its replica takes no more calls;
 * - a replica set to draining: it takes no new calls;
 * - etcd killed: the channel keeps the last membership and calls go on;
 * - bad uris are refused.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "discovery/etcd.h"
#include "discovery/etcd_harness.h"
#include "rtest.h"

#define NS 2
#define PFX "/be-test/naming/"

static struct be_worker *ws[NS + 1];
static struct rt_server srv[NS];
/* @n echo calls on @ch, none failing; the echoes of each server. */
static void stream(struct be_rpc_chan *ch, int n, uint64_t per[NS])
{
	rt_echo_calls(ch, ws, NS + 1, srv, NS, n, per);
}

/* Stream calls until server @i takes them (@on) or not (!@on); fails
 * after a while (the record has not reached the channel). */
static void until_serving(struct be_rpc_chan *ch, int i, bool on)
{
	uint64_t per[NS];
	int k;

	for (k = 0; k < 2000; k++) {
		stream(ch, 20, per);
		if ((per[i] > 0) == on)
			return;
		rt_pump_ms(ws, NS + 1, 10);
	}
	TEST_FAIL("server %d still %s calls", i, on ? "takes no" : "takes");
}

static void put(struct be_etcd *c, const char *key, const char *val)
{
	ASSERT_OK(be__etcd_put(c, key, strlen(key), val, strlen(val), 0, NULL));
}

static void put_rec(struct be_etcd *c, const char *name, int i, const char *extra)
{
	char key[128], val[256];

	snprintf(key, sizeof(key), PFX "%s", name);
	snprintf(val, sizeof(val), "ps.embed %s %saddr=%s", name, extra, srv[i].addr);
	put(c, key, val);
}

int main(int argc, char **argv)
{
	struct be_rpc_naming_stats ns;
	struct be_rpc_naming *nm;
	struct be_rpc_chan *ch;
	struct rt_client cli;
	struct be_ctx *ctx;
	struct be_etcd *c;
	uint64_t per[NS];
	char uri[256];
	struct eh *h;
	struct rt t;
	int i;

	rt_init(&t, argc, argv);
	h = eh_start(1); /* forks: before any context */
	c = eh_client(h, 0);
	snprintf(uri, sizeof(uri), "etcd://%s" PFX, eh_url(h, 0) + strlen("http://"));

	rt_fleet_start(&t, &ctx, srv, NS, &cli, ws);

	put_rec(c, "r0", 0, "");
	put(c, "/be-test/other", "ps.embed rX addr=tcp://127.0.0.1:1"); /* outside the prefix */
	ASSERT_OK(be_rpc_naming_open(uri, 20000, &nm));
	be_rpc_naming_stats(nm, &ns);
	ASSERT_EQ(ns.records, 1);
	ASSERT_EQ(ns.errors, 0);
	ASSERT_OK(be_rpc_chan_watch(cli.rpc, nm, "ps.embed", BE_RPC_ANY_SHARD, &ch));
	ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 1);
	stream(ch, 50, per);
	ASSERT_EQ(per[0], 50);

	/* A second replica. */
	put_rec(c, "r1", 1, "");
	ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 2);
	stream(ch, 200, per);
	ASSERT_GT(per[0], 0);
	ASSERT_GT(per[1], 0);

	/* Refused alone: a value that is not a record, a replica twice. */
	put(c, PFX "r2", "ps.embed r2 shards=oops addr=tcp://127.0.0.1:1");
	ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 2 || rt_naming_errors(nm) < 1);
	put(c, PFX "zz", "ps.embed r0 addr=tcp://127.0.0.1:1");
	/* r2 again with the new snapshot, and zz */
	ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 2 || rt_naming_errors(nm) < 3);
	be_rpc_naming_stats(nm, &ns);
	ASSERT_EQ(ns.records, 2);
	stream(ch, 100, per);
	ASSERT_GT(per[0], 0);
	ASSERT_GT(per[1], 0);
	ASSERT_OK(be__etcd_delete(c, PFX "r2", strlen(PFX "r2"), 0, NULL, NULL));
	ASSERT_OK(be__etcd_delete(c, PFX "zz", strlen(PFX "zz"), 0, NULL, NULL));

	/* r0 deleted: no more calls on it. */
	ASSERT_OK(be__etcd_delete(c, PFX "r0", strlen(PFX "r0"), 0, NULL, NULL));
	ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 1);
	stream(ch, 100, per);
	ASSERT_EQ(per[0], 0);
	ASSERT_EQ(per[1], 100);

	/* r0 back, r1 draining: new calls go to r0 only. */
	put_rec(c, "r0", 0, "");
	put_rec(c, "r1", 1, "state=draining ");
	until_serving(ch, 1, false);
	stream(ch, 100, per);
	ASSERT_EQ(per[0], 100);
	put_rec(c, "r1", 1, "");
	until_serving(ch, 1, true);

	/* etcd gone: the membership stays, calls go on to both. */
	be_rpc_naming_stats(nm, &ns);
	eh_kill9(h, 0);
	rt_pump_ms(ws, NS + 1, 300);
	stream(ch, 200, per);
	ASSERT_GT(per[0], 0);
	ASSERT_GT(per[1], 0);
	ASSERT_EQ(rt_chan_replicas(ch), 2);
	ASSERT_GE(rt_naming_errors(nm), ns.errors);
	be_rpc_naming_stats(nm, &ns);
	ASSERT_EQ(ns.records, 2);
	fprintf(stderr, "etcd naming: %llu updates, %llu errors, %llu records\n",
		(unsigned long long)ns.updates, (unsigned long long)ns.errors,
		(unsigned long long)ns.records);

	be_rpc_chan_destroy(ch);
	be_rpc_naming_destroy(nm);
	ASSERT_EQ(be_rpc_naming_open("etcd://127.0.0.1:2379", 0, &nm), -EINVAL);
	ASSERT_EQ(be_rpc_naming_open("etcd://127.0.0.1:2379/", 0, &nm), -EINVAL);
	ASSERT_EQ(be_rpc_naming_open("etcd:///be", 0, &nm), -EINVAL);
	ASSERT_EQ(be_rpc_naming_open("etcd://nohostport/be", 0, &nm), -EINVAL);
	rt_client_stop(&cli);
	for (i = 0; i < NS; i++)
		rt_server_stop(&srv[i]);
	be_ctx_destroy(ctx);
	be__etcd_destroy(c);
	eh_stop(h);
	return 0;
}
