/*
 * base64.h - the standard base64 alphabet with padding (RFC 4648 section 4),
 * as etcd's JSON gateway writes keys and values (internal).
 *
 * Decoding is strict: the input length is a multiple of 4, '=' appears only
 * as one or two final characters, and the bits a padded group leaves over
 * are zero, so every byte string has exactly one accepted encoding and a
 * malformed one is refused rather than guessed at.
 */
#ifndef BE_DISCOVERY_BASE64_H
#define BE_DISCOVERY_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Encoded length of @n bytes, without the terminating NUL. */
static inline size_t be__b64_enc_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Upper bound of the decoded length of @n encoded characters. */
static inline size_t be__b64_dec_max(size_t n)
{
	return n / 4 * 3;
}

/*
 * be__b64_encode() - write the encoding of @n bytes at @in to @out, which
 * has room for be__b64_enc_len(@n) + 1 bytes, NUL-terminated.
 * Borrows @in and @out. Returns the encoded length.
 */
size_t be__b64_encode(const void *in, size_t n, char *out);

/*
 * be__b64_decode() - decode @n characters at @in into @out, which has room
 * for be__b64_dec_max(@n) bytes. Borrows both. Returns the decoded length,
 * or -EINVAL (and *@bad = offset of the first offending character) when
 * the input is not a canonical encoding.
 */
long be__b64_decode(const char *in, size_t n, uint8_t *out, size_t *bad);

#endif /* BE_DISCOVERY_BASE64_H */
