/*
 * Check that a connection breaking after 300 KiB of a 1 MiB message
 * (injected: the WR that would carry byte 300 Ki + 1 and every later one
 * fail, the first with the status a dead path gives an RC QP) fails its
 * Engine exactly once: the send completes with -ETIMEDOUT (retries
 * exceeded), as does on_close; the receiver delivers nothing of the
 * partly written message, frees its buffer and closes with an error;
 * the worker's other Engine is unaffected.
 */
#include <errno.h>

#include "duo.h"

int main(int argc, char **argv)
{
	const struct be__fake_faults f = { .do_break = true, .break_after = 300u << 10 };
	struct duo s = { 0 };

	duo_init(&s, argc, argv);
	duo_start(&s);
	duo_large_fails(&s, &f, -ETIMEDOUT);
	ft_check_one_failed(BE_XWC_WRITE);
	duo_finish(&s);
	return 0;
}
