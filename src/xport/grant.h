/*
 * grant.h - the remote-write grants of one conn, for the transports that
 * check a peer's WRITEs themselves (tcp, shm): the table behind the
 * optional grant / revoke ops of xport.h.
 *
 * Model. A grant is a range [addr, addr+len) of this process's registered
 * memory that the peer of one conn may WRITE into, under an rkey drawn
 * from the kernel's CSPRNG (getrandom()), unique among the conn's live
 * grants and never 0. A WRITE from the peer is accepted only when its
 * rkey names a live grant of that conn and its range lies inside it, so
 * a peer can reach neither memory granted to another conn nor memory
 * whose grant ended, and cannot derive one key from others it saw.
 *
 * The table is an open-addressing hash on the (random) key, at most half
 * full, owned by the conn's thread (the worker): no locks.
 */
#ifndef BE_XPORT_GRANT_H
#define BE_XPORT_GRANT_H

#include <stdbool.h>
#include <stdint.h>

struct be__xgrant {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey; /* 0: free slot */
};

struct be__xgrants {
	struct be__xgrant *tab;
	uint32_t mask;        /* slots - 1; slots is 0 or a power of two */
	uint32_t n;           /* live grants */
	uint32_t rnd[32];     /* CSPRNG output not used yet */
	uint32_t nrnd;
};

/* An empty table (no allocation until the first grant). */
void be__xgrants_init(struct be__xgrants *g);
/* Every grant ends; frees the table. */
void be__xgrants_fini(struct be__xgrants *g);

/* Grant [addr, addr+len) under a fresh key into *rkey. Returns 0,
 * -EINVAL (empty or wrapping range), -ENOMEM, or getrandom()'s -errno. */
int be__xgrants_add(struct be__xgrants *g, uint64_t addr, uint64_t len, uint32_t *rkey);

/* End the grant of @rkey. Returns 0, or -ENOENT if none is live. */
int be__xgrants_del(struct be__xgrants *g, uint32_t rkey);

/* Does [addr, addr+len) lie inside the live grant of @rkey? */
bool be__xgrants_check(const struct be__xgrants *g, uint32_t rkey, uint64_t addr, uint64_t len);

#endif /* BE_XPORT_GRANT_H */
