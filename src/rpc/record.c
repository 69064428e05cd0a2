/*
 * record.c - the text form of a replica record: one line, the format of
 * the static naming file and of discovery values (docs/RPC.md,
 * "Records").
 *
 *   <service> <replica> key=value ...
 *
 * Keys: shards=LO-HI (or a single N), state=serving|draining, version=N,
 * epoch=N (unsigned 64-bit decimal), addr=URI (one per address, in order
 * of preference, at most BE_RPC_MAX_ADDRS). Keys starting with "x-" are
 * extensions and ignored; any other unknown key, a repeated key (but
 * addr), a malformed value, a control character, a name or address too
 * long, or a line without addr is refused with a reason. Parsing is a
 * pure function of the bytes, so a fuzzer can drive it alone, and it
 * never reads past @len.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rpc/rpc_int.h"

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* Printable ASCII, no space, no '='. */
static bool name_char(char c)
{
	return c > ' ' && c < 0x7f && c != '=';
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!n || n > 20)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_u32(const char *s, size_t n, uint32_t *out)
{
	uint64_t v;

	if (parse_u64(s, n, &v) || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* scheme "://" rest, scheme [a-z0-9+.-]+, rest non-empty. */
static bool uri_valid(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n && s[i] != ':'; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '.' ||
		      c == '-'))
			return false;
	}
	return i > 0 && i + 3 < n && s[i + 1] == '/' && s[i + 2] == '/';
}

#define FAIL(msg)               \
	do {                    \
		if (why)        \
			*why = msg; \
		return -EINVAL; \
	} while (0)

int be_rpc_record_parse(const char *line, size_t len, struct be_rpc_record *out, const char **why)
{
	bool seen_shards = false, seen_state = false, seen_version = false, seen_epoch = false;
	struct be_rpc_record r;
	size_t i = 0, field = 0;

	if (why)
		*why = NULL;
	if (!line || !out)
		FAIL("no input");
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len > BE_RPC_LINE_MAX)
		FAIL("line too long");
	for (i = 0; i < len; i++)
		if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
			FAIL("control character");
	i = 0;
	while (i < len && is_space(line[i]))
		i++;
	if (i == len || line[i] == '#')
		return -ENOENT;
	memset(&r, 0, sizeof(r));
	r.shard_hi = UINT32_MAX;
	r.state = BE_RPC_SERVING;
	while (i < len) {
		size_t start = i, n, k;
		const char *tok = line + i, *val;

		while (i < len && !is_space(line[i]))
			i++;
		n = i - start;
		while (i < len && is_space(line[i]))
			i++;
		if (field < 2) {
			char *dst = field ? r.replica : r.service;

			if (n >= BE_RPC_NAME_MAX)
				FAIL("name too long");
			for (k = 0; k < n; k++)
				if (!name_char(tok[k]))
					FAIL("bad character in a name");
			memcpy(dst, tok, n);
			dst[n] = '\0';
			field++;
			continue;
		}
		val = memchr(tok, '=', n);
		if (!val)
			FAIL("expected key=value");
		k = (size_t)(val - tok);
		val++;
		n -= k + 1;
		if (k >= 2 && !memcmp(tok, "x-", 2)) {
			continue;
		} else if (k == 4 && !memcmp(tok, "addr", 4)) {
			if (r.naddrs == BE_RPC_MAX_ADDRS)
				FAIL("too many addresses");
			if (n >= BE_RPC_ADDR_MAX)
				FAIL("address too long");
			if (!uri_valid(val, n))
				FAIL("address is not scheme://rest");
			memcpy(r.addrs[r.naddrs], val, n);
			r.addrs[r.naddrs++][n] = '\0';
		} else if (k == 6 && !memcmp(tok, "shards", 6)) {
			const char *dash = memchr(val, '-', n);

			if (seen_shards)
				FAIL("shards given twice");
			seen_shards = true;
			if (dash) {
				if (parse_u32(val, (size_t)(dash - val), &r.shard_lo) ||
				    parse_u32(dash + 1, n - (size_t)(dash - val) - 1, &r.shard_hi))
					FAIL("bad shard range");
			} else {
				if (parse_u32(val, n, &r.shard_lo))
					FAIL("bad shard");
				r.shard_hi = r.shard_lo;
			}
			if (r.shard_lo > r.shard_hi)
				FAIL("shard range ends before it starts");
		} else if (k == 5 && !memcmp(tok, "state", 5)) {
			if (seen_state)
				FAIL("state given twice");
			seen_state = true;
			if (n == 7 && !memcmp(val, "serving", 7))
				r.state = BE_RPC_SERVING;
			else if (n == 8 && !memcmp(val, "draining", 8))
				r.state = BE_RPC_DRAINING;
			else
				FAIL("state is neither serving nor draining");
		} else if (k == 7 && !memcmp(tok, "version", 7)) {
			if (seen_version || parse_u64(val, n, &r.version))
				FAIL(seen_version ? "version given twice" : "bad version");
			seen_version = true;
		} else if (k == 5 && !memcmp(tok, "epoch", 5)) {
			if (seen_epoch || parse_u64(val, n, &r.epoch))
				FAIL(seen_epoch ? "epoch given twice" : "bad epoch");
			seen_epoch = true;
		} else {
			FAIL("unknown key");
		}
	}
	if (field < 2)
		FAIL("missing replica name");
	if (!r.naddrs)
		FAIL("no addr");
	*out = r;
	return 0;
}

int be_rpc_record_format(const struct be_rpc_record *r, char *buf, size_t len)
{
	int n, total;
	uint32_t i;

	if (!r || (!buf && len) || !r->service[0] || !r->replica[0] || !r->naddrs ||
	    r->naddrs > BE_RPC_MAX_ADDRS || !memchr(r->service, 0, sizeof(r->service)) ||
	    !memchr(r->replica, 0, sizeof(r->replica)))
		return -EINVAL;
	total = snprintf(buf, len, "%s %s shards=%" PRIu32 "-%" PRIu32 " state=%s version=%" PRIu64
			 " epoch=%" PRIu64,
			 r->service, r->replica, r->shard_lo, r->shard_hi,
			 r->state == BE_RPC_DRAINING ? "draining" : "serving", r->version, r->epoch);
	for (i = 0; i < r->naddrs; i++) {
		if (!memchr(r->addrs[i], 0, sizeof(r->addrs[i])))
			return -EINVAL;
		n = snprintf((size_t)total < len ? buf + total : NULL,
			     (size_t)total < len ? len - (size_t)total : 0, " addr=%s", r->addrs[i]);
		total += n;
	}
	return total;
}
