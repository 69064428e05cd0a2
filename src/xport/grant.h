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

/*
 * RX_ALLOC slots (xport.h, BE_XWR_F_RX_ALLOC), for the same transports:
 * the buffers this side allocated for a peer's writes as their data
 * arrived, BE_XASLOTS per conn (the device's max_rx_alloc), indexed by the
 * WR's rkey. A slot is opened by the piece at offset 0, which says how
 * long the buffer is; its pieces follow one another in order, and the
 * last one fills the buffer exactly, which then goes to the receiver with
 * a RECV_IMM. The table is allocated when the first slot opens.
 */
#define BE_XASLOTS 64u

struct be__xaslot {
	uint8_t *buf;   /* NULL: free */
	uint32_t len;   /* the buffer's length */
	uint32_t got;   /* bytes placed so far, from 0 */
};

/* What a piece may do to its slot's buffer. */
enum be__xaslot_end {
	BE_XASLOT_MORE, /* not fill it: a last piece follows */
	BE_XASLOT_PART, /* fill it or not */
	BE_XASLOT_LAST, /* fill it exactly */
};

struct be_xconn;

/*
 * be__xaslot_check() - may a piece of @len bytes land at offset @off of
 * slot @slot, the slots being @slots (NULL: all free)? At offset 0 it
 * opens a free slot for a buffer of @total bytes, set in *@open (the
 * caller allocates it), else *@open is 0 and the piece must start where
 * the slot's last one ended; @end says whether it may or must fill the
 * buffer. Returns NULL, or why not (a peer's protocol error).
 */
const char *be__xaslot_check(const struct be__xaslot *slots, uint32_t slot, uint64_t off,
			     uint64_t len, uint64_t total, enum be__xaslot_end end,
			     uint64_t *open);

/*
 * be__xaslots_free() - hand every open slot's buffer to @rx_free (the
 * conn's hook, may be NULL: nothing to hand back), then free the table
 * in *@slots and set it to NULL.
 */
void be__xaslots_free(struct be__xaslot **slots, struct be_xconn *conn,
		      void (*rx_free)(struct be_xconn *conn, void *buf));

#endif /* BE_XPORT_GRANT_H */
