/*
 * wire.c - encoding and validating pull and push messages (wire.h,
 * docs/PS.md "Pull and push messages").
 *
 * Decoders read the header field by field, then walk the sections: each
 * count is compared with what is left in the buffer and with the limits
 * before it is multiplied or used as an offset, and every size is computed
 * in 64 bits from values already bounded (keys <= 2^32, dim <= 4096), so
 * no arithmetic can wrap. Arrays are not copied: sections point into the
 * buffer.
 */
#include <errno.h>

#include "ps/wire.h"

static bool op_is_reply(uint8_t op)
{
	return op == BE_PS_OP_PULL_REPLY || op == BE_PS_OP_PUSH_REPLY;
}

uint64_t be__ps_sec_len(uint8_t op, uint16_t flags, uint32_t n, uint32_t dim)
{
	uint64_t vals = be__ps_pad8((uint64_t)n * dim * 4);

	switch (op) {
	case BE_PS_OP_PULL:
		return BE_PS_SEC_HDR_LEN + 8ull * n;
	case BE_PS_OP_PUSH:
		return BE_PS_SEC_HDR_LEN + 8ull * n + vals;
	case BE_PS_OP_PULL_REPLY:
		return BE_PS_SEC_HDR_LEN + vals +
		       (flags & BE_PS_PULL_F_MISSING_MAP ? 8ull * ((n + 63ull) / 64) : 0);
	default:
		return 0;
	}
}

uint64_t be__ps_msg_len(const struct be__ps_msg *m)
{
	uint64_t len = BE_PS_HDR_LEN;
	uint32_t i;

	for (i = 0; i < m->nsec && i < BE_PS_MAX_SECTIONS; i++)
		len += be__ps_sec_len(m->op, m->flags, m->sec[i].n, m->sec[i].dim);
	return len;
}

uint64_t be__ps_pull_reply_len(const struct be__ps_msg *req)
{
	uint64_t len = BE_PS_HDR_LEN;
	uint32_t i;

	for (i = 0; i < req->nsec && i < BE_PS_MAX_SECTIONS; i++)
		len += be__ps_sec_len(BE_PS_OP_PULL_REPLY, req->flags, req->sec[i].n,
				      req->sec[i].dim);
	return len;
}

/* Header: op 0, version 1, flags 2, shard 4, nsec 8, reserved 10,
 * status 12, version 16, trainer 24, seq 32. */
void be__ps_hdr_put(uint8_t *buf, const struct be__ps_msg *m)
{
	buf[0] = m->op;
	buf[1] = BE_PS_WIRE_VERSION;
	be__ps_put16(buf + 2, m->flags);
	be__ps_put32(buf + 4, m->shard);
	be__ps_put16(buf + 8, (uint16_t)m->nsec);
	be__ps_put16(buf + 10, 0);
	be__ps_put32(buf + 12, (uint32_t)m->status);
	be__ps_put64(buf + 16, m->version);
	be__ps_put64(buf + 24, m->trainer);
	be__ps_put64(buf + 32, m->seq);
}

/* Section header: table 0, dim 4, n 8, n_missing (PULL_REPLY) or 0 12. */
void be__ps_sec_put(uint8_t *buf, uint32_t table, uint32_t dim, uint32_t n, uint32_t extra)
{
	be__ps_put32(buf, table);
	be__ps_put32(buf + 4, dim);
	be__ps_put32(buf + 8, n);
	be__ps_put32(buf + 12, extra);
}

/* Copy @len bytes and zero the padding up to 8. */
static uint8_t *put_padded(uint8_t *p, const void *src, uint64_t len)
{
	uint64_t padded = be__ps_pad8(len);

	if (len)
		memcpy(p, src, len);
	memset(p + len, 0, padded - len);
	return p + padded;
}

int64_t be__ps_msg_encode(const struct be__ps_msg *m, uint8_t *buf, size_t cap)
{
	uint64_t len;
	uint8_t *p;
	uint32_t i;

	if (m->nsec > BE_PS_MAX_SECTIONS)
		return -EINVAL;
	len = be__ps_msg_len(m);
	if (len > cap)
		return -ENOBUFS;
	be__ps_hdr_put(buf, m);
	p = buf + BE_PS_HDR_LEN;
	for (i = 0; i < m->nsec; i++) {
		const struct be__ps_sec *s = &m->sec[i];
		uint64_t vals = (uint64_t)s->n * s->dim * 4;

		be__ps_sec_put(p, s->table, s->dim, s->n,
			       m->op == BE_PS_OP_PULL_REPLY ? s->n_missing : 0);
		p += BE_PS_SEC_HDR_LEN;
		if (m->op == BE_PS_OP_PULL || m->op == BE_PS_OP_PUSH)
			p = put_padded(p, s->keys, 8ull * s->n);
		if (m->op == BE_PS_OP_PUSH || m->op == BE_PS_OP_PULL_REPLY)
			p = put_padded(p, s->vals, vals);
		if (m->op == BE_PS_OP_PULL_REPLY && (m->flags & BE_PS_PULL_F_MISSING_MAP))
			p = put_padded(p, s->map, 8ull * ((s->n + 63ull) / 64));
	}
	return (int64_t)len;
}

int64_t be__ps_error_reply(const struct be__ps_msg *req, int status, uint64_t version,
			   uint8_t *buf, size_t cap)
{
	struct be__ps_msg r = {
		.flags = req->flags,
		.shard = req->shard,
		.status = status,
		.version = version,
		.trainer = req->trainer,
		.seq = req->seq,
	};

	if (req->op != BE_PS_OP_PULL && req->op != BE_PS_OP_PUSH)
		return -EINVAL;
	if (status >= 0)
		return -EINVAL;
	if (cap < BE_PS_HDR_LEN)
		return -ENOBUFS;
	r.op = (uint8_t)(req->op + 1);
	be__ps_hdr_put(buf, &r);
	return BE_PS_HDR_LEN;
}

#define FAIL(code, msg)                                                      \
	do {                                                                 \
		*why = msg;                                                  \
		return code;                                                 \
	} while (0)

/* The header: every field read, op-independent checks. */
static int hdr_get(const uint8_t *buf, size_t len, struct be__ps_msg *m, uint16_t *rsv,
		   const char **why)
{
	memset(m, 0, offsetof(struct be__ps_msg, sec));
	if (!buf || len < BE_PS_HDR_LEN)
		FAIL(-EBADMSG, "message shorter than its header");
	m->op = buf[0];
	m->flags = be__ps_get16(buf + 2);
	m->shard = be__ps_get32(buf + 4);
	m->nsec = be__ps_get16(buf + 8);
	*rsv = be__ps_get16(buf + 10);
	m->status = (int32_t)be__ps_get32(buf + 12);
	m->version = be__ps_get64(buf + 16);
	m->trainer = be__ps_get64(buf + 24);
	m->seq = be__ps_get64(buf + 32);
	if (m->op < BE_PS_OP_PULL || m->op > BE_PS_OP_PUSH_REPLY)
		FAIL(-EINVAL, "unknown op");
	if (buf[1] != BE_PS_WIRE_VERSION)
		FAIL(-ENOTSUP, "unsupported wire version");
	return 0;
}

/* Bytes [p, p + n) are zero. */
static bool all_zero(const uint8_t *p, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* No infinity or NaN among @n little-endian float32 at @p. */
static bool all_finite(const uint8_t *p, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		if ((be__ps_get32(p + 4 * i) & 0x7f800000u) == 0x7f800000u)
			return false;
	return true;
}

int be__ps_req_decode(const uint8_t *buf, size_t len, const struct be__ps_config *cfg,
		      struct be__ps_msg *m, const char **why)
{
	uint64_t off = BE_PS_HDR_LEN, reply = BE_PS_HDR_LEN, seen = 0;
	uint16_t rsv;
	uint32_t i, j;
	int err = hdr_get(buf, len, m, &rsv, why);

	if (err)
		return err;
	if (m->op != BE_PS_OP_PULL && m->op != BE_PS_OP_PUSH)
		FAIL(-EINVAL, "not a request");
	if (rsv || m->status)
		FAIL(-EBADMSG, "reserved header field not zero");
	if (m->op == BE_PS_OP_PULL) {
		if (m->flags & ~BE_PS_PULL_F_ALL)
			FAIL(-EINVAL, "unknown pull flags");
		if (m->trainer || m->seq)
			FAIL(-EBADMSG, "pull with trainer or seq");
	} else {
		if (m->flags)
			FAIL(-EINVAL, "unknown push flags");
		if (m->version)
			FAIL(-EBADMSG, "push with a version");
		if (!m->trainer)
			FAIL(-EINVAL, "trainer id 0");
		if (!m->seq)
			FAIL(-EINVAL, "sequence number 0");
	}
	if (m->shard >= cfg->n_shards)
		FAIL(-EINVAL, "shard out of range");
	if (!m->nsec)
		FAIL(-EINVAL, "no sections");
	if (m->nsec > BE_PS_MAX_SECTIONS)
		FAIL(-E2BIG, "too many sections");
	for (i = 0; i < m->nsec; i++) {
		struct be__ps_sec *s = &m->sec[i];
		const uint8_t *p = buf + off;
		uint64_t keys_len, vals_len, need;

		if (len - off < BE_PS_SEC_HDR_LEN)
			FAIL(-EBADMSG, "truncated section header");
		*s = (struct be__ps_sec){ .table = be__ps_get32(p), .dim = be__ps_get32(p + 4), .n = be__ps_get32(p + 8) };
		if (be__ps_get32(p + 12))
			FAIL(-EBADMSG, "reserved section field not zero");
		if (s->table >= cfg->n_tables)
			FAIL(-ENOENT, "unknown table");
		if (seen & (1ull << s->table))
			FAIL(-EINVAL, "table in two sections");
		seen |= 1ull << s->table;
		if (s->dim != cfg->tables[s->table].dim)
			FAIL(-EINVAL, "dim differs from the table's");
		if (!s->n)
			FAIL(-EINVAL, "section without keys");
		if ((uint64_t)m->total_keys + s->n > cfg->limits.max_keys)
			FAIL(-E2BIG, "more keys than max_keys");
		m->total_keys += s->n;
		keys_len = 8ull * s->n;
		vals_len = (uint64_t)s->n * s->dim * 4;
		need = be__ps_sec_len(m->op, 0, s->n, s->dim);
		if (len - off < need)
			FAIL(-EBADMSG, "truncated section");
		s->keys = p + BE_PS_SEC_HDR_LEN;
		for (j = 0; j < s->n; j++)
			if (be__ps_shard_of(be__ps_wire_key(s, j), cfg->n_shards) != m->shard)
				FAIL(-EINVAL, "key of another shard");
		if (m->op == BE_PS_OP_PUSH) {
			s->vals = s->keys + keys_len;
			if (!all_finite(s->vals, vals_len / 4))
				FAIL(-EINVAL, "gradient not finite");
			if (!all_zero(s->vals + vals_len, be__ps_pad8(vals_len) - vals_len))
				FAIL(-EBADMSG, "padding not zero");
		} else {
			reply += be__ps_sec_len(BE_PS_OP_PULL_REPLY, m->flags, s->n, s->dim);
		}
		off += need;
	}
	if (off != len)
		FAIL(-EBADMSG, "bytes after the last section");
	if (m->op == BE_PS_OP_PULL && reply > cfg->limits.max_reply_bytes)
		FAIL(-EMSGSIZE, "reply would exceed max_reply_bytes");
	return 0;
}

int be__ps_reply_decode(const uint8_t *buf, size_t len, const struct be__ps_msg *req,
			struct be__ps_msg *m, const char **why)
{
	uint64_t off = BE_PS_HDR_LEN;
	uint16_t rsv;
	uint32_t i;
	int err = hdr_get(buf, len, m, &rsv, why);

	if (err)
		return err == -EINVAL ? -EBADMSG : err;
	if (!op_is_reply(m->op) || m->op != req->op + 1)
		FAIL(-EBADMSG, "not the reply to this request");
	if (rsv)
		FAIL(-EBADMSG, "reserved header field not zero");
	if (m->shard != req->shard || m->flags != req->flags || m->trainer != req->trainer ||
	    m->seq != req->seq)
		FAIL(-EBADMSG, "reply does not echo the request");
	if (m->status > 0)
		FAIL(-EBADMSG, "positive status");
	if (m->status < 0 || m->op == BE_PS_OP_PUSH_REPLY) {
		if (m->nsec || len != BE_PS_HDR_LEN)
			FAIL(-EBADMSG, "sections in a reply without values");
		return 0;
	}
	if (m->nsec != req->nsec || m->nsec > BE_PS_MAX_SECTIONS)
		FAIL(-EBADMSG, "reply sections differ from the request's");
	for (i = 0; i < m->nsec; i++) {
		const struct be__ps_sec *q = &req->sec[i];
		struct be__ps_sec *s = &m->sec[i];
		const uint8_t *p = buf + off;
		uint64_t vals_len, need, words, w, bits = 0;

		if (len - off < BE_PS_SEC_HDR_LEN)
			FAIL(-EBADMSG, "truncated section header");
		*s = (struct be__ps_sec){ .table = be__ps_get32(p), .dim = be__ps_get32(p + 4), .n = be__ps_get32(p + 8),
					  .n_missing = be__ps_get32(p + 12) };
		if (s->table != q->table || s->dim != q->dim || s->n != q->n)
			FAIL(-EBADMSG, "reply section differs from the request's");
		if (s->n_missing > s->n)
			FAIL(-EBADMSG, "more missing keys than keys");
		need = be__ps_sec_len(m->op, m->flags, s->n, s->dim);
		if (len - off < need)
			FAIL(-EBADMSG, "truncated section");
		vals_len = (uint64_t)s->n * s->dim * 4;
		s->vals = p + BE_PS_SEC_HDR_LEN;
		if (!all_zero(s->vals + vals_len, be__ps_pad8(vals_len) - vals_len))
			FAIL(-EBADMSG, "padding not zero");
		if (m->flags & BE_PS_PULL_F_MISSING_MAP) {
			s->map = s->vals + be__ps_pad8(vals_len);
			words = (s->n + 63ull) / 64;
			for (w = 0; w < words; w++) {
				uint64_t v = be__ps_get64(s->map + 8 * w);

				if (w == words - 1 && (s->n & 63) && (v >> (s->n & 63)))
					FAIL(-EBADMSG, "missing map beyond the keys");
				bits += (uint64_t)__builtin_popcountll(v);
			}
			if (bits != s->n_missing)
				FAIL(-EBADMSG, "missing map disagrees with n_missing");
		}
		off += need;
	}
	if (off != len)
		FAIL(-EBADMSG, "bytes after the last section");
	return 0;
}
