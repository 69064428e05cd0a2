/*
 * be-ps - a parameter server process: the shards the model's config file
 * places on server --server I, served over the RPC layer on every
 * --listen address (docs/PS.md, "Serving").
 *
 * One worker, driven by the main thread, runs the RPC layer and every
 * hosted shard (the shards are single-threaded, ps_int.h), so a request
 * runs to completion where it arrived and a checkpoint taken on this
 * thread is a consistent snapshot. A primary loads its shards'
 * checkpoints at start, writes them every --ckpt-every seconds, on
 * SIGUSR1, on the CHECKPOINT method, and when it stops (SIGTERM,
 * SIGINT). A serving replica (--replica) refuses pushes and follows the
 * primary's checkpoint directory (--follow DIR), replacing a shard when a
 * newer model version appears there.
 *
 * With --register etcd://HOST:PORT/PREFIX it keeps its records (one per
 * hosted shard's service: "be.ps.<shard>", and "be.ps.<shard>.primary"
 * for a primary; replica --name, every --listen address) in etcd under a
 * lease (--ttl), so clients reading that registry find it, and lose it
 * one TTL after it dies. A clean stop drains first: the records say
 * "draining" (clients send no new calls) while it serves on for
 * --drain-ms, then new requests are answered -ESHUTDOWN (callers retry
 * them on another replica) and those in flight finish; then it
 * deregisters (the lease is revoked, the keys go at once) and closes.
 *
 * Output: "listening ADDR" for each address (the port chosen when the
 * address asked for port 0), then "ready", on stdout, so that a launcher
 * can wait for it; with --register, "registered MS" once the records are
 * in etcd and "first-request MS" when the first request arrives (MS:
 * the wall clock in milliseconds, for bench/discovery.sh); errors on
 * stderr; exit status 0 after a clean stop.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <be/be.h>

#include "ps/config.h"
#include "ps/server.h"

#define MAX_LISTEN 8

static volatile sig_atomic_t g_stop, g_ckpt;
static int g_first_seen = 1; /* 0 with --register: say when the first request arrives */
static struct be__ps_server *g_srv;
static const char *g_ckpt_dir;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		g_ckpt = 1;
	else
		g_stop = 1;
}

static void *rpcbuf_alloc(size_t n, void *arg)
{
	return be_rpc_buf_alloc(n);
}

static void rpcbuf_free(void *p, void *arg)
{
	be_rpc_buf_free(p);
}

static const struct be__ps_alloc rpcbuf = { rpcbuf_alloc, rpcbuf_free, NULL };

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Every method: the request's bytes to the shards, the answer back. */
static void on_request(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	uint32_t method = (uint32_t)(uintptr_t)user;
	void *reply = NULL;
	size_t rlen = 0;
	int rc;

	if (!g_first_seen) {
		g_first_seen = 1;
		printf("first-request %llu\n", (unsigned long long)wall_ms());
		fflush(stdout);
	}

	rc = be__ps_server_handle(g_srv, method, buf, len, &rpcbuf,
				  method == BE_PS_M_CHECKPOINT ? g_ckpt_dir : NULL, &reply, &rlen);
	be_rpc_buf_free(buf);
	if (rc)
		be_rpc_req_fail(req, rc);
	else
		be_rpc_req_reply(req, reply, rlen);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void checkpoint(const char *why_now)
{
	const char *why = "";
	uint32_t bad = 0;
	uint64_t t0 = now_ms();
	int rc;

	if (!g_ckpt_dir)
		return;
	rc = be__ps_server_save(g_srv, g_ckpt_dir, &bad, &why);
	if (rc)
		fprintf(stderr, "be-ps: checkpoint (%s): shard %u: %s: %s\n", why_now, bad, why,
			be_strerror(rc));
	else
		fprintf(stderr, "be-ps: checkpoint (%s): %u shards in %llu ms\n", why_now,
			g_srv->n_local, (unsigned long long)(now_ms() - t0));
}

/*
 * The records of this server, one per service of each hosted shard,
 * registered under a lease at @uri. The epoch is the start time in
 * microseconds, so a restarted server's records replace its old ones.
 */
static int ps_register(const char *uri, const char *name, uint32_t ttl_s, int replica,
		       char addrs[][BE_RPC_ADDR_MAX], int naddrs, struct be_rpc_reg **out)
{
	struct be_rpc_record *recs;
	struct timespec ts;
	char host[64] = "host";
	uint32_t i, n = 0;
	int rc, k;

	recs = calloc((size_t)g_srv->n_local * 2, sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	clock_gettime(CLOCK_REALTIME, &ts);
	gethostname(host, sizeof(host) - 1);
	for (i = 0; i < g_srv->n_local * 2; i++) {
		struct be_rpc_record *r = &recs[n];
		uint32_t shard = g_srv->local[i / 2];

		if (i % 2 && replica)
			continue;
		snprintf(r->service, sizeof(r->service), "%s.%u%s", BE_PS_SERVICE, shard,
			 i % 2 ? ".primary" : "");
		if (name)
			snprintf(r->replica, sizeof(r->replica), "%s", name);
		else
			snprintf(r->replica, sizeof(r->replica), "%.40s-%u%s", host, g_srv->index,
				 replica ? "r" : "");
		r->shard_lo = 0;
		r->shard_hi = UINT32_MAX;
		r->state = BE_RPC_SERVING;
		r->epoch = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
		r->naddrs = (uint32_t)naddrs;
		for (k = 0; k < naddrs; k++)
			snprintf(r->addrs[k], sizeof(r->addrs[k]), "%s", addrs[k]);
		n++;
	}
	rc = be_rpc_reg_create(uri, recs, n, ttl_s, out);
	free(recs);
	return rc;
}

/*
 * A clean stop. Registered: rewrite the records as draining (clients
 * then give this server no new calls) and go on serving for @linger_ms,
 * while the change reaches their watches and the calls they had sent
 * arrive. Then refuse new requests (-ESHUTDOWN: callers retry them on
 * another replica), let those in flight finish, and deregister.
 */
static void drain(struct be_rpc *rpc, struct be_worker *w, struct be_rpc_reg **reg,
		  uint64_t linger_ms)
{
	struct be_rpc_server_stats ss;
	uint64_t until, t0, c0;
	int rc;

	if (*reg) {
		c0 = be_rpc_reg_count(*reg);
		rc = be_rpc_reg_set_state(*reg, BE_RPC_DRAINING);
		if (rc)
			fprintf(stderr, "be-ps: marking the records draining: %s\n", be_strerror(rc));
		for (until = now_ms() + 3000; !rc && be_rpc_reg_count(*reg) == c0 && now_ms() < until;)
			be_worker_wait(w, 10);
		for (t0 = now_ms(); now_ms() - t0 < linger_ms;)
			be_worker_wait(w, 10);
	}
	be_rpc_drain(rpc, 1);
	be_rpc_server_stats(rpc, &ss);
	for (until = now_ms() + 10000; ss.in_flight && now_ms() < until;) {
		be_worker_wait(w, 1);
		be_rpc_server_stats(rpc, &ss);
	}
	if (ss.in_flight)
		fprintf(stderr, "be-ps: stopping with %llu requests still in flight\n",
			(unsigned long long)ss.in_flight);
	if (*reg) {
		be_rpc_reg_destroy(*reg);
		*reg = NULL;
		fprintf(stderr, "be-ps: drained, deregistered (%llu requests refused)\n",
			(unsigned long long)ss.refused_draining);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: be-ps --config FILE [--server I] --listen ADDR [--listen ADDR ...]\n"
		"             [--ckpt-dir DIR] [--ckpt-every S] [--replica --follow DIR]\n"
		"             [--follow-ms MS] [--register URI [--name N] [--ttl S]]\n"
		"             [--drain-ms MS]\n"
		"  --config      the model (docs/PS.md, \"Config file\"); clients read the same\n"
		"  --server      this process's index in the placement (default 0)\n"
		"  --listen      an address to serve on: tcp://H:P, shm://NAME, verbs://IP:P\n"
		"  --ckpt-dir    load checkpoints from DIR at start, write them there\n"
		"  --ckpt-every  also every S seconds (default 0: only on request and at exit)\n"
		"  --replica     a serving replica: pulls only\n"
		"  --follow      (replica) load newer checkpoints of the primary from DIR\n"
		"  --follow-ms   how often to look (default 200)\n"
		"  --register    keep this server's records in etcd://HOST:PORT[,...]/PREFIX\n"
		"  --name        its replica name there (default <hostname>-<server>[r])\n"
		"  --ttl         the lease's TTL in seconds (default 3)\n"
		"  --drain-ms    at a clean stop, serve this long after marking the records\n"
		"                draining (default 1000)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "server", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "ckpt-dir", required_argument, NULL, 'd' },
		{ "ckpt-every", required_argument, NULL, 'e' },
		{ "replica", no_argument, NULL, 'r' },
		{ "follow", required_argument, NULL, 'f' },
		{ "follow-ms", required_argument, NULL, 'F' },
		{ "register", required_argument, NULL, 'R' },
		{ "name", required_argument, NULL, 'n' },
		{ "ttl", required_argument, NULL, 't' },
		{ "drain-ms", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *follow = NULL, *listen[MAX_LISTEN], *reg_uri = NULL;
	const char *name = NULL;
	unsigned long server = 0, ckpt_every = 0, follow_ms = 200, ttl = 0;
	unsigned long drain_ms = 1000;
	char addrs[MAX_LISTEN][BE_RPC_ADDR_MAX];
	struct be_rpc_reg *reg = NULL;
	int registered = 0;
	struct be__ps_config cfg;
	struct be_config bcfg;
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_rpc *rpc;
	struct be_listener *l;
	struct sigaction sa;
	char err[256], addr[BE_RPC_ADDR_MAX];
	const char *why = "";
	uint64_t next_ckpt, next_follow;
	uint32_t bad = 0, svc, m;
	int nlisten = 0, replica = 0, c, rc, i;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 's': server = strtoul(optarg, NULL, 10); break;
		case 'l':
			if (nlisten == MAX_LISTEN) {
				fprintf(stderr, "be-ps: at most %d --listen\n", MAX_LISTEN);
				return 2;
			}
			listen[nlisten++] = optarg;
			break;
		case 'd': g_ckpt_dir = optarg; break;
		case 'e': ckpt_every = strtoul(optarg, NULL, 10); break;
		case 'r': replica = 1; break;
		case 'f': follow = optarg; break;
		case 'F': follow_ms = strtoul(optarg, NULL, 10); break;
		case 'R': reg_uri = optarg; break;
		case 'n': name = optarg; break;
		case 't': ttl = strtoul(optarg, NULL, 10); break;
		case 'D': drain_ms = strtoul(optarg, NULL, 10); break;
		default: usage(); return c == 'h' ? 0 : 2;
		}
	}
	if (!config || !nlisten || optind != argc || (follow && !replica) || server > UINT32_MAX ||
	    ttl > 3600 || ((name || ttl) && !reg_uri)) {
		usage();
		return 2;
	}
	if ((rc = be__ps_config_load(config, &cfg, err, sizeof(err)))) {
		fprintf(stderr, "be-ps: %s: %s\n", config, rc == -EINVAL ? err : be_strerror(rc));
		return 1;
	}
	if ((rc = be__ps_server_create(&cfg, (uint32_t)server, replica ? BE_PS_SERVER_REPLICA : 0,
				       &g_srv))) {
		fprintf(stderr, "be-ps: server %lu of %u: %s\n", server, cfg.n_servers,
			be_strerror(rc));
		return 1;
	}
	if (g_ckpt_dir && (rc = be__ps_server_load(g_srv, g_ckpt_dir, &bad, &why)) < 0) {
		fprintf(stderr, "be-ps: checkpoint of shard %u in %s: %s (%s)\n", bad, g_ckpt_dir,
			why, be_strerror(rc));
		return 1;
	}
	if (follow)
		be__ps_server_follow(g_srv, follow);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	be_config_init(&bcfg);
	if ((rc = be_ctx_create(&bcfg, &ctx)) || (rc = be_worker_create(ctx, &w)) ||
	    (rc = be_rpc_create(w, NULL, &rpc))) {
		fprintf(stderr, "be-ps: start: %s\n", be_strerror(rc));
		return 1;
	}
	svc = be_rpc_service_id(BE_PS_SERVICE);
	for (m = BE_PS_M_PULL; m <= BE_PS_M_CHECKPOINT; m++)
		if ((rc = be_rpc_register(rpc, svc, m, on_request, (void *)(uintptr_t)m, 0))) {
			fprintf(stderr, "be-ps: register: %s\n", be_strerror(rc));
			return 1;
		}
	for (i = 0; i < nlisten; i++) {
		if ((rc = be_rpc_listen(rpc, listen[i], &l))) {
			fprintf(stderr, "be-ps: listen %s: %s\n", listen[i], be_strerror(rc));
			return 1;
		}
		if (be_listener_addr(l, addr, sizeof(addr)) < 0)
			snprintf(addr, sizeof(addr), "%s", listen[i]);
		printf("listening %s\n", addr);
		snprintf(addrs[i], sizeof(addrs[i]), "%s", addr);
	}
	if (reg_uri) {
		rc = ps_register(reg_uri, name, (uint32_t)ttl, replica, addrs, nlisten, &reg);
		if (rc) {
			fprintf(stderr, "be-ps: register at %s: %s\n", reg_uri, be_strerror(rc));
			return 1;
		}
		g_first_seen = 0;
	}
	printf("ready\n");
	fflush(stdout);

	next_ckpt = ckpt_every ? now_ms() + ckpt_every * 1000 : UINT64_MAX;
	next_follow = now_ms() + follow_ms;
	while (!g_stop) {
		uint64_t t;

		be_worker_wait(w, 10);
		t = now_ms();
		if (reg && !registered && be_rpc_reg_count(reg)) {
			registered = 1;
			printf("registered %llu\n", (unsigned long long)wall_ms());
			fflush(stdout);
		}
		if (g_ckpt || t >= next_ckpt) {
			checkpoint(g_ckpt ? "on request" : "periodic");
			g_ckpt = 0;
			if (ckpt_every)
				next_ckpt = t + ckpt_every * 1000;
		}
		if (follow && t >= next_follow) {
			be__ps_server_follow(g_srv, follow);
			next_follow = t + follow_ms;
		}
	}
	drain(rpc, w, &reg, (uint64_t)drain_ms);
	if (!replica)
		checkpoint("stop");
	be_rpc_destroy(rpc);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	be__ps_server_destroy(g_srv);
	be__ps_config_close(&cfg);
	return 0;
}
