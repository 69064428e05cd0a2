/*
 * etcd_lease.c - leases: grant, keepalive, revoke, time to live.
 *
 * A replica's key lives as long as its lease: the replica refreshes the
 * lease every TTL/3, and when it dies (or is cut off from etcd for a TTL)
 * etcd deletes the key and every watcher sees the deletion.
 *
 * Keepalive is a bidirectional stream in etcd's gRPC API. Through the
 * gateway each keepalive is its own POST to /v3/lease/keepalive whose
 * body is one request: the gateway answers with one {"result": ...} line
 * and ends the stream. One request per keepalive costs a round trip a
 * second or so and holds no connection state that could go stale, and a
 * lost answer is simply the next keepalive's business.
 *
 * Etcd's ways of saying a lease is gone differ by call and all become
 * -ENOENT: revoke and time-to-live of an unknown lease fail with gRPC
 * NOT_FOUND or report TTL -1, a keepalive of one answers with TTL 0.
 */
#include <errno.h>
#include <inttypes.h>

#include "discovery/etcd_int.h"

/* The longest TTL etcd grants (its MaxLeaseTTL, 9000000000 s). */
#define ETCD_MAX_TTL 9000000000ll

/* The request {"ID": @id} into *@req. Returns 0, -EINVAL or -ENOMEM. */
static int lease_req(int64_t id, json_t **req)
{
	if (id <= 0)
		return -EINVAL;
	*req = json_pack("{s:o}", "ID", be__ej_int(id));
	return *req ? 0 : -ENOMEM;
}

/* POST {"ID": @id} to @path; *@resp as be__etcd_call(). */
static int lease_call(struct be_etcd *c, const char *path, int64_t id, bool stream, json_t **resp)
{
	json_t *req;
	int rc = lease_req(id, &req);

	return rc ? rc : be__etcd_call(c, path, req, stream, resp);
}

/* Check the "ID" of @resp against @id. */
static int lease_check_id(struct be_ej *x, const json_t *resp, const char *where, int64_t id)
{
	int64_t got;
	int rc = be__ej_i64(x, resp, where, "ID", 1, INT64_MAX, true, &got);

	if (!rc && got != id)
		rc = be__ej_fail(x, "%s.ID: %" PRId64 " answers lease %" PRId64, where, got, id);
	return rc;
}

int be__etcd_lease_grant(struct be_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	const char *error;
	json_t *req, *resp;
	int64_t rev, got_id, ttl;
	int rc;

	if (ttl_s <= 0 || ttl_s > ETCD_MAX_TTL)
		return -EINVAL;
	req = json_pack("{s:o}", "TTL", be__ej_int(ttl_s));
	if (!req)
		return -ENOMEM;
	rc = be__etcd_call(c, "/v3/lease/grant", req, false, &resp);
	if (rc)
		return rc;
	if ((rc = be__ej_header(&x, resp, "grant", true, &rev)) ||
	    (rc = be__ej_str(&x, resp, "grant", "error", 4096, false, &error)) ||
	    (rc = be__ej_i64(&x, resp, "grant", "ID", 1, INT64_MAX, true, &got_id)) ||
	    (rc = be__ej_i64(&x, resp, "grant", "TTL", 1, ETCD_MAX_TTL, true, &ttl)))
		goto out;
	if (error && *error) {
		rc = be__etcd_fail(c, -EIO, "etcd: lease grant: %.200s", error);
		json_decref(resp);
		return rc;
	}
	*id = got_id;
	if (granted)
		*granted = ttl;
out:
	json_decref(resp);
	return rc ? be__etcd_refuse(c, "/v3/lease/grant", c->err) : 0;
}

int be__etcd_lease_keepalive(struct be_etcd *c, int64_t id, int64_t *ttl)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	json_t *resp;
	int64_t rev, t;
	int rc;

	rc = lease_call(c, "/v3/lease/keepalive", id, true, &resp);
	if (rc)
		return rc;
	if (!(rc = be__ej_header(&x, resp, "keepalive", true, &rev)) &&
	    !(rc = lease_check_id(&x, resp, "keepalive", id)))
		rc = be__ej_i64(&x, resp, "keepalive", "TTL", 0, ETCD_MAX_TTL, false, &t);
	json_decref(resp);
	if (rc)
		return be__etcd_refuse(c, "/v3/lease/keepalive", c->err);
	if (!t)
		return be__etcd_fail(c, -ENOENT, "etcd: lease %" PRId64 " is gone", id);
	if (ttl)
		*ttl = t;
	return 0;
}

int be__etcd_lease_revoke(struct be_etcd *c, int64_t id)
{
	json_t *req;
	int rc = lease_req(id, &req);

	return rc ? rc : be__etcd_call_rev(c, "/v3/lease/revoke", req, NULL);
}

int be__etcd_lease_ttl(struct be_etcd *c, int64_t id, int64_t *ttl, int64_t *granted)
{
	struct be_ej x = { &c->lim, c->err, sizeof(c->err) };
	json_t *resp;
	int64_t rev, t, g;
	int rc;

	rc = lease_call(c, "/v3/lease/timetolive", id, false, &resp);
	if (rc)
		return rc;
	if (!(rc = be__ej_header(&x, resp, "timetolive", true, &rev)) &&
	    !(rc = lease_check_id(&x, resp, "timetolive", id)) &&
	    !(rc = be__ej_i64(&x, resp, "timetolive", "TTL", -1, ETCD_MAX_TTL, false, &t)))
		rc = be__ej_i64(&x, resp, "timetolive", "grantedTTL", 0, ETCD_MAX_TTL, false, &g);
	json_decref(resp);
	if (rc)
		return be__etcd_refuse(c, "/v3/lease/timetolive", c->err);
	if (t < 0)
		return be__etcd_fail(c, -ENOENT, "etcd: lease %" PRId64 " is gone", id);
	*ttl = t;
	if (granted)
		*granted = g;
	return 0;
}
