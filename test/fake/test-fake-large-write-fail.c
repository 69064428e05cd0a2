/*
 * Check that an RDMA WRITE failing in the middle of a large message
 * (injected: the fourth WR from the large send on is a WRITE of its
 * fragments and completes with a general error) fails its Engine
 * exactly once: the send completes with -ECONNRESET, as does the
 * socket's on_close; the receiver delivers nothing of the message, frees
 * what it had granted or allocated for it (the ASan build checks) and
 * closes its socket with an error; every receive buffer is back; the
 * worker's other Engine still carries large messages. On shm the
 * message takes the WriteRequest path (large.c, one-way turned off), on
 * tcp the one-way path (oneway.c).
 */
#include <string.h>

#include <errno.h>

#include "duo.h"

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .fail_wr = 4, .fail_status = BE_XWC_GENERAL_ERR };
	struct duo s = { 0 };

	duo_init(&s, argc, argv);
	s.t.st.cfg.oneway = strcmp(s.t.inner, "shm") != 0;
	duo_start(&s);
	duo_large_fails(&s, &f, -ECONNRESET);
	ft_check_one_failed(BE_XWC_WRITE);
	duo_finish(&s);
	return 0;
}
