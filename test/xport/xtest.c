/*
 * xtest.c - see xtest.h. Test code: failures abort through test.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "xtest.h"

/*
 * Buffers come from bemalloc, attached to the test's device in xt_init();
 * the list only lets xt_fini() give back what a test did not.
 *
 * fork(): a child that calls xt_init() again attaches its own device; it
 * must allocate only large buffers (dedicated regions), since blocks the
 * parent already mapped are MAP_SHARED and would be shared with it.
 */
struct xt_buf {
	struct xt_buf *next;
	void *p;
};

static struct xt_buf *xt_bufs;

static uint64_t xt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void xt_open_dev(struct xt *t)
{
	const char *dev = getenv("BE_RXE_DEV0");

	ASSERT_OK(t->ops->dev_open(!strcmp(t->transport, "verbs") && dev ? dev : "", &t->dev));
	ASSERT_OK(t->ops->dev_query(t->dev, &t->attr));
	t->ops->dev_reg_hook(t->dev, &t->hook);
	t->dev->alloc_dev = be_alloc_attach_device(&t->hook);
	ASSERT_OK(t->dev->alloc_dev);
}

void xt_init(struct xt *t, int argc, char **argv)
{
	const char *addr = test_arg(argc, argv, "--addr", NULL), *hang;

	memset(t, 0, sizeof(*t));
	t->transport = test_arg(argc, argv, "--transport", "tcp");
	t->ops = be__xport_find(t->transport);
	if (!t->ops) {
		fprintf(stderr, "transport %s not built in: skipped\n", t->transport);
		exit(77);
	}
	if (!strcmp(t->transport, "verbs") && !getenv("BE_RXE_IP0")) {
		fprintf(stderr, "verbs: not in the Soft-RoCE guest (test/rxe/rxe-run): skipped\n");
		exit(77);
	}
	if (addr) {
		snprintf(t->addr, sizeof(t->addr), "%s", addr);
	} else if (!strcmp(t->transport, "shm")) {
		snprintf(t->addr, sizeof(t->addr), "be-test-%d", (int)getpid());
	} else if (!strcmp(t->transport, "verbs")) {
		const char *ip = getenv("BE_RXE_IP0");

		snprintf(t->addr, sizeof(t->addr), "%s:0", ip ? ip : "127.0.0.1");
	} else {
		snprintf(t->addr, sizeof(t->addr), "127.0.0.1:0");
	}
	hang = getenv("XT_HANG_S");
	t->hang_ns = (uint64_t)(hang ? atoi(hang) : 40) * 1000000000ull;
	xt_open_dev(t);
}

void xt_init_child(struct xt *t)
{
	struct xt c;

	memset(&c, 0, sizeof(c));
	c.ops = t->ops;
	c.transport = t->transport;
	memcpy(c.addr, t->addr, sizeof(c.addr));
	c.hang_ns = t->hang_ns;
	*t = c;
	xt_open_dev(t);
}

uint64_t xt_now_ms(void)
{
	return xt_now_ns() / 1000000;
}

size_t xt_nonzero(const volatile uint8_t *p, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		n += p[i] != 0;
	return n;
}

void xt_fini(struct xt *t)
{
	while (xt_bufs)
		xt_free(t, xt_bufs->p);
	ASSERT_OK(be_alloc_detach_device(t->dev->alloc_dev));
	t->ops->dev_close(t->dev);
	t->dev = NULL;
}

void *xt_alloc(struct xt *t, size_t size)
{
	struct xt_buf *b = malloc(sizeof(*b));

	(void)t;
	ASSERT(b);
	b->p = be_alloc(size);
	if (!b->p)
		TEST_FAIL("be_alloc(%zu): %s", size, be_alloc_last_error());
	b->next = xt_bufs;
	xt_bufs = b;
	return b->p;
}

void xt_free(struct xt *t, void *p)
{
	struct xt_buf **pp, *b;

	(void)t;
	if (!p)
		return;
	for (pp = &xt_bufs; *pp; pp = &(*pp)->next) {
		b = *pp;
		if (b->p != p)
			continue;
		*pp = b->next;
		be_free(p);
		free(b);
		return;
	}
	TEST_FAIL("xt_free(%p): unknown buffer", p);
}

void xt_region(struct xt *t, const void *p, uint8_t **base, size_t *len)
{
	struct be_alloc_region r;

	ASSERT_OK(be_alloc_lookup(p, t->dev->alloc_dev, &r));
	*base = r.base;
	*len = r.len;
}

uint32_t xt_lkey(struct xt *t, const void *p)
{
	struct be_alloc_region r;

	ASSERT_OK(be_alloc_lookup(p, t->dev->alloc_dev, &r));
	return r.lkey;
}

uint32_t xt_rkey(struct xt *t, const void *p)
{
	struct be_alloc_region r;

	ASSERT_OK(be_alloc_lookup(p, t->dev->alloc_dev, &r));
	return r.rkey;
}

uint32_t xt_grant(struct xt *t, struct be_xconn *owner, const void *p)
{
	uint8_t *base;
	size_t len;
	uint32_t rkey;

	if (!t->ops->grant)
		return xt_rkey(t, p);
	xt_region(t, p, &base, &len);
	ASSERT_OK(t->ops->grant(owner, base, len, &rkey));
	return rkey;
}

uint32_t xt_mem_grant(struct xt_mem *m, struct be_xconn *owner)
{
	uint32_t rkey;

	if (!m->t->ops->grant)
		return m->mr.rkey;
	ASSERT_OK(m->t->ops->grant(owner, m->p, m->len, &rkey));
	return rkey;
}

void xt_side_init(struct xt *t, struct xt_side *s, uint32_t cq_depth, uint32_t srq_depth)
{
	memset(s, 0, sizeof(*s));
	ASSERT(t->nsides < XT_MAX_SIDES);
	s->t = t;
	ASSERT_OK(t->ops->evch_create(t->dev, &s->ch));
	ASSERT_OK(t->ops->cq_create(t->dev, cq_depth, &s->cq));
	if (srq_depth)
		ASSERT_OK(t->ops->srq_create(s->cq, srq_depth, &s->srq));
	s->wc = calloc(XT_QUEUE, sizeof(*s->wc));
	ASSERT(s->wc);
	t->sides[t->nsides++] = s;
}

/* Destroy conns @a and @b and close listener @l, those not NULL. */
static void xt_close(struct xt *t, struct be_xconn *a, struct be_xconn *b, struct be_xlistener *l)
{
	if (a)
		t->ops->conn_destroy(a);
	if (b)
		t->ops->conn_destroy(b);
	if (l)
		t->ops->listener_close(l);
}

void xt_side_fini(struct xt *t, struct xt_side *s)
{
	struct be_xwc wc[64];
	int i;

	xt_close(t, s->conn, NULL, s->l);
	if (s->srq)
		t->ops->srq_destroy(s->srq);
	while (t->ops->cq_poll(s->cq, wc, 64) > 0)
		;
	t->ops->cq_destroy(s->cq);
	t->ops->evch_destroy(s->ch);
	free(s->wc);
	for (i = 0; i < t->nsides; i++) {
		if (t->sides[i] == s) {
			t->sides[i] = t->sides[--t->nsides];
			break;
		}
	}
}

struct be_xconn_attr xt_attr(struct xt_side *s, uint32_t max_send_wr)
{
	struct be_xconn_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = s->cq;
	a.recv_cq = s->cq;
	a.srq = s->srq;
	a.max_send_wr = max_send_wr;
	a.max_inline = 256;
	a.timeout_ms = 20000;
	return a;
}

void xt_recv_one(struct xt_side *s, uint64_t wr_id, const void *buf, uint32_t len,
		 uint32_t lkey)
{
	struct be_xrecv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sge.addr = (uint64_t)(uintptr_t)buf;
	wr.sge.length = len;
	wr.sge.lkey = lkey;
	ASSERT_OK(s->t->ops->srq_post_recv(s->srq, &wr, &bad));
}

void xt_post_recvs(struct xt *t, struct xt_side *s, int n, size_t size)
{
	int i;

	for (i = 0; i < n; i++) {
		void *buf = xt_alloc(t, size);

		xt_recv_one(s, (uint64_t)(uintptr_t)buf, buf, (uint32_t)size, xt_lkey(t, buf));
	}
}

void xt_progress(struct xt *t)
{
	int i, n;

	for (i = 0; i < t->nsides; i++) {
		struct xt_side *s = t->sides[i];
		struct be_xevent ev;

		while (s->nev < (int)BE_ARRAY_SIZE(s->ev)) {
			n = t->ops->evch_get(s->ch, &ev);
			ASSERT_OK(n);
			if (!n)
				break;
			s->ev[s->nev++] = ev;
		}
		if (s->nwc < XT_QUEUE) {
			n = t->ops->cq_poll(s->cq, s->wc + s->nwc, BE_MIN(64, XT_QUEUE - s->nwc));
			ASSERT_OK(n);
			s->nwc += n;
		}
	}
}

#define XT_WAIT(t, cond, what)                                                        \
	do {                                                                          \
		uint64_t start_ = xt_now_ns();                                        \
		unsigned long it_ = 0;                                                \
		while (!(cond)) {                                                     \
			xt_progress(t);                                               \
			if (++it_ % 1024 == 0 &&                                      \
			    xt_now_ns() - start_ > (t)->hang_ns)                      \
				TEST_FAIL("hang guard: waiting for %s", what);        \
			if (it_ % 64 == 0)                                            \
				usleep(50);                                           \
		}                                                                     \
	} while (0)

void xt_next_event(struct xt *t, struct xt_side *s, struct be_xevent *ev)
{
	XT_WAIT(t, s->nev > 0, "an event");
	*ev = s->ev[0];
	memmove(s->ev, s->ev + 1, (size_t)(s->nev - 1) * sizeof(*ev));
	s->nev--;
}

void xt_expect_event(struct xt *t, struct xt_side *s, enum be_xev_type type,
		     struct be_xevent *ev)
{
	struct be_xevent e;

	XT_WAIT(t, s->nev > 0, be__xev_type_str(type));
	xt_next_event(t, s, &e);
	if (e.type != type)
		TEST_FAIL("expected event %s, got %s (status %d)", be__xev_type_str(type),
			  be__xev_type_str(e.type), e.status);
	if (ev)
		*ev = e;
}

void xt_wait_wc(struct xt *t, struct xt_side *s, struct be_xwc *wc, int n)
{
	ASSERT(n <= XT_QUEUE);
	XT_WAIT(t, s->nwc >= n, "completions");
	memcpy(wc, s->wc, (size_t)n * sizeof(*wc));
	memmove(s->wc, s->wc + n, (size_t)(s->nwc - n) * sizeof(*wc));
	s->nwc -= n;
}

void xt_spin(struct xt *t, int ms)
{
	uint64_t end = xt_now_ns() + (uint64_t)ms * 1000000ull;

	while (xt_now_ns() < end) {
		xt_progress(t);
		usleep(100);
	}
}

struct be_xlistener *xt_listen(struct xt *t, struct xt_side *s)
{
	struct be_xlistener *l;

	ASSERT_OK(t->ops->listen(s->ch, t->addr, 128, &l));
	return l;
}

void xt_connect_pair(struct xt *t, struct xt_side *cli, struct xt_side *srv,
		     struct be_xlistener *l, uint32_t max_send_wr,
		     struct be_xconn **cli_conn, struct be_xconn **srv_conn)
{
	struct be_xconn_attr ca = xt_attr(cli, max_send_wr), sa = xt_attr(srv, max_send_wr);
	char addr[BE_XPORT_ADDR_MAX];
	struct be_xevent ev;

	ASSERT_OK(t->ops->listener_addr(l, addr, sizeof(addr)));
	ASSERT_OK(t->ops->connect(cli->ch, addr, &ca, "hi", 2, cli_conn));
	xt_expect_event(t, srv, BE_XEV_CONNECT_REQUEST, &ev);
	ASSERT_PTR_EQ(ev.listener, l);
	ASSERT_EQ(ev.priv_len, 2);
	ASSERT(memcmp(ev.priv, "hi", 2) == 0);
	*srv_conn = ev.conn;
	ASSERT_OK(t->ops->accept(*srv_conn, &sa, "ok", 2));
	xt_expect_event(t, srv, BE_XEV_ESTABLISHED, &ev);
	ASSERT_PTR_EQ(ev.conn, *srv_conn);
	xt_expect_event(t, cli, BE_XEV_ESTABLISHED, &ev);
	ASSERT_PTR_EQ(ev.conn, *cli_conn);
	ASSERT_EQ(ev.priv_len, 2);
	ASSERT(memcmp(ev.priv, "ok", 2) == 0);
}

void xt_pair_open(struct xt_pair *p, int argc, char **argv, uint32_t cq, uint32_t cli_srq,
		  uint32_t srv_srq, uint32_t max_send_wr)
{
	struct xt *t = &p->t;

	xt_init(t, argc, argv);
	xt_side_init(t, &p->cli, cq, cli_srq);
	xt_side_init(t, &p->srv, cq, srv_srq);
	p->l = xt_listen(t, &p->srv);
	p->c = p->s = NULL;
	if (max_send_wr)
		xt_connect_pair(t, &p->cli, &p->srv, p->l, max_send_wr, &p->c, &p->s);
}

void xt_pair_close(struct xt_pair *p)
{
	struct xt *t = &p->t;

	xt_close(t, p->c, p->s, p->l);
	/* A test may have taken the sides off the polled list. */
	t->nsides = 0;
	t->sides[t->nsides++] = &p->cli;
	t->sides[t->nsides++] = &p->srv;
	xt_side_fini(t, &p->cli);
	xt_side_fini(t, &p->srv);
	xt_fini(t);
}

void xt_pair_destroy_conns(struct xt_pair *p)
{
	p->t.ops->conn_destroy(p->c);
	p->t.ops->conn_destroy(p->s);
	p->c = p->s = NULL;
}

void xt_expect_disconnected(struct xt *t, struct xt_side *a, struct be_xconn *ca,
			    struct xt_side *b, struct be_xconn *cb)
{
	struct be_xevent ev;

	xt_expect_event(t, a, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, ca);
	xt_expect_event(t, b, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, cb);
}

void xt_expect_wc(struct xt *t, struct xt_side *s, uint64_t wr_id, enum be_xwc_status status,
		  struct be_xwc *wc)
{
	struct be_xwc w;

	if (!wc)
		wc = &w;
	xt_wait_wc(t, s, wc, 1);
	if (wc->wr_id != wr_id || wc->status != status)
		TEST_FAIL("completion of wr %llu (%s), expected wr %llu (%s)",
			  (unsigned long long)wc->wr_id, be__xwc_status_str(wc->status),
			  (unsigned long long)wr_id, be__xwc_status_str(status));
}

void xt_dead_addr(struct xt *t, char *buf, size_t len)
{
	struct be_xlistener *l;
	struct xt_side s;

	if (!strcmp(t->transport, "shm")) {
		snprintf(buf, len, "be-test-nobody-%d", (int)getpid());
		return;
	}
	/* Bind a port, then close it: nobody listens there now. */
	xt_side_init(t, &s, 16, 0);
	l = xt_listen(t, &s);
	ASSERT_OK(t->ops->listener_addr(l, buf, len));
	t->ops->listener_close(l);
	xt_side_fini(t, &s);
}

struct be_xsend_wr xt_wr(enum be_xwr_opcode op, uint64_t wr_id, unsigned int flags,
			 struct be_xsge *sg, int n)
{
	struct be_xsend_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.flags = flags;
	wr.sg_list = sg;
	wr.num_sge = n;
	return wr;
}

int xt_try_post(struct xt *t, struct be_xconn *c, enum be_xwr_opcode op, uint64_t wr_id,
		void *buf, uint32_t len, unsigned flags, uint64_t raddr, uint32_t rkey,
		uint32_t imm)
{
	struct be_xsge sge = { (uint64_t)(uintptr_t)buf, len, buf ? xt_lkey(t, buf) : 0 };
	struct be_xsend_wr wr = xt_wr(op, wr_id, flags, &sge, buf ? 1 : 0), *bad;

	wr.remote_addr = raddr;
	wr.rkey = rkey;
	wr.imm = imm;
	return t->ops->post_send(c, &wr, &bad);
}

void xt_post(struct xt *t, struct be_xconn *c, enum be_xwr_opcode op, uint64_t wr_id,
	     void *buf, uint32_t len, unsigned flags, uint64_t raddr, uint32_t rkey,
	     uint32_t imm)
{
	ASSERT_OK(xt_try_post(t, c, op, wr_id, buf, len, flags, raddr, rkey, imm));
}

void xt_post_on_error(struct xt *t, struct xt_side *s, struct be_xconn *c, uint64_t wr_id,
		      void *buf)
{
	struct be_xsge sge = { (uint64_t)(uintptr_t)buf, 8, xt_lkey(t, buf) };
	struct be_xsend_wr wr = xt_wr(BE_XWR_SEND, wr_id, 0, &sge, 1), *bad = NULL;
	struct be_xwc wc;
	int r;

	r = t->ops->post_send(c, &wr, &bad);
	if (r < 0) {
		ASSERT_PTR_EQ(bad, &wr);
		return;
	}
	xt_wait_wc(t, s, &wc, 1);
	ASSERT_UEQ(wc.wr_id, wr_id);
	ASSERT_EQ(wc.status, BE_XWC_WR_FLUSH_ERR);
}

void xt_side_wc(struct xt_side *s, struct be_xwc *wc, int n)
{
	uint64_t start = xt_now_ns();
	int got = 0;

	while (got < n) {
		int r = s->t->ops->cq_poll(s->cq, wc + got, n - got);

		ASSERT_OK(r);
		got += r;
		if (!r && xt_now_ns() - start > s->t->hang_ns)
			TEST_FAIL("hang guard: %d of %d completions", got, n);
	}
}

void xt_side_ack(struct xt_side *s)
{
	struct be_xwc wc;

	ASSERT_EQ(s->t->ops->cq_poll(s->cq, &wc, 1), 0);
}

void xt_side_no_wc(struct xt_side *s)
{
	struct be_xwc wc;
	int i;

	for (i = 0; i < 1000; i++)
		ASSERT_EQ(s->t->ops->cq_poll(s->cq, &wc, 1), 0);
}

int xt_side_event(struct xt_side *s, struct be_xevent *ev, int ms, struct xt_side *other)
{
	const struct be_xport_ops *ops = s->t->ops;
	uint64_t end = xt_now_ms() + (uint64_t)ms;

	for (;;) {
		struct be_xevent oev;
		struct pollfd p = { .fd = ops->evch_fd(s->ch), .events = POLLIN };
		int r = ops->evch_get(s->ch, ev);

		ASSERT_OK(r);
		if (r == 1)
			return 1;
		if (other) {
			r = ops->evch_get(other->ch, &oev);
			ASSERT_OK(r);
			ASSERT_EQ(r, 0); /* the caller expects no event there */
		}
		if (xt_now_ms() > end)
			return 0;
		poll(&p, 1, other ? 1 : 10);
	}
}

void xt_side_expect(struct xt_side *s, enum be_xev_type type, struct be_xevent *ev,
		    struct xt_side *other)
{
	struct be_xevent e;

	if (!ev)
		ev = &e;
	if (!xt_side_event(s, ev, (int)(s->t->hang_ns / 1000000), other))
		TEST_FAIL("hang guard: waiting for event %s", be__xev_type_str(type));
	if (ev->type != type)
		TEST_FAIL("event %s, expected %s (status %d)", be__xev_type_str(ev->type),
			  be__xev_type_str(type), ev->status);
}

static void xt_side_file_events(struct xt_side *s)
{
	while (s->nev < (int)BE_ARRAY_SIZE(s->ev)) {
		int r = s->t->ops->evch_get(s->ch, &s->ev[s->nev]);

		ASSERT_OK(r);
		if (!r)
			break;
		s->nev++;
	}
}

void xt_side_pump(struct xt *t, int ms)
{
	struct pollfd pfd[XT_MAX_SIDES];
	int i;

	for (i = 0; i < t->nsides; i++) {
		pfd[i].fd = t->ops->evch_fd(t->sides[i]->ch);
		pfd[i].events = POLLIN;
	}
	poll(pfd, (nfds_t)t->nsides, ms);
	for (i = 0; i < t->nsides; i++)
		xt_side_file_events(t->sides[i]);
}

struct be_xevent xt_side_wait_event(struct xt_side *s, enum be_xev_type type, int all)
{
	uint64_t start = xt_now_ns();
	struct be_xevent ev;
	int i;

	for (;;) {
		for (i = 0; i < s->nev; i++) {
			if (s->ev[i].type != type)
				continue;
			ev = s->ev[i];
			memmove(&s->ev[i], &s->ev[i + 1], (size_t)(s->nev - i - 1) * sizeof(ev));
			s->nev--;
			return ev;
		}
		if (xt_now_ns() - start > s->t->hang_ns)
			TEST_FAIL("hang guard: waiting for event %s", be__xev_type_str(type));
		if (all) {
			xt_side_pump(s->t, 50);
		} else {
			struct pollfd pfd = { .fd = s->t->ops->evch_fd(s->ch), .events = POLLIN };

			poll(&pfd, 1, 50);
			xt_side_file_events(s);
		}
	}
}

void xt_side_disconnected(struct xt_side *a, struct be_xconn *ca, struct xt_side *b,
			  struct be_xconn *cb)
{
	ASSERT_PTR_EQ(xt_side_wait_event(a, BE_XEV_DISCONNECTED, 1).conn, ca);
	ASSERT_PTR_EQ(xt_side_wait_event(b, BE_XEV_DISCONNECTED, 1).conn, cb);
}

void xt_side_connect(struct xt_side *a, struct xt_side *b, const char *name,
		     uint32_t max_send_wr)
{
	const struct be_xport_ops *ops = a->t->ops;
	struct be_xconn_attr aa = xt_attr(a, max_send_wr), ba = xt_attr(b, max_send_wr);
	char addr[BE_XPORT_ADDR_MAX];
	struct be_xevent ev;

	ASSERT_OK(ops->listen(a->ch, name ? name : a->t->addr, 16, &a->l));
	ASSERT_OK(ops->listener_addr(a->l, addr, sizeof(addr)));
	ASSERT_OK(ops->connect(b->ch, addr, &ba, "hi", 2, &b->conn));
	xt_side_expect(a, BE_XEV_CONNECT_REQUEST, &ev, NULL);
	ASSERT_EQ(ev.priv_len, 2);
	ASSERT(memcmp(ev.priv, "hi", 2) == 0);
	ASSERT_PTR_EQ(ev.listener, a->l);
	a->conn = ev.conn;
	ASSERT_OK(ops->accept(a->conn, &aa, "hello", 5));
	xt_side_expect(b, BE_XEV_ESTABLISHED, &ev, NULL);
	ASSERT_EQ(ev.priv_len, 5);
	ASSERT(memcmp(ev.priv, "hello", 5) == 0);
	ASSERT_PTR_EQ(ev.conn, b->conn);
	xt_side_expect(a, BE_XEV_ESTABLISHED, &ev, NULL);
	ASSERT_PTR_EQ(ev.conn, a->conn);
}

void xt_side_accept_grant(struct xt_side *s, struct xt_mem *m)
{
	struct be_xconn_attr attr = xt_attr(s, 64);
	struct xt_grant_msg msg;
	struct be_xevent ev;

	xt_side_expect(s, BE_XEV_CONNECT_REQUEST, &ev, NULL);
	s->conn = ev.conn;
	msg.addr = xt_mem_addr(m, 0);
	msg.rkey = xt_mem_grant(m, s->conn);
	ASSERT_OK(s->t->ops->accept(s->conn, &attr, &msg, sizeof(msg)));
	xt_side_expect(s, BE_XEV_ESTABLISHED, &ev, NULL);
}

void xt_sides_open(struct xt *t, struct xt_side *a, struct xt_side *b, uint32_t srq_depth,
		   struct xt_mem *ma, struct xt_mem *mb, size_t len, uint32_t max_send_wr)
{
	xt_side_init(t, a, 4096, srq_depth);
	xt_side_init(t, b, 4096, srq_depth);
	xt_mem_reg(t, ma, len);
	xt_mem_reg(t, mb, len);
	xt_side_connect(a, b, NULL, max_send_wr);
}

void xt_sides_close(struct xt_side *a, struct xt_side *b, struct xt_mem *ma, struct xt_mem *mb)
{
	struct xt *t = a->t;

	if (a->conn)
		t->ops->conn_destroy(a->conn);
	if (b->conn)
		t->ops->conn_destroy(b->conn);
	a->conn = b->conn = NULL;
	xt_side_fini(t, a);
	xt_side_fini(t, b);
	if (ma)
		xt_mem_unreg(ma);
	if (mb)
		xt_mem_unreg(mb);
}

void xt_mem_reg(struct xt *t, struct xt_mem *m, size_t len)
{
	char err[128] = "";

	m->t = t;
	m->len = len;
	m->fd = memfd_create("be-test", MFD_CLOEXEC);
	ASSERT(m->fd >= 0);
	ASSERT_OK(ftruncate(m->fd, (off_t)len));
	m->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	ASSERT(m->p != MAP_FAILED);
	if (t->hook.reg(t->hook.dev, m->p, len, m->fd, 0, &m->mr, err, sizeof(err)))
		TEST_FAIL("reg: %s", err);
}

void xt_mem_unreg(struct xt_mem *m)
{
	m->t->hook.dereg(m->t->hook.dev, &m->mr);
	munmap(m->p, m->len);
	close(m->fd);
}

void xt_mem_recv(struct xt_side *s, struct xt_mem *m, uint64_t off, uint32_t len,
		 uint64_t wr_id)
{
	xt_recv_one(s, wr_id, m->p + off, len, m->mr.lkey);
}

void xt_mem_recvs(struct xt_side *s, struct xt_mem *m, uint64_t off, int n, uint32_t size)
{
	int i;

	for (i = 0; i < n; i++)
		xt_mem_recv(s, m, off + (uint64_t)i * size, size, off + (uint64_t)i * size);
}

int xt_mem_post(struct be_xconn *c, enum be_xwr_opcode op, struct xt_mem *m, uint64_t off,
		uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned int flags,
		uint64_t wr_id)
{
	struct be_xsge sge = { .addr = xt_mem_addr(m, off), .length = len, .lkey = m->mr.lkey };
	struct be_xsend_wr wr = xt_wr(op, wr_id, flags, &sge, 1), *bad = NULL;

	wr.remote_addr = raddr;
	wr.rkey = rkey;
	wr.imm = imm;
	return m->t->ops->post_send(c, &wr, &bad);
}

static uint8_t xt_byte(size_t i, uint32_t seed)
{
	uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;

	return (uint8_t)(x >> 13 ^ x);
}

void xt_fill(void *p, size_t len, uint32_t seed)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = xt_byte(i, seed);
}

int xt_check(const void *p, size_t len, uint32_t seed)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != xt_byte(i, seed))
			return 0;
	return 1;
}
