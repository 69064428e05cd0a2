/*
 * fake.h - the fault-injecting transport ("fake") and its fault API
 * (internal: tests include it, applications cannot).
 *
 * Model. "fake" wraps a real transport (the inner one: tcp or shm) and
 * passes everything through, so whatever works on the inner transport
 * works on fake; only the faults a test scripts differ. Addresses are the
 * inner transport's behind the fake scheme: "fake://127.0.0.1:0" (inner
 * tcp), "fake://name" (inner shm). The inner transport is chosen when a
 * context opens the fake device: be__fake_inner(), else the environment
 * (BE_FAKE_INNER=tcp|shm), else tcp. Inner tcp reports max_rx_alloc, so
 * the engine sends large messages one-way (oneway.c); inner shm takes the
 * WriteRequest path (large.c).
 *
 * Faults are exact: they fire on a count (the n-th work request, the
 * n-th byte, the n-th receive, the next n events), never on a clock, and
 * the one random choice (jitter) comes from be__fake_seed(). Every fault
 * keeps RC's rules (xport.h): the WRs of a conn complete in posting
 * order, and a WR that fails puts its conn in error after every earlier
 * WR completed, every later one completing with BE_XWC_WR_FLUSH_ERR and
 * both ends seeing BE_XEV_DISCONNECTED. Completions of different conns
 * may be reordered (delay, jitter).
 *
 * How it is built: every WR is posted to the inner conn signaled, with a
 * shadow entry on the fake conn (the WR the engine posted, whether it
 * wanted a completion). Inner completions retire shadow entries in order;
 * those the engine did not ask for are dropped. A WR chosen to fail is not
 * posted: its shadow entry waits until the entries before it completed,
 * then completes with the chosen status and the conn goes to error
 * (the inner conn is disconnected). A cq keeps the completions it made
 * or holds (delay) in a queue of its own; its fd (cq_fd) is an epoll set
 * over the inner cq's fd and an eventfd kicked while the queue has
 * completions due. The evch works the same way for events.
 *
 * Out of process (a server a test starts): BE_FAKE_INNER chooses the
 * inner transport, BE_FAKE_SEED the seed and BE_FAKE_CONN the faults
 * every conn starts with ("fail_wr=3,fail_status=8", "jitter=16",
 * "break_after=65536": the keys are the fields below, delay and jitter
 * for delay_polls and jitter_polls), read when the first fake device
 * opens.
 *
 * Threads: the fault API may be called from any thread (a mutex guards
 * the settings); a setting on one conn (be__fake_conn_set) belongs to
 * the conn's worker thread, or to any thread while that worker is not
 * running progress (the usual test: one thread drives every worker).
 * Everything else follows xport.h.
 */
#ifndef BE_XPORT_FAKE_FAKE_H
#define BE_XPORT_FAKE_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/common.h"
#include "util/list.h"
#include "xport/cq.h"
#include "xport/evch.h"
#include "xport/wake.h"
#include "xport/xport.h"

/* ---- the fault API ---- */

/*
 * Faults of one conn (zero: none). Counts start when the faults are set
 * (be__fake_conn_set) or when the conn is created (be__fake_conn_new).
 */
struct be__fake_faults {
	/* The fail_wr-th send WR posted (1-based) fails: with fail_post
	 * (a negative errno) post_send refuses it (*bad = that WR, the
	 * WRs before it in the chain are posted); else it completes with
	 * fail_status (BE_XWC_GENERAL_ERR when 0) once every earlier WR
	 * completed, and the conn goes to error. */
	uint64_t fail_wr;
	enum be_xwc_status fail_status;
	int fail_post;
	/* The conn breaks after carrying break_after bytes of send WRs
	 * (the sum of their scatter lists). WRs are whole: the first WR
	 * that would pass the limit is not delivered and completes with
	 * BE_XWC_RETRY_EXC_ERR (what a dead path gives an RC QP). */
	bool do_break;
	uint64_t break_after;
	/* The fail_recv-th receive completion (RECV or RECV_IMM) of the
	 * conn completes with recv_status (BE_XWC_LOC_LEN_ERR when 0), its
	 * data dropped (a one-way buffer goes back through rx_free); the
	 * conn goes to error and later receives flush. */
	uint64_t fail_recv;
	enum be_xwc_status recv_status;
	/* Each completion of the conn waits delay_polls polls of its cq,
	 * plus 0..jitter_polls (seeded), after it is due; completions of
	 * the conn keep their order, other conns' pass them. */
	uint32_t delay_polls;
	uint32_t jitter_polls;
	/* The conn's receives are held until it is destroyed: the peer
	 * seems alive to the transport but nothing it sends arrives (a
	 * stuck peer; the engine's keepalive must notice). Held receives
	 * are handed back without the conn when it is destroyed. */
	bool stall_rx;
};

/* What fired so far (be__fake_reset zeroes it). */
struct be__fake_stats {
	uint64_t wr_failed;       /* send WRs failed by fail_wr / break_after */
	uint64_t post_failed;     /* post_send refused (fail_post) */
	uint64_t recv_failed;     /* receives failed by fail_recv */
	uint64_t srq_post_failed; /* srq_post_recv refused */
	uint64_t held;            /* completions delayed or stalled */
	uint64_t ev_dropped;      /* connection events dropped */
	uint64_t ev_delayed;      /* connection events delayed */
	uint64_t conns;           /* conns created (connect or request) */
	enum be_xwc_opcode failed_op; /* the opcode of the last WR failed */
};

/* Forget every fault, rule and counter; ports up; inner transport back
 * to the default. Conns keep the faults they were given. */
void be__fake_reset(void);

/* The inner transport of the next fake device opened ("tcp", "shm");
 * NULL: the default. Returns 0 or -EPROTONOSUPPORT. */
int be__fake_inner(const char *name);

/* The seed of the jitter (default 1). */
void be__fake_seed(uint64_t seed);

/* Faults every conn created from now on starts with (connect, and
 * requests reaching a listener); NULL: none. Borrows @f (copied). */
void be__fake_conn_new(const struct be__fake_faults *f);

/* Replace the faults of @c (a conn of the fake transport, e.g. an
 * Engine's e->conn), counting from now. Borrows @f (copied); NULL
 * clears them. Returns 0 or -EINVAL (not a fake conn). */
int be__fake_conn_set(struct be_xconn *c, const struct be__fake_faults *f);

/* The next @n events of @type on any fake evch are dropped (@gets < 0)
 * or held for @gets calls of evch_get on their evch (events of one conn
 * keep their order). A dropped CONNECT_REQUEST is never answered: its
 * connector waits (its connect times out); the request is rejected when
 * its listener closes. Rules add up; at most 8. Returns 0 or -ENOSPC. */
int be__fake_event_rule(enum be_xev_type type, unsigned int n, int gets);

/* The @nth receive WR posted on any fake srq from now on (1-based) is
 * refused by srq_post_recv with @err (a negative errno; *bad = it). */
void be__fake_srq_post_fail(uint64_t nth, int err);

/*
 * be__fake_port() - set port @port of every fake device up or down.
 * dev_query reports it; every fake evch gets BE_XEV_PORT_CHANGE (the
 * next time its owner polls it: its fd is made readable). Conns use
 * port 0 (shm and tcp have no other), so port 0 going down is the link
 * gone for good: each established conn breaks as when an RC QP exhausts
 * its retries (its first failed WR completes with BE_XWC_RETRY_EXC_ERR,
 * the rest flush, DISCONNECTED follows), each conn still connecting gets
 * BE_XEV_UNREACHABLE with -ENETDOWN, and a connect while it is down does
 * too; other ports are only reported. Returns 0 or -EINVAL.
 */
int be__fake_port(int port, bool up);

void be__fake_stats(struct be__fake_stats *out);

/* Receives posted on fake srq @srq and not handed to its owner yet
 * (completions held here count as posted). */
int64_t be__fake_srq_outstanding(struct be_xsrq *srq);

/* ---- objects (the files of src/xport/fake) ---- */

#define FAKE_MAX_RULES 8

struct fake_dev {
	struct be_xdev x;
	const struct be_xport_ops *in_ops;
	struct be_xdev *in;
	struct be__list link;       /* fake.devs */
};

/* A completion the fake cq made or holds, due at poll @due. */
struct fake_cqe {
	struct be_xwc wc;
	uint64_t due;
};

struct fake_cq {
	struct be__xcq c;           /* cq_fd: the inner cq's fd + efd */
	struct be_xcq *in;
	struct fake_cqe *q;         /* FIFO of completions not yet handed out */
	uint32_t count, cap;
	uint64_t polls;
	struct be__list srqs;       /* fake_srq.link: inner srq -> ours */
	struct be__list sconns;     /* fake_conn.slink: conns sending here */
	struct be__list rconns;     /* fake_conn.rlink: conns receiving here */
};

struct fake_srq {
	struct be_xsrq x;
	struct be_xsrq *in;
	int64_t posted;             /* receives posted, not handed out */
	struct be__list link;
};

/* A held event, due at evch_get call @due; dropped requests wait too
 * (due UINT64_MAX) until their listener closes. */
struct fake_ev {
	struct be_xevent ev;
	uint64_t due;
	bool dropped;
};

struct fake_evch {
	struct be__xch c;           /* evch.h: wake (epfd: the inner evch's fd
				     * + efd), conns (fake_conn.link),
				     * listeners (fake_listener.link); evq
				     * unused: the queue is q */
	struct be_xevch *in;
	struct fake_ev *q;
	uint32_t count, cap;
	uint64_t gets;
	unsigned int port_gen;      /* fake.port_gen last seen */
	bool port_up[BE_XPORT_MAX_PORTS];
	struct be__list link;       /* fake.evchs */
};

struct fake_listener {
	struct be_xlistener x;
	struct be_xlistener *in;
	struct be__list link;       /* ch->c.listeners */
};

enum { FAKE_SWR_POSTED = 0, FAKE_SWR_FAIL };

/* The shadow of a send WR, in posting order. */
struct fake_swr {
	uint64_t wr_id;
	uint64_t seq;               /* FAKE_SWR_POSTED: the inner WR's wr_id */
	uint8_t kind;
	bool signaled;              /* the engine asked for a completion */
	enum be_xwc_opcode op;
	enum be_xwc_status st;      /* FAKE_SWR_FAIL: its status */
};

struct fake_conn {
	struct be_xconn x;
	struct be_xconn *in;        /* NULL: never connected (port down) */
	/* Parents destroyed first (a caller bug) leave these NULL: the
	 * conn is then a husk until conn_destroy. */
	struct fake_evch *ch;
	struct fake_cq *scq, *rcq;
	struct be__list slink, rlink; /* scq->sconns, rcq->rconns */
	struct be_xlistener *l;     /* a request: its listener (ours) */
	bool handed;                /* its CONNECT_REQUEST was handed out */
	struct be__list link;       /* ch->c.conns */
	int (*rx_alloc)(struct be_xconn *conn, uint64_t len, void **out);
	void (*rx_free)(struct be_xconn *conn, void *buf);
	struct be__fake_faults f;
	uint64_t nwr, bytes, nrecv; /* counted for f */
	struct fake_swr *sq;        /* shadow send queue, a ring */
	uint32_t sq_head, sq_count, sq_cap;
	uint64_t seq;               /* wr_id of the next WR posted to the inner conn */
	bool established;
	bool halted;                /* a failing WR is queued: later WRs are not posted */
	bool failed;                /* in error: later WRs and receives flush */
	bool disc;                  /* the inner conn was disconnected */
	bool dead;                  /* port down: events of the inner conn ignored */
	enum be_xwc_status brk_st;  /* the first error after a break (0: as it comes) */
	uint64_t sdue, rdue;        /* latest due of its held completions */
	uint64_t edue;              /* latest due of its held events */
};

static inline struct fake_conn *to_fconn(struct be_xconn *c)
{
	return container_of(c, struct fake_conn, x);
}

/* The inner transport's ops of a fake object's device. */
static inline const struct be_xport_ops *fake_in_ops(const struct be_xdev *xd)
{
	return container_of(xd, struct fake_dev, x)->in_ops;
}

/* The fault state shared by every fake object (fake.c). */
struct fake_rule {
	enum be_xev_type type;
	unsigned int n;
	int gets;
};

struct fake_global {
	pthread_mutex_t lock;
	const struct be_xport_ops *inner;  /* NULL: default */
	uint64_t rng;
	struct be__fake_faults conn_new;
	struct fake_rule rules[FAKE_MAX_RULES];
	uint64_t srq_fail_nth, srq_posted;
	int srq_fail_err;
	bool port_up[BE_XPORT_MAX_PORTS];
	unsigned int port_gen;
	struct be__fake_stats st;
	struct be__list devs, evchs;
};
extern struct fake_global be__fake;

/* fake.c */
uint64_t be__fake_rand(void);
/* Take the matching event rule: 0 pass, 1 drop, 2 delay (*gets). */
int be__fake_rule_take(enum be_xev_type type, int *gets);
const struct be_xport_ops *be__fake_inner_ops(void);
/* Apply BE_FAKE_SEED and BE_FAKE_CONN (once per process). */
void be__fake_env_load(void);
/* Add one to a counter of be__fake.st. */
void be__fake_count(uint64_t *field);

/* cq.c */
/* Queue @wc (its conn ours) on @cq, due @extra polls from now and after
 * what @*last (the conn's latest due, one per direction) holds; @extra
 * UINT64_MAX holds it until the conn is destroyed. */
int be__fake_cq_push(struct fake_cq *cq, const struct be_xwc *wc, uint64_t *last, uint64_t extra);
/* The delay the faults of @c give its next completion. */
uint64_t be__fake_delay(const struct fake_conn *c);
void be__fake_cq_forget(struct fake_cq *cq, struct fake_conn *c);
struct fake_srq *be__fake_srq_of(struct fake_cq *cq, struct be_xsrq *in);

/* data.c */
void be__fake_conn_break(struct fake_conn *c, enum be_xwc_status st);
void be__fake_on_send_wc(struct fake_conn *c, const struct be_xwc *wc);
void be__fake_on_recv_wc(struct fake_cq *cq, struct be_xwc *wc);
void be__fake_sq_free(struct fake_conn *c);

/* cm.c */
int be__fake_evch_push(struct fake_evch *ch, const struct be_xevent *ev, uint64_t due);

extern const struct be_xport_ops be__xport_fake_ops;
BE__XPORT_DECLARE(fake)
int be__fake_addr_canon(const char *addr, char *buf, size_t len);
int be__fake_conn_rx_resume(struct be_xconn *conn);
int be__fake_grant(struct be_xconn *conn, void *addr, size_t len, uint32_t *rkey);
int be__fake_revoke(struct be_xconn *conn, uint32_t rkey, uint64_t cookie);

#endif /* BE_XPORT_FAKE_FAKE_H */
