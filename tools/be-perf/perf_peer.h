/*
 * perf_peer.h - be-perf's "measure both ends with one command": run the
 * other end of a test in a child process on this host.
 *
 * Model. The parent fork()s before it touches the library, so the child
 * starts with no transport, bemalloc or thread state of its own to clean
 * up. The child runs a function (the server role of the test), announces
 * the address it listens on as one line on a pipe (perf_peer_ready()), and
 * exits with that function's return value. The parent reads the address
 * (perf_peer_addr()), runs the client role against it, then reaps the
 * child (perf_peer_wait()), which also gives the child's CPU time.
 *
 * The child dies with the parent (PR_SET_PDEATHSIG), and every wait here
 * is bounded, so a broken peer never hangs the tool.
 */
#ifndef BE_PERF_PEER_H
#define BE_PERF_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <be/be.h>

struct perf_peer {
	pid_t pid;        /* child, 0 once reaped */
	int fd;           /* read end of the ready pipe, -1 once closed */
	int status;       /* wait status after perf_peer_wait() */
	struct rusage ru; /* the child's resource use after perf_peer_wait() */
};

/*
 * perf_peer_spawn() - fork a child that pins itself to @cpu (-1: no pin),
 * runs @fn(@arg, ready_fd) and exits with its return value (0 success).
 * @fn must call perf_peer_ready(ready_fd, addr) once it accepts clients.
 * Returns 0 or -errno (fork/pipe failed); the child's own failures show as
 * its exit status.
 */
int perf_peer_spawn(struct perf_peer *p, int cpu, int (*fn)(void *arg, int ready_fd), void *arg);

/* perf_peer_ready() - child side: announce @addr and close @ready_fd. */
int perf_peer_ready(int ready_fd, const char *addr);

/*
 * perf_peer_addr() - parent side: the address line the child announced,
 * within @timeout_ms. Returns 0, -ETIMEDOUT, or -ECHILD when the child
 * exited (or closed the pipe) without announcing one.
 */
int perf_peer_addr(struct perf_peer *p, char *buf, size_t len, int timeout_ms);

/*
 * perf_peer_wait() - reap the child within @timeout_ms; after that it is
 * killed (SIGKILL) and reaped. Returns the child's exit code (0..255),
 * -ETIMEDOUT if it had to be killed, or -ECHILD if it died of a signal
 * (the signal is in p->status).
 */
int perf_peer_wait(struct perf_peer *p, int timeout_ms);

/* perf_peer_kill() - kill and reap the child now (error paths). */
void perf_peer_kill(struct perf_peer *p);

/*
 * The options every client/server command (rpc-*, the Socket commands)
 * takes; a command's options struct starts with one.
 */
struct perf_peer_opts {
	const char *cmd;       /* the subcommand, for messages */
	const char *transport; /* --transport */
	const char *addr;      /* --addr: where the server listens, the client connects */
	int server;            /* --server: only the server */
	int json;              /* --json: one JSON object per line */
	int adaptive;          /* --adaptive: be_worker_wait() instead of busy progress */
	int timeout_s;         /* --timeout: bound on a run */
	int seconds;           /* --seconds: length of a timed run */
	uint64_t size, iters, warmup;
};

/*
 * perf_peer_poll() - one poll of @w as @o says. Busy polling measures the
 * library, not the scheduler's wakeup latency (as the raw tests and
 * perftest do); adaptive polling (spin, then sleep on the completion fds)
 * is what an application saving CPU would use.
 */
static inline int perf_peer_poll(const struct perf_peer_opts *o, struct be_worker *w)
{
	return o->adaptive ? be_worker_wait(w, 100) : be_worker_progress(w);
}

/*
 * perf_peer_run() - the two ends of the client/server test @o->cmd: only
 * the server (@o->server: @server_fn(@arg, -1)), only the client against
 * @o->addr (@client(@arg, @o->addr, NULL)), or, with neither, the server in
 * a child (perf_peer_spawn(), no pinning) and the client against the
 * address it announces within @o->timeout_s. Returns what the end returns,
 * or 1 when the child did not start (said on stderr); the child is killed
 * when the client fails.
 */
int perf_peer_run(const struct perf_peer_opts *o, int (*server_fn)(void *arg, int ready_fd),
		  int (*client)(void *arg, const char *addr, struct perf_peer *peer), void *arg);

/*
 * PERF_PEER_OPTS() - the entries of struct perf_peer_opts @o in a
 * command's perf_opt table (perf.h); --busy clears adaptive.
 */
#define PERF_PEER_OPTS(o)                                   \
	PERF_FLAG("--server", &(o).server, 1),              \
	PERF_OPT("--addr", STR, &(o).addr),                 \
	PERF_OPT("--transport", STR, &(o).transport),       \
	PERF_OPT("--size", SIZE, &(o).size),                \
	PERF_OPT("--iters", SIZE, &(o).iters),              \
	PERF_OPT("--warmup", SIZE, &(o).warmup),            \
	PERF_FLAG("--adaptive", &(o).adaptive, 1),          \
	PERF_FLAG("--busy", &(o).adaptive, 0),              \
	PERF_OPT("--seconds", INT, &(o).seconds),           \
	PERF_FLAG("--json", &(o).json, 1),                  \
	PERF_OPT("--timeout", INT, &(o).timeout_s)

#endif /* BE_PERF_PEER_H */
