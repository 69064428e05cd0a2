/*
 * perf_echo.c - the echo ping-pong that the one-process tests (cost,
 * fanout) run between their two workers: the server sends every message
 * back in the buffer it arrived in; the client counts the answers.
 * Counters in struct perf_echo (perf.h), one for each side.
 */
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
