/*
 * rtest.c - helper of the RPC tests (see rtest.h). Public API only.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rtest.h"

uint64_t rt_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

double rt_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void rt_failover_report(const struct rt *t, const char *fault, const char *paths,
			double detect_ms, double recover_ms, const struct rt_stream *st,
			uint32_t timeout_us)
{
	char rec[32] = "null";

	if (!t->json)
		return;
	if (recover_ms >= 0)
		snprintf(rec, sizeof(rec), "%.2f", recover_ms);
	printf("{\"test\":\"failover\",\"impl\":\"be\",\"transport\":\"%s\",\"fault\":\"%s\","
	       "\"paths\":\"%s\",\"detect_ms\":%.2f,\"recover_ms\":%s,\"calls\":%llu,"
	       "\"calls_failed\":%llu,\"deadline_ms\":%u}\n",
	       t->transport, fault, paths, detect_ms, rec, (unsigned long long)st->done,
	       (unsigned long long)(st->done - st->ok + st->refused), timeout_us / 1000);
	fflush(stdout);
}

uint32_t rt_slow_factor(void)
{
	return getenv("BE_RXE_GUEST") ? 5 : 1;
}

void rt_init(struct rt *t, int argc, char **argv)
{
	int i;

	memset(t, 0, sizeof(*t));
	t->transport = test_arg(argc, argv, "--transport", "tcp");
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--json"))
			t->json = true;
	signal(SIGPIPE, SIG_IGN);
	st_config_init(&t->cfg);
	be_rpc_config_init(&t->rcfg);
	/* Generous deadlines: the machine is shared and noisy; tests that
	 * are about deadlines set their own. */
	t->rcfg.timeout_us = 10000000;
}

const char *rt_listen_addr(struct rt *t, const char *transport)
{
	const char *tr = transport ? transport : t->transport;
	size_t n = strcspn(tr, "0123456789");
	const char *ip = NULL;
	char var[16];

	/* "verbs" and "NAME<N>" (a NIC of the guest): $BE_RXE_IP<N>. */
	if (tr[n] || !strcmp(tr, "verbs")) {
		snprintf(var, sizeof(var), "BE_RXE_IP%s", tr[n] ? tr + n : "0");
		ip = getenv(var);
	}
	if (!strncmp(tr, "shm", n) && n == 3)
		snprintf(t->addr, sizeof(t->addr), "shm://be-rt-%d-%d", (int)getpid(), t->naddr++);
	else
		snprintf(t->addr, sizeof(t->addr), "%.*s://%s:0", (int)n, tr, ip ? ip : "127.0.0.1");
	return t->addr;
}

void rt_echo(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	struct rt_server *s = user;
	int rc;

	if (s)
		s->echoed++;
	/* Zero copy: the request's buffer is the reply's. A caller that hung
	 * up makes the reply -ENOTCONN (dropped and counted). */
	rc = be_rpc_req_reply(req, buf, len);
	if (rc && rc != -ENOTCONN)
		TEST_FAIL("reply: %s", be_strerror(rc));
}

static int echo_done, echo_failed;

static void echo_count(int status, void *reply, size_t len, void *arg)
{
	if (status)
		echo_failed++;
	echo_done++;
	be_rpc_buf_free(reply);
}

static bool echo_all(void *arg)
{
	return echo_done >= *(int *)arg;
}

void rt_echo_calls(struct be_rpc_chan *ch, struct be_worker **ws, int nws,
		   const struct rt_server *srv, int ns, int n, uint64_t *per)
{
	int i, sent = 0, want;

	for (i = 0; i < ns; i++)
		per[i] = srv[i].echoed;
	echo_done = echo_failed = 0;
	while (sent < n) {
		while (sent < n && sent - echo_done < 30) {
			ASSERT_OK(be_rpc_call(ch, RT_SVC, RT_ECHO, rt_req(64, 1), 64, NULL, echo_count,
					      NULL, NULL));
			sent++;
		}
		want = sent - 29;
		rt_pump(ws, nws, echo_all, &want);
	}
	want = n;
	rt_pump(ws, nws, echo_all, &want);
	ASSERT_EQ(echo_failed, 0);
	for (i = 0; i < ns; i++)
		per[i] = srv[i].echoed - per[i];
}

struct rt_held rt_held[RT_HELD_MAX];
int rt_nheld;

void rt_hold(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	ASSERT_LT(rt_nheld, RT_HELD_MAX);
	rt_held[rt_nheld++] = (struct rt_held){ req, buf, len };
}

bool rt_held_count(void *arg)
{
	return rt_nheld >= *(int *)arg;
}

void rt_held_release(void)
{
	int i;

	for (i = 0; i < rt_nheld; i++) {
		int rc = be_rpc_req_reply(rt_held[i].req, rt_held[i].buf, rt_held[i].len);

		if (rc && rc != -ENOTCONN)
			TEST_FAIL("reply: %s", be_strerror(rc));
	}
	rt_nheld = 0;
}

void rt_server_start(struct rt *t, struct rt_server *s, struct be_ctx *shared_ctx)
{
	rt_server_start_at(t, s, shared_ctx, rt_listen_addr(t, NULL));
}

void rt_server_start_at(struct rt *t, struct rt_server *s, struct be_ctx *shared_ctx,
			const char *addr)
{
	int rc;

	memset(s, 0, sizeof(*s));
	if (shared_ctx)
		s->ctx = shared_ctx;
	else
		ASSERT_OK(be_ctx_create(&t->cfg, &s->ctx));
	ASSERT_OK(be_worker_create(s->ctx, &s->w));
	ASSERT_OK(be_rpc_create(s->w, &t->rcfg, &s->rpc));
	ASSERT_OK(be_rpc_register(s->rpc, RT_SVC, RT_ECHO, rt_echo, s, 0));
	rc = be_rpc_listen(s->rpc, addr, &s->l);
	if (rc == -EPROTONOSUPPORT) {
		fprintf(stderr, "transport %s not built in: skipped\n", t->transport);
		exit(77);
	}
	ASSERT_OK(rc);
	ASSERT_OK(be_listener_addr(s->l, s->addr, sizeof(s->addr)));
	if (shared_ctx)
		s->ctx = NULL; /* not ours to destroy */
}

void rt_server_stop(struct rt_server *s)
{
	be_rpc_destroy(s->rpc);
	be_worker_destroy(s->w);
	if (s->ctx)
		be_ctx_destroy(s->ctx);
}

void rt_client_start(struct rt *t, struct rt_client *c, struct be_ctx *ctx)
{
	memset(c, 0, sizeof(*c));
	ASSERT_OK(be_worker_create(ctx, &c->w));
	ASSERT_OK(be_rpc_create(c->w, &t->rcfg, &c->rpc));
}

void rt_client_stop(struct rt_client *c)
{
	be_rpc_destroy(c->rpc);
	be_worker_destroy(c->w);
}

void rt_duo_start(struct rt *t, struct rt_duo *d)
{
	rt_server_start(t, &d->srv, NULL);
	rt_client_start(t, &d->cli, d->srv.ctx);
	d->ws[0] = d->srv.w;
	d->ws[1] = d->cli.w;
	ASSERT_OK(be_rpc_chan_open(d->cli.rpc, d->srv.addr, &d->ch));
}

void rt_duo_stop(struct rt_duo *d)
{
	if (d->ch)
		be_rpc_chan_destroy(d->ch);
	st_shutdown(d->ws, 2); /* together: each waits for the other */
	rt_client_stop(&d->cli);
	rt_server_stop(&d->srv);
}

void rt_fleet_start(struct rt *t, struct be_ctx **ctx, struct rt_server *srv, int n,
		    struct rt_client *cli, struct be_worker **ws)
{
	int i;

	ASSERT_OK(be_ctx_create(&t->cfg, ctx));
	for (i = 0; i < n; i++) {
		rt_server_start(t, &srv[i], *ctx);
		ws[i] = srv[i].w;
	}
	rt_client_start(t, cli, *ctx);
	ws[n] = cli->w;
}

void rt_fleet_stop(struct be_ctx *ctx, struct rt_server *srv, int n, struct rt_client *cli,
		   struct be_worker **ws)
{
	int i;

	st_shutdown(ws, n + 1);
	rt_client_stop(cli);
	for (i = 0; i < n; i++)
		rt_server_stop(&srv[i]);
	be_ctx_destroy(ctx);
}

void *rt_req(size_t len, uint32_t seed)
{
	void *p = be_rpc_buf_alloc(len);

	ASSERT(p);
	st_fill(p, len, seed);
	return p;
}

void rt_done_cb(int status, void *reply, size_t len, void *arg)
{
	struct rt_result *r = arg;

	r->calls++;
	if (r->calls > 1)
		TEST_FAIL("a call completed twice (status %d then %d)", r->status, status);
	r->status = status;
	r->reply = reply;
	r->len = len;
}

bool rt_result_done(void *arg)
{
	return ((struct rt_result *)arg)->calls > 0;
}

bool rt_late_replies(void *arg)
{
	const struct rt_late *l = arg;
	struct be_rpc_chan_stats cs;

	be_rpc_chan_stats(l->ch, &cs);
	return cs.c.late_replies >= l->n;
}

uint32_t rt_chan_replicas(struct be_rpc_chan *ch)
{
	struct be_rpc_chan_stats cs;

	be_rpc_chan_stats(ch, &cs);
	return cs.replicas;
}

struct be_rpc_replica_stats rt_chan_replica(struct be_rpc_chan *ch, unsigned int i)
{
	struct be_rpc_replica_stats rs;

	ASSERT_OK(be_rpc_chan_replica_stats(ch, i, &rs));
	return rs;
}

uint64_t rt_naming_errors(struct be_rpc_naming *nm)
{
	struct be_rpc_naming_stats ns;

	be_rpc_naming_stats(nm, &ns);
	return ns.errors;
}

/* ---- streams */

#define RT_MAX_CALLS (1u << 22)
static uint8_t stream_seen[RT_MAX_CALLS];
static uint32_t stream_seq;

struct stream_call {
	struct rt_stream *s;
	uint32_t seq;
	double sent_us;
};

static void stream_cb(int status, void *reply, size_t len, void *arg)
{
	struct stream_call *c = arg;
	struct rt_stream *s = c->s;

	if (stream_seen[c->seq]++)
		TEST_FAIL("call %u completed twice", c->seq);
	s->inflight--;
	s->done++;
	if (!status) {
		s->ok++;
		if (s->mark_us && c->sent_us < s->mark_us)
			s->caught_done_us = rt_us();
	} else if (status == -ETIMEDOUT) {
		s->timeouts++;
		s->last_fail_ms = rt_ms();
	}
	if (status) /* rare, and what a failing run needs to show */
		fprintf(stderr, "call %u failed after %.1f ms: %s\n", c->seq,
			(rt_us() - c->sent_us) / 1000, be_strerror(status));
	if (status && status != -ETIMEDOUT) {
		s->other++;
		s->last_err = status;
		s->last_fail_ms = rt_ms();
	}
	be_rpc_buf_free(reply);
	free(c);
}

void rt_stream_fill(struct rt_stream *s)
{
	struct be_rpc_call_opts o = { .timeout_us = s->timeout_us, .flags = s->flags };

	while (s->inflight < s->depth) {
		struct stream_call *c = malloc(sizeof(*c));
		size_t len = s->method == RT_SLOW ? 64 : 256;
		void *req = be_rpc_buf_alloc(len);
		int rc;

		ASSERT(c && req);
		memset(req, 0x5a, len);
		if (s->method == RT_SLOW)
			memcpy(req, &s->slow_us, 4);
		ASSERT_LT(stream_seq, RT_MAX_CALLS);
		c->s = s;
		c->seq = stream_seq++;
		c->sent_us = rt_us();
		rc = be_rpc_call(s->ch, s->service, s->method, req, len, &o, stream_cb, c, NULL);
		if (rc) {
			ASSERT_EQ(rc, -EHOSTUNREACH);
			stream_seen[c->seq] = 1;
			s->refused++;
			be_rpc_buf_free(req);
			free(c);
			return;
		}
		s->inflight++;
		s->sent++;
	}
}

static bool stream_empty(void *arg)
{
	return !((struct rt_stream *)arg)->inflight;
}

void rt_stream_drain(struct rt_stream *s, struct be_worker **ws, int n)
{
	st_pump(ws, n, stream_empty, s);
}

/* ---- replicas in child processes */

int rt_reply_due(struct rt_delayed *d, int *n, uint64_t now_ms, const void *owner)
{
	int i, k = 0;

	for (i = 0; i < *n;) {
		if (d[i].due_ms <= now_ms && (!owner || d[i].owner == owner)) {
			be_rpc_req_reply(d[i].req, d[i].buf, d[i].len);
			d[i] = d[--*n];
			k++;
		} else {
			i++;
		}
	}
	return k;
}

static struct rt_delayed slows[4096];
static int nslow;

static void rt_slow(struct be_rpc_req *req, void *buf, size_t len, void *user)
{
	uint32_t us = 0;

	if (len >= 4)
		memcpy(&us, buf, 4);
	if (nslow == (int)(sizeof(slows) / sizeof(slows[0]))) {
		be_rpc_req_fail(req, -EBUSY);
		be_rpc_buf_free(buf);
		return;
	}
	slows[nslow++] = (struct rt_delayed){
		.req = req, .buf = buf, .len = len, .due_ms = rt_ms() + us / 1000, .owner = user
	};
}

/* One path of a replica: its own worker, be_rpc and listener, so that
 * breaking it ('c') takes its Engines down with it, as a broken RDMA
 * path does, while the other paths keep serving. */
struct path {
	struct be_worker *w;
	bool frozen;              /* not progressed: its traffic goes unanswered */
	struct be_rpc *rpc;
	char addr[BE_RPC_ADDR_MAX];
};

static void path_open(struct rt *t, struct be_ctx *ctx, struct path *p, const char *addr)
{
	struct be_rpc_config rc;
	struct be_listener *l;
	int rcode;

	ASSERT_OK(be_worker_create(ctx, &p->w));
	be_rpc_config_init(&rc);
	ASSERT_OK(be_rpc_create(p->w, &rc, &p->rpc));
	ASSERT_OK(be_rpc_register(p->rpc, RT_SVC, RT_ECHO, rt_echo, NULL, 0));
	ASSERT_OK(be_rpc_register(p->rpc, RT_SVC, RT_SLOW, rt_slow, p->rpc, 0));
	rcode = be_rpc_listen(p->rpc, addr, &l);
	if (rcode == -EPROTONOSUPPORT)
		_exit(77);
	ASSERT_OK(rcode);
	ASSERT_OK(be_listener_addr(l, p->addr, sizeof(p->addr)));
}

static void path_close(struct path *p)
{
	/* Requests of this path still held by the slow handler are
	 * answered into the void (their reply is dropped). */
	rt_reply_due(slows, &nslow, UINT64_MAX, p->rpc);
	be_rpc_destroy(p->rpc);
	be_worker_destroy(p->w);
	p->w = NULL;
}

static void replica_main(struct rt *t, const char *transports, int wfd, int rfd)
{
	struct path paths[4] = { 0 };
	char trs[64], msg[4 * BE_RPC_ADDR_MAX + 8];
	struct be_ctx *ctx;
	char *tok, *save;
	size_t off = 0;
	int n = 0, i;

	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	snprintf(trs, sizeof(trs), "%s", transports);
	for (tok = strtok_r(trs, ",", &save); tok && n < 4; tok = strtok_r(NULL, ",", &save)) {
		path_open(t, ctx, &paths[n], rt_listen_addr(t, tok));
		off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%s\n", paths[n].addr);
		n++;
	}
	ASSERT((size_t)write(wfd, msg, off) == off);
	close(wfd);
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	for (;;) {
		char cmd;
		ssize_t got;
		int work = 0;

		for (i = 0; i < n; i++)
			if (paths[i].w && !paths[i].frozen)
				work += be_worker_progress(paths[i].w);
		rt_reply_due(slows, &nslow, rt_ms(), NULL);
		if (!work)
			usleep(50);
		got = read(rfd, &cmd, 1);
		if (got == 0)
			_exit(0); /* the parent is gone */
		if (got < 0)
			continue;
		for (i = 0; i < n; i++) {
			if (!paths[i].w)
				continue;
			if (cmd == 'd')
				be_rpc_drain(paths[i].rpc, 1);
			else if (cmd == 'u')
				be_rpc_drain(paths[i].rpc, 0);
		}
		if (cmd == 'c' && paths[0].w)
			path_close(&paths[0]);
		if (cmd == 'f' || cmd == 't')
			paths[0].frozen = cmd == 'f';
		if (cmd == 'o' && !paths[0].w) {
			char a[BE_RPC_ADDR_MAX];

			snprintf(a, sizeof(a), "%s", paths[0].addr);
			path_open(t, ctx, &paths[0], a);
		}
	}
}

void rt_replica_start(struct rt *t, struct rt_replica *r, const char *transports)
{
	int up[2], down[2];
	char buf[4 * BE_RPC_ADDR_MAX + 8], *p, *save;
	size_t got = 0;
	ssize_t n;

	memset(r, 0, sizeof(*r));
	ASSERT_OK(pipe(up));
	ASSERT_OK(pipe(down));
	/* Names must differ between replicas and from the parent's. */
	t->naddr += 100;
	r->pid = fork();
	ASSERT(r->pid >= 0);
	if (!r->pid) {
		/* Die with the test, even stopped (a failed test must not
		 * leave a SIGSTOPped replica holding ctest's pipes). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(up[0]);
		close(down[1]);
		replica_main(t, transports, up[1], down[0]);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	r->ctl = down[1];
	while ((n = read(up[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(up[0]);
	buf[got] = '\0';
	if (!got) {
		int st;

		waitpid(r->pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
			fprintf(stderr, "transport not built in: skipped\n");
			exit(77);
		}
		TEST_FAIL("replica did not start (status %d)", st);
	}
	for (p = strtok_r(buf, "\n", &save); p && r->naddrs < 4; p = strtok_r(NULL, "\n", &save))
		snprintf(r->addrs[r->naddrs++], BE_RPC_ADDR_MAX, "%s", p);
}

void rt_replica_ctl(struct rt_replica *r, char cmd)
{
	ASSERT(write(r->ctl, &cmd, 1) == 1);
}

void rt_replica_record(const struct rt_replica *r, const char *name, struct be_rpc_record *out)
{
	int i;

	memset(out, 0, sizeof(*out));
	snprintf(out->replica, sizeof(out->replica), "%s", name);
	out->shard_hi = UINT32_MAX;
	out->naddrs = (uint32_t)r->naddrs;
	for (i = 0; i < r->naddrs; i++)
		snprintf(out->addrs[i], sizeof(out->addrs[i]), "%s", r->addrs[i]);
}

void rt_replica_kill(struct rt_replica *r, int sig)
{
	if (r->pid > 0)
		kill(r->pid, sig);
}

void rt_replica_reap(struct rt_replica *r)
{
	int st;

	if (r->pid <= 0)
		return;
	kill(r->pid, SIGKILL);
	waitpid(r->pid, &st, 0);
	r->pid = 0;
	close(r->ctl);
}

/* ---- scenarios */

void rt_env_fork(struct rt *t, struct rt_env *e, int n, const char *transports)
{
	int i;

	ASSERT(n > 0 && n <= RT_ENV_MAX);
	memset(e, 0, sizeof(*e));
	e->n = n;
	for (i = 0; i < n; i++)
		rt_replica_start(t, &e->reps[i], transports ? transports : t->transport);
}

void rt_env_records(const struct rt_env *e, struct be_rpc_record *recs)
{
	int i;

	for (i = 0; i < e->n; i++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", i);
		rt_replica_record(&e->reps[i], name, &recs[i]);
	}
}

void rt_env_open(struct rt *t, struct rt_env *e, const struct be_rpc_config *cfg)
{
	struct be_rpc_record recs[RT_ENV_MAX];

	ASSERT_OK(be_ctx_create(&t->cfg, &e->ctx));
	ASSERT_OK(be_worker_create(e->ctx, &e->w));
	ASSERT_OK(be_rpc_create(e->w, cfg, &e->rpc));
	rt_env_records(e, recs);
	ASSERT_OK(be_rpc_chan_create(e->rpc, recs, (unsigned int)e->n, &e->ch));
}

void rt_env_close(struct rt_env *e)
{
	int i;

	be_rpc_chan_destroy(e->ch);
	be_rpc_destroy(e->rpc);
	be_worker_destroy(e->w);
	be_ctx_destroy(e->ctx);
	for (i = 0; i < e->n; i++)
		rt_replica_reap(&e->reps[i]);
}

void rt_stream_init(struct rt_stream *s, struct be_rpc_chan *ch, uint32_t method, uint32_t flags,
		    int depth)
{
	memset(s, 0, sizeof(*s));
	s->ch = ch;
	s->service = RT_SVC;
	s->method = method;
	s->flags = flags;
	s->depth = depth;
}

struct path_goal {
	struct rt_stream *st;
	struct be_rpc_chan *ch;
	uint64_t done;
	int path;
	uint64_t ok_path;   /* answers over that path at least */
	double at_us;       /* when the path first had them (0: not yet) */
};

static bool path_reached(void *arg)
{
	struct path_goal *g = arg;
	struct be_rpc_replica_stats rs;

	rt_stream_fill(g->st);
	ASSERT_OK(be_rpc_chan_replica_stats(g->ch, 0, &rs));
	if (rs.path == g->path && rs.addrs[g->path].c.ok >= g->ok_path) {
		if (!g->at_us)
			g->at_us = rt_us();
		return g->st->done >= g->done;
	}
	return false;
}

/* @act(@rep, @repair, @arg) breaks (repairs) the first path; pump until
 * the calls go over the second (the first) and 300 more are done.
 * Returns the milliseconds from the act to the first answer there. */
static double path_move(struct rt_env *e, struct rt_stream *st, struct rt_replica *rep,
			void (*act)(struct rt_replica *rep, bool repair, void *arg), void *arg,
			bool repair)
{
	struct be_rpc_replica_stats rs;
	struct path_goal g;
	int to = repair ? 0 : 1;
	double t0;

	ASSERT_OK(be_rpc_chan_replica_stats(e->ch, 0, &rs));
	g = (struct path_goal){ st, e->ch, st->done + 300, to, rs.addrs[to].c.ok + 1, 0 };
	t0 = rt_us();
	act(rep, repair, arg);
	rt_pump(&e->w, 1, path_reached, &g);
	return (g.at_us - t0) / 1000;
}

void rt_path_switch(struct rt *t, const char *paths, uint32_t timeout_us,
		    void (*act)(struct rt_replica *rep, bool repair, void *arg), void *arg,
		    const char *fault, struct be_rpc_chan_stats *out)
{
	static struct rt_stream st;
	struct be_rpc_chan_stats cs;
	struct be_rpc_config cfg;
	struct rt_replica *rep;
	struct path_goal g;
	struct rt_env e;
	double t_over, t_back;
	bool fallback;

	rt_env_fork(t, &e, 1, paths);
	rep = &e.reps[0];
	ASSERT_EQ(rep->naddrs, 2);
	fallback = strncmp(rep->addrs[0], "tcp://", 6) && !strncmp(rep->addrs[1], "tcp://", 6);
	cfg = t->rcfg;
	cfg.timeout_us = timeout_us;
	cfg.probe_min_ms = 5;
	cfg.probe_max_ms = 200;
	rt_env_open(t, &e, &cfg);
	rt_stream_init(&st, e.ch, RT_ECHO, BE_RPC_IDEMPOTENT, 8);

	/* Warm up with the test's generous deadline: the first connection
	 * (seconds in the Soft-RoCE guest) is not the fault under test.
	 * Then the deadline under test, on every call in flight. */
	st.timeout_us = t->rcfg.timeout_us;
	g = (struct path_goal){ &st, e.ch, 300, 0, 1, 0 };
	rt_pump(&e.w, 1, path_reached, &g);
	st.timeout_us = 0;
	g = (struct path_goal){ &st, e.ch, st.done + (uint64_t)st.depth + 100, 0, 1, 0 };
	rt_pump(&e.w, 1, path_reached, &g);
	/* Over: the first answer over the second path after the fault. */
	fprintf(stderr, "%s: calls over %s; breaking it\n", fault, rep->addrs[0]);
	t_over = path_move(&e, &st, rep, act, arg, false);
	fprintf(stderr, "%s: over after %.1f ms\n", fault, t_over);
	/* At least once: on a loaded host a healthy path may stall past a
	 * hedge delay and be left (and taken back) before the break too. */
	be_rpc_chan_stats(e.ch, &cs);
	ASSERT_GE(fallback ? cs.c.fallbacks : cs.c.port_switches, 1);
	ASSERT_EQ(fallback ? cs.c.port_switches : cs.c.fallbacks, 0);

	/* Back: the first answer over the first path after the repair. */
	fprintf(stderr, "%s: calls over %s; repairing the first\n", fault, rep->addrs[1]);
	t_back = path_move(&e, &st, rep, act, arg, true);
	rt_stream_drain(&st, &e.w, 1);

	be_rpc_chan_stats(e.ch, &cs);
	fprintf(stderr, "%s (%s): over after %.1f ms, back after %.1f ms; calls %llu ok %llu "
			"(timeouts %llu, other %llu, last error %s) hedges %llu retries %llu\n",
		fault, fallback ? "fallback" : "port switch", t_over, t_back,
		(unsigned long long)st.done, (unsigned long long)st.ok,
		(unsigned long long)st.timeouts, (unsigned long long)st.other,
		st.last_err ? be_strerror(st.last_err) : "none", (unsigned long long)cs.c.hedges,
		(unsigned long long)cs.c.retries);
	rt_failover_report(t, fault, paths, t_over, t_back, &st, timeout_us);
	ASSERT_EQ(st.ok, st.done);
	ASSERT_EQ(st.refused, 0);
	/* Every move over came back. */
	ASSERT_EQ(cs.c.fallback_returns, cs.c.fallbacks);
	ASSERT_EQ(cs.c.port_returns, cs.c.port_switches);
	*out = cs;
	rt_env_close(&e);
}

struct ctl_cmds {
	char brk, repair;
};

static void ctl_act(struct rt_replica *rep, bool repair, void *arg)
{
	const struct ctl_cmds *c = arg;

	rt_replica_ctl(rep, repair ? c->repair : c->brk);
}

void rt_path_switch_ctl(struct rt *t, uint32_t timeout_us, char brk, char repair,
			const char *fault, struct be_rpc_chan_stats *out)
{
	struct ctl_cmds c = { brk, repair };
	char paths[32];

	snprintf(paths, sizeof(paths), "%s,tcp", t->transport);
	rt_path_switch(t, paths, timeout_us, ctl_act, &c, fault, out);
}
