/*
 * ring.h - the shared-memory layout of one shm connection.
 *
 * Model. A connection is one memfd ("the segment"), created by the
 * connecting side and mapped MAP_SHARED by both processes. It holds two
 * single-producer single-consumer byte rings, one per direction: ring 0
 * carries records from the connector to the acceptor, ring 1 the other way.
 *
 *   [ctl 0][ctl 1] (one page)  [ring 0 data][ring 1 data]
 *
 * A ring's data area is a power of two of bytes, cut into 64-byte lines.
 * A record starts on a line boundary and never wraps: a PAD record fills the
 * tail of the area when the next record does not fit. Its first word, the
 * tag, is written last with release semantics and encodes the record's ring
 * position, so the consumer learns of a record by polling one cache line
 * (no separate tail index to transfer):
 *
 *   tag = pos | op << 1 | signaled << 4 | 1      (pos is a multiple of 64)
 *
 * The producer writes a record's later lines before its first, and the
 * consumer reads the line after the tag's together with it, so a two-line
 * record comes over in one transfer (data.c, sq_fill_record()).
 *
 * A stale word can never look like a valid tag at the consumer's position
 * because the consumer zeroes the first word of every line it consumed
 * before it publishes its head: every line of the free space starts with a
 * zero word, whatever payload bytes were there before.
 *
 * The consumer publishes how far it consumed in ctl.head (its own cache
 * line); the producer reads it to reuse space and, since records are
 * consumed in order, as the acknowledgement of every SEND and WRITE_IMM up
 * to that position. It publishes after its next post on the conn, at its
 * next poll or before sleeping, not as it consumes (data.c,
 * rx_publish()), so the stores do not hold back the answer it posts. A consumer-side failure (no receive posted, receive too
 * small) is reported in ctl.err_pos/err_status and the consumer stops.
 *
 * Wakeups. Each side may sleep on its cq fd. Before sleeping it sets
 * rx_armed (consumer, waiting for records) or tx_armed (producer, waiting
 * for acknowledgements or space) and re-checks the ring; the other side,
 * after publishing, issues a full fence, reads the flag and, if set,
 * clears it and writes the sleeper's eventfd. This Dekker pattern (store
 * flag; fence; load data / store data; fence; load flag) cannot lose a
 * wakeup, and costs no syscall while nobody sleeps.
 *
 * Nothing in the segment is trusted: a peer may write anything there, so
 * every length and position read from it is checked before use.
 */
#ifndef BE_XPORT_SHM_RING_H
#define BE_XPORT_SHM_RING_H

#include <stdint.h>

#define SHM_LINE 64u
#define SHM_SEG_CTL_BYTES 4096u
#define SHM_REC_HDR 16u

enum shm_rec_op {
	SHM_REC_PAD = 1,
	SHM_REC_SEND = 2,
	SHM_REC_WRITE_IMM = 3,     /* one line: its data came in WRITE records */
	SHM_REC_WRITE_IMM_INL = 4, /* data in the record, placed after the receive */
	SHM_REC_WRITE = 5,         /* target + data: the consumer places it */
	SHM_REC_WRITE_IMM_RXA = 6, /* one line: a WRITE_IMM ending an RX_ALLOC slot */
};

/*
 * WRITEs. The writer never maps the target: a WRITE's data travels in
 * WRITE records, each naming its target (struct shm_rec_inl) and cut to
 * the ring's free space (data.c, write_reserve()), and the consumer, the
 * target's owner, copies each into place once it checked it against the
 * live grants of the conn (xport.h's grant op). A WRITE_IMM is its WRITE records followed
 * by a one-line WRITE_IMM record with the immediate and the length,
 * which takes a receive; if that is refused (RNR) the data is in place
 * already, like a multi-packet WRITE_IMM whose last packet is refused
 * (the core's credits rule it out). One of up to SHM_IMM_INLINE bytes is
 * a single WRITE_IMM_INL record instead, placed only after its receive
 * was taken, so a refused one leaves the target untouched.
 */
#define SHM_IMM_INLINE 4096u

/*
 * RX_ALLOC WRITEs (xport.h, BE_XWR_F_RX_ALLOC): their WRITE and
 * WRITE_IMM_INL records carry SHM_INL_RX_ALLOC in the target's flags,
 * with the slot as rkey and the offset in its buffer as raddr; a WRITE
 * record at offset 0 opens the slot and carries the buffer's length in
 * imm. Such a WRITE_IMM ends with a WRITE_IMM_RXA record instead of a
 * WRITE_IMM one, its target (slot, offset just past its data) in the
 * line. The consumer allocates the buffer as the opening record arrives
 * (grant.h, be__xaslot_check()), so such a WRITE needs no grant and no
 * WriteRequest round trip ahead; while it cannot allocate, it leaves the
 * record where it is and reads that ring no further.
 */
#define SHM_INL_RX_ALLOC 0x1u

/* WRITE records carry at most SHM_WRITE_REC_MAX data bytes of a ring of
 * @size bytes (the consumer refuses more than a quarter ring), at least
 * SHM_WRITE_REC_MIN unless cut at the ring's end or the WRITE's end; the
 * consumer publishes its head every SHM_WRITE_PUB bytes of them. The
 * consumer copies a record out only once its tag is there, so the cap
 * (SHM_WRITE_REC_CAP) is what a message waits between the two copies:
 * a 64 KiB message in two records arrives in 0.8x the time of one. */
#define SHM_WRITE_REC_CAP ((uint64_t)32 << 10)
#define SHM_WRITE_REC_MAX(size) \
	((uint64_t)(size) / 16 < SHM_WRITE_REC_CAP ? (uint64_t)(size) / 16 : SHM_WRITE_REC_CAP)
#define SHM_WRITE_REC_MIN(size) (SHM_WRITE_REC_MAX(size) / 4)
#define SHM_WRITE_PUB(size) ((uint64_t)(size) / 8)

/* What follows the header of a WRITE or WRITE_IMM_INL record, before the
 * data. */
struct shm_rec_inl {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t flags;  /* SHM_INL_RX_ALLOC, else 0 */
};

#define SHM_TAG_VALID 0x1u
#define SHM_TAG_SIGNALED 0x10u
#define SHM_TAG_POS_MASK (~(uint64_t)(SHM_LINE - 1))

struct shm_ring_ctl {
	/* Written by the consumer: bytes consumed, monotonic. */
	_Alignas(64) uint64_t head;
	/* Consumer's recv cq asleep: the producer wakes it. */
	_Alignas(64) uint32_t rx_armed;
	/* Producer's send cq asleep: the consumer wakes it on progress. */
	_Alignas(64) uint32_t tx_armed;
	uint32_t tx_want_space;  /* producer has WRs waiting for ring space */
	/* Consumer failure: status for the producer's WR whose records
	 * hold err_pos. */
	_Alignas(64) uint32_t err_status;
	uint32_t pad0;
	uint64_t err_pos;
	_Alignas(64) uint8_t end[];
};

/* One record. Payload (SEND) follows the 16-byte header. */
struct shm_rec {
	uint64_t tag;
	uint32_t byte_len;   /* SEND, WRITE*: data bytes; WRITE_IMM: bytes written */
	uint32_t imm;        /* WRITE_IMM */
	uint8_t data[];
};

static inline uint64_t shm_rec_len(uint32_t op, uint32_t byte_len)
{
	uint64_t h = SHM_REC_HDR;

	if (op == SHM_REC_WRITE_IMM_INL || op == SHM_REC_WRITE)
		h += sizeof(struct shm_rec_inl);
	else if (op != SHM_REC_SEND)
		return SHM_LINE;
	return (h + byte_len + SHM_LINE - 1) & ~(uint64_t)(SHM_LINE - 1);
}

static inline uint64_t shm_tag_make(uint64_t pos, uint32_t op, int signaled)
{
	return pos | (uint64_t)op << 1 | (signaled ? SHM_TAG_SIGNALED : 0) | SHM_TAG_VALID;
}

static inline uint32_t shm_tag_op(uint64_t tag)
{
	return (uint32_t)(tag >> 1) & 7u;
}

#define shm_load_acq(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define shm_load_rlx(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define shm_store_rel(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define shm_store_rlx(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#if defined(__SANITIZE_THREAD__)
/* GCC's TSan does not model fences; a seq_cst RMW is a full barrier too. */
#define shm_fence()                                                          \
	do {                                                                 \
		static uint32_t shm_fence_word;                              \
		__atomic_fetch_add(&shm_fence_word, 0, __ATOMIC_SEQ_CST);    \
	} while (0)
#elif defined(__x86_64__)
/* A locked add on the stack is a full barrier on x86 and cheaper than
 * mfence (Linux's smp_mb() does the same). */
#define shm_fence() __asm__ __volatile__("lock; addl $0,-4(%%rsp)" ::: "memory", "cc")
#else
#define shm_fence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

#endif /* BE_XPORT_SHM_RING_H */
