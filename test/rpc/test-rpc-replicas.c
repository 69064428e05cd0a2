/*
 * Check replica sets: calls spread over every replica (least outstanding
 * of two); a replica removed while it serves calls finishes them (drained,
 * not cut) and takes no new ones; a draining replica and one below the
 * channel's minimum model version take no new calls; a replica added
 * takes calls; a channel watching a naming source follows it: the static
 * file (only the records of its service and shard), rewritten with a new
 * replica, with a malformed line (refused, counted, the last good set
 * stays), with one replica fewer; and a source fed in code refuses a
 * stale epoch.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rtest.h"

#define NS 3
#define SVC 14u
#define M_HOLD 1u

static struct be_worker *ws[NS + 1];
static struct rt_server srv[NS];
/* @n echo calls on @ch, none failing; the echoes of each server. */
static void stream(struct be_rpc_chan *ch, int n, uint64_t per[NS])
{
	rt_echo_calls(ch, ws, NS + 1, srv, NS, n, per);
}

static void record(struct be_rpc_record *r, const char *svc, const char *name, int i)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->service, sizeof(r->service), "%s", svc);
	snprintf(r->replica, sizeof(r->replica), "%s", name);
	r->shard_hi = UINT32_MAX;
	r->naddrs = 1;
	snprintf(r->addrs[0], sizeof(r->addrs[0]), "%s", srv[i].addr);
}

static void write_file(const char *path, const char *text)
{
	char tmp[256];
	FILE *f;

	/* Replace atomically, as an operator's tool would. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	ASSERT(f);
	ASSERT(fputs(text, f) >= 0);
	ASSERT_OK(fclose(f));
	ASSERT_OK(rename(tmp, path));
}

int main(int argc, char **argv)
{
	struct rt t;
	struct rt_client cli;
	struct be_rpc_chan *ch;
	struct be_rpc_record recs[NS + 1];
	struct be_rpc_chan_stats cs;
	struct be_rpc_replica_stats rs;
	struct be_ctx *ctx;
	uint64_t per[NS];
	int i;

	rt_init(&t, argc, argv);
	rt_fleet_start(&t, &ctx, srv, NS, &cli, ws);
	for (i = 0; i < NS; i++)
		ASSERT_OK(be_rpc_register(srv[i].rpc, SVC, M_HOLD, rt_hold, NULL, 0));

	/* Spread. */
	record(&recs[0], "s", "r0", 0);
	record(&recs[1], "s", "r1", 1);
	record(&recs[2], "s", "r2", 2);
	ASSERT_OK(be_rpc_chan_create(cli.rpc, recs, 3, &ch));
	/* Connect everything first: a replica whose connection comes up
	 * late has calls piling up meanwhile, and is rightly avoided. */
	stream(ch, 60, per);
	stream(ch, 300, per);
	for (i = 0; i < NS; i++)
		ASSERT_GE(per[i], 30);

	/* r2 leaves while serving held calls: they still complete. */
	{
		static struct rt_result r[60];
		int k, n = 0;

		memset(r, 0, sizeof(r));
		do {
			ASSERT_LT(n, 60);
			ASSERT_OK(be_rpc_call(ch, SVC, M_HOLD, rt_req(8, 2), 8, NULL, rt_done_cb, &r[n],
					      NULL));
			n++;
			ASSERT_OK(be_rpc_chan_replica_stats(ch, 2, &rs));
		} while (!rs.outstanding);
		rt_pump(ws, NS + 1, rt_held_count, &n);
		ASSERT_OK(be_rpc_chan_update(ch, recs, 2));
		be_rpc_chan_stats(ch, &cs);
		ASSERT_EQ(cs.replicas, 2);
		ASSERT_EQ(cs.c.outstanding, (uint64_t)n);
		rt_held_release();
		for (k = 0; k < n; k++) {
			rt_pump(ws, NS + 1, rt_result_done, &r[k]);
			ASSERT_OK(r[k].status);
			be_rpc_buf_free(r[k].reply);
		}
		stream(ch, 60, per);
		ASSERT_EQ(per[2], 0);
	}
	/* r1 drains: only r0 takes calls. */
	recs[1].state = BE_RPC_DRAINING;
	ASSERT_OK(be_rpc_chan_update(ch, recs, 2));
	stream(ch, 60, per);
	ASSERT_EQ(per[0], 60);
	/* Serving again, but r0 serves an old model. */
	recs[1].state = BE_RPC_SERVING;
	recs[0].version = 1;
	recs[1].version = 2;
	ASSERT_OK(be_rpc_chan_update(ch, recs, 2));
	be_rpc_chan_set_min_version(ch, 2);
	stream(ch, 60, per);
	ASSERT_EQ(per[1], 60);
	be_rpc_chan_set_min_version(ch, 0);
	/* r2 comes back (added) and takes calls. */
	ASSERT_OK(be_rpc_chan_update(ch, recs, 3));
	stream(ch, 300, per);
	ASSERT_GE(per[2], 30);
	/* Invalid sets are refused whole. */
	recs[3] = recs[0];
	ASSERT_EQ(be_rpc_chan_update(ch, recs, 4), -EINVAL); /* r0 twice */
	recs[3].naddrs = 0;
	ASSERT_EQ(be_rpc_chan_create(cli.rpc, &recs[3], 1, &ch), -EINVAL);
	be_rpc_chan_destroy(ch);

	/* The static file. */
	{
		char path[128], text[4096];
		struct be_rpc_naming *nm;
		struct be_rpc_naming_stats ns;
		int len;

		snprintf(path, sizeof(path), "/tmp/be-rt-naming-%d.txt", (int)getpid());
		len = snprintf(text, sizeof(text),
			       "# replicas of ps.embed\n"
			       "ps.embed a shards=0-9 addr=%s\n"
			       "ps.embed b shards=0-9 epoch=1 addr=%s\n"
			       "ps.embed c shards=10-19 addr=%s\n"
			       "ps.other z addr=%s\n",
			       srv[0].addr, srv[1].addr, srv[2].addr, srv[2].addr);
		ASSERT_LT(len, (int)sizeof(text));
		write_file(path, text);
		snprintf(text, sizeof(text), "file://%s", path);
		ASSERT_OK(be_rpc_naming_open(text, 20, &nm));
		ASSERT_OK(be_rpc_chan_watch(cli.rpc, nm, "ps.embed", 5, &ch));
		ASSERT_EQ(rt_chan_replicas(ch), 2);
		stream(ch, 100, per);
		ASSERT_EQ(per[2], 0);
		ASSERT_GT(per[0], 0);
		ASSERT_GT(per[1], 0);
		/* c now covers shard 5 too. */
		snprintf(text, sizeof(text),
			 "ps.embed a shards=0-9 addr=%s\n"
			 "ps.embed b shards=0-9 epoch=1 addr=%s\n"
			 "ps.embed c shards=0-19 addr=%s\n",
			 srv[0].addr, srv[1].addr, srv[2].addr);
		write_file(path, text);
		ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 3);
		stream(ch, 300, per);
		ASSERT_GT(per[2], 0);
		/* A malformed file is refused whole; the set stays. */
		write_file(path, "ps.embed a shards=0-9\nthis is not a record\n");
		ST_PUMP_WHILE(ws, NS + 1, !rt_naming_errors(nm));
		rt_pump_ms(ws, NS + 1, 50);
		ASSERT_EQ(rt_chan_replicas(ch), 3);
		stream(ch, 30, per);
		/* One fewer. */
		snprintf(text, sizeof(text),
			 "ps.embed a shards=0-9 addr=%s\n"
			 "ps.embed c shards=0-19 addr=%s\n",
			 srv[0].addr, srv[2].addr);
		write_file(path, text);
		ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 2);
		stream(ch, 60, per);
		ASSERT_EQ(per[1], 0);
		be_rpc_naming_stats(nm, &ns);
		ASSERT_GE(ns.reloads, 3);
		ASSERT_EQ(ns.records, 2);
		be_rpc_chan_destroy(ch);
		be_rpc_naming_destroy(nm);
		unlink(path);
		ASSERT_EQ(be_rpc_naming_open("file:///nonexistent/be-naming", 0, &nm), -ENOENT);
		ASSERT_EQ(be_rpc_naming_open("zk://127.0.0.1:2181/be", 0, &nm), -EPROTONOSUPPORT);
	}
	/* A source fed in code. */
	{
		struct be_rpc_naming *nm;
		struct be_rpc_record got[4];

		ASSERT_OK(be_rpc_naming_create(&nm));
		record(&recs[0], "k", "r0", 0);
		record(&recs[1], "k", "r1", 1);
		recs[1].epoch = 5;
		ASSERT_OK(be_rpc_naming_set(nm, "k", recs, 2));
		ASSERT_OK(be_rpc_chan_watch(cli.rpc, nm, "k", BE_RPC_ANY_SHARD, &ch));
		ASSERT_EQ(rt_chan_replicas(ch), 2);
		recs[1].epoch = 4;
		ASSERT_EQ(be_rpc_naming_put(nm, &recs[1]), -ESTALE);
		record(&recs[2], "k", "r2", 2);
		ASSERT_OK(be_rpc_naming_put(nm, &recs[2]));
		ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 3);
		ASSERT_OK(be_rpc_naming_del(nm, "k", "r0"));
		ASSERT_EQ(be_rpc_naming_del(nm, "k", "r0"), -ENOENT);
		ST_PUMP_WHILE(ws, NS + 1, rt_chan_replicas(ch) != 2);
		ASSERT_EQ(be_rpc_naming_get(nm, "k", got, 4), 2);
		ASSERT_EQ(be_rpc_naming_get(nm, "k", got, 1), 2);
		stream(ch, 60, per);
		ASSERT_EQ(per[0], 0);
		recs[3] = recs[2];
		strcpy(recs[3].service, "other");
		ASSERT_EQ(be_rpc_naming_set(nm, "k", &recs[3], 1), -EINVAL);
		be_rpc_chan_destroy(ch);
		be_rpc_naming_destroy(nm);
	}
	rt_fleet_stop(ctx, srv, NS, &cli, ws);
	return 0;
}
