/*
 * proto.h - the BE wire protocol: the connect handshake and the frames
 * carried in SEND buffers (internal). docs/PROTOCOL.md is the reference;
 * this file is its implementation.
 *
 * Everything on the wire is little-endian and encoded/decoded field by
 * field (never by casting a struct onto a buffer), so a peer's bytes are
 * only ever read through the bounds-checked decoders below. Decoders
 * validate what can be checked without Engine state (magic, version, type,
 * flags, lengths against the limits we advertised); the Engine validates
 * the rest (socket ids, message ids, tokens, credits).
 */
#ifndef BE_ENGINE_PROTO_H
#define BE_ENGINE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define BE_PROTO_MAGIC 0x31434542u /* "BEC1" */
/* 2: elastic credit grants; 3: the socket receive window; 4: one-way budgets */
#define BE_PROTO_VERSION 4u

/* ---- handshake: rdma_cm private data of connect, accept and reject ---- */

#define BE_PROTO_HELLO_LEN 48 /* <= BE_XPORT_PRIV_MAX (56) */

/* Limits on what a peer may advertise. */
#define BE_PROTO_MIN_RECV_BUF 256u
#define BE_PROTO_MAX_RECV_BUF (1u << 24)
#define BE_PROTO_MIN_CREDITS 4u
#define BE_PROTO_MAX_CREDITS 65535u
#define BE_PROTO_MIN_SOCK_WINDOW 4096u

/*
 * The socket receive window (docs/PROTOCOL.md, "Socket receive window"):
 * what one message of a socket counts against its receiver's
 * sock_window while it is held there: its length plus a record's cost,
 * so that empty messages count too. Both sides count alike.
 */
#define BE_SOCK_WIN_MSG 64u
static inline uint64_t be__sock_win_charge(uint64_t len)
{
	return len + BE_SOCK_WIN_MSG;
}

enum be__reject_reason {
	BE_REJECT_NONE = 0,
	BE_REJECT_BAD_HELLO = 1,   /* malformed or wrong magic */
	BE_REJECT_VERSION = 2,     /* protocol version not supported */
	BE_REJECT_PARAMS = 3,      /* parameters out of range */
	BE_REJECT_RESOURCES = 4,   /* no receive buffers / engines left */
	BE_REJECT_SHUTDOWN = 5,    /* listener closing */
	BE_REJECT_ADMISSION = 6,   /* not admitted: uid rule, accept hook, shared secret */
	BE_REJECT_AUTH = 7,        /* the listener needs a shared secret; none offered */
	BE_REJECT_LIMIT = 8,       /* too many Engines or handshakes from this peer */
	BE_REJECT_MAX = 8,
};

struct be__hello {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;          /* BE_HELLO_F_* */
	uint32_t recv_buf_size;  /* our receive buffers: a peer SEND must fit */
	uint32_t eager_max;      /* largest eager payload we send */
	uint32_t credits;        /* receives we grant the peer at first (may change) */
	uint32_t max_sockets;    /* sockets the peer may open on this engine */
	uint64_t max_msg_size;   /* largest message we accept */
	uint32_t keepalive_ms;   /* our keepalive interval (informational) */
	uint32_t reason;         /* reject only: enum be__reject_reason */
	uint64_t sock_window;    /* bytes one socket of ours holds for the peer at most */
};

/* Hello flags: optional features the sender supports. */
#define BE_HELLO_F_ONEWAY 0x0001u /* accepts WRITE_ONEWAY (receiver-allocated writes) */
#define BE_HELLO_F_AUTH 0x0002u   /* holds a shared secret and proves it (AUTH frames) */
#define BE_HELLO_F_ALL 0x0003u

/* One-way large messages in progress per Engine and direction: their
 * slots are 0 .. BE_ONEWAY_SLOTS - 1 (docs/PROTOCOL.md, section 4). */
#define BE_ONEWAY_SLOTS 64u

void be__hello_encode(const struct be__hello *h, uint8_t *buf);
/*
 * be__hello_decode() - decode and validate @len bytes. Returns 0, or a
 * reject reason (> 0) with a message in @why. A reject's private data is
 * decoded with @is_reject set (only magic and version are checked).
 */
int be__hello_decode(const uint8_t *buf, size_t len, int is_reject, struct be__hello *h,
		     const char **why);
const char *be__reject_str(uint32_t reason);

/* ---- frames ---- */

#define BE_FRAME_HDR 16u
#define BE_FRAME_ALIGN 8u

enum be__frame_type {
	BE_FR_DATA = 1,        /* eager message: payload of len bytes */
	BE_FR_SOCK_OPEN = 2,   /* open socket @sock (id chosen by the opener) */
	BE_FR_SOCK_OPEN_ACK = 3, /* body: i32 status; sent only to refuse */
	BE_FR_SOCK_CLOSE = 4,  /* body: i32 reason; F_ACK when answering */
	BE_FR_WRITE_REQ = 5,   /* body: u64 length of message @msg */
	BE_FR_WRITE_RESP = 6,  /* body: u64 addr, u64 length, u32 rkey, u32 token */
	BE_FR_WRITE_NOMEM = 7, /* body: u64 length; sender retries later */
	BE_FR_CREDIT = 8,      /* credits only */
	BE_FR_KEEPALIVE = 9,   /* F_REPLY_REQ asks for a keepalive back */
	BE_FR_CREDIT_GROW = 10,    /* body: u32 n: n more receives granted to you */
	BE_FR_CREDIT_REVOKE = 11,  /* body: u32 n: give back up to n receives */
	BE_FR_CREDIT_RELEASE = 12, /* body: u32 k: k receives given back (answers a revoke) */
	BE_FR_WRITE_ONEWAY = 13,   /* body: u64 length, u32 slot, u32 0: its data follows */
	BE_FR_AUTH = 14,       /* admission (msg: step): body 32-byte nonce, 32-byte MAC */
	BE_FR_ONEWAY_BUDGET = 15, /* body: u64 bytes of WRITE_ONEWAY in progress allowed */
	BE_FR_MAX_TYPE = 15,
};

/* AUTH frames: the challenge-response of the shared secret, before the
 * Engine carries anything else (docs/PROTOCOL.md, "Admission"). The step
 * is in the header's msg field, the socket id is 0. */
#define BE_AUTH_NONCE 32u
#define BE_AUTH_MAC 32u
#define BE_AUTH_BODY (BE_AUTH_NONCE + BE_AUTH_MAC)
enum be__auth_step {
	BE_AUTH_HELLO = 1,   /* connector: its nonce */
	BE_AUTH_CHALLENGE,   /* acceptor: its nonce */
	BE_AUTH_PROOF,       /* connector: its MAC */
	BE_AUTH_ACCEPT,      /* acceptor: its MAC; the connector is admitted */
	BE_AUTH_REFUSED,     /* acceptor: not admitted; nonce[0] the reject reason */
};

#define BE_FRF_OPENER 0x01u    /* sender opened the socket (selects its id space) */
#define BE_FRF_ACK 0x02u       /* SOCK_CLOSE answering a SOCK_CLOSE */
#define BE_FRF_REPLY_REQ 0x04u /* KEEPALIVE: answer with a KEEPALIVE */
#define BE_FRF_STARVED 0x08u   /* any frame: the sender waited for a credit since its last one */
#define BE_FRF_ALL 0x0fu

struct be__frame {
	uint8_t type;
	uint8_t flags;
	uint16_t credits; /* receive credits returned to the frame's receiver */
	uint32_t sock;
	uint32_t msg;
	uint32_t len;     /* bytes after the header */
	const uint8_t *body;
	/* decoded bodies */
	int32_t status;   /* SOCK_OPEN_ACK, SOCK_CLOSE */
	uint64_t length;  /* WRITE_REQ, WRITE_RESP, WRITE_NOMEM, WRITE_ONEWAY,
			   * ONEWAY_BUDGET */
	uint64_t addr;    /* WRITE_RESP */
	uint32_t rkey;    /* WRITE_RESP */
	uint32_t token;   /* WRITE_RESP; WRITE_ONEWAY: the slot */
	uint32_t count;   /* CREDIT_GROW, CREDIT_REVOKE, CREDIT_RELEASE */
	/* AUTH: its BE_AUTH_BODY bytes, nonce then MAC (decoded: the body;
	 * queued: the copy in struct be__ctrl). A pointer, so that the
	 * frames of the data path stay small to clear. */
	const uint8_t *auth;
};

/* Frames that carry nothing but credit and liveness: the receives they
 * use are returned lazily (credit.h), so credit frames cannot ping-pong. */
static inline int be__frame_credit_only(uint8_t type)
{
	return type == BE_FR_CREDIT || type == BE_FR_KEEPALIVE || type == BE_FR_CREDIT_GROW ||
	       type == BE_FR_CREDIT_REVOKE || type == BE_FR_CREDIT_RELEASE;
}

/* Bytes a frame of @body_len occupies in a SEND buffer (with padding). */
static inline uint32_t be__frame_size(uint32_t body_len)
{
	return (BE_FRAME_HDR + body_len + BE_FRAME_ALIGN - 1) & ~(BE_FRAME_ALIGN - 1);
}

/* Body length of each control type (DATA: variable). */
uint32_t be__frame_body_len(uint8_t type);

/*
 * be__frame_encode() - write @f (header and, for control types, the body
 * from the decoded fields) at @buf; for DATA, @payload (f->len bytes) is
 * copied after the header. Returns the bytes used (be__frame_size()).
 * The caller checked that they fit.
 */
uint32_t be__frame_encode(uint8_t *buf, const struct be__frame *f, const void *payload);

/* The BE_FRAME_HDR header bytes of @f alone, at @buf: a DATA frame whose
 * payload and padding the transport gathers from elsewhere. */
void be__frame_encode_hdr(uint8_t *buf, const struct be__frame *f);

/*
 * be__frame_next() - decode the frame at *@off in @buf[0..@len). Returns
 * 1 with @f filled and *@off advanced, 0 at the end of the buffer, or
 * BE_EPROTO_PEER with a reason in @why (truncated header or body, unknown
 * type or flags, a control body of the wrong size, DATA longer than
 * @max_data, trailing garbage).
 */
int be__frame_next(const uint8_t *buf, size_t len, size_t *off, uint32_t max_data,
		   struct be__frame *f, const char **why);

const char *be__frame_type_str(uint8_t type);

/* Token of a large-message grant carried in the WRITE_WITH_IMM immediate:
 * low 20 bits a slot of the receiver's grant table, high 12 a generation,
 * so a stale or forged token is recognised. */
#define BE_TOKEN_SLOT_BITS 20u
#define BE_TOKEN_MAX_SLOTS (1u << BE_TOKEN_SLOT_BITS)
static inline uint32_t be__token_make(uint32_t slot, uint32_t gen)
{
	return (gen << BE_TOKEN_SLOT_BITS) | slot;
}
static inline uint32_t be__token_slot(uint32_t t)
{
	return t & (BE_TOKEN_MAX_SLOTS - 1);
}
static inline uint32_t be__token_gen(uint32_t t)
{
	return t >> BE_TOKEN_SLOT_BITS;
}

#endif /* BE_ENGINE_PROTO_H */
