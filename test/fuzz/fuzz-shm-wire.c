/*
 * Check that the shm transport's checks of what a peer sends survive any
 * bytes, and keep what shm.h promises of what they accept:
 *
 *   a socket message (the handshake's REQ, ACC, REJ and BYE;
 *   be__shm_msg_check()): a known type (the retired region announcements
 *   refused), as long as its type needs, with the fds it carries, private
 *   data within BE_XPORT_PRIV_MAX, a REQ's ring size a power of two in
 *   range; nothing past that length changes the verdict.
 *
 *   the records a peer writes into a ring (ring.h; be__shm_rec_check()),
 *   walked as the consumer walks them (cq_poll_rx()): each one of the ops
 *   a producer writes, whole inside the ring, a SEND or WRITE record no
 *   larger than a quarter ring, an inline WRITE_IMM within
 *   SHM_IMM_INLINE; the target of a WRITE or inline WRITE_IMM inside a
 *   live grant of the conn (be__xgrants_check(), over a real buffer);
 *   RX_ALLOC records' slots are be__xaslot_check()'s, fuzzed with tcp's
 *   frames (fuzz-tcp-frame.c). Payloads are copied out of an exact-size ring into exact-size
 *   buffers and granted memory, so a read or write past any of them is
 *   an ASan report. The walk ends, as the tags carry their ring position.
 *
 * A refused input comes with a reason. What needs more of a conn's state
 * (which message a state takes, the segment's seals and size, a posted
 * receive) is cm.c's and data.c's, exercised by the shm conformance
 * tests.
 *
 * Input: byte 0 picks the parser (even: a socket message, byte 1 the
 * number of fds that came with it; odd: a ring, byte 1 the line and
 * byte 2 the lap of the consumer's head), the rest is what the peer sent
 * (a ring's bytes from the consumer's head on, wrapping at its end; the
 * rest of the ring is zero). A record's rkey below NGRANTS names the
 * harness's grant of that index (the peer knows the keys it was given:
 * the real ones are random), and its target address is an offset from
 * the granted buffer.
 */
#include <stddef.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "test.h"
#include "xport/grant.h"
#include "xport/shm/shm.h"

/* The harness's ring: small, so inputs cover it, and the rules are the
 * same at every size. */
#define RING 4096u

static unsigned long n_ok, n_refused, n_msgs, n_recs, n_writes;

static void refused(const char *why)
{
	ASSERT(why && why[0]);
	n_refused++;
}

static void msg_one(const uint8_t *p, size_t n, int nfds)
{
	const struct shm_msg *m = (const void *)p;
	const char *why;
	static struct shm_msg copy;
	size_t need;

	n_msgs++;
	/* A longer message is cut by recvmsg (MSG_TRUNC): refused before. */
	if (n > sizeof(struct shm_msg))
		return;
	why = be__shm_msg_check(m, n, nfds);
	if (why) {
		refused(why);
		return;
	}
	ASSERT(n >= offsetof(struct shm_msg, u) && m->magic == SHM_MSG_MAGIC);
	ASSERT(m->type >= SHM_MSG_REQ && m->type <= SHM_MSG_BYE && !m->count);
	need = be__shm_msg_len(m->type, m->count);
	ASSERT(need <= n);
	switch (m->type) {
	case SHM_MSG_REQ:
		ASSERT_EQ(nfds, 3);
		ASSERT(m->u.cm.ring_size >= SHM_MIN_RING && m->u.cm.ring_size <= SHM_MAX_RING &&
		       !(m->u.cm.ring_size & (m->u.cm.ring_size - 1)));
		/* fall through */
	case SHM_MSG_ACC:
	case SHM_MSG_REJ:
		ASSERT(m->type != SHM_MSG_ACC || nfds == 2);
		ASSERT_LE(m->u.cm.priv_len, BE_XPORT_PRIV_MAX);
		ASSERT_LE(offsetof(struct shm_msg, u.cm.priv) + m->u.cm.priv_len, n);
		break;
	default:
		break;
	}
	/* Only the bytes its type covers decide: the same
	 * message without what follows them passes too. */
	memset(&copy, 0, sizeof(copy));
	memcpy(&copy, p, need);
	ASSERT(!be__shm_msg_check(&copy, need, nfds));
	n_ok++;
}

static uint64_t ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The consumer's walk over a ring holding @p, from @head on. */
/* The conn's grants: NGRANTS ranges of one buffer, made once (their keys
 * come from getrandom()). */
#define NGRANTS 2
#define GRANTED 4096u
static uint8_t granted[GRANTED];
static struct be__xgrants grants;
static uint32_t grant_key[NGRANTS];

static void grants_setup(void)
{
	uint32_t i;

	if (grant_key[0])
		return;
	be__xgrants_init(&grants);
	for (i = 0; i < NGRANTS; i++)
		ASSERT_EQ(be__xgrants_add(&grants, (uintptr_t)granted + i * (GRANTED / NGRANTS),
					  GRANTED / NGRANTS, &grant_key[i]),
			  0);
}

/*
 * A WRITE's or inline WRITE_IMM's target, as cq_poll_rx() checks and
 * places it: refused unless inside a live grant; placed into the granted
 * buffer (ASan sees a byte past it). Returns 0 or -1 (refused).
 */
static int place(const uint8_t *rec, uint32_t blen)
{
	struct shm_rec_inl in;
	uint64_t a, base;
	uint32_t g;

	memcpy(&in, rec + SHM_REC_HDR, sizeof(in));
	if (in.rkey < NGRANTS)
		in.rkey = grant_key[in.rkey];
	in.raddr += (uintptr_t)granted;
	if (blen && !be__xgrants_check(&grants, in.rkey, in.raddr, blen))
		return -1;
	if (!blen)
		return 0;
	for (g = 0; g < NGRANTS && grant_key[g] != in.rkey; g++)
		;
	ASSERT_LT(g, NGRANTS);
	a = in.raddr;
	base = (uintptr_t)granted + g * (GRANTED / NGRANTS);
	ASSERT(a >= base && a - base + blen <= GRANTED / NGRANTS);
	memcpy((void *)(uintptr_t)a, rec + SHM_REC_HDR + sizeof(in), blen);
	n_writes++;
	return 0;
}

/* The consumer's walk over a ring holding @p, from @head on. */
static void ring_one(const uint8_t *p, size_t n, uint64_t head)
{
	/* Globals of exact sizes: ASan puts redzones around them too. */
	static uint8_t ring[RING], recv[RING / 4];
	uint64_t start = head, mask = RING - 1, steps = 0;
	size_t i;

	grants_setup();
	memset(ring, 0, sizeof(ring));
	/* What the peer wrote, from the consumer's position on. */
	n = n < RING ? n : RING;
	i = RING - (start & mask);
	memcpy(ring + (start & mask), p, n < i ? n : i);
	if (n > i)
		memcpy(ring, p + i, n - i);
	for (;;) {
		uint64_t off = head & mask, tag = ld64(ring + off), len;
		uint32_t op, blen;

		/* Each line holds one tag, which names one position. */
		ASSERT_LE(++steps, RING / SHM_LINE + 1);
		if (!(tag & SHM_TAG_VALID) || (tag & SHM_TAG_POS_MASK) != head)
			break;
		op = shm_tag_op(tag);
		blen = ld32(ring + off + 8);
		if (op == SHM_REC_PAD) {
			memset(ring + off, 0, 8); /* consumed, as rx_zero_to() */
			head += RING - off;
			continue;
		}
		len = be__shm_rec_check(op, blen, off, RING);
		if (!len) {
			refused("malformed record");
			return;
		}
		ASSERT(op == SHM_REC_SEND || op == SHM_REC_WRITE_IMM ||
		       op == SHM_REC_WRITE_IMM_INL || op == SHM_REC_WRITE ||
		       op == SHM_REC_WRITE_IMM_RXA);
		ASSERT(len >= SHM_LINE && len % SHM_LINE == 0 && off + len <= RING);
		if (op == SHM_REC_SEND) {
			ASSERT_LE(blen, RING / 4);
			ASSERT_LE(SHM_REC_HDR + blen, len);
			memcpy(recv, ring + off + SHM_REC_HDR, blen);
		} else if (op == SHM_REC_WRITE_IMM_INL || op == SHM_REC_WRITE) {
			ASSERT_LE(blen, op == SHM_REC_WRITE ? RING / 4 : SHM_IMM_INLINE);
			ASSERT_LE(SHM_REC_HDR + sizeof(struct shm_rec_inl) + blen, len);
			if (place(ring + off, blen)) {
				refused("WRITE outside a live grant");
				return;
			}
		} else {
			/* WRITE_IMM, WRITE_IMM_RXA: its data came in WRITE records */
			ASSERT_EQ(len, SHM_LINE);
		}
		memset(ring + off, 0, 8);
		head += len;
		n_recs++;
	}
	ASSERT_LE(head - start, 2 * (uint64_t)RING);
	n_ok++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size < 3)
		return 0;
	copy = fuzz_body(data, size, 3);
	if (!(data[0] & 1))
		msg_one(copy, size - 3, data[1] % 5);
	else
		ring_one(copy, size - 3,
			 (uint64_t)(data[2] % 4) * RING + (uint64_t)(data[1] % (RING / SHM_LINE)) * SHM_LINE);
	free(copy);
	return 0;
}

/* ---- seeds: messages as cm.c builds them, rings as data.c lays them ---- */

static void put_msg(void (*put)(const char *, const char *, const void *, size_t),
		    const char *dir, const char *name, const struct shm_msg *m, int nfds)
{
	static uint8_t b[3 + sizeof(struct shm_msg)];
	size_t n = be__shm_msg_len(m->type, m->count);

	b[0] = 0;
	b[1] = (uint8_t)nfds;
	b[2] = 0;
	memcpy(b + 3, m, n);
	put(dir, name, b, 3 + n);
}

/* A record at @pos of @ring (as sq_fill_record() lays it out). */
static uint64_t put_rec(uint8_t *ring, uint64_t pos, uint32_t op, uint32_t blen, uint32_t imm)
{
	uint64_t off = pos & (RING - 1), tag = shm_tag_make(pos, op, 1);
	uint32_t i;

	memcpy(ring + off, &tag, 8);
	memcpy(ring + off + 8, &blen, 4);
	memcpy(ring + off + 12, &imm, 4);
	if (op == SHM_REC_WRITE_IMM_INL || op == SHM_REC_WRITE) {
		/* Grant 1 of the harness, at an offset into the buffer. */
		struct shm_rec_inl in = { .raddr = GRANTED / NGRANTS + 64 * (pos & 7), .rkey = 1 };

		memcpy(ring + off + SHM_REC_HDR, &in, sizeof(in));
		off += sizeof(in);
	}
	for (i = 0; op != SHM_REC_WRITE_IMM && i < blen; i++)
		ring[off + SHM_REC_HDR + i] = (uint8_t)(i * 13 + op);
	return pos + (op == SHM_REC_PAD ? RING - (pos & (RING - 1)) : shm_rec_len(op, blen));
}

/* The ring image @img as the harness takes it: the consumer at @start,
 * the records up to @end. */
static void put_ring(void (*put)(const char *, const char *, const void *, size_t),
		     const char *dir, const char *name, const uint8_t *img, uint64_t start,
		     uint64_t end)
{
	static uint8_t b[3 + RING];
	uint64_t i;

	ASSERT_LE(end - start, RING);
	b[0] = 1;
	b[1] = (uint8_t)((start & (RING - 1)) / SHM_LINE);
	b[2] = (uint8_t)(start / RING);
	for (i = 0; i < end - start; i++)
		b[3 + i] = img[(start + i) & (RING - 1)];
	put(dir, name, b, 3 + (size_t)(end - start));
}

void fuzz_seeds(void (*put)(const char *dir, const char *name, const void *p, size_t n),
		const char *dir)
{
	static struct shm_msg m;
	static uint8_t img[RING];
	uint64_t pos, start;

	/* The handshake, as cm_send_simple() builds it. */
	memset(&m, 0, sizeof(m));
	m.magic = SHM_MSG_MAGIC;
	m.type = SHM_MSG_REQ;
	m.u.cm.ring_size = SHM_DEFAULT_RING;
	m.u.cm.priv_len = 56;
	memset(m.u.cm.priv, 0xa5, 56);
	put_msg(put, dir, "msg-req", &m, 3);
	m.type = SHM_MSG_ACC;
	put_msg(put, dir, "msg-acc", &m, 2);
	m.type = SHM_MSG_REJ;
	m.u.cm.priv_len = 8;
	put_msg(put, dir, "msg-rej", &m, 0);
	memset(&m, 0, sizeof(m));
	m.magic = SHM_MSG_MAGIC;
	m.type = SHM_MSG_BYE;
	put_msg(put, dir, "msg-bye", &m, 0);
	/* A ring from its start: a SEND, a WRITE in two records and its
	 * WRITE_IMM, an inline WRITE_IMM. */
	memset(img, 0, sizeof(img));
	pos = put_rec(img, 0, SHM_REC_SEND, 100, 0);
	pos = put_rec(img, pos, SHM_REC_WRITE, 300, 0);
	pos = put_rec(img, pos, SHM_REC_WRITE, 200, 0);
	pos = put_rec(img, pos, SHM_REC_WRITE_IMM, 500, 0x00100001);
	pos = put_rec(img, pos, SHM_REC_WRITE_IMM_INL, 200, 0x00200002);
	pos = put_rec(img, pos, SHM_REC_SEND, 0, 0);
	put_ring(put, dir, "ring-records", img, 0, pos);
	/* The second lap: a SEND near the end, a PAD, then a SEND from the
	 * ring's start. */
	memset(img, 0, sizeof(img));
	start = RING + RING - 4 * SHM_LINE;
	pos = put_rec(img, start, SHM_REC_SEND, 120, 0);
	pos = put_rec(img, pos, SHM_REC_PAD, 0, 0);
	pos = put_rec(img, pos, SHM_REC_SEND, 64, 0);
	put_ring(put, dir, "ring-wrap", img, start, pos);
}

void fuzz_summary(unsigned long iters)
{
	printf("shm-wire: %lu accepted, %lu refused, %lu messages, %lu records, %lu writes placed\n",
	       n_ok, n_refused, n_msgs, n_recs, n_writes);
	ASSERT_GT(n_refused, iters / 10);
	ASSERT_GT(n_ok, iters / 100);
	ASSERT_GT(n_recs, iters / 100);
	ASSERT_GT(n_writes, iters / 1000);
}
