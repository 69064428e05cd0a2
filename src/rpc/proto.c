/*
 * proto.c - the RPC header: encoding and stateless validation, and the
 * RPC buffers that carry it (docs/PROTOCOL.md, section 8).
 *
 * Every message on an RPC socket is one 32-byte header and a payload. The
 * header sits in the BE_RPC_HDR_LEN bytes of headroom in front of the
 * payload pointer an application holds, so a payload built in place goes
 * to the wire as it is: the buffer handed to be_sock_send() is the
 * bemalloc buffer that starts 32 bytes earlier. Nothing here trusts a
 * byte: the header is read as four little-endian words (memcpy, never a
 * cast onto a struct), every field is checked once, and
 * be_rpc_hdr_decode() is a pure function so a fuzzer can drive it alone. What needs state (an id we issued, a method we serve)
 * is checked by call.c and server.c.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rpc/rpc_int.h"

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

/* The field by field checks, for what the one-word test did not accept:
 * a retry or hedge, an error reply, a notice, or a header to refuse
 * (they name the field that is wrong). */
static const char *hdr_check_slow(uint64_t w0, uint64_t id, uint64_t w2, uint64_t w3,
				  struct be_rpc_hdr *h)
{
	if ((uint16_t)w0 != RPC_MAGIC)
		return "bad magic";
	if ((uint8_t)(w0 >> 16) != RPC_VERSION)
		return "unknown version";
	if (w0 >> 56)
		return "reserved byte set";
	be__rpc_hdr_fill(h, w0, id, w2, w3);
	return hdr_check(h);
}

int be_rpc_hdr_decode(const void *msg, size_t len, struct be_rpc_hdr *out, const char **why)
{
	const uint8_t *p = msg;
	struct be_rpc_hdr tmp;
	const char *bad = NULL;
	uint64_t w0, id, w2, w3;

	if (!p || len < BE_RPC_HDR_LEN) {
		bad = "message shorter than the header";
		goto fail;
	}
	if (!out)
		out = &tmp;
	/* One pass: four loads, then each field is checked once. The
	 * length first (every type), then the type's own fields; the two
	 * headers of a plain call are each accepted by one comparison of
	 * the first word (plus, for a reply, its status being 0), and
	 * anything else goes through the checks that name what is wrong. */
	w0 = be__rpc_get64(p);
	id = be__rpc_get64(p + RPC_H_ID);
	w2 = be__rpc_get64(p + RPC_H_SERVICE);
	w3 = be__rpc_get64(p + RPC_H_DEADLINE);
	if ((uint64_t)(w3 >> 32) != (uint64_t)len - BE_RPC_HDR_LEN) {
		bad = (uint16_t)w0 != RPC_MAGIC		 ? "bad magic" :
		      (uint8_t)(w0 >> 16) != RPC_VERSION ? "unknown version" :
		      w0 >> 56				 ? "reserved byte set" :
							   "length field does not match the message";
		goto fail;
	}
	if (be__rpc_hdr_plain(w0, w3)) {
		be__rpc_hdr_fill(out, w0, id, w2, w3);
	} else {
		bad = hdr_check_slow(w0, id, w2, w3, out);
		if (bad)
			goto fail;
	}
	if (why)
		*why = NULL;
	return 0;
fail:
	if (why)
		*why = bad;
	return BE_EPROTO_PEER;
}

int be__rpc_hdr_peek(const void *msg, size_t len, struct be_rpc_hdr *out)
{
	const uint8_t *p = msg;

	if (len < BE_RPC_HDR_LEN || get16(p) != RPC_MAGIC || p[RPC_H_VERSION] != RPC_VERSION)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->type = p[RPC_H_TYPE];
	out->id = be__rpc_get64(p + RPC_H_ID);
	out->service = get32(p + RPC_H_SERVICE);
	out->method = get32(p + RPC_H_METHOD);
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
