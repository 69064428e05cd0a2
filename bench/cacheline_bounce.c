/*
 * cacheline_bounce.c - the floor for any shared-memory transport on this
 * host: a 64-byte message bounced between two processes on two cores.
 *
 * Each direction has its own cache line in a MAP_SHARED page: 56 bytes of
 * payload and an 8-byte sequence number, stored last with release order.
 * The other side spins on the sequence (acquire), reads the payload, and
 * answers on the other line. One round trip moves each line once between
 * the cores, so RTT/2 is the cheapest a one-way shared-memory message can
 * be; any transport adds its own bookkeeping on top.
 *
 *   cacheline_bounce [--iters N] [--warmup N] [--cpu A,B] [--json]
 *
 * Without --cpu the processes are pinned to cores 0 and 1 (two spinning
 * processes on one core would measure the scheduler, not the cache).
 * Output: one-way latency in microseconds (min, p25, p50, p75, p99, avg).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "perf.h" /* perf_summarize(), perf_now_ns(), perf_pin_cpu(): perf_stats.c */
#include <unistd.h>

struct line {
	uint8_t payload[56];
	uint64_t seq;
} __attribute__((aligned(64)));

struct shared {
	struct line ping;
	struct line pong;
};

static void line_send(struct line *l, const uint8_t *payload, uint64_t seq)
{
	memcpy(l->payload, payload, sizeof(l->payload));
	__atomic_store_n(&l->seq, seq, __ATOMIC_RELEASE);
}

static void line_wait(struct line *l, uint8_t *payload, uint64_t seq)
{
	while (__atomic_load_n(&l->seq, __ATOMIC_ACQUIRE) != seq)
		__builtin_ia32_pause();
	memcpy(payload, l->payload, sizeof(l->payload));
}

int main(int argc, char **argv)
{
	struct perf_bench_opts o = { .iters = 200000, .warmup = 10000, .cpu = { 0, 1 } };
	uint64_t i, prev = 0;
	int status;
	struct shared *sh;
	uint8_t buf[56];
	struct perf_summary sm;
	double *v;
	pid_t pid;

	for (int a = 1; a < argc; a++) {
		if (!perf_bench_arg(argc, argv, &a, &o)) {
			fprintf(stderr, "usage: %s [--iters N] [--warmup N] [--cpu A,B] [--json]\n",
				argv[0]);
			return 2;
		}
	}
	if (!o.iters) {
		fprintf(stderr, "cacheline_bounce: --iters must be > 0\n");
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	v = calloc(o.iters, sizeof(*v));
	if (sh == MAP_FAILED || !v) {
		perror("cacheline_bounce: mmap/calloc");
		return 1;
	}
	memset(sh, 0, sizeof(*sh));
	memset(buf, 0x5a, sizeof(buf));

	pid = perf_fork_pinned(o.cpu[1], "cacheline_bounce: peer");
	if (pid < 0) {
		perror("cacheline_bounce: fork");
		return 1;
	}
	if (pid == 0) {
		for (i = 1; i <= o.warmup + o.iters; i++) {
			line_wait(&sh->ping, buf, i);
			line_send(&sh->pong, buf, i);
		}
		_exit(0);
	}
	if (perf_pin_cpu(o.cpu[0])) {
		perror("cacheline_bounce: pin");
		kill(pid, SIGKILL);
		return 1;
	}
	for (i = 1; i <= o.warmup + o.iters; i++) {
		if (i == o.warmup + 1)
			prev = perf_now_ns();
		line_send(&sh->ping, buf, i);
		line_wait(&sh->pong, buf, i);
		if (i > o.warmup) {
			uint64_t t = perf_now_ns();

			v[i - o.warmup - 1] = (double)(t - prev) / 2e3;
			prev = t;
		}
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "cacheline_bounce: peer failed\n");
		return 1;
	}
	perf_summarize(v, o.iters, &sm);
	if (o.json)
		printf("{\"test\":\"cacheline-bounce\",\"size\":64,\"iters\":%llu,\"cpu\":\"%d,%d\""
		       ",\"p50_us\":%.4f,\"p99_us\":%.4f,\"avg_us\":%.4f,\"min_us\":%.4f"
		       ",\"p25_us\":%.4f,\"p75_us\":%.4f,\"max_us\":%.4f}\n",
		       (unsigned long long)o.iters, o.cpu[0], o.cpu[1], sm.p50, sm.p99, sm.avg,
		       sm.min, sm.p25, sm.p75, sm.max);
	else
		printf("cacheline bounce 64 B, cpus %d,%d, %llu iterations, one-way us:\n"
		       "  min %.3f  p25 %.3f  p50 %.3f  p75 %.3f  p99 %.3f  avg %.3f\n",
		       o.cpu[0], o.cpu[1], (unsigned long long)o.iters, sm.min, sm.p25, sm.p50,
		       sm.p75, sm.p99, sm.avg);
	return 0;
}
