/*
 * credit.c - receive credit accounting (model in credit.h).
 */
#include <errno.h>

#include <be/be.h>
#include "engine/credit.h"
#include "engine/proto.h"

void be__credit_init(struct be__credit *c, uint32_t granted_by_peer, uint32_t granted_to_peer)
{
	*c = (struct be__credit){
		.granted = granted_by_peer,
		.avail = granted_by_peer,
		.peer_granted = granted_to_peer,
		.grant_max = granted_to_peer,
		.granted_peak = granted_by_peer,
		.peer_granted_peak = granted_to_peer,
	};
}

uint32_t be__credit_grow_step(const struct be__credit *c)
{
	uint32_t room = c->grant_max > c->peer_granted ? c->grant_max - c->peer_granted : 0;

	return c->peer_granted < room ? c->peer_granted : room;
}

void be__credit_grow_begin(struct be__credit *c, uint32_t n)
{
	c->growing = n;
	c->idle_ticks = 0;
}

void be__credit_grow(struct be__credit *c)
{
	c->peer_granted += c->growing;
	c->growing = 0;
	if (c->peer_granted > c->peer_granted_peak)
		c->peer_granted_peak = c->peer_granted;
	c->idle_ticks = 0;
}

uint32_t be__credit_tick(struct be__credit *c, uint32_t floor, uint32_t idle_ticks)
{
	uint32_t peak = c->tick_peak, target;

	c->tick_peak = c->peer_in_use;
	if (c->revoking || c->growing || c->peer_granted <= floor ||
	    (uint64_t)peak * 4 > c->peer_granted) {
		c->idle_ticks = 0;
		return 0;
	}
	if (++c->idle_ticks < idle_ticks)
		return 0;
	c->idle_ticks = 0;
	target = c->peer_granted / 2;
	if (target < floor)
		target = floor;
	c->revoking = c->peer_granted - target;
	return c->revoking;
}

int be__credit_release(struct be__credit *c, uint32_t k)
{
	if (!c->revoking || k > c->revoking || c->peer_in_use > c->peer_granted - k)
		return BE_EPROTO_PEER;
	c->peer_granted -= k;
	c->revoking = 0;
	return 0;
}

int be__credit_on_grow(struct be__credit *c, uint32_t n)
{
	if (!n || (uint64_t)c->granted + n > BE_PROTO_MAX_CREDITS)
		return BE_EPROTO_PEER;
	c->granted += n;
	c->avail += n;
	if (c->granted > c->granted_peak)
		c->granted_peak = c->granted;
	return 0;
}

int be__credit_on_revoke(struct be__credit *c, uint32_t n)
{
	uint32_t k;

	if (!n || n > c->granted || c->granted - n < BE_PROTO_MIN_CREDITS || c->release_pending)
		return BE_EPROTO_PEER;
	c->release_pending = true;
	k = c->avail > 2 ? c->avail - 2 : 0;
	if (k > n)
		k = n;
	c->granted -= k;
	c->avail -= k;
	return (int)k;
}

int be__credit_take(struct be__credit *c, bool reserve)
{
	if (!be__credit_can_take(c, reserve)) {
		c->stalls++;
		c->starved = true;
		return -EAGAIN;
	}
	c->avail--;
	if (c->granted - c->avail > c->max_in_use)
		c->max_in_use = c->granted - c->avail;
	return 0;
}

int be__credit_return(struct be__credit *c, uint32_t n)
{
	if (n > c->granted - c->avail)
		return BE_EPROTO_PEER;
	c->avail += n;
	return 0;
}

int be__credit_consume(struct be__credit *c)
{
	if (c->peer_in_use >= c->peer_granted)
		return BE_EPROTO_PEER;
	c->peer_in_use++;
	if (c->peer_in_use > c->max_peer_in_use)
		c->max_peer_in_use = c->peer_in_use;
	if (c->peer_in_use > c->tick_peak)
		c->tick_peak = c->peer_in_use;
	return 0;
}

uint16_t be__credit_collect(struct be__credit *c)
{
	uint32_t n = c->owed > 65535u ? 65535u : c->owed;

	c->owed -= n;
	c->peer_in_use -= n;
	if (n)
		c->update_waited = false; /* returned: a new update may wait again */
	c->owed_trig = c->owed_trig > c->owed ? c->owed : c->owed_trig;
	return (uint16_t)n;
}
