/*
 * perf_raw.h - what the files of be-perf raw-lat and raw-bw share: the
 * options, the hello both ends exchange as private data, and one end's
 * context (perf_raw.c has the model).
 *
 *   perf_raw.c        options, the hello, the server and client roles,
 *                     the subcommands
 *   perf_raw_xport.c  the transport side: device, queues, events, the
 *                     polling loop, writes, hang-up, default addresses
 *   perf_raw_lat.c    raw-lat: the ping-pong and its report
 *   perf_raw_bw.c     raw-bw: the stream, its credits and its report
 */
#ifndef BE_PERF_PERF_RAW_H
#define BE_PERF_PERF_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "perf.h"
#include "xport/xport.h"

#define RAW_MAGIC 0x46504542u /* "BEPF" */
#define RAW_VERSION 2 /* 2: keys traded after connecting (raw_keys()) */
#define RAW_RECV_BUF 64       /* bytes per posted receive (WRITE_IMM leaves it untouched) */
#define RAW_SQ_DEPTH 128u
#define RAW_POLL_BATCH 16
#define RAW_INLINE 256u        /* inline size asked for on each conn */

enum raw_mode { RAW_LAT = 0, RAW_BW = 1 };
#define RAW_F_WRITE_POLL 0x1u
#define RAW_F_SLEEP 0x2u

struct raw_opts {
	enum raw_mode mode;
	const char *cmd;       /* "raw-lat" / "raw-bw" */
	const char *transport;
	const char *dev;       /* dev_open() name, "" = first */
	const char *addr;      /* client: connect here; server: listen here */
	uint64_t size, iters, warmup;
	uint32_t window, imm_every;
	uint32_t bufs;         /* raw-bw: buffers the writes rotate over */
	int server, json, no_inline;
	int write_poll;        /* raw-lat: plain WRITEs, receiver spins on memory */
	int sleep;             /* spin briefly, then arm the CQ and sleep */
	int cpu[2];            /* client, peer; -1 = not pinned */
	int timeout_ms;        /* give up after this long without progress */
};

/* Connect / accept private data. */
struct raw_hello {
	uint32_t magic;
	uint8_t version;
	uint8_t mode;
	uint8_t flags;      /* RAW_F_* */
	uint8_t pad;
	uint64_t addr;      /* the sender's target buffer ... */
	uint32_t rsvd;      /* 0 (version 1 had the rkey here: see raw_keys()) */
	uint32_t size;      /* bytes per message */
	uint32_t total;     /* warmup + iters (< 2^32, checked) */
	uint32_t warmup;
	uint32_t window;
	uint32_t nrecv;     /* receives the sender of this hello keeps posted */
	uint32_t imm_every; /* raw-bw: every how many writes one carries an immediate */
	uint32_t bufs;      /* raw-bw: size-byte buffers each side rotates over */
};
_Static_assert(sizeof(struct raw_hello) <= BE_XPORT_PRIV_MAX, "hello exceeds private data");

struct raw_ctx {
	const struct raw_opts *o;
	const struct be_xport_ops *ops;
	struct be_xdev *dev;
	struct be_xdev_attr attr;
	int alloc_dev;
	struct be_xevch *ch;
	struct be_xcq *cq;
	struct be_xsrq *srq;
	struct be_xlistener *l;
	struct be_xconn *conn;

	/* Buffers (bemalloc): the peer writes into rbuf, we write from sbuf. */
	uint8_t *rbuf, *sbuf, *recvbuf;
	size_t buf_len;
	uint32_t bufs;      /* buf_len = bufs * message size */
	uint32_t rkey, lkey_s, lkey_recv;
	uint32_t nrecv;
	uint64_t peer_addr;
	uint32_t peer_rkey;   /* from the peer's first SEND (raw_keys()) */
	int peer_key_known;
	uint32_t peer_nrecv;
	uint32_t inline_max;  /* largest write posted inline (0: none) */

	/* Send queue accounting: WR i has wr_id i; completed = 1 + the last
	 * signaled wr_id polled (in-order completion frees all before it). */
	uint64_t posted, completed;
	uint32_t sig_every;

	/* Receive side: RECV_IMMs taken off the CQ, and the last immediate. */
	uint64_t rx, rx_bytes;
	uint32_t last_imm;
	uint32_t *repost;   /* receives taken, to post again (raw_repost()) */
	uint32_t nrepost;

	/* raw-bw: post times of the outstanding writes, write latencies. */
	int sleep;          /* this side's waits end in cq_arm + poll() */
	uint64_t sleeps;
	uint64_t *post_ns;
	double *wr_lat;
	size_t wr_lat_n;
	int disconnected;
};

struct raw_bw_result {
	double seconds, cpu_seconds;
};

/* perf_raw.c */
void raw_cpu_str(const struct raw_opts *o, char *buf, size_t len);

/* perf_raw_xport.c: setup and teardown of one end (messages on stderr). */
int raw_open(struct raw_ctx *c, const struct raw_opts *o);
/* CQ, SRQ and buffers for one connection, and the receives posted.
 * @size: message size; @nrecv: receives kept posted. */
int raw_queues(struct raw_ctx *c, uint64_t size, uint32_t bufs, uint32_t nrecv, uint32_t window);
void raw_conn_attr(struct raw_ctx *c, struct be_xconn_attr *a);
void raw_close(struct raw_ctx *c);
/* The next event of type @want within @timeout_ms (< 0: forever).
 * Connection failures end the wait with an error. */
int raw_wait_event(struct raw_ctx *c, enum be_xev_type want, struct be_xevent *ev,
		   int timeout_ms);
/* Wait up to @timeout_ms for DISCONNECTED, draining the CQ meanwhile. */
int raw_wait_disconnect(struct raw_ctx *c, int timeout_ms);
/* Orderly hang-up: the server waits for it before it exits. */
void raw_hangup(struct raw_ctx *c);
/* Where a self-spawned server listens; 0 or -EINVAL (message printed). */
int raw_local_addr(const struct raw_opts *o, char *buf, size_t len);

/* perf_raw_xport.c: the data path. */
/* One CQ poll: retire send completions, take RECV_IMMs off. Returns the
 * completions seen or -errno. */
int raw_poll(struct raw_ctx *c);
/* Poll until @done(c, arg) or an error; --timeout without any completion
 * fails. */
int raw_progress(struct raw_ctx *c, int (*done)(struct raw_ctx *c, void *arg), void *arg);
/* raw_progress() conditions: *(uint64_t *)arg RECV_IMMs taken; fewer
 * than *(uint64_t *)arg send WRs outstanding. */
int raw_done_rx(struct raw_ctx *c, void *arg);
int raw_done_sq(struct raw_ctx *c, void *arg);
/* Post one WRITE (or WRITE_WITH_IMM if @with_imm) of @len bytes from sbuf
 * into the peer's buffer, after waiting for send queue room. */
int raw_write(struct raw_ctx *c, uint32_t len, int with_imm, uint32_t imm, int signaled);
/* Once both ends admitted the conn: grant rbuf to the peer (on a
 * transport with grants) and trade keys, each side's in one SEND; the
 * peer's key arriving says it admitted us and granted its buffer. */
int raw_keys(struct raw_ctx *c);

/* perf_raw_lat.c */
int raw_lat_client(struct raw_ctx *c, const struct raw_hello *h, double *samples);
int raw_lat_server(struct raw_ctx *c, const struct raw_hello *h);
void raw_report_lat(const struct raw_opts *o, const struct perf_summary *s);

/* perf_raw_bw.c */
int raw_bw_client(struct raw_ctx *c, const struct raw_hello *h, struct raw_bw_result *r);
int raw_bw_server(struct raw_ctx *c, const struct raw_hello *h);
void raw_report_bw(const struct raw_opts *o, const struct raw_bw_result *r,
		   const struct perf_summary *s);

#endif /* BE_PERF_PERF_RAW_H */
