/*
 * Check that a large message whose WriteResponse never comes (injected:
 * from the WriteRequest on, nothing the server sends reaches the client,
 * though the connection stays up) does not hang: the client's Engine
 * hears nothing from its peer for conn_timeout_ms and fails with
 * BE_ECONNFAULT, the send completes with it exactly once, as does
 * on_close; the server, whose Engine then sees the disconnect, frees the
 * buffer it granted and closes with an error; the receive buffers the
 * stalled completions held go back to the client's SRQ; the worker's
 * other Engine is unaffected. shm only: on tcp a large message needs no
 * WriteResponse (one-way).
 */
#include <be/be.h>

#include "duo.h"

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .stall_rx = true };
	struct be__fake_stats fs;
	struct duo s = { 0 };

	duo_init(&s, argc, argv);
	/* A silent peer is noticed soon (no assertion on time). */
	s.t.st.cfg.oneway = 0; /* the WriteRequest path */
	s.t.st.cfg.keepalive_ms = 100;
	s.t.st.cfg.conn_timeout_ms = 1500;
	duo_start(&s);
	duo_large_fails(&s, &f, BE_ECONNFAULT);
	be__fake_stats(&fs);
	ASSERT_GE(fs.held, 1);
	duo_finish(&s);
	return 0;
}
