/*
 * be-ps-load - the parameter server's two workloads, as a client of be-ps
 * servers (docs/PS.md, section 9):
 *
 *   ranker   inference: open-loop Poisson arrivals of fetches, each of
 *            --keys keys per table drawn Zipf(--alpha, default 1.09) over
 *            --rows rows, from --tables tables, under --timeout-us (the
 *            ranker's deadline, default 30 ms). Latency runs from each
 *            fetch's scheduled time (bench/common/loadgen.h), so a stall
 *            of the client or a server shows as latency, not as a lower
 *            rate. The keys are drawn before the clock starts (a pool of
 *            --pool queries reused in turn), as grpc-fetch and tcp-fetch
 *            draw theirs, so only the fetch is measured.
 *   trainer  training: steps of pull, --compute-us of simulated work, and
 *            push of gradients for --keys keys per table drawn Zipf(1.15).
 *            With --period-ms every step starts on a multiple of the
 *            period of the wall clock, so the trainers of several
 *            processes push at the same instants (incast).
 *
 * Both read the model's config file and find the servers in a naming file
 * (--naming file://PATH, rpc.h records; service --service, default
 * be.ps). They print one JSON line at the end (--json) or a table:
 * operations, errors, defaults served, avg / p50 / p90 / p99 / p99.9 /
 * max in microseconds, CPU seconds of this process and of every
 * --server-pid per 1000 operations, and each server's resident memory.
 * --cdf FILE writes the latency CDF (for a plot), and the ranker's
 * --trace FILE one line per fetch (its scheduled time on the wall clock,
 * latency, status), from which bench/paper/failover.sh takes the P99
 * during a fault and the time back to normal.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <be/be.h>

#include "loadgen.h"

#define MAX_TABLES 8
#define MAX_PIDS 64
#define RANKER_SLOTS 512 /* fetches in flight at most; beyond, arrivals are shed */

struct opts {
	const char *role, *config, *naming, *service, *cdf, *trace;
	double rate, duration_s;
	uint32_t keys, tables, timeout_us, compute_us, period_ms, steps, pool;
	uint64_t rows, seed;
	double alpha;
	int json, progress;
	int npids;
	pid_t pids[MAX_PIDS];
};

struct client {
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_rpc *rpc;
	struct be_rpc_naming *naming;
	struct be_ps *ps;
	uint32_t ntables, dim[MAX_TABLES];
};

/* What a run counts. */
struct tally {
	uint64_t ops, errors, shed, defaults;
	uint64_t inflight; /* ranker: fetches started, not yet done */
	int last_err;
	struct lg_hist *lat; /* ns, successful operations */
	struct lg_hist *lat2; /* trainer: pushes (lat: pulls) */
	FILE *trace;          /* ranker --trace: one line per fetch */
	int64_t trace_off_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
};

static uint64_t key_of(uint32_t table, uint64_t rank)
{
	return lg_splitmix64(rank ^ ((uint64_t)table << 56));
}

static int client_start(const struct opts *o, struct client *c)
{
	struct be_config cfg;
	int rc;
	uint32_t t;

	memset(c, 0, sizeof(*c));
	be_config_init(&cfg);
	if ((rc = be_ctx_create(&cfg, &c->ctx)) || (rc = be_worker_create(c->ctx, &c->w)) ||
	    (rc = be_rpc_create(c->w, NULL, &c->rpc))) {
		fprintf(stderr, "be-ps-load: start: %s\n", be_strerror(rc));
		return rc;
	}
	if ((rc = be_rpc_naming_open(o->naming, 0, &c->naming))) {
		fprintf(stderr, "be-ps-load: naming %s: %s\n", o->naming, be_strerror(rc));
		return rc;
	}
	if ((rc = be_ps_create(c->rpc, o->config, c->naming, o->service, &c->ps))) {
		fprintf(stderr, "be-ps-load: client of %s: %s\n", o->config, be_strerror(rc));
		return rc;
	}
	for (t = 0; t < o->tables && be_ps_dim(c->ps, t); t++)
		c->dim[t] = be_ps_dim(c->ps, t);
	c->ntables = t;
	if (!c->ntables) {
		fprintf(stderr, "be-ps-load: the model has no table\n");
		return -EINVAL;
	}
	return 0;
}

static void client_stop(struct client *c)
{
	be_ps_destroy(c->ps);
	be_rpc_destroy(c->rpc);
	be_rpc_naming_destroy(c->naming);
	be_worker_destroy(c->w);
	be_ctx_destroy(c->ctx);
}

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static double cpu_all(const struct opts *o)
{
	double s = lg_proc_cpu_s(0), x;
	int i;

	for (i = 0; i < o->npids; i++)
		if ((x = lg_proc_cpu_s(o->pids[i])) > 0)
			s += x;
	return s;
}

static void report_hist(const char *name, const struct lg_hist *h, int json)
{
	static const double q[] = { 0.5, 0.9, 0.99, 0.999 };
	static const char *qn[] = { "p50", "p90", "p99", "p999" };
	int i;

	if (json) {
		printf(",\"%s_avg_us\":%.1f", name, lg_hist_avg(h) / 1e3);
		for (i = 0; i < 4; i++)
			printf(",\"%s_%s_us\":%.1f", name, qn[i], lg_hist_pct(h, q[i]) / 1e3);
		printf(",\"%s_max_us\":%.1f", name, h->count ? h->max / 1e3 : 0.0);
		return;
	}
	printf("%-6s avg %9.1f us", name, lg_hist_avg(h) / 1e3);
	for (i = 0; i < 4; i++)
		printf("  %s %9.1f", qn[i], lg_hist_pct(h, q[i]) / 1e3);
	printf("  max %9.1f\n", h->count ? h->max / 1e3 : 0.0);
}

static void report(const struct opts *o, const struct tally *t, double cpu_s, double wall_s)
{
	int i;

	if (o->json) {
		printf("{\"tool\":\"be-ps-load\",\"role\":\"%s\",\"ops\":%" PRIu64
		       ",\"errors\":%" PRIu64 ",\"shed\":%" PRIu64 ",\"defaults\":%" PRIu64
		       ",\"wall_s\":%.2f,\"cpu_s\":%.3f,\"cpu_s_per_1000\":%.4f",
		       o->role, t->ops, t->errors, t->shed, t->defaults, wall_s, cpu_s,
		       t->ops ? cpu_s * 1000.0 / (double)t->ops : 0.0);
		report_hist(t->lat2 ? "pull" : "fetch", t->lat, 1);
		if (t->lat2)
			report_hist("push", t->lat2, 1);
		printf(",\"server_rss_kb\":[");
		for (i = 0; i < o->npids; i++)
			printf("%s%ld", i ? "," : "", rss_kb(o->pids[i]));
		printf("]}\n");
		return;
	}
	printf("%s: %" PRIu64 " ops in %.1f s, errors %" PRIu64 ", shed %" PRIu64
	       ", defaults served %" PRIu64 "\n",
	       o->role, t->ops, wall_s, t->errors, t->shed, t->defaults);
	report_hist(t->lat2 ? "pull" : "fetch", t->lat, 0);
	if (t->lat2)
		report_hist("push", t->lat2, 0);
	printf("CPU %.3f s (this process and %d servers), %.4f s per 1000 ops\n", cpu_s, o->npids,
	       t->ops ? cpu_s * 1000.0 / (double)t->ops : 0.0);
	for (i = 0; i < o->npids; i++)
		printf("server pid %d: RSS %ld kB\n", (int)o->pids[i], rss_kb(o->pids[i]));
	if (t->errors)
		printf("last error: %s\n", be_strerror(t->last_err));
}

/* ---- ranker */

struct slot {
	int busy;
	uint64_t sched_ns;
	struct tally *t;
	struct be_ps_slice sl[MAX_TABLES];
};

static void ranker_done(int status, const struct be_ps_result *res, void *arg)
{
	struct slot *s = arg;

	s->busy = 0;
	s->t->inflight--;
	s->t->ops++;
	if (s->t->trace) {
		uint64_t now = lg_now_ns();

		fprintf(s->t->trace, "%.3f %.1f %d\n",
			(double)((int64_t)s->sched_ns + s->t->trace_off_ns) / 1e6,
			(double)(now - s->sched_ns) / 1e3, status);
	}
	if (status) {
		s->t->errors++;
		s->t->last_err = status;
		return;
	}
	s->t->defaults += res->missing;
	lg_hist_add(s->t->lat, lg_now_ns() - s->sched_ns);
}

/* The buffers of slot @s, allocated on its first use. */
static int slot_init(struct slot *s, const struct opts *o, const struct client *c)
{
	uint32_t tb;

	for (tb = 0; tb < c->ntables; tb++) {
		s->sl[tb].table = tb;
		s->sl[tb].n = o->keys;
		s->sl[tb].keys = malloc(o->keys * sizeof(uint64_t));
		s->sl[tb].vals = malloc((size_t)o->keys * c->dim[tb] * sizeof(float));
		if (!s->sl[tb].keys || !s->sl[tb].vals)
			goto fail;
	}
	return 0;

fail:
	for (tb = 0; tb < c->ntables; tb++) {
		free((void *)s->sl[tb].keys);
		free(s->sl[tb].vals);
		s->sl[tb].keys = NULL;
		s->sl[tb].vals = NULL;
	}
	return -ENOMEM;
}

/*
 * Before the clock starts, one fetch of every table's first keys under a
 * deadline of seconds: the connections to every server open on first
 * use, and their setup is not what the ranker's latency measures.
 */
static int warmup(const struct opts *o, struct client *c, struct be_ps_slice *sl)
{
	struct be_ps_fetch_opts fo = { .timeout_us = 10000000, .flags = BE_PS_INFERENCE };
	uint32_t tb, k;
	int rc;

	for (tb = 0; tb < c->ntables; tb++)
		for (k = 0; k < o->keys; k++)
			((uint64_t *)sl[tb].keys)[k] = key_of(tb, k);
	rc = be_ps_fetch_sync(c->ps, sl, c->ntables, &fo, NULL);
	if (rc)
		fprintf(stderr, "be-ps-load: warm-up fetch: %s\n", be_strerror(rc));
	return rc;
}

static int ranker(const struct opts *o, struct client *c, struct tally *t)
{
	struct be_ps_fetch_opts fo = { .timeout_us = o->timeout_us, .flags = BE_PS_INFERENCE };
	struct slot *slots = calloc(RANKER_SLOTS, sizeof(*slots));
	struct lg_zipf z;
	struct lg_rng rng;
	struct lg_poisson p;
	uint64_t start, end, next, last_progress, inflight, q = 0, *pool;
	uint32_t i, k, tb, npool = o->pool;
	size_t per_q = (size_t)o->keys * c->ntables;
	int rc;

	if (!slots || lg_zipf_init(&z, o->rows, o->alpha))
		return -EINVAL;
	lg_rng_seed(&rng, o->seed + 1);
	/* The queries' keys are drawn before the clock starts (a pool of
	 * them, reused in turn), as grpc-fetch and tcp-fetch draw theirs:
	 * drawing 1k-16k Zipf keys costs 100-200 ns each, which would be
	 * counted as fetch latency and CPU of this side only. */
	if (!npool) { /* ~8M keys (64 MiB), 16 to 1024 queries */
		npool = (uint32_t)((8u << 20) / per_q);
		npool = npool < 16 ? 16 : npool > 1024 ? 1024 : npool;
	}
	pool = malloc(npool * per_q * sizeof(*pool));
	if (!pool) {
		free(slots);
		return -ENOMEM;
	}
	for (i = 0; i < npool; i++)
		for (tb = 0; tb < c->ntables; tb++)
			for (k = 0; k < o->keys; k++)
				pool[i * per_q + (size_t)tb * o->keys + k] =
					key_of(tb, lg_zipf_next(&z, &rng));
	for (i = 0; i < RANKER_SLOTS; i++)
		slots[i].t = t;
	start = last_progress = lg_now_ns();
	if (lg_poisson_init(&p, o->rate, start, o->seed))
		return -EINVAL;
	end = start + (uint64_t)(o->duration_s * 1e9);
	next = lg_poisson_next(&p);
	for (;;) {
		uint64_t now = lg_now_ns();

		while (now < end && next <= now) {
			struct slot *s = NULL;

			for (i = 0; i < RANKER_SLOTS && !s; i++)
				if (!slots[i].busy)
					s = &slots[i];
			if (s && !s->sl[0].keys && slot_init(s, o, c))
				s = NULL; /* out of memory: shed */
			if (!s) {
				t->shed++;
			} else {
				for (tb = 0; tb < c->ntables; tb++)
					memcpy((uint64_t *)s->sl[tb].keys,
					       pool + (q % npool) * per_q + (size_t)tb * o->keys,
					       o->keys * sizeof(uint64_t));
				q++;
				s->sched_ns = next;
				rc = be_ps_fetch(c->ps, s->sl, c->ntables, &fo, ranker_done, s);
				if (rc) {
					t->ops++;
					t->errors++;
					t->last_err = rc;
				} else {
					s->busy = 1;
					t->inflight++;
				}
			}
			next = lg_poisson_next(&p);
		}
		inflight = t->inflight; /* not a scan of the slots: the loop spins */
		if (now >= end && !inflight)
			break;
		if (o->progress && now - last_progress >= 1000000000ull) {
			fprintf(stderr, "ranker: %.0f s, %" PRIu64 " fetches, %" PRIu64
				" errors, p99 %.0f us\n",
				(now - start) / 1e9, t->ops, t->errors, lg_hist_pct(t->lat, 0.99) / 1e3);
			last_progress = now;
		}
		/* Sleep when there is time: with the next arrival a
		 * millisecond or more away, in the worker's wait (woken by
		 * completions); closer, and nothing in flight, in a plain
		 * sleep to the arrival. Only with fetches in flight and the
		 * next one due within the millisecond does the loop spin:
		 * spinning to the next arrival cost up to a millisecond of
		 * CPU per fetch that the other rankers (grpc-fetch, tcp-fetch)
		 * spend asleep, and CPU per fetch is what they compare. */
		if (now < end && next > now + 1000000)
			be_worker_wait(c->w, (int)((next - now) / 1000000));
		else if (now >= end && inflight)
			be_worker_wait(c->w, 1);
		else if (!inflight && next > now)
			lg_sleep_until(next);
		else
			be_worker_progress(c->w);
	}
	for (i = 0; i < RANKER_SLOTS; i++)
		for (tb = 0; tb < c->ntables; tb++) {
			free((void *)slots[i].sl[tb].keys); /* NULL in slots never used */
			free(slots[i].sl[tb].vals);
		}
	free(slots);
	free(pool);
	return 0;
}

/* ---- trainer */

static void sleep_ns(uint64_t ns)
{
	lg_sleep_until(lg_now_ns() + ns);
}

/* Sleep until the wall clock reaches the next multiple of @period_ms, so
 * trainers in different processes start their steps together. */
static void wall_barrier(uint32_t period_ms)
{
	struct timespec ts;
	uint64_t now, p = (uint64_t)period_ms * 1000000;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	sleep_ns(p - now % p);
}

static int trainer(const struct opts *o, struct client *c, struct tally *t)
{
	struct be_ps_slice sl[MAX_TABLES];
	struct be_ps_fetch_opts fo = { .timeout_us = o->timeout_us };
	struct be_ps_push_opts po = { .timeout_us = o->timeout_us };
	struct be_ps_result res;
	struct lg_zipf z;
	struct lg_rng rng;
	uint64_t end, t0;
	uint32_t step, tb, k;
	int rc;

	if (lg_zipf_init(&z, o->rows, o->alpha))
		return -EINVAL;
	lg_rng_seed(&rng, o->seed + 1);
	for (tb = 0; tb < c->ntables; tb++) {
		sl[tb].table = tb;
		sl[tb].n = o->keys;
		sl[tb].keys = malloc(o->keys * sizeof(uint64_t));
		sl[tb].vals = malloc((size_t)o->keys * c->dim[tb] * sizeof(float));
		if (!sl[tb].keys || !sl[tb].vals)
			return -ENOMEM;
	}
	end = lg_now_ns() + (uint64_t)(o->duration_s * 1e9);
	for (step = 0; (!o->steps || step < o->steps) && lg_now_ns() < end; step++) {
		for (tb = 0; tb < c->ntables; tb++)
			for (k = 0; k < o->keys; k++)
				((uint64_t *)sl[tb].keys)[k] = key_of(tb, lg_zipf_next(&z, &rng));
		if (o->period_ms)
			wall_barrier(o->period_ms);
		t0 = lg_now_ns();
		rc = be_ps_fetch_sync(c->ps, sl, c->ntables, &fo, &res);
		t->ops++;
		if (rc) {
			t->errors++;
			t->last_err = rc;
			continue;
		}
		lg_hist_add(t->lat, lg_now_ns() - t0);
		sleep_ns((uint64_t)o->compute_us * 1000);
		/* A gradient that shrinks each value a little: finite, and the
		 * same for a key however often it was drawn. */
		for (tb = 0; tb < c->ntables; tb++)
			for (k = 0; k < o->keys * c->dim[tb]; k++)
				sl[tb].vals[k] *= 0.01f;
		t0 = lg_now_ns();
		rc = be_ps_push_sync(c->ps, sl, c->ntables, &po, &res);
		if (rc) {
			t->errors++;
			t->last_err = rc;
			continue;
		}
		lg_hist_add(t->lat2, lg_now_ns() - t0);
		if (o->progress && step % 100 == 99)
			fprintf(stderr, "trainer: step %u, push p99 %.0f us\n", step + 1,
				lg_hist_pct(t->lat2, 0.99) / 1e3);
	}
	for (tb = 0; tb < c->ntables; tb++) {
		free((void *)sl[tb].keys);
		free(sl[tb].vals);
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: be-ps-load ranker|trainer --config FILE --naming file://PATH [options]\n"
		"  --service S      naming service prefix (default be.ps)\n"
		"  --tables N       use the model's first N tables (default 4, at most 8)\n"
		"  --keys N         keys per table per operation (default 1024)\n"
		"  --rows N         key space per table (default 1048576)\n"
		"  --alpha A        Zipf exponent (ranker 1.09, trainer 1.15)\n"
		"  --duration S     seconds (default 10)\n"
		"  --timeout-us U   deadline (ranker default 30000, trainer 1000000)\n"
		"  --seed N         (default 1)\n"
		"  --server-pid P   count this server's CPU and memory (repeatable)\n"
		"  --json           one JSON line; --progress: a line a second on stderr\n"
		"  --cdf FILE       write the latency CDF (fetches; trainer: pushes) to FILE,\n"
		"                   lines \"latency_us fraction\", for a plot\n"
		"  --trace FILE     ranker: one line per fetch to FILE, \"T_ms latency_us\n"
		"                   status\": T its scheduled time (CLOCK_REALTIME, ms since\n"
		"                   the epoch), status 0 or the negative error\n"
		" ranker: --rate Q  fetches per second, Poisson (default 200)\n"
		"         --pool N  queries' keys drawn before the clock starts, reused in\n"
		"                   turn (default: 16-1024, ~8M keys)\n"
		" trainer: --steps N (default 0: until --duration), --compute-us U (default\n"
		"          1000), --period-ms P (steps on multiples of P ms of the wall clock)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "config", required_argument, NULL, 'c' },   { "naming", required_argument, NULL, 'n' },
		{ "service", required_argument, NULL, 'S' },  { "tables", required_argument, NULL, 'T' },
		{ "keys", required_argument, NULL, 'k' },     { "rows", required_argument, NULL, 'R' },
		{ "alpha", required_argument, NULL, 'a' },    { "duration", required_argument, NULL, 'd' },
		{ "timeout-us", required_argument, NULL, 't' }, { "seed", required_argument, NULL, 's' },
		{ "server-pid", required_argument, NULL, 'p' }, { "json", no_argument, NULL, 'j' },
		{ "progress", no_argument, NULL, 'P' },       { "rate", required_argument, NULL, 'r' },
		{ "steps", required_argument, NULL, 'N' },    { "compute-us", required_argument, NULL, 'C' },
		{ "period-ms", required_argument, NULL, 'M' }, { "help", no_argument, NULL, 'h' },
		{ "cdf", required_argument, NULL, 'F' },       { "pool", required_argument, NULL, 'Q' },       { "trace", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .service = "be.ps", .rate = 200, .duration_s = 10, .keys = 1024,
			  .tables = 4, .rows = 1u << 20, .seed = 1, .compute_us = 1000 };
	struct tally t = { 0 };
	struct client c;
	double cpu0, wall0;
	int ch, rc;

	if (argc < 2 || (strcmp(argv[1], "ranker") && strcmp(argv[1], "trainer"))) {
		usage();
		return 2;
	}
	o.role = argv[1];
	o.alpha = strcmp(o.role, "ranker") ? 1.15 : 1.09;
	o.timeout_us = strcmp(o.role, "ranker") ? 1000000 : BE_PS_FETCH_TIMEOUT_US;
	optind = 2;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'c': o.config = optarg; break;
		case 'n': o.naming = optarg; break;
		case 'S': o.service = optarg; break;
		case 'T': o.tables = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'k': o.keys = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'R': o.rows = strtoull(optarg, NULL, 0); break;
		case 'a': o.alpha = strtod(optarg, NULL); break;
		case 'd': o.duration_s = strtod(optarg, NULL); break;
		case 't': o.timeout_us = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'p':
			if (o.npids == MAX_PIDS)
				return 2;
			o.pids[o.npids++] = (pid_t)atoi(optarg);
			break;
		case 'j': o.json = 1; break;
		case 'P': o.progress = 1; break;
		case 'r': o.rate = strtod(optarg, NULL); break;
		case 'N': o.steps = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'C': o.compute_us = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': o.period_ms = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'F': o.cdf = optarg; break;
		case 'D': o.trace = optarg; break;
		case 'Q': o.pool = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: usage(); return ch == 'h' ? 0 : 2;
		}
	}
	if (!o.config || !o.naming || optind != argc || !o.keys || !o.rows || o.tables < 1 ||
	    o.tables > MAX_TABLES || !(o.rate > 0) || !(o.alpha > 0)) {
		usage();
		return 2;
	}
	t.lat = lg_hist_create();
	if (!strcmp(o.role, "trainer"))
		t.lat2 = lg_hist_create();
	if (!t.lat || (!strcmp(o.role, "trainer") && !t.lat2))
		return 1;
	if (o.trace) {
		struct timespec rt;

		t.trace = fopen(o.trace, "w");
		if (!t.trace) {
			fprintf(stderr, "be-ps-load: %s: %s\n", o.trace, strerror(errno));
			return 1;
		}
		clock_gettime(CLOCK_REALTIME, &rt);
		t.trace_off_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - (int64_t)lg_now_ns();
	}
	if (client_start(&o, &c))
		return 1;
	{
		struct slot w = { 0 };

		rc = slot_init(&w, &o, &c);
		if (!rc)
			rc = warmup(&o, &c, w.sl);
		for (ch = 0; ch < (int)c.ntables; ch++) {
			free((void *)w.sl[ch].keys);
			free(w.sl[ch].vals);
		}
		if (rc)
			return 1;
	}
	cpu0 = cpu_all(&o);
	wall0 = (double)lg_now_ns();
	rc = !strcmp(o.role, "ranker") ? ranker(&o, &c, &t) : trainer(&o, &c, &t);
	if (rc) {
		fprintf(stderr, "be-ps-load: %s\n", be_strerror(rc));
		return 1;
	}
	report(&o, &t, cpu_all(&o) - cpu0, ((double)lg_now_ns() - wall0) / 1e9);
	if (t.trace && fclose(t.trace))
		fprintf(stderr, "be-ps-load: %s: %s\n", o.trace, strerror(errno));
	if (o.cdf) {
		rc = lg_hist_write_cdf(t.lat2 ? t.lat2 : t.lat, o.cdf);
		if (rc)
			fprintf(stderr, "be-ps-load: %s: %s\n", o.cdf, strerror(-rc));
	}
	client_stop(&c);
	free(t.lat);
	free(t.lat2);
	return 0;
}
