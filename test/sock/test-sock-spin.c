/*
 * Check that be_worker_wait()'s spin adapts: it starts at spin_us
 * (be_worker_stats_json() reports it), halves after a wait whose spin
 * found nothing, is not spent at all right after a sleep that found
 * nothing (an idle worker's tick), and never exceeds spin_us while a
 * ping-pong runs; the ping-pong completes whatever the spin is.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define ROUNDS 200

static uint64_t spin_of(struct be_worker *w)
{
	char json[4096];
	const char *p;

	ASSERT_GT(be_worker_stats_json(w, json, sizeof(json)), 0);
	p = strstr(json, "\"spin_ns\":");
	ASSERT(p);
	return strtoull(p + strlen("\"spin_ns\":"), NULL, 10);
}

static struct be_sock *cli;
static struct st_sends sends;
static int answers;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	be_free(buf);
	answers++;
}

static const struct be_sock_cbs cli_cbs = { .on_recv = cli_recv };

int main(int argc, char **argv)
{
	struct st_server srv = { .echo = true };
	struct be_listener *l;
	struct be_worker *ws[2];
	struct be_ctx *ctx;
	struct st t;
	char addr[160];
	int i;

	st_init(&t, argc, argv);
	t.cfg.spin_us = 50;
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	ASSERT_EQ(spin_of(ws[1]), 50000);

	/* No traffic exists that a spin could find: the first idle wait
	 * spins for nothing and halves the spin; the next ones follow a
	 * sleep that found nothing and do not spin, so it stays. */
	ASSERT_EQ(be_worker_wait(ws[1], 1), 0);
	ASSERT_EQ(spin_of(ws[1]), 25000);
	for (i = 0; i < 4; i++)
		ASSERT_EQ(be_worker_wait(ws[1], 1), 0);
	ASSERT_EQ(spin_of(ws[1]), 25000);

	/* A ping-pong, both workers waiting adaptively: every answer comes,
	 * the spin stays within spin_us. */
	ASSERT_OK(be_sock_connect(ws[1], addr, &cli_cbs, NULL, &cli));
	for (i = 0; i < ROUNDS; i++) {
		int want = answers + 1;

		ASSERT_OK(be_sock_send(cli, st_msg(64, (uint32_t)i), 64, st_send_cb, &sends));
		while (answers < want) {
			ASSERT_GE(be_worker_wait(ws[0], 1), 0);
			ASSERT_GE(be_worker_wait(ws[1], 1), 0);
			ASSERT_LE(spin_of(ws[0]), 50000);
			ASSERT_LE(spin_of(ws[1]), 50000);
		}
	}
	ASSERT_EQ(answers, ROUNDS);
	ASSERT_EQ(sends.other, 0);
	be_sock_close(cli);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
