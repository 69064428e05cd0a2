/*
 * Check that a completion queue that cannot be armed for a wakeup (a
 * failed cq_arm, injected) is not a silent fall back to timer ticks:
 * be_worker_wait() returns the transport's error (after a short sleep,
 * not one until the next tick), the worker counts it ("cq_arm_errors" in
 * be_worker_stats_json()), traffic still flows while it fails, and waits
 * return to normal once arming works again. Before the fix the failure
 * was ignored and the wait returned 0.
 */
#include <errno.h>

#include "stest.h"
#include "xport/xport.h"

static int fail_arm;
static struct st_server srv;

static int cq_arm(struct be_xcq *cq)
{
	return fail_arm ? -EIO : st_ops_real()->cq_arm(cq);
}

int main(int argc, char **argv)
{
	const struct be_sock_cbs ccbs = { 0 };
	struct be_worker *ws[2];
	struct st_sends sends = { 0 };
	struct be_listener *l;
	struct be_sock *c;
	struct be_ctx *ctx;
	char addr[160], json[4096];
	struct st t;
	uint64_t start;
	int want, rc, i;

	st_init(&t, argc, argv);
	st_pair(&t, &ctx, ws, &srv, &l, addr, sizeof(addr));
	st_ops_override(&t, ctx)->cq_arm = cq_arm;
	ASSERT_OK(be_sock_connect(ws[1], addr, &ccbs, NULL, &c));
	st_send_recvd(ws, c, 64, 1, &sends, &srv, 1);
	st_pump_ms(ws, 2, 20);

	fail_arm = 1;
	/* Idle: the wait must arm, fails to, and says so. */
	for (i = 0; i < 100; i++) {
		rc = be_worker_wait(ws[0], 1000);
		if (rc)
			break;
	}
	ASSERT_EQ(rc, -EIO);
	ASSERT_GT(be_worker_stats_json(ws[0], json, sizeof(json)), 0);
	ASSERT_GE(st_json_num(json, "cq_arm_errors"), 1);
	/* Traffic still flows: the waits poll. */
	ASSERT_OK(be_sock_send(c, st_msg(64, 2), 64, st_send_cb, &sends));
	want = 2;
	start = st_hang_start();
	while (srv.recvd < want) {
		be_worker_wait(ws[1], 0);
		rc = be_worker_wait(ws[0], 1000);
		ASSERT(rc >= 0 || rc == -EIO);
		st_hang_check(start, "srv.recvd < want");
	}

	fail_arm = 0;
	for (i = 0; i < 3; i++)
		ASSERT_OK(be_worker_wait(ws[0], 5));
	be_sock_close(c);
	st_unpair(ctx, ws, &srv, l);
	return 0;
}
