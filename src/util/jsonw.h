/*
 * jsonw.h - JSON text written into a caller's buffer (internal): the
 * stats_json functions of src/sock and src/rpc.
 *
 * Model. A writer appends with snprintf into buf[0..len) and counts every
 * byte it would have written, even past the end: pos is then the length
 * the whole text needs (without its NUL), which those functions return so
 * that a caller can size its buffer. Each append is vsnprintf()'s, so
 * the text that fits ends with a NUL; buf may be NULL when len is 0.
 *
 * Threads: none; a writer is its caller's.
 */
#ifndef BE_UTIL_JSONW_H
#define BE_UTIL_JSONW_H

#include <stddef.h>

struct be__jsonw {
	char *buf;
	size_t len, pos;
};

/* Append printf-style text, as it is (the caller writes the JSON). */
void be__jsonw_put(struct be__jsonw *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Append @s as a JSON string: quoted, '"', '\\' and control characters
 * escaped. */
void be__jsonw_str(struct be__jsonw *o, const char *s);

#endif /* BE_UTIL_JSONW_H */
