/*
 * wire.h - the parameter server's pull and push messages (internal): pure
 * encoding and validation, no state, no allocation. docs/PS.md ("Pull
 * and push messages") is the reference; this is its implementation.
 *
 * A message is a 40-byte header and up to BE_PS_MAX_SECTIONS sections,
 * one per table, each a 16-byte section header and its arrays, padded to
 * 8 bytes. Everything is little-endian. Decoders never cast the buffer to
 * a struct: they fill struct be__ps_msg, whose sections point into the
 * buffer (keys, values, maps may be unaligned: read them with
 * be__ps_wire_key() and memcpy). So a decoded message borrows its buffer
 * and is valid while the buffer is.
 *
 * Bounded memory: a decoder uses only the caller's struct be__ps_msg
 * (fixed size) and checks every count against the buffer length and the
 * config's limits before using it, so a hostile length can neither make
 * it read out of bounds nor make the server commit memory: the largest
 * reply a valid request can ask for is limits.max_reply_bytes.
 */
#ifndef BE_PS_WIRE_H
#define BE_PS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ps/ps_int.h"

#define BE_PS_WIRE_VERSION 1u
#define BE_PS_HDR_LEN 40u
#define BE_PS_SEC_HDR_LEN 16u
#define BE_PS_MAX_SECTIONS BE_PS_MAX_TABLES

enum be__ps_op {
	BE_PS_OP_PULL = 1,
	BE_PS_OP_PULL_REPLY = 2,
	BE_PS_OP_PUSH = 3,
	BE_PS_OP_PUSH_REPLY = 4,
};

/* PULL (echoed in PULL_REPLY). */
#define BE_PS_PULL_F_INFERENCE 0x1u   /* missing keys follow the table's missing policy */
#define BE_PS_PULL_F_MISSING_MAP 0x2u /* the reply marks missing keys in a bitmap */
#define BE_PS_PULL_F_ALL 0x3u

struct be__ps_sec {
	uint32_t table;
	uint32_t dim;
	uint32_t n;         /* keys */
	uint32_t n_missing; /* PULL_REPLY: keys answered without a row */
	const uint8_t *keys; /* requests: n little-endian u64 */
	const uint8_t *vals; /* PUSH: gradients, PULL_REPLY: values; n * dim f32 */
	const uint8_t *map;  /* PULL_REPLY with MISSING_MAP: ceil(n / 64) u64, bit i = key i */
};

struct be__ps_msg {
	uint8_t op;       /* enum be__ps_op */
	uint16_t flags;
	uint32_t shard;
	int32_t status;   /* replies: 0 or a negative errno; requests 0 */
	uint64_t version; /* PULL: lowest model version acceptable (0: any);
			   * replies: the shard's model version */
	uint64_t trainer; /* PUSH, PUSH_REPLY (echo) */
	uint64_t seq;     /* PUSH, PUSH_REPLY (echo) */
	uint32_t nsec;
	uint32_t total_keys; /* decoders: keys over all sections */
	struct be__ps_sec sec[BE_PS_MAX_SECTIONS];
};

static inline uint64_t be__ps_wire_key(const struct be__ps_sec *s, uint32_t i)
{
	return be__ps_get64(s->keys + 8 * (size_t)i);
}

static inline uint64_t be__ps_pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* Bytes of one section of @op with @n keys of @dim (flags: PULL_REPLY's). */
uint64_t be__ps_sec_len(uint8_t op, uint16_t flags, uint32_t n, uint32_t dim);

/* Bytes of the whole message @m (op, flags, nsec, sec[].n and .dim). */
uint64_t be__ps_msg_len(const struct be__ps_msg *m);

/* Write the 40-byte header of @m at @buf. */
void be__ps_hdr_put(uint8_t *buf, const struct be__ps_msg *m);

/* Write a 16-byte section header at @buf; @extra is n_missing in a
 * PULL_REPLY, else 0. */
void be__ps_sec_put(uint8_t *buf, uint32_t table, uint32_t dim, uint32_t n, uint32_t extra);

/*
 * be__ps_msg_encode() - write @m into @buf: header, then each section's
 * header and arrays, copied from the sections' pointers (keys; vals;
 * map), zero padding. For clients (requests) and for replies built from
 * arrays; the server builds pull replies in place (serve.c).
 * Borrows @m and what it points to. Returns the length, or -ENOBUFS when
 * @cap is smaller than be__ps_msg_len(), or -EINVAL (nsec too large).
 */
int64_t be__ps_msg_encode(const struct be__ps_msg *m, uint8_t *buf, size_t cap);

/*
 * be__ps_req_decode() - decode and validate a PULL or PUSH request of
 * @len bytes against @cfg: header fields, shard < n_shards, 1 ..
 * BE_PS_MAX_SECTIONS sections, each table known and at most once, dims
 * equal to the tables', 1 or more keys each and at most max_keys in all,
 * every key of this shard, gradients finite, padding zero, nothing after
 * the last section, and for a pull a reply of at most max_reply_bytes.
 * Borrows @buf (@m points into it) and @cfg. Returns 0, or with a reason
 * in *@why: -EBADMSG (truncated, malformed, trailing bytes), -ENOTSUP
 * (wire version), -ENOENT (unknown table), -EINVAL (a field out of range:
 * op, flags, shard, dim, key of another shard, trainer or seq 0,
 * non-finite gradient), -E2BIG (too many sections or keys), -EMSGSIZE
 * (reply would exceed max_reply_bytes).
 */
int be__ps_req_decode(const uint8_t *buf, size_t len, const struct be__ps_config *cfg,
		      struct be__ps_msg *m, const char **why);

/*
 * be__ps_reply_decode() - decode and validate the reply to @req (which
 * the caller sent; it is trusted): op, shard, flags, trainer and seq
 * echoed, and either an error (status < 0, no sections) or exactly the
 * request's sections, with n_missing <= n and, with a map, as many bits
 * set as n_missing. Borrows @buf and @req. Returns 0 (look at m->status)
 * or -EBADMSG / -ENOTSUP with a reason in *@why.
 */
int be__ps_reply_decode(const uint8_t *buf, size_t len, const struct be__ps_msg *req,
			struct be__ps_msg *m, const char **why);

/* Bytes of the PULL_REPLY that answers @req. */
uint64_t be__ps_pull_reply_len(const struct be__ps_msg *req);

/*
 * be__ps_error_reply() - the reply to @req carrying only @status (< 0)
 * and the shard's model @version, into @buf (BE_PS_HDR_LEN bytes).
 * Returns BE_PS_HDR_LEN.
 */
int64_t be__ps_error_reply(const struct be__ps_msg *req, int status, uint64_t version,
			   uint8_t *buf, size_t cap);

#endif /* BE_PS_WIRE_H */
