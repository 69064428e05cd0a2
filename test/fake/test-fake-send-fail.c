/*
 * Check that a SEND failing in the middle of a stream (injected: the
 * client's third WR from then on completes with a general error, the
 * WRs posted behind it are flushed) fails its Engine exactly once: every
 * send completes exactly once, with 0 or with the Engine's error
 * (-ECONNRESET for a general error), nothing whose send failed arrives,
 * the socket gets on_close(-ECONNRESET), the server's socket an error,
 * every receive buffer is back on its SRQ, and a socket of the same
 * client worker on another Engine keeps sending.
 */
#include <errno.h>

#include "duo.h"

static bool streamed(void *arg)
{
	struct duo *s = arg;

	return s->srv.recvd == 11 && s->sends.ok == 11;
}

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .fail_wr = 3 };
	struct duo s = { 0 };

	duo_init(&s, argc, argv);
	duo_start(&s);
	/* The stream runs... */
	ASSERT_EQ(duo_send(&s, 10, DUO_MSG, NULL), 10);
	st_pump(s.ws, 2, streamed, &s);
	/* ...and its third WR from now fails; 30 messages make several
	 * SENDs, some behind the failed one. */
	ASSERT_OK(be__fake_conn_set(ft_conn(s.c), &f));
	ASSERT_EQ(duo_send(&s, 30, DUO_MSG, NULL), 30);
	duo_wait_failed(&s, 41);
	ft_check_one_failed(BE_XWC_SEND);
	ASSERT_GE(s.sends.ok, 11);
	ASSERT_EQ(s.sends.last_err, -ECONNRESET);
	ASSERT_EQ(s.cli.close_reason, -ECONNRESET);
	/* Every SEND here is signaled: what completed with 0 arrived,
	 * nothing else did. */
	ASSERT_EQ(s.srv.recvd, s.sends.ok);
	duo_finish(&s);
	return 0;
}
