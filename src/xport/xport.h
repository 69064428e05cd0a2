/*
 * xport.h - the transport interface: an "RNIC" as a run-time ops table.
 *
 * The BE core runs unchanged on every transport, so this interface is
 * shaped like verbs + rdma_cm, and the software transports (shm, tcp) give
 * the guarantees of an RC QP:
 *
 *   device      an opened NIC (verbs), the shm transport, or the tcp one.
 *               Ports with link speed and MTU. Memory registration
 *               (bemalloc's reg hook: the dev_reg_hook op).
 *   evch        an event channel (rdma_event_channel): connection events
 *               of the listeners and connections created on it. One per
 *               worker, so each worker sees only its own events.
 *   cq          a completion queue, one per worker, polled in batches, with
 *               an fd that becomes readable when armed and a completion
 *               arrives (ibv_comp_channel).
 *   srq         a shared receive queue, shared by many connections of one
 *               worker, with a low-water event (IBV_EVENT_SRQ_LIMIT_REACHED).
 *   conn        a reliable connection (an RC QP + rdma_cm id): SEND,
 *               RDMA WRITE, WRITE_WITH_IMM; in order, exactly once.
 *   listener    accepts connection requests.
 *
 * Semantics every transport provides (what an RC QP gives):
 * - Work requests on one conn execute and complete in posting order.
 *   Signaled WRs produce one completion on the conn's send CQ; unsignaled
 *   ones produce none on success. A WR's buffers are reusable once its
 *   completion (or a later signaled one on the same conn) was polled.
 * - A SEND consumes one receive posted on the peer's SRQ; the completion
 *   there is BE_XWC_RECV with byte_len. A WRITE_IMM also consumes one
 *   receive (its buffer untouched) and completes as BE_XWC_RECV_IMM with
 *   the immediate and the written length. A SEND larger than the receive
 *   buffer fails (BE_XWC_LOC_LEN_ERR on the receiver, BE_XWC_REM_OP_ERR on
 *   the sender) and the connection goes to error.
 * - A software transport's receiver (shm, tcp) acknowledges what it took
 *   at the latest when it next polls (finding nothing), posts on that conn
 *   or arms its cq; its sender's completion may wait until then. So a
 *   receiver that took a message and then does none of the three may
 *   hold its sender back, where an RC QP would not; a worker always does
 *   one of them (test/xport/test-ack-idle.c).
 * - No receive posted when a SEND/WRITE_IMM arrives: with rnr_retry 0 this
 *   is BE_XWC_RNR_RETRY_EXC on the sender and the conn goes to error. The
 *   core's credits make it impossible; seeing it is a bug.
 * - RDMA WRITE checks the rkey and that [remote_addr, +len) lies inside
 *   what it names: on a transport with grants (the grant op) a live grant
 *   of that conn, and nothing else; without, or on verbs without memory
 *   windows, the registered region. A violation never touches memory, completes the WR
 *   with BE_XWC_REM_ACCESS_ERR and puts the conn in error.
 * - Once a conn is in error (local error, peer death, disconnect), every
 *   outstanding WR, signaled or not, completes with an error status
 *   (BE_XWC_WR_FLUSH_ERR for those after the first), and a
 *   BE_XEV_DISCONNECTED event reaches its evch.
 *   Peer death is detected within a bounded time (socket hang-up for shm
 *   and tcp: the first WR completes with BE_XWC_REM_ABORT_ERR; for verbs
 *   the DREQ the dead process's kernel sends, once, or the QP's retry
 *   timeout, BE_XWC_RETRY_EXC_ERR, of a WR outstanding or posted later).
 *   So a verbs conn with nothing posted whose DREQ was lost learns of it
 *   only at its next post: the Engine's keepalive makes one in bounded
 *   time.
 * - After conn_destroy() no completion or event names that conn again.
 *
 * Threads: a device may be used from several threads (registration happens
 * under bemalloc's lock). An evch, a cq and everything attached to it
 * (srq, conns, listeners) belong to one thread at a time (the worker).
 *
 * Errors: negative errno. Ownership of memory: the transport never owns
 * buffers; WRs lend their scatter lists until completion.
 */
#ifndef BE_XPORT_XPORT_H
#define BE_XPORT_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "alloc/reg.h"

struct be_xport_ops;

#define BE_XPORT_MAX_PORTS 4
/* Events one connection queues on its event channel over its life at
 * most: CONNECT_REQUEST (acceptor), the end of its handshake
 * (ESTABLISHED, REJECTED or UNREACHABLE), DISCONNECTED. The tcp and shm
 * transports reserve that many queue nodes when they make a connection,
 * so no event of it is lost for want of memory afterwards. */
#define BE_XPORT_CONN_EVENTS 3
/* Beside them, tcp and shm reserve one node per connection for the
 * SRQ_LIMIT its receives may raise: the event is one shot, so each SRQ
 * has at most one queued until its owner re-arms it, and every SRQ that
 * can fire has a connection on that channel. */
#define BE_XPORT_SRQ_EVENTS 1
#define BE_XPORT_PRIV_MAX 55 /* rdma_cm carries 56 bytes on an RC connect; verbs
			     * spends one on the length (rdma_cm reports 56) */
#define BE_XPORT_ADDR_MAX 108

/* Common heads embedded by each transport's objects (container_of). */
struct be_xdev {
	const struct be_xport_ops *ops; /* set by dev_open() */
};
struct be_xevch {
	struct be_xdev *dev;
};
struct be_xcq {
	struct be_xdev *dev;
};
struct be_xsrq {
	struct be_xdev *dev;
	struct be_xcq *cq;
	void *user;
};
struct be_xlistener {
	struct be_xdev *dev;
	struct be_xevch *evch;
	void *user;
};
struct be_xconn {
	struct be_xdev *dev;
	struct be_xevch *evch;
	void *user; /* owner's context (the Engine); never touched by the transport */
	/* The device port it runs on, numbered as BE_XEV_PORT_CHANGE's, once
	 * the transport knows it; -1 before. Transports that report no port
	 * changes leave it alone. */
	int port;
};

struct be_xport_port_attr {
	int up;               /* link state */
	uint32_t speed_mbps;  /* link speed; 0 if unknown */
	uint32_t mtu;         /* active path MTU for RDMA (bytes) */
	char netdev[32];      /* the network interface behind it, "" if none */
};

struct be_xdev_attr {
	char name[64];
	char transport[16];      /* "verbs", "shm", "tcp", "fake" */
	int num_ports;
	struct be_xport_port_attr port[BE_XPORT_MAX_PORTS];
	uint32_t max_inline;     /* bytes a SEND may carry inline */
	uint32_t max_sge;        /* scatter entries per WR */
	uint32_t max_qp_wr;      /* send queue depth limit */
	uint32_t max_srq_wr;     /* SRQ depth limit */
	uint32_t max_cqe;        /* CQ depth limit (cq_create clamps); 0: none */
	uint64_t max_msg_size;   /* largest single WR */
	int has_thread_domain;   /* verbs: ibv_alloc_td works */
	uint32_t max_rx_alloc;   /* BE_XWR_F_RX_ALLOC slots per conn; 0: not supported */
};

/* A scatter/gather entry: registered memory, local key. */
struct be_xsge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

enum be_xwr_opcode {
	BE_XWR_SEND = 0,
	BE_XWR_WRITE,
	BE_XWR_WRITE_IMM,
};

#define BE_XWR_F_SIGNALED 0x1u
#define BE_XWR_F_INLINE   0x2u /* copy the data at post time; buffers free on return */
/*
 * BE_XWR_F_RX_ALLOC: a WRITE or WRITE_IMM into memory the receiver
 * allocates when the data arrives (devices with max_rx_alloc > 0: tcp).
 * rkey is a slot (< max_rx_alloc) and remote_addr an offset in the
 * slot's buffer. The WR at offset 0 opens the slot: the receiving conn
 * calls its rx_alloc hook for imm bytes (a WRITE) or the WR's length (a
 * WRITE_IMM alone). A slot's WRs follow one another on the conn, each at
 * the offset where the last ended, and its WRITE_IMM ends the buffer:
 * that one consumes a receive and completes BE_XWC_RECV_IMM with imm,
 * byte_len = the buffer's length and rx_buf = the buffer, which then
 * belongs to the receiver. Anything else is refused like a bad rkey.
 */
#define BE_XWR_F_RX_ALLOC 0x4u

struct be_xsend_wr {
	struct be_xsend_wr *next; /* chain, like ibv_send_wr */
	uint64_t wr_id;
	enum be_xwr_opcode opcode;
	unsigned int flags;
	const struct be_xsge *sg_list;
	int num_sge;
	uint64_t remote_addr;     /* WRITE, WRITE_IMM */
	uint32_t rkey;
	uint32_t imm;             /* WRITE_IMM; host byte order */
};

struct be_xrecv_wr {
	struct be_xrecv_wr *next;
	uint64_t wr_id;
	struct be_xsge sge;       /* one buffer per receive */
};

enum be_xwc_opcode {
	BE_XWC_SEND = 0,
	BE_XWC_WRITE,
	BE_XWC_WRITE_IMM,   /* sender side of a WRITE_IMM */
	BE_XWC_RECV,        /* a SEND arrived in an SRQ buffer */
	BE_XWC_RECV_IMM,    /* a WRITE_IMM arrived; imm valid */
	BE_XWC_REVOKE,      /* a revoke that returned 1 ended; wr_id: its cookie */
};

enum be_xwc_status {
	BE_XWC_SUCCESS = 0,
	BE_XWC_LOC_LEN_ERR,
	BE_XWC_LOC_PROT_ERR,    /* bad lkey / local range */
	BE_XWC_WR_FLUSH_ERR,    /* conn went to error before this WR ran */
	BE_XWC_REM_ACCESS_ERR,  /* bad rkey or range at the peer */
	BE_XWC_REM_OP_ERR,
	BE_XWC_RETRY_EXC_ERR,   /* peer unreachable / dead */
	BE_XWC_RNR_RETRY_EXC,   /* no receive posted at the peer */
	BE_XWC_GENERAL_ERR,
	BE_XWC_REM_ABORT_ERR,   /* the peer closed or reset the connection */
};

struct be_xwc {
	uint64_t wr_id;
	enum be_xwc_status status;
	enum be_xwc_opcode opcode;
	uint32_t byte_len;        /* RECV: bytes received; RECV_IMM: bytes written */
	uint32_t imm;             /* RECV_IMM only, host byte order */
	struct be_xconn *conn;    /* the conn (for receives: the sender's conn here); may
				     be NULL for an SRQ receive flushed at srq_destroy */
	struct be_xsrq *srq;      /* receives only */
	uint32_t vendor_err;
	void *rx_buf;             /* RECV_IMM of an RX_ALLOC write: its buffer (taken) */
};

enum be_xev_type {
	BE_XEV_CONNECT_REQUEST = 1, /* listener: conn is new, priv = the peer's */
	BE_XEV_ESTABLISHED,         /* conn usable; priv = the acceptor's (connector side) */
	BE_XEV_REJECTED,            /* connect refused; priv = reject's; status -ECONNREFUSED */
	BE_XEV_UNREACHABLE,         /* connect failed; status -errno */
	BE_XEV_DISCONNECTED,        /* peer closed or conn failed; status 0 or -errno */
	BE_XEV_SRQ_LIMIT,           /* srq fell below its armed limit (one shot) */
	BE_XEV_PORT_CHANGE,         /* a port went up or down (port, up) */
};

struct be_xevent {
	enum be_xev_type type;
	int status;
	struct be_xconn *conn;
	struct be_xlistener *listener;
	struct be_xsrq *srq;
	int port;
	int up;
	uint8_t priv[BE_XPORT_PRIV_MAX];
	uint8_t priv_len;
	/* CONNECT_REQUEST, ESTABLISHED: the peer's process as the kernel
	 * names it (shm: SO_PEERCRED), when has_cred; the Engine's admission
	 * checks it (docs/SECURITY.md). */
	bool has_cred;
	uint32_t peer_uid, peer_gid;
	int32_t peer_pid;
};

struct be_xconn_attr {
	struct be_xcq *send_cq;
	struct be_xcq *recv_cq;    /* must be the srq's cq */
	struct be_xsrq *srq;
	uint32_t max_send_wr;      /* send queue depth */
	uint32_t max_inline;       /* wanted inline size (clamped to the device) */
	int timeout_ms;            /* connect / address resolution timeout; 0 = default */
	void *user;                /* copied into conn->user */
	/*
	 * RX_ALLOC writes arriving on the conn (optional; without them such
	 * writes are refused). rx_alloc returns 0 with a buffer of @len
	 * bytes in *out (lent to the transport until it completes the
	 * RECV_IMM, or hands it to rx_free when the conn fails first),
	 * -EAGAIN when there is no memory now (the conn then reads nothing
	 * more until conn_rx_resume), or another -errno to refuse the write
	 * (the conn goes to error). Called from cq_poll, on the conn's
	 * worker; neither may call into the transport.
	 */
	int (*rx_alloc)(struct be_xconn *conn, uint64_t len, void **out);
	void (*rx_free)(struct be_xconn *conn, void *buf);
};

struct be_xport_ops {
	const char *name;

	/* Devices. @name selects a device ("rxe0", "" for the first/only). */
	int (*dev_open)(const char *name, struct be_xdev **out);
	void (*dev_close)(struct be_xdev *dev);
	int (*dev_query)(struct be_xdev *dev, struct be_xdev_attr *out);
	/* bemalloc registration hook for this device (reg/dereg, dev set). */
	void (*dev_reg_hook)(struct be_xdev *dev, struct be_alloc_reg_hook *out);

	/* Event channels. get returns 1 with *ev filled, 0 if none, -errno. */
	int (*evch_create)(struct be_xdev *dev, struct be_xevch **out);
	void (*evch_destroy)(struct be_xevch *ch);
	int (*evch_fd)(struct be_xevch *ch);
	int (*evch_get)(struct be_xevch *ch, struct be_xevent *ev);

	/* Completion queues. poll returns the count (0..n) or -errno. arm asks
	 * for one wakeup of fd at the next completion (at once when one
	 * waits already) and returns 0 or -errno; after a failed arm no
	 * wakeup is promised, so the caller must not sleep on fd unbounded
	 * (the worker counts it as cq_arm_errors and sleeps at most 1 ms).
	 * On shm and tcp arming is also where a receiver settles what it
	 * owes its peers (tcp: its deferred acks), so a caller arms before
	 * every sleep. ack consumes the wakeup. */
	int (*cq_create)(struct be_xdev *dev, uint32_t depth, struct be_xcq **out);
	void (*cq_destroy)(struct be_xcq *cq);
	int (*cq_poll)(struct be_xcq *cq, struct be_xwc *wc, int n);
	int (*cq_fd)(struct be_xcq *cq);
	int (*cq_arm)(struct be_xcq *cq);
	int (*cq_ack)(struct be_xcq *cq);

	/* Shared receive queues. Receives complete on @cq. Destroying flushes
	 * posted receives with BE_XWC_WR_FLUSH_ERR completions. */
	int (*srq_create)(struct be_xcq *cq, uint32_t depth, struct be_xsrq **out);
	void (*srq_destroy)(struct be_xsrq *srq);
	int (*srq_post_recv)(struct be_xsrq *srq, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad);
	int (*srq_arm_limit)(struct be_xsrq *srq, uint32_t limit);

	/* Connections. @addr: "host:port" (verbs, tcp; port 0 = any when
	 * listening), a name for shm. listener_addr writes the bound address. */
	int (*listen)(struct be_xevch *ch, const char *addr, int backlog,
		      struct be_xlistener **out);
	int (*listener_addr)(struct be_xlistener *l, char *buf, size_t len);
	void (*listener_close)(struct be_xlistener *l);
	/* Starts a connect; BE_XEV_ESTABLISHED/REJECTED/UNREACHABLE follows. */
	int (*connect)(struct be_xevch *ch, const char *addr, const struct be_xconn_attr *attr,
		       const void *priv, size_t priv_len, struct be_xconn **out);
	/* Answer a BE_XEV_CONNECT_REQUEST. After reject the conn is destroyed
	 * by the transport. After accept, ESTABLISHED follows on the evch. */
	int (*accept)(struct be_xconn *conn, const struct be_xconn_attr *attr,
		      const void *priv, size_t priv_len);
	int (*reject)(struct be_xconn *conn, const void *priv, size_t priv_len);
	/* Starts teardown: outstanding WRs flush, the peer sees DISCONNECTED. */
	int (*disconnect)(struct be_xconn *conn);
	void (*conn_destroy)(struct be_xconn *conn);
	/* Posts a chain. On error *bad points at the first WR not posted. */
	int (*post_send)(struct be_xconn *conn, struct be_xsend_wr *wr, struct be_xsend_wr **bad);
	/* Peer's address as text, for logs. */
	int (*conn_peer_addr)(struct be_xconn *conn, char *buf, size_t len);

	/* Optional. The canonical form of a connect @addr into @buf: two
	 * addresses with the same form reach the same listener, and connect
	 * takes it and reaches that listener without another lookup (tcp,
	 * verbs: the resolved numeric "ip:port", addr.h). May block resolving
	 * a name. Returns 0 or connect's -errno for a bad address. NULL: the
	 * text is its own canonical form (shm: names are used as given). */
	int (*addr_canon)(const char *addr, char *buf, size_t len);

	/* Optional (devices with max_rx_alloc > 0). A conn whose rx_alloc
	 * said -EAGAIN reads again, and asks rx_alloc again, from the next
	 * cq_poll on. Returns 0 or -errno. */
	int (*conn_rx_resume)(struct be_xconn *conn);

	/* Optional. The name of the device @addr belongs to (@passive: an
	 * address to listen on) or is reached through (to connect to) into
	 * @buf; "" when any device will do (a wildcard address, or nothing
	 * says). May block resolving a name. Returns 0 or -errno for a bad
	 * address. NULL: the transport has one device (tcp, shm). */
	int (*addr_dev)(const char *addr, bool passive, char *buf, size_t len);
	/* Optional, with addr_dev. The name of the @i-th device (from 0) into
	 * @buf: 0, or -ENODEV past the last one (another -errno: the devices
	 * cannot be listed). May be slow (verbs: the first listing loads
	 * the providers), so a context lists and opens these devices when it
	 * is created, never on a worker's thread (engine/ctx_dev.c). */
	int (*dev_name)(int i, char *buf, size_t len);
	/*
	 * Optional: grants, the only memory a peer's WRITEs may reach (NULL:
	 * the rkey of a registration, bemalloc's block, reaches all of it; so
	 * does the key verbs grants without memory windows, docs/SECURITY.md).
	 * grant lets the peer of @conn WRITE and
	 * WRITE_IMM into [@addr, @addr+@len), memory registered on this
	 * device, under a fresh rkey into *@rkey: drawn from the kernel's
	 * CSPRNG, unique among @conn's live grants, valid on @conn alone.
	 * Borrows the range until revoke or conn_destroy: no WRITE of the
	 * peer lands there afterwards, and one still arriving for it puts
	 * the conn in error instead. May be called from the moment a conn
	 * exists (before accept, to hand the key over in its private data).
	 * Returns 0, -EINVAL, -ENOMEM (also: no key free now; ask again
	 * later), -ENOTCONN (@conn in error or closed). On verbs the key may
	 * be handed to the peer only in a SEND posted on @conn after grant
	 * returned (ordered after the memory window's bind, data.c); a peer
	 * WRITE under a key that reached it otherwise may fail its conn.
	 * revoke ends the grant of @rkey and returns 0 when it ended at once
	 * (tcp, shm; also for an rkey that is not live), 1 when it ends
	 * later: a completion BE_XWC_REVOKE with wr_id @cookie on @conn's
	 * send cq says when no WRITE of the peer can land there any more
	 * (its status an error if the conn failed first, which ends it too),
	 * and until then the range stays lent; or -errno: @conn failed, and
	 * the grant ends with conn_destroy. conn_destroy ends every grant, a
	 * pending revoke too (no completion follows). The conn's thread only.
	 */
	int (*grant)(struct be_xconn *conn, void *addr, size_t len, uint32_t *rkey);
	int (*revoke)(struct be_xconn *conn, uint32_t rkey, uint64_t cookie);

	/* Optional property. true: after a cq_poll that returned nothing,
	 * a successful cq_arm leaves nothing that a poll would find and fd
	 * would not signal (tcp: fd is level-triggered over the sockets,
	 * and arm signals completions and kicks already queued), so the
	 * caller may sleep on fd without polling again. false: a completion
	 * may have come between that poll and the arm without a wakeup (an
	 * RNIC's CQ, shm's rings): poll once more after arming. */
	bool cq_arm_covers;
};

/*
 * How a transport fills the table. Transport <t> lives in src/xport/<t>/
 * and names every op after its member: be__<t>_<op>() (be__tcp_cq_poll()).
 * Its header declares them all with BE__XPORT_DECLARE(<t>), and its <t>.c
 * defines the table as { BE__XPORT_OPS(<t>), <optional members> }. The
 * files are the same in every folder: dev.c defines dev_*, cm.c evch_*,
 * listen*, connect, accept, reject, disconnect, conn_*, cq.c cq_* and
 * srq_*, data.c post_send (and, on shm, where polling is the data path,
 * cq_poll and cq_arm). BE__XPORT_OP_LIST(X, t) is the list of the
 * mandatory ops, in the order of the struct: X(t, return type, op,
 * (parameters)) for each; the compiler checks it against the struct.
 * evch_fd is not in it: every transport's evch embeds a struct be__xch,
 * whose fd be__xch_fd() (evch.h) returns for all of them.
 */
#define BE__XPORT_OP_LIST(X, t)                                                          \
	X(t, int, dev_open, (const char *name, struct be_xdev **out))                    \
	X(t, void, dev_close, (struct be_xdev *dev))                                     \
	X(t, int, dev_query, (struct be_xdev *dev, struct be_xdev_attr *out))            \
	X(t, void, dev_reg_hook, (struct be_xdev *dev, struct be_alloc_reg_hook *out))   \
	X(t, int, evch_create, (struct be_xdev *dev, struct be_xevch **out))             \
	X(t, void, evch_destroy, (struct be_xevch *ch))                                  \
	X(t, int, evch_get, (struct be_xevch *ch, struct be_xevent *ev))                 \
	X(t, int, cq_create, (struct be_xdev *dev, uint32_t depth, struct be_xcq **out)) \
	X(t, void, cq_destroy, (struct be_xcq *cq))                                      \
	X(t, int, cq_poll, (struct be_xcq *cq, struct be_xwc *wc, int n))                \
	X(t, int, cq_fd, (struct be_xcq *cq))                                            \
	X(t, int, cq_arm, (struct be_xcq *cq))                                           \
	X(t, int, cq_ack, (struct be_xcq *cq))                                           \
	X(t, int, srq_create, (struct be_xcq *cq, uint32_t depth, struct be_xsrq **out)) \
	X(t, void, srq_destroy, (struct be_xsrq *srq))                                   \
	X(t, int, srq_post_recv,                                                         \
	  (struct be_xsrq *srq, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad))       \
	X(t, int, srq_arm_limit, (struct be_xsrq *srq, uint32_t limit))                  \
	X(t, int, listen,                                                                \
	  (struct be_xevch *ch, const char *addr, int backlog, struct be_xlistener **out)) \
	X(t, int, listener_addr, (struct be_xlistener *l, char *buf, size_t len))        \
	X(t, void, listener_close, (struct be_xlistener *l))                             \
	X(t, int, connect,                                                               \
	  (struct be_xevch *ch, const char *addr, const struct be_xconn_attr *attr,      \
	   const void *priv, size_t priv_len, struct be_xconn **out))                    \
	X(t, int, accept,                                                                \
	  (struct be_xconn *conn, const struct be_xconn_attr *attr, const void *priv,    \
	   size_t priv_len))                                                             \
	X(t, int, reject, (struct be_xconn *conn, const void *priv, size_t priv_len))    \
	X(t, int, disconnect, (struct be_xconn *conn))                                   \
	X(t, void, conn_destroy, (struct be_xconn *conn))                                \
	X(t, int, post_send,                                                             \
	  (struct be_xconn *conn, struct be_xsend_wr *wr, struct be_xsend_wr **bad))     \
	X(t, int, conn_peer_addr, (struct be_xconn *conn, char *buf, size_t len))

#define BE__XPORT_DECLARE_OP(t, type, op, params) type be__##t##_##op params;
#define BE__XPORT_DECLARE(t) BE__XPORT_OP_LIST(BE__XPORT_DECLARE_OP, t)
#define BE__XPORT_INIT_OP(t, type, op, params) .op = be__##t##_##op,
#define BE__XPORT_OPS(t) \
	BE__XPORT_OP_LIST(BE__XPORT_INIT_OP, t) .evch_fd = be__xch_fd, .name = #t

/* The transports built into this library, by name ("verbs", "shm", "tcp"). */
const struct be_xport_ops *be__xport_find(const char *name);
/* The @i-th of them (from 0), NULL past the last. */
const struct be_xport_ops *be__xport_at(int i);

/* Name of a completion status, for messages. */
const char *be__xwc_status_str(enum be_xwc_status st);

/* Name of a connection event type ("ESTABLISHED"), for messages. */
const char *be__xev_type_str(enum be_xev_type t);

/*
 * be__xaddr_printf() - an address as text into @buf (@len bytes), the way
 * listener_addr and conn_peer_addr hand it out. Returns 0, or -ENOSPC when
 * it does not fit (@buf then holds what fits).
 */
int be__xaddr_printf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

extern const struct be_xport_ops be__xport_tcp_ops;
extern const struct be_xport_ops be__xport_shm_ops;
#if BE_HAVE_VERBS
extern const struct be_xport_ops be__xport_verbs_ops;
#endif

#endif /* BE_XPORT_XPORT_H */
