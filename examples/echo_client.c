/*
 * echo_client.c - sends messages to echo_server and checks the echoes.
 *
 *   cc echo_client.c $(pkg-config --cflags --libs be) -o echo_client
 *   ./echo_client [ADDR [MESSAGE...]]
 *
 * ADDR as for echo_server (default tcp://127.0.0.1:7000); MESSAGE default
 * "hello". Each message goes out in a buffer from be_alloc() and the
 * client waits for its echo before sending the next. Exits 0 when every
 * echo came back intact, 1 otherwise (connection refused, closed, a
 * wrong echo, or no answer within 10 s).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <be/be.h>

struct client {
	const char *want;  /* the message whose echo we wait for */
	size_t want_len;
	int answered;      /* its echo arrived */
	int failed;        /* a wrong echo, or the Socket closed */
};

/* The send is done: the buffer is ours again. */
static void sent(struct be_sock *s, void *buf, int status, void *arg)
{
	(void)s;
	(void)arg;
	if (status)
		fprintf(stderr, "echo_client: send: %s\n", be_strerror(status));
	be_free(buf);
}

/* The echo arrived in @buf, which is ours: check it, print it, free it. */
static void on_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct client *c = user;

	(void)s;
	if (len != c->want_len || memcmp(buf, c->want, len)) {
		fprintf(stderr, "echo_client: wrong echo (%zu bytes, sent %zu)\n", len,
			c->want_len);
		c->failed = 1;
	} else if (len <= 60) {
		printf("echo: %.*s\n", (int)len, (const char *)buf);
	} else {
		printf("echo: %.40s... (%zu bytes)\n", (const char *)buf, len);
	}
	c->answered = 1;
	be_free(buf);
}

/* The Socket stopped working: refused, or the server went away. */
static void on_close(struct be_sock *s, int reason, void *user)
{
	struct client *c = user;

	(void)s;
	fprintf(stderr, "echo_client: connection closed: %s\n",
		reason ? be_strerror(reason) : "by the server");
	c->failed = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Send @msg on @s and run @w until its echo arrives. Returns 0 or -1. */
static int echo(struct be_worker *w, struct be_sock *s, struct client *c, const char *msg)
{
	size_t len = strlen(msg);
	double deadline = now_s() + 10;
	void *buf = be_alloc(len);
	int rc;

	if (!buf) {
		fprintf(stderr, "echo_client: be_alloc: %s\n", be_alloc_last_error());
		return -1;
	}
	memcpy(buf, msg, len);
	c->want = msg;
	c->want_len = len;
	c->answered = 0;
	rc = be_sock_send(s, buf, len, sent, NULL); /* lends buf until sent() */
	if (rc) {
		fprintf(stderr, "echo_client: send: %s\n", be_strerror(rc));
		be_free(buf);
		return -1;
	}
	while (!c->answered && !c->failed) {
		if (now_s() > deadline) {
			fprintf(stderr, "echo_client: no echo within 10 s\n");
			return -1;
		}
		rc = be_worker_wait(w, 100);
		if (rc < 0) {
			fprintf(stderr, "echo_client: %s\n", be_strerror(rc));
			return -1;
		}
	}
	return c->failed ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *addr = argc > 1 ? argv[1] : "tcp://127.0.0.1:7000";
	struct be_sock_cbs cbs = { .on_recv = on_recv, .on_close = on_close };
	struct client c = { 0 };
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_sock *s;
	int i, rc, failed = 0;

	rc = be_ctx_create(NULL, &ctx);
	if (rc) {
		fprintf(stderr, "echo_client: be_ctx_create: %s\n", be_strerror(rc));
		return 1;
	}
	rc = be_worker_create(ctx, &w);
	if (rc) {
		fprintf(stderr, "echo_client: be_worker_create: %s\n", be_strerror(rc));
		be_ctx_destroy(ctx);
		return 1;
	}
	/* Returns at once; sends queue until the connection is up. */
	rc = be_sock_connect(w, addr, &cbs, &c, &s);
	if (rc) {
		fprintf(stderr, "echo_client: connect to %s: %s\n", addr, be_strerror(rc));
		failed = 1;
	} else if (argc <= 2) {
		failed = echo(w, s, &c, "hello") != 0;
	} else {
		for (i = 2; i < argc && !failed; i++)
			failed = echo(w, s, &c, argv[i]) != 0;
	}
	if (!rc)
		be_sock_close(s);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	return failed;
}
