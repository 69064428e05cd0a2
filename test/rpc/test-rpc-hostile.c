/*
 * Check hostile peers on both sides. A raw Socket client sends an RPC
 * server bytes that are not our header (the server hangs up), a header
 * with a bad field (answered BE_EPROTO_PEER with the request's id, and the
 * socket goes on serving), a reply where requests belong (hang up), and
 * thousands of random and mutated messages; the server survives, counts
 * them, and still serves a real client. A raw Socket server answers an
 * RPC client with a reply to an id never issued, a reply naming another
 * method, garbage, a request, and a valid reply twice: each call
 * completes exactly once (BE_EPROTO_PEER, or the reply once and the
 * duplicate counted as late), never with someone else's data.
 */
#include <string.h>

#include "rtest.h"

static struct be_worker *ws[2];

/* ---- raw client */

struct raw {
	struct be_sock *s;
	int closed;
	int nrecv;
	struct be_rpc_hdr last;
	int decode_rc;
};

static void raw_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct raw *r = user;

	r->nrecv++;
	r->decode_rc = be_rpc_hdr_decode(buf, len, &r->last, NULL);
	be_free(buf);
}

static void raw_close(struct be_sock *s, int reason, void *user)
{
	((struct raw *)user)->closed++;
}

static const struct be_sock_cbs raw_cbs = { .on_recv = raw_recv, .on_close = raw_close };

static void free_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	be_free(buf);
}

static void raw_send(struct raw *r, const void *bytes, size_t len)
{
	void *b = be_alloc(len);

	ASSERT(b);
	memcpy(b, bytes, len);
	if (be_sock_send(r->s, b, len, free_cb, NULL))
		be_free(b);
}

static bool raw_closed(void *arg)
{
	return ((struct raw *)arg)->closed > 0;
}

static int want_recv;
static bool raw_got(void *arg)
{
	return ((struct raw *)arg)->nrecv >= want_recv;
}

static void raw_open(struct raw *r, struct be_worker *w, const char *addr)
{
	memset(r, 0, sizeof(*r));
	ASSERT_OK(be_sock_connect(w, addr, &raw_cbs, r, &r->s));
}

static void encode(const struct be_rpc_hdr *h, uint8_t *out)
{
	ASSERT_OK(be_rpc_hdr_encode(h, out));
}

/* ---- raw server */

enum { M_UNKNOWN_ID, M_OTHER_METHOD, M_GARBAGE, M_REQUEST, M_TWICE, M_NMODES };
static int mode;
static int raw_server_recv;

static void rs_reply(struct be_sock *s, const struct be_rpc_hdr *h, size_t payload)
{
	uint8_t *b = be_alloc(BE_RPC_HDR_LEN + payload);
	struct be_rpc_hdr c = *h;

	ASSERT(b);
	c.len = (uint32_t)payload;
	encode(&c, b);
	memset(b + BE_RPC_HDR_LEN, 0xee, payload);
	if (be_sock_send(s, b, BE_RPC_HDR_LEN + payload, free_cb, NULL))
		be_free(b);
}

static void rs_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct be_rpc_hdr h, r;

	ASSERT_OK(be_rpc_hdr_decode(buf, len, &h, NULL));
	ASSERT_EQ(h.type, BE_RPC_T_REQUEST);
	be_free(buf);
	raw_server_recv++;
	memset(&r, 0, sizeof(r));
	r.type = BE_RPC_T_REPLY;
	r.id = h.id;
	r.service = h.service;
	r.method = h.method;
	if (h.service == BE_RPC_SVC_BUILTIN) {
		rs_reply(s, &r, 0); /* pings are fine */
		return;
	}
	switch (mode) {
	case M_UNKNOWN_ID:
		r.id = h.id + (1ull << 40);
		rs_reply(s, &r, 4);
		break;
	case M_OTHER_METHOD:
		r.method = h.method + 1;
		rs_reply(s, &r, 4);
		break;
	case M_GARBAGE: {
		uint8_t *b = be_alloc(7);

		memcpy(b, "garbage", 7);
		if (be_sock_send(s, b, 7, free_cb, NULL))
			be_free(b);
		break;
	}
	case M_REQUEST:
		r.type = BE_RPC_T_REQUEST;
		r.deadline_us = 1000;
		rs_reply(s, &r, 4);
		break;
	case M_TWICE:
		rs_reply(s, &r, 4);
		rs_reply(s, &r, 4);
		break;
	}
}

static int rs_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	return 0;
}

static const struct be_sock_cbs rs_cbs = { .on_recv = rs_recv, .on_accept = rs_accept };

int main(int argc, char **argv)
{
	uint64_t rnd = 0x853c49e6748fea9bull;
	struct rt t;
	struct rt_server srv;
	struct rt_client cli;
	struct be_rpc_server_stats ss;
	struct be_rpc_chan *ch;
	struct raw r;
	uint8_t m[BE_RPC_HDR_LEN + 64];
	struct be_rpc_hdr h;
	int i;

	rt_init(&t, argc, argv);
	rt_server_start(&t, &srv, NULL);
	rt_client_start(&t, &cli, srv.ctx);
	ws[0] = srv.w;
	ws[1] = cli.w;

	/* Not our header at all: hung up on. */
	raw_open(&r, cli.w, srv.addr);
	raw_send(&r, "0123456789", 10);
	rt_pump(ws, 2, raw_closed, &r);
	be_sock_close(r.s);
	/* Our header, a bad field: answered, and the socket goes on. */
	raw_open(&r, cli.w, srv.addr);
	memset(&h, 0, sizeof(h));
	h.type = BE_RPC_T_REQUEST;
	h.id = 77;
	h.service = RT_SVC;
	h.method = RT_ECHO;
	h.deadline_us = 1000000;
	h.len = 16;
	encode(&h, m);
	m[4] = 0x40; /* an unknown flag */
	raw_send(&r, m, BE_RPC_HDR_LEN + 16);
	want_recv = 1;
	rt_pump(ws, 2, raw_got, &r);
	ASSERT_OK(r.decode_rc);
	ASSERT_EQ(r.last.type, BE_RPC_T_REPLY);
	ASSERT_UEQ(r.last.id, 77);
	ASSERT_EQ(r.last.status, BE_EPROTO_PEER);
	/* A length field that lies. */
	encode(&h, m);
	m[28] = 0xff;
	m[31] = 0xff;
	raw_send(&r, m, BE_RPC_HDR_LEN + 16);
	want_recv = 2;
	rt_pump(ws, 2, raw_got, &r);
	ASSERT_EQ(r.last.status, BE_EPROTO_PEER);
	/* A good request on the same socket. */
	h.id = 78;
	encode(&h, m);
	raw_send(&r, m, BE_RPC_HDR_LEN + 16);
	want_recv = 3;
	rt_pump(ws, 2, raw_got, &r);
	ASSERT_OK(r.last.status);
	ASSERT_UEQ(r.last.id, 78);
	ASSERT_EQ(r.last.len, 16);
	ASSERT_EQ(r.closed, 0);
	/* A reply sent to a server: hung up on. */
	memset(&h, 0, sizeof(h));
	h.type = BE_RPC_T_REPLY;
	h.id = 5;
	encode(&h, m);
	raw_send(&r, m, BE_RPC_HDR_LEN);
	rt_pump(ws, 2, raw_closed, &r);
	be_sock_close(r.s);
	/* A thousand random and mutated messages, one at a time (a message
	 * after a hang-up would never be read): the server counts exactly
	 * those our own decoder refuses. */
	be_rpc_server_stats(srv.rpc, &ss);
	{
		uint64_t before = ss.proto_errors, bad = 0;

		raw_open(&r, cli.w, srv.addr);
		for (i = 0; i < 1000; i++) {
			size_t len = (size_t)(test_rand(&rnd) % (BE_RPC_HDR_LEN + 64));
			struct be_rpc_hdr d;
			uint64_t t0;

			if (i % 3) {
				memset(&h, 0, sizeof(h));
				h.type = BE_RPC_T_REQUEST;
				h.id = test_rand(&rnd);
				h.service = RT_SVC;
				h.method = RT_ECHO;
				h.deadline_us = 1000000;
				len = BE_RPC_HDR_LEN + (size_t)(test_rand(&rnd) % 64);
				h.len = (uint32_t)(len - BE_RPC_HDR_LEN);
				encode(&h, m);
				m[test_rand(&rnd) % BE_RPC_HDR_LEN] ^= (uint8_t)(1u << (test_rand(&rnd) % 8));
			} else {
				size_t j;

				for (j = 0; j < len; j++)
					m[j] = (uint8_t)test_rand(&rnd);
			}
			if (be_rpc_hdr_decode(m, len, &d, NULL))
				bad++;
			want_recv = r.nrecv + 1;
			raw_send(&r, m, len);
			/* Until it was answered or hung up on (a valid one-way
			 * or service-0 request may get nothing: 100 ms). */
			t0 = rt_ms();
			while (r.nrecv < want_recv && !r.closed && rt_ms() - t0 < 100) {
				be_worker_progress(srv.w);
				be_worker_progress(cli.w);
			}
			if (r.closed) {
				be_sock_close(r.s);
				raw_open(&r, cli.w, srv.addr);
			}
		}
		rt_pump_ms(ws, 2, 20);
		be_sock_close(r.s);
		be_rpc_server_stats(srv.rpc, &ss);
		fprintf(stderr, "server: %llu of 1000 refused, %llu requests served\n",
			(unsigned long long)(ss.proto_errors - before),
			(unsigned long long)ss.requests);
		ASSERT_UEQ(ss.proto_errors - before, bad);
		ASSERT_GT(bad, 300);
	}
	/* A real client is still served. */
	ASSERT_OK(be_rpc_chan_open(cli.rpc, srv.addr, &ch));
	{
		void *rep = NULL;
		size_t rl = 0;

		ASSERT_OK(be_worker_start(srv.w));
		ASSERT_OK(be_rpc_call_sync(ch, RT_SVC, RT_ECHO, rt_req(100, 3), 100, NULL, &rep, &rl));
		ASSERT(rt_check(rep, rl, 3));
		be_rpc_buf_free(rep);
		ASSERT_OK(be_worker_stop(srv.w));
	}
	be_rpc_chan_destroy(ch);

	/* A hostile server. */
	{
		struct be_listener *l;
		char addr[BE_RPC_ADDR_MAX];
		struct be_rpc_config cfg = t.rcfg;
		struct be_rpc_chan_stats cs;

		ASSERT_OK(be_listen(srv.w, rt_listen_addr(&t, NULL), &rs_cbs, NULL, &l));
		ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
		cfg.probe_min_ms = 1000; /* keep probes out of the counts */
		cfg.probe_max_ms = 1000;
		for (mode = 0; mode < M_NMODES; mode++) {
			struct rt_result res = { 0 };

			ASSERT_OK(be_rpc_chan_open(cli.rpc, addr, &ch));
			ASSERT_OK(be_rpc_chan_set_config(ch, &cfg));
			ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, rt_req(16, 1), 16, NULL, rt_done_cb,
					      &res, NULL));
			rt_pump(ws, 2, rt_result_done, &res);
			rt_pump_ms(ws, 2, 30);
			ASSERT_EQ(res.calls, 1);
			be_rpc_chan_stats(ch, &cs);
			if (mode == M_TWICE) {
				ASSERT_OK(res.status);
				ASSERT_EQ(res.len, 4);
				be_rpc_buf_free(res.reply);
				ASSERT_EQ(cs.c.late_replies, 1);
			} else {
				ASSERT_EQ(res.status, BE_EPROTO_PEER);
				ASSERT_PTR_EQ(res.reply, NULL);
				ASSERT_EQ(cs.c.proto_errors, 1);
			}
			be_rpc_chan_destroy(ch);
		}
		be_listener_close(l);
	}
	st_shutdown(ws, 2); /* together: each waits for the other */
	rt_client_stop(&cli);
	rt_server_stop(&srv);
	return 0;
}
