/*
 * test-verbs-common.h - helpers for the verbs transport tests: both ends of
 * a connection live in one process (and one thread), on the Soft-RoCE
 * device of the QEMU guest, talking to the guest's own IP.
 *
 * The tests run under test/rxe/rxe-run, which sets BE_RXE_IP0/BE_RXE_DEV0.
 * Outside a guest (no RDMA device) they exit 77, ctest's skip code.
 */
#ifndef BE_TEST_VERBS_COMMON_H
#define BE_TEST_VERBS_COMMON_H

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "test.h"
#include "xport/xport.h"

#define TV_REGION (1u << 20)
#define TV_RECV_SIZE 4096u
#define TV_WAIT_S 60 /* hang guard only: never a timing assertion */

struct tv_side {
	const char *name;
	struct be_xevch *ch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	struct be_xevent evq[16];
	int nev;
};

struct tv_env {
	const struct be_xport_ops *ops;
	struct be_xdev *dev;
	struct be_xdev_attr attr;
	struct be_alloc_reg_hook hook;
	char *mem; /* TV_REGION bytes, registered */
	struct be_alloc_mr mr;
	char ip[64];
};

static inline double tv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Opens the device or exits 77 when there is none (not in the guest). */
static inline void tv_env_init(struct tv_env *e)
{
	const char *devname = getenv("BE_RXE_DEV0"), *ip = getenv("BE_RXE_IP0");
	char err[256] = "";
	int ret;

	memset(e, 0, sizeof(*e));
	e->ops = &be__xport_verbs_ops;
	ret = e->ops->dev_open(devname ? devname : "", &e->dev);
	if (ret == -ENODEV || ret == -ENOSYS || !ip) {
		fprintf(stderr, "SKIP: no RDMA device (%s); run under test/rxe/rxe-run\n",
			strerror(-ret));
		if (ret == 0)
			e->ops->dev_close(e->dev);
		exit(77);
	}
	ASSERT_OK(ret);
	snprintf(e->ip, sizeof(e->ip), "%s", ip);
	ASSERT_OK(e->ops->dev_query(e->dev, &e->attr));
	e->ops->dev_reg_hook(e->dev, &e->hook);
	e->mem = mmap(NULL, TV_REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(e->mem != MAP_FAILED);
	ret = e->hook.reg(e->hook.dev, e->mem, TV_REGION, -1, 0, &e->mr, err, sizeof(err));
	if (ret)
		TEST_FAIL("reg: %s", err);
}

static inline void tv_env_fini(struct tv_env *e)
{
	e->hook.dereg(e->hook.dev, &e->mr);
	munmap(e->mem, TV_REGION);
	e->ops->dev_close(e->dev);
}

/* An evch + cq + srq with @nrecv receives of TV_RECV_SIZE posted from
 * @mem_off on (wr_id = offset). */
static inline void tv_side_init(struct tv_env *e, struct tv_side *s, const char *name,
				uint32_t srq_depth, int nrecv, size_t mem_off)
{
	int i;

	memset(s, 0, sizeof(*s));
	s->name = name;
	ASSERT_OK(e->ops->evch_create(e->dev, &s->ch));
	ASSERT_OK(e->ops->cq_create(e->dev, 256, &s->cq));
	ASSERT_OK(e->ops->srq_create(s->cq, srq_depth, &s->srq));
	for (i = 0; i < nrecv; i++) {
		struct be_xrecv_wr w = { 0 }, *bad = NULL;
		size_t off = mem_off + (size_t)i * TV_RECV_SIZE;

		w.wr_id = off;
		w.sge.addr = (uintptr_t)(e->mem + off);
		w.sge.length = TV_RECV_SIZE;
		w.sge.lkey = e->mr.lkey;
		ASSERT_OK(e->ops->srq_post_recv(s->srq, &w, &bad));
	}
}

static inline void tv_side_fini(struct tv_env *e, struct tv_side *s)
{
	e->ops->srq_destroy(s->srq);
	e->ops->cq_destroy(s->cq);
	e->ops->evch_destroy(s->ch);
}

static inline void tv_pump(struct tv_env *e, struct tv_side **sides, int n, int wait_ms)
{
	struct pollfd pfd[4];
	int i, r;

	for (i = 0; i < n; i++) {
		pfd[i].fd = e->ops->evch_fd(sides[i]->ch);
		pfd[i].events = POLLIN;
	}
	poll(pfd, (nfds_t)n, wait_ms);
	for (i = 0; i < n; i++) {
		struct tv_side *s = sides[i];

		while (s->nev < (int)(sizeof(s->evq) / sizeof(s->evq[0]))) {
			r = e->ops->evch_get(s->ch, &s->evq[s->nev]);
			ASSERT_OK(r);
			if (r == 0)
				break;
			fprintf(stderr, "  %s: event %s status %d\n", s->name,
				be__xev_type_str(s->evq[s->nev].type), s->evq[s->nev].status);
			s->nev++;
		}
	}
}

/* Wait until side @want has an event of @type (others are kept). */
static inline struct be_xevent tv_wait_event(struct tv_env *e, struct tv_side **sides, int n,
					     struct tv_side *want, int type)
{
	double end = tv_now() + TV_WAIT_S;
	struct be_xevent ev;
	int i;

	for (;;) {
		for (i = 0; i < want->nev; i++) {
			if ((int)want->evq[i].type == type) {
				ev = want->evq[i];
				memmove(&want->evq[i], &want->evq[i + 1],
					(size_t)(want->nev - i - 1) * sizeof(ev));
				want->nev--;
				return ev;
			}
		}
		if (tv_now() > end)
			TEST_FAIL("%s: no %s event within %d s", want->name, be__xev_type_str(type),
				  TV_WAIT_S);
		tv_pump(e, sides, n, 50);
	}
}

/* Poll @s's CQ until @n completions arrived (into @wc). */
static inline void tv_wait_wc(struct tv_env *e, struct tv_side *s, struct be_xwc *wc, int n)
{
	double end = tv_now() + TV_WAIT_S;
	int got = 0, r;

	while (got < n) {
		r = e->ops->cq_poll(s->cq, wc + got, n - got);
		ASSERT_OK(r);
		got += r;
		if (got < n && tv_now() > end)
			TEST_FAIL("%s: %d of %d completions within %d s", s->name, got, n,
				  TV_WAIT_S);
	}
}

/* Connect @cli to a listener of @srv; returns both conns established. */
static inline void tv_connect_pair(struct tv_env *e, struct tv_side *cli, struct tv_side *srv,
				   struct be_xlistener **lst, struct be_xconn **cconn,
				   struct be_xconn **sconn)
{
	struct tv_side *sides[2] = { cli, srv };
	struct be_xconn_attr ca = { 0 };
	char addr[128], laddr[128];
	struct be_xevent ev;

	snprintf(addr, sizeof(addr), "%s:0", e->ip);
	ASSERT_OK(e->ops->listen(srv->ch, addr, 16, lst));
	ASSERT_OK(e->ops->listener_addr(*lst, laddr, sizeof(laddr)));
	fprintf(stderr, "  listening on %s\n", laddr);
	ca.send_cq = cli->cq;
	ca.recv_cq = cli->cq;
	ca.srq = cli->srq;
	ca.max_send_wr = 64;
	ca.max_inline = 128;
	ASSERT_OK(e->ops->connect(cli->ch, laddr, &ca, "hello", 5, cconn));
	ev = tv_wait_event(e, sides, 2, srv, BE_XEV_CONNECT_REQUEST);
	ASSERT_EQ(ev.priv_len, 5);
	ASSERT(memcmp(ev.priv, "hello", 5) == 0);
	ASSERT((const void *)(ev.listener) == (const void *)(*lst));
	*sconn = ev.conn;
	ca.send_cq = srv->cq;
	ca.recv_cq = srv->cq;
	ca.srq = srv->srq;
	ASSERT_OK(e->ops->accept(*sconn, &ca, "world!", 6));
	ev = tv_wait_event(e, sides, 2, cli, BE_XEV_ESTABLISHED);
	ASSERT((const void *)(ev.conn) == (const void *)(*cconn));
	ASSERT_EQ(ev.priv_len, 6);
	ASSERT(memcmp(ev.priv, "world!", 6) == 0);
	ev = tv_wait_event(e, sides, 2, srv, BE_XEV_ESTABLISHED);
	ASSERT((const void *)(ev.conn) == (const void *)(*sconn));
}

#endif /* BE_TEST_VERBS_COMMON_H */
