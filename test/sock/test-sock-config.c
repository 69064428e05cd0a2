/*
 * Check that the defaults send a parameter-server request (4,128 bytes:
 * a 4 KiB payload with its headers) eagerly, and that every setting the
 * library clamps is said in the log, once: eager_max 8192 with 8 KiB
 * receive buffers becomes 8176; sq_depth beyond the device's limit (4096
 * WRs on tcp and shm) is clamped when the device opens (once per device) and Engines then
 * connect with the clamped depth; a setting nobody clamps logs nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "stest.h"

#define REQ_LEN 4128 /* 512 keys x 8 B + a 32-byte RPC header */

static char logged[16][256];
static int nlogged;

static void log_fn(int level, const char *msg)
{
	if (level <= 2 && strstr(msg, "clamped") && nlogged < 16)
		snprintf(logged[nlogged++], sizeof(logged[0]), "%s", msg);
}

/* What was logged, on stderr: a failed check then says why. */
static void show_logged(void)
{
	int i;

	for (i = 0; i < nlogged; i++)
		fprintf(stderr, "logged: %s\n", logged[i]);
}

static int count_logged(const char *what)
{
	int i, n = 0;

	for (i = 0; i < nlogged; i++)
		n += strstr(logged[i], what) != NULL;
	return n;
}

static struct st_sends sends;

static bool got_one(void *arg)
{
	return ((struct st_server *)arg)->recvd >= 1 && sends.done >= 1;
}

int main(int argc, char **argv)
{
	struct be_engine_stats es;
	struct st_server srv = { 0 };
	struct be_listener *l;
	struct be_worker *ws[2];
	struct be_sock *s;
	struct be_ctx *ctx;
	struct st t;
	char addr[160];
	int rc, nclamped;

	be_log_set_fn(log_fn);
	st_init(&t, argc, argv);
	ASSERT_GE(t.cfg.eager_max, REQ_LEN);

	/* Defaults: nothing clamped, the request goes eagerly. */
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	show_logged();
	ASSERT_EQ(nlogged, 0);
	ASSERT_OK(be_sock_connect(ws[1], addr, &st_server_cbs, NULL, &s));
	ASSERT_OK(be_sock_send(s, st_msg(REQ_LEN, 1), REQ_LEN, st_send_cb, &sends));
	st_pump(ws, 2, got_one, &srv);
	st_engine_stats(s, &es);
	ASSERT_EQ(sends.ok, 1);
	ASSERT_EQ(es.eager_sent, 1);
	ASSERT_EQ(es.large_sent, 0);
	be_sock_close(s);
	st_unpair(ctx, ws, &srv, l);

	/* eager_max beyond its receive buffer: clamped, said once. */
	be_config_init(&t.cfg);
	t.cfg.recv_buf_size = 8192;
	t.cfg.eager_max = 8192;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	ASSERT_EQ(be_ctx_config(ctx)->eager_max, 8176);
	ASSERT_EQ(count_logged("eager_max 8192 clamped to 8176"), 1);
	ASSERT_EQ(nlogged, 1);
	be_ctx_destroy(ctx);

	/* sq_depth beyond the device: clamped once when the device opens,
	 * and Engines work with the clamped depth. */
	nlogged = 0;
	be_config_init(&t.cfg);
	t.cfg.sq_depth = 1u << 20;
	if (strcmp(t.transport, "verbs") == 0)
		t.cfg.sq_depth = 1u << 30; /* beyond any NIC */
	memset(&srv, 0, sizeof(srv));
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	/* Once per device opened: verbs opens every device of the host
	 * together (ctx_dev.c), two in the two-NIC guest. */
	nclamped = count_logged("sq_depth");
	if (strcmp(t.transport, "verbs") == 0)
		ASSERT(nclamped >= 1);
	else
		ASSERT_EQ(nclamped, 1);
	rc = be_sock_connect(ws[1], addr, &st_server_cbs, NULL, &s);
	/* Soft-RoCE takes a send queue of 1M WRs (max_qp_wr) but a CQ of
	 * only 32767 (max_cqe): an Engine that deep cannot share the
	 * worker's CQ, and the connect says so. NICs have max_cqe far above
	 * max_qp_wr. */
	if (rc == -ENOSPC && strcmp(t.transport, "verbs") == 0) {
		fprintf(stderr, "sq_depth beyond this device's CQ: -ENOSPC\n");
	} else {
		ASSERT_OK(rc);
		memset(&sends, 0, sizeof(sends));
		ASSERT_OK(be_sock_send(s, st_msg(100, 2), 100, st_send_cb, &sends));
		st_pump(ws, 2, got_one, &srv);
		be_sock_close(s);
	}
	st_unpair(ctx, ws, &srv, l);
	ASSERT_EQ(count_logged("sq_depth"), nclamped);
	be_log_set_fn(NULL);
	return 0;
}
