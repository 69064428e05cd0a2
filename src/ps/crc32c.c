/*
 * crc32c.c - CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the
 * checksum of checkpoint files.
 *
 * Why our own and not zlib's crc32(): zlib computes the other CRC-32
 * (IEEE 802.3) and would be a new run-time dependency of libbe for one
 * function; CRC-32C is the one storage formats use (iSCSI, ext4, Btrfs),
 * has a larger Hamming distance at our block lengths, and x86-64 computes
 * it in hardware (SSE 4.2 crc32, 8 bytes per instruction: a checkpoint of
 * gigabytes is checksummed at memory speed). Elsewhere a byte table
 * does it. Both give the same result; test-ps-checkpoint checks both
 * against the standard check value.
 */
#include <pthread.h>
#include <string.h>

#include "ps/ckpt.h"

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
	uint32_t i, k, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t be__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_table_init);
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf,
							     size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc, v;

	for (; len >= 8; len -= 8, p += 8) {
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t be__crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return crc32c_hw(crc, buf, len);
#endif
	return be__crc32c_sw(crc, buf, len);
}
