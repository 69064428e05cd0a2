/*
 * perf.h - be-perf's shared pieces: subcommand registration, sample
 * statistics, option parsing helpers, default listen addresses and the
 * echo ping-pong of the one-process tests.
 *
 * Each perf_*.c file registers its subcommands with PERF_COMMAND(); main.c
 * dispatches on argv[1]. Latencies are reported one-way (RTT/2) where the
 * test is a ping-pong, as perftest and ucx_perftest do.
 */
#ifndef BE_PERF_PERF_H
#define BE_PERF_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct be_config;
struct be_ctx;
struct be_sock;
struct be_listener;
struct be_worker;

struct perf_cmd {
	const char *name;
	const char *help;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
	/* Instead of run: one test of several variants, run as variant @mode. */
	int (*run_mode)(int argc, char **argv, int mode);
	int mode;
	struct perf_cmd *next;
};

void perf_register(struct perf_cmd *cmd);

/* The transport of every test that takes --transport, when none is given:
 * it needs no device and no network, and is the fastest of the three. */
#define PERF_DEFAULT_TRANSPORT "shm"

#define PERF_COMMAND(id, name_, help_, fn_) \
	PERF_COMMAND_DEF(id, { .name = (name_), .help = (help_), .run = (fn_) })
/* A subcommand that runs @fn_(argc, argv, @mode_). */
#define PERF_COMMAND_MODE(id, name_, help_, fn_, mode_) \
	PERF_COMMAND_DEF(id, { .name = (name_), .help = (help_), .run_mode = (fn_), .mode = (mode_) })
#define PERF_COMMAND_DEF(id, ...)                                             \
	static struct perf_cmd perf_cmd_##id = __VA_ARGS__;                    \
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

/* Monotonic time in ns (perf_stats.c); user+system CPU seconds of this
 * process (main.c). */
uint64_t perf_now_ns(void);
double perf_cpu_seconds(void);
/* perf_pin_cpu() - pin the calling process to @cpu. 0 or -errno. */
int perf_pin_cpu(int cpu);
/*
 * perf_fork_pinned() - fork() a child that dies with its parent
 * (PR_SET_PDEATHSIG) and pins itself to @cpu (-1: no pin). stdout and
 * stderr are flushed first, so that buffered output is not written twice.
 * A child that cannot pin, or whose parent is already gone, exits with 3
 * (saying why on stderr, after "@who: "). Returns what fork() returns.
 */
pid_t perf_fork_pinned(int cpu, const char *who);

/*
 * perf_listen_addr() - the default listen address of command @cmd's test
 * on @transport into @buf: shm "shm://be-perf-<pid>[-@name]" (@name may
 * be NULL), verbs a port of $BE_RXE_IP0, others a port of 127.0.0.1.
 * Returns 0, or -ENODEV on verbs without BE_RXE_IP0 (said on stderr by
 * perf_no_rxe_ip()).
 */
int perf_listen_addr(const char *cmd, const char *transport, const char *name, char *buf,
		     size_t len);
/* Say on stderr that verbs needs BE_RXE_IP0 (or --addr) for @cmd. */
void perf_no_rxe_ip(const char *cmd);

/*
 * The echo ping-pong of the one-process tests (perf_echo.c): counters of
 * one side, and callbacks. perf_echo_serve (server on_recv) sends each
 * message back, lending it until perf_echo_sent (the send callback, arg:
 * the server's counters) frees it; perf_echo_answer (client on_recv)
 * counts and frees; perf_echo_accept hands an accepted Socket the
 * listener's user pointer (the server's counters).
 */
struct perf_echo {
	uint64_t answered; /* answers the client received */
	int errors;        /* sends that completed with an error */
	int closed;        /* Sockets closed under the test */
};

void perf_echo_sent(struct be_sock *s, void *buf, int status, void *arg);
void perf_echo_serve(struct be_sock *s, void *buf, size_t len, void *user);
void perf_echo_answer(struct be_sock *s, void *buf, size_t len, void *user);
int perf_echo_accept(struct be_listener *l, struct be_sock *s, void *user);

/* perf_echo_send() - a request of @size bytes (0x5a) on @s, its send
 * completing into @c. 0, -ENOMEM, or be_sock_send()'s error (the buffer
 * freed). perf_echo_wait() - progress @cw and @sw until @c has @want
 * answers: 0; -EIO once @c counts an error or a closed Socket;
 * -ETIMEDOUT past @timeout_s seconds after @start_ns. */
int perf_echo_send(struct be_sock *s, size_t size, struct perf_echo *c);
int perf_echo_wait(struct be_worker *cw, struct be_worker *sw, struct perf_echo *c,
		   uint64_t want, uint64_t start_ns, uint64_t timeout_s);

/* Shut the two workers of a one-process test down together (each waits
 * for the other's answers, and one thread drives both), then destroy
 * them; NULL entries are skipped. */
void perf_echo_destroy(struct be_worker *a, struct be_worker *b);

/*
 * Both ends of a one-process test: a client and a server worker on a
 * context of their own, driven from one thread, and their echo counters.
 * perf_duo_open() creates them with @cfg (NULL: the defaults), counters
 * zero, and returns 0 or the library's error (what was created is left
 * for perf_duo_close()); perf_duo_close() shuts the workers down together
 * (perf_echo_destroy()) and destroys the context.
 */
struct perf_duo {
	struct be_ctx *ctx;
	struct be_worker *cw, *sw;
	struct perf_echo c, sc; /* the echo ping-pong's counters of each end */
};
int perf_duo_open(struct perf_duo *d, const struct be_config *cfg);
void perf_duo_close(struct perf_duo *d);

/*
 * The options every one-process test takes: --transport, --size of a
 * message, --timeout (seconds without progress before it gives up) and
 * --json. PERF_DUO_OPTS() puts them in the command's perf_opt table.
 */
struct perf_duo_opts {
	const char *transport;
	uint64_t size, timeout_s;
	int json;
};
#define PERF_DUO_OPTS(o)                                      \
	PERF_OPT("--transport", STR, &(o).transport),         \
	PERF_OPT("--size", SIZE, &(o).size),                  \
	PERF_FLAG("--json", &(o).json, 1),                    \
	PERF_OPT("--timeout", SIZE, &(o).timeout_s)

/* Parse a size with K/M/G suffix; exits with a message on bad input
 * (be-perf is a tool, not the library). */
uint64_t perf_parse_size(const char *s);

/*
 * The options the stand-alone programs in bench/ share: --iters N and
 * --warmup N (K/M/G suffixes), --cpu A,B (the cores of the two
 * processes), --json. perf_bench_arg() takes argv[*i] if it is one of
 * them, with its value (*i moves past it), and returns 1; else 0.
 */
struct perf_bench_opts {
	uint64_t iters, warmup;
	int cpu[2];
	int json;
};
int perf_bench_arg(int argc, char **argv, int *i, struct perf_bench_opts *o);

/*
 * A subcommand's options, as a table (perf_opts.c). Each entry names an
 * option ("--size") and where its value goes: FLAG stores @val in an int,
 * STR the argument itself, SIZE and U32 perf_parse_size() (K/M/G) into a
 * uint64_t / uint32_t, INT atoi() into an int, FN calls @fn(@dst, value),
 * which returns 0 or prints why and returns -1. An entry whose name is
 * NULL is left out (an option of another mode); PERF_OPTS_END ends the
 * table. Write entries with PERF_OPT(), PERF_FLAG() and PERF_FN(). Values
 * follow as the next argument or after '='.
 */
enum perf_opt_type { PERF_OPT_END, PERF_OPT_FLAG, PERF_OPT_STR, PERF_OPT_SIZE, PERF_OPT_U32,
		     PERF_OPT_INT, PERF_OPT_FN };

struct perf_opt {
	const char *name;
	enum perf_opt_type type;
	void *dst;
	int val;
	int (*fn)(void *dst, const char *v);
};

/*
 * perf_opts_parse() - parse @argv[1..@argc) of subcommand @cmd by @opts.
 * --help and -h print @usage to stdout. Returns -1 when every argument
 * was taken (go on), 0 after --help, 2 on a bad option (said on stderr).
 */
#define PERF_OPT(name_, type_, dst_) { .name = (name_), .type = PERF_OPT_##type_, .dst = (dst_) }
#define PERF_FLAG(name_, dst_, val_) \
	{ .name = (name_), .type = PERF_OPT_FLAG, .dst = (dst_), .val = (val_) }
#define PERF_FN(name_, dst_, fn_) { .name = (name_), .type = PERF_OPT_FN, .dst = (dst_), .fn = (fn_) }
#define PERF_OPTS_END { .type = PERF_OPT_END }

/* perf_opts_bad() - say on stderr that @cmd's arguments do not go
 * together or are out of range, and return 2 (the exit code of a bad
 * option, as perf_opts_parse()). */
int perf_opts_bad(const char *cmd);

int perf_opts_parse(const char *cmd, int argc, char **argv, const struct perf_opt *opts,
		    void (*usage)(FILE *f, const char *cmd));

#endif /* BE_PERF_PERF_H */
