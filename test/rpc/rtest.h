/*
 * rtest.h - shared helper of the RPC tests.
 *
 * Every test in test/rpc/ runs on one transport chosen with --transport
 * NAME (tcp, shm, verbs; default tcp). A transport that is not built in
 * skips the test (exit 77: be_listen() says -EPROTONOSUPPORT). Most tests
 * run server and client workers in one process, driven from one thread
 * by rt_pump(), which alternates progress until a condition holds and
 * fails the test after a generous hang guard (ST_HANG_S, default 60 s:
 * not a speed assertion, it turns a hang into a clear failure). Tests
 * that kill or stop replicas fork them (rt_replica_*), before any
 * context exists in the parent (sock.h: fork before creating contexts).
 */
#ifndef BE_TEST_RPC_RTEST_H
#define BE_TEST_RPC_RTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <be/be.h>
#include "sock/stest.h" /* st_pump(), st_pump_ms() */
#include "test.h"

struct rt {
	const char *transport;
	bool json;                /* --json: failover figures on stdout */
	struct be_config cfg;     /* be_config_init() + test settings */
	struct be_rpc_config rcfg;/* be_rpc_config_init() */
	int naddr;
	char addr[BE_RPC_ADDR_MAX];
};

void rt_init(struct rt *t, int argc, char **argv);
/* A fresh listen address on @transport (NULL: the test's). In the
 * Soft-RoCE guest a digit names a NIC: "verbs1", "tcp0" listen on
 * $BE_RXE_IP1, $BE_RXE_IP0; "verbs" is "verbs0"; "tcp" is the loopback. */
const char *rt_listen_addr(struct rt *t, const char *transport);

/* Progress @ws until @done(@arg), failing the test on a hang (ST_HANG_S,
 * default 60 s), or for about @ms milliseconds: the Socket tests' own. */
#define rt_pump st_pump
#define rt_pump_ms st_pump_ms

/* A server: context, worker, be_rpc listening on one address of the
 * test's transport, with an echo handler on (RT_SVC, RT_ECHO). */
#define RT_SVC 7u
#define RT_ECHO 1u
struct rt_server {
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_rpc *rpc;
	struct be_listener *l;
	char addr[BE_RPC_ADDR_MAX];
	uint64_t echoed;
};
void rt_server_start(struct rt *t, struct rt_server *s, struct be_ctx *shared_ctx);
/* ... listening on @addr (e.g. the address of a server stopped before). */
void rt_server_start_at(struct rt *t, struct rt_server *s, struct be_ctx *shared_ctx,
			const char *addr);
void rt_server_stop(struct rt_server *s);
/* The echo handler (user: struct rt_server, may be NULL): replies with the
 * request's own buffer. */
void rt_echo(struct be_rpc_req *req, void *buf, size_t len, void *user);

/* A handler that holds every request it gets (user: NULL), for tests of
 * what happens while a server sits on calls; rt_held_count() for
 * rt_pump() (arg: int *, at least that many held), rt_held_release()
 * answers them all with their own buffers. */
#define RT_HELD_MAX 256
extern struct rt_held {
	struct be_rpc_req *req;
	void *buf;
	size_t len;
} rt_held[RT_HELD_MAX];
extern int rt_nheld;
void rt_hold(struct be_rpc_req *req, void *buf, size_t len, void *user);
bool rt_held_count(void *arg);
void rt_held_release(void);

/* Requests a slow handler holds for a later reply with their own buffer,
 * each due at @due_ms (rt_ms()) and held for @owner. rt_reply_due()
 * answers those of @d[0..*@n) due by @now_ms and held for @owner (NULL:
 * any), takes them off the array (*@n shrinks) and returns how many it
 * answered. */
struct rt_delayed {
	struct be_rpc_req *req;
	void *buf;
	size_t len;
	uint64_t due_ms;
	const void *owner;
};
int rt_reply_due(struct rt_delayed *d, int *n, uint64_t now_ms, const void *owner);

/* A client: worker + be_rpc on @ctx. */
struct rt_client {
	struct be_worker *w;
	struct be_rpc *rpc;
};
void rt_client_start(struct rt *t, struct rt_client *c, struct be_ctx *ctx);
void rt_client_stop(struct rt_client *c);

/*
 * A server and a client on its context, one thread driving both:
 * rt_duo_start() starts them (rt_server_start(), rt_client_start()) and
 * opens @ch from the client to the server; register handlers on srv.rpc
 * before the first call. rt_duo_stop() destroys @ch (unless NULL), shuts
 * both workers down together and stops the client and the server.
 */
struct rt_duo {
	struct rt_server srv;
	struct rt_client cli;
	struct be_worker *ws[2]; /* srv.w, cli.w: for rt_pump() */
	struct be_rpc_chan *ch;
};
void rt_duo_start(struct rt *t, struct rt_duo *d);
void rt_duo_stop(struct rt_duo *d);

/*
 * rt_fleet_start() - @n servers (rt_server_start()) and a client on one
 * context of their own (*@ctx, from t->cfg); ws[0..n) the servers'
 * workers, ws[n] the client's. rt_fleet_stop() - shut the @n + 1
 * workers down together (st_shutdown: each waits for the others), stop
 * the client and the servers, destroy @ctx.
 */
void rt_fleet_start(struct rt *t, struct be_ctx **ctx, struct rt_server *srv, int n,
		    struct rt_client *cli, struct be_worker **ws);
void rt_fleet_stop(struct be_ctx *ctx, struct rt_server *srv, int n, struct rt_client *cli,
		   struct be_worker **ws);

/* A request payload of @len bytes with the pattern of @seed (st_fill()),
 * and its check. */
void *rt_req(size_t len, uint32_t seed);
#define rt_check st_check

/*
 * rt_echo_calls() - @n echo calls on @ch (at most 30 in flight), pumping
 * @ws (@nws workers) until all completed; fails the test if one fails.
 * The echoes each of the @ns servers @srv answered in @per[i].
 */
void rt_echo_calls(struct be_rpc_chan *ch, struct be_worker **ws, int nws,
		   const struct rt_server *srv, int ns, int n, uint64_t *per);

/* Call results, counted. */
struct rt_result {
	int calls;        /* callbacks seen */
	int status;
	void *reply;
	size_t len;
};
void rt_done_cb(int status, void *reply, size_t len, void *arg); /* arg: rt_result; keeps reply */
bool rt_result_done(void *arg); /* for rt_pump(): the rt_result completed */
/* For rt_pump(): @ch has counted at least @n late replies (answers to
 * calls that had already completed) - the wait for a reply that must
 * arrive and be dropped. */
struct rt_late {
	struct be_rpc_chan *ch;
	uint64_t n;
};
bool rt_late_replies(void *arg); /* arg: struct rt_late */
/* The replicas in @ch's set, and the errors the naming source @nm has
 * counted: what ST_PUMP_WHILE() conditions on membership read. */
uint32_t rt_chan_replicas(struct be_rpc_chan *ch);
/* The stats of replica @i of @ch (fails the test if there is none). */
struct be_rpc_replica_stats rt_chan_replica(struct be_rpc_chan *ch, unsigned int i);
uint64_t rt_naming_errors(struct be_rpc_naming *nm);

/* ---- replicas in child processes */

struct rt_replica {
	pid_t pid;
	int naddrs;
	char addrs[4][BE_RPC_ADDR_MAX];
	int ctl;                  /* write end of the control pipe */
};

/*
 * Fork a replica listening on each transport of @transports (comma
 * separated, e.g. "shm,tcp"), each on a worker of its own, with the echo
 * handler and a "slow echo" (RT_SLOW: answers after the number of
 * microseconds in the first 4 bytes, at millisecond resolution), then
 * report its addresses. Control bytes on the pipe: 'd' drain on, 'u'
 * drain off, 'c' break the first path (its worker goes, with every
 * Engine on it: a broken RDMA path), 'o' open it again (same address),
 * 'f' freeze the first path (its worker is no longer progressed: its
 * traffic goes unanswered while its Engines stay up, as on a path that
 * drops packets), 't' thaw it.
 */
#define RT_SLOW 2u
void rt_replica_start(struct rt *t, struct rt_replica *r, const char *transports);
void rt_replica_ctl(struct rt_replica *r, char cmd);
/* A record naming replica @r as @name with all its addresses. */
void rt_replica_record(const struct rt_replica *r, const char *name, struct be_rpc_record *out);
void rt_replica_kill(struct rt_replica *r, int sig);
void rt_replica_reap(struct rt_replica *r);

/*
 * A stream of calls kept @depth deep on a channel, every completion
 * checked to come exactly once. rt_stream_fill() tops it up (call it from
 * an rt_pump() condition); calls refused at once (-EHOSTUNREACH: nothing
 * usable) are counted, not retried, until the next fill.
 */
struct rt_stream {
	struct be_rpc_chan *ch;
	uint32_t service, method, flags, timeout_us;
	uint32_t slow_us;         /* payload of RT_SLOW */
	int depth;
	int inflight;
	uint64_t sent, done, ok, timeouts, other, refused;
	int last_err;
	uint64_t mark_ms;         /* set by the test (rt_ms()), for the log */
	uint64_t last_fail_ms;    /* when the last call failed (for the log) */
	double mark_us;           /* set by the test (rt_us()): calls in flight then are "caught" */
	double caught_done_us;    /* when the last caught call succeeded */
};
void rt_stream_fill(struct rt_stream *s);
/* Run until nothing is in flight. */
void rt_stream_drain(struct rt_stream *s, struct be_worker **ws, int n);

/*
 * Replicas in other processes and a client of them. rt_env_fork() forks
 * @n (at most RT_ENV_MAX) replicas serving @transports (NULL: the test's
 * transport) into reps[]; call it before any context exists in this
 * process. rt_env_open() then makes the client: context, worker, be_rpc
 * with @cfg, one channel over the replicas (named r0, r1, ..., each with
 * all its paths). rt_env_close() undoes it and reaps the replicas.
 */
#define RT_ENV_MAX 4
struct rt_env {
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_rpc *rpc;
	struct be_rpc_chan *ch;
	struct rt_replica reps[RT_ENV_MAX];
	int n;
};
void rt_env_fork(struct rt *t, struct rt_env *e, int n, const char *transports);
void rt_env_open(struct rt *t, struct rt_env *e, const struct be_rpc_config *cfg);
/* The records of the replicas as rt_env_open() names them, in @recs[0..n). */
void rt_env_records(const struct rt_env *e, struct be_rpc_record *recs);
void rt_env_close(struct rt_env *e);

/* A stream of @method calls with @flags, @depth deep, on @ch. */
void rt_stream_init(struct rt_stream *s, struct be_rpc_chan *ch, uint32_t method, uint32_t flags,
		    int depth);

/*
 * rt_path_switch() - the scenario of a replica whose preferred path breaks
 * and is repaired: one replica in another process serving @paths (two,
 * e.g. "shm,tcp"), a stream of idempotent calls, first with the test's
 * generous deadline until the first path answers (warm-up), then with
 * deadlines of @timeout_us; @act(@rep, false, @arg) breaks the first
 * path; once the calls run over the second, @act(@rep, true, @arg)
 * repairs it. Checks that no call fails and that the replica moves over
 * and back (counted as TCP fallbacks and their returns when the first
 * path is not tcp and the second is, else as port switches and returns;
 * at least once, as often back as over), prints the times from the break
 * to the first answer over the second path and from the repair to the
 * first answer over the first (rt_failover_report(): @fault, detect_ms,
 * recover_ms), and leaves the channel's counters in *@out for more
 * checks.
 */
void rt_path_switch(struct rt *t, const char *paths, uint32_t timeout_us,
		    void (*act)(struct rt_replica *rep, bool repair, void *arg), void *arg,
		    const char *fault, struct be_rpc_chan_stats *out);
/* rt_path_switch() over the test's transport, then tcp; the first path
 * breaks with rt_replica_ctl(@brk) and is repaired with @repair. */
void rt_path_switch_ctl(struct rt *t, uint32_t timeout_us, char brk, char repair,
			const char *fault, struct be_rpc_chan_stats *out);

/* How much slower than the host this runs: 5 inside the Soft-RoCE guest
 * (an emulated CPU, $BE_RXE_GUEST), else 1. Tests about failover scale
 * their deadlines by it, so that a deadline means the same thing there. */
uint32_t rt_slow_factor(void);

/* Monotonic milliseconds; microseconds. */
uint64_t rt_ms(void);
double rt_us(void);

/*
 * With --json, one line on stdout for bench/compare-rpc.sh: test
 * "failover", impl "be", the transport, @fault, the replica's @paths, the
 * milliseconds from the fault to its detection (@detect_ms) and to
 * recovery (@recover_ms; < 0: none), the calls of @st and how many failed
 * (done - ok + refused), and the deadline. Printed before the test's
 * checks, so a run that loses calls still reports them.
 */
void rt_failover_report(const struct rt *t, const char *fault, const char *paths,
			double detect_ms, double recover_ms, const struct rt_stream *st,
			uint32_t timeout_us);

#endif
