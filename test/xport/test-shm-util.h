/*
 * test-shm-util.h - helpers for the shm transport tests: one "side" is a
 * device with an evch, a cq and an srq; memory comes from memfds that the
 * tests register through the device's reg hook (what bemalloc does).
 */
#ifndef BE_TEST_SHM_UTIL_H
#define BE_TEST_SHM_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "xport/xport.h"

static const struct be_xport_ops *const ops = &be__xport_shm_ops;

struct side {
	struct be_xdev *dev;
	struct be_xevch *ch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	struct be_alloc_reg_hook hook;
	struct be_xlistener *l;
	struct be_xconn *conn;
};

struct mem {
	uint8_t *p;
	size_t len;
	int fd;
	struct be_alloc_mr mr;
	struct side *s;
};

static inline uint64_t t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void side_open(struct side *s, uint32_t srq_depth)
{
	memset(s, 0, sizeof(*s));
	ASSERT_OK(ops->dev_open("", &s->dev));
	ops->dev_reg_hook(s->dev, &s->hook);
	ASSERT_OK(ops->evch_create(s->dev, &s->ch));
	ASSERT_OK(ops->cq_create(s->dev, 4096, &s->cq));
	ASSERT_OK(ops->srq_create(s->cq, srq_depth, &s->srq));
}

static inline void side_close(struct side *s)
{
	if (s->conn)
		ops->conn_destroy(s->conn);
	if (s->l)
		ops->listener_close(s->l);
	ops->srq_destroy(s->srq);
	{
		struct be_xwc wc[64];

		while (ops->cq_poll(s->cq, wc, 64) > 0)
			;
	}
	ops->cq_destroy(s->cq);
	ops->evch_destroy(s->ch);
	ops->dev_close(s->dev);
}

static inline void mem_reg(struct side *s, struct mem *m, size_t len)
{
	char err[128] = "";

	m->s = s;
	m->len = len;
	m->fd = memfd_create("be-test", MFD_CLOEXEC);
	ASSERT(m->fd >= 0);
	ASSERT_OK(ftruncate(m->fd, (off_t)len));
	m->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	ASSERT(m->p != MAP_FAILED);
	ASSERT_OK(s->hook.reg(s->hook.dev, m->p, len, m->fd, 0, &m->mr, err, sizeof(err)));
}

static inline void mem_unreg(struct mem *m)
{
	m->s->hook.dereg(m->s->hook.dev, &m->mr);
	munmap(m->p, m->len);
	close(m->fd);
}

static inline struct be_xconn_attr side_attr(struct side *s, uint32_t max_send_wr)
{
	struct be_xconn_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = s->cq;
	a.recv_cq = s->cq;
	a.srq = s->srq;
	a.max_send_wr = max_send_wr;
	a.max_inline = 4096;
	return a;
}

/* Wait up to @ms for one event on @s (other sides in @others are driven
 * too, so one thread can run both ends). Returns 1 or 0 on timeout. */
static inline int side_event(struct side *s, struct be_xevent *ev, int ms, struct side *other)
{
	uint64_t end = t_now_ms() + (uint64_t)ms;

	for (;;) {
		struct be_xevent oev;
		int r = ops->evch_get(s->ch, ev);

		ASSERT_OK(r);
		if (r == 1)
			return 1;
		if (other) {
			r = ops->evch_get(other->ch, &oev);
			ASSERT_OK(r);
			ASSERT_EQ(r, 0); /* the caller expects no event there */
		}
		if (t_now_ms() > end)
			return 0;
		{
			struct pollfd p = { .fd = ops->evch_fd(s->ch), .events = POLLIN };

			poll(&p, 1, other ? 1 : 10);
		}
	}
}

static inline void side_expect(struct side *s, enum be_xev_type type, struct be_xevent *ev,
			       struct side *other)
{
	struct be_xevent e;

	if (!ev)
		ev = &e;
	if (!side_event(s, ev, 10000, other))
		TEST_FAIL("timed out waiting for event %d", type);
	if (ev->type != type)
		TEST_FAIL("event %d, expected %d (status %d)", ev->type, type, ev->status);
}

/* Connect @b to @a (listening on @name) in one thread. */
static inline void pair_connect(struct side *a, struct side *b, const char *name,
				uint32_t max_send_wr)
{
	struct be_xconn_attr aa = side_attr(a, max_send_wr), ba = side_attr(b, max_send_wr);
	struct be_xevent ev;

	ASSERT_OK(ops->listen(a->ch, name, 16, &a->l));
	ASSERT_OK(ops->connect(b->ch, name, &ba, "hi", 2, &b->conn));
	side_expect(a, BE_XEV_CONNECT_REQUEST, &ev, NULL);
	ASSERT_EQ(ev.priv_len, 2);
	ASSERT(memcmp(ev.priv, "hi", 2) == 0);
	ASSERT((const void *)(ev.listener) == (const void *)(a->l));
	a->conn = ev.conn;
	ASSERT_OK(ops->accept(a->conn, &aa, "hello", 5));
	side_expect(b, BE_XEV_ESTABLISHED, &ev, NULL);
	ASSERT_EQ(ev.priv_len, 5);
	ASSERT(memcmp(ev.priv, "hello", 5) == 0);
	ASSERT((const void *)(ev.conn) == (const void *)(b->conn));
	side_expect(a, BE_XEV_ESTABLISHED, &ev, NULL);
	ASSERT((const void *)(ev.conn) == (const void *)(a->conn));
}

/* Poll @s's cq until @n completions arrived (or fail after 10 s). */
static inline void side_wc(struct side *s, struct be_xwc *wc, int n)
{
	uint64_t end = t_now_ms() + 10000;
	int got = 0;

	while (got < n) {
		int r = ops->cq_poll(s->cq, wc + got, n - got);

		ASSERT_OK(r);
		got += r;
		if (!r && t_now_ms() > end)
			TEST_FAIL("timed out: %d of %d completions", got, n);
	}
}

/* A receiver acknowledges the records it took at its next poll (or post
 * on that conn, or arm): one poll of @s, which finds nothing. */
static inline void side_ack(struct side *s)
{
	struct be_xwc wc;

	ASSERT_EQ(ops->cq_poll(s->cq, &wc, 1), 0);
}

/* No completion shows up on @s within a few polls. */
static inline void side_no_wc(struct side *s)
{
	struct be_xwc wc;
	int i;

	for (i = 0; i < 1000; i++)
		ASSERT_EQ(ops->cq_poll(s->cq, &wc, 1), 0);
}

static inline void post_recv(struct side *s, struct mem *m, uint64_t off, uint32_t len,
			     uint64_t wr_id)
{
	struct be_xrecv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sge.addr = (uint64_t)(uintptr_t)(m->p + off);
	wr.sge.length = len;
	wr.sge.lkey = m->mr.lkey;
	ASSERT_OK(ops->srq_post_recv(s->srq, &wr, &bad));
}

static inline int post_one(struct side *s, enum be_xwr_opcode op, struct mem *m, uint64_t off,
			   uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm,
			   unsigned int flags, uint64_t wr_id)
{
	struct be_xsge sge = { .addr = (uint64_t)(uintptr_t)(m->p + off), .length = len,
			       .lkey = m->mr.lkey };
	struct be_xsend_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.flags = flags;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	wr.imm = imm;
	return ops->post_send(s->conn, &wr, &bad);
}

static inline uint64_t mem_addr(struct mem *m, uint64_t off)
{
	return (uint64_t)(uintptr_t)(m->p + off);
}

#endif /* BE_TEST_SHM_UTIL_H */
