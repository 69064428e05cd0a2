/*
 * perf.h - be-perf's shared pieces: subcommand registration, sample
 * statistics and option parsing helpers.
 *
 * Each perf_*.c file registers its subcommands with PERF_COMMAND(); main.c
 * dispatches on argv[1]. Latencies are reported one-way (RTT/2) where the
 * test is a ping-pong, as perftest and ucx_perftest do.
 */
#ifndef BE_PERF_PERF_H
#define BE_PERF_PERF_H

#include <stddef.h>
#include <stdint.h>

struct perf_cmd {
	const char *name;
	const char *help;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
	struct perf_cmd *next;
};

void perf_register(struct perf_cmd *cmd);

#define PERF_COMMAND(id, name_, help_, fn_)                                   \
	static struct perf_cmd perf_cmd_##id = { name_, help_, fn_, NULL };    \
	__attribute__((constructor)) static void perf_cmd_register_##id(void) \
	{                                                                      \
		perf_register(&perf_cmd_##id);                                 \
	}

struct perf_summary {
	size_t n;
	double min, p50, p99, max, avg; /* same unit as the samples */
	double p25, p75;                /* spread */
};

/* Sorts @v in place and summarises it. */
void perf_summarize(double *v, size_t n, struct perf_summary *out);

/* Monotonic time in ns; user+system CPU seconds of this process. */
uint64_t perf_now_ns(void);
double perf_cpu_seconds(void);

/*
 * perf_listen_addr() - the default listen address of a test on
 * @transport into @buf: shm "shm://be-perf-<pid>[-@name]" (@name may be
 * NULL), verbs a port of $BE_RXE_IP0, others a port of 127.0.0.1.
 * Returns 0, or -ENODEV on verbs without BE_RXE_IP0.
 */
int perf_listen_addr(const char *transport, const char *name, char *buf, size_t len);

/* Parse a size with K/M/G suffix; exits with a message on bad input
 * (be-perf is a tool, not the library). */
uint64_t perf_parse_size(const char *s);

#endif /* BE_PERF_PERF_H */
