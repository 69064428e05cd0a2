/*
 * alloc.h - bemalloc, the allocator of message buffers that are already
 * registered for RDMA.
 *
 * Model. One process-wide heap, beside (never instead of) malloc. It maps
 * aligned blocks (default 4 MiB), each registered once on every attached
 * transport device, and carves them into buffers; an allocation larger
 * than a block gets a region of its own, registered the same way. A
 * buffer's keys on a device come from be_alloc_lookup() for any pointer
 * inside it. Registered memory is never unmapped or given back to the OS
 * while registered. Regions are mapped from a memfd, handed to the
 * registration hook. Allocator metadata lives outside registered memory:
 * a peer holding an rkey cannot corrupt the allocator.
 *
 * fork(): a child does not inherit bemalloc's memory (touching a parent
 * buffer faults) and starts with an empty bemalloc: no device, statistics
 * at zero. docs/ALLOC.md has the design and the limits.
 *
 * Threads: every function is thread-safe; any thread may free any buffer.
 */
#ifndef BE_ALLOC_H
#define BE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include <be/export.h>

#ifdef __cplusplus
extern "C" {
#endif


/* At most this many devices can be attached at once. */
#define BE_ALLOC_MAX_DEVICES 8
/* Every buffer is aligned to at least this many bytes. */
#define BE_ALLOC_MIN_ALIGN 64
/* Number of size classes reported in struct be_alloc_stats. */
#define BE_ALLOC_NUM_CLASSES 64

struct be_alloc_config {
	size_t block_size;  /* power of two, 1 MiB..1 GiB; 0: BE_ALLOC_BLOCK_SIZE or 4 MiB */
	size_t limit_bytes; /* bound on mapped bytes; 0: BE_ALLOC_LIMIT or none */
};

/* Result of one registration of one region on one device. */
struct be_alloc_mr {
	uint32_t lkey;
	uint32_t rkey;
	void *handle; /* the transport's own object, handed back to dereg */
};

/*
 * A transport implements this to attach a device. Both callbacks run with
 * bemalloc's pool lock held: they must not call back into bemalloc, nor
 * fork().
 *
 * reg() registers [addr, addr+len), which is mapped MAP_SHARED from @fd at
 * @fd_offset. The fd stays open and valid until dereg() returns; a
 * transport that needs it longer dup()s it. Returns 0 or -errno and, on
 * failure, may write a message into @err (NUL-terminated, @err_len bytes).
 */
struct be_alloc_reg_hook {
	const char *name;
	int (*reg)(void *dev, void *addr, size_t len, int fd, uint64_t fd_offset,
		   struct be_alloc_mr *out, char *err, size_t err_len);
	void (*dereg)(void *dev, struct be_alloc_mr *mr);
	void *dev;
};

/* Where a buffer lives, for one device. */
struct be_alloc_region {
	void *base;      /* start of the registered region (block or huge region) */
	size_t len;      /* its length */
	uint32_t lkey;   /* keys on the device asked for */
	uint32_t rkey;
	int fd;          /* memfd the region is mapped from */
	uint64_t fd_offset;
	void *handle;    /* the transport's registration object */
};

struct be_alloc_stats {
	uint64_t blocks;            /* blocks currently mapped (not counting huge regions) */
	uint64_t huge_regions;      /* dedicated regions currently mapped */
	uint64_t mapped_bytes;      /* bytes mapped in blocks and huge regions */
	uint64_t registered_bytes;  /* mapped_bytes registered on every attached device */
	uint64_t bytes_in_use;      /* bytes handed out (size-class sizes) and not freed */
	uint64_t allocations;       /* successful be_alloc() calls, ever */
	uint64_t frees;             /* be_free() calls, ever */
	uint64_t registrations;     /* successful reg() calls, ever, all devices */
	uint64_t deregistrations;   /* dereg() calls, ever */
	uint64_t failures;          /* allocations that returned NULL */
	uint64_t reg_failures;      /* reg() calls that failed */
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
 * be_alloc_attach_device() - register every existing block on @hook's
 * device and every future block too. Borrows @hook (copied).
 * Returns the device index (>= 0) for be_alloc_lookup(), -ENOSPC when
 * BE_ALLOC_MAX_DEVICES are attached, or the hook's error; on error every
 * registration made by this call has been undone.
 */
BE_EXPORT int be_alloc_attach_device(const struct be_alloc_reg_hook *hook);

/*
 * be_alloc_detach_device() - deregister every block from device @dev_index.
 * Buffers stay valid for the CPU. Returns 0 or -EINVAL.
 */
BE_EXPORT int be_alloc_detach_device(int dev_index);

/*
 * be_alloc_lookup() - O(1): the region holding @p (any byte inside a live
 * buffer) and its keys on device @dev_index. Returns 0, -ENOENT (not a
 * bemalloc pointer) or -EINVAL (bad device index).
 */
BE_EXPORT int be_alloc_lookup(const void *p, int dev_index, struct be_alloc_region *out);

/*
 * be_alloc_trim() - deregister and unmap blocks that are entirely free,
 * and thread caches of exited threads. Returns the number of bytes given
 * back to the OS.
 */
BE_EXPORT size_t be_alloc_trim(void);

/* be_alloc_stats() - a consistent-enough snapshot (counters are relaxed). */
BE_EXPORT void be_alloc_stats(struct be_alloc_stats *out);

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
