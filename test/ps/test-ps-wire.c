/*
 * Check the pull/push wire codec. Valid requests and replies round-trip
 * (also from an odd address). Hostile requests get their documented
 * error and nothing else: wrong dims, unknown tables, a table twice, no
 * sections or too many, zero or huge key counts (more than max_keys, or
 * more than the buffer holds), keys of another shard, non-finite
 * gradients, unknown ops, versions, flags, non-zero reserved fields and
 * padding, trailing bytes, a reply larger than max_reply_bytes. Every
 * truncation is refused; a few hundred thousand random mutations never
 * crash, and whatever they make that decodes re-encodes to the same
 * bytes. Decoding allocates nothing. Replies are checked against their
 * request: every truncation, a wrong section, a missing map that
 * disagrees with its count are refused.
 */
#include <malloc.h>
#include <math.h>
#include <stdlib.h>

#include "pstest.h"

static const char *cfg_text =
	"shards 8\n"
	"limits keys=1000 reply=64K\n"
	"table a dim=4 optimizer=sgd lr=0.1 init=zeros\n"
	"table b dim=2 optimizer=adagrad lr=0.1 init=uniform lo=-1 hi=1 missing=0.5\n"
	"table c dim=3 optimizer=ftrl lr=0.1 init=zeros\n";

static struct be__ps_config cfg;
static uint64_t keys[2000];
static float grads[2000 * 4];
static uint8_t buf[1 << 17] __attribute__((aligned(64)));
static uint8_t buf2[1 << 17] __attribute__((aligned(64)));

static int decode(const uint8_t *b, size_t len, struct be__ps_msg *m)
{
	const char *why = NULL;
	int rc = be__ps_req_decode(b, len, &cfg, m, &why);

	ASSERT(rc == 0 || why != NULL);
	return rc;
}

/* A pull of tables a and b (3 and 5 keys) and a push of a, b, c. */
static size_t make_pull(uint8_t *b, size_t cap, struct be__ps_msg *m)
{
	*m = (struct be__ps_msg){ .op = BE_PS_OP_PULL, .flags = BE_PS_PULL_F_MISSING_MAP,
				  .shard = 5, .version = 9, .nsec = 2 };
	m->sec[0] = (struct be__ps_sec){ .table = 0, .dim = 4, .n = 3, .keys = (uint8_t *)keys };
	m->sec[1] = (struct be__ps_sec){ .table = 1, .dim = 2, .n = 5,
					 .keys = (uint8_t *)(keys + 3) };
	return (size_t)be__ps_msg_encode(m, b, cap);
}

static size_t make_push(uint8_t *b, size_t cap, struct be__ps_msg *m)
{
	*m = (struct be__ps_msg){ .op = BE_PS_OP_PUSH, .shard = 5, .trainer = 0xabc, .seq = 3,
				  .nsec = 3 };
	m->sec[0] = (struct be__ps_sec){ .table = 2, .dim = 3, .n = 3, .keys = (uint8_t *)keys,
					 .vals = (uint8_t *)grads };
	m->sec[1] = (struct be__ps_sec){ .table = 0, .dim = 4, .n = 1, .keys = (uint8_t *)keys,
					 .vals = (uint8_t *)grads };
	m->sec[2] = (struct be__ps_sec){ .table = 1, .dim = 2, .n = 5, .keys = (uint8_t *)keys,
					 .vals = (uint8_t *)grads };
	return (size_t)be__ps_msg_encode(m, b, cap);
}

static void same_msg(const struct be__ps_msg *a, const struct be__ps_msg *b)
{
	uint32_t i, j;

	ASSERT(a->op == b->op && a->flags == b->flags && a->shard == b->shard);
	ASSERT(a->version == b->version && a->trainer == b->trainer && a->seq == b->seq);
	ASSERT_EQ(a->nsec, b->nsec);
	for (i = 0; i < a->nsec; i++) {
		const struct be__ps_sec *x = &a->sec[i], *y = &b->sec[i];

		ASSERT(x->table == y->table && x->dim == y->dim && x->n == y->n);
		for (j = 0; j < x->n; j++)
			ASSERT_UEQ(be__ps_wire_key(x, j), be__ps_wire_key(y, j));
		if (a->op == BE_PS_OP_PUSH)
			ASSERT(!memcmp(x->vals, y->vals, (size_t)x->n * x->dim * 4));
	}
}

static void test_round_trip(void)
{
	struct be__ps_msg m, d;
	size_t len;

	len = make_pull(buf, sizeof(buf), &m);
	ASSERT_EQ(len, 40 + (16 + 24) + (16 + 40));
	ASSERT_EQ(decode(buf, len, &d), 0);
	same_msg(&m, &d);
	ASSERT_EQ(d.total_keys, 8);
	ASSERT_UEQ(be__ps_pull_reply_len(&d), 40 + (16 + 48 + 8) + (16 + 40 + 8));
	/* From an odd address: fields are read bytewise. */
	memcpy(buf2 + 1, buf, len);
	ASSERT_EQ(decode(buf2 + 1, len, &d), 0);
	same_msg(&m, &d);

	len = make_push(buf, sizeof(buf), &m);
	ASSERT_EQ(len, 40 + (16 + 24 + 40) + (16 + 8 + 16) + (16 + 40 + 40));
	ASSERT_EQ(decode(buf, len, &d), 0);
	same_msg(&m, &d);
	memcpy(buf2 + 3, buf, len);
	ASSERT_EQ(decode(buf2 + 3, len, &d), 0);
	same_msg(&m, &d);
}

/* Overwrite a little-endian field of @n bytes at @off of a copy of @src. */
static size_t patch(const uint8_t *src, size_t len, size_t off, uint64_t v, int n)
{
	int i;

	memcpy(buf2, src, len);
	for (i = 0; i < n; i++)
		buf2[off + (size_t)i] = (uint8_t)(v >> (8 * i));
	return len;
}

#define EXPECT(len_, rc_)                                                    \
	do {                                                                 \
		struct be__ps_msg d_;                                        \
		ASSERT_EQ(decode(buf2, (len_), &d_), (rc_));                 \
	} while (0)

static void test_hostile(void)
{
	struct be__ps_msg m, d;
	size_t pull_len, push_len, i;
	const size_t s0 = 40, s1 = 40 + 16 + 24; /* pull sections */
	const size_t p0 = 40;                     /* first push section */
	static uint8_t pull[1024], push[1024];

	pull_len = make_pull(pull, sizeof(pull), &m);
	push_len = make_push(push, sizeof(push), &m);
	{

		/* Header. */
		EXPECT(patch(pull, pull_len, 0, 0, 1), -EINVAL);   /* op 0 */
		EXPECT(patch(pull, pull_len, 0, 5, 1), -EINVAL);   /* op 5 */
		EXPECT(patch(pull, pull_len, 0, 2, 1), -EINVAL);   /* a reply */
		EXPECT(patch(pull, pull_len, 1, 2, 1), -ENOTSUP);  /* version */
		EXPECT(patch(pull, pull_len, 2, 4, 2), -EINVAL);   /* flags */
		EXPECT(patch(push, push_len, 2, 1, 2), -EINVAL);   /* push flags */
		EXPECT(patch(pull, pull_len, 4, 8, 4), -EINVAL);   /* shard 8 of 8 */
		EXPECT(patch(pull, pull_len, 4, 4, 4), -EINVAL);   /* keys of shard 5 */
		EXPECT(patch(pull, pull_len, 8, 0, 2), -EINVAL);   /* no sections */
		EXPECT(patch(pull, pull_len, 8, 65, 2), -E2BIG);   /* too many */
		EXPECT(patch(pull, pull_len, 8, 3, 2), -EBADMSG);  /* one more than there is */
		EXPECT(patch(pull, pull_len, 8, 1, 2), -EBADMSG);  /* trailing bytes */
		EXPECT(patch(pull, pull_len, 10, 1, 2), -EBADMSG); /* reserved */
		EXPECT(patch(pull, pull_len, 12, 1, 4), -EBADMSG); /* status in a request */
		EXPECT(patch(pull, pull_len, 24, 1, 8), -EBADMSG); /* pull with a trainer */
		EXPECT(patch(push, push_len, 16, 1, 8), -EBADMSG); /* push with a version */
		EXPECT(patch(push, push_len, 24, 0, 8), -EINVAL);  /* trainer 0 */
		EXPECT(patch(push, push_len, 32, 0, 8), -EINVAL);  /* seq 0 */
		/* Sections. */
		EXPECT(patch(pull, pull_len, s0, 3, 4), -ENOENT);  /* unknown table */
		EXPECT(patch(pull, pull_len, s0, 1u << 31, 4), -ENOENT);
		EXPECT(patch(pull, pull_len, s1, 0, 4), -EINVAL);  /* table twice */
		EXPECT(patch(pull, pull_len, s0 + 4, 5, 4), -EINVAL); /* wrong dim */
		EXPECT(patch(pull, pull_len, s0 + 4, 0, 4), -EINVAL);
		EXPECT(patch(pull, pull_len, s0 + 4, UINT32_MAX, 4), -EINVAL);
		EXPECT(patch(pull, pull_len, s0 + 8, 0, 4), -EINVAL);  /* no keys */
		EXPECT(patch(pull, pull_len, s0 + 8, UINT32_MAX, 4), -E2BIG); /* huge */
		EXPECT(patch(pull, pull_len, s0 + 8, 1001, 4), -E2BIG);
		EXPECT(patch(pull, pull_len, s1 + 8, 998, 4), -E2BIG); /* 3 + 998 > 1000 */
		EXPECT(patch(pull, pull_len, s0 + 8, 995, 4), -EBADMSG); /* fits the limit, not the buffer */
		/* One key more or less: the sections no longer line up. */
		ASSERT_NE(decode(buf2, patch(pull, pull_len, s0 + 8, 4, 4), &d), 0);
		ASSERT_NE(decode(buf2, patch(pull, pull_len, s0 + 8, 2, 4), &d), 0);
		EXPECT(patch(pull, pull_len, s0 + 12, 1, 4), -EBADMSG); /* reserved */
		EXPECT(patch(pull, pull_len, s0 + 16, keys[0] + 1, 8),
		       be__ps_shard_of(keys[0] + 1, 8) == 5 ? 0 : -EINVAL);
		EXPECT(patch(push, push_len, p0 + 16 + 24, 0x7f800000u, 4), -EINVAL); /* +inf */
		EXPECT(patch(push, push_len, p0 + 16 + 24 + 8, 0xffc00000u, 4), -EINVAL); /* nan */
		EXPECT(patch(push, push_len, p0 + 16 + 24 + 36, 1, 1), -EBADMSG); /* padding */
		EXPECT(patch(push, push_len, p0 + 16 + 24, 0x7f7fffffu, 4), 0); /* FLT_MAX is fine */
		memcpy(buf2, pull, pull_len);
		buf2[pull_len] = 0;
		EXPECT(pull_len + 1, -EBADMSG);
		for (i = 0; i < pull_len; i++) {
			memcpy(buf2, pull, pull_len);
			ASSERT_NE(decode(buf2, i, &d), 0);
		}
		for (i = 0; i < push_len; i++) {
			memcpy(buf2, push, push_len);
			ASSERT_NE(decode(buf2, i, &d), 0);
		}
		ASSERT_EQ(be__ps_req_decode(NULL, 0, &cfg, &d, &(const char *){ NULL }), -EBADMSG);
	}

	/* Key counts: over max_keys in all sections; a reply over max_reply. */
	{
		struct be__ps_msg big = { .op = BE_PS_OP_PULL, .shard = 5, .nsec = 2 };
		size_t len;

		pt_keys(keys, 2000, 5, 8, 4);
		big.sec[0] = (struct be__ps_sec){ .table = 0, .dim = 4, .n = 600,
						  .keys = (uint8_t *)keys };
		big.sec[1] = (struct be__ps_sec){ .table = 1, .dim = 2, .n = 401,
						  .keys = (uint8_t *)keys };
		len = (size_t)be__ps_msg_encode(&big, buf2, sizeof(buf2));
		EXPECT(len, -E2BIG);
		big.sec[1].n = 400;
		len = (size_t)be__ps_msg_encode(&big, buf2, sizeof(buf2));
		EXPECT(len, 0);
		big.nsec = 3; /* + 300 keys of dim 3: 1300 keys, but first the limit */
		big.sec[1].n = 100;
		big.sec[2] = (struct be__ps_sec){ .table = 2, .dim = 3, .n = 300,
						  .keys = (uint8_t *)keys };
		len = (size_t)be__ps_msg_encode(&big, buf2, sizeof(buf2));
		EXPECT(len, 0);
		/* Its reply: 40 + (16 + 9600) + (16 + 800) + (16 + 3600). */
		cfg.limits.max_reply_bytes = 14087;
		EXPECT(len, -EMSGSIZE);
		cfg.limits.max_reply_bytes = 14088;
		EXPECT(len, 0);
		cfg.limits.max_reply_bytes = 64 << 10;
		pt_keys(keys, 16, 5, 8, 1);
	}
}

/* Random mutations of valid messages and random bytes: no crash; if one
 * decodes, it re-encodes to exactly the bytes decoded. */
static void test_fuzz(void)
{
	uint8_t seeds[2][1024];
	size_t seed_len[2];
	struct be__ps_msg m, d;
	uint64_t st = 11;
	int i, accepted = 0;
	struct mallinfo2 before, after;

	seed_len[0] = make_pull(seeds[0], sizeof(seeds[0]), &m);
	seed_len[1] = make_push(seeds[1], sizeof(seeds[1]), &m);
	before = mallinfo2();
	for (i = 0; i < 300000; i++) {
		uint64_t r = pt_rand(&st);
		int which = (int)(r & 1), flips = 1 + (int)((r >> 1) % 4), k;
		size_t len = seed_len[which];

		memcpy(buf2, seeds[which], len);
		if ((r >> 8) % 16 == 0) {
			len = (size_t)((r >> 12) % 300);
			for (k = 0; k < (int)len; k++)
				buf2[k] = (uint8_t)pt_rand(&st);
		} else {
			for (k = 0; k < flips; k++) {
				uint64_t x = pt_rand(&st);

				buf2[x % len] ^= (uint8_t)(1u << ((x >> 32) % 8));
			}
			if ((r >> 12) % 8 == 0)
				len = (size_t)((r >> 16) % (len + 16));
		}
		if (decode(buf2, len, &d) == 0) {
			int64_t n = be__ps_msg_encode(&d, buf, sizeof(buf));

			accepted++;
			ASSERT_EQ(n, (int64_t)len);
			ASSERT(!memcmp(buf, buf2, len));
		}
	}
	after = mallinfo2();
	ASSERT_UEQ(after.uordblks, before.uordblks);
	ASSERT_GT(accepted, 0); /* e.g. flips inside gradients or the min version */
}

static void test_replies(void)
{
	struct be__ps_shard *sh;
	struct be__ps_msg req, d, rep;
	const char *why;
	size_t len, i;
	int64_t rlen;
	uint32_t j, bits = 0;
	float want[4];

	ASSERT_OK(be__ps_shard_create(&cfg, 5, &sh));
	sh->version = 9; /* pretend nine pushes happened, for min_version 9 */
	len = make_pull(buf2, sizeof(buf2), &req);
	ASSERT_EQ(decode(buf2, len, &d), 0);
	rlen = be__ps_shard_pull(sh, &d, buf, sizeof(buf));
	ASSERT_EQ(rlen, (int64_t)be__ps_pull_reply_len(&d));
	ASSERT_OK(be__ps_reply_decode(buf, (size_t)rlen, &req, &rep, &why));
	ASSERT_EQ(rep.status, 0);
	ASSERT_UEQ(rep.version, 9);
	ASSERT_EQ(rep.sec[0].n_missing, 3);
	ASSERT_EQ(rep.sec[1].n_missing, 5);
	for (j = 0; j < 5; j++) {
		be__ps_init_row(&cfg.tables[1], keys[3 + j], want);
		ASSERT(!memcmp(rep.sec[1].vals + 8 * j, want, 8));
	}
	for (i = 0; i < 2; i++) {
		uint64_t w;

		memcpy(&w, rep.sec[i].map, sizeof(w));
		bits += (uint32_t)__builtin_popcountll(w);
	}
	ASSERT_EQ(bits, 8);
	/* Every truncation, a wrong n, a map that disagrees, positive status. */
	for (i = 0; i < (size_t)rlen; i++)
		ASSERT_EQ(be__ps_reply_decode(buf, i, &req, &rep, &why), -EBADMSG);
	buf[40 + 8] ^= 1;
	ASSERT_EQ(be__ps_reply_decode(buf, (size_t)rlen, &req, &rep, &why), -EBADMSG);
	buf[40 + 8] ^= 1;
	buf[40 + 16 + 48] ^= 8; /* a bit more in the first map */
	ASSERT_EQ(be__ps_reply_decode(buf, (size_t)rlen, &req, &rep, &why), -EBADMSG);
	buf[40 + 16 + 48] ^= 8;
	buf[12] = 1;
	ASSERT_EQ(be__ps_reply_decode(buf, (size_t)rlen, &req, &rep, &why), -EBADMSG);
	buf[12] = 0;
	ASSERT_OK(be__ps_reply_decode(buf, (size_t)rlen, &req, &rep, &why));
	/* The reply to another request. */
	req.shard = 4;
	ASSERT_EQ(be__ps_reply_decode(buf, (size_t)rlen, &req, &rep, &why), -EBADMSG);
	req.shard = 5;
	/* An error reply. */
	ASSERT_EQ(be__ps_error_reply(&d, -ESTALE, 3, buf, sizeof(buf)), 40);
	ASSERT_OK(be__ps_reply_decode(buf, 40, &req, &rep, &why));
	ASSERT_EQ(rep.status, -ESTALE);
	ASSERT_UEQ(rep.version, 3);
	ASSERT_EQ(be__ps_reply_decode(buf, 41, &req, &rep, &why), -EBADMSG);
	ASSERT_EQ(be__ps_error_reply(&d, 0, 3, buf, sizeof(buf)), -EINVAL);
	ASSERT_EQ(be__ps_error_reply(&d, -EIO, 3, buf, 39), -ENOBUFS);
	/* Push replies echo trainer and seq. */
	len = make_push(buf2, sizeof(buf2), &req);
	ASSERT_EQ(decode(buf2, len, &d), 0);
	ASSERT_EQ(be__ps_error_reply(&d, -EALREADY, 9, buf, sizeof(buf)), 40);
	ASSERT_OK(be__ps_reply_decode(buf, 40, &req, &rep, &why));
	ASSERT_EQ(rep.status, -EALREADY);
	req.seq = 4;
	ASSERT_EQ(be__ps_reply_decode(buf, 40, &req, &rep, &why), -EBADMSG);
	be__ps_shard_destroy(sh);
}

int main(void)
{
	uint32_t i;

	pt_config(&cfg, cfg_text);
	pt_keys(keys, 16, 5, 8, 1);
	for (i = 0; i < BE_ARRAY_SIZE(grads); i++)
		grads[i] = (float)i * 0.125f - 3.0f;
	test_round_trip();
	test_hostile();
	test_fuzz();
	test_replies();
	be__ps_config_close(&cfg);
	return 0;
}
