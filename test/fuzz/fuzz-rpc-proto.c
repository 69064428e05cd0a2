/*
 * Check that the decoders of what an RPC peer sends survive any bytes and
 * keep what they promise of what they accept:
 *
 *   the RPC header (src/rpc/proto.c, be_rpc_hdr_decode(); docs/PROTOCOL.md
 *   section 8): a known type with only its own fields (a request's flags
 *   and attempt in range and no status; a reply's status a code the
 *   application can name and no payload with an error; a notice only
 *   its flags), the length field equal to the payload; re-encoded by
 *   be_rpc_hdr_encode() it is the same 32 bytes, and be__rpc_hdr_peek()
 *   (what the server reads to answer a refused request) agrees;
 *
 *   the parameter server's pull and push messages, the payload of its
 *   calls (src/ps/wire.c; docs/PS.md): a request against a real config
 *   (shard, tables, dims, key counts within max_keys, keys of the
 *   request's shard, finite gradients, the reply it asks for within
 *   max_reply_bytes), a reply against the request it answers (echoed
 *   fields, the request's sections, a missing-key map that agrees with
 *   its count); every array inside the message (each byte read: ASan),
 *   and re-encoded by be__ps_msg_encode() the same bytes.
 *
 * A refused input comes with a reason and a documented error.
 *
 * Input: byte 0 picks the decoder (0: RPC header of a whole message; 1:
 * a pull or push request at a server; 2, 3, 4: the reply to one of the
 * three requests of the seeds), the rest is what the peer sent.
 */
#include <errno.h>
#include <string.h>

#include <be/rpc.h>
#include "fuzz/fuzz.h"
#include "ps/config.h"
#include "ps/wire.h"
#include "rpc/rpc_int.h"
#include "test.h"

static const char cfg_text[] = "shards 4\n"
			       "limits keys=256 reply=16K\n"
			       "table a dim=4 optimizer=sgd lr=0.1 init=zeros\n"
			       "table b dim=2 optimizer=adagrad lr=0.1 init=zeros\n"
			       "table c dim=1 optimizer=sgd lr=0.1 init=zeros\n";

static struct be__ps_config cfg;
static int cfg_ready;
static unsigned long n_ok, n_refused, n_rpc, n_ps;

/* The requests whose replies the harness decodes (trusted: we sent them). */
static uint64_t req_keys[2][8];
static float req_grads[8 * 4];
static struct be__ps_msg reqs[3];

static void refused(int rc, const char *why)
{
	ASSERT(rc < 0);
	ASSERT(why && why[0]);
	n_refused++;
}

/* Keys of @shard: the first @n keys from @from on that hash there. */
static void keys_of(uint64_t *k, uint32_t n, uint32_t shard, uint64_t from)
{
	uint32_t i = 0;

	for (; i < n; from++)
		if (be__ps_shard_of(from, cfg.n_shards) == shard)
			k[i++] = from;
}

static void setup(void)
{
	char err[256];
	uint32_t i;

	if (cfg_ready)
		return;
	ASSERT_EQ(be__ps_config_parse(cfg_text, strlen(cfg_text), &cfg, err, sizeof(err)), 0);
	keys_of(req_keys[0], 8, 1, 1000);
	keys_of(req_keys[1], 8, 2, 5000);
	for (i = 0; i < 8 * 4; i++)
		req_grads[i] = (float)i / 8 - 1;
	/* A pull of a and b with the missing-key map, a pull of c, a push
	 * of a and c. */
	reqs[0] = (struct be__ps_msg){ .op = BE_PS_OP_PULL, .flags = BE_PS_PULL_F_MISSING_MAP,
				       .shard = 1, .version = 7, .nsec = 2 };
	reqs[0].sec[0] = (struct be__ps_sec){ .table = 0, .dim = 4, .n = 3,
					      .keys = (const uint8_t *)req_keys[0] };
	reqs[0].sec[1] = (struct be__ps_sec){ .table = 1, .dim = 2, .n = 5,
					      .keys = (const uint8_t *)(req_keys[0] + 3) };
	reqs[1] = (struct be__ps_msg){ .op = BE_PS_OP_PULL, .flags = BE_PS_PULL_F_INFERENCE,
				       .shard = 2, .nsec = 1 };
	reqs[1].sec[0] = (struct be__ps_sec){ .table = 2, .dim = 1, .n = 8,
					      .keys = (const uint8_t *)req_keys[1] };
	reqs[2] = (struct be__ps_msg){ .op = BE_PS_OP_PUSH, .shard = 1, .trainer = 0xabc,
				       .seq = 42, .nsec = 2 };
	reqs[2].sec[0] = (struct be__ps_sec){ .table = 0, .dim = 4, .n = 2,
					      .keys = (const uint8_t *)req_keys[0],
					      .vals = (const uint8_t *)req_grads };
	reqs[2].sec[1] = (struct be__ps_sec){ .table = 2, .dim = 1, .n = 4,
					      .keys = (const uint8_t *)(req_keys[0] + 2),
					      .vals = (const uint8_t *)req_grads };
	cfg_ready = 1;
}

static void rpc_one(const uint8_t *p, size_t n)
{
	struct be_rpc_hdr h, peek;
	uint8_t enc[BE_RPC_HDR_LEN];
	const char *why = NULL;
	int rc = be_rpc_hdr_decode(p, n, &h, &why);

	if (rc) {
		ASSERT_EQ(rc, BE_EPROTO_PEER);
		refused(rc, why);
		return;
	}
	ASSERT(!why);
	ASSERT_EQ((uint64_t)h.len + BE_RPC_HDR_LEN, n);
	switch (h.type) {
	case BE_RPC_T_REQUEST:
		ASSERT(!(h.flags & ~(BE_RPC_ONEWAY | BE_RPC_IDEMPOTENT | BE_RPC_HEDGED |
				     BE_RPC_RETRY)));
		ASSERT(h.attempt <= BE_RPC_MAX_ATTEMPT && !h.status);
		ASSERT(!(h.flags & (BE_RPC_HEDGED | BE_RPC_RETRY)) || h.attempt);
		ASSERT(!(h.flags & BE_RPC_HEDGED) ||
		       ((h.flags & BE_RPC_IDEMPOTENT) && !(h.flags & BE_RPC_ONEWAY)));
		break;
	case BE_RPC_T_REPLY:
		ASSERT(!(h.flags & ~BE_RPC_F_DRAINING) && !h.attempt && !h.deadline_us);
		ASSERT(be__rpc_status_valid(h.status) && h.status <= 0);
		ASSERT(!h.status || !h.len);
		break;
	case BE_RPC_T_NOTICE:
		ASSERT(!(h.flags & ~BE_RPC_F_DRAINING));
		ASSERT(!h.attempt && !h.id && !h.service && !h.method && !h.deadline_us &&
		       !h.status && !h.len);
		break;
	default:
		TEST_FAIL("decoded an unknown type %u", h.type);
	}
	ASSERT_EQ(be_rpc_hdr_encode(&h, enc), 0);
	ASSERT(!memcmp(enc, p, BE_RPC_HDR_LEN));
	ASSERT_EQ(be__rpc_hdr_peek(p, n, &peek), 0);
	ASSERT(peek.type == h.type && peek.id == h.id && peek.service == h.service &&
	       peek.method == h.method);
	ASSERT_UEQ(be__rpc_hdr_id(p), h.id);
	n_ok++;
}

/* @m decoded from @p (@n bytes): its arrays lie inside, and it encodes
 * back to the same bytes. */
static void ps_reencode(const struct be__ps_msg *m, const uint8_t *p, size_t n)
{
	uint8_t *enc = malloc(n);
	volatile uint8_t sink = 0;
	uint32_t i;
	uint64_t k;

	ASSERT(enc);
	for (i = 0; i < m->nsec; i++) {
		const struct be__ps_sec *s = &m->sec[i];

		if (s->keys) {
			ASSERT(s->keys >= p && s->keys + 8ull * s->n <= p + n);
			for (k = 0; k < 8ull * s->n; k++)
				sink ^= s->keys[k];
		}
		if (s->vals) {
			ASSERT(s->vals >= p && s->vals + 4ull * s->n * s->dim <= p + n);
			for (k = 0; k < 4ull * s->n * s->dim; k++)
				sink ^= s->vals[k];
		}
		if (s->map)
			ASSERT(s->map >= p && s->map + 8ull * ((s->n + 63) / 64) <= p + n);
	}
	(void)sink;
	ASSERT_UEQ(be__ps_msg_len(m), n);
	ASSERT_EQ(be__ps_msg_encode(m, enc, n), (int64_t)n);
	ASSERT(!memcmp(enc, p, n));
	free(enc);
}

static void ps_req_one(const uint8_t *p, size_t n)
{
	struct be__ps_msg m;
	const char *why = NULL;
	uint64_t seen = 0, keys = 0;
	uint32_t i, j;
	int rc = be__ps_req_decode(p, n, &cfg, &m, &why);

	if (rc) {
		ASSERT(rc == -EBADMSG || rc == -ENOTSUP || rc == -ENOENT || rc == -EINVAL ||
		       rc == -E2BIG || rc == -EMSGSIZE);
		refused(rc, why);
		return;
	}
	ASSERT(m.op == BE_PS_OP_PULL || m.op == BE_PS_OP_PUSH);
	ASSERT(m.shard < cfg.n_shards && !m.status);
	ASSERT(m.nsec >= 1 && m.nsec <= BE_PS_MAX_SECTIONS);
	if (m.op == BE_PS_OP_PUSH)
		ASSERT(m.trainer && m.seq && !m.flags && !m.version);
	else
		ASSERT(!(m.flags & ~BE_PS_PULL_F_ALL) && !m.trainer && !m.seq);
	for (i = 0; i < m.nsec; i++) {
		const struct be__ps_sec *s = &m.sec[i];

		ASSERT(s->table < cfg.n_tables && !(seen & (1ull << s->table)));
		seen |= 1ull << s->table;
		ASSERT(s->dim == cfg.tables[s->table].dim && s->n >= 1);
		keys += s->n;
		for (j = 0; j < s->n; j++)
			ASSERT_EQ(be__ps_shard_of(be__ps_wire_key(s, j), cfg.n_shards), m.shard);
		for (j = 0; m.op == BE_PS_OP_PUSH && j < s->n * s->dim; j++) {
			float g;

			memcpy(&g, s->vals + 4 * (size_t)j, sizeof(g));
			ASSERT(g == g && g - g == 0); /* finite */
		}
	}
	ASSERT(keys == m.total_keys && keys <= cfg.limits.max_keys);
	if (m.op == BE_PS_OP_PULL)
		ASSERT_LE(be__ps_pull_reply_len(&m), cfg.limits.max_reply_bytes);
	ps_reencode(&m, p, n);
	n_ok++;
}

static void ps_reply_one(const uint8_t *p, size_t n, const struct be__ps_msg *req)
{
	struct be__ps_msg m;
	const char *why = NULL;
	uint32_t i, w;
	int rc = be__ps_reply_decode(p, n, req, &m, &why);

	if (rc) {
		ASSERT(rc == -EBADMSG || rc == -ENOTSUP);
		refused(rc, why);
		return;
	}
	ASSERT(m.op == req->op + 1 && m.shard == req->shard && m.flags == req->flags &&
	       m.trainer == req->trainer && m.seq == req->seq && m.status <= 0);
	if (m.status < 0 || m.op == BE_PS_OP_PUSH_REPLY) {
		ASSERT(!m.nsec && n == BE_PS_HDR_LEN);
	} else {
		ASSERT_EQ(m.nsec, req->nsec);
		for (i = 0; i < m.nsec; i++) {
			const struct be__ps_sec *s = &m.sec[i];
			uint64_t bits = 0;

			ASSERT(s->table == req->sec[i].table && s->dim == req->sec[i].dim &&
			       s->n == req->sec[i].n && s->n_missing <= s->n);
			for (w = 0; s->map && w < (s->n + 63) / 64; w++)
				bits += (uint64_t)__builtin_popcountll(
					be__ps_get64(s->map + 8 * (size_t)w));
			ASSERT(!(m.flags & BE_PS_PULL_F_MISSING_MAP) || bits == s->n_missing);
		}
	}
	ps_reencode(&m, p, n);
	n_ok++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (!size)
		return 0;
	setup();
	copy = fuzz_body(data, size, 1);
	switch (data[0] % 5) {
	case 0:
		rpc_one(copy, size - 1);
		n_rpc++;
		break;
	case 1:
		ps_req_one(copy, size - 1);
		n_ps++;
		break;
	default:
		ps_reply_one(copy, size - 1, &reqs[data[0] % 5 - 2]);
		n_ps++;
		break;
	}
	free(copy);
	return 0;
}

/* ---- seeds: RPC messages and PS bodies, from the real encoders ---- */

static void put_rpc(void (*put)(const char *, const char *, const void *, size_t),
		    const char *dir, const char *name, struct be_rpc_hdr h, const uint8_t *body,
		    size_t len)
{
	uint8_t b[1 + BE_RPC_HDR_LEN + 512];

	ASSERT_LE(len, 512);
	b[0] = 0;
	h.len = (uint32_t)len;
	ASSERT_EQ(be_rpc_hdr_encode(&h, b + 1), 0);
	memcpy(b + 1 + BE_RPC_HDR_LEN, body, len);
	put(dir, name, b, 1 + BE_RPC_HDR_LEN + len);
}

static size_t put_ps(void (*put)(const char *, const char *, const void *, size_t),
		     const char *dir, const char *name, uint8_t kind, const struct be__ps_msg *m,
		     uint8_t *out)
{
	uint8_t b[1 + 1024];
	int64_t n = be__ps_msg_encode(m, b + 1, sizeof(b) - 1);

	ASSERT_GT(n, 0);
	b[0] = kind;
	put(dir, name, b, 1 + (size_t)n);
	if (out)
		memcpy(out, b + 1, (size_t)n);
	return (size_t)n;
}

void fuzz_seeds(void (*put)(const char *dir, const char *name, const void *p, size_t n),
		const char *dir)
{
	static const uint64_t map0[1] = { 0x5 }, map1[1] = { 0x10 };
	float vals[64];
	uint8_t pull[1024], err[BE_PS_HDR_LEN];
	struct be__ps_msg r;
	size_t n;
	uint32_t i;

	setup();
	for (i = 0; i < 64; i++)
		vals[i] = (float)i / 4;
	/* PS requests as a server gets them, and a reply to each. */
	n = put_ps(put, dir, "ps-pull", 1, &reqs[0], pull);
	put_ps(put, dir, "ps-pull-inference", 1, &reqs[1], NULL);
	put_ps(put, dir, "ps-push", 1, &reqs[2], NULL);
	r = reqs[0];
	r.op = BE_PS_OP_PULL_REPLY;
	r.version = 12;
	r.sec[0].vals = (const uint8_t *)vals;
	r.sec[0].n_missing = 2;
	r.sec[0].map = (const uint8_t *)map0;
	r.sec[1].vals = (const uint8_t *)vals;
	r.sec[1].n_missing = 1;
	r.sec[1].map = (const uint8_t *)map1;
	put_ps(put, dir, "ps-pull-reply", 2, &r, NULL);
	r = reqs[1];
	r.op = BE_PS_OP_PULL_REPLY;
	r.sec[0].vals = (const uint8_t *)vals;
	put_ps(put, dir, "ps-pull-reply-inference", 3, &r, NULL);
	r = (struct be__ps_msg){ .op = BE_PS_OP_PUSH_REPLY, .shard = 1, .version = 13,
				 .trainer = 0xabc, .seq = 42 };
	put_ps(put, dir, "ps-push-reply", 4, &r, NULL);
	ASSERT_EQ(be__ps_error_reply(&reqs[0], -EAGAIN, 12, err, sizeof(err)), BE_PS_HDR_LEN);
	{
		uint8_t b[1 + BE_PS_HDR_LEN];

		b[0] = 2;
		memcpy(b + 1, err, sizeof(err));
		put(dir, "ps-pull-error", b, sizeof(b));
	}

	/* RPC messages: a request carrying the pull, its reply, an error
	 * reply, a hedged retry, a one-way call, a notice. */
	put_rpc(put, dir, "rpc-request",
		(struct be_rpc_hdr){ .type = BE_RPC_T_REQUEST, .flags = BE_RPC_IDEMPOTENT,
				     .id = 0x100000001ull, .service = be_rpc_service_id("ps"),
				     .method = 1, .deadline_us = 30000 },
		pull, n);
	put_rpc(put, dir, "rpc-reply",
		(struct be_rpc_hdr){ .type = BE_RPC_T_REPLY, .id = 0x100000001ull,
				     .service = be_rpc_service_id("ps"), .method = 1 },
		(const uint8_t *)vals, 48);
	put_rpc(put, dir, "rpc-reply-error",
		(struct be_rpc_hdr){ .type = BE_RPC_T_REPLY, .flags = BE_RPC_F_DRAINING,
				     .id = 0x100000002ull, .service = 7, .method = 2,
				     .status = -ETIMEDOUT },
		NULL, 0);
	put_rpc(put, dir, "rpc-request-hedged",
		(struct be_rpc_hdr){ .type = BE_RPC_T_REQUEST,
				     .flags = BE_RPC_IDEMPOTENT | BE_RPC_HEDGED | BE_RPC_RETRY,
				     .attempt = 2, .id = 0x100000003ull, .service = 7, .method = 2,
				     .deadline_us = BE_RPC_NO_DEADLINE },
		(const uint8_t *)"ping", 4);
	put_rpc(put, dir, "rpc-request-oneway",
		(struct be_rpc_hdr){ .type = BE_RPC_T_REQUEST, .flags = BE_RPC_ONEWAY,
				     .id = 0x100000004ull, .service = 7, .method = 3,
				     .deadline_us = 1000 },
		(const uint8_t *)"event", 5);
	put_rpc(put, dir, "rpc-notice",
		(struct be_rpc_hdr){ .type = BE_RPC_T_NOTICE, .flags = BE_RPC_F_DRAINING }, NULL,
		0);
}

void fuzz_summary(unsigned long iters)
{
	printf("rpc-proto: %lu accepted, %lu refused (%lu RPC headers, %lu PS messages)\n", n_ok,
	       n_refused, n_rpc, n_ps);
	ASSERT_GT(n_refused, iters / 10);
	ASSERT_GT(n_ok, iters / 100);
	be__ps_config_close(&cfg);
}
