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
static struct st_fx f;

static int cq_arm(struct be_xcq *cq)
{
	return fail_arm ? -EIO : st_ops_real()->cq_arm(cq);
}

int main(int argc, char **argv)
{
	struct st_sends sends = { 0 };
	struct be_sock *c;
	char json[4096];
	uint64_t start;
	int want, rc, i;

	st_fx_init(&f, argc, argv);
	st_fx_pair(&f);
	st_ops_override(&f.t, f.ctx)->cq_arm = cq_arm;
	c = st_fx_connect(&f, NULL, NULL);
	st_send_recvd(f.ws, c, 64, 1, &sends, &f.srv, 1);
	st_pump_ms(f.ws, 2, 20);

	fail_arm = 1;
	/* Idle: the wait must arm, fails to, and says so. */
	for (i = 0; i < 100; i++) {
		rc = be_worker_wait(f.ws[0], 1000);
		if (rc)
			break;
	}
	ASSERT_EQ(rc, -EIO);
	ASSERT_GT(be_worker_stats_json(f.ws[0], json, sizeof(json)), 0);
	ASSERT_GE(st_json_num(json, "cq_arm_errors"), 1);
	/* Traffic still flows: the waits poll. */
	ASSERT_OK(be_sock_send(c, st_msg(64, 2), 64, st_send_cb, &sends));
	want = 2;
	start = st_hang_start();
	while (f.srv.recvd < want) {
		be_worker_wait(f.ws[1], 0);
		rc = be_worker_wait(f.ws[0], 1000);
		ASSERT(rc >= 0 || rc == -EIO);
		st_hang_check(start, "f.srv.recvd < want");
	}

	fail_arm = 0;
	for (i = 0; i < 3; i++)
		ASSERT_OK(be_worker_wait(f.ws[0], 5));
	be_sock_close(c);
	st_fx_unpair(&f);
	return 0;
}
