/*
 * Check the TCP fallback (or, on tcp, the port switch) with a replica in
 * another process serving on two paths, the test's transport preferred
 * and tcp second: while a stream of idempotent calls runs, the preferred
 * path breaks (its worker and Engines go) -> the calls continue over the
 * second path without a failure; the path comes back -> the calls
 * return to it; both moves are counted (rt_path_switch_ctl()).
 */
#include <string.h>

#include "rtest.h"

int main(int argc, char **argv)
{
	struct be_rpc_chan_stats cs;
	struct rt t;

	rt_init(&t, argc, argv);
	rt_path_switch_ctl(&t, 1000000 * rt_slow_factor(), 'c', 'o', "path-break", &cs);
	/* Nothing was silent: the move came from the connection failing. */
	ASSERT_GT(cs.c.probes, 0);
	return 0;
}
