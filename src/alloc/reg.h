/*
 * reg.h - bemalloc's side for transports: attaching a device's
 * registration hook, and finding a buffer's region and keys.
 *
 * Internal (not installed): the engine attaches each device it opens
 * (src/engine/ctx_dev.c) and the transports fill in the hook
 * (xport.h, dev_reg_hook). An application uses include/be/alloc.h only.
 * docs/ALLOC.md, "Registration", has the design.
 *
 * Threads: every function is thread-safe.
 */
#ifndef BE_ALLOC_REG_H
#define BE_ALLOC_REG_H

#include <stddef.h>
#include <stdint.h>

#include <be/alloc.h>

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many devices can be attached at once. */
#define BE_ALLOC_MAX_DEVICES 8

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
 * buffer) and its keys on device @dev_index. Borrows @p. Returns 0,
 * -ENOENT (not a bemalloc pointer) or -EINVAL (bad device index).
 */
BE_EXPORT int be_alloc_lookup(const void *p, int dev_index, struct be_alloc_region *out);

#ifdef __cplusplus
}
#endif

#endif /* BE_ALLOC_REG_H */
