/*
 * main.c - be-perf: benchmarks of every layer, one subcommand each.
 *
 *   be-perf alloc     bemalloc vs glibc malloc
 *   be-perf raw-lat   transport WRITE_WITH_IMM ping-pong
 *   be-perf raw-bw    transport 1 MiB windowed writes
 *   be-perf lat|bw|hol|mux|idle   Socket-level tests
 *   be-perf cost      software cost of a Socket round trip, one thread
 *   be-perf rpc-lat|rpc-rate|rpc-cost   RPC calls (include/be/rpc.h)
 *   be-perf fanout    one worker, many Engines
 *   be-perf help [TEST] | --help | --version
 *
 * Every test that runs over a transport takes --transport (default
 * PERF_DEFAULT_TRANSPORT) and prints a readable table, or one JSON object
 * per line with --json.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <be/be.h>

#include "perf.h"

static struct perf_cmd *perf_cmds;

void perf_register(struct perf_cmd *cmd)
{
	struct perf_cmd **p = &perf_cmds;

	while (*p && strcmp((*p)->name, cmd->name) < 0)
		p = &(*p)->next;
	cmd->next = *p;
	*p = cmd;
}

double perf_cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void usage(FILE *f)
{
	struct perf_cmd *c;

	fprintf(f, "usage: be-perf TEST [options]   run TEST; be-perf help TEST lists its options\n"
		   "       be-perf help | --help | --version\n\n"
		   "Tests over a transport take --transport shm|tcp|verbs (default "
		   PERF_DEFAULT_TRANSPORT "; verbs\nneeds an RDMA device: --addr, or BE_RXE_IP0) "
		   "and run both ends on this host\nunless given --addr. Every test prints a "
		   "table, or JSON lines with --json.\n\ntests:\n");
	for (c = perf_cmds; c; c = c->next)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
}

static struct perf_cmd *find_cmd(const char *name)
{
	struct perf_cmd *c;

	for (c = perf_cmds; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

static int run_cmd(const struct perf_cmd *c, int argc, char **argv)
{
	return c->run ? c->run(argc, argv) : c->run_mode(argc, argv, c->mode);
}

int main(int argc, char **argv)
{
	struct perf_cmd *c;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("be-perf %s (library %s)\n", BE_PERF_VERSION, be_version_string());
		return 0;
	}
	if (!strcmp(argv[1], "help") && argc > 2) {
		char opt[] = "--help";
		char *help_argv[] = { argv[2], opt, NULL };

		c = find_cmd(argv[2]);
		if (c)
			return run_cmd(c, 2, help_argv);
		fprintf(stderr, "be-perf: unknown test '%s'\n", argv[2]);
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	c = find_cmd(argv[1]);
	if (c)
		return run_cmd(c, argc - 1, argv + 1);
	fprintf(stderr, "be-perf: unknown test '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
