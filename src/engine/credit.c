/*
 * credit.c - receive credit accounting (model in credit.h).
 */
#include <errno.h>

#include <be/be.h>
#include "engine/credit.h"

void be__credit_init(struct be__credit *c, uint32_t granted_by_peer, uint32_t granted_to_peer)
{
	*c = (struct be__credit){
		.granted = granted_by_peer,
		.avail = granted_by_peer,
		.peer_granted = granted_to_peer,
	};
}

int be__credit_take(struct be__credit *c, bool reserve)
{
	if (!be__credit_can_take(c, reserve)) {
		c->stalls++;
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
	return 0;
}

uint16_t be__credit_collect(struct be__credit *c)
{
	uint32_t n = c->owed > 65535u ? 65535u : c->owed;

	c->owed -= n;
	c->peer_in_use -= n;
	c->owed_trig = c->owed_trig > c->owed ? c->owed : c->owed_trig;
	return (uint16_t)n;
}
