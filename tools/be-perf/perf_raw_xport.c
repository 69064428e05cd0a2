/*
 * perf_raw_xport.c - the transport side of be-perf raw-lat and raw-bw:
 * one end's device, event channel, CQ, SRQ and buffers, its events, the
 * polling loop every wait goes through, the writes, the hang-up, and the
 * address a self-spawned server listens on. Everything goes through the
 * xport ops table, nothing through the BE core.
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

#include "perf_raw.h"
#include "util/common.h"

int raw_open(struct raw_ctx *c, const struct raw_opts *o)
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
int raw_queues(struct raw_ctx *c, uint64_t size, uint32_t bufs, uint32_t nrecv, uint32_t window)
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

void raw_conn_attr(struct raw_ctx *c, struct be_xconn_attr *a)
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

void raw_close(struct raw_ctx *c)
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
int raw_wait_event(struct raw_ctx *c, enum be_xev_type want, struct be_xevent *ev,
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

/*
 * raw_poll() - one CQ poll: retire send completions, take RECV_IMMs off
 * (their receives go on the repost list). Returns the completions seen or
 * -errno.
 */
int raw_poll(struct raw_ctx *c)
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
			/* The one SEND of a test: the peer's key (raw_keys()). */
			if (c->peer_key_known || w->byte_len != sizeof(c->peer_rkey)) {
				fprintf(stderr, "be-perf %s: unexpected SEND from the peer\n",
					c->o->cmd);
				return -EPROTO;
			}
			memcpy(&c->peer_rkey, c->recvbuf + (size_t)w->wr_id * RAW_RECV_BUF,
			       sizeof(c->peer_rkey));
			c->peer_key_known = 1;
			c->repost[c->nrepost++] = (uint32_t)w->wr_id;
			break;
		case BE_XWC_REVOKE: /* never revokes: the grant lives as long as the conn */
			break;
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
int raw_progress(struct raw_ctx *c, int (*done)(struct raw_ctx *c, void *arg), void *arg)
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

int raw_done_rx(struct raw_ctx *c, void *arg)
{
	return c->rx >= *(const uint64_t *)arg;
}

int raw_done_sq(struct raw_ctx *c, void *arg)
{
	return c->posted - c->completed < *(const uint64_t *)arg;
}

static int raw_done_key(struct raw_ctx *c, void *arg)
{
	(void)arg;
	return c->peer_key_known;
}

/*
 * raw_keys() - on an established conn: grant the peer rbuf (on a
 * transport with grants, xport.h; else its block's rkey serves) and
 * trade keys, each side's in one inline SEND, before anything else is
 * posted. Returns 0 or -errno.
 */
int raw_keys(struct raw_ctx *c)
{
	struct be_xsge sge = { .addr = (uint64_t)(uintptr_t)&c->rkey, .length = sizeof(c->rkey) };
	struct be_xsend_wr wr = {
		.wr_id = UINT64_MAX, .opcode = BE_XWR_SEND, .flags = BE_XWR_F_INLINE,
		.sg_list = &sge, .num_sge = 1,
	}, *bad;
	int rc;

	if (c->ops->grant && (rc = c->ops->grant(c->conn, c->rbuf, c->buf_len, &c->rkey))) {
		fprintf(stderr, "be-perf %s: grant: %s\n", c->o->cmd, strerror(-rc));
		return rc;
	}
	rc = c->ops->post_send(c->conn, &wr, &bad);
	if (rc) {
		fprintf(stderr, "be-perf %s: post_send: %s\n", c->o->cmd, strerror(-rc));
		return rc;
	}
	rc = raw_progress(c, raw_done_key, NULL);
	return rc ? rc : raw_repost(c);
}

/*
 * raw_write() - post one WRITE (or WRITE_WITH_IMM if @with_imm) of @len
 * bytes from sbuf into the peer's buffer. Waits for send queue room first.
 * Small writes go inline. Returns 0 or -errno.
 */
int raw_write(struct raw_ctx *c, uint32_t len, int with_imm, uint32_t imm, int signaled)
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

/* ---- hang-up, addresses ---------------------------------------------- */

/*
 * raw_wait_disconnect() - wait up to @timeout_ms for DISCONNECTED. The CQ
 * is drained meanwhile (a transport may notice the hang-up while polling;
 * flushed WRs complete with errors, which are expected now).
 */
int raw_wait_disconnect(struct raw_ctx *c, int timeout_ms)
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
void raw_hangup(struct raw_ctx *c)
{
	if (!c->conn || c->disconnected)
		return;
	if (c->ops->disconnect(c->conn) == 0)
		(void)raw_wait_disconnect(c, 2000);
}

/* Where a self-spawned server listens. */
int raw_local_addr(const struct raw_opts *o, char *buf, size_t len)
{
	if (!strcmp(o->transport, "tcp")) {
		snprintf(buf, len, "127.0.0.1:0");
	} else if (!strcmp(o->transport, "shm")) {
		snprintf(buf, len, "be-perf-%d", (int)getpid());
	} else if (!strcmp(o->transport, "verbs")) {
		const char *ip = getenv("BE_RXE_IP0");

		if (!ip || !*ip) {
			perf_no_rxe_ip(o->cmd);
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
