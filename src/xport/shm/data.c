/*
 * data.c - the shm data path: post_send, cq_poll and cq_arm on the rings
 * (the cq and srq objects are in cq.c).
 *
 * Model. Nothing here makes a syscall unless a peer is asleep (writing its
 * eventfd), a WR hits a slow path (unknown rkey: drain the socket), or a
 * poll finds itself waiting on the peer's CPU (sched_yield(), below).
 *
 * post_send executes each WR at once, in posting order, on the poster's
 * CPU: a SEND copies its payload into a record of the conn's outbound
 * ring; a WRITE copies its data into WRITE records naming the target
 * (the peer's memory is not mapped here: ring.h), which the peer places
 * when it consumes them; a WRITE_IMM is its WRITE records and a one-line
 * record. A WR that finds the ring full is kept (with a copy of its
 * scatter list, and of its data if INLINE) and so is every WR after it;
 * cq_poll transmits them as the peer consumes.
 *
 * Send queue: a ring of swqes (head <= tx <= tail). Entries complete in
 * order at cq_poll, when the peer's consumer head has passed their last
 * record (this is the acknowledgement; the peer has then placed the data
 * and written its receive completion); an empty WRITE at once. When the
 * conn is in error every entry without a status gets one: the first the
 * conn's err_first, the rest WR_FLUSH_ERR.
 *
 * Receive: cq_poll consumes the inbound rings of the conns whose recv_cq
 * it is. A WRITE record is checked against the conn's grants and copied
 * into place; a SEND record is copied into the next receive posted on the
 * SRQ (a plain local array: only this thread takes from it); a WRITE_IMM
 * takes a receive and reports imm and length. A WRITE outside the grants
 * (REM_ACCESS_ERR), no receive (RNR), a receive too small (LOC_LEN_ERR)
 * or outside its region (LOC_PROT_ERR) stop the ring and report the
 * sender's status in the ring's ctl.
 *
 * Bulk WRITEs stream through the ring: the producer cuts records to the
 * space the consumer freed (write_reserve()), and the consumer hands
 * space back every SHM_WRITE_PUB bytes as it places them. So both copies,
 * into the ring and out of it, run at once on two CPUs. On one CPU, or
 * when the caller busy-polls, the side that can do nothing until the
 * other runs yields its CPU: the producer when WRs wait for ring space
 * and nothing completed, the consumer when it emptied a ring whose
 * producer waits for space. Without that a spinning poll held the core
 * the peer needed for the rest of its time slice (raw-bw --cpu 0,0:
 * 30-50 MB/s, with it as fast as the one-copy design).
 *
 * Wakeups: see ring.h. cq_fd is an epoll holding the cq's eventfd and,
 * for hang-up only, the sockets of its conns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "util/common.h"
#include "util/log.h"
#include "xport/shm/shm.h"

/* A WR being executed, from the caller's WR or from its deferred copy. */
struct shm_op {
	enum be_xwr_opcode opcode;
	unsigned int flags;
	const struct be_xsge *sge;
	int num_sge;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;
	uint64_t total;
};

/* ---- send queue ------------------------------------------------------ */

int be__shm_sq_init(struct shm_conn *c, uint32_t max_send_wr)
{
	uint32_t cap = 1;

	while (cap < max_send_wr)
		cap <<= 1;
	be__shm_sq_free(c);
	c->sq = calloc(cap, sizeof(*c->sq));
	if (!c->sq)
		return -ENOMEM;
	c->sq_mask = cap - 1;
	c->max_send_wr = max_send_wr;
	c->sq_head = c->sq_tx = c->sq_tail = 0;
	return 0;
}

void be__shm_sq_free(struct shm_conn *c)
{
	uint32_t i;

	if (!c->sq)
		return;
	for (i = c->sq_head; i != c->sq_tail; i++)
		free(c->sq[i & c->sq_mask].def);
	free(c->sq);
	c->sq = NULL;
}

static inline void sq_done(struct shm_swqe *e, enum be_xwc_status st)
{
	e->state = SHM_WQE_DONE;
	e->status = (uint8_t)st;
}

/* @e failed on its own: error the conn, but the WRs before it ran. */
static void sq_fail(struct shm_conn *c, struct shm_swqe *e, enum be_xwc_status st, int ev_status)
{
	uint32_t slot = (uint32_t)(e - c->sq);

	sq_done(e, st);
	be__shm_conn_error(c, BE_XWC_WR_FLUSH_ERR, ev_status);
	c->err_keep = c->sq_head + ((slot - c->sq_head) & c->sq_mask);
}

/* Fill the rest of the area, from the tail to its end, with a PAD record;
 * the caller checked that it is free. */
static void ring_pad(struct shm_conn *c)
{
	uint64_t off = c->tx_tail & (c->ring_size - 1);
	struct shm_rec *p = (struct shm_rec *)(void *)(c->tx_data + off);

	p->byte_len = 0;
	p->imm = 0;
	shm_store_rel(&p->tag, shm_tag_make(c->tx_tail, SHM_REC_PAD, 0));
	c->tx_tail += c->ring_size - off;
}

/* Space for a record of @len bytes (plus a PAD to the end if needed).
 * Returns the record's position, or UINT64_MAX when the ring is full. */
static uint64_t ring_reserve(struct shm_conn *c, uint64_t len)
{
	uint64_t size = c->ring_size;
	uint64_t off = c->tx_tail & (size - 1);
	uint64_t pad = off + len > size ? size - off : 0;
	uint64_t pos;

	if (c->tx_tail + pad + len - c->tx_head > size) {
		c->tx_head = shm_load_acq(&c->tx_ctl->head);
		if (c->tx_tail + pad + len - c->tx_head > size)
			return UINT64_MAX;
	}
	if (pad)
		ring_pad(c);
	pos = c->tx_tail;
	c->tx_tail += len;
	return pos;
}

enum { SQ_EXEC_DONE = 0, SQ_EXEC_FULL = 1 };

/* Copy bytes [@from, @to) of @op's gathered data to @dst. */
static void sq_gather_part(uint8_t *dst, const struct shm_op *op, uint64_t from, uint64_t to)
{
	uint64_t at = 0;
	int i;

	for (i = 0; i < op->num_sge && at < to; i++) {
		uint64_t len = op->sge[i].length;
		uint64_t b = BE_MAX(from, at), e = BE_MIN(to, at + len);

		if (b < e)
			memcpy(dst + (b - from),
			       (const uint8_t *)(uintptr_t)op->sge[i].addr + (b - at), e - b);
		at += len;
	}
}

/* Copy all of @op's gathered data to @dst. */
static void sq_gather(uint8_t *dst, const struct shm_op *op)
{
	sq_gather_part(dst, op, 0, UINT64_MAX);
}

/*
 * sq_fill_record() - write a record's body: @nlead bytes from @lead (the
 * target of a WRITE or WRITE_IMM_INL record, or nothing), then bytes
 * [@from, @from+@n) of @op's data; the caller stores the tag after it.
 * The lines after the first are written first and the first line, header
 * included, last, in a burst right before its tag. The consumer spins on
 * the first line and reads the second with it (cq_poll_rx()), so when it
 * sees the tag the rest of a two-line record (a 64-byte message) comes
 * over in the same transfer. Written in order, the header's store could
 * hand the first line to the consumer's poll before the tag's store took
 * it back, and the second line would be fetched only after the tag was
 * seen: up to two more cache-line transfers per record.
 */
static void sq_fill_record(struct shm_rec *rec, const void *lead, uint32_t nlead,
			   const struct shm_op *op, uint64_t from, uint64_t n)
{
	uint64_t head = SHM_LINE - SHM_REC_HDR - nlead; /* data bytes in line 1 */

	if (n > head)
		sq_gather_part(rec->data + nlead + head, op, from + head, from + n);
	__asm__ __volatile__("" ::: "memory"); /* keep the line order */
	rec->byte_len = (uint32_t)n;
	rec->imm = op->imm;
	if (nlead)
		memcpy(rec->data, lead, nlead);
	sq_gather_part(rec->data + nlead, op, from, from + BE_MIN(head, n));
}

/*
 * write_reserve() - room for one WRITE record of up to @want data bytes
 * at the ring's tail. A WRITE record names its own target, so a WRITE
 * can be cut anywhere: the record takes what is free up to the end of the
 * area instead of padding past it (a PAD only when less than two lines
 * are left there), and while the consumer drains, whatever it freed, down
 * to SHM_WRITE_REC_MIN. So the producer never waits for a whole chunk to
 * be consumed, and a lap wastes nothing. Returns the record's position
 * and its data bytes in *@n, or UINT64_MAX when the ring is full.
 */
static uint64_t write_reserve(struct shm_conn *c, uint64_t want, uint64_t *n)
{
	uint64_t size = c->ring_size, hdr = SHM_REC_HDR + sizeof(struct shm_rec_inl);
	uint64_t end = size - (c->tx_tail & (size - 1)); /* to the area's end */
	uint64_t free_ = size - (c->tx_tail - c->tx_head), room, cap, pos;

	if (hdr + want > BE_MIN(free_, end)) {
		c->tx_head = shm_load_acq(&c->tx_ctl->head);
		free_ = size - (c->tx_tail - c->tx_head);
	}
	if (end < 2 * SHM_LINE) {
		/* A sliver at the end: PAD it, go on at the start. */
		if (free_ < end + 2 * SHM_LINE)
			return UINT64_MAX;
		ring_pad(c);
		free_ -= end;
		end = size;
	}
	room = BE_MIN(free_, end); /* lines: a record of hdr + cap fits */
	if (room < hdr + SHM_LINE)
		return UINT64_MAX;
	cap = room - hdr;
	if (want > cap) {
		/* Cut at the end of the area, or at what was freed if that is
		 * worth a record (not a trickle of small ones). */
		if (room < end && cap < SHM_WRITE_REC_MIN(size))
			return UINT64_MAX;
		want = cap;
	}
	*n = want;
	pos = c->tx_tail;
	c->tx_tail += shm_rec_len(SHM_REC_WRITE, (uint32_t)want);
	return pos;
}

/*
 * sq_write() - put @op, a WRITE or a WRITE_IMM, in the ring, from byte
 * e->sent on: its data in WRITE records of at most SHM_WRITE_REC_MAX
 * each, cut to the ring's free space (write_reserve()), then, for a
 * WRITE_IMM, a one-line WRITE_IMM record. The consumer places the data
 * (the peer's memory is not mapped here), so the WR waits for the
 * consumer's acknowledgement of its last record like a SEND. A small
 * WRITE_IMM is one WRITE_IMM_INL record. Returns SQ_EXEC_DONE or
 * SQ_EXEC_FULL (e->sent says how far it got).
 */
static int sq_write(struct shm_conn *c, struct shm_swqe *e, const struct shm_op *op)
{
	bool imm = op->opcode == BE_XWR_WRITE_IMM;
	uint32_t rxa = op->flags & BE_XWR_F_RX_ALLOC ? SHM_INL_RX_ALLOC : 0;
	uint64_t chunk = SHM_WRITE_REC_MAX(c->ring_size);
	struct shm_op wop = *op;
	struct shm_rec *rec;
	uint64_t pos, len;

	/* An RX_ALLOC WRITE record carries the length of the buffer its
	 * slot opens (ring.h): a WRITE's imm, or a WRITE_IMM's own length. */
	if (rxa && imm)
		wop.imm = (uint32_t)(op->remote_addr + op->total);
	if (imm && op->total <= SHM_IMM_INLINE) {
		struct shm_rec_inl in = { op->remote_addr, op->rkey, rxa };

		len = shm_rec_len(SHM_REC_WRITE_IMM_INL, (uint32_t)op->total);
		pos = ring_reserve(c, len);
		if (pos == UINT64_MAX)
			return SQ_EXEC_FULL;
		rec = (struct shm_rec *)(void *)(c->tx_data + (pos & (c->ring_size - 1)));
		sq_fill_record(rec, &in, sizeof(in), op, 0, op->total);
		shm_store_rel(&rec->tag, shm_tag_make(pos, SHM_REC_WRITE_IMM_INL, e->signaled));
		e->pos = pos;
		e->end = pos + len;
		e->state = SHM_WQE_WAIT;
		return SQ_EXEC_DONE;
	}
	while (e->sent < op->total) {
		struct shm_rec_inl in = { op->remote_addr + e->sent, op->rkey, rxa };
		uint64_t n;
		bool last;

		pos = write_reserve(c, BE_MIN(chunk, op->total - e->sent), &n);
		if (pos == UINT64_MAX)
			return SQ_EXEC_FULL;
		last = e->sent + n == op->total && !imm;
		rec = (struct shm_rec *)(void *)(c->tx_data + (pos & (c->ring_size - 1)));
		sq_fill_record(rec, &in, sizeof(in), &wop, e->sent, n);
		shm_store_rel(&rec->tag, shm_tag_make(pos, SHM_REC_WRITE, last && e->signaled));
		if (!e->sent)
			e->pos = pos;
		e->sent += (uint32_t)n;
		e->end = pos + shm_rec_len(SHM_REC_WRITE, (uint32_t)n);
	}
	if (imm) {
		pos = ring_reserve(c, SHM_LINE);
		if (pos == UINT64_MAX)
			return SQ_EXEC_FULL;
		rec = (struct shm_rec *)(void *)(c->tx_data + (pos & (c->ring_size - 1)));
		rec->byte_len = (uint32_t)op->total;
		rec->imm = op->imm;
		if (rxa) {
			struct shm_rec_inl in = { op->remote_addr + op->total, op->rkey, rxa };

			memcpy(rec->data, &in, sizeof(in));
		}
		shm_store_rel(&rec->tag, shm_tag_make(pos, rxa ? SHM_REC_WRITE_IMM_RXA :
							       SHM_REC_WRITE_IMM, e->signaled));
		if (!op->total)
			e->pos = pos;
		e->end = pos + SHM_LINE;
	} else if (!op->total) {
		sq_done(e, BE_XWC_SUCCESS); /* nothing to place, nothing to wait for */
		return SQ_EXEC_DONE;
	}
	e->state = SHM_WQE_WAIT;
	return SQ_EXEC_DONE;
}

/*
 * sq_exec() - execute @op for swqe @e. Returns SQ_EXEC_DONE (e is WAIT or
 * DONE; on a local access error the conn went to error) or SQ_EXEC_FULL
 * (no ring space; a WRITE may have put part of its data in already).
 */
static int sq_exec(struct shm_conn *c, struct shm_swqe *e, const struct shm_op *op)
{
	struct shm_rec *rec;
	uint64_t pos, len;
	int i;

	if (!(op->flags & BE_XWR_F_INLINE) && !e->sent) {
		for (i = 0; i < op->num_sge; i++) {
			if (op->sge[i].length &&
			    be__shm_local_check(c->dev, op->sge[i].lkey, op->sge[i].addr,
						op->sge[i].length)) {
				sq_fail(c, e, BE_XWC_LOC_PROT_ERR, -EIO);
				return SQ_EXEC_DONE;
			}
		}
	}
	if (op->opcode != BE_XWR_SEND)
		return sq_write(c, e, op);
	len = shm_rec_len(SHM_REC_SEND, (uint32_t)op->total);
	pos = ring_reserve(c, len);
	if (pos == UINT64_MAX)
		return SQ_EXEC_FULL;
	rec = (struct shm_rec *)(void *)(c->tx_data + (pos & (c->ring_size - 1)));
	sq_fill_record(rec, NULL, 0, op, 0, op->total);
	shm_store_rel(&rec->tag, shm_tag_make(pos, SHM_REC_SEND, e->signaled));
	e->state = SHM_WQE_WAIT;
	e->pos = pos;
	e->end = pos + len;
	return SQ_EXEC_DONE;
}

/* Kick @efd when the peer armed @armed (it sleeps on it); the exchange
 * disarms it, so that of two wakers only one kicks. */
static void shm_wake_armed(uint32_t *armed, int efd)
{
	shm_fence();
	if (shm_load_rlx(armed) && __atomic_exchange_n(armed, 0, __ATOMIC_ACQ_REL))
		be__wake_kick(efd);
}

static void sq_notify_peer(struct shm_conn *c)
{
	shm_wake_armed(&c->tx_ctl->rx_armed, c->peer_rx_efd);
}

static void op_from_defer(struct shm_op *op, const struct shm_defer *d, uint32_t total)
{
	op->opcode = d->opcode;
	op->flags = d->flags;
	op->sge = d->sge;
	op->num_sge = d->num_sge;
	op->remote_addr = d->remote_addr;
	op->rkey = d->rkey;
	op->imm = d->imm;
	op->total = total;
}

/* Transmit deferred WRs while the ring has room. */
static void sq_tx_pending(struct shm_conn *c)
{
	uint64_t tail0 = c->tx_tail;

	while (c->sq_tx != c->sq_tail && c->state == SHM_CS_CONNECTED) {
		struct shm_swqe *e = &c->sq[c->sq_tx & c->sq_mask];
		struct shm_op op;

		op_from_defer(&op, e->def, e->byte_len);
		if (sq_exec(c, e, &op) == SQ_EXEC_FULL)
			break;
		free(e->def);
		e->def = NULL;
		c->sq_tx++;
	}
	if (c->sq_tx == c->sq_tail)
		shm_store_rlx(&c->tx_ctl->tx_want_space, 0);
	if (c->tx_tail != tail0)
		sq_notify_peer(c);
}

static int sq_defer(struct shm_conn *c, struct shm_swqe *e, const struct be_xsend_wr *wr,
		    uint64_t total)
{
	bool inl = wr->flags & BE_XWR_F_INLINE;
	struct shm_defer *d = malloc(sizeof(*d) + (inl ? total : 0));

	if (!d)
		return -ENOMEM;
	d->opcode = wr->opcode;
	d->flags = wr->flags;
	d->remote_addr = wr->remote_addr;
	d->rkey = wr->rkey;
	d->imm = wr->imm;
	if (inl) {
		struct shm_op op = { .sge = wr->sg_list, .num_sge = wr->num_sge };

		sq_gather(d->inl, &op);
		d->num_sge = 1;
		d->sge[0].addr = (uint64_t)(uintptr_t)d->inl;
		d->sge[0].length = (uint32_t)total;
		d->sge[0].lkey = 0;
	} else {
		d->num_sge = wr->num_sge;
		if (wr->num_sge)
			memcpy(d->sge, wr->sg_list, sizeof(*d->sge) * (size_t)wr->num_sge);
	}
	e->def = d;
	e->state = SHM_WQE_DEFER;
	/* Ask the consumer to wake our send cq when it frees space. */
	shm_store_rlx(&c->tx_ctl->tx_want_space, 1);
	return 0;
}

static int sq_validate(const struct shm_conn *c, const struct be_xsend_wr *wr, uint64_t *total)
{
	uint64_t t = 0;
	int i;

	if (wr->opcode != BE_XWR_SEND && wr->opcode != BE_XWR_WRITE && wr->opcode != BE_XWR_WRITE_IMM)
		return -EINVAL;
	if (wr->num_sge < 0 || wr->num_sge > (int)SHM_MAX_SGE || (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		t += wr->sg_list[i].length;
	if (t > SHM_MAX_MSG)
		return -EINVAL;
	if ((wr->flags & BE_XWR_F_INLINE) && t > SHM_MAX_INLINE)
		return -EINVAL;
	if (wr->opcode == BE_XWR_SEND && t > c->ring_size / 4)
		return -EMSGSIZE;
	if ((wr->flags & BE_XWR_F_RX_ALLOC) &&
	    (wr->opcode == BE_XWR_SEND || wr->rkey >= BE_XASLOTS ||
	     wr->remote_addr + t > UINT32_MAX))
		return -EINVAL;
	*total = t;
	return 0;
}

static void rx_publish(struct shm_conn *c);

static const uint8_t sq_wc_opcode[] = {
	[BE_XWR_SEND] = BE_XWC_SEND,
	[BE_XWR_WRITE] = BE_XWC_WRITE,
	[BE_XWR_WRITE_IMM] = BE_XWC_WRITE_IMM,
};

int be__shm_post_send(struct be_xconn *xc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct shm_conn *c;
	uint64_t tail0;
	bool local = false;
	int ret = 0;

	if (!xc) {
		if (bad)
			*bad = wr;
		return -EINVAL;
	}
	c = to_sconn(xc);
	if (c->state != SHM_CS_CONNECTED && c->state != SHM_CS_ERROR) {
		if (bad)
			*bad = wr;
		return -ENOTCONN;
	}
	tail0 = c->tx_tail;
	if (c->sq_tx != c->sq_tail && c->state == SHM_CS_CONNECTED)
		sq_tx_pending(c);
	for (; wr; wr = wr->next) {
		struct shm_swqe *e;
		uint64_t total;

		ret = sq_validate(c, wr, &total);
		if (!ret && c->sq_tail - c->sq_head >= c->max_send_wr)
			ret = -ENOMEM;
		if (ret)
			break;
		e = &c->sq[c->sq_tail & c->sq_mask];
		e->wr_id = wr->wr_id;
		e->byte_len = (uint32_t)total;
		e->opcode = sq_wc_opcode[wr->opcode];
		e->signaled = !!(wr->flags & BE_XWR_F_SIGNALED);
		e->sent = 0;
		e->def = NULL;
		if (c->state != SHM_CS_CONNECTED) {
			sq_done(e, BE_XWC_WR_FLUSH_ERR);
		} else if (c->sq_tx == c->sq_tail) {
			struct shm_op op = {
				.opcode = wr->opcode, .flags = wr->flags, .sge = wr->sg_list,
				.num_sge = wr->num_sge, .remote_addr = wr->remote_addr,
				.rkey = wr->rkey, .imm = wr->imm, .total = total,
			};

			if (sq_exec(c, e, &op) == SQ_EXEC_FULL) {
				ret = sq_defer(c, e, wr, total);
				if (ret)
					break;
			}
		} else {
			ret = sq_defer(c, e, wr, total);
			if (ret)
				break;
		}
		if (e->state == SHM_WQE_DONE && (e->signaled || e->status != BE_XWC_SUCCESS))
			local = true;
		if (e->state != SHM_WQE_DEFER && c->sq_tx == c->sq_tail)
			c->sq_tx++;
		c->sq_tail++;
	}
	if (ret && bad)
		*bad = wr;
	/* An answer went out: what it answered is acknowledged right
	 * behind it (see rx_publish()). */
	if (c->state == SHM_CS_CONNECTED)
		rx_publish(c);
	if (c->tx_tail != tail0)
		sq_notify_peer(c);
	if (local && c->scq)
		be__shm_cq_kick(c->scq);
	return ret;
}

/* Is the first entry of @c's send queue ready to complete? */
static bool sq_ready(struct shm_conn *c)
{
	struct shm_swqe *e;

	if (c->sq_head == c->sq_tail)
		return false;
	e = &c->sq[c->sq_head & c->sq_mask];
	if (e->state == SHM_WQE_DONE || c->state == SHM_CS_ERROR)
		return true;
	if (e->state == SHM_WQE_WAIT)
		return e->end <= shm_load_acq(&c->tx_ctl->head) ||
		       shm_load_acq(&c->tx_ctl->err_status);
	return false;
}

static int cq_poll_tx(struct shm_conn *c, struct be_xwc *wc, int n)
{
	int got = 0;

	if (c->sq_tx != c->sq_tail && c->state == SHM_CS_CONNECTED)
		sq_tx_pending(c);
	while (got < n && c->sq_head != c->sq_tail) {
		struct shm_swqe *e = &c->sq[c->sq_head & c->sq_mask];
		enum be_xwc_status st;

		if (e->state == SHM_WQE_DONE &&
		    (c->state != SHM_CS_ERROR || e->status != BE_XWC_SUCCESS ||
		     (!c->err_emitted && (int32_t)(c->sq_head - c->err_keep) < 0))) {
			st = e->status;
		} else if (e->state == SHM_WQE_WAIT && !c->err_emitted &&
			   (e->end <= c->tx_head ||
			    e->end <= (c->tx_head = shm_load_acq(&c->tx_ctl->head)))) {
			/* Acknowledged: the peer has its completion. */
			st = BE_XWC_SUCCESS;
		} else {
			uint32_t es = 0;

			if (e->state == SHM_WQE_WAIT)
				es = shm_load_acq(&c->tx_ctl->err_status);
			if (es && shm_load_rlx(&c->tx_ctl->err_pos) >= e->pos &&
			    shm_load_rlx(&c->tx_ctl->err_pos) < e->end) {
				st = es == BE_XWC_RNR_RETRY_EXC || es == BE_XWC_REM_ACCESS_ERR ?
					     (enum be_xwc_status)es : BE_XWC_REM_OP_ERR;
				if (c->state == SHM_CS_CONNECTED)
					be__shm_conn_error(c, BE_XWC_WR_FLUSH_ERR, -EREMOTEIO);
				else
					c->err_first = BE_XWC_WR_FLUSH_ERR;
			} else if (c->state == SHM_CS_ERROR) {
				/* Everything not completed yet fails, WRITEs
				 * that already ran included: once a WR failed,
				 * no later one may report success. */
				st = c->err_first;
				c->err_first = BE_XWC_WR_FLUSH_ERR;
			} else if (es) {
				/* The peer refused a record of a WR that completed
				 * already (a WRITE_IMM, see sq_exec()). */
				be__shm_conn_error(c, BE_XWC_WR_FLUSH_ERR, -EREMOTEIO);
				continue;
			} else {
				break;
			}
		}
		if (st != BE_XWC_SUCCESS)
			c->err_emitted = true;
		if (e->def) {
			free(e->def);
			e->def = NULL;
		}
		if (c->sq_tx == c->sq_head)
			c->sq_tx++;
		c->sq_head++;
		if (e->signaled || st != BE_XWC_SUCCESS) {
			struct be_xwc *w = &wc[got++];

			w->wr_id = e->wr_id;
			w->status = st;
			w->opcode = e->opcode;
			w->byte_len = e->byte_len;
			w->imm = 0;
			w->conn = &c->base;
			w->srq = NULL;
			w->vendor_err = 0;
			w->rx_buf = NULL;
		}
	}
	return got;
}

/* ---- receive ---------------------------------------------------------- */

static void rx_wake_sender(struct shm_conn *c)
{
	shm_wake_armed(&c->rx_ctl->tx_armed, c->peer_tx_efd);
}

static void rx_srq_limit(struct shm_conn *c, struct shm_srq *s)
{
	struct be_xevent ev;

	if (!be__xrq_limit_hit(&s->rq))
		return;
	memset(&ev, 0, sizeof(ev));
	ev.type = BE_XEV_SRQ_LIMIT;
	ev.srq = &s->base;
	if (c->base.evch)
		be__shm_evch_queue(to_sevch(c->base.evch), &ev);
}

/* Zero the first word of every consumed line up to @end: no stale byte
 * of the free space can then pass for a tag. */
static void rx_zero_to(struct shm_conn *c, uint64_t end)
{
	uint64_t mask = c->ring_size - 1, p;

	for (p = c->rx_zeroed; p < end; p += SHM_LINE)
		*(uint64_t *)(void *)(c->rx_data + (p & mask)) = 0;
	c->rx_zeroed = end;
}

/*
 * rx_publish() - acknowledge the records taken since the last call: zero
 * their lines (rx_zero_to()), publish head, and wake the producer if it
 * sleeps waiting for that.
 *
 * Called after the next post on the conn, at the conn's next poll (on
 * either cq) and before a cq sleeps; not as the records are taken: these
 * stores hit lines the producer reads, and on x86 every later store waits
 * behind them, so the answer a receive callback posts (its record's tag)
 * would wait until those lines were taken from the producer. Behind the
 * answer they cost it nothing. The price, and
 * the one difference from an RC QP: a receiver that takes a record and
 * then neither polls, posts nor sleeps holds back its sender's completion.
 */
static void rx_publish_head(struct shm_conn *c)
{
	rx_zero_to(c, c->rx_head);
	c->rx_pub = c->rx_head;
	shm_store_rel(&c->rx_ctl->head, c->rx_head);
}

static void rx_publish(struct shm_conn *c)
{
	if (c->rx_pub == c->rx_head && !c->rx_pub_quiet)
		return;
	if (c->rx_pub != c->rx_head)
		rx_publish_head(c);
	c->rx_pub_quiet = false;
	if (c->rx_pub_wake || shm_load_rlx(&c->rx_ctl->tx_want_space))
		rx_wake_sender(c);
	c->rx_pub_wake = false;
}

uint64_t be__shm_rec_check(uint32_t op, uint32_t blen, uint64_t off, uint64_t size)
{
	uint64_t len;

	if ((op != SHM_REC_SEND && op != SHM_REC_WRITE_IMM && op != SHM_REC_WRITE_IMM_INL &&
	     op != SHM_REC_WRITE && op != SHM_REC_WRITE_IMM_RXA) ||
	    ((op == SHM_REC_SEND || op == SHM_REC_WRITE) && blen > size / 4) ||
	    (op == SHM_REC_WRITE_IMM_INL && blen > SHM_IMM_INLINE))
		return 0;
	len = shm_rec_len(op, blen);
	return off + len > size ? 0 : len;
}

/*
 * rx_aslot() - the RX_ALLOC slot the record @op, with target @in (slot,
 * offset), @blen data bytes and @imm, writes into (ring.h): checked, and
 * opened with a buffer from rx_alloc when the record opens it; in *@out.
 * Returns 0, -EAGAIN (no buffer now: the record waits, nothing changed)
 * or -EACCES (refused; logged).
 */
static int rx_aslot(struct shm_conn *c, uint32_t op, const struct shm_rec_inl *in,
		    uint32_t blen, uint32_t imm, struct be__xaslot **out)
{
	bool rxa = op == SHM_REC_WRITE_IMM_RXA;
	struct be__xaslot *a;
	const char *why;
	uint64_t open;
	void *buf = NULL;
	int rc;

	if (!c->rx_alloc) {
		why = "RX_ALLOC write to no slot";
		goto refuse;
	}
	/* A WRITE_IMM_RXA ends the slot where its WRITE records ended. */
	why = be__xaslot_check(c->aslots, in->rkey, in->raddr, rxa ? 0 : blen,
			       op == SHM_REC_WRITE ? imm : blen,
			       op == SHM_REC_WRITE ? BE_XASLOT_PART : BE_XASLOT_LAST, &open);
	if (why)
		goto refuse;
	if (!c->aslots) {
		c->aslots = calloc(BE_XASLOTS, sizeof(*c->aslots));
		if (!c->aslots) {
			why = "no memory for RX_ALLOC slots";
			goto refuse;
		}
	}
	a = &c->aslots[in->rkey];
	if (open) {
		rc = c->rx_alloc(&c->base, open, &buf);
		if (rc == -EAGAIN)
			return rc;
		if (rc || !buf) {
			why = "RX_ALLOC buffer refused";
			goto refuse;
		}
		a->buf = buf;
		a->len = (uint32_t)open;
		a->got = 0;
	}
	*out = a;
	return 0;
refuse:
	be_log_err("shm: %s (peer pid %d)", why, (int)c->peer_pid);
	return -EACCES;
}

int be__shm_conn_rx_resume(struct be_xconn *xc)
{
	struct shm_conn *c;

	if (!xc)
		return -EINVAL;
	c = to_sconn(xc);
	if (c->state != SHM_CS_CONNECTED)
		return -ENOTCONN;
	if (c->rx_stalled) {
		c->rx_stalled = false;
		if (c->rcq)
			be__shm_cq_kick(c->rcq);
	}
	return 0;
}

static int cq_poll_rx(struct shm_conn *c, struct be_xwc *wc, int n)
{
	uint64_t size = c->ring_size, mask = size - 1, head, head0, placed = 0;
	struct shm_srq *s = c->srq;
	bool drained = false;
	uint32_t err = 0;
	int got = 0;

	if (c->state != SHM_CS_CONNECTED || c->rx_stalled)
		return 0;
	rx_publish(c);
	head = head0 = c->rx_head;
	while (got < n) {
		uint64_t off = head & mask, len;
		struct shm_rec *rec = (struct shm_rec *)(void *)(c->rx_data + off);
		uint64_t tag = shm_load_acq(&rec->tag);
		struct shm_rec_inl in = { 0, 0, 0 };
		struct be__xaslot *slot;
		uint32_t op, blen;
		struct be_xrecv_wr *r;
		struct be_xwc *w;

		/* The next line too, in the same breath as the tag and whatever
		 * it says: the producer writes it before the tag's line, so a
		 * two-line record arrives in one transfer, not two in a row
		 * (sq_fill_record()). An unused read otherwise. */
		(void)shm_load_rlx((const uint64_t *)(const void *)(c->rx_data +
								      ((off + SHM_LINE) & mask)));
		if (!(tag & SHM_TAG_VALID) || (tag & SHM_TAG_POS_MASK) != head) {
			drained = head != head0 &&
				  shm_load_rlx(&c->rx_ctl->tx_want_space);
			break;
		}
		op = shm_tag_op(tag);
		/* Peer-written fields are read once, then checked. */
		blen = shm_load_rlx(&rec->byte_len);
		if (op == SHM_REC_PAD) {
			/* Once a lap: zero what came before it and its tag at
			 * once; the lines after it were never written, so they
			 * start with a zero word already. */
			rx_zero_to(c, head);
			shm_store_rlx(&rec->tag, 0);
			head += size - off;
			c->rx_zeroed = head;
			continue;
		}
		len = be__shm_rec_check(op, blen, off, size);
		if (!len) {
			err = BE_XWC_GENERAL_ERR;
			break;
		}
		slot = NULL;
		if (op == SHM_REC_WRITE_IMM_INL || op == SHM_REC_WRITE ||
		    op == SHM_REC_WRITE_IMM_RXA) {
			/* Copied first: the peer may change the ring under us.
			 * Only a live grant of this conn, or an RX_ALLOC slot,
			 * may be written. */
			memcpy(&in, rec->data, sizeof(in));
			if (op == SHM_REC_WRITE_IMM_RXA || (in.flags & SHM_INL_RX_ALLOC)) {
				int rc = rx_aslot(c, op, &in, blen, shm_load_rlx(&rec->imm), &slot);

				if (rc == -EAGAIN) {
					c->rx_stalled = true; /* the record waits */
					break;
				}
				if (rc) {
					err = BE_XWC_REM_ACCESS_ERR;
					break;
				}
				in.raddr = (uint64_t)(uintptr_t)(slot->buf + slot->got);
			} else if (blen && !be__xgrants_check(&c->grants, in.rkey, in.raddr, blen)) {
				err = BE_XWC_REM_ACCESS_ERR;
				break;
			}
		}
		if (op == SHM_REC_WRITE) {
			/* Placed on the writer's behalf; takes no receive. */
			if (blen)
				memcpy((void *)(uintptr_t)in.raddr, rec->data + sizeof(in), blen);
			if (slot)
				slot->got += blen;
			if (tag & SHM_TAG_SIGNALED)
				c->rx_pub_wake = true;
			head += len;
			placed += blen;
			if (placed >= size / 2)
				break; /* the rest at the next poll: others wait */
			if (head - c->rx_pub >= SHM_WRITE_PUB(size)) {
				/* Bulk: hand the space back as it is freed, so a
				 * producer that polls refills behind us (a stream
				 * through the ring, not batches of it). One that
				 * sleeps is woken once, at the end (rx_publish()),
				 * not for every piece. */
				c->rx_head = head;
				rx_publish_head(c);
				c->rx_pub_quiet = true;
			}
			continue;
		}
		r = s ? be__xrq_take(&s->rq) : NULL;
		if (!r) {
			err = BE_XWC_RNR_RETRY_EXC;
			break;
		}
		w = &wc[got++];
		w->wr_id = r->wr_id;
		w->status = BE_XWC_SUCCESS;
		w->byte_len = blen;
		w->imm = 0;
		w->conn = &c->base;
		w->srq = &s->base;
		w->vendor_err = 0;
		w->rx_buf = NULL;
		if (op == SHM_REC_SEND) {
			w->opcode = BE_XWC_RECV;
			if (blen > r->sge.length) {
				w->status = BE_XWC_LOC_LEN_ERR;
				err = BE_XWC_REM_OP_ERR;
				break;
			}
			if (blen && be__shm_local_check(c->dev, r->sge.lkey, r->sge.addr, blen)) {
				w->status = BE_XWC_LOC_PROT_ERR;
				err = BE_XWC_REM_OP_ERR;
				break;
			}
			memcpy((void *)(uintptr_t)r->sge.addr, rec->data, blen);
		} else {
			w->opcode = BE_XWC_RECV_IMM;
			w->imm = shm_load_rlx(&rec->imm);
			if (op == SHM_REC_WRITE_IMM_INL && blen)
				memcpy((void *)(uintptr_t)in.raddr, rec->data + sizeof(in), blen);
			if (slot) {
				/* The slot's buffer is whole: it goes with the
				 * completion (xport.h, BE_XWR_F_RX_ALLOC). */
				w->byte_len = slot->len;
				w->rx_buf = slot->buf;
				slot->buf = NULL;
			}
		}
		rx_srq_limit(c, s);
		if (tag & SHM_TAG_SIGNALED)
			c->rx_pub_wake = true;
		head += len;
	}
	c->rx_head = head;
	if (!got && !err && head != head0) {
		/* Only WRITEs placed: no answer will be posted behind which
		 * to publish, so publish now (the caller may not poll
		 * again). */
		rx_publish(c);
		/* We emptied a ring whose producer waits for space: it must
		 * run now, and a caller spinning on this poll may hold its
		 * CPU. */
		if (drained)
			sched_yield();
	}
	if (err) {
		rx_publish(c);
		if (err == BE_XWC_GENERAL_ERR)
			be_log_err("shm: malformed record from peer pid %d", (int)c->peer_pid);
		shm_store_rlx(&c->rx_ctl->err_pos, head);
		shm_store_rel(&c->rx_ctl->err_status, err);
		rx_wake_sender(c);
		be__shm_conn_error(c, BE_XWC_WR_FLUSH_ERR,
				   err == BE_XWC_GENERAL_ERR ? -EPROTO : -EREMOTEIO);
	}
	return got;
}

/* Every SHM_HUP_CHECK_POLLS polls: did a peer of this cq hang up? */
static void cq_check_hup(struct shm_cq *cq)
{
	struct epoll_event ev[8];
	int i, n;

	n = epoll_wait(cq->c.wake.epfd, ev, 8, 0);
	for (i = 0; i < n; i++) {
		struct shm_ph *ph = ev[i].data.ptr;

		if (ph->kind == SHM_PH_CONN)
			be__shm_conn_read_sock(container_of(ph, struct shm_conn, ph));
	}
}

int be__shm_cq_poll(struct be_xcq *xcq, struct be_xwc *wc, int n)
{
	struct shm_cq *cq;
	struct be__list *e, *next;
	bool blocked = false;
	int got = 0;

	if (!xcq || n < 0 || (n && !wc))
		return -EINVAL;
	cq = to_scq(xcq);
	/* After a wakeup that no kick explains (cq_ack) or every
	 * SHM_HUP_CHECK_POLLS polls: one epoll_wait tells whether a peer
	 * hung up. */
	if (BE_UNLIKELY(++cq->polls % SHM_HUP_CHECK_POLLS == 0 || cq->hup_check)) {
		cq->hup_check = false;
		cq_check_hup(cq);
	}
	got = be__wcq_pop(&cq->lq, wc, n);
	for (e = cq->send_conns.next; e != &cq->send_conns && got < n; e = next) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, s_link);

		next = e->next;
		if (c->rcq != cq && c->state == SHM_CS_CONNECTED)
			rx_publish(c); /* the recv loop below does the others */
		if (c->sq_head != c->sq_tail) {
			got += cq_poll_tx(c, wc + got, n - got);
			blocked |= c->sq_tx != c->sq_tail;
		}
	}
	for (e = cq->recv_conns.next; e != &cq->recv_conns && got < n; e = next) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, r_link);

		next = e->next;
		got += cq_poll_rx(c, wc + got, n - got);
	}
	/* Fairness: when the batch filled up, start with another conn next time. */
	if (got == n && cq->recv_conns.next != cq->recv_conns.prev) {
		e = cq->recv_conns.next;
		be__list_del_init(e);
		be__list_add_tail(&cq->recv_conns, e);
	}
	/* Nothing done and WRs wait for ring space: only the peer's consumer
	 * can make progress now, and a caller spinning on this poll may be
	 * taking the CPU it needs (two processes, one core). */
	if (!got && blocked)
		sched_yield();
	return got;
}

int be__shm_cq_arm(struct be_xcq *xcq)
{
	struct shm_cq *cq;
	struct be__list *e;
	bool pending;

	if (!xcq)
		return -EINVAL;
	cq = to_scq(xcq);
	cq->armed = true;
	be__list_for_each(e, &cq->send_conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, s_link);

		if (c->state != SHM_CS_CONNECTED)
			continue;
		if (c->rcq != cq)
			rx_publish(c); /* the recv loop below does the others */
		__atomic_store_n(&c->tx_ctl->tx_armed, 1, __ATOMIC_SEQ_CST);
	}
	be__list_for_each(e, &cq->recv_conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, r_link);

		if (c->state != SHM_CS_CONNECTED)
			continue;
		rx_publish(c);
		__atomic_store_n(&c->rx_ctl->rx_armed, 1, __ATOMIC_SEQ_CST);
	}
	shm_fence();
	/* Re-check everything the flags cover, so no wakeup is lost. */
	pending = be__wcq_len(&cq->lq) != 0;
	for (e = cq->send_conns.next; e != &cq->send_conns && !pending; e = e->next) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, s_link);

		pending = sq_ready(c) ||
			  (c->sq_tx != c->sq_tail && c->state == SHM_CS_CONNECTED &&
			   shm_load_acq(&c->tx_ctl->head) != c->tx_head);
	}
	for (e = cq->recv_conns.next; e != &cq->recv_conns && !pending; e = e->next) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, r_link);
		struct shm_rec *rec;
		uint64_t tag;

		if (c->state != SHM_CS_CONNECTED || c->rx_stalled)
			continue;
		rec = (struct shm_rec *)(void *)(c->rx_data + (c->rx_head & (c->ring_size - 1)));
		tag = shm_load_acq(&rec->tag);
		pending = (tag & SHM_TAG_VALID) && (tag & SHM_TAG_POS_MASK) == c->rx_head;
	}
	if (pending)
		be__shm_cq_kick(cq);
	return 0;
}

/* ---- grants ------------------------------------------------------------ */

int be__shm_grant(struct be_xconn *xc, void *addr, size_t len, uint32_t *rkey)
{
	struct shm_conn *c;

	if (!xc || !addr || !rkey)
		return -EINVAL;
	c = to_sconn(xc);
	if (c->state == SHM_CS_ERROR || c->state == SHM_CS_CLOSED)
		return -ENOTCONN;
	return be__xgrants_add(&c->grants, (uint64_t)(uintptr_t)addr, len, rkey);
}

/* A record is checked and placed within one poll on this thread, so a
 * grant revoked between polls is never written again. */
int be__shm_revoke(struct be_xconn *xc, uint32_t rkey, uint64_t cookie)
{
	(void)cookie; /* a grant ends at once here */
	if (xc)
		be__xgrants_del(&to_sconn(xc)->grants, rkey);
	return 0;
}
