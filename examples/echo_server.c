/*
 * echo_server.c - the smallest be server: it sends every message back.
 *
 *   cc echo_server.c $(pkg-config --cflags --libs be) -o echo_server
 *   ./echo_server [ADDR]
 *
 * ADDR is tcp://IP:PORT (default tcp://127.0.0.1:7000; port 0 picks a free
 * one), shm://NAME (processes on this host) or verbs://IP:PORT (an RDMA
 * device's address). The server prints the address it listens on, then
 * serves until SIGINT or SIGTERM.
 *
 * One worker, run on this thread: be_worker_wait() runs the callbacks
 * below and sleeps when there is nothing to do.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <be/be.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The echo has been sent: its buffer is ours again. */
static void echo_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	(void)s;
	(void)arg;
	if (status)
		fprintf(stderr, "echo_server: send: %s\n", be_strerror(status));
	be_free(buf);
}

/* A message arrived; @buf is ours. Lend it to the echo until echo_sent. */
static void on_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int rc;

	(void)user;
	rc = be_sock_send(s, buf, len, echo_sent, NULL);
	if (rc) {
		fprintf(stderr, "echo_server: send: %s\n", be_strerror(rc));
		be_free(buf);
	}
}

/* A client opened a Socket to us: accept it. */
static int on_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	(void)l;
	(void)s;
	(void)user;
	printf("client connected\n");
	return 0;
}

/* The client closed its Socket (or went away): release ours. */
static void on_close(struct be_sock *s, int reason, void *user)
{
	(void)user;
	printf("client left (%s)\n", reason ? be_strerror(reason) : "closed");
	be_sock_close(s);
}

int main(int argc, char **argv)
{
	const char *addr = argc > 1 ? argv[1] : "tcp://127.0.0.1:7000";
	struct be_sock_cbs cbs = { .on_recv = on_recv, .on_close = on_close,
				   .on_accept = on_accept };
	struct sigaction sa;
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_listener *l;
	char bound[256];
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	rc = be_ctx_create(NULL, &ctx); /* NULL: defaults + BE_* environment */
	if (rc) {
		fprintf(stderr, "echo_server: be_ctx_create: %s\n", be_strerror(rc));
		return 1;
	}
	rc = be_worker_create(ctx, &w);
	if (rc) {
		fprintf(stderr, "echo_server: be_worker_create: %s\n", be_strerror(rc));
		be_ctx_destroy(ctx);
		return 1;
	}
	rc = be_listen(w, addr, &cbs, NULL, &l);
	if (!rc)
		rc = be_listener_addr(l, bound, sizeof(bound));
	if (rc) {
		fprintf(stderr, "echo_server: listen on %s: %s\n", addr, be_strerror(rc));
		be_worker_destroy(w);
		be_ctx_destroy(ctx);
		return 1;
	}
	printf("listening on %s\n", bound);

	while (!stop) {
		rc = be_worker_wait(w, 200); /* ms: look at @stop this often */
		if (rc < 0) {
			fprintf(stderr, "echo_server: %s\n", be_strerror(rc));
			break;
		}
	}
	be_worker_destroy(w); /* closes the listener and every Socket */
	be_ctx_destroy(ctx);
	return rc < 0;
}
