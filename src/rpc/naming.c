/*
 * naming.c - naming sources: the replicas of each service, fed by a
 * backend, followed by channels on any worker.
 *
 * Model. A source is a list of records under one mutex, with a version
 * bumped by every change, and a list of watches (one per channel fed by
 * it). Backends write: in code (set/put/del), the static file (below), a
 * discovery service later (issue 17: etcd, from its own thread, through
 * the same calls). Channels read on their own worker: a change queues a
 * refresh on each watching channel's worker with be_worker_call() (at most
 * one queued per watch; a change while one is queued is picked up by it,
 * because the refresh reads the source when it runs, not when queued).
 * So a backend never touches a channel, and a channel never waits on a
 * backend's network.
 *
 * Separation of speeds: a source says who serves what (changes in
 * seconds); whether a replica answers right now is the channel's own,
 * in-band business (failover.c, eject.c). A source that stops changing
 * (a file not rewritten, a discovery service unreachable) leaves the
 * channels on the last membership they were given.
 *
 * The static file: one record per line (record.c), '#' comments. It is
 * the whole truth of the source: a reload replaces every record. A
 * thread checks the file's identity (inode, size, mtime) every poll_ms
 * and reloads it when it changed; a file that does not parse is refused
 * whole (a half-read file must not drop half the replicas), logged,
 * counted, and the last good set stays.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

#define FILE_MAX (16u << 20)

struct rpc_watch {
	struct be_rpc_naming *n;
	struct be_rpc_chan *ch;   /* NULL once stopped (worker thread) */
	struct be_worker *w;
	char service[BE_RPC_NAME_MAX];
	uint32_t shard;
	atomic_int refs;          /* the channel's + one per queued refresh */
	atomic_bool queued;
	struct be__list link;     /* n->watches, under n->mu */
};

struct be_rpc_naming {
	pthread_mutex_t mu;
	struct be_rpc_record *recs;
	uint32_t nrecs, cap;
	struct be__list watches;
	struct be_rpc_naming_stats st;
	/* etcd backend */
	struct rpc_naming_etcd *etcd;
	/* file backend */
	char *path;
	uint32_t poll_ms;
	pthread_t thr;
	bool thr_started, stop;
	pthread_cond_t cv;
	struct stat last;
};

/* ---- watches */

static void watch_unref(struct rpc_watch *wt)
{
	if (atomic_fetch_sub(&wt->refs, 1) == 1)
		free(wt);
}

static void watch_run(struct be_worker *w, void *arg)
{
	struct rpc_watch *wt = arg;

	atomic_store(&wt->queued, false);
	if (wt->ch)
		be__rpc_chan_refresh(wt->ch);
	watch_unref(wt);
}

/* Tell the watches of @service (NULL: all). Called with n->mu held. */
static void naming_notify_locked(struct be_rpc_naming *n, const char *service)
{
	struct be__list *p;

	n->st.version++;
	n->st.updates++;
	n->st.records = n->nrecs;
	for (p = n->watches.next; p != &n->watches; p = p->next) {
		struct rpc_watch *wt = be__list_entry(p, struct rpc_watch, link);

		if (service && strcmp(wt->service, service))
			continue;
		if (atomic_exchange(&wt->queued, true))
			continue;
		atomic_fetch_add(&wt->refs, 1);
		if (be_worker_call(wt->w, watch_run, wt)) {
			be__log(BE_LOG_WARN, "naming: cannot queue a refresh of %s", wt->service);
			atomic_store(&wt->queued, false);
			atomic_fetch_sub(&wt->refs, 1);
		}
	}
}

int be__rpc_watch_start(struct be_rpc_chan *ch, struct be_rpc_naming *n, const char *service,
			uint32_t shard)
{
	struct rpc_watch *wt = calloc(1, sizeof(*wt));

	if (!wt)
		return -ENOMEM;
	wt->n = n;
	wt->ch = ch;
	wt->w = ch->rpc->w;
	snprintf(wt->service, sizeof(wt->service), "%s", service);
	wt->shard = shard;
	atomic_init(&wt->refs, 1);
	atomic_init(&wt->queued, false);
	pthread_mutex_lock(&n->mu);
	be__list_add_tail(&n->watches, &wt->link);
	pthread_mutex_unlock(&n->mu);
	ch->watch = wt;
	return 0;
}

void be__rpc_watch_stop(struct rpc_watch *wt)
{
	pthread_mutex_lock(&wt->n->mu);
	be__list_del_init(&wt->link);
	pthread_mutex_unlock(&wt->n->mu);
	wt->ch = NULL;
	watch_unref(wt);
}

static bool rec_matches(const struct be_rpc_record *r, const char *service, uint32_t shard)
{
	return !strcmp(r->service, service) &&
	       (shard == BE_RPC_ANY_SHARD || (r->shard_lo <= shard && shard <= r->shard_hi));
}

int be__rpc_watch_snapshot(struct rpc_watch *wt, struct be_rpc_record **recs, unsigned int *n)
{
	struct be_rpc_naming *nm = wt->n;
	struct be_rpc_record *v = NULL;
	uint32_t i, k = 0;

	pthread_mutex_lock(&nm->mu);
	for (i = 0; i < nm->nrecs; i++)
		k += rec_matches(&nm->recs[i], wt->service, wt->shard);
	if (k) {
		v = malloc((size_t)k * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&nm->mu);
			return -ENOMEM;
		}
		for (i = 0, k = 0; i < nm->nrecs; i++)
			if (rec_matches(&nm->recs[i], wt->service, wt->shard))
				v[k++] = nm->recs[i];
	}
	pthread_mutex_unlock(&nm->mu);
	*recs = v;
	*n = k;
	return 0;
}

/* ---- the store */

static bool name_ok(const char *s)
{
	size_t n = strnlen(s, BE_RPC_NAME_MAX);

	return n > 0 && n < BE_RPC_NAME_MAX;
}

/* A record a backend may store: what be_rpc_record_format() accepts, with
 * addresses a channel can use. */
static int rec_valid(const struct be_rpc_record *r)
{
	char line[BE_RPC_LINE_MAX + 1];
	struct be_rpc_record back;
	int len;

	if (!name_ok(r->service) || !name_ok(r->replica))
		return -EINVAL;
	len = be_rpc_record_format(r, line, sizeof(line));
	if (len < 0 || len > BE_RPC_LINE_MAX)
		return -EINVAL;
	/* What goes in must come out of the text form unchanged: one set
	 * of rules for code, files and discovery. */
	if (be_rpc_record_parse(line, (size_t)len, &back, NULL) ||
	    strcmp(back.service, r->service) || strcmp(back.replica, r->replica))
		return -EINVAL;
	return 0;
}

static int store_reserve(struct be_rpc_naming *n, uint32_t more)
{
	struct be_rpc_record *v;
	uint32_t cap;

	if (n->nrecs + more <= n->cap)
		return 0;
	cap = n->cap ? n->cap : 16;
	while (cap < n->nrecs + more)
		cap *= 2;
	v = realloc(n->recs, (size_t)cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	n->recs = v;
	n->cap = cap;
	return 0;
}

static int naming_find(struct be_rpc_naming *n, const char *service, const char *replica)
{
	uint32_t i;

	for (i = 0; i < n->nrecs; i++)
		if (!strcmp(n->recs[i].service, service) && !strcmp(n->recs[i].replica, replica))
			return (int)i;
	return -1;
}

int be_rpc_naming_create(struct be_rpc_naming **out)
{
	struct be_rpc_naming *n;

	if (!out)
		return -EINVAL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	pthread_mutex_init(&n->mu, NULL);
	be__list_init(&n->watches);
	*out = n;
	return 0;
}

int be_rpc_naming_set(struct be_rpc_naming *n, const char *service,
		      const struct be_rpc_record *recs, unsigned int nrecs)
{
	uint32_t i, j, k;
	int rc;

	if (!n || !service || !name_ok(service) || (nrecs && !recs))
		return -EINVAL;
	for (i = 0; i < nrecs; i++) {
		if (strcmp(recs[i].service, service) || rec_valid(&recs[i]))
			return -EINVAL;
		for (j = 0; j < i; j++)
			if (!strcmp(recs[i].replica, recs[j].replica))
				return -EINVAL;
	}
	pthread_mutex_lock(&n->mu);
	rc = store_reserve(n, nrecs);
	if (rc) {
		pthread_mutex_unlock(&n->mu);
		return rc;
	}
	for (i = 0, k = 0; i < n->nrecs; i++)
		if (strcmp(n->recs[i].service, service))
			n->recs[k++] = n->recs[i];
	n->nrecs = k;
	memcpy(n->recs + n->nrecs, recs, (size_t)nrecs * sizeof(*recs));
	n->nrecs += nrecs;
	naming_notify_locked(n, service);
	pthread_mutex_unlock(&n->mu);
	return 0;
}

int be_rpc_naming_put(struct be_rpc_naming *n, const struct be_rpc_record *r)
{
	int i, rc = 0;

	if (!n || !r || rec_valid(r))
		return -EINVAL;
	pthread_mutex_lock(&n->mu);
	i = naming_find(n, r->service, r->replica);
	if (i >= 0 && r->epoch < n->recs[i].epoch) {
		n->st.stale++;
		rc = -ESTALE;
	} else if (i >= 0) {
		n->recs[i] = *r;
		naming_notify_locked(n, r->service);
	} else if (!(rc = store_reserve(n, 1))) {
		n->recs[n->nrecs++] = *r;
		naming_notify_locked(n, r->service);
	}
	pthread_mutex_unlock(&n->mu);
	return rc;
}

int be_rpc_naming_del(struct be_rpc_naming *n, const char *service, const char *replica)
{
	int i;

	if (!n || !service || !replica)
		return -EINVAL;
	pthread_mutex_lock(&n->mu);
	i = naming_find(n, service, replica);
	if (i < 0) {
		pthread_mutex_unlock(&n->mu);
		return -ENOENT;
	}
	n->recs[i] = n->recs[--n->nrecs];
	naming_notify_locked(n, service);
	pthread_mutex_unlock(&n->mu);
	return 0;
}

int be_rpc_naming_get(struct be_rpc_naming *n, const char *service, struct be_rpc_record *out,
		      unsigned int max)
{
	uint32_t i;
	int k = 0;

	if (!n || !service || (max && !out))
		return -EINVAL;
	pthread_mutex_lock(&n->mu);
	for (i = 0; i < n->nrecs; i++) {
		if (strcmp(n->recs[i].service, service))
			continue;
		if ((unsigned int)k < max)
			out[k] = n->recs[i];
		k++;
	}
	pthread_mutex_unlock(&n->mu);
	return k;
}

void be_rpc_naming_stats_sized(struct be_rpc_naming *n, struct be_rpc_naming_stats *out)
{
	struct be_rpc_naming_stats st;

	pthread_mutex_lock(&n->mu);
	st = n->st;
	st.records = n->nrecs;
	pthread_mutex_unlock(&n->mu);
	st.size = sizeof(st);
	be__abi_write(out, &st, sizeof(st), RPC_NAMING_STATS_V1);
}

/* ---- the static file */

/* Read and parse @path whole. Returns 0 with the records, or an error
 * (logged with the line and the reason). */
static int file_load(const char *path, struct be_rpc_record **out, uint32_t *nout, struct stat *st)
{
	struct be_rpc_record *v = NULL;
	uint32_t n = 0, cap = 0, lineno = 0;
	char *text = NULL, *p, *end;
	ssize_t got;
	size_t len = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st->st_mode) || st->st_size > FILE_MAX) {
		be__log(BE_LOG_WARN, "naming %s: not a regular file of at most %u bytes", path,
			FILE_MAX);
		close(fd);
		return -EINVAL;
	}
	text = malloc((size_t)st->st_size + 1);
	if (!text) {
		close(fd);
		return -ENOMEM;
	}
	while (len < (size_t)st->st_size) {
		got = read(fd, text + len, (size_t)st->st_size - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	for (p = text, end = text + len; p < end; p++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct be_rpc_record r;
		const char *why;
		uint32_t i;
		int prc;

		lineno++;
		prc = be_rpc_record_parse(p, ll, &r, &why);
		p += ll;
		if (prc == -ENOENT)
			continue;
		if (prc) {
			be__log(BE_LOG_WARN, "naming %s:%u: %s", path, lineno, why);
			rc = -EINVAL;
			break;
		}
		for (i = 0; i < n; i++)
			if (!strcmp(v[i].service, r.service) && !strcmp(v[i].replica, r.replica))
				break;
		if (i < n) {
			be__log(BE_LOG_WARN, "naming %s:%u: replica %s %s given twice", path, lineno,
				r.service, r.replica);
			rc = -EINVAL;
			break;
		}
		if (n == cap) {
			struct be_rpc_record *nv;

			cap = cap ? cap * 2 : 16;
			nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n++] = r;
	}
	free(text);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*nout = n;
	return 0;
}

/* Replace every record with the file's. */
static int file_apply(struct be_rpc_naming *n)
{
	struct be_rpc_record *v = NULL;
	struct stat st;
	uint32_t k = 0;
	int rc;

	memset(&st, 0, sizeof(st));
	rc = file_load(n->path, &v, &k, &st);
	pthread_mutex_lock(&n->mu);
	if (rc) {
		n->st.errors++;
		/* Not again until the file changes. */
		n->last = st;
		pthread_mutex_unlock(&n->mu);
		return rc;
	}
	n->last = st;
	pthread_mutex_unlock(&n->mu);
	be__rpc_naming_replace(n, v, k, 0);
	return 0;
}

void be__rpc_naming_replace(struct be_rpc_naming *n, struct be_rpc_record *recs, uint32_t k,
			    uint32_t refused)
{
	pthread_mutex_lock(&n->mu);
	free(n->recs);
	n->recs = recs;
	n->nrecs = n->cap = k;
	n->st.reloads++;
	n->st.errors += refused;
	naming_notify_locked(n, NULL);
	pthread_mutex_unlock(&n->mu);
}

static bool file_changed(const struct stat *a, const struct stat *b)
{
	return a->st_ino != b->st_ino || a->st_dev != b->st_dev || a->st_size != b->st_size ||
	       a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
}

static void *file_main(void *arg)
{
	struct be_rpc_naming *n = arg;

	pthread_mutex_lock(&n->mu);
	while (!n->stop) {
		struct timespec ts;
		struct stat st;
		bool changed;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += n->poll_ms / 1000;
		ts.tv_nsec += (long)(n->poll_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&n->cv, &n->mu, &ts);
		if (n->stop)
			break;
		changed = !stat(n->path, &st) && file_changed(&st, &n->last);
		if (!changed)
			continue;
		pthread_mutex_unlock(&n->mu);
		file_apply(n);
		pthread_mutex_lock(&n->mu);
	}
	pthread_mutex_unlock(&n->mu);
	return NULL;
}

int be_rpc_reg_create(const char *uri, const struct be_rpc_record *recs, unsigned int nrecs,
		      uint32_t ttl_s, struct be_rpc_reg **out)
{
	if (!uri || !recs || !nrecs || !out)
		return -EINVAL;
#if BE_HAVE_ETCD
	if (!strncmp(uri, "etcd://", 7))
		return be__rpc_reg_etcd_create(uri + 7, recs, nrecs, ttl_s, out);
#endif
	return strstr(uri, "://") ? -EPROTONOSUPPORT : -EINVAL;
}

int be_rpc_reg_set_state(struct be_rpc_reg *r, int state)
{
	if (!r || (state != BE_RPC_SERVING && state != BE_RPC_DRAINING))
		return -EINVAL;
#if BE_HAVE_ETCD
	return be__rpc_reg_etcd_set_state(r, state);
#else
	return -EINVAL;
#endif
}

uint64_t be_rpc_reg_count(const struct be_rpc_reg *r)
{
#if BE_HAVE_ETCD
	return r ? be__rpc_reg_etcd_count(r) : 0;
#else
	(void)r;
	return 0;
#endif
}

void be_rpc_reg_destroy(struct be_rpc_reg *r)
{
#if BE_HAVE_ETCD
	be__rpc_reg_etcd_destroy(r);
#else
	(void)r; /* be_rpc_reg_create() never made one */
#endif
}

int be_rpc_naming_open(const char *uri, uint32_t poll_ms, struct be_rpc_naming **out)
{
	struct be_rpc_naming *n;
	pthread_condattr_t ca;
	int rc;

	if (!uri || !out)
		return -EINVAL;
#if BE_HAVE_ETCD
	if (!strncmp(uri, "etcd://", 7)) {
		rc = be_rpc_naming_create(&n);
		if (rc)
			return rc;
		rc = be__rpc_naming_etcd_open(n, uri + 7, poll_ms, &n->etcd);
		if (rc) {
			be_rpc_naming_destroy(n);
			return rc;
		}
		*out = n;
		return 0;
	}
#endif
	if (strncmp(uri, "file://", 7))
		return strstr(uri, "://") ? -EPROTONOSUPPORT : -EINVAL;
	if (!uri[7])
		return -EINVAL;
	rc = be_rpc_naming_create(&n);
	if (rc)
		return rc;
	n->path = strdup(uri + 7);
	n->poll_ms = poll_ms ? poll_ms : 1000;
	if (!n->path) {
		rc = -ENOMEM;
		goto err;
	}
	rc = file_apply(n);
	if (rc)
		goto err;
	n->st.updates = 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&n->thr, NULL, file_main, n);
	if (rc) {
		pthread_cond_destroy(&n->cv);
		goto err;
	}
	n->thr_started = true;
	*out = n;
	return 0;

err:
	be_rpc_naming_destroy(n);
	return rc;
}

void be_rpc_naming_destroy(struct be_rpc_naming *n)
{
	if (!n)
		return;
#if BE_HAVE_ETCD
	be__rpc_naming_etcd_close(n->etcd); /* no more snapshots after it */
#endif
	if (n->thr_started) {
		pthread_mutex_lock(&n->mu);
		n->stop = true;
		pthread_cond_signal(&n->cv);
		pthread_mutex_unlock(&n->mu);
		pthread_join(n->thr, NULL);
		pthread_cond_destroy(&n->cv);
	}
	if (!be__list_empty(&n->watches))
		be__log(BE_LOG_ERROR, "naming: destroyed while channels still watch it");
	pthread_mutex_destroy(&n->mu);
	free(n->recs);
	free(n->path);
	free(n);
}
