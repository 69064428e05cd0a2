/*
 * Check that the parsers of etcd's responses refuse every malformed one
 * with -EBADMSG and a reason naming what is wrong, leave nothing behind
 * (the result zeroed, nothing leaked under ASan), and accept what etcd
 * 3.4 really sends (the valid samples below were taken from it) together
 * with fields they do not know. Wrong types, integers out of range or
 * not decimal, bad base64, sizes over the limits, keys out of order,
 * revisions that contradict each other, duplicate keys, truncated or
 * trailing input, NUL bytes and deep nesting are all covered.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/etcd.h"
#include "test.h"

static const struct be_etcd_limits lim = {
	.max_response = 1 << 20, .max_key = 16, .max_value = 32, .max_kvs = 4,
};

#define HDR "\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":\"1366\"," \
	    "\"revision\":\"10\",\"raft_term\":\"2\"}"
#define KV(k, v, c, m, ver) \
	"{\"key\":\"" k "\",\"create_revision\":\"" c "\",\"mod_revision\":\"" m \
	"\",\"version\":\"" ver "\",\"value\":\"" v "\"}"

/* Parse @s, a range response (be__etcd_parse_range() into *@out, a
 * struct be_etcd_range) or a watch line (@watch: be__etcd_parse_watch()
 * into a struct be_etcd_wmsg), and check the verdict: accepted (@why
 * NULL) or refused with -EBADMSG and a reason containing @why. */
static void parse(bool watch, const char *s, void *out, const char *why)
{
	const char *what = watch ? "watch line" : "range";
	char err[256] = "";
	int rc = watch ? be__etcd_parse_watch(s, strlen(s), &lim, out, err, sizeof(err))
		       : be__etcd_parse_range(s, strlen(s), &lim, out, err, sizeof(err));

	if (!why && rc)
		TEST_FAIL("refused a valid %s (%s): %s", what, err, s);
	if (why && rc != -EBADMSG)
		TEST_FAIL("%s accepted (%d): %s", what, rc, s);
	if (why && !strstr(err, why))
		TEST_FAIL("reason \"%s\" lacks \"%s\" for %s", err, why, s);
}

static void range_ok(const char *s, size_t n_kvs)
{
	struct be_etcd_range r;

	parse(false, s, &r, NULL);
	ASSERT_EQ(r.n, n_kvs);
	ASSERT_EQ(r.revision, 10);
	be__etcd_range_free(&r);
}

static void range_bad(const char *s, const char *why)
{
	struct be_etcd_range r;

	parse(false, s, &r, why);
	ASSERT(r.n == 0 && !r.kvs); /* nothing left behind */
}

static void test_range(void)
{
	char *deep, *big;
	size_t i, n;

	range_ok("{" HDR ",\"kvs\":[" KV("YQ==", "MQ==", "2", "5", "2") "],\"count\":\"1\"}", 1);
	range_ok("{" HDR "}", 0);
	/* Fields it does not know are skipped; a numeric int64 is allowed. */
	range_ok("{" HDR ",\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":2,\"mod_revision\":\"5\","
		 "\"version\":\"1\",\"new\":{\"x\":[1,2]}}],\"count\":\"1\",\"future\":true}", 1);
	range_ok("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "5", "1") "," KV("Yg==", "", "2", "5", "1")
		 "],\"count\":\"7\",\"more\":true}", 2);

	/* Not JSON, or not one object. */
	range_bad("", "not JSON");
	range_bad("hello", "not JSON");
	range_bad("[]", "not a JSON object");
	range_bad("{" HDR, "not JSON");
	range_bad("{" HDR "} {}", "not JSON");
	range_bad("{" HDR ",\"header\":{}}", "not JSON"); /* duplicate key */
	range_bad("{" HDR ",\"kvs\":[{\"key\":\"YQ==\\u0000\"}]}", "not JSON");
	range_bad("{" HDR ",\"x\":\"\xff\xfe\"}", "not JSON"); /* invalid UTF-8 */

	/* The header. */
	range_bad("{}", "header: missing");
	range_bad("{\"header\":[]}", "header: not an object");
	range_bad("{\"header\":{}}", "revision: missing");
	range_bad("{\"header\":{\"revision\":\"0\"}}", "outside");
	range_bad("{\"header\":{\"revision\":\"-1\"}}", "outside");
	range_bad("{\"header\":{\"revision\":\"9223372036854775808\"}}", "does not fit");
	range_bad("{\"header\":{\"revision\":\"99999999999999999999\"}}", "does not fit");
	range_bad("{\"header\":{\"revision\":\"123456789012345678901\"}}", "not a decimal");
	range_bad("{\"header\":{\"revision\":\"1e3\"}}", "not a decimal");
	range_bad("{\"header\":{\"revision\":\" 1\"}}", "not a decimal");
	range_bad("{\"header\":{\"revision\":\"+1\"}}", "not a decimal");
	range_bad("{\"header\":{\"revision\":\"\"}}", "not a decimal");
	range_bad("{\"header\":{\"revision\":\"0x10\"}}", "not a decimal");
	range_bad("{\"header\":{\"revision\":1.5}}", "not an integer");
	range_bad("{\"header\":{\"revision\":true}}", "not an integer");
	range_bad("{\"header\":{\"revision\":null}}", "not an integer");
	range_bad("{\"header\":{\"revision\":99999999999999999999}}", "not JSON");
	range_bad("{\"header\":{\"revision\":\"5\",\"cluster_id\":\"-1\"}}", "cluster_id");
	range_bad("{\"header\":{\"revision\":\"5\",\"member_id\":\"18446744073709551616\"}}",
		  "member_id: 18446744073709551616 does not fit");
	range_bad("{\"header\":{\"revision\":\"5\",\"raft_term\":{}}}", "raft_term");

	/* kvs and count. */
	range_bad("{" HDR ",\"kvs\":{}}", "kvs: not an array");
	range_bad("{" HDR ",\"kvs\":[1],\"count\":\"1\"}", "kvs[0]: not an object");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "5", "1") ",\"x\"],\"count\":\"2\"}", "kvs[1]");
	range_bad("{" HDR ",\"kvs\":[{\"create_revision\":\"2\",\"mod_revision\":\"5\","
		  "\"version\":\"1\"}],\"count\":\"1\"}", "key: missing");
	range_bad("{" HDR ",\"kvs\":[" KV("", "", "2", "5", "1") "],\"count\":\"1\"}", "key: empty");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ=", "", "2", "5", "1") "],\"count\":\"1\"}",
		  "key: bad base64");
	range_bad("{" HDR ",\"kvs\":[" KV("Y===", "", "2", "5", "1") "],\"count\":\"1\"}",
		  "key: bad base64");
	range_bad("{" HDR ",\"kvs\":[" KV("YR==", "", "2", "5", "1") "],\"count\":\"1\"}",
		  "key: bad base64"); /* stray bits */
	range_bad("{" HDR ",\"kvs\":[" KV("Y!==", "", "2", "5", "1") "],\"count\":\"1\"}",
		  "key: bad base64");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "MQ=", "2", "5", "1") "],\"count\":\"1\"}",
		  "value: bad base64");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "M=Q=", "2", "5", "1") "],\"count\":\"1\"}",
		  "value: bad base64");
	range_bad("{" HDR ",\"kvs\":[{\"key\":97,\"create_revision\":\"2\",\"mod_revision\":\"5\","
		  "\"version\":\"1\"}],\"count\":\"1\"}", "key: not a string");
	/* 17 bytes of key, 33 of value: one over each limit. */
	range_bad("{" HDR ",\"kvs\":[" KV("YWFhYWFhYWFhYWFhYWFhYWE=", "", "2", "5", "1")
		  "],\"count\":\"1\"}", "key: 17 bytes, over the limit of 16");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh",
					    "2", "5", "1") "],\"count\":\"1\"}", "value");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "11", "1") "],\"count\":\"1\"}",
		  "after the read's revision");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "6", "5", "1") "],\"count\":\"1\"}",
		  "create_revision");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "5", "0") "],\"count\":\"1\"}",
		  "version");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "0", "5", "1") "],\"count\":\"1\"}",
		  "create_revision");
	range_bad("{" HDR ",\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":\"2\",\"mod_revision\":"
		  "\"5\",\"version\":\"1\",\"lease\":\"-3\"}],\"count\":\"1\"}", "lease");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "5", "1") "],\"count\":\"0\"}",
		  "count: 0 but 1 kvs");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "5", "1") "]}", "count: 0 but 1 kvs");
	range_bad("{" HDR ",\"count\":\"-1\"}", "count");
	range_bad("{" HDR ",\"more\":\"yes\"}", "more: not a boolean");
	range_bad("{" HDR ",\"kvs\":[" KV("Yg==", "", "2", "5", "1") "," KV("YQ==", "", "2", "5", "1")
		  "],\"count\":\"2\"}", "not in ascending order");
	range_bad("{" HDR ",\"kvs\":[" KV("YQ==", "", "2", "5", "1") "," KV("YQ==", "", "2", "5", "1")
		  "],\"count\":\"2\"}", "not in ascending order");
	range_bad("{" HDR ",\"kvs\":[{},{},{},{},{}],\"count\":\"5\"}",
		  "kvs: 5 elements, over the limit of 4");

	/* Nesting far deeper than any parser's stack should follow. */
	n = 100000;
	deep = malloc(2 * n + 32);
	ASSERT(deep);
	strcpy(deep, "{\"x\":");
	for (i = 0; i < n; i++)
		deep[5 + i] = '[';
	for (i = 0; i < n; i++)
		deep[5 + n + i] = ']';
	strcpy(deep + 5 + 2 * n, "}");
	range_bad(deep, "not JSON");
	free(deep);

	/* Over the response limit: refused before parsing. */
	n = lim.max_response + 1;
	big = malloc(n + 1);
	ASSERT(big);
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	big[n] = '\0';
	range_bad(big, "over the limit");
	free(big);
}

static void watch_ok(const char *s, enum be_etcd_wmsg_kind kind, size_t n, int error)
{
	struct be_etcd_wmsg m;

	parse(true, s, &m, NULL);
	ASSERT_EQ(m.kind, kind);
	ASSERT_EQ(m.n, n);
	ASSERT_EQ(m.error, error);
	be__etcd_wmsg_free(&m);
}

static void watch_bad(const char *s, const char *why)
{
	struct be_etcd_wmsg m;

	parse(true, s, &m, why);
	ASSERT(m.n == 0 && !m.events); /* nothing left behind */
}

#define EV_PUT(k, m) "{\"kv\":" KV(k, "MQ==", "2", m, "1") "}"
#define EV_DEL(k, m) "{\"type\":\"DELETE\",\"kv\":{\"key\":\"" k "\",\"mod_revision\":\"" m "\"}}"

static void test_watch(void)
{
	struct be_etcd_wmsg m;
	char err[256];

	/* As etcd 3.4.23 sends them. */
	watch_ok("{\"result\":{" HDR ",\"created\":true}}", BE_ETCD_WMSG_CREATED, 0, 0);
	watch_ok("{\"result\":{" HDR ",\"events\":[" EV_PUT("YQ==", "7") "," EV_DEL("YQ==", "8")
		 "]}}", BE_ETCD_WMSG_EVENTS, 2, 0);
	watch_ok("{\"result\":{" HDR ",\"watch_id\":\"-1\"}}", BE_ETCD_WMSG_PROGRESS, 0, 0);
	watch_ok("{\"result\":{\"header\":{\"cluster_id\":\"1\",\"raft_term\":\"2\"},"
		 "\"canceled\":true,\"compact_revision\":\"7\"}}", BE_ETCD_WMSG_CANCELED, 0,
		 BE_ETCD_ECOMPACTED);
	watch_ok("{\"result\":{" HDR ",\"canceled\":true,\"cancel_reason\":\"permission denied\"}}",
		 BE_ETCD_WMSG_CANCELED, 0, -ECANCELED);
	watch_ok("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"etcdserver: no "
		 "leader\",\"http_status\":\"Service Unavailable\"}}", BE_ETCD_WMSG_ERROR, 0,
		 BE_ETCD_ENOLEADER);
	watch_ok("{\"error\":{\"grpc_code\":13,\"message\":\"boom\"}}", BE_ETCD_WMSG_ERROR, 0, -EIO);
	/* Why a watch ended is in the reason. */
	{
		const char *s = "{\"result\":{" HDR ",\"canceled\":true,\"compact_revision\":\"7\"}}";

		ASSERT_EQ(be__etcd_parse_watch(s, strlen(s), &lim, &m, err, sizeof(err)), 0);
		ASSERT(strstr(err, "compacted"));
		ASSERT_EQ(m.compact_revision, 7);
		be__etcd_wmsg_free(&m);
	}

	watch_bad("{}", "neither result nor error");
	watch_bad("{\"result\":{" HDR "},\"error\":{}}", "both result and error");
	watch_bad("{\"result\":[]}", "result: not an object");
	watch_bad("{\"result\":{}}", "header: missing");
	watch_bad("{\"result\":{" HDR ",\"events\":{}}}", "events: not an array");
	watch_bad("{\"result\":{" HDR ",\"events\":[{\"type\":\"FOO\",\"kv\":{}}]}}",
		  "type: not PUT or DELETE");
	watch_bad("{\"result\":{" HDR ",\"events\":[{\"type\":7,\"kv\":{}}]}}", "type");
	watch_bad("{\"result\":{" HDR ",\"events\":[{\"type\":\"PUT\"}]}}", "kv: missing");
	watch_bad("{\"result\":{" HDR ",\"events\":[3]}}", "events[0]: not an object");
	watch_bad("{\"result\":{" HDR ",\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\"}}]}}",
		  "mod_revision: missing");
	watch_bad("{\"result\":{" HDR ",\"events\":[" EV_PUT("YQ==", "8") "," EV_PUT("YQ==", "7")
		  "]}}", "before the one ahead of it");
	watch_bad("{\"result\":{" HDR ",\"events\":[" EV_PUT("YQ==", "11") "]}}",
		  "after the header's");
	watch_bad("{\"result\":{" HDR ",\"created\":true,\"events\":[" EV_PUT("YQ==", "7") "]}}",
		  "events in a created response");
	watch_bad("{\"result\":{" HDR ",\"created\":true,\"canceled\":true}}", "both created");
	watch_bad("{\"result\":{" HDR ",\"fragment\":true,\"events\":[" EV_PUT("YQ==", "7") "]}}",
		  "fragment");
	watch_bad("{\"result\":{" HDR ",\"compact_revision\":\"3\"}}", "not canceled");
	watch_bad("{\"result\":{" HDR ",\"watch_id\":\"-2\"}}", "watch_id");
	watch_bad("{\"result\":{" HDR ",\"created\":\"true\"}}", "created: not a boolean");
	watch_bad("{\"result\":{" HDR ",\"events\":[" EV_PUT("YQ==", "7") "," EV_PUT("YQ==", "7") ","
		  EV_PUT("YQ==", "7") "," EV_PUT("YQ==", "7") "," EV_PUT("YQ==", "7") "]}}",
		  "over the limit of 4");
	watch_bad("{\"result\":{" HDR ",\"events\":[{\"kv\":" KV("YQ==", "MQ==", "2", "7", "1")
		  ",\"prev_kv\":{\"key\":\"%%%%\"}}]}}", "prev_kv");
	watch_bad("{\"error\":\"no leader\"}", "error: not an object");
	watch_bad("{\"error\":{\"message\":\"x\"}}", "grpc_code: missing");
	watch_bad("{\"error\":{\"grpc_code\":0}}", "grpc_code");
	watch_bad("{\"error\":{\"grpc_code\":17}}", "grpc_code");
	watch_bad("{\"error\":{\"grpc_code\":\"x\"}}", "grpc_code");
	watch_bad("{\"error\":{\"grpc_code\":14,\"message\":5}}", "message: not a string");
	watch_bad("{\"result\":{" HDR "}", "not JSON");
}

int main(void)
{
	test_range();
	test_watch();
	return 0;
}
