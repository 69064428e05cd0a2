/*
 * shm.h - internals of the shm transport (processes on one host).
 *
 * Model. The shm transport gives RC-QP semantics between processes of one
 * host without a kernel round trip on the data path:
 *
 *   dev.c       the device: a table of registered regions (bemalloc
 *               blocks), for the local keys.
 *   cm.c        connection management over abstract Unix SEQPACKET
 *               sockets: listen/connect/accept/reject/disconnect, the
 *               event channel, the segment's fd passed with SCM_RIGHTS,
 *               peer death (socket hang-up).
 *   cq.c        the cq and srq objects.
 *   data.c      the data path: post_send, cq_poll and cq_arm on the
 *               shared rings of ring.h, and the grants.
 *
 * Memory a peer can reach: the segment of each conn, and nothing else. A
 * WRITE travels in the ring like a SEND and the owner of the target
 * copies it into place when it polls, after checking it against the
 * conn's live grants (xport.h's grant op, xport/grant.h): no region of
 * this process is ever mapped by a peer.
 *
 * Keys: lkey == (generation << 16 | slot) in the device's region table;
 * rkeys are grants, random and per conn.
 *
 * Threads: registration (reg/dereg) may come from any thread and takes
 * dev->lock; everything else belongs to the thread that owns the evch/cq
 * (see xport.h). The only cross-thread data is the region table (seqlock-
 * style reads without the lock).
 */
#ifndef BE_XPORT_SHM_SHM_H
#define BE_XPORT_SHM_SHM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/common.h"
#include "util/list.h"
#include "xport/cq.h"
#include "xport/evch.h"
#include "xport/grant.h"
#include "xport/xport.h"
#include "xport/shm/ring.h"
#include "xport/wake.h"

#define SHM_MAX_REGIONS 16384u      /* slot bits below */
#define SHM_MAX_FDS 3               /* fds per socket message (REQ) */
#define SHM_KEY_SLOT_BITS 16
#define SHM_KEY_SLOT(k) ((k) & 0xffffu)
#define SHM_DEFAULT_RING (1u << 20)
#define SHM_MIN_RING (64u << 10)
#define SHM_MAX_RING (64u << 20)
#define SHM_MAX_INLINE 4096u
#define SHM_MAX_SGE 16u
#define SHM_MAX_QP_WR 4096u
#define SHM_MAX_SRQ_WR 65536u
#define SHM_MAX_MSG (1ull << 31)
#define SHM_MTU (1u << 20)
#define SHM_SPEED_MBPS 100000u
#define SHM_CONNECT_TIMEOUT_MS 10000
#define SHM_HELLO_TIMEOUT_MS 5000   /* an accepted socket must send its REQ by then */
#define SHM_MAX_HANDSHAKE 1024u     /* accepted sockets without a REQ yet, per evch */
#define SHM_MAX_HANDSHAKE_UID 64u   /* ... of one uid (SO_PEERCRED) */
#define SHM_HUP_CHECK_POLLS 4096u   /* cq_poll calls between hang-up checks */
#define SHM_NAME_MAX 96

struct shm_conn;

/* A registered region of this process. key == 0: slot free. */
struct shm_region {
	uint32_t key;
	uint32_t gen;
	uint64_t addr;
	uint64_t len;
};

struct shm_dev {
	struct be_xdev base;
	pthread_mutex_t lock;          /* regions (writers) */
	struct shm_region *regions;    /* SHM_MAX_REGIONS slots */
	uint32_t ring_size;            /* rings of conns this side creates */
};

/* What epoll's data.ptr points at. */
enum shm_ph_kind { SHM_PH_EVFD = 1, SHM_PH_TIMER, SHM_PH_LISTENER, SHM_PH_CONN };
struct shm_ph {
	int kind;
};

struct shm_evch {
	struct be__xch c;         /* evch.h: wake (tfd: connect deadlines), evq,
				   * conns (ev_link, newest first), listeners */
	uint64_t timer_at;        /* armed deadline, 0 = none */
	uint32_t nhandshake;      /* conns in SHM_CS_WAIT_REQ */
};

struct shm_wc_node {
	struct be_xwc wc;
};

struct shm_cq {
	struct be__xcq c;         /* cq_fd: efd + hang-ups of attached conns */
	bool armed;               /* local completions must write efd */
	bool hup_check;           /* check for hang-ups at the next poll */
	uint32_t polls;
	struct be__list send_conns; /* conns whose send_cq is this (s_link) */
	struct be__list recv_conns; /* conns whose recv_cq is this (r_link) */
	struct be__wcq lq;        /* local completions (srq flushes) */
};

struct shm_srq {
	struct be_xsrq base;
	struct be__xrq rq;        /* the posted receives */
};

struct shm_listener {
	struct be_xlistener base;
	struct shm_ph ph;
	int fd;
	struct be__list link;     /* evch->listeners */
	char name[SHM_NAME_MAX + 1];
};

/* Send queue entry. */
enum shm_swqe_state { SHM_WQE_DEFER = 1, SHM_WQE_WAIT, SHM_WQE_DONE };

struct shm_defer {
	enum be_xwr_opcode opcode;
	unsigned int flags;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;
	int num_sge;
	struct be_xsge sge[SHM_MAX_SGE];
	uint8_t inl[];       /* BE_XWR_F_INLINE data copied at post time */
};

struct shm_swqe {
	uint64_t wr_id;
	uint64_t end;        /* WAIT: ring position just past its (last) record */
	uint64_t pos;        /* WAIT: ring position of its (first) record */
	uint32_t byte_len;
	uint32_t sent;       /* WRITE: bytes put in the ring so far */
	uint8_t state;
	uint8_t status;      /* DONE */
	uint8_t opcode;      /* enum be_xwc_opcode */
	uint8_t signaled;
	struct shm_defer *def;
};

enum shm_conn_state {
	SHM_CS_CONNECTING = 1, /* connector: REQ sent, waiting for ACC/REJ */
	SHM_CS_WAIT_REQ,       /* acceptor: socket accepted, no REQ yet */
	SHM_CS_REQ_RCVD,       /* acceptor: CONNECT_REQUEST delivered */
	SHM_CS_CONNECTED,
	SHM_CS_ERROR,          /* flushing; DISCONNECTED queued */
	SHM_CS_CLOSED,         /* handshake failed or peer gone before use */
};

struct shm_conn {
	struct be_xconn base;
	struct shm_ph ph;
	int state;
	int fd;                    /* the Unix socket, -1 once closed */
	bool connector;
	bool sock_dead;            /* EOF seen / removed from epolls */
	bool disc_queued;
	bool cq_watched;           /* socket in the cqs' epolls */
	struct shm_listener *listener;
	struct shm_dev *dev;
	pid_t peer_pid;
	bool has_cred;             /* peer_uid, peer_gid from SO_PEERCRED */
	uint32_t peer_uid, peer_gid;
	uint32_t fds_rx;           /* fds the peer sent (REQ 3, ACC 2, nothing
				    * else: no region's memfd, for tests) */
	char peer_name[SHM_NAME_MAX + 1];

	struct be__list ev_link;                 /* evch->conns */
	struct be__list s_link;                  /* scq->send_conns, newest first */
	struct be__list r_link;                  /* rcq->recv_conns */

	struct shm_cq *scq, *rcq;
	struct shm_srq *srq;

	/* Segment and rings. */
	void *seg;
	size_t seg_len;
	uint32_t ring_size;
	struct shm_ring_ctl *tx_ctl, *rx_ctl;
	uint8_t *tx_data, *rx_data;
	uint64_t tx_tail;          /* producer position */
	uint64_t tx_head;          /* last consumer head read */
	uint64_t rx_head;          /* consumer position */
	uint64_t rx_pub;           /* consumer position last published */
	uint64_t rx_zeroed;        /* lines below it start with a zero word */
	bool rx_pub_wake;          /* a signaled record since: wake the producer */
	bool rx_pub_quiet;         /* head published without the wake check */
	int peer_rx_efd;           /* wake the peer's recv cq */
	int peer_tx_efd;           /* wake the peer's send cq */

	/* Send queue, monotonic indexes: head <= tx <= tail. */
	struct shm_swqe *sq;
	uint32_t sq_mask;
	uint32_t max_send_wr;
	uint32_t sq_head, sq_tx, sq_tail;
	uint32_t max_inline;
	uint8_t err_first;         /* status of the first WR flushed by an error */
	bool err_emitted;          /* a WR completed with an error */
	uint32_t err_keep;         /* DONE entries before this keep success */

	/* What the peer may WRITE (grant.h), checked as its records are
	 * consumed. */
	struct be__xgrants grants;
	/* RX_ALLOC writes in progress (grant.h, lazily), the hooks of
	 * be_xconn_attr; rx_stalled: rx_alloc said -EAGAIN, the record waits
	 * in the ring for conn_rx_resume. */
	struct be__xaslot *aslots;
	int (*rx_alloc)(struct be_xconn *conn, uint64_t len, void **out);
	void (*rx_free)(struct be_xconn *conn, void *buf);
	bool rx_stalled;

	uint64_t deadline_ns;      /* CONNECTING, WAIT_REQ */
	uint8_t priv[BE_XPORT_PRIV_MAX];
	uint8_t priv_len;
};

/* Socket messages (SEQPACKET: one message per sendmsg, boundaries kept). */
#define SHM_MSG_MAGIC 0x42455348u /* "BESH" */
enum shm_msg_type {
	SHM_MSG_REQ = 1,   /* fds: segment, rx efd, tx efd */
	SHM_MSG_ACC,       /* fds: rx efd, tx efd */
	SHM_MSG_REJ,
	SHM_MSG_BYE,
	/* 5, 6: region announcements (REG_ADD with memfds, REG_DEL), sent
	 * until WRITEs went through the ring; now a protocol error. */
	SHM_MSG_RETIRED_REG_ADD,
	SHM_MSG_RETIRED_REG_DEL,
};

struct shm_msg {
	uint32_t magic;
	uint16_t type;
	uint16_t count;
	union {
		struct {
			uint32_t ring_size;
			uint32_t priv_len;
			uint8_t priv[BE_XPORT_PRIV_MAX];
			char name[SHM_NAME_MAX + 1];
		} cm;
	} u;
};

#define to_sdev(d) container_of(d, struct shm_dev, base)
#define to_sevch(p) container_of(p, struct shm_evch, c.x)
#define to_scq(p) container_of(p, struct shm_cq, c.x)
#define to_ssrq(s) container_of(s, struct shm_srq, base)
#define to_sconn(c) container_of(c, struct shm_conn, base)
#define to_slistener(l) container_of(l, struct shm_listener, base)

/* The ops of the table (xport.h), defined in the files named there. */
BE__XPORT_DECLARE(shm)

/*
 * Checks of what a peer sends that need no conn state: pure functions, so
 * a fuzzer drives them alone (test/fuzz/fuzz-shm-wire.c).
 *
 * be__shm_msg_check() (cm.c): one socket message of @len bytes as
 * received, with @nfds descriptors: its header, a known type (REQ, ACC,
 * REJ, BYE), a length that holds its type, no count, the fds its type
 * carries, private data of at most BE_XPORT_PRIV_MAX bytes, a REQ's ring
 * size (be__shm_ring_size_ok()). NULL when it passes, else why not (the
 * conn drops it: -EPROTO); which type a conn's state takes is
 * cm_handle's.
 * be__shm_rec_check() (data.c): the record at ring offset @off of a ring
 * of @size bytes whose tag says @op (not PAD) and whose byte_len is @blen:
 * its length in the ring (it fits before the ring's end), or 0 when it is
 * malformed (the conn fails with GENERAL_ERR). A WRITE's or inline
 * WRITE_IMM's target is checked against the grants by cq_poll_rx(), or,
 * marked RX_ALLOC (ring.h), against the conn's slots, as a WRITE_IMM_RXA's.
 */
const char *be__shm_msg_check(const struct shm_msg *m, size_t len, int nfds);
bool be__shm_ring_size_ok(uint32_t ring_size);
uint64_t be__shm_rec_check(uint32_t op, uint32_t blen, uint64_t off, uint64_t size);

/* dev.c */
int be__shm_local_check(struct shm_dev *dev, uint32_t lkey, uint64_t addr, uint64_t len);
int be__shm_sendmsg(int fd, const struct shm_msg *m, size_t len, const int *fds, int nfds,
		    int wait_ms);
size_t be__shm_msg_len(uint16_t type, uint16_t count);

/* cm.c */
/* Reads and handles every pending socket message of @c (BYE, hang-up).
 * Used by evch_get and by cq_poll's hang-up check. */
void be__shm_conn_read_sock(struct shm_conn *c);
void be__shm_conn_error(struct shm_conn *c, enum be_xwc_status first, int ev_status);
/* Queue @ev on @ch (its eventfd becomes readable). */
void be__shm_evch_queue(struct shm_evch *ch, const struct be_xevent *ev);

/* cq.c */
/* Attach @c to its cqs (lists + hang-up watch) / detach. */
int be__shm_conn_attach_cqs(struct shm_conn *c);
void be__shm_conn_detach_cqs(struct shm_conn *c);
void be__shm_conn_unwatch(struct shm_conn *c);
/* Local completions became available on @cq: wake it if armed. */
void be__shm_cq_kick(struct shm_cq *cq);

/* data.c */
/* Sets up the send queue of @c for @max_send_wr. */
int be__shm_sq_init(struct shm_conn *c, uint32_t max_send_wr);
void be__shm_sq_free(struct shm_conn *c);
/* The optional grant ops (xport.h). */
int be__shm_grant(struct be_xconn *xc, void *addr, size_t len, uint32_t *rkey);
int be__shm_revoke(struct be_xconn *xc, uint32_t rkey, uint64_t cookie);
int be__shm_conn_rx_resume(struct be_xconn *xc);

#endif /* BE_XPORT_SHM_SHM_H */
