/*
 * proto.c - encoding and validating the wire protocol (see proto.h and
 * docs/PROTOCOL.md).
 *
 * Every read of peer bytes goes through rd16/rd32/rd64 at offsets that
 * were bounds-checked first; nothing here trusts a length before comparing
 * it with what is left in the buffer.
 */
#include <string.h>

#include <be/be.h>
#include "engine/proto.h"

static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t)v);
	wr16(p + 2, (uint16_t)(v >> 16));
}

static inline void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t)v);
	wr32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)rd16(p) | ((uint32_t)rd16(p + 2) << 16);
}

static inline uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

/* Hello layout: magic 0, version 4, flags 6, recv_buf 8, eager 12,
 * credits 16, max_sockets 20, max_msg 24, keepalive 32, reason 36,
 * sock_window 40. */
void be__hello_encode(const struct be__hello *h, uint8_t *buf)
{
	memset(buf, 0, BE_PROTO_HELLO_LEN);
	wr32(buf + 0, h->magic);
	wr16(buf + 4, h->version);
	wr16(buf + 6, h->flags);
	wr32(buf + 8, h->recv_buf_size);
	wr32(buf + 12, h->eager_max);
	wr32(buf + 16, h->credits);
	wr32(buf + 20, h->max_sockets);
	wr64(buf + 24, h->max_msg_size);
	wr32(buf + 32, h->keepalive_ms);
	wr32(buf + 36, h->reason);
	wr64(buf + 40, h->sock_window);
}

int be__hello_decode(const uint8_t *buf, size_t len, int is_reject, struct be__hello *h,
		     const char **why)
{
	memset(h, 0, sizeof(*h));
	/* Transports may pad private data (rdma_cm rounds it up), so longer
	 * is fine; shorter is not. */
	if (!buf || len < BE_PROTO_HELLO_LEN) {
		*why = "handshake too short";
		return BE_REJECT_BAD_HELLO;
	}
	h->magic = rd32(buf + 0);
	h->version = rd16(buf + 4);
	h->flags = rd16(buf + 6);
	h->recv_buf_size = rd32(buf + 8);
	h->eager_max = rd32(buf + 12);
	h->credits = rd32(buf + 16);
	h->max_sockets = rd32(buf + 20);
	h->max_msg_size = rd64(buf + 24);
	h->keepalive_ms = rd32(buf + 32);
	h->reason = rd32(buf + 36);
	h->sock_window = rd64(buf + 40);
	if (h->magic != BE_PROTO_MAGIC) {
		*why = "bad handshake magic";
		return BE_REJECT_BAD_HELLO;
	}
	if (h->version != BE_PROTO_VERSION) {
		*why = "unsupported protocol version";
		return BE_REJECT_VERSION;
	}
	if (is_reject)
		return 0;
	if (h->flags & ~BE_HELLO_F_ALL) {
		*why = "unknown handshake flags";
		return BE_REJECT_PARAMS;
	}
	if (h->recv_buf_size < BE_PROTO_MIN_RECV_BUF || h->recv_buf_size > BE_PROTO_MAX_RECV_BUF ||
	    h->recv_buf_size % BE_FRAME_ALIGN) {
		*why = "receive buffer size out of range";
		return BE_REJECT_PARAMS;
	}
	if (h->credits < BE_PROTO_MIN_CREDITS || h->credits > BE_PROTO_MAX_CREDITS) {
		*why = "credits out of range";
		return BE_REJECT_PARAMS;
	}
	if (h->max_sockets == 0 || h->max_msg_size == 0 || h->reason != 0 ||
	    h->sock_window < BE_PROTO_MIN_SOCK_WINDOW) {
		*why = "limits out of range";
		return BE_REJECT_PARAMS;
	}
	return 0;
}

const char *be__reject_str(uint32_t reason)
{
	switch (reason) {
	case BE_REJECT_NONE: return "no reason";
	case BE_REJECT_BAD_HELLO: return "malformed handshake";
	case BE_REJECT_VERSION: return "protocol version not supported";
	case BE_REJECT_PARAMS: return "handshake parameters out of range";
	case BE_REJECT_RESOURCES: return "no resources left";
	case BE_REJECT_SHUTDOWN: return "listener closing";
	case BE_REJECT_ADMISSION: return "not admitted";
	case BE_REJECT_AUTH: return "a shared secret is required";
	case BE_REJECT_LIMIT: return "too many connections from this peer";
	}
	return "unknown reason";
}

uint32_t be__frame_body_len(uint8_t type)
{
	switch (type) {
	case BE_FR_SOCK_OPEN_ACK:
	case BE_FR_SOCK_CLOSE:
	case BE_FR_CREDIT_GROW:
	case BE_FR_CREDIT_REVOKE:
	case BE_FR_CREDIT_RELEASE:
		return 4;
	case BE_FR_WRITE_REQ:
	case BE_FR_WRITE_NOMEM:
	case BE_FR_ONEWAY_BUDGET:
		return 8;
	case BE_FR_WRITE_RESP:
		return 24;
	case BE_FR_WRITE_ONEWAY:
		return 16;
	case BE_FR_AUTH:
		return BE_AUTH_BODY;
	default:
		return 0;
	}
}

const char *be__frame_type_str(uint8_t type)
{
	static const char *const names[] = {
		"?", "DATA", "SOCK_OPEN", "SOCK_OPEN_ACK", "SOCK_CLOSE", "WRITE_REQ",
		"WRITE_RESP", "WRITE_NOMEM", "CREDIT", "KEEPALIVE", "CREDIT_GROW",
		"CREDIT_REVOKE", "CREDIT_RELEASE", "WRITE_ONEWAY", "AUTH", "ONEWAY_BUDGET",
	};

	return type <= BE_FR_MAX_TYPE ? names[type] : "?";
}

/* Header: type 0, flags 1, credits 2, sock 4, msg 8, len 12. */
void be__frame_encode_hdr(uint8_t *buf, const struct be__frame *f)
{
	buf[0] = f->type;
	buf[1] = f->flags;
	wr16(buf + 2, f->credits);
	wr32(buf + 4, f->sock);
	wr32(buf + 8, f->msg);
	wr32(buf + 12, f->type == BE_FR_DATA ? f->len : be__frame_body_len(f->type));
}

uint32_t be__frame_encode(uint8_t *buf, const struct be__frame *f, const void *payload)
{
	uint32_t len = f->type == BE_FR_DATA ? f->len : be__frame_body_len(f->type);
	uint32_t size = be__frame_size(len);
	uint8_t *b = buf + BE_FRAME_HDR;

	be__frame_encode_hdr(buf, f);
	switch (f->type) {
	case BE_FR_DATA:
		if (len)
			memcpy(b, payload, len);
		break;
	case BE_FR_SOCK_OPEN_ACK:
	case BE_FR_SOCK_CLOSE:
		wr32(b, (uint32_t)f->status);
		break;
	case BE_FR_CREDIT_GROW:
	case BE_FR_CREDIT_REVOKE:
	case BE_FR_CREDIT_RELEASE:
		wr32(b, f->count);
		break;
	case BE_FR_WRITE_REQ:
	case BE_FR_WRITE_NOMEM:
	case BE_FR_ONEWAY_BUDGET:
		wr64(b, f->length);
		break;
	case BE_FR_WRITE_RESP:
		wr64(b, f->addr);
		wr64(b + 8, f->length);
		wr32(b + 16, f->rkey);
		wr32(b + 20, f->token);
		break;
	case BE_FR_WRITE_ONEWAY:
		wr64(b, f->length);
		wr32(b + 8, f->token);
		wr32(b + 12, 0);
		break;
	case BE_FR_AUTH:
		memcpy(b, f->auth, BE_AUTH_BODY);
		break;
	default:
		break;
	}
	/* Zero the padding: nothing of ours leaks onto the wire. */
	if (size > BE_FRAME_HDR + len)
		memset(b + len, 0, size - BE_FRAME_HDR - len);
	return size;
}

int be__frame_next(const uint8_t *buf, size_t len, size_t *off, uint32_t max_data,
		   struct be__frame *f, const char **why)
{
	size_t o = *off, left;
	uint32_t want;
	const uint8_t *p;

	if (o >= len)
		return 0;
	left = len - o;
	if (left < BE_FRAME_HDR) {
		*why = "truncated frame header";
		return BE_EPROTO_PEER;
	}
	p = buf + o;
	memset(f, 0, sizeof(*f));
	f->type = p[0];
	f->flags = p[1];
	f->credits = rd16(p + 2);
	f->sock = rd32(p + 4);
	f->msg = rd32(p + 8);
	f->len = rd32(p + 12);
	if (f->type == 0 || f->type > BE_FR_MAX_TYPE) {
		*why = "unknown frame type";
		return BE_EPROTO_PEER;
	}
	if (f->flags & ~BE_FRF_ALL) {
		*why = "unknown frame flags";
		return BE_EPROTO_PEER;
	}
	if (f->type == BE_FR_DATA) {
		if (f->len > max_data) {
			*why = "DATA frame longer than the eager limit";
			return BE_EPROTO_PEER;
		}
	} else if (f->len != be__frame_body_len(f->type)) {
		*why = "control frame body of the wrong size";
		return BE_EPROTO_PEER;
	}
	/* The padded size must fit too, except for the last frame, whose
	 * padding the sender may omit. */
	want = BE_FRAME_HDR + f->len;
	if (want > left) {
		*why = "frame longer than the buffer";
		return BE_EPROTO_PEER;
	}
	f->body = p + BE_FRAME_HDR;
	switch (f->type) {
	case BE_FR_SOCK_OPEN_ACK:
	case BE_FR_SOCK_CLOSE:
		f->status = (int32_t)rd32(f->body);
		break;
	case BE_FR_CREDIT_GROW:
	case BE_FR_CREDIT_REVOKE:
	case BE_FR_CREDIT_RELEASE:
		f->count = rd32(f->body);
		break;
	case BE_FR_WRITE_REQ:
	case BE_FR_WRITE_NOMEM:
	case BE_FR_ONEWAY_BUDGET:
		f->length = rd64(f->body);
		break;
	case BE_FR_WRITE_RESP:
		f->addr = rd64(f->body);
		f->length = rd64(f->body + 8);
		f->rkey = rd32(f->body + 16);
		f->token = rd32(f->body + 20);
		break;
	case BE_FR_WRITE_ONEWAY:
		f->length = rd64(f->body);
		f->token = rd32(f->body + 8);
		if (f->token >= BE_ONEWAY_SLOTS || rd32(f->body + 12)) {
			*why = "WRITE_ONEWAY slot out of range or reserved field set";
			return BE_EPROTO_PEER;
		}
		break;
	case BE_FR_AUTH:
		f->auth = f->body;
		break;
	default:
		break;
	}
	want = be__frame_size(f->len);
	*off = want <= left ? o + want : len;
	return 1;
}
