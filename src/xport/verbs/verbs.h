/*
 * verbs.h - objects of the verbs transport (internal to src/xport/verbs/).
 *
 * Model. A verbs_dev is one opened RDMA device: its own ibv_context, PD
 * and async event fd. rdma_cm ids bound to it (same device GUID) carry the
 * connection handshake; the QPs live on our context.
 *
 * Per worker: a verbs_evch (rdma_event_channel + a queue of events the
 * transport makes itself), a verbs_cq (completion channel + CQ + optional
 * thread domain) and verbs_srqs on it. Connections are verbs_conns (one
 * rdma_cm_id + one RC QP). Each CQ maps qp_num -> conn with a private table
 * touched only by the CQ's owner thread, so the data path takes no lock.
 *
 * Shared state: the list of open devices and each device's list of event
 * channels, and every evch's event queue, are guarded by verbs_lock. The
 * device's async events (SRQ limit, port changes, QP fatal errors) are read
 * by whichever thread calls evch_get first and copied into the queue of
 * every evch of that device.
 */
#ifndef BE_XPORT_VERBS_VERBS_H
#define BE_XPORT_VERBS_VERBS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "util/common.h"
#include "util/list.h"
#include "xport/evch.h"
#include "xport/wake.h"
#include "xport/xport.h"

/* A be_xsge is passed to verbs as an ibv_sge without copying. */
_Static_assert(sizeof(struct be_xsge) == sizeof(struct ibv_sge), "sge size");
_Static_assert(offsetof(struct be_xsge, addr) == offsetof(struct ibv_sge, addr), "sge addr");
_Static_assert(offsetof(struct be_xsge, length) == offsetof(struct ibv_sge, length), "sge len");
_Static_assert(offsetof(struct be_xsge, lkey) == offsetof(struct ibv_sge, lkey), "sge lkey");

#define VERBS_POST_BATCH 16  /* WRs converted per ibv_post_*() call */

/* Queued events that are not for the user: a fatal QP error read from the
 * async fd by some thread, turned into DISCONNECTED by the conn's owner;
 * a connect that failed in the connect thread (cm.c), turned into
 * UNREACHABLE unless the conn was reported down meanwhile. */
#define VERBS_QEV_QP_FATAL ((enum be_xev_type)100)
#define VERBS_QEV_CM_FAIL ((enum be_xev_type)101)


/* Steps of an active connect the connect thread runs (cm.c). */
enum verbs_job {
	VJ_NONE = 0,
	VJ_START,   /* a new cm_id, resolve the next address (or report) */
	VJ_ROUTE,   /* rdma_resolve_route() */
	VJ_CONNECT, /* rdma_connect() */
	VJ_DROP,    /* destroy the cm_id */
	VJ_FREE,    /* destroy the cm_id, free the conn */
};

/* Queue nodes each conn reserves on its evch (util/evq.h): the events of
 * every transport (BE_XPORT_CONN_EVENTS: those rdma_cm delivers are
 * queued when evch_pump() reads them early), one fatal QP error and one
 * failure from the connect thread. */
#define VERBS_CONN_EVENTS (BE_XPORT_CONN_EVENTS + 2)

/* u64 -> u64 open-addressing hash (map.c); owner thread only. */
struct verbs_map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap;   /* power of two, 0 when empty */
	size_t count;
};

int be__verbs_map_put(struct verbs_map *m, uint64_t key, uint64_t val);
/* Returns 1 and *val if found, else 0. */
int be__verbs_map_get(const struct verbs_map *m, uint64_t key, uint64_t *val);
/* Returns 1 if @key was present (removed), else 0. */
int be__verbs_map_del(struct verbs_map *m, uint64_t key);
void be__verbs_map_free(struct verbs_map *m);
/* Iterate: pass *pos = 0 first; returns 0 at the end. */
int be__verbs_map_next(const struct verbs_map *m, size_t *pos, uint64_t *key, uint64_t *val);

struct verbs_evch;

struct verbs_dev {
	struct be_xdev base;
	struct ibv_context *ctx; /* ours (not rdma_cm's) */
	__be64 guid;             /* to check that a cm_id is on this device */
	pid_t pid;               /* the opener: inert in a forked child */
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	char name[64];
	int num_ports;
	uint32_t max_inline;     /* probed: largest max_inline_data an RC QP accepts */
	uint32_t max_sge;        /* send SGEs per WR we create QPs with */
	int has_td;
	int has_mw;              /* type-2 memory windows: a grant binds one (data.c) */
	uint64_t mw_short;       /* grants refused for want of a window (atomic) */
	int quirk_rxe;           /* Soft-RoCE: remap its LOC_QP_OP_ERR statuses */
	/* lkey -> struct ibv_mr *, to refuse receives with a bad lkey at post
	 * (verbs would fail them only when a message arrives). */
	pthread_rwlock_t mr_lock;
	struct verbs_map mrs;
	struct be__list link;    /* on the list of open devices (verbs_lock) */
	struct be__list evchs;   /* this device's event channels (verbs_lock) */
};

struct verbs_evch {
	struct be__xch c;        /* evch.h. wake: cm fd + async fd + efd + tfd
				  * (the earliest connect deadline); evq: async
				  * events, QP errors, events pumped early
				  * (verbs_lock); conns (ch_link, owner thread);
				  * listeners */
	/* Opened on first use (cm.c, cm_channel()) under ch_lock, by the
	 * connect thread or the worker; read with an acquire load. */
	struct rdma_event_channel *ch;
	pthread_mutex_t ch_lock;
	uint64_t next_deadline;  /* armed in tfd (be__now_ns() clock), 0 = none */
	struct be__list dev_link; /* dev->evchs (verbs_lock) */
	/* The connect thread (cm.c): started by the first connect, stopped
	 * by evch_destroy. jobs and cm_stop are guarded by verbs_lock. */
	pthread_t cm_thr;
	pid_t cm_pid;            /* the process it runs in; 0: not running */
	pthread_cond_t cm_cv;    /* jobs queued or cm_stop (verbs_lock) */
	struct be__list jobs;    /* conns with a step to run (job_link) */
	bool cm_stop;
};

struct verbs_cq {
	struct be_xcq base;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_td *td;
	struct ibv_pd *qp_pd;    /* parent domain (thread domain) or the dev's PD */
	struct be__wake wake;    /* epfd handed out: comp channel + efd, which
				  * is readable while the backlog is non-empty */
	unsigned int unacked;    /* CQ events got but not yet acked */
	struct verbs_map qps;    /* qp_num -> struct verbs_conn * */
	/* Completions taken off the CQ early (conn_destroy drains the CQ so
	 * that no stale completion names a destroyed QP) or made up (SRQ
	 * flushes); cq_poll returns them first. */
	struct be_xwc *backlog;
	size_t bl_head, bl_len, bl_cap;
	struct be__list srqs;    /* SRQs completing here (cq_link) */
	struct be__list holding; /* conns of this send CQ holding sends (hold_link) */
	uint32_t mw_room;        /* CQEs left for window invalidates (data.c) */
};

struct verbs_srq {
	struct be_xsrq base;
	struct ibv_srq *srq;
	struct verbs_map posted; /* wr_id -> count of receives on the SRQ */
	uint32_t depth;          /* as asked: posting beyond it is -ENOMEM */
	uint32_t nposted;        /* receives posted and not yet completed */
	struct verbs_evch *evch; /* gets SRQ_LIMIT: its first conn's (verbs_lock) */
	struct be__list cq_link; /* cq->srqs */
};

enum verbs_conn_state {
	VC_RESOLVING = 1, /* active: address/route resolution */
	VC_CONNECTING,    /* active: QP created, REQ sent */
	VC_REQUEST,       /* passive: CONNECT_REQUEST delivered, no answer yet */
	VC_ESTABLISHED,
	VC_DOWN,          /* failed, disconnected or rejected */
};

#define VERBS_OBJ_CONN 0x636f6e6eu
#define VERBS_OBJ_LISTENER 0x6c69736eu

/* A signaled-or-not send WR in flight, to name the sender-side opcode of
 * its completion (verbs reports WRITE_WITH_IMM as a plain RDMA_WRITE). */
struct verbs_swr {
	uint64_t wr_id;
	uint8_t opcode;          /* enum be_xwc_opcode */
	uint8_t signaled;
	uint8_t mw;              /* the transport's own: a bind or invalidate of
				  * mws[wr_id & VERBS_MW_IDX]; never delivered */
};

/*
 * Grants on verbs (data.c): a type-2B memory window per live grant, bound
 * on the conn's QP to exactly the granted range, so that only this QP can
 * use its rkey, and invalidated when the grant ends. A conn keeps at most
 * VERBS_MW_MAX windows and its QP has room for their binds and
 * invalidates beside what the user posts; a CQ keeps VERBS_MW_CQ_ROOM
 * CQEs (at most) for the invalidates of its conns' live windows. Past
 * either, grant is -ENOMEM, which the Engine answers like a failed
 * allocation.
 */
#define VERBS_MW_MAX 64u
#define VERBS_MW_CQ_ROOM 1024u
#define VERBS_MW_WRID 0x6d77000000000000ull /* | index: a window's bind */
#define VERBS_MW_INV 0x10000ull              /* | this: its invalidate */
#define VERBS_MW_IDX 0xffffu

/* The largest CQ depth a user may ask: the device's, less the room kept
 * for window invalidates when grants bind windows. */
static inline uint32_t be__verbs_cq_max(const struct verbs_dev *dev)
{
	uint32_t max = (uint32_t)dev->attr.max_cqe;

	return dev->has_mw ? max - BE_MIN(VERBS_MW_CQ_ROOM, max / 2) : max;
}

enum verbs_mw_state {
	VERBS_MW_FREE,           /* invalid: may be bound again */
	VERBS_MW_BOUND,          /* bind posted: its rkey was handed out */
	VERBS_MW_INVALIDATING,   /* LOCAL_INV posted, not completed */
	VERBS_MW_DEAD,           /* its LOCAL_INV failed: never bound again */
};

struct verbs_mw {
	struct ibv_mw *mw;       /* mw->rkey: as last bound */
	uint8_t state;           /* enum verbs_mw_state */
	uint32_t next_free;
	uint64_t cookie;         /* INVALIDATING: the revoke's, for BE_XWC_REVOKE */
};

/*
 * A send WR the acceptor posted before the connector's QP was ready (see
 * cm.c, "Passive side"): a copy of the WR and of its scatter list (of its
 * data, for an inline WR), posted when the RTU arrives.
 */
struct verbs_held {
	struct verbs_held *next;
	struct be_xsend_wr wr;   /* sg_list points at sge[] */
	struct be_xsge sge[];    /* num_sge entries; inline: one, then the bytes */
};

/* id->context points at the magic, the first member of both objects. */
struct verbs_conn {
	uint32_t magic;          /* VERBS_OBJ_CONN */
	struct be_xconn base;
	enum verbs_conn_state state;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint32_t qp_num;
	struct verbs_cq *send_cq, *recv_cq;
	struct verbs_srq *srq;
	uint32_t max_inline;     /* what the QP was created with */
	uint32_t max_sge;
	uint32_t max_send_wr;
	struct verbs_swr *sq;    /* ring of posted send WRs, sq_mask + 1 slots */
	uint32_t sq_mask, sq_head, sq_tail;
	struct be_xconn_attr attr; /* active side: kept until ROUTE_RESOLVED */
	int active;              /* made by connect(): the connect thread owns
				  * its cm_ids (cm_id); id only borrows one */
	uint8_t priv[BE_XPORT_PRIV_MAX + 1];
	uint8_t priv_len;        /* encoded length (with our length byte) */
	int timeout_ms;
	uint64_t deadline_ns;    /* active: ESTABLISHED by then or UNREACHABLE */
	/* Active side: what the name resolved to (addr.h), the address of
	 * the attempt under way as last reported (peer_addr before ESTABLISHED). */
	struct be__inet_addrs *addrs;
	struct sockaddr_storage peer;
	/* Active side, the connect thread's own: the cm_id it made and the
	 * index of the next address to try. */
	struct rdma_cm_id *cm_id;
	unsigned addr_next;
	/* Active side, verbs_lock: the step queued for the connect thread,
	 * what it needs, and whether conn_destroy() handed the conn over. */
	enum verbs_job job;
	int job_status;          /* VJ_START: the error to report if no address is left */
	uint32_t job_qp_num;     /* VJ_CONNECT */
	bool job_srq;
	bool dying;
	struct be__list job_link; /* evch->jobs while job != VJ_NONE */
	int reported_down;       /* a DISCONNECTED/UNREACHABLE was delivered */
	int disconnect_sent;     /* rdma_disconnect() was called */
	int was_established;
	int cm_established;      /* rdma_cm level: DREQ possible */
	int dreq_pending;        /* disconnect asked before cm_established */
	int hold;                /* acceptor before the RTU: post_send holds WRs */
	struct verbs_held *held, **held_tail; /* in posting order */
	/* Grants (has_mw): the windows, the free ones as a list through
	 * next_free (UINT32_MAX: none), rkey -> index of the bound ones. */
	struct verbs_mw *mws;
	uint32_t nmws, mw_free;
	uint32_t sq_mw;          /* window WRs among the outstanding ones (sq) */
	struct verbs_map mw_keys;
	uint8_t rnd[32];         /* getrandom() output for window keys */
	uint32_t nrnd;
	uint32_t nheld;
	struct be__list hold_link; /* send_cq->holding, while nheld */
	struct be__list ch_link; /* evch->conns */
};

struct verbs_listener {
	uint32_t magic;          /* VERBS_OBJ_LISTENER */
	struct be_xlistener base;
	struct rdma_cm_id *id;
	struct be__list link;    /* evch->listeners */
};

#define to_vdev(d) container_of(d, struct verbs_dev, base)
#define to_vevch(p) container_of(p, struct verbs_evch, c.x)
#define to_vcq(c) container_of(c, struct verbs_cq, base)
#define to_vsrq(s) container_of(s, struct verbs_srq, base)
#define to_vconn(c) container_of(c, struct verbs_conn, base)
#define to_vlistener(l) container_of(l, struct verbs_listener, base)

extern pthread_mutex_t be__verbs_lock;

/* The ops of the table (xport.h), defined in the files named there. */
BE__XPORT_DECLARE(verbs)

/* dev.c */
/* Make @fd non-blocking. 0 or -errno. */
int be__verbs_set_nonblock(int fd);
/* Does @sge lie inside a region registered on @dev with its lkey? */
int be__verbs_lkey_ok(struct verbs_dev *dev, const struct be_xsge *sge);
/* Read the device's async events, fan them out. Takes verbs_lock. */
void be__verbs_async_pump(struct verbs_dev *dev);
/* Drop the queued events naming @srq from every evch of @dev. Takes
 * verbs_lock. */
void be__verbs_dev_purge_srq(struct verbs_dev *dev, const struct be_xsrq *srq);
int be__verbs_srq_bind(struct verbs_srq *srq, struct verbs_evch *ch);
/* The optional op addr_dev (xport.h): the device of an address. */
int be__verbs_addr_dev(const char *addr, bool passive, char *buf, size_t len);
/* The optional op dev_name (xport.h): the devices, by index. */
int be__verbs_dev_name(int i, char *buf, size_t len);

/* cm.c */
/* Move @vc's QP to @state with rdma_cm's attributes. 0 or -errno. */
int be__verbs_qp_to(struct verbs_conn *vc, enum ibv_qp_state state);
/* QP to error (WRs flush) and DREQ to the peer, once. */
void be__verbs_conn_teardown(struct verbs_conn *vc);
/* A caller destroyed @vc's evch (or cq) first: free its QP and cm_id now,
 * leave a husk for conn_destroy(). */
void be__verbs_conn_detach(struct verbs_conn *vc);
/* A conn failed (error completion or fatal QP event): report it once. */
void be__verbs_conn_failed(struct verbs_conn *vc, int status, const char *why);
/* Queue @ev on @vc's evch (if it still has one). Takes verbs_lock. */
void be__verbs_conn_push(struct verbs_conn *vc, const struct be_xevent *ev);
/* Queue a made-up event on @ch and wake its fd. Caller holds verbs_lock. */
void be__verbs_evch_push_locked(struct verbs_evch *ch, const struct be_xevent *ev);
/* Drop queued events naming @conn or @srq from @ch. Caller holds verbs_lock. */
void be__verbs_purge_locked(struct verbs_evch *ch, const struct be_xconn *conn,
			    const struct be_xsrq *srq);
/* Handle every rdma_cm event waiting on @ch without blocking; the events
 * for the user are queued on @ch. Owner thread (of @ch and its cqs). */
void be__verbs_evch_pump(struct verbs_evch *ch);

/* cq.c */
/* Queue a completion made here (not by the CQ) on @cq: cq_poll returns it
 * before what the CQ holds. */
void be__verbs_bl_push(struct verbs_cq *cq, const struct be_xwc *wc);
/* @vc's QP was destroyed: take its completions off @cq and forget it. */
void be__verbs_cq_drop_qp(struct verbs_cq *cq, const struct verbs_conn *vc);

/* data.c */
int be__verbs_qp_create(struct verbs_conn *vc, const struct be_xconn_attr *attr);
void be__verbs_qp_destroy(struct verbs_conn *vc);
/* Post the WRs @vc held (vc->hold) to its QP, in order, and stop holding:
 * in RTS they go out, in error they flush. The copies are freed; the
 * buffers of non-inline WRs stay lent until their completions, as for any
 * posted WR. Owner thread. */
void be__verbs_release_held(struct verbs_conn *vc);
/* The grant and revoke ops (xport.h). */
int be__verbs_grant(struct be_xconn *conn, void *addr, size_t len, uint32_t *rkey);
int be__verbs_revoke(struct be_xconn *conn, uint32_t rkey, uint64_t cookie);
/* The completion @iwc of a window WR (VERBS_MW_WRID | index): 1 if it is
 * an invalidate's, reported as BE_XWC_REVOKE into @wc (whose conn and
 * status are set); 0 if it is the transport's own. */
int be__verbs_mw_done(struct verbs_conn *vc, const struct ibv_wc *iwc, struct be_xwc *wc);
/* The registration (ibv_mr) holding [@addr, @addr+@len), or NULL. */
struct ibv_mr *be__verbs_mr_find(struct verbs_dev *dev, const void *addr, size_t len);

#endif /* BE_XPORT_VERBS_VERBS_H */
