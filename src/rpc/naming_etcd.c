/*
 * naming_etcd.c - the etcd:// backend of a naming source (built with the
 * etcd client, src/discovery).
 *
 * be_rpc_naming_open("etcd://HOST:PORT[,HOST:PORT...]/PREFIX") follows
 * the keys under /PREFIX in etcd: one record per key, its value in the
 * text format of the static file (record.c; the key itself is not read).
 * The discovery thread (disc.h) reads the prefix, watches it and hands
 * over whole memberships; each becomes the source's whole truth, as a
 * reload of the static file does, and the channels watching the source
 * follow it.
 *
 * Differences from the file, because a key is written atomically and by
 * its own replica: a record that does not parse is refused alone (logged
 * with its key, counted in the source's errors), not the whole snapshot;
 * a replica given by two keys keeps the first in key order. A snapshot
 * marked stale (etcd unreachable) changes nothing: the channels keep the
 * last membership, and no replica is dropped because etcd is down.
 *
 * Threads: the snapshots arrive on the discovery thread (a subscriber
 * without a worker); the records are parsed there, outside the source's
 * lock, and swapped in under it.
 *
 * Registrations (be_rpc_reg_create()) are the other side: a server's own
 * records written under a lease by a discovery thread of their own, each
 * under PREFIX/<service>/<replica> (docs/DISCOVERY.md, "Key layout").
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "discovery/disc.h"
#include "rpc/rpc_int.h"
#include "util/log.h"

#define ETCD_WAIT_DEF_MS 2000

struct rpc_naming_etcd {
	struct be_rpc_naming *n;
	struct be_disc *d;
	char *where;              /* for the log */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool first;               /* a snapshot was applied */
};

/* Runs on the discovery thread: one whole membership. */
static void etcd_view(struct be_worker *w, const struct be_disc_view *v, void *arg)
{
	struct rpc_naming_etcd *e = arg;
	struct be_rpc_record *recs;
	uint32_t k = 0, refused = 0, j;
	size_t i;

	(void)w;
	if (v->stale)
		return;
	recs = malloc((v->n ? v->n : 1) * sizeof(*recs));
	if (!recs) {
		be__log(BE_LOG_WARN, "naming etcd://%s: out of memory: snapshot %llu not applied",
			e->where, (unsigned long long)v->seq);
		return;
	}
	for (i = 0; i < v->n; i++) {
		const struct be_disc_member *m = &v->m[i];
		const char *why = "empty value";
		int rc;

		rc = be_rpc_record_parse((const char *)m->value, m->value_len, &recs[k], &why);
		if (!rc) {
			for (j = 0; j < k; j++)
				if (!strcmp(recs[j].service, recs[k].service) &&
				    !strcmp(recs[j].replica, recs[k].replica))
					break;
			if (j == k) {
				k++;
				continue;
			}
			why = "replica given by an earlier key too";
		}
		refused++;
		be__log(BE_LOG_WARN, "naming etcd://%s: key %.*s refused: %s", e->where,
			(int)(m->key_len > 256 ? 256 : m->key_len), (const char *)m->key, why);
	}
	be__rpc_naming_replace(e->n, recs, k, refused);
	pthread_mutex_lock(&e->mu);
	e->first = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* "h:p,h:p/prefix" -> "http://h:p,http://h:p" and "/prefix". */
static int etcd_parse_uri(const char *where, char **endpoints, const char **prefix)
{
	const char *slash = strchr(where, '/'), *p, *q;
	size_t len = 0;
	char *out;

	if (!slash || slash == where || !slash[1])
		return -EINVAL;
	for (p = where; p < slash; p = q + 1) {
		q = memchr(p, ',', (size_t)(slash - p));
		if (!q)
			q = slash;
		if (q == p || !memchr(p, ':', (size_t)(q - p)))
			return -EINVAL;
		len += 8 + (size_t)(q - p);
	}
	out = malloc(len + 1);
	if (!out)
		return -ENOMEM;
	len = 0;
	for (p = where; p < slash; p = q + 1) {
		q = memchr(p, ',', (size_t)(slash - p));
		if (!q)
			q = slash;
		len += (size_t)sprintf(out + len, "%shttp://%.*s", len ? "," : "", (int)(q - p), p);
	}
	*endpoints = out;
	*prefix = slash;
	return 0;
}

void be__rpc_naming_etcd_close(struct rpc_naming_etcd *e)
{
	if (!e)
		return;
	be__disc_destroy(e->d); /* joins the thread: no snapshot after it */
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e->where);
	free(e);
}

int be__rpc_naming_etcd_open(struct be_rpc_naming *n, const char *where, uint32_t wait_ms,
			     struct rpc_naming_etcd **out)
{
	struct rpc_naming_etcd *e;
	struct be_disc_opts o;
	pthread_condattr_t ca;
	struct timespec until;
	const char *prefix;
	char *endpoints;
	int rc;

	rc = etcd_parse_uri(where, &endpoints, &prefix);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e || !(e->where = strdup(where))) {
		free(e);
		free(endpoints);
		return -ENOMEM;
	}
	e->n = n;
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cv, &ca);
	pthread_condattr_destroy(&ca);
	be__disc_opts_default(&o);
	o.etcd.endpoints = endpoints;
	o.prefix = prefix;
	o.prefix_len = strlen(prefix);
	rc = be__disc_create(&o, &e->d);
	free(endpoints);
	if (!rc)
		rc = be__disc_subscribe(e->d, NULL, etcd_view, e);
	if (!rc)
		rc = be__disc_start(e->d);
	if (rc) {
		be__log(BE_LOG_WARN, "naming etcd://%s: cannot start: %s", where, be_strerror(rc));
		be__rpc_naming_etcd_close(e);
		return rc;
	}
	/* The first membership, for a while: a source that is empty at
	 * first refuses every call. Not an error when it does not come:
	 * etcd being down must not keep a client from starting. */
	clock_gettime(CLOCK_MONOTONIC, &until);
	wait_ms = wait_ms ? wait_ms : ETCD_WAIT_DEF_MS;
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&e->mu);
	while (!e->first && pthread_cond_timedwait(&e->cv, &e->mu, &until) != ETIMEDOUT)
		;
	if (!e->first)
		be__log(BE_LOG_WARN, "naming etcd://%s: no membership after %u ms; following it "
				     "when etcd answers", where, wait_ms);
	pthread_mutex_unlock(&e->mu);
	*out = e;
	return 0;
}

/* ---- registrations */

struct be_rpc_reg {
	struct be_disc *d;
	unsigned int n;
	struct be_rpc_record *recs; /* as registered, with the state set since */
	char (*keys)[BE_RPC_LINE_MAX];
};

static void reg_free(struct be_rpc_reg *r)
{
	be__disc_destroy(r->d);
	free(r->recs);
	free(r->keys);
	free(r);
}

int be__rpc_reg_etcd_create(const char *where, const struct be_rpc_record *recs,
			    unsigned int nrecs, uint32_t ttl_s, struct be_rpc_reg **out)
{
	char line[BE_RPC_LINE_MAX];
	struct be_disc_opts o;
	struct be_rpc_reg *r;
	const char *prefix;
	char *endpoints;
	unsigned int i;
	size_t plen;
	int rc, len;

	rc = etcd_parse_uri(where, &endpoints, &prefix);
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (r) {
		r->recs = malloc(nrecs * sizeof(*r->recs));
		r->keys = malloc(nrecs * sizeof(*r->keys));
	}
	if (!r || !r->recs || !r->keys) {
		if (r) {
			free(r->recs);
			free(r->keys);
		}
		free(r);
		free(endpoints);
		return -ENOMEM;
	}
	memcpy(r->recs, recs, nrecs * sizeof(*recs));
	r->n = nrecs;
	be__disc_opts_default(&o);
	o.etcd.endpoints = endpoints;
	o.prefix = prefix;
	o.prefix_len = plen = strlen(prefix);
	if (ttl_s)
		o.ttl_s = ttl_s;
	rc = be__disc_create(&o, &r->d);
	free(endpoints);
	if (rc) {
		free(r->recs);
		free(r->keys);
		free(r);
		return rc;
	}
	for (i = 0; i < nrecs && !rc; i++) {
		len = be_rpc_record_format(&recs[i], line, sizeof(line));
		if (len < 0 || (size_t)len >= sizeof(line)) {
			rc = -EINVAL;
			break;
		}
		if (snprintf(r->keys[i], sizeof(r->keys[i]), "%s%s%s/%s", prefix,
			     prefix[plen - 1] == '/' ? "" : "/", recs[i].service,
			     recs[i].replica) >= (int)sizeof(r->keys[i])) {
			rc = -EINVAL;
			break;
		}
		rc = be__disc_register(r->d, r->keys[i], strlen(r->keys[i]), line, (size_t)len);
	}
	if (!rc)
		rc = be__disc_start(r->d);
	if (rc) {
		reg_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int be__rpc_reg_etcd_set_state(struct be_rpc_reg *r, int state)
{
	char line[BE_RPC_LINE_MAX];
	unsigned int i;
	int len, rc;

	for (i = 0; i < r->n; i++) {
		r->recs[i].state = state;
		len = be_rpc_record_format(&r->recs[i], line, sizeof(line));
		if (len < 0 || (size_t)len >= sizeof(line))
			return -EINVAL;
		rc = be__disc_update(r->d, r->keys[i], strlen(r->keys[i]), line, (size_t)len);
		if (rc)
			return rc;
	}
	return 0;
}

uint64_t be__rpc_reg_etcd_count(const struct be_rpc_reg *r)
{
	struct be_disc_stats st;

	be__disc_stats(r->d, &st);
	return st.registrations + st.updates;
}

void be__rpc_reg_etcd_destroy(struct be_rpc_reg *r)
{
	if (r)
		reg_free(r); /* revokes the lease: the keys go at once */
}
