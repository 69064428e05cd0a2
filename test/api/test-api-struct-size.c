/*
 * Check that a caller compiled with a shorter struct is neither read nor
 * written past the size it declares (docs/API.md, "Structs that grow"):
 * every struct that leads with `size` is placed so that its declared size
 * ends right before an inaccessible page, with the bytes between the size
 * and the next 8-byte boundary holding a guard pattern. An access beyond
 * the size faults or changes the pattern. Inputs are declared at their v1
 * size and at 0 (the v1 layout), outputs at their v1 size and at a size
 * that ends mid-struct; a size below v1 on an input is refused.
 */
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rpc/rtest.h"
#include "util/abi.h"
#include "util/common.h"

/* One caller struct of @size bytes ending before a PROT_NONE page. */
struct guarded {
	unsigned char *map;
	size_t maplen;
	unsigned char *p;
	size_t size, end; /* declared size; the guard runs from size to end */
};

static unsigned char guard_byte(size_t i)
{
	return (unsigned char)(0xa5 ^ i);
}

static void *guarded_new(struct guarded *g, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t end = BE_ALIGN_UP(size, 8), room = BE_ALIGN_UP(end, page), i;

	g->maplen = room + page;
	g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(g->map != MAP_FAILED);
	ASSERT_OK(mprotect(g->map + room, page, PROT_NONE));
	g->p = g->map + room - end;
	g->size = size;
	g->end = end;
	for (i = size; i < end; i++)
		g->p[i] = guard_byte(i);
	return g->p;
}

/* The guard is intact and the caller's size field reads @size. */
static void guarded_check(const struct guarded *g, uint32_t size)
{
	size_t i;

	for (i = g->size; i < g->end; i++)
		if (g->p[i] != guard_byte(i))
			TEST_FAIL("byte %zu past a size of %zu was written", i, g->size);
	ASSERT_EQ(be__abi_size_of(g->p), size);
}

static void guarded_free(struct guarded *g)
{
	munmap(g->map, g->maplen);
}

/* A caller's struct of @size bytes holding the first @size bytes of @src,
 * with its size field set to @field. */
#define GUARDED_COPY(g, src, size, field)                                    \
	({                                                                   \
		__typeof__(src) *p_ = guarded_new(g, size);                  \
		uint32_t f_ = (field);                                       \
		memcpy(p_, &(src), size);                                    \
		memcpy(p_, &f_, sizeof(f_));                                 \
		p_;                                                          \
	})

/* An output struct of type @T declared at @sz bytes (size field set),
 * which the statement @get fills through p_; checks that nothing past
 * @sz bytes was written and evaluates to a copy of it (0 beyond). */
#define GUARDED_OUT(T, sz, get)                                              \
	({                                                                   \
		struct guarded g_;                                           \
		T *p_ = guarded_new(&g_, sz), c_;                            \
		memset(&c_, 0, sizeof(c_));                                  \
		p_->size = (uint32_t)(sz);                                   \
		get;                                                         \
		guarded_check(&g_, sz);                                      \
		memcpy(&c_, p_, sz);                                         \
		guarded_free(&g_);                                           \
		c_;                                                          \
	})

static void check_alloc(void)
{
	const size_t v1c = BE__V1_SIZE(struct be_alloc_config, limit_bytes);
	const size_t v1s = BE__V1_SIZE(struct be_alloc_stats, class_in_use);
	const size_t mid = offsetof(struct be_alloc_stats, frees);
	struct be_alloc_config cfg = { 0 }, *c;
	struct be_alloc_stats *st, out;
	struct guarded g;
	void *buf;

	c = GUARDED_COPY(&g, cfg, v1c, v1c);
	ASSERT_OK(be_alloc_configure(c));
	guarded_check(&g, v1c);
	memset(c, 0, v1c);
	ASSERT_OK(be_alloc_configure(c));
	c->size = (uint32_t)v1c - 1; /* a size below v1 */
	ASSERT_EQ(be_alloc_configure(c), -EINVAL);
	c->size = 1;
	ASSERT_EQ(be_alloc_configure(c), -EINVAL);
	guarded_free(&g);

	buf = be_alloc(100);
	ASSERT(buf);
	out = GUARDED_OUT(struct be_alloc_stats, v1s, be_alloc_stats_sized(p_));
	ASSERT_GE(out.allocations, 1);
	ASSERT_GE(out.bytes_in_use, 100);
	out = GUARDED_OUT(struct be_alloc_stats, mid, be_alloc_stats_sized(p_));
	ASSERT_GE(out.allocations, 1);

	st = guarded_new(&g, v1s);
	st->size = 0; /* 0: the v1 layout */
	be_alloc_stats_sized(st);
	guarded_check(&g, v1s);
	guarded_free(&g);
	be_free(buf);
}

/* A be_config and be_rpc_config filled at their v1 size, and read back
 * at it by the functions that take them. */
static void check_configs(struct rt *t)
{
	const size_t v1 = BE__V1_SIZE(struct be_config, admit_uids);
	const size_t v1r = BE__V1_SIZE(struct be_rpc_config, standby);
	struct be_config *c;
	struct be_rpc_config *rc;
	struct be_worker *w;
	struct be_ctx *ctx, *ctx2;
	struct be_rpc *rpc;
	struct guarded g, gr;

	c = guarded_new(&g, v1);
	c->size = (uint32_t)v1;
	be_config_init_sized(c);
	guarded_check(&g, v1);
	ASSERT_GT(c->eager_max, 0);
	memcpy(c, &t->cfg, v1);
	c->size = (uint32_t)v1;
	c->close_timeout_ms = 1234;
	ASSERT_OK(be_ctx_create(c, &ctx));
	guarded_check(&g, v1);
	ASSERT_EQ(be_ctx_config(ctx)->close_timeout_ms, 1234);
	ASSERT_EQ(be_ctx_config(ctx)->size, 0); /* a copy passed back reads as v1 */
	c->size = (uint32_t)v1 - 8;
	ASSERT_EQ(be_ctx_create(c, &ctx2), -EINVAL);
	ASSERT_OK(be_worker_create(ctx, &w));

	rc = guarded_new(&gr, v1r);
	rc->size = (uint32_t)v1r;
	be_rpc_config_init_sized(rc);
	guarded_check(&gr, v1r);
	ASSERT_GT(rc->timeout_us, 0);
	rc->size = 0;
	ASSERT_OK(be_rpc_create(w, rc, &rpc));
	rc->size = 4;
	be_rpc_destroy(rpc);
	ASSERT_EQ(be_rpc_create(w, rc, &rpc), -EINVAL);
	guarded_check(&gr, 4);
	guarded_free(&gr);
	guarded_free(&g);
	ASSERT_OK(be_worker_destroy(w));
	ASSERT_OK(be_ctx_destroy(ctx));
}

static void check_sock(struct rt *t)
{
	const size_t v1s = BE__V1_SIZE(struct be_sock_stats, queued);
	const size_t v1e = BE__V1_SIZE(struct be_engine_stats, error);
	const size_t mide = offsetof(struct be_engine_stats, fragments);
	struct be_engine_stats es;
	struct be_sock_stats ss;
	struct st_sends sends = { 0 };
	struct be_sock *c;
	struct st_fx f;

	st_fx_init(&f, 0, NULL);
	f.t.transport = t->transport;
	st_fx_pair(&f);
	c = st_fx_connect(&f, NULL, NULL);
	st_send_recvd(f.ws, c, 100, 1, &sends, &f.srv, 1);

	ss = GUARDED_OUT(struct be_sock_stats, v1s, ASSERT_OK(be_sock_stats_sized(c, p_)));
	ASSERT_UEQ(ss.msgs_sent, 1);
	es = GUARDED_OUT(struct be_engine_stats, v1e, ASSERT_OK(be_sock_engine_stats_sized(c, p_)));
	ASSERT_EQ(es.state, 1);
	es = GUARDED_OUT(struct be_engine_stats, mide, ASSERT_OK(be_sock_engine_stats_sized(c, p_)));
	ASSERT_UEQ(es.msgs_sent, 1);

	be_sock_close(c);
	st_fx_unpair(&f);
}

/* ---- the RPC layer: call options in, request info and stats out */

static struct guarded info_g;
static int info_seen;

static void info_handler(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	const size_t v1 = BE__V1_SIZE(struct be_rpc_req_info, remaining_us);
	struct be_rpc_req_info *ri = guarded_new(&info_g, v1);

	ri->size = (uint32_t)v1;
	be_rpc_req_info_sized(req, ri);
	guarded_check(&info_g, v1);
	ASSERT_EQ(ri->method, 2);
	guarded_free(&info_g);
	info_seen++;
	ASSERT_OK(be_rpc_req_reply(req, buf, len));
}

static void check_rpc(struct rt *t)
{
	const size_t v1o = BE__V1_SIZE(struct be_rpc_call_opts, flags);
	const size_t v1c = BE__V1_SIZE(struct be_rpc_chan_stats, lat);
	const size_t v1r = BE__V1_SIZE(struct be_rpc_replica_stats, addrs);
	const size_t v1s = BE__V1_SIZE(struct be_rpc_server_stats, conns);
	const size_t midc = offsetof(struct be_rpc_chan_stats, lat);
	struct be_rpc_call_opts opts = { .timeout_us = 10000000 }, *o;
	struct be_rpc_chan_stats cs;
	struct be_rpc_replica_stats rs;
	struct be_rpc_server_stats ss;
	struct be_rpc_scatter_item it[1];
	struct rt_server srv;
	struct rt_client cli;
	struct be_rpc_chan *ch;
	struct rt_result r = { 0 };
	struct guarded go;
	struct be_worker *ws[2];

	rt_server_start(t, &srv, NULL);
	ASSERT_OK(be_rpc_register(srv.rpc, RT_SVC, 2, info_handler, NULL, 0));
	rt_client_start(t, &cli, srv.ctx);
	ws[0] = srv.w;
	ws[1] = cli.w;
	ASSERT_OK(be_rpc_chan_open(cli.rpc, srv.addr, &ch));

	o = GUARDED_COPY(&go, opts, v1o, v1o);
	ASSERT_OK(be_rpc_call(ch, RT_SVC, 2, rt_req(10, 1), 10, o, rt_done_cb, &r, NULL));
	rt_pump(ws, 2, rt_result_done, &r);
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(info_seen, 1);
	be_rpc_buf_free(r.reply);
	guarded_check(&go, v1o);

	/* Too short to be a v1 struct: refused, nothing taken. */
	o->size = (uint32_t)v1o - 4;
	{
		void *req = rt_req(10, 2);

		ASSERT_EQ(be_rpc_call(ch, RT_SVC, 2, req, 10, o, rt_done_cb, &r, NULL), -EINVAL);
		it[0] = (struct be_rpc_scatter_item){ .ch = ch, .service = RT_SVC, .method = 2,
						      .req = req, .len = 10 };
		ASSERT_EQ(be_rpc_scatter(cli.rpc, it, 1, o, NULL, NULL, NULL), -EINVAL);
		be_rpc_buf_free(req);
	}
	guarded_check(&go, (uint32_t)v1o - 4);
	guarded_free(&go);

	cs = GUARDED_OUT(struct be_rpc_chan_stats, v1c, be_rpc_chan_stats_sized(ch, p_));
	ASSERT_UEQ(cs.c.ok, 1);
	ASSERT_UEQ(cs.lat.count, 1);
	cs = GUARDED_OUT(struct be_rpc_chan_stats, midc, be_rpc_chan_stats_sized(ch, p_));
	ASSERT_UEQ(cs.c.ok, 1);
	rs = GUARDED_OUT(struct be_rpc_replica_stats, v1r,
			 ASSERT_OK(be_rpc_chan_replica_stats_sized(ch, 0, p_)));
	ASSERT_EQ(rs.naddrs, 1);
	ss = GUARDED_OUT(struct be_rpc_server_stats, v1s, be_rpc_server_stats_sized(srv.rpc, p_));
	ASSERT_UEQ(ss.requests, 1);
	{
		const size_t v1n = BE__V1_SIZE(struct be_rpc_naming_stats, errors);
		struct be_rpc_naming_stats ns;
		struct be_rpc_naming *nm;

		ASSERT_OK(be_rpc_naming_create(&nm));
		ns = GUARDED_OUT(struct be_rpc_naming_stats, v1n, be_rpc_naming_stats_sized(nm, p_));
		ASSERT_UEQ(ns.records, 0);
		be_rpc_naming_destroy(nm);
	}

	be_rpc_chan_destroy(ch);
	rt_client_stop(&cli);
	rt_server_stop(&srv);
}

int main(int argc, char **argv)
{
	struct rt t;

	rt_init(&t, argc, argv);
	check_alloc();
	check_configs(&t);
	check_sock(&t);
	check_rpc(&t);
	return 0;
}
