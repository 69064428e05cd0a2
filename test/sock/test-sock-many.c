/*
 * Check that 10,000 sockets share one Engine: every socket opens, carries
 * a message each way, and closes; the engine count stays 1 on both sides
 * and the server sees 10,000 accepts and 10,000 closes.
 */
#include <stdlib.h>
#include <string.h>

#include "stest.h"

#define NSOCK 10000

static struct be_sock **socks;
static int echoed;
static struct st_sends sends;
static struct st_fx f;

static void cli_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	ASSERT_UEQ(len, sizeof(int));
	ASSERT_EQ(*(int *)buf, (int)(intptr_t)user);
	echoed++;
	be_free(buf);
}

static bool all_echoed(void *arg)
{
	return echoed == NSOCK && sends.done == NSOCK;
}

static bool all_closed(void *arg)
{
	return f.srv.closed == NSOCK;
}

int main(int argc, char **argv)
{
	struct be_sock_cbs ccbs = { .on_recv = cli_recv };
	struct be_engine_stats es;
	int i;

	st_fx_init(&f, argc, argv);
	socks = calloc(NSOCK, sizeof(*socks));
	f.srv.echo = true;
	st_fx_pair(&f);
	for (i = 0; i < NSOCK; i++) {
		int *m = be_alloc(sizeof(int));

		ASSERT(m);
		*m = i;
		ASSERT_OK(be_sock_connect(f.ws[1], f.addr, &ccbs, (void *)(intptr_t)i, &socks[i]));
		ASSERT_OK(be_sock_send(socks[i], m, sizeof(int), st_send_cb, &sends));
	}
	st_pump(f.ws, 2, all_echoed, NULL);
	ASSERT_EQ(f.srv.accepted, NSOCK);
	ASSERT_EQ(be_worker_engine_count(f.ws[0]), 1);
	ASSERT_EQ(be_worker_engine_count(f.ws[1]), 1);
	st_engine_stats(socks[0], &es);
	st_check_limits(&es);
	ASSERT_EQ(es.sockets, NSOCK);
	ASSERT_GT(es.frames_batched, 0); /* many frames shared SENDs */
	for (i = 0; i < NSOCK; i++)
		be_sock_close(socks[i]);
	st_pump(f.ws, 2, all_closed, NULL);
	{
		static char json[16384];

		/* The server's sockets are detached (the peer closed them); the
		 * engine lives on with none. */
		ASSERT_EQ(be_sock_engine_stats(f.srv.socks[0], &es), -ENOTCONN);
		ASSERT_LT(be_worker_stats_json(f.ws[0], json, sizeof(json)), (int)sizeof(json));
		ASSERT(strstr(json, "\"sockets\":0,"));
		ASSERT(strstr(json, "\"sockets_opened\":10000,"));
	}
	free(socks);
	st_fx_unpair(&f);
	return 0;
}
