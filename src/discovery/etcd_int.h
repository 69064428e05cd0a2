/*
 * etcd_int.h - what the files of the etcd client share (internal to
 * src/discovery): the client object, the unary call, and the checked
 * accessors every response parser is written with.
 *
 * Files. etcd_json.c: the checked accessors (be__ej_*) and the mapping of
 * etcd's gRPC errors. etcd_parse.c: the pure parsers of a range response
 * and of a watch line. etcd_http.c: the client and its unary call.
 * etcd_kv.c, etcd_lease.c, etcd_watch.c: the API of etcd.h by concern.
 */
#ifndef BE_DISCOVERY_ETCD_INT_H
#define BE_DISCOVERY_ETCD_INT_H

#include <stdatomic.h>
#include <stdbool.h>

#include <curl/curl.h>
#include <jansson.h>

#include "discovery/etcd.h"

#define ETCD_ERR_LEN 256

struct be_etcd {
	char **ep;     /* base URLs, without a trailing '/' */
	size_t n_ep;
	size_t cur;    /* the endpoint calls go to */
	unsigned int request_ms;
	unsigned int connect_ms;
	struct be_etcd_limits lim;
	CURL *h;                 /* unary calls; keeps its connection */
	struct curl_slist *hdrs; /* content type, has-leader, no Expect */
	char err[ETCD_ERR_LEN];
	struct {
		_Atomic uint64_t requests, failed, refused, watches, watch_msgs, events;
	} st;
};

/*
 * The HTTP headers of a request: JSON, and the has-leader requirement (the
 * gateway turns Grpc-Metadata-X into gRPC metadata X, and etcd refuses a
 * request, or ends a watch, on a member without a leader when "hasleader"
 * is "true"). A unary request skips the "Expect: 100-continue" round trip.
 * A @stream (a watch) sends its body chunked while it reads the answer,
 * and asks for 100-continue: etcd 3.4's Go HTTP/1.1 server answers a
 * request whose chunked body is still open only then (without it, a raw
 * client saw nothing until the body ended; with it, the "created" answer
 * and every progress answer came at once).
 */
struct curl_slist *be__etcd_headers(bool stream);

/* Take libcurl's process-wide initialisation once. 0 or -EIO. */
int be__etcd_curl_init(void);

/* Map a libcurl failure to a negative errno. */
int be__etcd_curl_errno(CURLcode rc);

/* Apply the options every handle of @c shares (timeouts, no proxy, only
 * http and https, no signals). */
void be__etcd_easy_setup(const struct be_etcd *c, CURL *h);

/*
 * be__etcd_call() - POST @req (taken, always released) to the current
 * endpoint's @path ("/v3/kv/range"). On 0, *@resp is the response object
 * (the caller releases it): the body as a whole, or with @stream the
 * "result" of the first line of a streaming call (a lease keepalive).
 * Errors as in etcd.h; the reason is in c->err.
 */
int be__etcd_call(struct be_etcd *c, const char *path, json_t *req, bool stream, json_t **resp);

/*
 * be__etcd_call_rev() - be__etcd_call() of a write whose answer carries
 * nothing more than its header: *@revision (NULL: not wanted) the store's
 * revision after it. The last part of @path ("put" of "/v3/kv/put") names
 * the response in messages. Returns 0, an error of be__etcd_call(), or
 * -EBADMSG (a header refused; the reason in c->err).
 */
int be__etcd_call_rev(struct be_etcd *c, const char *path, json_t *req, int64_t *revision);

/* Record a refused response of @c: reason, counter, log. Returns -EBADMSG. */
int be__etcd_refuse(struct be_etcd *c, const char *what, const char *why);

/* Record a failure @rc of @c that is not a refusal: the reason (kept as
 * it is in c->err by be__etcd_failed()), the counter, and a move to the
 * next endpoint when this one could not answer. Return @rc. */
int be__etcd_fail(struct be_etcd *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int be__etcd_failed(struct be_etcd *c, int rc);

/* ---- building requests ------------------------------------------------ */

/* A JSON string holding the base64 of @n bytes at @p, or NULL (-ENOMEM). */
json_t *be__ej_b64(const void *p, size_t n);

/* A JSON string holding the decimal form of @v (how 64-bit integers are
 * written for the gateway), or NULL. */
json_t *be__ej_int(int64_t v);

/* The end of the range of every key starting with @key (length @len): @key
 * with its last byte below 0xff incremented and what follows dropped, or
 * "\0" (every key) when there is none. @end has room for @len bytes (at
 * least 1); returns the end's length. */
size_t be__etcd_prefix_end(const void *key, size_t len, uint8_t *end);

/* Set "key" and, with BE_ETCD_PREFIX, "range_end" in @req. 0 or -ENOMEM. */
int be__ej_set_range(json_t *req, const void *key, size_t len, unsigned int flags);

/* Whether @k (length @n) lies in the range asked for by @key/@len/@flags. */
bool be__etcd_in_range(const uint8_t *k, size_t n, const void *key, size_t len,
		       unsigned int flags);

/* ---- checking responses ------------------------------------------------ */

/* The state of one parse: the limits, and where a reason is written. */
struct be_ej {
	const struct be_etcd_limits *lim;
	char *err;
	size_t errlen;
};

/* Write a reason and return -EBADMSG. */
int be__ej_fail(struct be_ej *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse @len bytes at @buf as one JSON object, refusing duplicate keys,
 * NUL in strings, trailing bytes and anything over the response limit. */
int be__ej_load(struct be_ej *x, const char *what, const char *buf, size_t len, json_t **root);

/*
 * Each accessor reads member @name of object @o (described as @where in a
 * reason): absent is 0 / NULL / false unless @req, wrong type or range is
 * refused. Integers are accepted as decimal strings (what etcd sends) or
 * as JSON integers (what the protobuf JSON mapping also allows).
 */
int be__ej_i64(struct be_ej *x, const json_t *o, const char *where, const char *name,
	       int64_t min, int64_t max, bool req, int64_t *out);
int be__ej_u64(struct be_ej *x, const json_t *o, const char *where, const char *name, bool req,
	       uint64_t *out);
int be__ej_bool(struct be_ej *x, const json_t *o, const char *where, const char *name,
		bool *out);
int be__ej_obj(struct be_ej *x, const json_t *o, const char *where, const char *name, bool req,
	       json_t **out);
/* An array of at most @max elements (absent: NULL). */
int be__ej_arr(struct be_ej *x, const json_t *o, const char *where, const char *name,
	       size_t max, json_t **out);
/* A string of at most @max bytes (absent: NULL); borrowed from @o. */
int be__ej_str(struct be_ej *x, const json_t *o, const char *where, const char *name,
	       size_t max, bool req, const char **out);
/* Base64 bytes of at most @max decoded bytes, returned in a malloc'ed
 * NUL-terminated buffer (absent and not @req: an empty one). */
int be__ej_bytes(struct be_ej *x, const json_t *o, const char *where, const char *name,
		 size_t max, bool req, uint8_t **out, size_t *len);

/* The "header" of a response: cluster_id, member_id, raft_term checked;
 * *@revision its revision (0 when absent; refused when @rev_req). */
int be__ej_header(struct be_ej *x, const json_t *o, const char *where, bool rev_req,
		  int64_t *revision);

/*
 * One mvccpb.KeyValue at @kv into *@out (key and value in one malloc'ed
 * block owned by out->key; free with be__ej_kv_free()). @deleted: a
 * deletion's kv, which carries the key and mod_revision only.
 */
int be__ej_kv(struct be_ej *x, const json_t *kv, const char *where, bool deleted,
	      struct be_etcd_kv *out);
void be__ej_kv_free(struct be_etcd_kv *kv);

/* The "kvs" and "count" of a range response @o into *@out (allocated). */
int be__ej_range(struct be_ej *x, const json_t *o, const char *where, struct be_etcd_range *out);

/* A whole /v3/kv/range response @root: header, kvs, count, and no kv
 * newer than the read. On error *@out is freed and zeroed. */
int be__ej_range_resp(struct be_ej *x, const json_t *root, struct be_etcd_range *out);

/*
 * An error that etcd answered with: the unary form
 * {"error": "...", "message": "...", "code": N} or, with @stream, the
 * stream form {"error": {"grpc_code": N, "http_code": N, "message": "...",
 * "http_status": "..."}}. Returns the mapped negative code, with etcd's
 * message in @x's reason, or -EBADMSG when @o is no such error.
 */
int be__ej_grpc_error(struct be_ej *x, const json_t *o, bool stream);

/* Map a gRPC status code and etcd's message to a negative code. */
int be__etcd_grpc_errno(int64_t code, const char *msg);

#endif /* BE_DISCOVERY_ETCD_INT_H */
