/*
 * raw.c - see raw.h.
 */
#include <stdlib.h>
#include <string.h>

#include "raw.h"
#include "stest.h"
#include "util/common.h"

struct raw raw;

/* Buffers of SENDs too large to go inline: kept until raw_close(). */
static void *raw_kept[64];
static int raw_nkept;

uint32_t raw_lkey(const void *p, uint32_t *rkey)
{
	struct be_alloc_region r;

	ASSERT_OK(be_alloc_lookup(p, raw.alloc_dev, &r));
	if (rkey)
		*rkey = r.rkey;
	return r.lkey;
}

void raw_post_recv(void *buf)
{
	struct be_xrecv_wr wr = { .wr_id = (uintptr_t)buf }, *bad;

	wr.sge.addr = (uintptr_t)buf;
	wr.sge.length = 8192;
	wr.sge.lkey = raw_lkey(buf, NULL);
	ASSERT_OK(raw.ops->srq_post_recv(raw.srq, &wr, &bad));
}

void raw_open(const char *transport)
{
	struct be_alloc_reg_hook hook;
	int i;

	raw.ops = be__xport_find(transport);
	ASSERT(raw.ops);
	ASSERT_OK(raw.ops->dev_open("", &raw.dev));
	raw.ops->dev_reg_hook(raw.dev, &hook);
	raw.alloc_dev = be_alloc_attach_device(&hook);
	ASSERT_GE(raw.alloc_dev, 0);
	ASSERT_OK(raw.ops->evch_create(raw.dev, &raw.ch));
	ASSERT_OK(raw.ops->cq_create(raw.dev, 4096, &raw.cq));
	ASSERT_OK(raw.ops->srq_create(raw.cq, 256, &raw.srq));
	for (i = 0; i < 64; i++) {
		raw.bufs[i] = be_alloc(8192);
		raw_post_recv(raw.bufs[i]);
	}
}

void raw_close(void)
{
	struct be_xwc wc[16];
	int i;

	if (raw.l)
		raw.ops->listener_close(raw.l);
	raw.l = NULL;
	raw.ops->srq_destroy(raw.srq);
	while (raw.ops->cq_poll(raw.cq, wc, 16) > 0)
		;
	raw.ops->cq_destroy(raw.cq);
	raw.ops->evch_destroy(raw.ch);
	for (i = 0; i < 64; i++)
		be_free(raw.bufs[i]);
	for (i = 0; i < raw_nkept; i++)
		be_free(raw_kept[i]);
	raw_nkept = 0;
	ASSERT_OK(be_alloc_detach_device(raw.alloc_dev));
	raw.ops->dev_close(raw.dev);
}

void raw_listen(const char *name)
{
	ASSERT_OK(raw.ops->listen(raw.ch, name, 16, &raw.l));
}

void raw_serve(struct st *t, struct st_server *srv, struct be_ctx **ctx, struct be_worker **w,
	       struct be_listener **l, char *addr, size_t len)
{
	st_serve(&t->cfg, t, srv, ctx, w, l, addr, len);
	raw_open(t->transport);
	raw.w = *w;
}

void raw_serve_end(struct be_ctx *ctx, struct st_server *srv, struct be_listener *l)
{
	int i;

	for (i = 0; i < srv->nsocks; i++)
		be_sock_close(srv->socks[i]);
	free(srv->socks);
	srv->socks = NULL;
	srv->nsocks = 0;
	raw_close();
	be_listener_close(l);
	be_worker_destroy(raw.w);
	be_ctx_destroy(ctx);
}

void raw_poll(void)
{
	struct be_xevent ev;
	struct be_xwc wc[16];
	int n, i;

	while (raw.ops->evch_get(raw.ch, &ev) == 1) {
		if (ev.type == BE_XEV_ESTABLISHED)
			raw.established = 1;
		else if (ev.type == BE_XEV_REJECTED) {
			struct be__hello h;
			const char *why;

			raw.rejected = 1;
			if (be__hello_decode(ev.priv, ev.priv_len, 1, &h, &why) == 0)
				raw.reject_reason = h.reason;
		} else if (ev.type == BE_XEV_DISCONNECTED || ev.type == BE_XEV_UNREACHABLE) {
			raw.dead = 1;
		}
	}
	n = raw.ops->cq_poll(raw.cq, wc, 16);
	for (i = 0; i < n; i++) {
		if (wc[i].opcode == BE_XWC_RECV && wc[i].status == BE_XWC_SUCCESS) {
			uint8_t *b = (uint8_t *)(uintptr_t)wc[i].wr_id;
			struct be__frame f;
			const char *why;
			size_t off = 0;

			while (be__frame_next(b, wc[i].byte_len, &off, 8192, &f, &why) == 1)
				if (f.type == BE_FR_WRITE_RESP) {
					raw.resp = f;
					if (raw.nresp < (int)BE_ARRAY_SIZE(raw.rkeys))
						raw.rkeys[raw.nresp] = f.rkey;
					raw.nresp++;
				} else if (f.type == BE_FR_WRITE_NOMEM) {
					raw.nnomem++;
				} else if (f.type == BE_FR_KEEPALIVE) {
					raw.nka++;
				} else if (f.type == BE_FR_ONEWAY_BUDGET) {
					raw.ow_budget = f.length;
					raw.ow_conn = wc[i].conn;
				}
			raw_post_recv(b);
		} else if (wc[i].status != BE_XWC_SUCCESS) {
			raw.dead = 1;
		}
	}
}

bool cond_established(void *arg)
{
	raw_poll();
	return raw.established || raw.rejected || raw.dead;
}

bool cond_dead(void *arg)
{
	raw_poll();
	return raw.dead && be_worker_engine_count(raw.w) == 0;
}

bool cond_answers(void *arg)
{
	raw_poll();
	return raw.nresp + raw.nnomem >= (int)(intptr_t)arg || raw.dead;
}

bool cond_no_engine(void *arg)
{
	raw_poll();
	return be_worker_engine_count(raw.w) == 0;
}

bool cond_resp(void *arg)
{
	raw_poll();
	return raw.nresp > 0 || raw.dead;
}

bool cond_budget(void *arg)
{
	raw_poll();
	return raw.ow_conn == raw.conn || raw.dead;
}

void raw_connect(const char *addr, uint32_t magic, uint32_t credits)
{
	struct be_xconn_attr attr = {
		.send_cq = raw.cq, .recv_cq = raw.cq, .srq = raw.srq, .max_send_wr = 64,
		.max_inline = 1024,
	};
	uint8_t priv[BE_PROTO_HELLO_LEN];
	struct be__hello h = {
		.magic = magic, .version = BE_PROTO_VERSION, .flags = raw.hello_flags,
		.recv_buf_size = 8192,
		.eager_max = 4096, .credits = 32, .max_sockets = 100, .max_msg_size = 1 << 20,
		.keepalive_ms = 1000, .sock_window = 1 << 20,
	};

	(void)credits;
	raw.established = raw.dead = raw.rejected = 0;
	raw.nresp = raw.nnomem = raw.nka = 0;
	raw.ow_conn = NULL;
	be__hello_encode(&h, priv);
	ASSERT_OK(raw.ops->connect(raw.ch, strstr(addr, "://") + 3, &attr, priv, sizeof(priv),
				   &raw.conn));
	st_pump(&raw.w, 1, cond_established, NULL);
}

void raw_hang_up(void)
{
	raw.ops->conn_destroy(raw.conn);
	raw.conn = NULL;
	st_pump(&raw.w, 1, cond_no_engine, NULL);
}

/* Post one SEND of @len bytes at @data: inline up to 256 bytes (every
 * device takes that much), else from a buffer kept until raw_close(). */
void raw_send(const void *data, uint32_t len)
{
	uint8_t *b = be_alloc(8192);
	bool inl = len <= 256;
	struct be_xsge sge = { .addr = (uintptr_t)b, .length = len };
	struct be_xsend_wr wr = {
		.opcode = BE_XWR_SEND, .sg_list = &sge, .num_sge = 1,
		.flags = inl ? BE_XWR_F_INLINE : 0,
	}, *bad;

	ASSERT(b);
	memcpy(b, data, len);
	sge.lkey = raw_lkey(b, NULL);
	ASSERT_OK(raw.ops->post_send(raw.conn, &wr, &bad));
	if (inl) {
		be_free(b); /* copied at post */
		return;
	}
	ASSERT_LT(raw_nkept, (int)BE_ARRAY_SIZE(raw_kept));
	raw_kept[raw_nkept++] = b;
}

void raw_send_frames(const struct be__frame *fs, int n, const void *payload)
{
	uint8_t buf[8192];
	uint32_t len = 0;
	int i;

	for (i = 0; i < n; i++) {
		struct be__frame f = fs[i];

		len += be__frame_encode(buf + len, &f, payload);
	}
	raw_send(buf, len);
}

