/*
 * misc.c - clock, array growth, size parsing, error strings, version.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <be/be.h>
#include "util/common.h"

uint64_t be__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int be__grow(void *arr, uint32_t *cap, uint32_t need, size_t size, uint32_t first)
{
	uint64_t n;
	void *p;

	if (need <= *cap)
		return 0;
	n = *cap ? (uint64_t)*cap * 2 : BE_MAX(first, 1u);
	while (n < need)
		n *= 2;
	if (n > UINT32_MAX)
		n = UINT32_MAX;
	if (n > SIZE_MAX / size)
		return -ENOMEM;
	memcpy(&p, arr, sizeof(p));
	p = realloc(p, (size_t)n * size);
	if (!p)
		return -ENOMEM;
	memcpy(arr, &p, sizeof(p));
	*cap = (uint32_t)n;
	return 0;
}

int be__parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int be__env_size(const char *name, uint64_t *out)
{
	const char *s = getenv(name);

	if (!s)
		return 0;
	return be__parse_size(s, out) ? -EINVAL : 1;
}

const char *be_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case BE_EPROTO_PEER:
		return "peer violated the wire protocol";
	case BE_ECONNFAULT:
		return "engine marked faulty: no progress within the connection timeout";
	default:
		if (err < 0 && err > BE_ERRNO_BASE)
			return strerror(-err);
		return "unknown error";
	}
}

const char *be_version_string(void)
{
	return "0.1.0";
}
