/*
 * perf_raw.c - be-perf raw-lat and raw-bw: the transports measured on
 * their own, through the xport ops table, with nothing of the BE core.
 *
 *   raw-lat  WRITE_WITH_IMM ping-pong. The client writes @size bytes into
 *            the server's buffer with an immediate; the server busy-polls
 *            its CQ for the RECV_IMM, reposts the receive and writes back.
 *            One-way latency = RTT / 2, one sample per iteration.
 *   raw-bw   the client streams @size-byte WRITEs into one remote
 *            buffer, up to @window signaled WRs outstanding; every
 *            --imm-every-th (default: one per window) is a WRITE_WITH_IMM
 *            carrying its sequence number, as the core ends a large
 *            message's fragments with one. --bufs N rotates the writes
 *            over N source and N destination buffers, so the memory they
 *            touch matches a Socket stream with N messages in flight
 *            (be-perf bw --window N), not one hot buffer. The receiver returns credits
 *            (how many writes it has seen land) as small WRITE_WITH_IMMs,
 *            which keeps the sender from ever overrunning the receiver's
 *            SRQ (an RNR would kill the connection).
 *
 * Model. Two processes, one connection, one evch + CQ + SRQ each, all on
 * the main thread. The client sends a hello as connect private data (its
 * buffer address and rkey, the test and its parameters); the server sizes
 * its queues and buffers from it and answers with its own buffer in the
 * accept private data. Without --addr the client fork()s the server itself
 * (perf_peer.c), so one command measures both ends; with --addr it
 * connects to a "be-perf raw-lat --server --addr A" started elsewhere (the
 * server follows whichever test the client asks for).
 *
 * Buffers come from bemalloc with the device attached, exactly as the
 * core will use them. Small writes go inline when the device allows (as
 * ib_write_lat does); --no-inline turns that off.
 *
 * Bounded waits: every wait gives up after --timeout seconds without
 * progress, and a DISCONNECTED event ends the run, so a dead or wedged
 * peer fails the command instead of hanging it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <be/alloc.h>

#include "perf.h"
#include "perf_peer.h"
#include "util/common.h"
#include "xport/xport.h"

#define RAW_MAGIC 0x46504542u /* "BEPF" */
#define RAW_VERSION 1
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
	uint32_t rkey;      /* ... its rkey */
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
	uint32_t peer_rkey;
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

static void raw_usage(FILE *f, const char *cmd)
{
	int bw = !strcmp(cmd, "raw-bw");

	fprintf(f,
		"usage: be-perf %s --transport shm|tcp|verbs [options]\n"
		"  --size N        bytes per write (default %s; K/M/G suffixes)\n"
		"  --iters N       measured %s (default %s)\n"
		"  --warmup N      untimed ones first (default %s)\n"
		"%s"
		"  --addr A        connect to a server at A (\"host:port\", a name for shm);\n"
		"                  without it a peer process is started on this host\n"
		"  --server        be the server: listen on --addr and serve one client\n"
		"  --cpu A[,B]     pin this process to core A and the peer to core B\n"
		"  --dev NAME      transport device (default: the first)\n"
		"  --no-inline     never post small writes inline\n"
		"  --sleep         both ends spin briefly, then arm the CQ and sleep in\n"
		"                  poll() (default: busy-poll, as perftest and UCX do)\n"
		"%s"
		"  --timeout S     fail after S seconds without progress (default 10)\n"
		"  --json          one JSON object per line\n",
		cmd, bw ? "1M" : "64", bw ? "writes" : "round trips", bw ? "2000" : "20000",
		bw ? "100" : "1000",
		bw ? "  --window W      outstanding writes (default 16)\n"
		     "  --imm-every K   every K-th write is a WRITE_WITH_IMM, the others plain\n"
		     "                  WRITEs (default: the window; 1 = all)\n"
		     "  --bufs N        rotate over N buffers each side (default 1)\n" : "",
		bw ? "" : "  --write-poll    plain WRITEs; the receiver spins on the last byte\n"
			  "                  (ib_write_lat's method) instead of taking RECV_IMMs\n");
}

static int raw_takes_value(const char *a)
{
	static const char *const with_value[] = {
		"--transport", "--addr", "--dev", "--size", "--iters", "--warmup",
		"--window", "--imm-every", "--bufs", "--timeout", "--cpu",
	};
	size_t i;

	for (i = 0; i < sizeof(with_value) / sizeof(with_value[0]); i++)
		if (!strcmp(a, with_value[i]))
			return 1;
	return 0;
}

static int raw_parse(int argc, char **argv, struct raw_opts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->cmd = argv[0];
	o->mode = strcmp(argv[0], "raw-bw") ? RAW_LAT : RAW_BW;
	o->transport = "shm";
	o->dev = "";
	o->size = o->mode == RAW_BW ? 1u << 20 : 64;
	o->iters = o->mode == RAW_BW ? 2000 : 20000;
	o->warmup = o->mode == RAW_BW ? 100 : 1000;
	o->window = 16;
	o->bufs = 1;
	o->cpu[0] = o->cpu[1] = -1;
	o->timeout_ms = 10000;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = 1;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			raw_usage(stdout, o->cmd);
			exit(0);
		} else if (!strcmp(a, "--server")) {
			o->server = 1;
			takes = 0;
		} else if (!strcmp(a, "--json")) {
			o->json = 1;
			takes = 0;
		} else if (!strcmp(a, "--no-inline")) {
			o->no_inline = 1;
			takes = 0;
		} else if (!strcmp(a, "--sleep")) {
			o->sleep = 1;
			takes = 0;
		} else if (!strcmp(a, "--write-poll") && o->mode == RAW_LAT) {
			o->write_poll = 1;
			takes = 0;
		} else if (!raw_takes_value(a)) {
			fprintf(stderr, "be-perf %s: unknown option '%s'\n", o->cmd, a);
			raw_usage(stderr, o->cmd);
			return -EINVAL;
		} else if (!v) {
			fprintf(stderr, "be-perf %s: %s needs a value\n", o->cmd, a);
			return -EINVAL;
		} else if (!strcmp(a, "--transport")) {
			o->transport = v;
		} else if (!strcmp(a, "--addr")) {
			o->addr = v;
		} else if (!strcmp(a, "--dev")) {
			o->dev = v;
		} else if (!strcmp(a, "--size")) {
			o->size = perf_parse_size(v);
		} else if (!strcmp(a, "--iters")) {
			o->iters = perf_parse_size(v);
		} else if (!strcmp(a, "--warmup")) {
			o->warmup = perf_parse_size(v);
		} else if (!strcmp(a, "--window")) {
			o->window = (uint32_t)perf_parse_size(v);
		} else if (!strcmp(a, "--imm-every") && o->mode == RAW_BW) {
			o->imm_every = (uint32_t)perf_parse_size(v);
		} else if (!strcmp(a, "--bufs") && o->mode == RAW_BW) {
			o->bufs = (uint32_t)perf_parse_size(v);
		} else if (!strcmp(a, "--timeout")) {
			o->timeout_ms = atoi(v) * 1000;
		} else if (!strcmp(a, "--cpu")) {
			char *end;

			o->cpu[0] = (int)strtol(v, &end, 10);
			if (*end == ',')
				o->cpu[1] = (int)strtol(end + 1, &end, 10);
			if (*end || o->cpu[0] < 0) {
				fprintf(stderr, "be-perf %s: bad --cpu '%s' (A or A,B)\n", o->cmd, v);
				return -EINVAL;
			}
		}
		i += takes;
	}
	if (!o->size || o->size > UINT32_MAX) {
		fprintf(stderr, "be-perf %s: --size must be 1..4G-1\n", o->cmd);
		return -EINVAL;
	}
	if (!o->iters || o->iters + o->warmup >= UINT32_MAX) {
		fprintf(stderr, "be-perf %s: --iters must be 1..2^32-2 (with --warmup)\n", o->cmd);
		return -EINVAL;
	}
	if (!o->window || o->window > 4096) {
		fprintf(stderr, "be-perf %s: --window must be 1..4096\n", o->cmd);
		return -EINVAL;
	}
	if (!o->bufs || o->bufs > 4096 || o->size * o->bufs > (1ull << 34)) {
		fprintf(stderr, "be-perf %s: --bufs must be 1..4096 and size x bufs <= 16G\n",
			o->cmd);
		return -EINVAL;
	}
	if (!o->imm_every)
		o->imm_every = o->window;
	if (o->imm_every > o->iters + o->warmup)
		o->imm_every = (uint32_t)(o->iters + o->warmup);
	if (o->timeout_ms <= 0) {
		fprintf(stderr, "be-perf %s: --timeout must be > 0 seconds\n", o->cmd);
		return -EINVAL;
	}
	if (o->server && !o->addr) {
		fprintf(stderr, "be-perf %s: --server needs --addr\n", o->cmd);
		return -EINVAL;
	}
	return 0;
}

/* ---- setup ---------------------------------------------------------- */

static int raw_open(struct raw_ctx *c, const struct raw_opts *o)
{
	struct be_alloc_reg_hook hook;
	int rc;

	memset(c, 0, sizeof(*c));
	c->o = o;
	c->alloc_dev = -1;
	c->ops = be__xport_find(o->transport);
	if (!c->ops) {
		fprintf(stderr, "be-perf %s: transport '%s' is not built in\n", o->cmd,
			o->transport);
		return -ENOENT;
	}
	rc = c->ops->dev_open(o->dev, &c->dev);
	if (rc) {
		fprintf(stderr, "be-perf %s: %s dev_open(\"%s\"): %s\n", o->cmd, o->transport,
			o->dev, strerror(-rc));
		return rc;
	}
	rc = c->ops->dev_query(c->dev, &c->attr);
	if (rc) {
		fprintf(stderr, "be-perf %s: dev_query: %s\n", o->cmd, strerror(-rc));
		return rc;
	}
	c->ops->dev_reg_hook(c->dev, &hook);
	rc = be_alloc_attach_device(&hook);
	if (rc < 0) {
		fprintf(stderr, "be-perf %s: attaching %s to bemalloc: %s (%s)\n", o->cmd,
			c->attr.name, strerror(-rc), be_alloc_last_error());
		return rc;
	}
	c->alloc_dev = rc;
	c->dev->alloc_dev = rc;
	rc = c->ops->evch_create(c->dev, &c->ch);
	if (rc) {
		fprintf(stderr, "be-perf %s: evch_create: %s\n", o->cmd, strerror(-rc));
		return rc;
	}
	return 0;
}

static int raw_post_recv(struct raw_ctx *c, uint32_t idx)
{
	struct be_xrecv_wr wr = {
		.wr_id = idx,
		.sge = {
			.addr = (uint64_t)(uintptr_t)(c->recvbuf + (size_t)idx * RAW_RECV_BUF),
			.length = RAW_RECV_BUF,
			.lkey = c->lkey_recv,
		},
	};
	struct be_xrecv_wr *bad;
	int rc = c->ops->srq_post_recv(c->srq, &wr, &bad);

	if (rc)
		fprintf(stderr, "be-perf %s: srq_post_recv: %s\n", c->o->cmd, strerror(-rc));
	return rc;
}

static int raw_lkey(struct raw_ctx *c, void *p, uint32_t *lkey, uint32_t *rkey)
{
	struct be_alloc_region r;
	int rc = be_alloc_lookup(p, c->alloc_dev, &r);

	if (rc) {
		fprintf(stderr, "be-perf %s: be_alloc_lookup: %s\n", c->o->cmd, strerror(-rc));
		return rc;
	}
	if (lkey)
		*lkey = r.lkey;
	if (rkey)
		*rkey = r.rkey;
	return 0;
}

/*
 * raw_queues() - CQ, SRQ and buffers for one connection, and the receives
 * posted. @size: message size; @nrecv: receives kept posted.
 */
static int raw_queues(struct raw_ctx *c, uint64_t size, uint32_t bufs, uint32_t nrecv,
		      uint32_t window)
{
	uint32_t i;
	int rc;

	c->nrecv = nrecv;
	if (c->attr.max_srq_wr && c->nrecv > c->attr.max_srq_wr)
		c->nrecv = c->attr.max_srq_wr;
	c->sig_every = RAW_SQ_DEPTH / 4;
	rc = c->ops->cq_create(c->dev, RAW_SQ_DEPTH + c->nrecv + 16, &c->cq);
	if (rc) {
		fprintf(stderr, "be-perf %s: cq_create: %s\n", c->o->cmd, strerror(-rc));
		return rc;
	}
	rc = c->ops->srq_create(c->cq, c->nrecv, &c->srq);
	if (rc) {
		fprintf(stderr, "be-perf %s: srq_create(%u): %s\n", c->o->cmd, c->nrecv,
			strerror(-rc));
		return rc;
	}
	c->bufs = bufs;
	c->buf_len = (size < 64 ? 64 : size) * bufs;
	c->rbuf = be_alloc(c->buf_len);
	c->sbuf = be_alloc(c->buf_len);
	c->recvbuf = be_alloc((size_t)c->nrecv * RAW_RECV_BUF);
	if (!c->rbuf || !c->sbuf || !c->recvbuf) {
		fprintf(stderr, "be-perf %s: be_alloc: %s\n", c->o->cmd, be_alloc_last_error());
		return -ENOMEM;
	}
	memset(c->rbuf, 0, c->buf_len);
	memset(c->sbuf, 0xa5, c->buf_len);
	if ((rc = raw_lkey(c, c->rbuf, NULL, &c->rkey)) ||
	    (rc = raw_lkey(c, c->sbuf, &c->lkey_s, NULL)) ||
	    (rc = raw_lkey(c, c->recvbuf, &c->lkey_recv, NULL)))
		return rc;
	c->post_ns = calloc(window, sizeof(*c->post_ns));
	if (!c->post_ns)
		return -ENOMEM;
	c->repost = calloc(c->nrecv, sizeof(*c->repost));
	if (!c->repost)
		return -ENOMEM;
	for (i = 0; i < c->nrecv; i++)
		if ((rc = raw_post_recv(c, i)))
			return rc;
	/* What the conn asks for (raw_conn_attr), clamped by the device. */
	c->inline_max = c->o->no_inline ? 0 : BE_MIN(RAW_INLINE, c->attr.max_inline);
	return 0;
}

static void raw_conn_attr(struct raw_ctx *c, struct be_xconn_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->send_cq = c->cq;
	a->recv_cq = c->cq;
	a->srq = c->srq;
	a->max_send_wr = RAW_SQ_DEPTH;
	if (c->attr.max_qp_wr && a->max_send_wr > c->attr.max_qp_wr)
		a->max_send_wr = c->attr.max_qp_wr;
	a->max_inline = c->o->no_inline ? 0 : RAW_INLINE;
	a->timeout_ms = c->o->timeout_ms;
	a->user = c;
}

static void raw_close(struct raw_ctx *c)
{
	if (c->conn)
		c->ops->conn_destroy(c->conn);
	if (c->l)
		c->ops->listener_close(c->l);
	if (c->srq)
		c->ops->srq_destroy(c->srq);
	if (c->cq)
		c->ops->cq_destroy(c->cq);
	if (c->ch)
		c->ops->evch_destroy(c->ch);
	be_free(c->rbuf);
	be_free(c->sbuf);
	be_free(c->recvbuf);
	free(c->post_ns);
	free(c->repost);
	free(c->wr_lat);
	if (c->alloc_dev >= 0)
		be_alloc_detach_device(c->alloc_dev);
	if (c->dev)
		c->ops->dev_close(c->dev);
	memset(c, 0, sizeof(*c));
}

/*
 * raw_wait_event() - the next event of type @want within @timeout_ms
 * (< 0: forever). Connection failures end the wait with an error.
 */
static int raw_wait_event(struct raw_ctx *c, enum be_xev_type want, struct be_xevent *ev,
			  int timeout_ms)
{
	uint64_t deadline = perf_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;

	for (;;) {
		int rc = c->ops->evch_get(c->ch, ev);

		if (rc < 0) {
			fprintf(stderr, "be-perf %s: evch_get: %s\n", c->o->cmd, strerror(-rc));
			return rc;
		}
		if (rc == 1) {
			if (ev->type == want)
				return 0;
			switch (ev->type) {
			case BE_XEV_REJECTED:
			case BE_XEV_UNREACHABLE:
			case BE_XEV_DISCONNECTED:
				if (ev->type == BE_XEV_DISCONNECTED)
					c->disconnected = 1;
				fprintf(stderr, "be-perf %s: waiting for %s, got %s (%s)\n",
					c->o->cmd, be__xev_type_str(want), be__xev_type_str(ev->type),
					ev->status ? strerror(-ev->status) : "no status");
				return ev->status ? ev->status : -ECONNRESET;
			default:
				continue; /* SRQ limit, port changes: not ours to act on */
			}
		}
		if (timeout_ms >= 0 && perf_now_ns() >= deadline) {
			fprintf(stderr, "be-perf %s: no %s within %d ms\n", c->o->cmd,
				be__xev_type_str(want), timeout_ms);
			return -ETIMEDOUT;
		}
		{
			struct pollfd pfd = { .fd = c->ops->evch_fd(c->ch), .events = POLLIN };

			if (pfd.fd >= 0)
				poll(&pfd, 1, 10);
			else
				usleep(1000);
		}
	}
}

/* A peer that went away mid-test ends the run (checked while idle). */
static int raw_check_events(struct raw_ctx *c)
{
	struct be_xevent ev;
	int rc;

	while ((rc = c->ops->evch_get(c->ch, &ev)) == 1) {
		if (ev.type == BE_XEV_DISCONNECTED) {
			c->disconnected = 1;
			fprintf(stderr, "be-perf %s: peer disconnected mid-test (%s)\n", c->o->cmd,
				ev.status ? strerror(-ev.status) : "closed");
			return -ECONNRESET;
		}
	}
	return rc < 0 ? rc : 0;
}

/* ---- data path ------------------------------------------------------ */

/*
 * raw_poll() - one CQ poll: retire send completions, take RECV_IMMs off
 * (their receives go on the repost list). Returns the completions seen or
 * -errno.
 */
/*
 * Receives taken by RECV_IMMs are posted again only after the answer went
 * out (raw_write) or while waiting (raw_progress): reposting is not on the
 * critical path of a round trip, as an application would arrange it too.
 * At most a few are pending; the SRQ keeps the rest posted.
 */
static int raw_repost(struct raw_ctx *c)
{
	int rc;

	while (c->nrepost)
		if ((rc = raw_post_recv(c, c->repost[--c->nrepost])))
			return rc;
	return 0;
}

static int raw_poll(struct raw_ctx *c)
{
	struct be_xwc wc[RAW_POLL_BATCH];
	int n = c->ops->cq_poll(c->cq, wc, RAW_POLL_BATCH);
	int i;

	if (n < 0) {
		fprintf(stderr, "be-perf %s: cq_poll: %s\n", c->o->cmd, strerror(-n));
		return n;
	}
	for (i = 0; i < n; i++) {
		struct be_xwc *w = &wc[i];

		if (w->status != BE_XWC_SUCCESS) {
			fprintf(stderr, "be-perf %s: completion error: %s (opcode %d, wr_id %" PRIu64
				", vendor_err %u)\n", c->o->cmd, be__xwc_status_str(w->status),
				(int)w->opcode, w->wr_id, w->vendor_err);
			return -EIO;
		}
		switch (w->opcode) {
		case BE_XWC_SEND:
		case BE_XWC_WRITE:
		case BE_XWC_WRITE_IMM:
			c->completed = w->wr_id + 1;
			if (c->wr_lat && c->o->window) {
				uint64_t t = c->post_ns[w->wr_id % c->o->window];

				if (t && c->wr_lat_n < c->o->iters)
					c->wr_lat[c->wr_lat_n++] = (double)(perf_now_ns() - t) / 1e3;
			}
			break;
		case BE_XWC_RECV_IMM:
			c->rx++;
			c->rx_bytes += w->byte_len;
			c->last_imm = w->imm;
			c->repost[c->nrepost++] = (uint32_t)w->wr_id;
			break;
		case BE_XWC_RECV:
			fprintf(stderr, "be-perf %s: unexpected SEND from the peer\n", c->o->cmd);
			return -EPROTO;
		}
	}
	return n;
}

/*
 * raw_sleep() - arm the CQ, look once more (a completion may have come
 * before the arm), then sleep in poll() on its fd for at most 100 ms.
 * Returns the completions the extra look found, 0 after a sleep, -errno.
 */
static int raw_sleep(struct raw_ctx *c)
{
	struct pollfd pfd = { .fd = c->ops->cq_fd(c->cq), .events = POLLIN };
	int rc = c->ops->cq_arm(c->cq);

	if (rc) {
		fprintf(stderr, "be-perf %s: cq_arm: %s\n", c->o->cmd, strerror(-rc));
		return rc;
	}
	rc = raw_poll(c);
	if (rc)
		return rc;
	if (pfd.fd >= 0 && poll(&pfd, 1, 100) > 0) {
		rc = c->ops->cq_ack(c->cq);
		if (rc) {
			fprintf(stderr, "be-perf %s: cq_ack: %s\n", c->o->cmd, strerror(-rc));
			return rc;
		}
	}
	c->sleeps++;
	return 0;
}

/*
 * raw_progress() - poll until @done(c) or an error; --timeout without any
 * completion fails.
 */
static int raw_progress(struct raw_ctx *c, int (*done)(struct raw_ctx *c, void *arg), void *arg)
{
	uint64_t idle_since = 0;
	unsigned int empty = 0;

	while (!done(c, arg)) {
		int n = raw_repost(c);

		if (n)
			return n;
		n = raw_poll(c);

		if (n < 0)
			return n;
		if (n) {
			empty = 0;
			idle_since = 0;
			continue;
		}
		/* Idle: look at the clock and the event channel only now and
		 * then, so the busy-poll loop stays a tight cq_poll loop. */
		if (++empty < (c->sleep ? 64u : 4096u))
			continue;
		empty = 0;
		if (c->sleep && (n = raw_sleep(c)) != 0) {
			if (n < 0)
				return n;
			idle_since = 0;
			continue;
		}
		if (!idle_since)
			idle_since = perf_now_ns();
		if (raw_check_events(c))
			return -ECONNRESET;
		if (perf_now_ns() - idle_since > (uint64_t)c->o->timeout_ms * 1000000ull) {
			fprintf(stderr, "be-perf %s: no progress for %d ms (posted %" PRIu64
				", completed %" PRIu64 ", received %" PRIu64 ")\n", c->o->cmd,
				c->o->timeout_ms, c->posted, c->completed, c->rx);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

static int raw_done_rx(struct raw_ctx *c, void *arg)
{
	return c->rx >= *(const uint64_t *)arg;
}

static int raw_done_sq(struct raw_ctx *c, void *arg)
{
	return c->posted - c->completed < *(const uint64_t *)arg;
}

/*
 * raw_write() - post one WRITE (or WRITE_WITH_IMM if @with_imm) of @len
 * bytes from sbuf into the peer's buffer. Waits for send queue room first.
 * Small writes go inline. Returns 0 or -errno.
 */
static int raw_write(struct raw_ctx *c, uint32_t len, int with_imm, uint32_t imm, int signaled)
{
	/* --bufs: write i uses slot i % bufs on both sides. */
	uint64_t off = (c->posted % c->bufs) * (c->buf_len / c->bufs);
	struct be_xsge sge = {
		.addr = (uint64_t)(uintptr_t)c->sbuf + off, .length = len, .lkey = c->lkey_s,
	};
	struct be_xsend_wr wr = {
		.wr_id = c->posted,
		.opcode = with_imm ? BE_XWR_WRITE_IMM : BE_XWR_WRITE,
		.sg_list = &sge,
		.num_sge = 1,
		.remote_addr = c->peer_addr + off,
		.rkey = c->peer_rkey,
		.imm = imm,
	};
	struct be_xsend_wr *bad;
	uint64_t room = RAW_SQ_DEPTH - 1;
	int rc;

	if (c->posted - c->completed >= room) {
		rc = raw_progress(c, raw_done_sq, &room);
		if (rc)
			return rc;
	}
	if (signaled || c->posted % c->sig_every == c->sig_every - 1)
		wr.flags |= BE_XWR_F_SIGNALED;
	if (len <= c->inline_max)
		wr.flags |= BE_XWR_F_INLINE;
	rc = c->ops->post_send(c->conn, &wr, &bad);
	if (rc) {
		fprintf(stderr, "be-perf %s: post_send: %s\n", c->o->cmd, strerror(-rc));
		return rc;
	}
	c->posted++;
	return raw_repost(c);
}

/* ---- the tests ------------------------------------------------------ */

/*
 * A round of the ping-pong. By default a WRITE_WITH_IMM, awaited as a
 * RECV_IMM (what the core's large-message path does). With --write-poll a
 * plain WRITE whose last byte carries the round's mark, awaited by
 * spinning on that byte, as ib_write_lat does; the CQ is still polled
 * between spins (send completions, and tcp makes its progress there).
 */
static uint8_t raw_mark(uint64_t i)
{
	return (uint8_t)(i % 255 + 1); /* never 0, the buffer's initial value */
}

struct raw_mark_wait {
	const uint8_t *p;
	uint8_t want;
};

static int raw_done_mark(struct raw_ctx *c, void *arg)
{
	const struct raw_mark_wait *w = arg;
	int k;

	for (k = 0; k < 16; k++)
		if (__atomic_load_n(w->p, __ATOMIC_ACQUIRE) == w->want)
			return 1;
	return 0;
}

static int raw_lat_send(struct raw_ctx *c, const struct raw_hello *h, uint64_t i)
{
	if (!(h->flags & RAW_F_WRITE_POLL))
		return raw_write(c, h->size, 1, (uint32_t)i, 0);
	/* The previous round's write has landed (the peer answered it), so
	 * the source buffer is ours to change. */
	c->sbuf[h->size - 1] = raw_mark(i);
	return raw_write(c, h->size, 0, 0, 0);
}

static int raw_lat_wait(struct raw_ctx *c, const struct raw_hello *h, uint64_t i)
{
	uint64_t want = i + 1;
	struct raw_mark_wait w = { c->rbuf + h->size - 1, raw_mark(i) };

	if (!(h->flags & RAW_F_WRITE_POLL))
		return raw_progress(c, raw_done_rx, &want);
	return raw_progress(c, raw_done_mark, &w);
}

static int raw_lat_client(struct raw_ctx *c, const struct raw_hello *h, double *samples)
{
	uint64_t i, t, prev = 0;
	int rc;

	for (i = 0; i < h->total; i++) {
		if (i == h->warmup)
			prev = perf_now_ns();
		rc = raw_lat_send(c, h, i);
		if (rc)
			return rc;
		rc = raw_lat_wait(c, h, i);
		if (rc)
			return rc;
		if (i >= h->warmup) {
			/* One clock read per round trip: the loop time is the RTT. */
			t = perf_now_ns();
			samples[i - h->warmup] = (double)(t - prev) / 2e3;
			prev = t;
		}
	}
	return 0;
}

static int raw_lat_server(struct raw_ctx *c, const struct raw_hello *h)
{
	uint64_t i;
	int rc;

	for (i = 0; i < h->total; i++) {
		rc = raw_lat_wait(c, h, i);
		if (rc)
			return rc;
		rc = raw_lat_send(c, h, i);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Which writes of a raw-bw stream carry an immediate: every imm_every-th,
 * the last of the warmup and the last of all, as the core's large message
 * path ends its fragments with one WRITE_WITH_IMM. The immediate is the
 * write's sequence number, so a RECV_IMM tells the receiver that every
 * write up to it has landed (in-order delivery).
 */
static int raw_bw_has_imm(const struct raw_hello *h, uint64_t seq)
{
	return (seq + 1) % h->imm_every == 0 || seq + 1 == h->warmup || seq + 1 == h->total;
}

struct raw_bw_state {
	uint64_t target;  /* writes the receiver must have credited */
};

/* The receiver's credit: how many writes it has seen land (0 before any). */
static uint64_t raw_bw_credit(const struct raw_ctx *c)
{
	return c->rx ? c->last_imm : 0;
}

static int raw_done_credit(struct raw_ctx *c, void *arg)
{
	struct raw_bw_state *s = arg;

	return raw_bw_credit(c) >= s->target;
}

/*
 * Stream writes @from..@to (exclusive). At most window writes outstanding
 * on the send queue, and never more uncredited writes than keep the
 * receiver's immediates within half its posted receives (each WRITE_IMM
 * consumes one there).
 */
static int raw_bw_stream(struct raw_ctx *c, const struct raw_hello *h, uint64_t from, uint64_t to)
{
	uint64_t seq = from;
	uint64_t room_w = (uint64_t)(c->peer_nrecv / 2 ? c->peer_nrecv / 2 : 1) * h->imm_every;
	struct raw_bw_state s = { .target = to };
	int rc;

	while (seq < to) {
		uint64_t credit = raw_bw_credit(c);

		while (seq < to && c->posted - c->completed < h->window && seq - credit < room_w) {
			c->post_ns[seq % h->window] = seq >= h->warmup ? perf_now_ns() : 0;
			rc = raw_write(c, h->size, raw_bw_has_imm(h, seq), (uint32_t)seq, 1);
			if (rc)
				return rc;
			seq++;
		}
		rc = raw_poll(c);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			uint64_t want = c->rx + 1;
			uint64_t room = h->window;

			/* Nothing came back: wait (bounded) for a completion
			 * or a credit, whichever frees room first. */
			if (c->posted - c->completed >= h->window && seq - credit < room_w)
				rc = raw_progress(c, raw_done_sq, &room);
			else if (seq < to && seq - credit >= room_w)
				rc = raw_progress(c, raw_done_rx, &want);
			if (rc)
				return rc;
		}
	}
	/* Everything posted: wait for the receiver to credit all of it. */
	return raw_progress(c, raw_done_credit, &s);
}

struct raw_bw_result {
	double seconds, cpu_seconds;
};

static int raw_bw_client(struct raw_ctx *c, const struct raw_hello *h, struct raw_bw_result *r)
{
	uint64_t t0;
	double cpu0;
	int rc;

	c->peer_nrecv = c->peer_nrecv ? c->peer_nrecv : 1;
	if (h->warmup && (rc = raw_bw_stream(c, h, 0, h->warmup)))
		return rc;
	t0 = perf_now_ns();
	cpu0 = perf_cpu_seconds();
	rc = raw_bw_stream(c, h, h->warmup, h->total);
	if (rc)
		return rc;
	r->seconds = (double)(perf_now_ns() - t0) / 1e9;
	r->cpu_seconds = perf_cpu_seconds() - cpu0;
	return 0;
}

/*
 * Receiver: the immediates say how many writes have landed; credit that
 * count back after every quarter of the receives, at the end of warmup and
 * at the very end (the client's stop signal).
 */
static int raw_bw_server(struct raw_ctx *c, const struct raw_hello *h)
{
	uint64_t every = c->nrecv / 4 ? c->nrecv / 4 : 1;
	uint64_t credited = 0, rx_credited = 0;
	uint32_t len = h->size < 8 ? h->size : 8;
	int rc;

	while (credited < h->total) {
		uint64_t got = c->rx ? (uint64_t)c->last_imm + 1 : 0;
		uint64_t want = c->rx + 1;

		if (got > credited && (c->rx - rx_credited >= every || got == h->total ||
				       (got == h->warmup && credited < h->warmup))) {
			credited = got;
			rx_credited = c->rx;
			rc = raw_write(c, len, 1, (uint32_t)credited, 0);
			if (rc)
				return rc;
			continue;
		}
		rc = raw_progress(c, raw_done_rx, &want);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- connection ----------------------------------------------------- */

static void raw_hello_fill(struct raw_ctx *c, const struct raw_opts *o, struct raw_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = RAW_MAGIC;
	h->version = RAW_VERSION;
	h->mode = (uint8_t)o->mode;
	h->flags = (o->write_poll ? RAW_F_WRITE_POLL : 0) | (o->sleep ? RAW_F_SLEEP : 0);
	h->addr = (uint64_t)(uintptr_t)c->rbuf;
	h->rkey = c->rkey;
	h->size = (uint32_t)o->size;
	h->total = (uint32_t)(o->warmup + o->iters);
	h->warmup = (uint32_t)o->warmup;
	h->window = o->window;
	h->nrecv = c->nrecv;
	h->imm_every = o->imm_every;
	h->bufs = o->bufs;
}

static int raw_hello_check(const struct raw_opts *o, const uint8_t *priv, size_t len,
			   struct raw_hello *h)
{
	if (len < sizeof(*h)) {
		fprintf(stderr, "be-perf %s: peer sent %zu bytes of private data, want %zu\n",
			o->cmd, len, sizeof(*h));
		return -EPROTO;
	}
	memcpy(h, priv, sizeof(*h));
	if (h->magic != RAW_MAGIC || h->version != RAW_VERSION || h->mode > RAW_BW ||
	    (h->flags & ~(RAW_F_WRITE_POLL | RAW_F_SLEEP)) ||
	    !h->size || !h->window || !h->imm_every || h->warmup > h->total ||
	    !h->bufs || h->bufs > 4096 || (uint64_t)h->size * h->bufs > (1ull << 34)) {
		fprintf(stderr, "be-perf %s: peer is not a be-perf raw client of this version\n",
			o->cmd);
		return -EPROTO;
	}
	return 0;
}

static int raw_wait_disconnect(struct raw_ctx *c, int timeout_ms);

/* The server role: listen, serve one client, exit. */
static int raw_server(const struct raw_opts *o, int ready_fd)
{
	struct raw_ctx c;
	struct raw_hello h, mine;
	struct be_xconn_attr attr;
	struct be_xevent ev;
	char bound[BE_XPORT_ADDR_MAX + 1];
	uint32_t nrecv;
	int rc;

	rc = raw_open(&c, o);
	if (rc)
		goto out;
	rc = c.ops->listen(c.ch, o->addr, 4, &c.l);
	if (rc) {
		fprintf(stderr, "be-perf %s: listen on %s: %s\n", o->cmd, o->addr, strerror(-rc));
		goto out;
	}
	if (c.ops->listener_addr(c.l, bound, sizeof(bound)) < 0)
		snprintf(bound, sizeof(bound), "%s", o->addr);
	if (ready_fd >= 0) {
		rc = perf_peer_ready(ready_fd, bound);
		ready_fd = -1;
		if (rc)
			goto out;
	} else {
		printf("be-perf %s: listening on %s\n", o->cmd, bound);
		fflush(stdout);
	}

	/* A self-spawned peer gives up on its parent; a --server waits. */
	rc = raw_wait_event(&c, BE_XEV_CONNECT_REQUEST, &ev, o->server ? -1 : o->timeout_ms);
	if (rc)
		goto out;
	c.conn = ev.conn;
	rc = raw_hello_check(o, ev.priv, ev.priv_len, &h);
	if (rc) {
		c.ops->reject(c.conn, NULL, 0);
		c.conn = NULL; /* the transport destroys a rejected conn */
		goto out;
	}
	nrecv = h.mode == RAW_BW ? (h.window * 4 > 64 ? h.window * 4 : 64) : 64;
	rc = raw_queues(&c, h.size, h.bufs, nrecv, h.window);
	if (rc) {
		c.ops->reject(c.conn, NULL, 0);
		c.conn = NULL;
		goto out;
	}
	c.peer_addr = h.addr;
	c.peer_rkey = h.rkey;
	c.peer_nrecv = h.nrecv;
	c.sleep = !!(h.flags & RAW_F_SLEEP);
	{
		struct raw_opts so = *o;

		so.mode = h.mode;
		so.size = h.size;
		so.iters = h.total - h.warmup;
		so.warmup = h.warmup;
		so.window = h.window;
		so.imm_every = h.imm_every;
		so.bufs = h.bufs;
		raw_hello_fill(&c, &so, &mine);
	}
	raw_conn_attr(&c, &attr);
	rc = c.ops->accept(c.conn, &attr, &mine, sizeof(mine));
	if (rc) {
		fprintf(stderr, "be-perf %s: accept: %s\n", o->cmd, strerror(-rc));
		goto out;
	}
	rc = raw_wait_event(&c, BE_XEV_ESTABLISHED, &ev, o->timeout_ms);
	if (rc)
		goto out;

	rc = h.mode == RAW_LAT ? raw_lat_server(&c, &h) : raw_bw_server(&c, &h);
	if (rc)
		goto out;
	/* The client hangs up once it has everything it needs. */
	rc = raw_wait_disconnect(&c, o->timeout_ms);
out:
	if (ready_fd >= 0)
		close(ready_fd);
	raw_close(&c);
	return rc;
}

static int raw_server_fn(void *arg, int ready_fd)
{
	return raw_server(arg, ready_fd);
}

static int raw_connect(struct raw_ctx *c, const struct raw_opts *o, const char *addr,
		       struct raw_hello *h)
{
	struct be_xconn_attr attr;
	struct be_xevent ev;
	struct raw_hello peer;
	int rc;

	raw_hello_fill(c, o, h);
	raw_conn_attr(c, &attr);
	rc = c->ops->connect(c->ch, addr, &attr, h, sizeof(*h), &c->conn);
	if (rc) {
		fprintf(stderr, "be-perf %s: connect to %s: %s\n", o->cmd, addr, strerror(-rc));
		return rc;
	}
	rc = raw_wait_event(c, BE_XEV_ESTABLISHED, &ev, o->timeout_ms);
	if (rc)
		return rc;
	rc = raw_hello_check(o, ev.priv, ev.priv_len, &peer);
	if (rc)
		return rc;
	c->peer_addr = peer.addr;
	c->peer_rkey = peer.rkey;
	c->peer_nrecv = peer.nrecv;
	return 0;
}

/*
 * raw_wait_disconnect() - wait up to @timeout_ms for DISCONNECTED. The CQ
 * is drained meanwhile (a transport may notice the hang-up while polling;
 * flushed WRs complete with errors, which are expected now).
 */
static int raw_wait_disconnect(struct raw_ctx *c, int timeout_ms)
{
	uint64_t deadline = perf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct be_xwc wc[RAW_POLL_BATCH];
	struct be_xevent ev;

	while (!c->disconnected) {
		int rc = c->ops->evch_get(c->ch, &ev);

		if (rc < 0)
			return rc;
		if (rc == 1) {
			if (ev.type == BE_XEV_DISCONNECTED)
				c->disconnected = 1;
			continue;
		}
		(void)c->ops->cq_poll(c->cq, wc, RAW_POLL_BATCH);
		if (perf_now_ns() >= deadline) {
			fprintf(stderr, "be-perf %s: no DISCONNECTED within %d ms\n", c->o->cmd,
				timeout_ms);
			return -ETIMEDOUT;
		}
		usleep(100);
	}
	return 0;
}

/* Orderly hang-up: the server waits for it before it exits. */
static void raw_hangup(struct raw_ctx *c)
{
	if (!c->conn || c->disconnected)
		return;
	if (c->ops->disconnect(c->conn) == 0)
		(void)raw_wait_disconnect(c, 2000);
}

/* ---- report --------------------------------------------------------- */

static void raw_cpu_str(const struct raw_opts *o, char *buf, size_t len)
{
	if (o->cpu[0] < 0)
		snprintf(buf, len, "none");
	else if (o->cpu[1] < 0)
		snprintf(buf, len, "%d", o->cpu[0]);
	else
		snprintf(buf, len, "%d,%d", o->cpu[0], o->cpu[1]);
}

static void raw_report_lat(const struct raw_opts *o, const struct perf_summary *s)
{
	char cpu[32];
	double mb_s = s->avg > 0 ? (double)o->size / s->avg : 0;

	raw_cpu_str(o, cpu, sizeof(cpu));
	if (o->json) {
		printf("{\"test\":\"raw-lat\",\"transport\":\"%s\",\"op\":\"%s\",\"poll\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%zu,\"warmup\":%" PRIu64 ",\"cpu\":\"%s\""
		       ",\"p50_us\":%.4f,\"p99_us\":%.4f,\"avg_us\":%.4f,\"min_us\":%.4f"
		       ",\"p25_us\":%.4f,\"p75_us\":%.4f,\"max_us\":%.4f,\"mb_s\":%.2f}\n",
		       o->transport, o->write_poll ? "write_poll" : "write_imm",
		       o->sleep ? "sleep" : "busy", o->size, s->n,
		       o->warmup, cpu, s->p50, s->p99, s->avg,
		       s->min, s->p25, s->p75, s->max, mb_s);
		return;
	}
	printf("raw-lat: %s %s ping-pong, %" PRIu64 " B, %zu iterations, cpu %s\n",
	       o->transport, o->write_poll ? "WRITE + memory poll" : "WRITE_WITH_IMM", o->size,
	       s->n, cpu);
	printf("one-way latency (RTT/2), us:\n");
	printf("%9s %9s %9s %9s %9s %9s %9s %10s\n", "min", "p25", "p50", "p75", "p99", "max",
	       "avg", "MB/s");
	printf("%9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.1f\n", s->min, s->p25, s->p50,
	       s->p75, s->p99, s->max, s->avg, mb_s);
}

static void raw_report_bw(const struct raw_opts *o, const struct raw_bw_result *r,
			  const struct perf_summary *s)
{
	double bytes = (double)o->size * (double)o->iters;
	double mb_s = r->seconds > 0 ? bytes / r->seconds / 1e6 : 0;
	double cpu_gb = bytes > 0 ? r->cpu_seconds / (bytes / 1e9) : 0;
	char cpu[32];

	raw_cpu_str(o, cpu, sizeof(cpu));
	if (o->json) {
		printf("{\"test\":\"raw-bw\",\"transport\":\"%s\",\"op\":\"write\",\"poll\":\"%s\",\"size\":%" PRIu64
		       ",\"iters\":%" PRIu64 ",\"warmup\":%" PRIu64 ",\"window\":%u,\"imm_every\":%u"
		       ",\"bufs\":%u,\"cpu\":\"%s\""
		       ",\"mb_s\":%.2f,\"seconds\":%.6f,\"cpu_s_per_gb\":%.4f"
		       ",\"p50_us\":%.3f,\"p99_us\":%.3f,\"avg_us\":%.3f}\n",
		       o->transport, o->sleep ? "sleep" : "busy", o->size, o->iters, o->warmup,
		       o->window, o->imm_every, o->bufs, cpu, mb_s,
		       r->seconds, cpu_gb, s->p50, s->p99, s->avg);
		return;
	}
	printf("raw-bw: %s WRITE stream, %" PRIu64 " B x %" PRIu64
	       ", window %u, WRITE_WITH_IMM every %u, cpu %s\n", o->transport, o->size, o->iters,
	       o->window, o->imm_every, cpu);
	printf("%12s %10s %14s %14s %14s\n", "MB/s", "seconds", "cpu s/GB(tx)",
	       "write p50 us", "write p99 us");
	printf("%12.1f %10.4f %14.4f %14.2f %14.2f\n", mb_s, r->seconds, cpu_gb, s->p50, s->p99);
}

/* The client role against @addr; prints the report on success. */
static int raw_client(const struct raw_opts *o, const char *addr)
{
	struct raw_ctx c;
	struct raw_hello h;
	struct raw_bw_result bw = { 0, 0 };
	struct perf_summary s;
	double *samples = NULL;
	uint32_t nrecv = 64;
	int rc;

	rc = raw_open(&c, o);
	if (rc)
		goto out;
	rc = raw_queues(&c, o->size, o->bufs, nrecv, o->window);
	if (rc)
		goto out;
	samples = calloc(o->iters, sizeof(*samples));
	if (!samples) {
		rc = -ENOMEM;
		goto out;
	}
	if (o->mode == RAW_BW)
		c.wr_lat = samples; /* write post-to-completion latencies */
	c.sleep = o->sleep;
	rc = raw_connect(&c, o, addr, &h);
	if (rc)
		goto out;
	if (o->mode == RAW_LAT)
		rc = raw_lat_client(&c, &h, samples);
	else
		rc = raw_bw_client(&c, &h, &bw);
	if (rc)
		goto out;
	raw_hangup(&c);
	if (o->mode == RAW_LAT) {
		perf_summarize(samples, o->iters, &s);
		raw_report_lat(o, &s);
	} else {
		perf_summarize(samples, c.wr_lat_n, &s);
		raw_report_bw(o, &bw, &s);
	}
out:
	if (c.wr_lat == samples)
		c.wr_lat = NULL;
	free(samples);
	raw_close(&c);
	return rc;
}

/* Where a self-spawned server listens. */
static int raw_local_addr(const struct raw_opts *o, char *buf, size_t len)
{
	if (!strcmp(o->transport, "tcp")) {
		snprintf(buf, len, "127.0.0.1:0");
	} else if (!strcmp(o->transport, "shm")) {
		snprintf(buf, len, "be-perf-%d", (int)getpid());
	} else if (!strcmp(o->transport, "verbs")) {
		const char *ip = getenv("BE_RXE_IP0");

		if (!ip || !*ip) {
			fprintf(stderr, "be-perf %s: verbs needs --addr or BE_RXE_IP0 (the "
				"Soft-RoCE address inside the guest)\n", o->cmd);
			return -EINVAL;
		}
		snprintf(buf, len, "%s:0", ip);
	} else {
		fprintf(stderr, "be-perf %s: no default address for transport '%s'; use --addr\n",
			o->cmd, o->transport);
		return -EINVAL;
	}
	return 0;
}

static int raw_main(int argc, char **argv)
{
	struct raw_opts o, so;
	struct perf_peer peer;
	char listen_addr[BE_XPORT_ADDR_MAX + 1], addr[BE_XPORT_ADDR_MAX + 1];
	int rc, prc;

	if (raw_parse(argc, argv, &o))
		return 2;
	if (!be__xport_find(o.transport)) {
		fprintf(stderr, "be-perf %s: transport '%s' is not built in\n", o.cmd, o.transport);
		return 2;
	}
	if (o.server) {
		if (o.cpu[0] >= 0 && (rc = perf_pin_cpu(o.cpu[0]))) {
			fprintf(stderr, "be-perf %s: pin to cpu %d: %s\n", o.cmd, o.cpu[0],
				strerror(-rc));
			return 1;
		}
		return raw_server(&o, -1) ? 1 : 0;
	}
	if (o.addr)
		return raw_client(&o, o.addr) ? 1 : 0;

	/* No address: start the server ourselves, before touching the
	 * library, and measure against it. */
	if (raw_local_addr(&o, listen_addr, sizeof(listen_addr)))
		return 2;
	so = o;
	so.addr = listen_addr;
	rc = perf_peer_spawn(&peer, o.cpu[1], raw_server_fn, &so);
	if (rc) {
		fprintf(stderr, "be-perf %s: starting the peer: %s\n", o.cmd, strerror(-rc));
		return 1;
	}
	rc = perf_peer_addr(&peer, addr, sizeof(addr), o.timeout_ms);
	if (rc) {
		fprintf(stderr, "be-perf %s: the peer did not start listening: %s\n", o.cmd,
			strerror(-rc));
		perf_peer_kill(&peer);
		return 1;
	}
	if (o.cpu[0] >= 0 && (rc = perf_pin_cpu(o.cpu[0]))) {
		fprintf(stderr, "be-perf %s: pin to cpu %d: %s\n", o.cmd, o.cpu[0], strerror(-rc));
		perf_peer_kill(&peer);
		return 1;
	}
	rc = raw_client(&o, addr);
	if (rc) {
		perf_peer_kill(&peer);
		return 1;
	}
	prc = perf_peer_wait(&peer, o.timeout_ms);
	if (prc) {
		fprintf(stderr, "be-perf %s: the peer failed (%s)\n", o.cmd,
			prc == -ETIMEDOUT ? "did not exit, killed" :
			prc < 0 ? "killed by a signal" : "non-zero exit");
		return 1;
	}
	return 0;
}

PERF_COMMAND(raw_lat, "raw-lat", "transport WRITE_WITH_IMM ping-pong latency (--transport)",
	     raw_main)
PERF_COMMAND(raw_bw, "raw-bw", "transport 1 MiB windowed WRITE bandwidth (--transport)",
	     raw_main)
