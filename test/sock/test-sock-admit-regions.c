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
#include "stest.h"
#include "util/common.h"
#include "xport/shm/shm.h"
#include "xport/xport.h"

static struct st_server srv;

struct raw {
	const struct be_xport_ops *ops;
	struct be_xdev *dev;
	struct be_xevch *ch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	struct be_xlistener *l;
	struct be_xconn *conn;
	int alloc_dev;
	int established, gone, recvs;
	void *bufs[16];
};

/* A raw side: the shm device, attached to bemalloc so that it can post
 * receives (a peer's SENDs must find one), an evch, a cq and an srq. */
static void raw_open(struct raw *r)
{
	struct be_alloc_reg_hook hook;
	int i;

	memset(r, 0, sizeof(*r));
	r->ops = be__xport_find("shm");
	ASSERT(r->ops);
	ASSERT_OK(r->ops->dev_open("", &r->dev));
	r->ops->dev_reg_hook(r->dev, &hook);
	r->alloc_dev = be_alloc_attach_device(&hook);
	ASSERT_GE(r->alloc_dev, 0);
	r->dev->alloc_dev = r->alloc_dev;
	ASSERT_OK(r->ops->evch_create(r->dev, &r->ch));
	ASSERT_OK(r->ops->cq_create(r->dev, 256, &r->cq));
	ASSERT_OK(r->ops->srq_create(r->cq, 64, &r->srq));
	for (i = 0; i < 16; i++) {
		struct be_xrecv_wr wr, *bad;
		struct be_alloc_region reg;

		r->bufs[i] = be_alloc(8192);
		ASSERT(r->bufs[i]);
		ASSERT_OK(be_alloc_lookup(r->bufs[i], r->alloc_dev, &reg));
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uintptr_t)r->bufs[i];
		wr.sge.addr = (uintptr_t)r->bufs[i];
		wr.sge.length = 8192;
		wr.sge.lkey = reg.lkey;
		ASSERT_OK(r->ops->srq_post_recv(r->srq, &wr, &bad));
	}
}

static void raw_close(struct raw *r)
{
	struct be_xwc wc[16];

	if (r->conn)
		r->ops->conn_destroy(r->conn);
	if (r->l)
		r->ops->listener_close(r->l);
	r->ops->srq_destroy(r->srq);
	while (r->ops->cq_poll(r->cq, wc, 16) > 0)
		;
	r->ops->cq_destroy(r->cq);
	r->ops->evch_destroy(r->ch);
	ASSERT_OK(be_alloc_detach_device(r->alloc_dev));
	r->ops->dev_close(r->dev);
	for (int i = 0; i < 16; i++)
		be_free(r->bufs[i]);
}

static struct be_xconn_attr raw_attr(struct raw *r)
{
	return (struct be_xconn_attr){ .send_cq = r->cq, .recv_cq = r->cq, .srq = r->srq,
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
static void raw_events(struct raw *r)
{
	struct be_xevent ev;
	struct be_xwc wc[16];

	int i, n;

	while ((n = r->ops->cq_poll(r->cq, wc, 16)) > 0)
		for (i = 0; i < n; i++)
			r->recvs += wc[i].opcode == BE_XWC_RECV && wc[i].status == BE_XWC_SUCCESS;
	while (r->ops->evch_get(r->ch, &ev) == 1) {
		switch (ev.type) {
		case BE_XEV_CONNECT_REQUEST: {
			struct be_xconn_attr a = raw_attr(r);
			uint8_t priv[BE_PROTO_HELLO_LEN];

			raw_hello(priv);
			r->conn = ev.conn;
			ASSERT_OK(r->ops->accept(ev.conn, &a, priv, sizeof(priv)));
			break;
		}
		case BE_XEV_ESTABLISHED:
			r->established = 1;
			break;
		default:
			r->gone = 1;
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
static void raw_sock_open(struct raw *r)
{
	struct be__frame f = { .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 };
	struct be_alloc_region reg;
	uint8_t *b = be_alloc(256);
	struct be_xsge sge = { .addr = (uintptr_t)b };
	struct be_xsend_wr wr = {
		.opcode = BE_XWR_SEND, .sg_list = &sge, .num_sge = 1, .flags = BE_XWR_F_INLINE,
	}, *bad;

	ASSERT(b);
	ASSERT_OK(be_alloc_lookup(b, r->alloc_dev, &reg));
	sge.lkey = reg.lkey;
	sge.length = be__frame_encode(b, &f, NULL);
	ASSERT_OK(r->ops->post_send(r->conn, &wr, &bad));
	be_free(b); /* inline: copied at post */
}

static struct raw *pumped;

static bool raw_gone(void *arg)
{
	raw_events(pumped);
	return pumped->gone;
}

/* A raw client connects to @addr (name after "shm://") and is cut off. */
static void raw_client(struct be_worker *w, const char *addr)
{
	struct raw r;
	struct be_xconn_attr a;
	uint8_t priv[BE_PROTO_HELLO_LEN];

	raw_open(&r);
	a = raw_attr(&r);
	raw_hello(priv);
	ASSERT_OK(r.ops->connect(r.ch, addr + strlen("shm://"), &a, priv, sizeof(priv), &r.conn));
	pumped = &r;
	st_pump(&w, 1, raw_gone, NULL);
	raw_no_region(r.conn, r.established ? 2 : 0);
	raw_close(&r);
}

static bool srv_accepted(void *arg)
{
	raw_events(pumped);
	return srv.accepted > 0 || pumped->gone;
}

static bool raw_established(void *arg)
{
	raw_events(pumped);
	return pumped->established || pumped->gone;
}

/* A raw client without a secret, to a listener that needs none: its
 * Engine admits it and accepts its Socket; not one region came before or
 * after (admission was done before the SOCK_OPEN was handled). */
static void test_admitted_server(struct st *t)
{
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	struct be_xconn_attr a;
	uint8_t priv[BE_PROTO_HELLO_LEN];
	char addr[160];
	struct raw r;
	void *keep;

	memset(&srv, 0, sizeof(srv));
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_listen(w, st_listen_addr(t), &st_server_cbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	keep = be_alloc(1 << 20);
	ASSERT(keep);
	raw_open(&r);
	a = raw_attr(&r);
	hello_flags = 0;
	raw_hello(priv);
	ASSERT_OK(r.ops->connect(r.ch, addr + strlen("shm://"), &a, priv, sizeof(priv), &r.conn));
	pumped = &r;
	st_pump(&w, 1, raw_established, NULL);
	ASSERT(!r.gone);
	raw_sock_open(&r);
	st_pump(&w, 1, srv_accepted, NULL);
	ASSERT_EQ(srv.accepted, 1);
	raw_events(&r); /* reads whatever the socket holds */
	ASSERT(!r.gone);
	raw_no_region(r.conn, 2);
	raw_close(&r);
	hello_flags = BE_HELLO_F_AUTH;
	be_free(keep);
	be_listener_close(l);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
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
	ASSERT_OK(be_ctx_create(&cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_listen(w, st_listen_addr(t), &st_server_cbs, &srv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	keep = be_alloc(1 << 20); /* registered memory a peer must not see */
	ASSERT(keep);
	raw_client(w, addr);
	ASSERT_EQ(srv.accepted, 0);
	be_free(keep);
	be_listener_close(l);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
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

	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_listen(w, st_listen_addr(t), &st_server_cbs, &srv, &l));
	ASSERT_OK(be_listener_set_admit(l, refuse_all, NULL));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	raw_client(w, addr);
	be_listener_close(l);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
}

static int cli_reason = 1;

static void cli_close(struct be_sock *s, int reason, void *user)
{
	cli_reason = reason;
}

static bool cli_closed(void *arg)
{
	raw_events(pumped);
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
	struct raw r;

	raw_open(&r);
	snprintf(addr, sizeof(addr), "%s", st_listen_addr(t));
	ASSERT_OK(r.ops->listen(r.ch, addr + strlen("shm://"), 16, &r.l));
	memcpy(cfg.auth_secret, "sekrit", 6);
	cfg.auth_secret_len = 6;
	cfg.connect_timeout_ms = 300;
	ASSERT_OK(be_ctx_create(&cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_sock_connect(w, addr, &cbs, NULL, &s));
	pumped = &r;
	st_pump(&w, 1, cli_closed, NULL);
	ASSERT_EQ(cli_reason, -ETIMEDOUT);
	ASSERT(r.established);
	ASSERT(r.conn);
	raw_events(&r);
	raw_no_region(r.conn, 3);
	be_sock_close(s);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
	raw_close(&r);
}

static bool raw_recvd(void *arg)
{
	raw_events(pumped);
	return pumped->recvs > 0 || pumped->gone;
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
	struct raw r;

	raw_open(&r);
	snprintf(addr, sizeof(addr), "%s", st_listen_addr(t));
	ASSERT_OK(r.ops->listen(r.ch, addr + strlen("shm://"), 16, &r.l));
	hello_flags = 0;
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_sock_connect(w, addr, &cbs, NULL, &s));
	pumped = &r;
	st_pump(&w, 1, raw_recvd, NULL);
	ASSERT(!r.gone);
	ASSERT(r.conn);
	raw_events(&r);
	raw_no_region(r.conn, 3);
	hello_flags = BE_HELLO_F_AUTH;
	be_sock_close(s);
	raw_close(&r); /* the client's Engine sees its peer go */
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
