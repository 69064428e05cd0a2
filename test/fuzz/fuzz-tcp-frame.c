/*
 * Check that the tcp transport's frame checks (src/xport/tcp/: the
 * HELLO / ACCEPT / REJECT handshake, then the 32-byte header of every
 * frame of an established conn and the RX_ALLOC slots its AWRITE frames
 * fill) survive any bytes a peer can send, and keep what tcp.h promises
 * of what they accept: a handshake frame of a type the conn waits for,
 * no more than BE_XPORT_PRIV_MAX bytes of private data, nothing behind a
 * HELLO or a REJECT; a frame of a known data-phase type with its fields
 * (no payload on ACK, NAK and BYE, data at most TCP_MAX_MSG); an AWRITE
 * payload that lies inside its slot's buffer, frames of a slot in order,
 * the AWRITE_IMM ending it exactly. Every accepted header packs back to
 * the same 32 bytes; a refused input has a reason. The harness places
 * AWRITE payloads into real buffers of the size the opening frame asked
 * for, so a write outside one is an ASan report.
 *
 * What needs a conn's state beyond its slots (a posted receive, a live
 * grant, the ack of a frame sent) is checked by data.c and exercised by
 * test/xport/test-malformed.c with a raw peer.
 *
 * Input: byte 0 picks the role (0: acceptor waiting for a HELLO; 1:
 * connector waiting for the answer, then the frames behind an ACCEPT;
 * 2: an established conn whose Engine takes RX_ALLOC writes; 3: one
 * that does not), the rest is what the peer sent.
 */
#include <string.h>

#include "fuzz/fuzz.h"
#include "test.h"
#include "xport/tcp/tcp.h"

/* Largest RX_ALLOC buffer the harness's rx_alloc hands out: anything
 * larger it refuses, as an Engine over its limit does. */
#define ALLOC_CAP (1u << 20)

static unsigned long n_ok, n_refused, n_frames, n_awrites;

static void hdr_roundtrip(const struct tcp_hdr *h, const uint8_t *p)
{
	uint8_t enc[TCP_HDR_LEN];
	struct tcp_hdr g;

	be__tcp_hdr_pack(enc, h);
	ASSERT(!memcmp(enc, p, TCP_HDR_LEN));
	be__tcp_hdr_unpack(&g, enc);
	ASSERT(!memcmp(&g, h, sizeof(g)));
}

static void refused(const char *why)
{
	ASSERT(why && why[0]);
	n_refused++;
}

/*
 * The frames of an established conn, as conn_rx() takes them from its
 * staging buffer: header checks, then the payload (skipped, or placed
 * for an AWRITE). Stops at a refusal, at a NAK or BYE (the conn ends),
 * or where the input ends mid-frame (more would come from the socket).
 */
static void stream(const uint8_t *p, size_t n, int rx_alloc)
{
	struct be__xaslot *slots = NULL;
	const char *why = NULL;
	size_t off = 0;
	uint32_t i;

	while (n - off >= TCP_HDR_LEN) {
		const uint8_t *body = p + off + TCP_HDR_LEN;
		size_t have = n - off - TCP_HDR_LEN;
		struct be__xaslot *a;
		struct tcp_hdr h;
		uint64_t open;

		be__tcp_hdr_unpack(&h, p + off);
		hdr_roundtrip(&h, p + off);
		why = be__tcp_hdr_check(&h);
		if (why)
			goto refuse;
		ASSERT(h.magic == TCP_MAGIC && !h.rsvd);
		why = be__tcp_frame_check(&h);
		if (why)
			goto refuse;
		n_frames++;
		ASSERT(h.type >= TCP_F_SEND && h.type <= TCP_F_AWRITE_IMM);
		if (h.type == TCP_F_ACK || h.type == TCP_F_NAK || h.type == TCP_F_BYE) {
			ASSERT_EQ(h.len, 0);
			ASSERT(h.type == TCP_F_NAK || !h.status);
			off += TCP_HDR_LEN;
			if (h.type == TCP_F_ACK)
				continue;
			break; /* the conn ends */
		}
		ASSERT(!h.status && h.len <= TCP_MAX_MSG);
		if (h.type != TCP_F_AWRITE && h.type != TCP_F_AWRITE_IMM) {
			/* SEND, WRITE: the receive or the grant decides. */
			if (have < h.len)
				break;
			off += TCP_HDR_LEN + h.len;
			continue;
		}
		if (!rx_alloc) {
			why = "RX_ALLOC write to no slot";
			goto refuse;
		}
		why = be__tcp_aslot_check(&h, slots, &open);
		if (why)
			goto refuse;
		ASSERT_LT(h.rkey, TCP_MAX_RX_ALLOC);
		if (!slots) {
			slots = calloc(TCP_MAX_RX_ALLOC, sizeof(*slots));
			ASSERT(slots);
		}
		a = &slots[h.rkey];
		if (open) {
			/* Opens the slot, at offset 0, with the length to allocate. */
			ASSERT(!a->buf && !h.addr && open >= h.len);
			ASSERT(h.type == TCP_F_AWRITE_IMM ? open == h.len : open > h.len);
			if (open > ALLOC_CAP) {
				why = "RX_ALLOC buffer refused";
				goto refuse;
			}
			a->buf = malloc(open); /* exactly: ASan sees one byte past */
			ASSERT(a->buf);
			a->len = (uint32_t)open;
			a->got = 0;
		}
		ASSERT(a->buf && h.addr == a->got && (uint64_t)a->got + h.len <= a->len);
		if (h.type == TCP_F_AWRITE_IMM)
			ASSERT_EQ(a->got + h.len, a->len);
		else
			ASSERT_LT(a->got + h.len, a->len);
		n_awrites++;
		memcpy(a->buf + a->got, body, have < h.len ? have : h.len);
		if (have < h.len)
			break;
		a->got += h.len;
		if (h.type == TCP_F_AWRITE_IMM) {
			free(a->buf); /* delivered */
			a->buf = NULL;
		}
		off += TCP_HDR_LEN + h.len;
	}
	n_ok++;
	goto out;
refuse:
	refused(why);
out:
	if (slots) {
		for (i = 0; i < TCP_MAX_RX_ALLOC; i++)
			free(slots[i].buf);
		free(slots);
	}
}

/* A handshake frame; a connector goes on with what follows an ACCEPT. */
static void handshake(const uint8_t *p, size_t n, uint8_t expect)
{
	uint32_t avail = n > TCP_RBUF_SIZE ? TCP_RBUF_SIZE : (uint32_t)n, whole;
	struct tcp_hdr h;
	const char *why = be__tcp_hs_check(p, avail, expect, &h);

	if (why) {
		ASSERT(avail >= TCP_HDR_LEN);
		refused(why);
		return;
	}
	if (avail < TCP_HDR_LEN) {
		n_ok++; /* more to come */
		return;
	}
	hdr_roundtrip(&h, p);
	ASSERT(h.magic == TCP_MAGIC && !h.rsvd && !h.status && !h.ack);
	ASSERT_LE(h.len, BE_XPORT_PRIV_MAX);
	whole = TCP_HDR_LEN + h.len;
	if (avail < whole) {
		n_ok++; /* more to come */
		return;
	}
	if (expect == TCP_F_HELLO) {
		ASSERT(h.type == TCP_F_HELLO && h.addr == TCP_PROTO_VERSION && !h.imm && !h.rkey);
		ASSERT_EQ(avail, whole);
		n_ok++;
		return;
	}
	ASSERT(h.type == TCP_F_ACCEPT || (h.type == TCP_F_REJECT && avail == whole));
	if (h.type == TCP_F_REJECT) {
		n_ok++;
		return;
	}
	stream(p + whole, avail - whole, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (!size)
		return 0;
	copy = fuzz_body(data, size, 1);
	switch (data[0] % 4) {
	case 0: handshake(copy, size - 1, TCP_F_HELLO); break;
	case 1: handshake(copy, size - 1, TCP_F_ACCEPT); break;
	default: stream(copy, size - 1, data[0] % 4 == 2); break;
	}
	free(copy);
	return 0;
}

/* ---- seeds: handshakes and frame streams, from the header encoder ---- */

struct seed {
	uint8_t b[1024];
	size_t n;
};

static void seed_frame(struct seed *s, uint8_t type, uint32_t len, uint32_t rkey, uint64_t addr,
		       uint32_t imm, uint32_t ack)
{
	struct tcp_hdr h = { .magic = TCP_MAGIC, .type = type, .len = len, .rkey = rkey,
			     .addr = addr, .imm = imm, .ack = ack };
	uint32_t i;

	ASSERT_LE(s->n + TCP_HDR_LEN + len, sizeof(s->b));
	be__tcp_hdr_pack(s->b + s->n, &h);
	s->n += TCP_HDR_LEN;
	for (i = 0; i < len; i++)
		s->b[s->n++] = (uint8_t)(i * 7 + type);
}

void fuzz_seeds(void (*put)(const char *dir, const char *name, const void *p, size_t n),
		const char *dir)
{
	struct seed s;

	/* The handshake: HELLO with the Engine's private data (56 bytes
	 * in a real one), the answers. */
	s.b[0] = 0;
	s.n = 1;
	seed_frame(&s, TCP_F_HELLO, 56, 0, TCP_PROTO_VERSION, 0, 0);
	put(dir, "hs-hello", s.b, s.n);
	s.b[0] = 1;
	s.n = 1;
	seed_frame(&s, TCP_F_REJECT, 56, 0, 0, 0, 0);
	put(dir, "hs-reject", s.b, s.n);
	/* An ACCEPT and the first frames right behind it. */
	s.n = 1;
	seed_frame(&s, TCP_F_ACCEPT, 56, 0, 0, 0, 0);
	seed_frame(&s, TCP_F_SEND, 24, 0, 0, 0, 0);
	seed_frame(&s, TCP_F_ACK, 0, 0, 0, 0, 1);
	put(dir, "hs-accept", s.b, s.n);

	/* Established: the data frames, acks, and an orderly end. */
	s.b[0] = 2;
	s.n = 1;
	seed_frame(&s, TCP_F_SEND, 40, 0, 0, 0, 0);
	seed_frame(&s, TCP_F_WRITE, 64, 0x1234, 0x7f0000001000ull, 0, 1);
	seed_frame(&s, TCP_F_WRITE_IMM, 16, 0x1234, 0x7f0000001040ull, 0x00100001, 1);
	seed_frame(&s, TCP_F_ACK, 0, 0, 0, 0, 2);
	seed_frame(&s, TCP_F_BYE, 0, 0, 0, 0, 2);
	put(dir, "data-frames", s.b, s.n);
	/* A large message in an RX_ALLOC slot: an AWRITE that opens it
	 * (offset 0, the buffer's length in imm), one in the middle, the
	 * AWRITE_IMM that ends it; then a one-frame AWRITE_IMM. */
	s.n = 1;
	seed_frame(&s, TCP_F_AWRITE, 64, 3, 0, 192, 0);
	seed_frame(&s, TCP_F_AWRITE, 64, 3, 64, 0, 0);
	seed_frame(&s, TCP_F_AWRITE_IMM, 64, 3, 128, 0x00200002, 0);
	seed_frame(&s, TCP_F_AWRITE_IMM, 32, 0, 0, 0x00300003, 0);
	put(dir, "awrite-slot", s.b, s.n);
	s.b[0] = 3; /* the same to an Engine that takes none */
	put(dir, "awrite-no-hook", s.b, s.n);
	s.b[0] = 2;
	s.n = 1;
	seed_frame(&s, TCP_F_ACK, 0, 0, 0, 0, 5);
	{
		struct tcp_hdr h = { .magic = TCP_MAGIC, .type = TCP_F_NAK, .status = TCP_NAK_ACCESS,
				     .ack = 5 };

		be__tcp_hdr_pack(s.b + s.n, &h);
		s.n += TCP_HDR_LEN;
	}
	put(dir, "nak", s.b, s.n);
}

void fuzz_summary(unsigned long iters)
{
	printf("tcp-frame: %lu accepted, %lu refused, %lu frames, %lu AWRITEs placed\n", n_ok,
	       n_refused, n_frames, n_awrites);
	/* Both outcomes occur, and the slots are reached, or the mutations
	 * test nothing. */
	ASSERT_GT(n_refused, iters / 10);
	ASSERT_GT(n_ok, iters / 100);
	ASSERT_GT(n_awrites, iters / 100);
}
