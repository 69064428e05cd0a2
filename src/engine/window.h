/*
 * window.h - the software send window of one Engine and its record of
 * posted work requests (internal, pure data).
 *
 * Model. Every WR an Engine posts gets a record in a ring, in posting
 * order, with its byte count; the ring has as many slots as the send queue
 * has entries, so the send queue never overflows. The window bounds the
 * bytes of posted and not yet completed WRs (so an Engine cannot burst
 * more than that into the network, whatever the number of Sockets).
 *
 * Completions: a transport completes WRs of a connection in order, and a
 * signaled completion means every earlier WR completed as well. So only
 * some WRs are signaled: those whose completion frees something at once
 * (SENDs release their staging buffer, the last fragment completes a
 * message; an inline SEND frees nothing), and any WR once a quarter of
 * the ring or of the window went unsignaled. The latter rule guarantees
 * that a full window always holds a signaled WR whose completion reopens
 * it. A completion retires every record up to its sequence number.
 *
 * Soft limit. While small messages share the connection with a stream,
 * what a small message waits behind is the stream's bytes in flight
 * (on tcp: the bytes queued in the sockets ahead of it). A window may
 * have a soft limit for that: while the Engine turns @soft_on, fragments
 * fill at most @soft_limit bytes of it. With a soft limit, WRs are
 * signaled every quarter of it (not of the window), so completions
 * reopen it fragment by fragment, and the records in flight that nobody
 * signaled stay under a quarter of it: a fragment of at most 3/4 of the
 * soft limit that does not fit always has a signaled WR ahead of it to
 * wait for. (Should there be none, it goes anyway, and is signaled.)
 */
#ifndef BE_ENGINE_WINDOW_H
#define BE_ENGINE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

enum be__wr_kind {
	BE_WR_SEND = 1,      /* ptr: struct be__sendbuf */
	BE_WR_FRAG = 2,      /* ptr: struct be__msg */
	BE_WR_FRAG_LAST = 3, /* ptr: struct be__msg (WRITE_WITH_IMM) */
	BE_WR_SEND_INLINE = 4, /* ptr: NULL (the transport copied it at post) */
	BE_WR_SEND_INLINE_SIG = 5, /* ptr: NULL; signaled: its arrival matters (it
				    * answers a peer's close), busy until it retires */
};

struct be__wr_rec {
	uint64_t seq;
	uint32_t bytes;
	uint32_t kind;
	void *ptr;
};

struct be__window {
	struct be__wr_rec *ring;
	uint32_t cap, head, count;
	uint64_t next_seq;
	uint64_t limit;            /* window in bytes */
	uint64_t soft_limit;       /* bound for fragments while soft_on (0: none) */
	bool soft_on;
	uint64_t in_flight;        /* bytes posted, not retired */
	uint64_t max_in_flight;
	uint32_t unsig_count;
	uint64_t unsig_bytes;
	uint32_t sig_count;        /* signal at least every cap / 4 WRs */
	uint64_t sig_bytes;        /* and every limit / 4 bytes (soft_limit / 4) */
	uint64_t stalls;
	uint64_t soft_stalls;      /* fragments held back by the soft limit */
	uint64_t soft_max;         /* peak in flight after a fragment while soft_on */
};

int be__window_init(struct be__window *w, uint32_t cap, uint64_t limit);
void be__window_free(struct be__window *w);

/* Room for a WR of @bytes? Counts a stall when not. */
bool be__window_fits(struct be__window *w, uint64_t bytes);

/* Give the window a soft limit of @soft_limit bytes (0: none); off
 * until the caller sets soft_on. */
void be__window_set_soft(struct be__window *w, uint64_t soft_limit);

/* Room for a fragment of @bytes under the soft limit (see the model)?
 * Counts a soft stall when not. */
bool be__window_soft_fits(struct be__window *w, uint64_t bytes);

/* Record a WR about to be posted. Returns its sequence number (the wr_id)
 * and sets *@signal. The caller checked that it has room: a free ring
 * slot and, for its bytes, the window (tx.c's tx_room(), which also counts
 * the staging buffer not yet posted, or the ring alone for a WR that
 * counts no bytes). */
uint64_t be__window_push(struct be__window *w, enum be__wr_kind kind, uint32_t bytes, void *ptr,
			 bool *signal);

/* Does a posted WR still own something (a staging buffer, a message) or
 * still have to arrive (BE_WR_SEND_INLINE_SIG)? Other inline SENDs own
 * nothing. O(records). */
bool be__window_busy(const struct be__window *w);

/* Undo the last push (the post failed). */
void be__window_unpush(struct be__window *w);

/*
 * be__window_pop() - the oldest record if its seq <= @upto (use
 * UINT64_MAX to drain). Returns 1 with *@out filled, 0 otherwise.
 */
int be__window_pop(struct be__window *w, uint64_t upto, struct be__wr_rec *out);

#endif /* BE_ENGINE_WINDOW_H */
