/*
 * etcd_watch.c - one /v3/watch stream over its own connection.
 *
 * The stream. The gateway maps etcd's bidirectional Watch RPC onto one
 * HTTP/1.1 POST whose request body stays open (chunked) and whose
 * response is newline-delimited JSON, one WatchResponse per line. The
 * body opens with a create_request and later carries progress_requests;
 * libcurl reads it through watch_read(), which pauses the upload when
 * nothing is queued and is resumed when a request is. Each response line
 * is parsed whole (be__etcd_parse_watch()) as it completes, and its
 * events go to the callback at once, so memory is bounded by one line.
 *
 * Ending. The stream never ends well: etcd cancels it (compaction, or a
 * member that lost its leader, since every request carries the
 * has-leader requirement), the connection breaks, a line is refused, the
 * owner cancels, or nothing arrives for idle_ms. The last is the bound
 * that keeps a frozen etcd (SIGSTOP, a half-open TCP connection) from
 * holding a watcher forever: after idle_ms / 3 of silence a
 * progress_request goes out, which a live etcd answers, and only
 * idle_ms of total silence ends the watch. Whatever the end, the owner
 * opens a new watch from be__etcd_watch_next_rev().
 *
 * Order. Events are delivered in revision order and never twice: an
 * event older than the next revision expected is refused, not dropped
 * silently, because it would mean etcd and the client disagree about
 * what was delivered.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/etcd_int.h"
#include "util/common.h"
#include "util/log.h"

#define WATCH_DEF_IDLE_MS 6000
#define WATCH_TAIL_MAX 4096 /* see watch_tail_whole() */
#define WATCH_PROGRESS_REQ "{\"progress_request\":{}}"

struct be_etcd_watch {
	struct be_etcd *c;
	CURLM *m;
	CURL *h;
	struct curl_slist *hdrs; /* the client's, and a chunked request body */
	be_etcd_watch_cb cb;
	void *arg;
	uint8_t *key;
	size_t key_len;
	unsigned int flags;
	int64_t next_rev;    /* the first revision not delivered yet */
	int64_t compact_rev; /* after BE_ETCD_ECOMPACTED */
	bool from_now;       /* start_revision 0: learn next_rev from "created" */
	bool created;
	bool delivered;      /* an event came on this stream */
	bool fresh;          /* ... in this be__etcd_watch_run() pass */
	uint64_t idle_ns;
	uint64_t last_rx_ns;    /* the last byte from etcd */
	uint64_t last_probe_ns; /* the last progress_request */
	/* the request body: queued bytes, and whether libcurl waits for more */
	char *out;
	size_t out_len, out_off, out_cap;
	bool paused;
	/* the response: the line being assembled (or a whole error body) */
	char *line;
	size_t line_len, line_cap;
	long http; /* status, once known */
	int status; /* 0 while open, then why it ended */
	_Atomic bool cancel;
	char err[ETCD_ERR_LEN];
};

/* End @w with @rc (the first end wins) and count it. */
static void watch_end(struct be_etcd_watch *w, int rc)
{
	if (w->status)
		return;
	w->status = rc;
	if (rc == -EBADMSG) {
		atomic_fetch_add_explicit(&w->c->st.refused, 1, memory_order_relaxed);
		be_log_warn("etcd watch: response refused: %s", w->err);
	} else {
		be_log_info("etcd watch ended: %s", w->err);
	}
	atomic_fetch_add_explicit(&w->c->st.failed, 1, memory_order_relaxed);
}

/* Queue one request (@n bytes at @p, a JSON object without its newline),
 * waking the upload if it sleeps. */
static int watch_send(struct be_etcd_watch *w, const char *p, size_t n)
{
	size_t need = n + 1;

	if (w->out_len + need > w->out_cap) {
		size_t cap = BE_MAX(w->out_cap * 2, w->out_len + need);
		char *q = realloc(w->out, cap);

		if (!q)
			return -ENOMEM;
		w->out = q;
		w->out_cap = cap;
	}
	memcpy(w->out + w->out_len, p, n);
	w->out_len += n;
	w->out[w->out_len++] = '\n';
	if (w->paused) {
		w->paused = false;
		curl_easy_pause(w->h, CURLPAUSE_CONT);
	}
	return 0;
}

static size_t watch_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct be_etcd_watch *w = arg;
	size_t n = BE_MIN(size * nitems, w->out_len - w->out_off);

	if (!n) {
		w->paused = true;
		return CURL_READFUNC_PAUSE;
	}
	memcpy(buf, w->out + w->out_off, n);
	w->out_off += n;
	if (w->out_off == w->out_len)
		w->out_off = w->out_len = 0;
	return n;
}

/* Deliver the events of @m, after checking they are new and in range. */
static void watch_events(struct be_etcd_watch *w, const struct be_etcd_wmsg *m)
{
	struct be_ej x = { &w->c->lim, w->err, sizeof(w->err) };
	size_t i;

	if (!w->created) {
		be__ej_fail(&x, "watch: events before the watch was created");
		watch_end(w, -EBADMSG);
		return;
	}
	for (i = 0; i < m->n; i++) {
		const struct be_etcd_kv *kv = &m->events[i].kv;

		/* A transaction's events share a revision; one split over two
		 * messages continues the revision delivered last. */
		if (kv->mod_revision < w->next_rev &&
		    !(w->delivered && kv->mod_revision == w->next_rev - 1)) {
			be__ej_fail(&x, "watch: event of revision %" PRId64
				    " repeats what was delivered (next %" PRId64 ")",
				    kv->mod_revision, w->next_rev);
			watch_end(w, -EBADMSG);
			return;
		}
		if (!be__etcd_in_range(kv->key, kv->key_len, w->key, w->key_len, w->flags)) {
			be__ej_fail(&x, "watch: event of a key outside the range watched");
			watch_end(w, -EBADMSG);
			return;
		}
	}
	w->next_rev = m->events[m->n - 1].kv.mod_revision + 1;
	w->delivered = true;
	w->fresh = true;
	atomic_fetch_add_explicit(&w->c->st.events, m->n, memory_order_relaxed);
	w->cb(w->arg, m->events, m->n);
}

/* One complete line of the stream. */
static void watch_line(struct be_etcd_watch *w, const char *p, size_t n)
{
	struct be_etcd_wmsg m;
	int rc;

	if (!n)
		return;
	rc = be__etcd_parse_watch(p, n, &w->c->lim, &m, w->err, sizeof(w->err));
	if (rc) {
		watch_end(w, rc);
		return;
	}
	atomic_fetch_add_explicit(&w->c->st.watch_msgs, 1, memory_order_relaxed);
	switch (m.kind) {
	case BE_ETCD_WMSG_CREATED:
		if (w->created) {
			snprintf(w->err, sizeof(w->err), "watch: created twice");
			watch_end(w, -EBADMSG);
			break;
		}
		w->created = true;
		/* A watch from now starts after the revision it was created at. */
		if (w->from_now && m.revision)
			w->next_rev = m.revision + 1;
		break;
	case BE_ETCD_WMSG_EVENTS:
		watch_events(w, &m);
		break;
	case BE_ETCD_WMSG_PROGRESS:
		break; /* liveness only: see be__etcd_watch_next_rev() */
	case BE_ETCD_WMSG_CANCELED:
	case BE_ETCD_WMSG_ERROR:
		w->compact_rev = m.compact_revision;
		watch_end(w, m.error);
		break;
	}
	be__etcd_wmsg_free(&m);
}

static void watch_error_body(struct be_etcd_watch *w);
static bool watch_tail_whole(const struct be_etcd_watch *w);

static size_t watch_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct be_etcd_watch *w = arg;
	size_t n = size * nmemb, max = w->c->lim.max_response;

	w->last_rx_ns = be__now_ns();
	if (!w->http)
		curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->http);
	while (n && !w->status) {
		/* A non-200 answer is one error object: keep it whole. */
		const char *nl = w->http == 200 ? memchr(p, '\n', n) : NULL;
		size_t take = nl ? (size_t)(nl - p) : n;

		if (take > max - w->line_len) {
			snprintf(w->err, sizeof(w->err), "watch: a line over the limit of %zu bytes",
				 max);
			watch_end(w, -EBADMSG);
			break;
		}
		if (w->line_len + take > w->line_cap) {
			size_t cap = BE_MIN(BE_MAX(w->line_cap * 2, w->line_len + take), max);
			char *q = realloc(w->line, cap ? cap : 1);

			if (!q) {
				snprintf(w->err, sizeof(w->err), "watch: out of memory");
				watch_end(w, -ENOMEM);
				break;
			}
			w->line = q;
			w->line_cap = cap;
		}
		if (take)
			memcpy(w->line + w->line_len, p, take);
		w->line_len += take;
		p += take;
		n -= take;
		if (nl) {
			watch_line(w, w->line, w->line_len);
			w->line_len = 0;
			p++;
			n--;
		}
	}
	if (!w->status && watch_tail_whole(w)) {
		if (w->http == 200) {
			watch_line(w, w->line, w->line_len);
			w->line_len = 0;
		} else {
			watch_error_body(w);
		}
	}
	/* Returning short ends the transfer once the watch has ended. */
	return w->status ? 0 : size * nmemb;
}

/* A non-200 answer: one error object in w->line, in the unary form or,
 * when etcd refused the stream itself (no leader), the stream form. */
static void watch_error_body(struct be_etcd_watch *w)
{
	struct be_ej x = { &w->c->lim, w->err, sizeof(w->err) };
	json_t *root;
	int rc;

	rc = be__ej_load(&x, "watch", w->line ? w->line : "", w->line_len, &root);
	if (!rc) {
		rc = be__ej_grpc_error(&x, root, json_is_object(json_object_get(root, "error")));
		json_decref(root);
	}
	watch_end(w, rc);
}

/*
 * Whether the unterminated tail in w->line is a whole JSON object already.
 * The gateway ends a stream that failed (no leader) with an error object
 * and no newline after it, and then the end of the response; but libcurl
 * finishes a transfer only when both directions are done, and the request
 * body stays open, so that end is never reported. A JSON object is
 * self-delimiting, so a short tail that parses is taken as a line; the
 * bound keeps a long line arriving in many pieces from being parsed again
 * and again.
 */
static bool watch_tail_whole(const struct be_etcd_watch *w)
{
	json_t *j;

	if (!w->line_len || w->line_len > WATCH_TAIL_MAX || w->line[w->line_len - 1] != '}')
		return false;
	j = json_loadb(w->line, w->line_len, 0, NULL);
	json_decref(j);
	return j != NULL;
}

/* The transfer finished with @crc before the watch ended by a message. */
static void watch_done(struct be_etcd_watch *w, CURLcode crc)
{
	if (w->status)
		return;
	if (crc != CURLE_OK) {
		snprintf(w->err, sizeof(w->err), "watch: %s", curl_easy_strerror(crc));
		watch_end(w, be__etcd_curl_errno(crc));
		return;
	}
	if (w->http != 200) {
		watch_error_body(w);
		return;
	}
	if (w->line_len)
		watch_line(w, w->line, w->line_len);
	if (!w->status) {
		snprintf(w->err, sizeof(w->err), "watch: etcd closed the stream");
		watch_end(w, -ECONNRESET);
	}
}

int be__etcd_watch_create(struct be_etcd *c, const void *key, size_t key_len, unsigned int flags,
			  const struct be_etcd_watch_opts *o, be_etcd_watch_cb cb, void *arg,
			  struct be_etcd_watch **out)
{
	char url[1100];
	struct be_etcd_watch *w;
	json_t *cr = NULL, *req;
	char *body = NULL;
	int rc;

	if (!c || !cb || !out || (!key_len && !(flags & BE_ETCD_PREFIX)) ||
	    (o && o->start_revision < 0))
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->c = c;
	w->cb = cb;
	w->arg = arg;
	w->flags = flags;
	w->next_rev = o ? o->start_revision : 0;
	w->from_now = !w->next_rev;
	w->idle_ns = (uint64_t)(o && o->idle_ms ? o->idle_ms : WATCH_DEF_IDLE_MS) * 1000000ull;
	rc = -ENOMEM;
	w->key = malloc(key_len ? key_len : 1);
	if (!w->key)
		goto err;
	memcpy(w->key, key, key_len);
	w->key_len = key_len;
	/* progress_notify asks etcd for its own timed progress responses
	 * too (every 10 minutes by default): more liveness, at no cost. */
	cr = json_pack("{s:b}", "progress_notify", 1);
	if (!cr || be__ej_set_range(cr, key, key_len, flags) ||
	    (w->next_rev && json_object_set_new(cr, "start_revision", be__ej_int(w->next_rev))))
		goto err;
	req = json_pack("{s:O}", "create_request", cr);
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body || watch_send(w, body, strlen(body)))
		goto err;
	rc = -EIO;
	w->m = curl_multi_init();
	w->h = curl_easy_init();
	if (!w->m || !w->h)
		goto err;
	be__etcd_easy_setup(c, w->h);
	w->hdrs = be__etcd_headers(true);
	if (!w->hdrs)
		goto err;
	curl_easy_setopt(w->h, CURLOPT_HTTPHEADER, w->hdrs);
	snprintf(url, sizeof(url), "%s/v3/watch", c->ep[c->cur]);
	curl_easy_setopt(w->h, CURLOPT_URL, url);
	curl_easy_setopt(w->h, CURLOPT_POST, 1L);
	curl_easy_setopt(w->h, CURLOPT_READFUNCTION, watch_read);
	curl_easy_setopt(w->h, CURLOPT_READDATA, w);
	curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (curl_multi_add_handle(w->m, w->h) != CURLM_OK)
		goto err;
	w->last_rx_ns = w->last_probe_ns = be__now_ns();
	atomic_fetch_add_explicit(&c->st.watches, 1, memory_order_relaxed);
	json_decref(cr);
	free(body);
	*out = w;
	return 0;

err:
	json_decref(cr);
	free(body);
	be__etcd_watch_destroy(w);
	return rc;
}

int be__etcd_watch_run(struct be_etcd_watch *w, int timeout_ms)
{
	uint64_t now = be__now_ns(), until;
	int running, left;
	CURLMsg *msg;

	until = now + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
	w->fresh = false;
	while (!w->status) {
		if (atomic_load(&w->cancel)) {
			snprintf(w->err, sizeof(w->err), "watch: canceled");
			watch_end(w, -ECANCELED);
			break;
		}
		if (curl_multi_perform(w->m, &running) != CURLM_OK) {
			snprintf(w->err, sizeof(w->err), "watch: libcurl failed");
			watch_end(w, -EIO);
			break;
		}
		while ((msg = curl_multi_info_read(w->m, &left)))
			if (msg->msg == CURLMSG_DONE)
				watch_done(w, msg->data.result);
		if (w->status || w->fresh)
			break;
		now = be__now_ns();
		if (now - w->last_rx_ns >= w->idle_ns) {
			snprintf(w->err, sizeof(w->err), "watch: nothing from etcd for %" PRIu64 " ms",
				 w->idle_ns / 1000000);
			watch_end(w, -ETIMEDOUT);
			break;
		}
		if (now - w->last_rx_ns >= w->idle_ns / 3 &&
		    now - w->last_probe_ns >= w->idle_ns / 3) {
			w->last_probe_ns = now;
			if (watch_send(w, WATCH_PROGRESS_REQ, sizeof(WATCH_PROGRESS_REQ) - 1)) {
				snprintf(w->err, sizeof(w->err), "watch: out of memory");
				watch_end(w, -ENOMEM);
				break;
			}
			continue;
		}
		if (now >= until)
			break;
		/* Sleep until data, a wakeup, the deadline, or the next check
		 * of the idle bound, whichever comes first. */
		{
			uint64_t next = BE_MIN(until, BE_MAX(w->last_rx_ns, w->last_probe_ns) +
							      w->idle_ns / 3);
			uint64_t wait = next > now ? (next - now + 999999) / 1000000 : 0;

			curl_multi_poll(w->m, NULL, 0, (int)BE_MIN(wait, 1000u), NULL);
		}
	}
	return w->status;
}

int64_t be__etcd_watch_next_rev(const struct be_etcd_watch *w)
{
	return w->next_rev;
}

int64_t be__etcd_watch_compact_rev(const struct be_etcd_watch *w)
{
	return w->compact_rev;
}

const char *be__etcd_watch_error(const struct be_etcd_watch *w)
{
	return w->err;
}

void be__etcd_watch_cancel(struct be_etcd_watch *w)
{
	atomic_store(&w->cancel, true);
	if (w->m)
		curl_multi_wakeup(w->m);
}

void be__etcd_watch_destroy(struct be_etcd_watch *w)
{
	if (!w)
		return;
	if (w->m && w->h)
		curl_multi_remove_handle(w->m, w->h);
	if (w->h)
		curl_easy_cleanup(w->h);
	if (w->m)
		curl_multi_cleanup(w->m);
	curl_slist_free_all(w->hdrs);
	free(w->key);
	free(w->out);
	free(w->line);
	free(w);
}
