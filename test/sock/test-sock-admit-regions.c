/*
 * Check that on shm no registered region reaches a peer before the Engine
 * admitted it (docs/SECURITY.md): a raw transport-level peer (xport ops,
 * no BE core) that connects to a listener holding a shared secret and
 * never proves it, and one that a refusing accept hook keeps out, are
 * cut off without having been sent a single region; and a raw listener
 * under the name a client with a secret connects to (anyone may take an
 * abstract socket name) never gets the client's regions either. Before
 * the fix the connector announced every region with its request and the
 * acceptor with its accept, so any local process could map and overwrite
 * the memory of both.
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
	int established, gone;
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

/* A hello as a BE core of default settings sends it, offering a secret. */
static void raw_hello(uint8_t *priv)
{
	struct be__hello h = {
		.magic = BE_PROTO_MAGIC, .version = BE_PROTO_VERSION, .flags = BE_HELLO_F_AUTH,
		.recv_buf_size = 8192, .eager_max = 4096, .credits = 8, .max_sockets = 64,
		.max_msg_size = 1u << 20, .keepalive_ms = 1000,
	};

	be__hello_encode(&h, priv);
}

/* Handle the raw side's events (reading its socket, where regions would
 * arrive); accept a connection request with our hello. */
static void raw_events(struct raw *r)
{
	struct be_xevent ev;
	struct be_xwc wc[16];

	while (r->ops->cq_poll(r->cq, wc, 16) > 0)
		;
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

/* Regions of the peer that @c learnt of: announcements handled, and
 * mappings. */
static uint32_t raw_regions(struct be_xconn *c)
{
	struct shm_conn *sc = to_sconn(c);

	return sc->regs_seen + sc->rtab_hi;
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
	ASSERT_UEQ(raw_regions(r.conn), 0);
	raw_close(&r);
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
	ASSERT_UEQ(raw_regions(r.conn), 0);
	be_sock_close(s);
	st_shutdown(&w, 1);
	be_worker_destroy(w);
	ASSERT_OK(be_ctx_destroy(ctx));
	raw_close(&r);
}

int main(int argc, char **argv)
{
	struct st t;

	st_init(&t, argc, argv);
	if (strcmp(t.transport, "shm") != 0)
		return 77; /* regions are announced on shm only */
	test_server_side(&t, true);
	test_refused(&t);
	test_client_side(&t);
	return 0;
}
