/*
 * etcd_kv.c - put, range, delete, compare-and-swap and compaction.
 *
 * Each function builds one request, makes one unary call and checks the
 * answer field by field: a write must report the store's revision after
 * it, a read may only return keys inside the range asked for, and a
 * transaction must answer the one operation it was given. Nothing is
 * retried here; the caller decides (an idempotent read may be repeated,
 * a put with a lease may have happened even when its answer was lost).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "discovery/etcd_int.h"

/* Check that every kv of @r lies in the range asked for. */
static int kv_check_keys(struct be_ej *x, const struct be_etcd_range *r, const char *where,
			 const void *key, size_t len, unsigned int flags)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		if (!be__etcd_in_range(r->kvs[i].key, r->kvs[i].key_len, key, len, flags))
			return be__ej_fail(x, "%s.kvs[%zu]: a key outside the range asked for",
					   where, i);
	return 0;
}

int be__etcd_put(struct be_etcd *c, const void *key, size_t key_len, const void *value,
		 size_t value_len, int64_t lease, int64_t *revision)
{
	json_t *req;

	if (!key_len || lease < 0 || (!value && value_len))
		return -EINVAL;
	req = json_pack("{s:o, s:o}", "key", be__ej_b64(key, key_len), "value",
			be__ej_b64(value ? value : "", value_len));
	if (req && lease && json_object_set_new(req, "lease", be__ej_int(lease))) {
		json_decref(req);
		req = NULL;
	}
	if (!req)
		return -ENOMEM;
	return be__etcd_call_rev(c, "/v3/kv/put", req, revision);
}

int be__etcd_get(struct be_etcd *c, const void *key, size_t key_len, unsigned int flags,
		 int64_t limit, int64_t at_revision, struct be_etcd_range *out)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	json_t *req, *resp;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((!key_len && !(flags & BE_ETCD_PREFIX)) || limit < 0 || at_revision < 0)
		return -EINVAL;
	req = json_object();
	if (!req || be__ej_set_range(req, key, key_len, flags) ||
	    (limit && json_object_set_new(req, "limit", be__ej_int(limit))) ||
	    (at_revision && json_object_set_new(req, "revision", be__ej_int(at_revision)))) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = be__etcd_call(c, "/v3/kv/range", req, false, &resp);
	if (rc)
		return rc;
	rc = be__ej_range_resp(&x, resp, out);
	json_decref(resp);
	if (!rc && limit && out->n > (uint64_t)limit)
		rc = be__ej_fail(&x, "range: %zu kvs for a limit of %" PRId64, out->n, limit);
	if (!rc)
		rc = kv_check_keys(&x, out, "range", key, key_len, flags);
	if (rc == -EBADMSG) {
		be__etcd_range_free(out);
		return be__etcd_refuse(c, "/v3/kv/range", c->err);
	}
	return rc;
}

int be__etcd_delete(struct be_etcd *c, const void *key, size_t key_len, unsigned int flags,
		    int64_t *deleted, int64_t *revision)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	json_t *req, *resp;
	int64_t rev, n;
	int rc;

	if (!key_len && !(flags & BE_ETCD_PREFIX))
		return -EINVAL;
	req = json_object();
	if (!req || be__ej_set_range(req, key, key_len, flags)) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = be__etcd_call(c, "/v3/kv/deleterange", req, false, &resp);
	if (rc)
		return rc;
	rc = be__ej_header(&x, resp, "deleterange", true, &rev);
	if (!rc)
		rc = be__ej_i64(&x, resp, "deleterange", "deleted", 0, INT64_MAX, false, &n);
	if (!rc && !(flags & BE_ETCD_PREFIX) && n > 1)
		rc = be__ej_fail(&x, "deleterange.deleted: %" PRId64 " for one key", n);
	json_decref(resp);
	if (rc)
		return be__etcd_refuse(c, "/v3/kv/deleterange", c->err);
	if (deleted)
		*deleted = n;
	if (revision)
		*revision = rev;
	return 0;
}

static const char *const cas_target[] = {
	[BE_ETCD_MOD] = "MOD",
	[BE_ETCD_VERSION] = "VERSION",
	[BE_ETCD_CREATE] = "CREATE",
};
static const char *const cas_field[] = {
	[BE_ETCD_MOD] = "mod_revision",
	[BE_ETCD_VERSION] = "version",
	[BE_ETCD_CREATE] = "create_revision",
};

/* The request of be__etcd_cas(), or NULL. */
static json_t *cas_request(const void *key, size_t key_len, const struct be_etcd_cas *op)
{
	json_t *cmp, *write;

	cmp = json_pack("{s:o, s:s, s:s, s:o}", "key", be__ej_b64(key, key_len), "target",
			cas_target[op->target], "result", "EQUAL", cas_field[op->target],
			be__ej_int(op->expect));
	if (op->del)
		write = json_pack("{s:{s:o}}", "request_delete_range", "key",
				  be__ej_b64(key, key_len));
	else
		write = json_pack("{s:{s:o, s:o, s:o}}", "request_put", "key",
				  be__ej_b64(key, key_len), "value",
				  be__ej_b64(op->value ? op->value : "", op->value_len), "lease",
				  be__ej_int(op->lease));
	/* "o" takes its reference even when packing fails: nothing leaks. */
	return json_pack("{s:[o], s:[o], s:[{s:{s:o}}]}", "compare", cmp, "success", write,
			 "failure", "request_range", "key", be__ej_b64(key, key_len));
}

/* The one response of a transaction's branch: @name must be its only
 * member. */
static int cas_one(struct be_ej *x, const json_t *resp, const char *name, json_t **out)
{
	json_t *rs, *r;
	int rc;

	rc = be__ej_arr(x, resp, "txn", "responses", 1, &rs);
	if (rc)
		return rc;
	if (!rs || json_array_size(rs) != 1)
		return be__ej_fail(x, "txn.responses: not one response for one operation");
	r = json_array_get(rs, 0);
	if (!json_is_object(r) || json_object_size(r) != 1)
		return be__ej_fail(x, "txn.responses[0]: not one operation's response");
	return be__ej_obj(x, r, "txn.responses[0]", name, true, out);
}

int be__etcd_cas(struct be_etcd *c, const void *key, size_t key_len, const struct be_etcd_cas *op,
		 struct be_etcd_cas_result *res)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	struct be_etcd_range r = { 0 };
	json_t *req, *resp, *one;
	bool ok;
	int rc;

	memset(res, 0, sizeof(*res));
	if (!key_len || op->target > BE_ETCD_CREATE || op->expect < 0 || op->lease < 0 ||
	    (!op->value && op->value_len))
		return -EINVAL;
	req = cas_request(key, key_len, op);
	if (!req)
		return -ENOMEM;
	rc = be__etcd_call(c, "/v3/kv/txn", req, false, &resp);
	if (rc)
		return rc;
	rc = be__ej_header(&x, resp, "txn", true, &res->revision);
	if (!rc)
		rc = be__ej_bool(&x, resp, "txn", "succeeded", &ok);
	if (!rc && ok)
		rc = cas_one(&x, resp, op->del ? "response_delete_range" : "response_put", &one);
	if (!rc && !ok) {
		rc = cas_one(&x, resp, "response_range", &one);
		if (!rc)
			rc = be__ej_range(&x, one, "txn.response_range", &r);
		if (!rc)
			rc = kv_check_keys(&x, &r, "txn.response_range", key, key_len, 0);
		if (!rc && r.n) {
			res->mod_revision = r.kvs[0].mod_revision;
			res->version = r.kvs[0].version;
		}
		be__etcd_range_free(&r);
	}
	json_decref(resp);
	if (rc == -EBADMSG)
		return be__etcd_refuse(c, "/v3/kv/txn", c->err);
	if (rc)
		return rc;
	res->succeeded = ok;
	return 0;
}

int be__etcd_compact(struct be_etcd *c, int64_t revision)
{
	json_t *req;

	if (revision <= 0)
		return -EINVAL;
	/* physical: answer once the old revisions are gone, not before. */
	req = json_pack("{s:o, s:b}", "revision", be__ej_int(revision), "physical", 1);
	if (!req)
		return -ENOMEM;
	return be__etcd_call_rev(c, "/v3/kv/compaction", req, NULL);
}
