/*
 * etcd_harness.c - start, kill, restart and remove etcd members for tests
 * (see etcd_harness.h).
 *
 * Ports. Each member needs a client and a peer port. The harness asks the
 * kernel for free ones (bind to 127.0.0.1:0) and releases them before
 * etcd binds them, so another process may take one in between; a member
 * that exits during start-up is then started again on new ports, up to
 * three times. A restart reuses the member's ports: etcd binds with
 * SO_REUSEADDR and the data directory names its peers by those URLs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "discovery/etcd.h"
#include "etcd_harness.h"
#include "test.h"

#define EH_START_MS 60000 /* a loaded CI machine can be slow to elect */

struct eh_member {
	pid_t pid;
	int client_port, peer_port;
	char url[64];
};

struct eh {
	int n;
	char dir[256];
	char token[64];
	const char *bin;
	struct eh_member m[EH_MAX_MEMBERS];
};

static long long eh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void eh_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int eh_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	ASSERT(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void eh_spawn(struct eh *h, int i)
{
	struct eh_member *m = &h->m[i];
	char name[16], data[300], log[300], curl_[64], purl[64], cluster[512] = "";
	size_t off = 0;
	int k, fd;
	pid_t parent = getpid();

	for (k = 0; k < h->n; k++)
		off += (size_t)snprintf(cluster + off, sizeof(cluster) - off, "%sm%d=http://127.0.0.1:%d",
					k ? "," : "", k, h->m[k].peer_port);
	snprintf(name, sizeof(name), "m%d", i);
	snprintf(data, sizeof(data), "%s/m%d.data", h->dir, i);
	snprintf(log, sizeof(log), "%s/m%d.log", h->dir, i);
	snprintf(curl_, sizeof(curl_), "http://127.0.0.1:%d", m->client_port);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", m->peer_port);
	snprintf(m->url, sizeof(m->url), "%s", curl_);
	fflush(NULL);
	m->pid = fork();
	ASSERT(m->pid >= 0);
	if (m->pid)
		return;
	/* The member dies with the test, however the test ends. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		_exit(1);
	dup2(fd, 1);
	dup2(fd, 2);
	close(fd);
	execl(h->bin, h->bin, "--name", name, "--data-dir", data, "--listen-client-urls", curl_,
	      "--advertise-client-urls", curl_, "--listen-peer-urls", purl,
	      "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
	      "--initial-cluster-state", "new", "--initial-cluster-token", h->token, "--logger",
	      "zap", "--log-outputs", "stderr", (char *)NULL);
	_exit(127);
}

static size_t eh_body(char *p, size_t size, size_t n, void *arg)
{
	char *b = arg;
	size_t have = strlen(b), take = size * n;

	if (take > 255 - have)
		take = 255 - have;
	memcpy(b + have, p, take);
	b[have + take] = '\0';
	return size * n;
}

/* One GET /health: 1 when the member says it is healthy. */
static int eh_health_once(const struct eh *h, int i)
{
	char url[96], body[256] = "";
	CURL *c = curl_easy_init();
	int ok;

	ASSERT(c);
	snprintf(url, sizeof(url), "%s/health", h->m[i].url);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, eh_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	ok = curl_easy_perform(c) == CURLE_OK && strstr(body, "\"health\":\"true\"");
	curl_easy_cleanup(c);
	return ok;
}

/* Whether member @i still runs (reaps it if not). */
static int eh_alive(struct eh *h, int i)
{
	int st;

	if (h->m[i].pid <= 0)
		return 0;
	if (waitpid(h->m[i].pid, &st, WNOHANG) == h->m[i].pid) {
		h->m[i].pid = 0;
		return 0;
	}
	return 1;
}

int eh_healthy(const struct eh *h, int i, int timeout_ms)
{
	long long until = eh_now_ms() + timeout_ms;

	for (;;) {
		if (eh_health_once(h, i))
			return 1;
		if (eh_now_ms() >= until)
			return 0;
		eh_sleep_ms(100);
	}
}

/* Wait until every member is healthy: 1, or 0 when one exited. */
static int eh_wait_all(struct eh *h)
{
	long long until = eh_now_ms() + EH_START_MS;
	int i;

	for (i = 0; i < h->n; i++) {
		while (!eh_health_once(h, i)) {
			if (!eh_alive(h, i))
				return 0;
			if (eh_now_ms() >= until)
				TEST_FAIL("etcd member %d not healthy after %d ms (logs in %s)", i,
					  EH_START_MS, h->dir);
			eh_sleep_ms(100);
		}
	}
	return 1;
}

static int eh_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

struct eh *eh_start(int members)
{
	struct eh *h = calloc(1, sizeof(*h));
	const char *bin = getenv("BE_ETCD_BIN");
	int i, attempt;

	ASSERT(h && members >= 1 && members <= EH_MAX_MEMBERS);
	h->bin = bin && *bin ? bin : "/usr/bin/etcd";
	if (access(h->bin, X_OK)) {
		printf("etcd not installed (%s): skipped (apt-get install etcd-server)\n", h->bin);
		exit(77);
	}
	ASSERT(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK);
	h->n = members;
	snprintf(h->dir, sizeof(h->dir), "etcd-test-XXXXXX");
	ASSERT(mkdtemp(h->dir));
	signal(SIGPIPE, SIG_IGN);
	for (attempt = 0; attempt < 3; attempt++) {
		snprintf(h->token, sizeof(h->token), "be-%d-%d", (int)getpid(), attempt);
		for (i = 0; i < h->n; i++) {
			h->m[i].client_port = eh_free_port();
			h->m[i].peer_port = eh_free_port();
		}
		for (i = 0; i < h->n; i++)
			eh_spawn(h, i);
		if (eh_wait_all(h))
			return h;
		/* A port was taken under us, most likely: start over. */
		for (i = 0; i < h->n; i++)
			eh_kill9(h, i);
		nftw(h->dir, eh_rm, 16, FTW_DEPTH | FTW_PHYS);
		ASSERT(mkdir(h->dir, 0700) == 0);
	}
	TEST_FAIL("etcd did not start in 3 attempts (logs in %s)", h->dir);
}

const char *eh_url(const struct eh *h, int i)
{
	return h->m[i].url;
}

void eh_kill9(struct eh *h, int i)
{
	if (h->m[i].pid <= 0)
		return;
	kill(h->m[i].pid, SIGKILL);
	waitpid(h->m[i].pid, NULL, 0);
	h->m[i].pid = 0;
}

void eh_signal(struct eh *h, int i, int sig)
{
	ASSERT(h->m[i].pid > 0);
	ASSERT(kill(h->m[i].pid, sig) == 0);
}

void eh_restart(struct eh *h, int i, int wait)
{
	eh_kill9(h, i);
	eh_spawn(h, i);
	if (wait && !eh_healthy(h, i, EH_START_MS))
		TEST_FAIL("etcd member %d not healthy after a restart (logs in %s)", i, h->dir);
}

void eh_client_close(struct be_etcd *c)
{
	struct be_etcd_stats st;

	be__etcd_stats(c, &st);
	ASSERT_EQ(st.refused, 0);
	be__etcd_destroy(c);
}

void eh_stop(struct eh *h)
{
	int i;

	for (i = 0; i < h->n; i++)
		eh_kill9(h, i);
	nftw(h->dir, eh_rm, 16, FTW_DEPTH | FTW_PHYS);
	free(h);
}

struct be_etcd *eh_client(const struct eh *h, int i)
{
	struct be_etcd_opts o;
	struct be_etcd *c;

	be__etcd_opts_default(&o);
	o.endpoints = eh_url(h, i);
	/* A loaded CI machine can take seconds to fsync: a test asserts
	 * on what a call returns, never on how long it took. */
	o.request_timeout_ms = EH_REQUEST_MS;
	ASSERT_OK(be__etcd_create(&o, &c));
	return c;
}

int eh_watch_end(struct be_etcd_watch *w)
{
	long long until = eh_now_ms() + EH_WAIT_S * 1000;
	int rc;

	while (!(rc = be__etcd_watch_run(w, 200)))
		if (eh_now_ms() >= until)
			TEST_FAIL("watch still open after %d s", EH_WAIT_S);
	return rc;
}

void eh_count_events(void *arg, const struct be_etcd_event *ev, size_t n)
{
	*(int *)arg += (int)n;
}

struct be_etcd_watch *eh_watch_next(struct be_etcd *c, const char *prefix,
				    struct be_etcd_watch_opts *o, int *n)
{
	struct be_etcd_watch *w;
	struct be_etcd_range r;

	ASSERT_OK(be__etcd_get(c, prefix, strlen(prefix), BE_ETCD_PREFIX, 0, 0, &r));
	o->start_revision = r.revision + 1;
	be__etcd_range_free(&r);
	ASSERT_OK(be__etcd_watch_create(c, prefix, strlen(prefix), BE_ETCD_PREFIX, o,
					eh_count_events, n, &w));
	return w;
}

void eh_watch_until(struct be_etcd_watch *w, const int *n, int want)
{
	long long until = eh_now_ms() + EH_WAIT_S * 1000;
	int rc;

	while (*n < want) {
		rc = be__etcd_watch_run(w, 200);
		if (rc)
			TEST_FAIL("watch ended: %d (%s)", rc, be__etcd_watch_error(w));
		if (eh_now_ms() >= until)
			TEST_FAIL("%d of %d events after %d s", *n, want, EH_WAIT_S);
	}
}
