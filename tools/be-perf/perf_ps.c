/*
 * perf_ps.c - be-perf ps-store: the parameter server's storage core alone
 * (no transport): memory per row, and lookup and apply rates, at table
 * sizes of millions of rows.
 *
 *   be-perf ps-store [--rows 1M,4M,16M] [--dim 16] [--opt sgd|adagrad|ftrl]
 *                    [--batch 4096] [--keys 1M] [--json]
 *
 * For each --rows N: one shard of one table is filled with N rows by
 * pushes of --batch new keys (the real path: a request encoded, decoded
 * and validated, every key's row created and initialised, the optimizer
 * applied), and the process's resident memory is read before and after:
 * that difference over N is the measured memory per row, beside what the
 * store accounts for (rows, index). Then, each over --keys random keys of
 * the table, in batches of --batch:
 *   find      be__ps_store_find() and a copy of the row, one key at a time
 *   pull      a pull request decoded and answered into a bemalloc reply
 *             (pipelined lookups, values written into the reply)
 *   push      a push request of existing keys decoded and applied
 *   miss      a pull of keys the table does not hold (initializer values)
 * Reported as CPU ns per key of the one thread (its CPU time, not wall
 * time: on a shared machine that would count others' turns), of the
 * fastest batch and the median one (see ps_phase()). Keys
 * are uniform over the table, the worst case for caches (a Zipf workload
 * mostly hits hot rows).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <be/alloc.h>

#include "perf.h"
#include "ps/config.h"
#include "ps/ps_int.h"
#include "ps/serve.h"
#include "ps/wire.h"

#define PS_MAX_SIZES 16

struct ps_bench {
	uint32_t dim;
	const char *opt;
	uint32_t batch;
	uint64_t keys;
	int json;
	struct be__ps_config cfg;
	struct be__ps_shard *sh;
	uint64_t *kbuf;
	float *grads;
	uint8_t *req;
	size_t req_cap;
	uint8_t *rep;
	size_t rep_cap;
	uint64_t seq;
	uint64_t rng;
};

/* The i-th key of the table: a bijection, so keys are distinct. */
static uint64_t ps_key(uint64_t i)
{
	return be__ps_mix64(i ^ 0x5851f42d4c957f2dull);
}

static uint64_t ps_rand(struct ps_bench *b)
{
	b->rng += BE_PS_GOLDEN;
	return be__ps_mix64(b->rng);
}

static uint64_t ps_rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* CPU time of this thread: the machine is shared, and wall time would
 * count the time others ran. */
static uint64_t ps_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void ps_die(const char *what, int err)
{
	fprintf(stderr, "be-perf ps-store: %s: %s\n", what, strerror(-err));
	exit(1);
}

/* Encode one request of b->kbuf[0 .. n) (push: with b->grads), decode it. */
static void ps_request(struct ps_bench *b, uint8_t op, uint32_t n, struct be__ps_msg *out)
{
	struct be__ps_msg m = { .op = op, .nsec = 1 };
	const char *why = "";
	int64_t len;
	int rc;

	if (op == BE_PS_OP_PUSH) {
		m.trainer = 1;
		m.seq = ++b->seq;
	}
	m.sec[0] = (struct be__ps_sec){ .table = 0, .dim = b->dim, .n = n,
					.keys = (const uint8_t *)b->kbuf,
					.vals = (const uint8_t *)b->grads };
	len = be__ps_msg_encode(&m, b->req, b->req_cap);
	if (len < 0)
		ps_die("encode", (int)len);
	rc = be__ps_req_decode(b->req, (size_t)len, &b->cfg, out, &why);
	if (rc)
		ps_die(why, rc);
}

/* Fill rows 0 .. n - 1 by pushes; returns the ns it took. */
static uint64_t ps_fill(struct ps_bench *b, uint64_t n)
{
	struct be__ps_msg m;
	uint64_t i, t = 0;
	uint32_t j, k;
	int rc;

	for (i = 0; i < n; i += k) {
		uint64_t t0;

		k = (uint32_t)(n - i < b->batch ? n - i : b->batch);
		for (j = 0; j < k; j++)
			b->kbuf[j] = ps_key(i + j);
		t0 = ps_cpu_ns();
		ps_request(b, BE_PS_OP_PUSH, k, &m);
		rc = be__ps_shard_push(b->sh, &m);
		t += ps_cpu_ns() - t0;
		if (rc)
			ps_die("push", rc);
	}
	return t;
}

enum ps_phase { PS_FIND, PS_PULL, PS_PUSH, PS_MISS };

static int ps_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * --keys random keys in batches of --batch, each batch timed on its own:
 * the fastest batch's ns per key, and the median into *@median. Other
 * processes (and on a VM, other guests) only ever add to a batch's time,
 * and batches of thousands of uniform random keys cost the same but for
 * that, so the fastest is the best estimate of the cost itself.
 */
static double ps_phase(struct ps_bench *b, enum ps_phase ph, uint64_t rows, double *median)
{
	const struct be__ps_store *st = &b->sh->stores[0];
	size_t row_len = (size_t)b->dim * sizeof(float);
	uint32_t nb = (uint32_t)((b->keys + b->batch - 1) / b->batch), i, j;
	double *v = malloc(nb * sizeof(*v)), fastest;
	struct be__ps_msg m;
	int64_t rc;

	if (!v)
		ps_die("batches", -ENOMEM);
	for (i = 0; i < nb; i++) {
		uint64_t t0;

		for (j = 0; j < b->batch; j++)
			b->kbuf[j] = ps_key(ph == PS_MISS ? rows + ps_rand(b) % (1ull << 40) :
							     ps_rand(b) % rows);
		t0 = ps_cpu_ns();
		if (ph == PS_FIND) {
			for (j = 0; j < b->batch; j++) {
				uint32_t r = be__ps_store_find(st, b->kbuf[j]);

				memcpy(b->rep + (size_t)j * row_len,
				       be__ps_row_values(be__ps_store_row(st, r)), row_len);
			}
		} else {
			uint8_t op = ph == PS_PUSH ? BE_PS_OP_PUSH : BE_PS_OP_PULL;

			ps_request(b, op, b->batch, &m);
			rc = op == BE_PS_OP_PUSH ? be__ps_shard_push(b->sh, &m) :
						   be__ps_shard_pull(b->sh, &m, b->rep, b->rep_cap);
			if (rc < 0)
				ps_die("pull/push", (int)rc);
		}
		v[i] = (double)(ps_cpu_ns() - t0) / b->batch;
	}
	qsort(v, nb, sizeof(*v), ps_cmp_double);
	*median = v[nb / 2];
	fastest = v[0];
	free(v);
	return fastest;
}

static int ps_run(struct ps_bench *b, uint64_t rows)
{
	char text[512], err[256];
	struct be__ps_store_mem mem;
	uint64_t rss0, rss1, fill_ns;
	double find, pull, push, miss, measured, accounted, find_m, pull_m, push_m, miss_m;
	int rc;

	snprintf(text, sizeof(text),
		 "shards 1\nlimits keys=%u reply=1G\n"
		 "table t dim=%u optimizer=%s lr=0.01 init=uniform lo=-0.01 hi=0.01\n",
		 b->batch, b->dim, b->opt);
	rc = be__ps_config_parse(text, strlen(text), &b->cfg, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "be-perf ps-store: %s\n", err);
		return rc;
	}
	rss0 = ps_rss_bytes();
	rc = be__ps_shard_create(&b->cfg, 0, &b->sh);
	if (rc)
		ps_die("shard", rc);
	b->seq = 0;
	fill_ns = ps_fill(b, rows);
	rss1 = ps_rss_bytes();
	be__ps_store_mem(&b->sh->stores[0], &mem);
	measured = (double)(rss1 - rss0) / (double)rows;
	accounted = (double)(mem.slab_bytes + mem.index_bytes) / (double)rows;
	find = ps_phase(b, PS_FIND, rows, &find_m);
	pull = ps_phase(b, PS_PULL, rows, &pull_m);
	push = ps_phase(b, PS_PUSH, rows, &push_m);
	miss = ps_phase(b, PS_MISS, rows, &miss_m);
	if (b->json)
		printf("{\"test\":\"ps-store\",\"rows\":%" PRIu64 ",\"dim\":%u,\"opt\":\"%s\","
		       "\"batch\":%u,\"row_bytes\":%u,\"index_bytes_per_row\":%.1f,"
		       "\"bytes_per_row\":%.1f,\"bytes_per_row_accounted\":%.1f,"
		       "\"insert_ns\":%.1f,\"find_ns\":%.1f,\"pull_ns\":%.1f,\"push_ns\":%.1f,"
		       "\"miss_ns\":%.1f,\"find_ns_p50\":%.1f,\"pull_ns_p50\":%.1f,"
		       "\"push_ns_p50\":%.1f,\"miss_ns_p50\":%.1f}\n",
		       rows, b->dim, b->opt, b->batch, b->sh->stores[0].row_bytes,
		       (double)mem.index_bytes / (double)rows, measured, accounted,
		       (double)fill_ns / (double)rows, find, pull, push, miss, find_m, pull_m,
		       push_m, miss_m);
	else
		printf("%9" PRIu64 " rows: %u B/row + index %.1f = %.1f B accounted, %.1f B "
		       "measured\n  CPU ns/key, fastest (median) batch: insert %.0f  find %.0f "
		       "(%.0f)  pull %.0f (%.0f)  push %.0f (%.0f)  miss %.0f (%.0f)\n",
		       rows, b->sh->stores[0].row_bytes, (double)mem.index_bytes / (double)rows,
		       accounted, measured, (double)fill_ns / (double)rows, find, find_m,
		       pull, pull_m, push, push_m, miss, miss_m);
	fflush(stdout);
	be__ps_shard_destroy(b->sh);
	b->sh = NULL;
	be__ps_config_close(&b->cfg);
	return 0;
}

struct ps_rows {
	uint64_t n[PS_MAX_SIZES];
	int count;
};

/* --rows 1M,4M,16M: the table sizes to measure, in order. */
static int ps_parse_rows(void *dst, const char *v)
{
	struct ps_rows *rows = dst;
	char *list = strdup(v), *tok, *save;

	if (!list)
		return -1;
	rows->count = 0;
	for (tok = strtok_r(list, ",", &save); tok && rows->count < PS_MAX_SIZES;
	     tok = strtok_r(NULL, ",", &save))
		rows->n[rows->count++] = perf_parse_size(tok);
	free(list);
	return 0;
}

static void ps_store_usage(FILE *f, const char *cmd)
{
	fprintf(f, "usage: be-perf ps-store [--rows 1M,4M,16M] [--dim 16] "
		   "[--opt sgd|adagrad|ftrl] [--batch 4096] [--keys 1M] [--json]\n");
}

static int ps_store_main(int argc, char **argv)
{
	struct ps_bench b = { .dim = 16, .opt = "adagrad", .batch = 4096, .keys = 1u << 20,
			      .rng = 1 };
	struct ps_rows rows = { { 1u << 20, 4u << 20, 16u << 20 }, 3 };
	const struct perf_opt opts[] = {
		PERF_FN("--rows", &rows, ps_parse_rows),
		PERF_OPT("--dim", U32, &b.dim),
		PERF_OPT("--opt", STR, &b.opt),
		PERF_OPT("--batch", U32, &b.batch),
		PERF_OPT("--keys", SIZE, &b.keys),
		PERF_FLAG("--json", &b.json, 1),
		PERF_OPTS_END,
	};
	int i, rc;

	rc = perf_opts_parse("ps-store", argc, argv, opts, ps_store_usage);
	if (rc >= 0)
		return rc ? 1 : 0;
	rc = 0;
	if (!rows.count || !b.batch || !b.dim || b.dim > BE_PS_MAX_DIM || !b.keys) {
		fprintf(stderr, "be-perf ps-store: bad arguments\n");
		return 1;
	}
	for (i = 0; i < rows.count; i++)
		if (!rows.n[i]) {
			fprintf(stderr, "be-perf ps-store: --rows must be > 0\n");
			return 1;
		}
	b.kbuf = malloc((size_t)b.batch * sizeof(*b.kbuf));
	b.grads = malloc((size_t)b.batch * b.dim * sizeof(*b.grads));
	b.req_cap = BE_PS_HDR_LEN + BE_PS_SEC_HDR_LEN + (size_t)b.batch * (8 + 4 * (size_t)b.dim) + 8;
	b.req = be_alloc(b.req_cap);
	b.rep_cap = BE_PS_HDR_LEN + BE_PS_SEC_HDR_LEN + (size_t)b.batch * 4 * b.dim + 64;
	b.rep = be_alloc(b.rep_cap);
	if (!b.kbuf || !b.grads || !b.req || !b.rep) {
		fprintf(stderr, "be-perf ps-store: out of memory\n");
		return 1;
	}
	for (i = 0; i < (int)(b.batch * b.dim); i++)
		b.grads[i] = (float)((double)(ps_rand(&b) >> 40) * 0x1p-24 - 0.5) * 0.1f;
	memset(b.req, 0, b.req_cap);
	memset(b.rep, 0, b.rep_cap);
	if (!b.json)
		printf("be-perf ps-store: dim %u, %s, batches of %u, %" PRIu64
		       " random keys per measurement, one thread\n",
		       b.dim, b.opt, b.batch, b.keys);
	for (i = 0; i < rows.count && !rc; i++)
		rc = ps_run(&b, rows.n[i]);
	free(b.kbuf);
	free(b.grads);
	be_free(b.req);
	be_free(b.rep);
	return rc ? 1 : 0;
}

PERF_COMMAND(ps_store, "ps-store",
	     "parameter-server storage: memory per row, lookup and apply rates (no transport)",
	     ps_store_main)
