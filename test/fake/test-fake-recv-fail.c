/*
 * Check that a receive completing in error (injected: the server's
 * second receive from then on completes with a local length error, as
 * when a SEND does not fit the buffer) fails the server's Engine exactly
 * once with BE_EPROTO_PEER (the peer sent what we could not take): its
 * socket gets on_close(BE_EPROTO_PEER), the receive buffer goes back to
 * the SRQ, nothing of that SEND is delivered; the client's Engine sees
 * the disconnect, its socket closes with an error and each of its sends
 * completes exactly once; the server's other Engine keeps receiving.
 */
#include <be/be.h>

#include "duo.h"

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .fail_recv = 2 };
	struct be__fake_stats fs;
	struct duo s = { 0 };
	int i, n = 0;

	duo_init(&s, argc, argv);
	duo_start(&s);
	/* The server's end of the first Engine. */
	ASSERT_OK(be__fake_conn_set(ft_conn(s.srv.socks[0]), &f));
	for (i = 0; i < 10 && n == i; i++) {
		n += duo_send(&s, 1, DUO_MSG, NULL);
		st_pump_ms(s.ws, 2, 1); /* one SEND after another */
	}
	ASSERT_GE(n, 2);
	duo_wait_failed(&s, 1 + n);
	be__fake_stats(&fs);
	ASSERT_EQ(fs.recv_failed, 1);
	ASSERT_EQ(s.srv.close_reason, BE_EPROTO_PEER);
	ASSERT_LT(s.srv.recvd, 1 + n);
	duo_finish(&s);
	return 0;
}
