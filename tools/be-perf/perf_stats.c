/*
 * perf_stats.c - percentiles of latency samples, the clock they are taken
 * with, CPU pinning, the pinned child of a two-process test, and the
 * parsing of sizes and of the options the bench/ programs share; used by
 * be-perf and by the stand-alone programs in bench/ (compiled with this
 * file) so every figure in docs/PERFORMANCE.md is taken and summarised
 * the same way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

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

int perf_pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return -errno;
	return 0;
}

pid_t perf_fork_pinned(int cpu, const char *who)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1) {
		fprintf(stderr, "%s: the parent is already gone\n", who);
		_exit(3);
	}
	if (cpu >= 0 && perf_pin_cpu(cpu)) {
		fprintf(stderr, "%s: cannot pin to cpu %d: %s\n", who, cpu, strerror(errno));
		_exit(3);
	}
	return 0;
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

int perf_bench_arg(int argc, char **argv, int *i, struct perf_bench_opts *o)
{
	const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;

	if (!strcmp(a, "--json")) {
		o->json = 1;
		return 1;
	}
	if (!v)
		return 0;
	if (!strcmp(a, "--iters"))
		o->iters = perf_parse_size(v);
	else if (!strcmp(a, "--warmup"))
		o->warmup = perf_parse_size(v);
	else if (strcmp(a, "--cpu") || sscanf(v, "%d,%d", &o->cpu[0], &o->cpu[1]) != 2)
		return 0;
	(*i)++;
	return 1;
}
