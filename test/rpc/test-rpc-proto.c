/*
 * Check the RPC header codec: every valid header survives encode and
 * decode unchanged; each field is validated (wrong magic, version,
 * type, flags, attempt, reserved byte, length, statuses out of range,
 * fields that belong to the other type); and decoding random bytes and
 * random mutations of valid headers never crashes, never reads past the
 * message, and accepts only headers that re-encode to the same bytes.
 * This is the same entry point a libFuzzer harness would drive.
 */
#include <string.h>

#include "rtest.h"

static uint64_t rnd = 88172645463325252ull;

static uint64_t xr(void)
{
	return test_rand(&rnd);
}

static void check_roundtrip(const struct be_rpc_hdr *h)
{
	uint8_t msg[BE_RPC_HDR_LEN + 16];
	struct be_rpc_hdr back;
	const char *why = "unset";

	ASSERT(h->len <= 16);
	ASSERT_OK(be_rpc_hdr_encode(h, msg));
	ASSERT_OK(be_rpc_hdr_decode(msg, BE_RPC_HDR_LEN + h->len, &back, &why));
	ASSERT_PTR_EQ(why, NULL);
	ASSERT_EQ(back.type, h->type);
	ASSERT_EQ(back.flags, h->flags);
	ASSERT_EQ(back.attempt, h->attempt);
	ASSERT_UEQ(back.id, h->id);
	ASSERT_EQ(back.service, h->service);
	ASSERT_EQ(back.method, h->method);
	ASSERT_EQ(back.deadline_us, h->deadline_us);
	ASSERT_EQ(back.status, h->status);
	ASSERT_EQ(back.len, h->len);
}

/* Decoding @msg of @len bytes must fail, with a reason. */
static void check_bad(const uint8_t *msg, size_t len, const char *what)
{
	const char *why = NULL;
	struct be_rpc_hdr h;

	if (be_rpc_hdr_decode(msg, len, &h, &why) != BE_EPROTO_PEER)
		TEST_FAIL("accepted: %s", what);
	ASSERT(why != NULL);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4); /* the tests run little-endian, like the format */
}

int main(void)
{
	struct be_rpc_hdr req = { .type = BE_RPC_T_REQUEST, .flags = BE_RPC_IDEMPOTENT,
				  .id = 0x0123456789abcdefull, .service = 7, .method = 9,
				  .deadline_us = 30000, .len = 16 };
	struct be_rpc_hdr rep = { .type = BE_RPC_T_REPLY, .id = 42, .service = 7, .method = 9,
				  .len = 3 };
	uint8_t good[BE_RPC_HDR_LEN + 16], m[BE_RPC_HDR_LEN + 16];
	struct be_rpc_hdr h;
	int i, accepted = 0;

	check_roundtrip(&req);
	check_roundtrip(&rep);
	h = req;
	h.flags = BE_RPC_ONEWAY;
	h.deadline_us = BE_RPC_NO_DEADLINE;
	check_roundtrip(&h);
	h = req;
	h.flags = BE_RPC_IDEMPOTENT | BE_RPC_HEDGED;
	h.attempt = BE_RPC_MAX_ATTEMPT;
	check_roundtrip(&h);
	h = rep;
	h.len = 0;
	h.status = -ETIMEDOUT;
	check_roundtrip(&h);
	h.status = BE_EPROTO_PEER;
	check_roundtrip(&h);

	/* Encoding refuses what decoding would. */
	h = req;
	h.flags = 0x80;
	ASSERT_EQ(be_rpc_hdr_encode(&h, m), -EINVAL);
	h = rep;
	h.status = 5;
	ASSERT_EQ(be_rpc_hdr_encode(&h, m), -EINVAL);

	/* Field by field. */
	ASSERT_OK(be_rpc_hdr_encode(&req, good));
	check_bad(good, BE_RPC_HDR_LEN - 1, "short message");
	check_bad(good, BE_RPC_HDR_LEN + 15, "length one short");
	check_bad(NULL, 0, "no message");
	memcpy(m, good, sizeof(m));
	m[0] ^= 1;
	check_bad(m, sizeof(m), "magic");
	memcpy(m, good, sizeof(m));
	m[2] = 2;
	check_bad(m, sizeof(m), "version");
	memcpy(m, good, sizeof(m));
	m[3] = 4;
	check_bad(m, sizeof(m), "type");
	memcpy(m, good, sizeof(m));
	m[4] = 0x10;
	check_bad(m, sizeof(m), "unknown flag");
	memcpy(m, good, sizeof(m));
	m[6] = BE_RPC_MAX_ATTEMPT + 1;
	check_bad(m, sizeof(m), "attempt");
	memcpy(m, good, sizeof(m));
	m[7] = 1;
	check_bad(m, sizeof(m), "reserved");
	memcpy(m, good, sizeof(m));
	put_u32(m + 28, 17);
	check_bad(m, sizeof(m), "length field");
	memcpy(m, good, sizeof(m));
	m[4] = BE_RPC_RETRY | BE_RPC_IDEMPOTENT; /* retry flag, attempt 0 */
	check_bad(m, sizeof(m), "retry on a first attempt");
	memcpy(m, good, sizeof(m));
	m[4] = BE_RPC_HEDGED;
	m[6] = 1;
	check_bad(m, sizeof(m), "hedge of a call that is not idempotent");
	/* Replies. */
	ASSERT_OK(be_rpc_hdr_encode(&rep, good));
	memcpy(m, good, sizeof(m));
	put_u32(m + 24, 1);
	check_bad(m, BE_RPC_HDR_LEN + 3, "positive status");
	put_u32(m + 24, (uint32_t)-5000);
	check_bad(m, BE_RPC_HDR_LEN + 3, "status below every code");
	put_u32(m + 24, (uint32_t)-EIO);
	check_bad(m, BE_RPC_HDR_LEN + 3, "payload in an error reply");
	memcpy(m, good, sizeof(m));
	m[4] = 2;
	check_bad(m, BE_RPC_HDR_LEN + 3, "unknown flag in a reply");
	/* Notices: the draining flag and nothing else. */
	{
		struct be_rpc_hdr n = { .type = BE_RPC_T_NOTICE, .flags = BE_RPC_F_DRAINING };
		uint8_t nm[BE_RPC_HDR_LEN], b[BE_RPC_HDR_LEN + 1];
		int f;

		check_roundtrip(&n);
		n.flags = 0;
		check_roundtrip(&n);
		n.flags = BE_RPC_F_DRAINING;
		ASSERT_OK(be_rpc_hdr_encode(&n, nm));
		/* Each field a notice must leave 0, set: refused. */
		for (f = 4; f < BE_RPC_HDR_LEN; f++) {
			memcpy(b, nm, sizeof(nm));
			b[f] ^= f == 4 ? 2 : 1;
			check_bad(b, BE_RPC_HDR_LEN, "a notice with another field set");
		}
		memcpy(b, nm, sizeof(nm));
		b[BE_RPC_HDR_LEN] = 0;
		put_u32(b + 28, 1);
		check_bad(b, BE_RPC_HDR_LEN + 1, "a notice with a payload");
		n.id = 1;
		ASSERT_EQ(be_rpc_hdr_encode(&n, nm), -EINVAL);
	}
	memcpy(m, good, sizeof(m));
	m[6] = 1;
	check_bad(m, BE_RPC_HDR_LEN + 3, "attempt in a reply");

	/* Random bytes and mutations: no crash, and anything accepted
	 * re-encodes to exactly the bytes it came from. */
	for (i = 0; i < 200000; i++) {
		size_t len = BE_RPC_HDR_LEN + (size_t)(xr() % 17);
		uint8_t *msg = malloc(len), re[BE_RPC_HDR_LEN];
		size_t j;

		ASSERT(msg);
		if (i % 2) {
			for (j = 0; j < len; j++)
				msg[j] = (uint8_t)xr();
			msg[0] = 0x42;
			msg[1] = 0x52;
			msg[2] = 1;
			msg[3] = (uint8_t)(1 + xr() % 3);
		} else {
			struct be_rpc_hdr g = (xr() % 2) ? req : rep;

			g.len = (uint32_t)(len - BE_RPC_HDR_LEN);
			if (g.type == BE_RPC_T_REPLY)
				g.status = 0;
			ASSERT_OK(be_rpc_hdr_encode(&g, msg));
			memset(msg + BE_RPC_HDR_LEN, 0xab, len - BE_RPC_HDR_LEN);
			for (j = 0; j < 1 + xr() % 3; j++)
				msg[xr() % BE_RPC_HDR_LEN] ^= (uint8_t)(1u << (xr() % 8));
		}
		if (!be_rpc_hdr_decode(msg, len, &h, NULL)) {
			accepted++;
			ASSERT_OK(be_rpc_hdr_encode(&h, re));
			ASSERT(!memcmp(re, msg, BE_RPC_HDR_LEN));
		}
		free(msg);
	}
	ASSERT_GT(accepted, 0);
	fprintf(stderr, "random headers accepted: %d of 200000\n", accepted);

	/* Service ids: stable, never 0. */
	ASSERT_EQ(be_rpc_service_id("ps.embed"), be_rpc_service_id("ps.embed"));
	ASSERT_NE(be_rpc_service_id("ps.embed"), be_rpc_service_id("ps.push"));
	ASSERT_NE(be_rpc_service_id(""), 0);
	return 0;
}
