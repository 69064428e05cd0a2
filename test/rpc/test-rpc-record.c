/*
 * Check the record format of the naming file: records parse into every
 * field and format back to a line that parses to the same record;
 * comments and blank lines are skipped; each malformed line (missing
 * replica or address, unknown or repeated keys, bad numbers, bad
 * ranges, bad states, too many or too long addresses, control
 * characters, overlong lines) is refused with a reason; and random
 * bytes and mutations of good lines never crash the parser.
 */
#include <string.h>

#include "rtest.h"

static uint64_t rnd = 0x2545f4914f6cdd1dull;

static uint64_t xr(void)
{
	return test_rand(&rnd);
}

static void bad(const char *line)
{
	struct be_rpc_record r;
	const char *why = NULL;

	if (be_rpc_record_parse(line, strlen(line), &r, &why) != -EINVAL)
		TEST_FAIL("accepted: %s", line);
	ASSERT(why != NULL);
}

static void same(const struct be_rpc_record *a, const struct be_rpc_record *b)
{
	uint32_t i;

	ASSERT(!strcmp(a->service, b->service));
	ASSERT(!strcmp(a->replica, b->replica));
	ASSERT_EQ(a->shard_lo, b->shard_lo);
	ASSERT_EQ(a->shard_hi, b->shard_hi);
	ASSERT_EQ(a->state, b->state);
	ASSERT_UEQ(a->version, b->version);
	ASSERT_UEQ(a->epoch, b->epoch);
	ASSERT_EQ(a->naddrs, b->naddrs);
	for (i = 0; i < a->naddrs; i++)
		ASSERT(!strcmp(a->addrs[i], b->addrs[i]));
}

int main(void)
{
	const char *good = "ps.embed r3 shards=0-149 state=draining version=12 epoch=18446744073709551615 "
			   "addr=verbs://10.0.2.15:7000 addr=verbs://10.0.3.15:7000 "
			   "addr=tcp://10.0.2.15:7001 x-zone=a\n";
	struct be_rpc_record r, back;
	char line[BE_RPC_LINE_MAX + 64];
	int n, i;

	ASSERT_OK(be_rpc_record_parse(good, strlen(good), &r, NULL));
	ASSERT(!strcmp(r.service, "ps.embed"));
	ASSERT(!strcmp(r.replica, "r3"));
	ASSERT_EQ(r.shard_lo, 0);
	ASSERT_EQ(r.shard_hi, 149);
	ASSERT_EQ(r.state, BE_RPC_DRAINING);
	ASSERT_UEQ(r.version, 12);
	ASSERT_UEQ(r.epoch, UINT64_MAX);
	ASSERT_EQ(r.naddrs, 3);
	ASSERT(!strcmp(r.addrs[1], "verbs://10.0.3.15:7000"));
	n = be_rpc_record_format(&r, line, sizeof(line));
	ASSERT_GT(n, 0);
	ASSERT_EQ((size_t)n, strlen(line));
	ASSERT_OK(be_rpc_record_parse(line, (size_t)n, &back, NULL));
	same(&r, &back);
	/* Too small a buffer: the length needed. */
	ASSERT_EQ(be_rpc_record_format(&r, line, 10), n);

	/* Defaults. */
	ASSERT_OK(be_rpc_record_parse("s r addr=shm://x", 16, &r, NULL));
	ASSERT_EQ(r.shard_lo, 0);
	ASSERT_EQ(r.shard_hi, UINT32_MAX);
	ASSERT_EQ(r.state, BE_RPC_SERVING);
	ASSERT_UEQ(r.version, 0);
	ASSERT_OK(be_rpc_record_parse("\ts\tr\tshards=5\taddr=tcp://h:1\r\n", 29, &r, NULL));
	ASSERT_EQ(r.shard_lo, 5);
	ASSERT_EQ(r.shard_hi, 5);
	/* Not records. */
	ASSERT_EQ(be_rpc_record_parse("", 0, &r, NULL), -ENOENT);
	ASSERT_EQ(be_rpc_record_parse("   \n", 4, &r, NULL), -ENOENT);
	ASSERT_EQ(be_rpc_record_parse("# s r addr=tcp://h:1", 20, &r, NULL), -ENOENT);
	/* Refused. */
	bad("svc");
	bad("svc r1");
	bad("svc r1 shards=1-2");
	bad("svc r1 addr=tcp:/h:1");
	bad("svc r1 addr=://h:1");
	bad("svc r1 addr=TCP://h:1");
	bad("svc r1 addr=tcp://");
	bad("svc r1 colour=red addr=tcp://h:1");
	bad("svc r1 addr=tcp://h:1 version=1 version=2");
	bad("svc r1 addr=tcp://h:1 version=-1");
	bad("svc r1 addr=tcp://h:1 version=18446744073709551616");
	bad("svc r1 addr=tcp://h:1 epoch=1x");
	bad("svc r1 addr=tcp://h:1 shards=9-3");
	bad("svc r1 addr=tcp://h:1 shards=4294967296");
	bad("svc r1 addr=tcp://h:1 shards=1-");
	bad("svc r1 addr=tcp://h:1 state=gone");
	bad("svc r1 addr=tcp://h:1 state=serving state=serving");
	bad("svc r1 addr=tcp://h:1 shards");
	bad("svc r1=2 addr=tcp://h:1");
	bad("svc r1 addr=tcp://a:1 addr=tcp://a:2 addr=tcp://a:3 addr=tcp://a:4 addr=tcp://a:5 "
	    "addr=tcp://a:6 addr=tcp://a:7 addr=tcp://a:8 addr=tcp://a:9");
	memset(line, 'a', sizeof(line));
	memcpy(line, "svc r1 addr=tcp://", 18);
	line[18 + BE_RPC_ADDR_MAX] = '\0';
	bad(line);
	memset(line, 'a', sizeof(line));
	line[sizeof(line) - 1] = '\0';
	bad(line);
	memcpy(line, "svc r1 addr=tcp://h:1\x01", 23);
	bad(line);
	{
		char nul[] = "svc r1 addr=tcp://h:1";

		nul[3] = '\0';
		ASSERT_EQ(be_rpc_record_parse(nul, sizeof(nul) - 1, &r, NULL), -EINVAL);
	}
	/* Random input never crashes; what parses formats and parses back
	 * the same. */
	for (i = 0; i < 100000; i++) {
		size_t len = i % 2 ? (size_t)(xr() % 300) : strlen(good), j;
		char *p = malloc(len + 1);

		ASSERT(p);
		if (i % 2) {
			for (j = 0; j < len; j++)
				p[j] = (char)(xr() % 3 ? ' ' + xr() % 95 : xr());
		} else {
			memcpy(p, good, len);
			for (j = 0; j < 1 + xr() % 4; j++)
				p[xr() % len] = (char)(' ' + xr() % 95);
		}
		if (!be_rpc_record_parse(p, len, &r, NULL)) {
			n = be_rpc_record_format(&r, line, sizeof(line));
			ASSERT_GT(n, 0);
			ASSERT_OK(be_rpc_record_parse(line, (size_t)n, &back, NULL));
			same(&r, &back);
		}
		free(p);
	}
	return 0;
}
