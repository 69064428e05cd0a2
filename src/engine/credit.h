/*
 * credit.h - receive credits of one Engine (internal, pure data).
 *
 * Model. Each side grants its peer a number of receives at connect (the
 * hello's credits). A SEND or a WRITE_WITH_IMM consumes one receive at the
 * peer, so the sender spends one credit for each and never posts one
 * without a credit: receiver-not-ready cannot happen. The receiver reposts
 * the buffer and owes the credit back; owed credits ride in the header of
 * every frame it sends (piggybacked), or in an explicit CREDIT frame when
 * they pile up and nothing else is going out.
 *
 * Deadlock. An explicit CREDIT frame itself costs a credit. Data may use a
 * credit only while at least one more remains (the reserve); the reserve
 * is spent only on frames that return credits (CREDIT, KEEPALIVE). When a
 * side is down to the reserve, its peer holds every other credit as owed
 * receives (or they are in flight) and will return them; when a side has
 * spent its reserve, that frame returned credits to the peer, who thus can
 * answer. Receives used by credit frames are returned only with other
 * traffic or when the peer looks starved (be__credit_update_due()), so
 * credit frames cannot ping-pong forever.
 *
 * Validation: a peer returning more credits than it could owe, or using
 * more receives than granted, is a protocol error.
 */
#ifndef BE_ENGINE_CREDIT_H
#define BE_ENGINE_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

struct be__credit {
	/* Sender side: receives the peer granted us. */
	uint32_t granted;       /* the peer's grant */
	uint32_t avail;         /* credits we hold now */
	uint32_t max_in_use;    /* peak granted - avail */
	uint64_t stalls;        /* times a post waited for a credit */
	/* Receiver side: receives we granted the peer. */
	uint32_t peer_granted;
	uint32_t peer_in_use;   /* consumed by the peer, not yet returned */
	uint32_t owed;          /* of those, reposted: ready to return */
	uint32_t owed_trig;     /* of those, consumed by frames other than credit-only ones */
	uint32_t max_peer_in_use;
};

void be__credit_init(struct be__credit *c, uint32_t granted_by_peer, uint32_t granted_to_peer);

/* Take one credit; @reserve allows taking the last one (credit-returning
 * frames only). Returns 0 or -EAGAIN (counted as a stall). */
int be__credit_take(struct be__credit *c, bool reserve);

/* Would be__credit_take() succeed? */
static inline bool be__credit_can_take(const struct be__credit *c, bool reserve)
{
	return c->avail >= (reserve ? 1u : 2u);
}

/* The peer returned @n credits. 0, or BE_EPROTO_PEER when it returns
 * more than we spent. */
int be__credit_return(struct be__credit *c, uint32_t n);

/* The peer consumed one of our receives. 0 or BE_EPROTO_PEER when it
 * had no credit for it. */
int be__credit_consume(struct be__credit *c);

/* The consumed receive was reposted: its credit may now be returned.
 * @trig: it held more than credit-only frames (CREDIT, KEEPALIVE). */
static inline void be__credit_repost(struct be__credit *c, bool trig)
{
	c->owed++;
	if (trig)
		c->owed_trig++;
}

/* Owed credits to put in an outgoing header (at most 65535). */
uint16_t be__credit_collect(struct be__credit *c);

/*
 * True when owed credits should go out even without other traffic: a
 * quarter of the grant was used by real traffic, or the peer (as far as
 * we can tell) is down to its reserve and cannot send data. Receives used
 * by credit-only frames never trigger an update on their own while the
 * peer has credits, so credit frames cannot ping-pong (with grants of at
 * least 3, one credit frame never leaves its receiver looking starved).
 */
static inline bool be__credit_update_due(const struct be__credit *c)
{
	uint32_t thresh = c->peer_granted / 4;

	if (!c->owed)
		return false;
	return c->owed_trig >= (thresh ? thresh : 1) || c->peer_granted - c->peer_in_use <= 1;
}

#endif /* BE_ENGINE_CREDIT_H */
