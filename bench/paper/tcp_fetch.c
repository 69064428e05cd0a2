/*
 * tcp_fetch.c - tcp-fetch: the parameter-server fetch over plain kernel
 * TCP, the "kernel-tcp" baseline of bench/paper/fetch.sh (issue 16
 * section 4): what a team writes without an RDMA layer or an RPC
 * framework, in the style of bench/tcp_pingpong.c (blocking sockets,
 * TCP_NODELAY, one thread per connection).
 *
 *   tcp-fetch server [--listen PORT] [--tables T] [--rows R] [--dim D]
 *   tcp-fetch ranker [--qps Q] [--keys K] [--alpha A] [--seconds S]
 *                    [--warmup S] [--deadline-ms D] [--conns N] [--pool N]
 *                    [--seed N] [--tables T] [--rows R] [--dim D]
 *                    [--connect PORT --server-pid PID] [--cdf FILE] [--json]
 *
 * The server holds --tables tables of --rows rows of --dim float32, filled
 * with lg_row_fill() (bench/common/loadgen.h), as grpc-fetch's server does,
 * and answers each request with the rows of its keys in the request's
 * order. It listens on 127.0.0.1 (--listen PORT, 0: any), prints
 * "listening PORT" and "ready", and serves every connection on a thread
 * of its own, blocking in read() between requests.
 *
 * The ranker is grpc-fetch's ranker over this wire: queries arrive as a
 * Poisson process at --qps (open loop); query i fetches --keys keys of
 * table i mod --tables drawn Zipf(--alpha) from a pool drawn up front;
 * per query the keys are deduplicated, sent as one request, and the rows
 * gathered into the query's output array in its key order. The queries
 * queue for --conns connections (default 4), each driven by a thread of
 * its own (a connection pool, one request outstanding per connection).
 * Latency runs from the scheduled arrival to the end of the gather, so
 * time spent waiting for a connection counts. A fetch slower than
 * --deadline-ms counts as a timeout (its reply is still read, to keep the
 * connection in step; a production client would reconnect). Without
 * --connect the ranker forks the server itself (bound before the fork).
 * CPU per fetch: user + system CPU of the ranker and the server over the
 * measured seconds, divided by the fetches.
 *
 * Wire (host byte order: both ends run on this host):
 *   request  u32 magic 0x46455443 ("FETC"), u32 table, u32 nkeys,
 *            u32 zero, then nkeys u64 keys
 *   reply    u32 status (0 ok, 22 bad table or count, 34 key past the
 *            table), u32 dim, u32 nrows (nkeys when ok, else 0), u32 zero,
 *            then nrows * dim float32
 * The server checks the magic, the table, nkeys <= 2^24 and every key
 * against --rows; a bad magic closes the connection.
 *
 * Output: a summary, or with --json one line with the fields of
 * grpc-fetch's (experiment "fetch", impl "kernel-tcp", transport "tcp",
 * qps, achieved_qps, keys, unique_keys_avg, queries, errors, timeouts,
 * bad_rows, avg_us, p50_us, p90_us, p99_us, p999_us, max_us,
 * cpu_us_per_fetch, cpu_s, client_cpu_s, server_cpu_s, conns).
 * Exit status 1 if a row was wrong or a fetch failed other than by its
 * deadline, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loadgen.h"
#include "loopback.h"

#define TF_MAGIC 0x46455443u
#define TF_MAX_KEYS (1u << 24)
#define TF_MAX_CONNS 256
#define TF_QUEUE 4096 /* queries waiting for a connection at most */

struct tf_hdr {
	uint32_t a, b, c, zero; /* request: magic table nkeys; reply: status dim nrows */
};

struct tf_opts {
	double qps, alpha, seconds, warmup;
	uint32_t keys, tables, dim, conns, pool, deadline_ms;
	uint64_t rows, seed;
	int port, json;
	pid_t server_pid;
	const char *cdf;
};

static void tf_die(const char *msg)
{
	fprintf(stderr, "tcp-fetch: %s\n", msg);
	exit(2);
}

/* Read (@wr 0) or write (@wr 1) all of @len bytes; 0, or -1 on EOF or
 * error. */
static int tf_xfer(int fd, void *buf, size_t len, int wr)
{
	char *p = buf;

	while (len) {
		ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tf_read(int fd, void *buf, size_t len)
{
	return tf_xfer(fd, buf, len, 0);
}

static int tf_write(int fd, const void *buf, size_t len)
{
	return tf_xfer(fd, (void *)buf, len, 1);
}

/* ---- server ------------------------------------------------------------ */

struct tf_tables {
	uint32_t n, dim;
	uint64_t rows;
	float **t;
};

struct tf_conn_arg {
	int fd;
	const struct tf_tables *tab;
};

static void *tf_serve_conn(void *arg)
{
	struct tf_conn_arg *ca = arg;
	const struct tf_tables *tab = ca->tab;
	size_t row = tab->dim * sizeof(float), kcap = 0, rcap = 0;
	uint64_t *keys = NULL;
	char *rep = NULL;
	int fd = ca->fd;
	struct tf_hdr h;

	free(ca);
	while (!tf_read(fd, &h, sizeof(h))) {
		struct tf_hdr r = { 0, tab->dim, 0, 0 };
		uint32_t i;

		if (h.a != TF_MAGIC)
			break;
		if (h.c > TF_MAX_KEYS)
			break; /* cannot skip that many bytes sensibly: drop it */
		if (h.c > kcap) {
			free(keys);
			kcap = h.c;
			keys = malloc(kcap * sizeof(*keys));
			if (!keys)
				break;
		}
		if (tf_read(fd, keys, (size_t)h.c * sizeof(*keys)))
			break;
		if (h.b >= tab->n) {
			r.a = EINVAL;
		} else {
			for (i = 0; i < h.c; i++)
				if (keys[i] >= tab->rows) {
					r.a = ERANGE;
					break;
				}
		}
		if (!r.a) {
			size_t need = sizeof(r) + (size_t)h.c * row;

			if (need > rcap) {
				free(rep);
				rcap = need;
				rep = malloc(rcap);
				if (!rep)
					break;
			}
			r.c = h.c;
			for (i = 0; i < h.c; i++)
				memcpy(rep + sizeof(r) + i * row, tab->t[h.b] + keys[i] * tab->dim, row);
			memcpy(rep, &r, sizeof(r));
			if (tf_write(fd, rep, need))
				break;
		} else if (tf_write(fd, &r, sizeof(r))) {
			break;
		}
	}
	free(keys);
	free(rep);
	close(fd);
	return NULL;
}

/* Serve on @lfd forever; "ready" on stdout, and a byte on @ready_fd
 * (when >= 0), once the tables are filled. */
static int tf_serve(int lfd, const struct tf_opts *o, int ready_fd)
{
	struct tf_tables tab = { o->tables, o->dim, o->rows, NULL };
	uint32_t i;
	uint64_t k;

	tab.t = calloc(o->tables, sizeof(*tab.t));
	if (!tab.t)
		return 1;
	for (i = 0; i < o->tables; i++) {
		tab.t[i] = malloc(o->rows * o->dim * sizeof(float));
		if (!tab.t[i]) {
			fprintf(stderr, "tcp-fetch server: no memory for the tables\n");
			return 1;
		}
		for (k = 0; k < o->rows; k++)
			lg_row_fill(i, k, o->dim, tab.t[i] + k * o->dim);
	}
	printf("ready\n");
	fflush(stdout);
	if (ready_fd >= 0) {
		if (tf_write(ready_fd, "r", 1))
			return 1;
		close(ready_fd);
	}
	for (;;) {
		struct tf_conn_arg *ca;
		pthread_t th;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("tcp-fetch server: accept");
			return 1;
		}
		lo_nodelay(fd);
		ca = malloc(sizeof(*ca));
		if (!ca) {
			close(fd);
			continue;
		}
		ca->fd = fd;
		ca->tab = &tab;
		if (pthread_create(&th, NULL, tf_serve_conn, ca)) {
			close(fd);
			free(ca);
			continue;
		}
		pthread_detach(th);
	}
}

/* ---- ranker ------------------------------------------------------------ */

struct tf_item {
	uint64_t sched_ns, q;
	int measured;
};

/* The queries waiting for a connection, and what the threads counted. */
struct tf_ranker {
	const struct tf_opts *o;
	uint64_t **pool; /* o->pool queries of o->keys keys */
	pthread_mutex_t mu;
	pthread_cond_t more, room, idle;
	struct tf_item q[TF_QUEUE];
	unsigned head, len, busy;
	int stop;
	/* Totals, merged by each thread as it exits. */
	struct lg_hist *hist;
	uint64_t done, errors, timeouts, bad_rows, unique;
};

struct tf_thread {
	struct tf_ranker *r;
	int fd;
	pthread_t th;
	struct lg_hist *hist;
	uint64_t done, errors, timeouts, bad_rows, unique;
};

/* One query on @t's connection: dedupe, request, reply, gather. */
static int tf_fetch(struct tf_thread *t, const struct tf_item *it, uint64_t *uk, uint32_t *slot,
		    uint64_t *mkey, uint32_t *midx, uint32_t *mgen, uint32_t mask, uint32_t gen,
		    char *rep, float *out)
{
	const struct tf_opts *o = t->r->o;
	const uint64_t *keys = t->r->pool[it->q % o->pool];
	size_t row = o->dim * sizeof(float);
	struct tf_hdr h = { TF_MAGIC, (uint32_t)(it->q % o->tables), 0, 0 }, r;
	uint32_t i, n = 0;
	uint64_t now, lat;
	int ok;

	for (i = 0; i < o->keys; i++) {
		uint32_t s = (uint32_t)lg_splitmix64(keys[i]) & mask;

		while (mgen[s] == gen && mkey[s] != keys[i])
			s = (s + 1) & mask;
		if (mgen[s] != gen) {
			mgen[s] = gen;
			mkey[s] = keys[i];
			midx[s] = n;
			uk[2 + n++] = keys[i]; /* uk[0..1]: the header */
		}
		slot[i] = midx[s];
	}
	h.c = n;
	memcpy(uk, &h, sizeof(h));
	if (tf_write(t->fd, uk, sizeof(h) + (size_t)n * sizeof(uint64_t)) ||
	    tf_read(t->fd, &r, sizeof(r)))
		return -1;
	ok = r.a == 0 && r.b == o->dim && r.c == n;
	if (r.a == 0 && r.c && (r.b != o->dim || r.c != n))
		return -1; /* cannot tell how much to read */
	if (r.c && tf_read(t->fd, rep, (size_t)r.c * row))
		return -1;
	if (ok)
		for (i = 0; i < o->keys; i++)
			memcpy(out + (size_t)i * o->dim, rep + (size_t)slot[i] * row, row);
	now = lg_now_ns();
	lat = now > it->sched_ns ? now - it->sched_ns : 0;
	if (it->measured) {
		lg_hist_add(t->hist, lat);
		t->done++;
		t->unique += n;
		if (!ok)
			t->errors++;
		else if (o->deadline_ms && lat > (uint64_t)o->deadline_ms * 1000000u)
			t->timeouts++;
	}
	/* Verification is not the ranker's work: after the timestamp. */
	if (ok && !lg_row_check(h.b, keys[0], o->dim, out))
		t->bad_rows++;
	return 0;
}

static void *tf_conn_thread(void *arg)
{
	struct tf_thread *t = arg;
	struct tf_ranker *r = t->r;
	const struct tf_opts *o = r->o;
	uint32_t mask = 15, gen = 0;
	uint64_t *uk, *mkey;
	uint32_t *slot, *midx, *mgen;
	char *rep;
	float *out;

	while (mask + 1 < 2 * o->keys)
		mask = mask * 2 + 1;
	uk = malloc(sizeof(struct tf_hdr) + (size_t)o->keys * sizeof(uint64_t));
	slot = malloc((size_t)o->keys * sizeof(*slot));
	mkey = malloc(((size_t)mask + 1) * sizeof(*mkey));
	midx = malloc(((size_t)mask + 1) * sizeof(*midx));
	mgen = calloc((size_t)mask + 1, sizeof(*mgen));
	rep = malloc((size_t)o->keys * o->dim * sizeof(float));
	out = malloc((size_t)o->keys * o->dim * sizeof(float));
	if (!uk || !slot || !mkey || !midx || !mgen || !rep || !out) {
		fprintf(stderr, "tcp-fetch ranker: out of memory\n");
		exit(1);
	}
	for (;;) {
		struct tf_item it;

		pthread_mutex_lock(&r->mu);
		while (!r->len && !r->stop)
			pthread_cond_wait(&r->more, &r->mu);
		if (!r->len) {
			pthread_mutex_unlock(&r->mu);
			break;
		}
		it = r->q[r->head];
		r->head = (r->head + 1) % TF_QUEUE;
		r->len--;
		r->busy++;
		pthread_cond_signal(&r->room);
		pthread_mutex_unlock(&r->mu);

		if (++gen == 0) {
			memset(mgen, 0, ((size_t)mask + 1) * sizeof(*mgen));
			gen = 1;
		}
		if (tf_fetch(t, &it, uk, slot, mkey, midx, mgen, mask, gen, rep, out)) {
			fprintf(stderr, "tcp-fetch ranker: connection to the server lost\n");
			exit(1);
		}
		pthread_mutex_lock(&r->mu);
		if (!--r->busy && !r->len)
			pthread_cond_broadcast(&r->idle);
		pthread_mutex_unlock(&r->mu);
	}
	pthread_mutex_lock(&r->mu);
	lg_hist_merge(r->hist, t->hist);
	r->done += t->done;
	r->errors += t->errors;
	r->timeouts += t->timeouts;
	r->bad_rows += t->bad_rows;
	r->unique += t->unique;
	pthread_mutex_unlock(&r->mu);
	free(uk);
	free(slot);
	free(mkey);
	free(midx);
	free(mgen);
	free(rep);
	free(out);
	return NULL;
}

/* Arrivals for @seconds; returns once all of them were answered. */
static void tf_phase(struct tf_ranker *r, double seconds, int measured, uint64_t seed,
		     uint64_t *qn)
{
	struct lg_poisson p;
	uint64_t start = lg_now_ns(), end = start + (uint64_t)(seconds * 1e9);

	lg_poisson_init(&p, r->o->qps, start, seed);
	for (;;) {
		uint64_t at = lg_poisson_next(&p);

		if (at >= end)
			break;
		lg_sleep_until(at);
		pthread_mutex_lock(&r->mu);
		/* A full queue holds the sender back; its lateness shows as
		 * the latency of the queries behind. */
		while (r->len == TF_QUEUE)
			pthread_cond_wait(&r->room, &r->mu);
		r->q[(r->head + r->len) % TF_QUEUE] =
			(struct tf_item){ .sched_ns = at, .q = (*qn)++, .measured = measured };
		r->len++;
		pthread_cond_signal(&r->more);
		pthread_mutex_unlock(&r->mu);
	}
	pthread_mutex_lock(&r->mu);
	while (r->len || r->busy)
		pthread_cond_wait(&r->idle, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

static int tf_ranker_run(const struct tf_opts *o)
{
	struct tf_ranker r = { .o = o };
	struct tf_thread *th = calloc(o->conns, sizeof(*th));
	struct lg_zipf z;
	struct lg_rng g;
	uint64_t qn = 0, t0;
	double c0, s0, c1, s1, secs, cpu;
	uint32_t i, k;
	int rc = 0;

	r.hist = lg_hist_create();
	r.pool = calloc(o->pool, sizeof(*r.pool));
	if (!th || !r.hist || !r.pool || lg_zipf_init(&z, o->rows, o->alpha))
		tf_die("out of memory or bad --rows/--alpha");
	lg_rng_seed(&g, o->seed);
	for (i = 0; i < o->pool; i++) {
		r.pool[i] = malloc((size_t)o->keys * sizeof(uint64_t));
		if (!r.pool[i])
			tf_die("out of memory");
		for (k = 0; k < o->keys; k++)
			r.pool[i][k] = lg_zipf_next(&z, &g);
	}
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.more, NULL);
	pthread_cond_init(&r.room, NULL);
	pthread_cond_init(&r.idle, NULL);
	for (i = 0; i < o->conns; i++) {
		th[i].r = &r;
		th[i].hist = lg_hist_create();
		th[i].fd = lo_connect(o->port);
		if (th[i].fd < 0 || !th[i].hist) {
			fprintf(stderr, "tcp-fetch ranker: connect to port %d: %s\n", o->port,
				strerror(errno));
			return 1;
		}
		if (pthread_create(&th[i].th, NULL, tf_conn_thread, &th[i]))
			tf_die("cannot start a thread");
	}
	if (o->warmup > 0)
		tf_phase(&r, o->warmup, 0, o->seed + 1, &qn);
	c0 = lg_proc_cpu_s(0);
	s0 = o->server_pid ? lg_proc_cpu_s(o->server_pid) : -1;
	t0 = lg_now_ns();
	tf_phase(&r, o->seconds, 1, o->seed + 2, &qn);
	secs = (double)(lg_now_ns() - t0) / 1e9;
	c1 = lg_proc_cpu_s(0);
	s1 = o->server_pid ? lg_proc_cpu_s(o->server_pid) : -1;

	pthread_mutex_lock(&r.mu);
	r.stop = 1;
	pthread_cond_broadcast(&r.more);
	pthread_mutex_unlock(&r.mu);
	for (i = 0; i < o->conns; i++) {
		pthread_join(th[i].th, NULL);
		close(th[i].fd);
		free(th[i].hist);
	}
	cpu = (c1 - c0) + (s0 >= 0 && s1 >= 0 ? s1 - s0 : 0);
	{
		const struct lg_hist *h = r.hist;
		double per = r.done ? cpu / (double)r.done * 1e6 : 0;
		double uniq = r.done ? (double)r.unique / (double)r.done : 0;
		char srv[32];

		if (s0 >= 0 && s1 >= 0)
			snprintf(srv, sizeof(srv), "%.4f", s1 - s0);
		else
			snprintf(srv, sizeof(srv), "null");
		if (o->json)
			printf("{\"experiment\":\"fetch\",\"impl\":\"kernel-tcp\",\"transport\":\"tcp\""
			       ",\"qps\":%.1f,\"achieved_qps\":%.1f,\"keys\":%u,\"unique_keys_avg\":%.1f"
			       ",\"alpha\":%.3f,\"tables\":%u,\"rows\":%" PRIu64 ",\"dim\":%u"
			       ",\"deadline_ms\":%u,\"queries\":%" PRIu64 ",\"errors\":%" PRIu64
			       ",\"timeouts\":%" PRIu64 ",\"bad_rows\":%" PRIu64
			       ",\"avg_us\":%.3f,\"p50_us\":%.3f,\"p90_us\":%.3f,\"p99_us\":%.3f"
			       ",\"p999_us\":%.3f,\"max_us\":%.3f,\"cpu_us_per_fetch\":%.2f"
			       ",\"cpu_s\":%.4f,\"client_cpu_s\":%.4f,\"server_cpu_s\":%s,\"conns\":%u}\n",
			       o->qps, (double)r.done / secs, o->keys, uniq, o->alpha, o->tables,
			       o->rows, o->dim, o->deadline_ms, r.done, r.errors + r.timeouts,
			       r.timeouts, r.bad_rows, lg_hist_avg(h) / 1e3,
			       lg_hist_pct(h, 0.5) / 1e3, lg_hist_pct(h, 0.9) / 1e3,
			       lg_hist_pct(h, 0.99) / 1e3, lg_hist_pct(h, 0.999) / 1e3,
			       lg_hist_pct(h, 1) / 1e3, per, cpu, c1 - c0, srv, o->conns);
		else
			printf("tcp-fetch ranker: %.0f queries/s offered, %.0f done; %u keys/query "
			       "(%.0f distinct), %u connections\n"
			       "  fetches %" PRIu64 ", failed %" PRIu64 " (%" PRIu64
			       " past the %u ms deadline), wrong rows %" PRIu64 "\n"
			       "  latency us: avg %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f"
			       "  max %.1f\n"
			       "  CPU %.1f us per fetch (client %.3f s, server %s s)\n",
			       o->qps, (double)r.done / secs, o->keys, uniq, o->conns, r.done,
			       r.errors + r.timeouts, r.timeouts, o->deadline_ms, r.bad_rows,
			       lg_hist_avg(h) / 1e3, lg_hist_pct(h, 0.5) / 1e3,
			       lg_hist_pct(h, 0.9) / 1e3, lg_hist_pct(h, 0.99) / 1e3,
			       lg_hist_pct(h, 0.999) / 1e3, lg_hist_pct(h, 1) / 1e3, per, c1 - c0,
			       srv);
	}
	if (o->cdf) {
		int e = lg_hist_write_cdf(r.hist, o->cdf);

		if (e) {
			fprintf(stderr, "tcp-fetch ranker: %s: %s\n", o->cdf, strerror(-e));
			rc = 1;
		}
	}
	if (r.bad_rows) {
		fprintf(stderr, "tcp-fetch ranker: %" PRIu64 " rows had wrong values\n", r.bad_rows);
		rc = 1;
	}
	if (r.errors) {
		fprintf(stderr, "tcp-fetch ranker: %" PRIu64 " fetches failed\n", r.errors);
		rc = 1;
	}
	for (i = 0; i < o->pool; i++)
		free(r.pool[i]);
	free(r.pool);
	free(r.hist);
	free(th);
	return rc;
}

/* ---- main ---------------------------------------------------------------- */

static const char *tf_usage =
	"usage: tcp-fetch server|ranker [options]\n"
	"  server: --listen PORT (0) --tables T (1) --rows R (1M) --dim D (32)\n"
	"  ranker: --qps Q (500) --keys K (1024) --alpha A (1.09) --seconds S (10)\n"
	"          --warmup S (1) --deadline-ms D (30; 0: none) --conns N (4)\n"
	"          --pool N (queries drawn up front) --seed N --json --cdf FILE\n"
	"          --tables/--rows/--dim as the server's\n"
	"          --connect PORT [--server-pid PID]  (default: fork the server)\n";

int main(int argc, char **argv)
{
	struct tf_opts o = { .qps = 500, .alpha = 1.09, .seconds = 10, .warmup = 1,
			     .keys = 1024, .tables = 1, .dim = 32, .conns = 4,
			     .deadline_ms = 30, .rows = 1u << 20, .seed = 1, .port = -1 };
	int server, i, lfd, bound, rp[2];
	pid_t pid;
	char c;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "ranker"))) {
		fputs(tf_usage, stderr);
		return 2;
	}
	server = !strcmp(argv[1], "server");
	for (i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json")) {
			o.json = 1;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(tf_usage, stdout);
			return 0;
		}
		if (!v) {
			fprintf(stderr, "tcp-fetch: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--qps")) o.qps = strtod(v, NULL);
		else if (!strcmp(a, "--keys")) o.keys = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--alpha")) o.alpha = strtod(v, NULL);
		else if (!strcmp(a, "--seconds")) o.seconds = strtod(v, NULL);
		else if (!strcmp(a, "--warmup")) o.warmup = strtod(v, NULL);
		else if (!strcmp(a, "--deadline-ms")) o.deadline_ms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--conns")) o.conns = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pool")) o.pool = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--tables")) o.tables = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--rows")) o.rows = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--dim")) o.dim = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--listen") || !strcmp(a, "--connect")) o.port = atoi(v);
		else if (!strcmp(a, "--server-pid")) o.server_pid = (pid_t)atoi(v);
		else if (!strcmp(a, "--cdf")) o.cdf = v;
		else {
			fprintf(stderr, "tcp-fetch: unknown option '%s'\n%s", a, tf_usage);
			return 2;
		}
	}
	if (!(o.qps > 0) || !(o.seconds > 0) || o.warmup < 0 || !o.keys || o.keys > TF_MAX_KEYS ||
	    !o.tables || o.tables > 1024 || !o.rows || !o.dim || o.dim > 65536 || !o.conns ||
	    o.conns > TF_MAX_CONNS || !(o.alpha > 0) || o.port > 65535)
		tf_die("--qps, --seconds, --keys (<= 16M), --tables (<= 1024), --rows, --dim, "
		       "--conns (<= 256) and --alpha must be > 0; ports are 0..65535");
	if (o.rows > (1ull << 34) / o.dim / o.tables)
		tf_die("--tables x --rows x --dim must be at most 2^34 values (64 GiB)");
	if (!o.pool) /* ~8M keys drawn up front (64 MiB), at most 1024 queries */
		o.pool = (8u << 20) / o.keys > 1024 ? 1024 :
			 (8u << 20) / o.keys < 16 ? 16 : (8u << 20) / o.keys;
	signal(SIGPIPE, SIG_IGN);

	if (server || o.port < 0) {
		lfd = lo_listen(o.port < 0 ? 0 : o.port, 0, &bound);
		if (lfd < 0) {
			perror("tcp-fetch: listen");
			return 1;
		}
		if (server) {
			printf("listening %d\n", bound);
			return tf_serve(lfd, &o, -1);
		}
		if (pipe(rp)) {
			perror("tcp-fetch: pipe");
			return 1;
		}
		/* The ranker's own server: a child that dies with us. */
		pid = fork();
		if (pid < 0) {
			perror("tcp-fetch: fork");
			return 1;
		}
		if (!pid) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(rp[0]);
			if (!freopen("/dev/null", "w", stdout))
				_exit(1);
			_exit(tf_serve(lfd, &o, rp[1]));
		}
		close(lfd);
		close(rp[1]);
		/* Wait for the tables: filling them is not the fetch's time. */
		if (tf_read(rp[0], &c, 1)) {
			fprintf(stderr, "tcp-fetch: the server did not start\n");
			waitpid(pid, NULL, 0);
			return 1;
		}
		close(rp[0]);
		o.port = bound;
		o.server_pid = pid;
	} else {
		pid = 0;
	}
	i = tf_ranker_run(&o);
	if (pid) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return i;
}
