/*
 * Check that the Engine's wire decoders (src/engine/proto.c: the
 * handshake hello a peer sends in its connect, accept or reject, and the
 * frames of a SEND buffer) survive any bytes a peer can send: every input
 * is refused with a reason or accepted with the limits proto.h promises
 * (a hello's sizes and credits in range; a frame's type and flags known,
 * its body inside the buffer, a control body of its exact size, DATA no
 * longer than the limit), and what is accepted encodes back to the same
 * fields. Nothing reads outside the input (ASan in the sanitizer build
 * and in libFuzzer).
 *
 * Input: byte 0 picks the decoder (0: hello, 1: reject hello, else a SEND
 * buffer of frames whose DATA limit byte 0 also picks), the rest is what
 * the peer sent.
 */
#include <string.h>

#include <be/be.h>
#include "engine/proto.h"
#include "fuzz/fuzz.h"
#include "test.h"

static unsigned long n_ok, n_refused, n_frames;

static void hello_one(const uint8_t *p, size_t n, int is_reject)
{
	struct be__hello h, h2;
	uint8_t enc[BE_PROTO_HELLO_LEN];
	const char *why = NULL;
	int rc = be__hello_decode(p, n, is_reject, &h, &why);

	if (rc) {
		ASSERT(rc >= BE_REJECT_BAD_HELLO && rc <= BE_REJECT_PARAMS);
		ASSERT(why && why[0]);
		n_refused++;
		return;
	}
	ASSERT(n >= BE_PROTO_HELLO_LEN);
	ASSERT_EQ(h.magic, BE_PROTO_MAGIC);
	ASSERT_EQ(h.version, BE_PROTO_VERSION);
	if (!is_reject) {
		ASSERT(h.recv_buf_size >= BE_PROTO_MIN_RECV_BUF &&
		       h.recv_buf_size <= BE_PROTO_MAX_RECV_BUF && h.recv_buf_size % BE_FRAME_ALIGN == 0);
		ASSERT(h.credits >= BE_PROTO_MIN_CREDITS && h.credits <= BE_PROTO_MAX_CREDITS);
		ASSERT(h.max_sockets > 0 && h.max_msg_size > 0 && h.reason == 0 &&
		       !(h.flags & ~BE_HELLO_F_ALL) && h.sock_window >= BE_PROTO_MIN_SOCK_WINDOW);
	}
	be__hello_encode(&h, enc);
	ASSERT_EQ(be__hello_decode(enc, sizeof(enc), is_reject, &h2, &why), 0);
	ASSERT(!memcmp(&h, &h2, sizeof(h)));
	n_ok++;
}

static void frame_check(const struct be__frame *f, const uint8_t *buf, size_t len,
			uint32_t max_data)
{
	uint8_t enc[BE_FRAME_HDR + 64];
	struct be__frame g;
	const char *why = NULL;
	size_t off = 0;

	ASSERT(f->type >= 1 && f->type <= BE_FR_MAX_TYPE);
	ASSERT_EQ(f->flags & ~BE_FRF_ALL, 0);
	ASSERT(f->body >= buf + BE_FRAME_HDR && f->body + f->len <= buf + len);
	if (f->type == BE_FR_DATA) {
		ASSERT_LE(f->len, max_data);
		return;
	}
	ASSERT_EQ(f->len, be__frame_body_len(f->type));
	/* A control frame re-encoded from its decoded fields decodes the same. */
	ASSERT_LE(be__frame_size(f->len), sizeof(enc));
	ASSERT_EQ(be__frame_encode(enc, f, NULL), be__frame_size(f->len));
	ASSERT_EQ(be__frame_next(enc, be__frame_size(f->len), &off, max_data, &g, &why), 1);
	ASSERT(g.type == f->type && g.flags == f->flags && g.credits == f->credits &&
	       g.sock == f->sock && g.msg == f->msg && g.len == f->len && g.status == f->status &&
	       g.length == f->length && g.addr == f->addr && g.rkey == f->rkey &&
	       g.token == f->token && g.count == f->count &&
	       (f->type != BE_FR_AUTH || !memcmp(g.auth, f->auth, BE_AUTH_BODY)));
}

static void frames_one(const uint8_t *p, size_t n, uint32_t max_data)
{
	struct be__frame f;
	const char *why = NULL;
	size_t off = 0, prev;
	int rc;

	for (;;) {
		prev = off;
		rc = be__frame_next(p, n, &off, max_data, &f, &why);
		if (rc != 1)
			break;
		ASSERT(off > prev && off <= n);
		frame_check(&f, p, n, max_data);
		n_frames++;
	}
	if (rc == 0) {
		ASSERT_EQ(off, n);
		n_ok++;
	} else {
		ASSERT_EQ(rc, BE_EPROTO_PEER);
		ASSERT(why && why[0]);
		ASSERT_LE(off, n);
		n_refused++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* DATA limits of real configurations: recv_buf_size - header. */
	static const uint32_t max_data[] = { 256 - BE_FRAME_HDR, 8192 - BE_FRAME_HDR,
					     (1u << 16) - BE_FRAME_HDR };
	uint8_t *copy;

	if (!size)
		return 0;
	copy = fuzz_body(data, size, 1);
	if (data[0] == 0 || data[0] == 1)
		hello_one(copy, size - 1, data[0]);
	else
		frames_one(copy, size - 1, max_data[data[0] % 3]);
	free(copy);
	return 0;
}

/* ---- seeds: real hellos and SEND buffers, from the encoders ---- */

static void put_hello(void (*put)(const char *, const char *, const void *, size_t),
		      const char *dir, const char *name, uint8_t kind, const struct be__hello *h)
{
	uint8_t b[1 + BE_PROTO_HELLO_LEN];

	b[0] = kind;
	be__hello_encode(h, b + 1);
	put(dir, name, b, sizeof(b));
}

void fuzz_seeds(void (*put)(const char *dir, const char *name, const void *p, size_t n),
		const char *dir)
{
	struct be__hello h = {
		.magic = BE_PROTO_MAGIC, .version = BE_PROTO_VERSION, .recv_buf_size = 8192,
		.eager_max = 4096, .credits = 8, .max_sockets = 65536, .max_msg_size = 1u << 30,
		.keepalive_ms = 1000, .sock_window = 16u << 20,
	};
	struct be__hello r = { .magic = BE_PROTO_MAGIC, .version = BE_PROTO_VERSION,
			       .reason = BE_REJECT_RESOURCES };
	static const char payload[] = "a small eager message";
	static const uint8_t auth[BE_AUTH_BODY] = { 1, 2, 3, [BE_AUTH_BODY - 1] = 0xff };
	const struct be__frame frames[] = {
		{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 3 },
		{ .type = BE_FR_DATA, .flags = BE_FRF_OPENER, .credits = 2, .sock = 3, .msg = 0,
		  .len = sizeof(payload) - 1 },
		{ .type = BE_FR_SOCK_OPEN_ACK, .sock = 4, .status = -111 },
		{ .type = BE_FR_SOCK_CLOSE, .flags = BE_FRF_ACK, .sock = 3 },
		{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 3, .msg = 1,
		  .length = 1 << 20 },
		{ .type = BE_FR_WRITE_RESP, .sock = 3, .msg = 1, .addr = 0x7f0000001000ull,
		  .length = 1 << 20, .rkey = 0x1234, .token = 0x00100001 },
		{ .type = BE_FR_WRITE_NOMEM, .sock = 3, .msg = 1, .length = 1 << 20 },
		{ .type = BE_FR_CREDIT, .credits = 5 },
		{ .type = BE_FR_KEEPALIVE, .flags = BE_FRF_REPLY_REQ },
		{ .type = BE_FR_CREDIT_GROW, .count = 8 },
		{ .type = BE_FR_CREDIT_REVOKE, .count = 4 },
		{ .type = BE_FR_CREDIT_RELEASE, .flags = BE_FRF_STARVED, .count = 4 },
		{ .type = BE_FR_AUTH, .msg = BE_AUTH_PROOF, .auth = auth },
		{ .type = BE_FR_WRITE_ONEWAY, .flags = BE_FRF_OPENER, .sock = 3, .msg = 2,
		  .length = 65536, .token = 5 },
		{ .type = BE_FR_ONEWAY_BUDGET, .length = 32u << 20 },
	};
	uint8_t buf[1 + 4096];
	char name[32];
	size_t n, i;

	put_hello(put, dir, "hello-connect", 0, &h);
	h.flags = BE_HELLO_F_AUTH;
	put_hello(put, dir, "hello-connect-auth", 0, &h);
	h.flags = 0;
	h.credits = 64;
	h.recv_buf_size = 65536;
	put_hello(put, dir, "hello-accept", 0, &h);
	put_hello(put, dir, "hello-reject", 1, &r);
	/* Each frame alone, then all of them in one SEND buffer. */
	buf[0] = 4; /* frames, DATA limit 8176 */
	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		n = be__frame_encode(buf + 1, &frames[i], payload);
		snprintf(name, sizeof(name), "frame-%02zu-%s", i, be__frame_type_str(frames[i].type));
		put(dir, name, buf, 1 + n);
	}
	for (n = 1, i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
		n += be__frame_encode(buf + n, &frames[i], payload);
	put(dir, "frames-batch", buf, n);
}

void fuzz_summary(unsigned long iters)
{
	printf("engine-proto: %lu accepted, %lu refused, %lu frames decoded\n", n_ok, n_refused,
	       n_frames);
	/* Both outcomes occur, or the mutations test nothing. */
	ASSERT_GT(n_refused, iters / 10);
	ASSERT_GT(n_ok, iters / 100);
}
