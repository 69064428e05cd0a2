/*
 * xtest.h - the one harness of test/xport: the conformance suite and the
 * tests of one transport alone (test-shm-*.c, test-verbs-*.c, the tcp
 * ones) all use it.
 *
 * Every test runs against one transport, chosen with --transport NAME
 * (tcp, shm, verbs; CMake passes it) and, for listen/connect, --addr ADDR
 * (defaults: 127.0.0.1:0 for tcp, "be-test-<pid>" for shm, $BE_RXE_IP0:0
 * for verbs). Verbs opens $BE_RXE_DEV0 and skips (77) outside the
 * Soft-RoCE guest (test/rxe/rxe-run sets $BE_RXE_IP0).
 *
 * Both ends live in one process (or in a forked child, xt_init_child()):
 * each end is an xt_side (an evch, a cq and an srq, as one worker would
 * have). Two ways to wait:
 * - xt_next_event(), xt_wait_wc() and the rest of the xt_* waits make
 *   progress on every side and file events and completions on the side
 *   they belong to (one thread drives both ends);
 * - xt_side_*() polls only the side it names, for tests that decide
 *   which side polls when (acks and wakeups depend on it).
 *
 * Waits are bounded by a generous wall-clock hang guard (XT_HANG_S,
 * default 40 s, under the usual 60 s ctest timeout; not a speed
 * assertion): a test that hangs fails with a message instead of running
 * into the ctest timeout. Nothing is asserted after a fixed sleep except
 * that nothing happened (xt_spin() then a check that nothing arrived).
 *
 * Buffers come from xt_alloc(): bemalloc buffers (be_alloc()), registered
 * on the test's device, which xt_init() attaches to bemalloc; or from
 * xt_mem_reg(): a memfd registered by hand through the device's hook.
 */
#ifndef BE_TEST_XPORT_XTEST_H
#define BE_TEST_XPORT_XTEST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "test.h"
#include "util/common.h"
#include "xport/xport.h"

#define XT_MAX_SIDES 8
#define XT_QUEUE 8192
/* Bound of a wait a test writes itself (a hang guard, never a timing
 * assertion). */
#define XT_WAIT_S 60

struct xt_side {
	struct xt *t;
	struct be_xevch *ch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	/* Filed by xt_progress(). */
	struct be_xevent ev[256];
	int nev;
	struct be_xwc *wc;
	int nwc;
	/* Optional, for tests that keep one conn (and listener) per side;
	 * xt_side_fini() destroys them if set. */
	struct be_xlistener *l;
	struct be_xconn *conn;
};

struct xt {
	const struct be_xport_ops *ops;
	const char *transport;
	char addr[BE_XPORT_ADDR_MAX];   /* where to listen */
	struct be_xdev *dev;
	struct be_xdev_attr attr;
	struct be_alloc_reg_hook hook;  /* to register memory by hand */
	int alloc_dev;                  /* bemalloc's index of dev */
	struct xt_side *sides[XT_MAX_SIDES];
	int nsides;
	uint64_t hang_ns;
};

/* Parse --transport/--addr, open the device. Skips (exit 77) if the
 * transport is not built in. */
void xt_init(struct xt *t, int argc, char **argv);
void xt_fini(struct xt *t);
/* In a forked child: open a device of the same transport of its own (the
 * parent's stays the parent's; the child never closes it). */
void xt_init_child(struct xt *t);
uint64_t xt_now_ms(void);
/* Bytes of @p (@len) that are not zero. */
size_t xt_nonzero(const volatile uint8_t *p, size_t len);

/* A registered buffer of @size bytes; keys for the test's device. */
void *xt_alloc(struct xt *t, size_t size);
void xt_free(struct xt *t, void *p);
/* The registered region holding @p (a bemalloc block or huge region). */
void xt_region(struct xt *t, const void *p, uint8_t **base, size_t *len);
uint32_t xt_lkey(struct xt *t, const void *p);
uint32_t xt_rkey(struct xt *t, const void *p);
/* The rkey under which the peer of @owner, a conn of this process, may
 * WRITE into the registered region holding @p: a new grant of all of it
 * on @owner (tcp, shm; verbs: a memory window, or the region's rkey on a
 * device without them), else the region's rkey. */
uint32_t xt_grant(struct xt *t, struct be_xconn *owner, const void *p);

/* An evch + cq (@cq_depth) + srq (@srq_depth, 0 = none). */
void xt_side_init(struct xt *t, struct xt_side *s, uint32_t cq_depth, uint32_t srq_depth);
void xt_side_fini(struct xt *t, struct xt_side *s);

/* A conn attribute for side @s with @max_send_wr. */
struct be_xconn_attr xt_attr(struct xt_side *s, uint32_t max_send_wr);

/* Post @n receives of @size bytes each from fresh xt_alloc() buffers;
 * wr_id is the buffer address. */
void xt_post_recvs(struct xt *t, struct xt_side *s, int n, size_t size);
/* Post one receive of @len bytes at @buf (key @lkey) to @s's srq. */
void xt_recv_one(struct xt_side *s, uint64_t wr_id, const void *buf, uint32_t len,
		 uint32_t lkey);

/* Poll every side once; file what comes out. */
void xt_progress(struct xt *t);

/* Wait for the next event on @s (any type); fails the test on a hang.
 * Returns it in *ev. */
void xt_next_event(struct xt *t, struct xt_side *s, struct be_xevent *ev);
/* Wait for an event of @type on @s, skipping none (fails if another
 * type comes first). */
void xt_expect_event(struct xt *t, struct xt_side *s, enum be_xev_type type,
		     struct be_xevent *ev);
/* Wait until @n completions are filed on @s and move them to @wc. */
void xt_wait_wc(struct xt *t, struct xt_side *s, struct be_xwc *wc, int n);
/* Progress for about @ms milliseconds. */
void xt_spin(struct xt *t, int ms);

/* Listen on @srv, connect from @cli with @priv, accept: *cli_conn and
 * *srv_conn are established (both ESTABLISHED events consumed). The
 * private data ("hi" with the request, "ok" with the accept) is checked
 * on arrival. */
void xt_connect_pair(struct xt *t, struct xt_side *cli, struct xt_side *srv,
		     struct be_xlistener *l, uint32_t max_send_wr,
		     struct be_xconn **cli_conn, struct be_xconn **srv_conn);
struct be_xlistener *xt_listen(struct xt *t, struct xt_side *s);

/*
 * The usual fixture: a client and a server side (cq depth @cq each, srq
 * depths @cli_srq and @srv_srq, 0 = none), a listener on the server and,
 * when @max_send_wr is not 0, one conn established between them (c on
 * the client, s on the server). xt_pair_close() destroys whatever of c,
 * s and l is still set (a test that destroys one itself sets it NULL),
 * both sides and the device.
 */
struct xt_pair {
	struct xt t;
	struct xt_side cli, srv;
	struct be_xlistener *l;
	struct be_xconn *c, *s;
};

void xt_pair_open(struct xt_pair *p, int argc, char **argv, uint32_t cq, uint32_t cli_srq,
		  uint32_t srv_srq, uint32_t max_send_wr);
void xt_pair_close(struct xt_pair *p);
/* Destroy c and s (set them NULL), for a test that connects again. */
void xt_pair_destroy_conns(struct xt_pair *p);

/* Wait for DISCONNECTED of @ca on @a, then of @cb on @b. */
void xt_expect_disconnected(struct xt *t, struct xt_side *a, struct be_xconn *ca,
			    struct xt_side *b, struct be_xconn *cb);
/* Wait for the next completion on @s; check its wr_id and status. */
void xt_expect_wc(struct xt *t, struct xt_side *s, uint64_t wr_id, enum be_xwc_status status,
		  struct be_xwc *wc);

/* An address where nobody listens (for UNREACHABLE). */
void xt_dead_addr(struct xt *t, char *buf, size_t len);

/* A send WR: @op, @wr_id and @flags on the @n sges at @sg, every other
 * field 0 (remote_addr, rkey, imm, next: the caller sets what it needs). */
struct be_xsend_wr xt_wr(enum be_xwr_opcode op, uint64_t wr_id, unsigned int flags,
			 struct be_xsge *sg, int n);

/* Post a single WR (@buf NULL: no sge); xt_try_post() returns what
 * post_send returns, xt_post() fails the test unless it is 0. */
int xt_try_post(struct xt *t, struct be_xconn *c, enum be_xwr_opcode op, uint64_t wr_id,
		void *buf, uint32_t len, unsigned flags, uint64_t raddr, uint32_t rkey,
		uint32_t imm);
void xt_post(struct xt *t, struct be_xconn *c, enum be_xwr_opcode op, uint64_t wr_id,
	     void *buf, uint32_t len, unsigned flags, uint64_t raddr, uint32_t rkey,
	     uint32_t imm);

/* On a conn in error, a post either fails at once (negative errno, *bad at
 * the WR) or is accepted and completes with WR_FLUSH_ERR, as on an RC QP
 * in error; both are allowed. Checks whichever happens on side @s. */
void xt_post_on_error(struct xt *t, struct xt_side *s, struct be_xconn *c, uint64_t wr_id,
		      void *buf);

/*
 * Sides polled by hand. The waits above progress every side; a test
 * that decides itself which side polls when (acks go out when the
 * receiver polls, wakeups depend on it) uses these instead: each polls
 * only the side it names, bounded by the hang guard.
 */
/* Poll @s's cq until @n completions arrived in @wc. */
void xt_side_wc(struct xt_side *s, struct be_xwc *wc, int n);
/* One poll of @s finds nothing (a receiver acknowledges what it took at
 * its next poll). */
void xt_side_ack(struct xt_side *s);
/* No completion shows up on @s within 1000 polls. */
void xt_side_no_wc(struct xt_side *s);
/* Wait up to @ms for one event on @s; @other, if set, is polled too and
 * must have none. Returns 1, or 0 on timeout. */
int xt_side_event(struct xt_side *s, struct be_xevent *ev, int ms, struct xt_side *other);
/* The next event on @s is of @type (into @ev if set). */
void xt_side_expect(struct xt_side *s, enum be_xev_type type, struct be_xevent *ev,
		    struct xt_side *other);
/* Wait for an event of @type on @s, moving only event channels: every
 * side's when @all, else only that of @s (a connector that must not
 * read its events yet). Events of other types stay queued. */
struct be_xevent xt_side_wait_event(struct xt_side *s, enum be_xev_type type, int all);
/* Wait (every side's channel moving) for DISCONNECTED of @ca on @a,
 * then of @cb on @b. */
void xt_side_disconnected(struct xt_side *a, struct be_xconn *ca, struct xt_side *b,
			  struct be_xconn *cb);
/* Sleep up to @ms on the event fds of every side, then file their events. */
void xt_side_pump(struct xt *t, int ms);
/* @a listens on @name (NULL: the test's address), @b connects, @a
 * accepts, with private data checked both ways: a->l, a->conn, b->conn. */
void xt_side_connect(struct xt_side *a, struct xt_side *b, const char *name,
		     uint32_t max_send_wr);

struct xt_mem;
/* Open sides @a and @b (srq depth @srq_depth), register @len bytes in @ma
 * and @mb, and connect @b to @a (xt_side_connect()). */
void xt_sides_open(struct xt *t, struct xt_side *a, struct xt_side *b, uint32_t srq_depth,
		   struct xt_mem *ma, struct xt_mem *mb, size_t len, uint32_t max_send_wr);
/* Destroy a->conn and b->conn, close both sides, then unregister @ma and
 * @mb (either may be NULL). */
void xt_sides_close(struct xt_side *a, struct xt_side *b, struct xt_mem *ma, struct xt_mem *mb);

/*
 * Memory registered by hand through the device's reg hook (what bemalloc
 * does): a memfd mapping of @len bytes, for tests that need the fd, a
 * region of their own, or memory a forked child did not inherit.
 */
struct xt_mem {
	uint8_t *p;
	size_t len;
	int fd;
	struct be_alloc_mr mr;
	struct xt *t;
};

void xt_mem_reg(struct xt *t, struct xt_mem *m, size_t len);
void xt_mem_unreg(struct xt_mem *m);
/* xt_grant() for all of @m. */
uint32_t xt_mem_grant(struct xt_mem *m, struct be_xconn *owner);
static inline uint64_t xt_mem_addr(const struct xt_mem *m, uint64_t off)
{
	return (uint64_t)(uintptr_t)(m->p + off);
}
/* Post one receive of @len bytes at @off of @m on @s's srq. */
void xt_mem_recv(struct xt_side *s, struct xt_mem *m, uint64_t off, uint32_t len,
		 uint64_t wr_id);
/* Post @n receives of @size bytes from @off of @m on (wr_id: the offset). */
void xt_mem_recvs(struct xt_side *s, struct xt_mem *m, uint64_t off, int n, uint32_t size);
/* Post one WR from @off of @m on @c; returns what post_send does. */
int xt_mem_post(struct be_xconn *c, enum be_xwr_opcode op, struct xt_mem *m, uint64_t off,
		uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned int flags,
		uint64_t wr_id);

/* What the server of a two-process test hands its client at accept:
 * where its region is, and a key to write into it. */
struct xt_grant_msg {
	uint64_t addr;
	uint32_t rkey;
};
/* On @s, listening: wait for a connection request, accept it with an
 * xt_grant_msg for all of @m (granted to the new conn, s->conn) and
 * wait until it is established. */
void xt_side_accept_grant(struct xt_side *s, struct xt_mem *m);

/* Deterministic pattern for verification. */
void xt_fill(void *p, size_t len, uint32_t seed);
int xt_check(const void *p, size_t len, uint32_t seed); /* 1 if it matches */

#endif /* BE_TEST_XPORT_XTEST_H */
