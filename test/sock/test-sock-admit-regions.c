/*
 * Check that on shm no registered region ever reaches a peer, before or
 * after the Engine admitted it (docs/SECURITY.md, "Remote keys"): a raw
 * transport-level peer (xport ops, no BE core) receives no fd but the
 * handshake's eventfds (a region could only be shared as its memfd) when
 * - it connects to a listener holding a shared secret and never proves
 *   it, or a refusing accept hook keeps it out (cut off);
 * - it takes the name a client with a secret connects to (anyone may take
 *   an abstract socket name) and never proves it;
 * - it is admitted, as acceptor (a client's Engine opened a Socket to it)
 *   and as connector (the server accepted its Socket).
 * Before admission control the connector announced every region with its
 * request and the acceptor with its accept; before grants, every admitted
 * peer was sent them: any local process could map and overwrite the
 * memory of both.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "engine/proto.h"
#include "raw.h"
#include "stest.h"
#include "util/common.h"
#include "xport/shm/shm.h"
#include "xport/xport.h"

static struct st_server srv;

/* RECV completions on the raw side since raw_fresh(). */
static int raw_recvs;

/* A raw side (raw.c) of the shm device, its state cleared. */
static void raw_fresh(void)
{
	memset(&raw, 0, sizeof(raw));
	raw_recvs = 0;
	raw_open("shm");
}

static void raw_end(void)
{
	if (raw.conn)
		raw.ops->conn_destroy(raw.conn);
	raw.conn = NULL;
	raw_close();
}

/* A raw listener that takes the name of st_listen_addr(@t), @addr. */
static void raw_take_name(struct st *t, char *addr, size_t len)
{
	raw_fresh();
	snprintf(addr, len, "%s", st_listen_addr(t));
	raw_listen(addr + strlen("shm://"));
}

static struct be_xconn_attr raw_attr(void)
{
	return (struct be_xconn_attr){ .send_cq = raw.cq, .recv_cq = raw.cq, .srq = raw.srq,
				       .max_send_wr = 16, .max_inline = 256, .timeout_ms = 20000 };
}

/* A hello as a BE core of default settings sends it, offering a secret
 * while hello_flags says so. */
static uint8_t hello_flags = BE_HELLO_F_AUTH;

static void raw_hello(uint8_t *priv)
{
	struct be__hello h = {
		.magic = BE_PROTO_MAGIC, .version = BE_PROTO_VERSION, .flags = hello_flags,
		.recv_buf_size = 8192, .eager_max = 4096, .credits = 8, .max_sockets = 64,
		.max_msg_size = 1u << 20, .keepalive_ms = 1000, .sock_window = 16u << 20,
	};

	be__hello_encode(&h, priv);
}

/* Handle the raw side's events (reading its socket, where regions would
 * arrive); accept a connection request with our hello. */
static void raw_events(void)
{
	struct be_xevent ev;
	struct be_xwc wc[16];

	int i, n;

	while ((n = raw.ops->cq_poll(raw.cq, wc, 16)) > 0)
		for (i = 0; i < n; i++)
			raw_recvs += wc[i].opcode == BE_XWC_RECV && wc[i].status == BE_XWC_SUCCESS;
	while (raw.ops->evch_get(raw.ch, &ev) == 1) {
		switch (ev.type) {
		case BE_XEV_CONNECT_REQUEST: {
			struct be_xconn_attr a = raw_attr();
			uint8_t priv[BE_PROTO_HELLO_LEN];

			raw_hello(priv);
			raw.conn = ev.conn;
			ASSERT_OK(raw.ops->accept(ev.conn, &a, priv, sizeof(priv)));
			break;
		}
		case BE_XEV_ESTABLISHED:
			raw.established = 1;
			break;
		default:
			raw.dead = 1;
			break;
		}
	}
}

/* The fds the peer sent on @c's socket: @handshake (the REQ's 3 or the
 * ACC's 2 eventfds and segment) when it got that far, 0 when rejected, and
 * never one more (a region's memfd). */
static void raw_no_region(struct be_xconn *c, uint32_t handshake)
{
	ASSERT_UEQ(to_sconn(c)->fds_rx, handshake);
}

/* One SEND of a SOCK_OPEN frame: what a client's Engine sends first once
 * admitted. */
static void raw_sock_open(void)
{
	struct be__frame f = { .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 };
	struct be_alloc_region reg;
	uint8_t *b = be_alloc(256);
	struct be_xsge sge = { .addr = (uintptr_t)b };
	struct be_xsend_wr wr = {
		.opcode = BE_XWR_SEND, .sg_list = &sge, .num_sge = 1, .flags = BE_XWR_F_INLINE,
	}, *bad;

	ASSERT(b);
	ASSERT_OK(be_alloc_lookup(b, raw.alloc_dev, &reg));
	sge.lkey = reg.lkey;
	sge.length = be__frame_encode(b, &f, NULL);
	ASSERT_OK(raw.ops->post_send(raw.conn, &wr, &bad));
	be_free(b); /* inline: copied at post */
}

static bool raw_gone(void *arg)
{
	raw_events();
	return raw.dead;
}

/* A fresh raw side connects to @addr ("shm://name") with our hello. */
static void raw_dial(const char *addr)
{
	struct be_xconn_attr a;
	uint8_t priv[BE_PROTO_HELLO_LEN];

	raw_fresh();
	a = raw_attr();
	raw_hello(priv);
	ASSERT_OK(raw.ops->connect(raw.ch, addr + strlen("shm://"), &a, priv, sizeof(priv),
				   &raw.conn));
}

/* A raw client connects to @addr (name after "shm://") and is cut off. */
static void raw_client(struct be_worker *w, const char *addr)
{
	raw_dial(addr);
	st_pump(&w, 1, raw_gone, NULL);
	raw_no_region(raw.conn, raw.established ? 2 : 0);
	raw_end();
}

static bool srv_accepted(void *arg)
{
	raw_events();
	return srv.accepted > 0 || raw.dead;
}

static bool raw_established(void *arg)
{
	raw_events();
	return raw.established || raw.dead;
}

/* A raw client without a secret, to a listener that needs none: its
 * Engine admits it and accepts its Socket; not one region came before or
 * after (admission was done before the SOCK_OPEN was handled). */
static void test_admitted_server(struct st *t)
{
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];
	void *keep;

	memset(&srv, 0, sizeof(srv));
	st_serve(&t->cfg, t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	keep = be_alloc(1 << 20);
	ASSERT(keep);
	hello_flags = 0;
	raw_dial(addr);
	st_pump(&w, 1, raw_established, NULL);
	ASSERT(!raw.dead);
	raw_sock_open();
	st_pump(&w, 1, srv_accepted, NULL);
	ASSERT_EQ(srv.accepted, 1);
	raw_events(); /* reads whatever the socket holds */
	ASSERT(!raw.dead);
	raw_no_region(raw.conn, 2);
	raw_end();
	hello_flags = BE_HELLO_F_AUTH;
	be_free(keep);
	st_serve_end(ctx, w, &srv, l);
}

static void test_server_side(struct st *t, bool secret)
{
	struct be_config cfg = t->cfg;
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];
	void *keep;

	if (secret) {
		memcpy(cfg.auth_secret, "sekrit", 6);
		cfg.auth_secret_len = 6;
	}
	cfg.connect_timeout_ms = 300; /* cuts the raw client that never proves */
	st_serve(&cfg, t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	keep = be_alloc(1 << 20); /* registered memory a peer must not see */
	ASSERT(keep);
	raw_client(w, addr);
	ASSERT_EQ(srv.accepted, 0);
	be_free(keep);
	st_serve_end(ctx, w, &srv, l);
}

static int refuse_all(struct be_listener *l, const struct be_peer_info *peer, void *user)
{
	return -EPERM;
}

static void test_refused(struct st *t)
{
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];

	st_serve(&t->cfg, t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	ASSERT_OK(be_listener_set_admit(l, refuse_all, NULL));
	raw_client(w, addr);
	st_serve_end(ctx, w, &srv, l);
}

static int cli_reason = 1;

static void cli_close(struct be_sock *s, int reason, void *user)
{
	cli_reason = reason;
}

static bool cli_closed(void *arg)
{
	raw_events();
	return cli_reason != 1;
}

/* A raw listener takes the name; a client with a secret connects. */
static void test_client_side(struct st *t)
{
	const struct be_sock_cbs cbs = { .on_close = cli_close };
	struct be_config cfg = t->cfg;
	struct be_worker *w;
	struct be_ctx *ctx;
	struct be_sock *s;
	char addr[160];

	raw_take_name(t, addr, sizeof(addr));
	memcpy(cfg.auth_secret, "sekrit", 6);
	cfg.auth_secret_len = 6;
	cfg.connect_timeout_ms = 300;
	ASSERT_OK(be_ctx_create(&cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_sock_connect(w, addr, &cbs, NULL, &s));
	st_pump(&w, 1, cli_closed, NULL);
	ASSERT_EQ(cli_reason, -ETIMEDOUT);
	ASSERT(raw.established);
	ASSERT(raw.conn);
	raw_events();
	raw_no_region(raw.conn, 3);
	be_sock_close(s);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
	raw_end();
}

static bool raw_recvd(void *arg)
{
	raw_events();
	return raw_recvs > 0 || raw.dead;
}

/* A raw listener that needs no secret; a client without one connects and
 * opens a Socket: its Engine admitted the raw peer (the SOCK_OPEN comes
 * after admission), and not one region came with or after it. */
static void test_admitted_client(struct st *t)
{
	const struct be_sock_cbs cbs = { .on_close = cli_close };
	struct be_worker *w;
	struct be_ctx *ctx;
	struct be_sock *s;
	char addr[160];

	raw_take_name(t, addr, sizeof(addr));
	hello_flags = 0;
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_sock_connect(w, addr, &cbs, NULL, &s));
	st_pump(&w, 1, raw_recvd, NULL);
	ASSERT(!raw.dead);
	ASSERT(raw.conn);
	raw_events();
	raw_no_region(raw.conn, 3);
	hello_flags = BE_HELLO_F_AUTH;
	be_sock_close(s);
	raw_end(); /* the client's Engine sees its peer go */
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
}

int main(int argc, char **argv)
{
	struct st t;

	st_init(&t, argc, argv);
	if (strcmp(t.transport, "shm") != 0)
		return 77; /* fds pass on shm only */
	test_server_side(&t, true);
	test_refused(&t);
	test_client_side(&t);
	test_admitted_server(&t);
	test_admitted_client(&t);
	return 0;
}
