/*
 * main.c - be-perf: benchmarks of every layer, one subcommand each.
 *
 *   be-perf alloc     bemalloc vs glibc malloc
 *   be-perf raw-lat   transport WRITE_WITH_IMM ping-pong   (--transport)
 *   be-perf raw-bw    transport 1 MiB windowed writes
 *   be-perf lat|bw|hol|mux   Socket-level tests
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double q)
{
	size_t i = (size_t)ceil(q * (double)n);

	if (i > 0)
		i--;
	if (i >= n)
		i = n - 1;
	return v[i];
}

void perf_summarize(double *v, size_t n, struct perf_summary *out)
{
	double sum = 0;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	for (i = 0; i < n; i++)
		sum += v[i];
	out->n = n;
	out->min = v[0];
	out->max = v[n - 1];
	out->avg = sum / (double)n;
	out->p25 = pct(v, n, 0.25);
	out->p50 = pct(v, n, 0.50);
	out->p75 = pct(v, n, 0.75);
	out->p99 = pct(v, n, 0.99);
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
