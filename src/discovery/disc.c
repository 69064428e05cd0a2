/*
 * disc.c - the discovery thread (see disc.h for the model).
 *
 * The loop. Each pass: retry deliveries that failed, send a keepalive (or
 * register) when one is due, make sure a watch runs (reading the prefix
 * first: a read after every watch end costs one range request and makes
 * compaction, restarts and refused lines all the same simple case), then
 * run the watch until the next keepalive is due, at most a second. Events
 * are applied to the sorted copy; one snapshot is made per pass that
 * changed something, so a burst of events becomes one snapshot.
 *
 * Snapshots. One allocation holds the view, its members, their bytes and
 * one delivery record per subscriber (the callback and its argument, so
 * a delivery still queued on a worker after be__disc_destroy() needs
 * nothing of the be_disc). Its reference count is one for the thread's
 * "latest" pointer plus one per delivery queued; the last to drop it
 * frees it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "discovery/disc.h"
#include "util/common.h"
#include "util/log.h"

#define DISC_DEF_TTL_S 3
#define DISC_DEF_RETRY_MIN_MS 100
#define DISC_DEF_RETRY_MAX_MS 2000
#define DISC_MAX_PASS_MS 1000

struct disc_view;

struct disc_dlv {
	struct disc_view *v;
	be_disc_fn fn;
	void *arg;
};

struct disc_view {
	struct be_disc_view pub;
	_Atomic unsigned int refs;
	struct be_disc_member *m;
	struct disc_dlv dl[]; /* then the members, then their bytes */
};

struct disc_sub {
	struct be_worker *w;
	be_disc_fn fn;
	void *arg;
	bool pending; /* the latest snapshot still has to reach it */
};

/* An owned key and value (a registered record, or a member). */
struct disc_kv {
	uint8_t *key;
	size_t key_len;
	uint8_t *value;
	size_t value_len;
	int64_t mod_revision;
	int64_t lease;
};

struct be_disc {
	struct be_disc_opts o;
	uint8_t *prefix;
	struct be_etcd *c;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu; /* stop, watch (for cancel), the sleep */
	pthread_cond_t cv;
	bool stop;
	struct be_etcd_watch *watch;
	struct disc_sub subs[BE_DISC_MAX_SUBS];
	size_t n_subs;
	struct disc_kv *regs;
	size_t n_regs;
	/* be__disc_update(): per record, a new value (NULL: none) taken
	 * by the thread on its next pass; under mu. */
	struct disc_kv *pend;
	bool rewrite; /* the thread's: regs changed since they were written */
	/* the thread's own */
	struct disc_kv *mem; /* the membership, ascending keys */
	size_t n_mem, cap_mem;
	int64_t revision;
	bool have;    /* a read succeeded once */
	bool stale;   /* the latest snapshot says stale */
	bool changed; /* since the latest snapshot */
	uint64_t seq;
	struct disc_view *latest;
	int64_t lease;
	uint64_t next_ka_ns;
	unsigned int backoff_ms;
	struct {
		_Atomic uint64_t views, reads, watches, outages, registrations, keepalive_errors,
			delivery_retries, updates;
	} st;
};

void be__disc_opts_default(struct be_disc_opts *o)
{
	memset(o, 0, sizeof(*o));
	be__etcd_opts_default(&o->etcd);
	o->etcd.request_timeout_ms = 0;
	o->ttl_s = DISC_DEF_TTL_S;
	o->retry_min_ms = DISC_DEF_RETRY_MIN_MS;
	o->retry_max_ms = DISC_DEF_RETRY_MAX_MS;
}

static void kv_free(struct disc_kv *kv)
{
	free(kv->key);
	free(kv->value);
}

/* Copy @k/@v into @kv. 0 or -ENOMEM. */
static int kv_set(struct disc_kv *kv, const void *k, size_t kl, const void *v, size_t vl)
{
	uint8_t *nk = malloc(kl + 1), *nv = malloc(vl + 1);

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	memcpy(nk, k, kl);
	nk[kl] = 0;
	if (vl)
		memcpy(nv, v, vl);
	nv[vl] = 0;
	kv_free(kv);
	kv->key = nk;
	kv->key_len = kl;
	kv->value = nv;
	kv->value_len = vl;
	return 0;
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, BE_MIN(al, bl));

	return c ? c : (al > bl) - (al < bl);
}

/* The index of @k in the membership, or where it would go (*@found 0). */
static size_t mem_find(const struct be_disc *d, const uint8_t *k, size_t kl, bool *found)
{
	size_t lo = 0, hi = d->n_mem;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = key_cmp(d->mem[mid].key, d->mem[mid].key_len, k, kl);

		if (!c) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Apply one event to the membership. 0 or -ENOMEM. */
static int mem_apply(struct be_disc *d, const struct be_etcd_event *ev)
{
	const struct be_etcd_kv *kv = &ev->kv;
	bool found;
	size_t i = mem_find(d, kv->key, kv->key_len, &found);

	if (ev->type == BE_ETCD_EV_DELETE) {
		if (!found)
			return 0;
		kv_free(&d->mem[i]);
		memmove(&d->mem[i], &d->mem[i + 1], (d->n_mem - i - 1) * sizeof(d->mem[0]));
		d->n_mem--;
		d->changed = true;
		return 0;
	}
	if (!found) {
		if (d->n_mem == d->cap_mem) {
			size_t cap = d->cap_mem ? d->cap_mem * 2 : 16;
			struct disc_kv *m = realloc(d->mem, cap * sizeof(*m));

			if (!m)
				return -ENOMEM;
			d->mem = m;
			d->cap_mem = cap;
		}
		memmove(&d->mem[i + 1], &d->mem[i], (d->n_mem - i) * sizeof(d->mem[0]));
		memset(&d->mem[i], 0, sizeof(d->mem[i]));
		d->n_mem++;
	}
	if (kv_set(&d->mem[i], kv->key, kv->key_len, kv->value, kv->value_len)) {
		if (!found) { /* leave no empty slot behind */
			memmove(&d->mem[i], &d->mem[i + 1], (d->n_mem - i - 1) * sizeof(d->mem[0]));
			d->n_mem--;
		}
		return -ENOMEM;
	}
	d->mem[i].mod_revision = kv->mod_revision;
	d->mem[i].lease = kv->lease;
	d->changed = true;
	return 0;
}

/* Replace the membership with a read's. 0 or -ENOMEM (then unchanged). */
static int mem_replace(struct be_disc *d, const struct be_etcd_range *r)
{
	struct disc_kv *m = r->n ? calloc(r->n, sizeof(*m)) : NULL;
	bool same = r->n == d->n_mem;
	size_t i;

	if (r->n && !m)
		return -ENOMEM;
	for (i = 0; i < r->n; i++) {
		const struct be_etcd_kv *kv = &r->kvs[i];

		if (kv_set(&m[i], kv->key, kv->key_len, kv->value, kv->value_len)) {
			while (i--)
				kv_free(&m[i]);
			free(m);
			return -ENOMEM;
		}
		m[i].mod_revision = kv->mod_revision;
		m[i].lease = kv->lease;
		if (same && (d->mem[i].mod_revision != kv->mod_revision ||
			     key_cmp(d->mem[i].key, d->mem[i].key_len, kv->key, kv->key_len)))
			same = false;
	}
	for (i = 0; i < d->n_mem; i++)
		kv_free(&d->mem[i]);
	free(d->mem);
	d->mem = m;
	d->n_mem = d->cap_mem = r->n;
	if (!same)
		d->changed = true;
	return 0;
}

static void view_put(struct disc_view *v)
{
	if (v && atomic_fetch_sub(&v->refs, 1) == 1)
		free(v);
}

/* Runs on the worker's thread. */
static void disc_deliver_st(struct be_worker *w, void *arg)
{
	struct disc_dlv *dl = arg;

	dl->fn(w, &dl->v->pub, dl->arg);
	view_put(dl->v);
}

/* Queue the latest snapshot on subscriber @i. */
static void disc_deliver(struct be_disc *d, size_t i)
{
	struct disc_view *v = d->latest;

	if (!d->subs[i].w) {
		/* No worker: on this thread, now (the etcd:// naming backend). */
		d->subs[i].fn(NULL, &v->pub, d->subs[i].arg);
		d->subs[i].pending = false;
		return;
	}
	atomic_fetch_add(&v->refs, 1);
	if (be_worker_call(d->subs[i].w, disc_deliver_st, &v->dl[i])) {
		atomic_fetch_sub(&v->refs, 1);
		if (!d->subs[i].pending)
			atomic_fetch_add_explicit(&d->st.delivery_retries, 1, memory_order_relaxed);
		d->subs[i].pending = true;
		return;
	}
	d->subs[i].pending = false;
}

/* Make a snapshot of the membership and hand it to every subscriber. */
static int disc_publish(struct be_disc *d, bool stale)
{
	size_t i, bytes = 0, head, members;
	struct disc_view *v;
	uint8_t *p;

	for (i = 0; i < d->n_mem; i++)
		bytes += d->mem[i].key_len + d->mem[i].value_len + 2;
	head = BE_ALIGN_UP(sizeof(*v) + d->n_subs * sizeof(v->dl[0]), (size_t)8);
	members = d->n_mem * sizeof(struct be_disc_member);
	v = malloc(head + members + bytes);
	if (!v)
		return -ENOMEM; /* d->changed stays: the next pass tries again */
	atomic_init(&v->refs, 1);
	v->m = (struct be_disc_member *)((char *)v + head);
	p = (uint8_t *)v->m + members;
	for (i = 0; i < d->n_mem; i++) {
		const struct disc_kv *kv = &d->mem[i];

		memcpy(p, kv->key, kv->key_len + 1);
		v->m[i].key = p;
		v->m[i].key_len = kv->key_len;
		p += kv->key_len + 1;
		memcpy(p, kv->value, kv->value_len + 1);
		v->m[i].value = p;
		v->m[i].value_len = kv->value_len;
		p += kv->value_len + 1;
		v->m[i].mod_revision = kv->mod_revision;
		v->m[i].lease = kv->lease;
	}
	v->pub = (struct be_disc_view){ .seq = ++d->seq, .revision = d->revision, .stale = stale,
					.n = d->n_mem, .m = v->m };
	for (i = 0; i < d->n_subs; i++)
		v->dl[i] = (struct disc_dlv){ v, d->subs[i].fn, d->subs[i].arg };
	view_put(d->latest);
	d->latest = v;
	d->stale = stale;
	d->changed = false;
	atomic_fetch_add_explicit(&d->st.views, 1, memory_order_relaxed);
	for (i = 0; i < d->n_subs; i++)
		disc_deliver(d, i);
	return 0;
}

static bool disc_stopping(struct be_disc *d)
{
	bool s;

	pthread_mutex_lock(&d->mu);
	s = d->stop;
	pthread_mutex_unlock(&d->mu);
	return s;
}

/* Sleep @ms unless stopped. */
static void disc_sleep(struct be_disc *d, unsigned int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&d->mu);
	if (!d->stop)
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	pthread_mutex_unlock(&d->mu);
}

/* etcd could not be reached: keep the last membership, say so once. */
static void disc_outage(struct be_disc *d, int rc)
{
	if (!d->have || d->stale)
		return;
	atomic_fetch_add_explicit(&d->st.outages, 1, memory_order_relaxed);
	be_log_warn("discovery: etcd unreachable (%d: %s); keeping the last membership (%zu members)",
		    rc, be__etcd_last_error(d->c), d->n_mem);
	disc_publish(d, true);
}

static void disc_on_events(void *arg, const struct be_etcd_event *ev, size_t n)
{
	struct be_disc *d = arg;
	size_t i;

	for (i = 0; i < n; i++) {
		if (mem_apply(d, &ev[i])) {
			/* Out of memory mid-change: end the watch; the next
			 * pass reads the whole prefix again. */
			be__etcd_watch_cancel(d->watch);
			return;
		}
		d->revision = ev[i].kv.mod_revision;
	}
}

/* Read the prefix, hand on what changed, open a watch from there. */
static int disc_resync(struct be_disc *d)
{
	struct be_etcd_watch_opts wo = { .idle_ms = d->o.idle_ms };
	struct be_etcd_watch *w;
	struct be_etcd_range r;
	int rc;

	rc = be__etcd_get(d->c, d->prefix, d->o.prefix_len, BE_ETCD_PREFIX, 0, 0, &r);
	if (rc)
		return rc;
	atomic_fetch_add_explicit(&d->st.reads, 1, memory_order_relaxed);
	rc = mem_replace(d, &r);
	d->revision = r.revision;
	be__etcd_range_free(&r);
	if (rc)
		return rc;
	if (d->changed || d->stale || !d->have) {
		if (d->stale)
			be_log_warn("discovery: etcd reachable again (%zu members)", d->n_mem);
		d->have = true;
		disc_publish(d, false);
	}
	wo.start_revision = d->revision + 1;
	rc = be__etcd_watch_create(d->c, d->prefix, d->o.prefix_len, BE_ETCD_PREFIX, &wo,
				   disc_on_events, d, &w);
	if (rc)
		return rc;
	pthread_mutex_lock(&d->mu);
	d->watch = w;
	if (d->stop)
		be__etcd_watch_cancel(w);
	pthread_mutex_unlock(&d->mu);
	atomic_fetch_add_explicit(&d->st.watches, 1, memory_order_relaxed);
	return 0;
}

static void disc_watch_close(struct be_disc *d)
{
	struct be_etcd_watch *w;

	pthread_mutex_lock(&d->mu);
	w = d->watch;
	d->watch = NULL;
	pthread_mutex_unlock(&d->mu);
	be__etcd_watch_destroy(w);
}

/* Grant a lease and write every record under it. */
static int disc_register(struct be_disc *d)
{
	int64_t id;
	size_t i;
	int rc;

	rc = be__etcd_lease_grant(d->c, d->o.ttl_s, &id, NULL);
	if (rc)
		return rc;
	for (i = 0; i < d->n_regs; i++) {
		rc = be__etcd_put(d->c, d->regs[i].key, d->regs[i].key_len, d->regs[i].value,
				  d->regs[i].value_len, id, NULL);
		if (rc) {
			be__etcd_lease_revoke(d->c, id);
			return rc;
		}
	}
	d->lease = id;
	atomic_fetch_add_explicit(&d->st.registrations, 1, memory_order_relaxed);
	if (d->rewrite) {
		d->rewrite = false;
		atomic_fetch_add_explicit(&d->st.updates, 1, memory_order_relaxed);
	}
	return 0;
}

/* Take the values be__disc_update() left, and write them under the lease
 * (a registration still to come writes them anyway). A failed write is
 * tried again on the next pass. */
static void disc_updates(struct be_disc *d)
{
	size_t i;

	pthread_mutex_lock(&d->mu);
	for (i = 0; i < d->n_regs; i++)
		if (d->pend[i].value) {
			free(d->regs[i].value);
			d->regs[i].value = d->pend[i].value;
			d->regs[i].value_len = d->pend[i].value_len;
			d->pend[i].value = NULL;
			d->rewrite = true;
		}
	pthread_mutex_unlock(&d->mu);
	if (!d->rewrite || !d->lease)
		return;
	for (i = 0; i < d->n_regs; i++)
		if (be__etcd_put(d->c, d->regs[i].key, d->regs[i].key_len, d->regs[i].value,
				 d->regs[i].value_len, d->lease, NULL)) {
			be_log_warn("discovery: rewriting a record failed (%s)",
				    be__etcd_last_error(d->c));
			return;
		}
	d->rewrite = false;
	atomic_fetch_add_explicit(&d->st.updates, 1, memory_order_relaxed);
}

/* Keep the registration alive; due every ttl_s / 3. */
static void disc_keepalive(struct be_disc *d, uint64_t now)
{
	uint64_t period = (uint64_t)d->o.ttl_s * 1000000000ull / 3;
	int rc;

	if (!d->lease) {
		rc = disc_register(d);
		if (rc) {
			be_log_warn("discovery: registering failed (%d: %s)", rc,
				    be__etcd_last_error(d->c));
			/* Try again soon: every moment unregistered counts. */
			d->next_ka_ns = now + BE_MIN(period, (uint64_t)d->backoff_ms * 1000000ull);
			return;
		}
		d->next_ka_ns = now + period;
		return;
	}
	rc = be__etcd_lease_keepalive(d->c, d->lease, NULL);
	if (!rc) {
		d->next_ka_ns = now + period;
		return;
	}
	atomic_fetch_add_explicit(&d->st.keepalive_errors, 1, memory_order_relaxed);
	if (rc == -ENOENT) {
		/* Cut off for a TTL: the records are gone. Write them again. */
		be_log_warn("discovery: lease %" PRId64 " expired; registering again", d->lease);
		d->lease = 0;
		d->next_ka_ns = now;
		return;
	}
	/* Half a period: one more try before the lease can expire. */
	d->next_ka_ns = now + period / 2;
}

static void *disc_main(void *arg)
{
	struct be_disc *d = arg;

	d->backoff_ms = d->o.retry_min_ms;
	while (!disc_stopping(d)) {
		uint64_t now = be__now_ns(), wait_ns = DISC_MAX_PASS_MS * 1000000ull;
		size_t i;
		int rc;

		for (i = 0; i < d->n_subs; i++)
			if (d->subs[i].pending)
				disc_deliver(d, i);
		if (d->changed && d->latest)
			disc_publish(d, d->stale);
		if (d->n_regs)
			disc_updates(d);
		if (d->n_regs && now >= d->next_ka_ns)
			disc_keepalive(d, now);
		if (!d->watch) {
			rc = disc_resync(d);
			if (rc) {
				disc_outage(d, rc);
				disc_sleep(d, d->backoff_ms);
				d->backoff_ms = BE_MIN(d->backoff_ms * 2, d->o.retry_max_ms);
				continue;
			}
			d->backoff_ms = d->o.retry_min_ms;
		}
		now = be__now_ns();
		if (d->n_regs)
			wait_ns = d->next_ka_ns > now ? BE_MIN(wait_ns, d->next_ka_ns - now) : 0;
		rc = be__etcd_watch_run(d->watch, (int)(wait_ns / 1000000));
		if (d->changed)
			disc_publish(d, false);
		if (rc) {
			be_log_info("discovery: watch ended (%d: %s); reading again", rc,
				    be__etcd_watch_error(d->watch));
			disc_watch_close(d);
		}
	}
	disc_watch_close(d);
	/* A clean shutdown deregisters at once rather than after a TTL. */
	if (d->lease)
		be__etcd_lease_revoke(d->c, d->lease);
	return NULL;
}

int be__disc_create(const struct be_disc_opts *o, struct be_disc **out)
{
	struct be_etcd_opts eo;
	struct be_disc *d;
	int rc;

	if (!o || !out || !o->prefix || !o->prefix_len || o->ttl_s <= 0 || !o->retry_min_ms ||
	    o->retry_max_ms < o->retry_min_ms)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->o = *o;
	d->prefix = malloc(o->prefix_len);
	if (!d->prefix) {
		free(d);
		return -ENOMEM;
	}
	memcpy(d->prefix, o->prefix, o->prefix_len);
	d->o.prefix = d->prefix;
	/* A keepalive must never delay the next one. */
	eo = o->etcd;
	if (!eo.request_timeout_ms)
		eo.request_timeout_ms = (unsigned int)BE_MAX(o->ttl_s * 1000 / 3, 1);
	rc = be__etcd_create(&eo, &d->c);
	if (rc) {
		free(d->prefix);
		free(d);
		return rc;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	*out = d;
	return 0;
}

int be__disc_subscribe(struct be_disc *d, struct be_worker *w, be_disc_fn fn, void *arg)
{
	if (!fn)
		return -EINVAL;
	if (d->started)
		return -EBUSY;
	if (d->n_subs == BE_DISC_MAX_SUBS)
		return -ENOSPC;
	d->subs[d->n_subs++] = (struct disc_sub){ .w = w, .fn = fn, .arg = arg };
	return 0;
}

int be__disc_register(struct be_disc *d, const void *key, size_t key_len, const void *value,
		      size_t value_len)
{
	struct disc_kv *r;

	if (!key_len || (!value && value_len))
		return -EINVAL;
	if (d->started)
		return -EBUSY;
	r = realloc(d->pend, (d->n_regs + 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	d->pend = r;
	memset(&r[d->n_regs], 0, sizeof(r[0]));
	r = realloc(d->regs, (d->n_regs + 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	d->regs = r;
	memset(&r[d->n_regs], 0, sizeof(r[0]));
	if (kv_set(&r[d->n_regs], key, key_len, value ? value : "", value_len))
		return -ENOMEM;
	d->n_regs++;
	return 0;
}

int be__disc_update(struct be_disc *d, const void *key, size_t key_len, const void *value,
		    size_t value_len)
{
	uint8_t *v;
	size_t i;

	if (!value && value_len)
		return -EINVAL;
	for (i = 0; i < d->n_regs; i++)
		if (d->regs[i].key_len == key_len && !memcmp(d->regs[i].key, key, key_len))
			break;
	if (i == d->n_regs)
		return -ENOENT;
	v = malloc(value_len + 1);
	if (!v)
		return -ENOMEM;
	if (value_len)
		memcpy(v, value, value_len);
	v[value_len] = 0;
	pthread_mutex_lock(&d->mu);
	free(d->pend[i].value);
	d->pend[i].value = v;
	d->pend[i].value_len = value_len;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

int be__disc_start(struct be_disc *d)
{
	int rc;

	if (d->started)
		return -EALREADY;
	rc = pthread_create(&d->thread, NULL, disc_main, d);
	if (rc)
		return -rc;
	d->started = true;
	return 0;
}

void be__disc_destroy(struct be_disc *d)
{
	size_t i;

	if (!d)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		if (d->watch)
			be__etcd_watch_cancel(d->watch);
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
	}
	view_put(d->latest);
	for (i = 0; i < d->n_mem; i++)
		kv_free(&d->mem[i]);
	free(d->mem);
	for (i = 0; i < d->n_regs; i++) {
		kv_free(&d->regs[i]);
		free(d->pend[i].value);
	}
	free(d->regs);
	free(d->pend);
	be__etcd_destroy(d->c);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d->prefix);
	free(d);
}

void be__disc_stats(const struct be_disc *d, struct be_disc_stats *out)
{
	struct be_etcd_stats es;

	out->views = atomic_load_explicit(&d->st.views, memory_order_relaxed);
	out->reads = atomic_load_explicit(&d->st.reads, memory_order_relaxed);
	out->watches = atomic_load_explicit(&d->st.watches, memory_order_relaxed);
	out->outages = atomic_load_explicit(&d->st.outages, memory_order_relaxed);
	out->registrations = atomic_load_explicit(&d->st.registrations, memory_order_relaxed);
	out->keepalive_errors = atomic_load_explicit(&d->st.keepalive_errors, memory_order_relaxed);
	out->delivery_retries = atomic_load_explicit(&d->st.delivery_retries, memory_order_relaxed);
	out->updates = atomic_load_explicit(&d->st.updates, memory_order_relaxed);
	be__etcd_stats(d->c, &es);
	out->refused = es.refused;
}
