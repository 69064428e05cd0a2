/*
 * Check that a be-ps server answers a hostile client's malformed pull and
 * push requests with clear errors and stays whole: wrong dims (-EINVAL),
 * unknown tables (-ENOENT), key counts past the limit (-E2BIG) or past
 * the bytes sent (-EBADMSG), a reply past the limit (-EMSGSIZE), a key of
 * another shard, a trainer or sequence number 0, a gradient that is not
 * finite (-EINVAL), a push sent as a pull (-EINVAL), a shard the server
 * does not host (-ENXIO), an unknown method (-ENOSYS), every truncation
 * of a valid request and thousands of random mutations of it (an error,
 * or for a mutation that still decodes, a reply); its memory stays
 * bounded; and afterwards it serves a real client and exits cleanly.
 */
#include <stdlib.h>

#include "pscluster.h"

static const char *conf = "shards 4\n"
			  "servers 2\n"
			  "limits keys=4K reply=64K\n"
			  "table t dim=8 optimizer=sgd lr=0.1 init=zeros\n"
			  "table u dim=2 optimizer=adagrad lr=0.1 init=zeros\n";

static struct be_rpc_chan *ch;
static uint32_t svc;
static uint8_t msg[1 << 17] __attribute__((aligned(8)));

/* Send @len bytes of msg as @method; the call's status. */
static int call(uint32_t method, size_t len)
{
	struct be_rpc_call_opts o = { .timeout_us = 10000000, .flags = BE_RPC_NO_RETRY };
	void *buf = be_rpc_buf_alloc(len ? len : 1), *rep = NULL;
	size_t rl;
	int rc;

	ASSERT(buf);
	memcpy(buf, msg, len);
	rc = be_rpc_call_sync(ch, svc, method, len ? buf : NULL, len, &o, &rep, &rl);
	if (!len)
		be_rpc_buf_free(buf);
	be_rpc_buf_free(rep);
	return rc;
}

int main(int argc, char **argv)
{
	struct be__ps_config cfg;
	struct pc c;
	struct pc_server srv[2];
	struct be_ps_slice sl;
	struct be_ps_result res;
	struct be_ps_fetch_opts fo = { .timeout_us = 10000000 };
	static uint64_t keys[8192];
	static float g[8192 * 8], vals[64 * 8];
	uint64_t s = 1, other;
	long rss0, rss1;
	size_t len, n;
	int i, rc, ok = 0;

	pc_init(&c, argc, argv, conf);
	pt_config(&cfg, conf);
	pc_server_start(&c, &srv[0], 0, false, "p0");
	pc_server_start(&c, &srv[1], 1, false, "p1");
	pc_client_start(&c, srv, 2);
	ch = pc_chan(&c, &srv[0]);
	svc = be_rpc_service_id(BE_PS_SERVICE);
	pt_keys(keys, 8192, 0, 4, 1);
	pt_keys(&other, 1, 2, 4, 2); /* shard 2: server 0 too (2 % 2) */

	/* A valid pull and push first, so the failures below are the
	 * requests' own. */
	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 0, 8, keys, 16);
	ASSERT_OK(call(BE_PS_M_PULL, len));
	rss0 = pc_server_rss_kb(&srv[0]);

	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 0, 4, keys, 16); /* dim 4 of 8 */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -EINVAL);
	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 7, 8, keys, 16); /* table 7 */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -ENOENT);
	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 0, 8, keys, 16);
	be__ps_put32(msg + BE_PS_HDR_LEN + 8, 0x40000000u); /* n = 2^30 keys */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -E2BIG);
	be__ps_put32(msg + BE_PS_HDR_LEN + 8, 4000); /* within the limit, not sent */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -EBADMSG);
	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 0, 8, keys, 4000); /* 128 KB reply */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -EMSGSIZE);
	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 0, 8, keys, 5000); /* 5000 > 4K keys */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -E2BIG);
	keys[3] = other;
	len = pt_pull(msg, sizeof(msg), 0, 0, 0, 0, 8, keys, 16); /* a key of shard 2 */
	ASSERT_EQ(call(BE_PS_M_PULL, len), -EINVAL);
	pt_keys(keys, 16, 0, 4, 1);
	len = pt_pull(msg, sizeof(msg), 1, 0, 0, 0, 8, keys, 16);
	ASSERT_EQ(call(BE_PS_M_PULL, len), -EINVAL); /* shard 0's keys sent as shard 1 */
	pt_keys(keys, 16, 1, 4, 3);
	len = pt_pull(msg, sizeof(msg), 1, 0, 0, 0, 8, keys, 16);
	ASSERT_EQ(call(BE_PS_M_PULL, len), -ENXIO); /* shard 1 is on server 1 */
	pt_keys(keys, 8192, 0, 4, 1);

	len = pt_push(msg, sizeof(msg), 0, 0, 1, 0, 8, keys, g, 16);
	ASSERT_EQ(call(BE_PS_M_PUSH, len), -EINVAL); /* trainer 0 */
	len = pt_push(msg, sizeof(msg), 0, 5, 0, 0, 8, keys, g, 16);
	ASSERT_EQ(call(BE_PS_M_PUSH, len), -EINVAL); /* seq 0 */
	g[5] = 1.0f / 0.0f;
	len = pt_push(msg, sizeof(msg), 0, 5, 1, 0, 8, keys, g, 16);
	ASSERT_EQ(call(BE_PS_M_PUSH, len), -EINVAL); /* infinite gradient */
	g[5] = 0;
	len = pt_push(msg, sizeof(msg), 0, 5, 1, 0, 8, keys, g, 16);
	ASSERT_EQ(call(BE_PS_M_PULL, len), -EINVAL); /* a push sent as a pull */
	ASSERT_EQ(call(99, len), -ENOSYS);
	ASSERT_EQ(call(BE_PS_M_INFO, 3), -EBADMSG);

	/* Every truncation of a valid push, then random mutations. */
	for (n = 0; n < len; n++)
		ASSERT_LT(call(BE_PS_M_PUSH, n), 0);
	for (i = 0; i < 3000; i++) {
		size_t at = pt_rand(&s) % len;

		len = pt_push(msg, sizeof(msg), 0, 5, 100 + (uint64_t)i, 0, 8, keys, g, 16);
		msg[at] ^= (uint8_t)(1u << (pt_rand(&s) % 8));
		rc = call(BE_PS_M_PUSH, len);
		ASSERT(rc <= 0);
		ok += rc == 0; /* a flip in a key (of shard 0 by chance) or a gradient */
	}
	fprintf(stderr, "mutations that still decoded: %d of 3000\n", ok);

	/* Memory: what the server holds now against before, with room for
	 * its rows (a few hundred) and allocator caches; an unbounded
	 * allocation per hostile count would be gigabytes. */
	rss1 = pc_server_rss_kb(&srv[0]);
	fprintf(stderr, "server RSS %ld kB -> %ld kB\n", rss0, rss1);
	ASSERT_LT(rss1 - rss0, 64 * 1024);

	/* Still serving a real client. */
	sl = (struct be_ps_slice){ 1, 64, keys, vals };
	ASSERT_OK(be_ps_fetch_sync(c.ps, &sl, 1, &fo, &res));
	ASSERT_EQ(res.missing, 64);

	be_rpc_chan_destroy(ch);
	pc_client_stop(&c);
	pc_server_stop(&c, &srv[0]);
	pc_server_stop(&c, &srv[1]);
	be__ps_config_close(&cfg);
	pc_fini(&c);
	return 0;
}
