/*
 * Check that a message whose send completed with status 0 reaches the
 * peer even when the sender closes right after: over many cycles of
 * connect, send a few small messages (and in some cycles a large one),
 * wait for every send completion, then, in turn: be_sock_close() and
 * be_worker_destroy(); be_worker_destroy() with the socket still open;
 * be_sock_close_notify(), wait for its callback, which must say 0 (the
 * peer answered: it has everything), then be_worker_destroy().
 * The peer, a server in another process, must receive every message, in
 * order and intact, and see on_close(0) on every socket: a clean close
 * delivers everything sent before it, and destroying a worker closes its
 * sockets cleanly. Zero lost messages and zero wrong close reasons is the
 * assertion; the counts are printed either way.
 *
 * --cycles N sets the number of cycles (default 300 on tcp and shm, 200
 * on verbs, where each connect costs more in the Soft-RoCE guest: enough
 * for CI); the soak of thousands of cycles per transport is
 * bench/close-soak.sh, the same test with a large N.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/common.h"
#include "stest.h"

/* Every message starts with this header; the rest is st_fill(seed). */
struct hdr {
	uint32_t cycle;
	uint32_t seq;
	uint32_t last;
};

#define LARGE_LEN (16u << 10) /* above the default eager_max: the large path */

/* What the server counted, sent to the client at the end. */
struct tally {
	uint64_t accepted;
	uint64_t msgs;        /* delivered, in order and intact */
	uint64_t lasts;       /* sockets whose last message arrived */
	uint64_t close_ok;    /* on_close(0) */
	uint64_t close_bad;   /* on_close(anything else) */
	uint64_t close_bad_closed; /* ... of them, in cycles that closed before destroying */
	uint64_t bad_msgs;    /* out of order or corrupt */
	int32_t bad_reason;   /* the first wrong close reason */
	uint32_t bad_cycle;   /* ... and its cycle (or UINT32_MAX: no message came) */
};

static uint32_t seed_of(uint32_t cycle, uint32_t seq)
{
	return cycle * 64u + seq + 1u;
}

/* Message @seq of cycle @cycle: sizes 64 B, then in every fourth cycle a
 * large one, and last a 32 B one (the message of the issue). */
static size_t msg_len(uint32_t cycle, uint32_t seq, uint32_t n)
{
	if (seq == n - 1)
		return 32;
	if (cycle % 4 == 1 && seq == n - 2)
		return LARGE_LEN;
	return 64;
}

static uint32_t msgs_in(uint32_t cycle)
{
	return 2 + cycle % 4;
}

/* ---- server (child process) ---- */

struct ssock {
	uint32_t cycle;
	uint32_t next_seq;
	bool got_last;
};

static struct tally tl;

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	struct ssock *ss = calloc(1, sizeof(*ss));

	ASSERT(ss);
	ss->cycle = UINT32_MAX;
	be_sock_set_user(s, ss);
	tl.accepted++;
	return 0;
}

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct ssock *ss = user;
	struct hdr h;

	if (len < sizeof(h)) {
		tl.bad_msgs++;
		be_free(buf);
		return;
	}
	memcpy(&h, buf, sizeof(h));
	if (ss->cycle == UINT32_MAX)
		ss->cycle = h.cycle;
	if (h.cycle != ss->cycle || h.seq != ss->next_seq || ss->got_last ||
	    len != msg_len(h.cycle, h.seq, msgs_in(h.cycle)) ||
	    !st_check((char *)buf + sizeof(h), len - sizeof(h), seed_of(h.cycle, h.seq))) {
		tl.bad_msgs++;
	} else {
		tl.msgs++;
		ss->next_seq++;
		if (h.last) {
			ss->got_last = true;
			tl.lasts++;
		}
	}
	be_free(buf);
}

static void srv_close(struct be_sock *s, int reason, void *user)
{
	struct ssock *ss = user;

	if (reason == 0) {
		tl.close_ok++;
	} else {
		if (!tl.close_bad) {
			tl.bad_reason = reason;
			tl.bad_cycle = ss->cycle;
		}
		tl.close_bad++;
		if (ss->cycle % 3 != 1)
			tl.close_bad_closed++;
	}
	free(ss);
	be_sock_close(s);
}

static const struct be_sock_cbs srv_cbs = {
	.on_recv = srv_recv,
	.on_close = srv_close,
	.on_accept = srv_accept,
};

/* Serve until the client says how many sockets it opened (on @ctl) and
 * all of them closed; then write the tally to @res. */
static void server(struct st *t, int addr_fd, int ctl, int res)
{
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];
	uint64_t expect = UINT64_MAX, v = 0, deadline = 0;
	size_t got = 0;

	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_listen(w, st_listen_addr(t), &srv_cbs, NULL, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_EQ(write(addr_fd, addr, strlen(addr)), (ssize_t)strlen(addr));
	close(addr_fd);
	ASSERT_EQ(fcntl(ctl, F_SETFL, O_NONBLOCK), 0);
	/* Once the client is done, sockets it opened that never arrived or
	 * never closed are waited for 30 s (then the tally tells). */
	while (expect == UINT64_MAX ||
	       (tl.close_ok + tl.close_bad < expect && be__now_ns() < deadline)) {
		ASSERT_OK(be_worker_wait(w, 1));
		if (got < sizeof(v)) {
			ssize_t n = read(ctl, (char *)&v + got, sizeof(v) - got);

			if (n > 0)
				got += (size_t)n;
			else if (n == 0)
				TEST_FAIL("client went away");
			if (got == sizeof(v)) {
				expect = v;
				deadline = be__now_ns() + 30000000000ull;
			}
		}
	}
	ASSERT_EQ(write(res, &tl, sizeof(tl)), (ssize_t)sizeof(tl));
	be_listener_close(l);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	_exit(0);
}

/* ---- client ---- */

struct csend {
	int done, ok;
	int last_err;
};

static void cli_send_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	struct csend *c = arg;

	c->done++;
	if (status == 0)
		c->ok++;
	else
		c->last_err = status;
	be_free(buf);
}

static int cli_closed, cli_reason;
static void cli_close(struct be_sock *s, int reason, void *user)
{
	cli_closed++;
	cli_reason = reason;
}

static int want_done;
static int notified, notify_status;

static void cli_close_done(int status, void *arg)
{
	notified++;
	notify_status = status;
}

static bool close_done(void *arg)
{
	return notified;
}

static bool sends_done(void *arg)
{
	struct csend *c = arg;

	if (cli_closed)
		TEST_FAIL("client socket closed: %s", be_strerror(cli_reason));
	return c->done == want_done;
}

static void *make_msg(uint32_t cycle, uint32_t seq, uint32_t n, size_t *len)
{
	struct hdr h = { .cycle = cycle, .seq = seq, .last = seq == n - 1 };
	uint8_t *p;

	*len = msg_len(cycle, seq, n);
	p = be_alloc(*len);
	ASSERT(p);
	memcpy(p, &h, sizeof(h));
	st_fill(p + sizeof(h), *len - sizeof(h), seed_of(cycle, seq));
	return p;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_close = cli_close };
	int addr_p[2], ctl_p[2], res_p[2], i, status;
	uint32_t cycles = 0, cycle, seq;
	uint64_t sent_ok = 0, opened = 0, closed_ok = 0;
	struct tally r;
	struct be_ctx *ctx;
	char addr[160];
	ssize_t n, got = 0;
	struct st t;
	pid_t pid;

	st_init(&t, argc, argv);
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
			cycles = (uint32_t)strtoul(argv[++i], NULL, 0);
	if (!cycles)
		cycles = strcmp(t.transport, "verbs") ? 300 : 200;

	ASSERT_EQ(pipe(addr_p), 0);
	ASSERT_EQ(pipe(ctl_p), 0);
	ASSERT_EQ(pipe(res_p), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(addr_p[0]);
		close(ctl_p[1]);
		close(res_p[0]);
		server(&t, addr_p[1], ctl_p[0], res_p[1]);
	}
	close(addr_p[1]);
	close(ctl_p[0]);
	close(res_p[1]);
	while ((n = read(addr_p[0], addr + got, sizeof(addr) - 1 - (size_t)got)) > 0)
		got += n;
	close(addr_p[0]);
	ASSERT_GT(got, 0);
	addr[got] = '\0';

	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	for (cycle = 0; cycle < cycles; cycle++) {
		uint32_t nm = msgs_in(cycle);
		struct csend cs = { 0 };
		struct be_worker *w;
		struct be_sock *s;

		ASSERT_OK(be_worker_create(ctx, &w));
		ASSERT_OK(be_sock_connect(w, addr, &ccbs, NULL, &s));
		opened++;
		for (seq = 0; seq < nm; seq++) {
			size_t len;
			void *p = make_msg(cycle, seq, nm, &len);

			ASSERT_OK(be_sock_send(s, p, len, cli_send_cb, &cs));
		}
		want_done = (int)nm;
		st_pump(&w, 1, sends_done, &cs);
		if (cs.ok != (int)nm)
			TEST_FAIL("cycle %u: %d of %u sends failed (%s)", cycle, (int)nm - cs.ok,
				  nm, be_strerror(cs.last_err));
		sent_ok += (uint64_t)cs.ok;
		/* A third of the cycles close first, a third leave the socket
		 * open for be_worker_destroy() to close, a third wait for the
		 * close to be done. */
		if (cycle % 3 == 0) {
			be_sock_close(s);
		} else if (cycle % 3 == 2) {
			notified = 0;
			ASSERT_OK(be_sock_close_notify(s, cli_close_done, NULL));
			st_pump(&w, 1, close_done, NULL);
			if (notify_status)
				TEST_FAIL("cycle %u: close done with %s", cycle,
					  be_strerror(notify_status));
			closed_ok++;
		}
		be_worker_destroy(w);
		if ((cycle + 1) % 1000 == 0)
			fprintf(stderr, "%u cycles\n", cycle + 1); /* a long soak's progress */
		if (cycle % 3 == 2)
			ASSERT_EQ(notified, 1); /* once, destroying runs it no more */
	}
	be_ctx_destroy(ctx);

	ASSERT_EQ(write(ctl_p[1], &opened, sizeof(opened)), (ssize_t)sizeof(opened));
	got = 0;
	while (got < (ssize_t)sizeof(r) &&
	       (n = read(res_p[0], (char *)&r + got, sizeof(r) - (size_t)got)) > 0)
		got += n;
	ASSERT_EQ(got, (ssize_t)sizeof(r));
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	printf("%s: %u cycles, %" PRIu64 " sockets accepted; %" PRIu64
	       " messages sent (completed 0), %" PRIu64 " delivered, %" PRIu64
	       " lost; last message lost in %" PRIu64 " cycles; on_close(0) %" PRIu64
	       ", other %" PRIu64 " (%" PRIu64 " after a close); %" PRIu64
	       " close_notify callbacks said 0\n",
	       t.transport, cycles, r.accepted, sent_ok, r.msgs, sent_ok - r.msgs,
	       (uint64_t)cycles - r.lasts, r.close_ok, r.close_bad, r.close_bad_closed,
	       closed_ok);
	if (r.close_bad)
		printf("first wrong close reason: %s (cycle %d)\n", be_strerror(r.bad_reason),
		       r.bad_cycle == UINT32_MAX ? -1 : (int)r.bad_cycle);
	fflush(stdout);
	ASSERT_UEQ(r.accepted, opened);
	ASSERT_UEQ(r.bad_msgs, 0);
	ASSERT_UEQ(r.msgs, sent_ok);
	ASSERT_UEQ(r.lasts, cycles);
	ASSERT_UEQ(r.close_bad, 0);
	ASSERT_UEQ(r.close_ok, opened);
	return 0;
}
