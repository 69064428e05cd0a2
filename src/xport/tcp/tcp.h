/*
 * tcp.h - internals of the tcp transport, shared by the files of
 * src/xport/tcp/: tcp.c (ops table), dev.c (device, memory registration),
 * cm.c (event channel, conns, handshake, listeners), cq.c (cq, srq) and
 * data.c (the data path). Nothing outside that folder includes this but
 * the tests of the wire format.
 *
 * Model. The tcp transport gives the guarantees of an RC QP over one
 * kernel TCP connection per conn (see xport.h and docs/TRANSPORTS.md):
 *
 *   tcp_dev      region table (rkey -> [addr, len)), shared by threads
 *                under a rwlock: bemalloc registers from any thread, the
 *                workers look keys up on every WR and every frame.
 *   tcp_evch     an epoll set over listeners and handshaking sockets, an
 *                eventfd that is readable while events are queued, and a
 *                timerfd for connect/handshake deadlines.
 *   tcp_cq       an epoll set over the sockets of its established conns,
 *                a growable ring of completions, and an eventfd for
 *                wakeups of completions made without socket activity.
 *   tcp_srq      a ring of posted receives.
 *   tcp_conn     a socket, a send queue of WR slots (posted -> written ->
 *                acked), a receive state machine (header -> payload
 *                straight into the destination -> next).
 *
 * There are no threads: all progress happens inside cq_poll (data path)
 * and evch_get (connection setup), on the worker that owns them.
 */
#ifndef BE_XPORT_TCP_TCP_H
#define BE_XPORT_TCP_TCP_H

#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util/common.h"
#include "util/list.h"
#include "xport/cq.h"
#include "xport/evch.h"
#include "xport/grant.h"
#include "xport/wake.h"
#include "xport/xport.h"

/* Device limits (docs/TRANSPORTS.md). */
#define TCP_MAX_INLINE 4096u
#define TCP_MAX_SGE 16
#define TCP_MAX_QP_WR 4096u
#define TCP_MAX_SRQ_WR 65536u
#define TCP_MAX_MSG (1u << 30)
#define TCP_MTU 65536u
#define TCP_DEFAULT_TIMEOUT_MS 10000
#define TCP_RBUF_SIZE (32u * 1024)   /* per-conn staging for headers and small payloads */
#define TCP_RX_BUDGET (8u << 20)     /* bytes read per conn per progress call */
#define TCP_RX_TAIL 4096u            /* rbuf bytes read behind a payload */
#define TCP_MAX_RX_ALLOC BE_XASLOTS  /* RX_ALLOC slots per conn (max_rx_alloc) */

/*
 * Wire format: every frame starts with this 32-byte header, fields little
 * endian, followed by @len payload bytes. docs/PROTOCOL.md, "tcp transport
 * frames", has the table.
 */
#define TCP_MAGIC 0x31544542u /* "BET1" */
#define TCP_HDR_LEN 32u
#define TCP_PROTO_VERSION 1u

enum tcp_ftype {
	TCP_F_HELLO = 1,  /* connector -> acceptor: priv in payload, addr = version */
	TCP_F_ACCEPT,     /* acceptor -> connector: priv in payload */
	TCP_F_REJECT,     /* acceptor -> connector: priv in payload, then close */
	TCP_F_SEND,       /* payload -> next SRQ receive */
	TCP_F_WRITE,      /* payload -> [addr, addr+len) under rkey */
	TCP_F_WRITE_IMM,  /* as WRITE, then consumes a receive with imm */
	TCP_F_ACK,        /* no payload; ack field only */
	TCP_F_NAK,        /* no payload; status = why frame ack+1 failed, then close */
	TCP_F_BYE,        /* no payload; orderly disconnect, then close */
	TCP_F_AWRITE,     /* payload -> slot rkey's buffer at offset addr (RX_ALLOC);
			   * at offset 0 the receiver allocates imm bytes */
	TCP_F_AWRITE_IMM, /* as AWRITE, ends the buffer, consumes a receive with imm */
};

enum tcp_nak_status {
	TCP_NAK_ACCESS = 1, /* bad rkey or range -> REM_ACCESS_ERR */
	TCP_NAK_LEN,        /* SEND larger than the receive -> REM_OP_ERR */
	TCP_NAK_RNR,        /* no receive posted -> RNR_RETRY_EXC */
	TCP_NAK_PROTO,      /* malformed frame -> REM_OP_ERR */
};

struct tcp_hdr {
	uint32_t magic;
	uint8_t type;
	uint8_t status;
	uint16_t rsvd;
	uint32_t len;
	uint32_t rkey;
	uint64_t addr;
	uint32_t imm;
	uint32_t ack;
};
_Static_assert(sizeof(struct tcp_hdr) == TCP_HDR_LEN, "tcp header is 32 bytes");
_Static_assert(TCP_RX_TAIL >= TCP_HDR_LEN && TCP_RX_TAIL <= TCP_RBUF_SIZE, "rx tail fits rbuf");

void be__tcp_hdr_pack(uint8_t *out, const struct tcp_hdr *h);
void be__tcp_hdr_unpack(struct tcp_hdr *h, const uint8_t *in);

/*
 * Checks of what a peer sent that need no conn state: pure functions, so
 * a fuzzer drives them alone (test/fuzz/fuzz-tcp-frame.c). Each returns
 * NULL when the input passes, else why not; the conn then fails.
 *
 * be__tcp_hs_check(): the handshake frame at @buf, of which @avail bytes
 * arrived, on a conn waiting for @expect: TCP_F_HELLO (acceptor) or
 * TCP_F_ACCEPT (connector: ACCEPT or REJECT). NULL with *@h decoded once
 * @avail >= TCP_HDR_LEN; the frame is whole when @avail >= TCP_HDR_LEN +
 * h->len (h->len <= BE_XPORT_PRIV_MAX), else more bytes are needed.
 *
 * An established conn's frames, in this order: be__tcp_hdr_check() (magic,
 * reserved field), the ack (state), be__tcp_frame_check() (a known type
 * and its fields: no payload on ACK, NAK and BYE, no status but on NAK,
 * data frames at most TCP_MAX_MSG); refused with TCP_NAK_PROTO. Then
 * be__tcp_aslot_check() for AWRITE and AWRITE_IMM against the conn's
 * RX_ALLOC slots @slots (NULL: all free): NULL with *@open the bytes to
 * allocate when the frame opens its slot (else 0); the payload then lies
 * inside the slot's buffer. Refused with TCP_NAK_ACCESS.
 */
const char *be__tcp_hs_check(const uint8_t *buf, uint32_t avail, uint8_t expect,
			     struct tcp_hdr *h);
const char *be__tcp_hdr_check(const struct tcp_hdr *h);
const char *be__tcp_frame_check(const struct tcp_hdr *h);
const char *be__tcp_aslot_check(const struct tcp_hdr *h, const struct be__xaslot *slots,
				uint64_t *open);

/* What an epoll entry points at. */
enum tcp_kind {
	TCP_K_LISTENER = 1,
	TCP_K_CONN,
};

struct tcp_region {
	struct tcp_region *next;
	uintptr_t addr;
	size_t len;
	uint32_t key;
};

struct tcp_dev {
	struct be_xdev x;
	pthread_rwlock_t lock;       /* protects the table below */
	struct tcp_region **buckets; /* chained by key */
	uint32_t nbuckets;           /* power of two */
	uint32_t nregions;
	uint32_t key_seed;
	uint32_t key_ctr;
};

struct tcp_evch {
	struct be__xch c;         /* evch.h: wake (tfd: next handshake
				   * deadline), evq, conns (ev_link),
				   * listeners */
	uint32_t nhandshake;      /* conns with a deadline */
};

struct tcp_cq {
	struct be__xcq c;         /* cq_fd: sockets + efd, the wakeup for
				   * completions made locally */
	int armed;
	int armed_now;            /* armed, and not polled since (cq_progress) */
	int polling;              /* inside cq_progress: the poller is awake */
	int efd_set;              /* the eventfd was written, not drained */
	struct be__wcq wcq;       /* the completions, oldest first */
	struct be__list conns;    /* conns using this cq (send or recv) */
	struct be__list epset;    /* conns in the epoll set (sep_link or
				   * rep_link, as on conns) and their count:
				   * cq_sole_conn looks at one, not all */
	uint32_t nep;
	struct be__list kick;     /* conns with work not signalled by their fd */
	struct be__list ackq;     /* conns owing their peer an ACK frame */
};

struct tcp_srq {
	struct be_xsrq x;
	struct tcp_cq *cq;
	struct be__xrq rq;        /* the posted receives */
	struct be__list conns;
};

struct tcp_listener {
	int kind;                 /* TCP_K_LISTENER */
	struct be_xlistener x;
	int fd;
	struct be__list link;     /* evch->listeners */
	char addr[BE_XPORT_ADDR_MAX];
};

/* A send queue slot: one posted WR. */
struct tcp_wr {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t rkey, imm;
	uint32_t len;             /* payload bytes */
	uint32_t seq;
	uint8_t opcode;           /* enum be_xwr_opcode */
	uint8_t rx_alloc;         /* BE_XWR_F_RX_ALLOC */
	uint8_t signaled;
	uint8_t hdr_built;
	uint8_t local_err;        /* enum be_xwc_status, 0 = none */
	int niov;
	struct iovec iov[TCP_MAX_SGE];
	uint8_t *inl;             /* inline copy (max_inline bytes), reused */
	uint8_t hdr[TCP_HDR_LEN];
};

enum tcp_cstate {
	TCP_C_CONNECTING = 1,     /* connector: TCP connect in flight */
	TCP_C_HELLO_SENT,         /* connector: waiting for ACCEPT/REJECT */
	TCP_C_WAIT_HELLO,         /* acceptor: internal, waiting for HELLO */
	TCP_C_REQUEST,            /* acceptor: CONNECT_REQUEST delivered */
	TCP_C_ESTABLISHED,
	TCP_C_ERROR,              /* flushed; fd may still drain until EOF */
	TCP_C_DEAD,               /* rejected / unreachable / closed */
};

struct tcp_conn {
	int kind;                 /* TCP_K_CONN */
	struct be_xconn x;
	struct tcp_dev *dev;
	struct tcp_evch *ch;
	int fd;
	enum tcp_cstate state;
	struct tcp_listener *listener; /* acceptor side, until accepted */
	struct tcp_cq *scq, *rcq;
	struct tcp_srq *srq;
	struct be__list ev_link, scq_link, rcq_link, srq_link;
	struct be__list kick_link; /* on a cq's kick list, newest first */
	struct be__list ack_link;  /* on rcq->ackq, newest first */
	int ep_scq, ep_rcq;       /* registered in that cq's epoll */
	struct be__list sep_link, rep_link; /* on that cq's epset while so */
	uint32_t ep_events;       /* current epoll interest there */
	int ep_ch;                /* registered in the evch's epoll */
	uint64_t deadline_ns;     /* handshake deadline, 0 = none */
	int timeout_ms;
	/* Connector, until a TCP connect succeeds: what the name resolved
	 * to and the index of the next address to try (addr.h). */
	struct be__inet_addrs *addrs;
	unsigned addr_next;

	/* Send queue: ring of sq_cap slots; the first sq_cnt from sq_head
	 * are outstanding, of which the first tx_written are on the wire
	 * (waiting for an ack) and slot tx_written has tx_off bytes out. */
	struct tcp_wr *sq;
	uint32_t sq_cap, sq_head, sq_cnt, tx_written;
	size_t tx_off;
	uint32_t seq_next;        /* seq of the next posted WR */
	uint32_t seq_acked;       /* last seq the peer acked */
	uint32_t max_inline;

	/* A control frame (handshake, ACK), written before the next data frame. */
	uint8_t ctl[TCP_HDR_LEN + BE_XPORT_PRIV_MAX];
	uint32_t ctl_len, ctl_off;
	uint32_t ack_sent;        /* last ack value put in a header */

	/* Receive: staging buffer, then the frame in progress. */
	uint8_t *rbuf;
	uint32_t rpos, rend;
	struct tcp_hdr rx;        /* current frame */
	uint8_t *rx_dst;
	uint32_t rx_left;         /* payload bytes still to place; 0 = at a header */
	int rx_has_recv;          /* rx_recv was taken from the srq */
	struct be_xrecv_wr rx_recv;
	uint32_t rx_count;        /* data frames placed (the ack value) */
	/* The last read came back short (or EAGAIN): the socket was empty.
	 * The next poll of a sole conn (cq.c) does not read it again; a
	 * wakeup on the cq fd or the poll after that does. */
	int rx_idle;
	/* The last payload was read into place (readv): the next header is
	 * read with a few hundred bytes (data.c, RX_HEAD), not a whole rbuf
	 * whose payload would then be copied again ("Receiving", data.c). */
	int rx_big;
	/* RX_ALLOC writes in progress (slot = rkey), lazily allocated; the
	 * slot of the current frame; the hooks of be_xconn_attr. rx_stalled:
	 * rx_alloc said -EAGAIN, the header waits in rbuf for
	 * conn_rx_resume. */
	struct be__xaslot *aslots;
	struct be__xaslot *rx_slot;
	int (*rx_alloc)(struct be_xconn *conn, uint64_t len, void **out);
	void (*rx_free)(struct be_xconn *conn, void *buf);
	int rx_stalled;

	/* What the peer may WRITE (grant.h): a WRITE frame must name a live
	 * grant of this conn; revoking the target of the frame being placed
	 * fails the conn. */
	struct be__xgrants grants;

	char peer[BE_XPORT_ADDR_MAX];
};

/* The ops of the table (xport.h), defined in the files named there. */
BE__XPORT_DECLARE(tcp)

/* Optional op of the table (xport.h); data.c. */
int be__tcp_conn_rx_resume(struct be_xconn *xc);
/* data.c: the optional grant ops (xport.h). */
int be__tcp_grant(struct be_xconn *xc, void *addr, size_t len, uint32_t *rkey);
int be__tcp_revoke(struct be_xconn *xc, uint32_t rkey, uint64_t cookie);

/* dev.c */
int be__tcp_reg_init(struct tcp_dev *d);
void be__tcp_reg_fini(struct tcp_dev *d);
/* 1 if [addr, addr+len) lies inside the region registered under @key. */
int be__tcp_reg_check(struct tcp_dev *d, uint32_t key, uint64_t addr, uint64_t len);

/* cm.c */
/* Queue @ev on @ch (NULL: the evch is gone; dropped). */
void be__tcp_evch_push(struct tcp_evch *ch, const struct be_xevent *ev);
/* Make @c's membership of its cqs' epoll sets match its state. */
void be__tcp_conn_epoll_update(struct tcp_conn *c);
/* Close the socket and leave every epoll set. */
void be__tcp_conn_close_fd(struct tcp_conn *c);

/* cq.c */
/* Queue a completion on @cq (wakes it if armed). */
void be__tcp_cq_push(struct tcp_cq *cq, const struct be_xwc *wc);
/* @c has work its socket will not signal: progress it at the next poll. */
void be__tcp_cq_kick(struct tcp_cq *cq, struct tcp_conn *c);

/* data.c */
int be__tcp_conn_alloc_sq(struct tcp_conn *c, uint32_t depth, uint32_t max_inline);
void be__tcp_conn_free_sq(struct tcp_conn *c);
void be__tcp_conn_progress(struct tcp_conn *c);
/* Send the ACK frames deferred on @cq (see data.c, "Acks"). */
void be__tcp_cq_flush_acks(struct tcp_cq *cq);
int be__tcp_conn_tx_pending(const struct tcp_conn *c);
/* Put @c in error: outstanding WRs complete (@first for the oldest, then
 * WR_FLUSH_ERR), DISCONNECTED(@ev_status) is queued. @graceful keeps the
 * socket open for reading (shut down for writing) until the peer closes. */
void be__tcp_conn_fail(struct tcp_conn *c, enum be_xwc_status first, int ev_status,
		       int graceful);
/* Write a bodiless control frame (NAK, BYE) now if at a frame boundary;
 * best effort, for a conn about to fail. */
void be__tcp_conn_send_ctl_now(struct tcp_conn *c, uint8_t type, uint8_t status);
/* Hand the buffers of unfinished RX_ALLOC writes to rx_free. */
void be__tcp_conn_free_aslots(struct tcp_conn *c);

#endif /* BE_XPORT_TCP_TCP_H */
