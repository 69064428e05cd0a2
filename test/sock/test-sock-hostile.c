/*
 * Check that a hostile peer cannot crash or corrupt the core: a raw
 * transport-level peer (no BE core, just xport ops) connects to a BE
 * listener and sends malformed traffic, one case per connection: a bad
 * handshake (rejected with a reason), frames for unknown sockets, unknown
 * types, truncated frames, returned credits it never received, credit
 * grants, revokes and releases out of bounds, more SENDs than it was
 * granted, a message id out of sequence, a WriteResponse
 * for nothing, a WRITE_WITH_IMM with a forged token, eager messages
 * beyond the socket receive window behind an unfinished large one, and a
 * WriteRequest repeated before its "no memory" answer was sent. KEEPALIVEs
 * asking for an answer, hundreds to a SEND, get one answer queued at a
 * time, not one each. On tcp, one-way large messages (WRITE_ONEWAY) stay
 * within the budget the server announced: one beyond it is a protocol
 * error, and the budgets of three peers together stay within the
 * worker's bound on bytes lent to peers, the third getting none. Requests
 * for more memory than max_grant_bytes are answered "no memory" (bounded,
 * not an error), and one repeated after that answer arrived is answered
 * again. Each violation must fail
 * only that Engine (protocol error logged and counted, connection
 * dropped), never the process, and the server keeps serving.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/proto.h"
#include "raw.h"
#include "stest.h"
#include "util/common.h"
#include "xport/xport.h"

static struct be_worker *w;
static int proto_logs;

static void log_fn(int level, const char *msg)
{
	if (strstr(msg, "protocol error"))
		proto_logs++;
}

static void expect_protocol_error(const char *what)
{
	int before = proto_logs;

	st_pump(&w, 1, cond_dead, NULL);
	raw.ops->conn_destroy(raw.conn);
	raw.conn = NULL;
	if (proto_logs == before)
		TEST_FAIL("%s: no protocol error logged", what);
	fprintf(stderr, "rejected: %s\n", what);
}

/* One-way data (an RX_ALLOC write, xport.h) on @c: bytes [@off, @off+@n)
 * of the @total bytes at @src into slot @slot; @last: the WRITE_WITH_IMM
 * that ends the message. */
static void ow_write(struct be_xconn *c, uint8_t *src, uint64_t total, uint64_t off, uint32_t n,
		     uint32_t slot, bool last)
{
	struct be_xsge sge = { .addr = (uintptr_t)src + off, .length = n };
	struct be_xsend_wr wr = {
		.opcode = last ? BE_XWR_WRITE_IMM : BE_XWR_WRITE, .flags = BE_XWR_F_RX_ALLOC,
		.sg_list = &sge, .num_sge = 1, .remote_addr = off, .rkey = slot,
		/* The first write says how much to allocate, the last names
		 * the slot. */
		.imm = last ? slot : (uint32_t)total,
	}, *bad;

	sge.lkey = raw_lkey(src, NULL);
	ASSERT_OK(raw.ops->post_send(c, &wr, &bad));
}

/* A raw peer that announces ONEWAY connects to @addr and waits for the
 * server's ONEWAY_BUDGET, or (@none) for the answer to a WRITE_REQ of
 * socket 0, behind which the budget would have come. Returns the budget. */
static uint64_t ow_connect(const char *addr, bool none)
{
	raw.hello_flags = BE_HELLO_F_ONEWAY;
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	raw.hello_flags = 0;
	ASSERT(raw.established);
	if (none) {
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = 65536 },
		};

		raw_send_frames(f, 2, NULL);
		st_pump(&w, 1, cond_resp, NULL);
		ASSERT(!raw.dead);
		ASSERT_EQ(raw.nresp, 1);
		return raw.ow_conn == raw.conn ? raw.ow_budget : 0;
	}
	st_pump(&w, 1, cond_budget, NULL);
	ASSERT(!raw.dead);
	return raw.ow_budget;
}

static uint64_t stat_u64(struct be_worker *wk, const char *key)
{
	char buf[16384], pat[64];
	const char *p;

	ASSERT_GT(be_worker_stats_json(wk, buf, sizeof(buf)), 0);
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(buf, pat);
	ASSERT(p);
	return strtoull(p + strlen(pat), NULL, 10);
}

/* A peer sends one-way data within the budget (delivered), then beyond
 * it, with the data still to come: a protocol error, never a buffer; and
 * data beyond it with no frame: its connection fails. */
static void oneway_beyond(const char *addr, struct st_server *srv, uint64_t max_grant)
{
	uint64_t b = ow_connect(addr, false);
	int before = srv->recvd;
	uint8_t *src;

	/* An eighth of max_grant_bytes (oneway.c). */
	ASSERT_UEQ(b, max_grant / 8);
	src = be_alloc(b);
	ASSERT(src);
	memset(src, 0x5a, b);
	{
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_ONEWAY, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = b, .token = 0 },
		};

		raw_send_frames(f, 2, NULL);
		ow_write(raw.conn, src, b, 0, (uint32_t)b, 0, true);
		/* The raw end polled too: on shm its data goes as the ring frees. */
		ST_PUMP_WHILE(&w, 1, srv->recvd == before && (raw_poll(), !raw.dead));
		ASSERT(!raw.dead);
		ASSERT_EQ(srv->recvd, before + 1);
	}
	{
		struct be__frame f[2] = {
			{ .type = BE_FR_WRITE_ONEWAY, .flags = BE_FRF_OPENER, .sock = 0, .msg = 1,
			  .length = b / 2, .token = 1 },
			{ .type = BE_FR_WRITE_ONEWAY, .flags = BE_FRF_OPENER, .sock = 0, .msg = 2,
			  .length = b / 2 + 8, .token = 2 },
		};

		raw_send_frames(f, 2, NULL);
	}
	expect_protocol_error("WRITE_ONEWAY beyond the budget announced");

	/* Data with no WRITE_ONEWAY at all, for a message longer than the
	 * budget: the transport is refused a buffer, the connection fails,
	 * nothing is allocated. */
	ASSERT_UEQ(ow_connect(addr, false), b);
	ow_write(raw.conn, src, b + 4096, 0, 4096, 7, false);
	st_pump(&w, 1, cond_dead, NULL);
	raw.ops->conn_destroy(raw.conn);
	raw.conn = NULL;
	fprintf(stderr, "rejected: one-way data beyond the budget without its frame\n");
	be_free(src);
}

/* Three peers on a worker that lends 3 MiB at most: the first gets a
 * budget of 1 MiB (an eighth of max_grant_bytes), the second what is
 * left of half the bound, the third none, and is cut when it sends
 * one-way all the same; the two fill their budgets with messages in
 * progress while the worker never lends more than its bound. */
static void oneway_three(struct st *t)
{
	enum { W = 3u << 20, HEAD = 4096 };
	struct st_server srv = { 0 };
	struct be_worker *w0 = w;
	struct be_listener *l;
	struct be_config cfg;
	struct be_ctx *ctx;
	struct be_xconn *c[3];
	uint64_t b[3], lent;
	uint8_t *src[2];
	char addr[160];
	int i;

	st_config_init(&cfg);
	cfg.credits = 8;
	cfg.max_grant_bytes = 8u << 20;
	cfg.max_worker_grant_bytes = W;
	ASSERT_OK(be_ctx_create(&cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	raw.w = w;
	ASSERT_OK(be_listen(w, st_listen_addr(t), &st_server_cbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));

	for (i = 0; i < 3; i++) {
		b[i] = ow_connect(addr, i == 2);
		c[i] = raw.conn;
	}
	ASSERT_UEQ(b[0], 1u << 20);
	ASSERT_UEQ(b[1], W / 2 - b[0]);
	ASSERT_UEQ(b[2], 0);
	/* The third's WRITE_REQ was granted beside the budgets (one grant
	 * always fits while the worker lends nothing but budgets). */
	ASSERT_EQ(be_worker_engine_count(w), 3);

	/* The first two open a message each of their whole budget and send
	 * its first bytes: the server allocates the whole of it now. */
	for (i = 0; i < 2; i++) {
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_ONEWAY, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = b[i], .token = 3 },
		};

		src[i] = be_alloc(b[i]);
		ASSERT(src[i]);
		memset(src[i], 0x30 + i, b[i]);
		raw.conn = c[i];
		raw_send_frames(f, 2, NULL);
		ow_write(c[i], src[i], b[i], 0, HEAD, 3, false);
	}
	/* The third sends one-way with no budget: cut alone. */
	{
		struct be__frame f = { .type = BE_FR_WRITE_ONEWAY, .flags = BE_FRF_OPENER,
				       .sock = 0, .msg = 1, .length = 65536, .token = 0 };
		int before = proto_logs;

		raw.conn = c[2];
		raw_send_frames(&f, 1, NULL);
		ST_PUMP_WHILE(&w, 1, be_worker_engine_count(w) > 2 && (raw_poll(), true));
		ASSERT(proto_logs > before);
		raw.ops->conn_destroy(c[2]);
	}
	lent = stat_u64(w, "grant_bytes_max");
	fprintf(stderr, "budgets %llu + %llu + %llu; the worker lent %llu at most (bound %u)\n",
		(unsigned long long)b[0], (unsigned long long)b[1], (unsigned long long)b[2],
		(unsigned long long)lent, (unsigned)W);
	ASSERT(lent <= W);
	/* The rest of the two messages: delivered, the Engines alive. */
	for (i = 0; i < 2; i++)
		ow_write(c[i], src[i], b[i], HEAD, (uint32_t)(b[i] - HEAD), 3, true);
	ST_PUMP_WHILE(&w, 1, srv.recvd < 2 && (raw_poll(), true));
	ASSERT_EQ(be_worker_engine_count(w), 2);
	ASSERT_UEQ(srv.bytes, b[0] + b[1]);
	for (i = 0; i < 2; i++) {
		raw.ops->conn_destroy(c[i]);
		be_free(src[i]);
	}
	raw.conn = NULL;
	st_pump(&w, 1, cond_no_engine, NULL);
	/* Reaped: the budgets went back. */
	ASSERT_UEQ(stat_u64(w, "grant_bytes"), 0);

	st_server_close(&srv, l);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	w = w0;
	raw.w = w;
}

int main(int argc, char **argv)
{
	struct st_server srv = { 0 };
	struct be_listener *l;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;
	uint8_t junk[64];
	int i;

	st_init(&t, argc, argv);
	t.cfg.credits = 8;
	t.cfg.max_grant_bytes = 8u << 20;
	be_log_set_fn(log_fn);
	raw_serve(&t, &srv, &ctx, &w, &l, addr, sizeof(addr));

	/* A bad handshake is rejected with its reason. */
	raw_connect(addr, 0x12345678, 8);
	ASSERT(raw.rejected);
	ASSERT_EQ(raw.reject_reason, BE_REJECT_BAD_HELLO);
	ASSERT_EQ(be_worker_engine_count(w), 0);
	raw.ops->conn_destroy(raw.conn);

	/* DATA for a socket that was never opened. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	ASSERT(raw.established);
	{
		struct be__frame f = { .type = BE_FR_DATA, .flags = BE_FRF_OPENER, .sock = 5, .len = 3 };

		raw_send_frames(&f, 1, "abc");
	}
	expect_protocol_error("DATA for an unknown socket");

	/* An unknown frame type. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	memset(junk, 0, sizeof(junk));
	junk[0] = 42;
	raw_send(junk, 16);
	expect_protocol_error("unknown frame type");

	/* A frame whose length runs past the SEND. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f = { .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER };
		uint8_t b[64];
		uint32_t n = be__frame_encode(b, &f, NULL);

		b[12] = 200; /* len */
		b[0] = BE_FR_DATA;
		raw_send(b, n);
	}
	expect_protocol_error("truncated frame");

	/* Credits returned that were never spent. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f = { .type = BE_FR_CREDIT, .credits = 100 };

		raw_send_frames(&f, 1, NULL);
	}
	expect_protocol_error("credit overflow");

	/* Elastic grants: a grant pushed beyond 65535, a release nobody
	 * asked for, a revoke below the smallest grant, a credit frame that
	 * names a socket. */
	{
		static const struct be__frame bad[] = {
			{ .type = BE_FR_CREDIT_GROW, .count = 65535 },
			{ .type = BE_FR_CREDIT_GROW, .count = 0 },
			{ .type = BE_FR_CREDIT_RELEASE, .count = 1 },
			{ .type = BE_FR_CREDIT_REVOKE, .count = 29 }, /* of the 32 raw_connect grants */
			{ .type = BE_FR_CREDIT_REVOKE, .count = 0 },
			{ .type = BE_FR_CREDIT_GROW, .sock = 3, .count = 1 },
		};
		static const char *const what[] = {
			"CREDIT_GROW beyond 65535", "CREDIT_GROW of 0", "CREDIT_RELEASE unasked",
			"CREDIT_REVOKE below the minimum grant", "CREDIT_REVOKE of 0",
			"credit frame naming a socket",
		};

		for (i = 0; i < (int)BE_ARRAY_SIZE(bad); i++) {
			struct be__frame f = bad[i];

			raw_connect(addr, BE_PROTO_MAGIC, 8);
			raw_send_frames(&f, 1, NULL);
			expect_protocol_error(what[i]);
		}
	}

	/* More SENDs than the 8 credits granted, before any came back. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	for (i = 0; i < 9; i++) {
		struct be__frame f = { .type = BE_FR_KEEPALIVE };

		raw_send_frames(&f, 1, NULL);
	}
	expect_protocol_error("receives beyond the credits granted");

	/* A message id out of sequence. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 1 },
			{ .type = BE_FR_DATA, .flags = BE_FRF_OPENER, .sock = 1, .msg = 7, .len = 3 },
		};

		raw_send_frames(f, 2, "xyz");
	}
	expect_protocol_error("message id out of sequence");

	/* A WriteResponse nobody asked for. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_RESP, .flags = BE_FRF_OPENER, .sock = 0, .msg = 3,
			  .addr = 4096, .length = 10, .rkey = 1, .token = 1 },
		};

		raw_send_frames(f, 2, NULL);
	}
	expect_protocol_error("WRITE_RESP without a request");

	/* Requests for more memory than max_grant_bytes: the excess is
	 * answered "no memory" (not a protocol error: the peer may retry). */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f[13] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
		};

		for (i = 1; i < 13; i++)
			f[i] = (struct be__frame){ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER,
						   .sock = 0, .msg = (uint32_t)(i - 1),
						   .length = 1u << 20 };
		raw_send_frames(f, 13, NULL);
		st_pump(&w, 1, cond_answers, (void *)(intptr_t)12);
		ASSERT(!raw.dead);
		ASSERT_EQ(raw.nresp, 8);
		ASSERT_EQ(raw.nnomem, 4);
		ASSERT_EQ(be_worker_engine_count(w), 1);
		/* A request repeated once its "no memory" arrived is answered
		 * again (its record reused, nothing added). */
		raw_send_frames(&f[12], 1, NULL);
		st_pump(&w, 1, cond_answers, (void *)(intptr_t)13);
		ASSERT(!raw.dead);
		ASSERT_EQ(raw.nnomem, 5);
		raw_hang_up();
		fprintf(stderr, "bounded: 8 MiB granted, 4 requests answered no-memory\n");
	}

	/* A request repeated before our "no memory" answer left: the peer
	 * cannot have seen it, and every repeat would queue one more answer.
	 * (8 MiB granted to message 0, message 1 does not fit beside it.) */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f[4] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = 8u << 20 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 1,
			  .length = 1u << 20 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 1,
			  .length = 1u << 20 },
		};

		raw_send_frames(f, 4, NULL);
	}
	expect_protocol_error("WRITE_REQ repeated before its WRITE_NOMEM was sent");

	/* The socket receive window: behind a large message that never
	 * completes, eager messages are held; up to sock_window (each counted
	 * as its length + 64) they are the peer's right, one more is a
	 * protocol error, never a queue that grows without bound. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		enum { N = 14, LEN = 24 };
		uint64_t win = be_ctx_config(ctx)->sock_window;
		uint64_t big = win - be__sock_win_charge(0) - N * be__sock_win_charge(LEN);
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = big },
		};
		struct be__frame d[8];
		static char payload[LEN];
		int k, sent = 0;

		raw_send_frames(f, 2, NULL);
		st_pump(&w, 1, cond_resp, NULL);
		/* 14 eager messages fill the window exactly, 7 to an inline
		 * SEND. */
		for (k = 0; k < 2; k++) {
			for (i = 0; i < 7; i++)
				d[i] = (struct be__frame){ .type = BE_FR_DATA, .flags = BE_FRF_OPENER,
							   .sock = 0, .msg = (uint32_t)(1 + sent++),
							   .len = LEN };
			raw_send_frames(d, 7, payload);
		}
		st_pump_ms(&w, 1, 50);
		raw_poll();
		ASSERT(!raw.dead);
		ASSERT_EQ(be_worker_engine_count(w), 1);
		d[0] = (struct be__frame){ .type = BE_FR_DATA, .flags = BE_FRF_OPENER, .sock = 0,
					   .msg = (uint32_t)(1 + sent), .len = LEN };
		raw_send_frames(d, 1, payload);
	}
	expect_protocol_error("eager messages beyond the socket receive window");

	/* ... and large ones: a request that does not fit beside what the
	 * socket holds (granted or not) is refused the same way. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		uint64_t win = be_ctx_config(ctx)->sock_window;
		struct be__frame f[3] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = win / 2 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 1,
			  .length = win / 2 },
		};

		raw_send_frames(f, 3, NULL);
	}
	expect_protocol_error("a WRITE_REQ beyond the socket receive window");

	/* A WRITE_WITH_IMM whose token names no grant (a real grant exists,
	 * the generation is forged). */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = 100000 },
		};
		uint8_t *src = be_alloc(100000);
		struct be_xsge sge = { .addr = (uintptr_t)src, .length = 100 };
		struct be_xsend_wr wr = { .opcode = BE_XWR_WRITE_IMM, .sg_list = &sge, .num_sge = 1 },
				   *bad;

		raw_send_frames(f, 2, NULL);
		st_pump(&w, 1, cond_resp, NULL);
		ASSERT_EQ(raw.nresp, 1);
		ASSERT_UEQ(raw.resp.length, 100000);
		sge.lkey = raw_lkey(src, NULL);
		wr.remote_addr = raw.resp.addr;
		wr.rkey = raw.resp.rkey;
		wr.imm = raw.resp.token + (1u << BE_TOKEN_SLOT_BITS); /* wrong generation */
		ASSERT_OK(raw.ops->post_send(raw.conn, &wr, &bad));
		expect_protocol_error("forged WRITE_WITH_IMM token");
		be_free(src);
	}

	/* KEEPALIVEs that ask for an answer, 60 to a SEND: one answer waits
	 * at a time (it answers every request before it leaves), not one
	 * per frame, so the peer cannot make our control queue outgrow its
	 * credits. A WRITE_REQ after them is answered behind whatever was
	 * queued for them, so once its WRITE_RESP is here every answer is. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	{
		enum { PER = 60, SENDS = 6 };
		static struct be__frame ka[PER];
		struct be__frame f[2] = {
			{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
			{ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER, .sock = 0, .msg = 0,
			  .length = 100000 },
		};

		for (i = 0; i < PER; i++)
			ka[i] = (struct be__frame){ .type = BE_FR_KEEPALIVE,
						    .flags = BE_FRF_REPLY_REQ };
		for (i = 0; i < SENDS; i++)
			raw_send_frames(ka, PER, NULL);
		raw_send_frames(f, 2, NULL);
		st_pump(&w, 1, cond_resp, NULL);
		ASSERT(!raw.dead);
		ASSERT_EQ(raw.nresp, 1);
		ASSERT_GT(raw.nka, 0);
		/* One per SEND at most, and our own keepalives besides. */
		if (raw.nka > SENDS + 2)
			TEST_FAIL("%d KEEPALIVE answers to %d requests in %d SENDs", raw.nka,
				  PER * SENDS, SENDS);
		fprintf(stderr, "bounded: %d KEEPALIVEs answered %d requests\n", raw.nka,
			PER * SENDS);
		raw_hang_up();
	}

	/* One-way large messages and their budgets (tcp, shm). */
	if (strcmp(t.transport, "verbs") != 0) {
		oneway_beyond(addr, &srv, t.cfg.max_grant_bytes);
		oneway_three(&t);
	}

	/* The server is still healthy: a well-behaved client works. */
	{
		struct be_worker *wc;
		struct be_sock *s;
		struct st_sends sends = { 0 };
		struct be_worker *both[2];

		ASSERT_OK(be_worker_create(ctx, &wc));
		both[0] = w;
		both[1] = wc;
		ASSERT_OK(be_sock_connect(wc, addr, NULL, NULL, &s));
		ASSERT_OK(be_sock_send(s, st_msg(1000, 1), 1000, st_send_cb, &sends));
		ST_PUMP_WHILE(both, 2, srv.recvd < 1 || sends.done < 1);
		ASSERT_EQ(sends.ok, 1);
		be_sock_close(s);
		/* wc's close waits for w's answer: progress w meanwhile. */
		while (be_worker_shutdown(wc, 0))
			ASSERT_OK(be_worker_progress(w));
		be_worker_destroy(wc);
	}

	raw_serve_end(ctx, &srv, l);
	be_log_set_fn(NULL);
	return 0;
}
