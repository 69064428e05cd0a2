/*
 * perf_echo.c - the echo ping-pong that the one-process tests (cost,
 * fanout) run between their two workers: the server sends every message
 * back in the buffer it arrived in; the client counts the answers.
 * Counters in struct perf_echo (perf.h), one for each side.
 */
#include <errno.h>
#include <string.h>

#include <be/alloc.h>
#include <be/sock.h>

#include "perf.h"

void perf_echo_sent(struct be_sock *s, void *buf, int status, void *arg)
{
	struct perf_echo *c = arg;

	(void)s;
	if (status)
		c->errors++;
	be_free(buf);
}

void perf_echo_serve(struct be_sock *s, void *buf, size_t len, void *user)
{
	if (be_sock_send(s, buf, len, perf_echo_sent, user))
		be_free(buf);
}

void perf_echo_answer(struct be_sock *s, void *buf, size_t len, void *user)
{
	(void)s;
	(void)len;
	((struct perf_echo *)user)->answered++;
	be_free(buf);
}

int perf_echo_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	(void)l;
	be_sock_set_user(s, user);
	return 0;
}

int perf_echo_send(struct be_sock *s, size_t size, struct perf_echo *c)
{
	char *b = be_alloc(size ? size : 1);
	int rc;

	if (!b)
		return -ENOMEM;
	memset(b, 0x5a, size);
	rc = be_sock_send(s, b, size, perf_echo_sent, c);
	if (rc)
		be_free(b);
	return rc;
}

int perf_echo_wait(struct be_worker *cw, struct be_worker *sw, struct perf_echo *c,
		   uint64_t want, uint64_t start_ns, uint64_t timeout_s)
{
	uint64_t spins = 0;

	while (c->answered < want) {
		be_worker_progress(cw);
		be_worker_progress(sw);
		if (c->errors || c->closed)
			return -EIO;
		/* The clock now and then: this loop is what cost measures. */
		if (++spins % 4096 == 0 && perf_now_ns() - start_ns > timeout_s * 1000000000ull)
			return -ETIMEDOUT;
	}
	return 0;
}

void perf_echo_destroy(struct be_worker *a, struct be_worker *b)
{
	struct be_worker *any = a ? a : b;
	uint64_t end;
	int ra, rb;

	if (!any)
		return;
	/* be_worker_shutdown(w, 0) runs one progress; past the configured
	 * close_timeout_ms the destroys below disconnect what is left. */
	end = perf_now_ns() +
	      (uint64_t)be_ctx_config(be_worker_ctx(any))->close_timeout_ms * 1000000ull;
	do {
		ra = a ? be_worker_shutdown(a, 0) : 0;
		rb = b ? be_worker_shutdown(b, 0) : 0;
	} while ((ra == -ETIMEDOUT || rb == -ETIMEDOUT) && perf_now_ns() < end);
	if (b)
		be_worker_destroy(b);
	if (a)
		be_worker_destroy(a);
}

int perf_duo_open(struct perf_duo *d, const struct be_config *cfg)
{
	int rc;

	memset(d, 0, sizeof(*d));
	rc = be_ctx_create(cfg, &d->ctx);
	if (!rc)
		rc = be_worker_create(d->ctx, &d->cw);
	if (!rc)
		rc = be_worker_create(d->ctx, &d->sw);
	return rc;
}

void perf_duo_close(struct perf_duo *d)
{
	perf_echo_destroy(d->cw, d->sw);
	if (d->ctx)
		be_ctx_destroy(d->ctx);
	memset(d, 0, sizeof(*d));
}
