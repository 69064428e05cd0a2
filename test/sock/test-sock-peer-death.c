/*
 * Check that a dead peer is detected and that every pending operation
 * completes exactly once: a peer killed with SIGKILL (the transport sees
 * the connection drop) and a peer stopped with SIGSTOP (it stops
 * answering; keepalives detect it within the connection timeout, and
 * the error is BE_ECONNFAULT). The socket gets on_close with the error:
 * -ECONNRESET for the kill on tcp and shm, which see the hang-up.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fork.h"

#define NMSG 60

struct one {
	int calls, status;
};

static struct one ones[NMSG];
static int ndone, echoed, closed, close_reason;

static void one_cb(struct be_sock *s, void *buf, int status, void *arg)
{
	struct one *o = arg;

	ASSERT_EQ(o->calls, 0);
	o->calls = 1;
	o->status = status;
	ndone++;
	be_free(buf);
}

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	echoed++;
	be_free(buf);
}

static void cli_close(struct be_sock *s, int reason, void *user)
{
	ASSERT_EQ(closed, 0);
	closed++;
	close_reason = reason;
}

static bool got_echo(void *arg)
{
	if (closed)
		TEST_FAIL("socket closed before the peer was signalled: %s",
			  be_strerror(close_reason));
	return echoed >= 1;
}

static bool all_done(void *arg)
{
	return ndone == NMSG && closed == 1;
}

static void run(struct st *t, struct st_child *cp, int sig)
{
	struct be_sock_cbs cbs = { .on_recv = cli_recv, .on_close = cli_close };
	struct be_worker *w;
	struct be_ctx *ctx;
	struct be_sock *s;
	struct st_child c = *cp;
	void *msgs[NMSG];
	int i, failed = 0;

	memset(ones, 0, sizeof(ones));
	ndone = echoed = closed = 0;
	close_reason = 0;
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	/* The messages (30 MiB) are made before connecting: made after, on
	 * a loaded machine, they kept this side from progressing for longer
	 * than the connection timeout, and the server, which had accepted
	 * the connection, rightly declared it dead. */
	for (i = 0; i < NMSG; i++)
		msgs[i] = st_msg(i % 4 == 0 ? (size_t)(2u << 20) : 64, (uint32_t)i);
	ASSERT_OK(be_sock_connect(w, c.addr, &cbs, NULL, &s));
	for (i = 0; i < NMSG; i++) {
		size_t len = i % 4 == 0 ? (size_t)(2u << 20) : 64;

		ASSERT_OK(be_sock_send(s, msgs[i], len, one_cb, &ones[i]));
	}
	st_pump(&w, 1, got_echo, NULL);
	kill(c.pid, sig);
	st_pump(&w, 1, all_done, NULL);
	for (i = 0; i < NMSG; i++) {
		ASSERT_EQ(ones[i].calls, 1);
		if (ones[i].status) {
			failed++;
			if (sig == SIGSTOP)
				ASSERT_EQ(ones[i].status, BE_ECONNFAULT);
			else if (strcmp(t->transport, "verbs") != 0)
				ASSERT_EQ(ones[i].status, -ECONNRESET);
		}
	}
	ASSERT_NE(close_reason, 0);
	if (sig == SIGSTOP)
		ASSERT_EQ(close_reason, BE_ECONNFAULT);
	/* tcp and shm see the hang-up: a reset, not a timeout (which would
	 * count as one in the RPC layer's stats). verbs' QP may well time
	 * out first. */
	if (sig == SIGKILL && strcmp(t->transport, "verbs") != 0)
		ASSERT_EQ(close_reason, -ECONNRESET);
	fprintf(stderr, "signal %d: %d of %d sends failed, on_close(%s)\n", sig, failed, NMSG,
		be_strerror(close_reason));
	ASSERT_EQ(be_sock_send(s, NULL, 0, one_cb, &ones[0]), -ENOTCONN);
	be_sock_close(s);
	ASSERT_EQ(be_worker_engine_count(w), 0);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	st_child_kill(&c);
}

int main(int argc, char **argv)
{
	struct st_child c[2];
	struct st t;

	st_init(&t, argc, argv);
	/* A stopped peer is found within conn_timeout_ms; 3 s, not less: a
	 * loaded machine may keep either process from running for a second,
	 * and that is not a dead peer. */
	t.cfg.keepalive_ms = 100;
	t.cfg.conn_timeout_ms = 3000;
	t.cfg.connect_timeout_ms = 20000; /* connecting is slow in the rxe guest */
	t.cfg.frag_size = 64 << 10;
	t.cfg.send_window = 256 << 10;
	/* Both servers are forked before this process touches the library:
	 * forking a process with live RDMA registrations is unsafe. */
	st_child_start(&t, &c[0], st_child_echo);
	st_child_start(&t, &c[1], st_child_echo);
	run(&t, &c[0], SIGKILL);
	run(&t, &c[1], SIGSTOP);
	return 0;
}
