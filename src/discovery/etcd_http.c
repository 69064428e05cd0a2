/*
 * etcd_http.c - the client: endpoints, one libcurl easy handle, and the
 * unary call every KV and lease request goes through.
 *
 * A call is one HTTP/1.1 POST of a JSON body to the gateway
 * ("/v3/kv/range"), answered by one JSON body: the response message when
 * the status is 200, an error object otherwise. The easy handle keeps
 * its connection between calls. A call never takes longer than
 * request_timeout_ms; when it fails for the transport's sake (refused,
 * timed out, reset) or because the member has no leader, the next call
 * goes to the next endpoint, so a client of a cluster finds a working
 * member by itself while its caller retries.
 *
 * The body is read into a buffer that grows up to the response limit; a
 * response beyond it is cut off and refused, so a server cannot make the
 * client allocate without bound.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/etcd_int.h"
#include "util/log.h"

#define ETCD_DEF_REQUEST_MS 2000
#define ETCD_DEF_CONNECT_MS 1000
#define ETCD_DEF_MAX_RESPONSE (16u << 20)
#define ETCD_DEF_MAX_KEY (64u << 10)
#define ETCD_DEF_MAX_VALUE (1u << 20)
#define ETCD_DEF_MAX_KVS 100000
#define ETCD_MAX_URL 1024

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	/* libcurl's global state is initialised once and never torn down:
	 * the application may use libcurl too, and cleanup is not safe
	 * while any other thread uses it. */
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int be__etcd_curl_init(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_init_rc == CURLE_OK ? 0 : -EIO;
}

struct curl_slist *be__etcd_headers(bool stream)
{
	static const char *const unary[] = {
		"Content-Type: application/json",
		"Grpc-Metadata-hasleader: true",
		"Expect:",
	};
	static const char *const streaming[] = {
		"Content-Type: application/json",
		"Grpc-Metadata-hasleader: true",
		"Transfer-Encoding: chunked",
		"Expect: 100-continue",
	};
	const char *const *h = stream ? streaming : unary;
	size_t i, n = stream ? sizeof(streaming) / sizeof(h[0]) : sizeof(unary) / sizeof(h[0]);
	struct curl_slist *l = NULL, *next;

	for (i = 0; i < n; i++) {
		next = curl_slist_append(l, h[i]);
		if (!next) {
			curl_slist_free_all(l);
			return NULL;
		}
		l = next;
	}
	return l;
}

int be__etcd_curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_OK:
		return 0;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

void be__etcd_easy_setup(const struct be_etcd *c, CURL *h)
{
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_ms);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs);
}

void be__etcd_opts_default(struct be_etcd_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->request_timeout_ms = ETCD_DEF_REQUEST_MS;
	o->connect_timeout_ms = ETCD_DEF_CONNECT_MS;
	o->limits.max_response = ETCD_DEF_MAX_RESPONSE;
	o->limits.max_key = ETCD_DEF_MAX_KEY;
	o->limits.max_value = ETCD_DEF_MAX_VALUE;
	o->limits.max_kvs = ETCD_DEF_MAX_KVS;
}

/* Split @list at commas into c->ep; each must be an http(s) URL. */
static int etcd_endpoints(struct be_etcd *c, const char *list)
{
	const char *p = list, *e;
	size_t n = 1, len;

	for (e = list; *e; e++)
		n += *e == ',';
	c->ep = calloc(n, sizeof(*c->ep));
	if (!c->ep)
		return -ENOMEM;
	for (;;) {
		e = strchr(p, ',');
		len = e ? (size_t)(e - p) : strlen(p);
		while (len && p[len - 1] == '/')
			len--;
		if (len >= ETCD_MAX_URL ||
		    !((len > 7 && !strncmp(p, "http://", 7)) ||
		      (len > 8 && !strncmp(p, "https://", 8))))
			return -EINVAL;
		c->ep[c->n_ep] = strndup(p, len);
		if (!c->ep[c->n_ep])
			return -ENOMEM;
		c->n_ep++;
		if (!e)
			return 0;
		p = e + 1;
	}
}

int be__etcd_create(const struct be_etcd_opts *o, struct be_etcd **out)
{
	struct be_etcd_opts d;
	struct be_etcd *c;
	int rc;

	if (!o || !o->endpoints || !out)
		return -EINVAL;
	rc = be__etcd_curl_init();
	if (rc)
		return rc;
	be__etcd_opts_default(&d);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->request_ms = o->request_timeout_ms ? o->request_timeout_ms : d.request_timeout_ms;
	c->connect_ms = o->connect_timeout_ms ? o->connect_timeout_ms : d.connect_timeout_ms;
	c->lim = o->limits;
	if (!c->lim.max_response)
		c->lim.max_response = d.limits.max_response;
	if (!c->lim.max_key)
		c->lim.max_key = d.limits.max_key;
	if (!c->lim.max_value)
		c->lim.max_value = d.limits.max_value;
	if (!c->lim.max_kvs)
		c->lim.max_kvs = d.limits.max_kvs;
	rc = etcd_endpoints(c, o->endpoints);
	if (rc)
		goto err_free;
	rc = -ENOMEM;
	c->hdrs = be__etcd_headers(false);
	if (!c->hdrs)
		goto err_free;
	rc = -EIO;
	c->h = curl_easy_init();
	if (!c->h)
		goto err_free;
	be__etcd_easy_setup(c, c->h);
	curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, (long)c->request_ms);
	*out = c;
	return 0;

err_free:
	be__etcd_destroy(c);
	return rc;
}

void be__etcd_destroy(struct be_etcd *c)
{
	size_t i;

	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	curl_slist_free_all(c->hdrs);
	for (i = 0; i < c->n_ep; i++)
		free(c->ep[i]);
	free(c->ep);
	free(c);
}

const char *be__etcd_last_error(const struct be_etcd *c)
{
	return c->err;
}

void be__etcd_stats(const struct be_etcd *c, struct be_etcd_stats *out)
{
	out->requests = atomic_load_explicit(&c->st.requests, memory_order_relaxed);
	out->failed = atomic_load_explicit(&c->st.failed, memory_order_relaxed);
	out->refused = atomic_load_explicit(&c->st.refused, memory_order_relaxed);
	out->watches = atomic_load_explicit(&c->st.watches, memory_order_relaxed);
	out->watch_msgs = atomic_load_explicit(&c->st.watch_msgs, memory_order_relaxed);
	out->events = atomic_load_explicit(&c->st.events, memory_order_relaxed);
}

int be__etcd_refuse(struct be_etcd *c, const char *what, const char *why)
{
	if (why != c->err)
		snprintf(c->err, sizeof(c->err), "%s", why);
	atomic_fetch_add_explicit(&c->st.refused, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->st.failed, 1, memory_order_relaxed);
	be_log_warn("etcd %s: response refused: %s", what, c->err);
	return -EBADMSG;
}

int be__etcd_fail(struct be_etcd *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return be__etcd_failed(c, rc);
}

int be__etcd_failed(struct be_etcd *c, int rc)
{
	atomic_fetch_add_explicit(&c->st.failed, 1, memory_order_relaxed);
	/* Try the next member next time when this one could not answer. */
	if (rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EHOSTUNREACH ||
	    rc == BE_ETCD_ENOLEADER)
		c->cur = (c->cur + 1) % c->n_ep;
	return rc;
}

/* The body of a response, bounded by the response limit. */
struct call_body {
	char *buf;
	size_t len, cap, max;
	bool over;
};

static size_t call_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct call_body *b = arg;
	size_t n = size * nmemb;

	if (n > b->max - b->len) {
		b->over = true;
		return 0; /* ends the transfer with CURLE_WRITE_ERROR */
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *q;

		while (cap < b->len + n)
			cap *= 2;
		if (cap > b->max)
			cap = b->max;
		q = realloc(b->buf, cap);
		if (!q)
			return 0;
		b->buf = q;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return n;
}

/* A streaming call's body holds one message per line: the first must be
 * {"result": ...} (an {"error": ...} line instead is etcd's answer). */
static int call_stream_first(struct be_etcd *c, struct be_ej *x, const char *path,
			     const struct call_body *b, json_t **resp)
{
	const char *nl = memchr(b->buf, '\n', b->len);
	size_t len = nl ? (size_t)(nl - b->buf) : b->len;
	json_t *root, *r;
	int rc;

	rc = be__ej_load(x, path, b->buf, len, &root);
	if (rc)
		return be__etcd_refuse(c, path, c->err);
	r = json_object_get(root, "result");
	if (r && json_is_object(r) && !json_object_get(root, "error")) {
		*resp = json_incref(r);
		json_decref(root);
		return 0;
	}
	rc = json_object_get(root, "error") && !r ? be__ej_grpc_error(x, root, true) : -EBADMSG;
	json_decref(root);
	if (rc == -EBADMSG) {
		if (r)
			be__ej_fail(x, "%s: result is not an object, or comes with an error", path);
		return be__etcd_refuse(c, path, c->err);
	}
	return be__etcd_failed(c, rc);
}

int be__etcd_call(struct be_etcd *c, const char *path, json_t *req, bool stream, json_t **resp)
{
	struct call_body b = { .max = c->lim.max_response };
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	char url[ETCD_MAX_URL + 64];
	const char *ep = c->ep[c->cur];
	json_t *root;
	char *body;
	long status = 0;
	CURLcode crc;
	int rc;

	*resp = NULL;
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return be__etcd_fail(c, -ENOMEM, "%s: cannot build the request", path);
	snprintf(url, sizeof(url), "%s%s", ep, path);
	curl_easy_setopt(c->h, CURLOPT_URL, url);
	curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, call_write);
	curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &b);
	atomic_fetch_add_explicit(&c->st.requests, 1, memory_order_relaxed);
	crc = curl_easy_perform(c->h);
	curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, NULL);
	free(body);
	if (b.over) {
		rc = be__ej_fail(&x, "%s: response over the limit of %zu bytes", path, b.max);
		rc = be__etcd_refuse(c, path, c->err);
		goto out;
	}
	if (crc != CURLE_OK) {
		rc = be__etcd_fail(c, be__etcd_curl_errno(crc), "%s %s: %s", ep, path,
				   curl_easy_strerror(crc));
		goto out;
	}
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
	if (status == 200 && stream) {
		rc = call_stream_first(c, &x, path, &b, resp);
		goto out;
	}
	rc = be__ej_load(&x, path, b.buf ? b.buf : "", b.len, &root);
	if (rc) {
		rc = be__etcd_refuse(c, path, c->err);
		goto out;
	}
	if (status == 200) {
		*resp = root;
		goto out;
	}
	rc = be__ej_grpc_error(&x, root, false);
	json_decref(root);
	if (rc == -EBADMSG) {
		snprintf(c->err, sizeof(c->err), "%s: HTTP %ld without an etcd error", path, status);
		rc = be__etcd_refuse(c, path, c->err);
	} else {
		rc = be__etcd_failed(c, rc);
	}
out:
	free(b.buf);
	return rc;
}

int be__etcd_call_rev(struct be_etcd *c, const char *path, json_t *req, int64_t *revision)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	json_t *resp;
	int64_t rev;
	int rc;

	rc = be__etcd_call(c, path, req, false, &resp);
	if (rc)
		return rc;
	rc = be__ej_header(&x, resp, strrchr(path, '/') + 1, true, &rev);
	json_decref(resp);
	if (rc)
		return be__etcd_refuse(c, path, c->err);
	if (revision)
		*revision = rev;
	return 0;
}
