/*
 * common.h - small helpers shared by every layer (internal).
 */
#ifndef BE_UTIL_COMMON_H
#define BE_UTIL_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define BE_LIKELY(x) __builtin_expect(!!(x), 1)
#define BE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define BE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BE_MAX(a, b) ((a) > (b) ? (a) : (b))
#define BE_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define BE_CACHELINE 64

/* Internal, non-static symbols are spelled be__<noun>_<verb>() and are
 * hidden by -fvisibility=hidden; public ones carry BE_EXPORT. */

/* Monotonic clock in nanoseconds. */
uint64_t be__now_ns(void);

/* Parse "123", "4K", "4M", "1G" (binary units) into *out. 0 or -EINVAL. */
int be__parse_size(const char *s, uint64_t *out);

/*
 * be__grow() - room for @need elements of @size bytes in the array at
 * *@arr (the address of the caller's pointer), *@cap elements long: none
 * is made when there is; else *@arr is realloc()ed to twice *@cap (@first
 * when 0), doubled until @need fit, and *@cap updated. The new elements
 * are not initialised. Returns 0, or -ENOMEM (*@arr and *@cap as they
 * were).
 */
int be__grow(void *arr, uint32_t *cap, uint32_t need, size_t size, uint32_t first);

/* Read a BE_* environment variable as a size; returns 1 if set and valid,
 * 0 if unset, -EINVAL if malformed. */
int be__env_size(const char *name, uint64_t *out);

#endif /* BE_UTIL_COMMON_H */
