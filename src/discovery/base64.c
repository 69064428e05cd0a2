/*
 * base64.c - strict standard base64 (see base64.h for the accepted form).
 *
 * Neither libcurl nor jansson exports a base64 codec, so this is the one
 * piece of encoding the etcd client writes itself; it is small and
 * table-driven, and the decoder refuses anything but the canonical form.
 */
#include <errno.h>

#include "discovery/base64.h"

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t be__b64_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	size_t i, o = 0;

	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = b64_alphabet[v >> 18];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = b64_alphabet[(v >> 6) & 63];
		out[o++] = b64_alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		out[o++] = b64_alphabet[v >> 18];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		out[o++] = b64_alphabet[v >> 18];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = b64_alphabet[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

/* The value of one alphabet character, or -1. */
static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long be__b64_decode(const char *in, size_t n, uint8_t *out, size_t *bad)
{
	size_t i, o = 0;

	if (n % 4) {
		*bad = n - n % 4;
		return -EINVAL;
	}
	for (i = 0; i < n; i += 4) {
		int v[4], k, pad = 0;
		uint32_t w;

		for (k = 0; k < 4; k++) {
			v[k] = b64_val(in[i + k]);
			if (v[k] >= 0 && !pad)
				continue;
			/* '=' only in the last group, only in its last two
			 * places, and nothing but '=' after the first one. */
			if (in[i + k] != '=' || i + 4 != n || k < 2) {
				*bad = i + k;
				return -EINVAL;
			}
			pad++;
			v[k] = 0;
		}
		w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		/* A padded group's unused low bits must be zero. */
		if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff))) {
			*bad = i + 3 - pad;
			return -EINVAL;
		}
		out[o++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)w;
	}
	return (long)o;
}
