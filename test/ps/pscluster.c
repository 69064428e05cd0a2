/*
 * pscluster.c - be-ps processes and their client for the end-to-end
 * tests (pscluster.h).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pscluster.h"

void pc_init(struct pc *c, int argc, char **argv, const char *config_text)
{
	FILE *f;

	memset(c, 0, sizeof(*c));
	c->transport = test_arg(argc, argv, "--transport", "tcp");
	c->be_ps = test_arg(argc, argv, "--be-ps", NULL);
	if (!c->be_ps)
		TEST_FAIL("--be-ps PATH is required");
	signal(SIGPIPE, SIG_IGN);
	pt_tmpdir(c->dir, sizeof(c->dir));
	snprintf(c->config, sizeof(c->config), "%s/model.conf", c->dir);
	f = fopen(c->config, "w");
	ASSERT(f);
	ASSERT(fputs(config_text, f) >= 0);
	ASSERT_OK(fclose(f));
}

void pc_server_start(struct pc *c, struct pc_server *s, unsigned int index, bool replica,
		     const char *name)
{
	pc_server_start_args(c, s, index, replica, name, NULL);
}

void pc_server_start_args(struct pc *c, struct pc_server *s, unsigned int index, bool replica,
			  const char *name, const char *const *extra)
{
	char listen[BE_RPC_ADDR_MAX], idx[16], line[512];
	const char *argv[32];
	int fds[2], n = 0;
	FILE *out;

	memset(s, 0, sizeof(*s));
	s->index = index;
	s->replica = replica;
	snprintf(s->name, sizeof(s->name), "%s", name);
	if (!strcmp(c->transport, "shm"))
		snprintf(listen, sizeof(listen), "shm://be-pst-%d-%u", (int)getpid(), c->naddr++);
	else
		snprintf(listen, sizeof(listen), "%s://127.0.0.1:0", c->transport);
	snprintf(idx, sizeof(idx), "%u", index);
	ASSERT_OK(pipe(fds));
	s->pid = fork();
	ASSERT(s->pid >= 0);
	if (!s->pid) {
		/* Die with the test, whatever way it ends: ctest waits for
		 * every process holding the test's stderr. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		argv[n++] = c->be_ps;
		argv[n++] = "--config";
		argv[n++] = c->config;
		argv[n++] = "--server";
		argv[n++] = idx;
		argv[n++] = "--listen";
		argv[n++] = listen;
		if (replica) {
			argv[n++] = "--replica";
			argv[n++] = "--follow";
			argv[n++] = c->dir;
			argv[n++] = "--follow-ms";
			argv[n++] = "20";
		} else {
			argv[n++] = "--ckpt-dir";
			argv[n++] = c->dir;
		}
		while (extra && *extra && n < 31)
			argv[n++] = *extra++;
		argv[n] = NULL;
		execv(c->be_ps, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	out = fdopen(fds[0], "r");
	ASSERT(out);
	while (fgets(line, sizeof(line), out)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "listening ", 10))
			snprintf(s->addr, sizeof(s->addr), "%.127s", line + 10);
		else if (!strcmp(line, "ready"))
			break;
	}
	fclose(out);
	if (!s->addr[0])
		TEST_FAIL("be-ps server %u did not start", index);
}

void pc_server_stop(struct pc *c, struct pc_server *s)
{
	pid_t r;
	int st;

	ASSERT_OK(kill(s->pid, SIGTERM));
	/* The server closes its sockets cleanly before it exits, and waits
	 * for the client's answers: the client goes on progressing, as a
	 * live one does. */
	if (c->w) {
		uint64_t start = be__now_ns();

		while ((r = waitpid(s->pid, &st, WNOHANG)) == 0) {
			ASSERT_OK(be_worker_wait(c->w, 1));
			if (be__now_ns() - start > 60000000000ull)
				TEST_FAIL("hang: be-ps server %u did not stop in 60 s", s->index);
		}
	} else {
		r = waitpid(s->pid, &st, 0);
	}
	ASSERT_EQ(r, s->pid);
	ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	s->pid = 0;
}

void pc_server_kill(struct pc_server *s)
{
	int st;

	ASSERT_OK(kill(s->pid, SIGKILL));
	ASSERT_EQ(waitpid(s->pid, &st, 0), s->pid);
	s->pid = 0;
}

long pc_server_rss_kb(const struct pc_server *s)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)s->pid);
	f = fopen(path, "r");
	ASSERT(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void pc_record(struct be_rpc_record *r, const char *service, const struct pc_server *s,
		      uint64_t epoch)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->service, sizeof(r->service), "%s", service);
	snprintf(r->replica, sizeof(r->replica), "%s", s->name);
	r->shard_hi = UINT32_MAX;
	r->epoch = epoch;
	r->naddrs = 1;
	snprintf(r->addrs[0], sizeof(r->addrs[0]), "%s", s->addr);
}

void pc_announce(struct pc *c, const struct pc_server *s, uint64_t epoch)
{
	struct be_rpc_record r;
	char svc[BE_RPC_NAME_MAX];

	snprintf(svc, sizeof(svc), "be.ps.%u", s->index);
	pc_record(&r, svc, s, epoch);
	ASSERT_OK(be_rpc_naming_put(c->naming, &r));
	if (s->replica)
		return;
	snprintf(svc, sizeof(svc), "be.ps.%u.primary", s->index);
	pc_record(&r, svc, s, epoch);
	ASSERT_OK(be_rpc_naming_put(c->naming, &r));
}

void pc_client_start(struct pc *c, struct pc_server *servers, unsigned int n)
{
	struct be_config cfg;
	unsigned int i;

	be_config_init(&cfg);
	cfg.keepalive_ms = 500;
	cfg.conn_timeout_ms = 20000;
	ASSERT_OK(be_ctx_create(&cfg, &c->ctx));
	ASSERT_OK(be_worker_create(c->ctx, &c->w));
	ASSERT_OK(be_rpc_create(c->w, NULL, &c->rpc));
	ASSERT_OK(be_rpc_naming_create(&c->naming));
	for (i = 0; i < n; i++)
		pc_announce(c, &servers[i], 1);
	ASSERT_OK(be_ps_create(c->rpc, c->config, c->naming, "be.ps", &c->ps));
}

void pc_client_stop(struct pc *c)
{
	be_ps_destroy(c->ps);
	be_rpc_destroy(c->rpc);
	be_rpc_naming_destroy(c->naming);
	be_worker_destroy(c->w);
	c->w = NULL;
	be_ctx_destroy(c->ctx);
}

struct be_rpc_chan *pc_chan(struct pc *c, const struct pc_server *s)
{
	struct be_rpc_chan *ch;

	ASSERT_OK(be_rpc_chan_open(c->rpc, s->addr, &ch));
	return ch;
}

void pc_fini(struct pc *c)
{
	pt_rmdir(c->dir);
}

static void pc_fetched(int status, const struct be_ps_result *res, void *arg)
{
	struct pc_fetch_slot *q = arg;
	struct pc_fetches *f = q->f;

	q->busy = 0;
	f->done++;
	if (status) {
		f->failed++;
		f->last_err = status;
		return;
	}
	if (f->check)
		f->check(q, f->nkey);
}

void pc_fetches_fill(struct pc_fetches *f)
{
	struct be_ps_fetch_opts fo = { .timeout_us = 5000000, .flags = f->flags };
	struct be_ps_slice sl;
	unsigned int i, j;

	ASSERT(f->nkey && f->nkey <= PC_FETCH_MAX_KEYS);
	for (i = 0; i < PC_FETCH_SLOTS; i++) {
		struct pc_fetch_slot *q = &f->q[i];

		if (q->busy)
			continue;
		q->f = f;
		for (j = 0; j < f->nkey; j++)
			q->k[j] = f->key(f);
		sl = (struct be_ps_slice){ 0, f->nkey, q->k, q->v };
		ASSERT_OK(be_ps_fetch(f->c->ps, &sl, 1, &fo, pc_fetched, q));
		q->busy = 1;
	}
}

void pc_fetches_run(struct pc_fetches *f, uint64_t goal)
{
	while (f->done < goal) {
		pc_fetches_fill(f);
		ASSERT(be_worker_wait(f->c->w, 10) >= 0);
	}
}

void pc_fetches_finish(struct pc_fetches *f)
{
	unsigned int i;

	for (i = 0; i < PC_FETCH_SLOTS; i++)
		while (f->q[i].busy)
			ASSERT(be_worker_wait(f->c->w, 10) >= 0);
	fprintf(stderr, "fetches %llu, failed %llu\n", (unsigned long long)f->done,
		(unsigned long long)f->failed);
	if (f->failed)
		TEST_FAIL("%llu fetches failed, the last with %s", (unsigned long long)f->failed,
			  be_strerror(f->last_err));
}
