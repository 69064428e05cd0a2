/*
 * Check that the wire protocol round-trips every frame type and that the
 * decoder rejects every malformed input (truncation, unknown types and
 * flags, wrong body sizes, oversize DATA, bad handshakes) with
 * BE_EPROTO_PEER or a reject reason, never reading past the buffer.
 */
#include <be/be.h>
#include "engine/proto.h"
#include "test.h"

static void test_hello(void)
{
	struct be__hello h = {
		.magic = BE_PROTO_MAGIC, .version = BE_PROTO_VERSION, .recv_buf_size = 8192,
		.eager_max = 4096, .credits = 64, .max_sockets = 1000, .max_msg_size = 1 << 30,
		.keepalive_ms = 1000, .sock_window = 1u << 24,
	}, d, bad;
	uint8_t buf[BE_PROTO_HELLO_LEN];
	const char *why = NULL;

	be__hello_encode(&h, buf);
	ASSERT_EQ(be__hello_decode(buf, sizeof(buf), 0, &d, &why), 0);
	ASSERT_EQ(d.recv_buf_size, 8192);
	ASSERT_EQ(d.credits, 64);
	ASSERT_UEQ(d.max_msg_size, 1u << 30);
	ASSERT_UEQ(d.sock_window, 1u << 24);
	ASSERT_EQ(be__hello_decode(buf, sizeof(buf) - 1, 0, &d, &why), BE_REJECT_BAD_HELLO);
	ASSERT_EQ(be__hello_decode(NULL, 0, 0, &d, &why), BE_REJECT_BAD_HELLO);

	/* @h with one field changed decodes to reject reason @want. */
#define HELLO_BAD(field, value, want)                                                     \
	do {                                                                              \
		bad = h;                                                                  \
		bad.field = (value);                                                      \
		be__hello_encode(&bad, buf);                                              \
		ASSERT_EQ(be__hello_decode(buf, sizeof(buf), 0, &d, &why), (want));       \
	} while (0)
	HELLO_BAD(magic, h.magic ^ 1, BE_REJECT_BAD_HELLO);
	HELLO_BAD(version, 99, BE_REJECT_VERSION);
	HELLO_BAD(credits, 1, BE_REJECT_PARAMS);
	HELLO_BAD(recv_buf_size, 100, BE_REJECT_PARAMS);
	HELLO_BAD(recv_buf_size, 8193, BE_REJECT_PARAMS);
	HELLO_BAD(sock_window, BE_PROTO_MIN_SOCK_WINDOW - 1, BE_REJECT_PARAMS);
#undef HELLO_BAD
	/* A reject carries a reason and only magic/version are checked. */
	bad = (struct be__hello){ .magic = BE_PROTO_MAGIC, .version = BE_PROTO_VERSION,
				  .reason = BE_REJECT_RESOURCES };
	be__hello_encode(&bad, buf);
	ASSERT_EQ(be__hello_decode(buf, sizeof(buf), 1, &d, &why), 0);
	ASSERT_EQ(d.reason, BE_REJECT_RESOURCES);
	ASSERT_NE(be__hello_decode(buf, sizeof(buf), 0, &d, &why), 0);
}

static void test_roundtrip(void)
{
	uint8_t buf[1024];
	struct be__frame in[6] = {
		{ .type = BE_FR_DATA, .flags = BE_FRF_OPENER, .credits = 7, .sock = 3, .msg = 9, .len = 5 },
		{ .type = BE_FR_WRITE_REQ, .sock = 4, .msg = 1, .length = 1ull << 33 },
		{ .type = BE_FR_WRITE_RESP, .sock = 4, .msg = 1, .addr = 0x1234567890ull,
		  .length = 77, .rkey = 0xdeadbeef, .token = 0x00300005 },
		{ .type = BE_FR_SOCK_CLOSE, .flags = BE_FRF_ACK, .sock = 65535, .status = -5 },
		{ .type = BE_FR_KEEPALIVE, .flags = BE_FRF_REPLY_REQ, .credits = 65535 },
		{ .type = BE_FR_DATA, .sock = 1, .msg = 0, .len = 0 },
	};
	struct be__frame f;
	const char *why = NULL;
	size_t off = 0, len = 0;
	int i;

	for (i = 0; i < 6; i++)
		len += be__frame_encode(buf + len, &in[i], "hello");
	ASSERT_EQ(len % BE_FRAME_ALIGN, 0);
	for (i = 0; i < 6; i++) {
		ASSERT_EQ(be__frame_next(buf, len, &off, 4096, &f, &why), 1);
		ASSERT_EQ(f.type, in[i].type);
		ASSERT_EQ(f.flags, in[i].flags);
		ASSERT_EQ(f.credits, in[i].credits);
		ASSERT_EQ(f.sock, in[i].sock);
		ASSERT_EQ(f.msg, in[i].msg);
		ASSERT_UEQ(f.length, in[i].length);
		ASSERT_UEQ(f.addr, in[i].addr);
		ASSERT_EQ(f.rkey, in[i].rkey);
		ASSERT_EQ(f.token, in[i].token);
		ASSERT_EQ(f.status, in[i].status);
	}
	ASSERT_EQ(be__frame_next(buf, len, &off, 4096, &f, &why), 0);
	off = 0;
	ASSERT_EQ(be__frame_next(buf, len, &off, 4096, &f, &why), 1);
	ASSERT(memcmp(f.body, "hello", 5) == 0);
	ASSERT_EQ(be__token_slot(be__token_make(5, 3)), 5);
	ASSERT_EQ(be__token_gen(be__token_make(5, 3)), 3);
}

static void expect_bad(const uint8_t *buf, size_t len, uint32_t max_data)
{
	struct be__frame f;
	const char *why = NULL;
	size_t off = 0;
	int rc;

	while ((rc = be__frame_next(buf, len, &off, max_data, &f, &why)) == 1)
		;
	ASSERT_EQ(rc, BE_EPROTO_PEER);
	ASSERT(why && *why);
}

static void test_malformed(void)
{
	uint8_t buf[256], tmp[256];
	struct be__frame d = { .type = BE_FR_DATA, .sock = 1, .len = 40 };
	struct be__frame c = { .type = BE_FR_WRITE_RESP, .sock = 1 };
	uint32_t n;
	size_t i;

	memset(tmp, 0xab, sizeof(tmp));
	n = be__frame_encode(buf, &d, tmp);
	/* Every truncation of a frame is rejected. */
	for (i = 1; i < BE_FRAME_HDR + 40; i++)
		expect_bad(buf, i, 4096);
	/* DATA above the limit. */
	expect_bad(buf, n, 39);
	/* Unknown type, zero type, unknown flags. */
	memcpy(tmp, buf, n);
	tmp[0] = BE_FR_MAX_TYPE + 1;
	expect_bad(tmp, n, 4096);
	tmp[0] = 0;
	expect_bad(tmp, n, 4096);
	memcpy(tmp, buf, n);
	tmp[1] = 0x80;
	expect_bad(tmp, n, 4096);
	/* A control frame whose length field disagrees with its type. */
	n = be__frame_encode(buf, &c, NULL);
	memcpy(tmp, buf, n);
	tmp[12] = 8;
	expect_bad(tmp, n, 4096);
	/* A huge length field never reads past the buffer. */
	memcpy(tmp, buf, n);
	tmp[0] = BE_FR_DATA;
	tmp[12] = tmp[13] = tmp[14] = tmp[15] = 0xff;
	expect_bad(tmp, n, UINT32_MAX);
	/* Random garbage: decoding terminates with 0 or an error. */
	srand(1);
	for (i = 0; i < 20000; i++) {
		struct be__frame f;
		const char *why;
		size_t off = 0, len = (size_t)(rand() % 128);
		size_t k;
		int rc;

		for (k = 0; k < len; k++)
			tmp[k] = (uint8_t)rand();
		if (len)
			tmp[0] = (uint8_t)(1 + rand() % BE_FR_MAX_TYPE);
		while ((rc = be__frame_next(tmp, len, &off, 64, &f, &why)) == 1)
			ASSERT(off <= len);
		ASSERT(rc == 0 || rc == BE_EPROTO_PEER);
	}
}

int main(void)
{
	test_hello();
	test_roundtrip();
	test_malformed();
	return 0;
}
