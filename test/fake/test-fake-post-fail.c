/*
 * Check that a work request the transport refuses to post (injected:
 * post_send of the client's second WR from then on returns -ENOMEM)
 * fails its Engine with that error exactly once: every send completes
 * exactly once (those not known delivered with -ENOMEM), the socket gets
 * on_close(-ENOMEM), the server's socket an error, every receive buffer
 * is back, and the worker's other Engine keeps sending.
 */
#include <errno.h>

#include "duo.h"

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .fail_wr = 2, .fail_post = -ENOMEM };
	struct be__fake_stats fs;
	struct duo s = { 0 };
	int n;

	duo_init(&s, argc, argv);
	duo_start(&s);
	ASSERT_OK(be__fake_conn_set(ft_conn(s.c), &f));
	/* One SEND after another, until the Engine is gone. */
	n = duo_send(&s, 30, DUO_MSG, s.ws[1]);
	ASSERT_GE(n, 2);
	duo_wait_failed(&s, 1 + n);
	be__fake_stats(&fs);
	ASSERT_EQ(fs.post_failed, 1);
	ASSERT_EQ(s.sends.last_err, -ENOMEM);
	ASSERT_EQ(s.cli.close_reason, -ENOMEM);
	/* A WR posted before the refused one may have arrived though its
	 * send reports the Engine's error ("delivery unknown"); nothing
	 * arrives twice. */
	ASSERT_LE(s.srv.recvd, 1 + n);
	duo_finish(&s);
	return 0;
}
