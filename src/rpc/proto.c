/*
 * proto.c - the RPC header: encoding and stateless validation, and the
 * RPC buffers that carry it (docs/PROTOCOL.md, section 8).
 *
 * Every message on an RPC socket is one 32-byte header and a payload. The
 * header sits in the BE_RPC_HDR_LEN bytes of headroom in front of the
 * payload pointer an application holds, so a payload built in place goes
 * to the wire as it is: the buffer handed to be_sock_send() is the
 * bemalloc buffer that starts 32 bytes earlier. Nothing here trusts a
 * byte: fields are read one by one, little-endian, never cast onto a
 * struct, and be_rpc_hdr_decode() is a pure function so a fuzzer can
 * drive it alone. What needs state (an id we issued, a method we serve)
 * is checked by call.c and server.c.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rpc/rpc_int.h"

/* Header layout (offsets). */
#define H_MAGIC 0
#define H_VERSION 2
#define H_TYPE 3
#define H_FLAGS 4
#define H_ATTEMPT 6
#define H_RSVD 7
#define H_ID 8
#define H_SERVICE 16
#define H_METHOD 20
#define H_DEADLINE 24 /* requests; replies: status */
#define H_LEN 28

#define REQ_FLAGS (BE_RPC_ONEWAY | BE_RPC_IDEMPOTENT | BE_RPC_HEDGED | BE_RPC_RETRY)

/* Largest payload: the header's length field is 32 bits. */
#define RPC_MAX_PAYLOAD (UINT32_MAX - BE_RPC_HDR_LEN)

/* Statuses a reply may carry: 0, a negative errno (Linux keeps them
 * below 4096), or one of the library's own codes just below
 * BE_ERRNO_BASE. Anything else is a protocol error: an application sees
 * only codes it can name. */
#define STATUS_MIN (BE_ERRNO_BASE - 999)

/* Little-endian fields through memcpy: one load or store each on the
 * machines we run on, and no alignment assumption about the buffer. */
static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

bool be__rpc_status_valid(int32_t st)
{
	return st <= 0 && (st > -4096 || (st < BE_ERRNO_BASE && st >= STATUS_MIN));
}

/* The checks shared by decode and encode; NULL when @h is valid. */
static const char *hdr_check(const struct be_rpc_hdr *h)
{
	switch (h->type) {
	case BE_RPC_T_REQUEST:
		if (h->flags & ~REQ_FLAGS)
			return "unknown request flags";
		if (h->attempt > BE_RPC_MAX_ATTEMPT)
			return "attempt out of range";
		if ((h->flags & BE_RPC_RETRY) && !h->attempt)
			return "retry flag on a first attempt";
		if ((h->flags & BE_RPC_HEDGED) && !h->attempt)
			return "hedge flag on a first attempt";
		if ((h->flags & BE_RPC_HEDGED) && !(h->flags & BE_RPC_IDEMPOTENT))
			return "hedged copy of a call that is not idempotent";
		if ((h->flags & BE_RPC_ONEWAY) && (h->flags & BE_RPC_HEDGED))
			return "hedged one-way request";
		if (h->status)
			return "status in a request";
		break;
	case BE_RPC_T_REPLY:
		if (h->flags & ~BE_RPC_F_DRAINING)
			return "unknown reply flags";
		if (h->attempt)
			return "attempt in a reply";
		if (!be__rpc_status_valid(h->status))
			return "reply status out of range";
		if (h->status && h->len)
			return "payload in an error reply";
		if (h->deadline_us)
			return "deadline in a reply";
		break;
	case BE_RPC_T_NOTICE:
		/* The server's state, in its flags; nothing else. */
		if (h->flags & ~BE_RPC_F_DRAINING)
			return "unknown notice flags";
		if (h->attempt || h->id || h->service || h->method || h->deadline_us ||
		    h->status || h->len)
			return "a notice carries only its flags";
		break;
	default:
		return "unknown message type";
	}
	return NULL;
}

int be_rpc_hdr_decode(const void *msg, size_t len, struct be_rpc_hdr *out, const char **why)
{
	const uint8_t *p = msg;
	struct be_rpc_hdr h;
	const char *bad = NULL;
	uint32_t word;

	if (!p || len < BE_RPC_HDR_LEN) {
		bad = "message shorter than the header";
		goto fail;
	}
	if (get16(p + H_MAGIC) != RPC_MAGIC) {
		bad = "bad magic";
		goto fail;
	}
	if (p[H_VERSION] != RPC_VERSION) {
		bad = "unknown version";
		goto fail;
	}
	memset(&h, 0, sizeof(h));
	h.type = p[H_TYPE];
	h.flags = get16(p + H_FLAGS);
	h.attempt = p[H_ATTEMPT];
	if (p[H_RSVD]) {
		bad = "reserved byte set";
		goto fail;
	}
	h.id = get64(p + H_ID);
	h.service = get32(p + H_SERVICE);
	h.method = get32(p + H_METHOD);
	word = get32(p + H_DEADLINE);
	if (h.type == BE_RPC_T_REPLY)
		h.status = (int32_t)word;
	else
		h.deadline_us = word;
	h.len = get32(p + H_LEN);
	if ((uint64_t)h.len != (uint64_t)len - BE_RPC_HDR_LEN) {
		bad = "length field does not match the message";
		goto fail;
	}
	bad = hdr_check(&h);
	if (bad)
		goto fail;
	if (out)
		*out = h;
	if (why)
		*why = NULL;
	return 0;
fail:
	if (why)
		*why = bad;
	return BE_EPROTO_PEER;
}

void be__rpc_hdr_put(void *payload, const struct be_rpc_hdr *h)
{
	uint8_t *p = (uint8_t *)payload - BE_RPC_HDR_LEN;

	put16(p + H_MAGIC, RPC_MAGIC);
	p[H_VERSION] = RPC_VERSION;
	p[H_TYPE] = h->type;
	put16(p + H_FLAGS, h->flags);
	p[H_ATTEMPT] = h->attempt;
	p[H_RSVD] = 0;
	put64(p + H_ID, h->id);
	put32(p + H_SERVICE, h->service);
	put32(p + H_METHOD, h->method);
	put32(p + H_DEADLINE, h->type == BE_RPC_T_REPLY ? (uint32_t)h->status : h->deadline_us);
	put32(p + H_LEN, h->len);
}

uint64_t be__rpc_hdr_id(const void *msg)
{
	return get64((const uint8_t *)msg + H_ID);
}

int be__rpc_hdr_peek(const void *msg, size_t len, struct be_rpc_hdr *out)
{
	const uint8_t *p = msg;

	if (len < BE_RPC_HDR_LEN || get16(p + H_MAGIC) != RPC_MAGIC || p[H_VERSION] != RPC_VERSION)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->type = p[H_TYPE];
	out->id = get64(p + H_ID);
	out->service = get32(p + H_SERVICE);
	out->method = get32(p + H_METHOD);
	return 0;
}

int be_rpc_hdr_encode(const struct be_rpc_hdr *h, void *out)
{
	if (!h || !out || hdr_check(h))
		return -EINVAL;
	be__rpc_hdr_put((uint8_t *)out + BE_RPC_HDR_LEN, h);
	return 0;
}

/* ---- buffers */

void *be_rpc_buf_alloc(size_t len)
{
	uint8_t *p;

	if (len > RPC_MAX_PAYLOAD) {
		errno = ENOMEM;
		return NULL;
	}
	p = be_alloc(len + BE_RPC_HDR_LEN);
	return p ? p + BE_RPC_HDR_LEN : NULL;
}

void be_rpc_buf_free(void *p)
{
	if (p)
		be_free((uint8_t *)p - BE_RPC_HDR_LEN);
}

size_t be_rpc_buf_size(const void *p)
{
	return be_alloc_usable_size((const uint8_t *)p - BE_RPC_HDR_LEN) - BE_RPC_HDR_LEN;
}

uint32_t be_rpc_service_id(const char *name)
{
	uint32_t h = 2166136261u;

	while (name && *name) {
		h ^= (uint8_t)*name++;
		h *= 16777619u;
	}
	return h ? h : 1;
}
