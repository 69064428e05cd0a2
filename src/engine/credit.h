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
 * is spent only on frames that return credits (CREDIT, or a KEEPALIVE
 * while credits are owed: one that returns none could leave both sides
 * at zero, each owing the other). When a
 * side is down to the reserve, its peer holds every other credit as owed
 * receives (or they are in flight) and will return them; when a side has
 * spent its reserve, that frame returned credits to the peer, who thus can
 * answer. Receives used by credit frames are returned only with other
 * traffic or when the peer looks starved (be__credit_update_due()), so
 * credit frames cannot ping-pong forever.
 *
 * Validation: a peer returning more credits than it could owe, or using
 * more receives than granted, is a protocol error.
 *
 * Elastic grants. A grant starts small (credits_init) and follows the
 * traffic, so a worker's receive buffers go to the peers that use them
 * and a worker serves many more Engines than srq_max_depth / credits:
 *  - grow: when the peer holds three quarters of its grant, or says it
 *    waited for a credit (the STARVED flag on the next frame it sends:
 *    on tcp the receiver drains as it goes and never sees three
 *    quarters in use, but the sender still waits for the returns), the
 *    receiver reserves more buffers on its SRQ (doubling, up to
 *    `credits`) and then says so (CREDIT_GROW n): the new receives exist
 *    before the peer may use them, so the grant is never more than what
 *    is posted. The grant counts as grown only once the CREDIT_GROW is
 *    encoded (be__credit_grow()), until then the growth is pending
 *    (`growing`, at most one): a GROW waits for a credit like data, and
 *    judging the peer by a grant it does not have yet would hide that
 *    it is down to its reserve (the CREDIT frame it needs would not go).
 *  - shrink: a grant that stayed mostly unused is halved, toward
 *    credits_init. The receiver cannot take back receives the sender may
 *    be spending, so it asks (CREDIT_REVOKE n); the sender gives up what
 *    it holds, k <= n, keeping two (its reserve and the answer's: giving
 *    up all deadlocks the simulation in test-credit.c), and answers
 *    CREDIT_RELEASE k, which waits for a credit like data (it may
 *    return none, so it must not take the reserve); only then does the
 *    receiver lower the grant and free the k buffers. At that point the receiver cannot
 *    hold more of the peer's receives than the lowered grant: everything
 *    the sender sent up to the RELEASE has arrived (reliable, in order),
 *    and the sender then held at most the lowered grant. One revoke at a
 *    time; no growth while one is pending.
 * The reserve argument above holds with these rules: a grant never
 * drops below BE_PROTO_MIN_CREDITS, a sender keeps its reserve through a
 * revoke, GROW, REVOKE and RELEASE never take the reserve, and the
 * receiver judges the peer's starvation by the grant the peer may hold
 * (not a pending growth, less a pending revoke).
 */
#ifndef BE_ENGINE_CREDIT_H
#define BE_ENGINE_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/proto.h"

struct be__credit {
	/* Sender side: receives the peer granted us. */
	uint32_t granted;       /* the peer's grant */
	uint32_t avail;         /* credits we hold now */
	uint32_t max_in_use;    /* peak granted - avail */
	uint64_t stalls;        /* times a post waited for a credit */
	bool starved;           /* a post waited since the last frame went out */
	/* Receiver side: receives we granted the peer. */
	uint32_t peer_granted;
	uint32_t peer_in_use;   /* consumed by the peer, not yet returned */
	uint32_t owed;          /* of those, reposted: ready to return */
	uint32_t owed_trig;     /* of those, consumed by frames other than credit-only ones */
	uint32_t max_peer_in_use;
	/* Elastic grants, receiver side. */
	uint32_t grant_max;     /* the most we grant (cfg credits) */
	uint32_t revoking;      /* receives asked back, answer pending (0: none) */
	uint32_t growing;       /* receives reserved, their CREDIT_GROW not encoded yet */
	bool release_pending;   /* sender: our CREDIT_RELEASE is not encoded yet */
	bool update_waited;     /* a due update waited a pass (be__credit_update_wait) */
	uint32_t tick_peak;     /* peak peer_in_use since the last tick */
	uint32_t idle_ticks;    /* ticks in a row with tick_peak <= a quarter */
	/* Peaks of both grants (for the stats). */
	uint32_t granted_peak, peer_granted_peak;
};

void be__credit_init(struct be__credit *c, uint32_t granted_by_peer, uint32_t granted_to_peer);

/* ---- elastic grants (model above) ---- */

/* Receiver: should the peer's grant grow now? It holds three quarters of
 * it or said it starved (@starved), it may grow, and no revoke is
 * pending. */
static inline bool be__credit_want_grow(const struct be__credit *c, bool starved)
{
	return c->peer_granted < c->grant_max && !c->revoking && !c->growing &&
	       (starved || (uint64_t)c->peer_in_use * 4 >= (uint64_t)c->peer_granted * 3);
}

/* Sender: the flags a frame going out now carries (BE_FRF_STARVED once
 * after a wait for credits). */
static inline uint8_t be__credit_flags(struct be__credit *c)
{
	uint8_t fl = c->starved ? BE_FRF_STARVED : 0;

	c->starved = false;
	return fl;
}

/* Receiver: by how much to grow (doubling, within grant_max). */
uint32_t be__credit_grow_step(const struct be__credit *c);

/* Receiver: @n more receives were reserved; their CREDIT_GROW n is
 * queued (the growth is pending). */
void be__credit_grow_begin(struct be__credit *c, uint32_t n);

/* Receiver: the CREDIT_GROW of the pending growth is encoded: the grant is
 * grown now. */
void be__credit_grow(struct be__credit *c);

/*
 * be__credit_tick() - receiver, once per timer tick: returns how many
 * receives to ask back (0: none), after @idle_ticks ticks in a row in
 * which the peer held at most a quarter of a grant above @floor. The
 * caller sends CREDIT_REVOKE with it; the revoke is then pending.
 */
uint32_t be__credit_tick(struct be__credit *c, uint32_t floor, uint32_t idle_ticks);

/* Receiver: the peer gave back @k receives (CREDIT_RELEASE k). 0, or
 * BE_EPROTO_PEER when no revoke was pending, @k is more than asked, or
 * the peer would then hold more than its lowered grant. */
int be__credit_release(struct be__credit *c, uint32_t k);

/* Sender: the peer granted @n more receives (CREDIT_GROW n). 0, or
 * BE_EPROTO_PEER when @n is 0 or the grant would pass 65535. */
int be__credit_on_grow(struct be__credit *c, uint32_t n);

/*
 * be__credit_on_revoke() - sender: the peer asks @n receives back. Gives
 * up k <= n of the credits held now, keeping two; returns k (>= 0, send
 * CREDIT_RELEASE k, not from the reserve, and call
 * be__credit_release_sent() when it is encoded), or BE_EPROTO_PEER when
 * @n is 0, would take the grant below BE_PROTO_MIN_CREDITS, or our answer
 * to the previous revoke has not even left (an honest receiver revokes
 * again only after it got that answer).
 */
int be__credit_on_revoke(struct be__credit *c, uint32_t n);

static inline void be__credit_release_sent(struct be__credit *c)
{
	c->release_pending = false;
}

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
	/* While a revoke is pending the peer may hold the lowered grant
	 * already, its CREDIT_RELEASE waiting for a credit: judge by that. */
	uint32_t grant = c->peer_granted - c->revoking;
	uint32_t thresh = grant / 4;

	if (!c->owed)
		return false;
	return c->owed_trig >= (thresh ? thresh : 1) || grant <= c->peer_in_use + 1;
}

/*
 * be__credit_update_wait() - an update is due: may its explicit CREDIT
 * frame wait one scheduler pass, for data of ours to carry the credits?
 * Yes once per update, while the peer holds at most half of its grant
 * (so it is far from its reserve and not waiting): a request/response
 * peer's next request, or our answer, usually goes within that pass, and
 * a CREDIT frame each way per call would double the frames. The caller
 * schedules the pass; the next due update after a wait goes at once, and
 * the starvation rule of be__credit_update_due() never waits.
 */
static inline bool be__credit_update_wait(struct be__credit *c)
{
	uint32_t grant = c->peer_granted - c->revoking;

	if (c->update_waited || (uint64_t)c->peer_in_use * 2 > grant ||
	    grant <= c->peer_in_use + 1) {
		c->update_waited = false;
		return false;
	}
	c->update_waited = true;
	return true;
}

#endif /* BE_ENGINE_CREDIT_H */
