/*
 * abi.h - public structs that grow (internal).
 *
 * Model. Every public struct that may gain fields starts with a uint32_t
 * `size`: the bytes of the struct the caller was compiled with, 0 meaning
 * the first published layout ("v1"). The library reads from and writes
 * into a caller's struct only the first min(size, sizeof) bytes, and gives
 * fields past that their defaults (inputs) or leaves them out (outputs).
 * docs/API.md states the rule for callers. Fields are only ever appended,
 * so a v1 caller's bytes mean the same in every later layout.
 *
 * BE__V1_SIZE() names the end of a struct's last v1 field: it must stay
 * the field it is today when the struct grows.
 */
#ifndef BE_UTIL_ABI_H
#define BE_UTIL_ABI_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BE__V1_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* The caller's size field of the struct at @p (it leads every such struct). */
static inline uint32_t be__abi_size_of(const void *p)
{
	uint32_t size;

	memcpy(&size, p, sizeof(size));
	return size;
}

/*
 * be__abi_read() - copy the caller's input struct @src into the library's
 * full-size @dst (@have bytes, already holding the defaults): its first
 * min(size, @have) bytes, 0 meaning @v1. Sets @dst's size to @have.
 * Returns 0, or -EINVAL when the size is below @v1 (a caller that did not
 * set it, or initialised the struct by position).
 */
static inline int be__abi_read(void *dst, size_t have, const void *src, size_t v1)
{
	uint32_t size = be__abi_size_of(src), full = (uint32_t)have;

	if (!size)
		size = (uint32_t)v1;
	if (size < v1)
		return -EINVAL;
	memcpy(dst, src, size < have ? size : have);
	memcpy(dst, &full, sizeof(full));
	return 0;
}

/*
 * be__abi_write() - copy the library's full-size @src (@have bytes) into
 * the caller's output struct @dst: its first min(size, @have) bytes, 0
 * meaning @v1, and set @dst's size to the bytes written. A size too small
 * to hold itself gets nothing.
 */
static inline void be__abi_write(void *dst, const void *src, size_t have, size_t v1)
{
	uint32_t size = be__abi_size_of(dst);

	if (!size)
		size = (uint32_t)v1;
	if (size < sizeof(size))
		return;
	if (size > have)
		size = (uint32_t)have;
	memcpy(dst, src, size);
	memcpy(dst, &size, sizeof(size));
}

#endif /* BE_UTIL_ABI_H */
