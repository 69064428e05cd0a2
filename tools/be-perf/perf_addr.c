/*
 * perf_addr.c - the address a be-perf test listens on when none is given:
 * a shm name of its own, a free tcp port of 127.0.0.1, or on verbs a free
 * port of the RDMA device's IP in $BE_RXE_IP0 (rdma_cm binds to a device,
 * so there is no loopback default).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

void perf_no_rxe_ip(const char *cmd)
{
	fprintf(stderr, "be-perf %s: verbs needs BE_RXE_IP0 (the IP of an RDMA device) "
			"when no --addr is given\n", cmd);
}

int perf_listen_addr(const char *cmd, const char *transport, const char *name, char *buf,
		     size_t len)
{
	if (!strcmp(transport, "shm")) {
		snprintf(buf, len, "shm://be-perf-%d%s%s", (int)getpid(), name ? "-" : "",
			 name ? name : "");
	} else if (!strcmp(transport, "verbs")) {
		const char *ip = getenv("BE_RXE_IP0");

		if (!ip || !*ip) {
			perf_no_rxe_ip(cmd);
			return -ENODEV;
		}
		snprintf(buf, len, "verbs://%s:0", ip);
	} else {
		snprintf(buf, len, "%s://127.0.0.1:0", transport);
	}
	return 0;
}
