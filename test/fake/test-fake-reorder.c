/*
 * Check that completions delayed and reordered across connections
 * (injected: every completion of every conn waits 0..16 polls of its
 * cq, seeded; a conn's own stay in order, as on an RC QP) change nothing
 * the API promises: three sockets on three Engines of one worker each
 * send small, medium and large messages, and each arrives intact, once,
 * in its socket's order; every send completes with 0.
 */
#include "ftest.h"

#define NSOCK 3
#define NMSG 40

struct rx {
	int k;       /* socket number */
	int next;    /* index of the next message expected */
	int bad;
};

static struct st_sends sends;
static struct rx rx[NSOCK];
static struct be_sock **acc;
static int nacc;

static size_t msg_len(int i)
{
	static const size_t sizes[] = { 100, 3000, 200u << 10, 7 };

	return sizes[i % 4];
}

static void rx_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	struct rx *r = user;

	if (len != msg_len(r->next) || !st_check(buf, len, (uint32_t)(r->k * 1000 + r->next)))
		r->bad++;
	r->next++;
	be_free(buf);
}

static int rx_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	acc = realloc(acc, (size_t)(nacc + 1) * sizeof(*acc));
	ASSERT(acc);
	acc[nacc++] = s;
	return 0;
}

static const struct be_sock_cbs rx_cbs = { .on_recv = rx_recv, .on_accept = rx_accept };

static bool all_done(void *arg)
{
	int k;

	for (k = 0; k < NSOCK; k++)
		if (rx[k].next < NMSG)
			return false;
	return sends.done == NSOCK * NMSG;
}

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .jitter_polls = 16 };
	struct be_listener *l[NSOCK];
	struct be_sock *c[NSOCK];
	struct st_server cli[NSOCK] = { { 0 } };
	struct be_worker *ws[2];
	struct be_ctx *ctx;
	struct be__fake_stats fs;
	char addr[160];
	struct ft t;
	int i, k;

	ft_init(&t, argc, argv);
	be__fake_seed(7);
	be__fake_conn_new(&f);
	ASSERT_OK(be_ctx_create(&t.st.cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &ws[0]));
	ASSERT_OK(be_worker_create(ctx, &ws[1]));
	for (k = 0; k < NSOCK; k++) {
		rx[k].k = k;
		ASSERT_OK(be_listen(ws[0], ft_addr(&t), &rx_cbs, &rx[k], &l[k]));
		ASSERT_OK(be_listener_addr(l[k], addr, sizeof(addr)));
		ASSERT_OK(be_sock_connect(ws[1], addr, &st_server_cbs, &cli[k], &c[k]));
	}
	for (i = 0; i < NMSG; i++)
		for (k = 0; k < NSOCK; k++)
			ASSERT_OK(be_sock_send(c[k], st_msg(msg_len(i), (uint32_t)(k * 1000 + i)),
					       msg_len(i), st_send_cb, &sends));
	st_pump(ws, 2, all_done, NULL);
	be__fake_stats(&fs);
	ASSERT_GT(fs.held, 0);
	ASSERT_EQ(sends.ok, NSOCK * NMSG);
	for (k = 0; k < NSOCK; k++) {
		ASSERT_EQ(rx[k].next, NMSG);
		ASSERT_EQ(rx[k].bad, 0);
		ASSERT_EQ(cli[k].closed, 0);
	}
	st_pump_ms(ws, 2, 20);
	ft_check_srq(ws[0]);
	ft_check_srq(ws[1]);

	for (k = 0; k < NSOCK; k++)
		be_sock_close(c[k]);
	for (i = 0; i < nacc; i++)
		be_sock_close(acc[i]);
	free(acc);
	for (k = 0; k < NSOCK; k++)
		be_listener_close(l[k]);
	st_destroy(ws, 2);
	be_ctx_destroy(ctx);
	return 0;
}
