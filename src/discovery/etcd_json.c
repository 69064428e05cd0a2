/*
 * etcd_json.c - checked access to the JSON of etcd's gateway, and the
 * mapping of its errors.
 *
 * What arrives. The gateway writes protobuf messages with the proto3 JSON
 * mapping: 64-bit integers as decimal strings ("revision": "12"), bytes
 * (keys, values) as standard base64, fields left out when they hold their
 * zero value (a PUT event has no "type", a count of 0 no "count"), enums
 * by name. The accessors below turn each field into a C value or refuse
 * the response with a reason naming the field; nothing is believed on
 * the way (a count is not an allocation size, a length is checked before
 * it is decoded).
 *
 * Why jansson (Debian's libjansson-dev) rather than json-c: it refuses
 * what we want refused at parse time, with a position in its message:
 * duplicate object keys (JSON_REJECT_DUPLICATES; json-c keeps the last),
 * integers that overflow (json-c clamps them to INT64_MAX silently), NUL
 * inside strings, invalid UTF-8 and trailing bytes; and its nesting depth
 * is bounded, so a hostile document cannot exhaust the stack. json-c's
 * incremental tokener would have helped with the watch stream, but that
 * stream is newline-delimited, so each line is parsed whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/base64.h"
#include "discovery/etcd_int.h"

#define EJ_MAX_MESSAGE (64u << 10) /* an error message etcd sends */

int be__ej_fail(struct be_ej *x, const char *fmt, ...)
{
	va_list ap;

	if (x->err && x->errlen) {
		va_start(ap, fmt);
		vsnprintf(x->err, x->errlen, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

int be__ej_load(struct be_ej *x, const char *what, const char *buf, size_t len, json_t **root)
{
	json_error_t e;
	json_t *j;

	*root = NULL;
	if (len > x->lim->max_response)
		return be__ej_fail(x, "%s: %zu bytes, over the limit of %zu", what, len,
				   x->lim->max_response);
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	if (!j)
		return be__ej_fail(x, "%s: not JSON: %s at byte %d", what, e.text, e.position);
	if (!json_is_object(j)) {
		json_decref(j);
		return be__ej_fail(x, "%s: not a JSON object", what);
	}
	*root = j;
	return 0;
}

/* The member, or NULL; refuses a missing required one. */
static int ej_get(struct be_ej *x, const json_t *o, const char *where, const char *name, bool req,
		  json_t **out)
{
	*out = json_object_get(o, name);
	if (!*out && req)
		return be__ej_fail(x, "%s.%s: missing", where, name);
	return 0;
}

/* A decimal string: an optional '-' when @neg, then 1..20 digits. */
static bool ej_decimal(const char *s, size_t n, bool neg)
{
	size_t i = 0;

	if (neg && n && s[0] == '-')
		i = 1;
	if (n == i || n - i > 20)
		return false;
	for (; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* The string @v as a decimal integer: signed (as int64_t, in *@out's
 * bits) when @sign, else unsigned. */
static int ej_decimal_str(struct be_ej *x, const json_t *v, const char *where, const char *name,
			  bool sign, uint64_t *out)
{
	const char *s = json_string_value(v);
	char *end;

	if (!ej_decimal(s, json_string_length(v), sign))
		return be__ej_fail(x, "%s.%s: \"%.24s\" is not a decimal integer", where, name, s);
	errno = 0;
	*out = sign ? (uint64_t)strtoll(s, &end, 10) : strtoull(s, &end, 10);
	if (errno == ERANGE)
		return be__ej_fail(x, "%s.%s: %.24s does not fit 64 bits", where, name, s);
	return 0;
}

int be__ej_i64(struct be_ej *x, const json_t *o, const char *where, const char *name,
	       int64_t min, int64_t max, bool req, int64_t *out)
{
	json_t *v;
	long long n;
	int rc;

	*out = 0;
	rc = ej_get(x, o, where, name, req, &v);
	if (rc || !v)
		return rc;
	if (json_is_string(v)) {
		uint64_t u;

		rc = ej_decimal_str(x, v, where, name, true, &u);
		if (rc)
			return rc;
		n = (long long)u;
	} else if (json_is_integer(v)) {
		n = json_integer_value(v);
	} else {
		return be__ej_fail(x, "%s.%s: not an integer", where, name);
	}
	if (n < min || n > max)
		return be__ej_fail(x, "%s.%s: %lld outside [%" PRId64 ", %" PRId64 "]", where,
				   name, n, min, max);
	*out = n;
	return 0;
}

int be__ej_u64(struct be_ej *x, const json_t *o, const char *where, const char *name, bool req,
	       uint64_t *out)
{
	json_t *v;
	int rc;

	*out = 0;
	rc = ej_get(x, o, where, name, req, &v);
	if (rc || !v)
		return rc;
	if (json_is_string(v))
		return ej_decimal_str(x, v, where, name, false, out);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	return be__ej_fail(x, "%s.%s: not an unsigned integer", where, name);
}

int be__ej_bool(struct be_ej *x, const json_t *o, const char *where, const char *name,
		bool *out)
{
	json_t *v = json_object_get(o, name);

	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return be__ej_fail(x, "%s.%s: not a boolean", where, name);
	*out = json_is_true(v);
	return 0;
}

int be__ej_obj(struct be_ej *x, const json_t *o, const char *where, const char *name, bool req,
	       json_t **out)
{
	int rc = ej_get(x, o, where, name, req, out);

	if (rc || !*out)
		return rc;
	if (!json_is_object(*out)) {
		*out = NULL;
		return be__ej_fail(x, "%s.%s: not an object", where, name);
	}
	return 0;
}

int be__ej_arr(struct be_ej *x, const json_t *o, const char *where, const char *name,
	       size_t max, json_t **out)
{
	int rc = ej_get(x, o, where, name, false, out);

	if (rc || !*out)
		return rc;
	if (!json_is_array(*out)) {
		*out = NULL;
		return be__ej_fail(x, "%s.%s: not an array", where, name);
	}
	if (json_array_size(*out) > max) {
		size_t n = json_array_size(*out);

		*out = NULL;
		return be__ej_fail(x, "%s.%s: %zu elements, over the limit of %zu", where, name, n,
				   max);
	}
	return 0;
}

int be__ej_str(struct be_ej *x, const json_t *o, const char *where, const char *name,
	       size_t max, bool req, const char **out)
{
	json_t *v;
	int rc;

	*out = NULL;
	rc = ej_get(x, o, where, name, req, &v);
	if (rc || !v)
		return rc;
	if (!json_is_string(v))
		return be__ej_fail(x, "%s.%s: not a string", where, name);
	if (json_string_length(v) > max)
		return be__ej_fail(x, "%s.%s: %zu bytes, over the limit of %zu", where, name,
				   json_string_length(v), max);
	*out = json_string_value(v);
	return 0;
}

int be__ej_bytes(struct be_ej *x, const json_t *o, const char *where, const char *name,
		 size_t max, bool req, uint8_t **out, size_t *len)
{
	const char *s;
	size_t n, bad;
	uint8_t *b;
	long d;
	int rc;

	*out = NULL;
	*len = 0;
	/* The encoded length bounds the decoded one: check before decoding. */
	rc = be__ej_str(x, o, where, name, be__b64_enc_len(max), req, &s);
	if (rc)
		return rc;
	n = s ? strlen(s) : 0;
	b = malloc(be__b64_dec_max(n) + 1);
	if (!b)
		return -ENOMEM;
	d = be__b64_decode(s ? s : "", n, b, &bad);
	if (d < 0) {
		free(b);
		return be__ej_fail(x, "%s.%s: bad base64 at offset %zu", where, name, bad);
	}
	if ((size_t)d > max) {
		free(b);
		return be__ej_fail(x, "%s.%s: %ld bytes, over the limit of %zu", where, name, d,
				   max);
	}
	b[d] = '\0';
	*out = b;
	*len = (size_t)d;
	return 0;
}

int be__ej_header(struct be_ej *x, const json_t *o, const char *where, bool rev_req,
		  int64_t *revision)
{
	char at[64];
	json_t *h;
	uint64_t u;
	int rc;

	*revision = 0;
	rc = be__ej_obj(x, o, where, "header", true, &h);
	if (rc)
		return rc;
	snprintf(at, sizeof(at), "%s.header", where);
	if ((rc = be__ej_u64(x, h, at, "cluster_id", false, &u)) ||
	    (rc = be__ej_u64(x, h, at, "member_id", false, &u)) ||
	    (rc = be__ej_u64(x, h, at, "raft_term", false, &u)))
		return rc;
	return be__ej_i64(x, h, at, "revision", rev_req ? 1 : 0, INT64_MAX, rev_req, revision);
}

void be__ej_kv_free(struct be_etcd_kv *kv)
{
	free((void *)kv->key);
	free((void *)kv->value);
	memset(kv, 0, sizeof(*kv));
}

int be__ej_kv(struct be_ej *x, const json_t *kv, const char *where, bool deleted,
	      struct be_etcd_kv *out)
{
	uint8_t *k = NULL, *v = NULL;
	size_t kl, vl;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(kv))
		return be__ej_fail(x, "%s: not an object", where);
	/* A live key has been created and written at least once; a
	 * deletion's kv has only its key and the deletion's revision. */
	if ((rc = be__ej_i64(x, kv, where, "mod_revision", 1, INT64_MAX, true,
			     &out->mod_revision)) ||
	    (rc = be__ej_i64(x, kv, where, "create_revision", deleted ? 0 : 1, out->mod_revision,
			     !deleted, &out->create_revision)) ||
	    (rc = be__ej_i64(x, kv, where, "version", deleted ? 0 : 1, INT64_MAX, !deleted,
			     &out->version)) ||
	    (rc = be__ej_i64(x, kv, where, "lease", 0, INT64_MAX, false, &out->lease)))
		return rc;
	rc = be__ej_bytes(x, kv, where, "key", x->lim->max_key, true, &k, &kl);
	if (rc)
		return rc;
	if (kl == 0) {
		free(k);
		return be__ej_fail(x, "%s.key: empty", where);
	}
	rc = be__ej_bytes(x, kv, where, "value", x->lim->max_value, false, &v, &vl);
	if (rc) {
		free(k);
		return rc;
	}
	out->key = k;
	out->key_len = kl;
	out->value = v;
	out->value_len = vl;
	return 0;
}

/* etcd's key order: bytewise, a prefix before its extensions. */
static int kv_key_cmp(const struct be_etcd_kv *a, const struct be_etcd_kv *b)
{
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, n);

	if (c)
		return c;
	return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

int be__ej_range(struct be_ej *x, const json_t *o, const char *where, struct be_etcd_range *out)
{
	char at[64];
	json_t *kvs;
	size_t i, n;
	bool more;
	int rc;

	if ((rc = be__ej_arr(x, o, where, "kvs", x->lim->max_kvs, &kvs)) ||
	    (rc = be__ej_i64(x, o, where, "count", 0, INT64_MAX, false, &out->count)) ||
	    (rc = be__ej_bool(x, o, where, "more", &more)))
		return rc;
	out->more = more;
	n = kvs ? json_array_size(kvs) : 0;
	if ((uint64_t)out->count < n)
		return be__ej_fail(x, "%s.count: %" PRId64 " but %zu kvs", where, out->count, n);
	if (!n)
		return 0;
	out->kvs = calloc(n, sizeof(*out->kvs));
	if (!out->kvs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		snprintf(at, sizeof(at), "%s.kvs[%zu]", where, i);
		rc = be__ej_kv(x, json_array_get(kvs, i), at, false, &out->kvs[i]);
		if (rc)
			break;
		out->n = i + 1;
		/* etcd returns a range in ascending key order; what a caller
		 * does with it (a sorted membership) may rely on that. */
		if (i && kv_key_cmp(&out->kvs[i - 1], &out->kvs[i]) >= 0) {
			rc = be__ej_fail(x, "%s: keys not in ascending order", at);
			break;
		}
	}
	return rc;
}

int be__etcd_grpc_errno(int64_t code, const char *msg)
{
	switch (code) {
	case 1:  /* CANCELLED */
		return -ECANCELED;
	case 3:  /* INVALID_ARGUMENT */
		return -EINVAL;
	case 4:  /* DEADLINE_EXCEEDED */
		return -ETIMEDOUT;
	case 5:  /* NOT_FOUND: "requested lease not found" */
		return -ENOENT;
	case 6:  /* ALREADY_EXISTS */
		return -EEXIST;
	case 7:  /* PERMISSION_DENIED */
	case 16: /* UNAUTHENTICATED */
		return -EACCES;
	case 8:  /* RESOURCE_EXHAUSTED: "too many requests", "database space exceeded" */
		return -ENOSPC;
	case 10: /* ABORTED */
		return -EAGAIN;
	case 11: /* OUT_OF_RANGE: compacted, or a future revision */
		return msg && strstr(msg, "compacted") ? BE_ETCD_ECOMPACTED : -ERANGE;
	case 12: /* UNIMPLEMENTED */
		return -ENOSYS;
	case 14: /* UNAVAILABLE: "no leader", "leader changed", "timed out" */
		return msg && strstr(msg, "no leader") ? BE_ETCD_ENOLEADER : -EAGAIN;
	default: /* UNKNOWN, FAILED_PRECONDITION, INTERNAL, DATA_LOSS */
		return -EIO;
	}
}

int be__ej_grpc_error(struct be_ej *x, const json_t *o, bool stream)
{
	const char *msg = NULL, *status, *what = stream ? "stream error" : "error";
	json_t *e = (json_t *)o;
	int64_t code, http;
	int rc;

	if (stream) {
		if ((rc = be__ej_obj(x, o, "response", "error", true, &e)) ||
		    (rc = be__ej_i64(x, e, what, "grpc_code", 1, 16, true, &code)) ||
		    (rc = be__ej_i64(x, e, what, "http_code", 0, 599, false, &http)) ||
		    (rc = be__ej_str(x, e, what, "http_status", EJ_MAX_MESSAGE, false, &status)) ||
		    (rc = be__ej_str(x, e, what, "message", EJ_MAX_MESSAGE, false, &msg)))
			return rc;
	} else {
		/* "error" and "message" carry the same text in etcd 3.4. */
		if ((rc = be__ej_i64(x, o, what, "code", 1, 16, true, &code)) ||
		    (rc = be__ej_str(x, o, what, "error", EJ_MAX_MESSAGE, false, &status)) ||
		    (rc = be__ej_str(x, o, what, "message", EJ_MAX_MESSAGE, false, &msg)))
			return rc;
		if (!msg)
			msg = status;
	}
	be__ej_fail(x, "etcd: %.200s (gRPC code %" PRId64 ")", msg ? msg : "(no message)", code);
	return be__etcd_grpc_errno(code, msg);
}

json_t *be__ej_b64(const void *p, size_t n)
{
	char *s = malloc(be__b64_enc_len(n) + 1);
	json_t *j;

	if (!s)
		return NULL;
	be__b64_encode(p, n, s);
	j = json_string_nocheck(s);
	free(s);
	return j;
}

json_t *be__ej_int(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return json_string_nocheck(s);
}

size_t be__etcd_prefix_end(const void *key, size_t len, uint8_t *end)
{
	const uint8_t *k = key;

	while (len && k[len - 1] == 0xff)
		len--;
	if (!len) {
		end[0] = 0;
		return 1;
	}
	memcpy(end, k, len);
	end[len - 1]++;
	return len;
}

int be__ej_set_range(json_t *req, const void *key, size_t len, unsigned int flags)
{
	uint8_t *end;
	size_t n;
	int rc;

	/* etcd takes no empty key: every key is >= "\0". */
	if (json_object_set_new(req, "key", len ? be__ej_b64(key, len) : be__ej_b64("", 1)))
		return -ENOMEM;
	if (!(flags & BE_ETCD_PREFIX))
		return 0;
	end = malloc(len ? len : 1);
	if (!end)
		return -ENOMEM;
	n = be__etcd_prefix_end(key, len, end);
	rc = json_object_set_new(req, "range_end", be__ej_b64(end, n)) ? -ENOMEM : 0;
	free(end);
	return rc;
}

bool be__etcd_in_range(const uint8_t *k, size_t n, const void *key, size_t len,
		       unsigned int flags)
{
	if (flags & BE_ETCD_PREFIX)
		return n >= len && !memcmp(k, key, len);
	return n == len && !memcmp(k, key, len);
}
