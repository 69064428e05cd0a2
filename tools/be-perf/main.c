/*
 * main.c - be-perf: benchmarks of every layer, one subcommand each.
 *
 *   be-perf alloc     bemalloc vs glibc malloc
 *   be-perf raw-lat   transport WRITE_WITH_IMM ping-pong   (--transport)
 *   be-perf raw-bw    transport 1 MiB windowed writes
 *   be-perf lat|bw|hol|mux|idle   Socket-level tests
 *   be-perf cost      software cost of a Socket round trip, one thread
 *   be-perf rpc-lat|rpc-rate   RPC calls (include/be/rpc.h)
 *
 * Every subcommand prints a readable table, or one JSON object per line
 * with --json.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

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

uint64_t perf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double perf_cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

uint64_t perf_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (end == s || *end) {
		fprintf(stderr, "be-perf: bad size '%s'\n", s);
		exit(2);
	}
	return v;
}

static void usage(FILE *f)
{
	struct perf_cmd *c;

	fprintf(f, "usage: be-perf <test> [options]   (be-perf <test> --help)\n\ntests:\n");
	for (c = perf_cmds; c; c = c->next)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
}

int main(int argc, char **argv)
{
	struct perf_cmd *c;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (c = perf_cmds; c; c = c->next)
		if (!strcmp(c->name, argv[1]))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "be-perf: unknown test '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
