/*
 * data.c - the data path of the tcp transport: posting WRs, writing
 * frames, reading and placing frames, acks and errors.
 *
 * Model. A conn's send queue is a ring of WR slots. A slot is posted,
 * then written (its frame is entirely in the kernel), then acked (the
 * peer has placed the payload) and only then completed: a WRITE
 * completion means the data is at the remote, as on an RC QP. The ring
 * depth is the conn's max_send_wr, so the acks bound what one conn has in
 * flight.
 *
 * Sending: everything that is posted and not yet written goes out in one
 * sendmsg() (header and scatter list of each frame as iovecs, up to
 * TX_IOV_MAX), straight from the caller's registered buffers (or from
 * the slot's inline copy). A short write leaves the rest for EPOLLOUT.
 *
 * Receiving: bytes go into a small staging buffer (rbuf) while a header
 * is expected; once a header is validated, the payload goes straight to
 * its destination (the SRQ buffer for SEND, [addr, +len) for WRITE):
 * what already sits in rbuf is copied (at most TCP_RBUF_SIZE bytes), the
 * rest is read with readv() into the destination, with TCP_RX_TAIL bytes
 * of rbuf as the second iovec for whatever follows. Large payloads thus
 * see no user-space copy (a large frame right behind another is staged
 * for at most TCP_RX_TAIL bytes, not a whole rbuf), and small frames need
 * no syscall each. After a payload read into place, the next header is
 * read with at most RX_HEAD bytes (a PS pull's reply, after a wakeup,
 * is two frame headers and a 32-byte message ahead of its 64 KiB: a
 * whole rbuf would stage and copy 32 KiB of it, TCP_RX_TAIL 4 KiB);
 * a read that fills that goes back to whole rbufs.
 *
 * Latency of receives: once a frame completed a receive (SEND,
 * WRITE_IMM), conn_rx() places what rbuf already holds but issues no
 * further read: cq_poll returns the completion now instead of after the
 * rest of the byte budget. A small message that arrives behind a long
 * stream of WRITEs is then handed over as soon as it is placed, not
 * after up to TCP_RX_BUDGET more bytes of the stream (level-triggered
 * epoll brings the conn back for the rest on the next poll). The one
 * exception is the rest of a frame already begun, when at most
 * RX_FINISH bytes: one readv() places it, and the completion waits for
 * that copy only. A PS pull's reply is such a pair: the engine's
 * one-way announcement (a SEND) and the 64 KiB behind it, of which the
 * first read brought the header; the message is whole only with both,
 * and reading them in one poll saves the caller a return from its wait
 * and another progress.
 *
 * Acks: every frame header carries the receiver's count of data frames
 * placed so far (cumulative). When nothing is going the other way, the
 * ACK frame is deferred by one step: the conn goes on its cq's ack queue,
 * flushed at the start of the next cq_poll progress, by a cq_poll that
 * returns nothing, or at cq_arm (so a worker that sleeps never stalls a
 * sender). A
 * request/response peer thus answers in between and the ack rides on its
 * response; a one-way stream gets one ACK per batch of reads. A conn in
 * the middle of a frame's payload stays queued: the peer sends the rest
 * without our ack (only the socket limits it), and its arrival wakes us,
 * so the ack can wait for the end of the frame (a reply's WRITE_ONEWAY
 * frame and its data then cost one ACK, or none when the next request
 * carries it). A conn stalled for an RX_ALLOC buffer is not in a
 * payload: it acks, so the sender can complete and free memory.
 *
 * Errors: a frame that fails validation (bad rkey or range, SEND too
 * large, no receive posted, malformed) is answered with a NAK carrying
 * the reason, then the conn goes to error: it stops sending, shuts its
 * socket for writing and reads (discards) until the peer closes. The
 * sender completes the NAKed WR with the matching status and flushes the
 * rest.
 *
 * Threads: the worker that owns the conn's cqs and evch, only.
 */
#include <errno.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/tcp/tcp.h"

#define TX_IOV_MAX 128
/* The first read after a payload read into place: the headers of a few
 * frames, and little of a payload behind them (it is read into place).
 * A read that fills it falls back to whole rbufs, which stage up to 32
 * KiB of a payload behind small frames: room for a burst of those. */
#define RX_HEAD 1024u
_Static_assert(RX_HEAD >= TCP_HDR_LEN && RX_HEAD <= TCP_RBUF_SIZE, "rx head fits rbuf");
/* The most of a begun frame read behind a completed receive ("Latency
 * of receives"). */
#define RX_FINISH TCP_MTU

void be__tcp_hdr_pack(uint8_t *out, const struct tcp_hdr *h)
{
	struct tcp_hdr le;

	le.magic = htole32(h->magic);
	le.type = h->type;
	le.status = h->status;
	le.rsvd = htole16(h->rsvd);
	le.len = htole32(h->len);
	le.rkey = htole32(h->rkey);
	le.addr = htole64(h->addr);
	le.imm = htole32(h->imm);
	le.ack = htole32(h->ack);
	memcpy(out, &le, sizeof(le));
}

void be__tcp_hdr_unpack(struct tcp_hdr *h, const uint8_t *in)
{
	memcpy(h, in, sizeof(*h));
	h->magic = le32toh(h->magic);
	h->rsvd = le16toh(h->rsvd);
	h->len = le32toh(h->len);
	h->rkey = le32toh(h->rkey);
	h->addr = le64toh(h->addr);
	h->imm = le32toh(h->imm);
	h->ack = le32toh(h->ack);
}

static struct tcp_wr *sq_slot(struct tcp_conn *c, uint32_t i)
{
	return &c->sq[(c->sq_head + i) % c->sq_cap];
}

static enum be_xwc_opcode wr_wc_opcode(uint8_t op)
{
	switch (op) {
	case BE_XWR_WRITE: return BE_XWC_WRITE;
	case BE_XWR_WRITE_IMM: return BE_XWC_WRITE_IMM;
	default: return BE_XWC_SEND;
	}
}

int be__tcp_conn_alloc_sq(struct tcp_conn *c, uint32_t depth, uint32_t max_inline)
{
	if (depth == 0)
		depth = 128;
	if (depth > TCP_MAX_QP_WR)
		return -EINVAL;
	c->sq = calloc(depth, sizeof(*c->sq));
	if (!c->sq)
		return -ENOMEM;
	c->sq_cap = depth;
	c->sq_head = c->sq_cnt = c->tx_written = 0;
	c->tx_off = 0;
	c->max_inline = BE_MIN(max_inline, TCP_MAX_INLINE);
	return 0;
}

void be__tcp_conn_free_sq(struct tcp_conn *c)
{
	uint32_t i;

	if (!c->sq)
		return;
	for (i = 0; i < c->sq_cap; i++)
		free(c->sq[i].inl);
	free(c->sq);
	c->sq = NULL;
	c->sq_cap = c->sq_cnt = 0;
}

/* The first unwritten slot has something we can write. */
int be__tcp_conn_tx_pending(const struct tcp_conn *c)
{
	if (c->fd < 0 || c->state != TCP_C_ESTABLISHED)
		return 0;
	if (c->ctl_len)
		return 1;
	if (c->tx_written < c->sq_cnt)
		return !c->sq[(c->sq_head + c->tx_written) % c->sq_cap].local_err;
	return 0;
}

static void conn_push_send_wc(struct tcp_conn *c, const struct tcp_wr *s,
			      enum be_xwc_status st)
{
	struct be_xwc wc;

	if (!c->scq)
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = s->wr_id;
	wc.status = st;
	wc.opcode = wr_wc_opcode(s->opcode);
	wc.byte_len = s->len;
	wc.conn = &c->x;
	be__tcp_cq_push(c->scq, &wc);
}

static void conn_push_recv_wc(struct tcp_conn *c, const struct be_xrecv_wr *r,
			      enum be_xwc_opcode op, enum be_xwc_status st,
			      uint32_t byte_len, uint32_t imm, void *rx_buf)
{
	struct be_xwc wc;

	if (!c->rcq) {
		if (rx_buf && c->rx_free)
			c->rx_free(&c->x, rx_buf);
		return;
	}
	memset(&wc, 0, sizeof(wc));
	wc.rx_buf = rx_buf;
	wc.wr_id = r->wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = byte_len;
	wc.imm = imm;
	wc.conn = &c->x;
	wc.srq = c->srq ? &c->srq->x : NULL;
	be__tcp_cq_push(c->rcq, &wc);
}

void be__tcp_conn_fail(struct tcp_conn *c, enum be_xwc_status first, int ev_status,
		       int graceful)
{
	struct be_xevent ev;
	uint32_t i;

	if (c->state != TCP_C_ESTABLISHED) {
		if (!graceful && c->fd >= 0)
			be__tcp_conn_close_fd(c);
		return;
	}
	c->state = TCP_C_ERROR;
	/* Every outstanding WR completes, signaled or not, in order. */
	for (i = 0; i < c->sq_cnt; i++)
		conn_push_send_wc(c, sq_slot(c, i), i == 0 ? first : BE_XWC_WR_FLUSH_ERR);
	c->sq_head = c->sq_cnt = c->tx_written = 0;
	c->tx_off = 0;
	c->ctl_len = c->ctl_off = 0;
	if (c->rx_has_recv) {
		conn_push_recv_wc(c, &c->rx_recv,
				  c->rx.type == TCP_F_SEND ? BE_XWC_RECV : BE_XWC_RECV_IMM,
				  BE_XWC_WR_FLUSH_ERR, 0, 0, NULL);
		c->rx_has_recv = 0;
	}
	be__tcp_conn_free_aslots(c);
	c->rx_stalled = 0;
	c->rx_left = 0;
	c->rpos = c->rend = 0;
	if (graceful && c->fd >= 0) {
		shutdown(c->fd, SHUT_WR);
		be__tcp_conn_epoll_update(c);
	} else if (c->fd >= 0) {
		be__tcp_conn_close_fd(c);
	}
	memset(&ev, 0, sizeof(ev));
	ev.type = BE_XEV_DISCONNECTED;
	ev.status = ev_status;
	ev.conn = &c->x;
	be__tcp_evch_push(c->ch, &ev);
}

/* Send a control frame now, only at a frame boundary; best effort (the
 * conn is about to fail, and a full socket just means the peer sees the
 * hang-up instead). */
void be__tcp_conn_send_ctl_now(struct tcp_conn *c, uint8_t type, uint8_t status)
{
	struct tcp_hdr h = { .magic = TCP_MAGIC, .type = type, .status = status };
	uint8_t buf[TCP_HDR_LEN];
	ssize_t n;

	if (c->fd < 0 || c->ctl_len || c->tx_off)
		return;
	h.ack = c->rx_count;
	be__tcp_hdr_pack(buf, &h);
	do
		n = send(c->fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
}

/* The peer sent something we must refuse: NAK it, then fail. */
static int conn_reject_frame(struct tcp_conn *c, uint8_t nak, const char *why)
{
	be_log_err("tcp: conn %s: %s (frame %u type %u len %u rkey 0x%x addr 0x%llx); closing",
		   c->peer, why, c->rx_count + 1, c->rx.type, c->rx.len, c->rx.rkey,
		   (unsigned long long)c->rx.addr);
	be__tcp_conn_send_ctl_now(c, TCP_F_NAK, nak);
	be__tcp_conn_fail(c, BE_XWC_WR_FLUSH_ERR, -EPROTO, 1);
	return -1;
}

/* The peer says it placed everything up to @ack: complete those WRs. */
static int conn_ack(struct tcp_conn *c, uint32_t ack)
{
	uint32_t n = ack - c->seq_acked;

	if (n == 0)
		return 0;
	if (n > c->tx_written)
		return -EPROTO; /* acks a frame we never finished writing */
	while (n--) {
		struct tcp_wr *s = sq_slot(c, 0);

		if (s->signaled)
			conn_push_send_wc(c, s, BE_XWC_SUCCESS);
		c->sq_head = (c->sq_head + 1) % c->sq_cap;
		c->sq_cnt--;
		c->tx_written--;
	}
	c->seq_acked = ack;
	return 0;
}

static void conn_nak(struct tcp_conn *c, uint8_t status)
{
	enum be_xwc_status st;
	int ev;

	switch (status) {
	case TCP_NAK_ACCESS: st = BE_XWC_REM_ACCESS_ERR; ev = -EACCES; break;
	case TCP_NAK_LEN: st = BE_XWC_REM_OP_ERR; ev = -EMSGSIZE; break;
	case TCP_NAK_RNR: st = BE_XWC_RNR_RETRY_EXC; ev = -ENOBUFS; break;
	default: st = BE_XWC_REM_OP_ERR; ev = -EPROTO; break;
	}
	be_log_err("tcp: conn %s: peer refused frame %u: %s", c->peer, c->seq_acked + 1,
		   be__xwc_status_str(st));
	be__tcp_conn_fail(c, st, ev, 0);
}

/* Take the next posted receive from the conn's SRQ; 0 if there is none. */
static int conn_take_recv(struct tcp_conn *c)
{
	struct tcp_srq *srq = c->srq;
	struct be_xrecv_wr *r = srq ? be__xrq_take(&srq->rq) : NULL;

	if (!r)
		return 0;
	c->rx_recv = *r;
	c->rx_has_recv = 1;
	if (be__xrq_limit_hit(&srq->rq)) {
		struct be_xevent ev;

		memset(&ev, 0, sizeof(ev));
		ev.type = BE_XEV_SRQ_LIMIT;
		ev.srq = &srq->x;
		be__tcp_evch_push(c->ch, &ev);
	}
	return 1;
}

/*
 * Checks of a frame that need no conn state (tcp.h). The conn calls them
 * in this order: be__tcp_hdr_check(), then the frame's ack (conn_ack:
 * state), then be__tcp_frame_check(), then per type what needs state.
 */
const char *be__tcp_hdr_check(const struct tcp_hdr *h)
{
	if (h->magic != TCP_MAGIC || h->rsvd)
		return "bad frame header";
	return NULL;
}

const char *be__tcp_frame_check(const struct tcp_hdr *h)
{
	switch (h->type) {
	case TCP_F_ACK:
		return h->len || h->status ? "malformed ack" : NULL;
	case TCP_F_NAK:
		return h->len ? "malformed nak" : NULL;
	case TCP_F_BYE:
		return h->len || h->status ? "malformed bye" : NULL;
	case TCP_F_SEND:
	case TCP_F_WRITE:
	case TCP_F_WRITE_IMM:
	case TCP_F_AWRITE:
	case TCP_F_AWRITE_IMM:
		return h->status || h->len > TCP_MAX_MSG ? "malformed data frame" : NULL;
	default:
		return "unknown frame type";
	}
}

/*
 * An RX_ALLOC write (xport.h, BE_XWR_F_RX_ALLOC): its slot must be free
 * at offset 0 (then the buffer is allocated: rx_alloc) and open
 * elsewhere, each frame starting where the last ended and the AWRITE_IMM
 * ending the buffer. Only the opening frame can pass with a bad length:
 * the buffer it asks for is the bound the frames after it are held to.
 */
const char *be__tcp_aslot_check(const struct tcp_hdr *h, const struct be__xaslot *slots,
				uint64_t *open)
{
	int imm = h->type == TCP_F_AWRITE_IMM;

	return be__xaslot_check(slots, h->rkey, h->addr, h->len, imm ? h->len : h->imm,
				imm ? BE_XASLOT_LAST : BE_XASLOT_MORE, open);
}

/*
 * Set up the destination of the RX_ALLOC write in c->rx (checked by
 * be__tcp_aslot_check()). Returns 1 (payload follows), 2 (no memory:
 * the conn stalls with the header left in rbuf) or -1 (refused, conn
 * failed).
 */
static int conn_rx_begin_alloc(struct tcp_conn *c)
{
	struct tcp_hdr *h = &c->rx;
	struct be__xaslot *a;
	const char *why;
	uint64_t open;

	if (!c->rx_alloc)
		return conn_reject_frame(c, TCP_NAK_ACCESS, "RX_ALLOC write to no slot");
	why = be__tcp_aslot_check(h, c->aslots, &open);
	if (why)
		return conn_reject_frame(c, TCP_NAK_ACCESS, why);
	if (!c->aslots) {
		c->aslots = calloc(TCP_MAX_RX_ALLOC, sizeof(*c->aslots));
		if (!c->aslots)
			return conn_reject_frame(c, TCP_NAK_PROTO, "no memory for RX_ALLOC slots");
	}
	a = &c->aslots[h->rkey];
	if (open) {
		void *buf = NULL;
		int rc = c->rx_alloc(&c->x, open, &buf);

		if (rc == -EAGAIN)
			return 2;
		if (rc || !buf)
			return conn_reject_frame(c, TCP_NAK_LEN, "RX_ALLOC buffer refused");
		a->buf = buf;
		a->len = (uint32_t)open;
		a->got = 0;
	}
	if (h->type == TCP_F_AWRITE_IMM && !conn_take_recv(c))
		return conn_reject_frame(c, TCP_NAK_RNR, "WRITE_IMM with no receive posted");
	c->rx_slot = a;
	c->rx_dst = a->buf + a->got;
	c->rx_left = h->len;
	return 1;
}

/*
 * Validate the header in c->rx and set up the payload's destination.
 * Returns 1 for a data frame (payload follows, maybe 0 bytes), 0 for a
 * control frame (done), -1 if the conn failed.
 */
static int conn_rx_begin(struct tcp_conn *c)
{
	struct tcp_hdr *h = &c->rx;
	const char *why = be__tcp_hdr_check(h);

	if (why)
		return conn_reject_frame(c, TCP_NAK_PROTO, why);
	if (conn_ack(c, h->ack) < 0)
		return conn_reject_frame(c, TCP_NAK_PROTO, "ack of a frame never sent");
	why = be__tcp_frame_check(h);
	if (why)
		return conn_reject_frame(c, TCP_NAK_PROTO, why);
	switch (h->type) {
	case TCP_F_ACK:
		return 0;
	case TCP_F_NAK:
		conn_nak(c, h->status);
		return -1;
	case TCP_F_BYE:
		be_log_info("tcp: conn %s: peer disconnected", c->peer);
		be__tcp_conn_fail(c, BE_XWC_WR_FLUSH_ERR, 0, 0);
		return -1;
	case TCP_F_AWRITE:
	case TCP_F_AWRITE_IMM:
		return conn_rx_begin_alloc(c);
	default:
		break;
	}
	if (h->type == TCP_F_SEND) {
		if (!conn_take_recv(c))
			return conn_reject_frame(c, TCP_NAK_RNR, "SEND with no receive posted");
		if (h->len > c->rx_recv.sge.length) {
			conn_push_recv_wc(c, &c->rx_recv, BE_XWC_RECV, BE_XWC_LOC_LEN_ERR, h->len, 0,
					  NULL);
			c->rx_has_recv = 0;
			return conn_reject_frame(c, TCP_NAK_LEN, "SEND larger than the receive buffer");
		}
		c->rx_dst = (uint8_t *)(uintptr_t)c->rx_recv.sge.addr;
	} else {
		/* An empty one touches nothing and is not checked, as on
		 * an RC QP (nor does its acceptance tell a key). */
		if (h->len && !be__xgrants_check(&c->grants, h->rkey, h->addr, h->len))
			return conn_reject_frame(c, TCP_NAK_ACCESS, "WRITE outside a live grant");
		if (h->type == TCP_F_WRITE_IMM && !conn_take_recv(c))
			return conn_reject_frame(c, TCP_NAK_RNR, "WRITE_IMM with no receive posted");
		c->rx_dst = (uint8_t *)(uintptr_t)h->addr;
	}
	c->rx_left = h->len;
	return 1;
}

/* The payload of the data frame in c->rx is in place. Returns 1 if that
 * completed a receive (SEND or WRITE_IMM), else 0. */
static int conn_rx_end(struct tcp_conn *c)
{
	int recv = c->rx.type != TCP_F_WRITE && c->rx.type != TCP_F_AWRITE;

	c->rx_count++;
	if (c->rx.type == TCP_F_SEND) {
		conn_push_recv_wc(c, &c->rx_recv, BE_XWC_RECV, BE_XWC_SUCCESS, c->rx.len, 0, NULL);
	} else if (c->rx.type == TCP_F_WRITE_IMM) {
		conn_push_recv_wc(c, &c->rx_recv, BE_XWC_RECV_IMM, BE_XWC_SUCCESS, c->rx.len,
				  c->rx.imm, NULL);
	} else if (c->rx_slot) {
		struct be__xaslot *a = c->rx_slot;

		a->got += c->rx.len;
		c->rx_slot = NULL;
		if (c->rx.type == TCP_F_AWRITE_IMM) {
			uint8_t *buf = a->buf;

			a->buf = NULL;
			conn_push_recv_wc(c, &c->rx_recv, BE_XWC_RECV_IMM, BE_XWC_SUCCESS, a->len,
					  c->rx.imm, buf);
		}
	}
	c->rx_has_recv = 0;
	return recv;
}

static void conn_hangup(struct tcp_conn *c, ssize_t n)
{
	int err = n == 0 ? -ECONNRESET : -errno;

	be_log_info("tcp: conn %s: peer hung up (%s)", c->peer,
		    n == 0 ? "end of stream" : strerror(-err));
	be__tcp_conn_fail(c, BE_XWC_REM_ABORT_ERR, err, 0);
}

/*
 * Read and place frames until the socket is empty, the budget is spent or
 * a receive completed (then only what rbuf holds is placed: no more reads,
 * see "Latency of receives").
 */
static void conn_rx(struct tcp_conn *c)
{
	size_t got = 0, want;
	int drained = 0, delivered = 0;
	ssize_t n;

	c->rx_idle = 0;
	if (c->rx_stalled)
		return; /* waits for conn_rx_resume */
	while (c->state == TCP_C_ESTABLISHED) {
		uint32_t avail = c->rend - c->rpos;

		if (!c->rx_left) {
			if (avail >= TCP_HDR_LEN) {
				int r;

				be__tcp_hdr_unpack(&c->rx, c->rbuf + c->rpos);
				c->rpos += TCP_HDR_LEN;
				r = conn_rx_begin(c);
				if (r < 0)
					return;
				if (r == 2) {
					/* No memory for an RX_ALLOC buffer: leave the
					 * header where it is and stop reading until
					 * conn_rx_resume; the data waits in the
					 * kernel, whose window stops the sender. */
					c->rpos -= TCP_HDR_LEN;
					c->rx_stalled = 1;
					be__tcp_conn_epoll_update(c);
					return;
				}
				if (r > 0 && !c->rx_left)
					delivered |= conn_rx_end(c);
				continue;
			}
		} else if (avail) {
			uint32_t m = BE_MIN(avail, c->rx_left);

			memcpy(c->rx_dst, c->rbuf + c->rpos, m);
			c->rx_dst += m;
			c->rx_left -= m;
			c->rpos += m;
			if (!c->rx_left)
				delivered |= conn_rx_end(c);
			continue;
		}
		/* A short read emptied the socket: do not pay for an EAGAIN;
		 * level-triggered epoll reports whatever comes next (and the
		 * rest of the stream, when a completed receive stops us). */
		if (got >= TCP_RX_BUDGET || drained ||
		    (delivered && !(c->rx_left && c->rx_left <= RX_FINISH)))
			break;
		if (c->rpos == c->rend) {
			c->rpos = c->rend = 0;
		} else if (c->rpos) {
			memmove(c->rbuf, c->rbuf + c->rpos, avail);
			c->rpos = 0;
			c->rend = avail;
		}
		if (c->rx_left) {
			/* rbuf is empty here: payload first, the start of what
			 * follows after (TCP_RX_TAIL: a large frame behind is
			 * read into place by the next readv, not staged). */
			struct iovec iov[2] = {
				{ c->rx_dst, c->rx_left },
				{ c->rbuf, TCP_RX_TAIL },
			};

			want = (size_t)c->rx_left + TCP_RX_TAIL;
			n = readv(c->fd, iov, 2);
			c->rx_big = 1;
		} else {
			want = (c->rx_big && c->rend < RX_HEAD ? RX_HEAD : TCP_RBUF_SIZE) - c->rend;
			n = recv(c->fd, c->rbuf + c->rend, want, MSG_DONTWAIT);
			/* A full short read: small frames may follow in a row. */
			if (n > 0 && (size_t)n == want)
				c->rx_big = 0;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			drained = 1;
			break;
		}
		if (n <= 0) {
			conn_hangup(c, n);
			return;
		}
		got += (size_t)n;
		drained = (size_t)n < want;
		if (c->rx_left) {
			if ((size_t)n < c->rx_left) {
				c->rx_dst += n;
				c->rx_left -= (uint32_t)n;
			} else {
				c->rend = (uint32_t)((size_t)n - c->rx_left);
				c->rx_left = 0;
				delivered |= conn_rx_end(c);
			}
		} else {
			c->rend += (uint32_t)n;
		}
	}
	c->rx_idle = drained;
}

static void conn_build_hdr(struct tcp_conn *c, struct tcp_wr *s)
{
	struct tcp_hdr h = { .magic = TCP_MAGIC };

	switch (s->opcode) {
	case BE_XWR_WRITE: h.type = s->rx_alloc ? TCP_F_AWRITE : TCP_F_WRITE; break;
	case BE_XWR_WRITE_IMM: h.type = s->rx_alloc ? TCP_F_AWRITE_IMM : TCP_F_WRITE_IMM; break;
	default: h.type = TCP_F_SEND; break;
	}
	h.len = s->len;
	h.rkey = s->rkey;
	h.addr = s->addr;
	h.imm = s->imm;
	h.ack = c->rx_count;
	c->ack_sent = c->rx_count;
	be__tcp_hdr_pack(s->hdr, &h);
	s->hdr_built = 1;
}

/* Append [base, +len) minus the first *skip bytes. */
static void iov_add(struct iovec *iov, int *k, void *base, size_t len, size_t *skip)
{
	if (*skip >= len) {
		*skip -= len;
		return;
	}
	iov[*k].iov_base = (uint8_t *)base + *skip;
	iov[*k].iov_len = len - *skip;
	(*k)++;
	*skip = 0;
}

static void conn_tx_advance(struct tcp_conn *c, size_t n)
{
	if (c->ctl_len) {
		c->ctl_off += (uint32_t)n;
		if (c->ctl_off == c->ctl_len)
			c->ctl_len = c->ctl_off = 0;
		return;
	}
	while (n) {
		struct tcp_wr *s = sq_slot(c, c->tx_written);
		size_t left = TCP_HDR_LEN + (size_t)s->len - c->tx_off;

		if (n >= left) {
			n -= left;
			c->tx_off = 0;
			c->tx_written++;
		} else {
			c->tx_off += n;
			n = 0;
		}
	}
}

/* A WR that failed local checks reached the head: fail the conn with it. */
static int conn_check_local_err(struct tcp_conn *c)
{
	struct tcp_wr *s;

	if (c->state != TCP_C_ESTABLISHED || !c->sq_cnt || c->tx_written)
		return 0;
	s = sq_slot(c, 0);
	if (!s->local_err)
		return 0;
	be_log_err("tcp: conn %s: WR %llu: %s", c->peer, (unsigned long long)s->wr_id,
		   be__xwc_status_str((enum be_xwc_status)s->local_err));
	be__tcp_conn_send_ctl_now(c, TCP_F_BYE, 0);
	be__tcp_conn_fail(c, (enum be_xwc_status)s->local_err, -EFAULT, 1);
	return -1;
}

static void conn_queue_ack(struct tcp_conn *c)
{
	struct tcp_cq *cq = c->rcq ? c->rcq : c->scq;

	if (be__list_linked(&c->ack_link) || !cq)
		return;
	be__list_add_head(&cq->ackq, &c->ack_link);
}

/*
 * Write whatever is pending until done or the socket is full. An ACK
 * frame (nothing else to carry the ack) goes out now unless @defer_ack,
 * in which case the conn waits on the cq's ack queue.
 */
static void conn_tx(struct tcp_conn *c, int defer_ack)
{
	struct iovec iov[TX_IOV_MAX];
	struct msghdr msg;
	ssize_t n;

	while (c->state == TCP_C_ESTABLISHED && c->fd >= 0) {
		size_t total = 0, skip;
		uint32_t j;
		int k = 0, i;

		if (conn_check_local_err(c))
			return;
		if (c->ctl_len) {
			iov[k].iov_base = c->ctl + c->ctl_off;
			iov[k].iov_len = c->ctl_len - c->ctl_off;
			k++;
		} else {
			skip = c->tx_off;
			for (j = c->tx_written; j < c->sq_cnt; j++) {
				struct tcp_wr *s = sq_slot(c, j);

				if (s->local_err || k + 1 + s->niov > TX_IOV_MAX)
					break;
				if (!s->hdr_built)
					conn_build_hdr(c, s);
				iov_add(iov, &k, s->hdr, TCP_HDR_LEN, &skip);
				for (i = 0; i < s->niov; i++)
					iov_add(iov, &k, s->iov[i].iov_base, s->iov[i].iov_len, &skip);
			}
			if (!k && c->rx_count != c->ack_sent) {
				struct tcp_hdr h = { .magic = TCP_MAGIC, .type = TCP_F_ACK };

				if (defer_ack) {
					conn_queue_ack(c);
					break;
				}

				h.ack = c->rx_count;
				c->ack_sent = c->rx_count;
				be__tcp_hdr_pack(c->ctl, &h);
				c->ctl_len = TCP_HDR_LEN;
				c->ctl_off = 0;
				continue;
			}
		}
		if (!k)
			break;
		for (i = 0; i < k; i++)
			total += iov[i].iov_len;
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = iov;
		msg.msg_iovlen = (size_t)k;
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			conn_hangup(c, n);
			return;
		}
		conn_tx_advance(c, (size_t)n);
		if ((size_t)n < total)
			break; /* socket full: EPOLLOUT brings us back */
	}
	be__tcp_conn_epoll_update(c);
}

/* An errored conn reads and drops until the peer closes. */
static void conn_drain(struct tcp_conn *c)
{
	int i;

	for (i = 0; i < 64; i++) {
		ssize_t n = recv(c->fd, c->rbuf, TCP_RBUF_SIZE, MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		be__tcp_conn_close_fd(c);
		return;
	}
}

void be__tcp_cq_flush_acks(struct tcp_cq *cq)
{
	struct be__list mid;

	be__list_init(&mid);
	while (!be__list_empty(&cq->ackq)) {
		struct tcp_conn *c = be__list_entry(cq->ackq.next, struct tcp_conn, ack_link);

		be__list_del_init(&c->ack_link);
		/* In the middle of a frame's payload: its ack waits for the
		 * frame's end (the rest comes without it), so one ACK or
		 * the next frame out covers both. */
		if (c->state == TCP_C_ESTABLISHED && c->rx_left && !c->rx_stalled) {
			be__list_add_head(&mid, &c->ack_link);
			continue;
		}
		if (c->state == TCP_C_ESTABLISHED && !(c->ep_events & EPOLLOUT))
			conn_tx(c, 0);
	}
	be__list_splice_head(&cq->ackq, &mid);
}

void be__tcp_conn_progress(struct tcp_conn *c)
{
	if (c->state == TCP_C_ESTABLISHED) {
		conn_rx(c);
		/* Nothing unwritten (nor a WR that failed local checks, now
		 * at the head), no ack owed and no EPOLLOUT to take back (a
		 * reader's usual case): conn_tx would only find that out. */
		if (c->state == TCP_C_ESTABLISHED &&
		    (c->rx_count != c->ack_sent || (c->ep_events & EPOLLOUT) || c->ctl_len ||
		     c->tx_written < c->sq_cnt))
			conn_tx(c, 1);
	} else if (c->state == TCP_C_ERROR && c->fd >= 0) {
		conn_drain(c);
	}
}

void be__tcp_conn_free_aslots(struct tcp_conn *c)
{
	be__xaslots_free(&c->aslots, &c->x, c->rx_free);
	c->rx_slot = NULL;
}

/*
 * be__tcp_conn_rx_resume() - read again after rx_alloc said -EAGAIN: the
 * conn is progressed at the next cq_poll, which retries the allocation.
 * Threads: the conn's worker. Returns 0, or -ENOTCONN.
 */
int be__tcp_conn_rx_resume(struct be_xconn *xc)
{
	struct tcp_conn *c = container_of(xc, struct tcp_conn, x);

	if (c->state != TCP_C_ESTABLISHED)
		return -ENOTCONN;
	if (!c->rx_stalled)
		return 0;
	c->rx_stalled = 0;
	be__tcp_conn_epoll_update(c);
	if (c->rcq)
		be__tcp_cq_kick(c->rcq, c);
	return 0;
}

/* Flush WRs posted to a conn in error, as an RC QP in error does. */
static void conn_post_flushed(struct tcp_conn *c, struct be_xsend_wr *wr)
{
	struct tcp_wr s;

	for (; wr; wr = wr->next) {
		memset(&s, 0, sizeof(s));
		s.wr_id = wr->wr_id;
		s.opcode = (uint8_t)wr->opcode;
		conn_push_send_wc(c, &s, BE_XWC_WR_FLUSH_ERR);
	}
}

static int conn_post_one(struct tcp_conn *c, const struct be_xsend_wr *wr)
{
	struct tcp_wr *s;
	uint64_t total = 0;
	int i;

	if ((unsigned)wr->opcode > BE_XWR_WRITE_IMM || wr->num_sge < 0 ||
	    wr->num_sge > TCP_MAX_SGE || (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > TCP_MAX_MSG)
		return -EINVAL;
	if ((wr->flags & BE_XWR_F_INLINE) && total > c->max_inline)
		return -EINVAL;
	if (c->sq_cnt == c->sq_cap)
		return -ENOMEM;
	s = sq_slot(c, c->sq_cnt);
	s->wr_id = wr->wr_id;
	s->opcode = (uint8_t)wr->opcode;
	s->rx_alloc = wr->opcode != BE_XWR_SEND && (wr->flags & BE_XWR_F_RX_ALLOC);
	s->signaled = !!(wr->flags & BE_XWR_F_SIGNALED);
	s->hdr_built = 0;
	s->local_err = 0;
	s->len = (uint32_t)total;
	s->addr = wr->opcode == BE_XWR_SEND ? 0 : wr->remote_addr;
	s->rkey = wr->opcode == BE_XWR_SEND ? 0 : wr->rkey;
	/* An RX_ALLOC WRITE at offset 0 carries the buffer's length in imm. */
	s->imm = wr->opcode == BE_XWR_WRITE_IMM || (s->rx_alloc && wr->remote_addr == 0) ?
			 wr->imm : 0;
	s->niov = 0;
	if (wr->flags & BE_XWR_F_INLINE) {
		uint8_t *p;

		if (total) {
			if (!s->inl) {
				s->inl = malloc(c->max_inline);
				if (!s->inl)
					return -ENOMEM;
			}
			p = s->inl;
			for (i = 0; i < wr->num_sge; i++) {
				memcpy(p, (const void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
			s->iov[0].iov_base = s->inl;
			s->iov[0].iov_len = total;
			s->niov = 1;
		}
	} else {
		for (i = 0; i < wr->num_sge; i++) {
			const struct be_xsge *g = &wr->sg_list[i];

			if (!g->length)
				continue;
			if (!be__tcp_reg_check(c->dev, g->lkey, g->addr, g->length))
				s->local_err = BE_XWC_LOC_PROT_ERR;
			s->iov[s->niov].iov_base = (void *)(uintptr_t)g->addr;
			s->iov[s->niov].iov_len = g->length;
			s->niov++;
		}
	}
	s->seq = c->seq_next++;
	c->sq_cnt++;
	return 0;
}

/*
 * be__tcp_post_send() - post a chain of WRs on @xc and write what the
 * socket takes now.
 *
 * Ownership: borrows @wr (copied into send queue slots; the chain may be
 * reused on return). Lends the memory of each scatter list until that
 * WR's completion (or a later signaled one on the conn) was polled: the
 * kernel copies from it as the socket drains, possibly long after this
 * call. BE_XWR_F_INLINE WRs are copied here, so their buffers are free on
 * return. On error the WRs from *bad on were not posted and are not lent.
 * Threads: the conn's worker. Returns 0, -EINVAL (malformed WR),
 * -ENOMEM (send queue full) or -ENOTCONN (not established); a conn in
 * error takes the WRs and flushes them.
 */
int be__tcp_post_send(struct be_xconn *xc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct tcp_conn *c = container_of(xc, struct tcp_conn, x);
	int ret = 0, posted = 0;

	if (bad)
		*bad = NULL;
	if (c->state == TCP_C_ERROR) {
		conn_post_flushed(c, wr);
		return 0;
	}
	if (c->state != TCP_C_ESTABLISHED) {
		if (bad)
			*bad = wr;
		return -ENOTCONN;
	}
	for (; wr; wr = wr->next) {
		ret = conn_post_one(c, wr);
		if (ret) {
			if (bad)
				*bad = wr;
			break;
		}
		posted++;
	}
	/* Write now unless the socket is known to be full (EPOLLOUT armed). */
	if (posted && !(c->ep_events & EPOLLOUT))
		conn_tx(c, 1);
	return ret;
}

/* ---- grants ------------------------------------------------------------ */

int be__tcp_grant(struct be_xconn *xc, void *addr, size_t len, uint32_t *rkey)
{
	struct tcp_conn *c;

	if (!xc || !addr || !rkey)
		return -EINVAL;
	c = container_of(xc, struct tcp_conn, x);
	if (c->state == TCP_C_ERROR || c->state == TCP_C_DEAD)
		return -ENOTCONN;
	return be__xgrants_add(&c->grants, (uint64_t)(uintptr_t)addr, len, rkey);
}

int be__tcp_revoke(struct be_xconn *xc, uint32_t rkey, uint64_t cookie)
{
	struct tcp_conn *c;

	(void)cookie; /* a grant ends at once here */
	if (!xc)
		return 0;
	c = container_of(xc, struct tcp_conn, x);
	if (be__xgrants_del(&c->grants, rkey))
		return 0;
	/* The frame being placed writes into it: its payload must not land
	 * in memory the owner is about to reuse. */
	if (c->rx_left && (c->rx.type == TCP_F_WRITE || c->rx.type == TCP_F_WRITE_IMM) &&
	    c->rx.rkey == rkey &&
	    c->state == TCP_C_ESTABLISHED) {
		be_log_err("tcp: conn %s: grant 0x%x revoked while the peer writes it; closing",
			   c->peer, rkey);
		c->rx_left = 0;
		c->rx_dst = NULL;
		be__tcp_conn_fail(c, BE_XWC_WR_FLUSH_ERR, -ECANCELED, 0);
	}
	return 0;
}
