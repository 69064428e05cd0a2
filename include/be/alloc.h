/*
 * alloc.h - bemalloc, the allocator of message buffers that are already
 * registered for RDMA on every transport device the library opened.
 *
 * One process-wide heap, beside (never instead of) malloc: a buffer from
 * be_alloc() is freed with be_free() only, from any thread. Buffers given
 * to be_sock_send() and the RPC layer come from here (rpc.h wraps them
 * with headroom: be_rpc_buf_alloc()). Memory comes from the OS in blocks
 * (default 4 MiB), each registered once on every device; memory is never
 * unmapped or given back to the OS while it is registered. Allocator
 * metadata lives outside registered memory, so a peer holding an rkey
 * can write into the buffer it was granted (on verbs without memory
 * windows, anywhere in its block: docs/SECURITY.md, "Remote keys") but
 * not corrupt the allocator.
 *
 * fork(): a child does not inherit bemalloc's memory (touching a parent
 * buffer faults) and starts with an empty bemalloc.
 *
 * Threads: every function is thread-safe. Design, limits and the side
 * for transports (src/alloc/reg.h): docs/ALLOC.md; settings: docs/TUNING.md.
 *
 * Structs that grow lead with `size` (docs/API.md): leave it 0, or let
 * the inline wrapper that fills the struct set it.
 */
#ifndef BE_ALLOC_H
#define BE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include <be/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every buffer is aligned to at least this many bytes. */
#define BE_ALLOC_MIN_ALIGN 64
/* Number of size classes reported in struct be_alloc_stats. */
#define BE_ALLOC_NUM_CLASSES 64

struct be_alloc_config {
	uint32_t size;      /* 0 or sizeof (docs/API.md) */
	size_t block_size;  /* power of two, 1 MiB..1 GiB; 0: BE_ALLOC_BLOCK_SIZE or 4 MiB */
	size_t limit_bytes; /* bound on mapped bytes; 0: BE_ALLOC_LIMIT or none */
};

struct be_alloc_stats {
	uint32_t size;              /* set by be_alloc_stats() (docs/API.md) */
	uint64_t blocks;            /* blocks currently mapped (not counting huge regions) */
	uint64_t huge_regions;      /* dedicated regions currently mapped */
	uint64_t mapped_bytes;      /* bytes mapped in blocks and huge regions */
	uint64_t registered_bytes;  /* mapped_bytes registered on every attached device */
	uint64_t bytes_in_use;      /* bytes handed out (size-class sizes) and not freed */
	uint64_t allocations;       /* successful be_alloc() calls, ever */
	uint64_t frees;             /* be_free() calls, ever */
	uint64_t registrations;     /* successful registrations, ever, all devices */
	uint64_t deregistrations;   /* deregistrations, ever */
	uint64_t failures;          /* allocations that returned NULL */
	uint64_t reg_failures;      /* registrations that failed */
	uint64_t limit_bytes;       /* configured limit, 0 = none */
	uint32_t devices;           /* devices attached now */
	uint32_t num_classes;       /* entries used in the arrays below */
	uint64_t class_size[BE_ALLOC_NUM_CLASSES];   /* buffer size of each class */
	uint64_t class_in_use[BE_ALLOC_NUM_CLASSES]; /* bytes in use per class */
};

/*
 * be_alloc_configure() - set the block size and limit. Borrows @cfg. The
 * block size can change only before the first allocation; the limit at
 * any time. Fields left 0 take the defaults, overridden by the
 * BE_ALLOC_BLOCK_SIZE and BE_ALLOC_LIMIT environment variables (bytes,
 * with optional K/M/G suffix). Returns 0, -EINVAL (NULL or bad block
 * size) or -EBUSY (a new block size after the first allocation).
 */
BE_EXPORT int be_alloc_configure(const struct be_alloc_config *cfg);

/*
 * be_alloc() - a buffer of at least @size bytes, aligned to
 * BE_ALLOC_MIN_ALIGN, registered on every attached device.
 *
 * Ownership: returns a buffer the caller owns until it passes it to
 * be_free() (from any thread) or to a function documented to take it.
 * Returns NULL with errno ENOMEM when the limit is reached or a
 * registration failed (see be_alloc_last_error()). Never aborts.
 * be_alloc(0) returns a minimal buffer.
 */
BE_EXPORT void *be_alloc(size_t size);

/*
 * be_free() - give back @p, from any thread. Takes @p; NULL is a no-op.
 * @p must come from be_alloc() and not be freed twice.
 */
BE_EXPORT void be_free(void *p);

/* be_alloc_usable_size() - bytes usable at @p (>= the size asked for). */
BE_EXPORT size_t be_alloc_usable_size(const void *p);

/*
 * be_alloc_trim() - deregister and unmap blocks that are entirely free,
 * and thread caches of exited threads. Returns the number of bytes given
 * back to the OS.
 */
BE_EXPORT size_t be_alloc_trim(void);

/* be_alloc_stats() - a consistent-enough snapshot (counters are relaxed).
 * be_alloc_stats_sized() writes at most @out->size bytes. */
BE_EXPORT void be_alloc_stats_sized(struct be_alloc_stats *out);
static inline void be_alloc_stats(struct be_alloc_stats *out)
{
	out->size = sizeof(*out);
	be_alloc_stats_sized(out);
}

/*
 * be_alloc_stats_json() - the stats as one JSON object (no newline) into
 * @buf. Returns the length it needs (like snprintf), or -EINVAL.
 */
BE_EXPORT int be_alloc_stats_json(char *buf, size_t len);

/*
 * be_alloc_last_error() - the message of the last failure in this thread
 * (limit reached, registration failed: which device and why), or "".
 */
BE_EXPORT const char *be_alloc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* BE_ALLOC_H */
