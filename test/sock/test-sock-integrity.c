/*
 * Check that messages of random sizes from 0 B to 64 MiB, sent on many
 * sockets sharing one Engine, arrive intact and in order per socket, and
 * that the counters prove the controls held: credits in use never above
 * the grant (both directions) and bytes in flight never above the send
 * window. A small window and few credits make both limits bite.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define NSOCK 16
#define NMSG 24 /* per socket */

static struct be_sock *socks[NSOCK];
static size_t sizes[NSOCK][NMSG];
static int got[NSOCK], bad;
static struct st_sends sends;
static struct st_fx f;

static int sock_index(struct be_sock *s)
{
	return (int)(intptr_t)be_sock_user(s);
}

static void srv_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int i = (int)(intptr_t)user;

	(void)i;
	be_free(buf);
}

/* The server checks: its sockets are accepted in connect order, and the
 * first message of each names the client socket index. */
static int srv_idx_of(struct be_sock *s)
{
	int i;

	for (i = 0; i < f.srv.nsocks; i++)
		if (f.srv.socks[i] == s)
			return i;
	return -1;
}

static void check_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	int i = srv_idx_of(s);

	ASSERT_GE(i, 0);
	ASSERT_LT(got[i], NMSG);
	ASSERT_UEQ(len, sizes[i][got[i]]);
	if (!st_check(buf, len, (uint32_t)(i * 1000 + got[i])))
		bad++;
	got[i]++;
	f.srv.recvd++;
	be_free(buf);
}

static int srv_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	return st_server_cbs.on_accept(l, s, user);
}

static bool all_done(void *arg)
{
	return f.srv.recvd == NSOCK * NMSG && sends.done == NSOCK * NMSG;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs scbs = { .on_recv = check_recv, .on_accept = srv_accept };
	struct be_sock_cbs ccbs = { .on_recv = srv_recv };
	struct be_engine_stats ec, es;
	int i, j;

	st_fx_init(&f, argc, argv);
	f.t.cfg.send_window = 512 << 10;
	f.t.cfg.credits = 8;
	f.t.cfg.frag_size = 64 << 10;
	f.scbs = &scbs;
	f.suser = &f.srv;
	st_fx_pair(&f);

	srand(42);
	for (i = 0; i < NSOCK; i++) {
		ASSERT_OK(be_sock_connect(f.ws[1], f.addr, &ccbs, (void *)(intptr_t)i, &socks[i]));
		ASSERT_EQ(sock_index(socks[i]), i);
		for (j = 0; j < NMSG; j++) {
			int r = rand() % 100;

			if (i == 0 && j == 0)
				sizes[i][j] = 64u << 20; /* the largest once */
			else if (r < 60)
				sizes[i][j] = (size_t)(rand() % 5000); /* around the eager limit */
			else if (r < 97)
				sizes[i][j] = (size_t)(rand() % (1 << 20));
			else
				sizes[i][j] = (size_t)(rand() % (8 << 20));
		}
	}
	/* Interleave the sends across sockets. */
	for (j = 0; j < NMSG; j++)
		for (i = 0; i < NSOCK; i++) {
			void *m = st_msg(sizes[i][j], (uint32_t)(i * 1000 + j));

			ASSERT_OK(be_sock_send(socks[i], m, sizes[i][j], st_send_cb, &sends));
		}
	st_pump(f.ws, 2, all_done, NULL);
	ASSERT_EQ(bad, 0);
	ASSERT_EQ(sends.ok, NSOCK * NMSG);
	ASSERT_EQ(f.srv.accepted, NSOCK);
	ASSERT_EQ(be_worker_engine_count(f.ws[0]), 1);
	ASSERT_EQ(be_worker_engine_count(f.ws[1]), 1);

	st_engine_stats(socks[0], &ec);
	st_engine_stats(f.srv.socks[0], &es);
	st_check_limits(&ec);
	st_check_limits(&es);
	ASSERT_EQ(ec.credits_granted, 8);
	ASSERT_EQ(es.credits_peer_max, 8);
	ASSERT_EQ(ec.msgs_sent, NSOCK * NMSG);
	ASSERT_EQ(es.msgs_recv, NSOCK * NMSG);
	ASSERT_EQ(ec.eager_sent + ec.large_sent, NSOCK * NMSG);
	ASSERT_EQ(es.eager_recv + es.large_recv, NSOCK * NMSG);
	ASSERT_GT(ec.fragments, 1024); /* 64 MiB in 64 KiB fragments at least */
	/* With 8 credits and a 512 KiB window, both controls held traffic. */
	ASSERT_GT(ec.window_stalls, 0);
	ASSERT_EQ(ec.max_credits_in_use <= 8, 1);
	fprintf(stderr, "client: credits max %" PRIu64 "/%" PRIu64 ", stalls %" PRIu64
		", in flight max %" PRIu64 "/%" PRIu64 ", window stalls %" PRIu64 "\n",
		ec.max_credits_in_use, ec.credits_granted, ec.credit_stalls,
		ec.max_bytes_in_flight, ec.send_window, ec.window_stalls);

	for (i = 0; i < NSOCK; i++)
		be_sock_close(socks[i]);
	st_fx_unpair(&f);
	return 0;
}
