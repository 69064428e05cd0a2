/*
 * etcd_parse.c - the two parsers a fuzzer drives: one /v3/kv/range
 * response and one line of a /v3/watch stream. Pure functions of their
 * input (no I/O, no global state), each returning either a fully checked
 * result or -EBADMSG with a reason; test/fuzz/fuzz-etcd-parse.c feeds
 * them.
 *
 * A watch line is one JSON object, either {"result": WatchResponse} or,
 * when the gateway's stream broke, {"error": {...}} (etcd-server 3.4:
 * "etcdserver: no leader" ends a watch asked with the has-leader
 * requirement this way). Fragmented responses are never asked for, so a
 * fragment is refused rather than half-applied.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/etcd_int.h"

void be__etcd_range_free(struct be_etcd_range *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		be__ej_kv_free(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

int be__ej_range_resp(struct be_ej *x, const json_t *root, struct be_etcd_range *out)
{
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = be__ej_header(x, root, "range", true, &out->revision);
	if (!rc)
		rc = be__ej_range(x, root, "range", out);
	/* No key can be newer than the read that returned it. */
	for (i = 0; !rc && i < out->n; i++)
		if (out->kvs[i].mod_revision > out->revision)
			rc = be__ej_fail(x, "range.kvs[%zu].mod_revision: %" PRId64
					 " after the read's revision %" PRId64, i,
					 out->kvs[i].mod_revision, out->revision);
	if (rc)
		be__etcd_range_free(out);
	return rc;
}

int be__etcd_parse_range(const char *buf, size_t len, const struct be_etcd_limits *lim,
			 struct be_etcd_range *out, char *err, size_t errlen)
{
	struct be_ej x = { lim, err, errlen };
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = be__ej_load(&x, "range", buf, len, &root);
	if (rc)
		return rc;
	rc = be__ej_range_resp(&x, root, out);
	json_decref(root);
	return rc;
}

void be__etcd_wmsg_free(struct be_etcd_wmsg *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		be__ej_kv_free(&m->events[i].kv);
	free(m->events);
	memset(m, 0, sizeof(*m));
}

/* One mvccpb.Event at @ev into *@out. */
static int wmsg_event(struct be_ej *x, const json_t *ev, const char *where,
		      struct be_etcd_event *out)
{
	char at[64];
	json_t *t, *kv, *prev;
	struct be_etcd_kv pkv;
	int rc;

	if (!json_is_object(ev))
		return be__ej_fail(x, "%s: not an object", where);
	/* The type is an enum, written by name; PUT (0) is the default and
	 * is left out. Accept the numbers too, as the JSON mapping does. */
	t = json_object_get(ev, "type");
	if (!t || (json_is_string(t) && !strcmp(json_string_value(t), "PUT")) ||
	    (json_is_integer(t) && json_integer_value(t) == 0))
		out->type = BE_ETCD_EV_PUT;
	else if ((json_is_string(t) && !strcmp(json_string_value(t), "DELETE")) ||
		 (json_is_integer(t) && json_integer_value(t) == 1))
		out->type = BE_ETCD_EV_DELETE;
	else
		return be__ej_fail(x, "%s.type: not PUT or DELETE", where);
	rc = be__ej_obj(x, ev, where, "kv", true, &kv);
	if (rc)
		return rc;
	snprintf(at, sizeof(at), "%s.kv", where);
	rc = be__ej_kv(x, kv, at, out->type == BE_ETCD_EV_DELETE, &out->kv);
	if (rc)
		return rc;
	/* Never asked for, but checked like everything else if it comes. */
	rc = be__ej_obj(x, ev, where, "prev_kv", false, &prev);
	if (!rc && prev) {
		snprintf(at, sizeof(at), "%s.prev_kv", where);
		rc = be__ej_kv(x, prev, at, false, &pkv);
		if (!rc)
			be__ej_kv_free(&pkv);
	}
	if (rc)
		be__ej_kv_free(&out->kv);
	return rc;
}

/* The WatchResponse in "result". */
static int wmsg_result(struct be_ej *x, const json_t *r, struct be_etcd_wmsg *out)
{
	const char *reason;
	bool created, canceled, fragment;
	json_t *evs;
	size_t i, n;
	int rc;

	if ((rc = be__ej_header(x, r, "result", false, &out->revision)) ||
	    (rc = be__ej_i64(x, r, "result", "watch_id", -1, INT64_MAX, false, &out->watch_id)) ||
	    (rc = be__ej_bool(x, r, "result", "created", &created)) ||
	    (rc = be__ej_bool(x, r, "result", "canceled", &canceled)) ||
	    (rc = be__ej_bool(x, r, "result", "fragment", &fragment)) ||
	    (rc = be__ej_i64(x, r, "result", "compact_revision", 0, INT64_MAX, false,
			     &out->compact_revision)) ||
	    (rc = be__ej_str(x, r, "result", "cancel_reason", 4096, false, &reason)) ||
	    (rc = be__ej_arr(x, r, "result", "events", x->lim->max_kvs, &evs)))
		return rc;
	n = evs ? json_array_size(evs) : 0;
	if (fragment)
		return be__ej_fail(x, "result.fragment: fragments were not asked for");
	if ((created || canceled) && n)
		return be__ej_fail(x, "result: events in a %s response",
				   created ? "created" : "canceled");
	if (created && canceled)
		return be__ej_fail(x, "result: both created and canceled");
	if (canceled) {
		out->kind = BE_ETCD_WMSG_CANCELED;
		if (out->compact_revision) {
			out->error = BE_ETCD_ECOMPACTED;
			be__ej_fail(x, "etcd: revision compacted, oldest kept %" PRId64,
				    out->compact_revision);
		} else {
			out->error = -ECANCELED;
			be__ej_fail(x, "etcd: watch canceled: %.200s",
				    reason && *reason ? reason : "(no reason)");
		}
		return 0;
	}
	if (out->compact_revision)
		return be__ej_fail(x, "result.compact_revision: set on a watch not canceled");
	if (created) {
		out->kind = BE_ETCD_WMSG_CREATED;
		return 0;
	}
	if (!n) {
		out->kind = BE_ETCD_WMSG_PROGRESS;
		return 0;
	}
	out->kind = BE_ETCD_WMSG_EVENTS;
	out->events = calloc(n, sizeof(*out->events));
	if (!out->events)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		char at[48];
		int64_t mr;

		snprintf(at, sizeof(at), "result.events[%zu]", i);
		rc = wmsg_event(x, json_array_get(evs, i), at, &out->events[i]);
		if (rc)
			return rc;
		out->n = i + 1;
		mr = out->events[i].kv.mod_revision;
		if (i && mr < out->events[i - 1].kv.mod_revision)
			return be__ej_fail(x, "%s: revision %" PRId64 " before the one ahead of it",
					   at, mr);
		if (out->revision && mr > out->revision)
			return be__ej_fail(x, "%s: revision %" PRId64 " after the header's %" PRId64,
					   at, mr, out->revision);
	}
	return 0;
}

int be__etcd_parse_watch(const char *line, size_t len, const struct be_etcd_limits *lim,
			 struct be_etcd_wmsg *out, char *err, size_t errlen)
{
	struct be_ej x = { lim, err, errlen };
	json_t *root, *r;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = be__ej_load(&x, "watch", line, len, &root);
	if (rc)
		return rc;
	r = json_object_get(root, "result");
	if (r && json_object_get(root, "error")) {
		rc = be__ej_fail(&x, "watch: both result and error");
	} else if (r) {
		if (!json_is_object(r))
			rc = be__ej_fail(&x, "watch.result: not an object");
		else
			rc = wmsg_result(&x, r, out);
	} else if (json_object_get(root, "error")) {
		rc = be__ej_grpc_error(&x, root, true);
		if (rc != -EBADMSG) {
			out->kind = BE_ETCD_WMSG_ERROR;
			out->error = rc;
			rc = 0;
		}
	} else {
		rc = be__ej_fail(&x, "watch: neither result nor error");
	}
	json_decref(root);
	if (rc)
		be__etcd_wmsg_free(out);
	return rc;
}
