/*
 * pscluster.h - be-ps server processes for the end-to-end tests, and a
 * client of them: each server is the real program, forked and exec'd,
 * listening on a fresh address of the test's transport; the client is a
 * context, a worker driven by the test's thread, a be_rpc, a naming
 * source fed in code, and a be_ps over it. Arguments of every test:
 * --transport tcp|shm (default tcp) and --be-ps PATH (the program).
 */
#ifndef BE_TEST_PS_PSCLUSTER_H
#define BE_TEST_PS_PSCLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <be/be.h>

#include "ps/server.h"
#include "pstest.h"

struct pc_server {
	pid_t pid;
	char addr[BE_RPC_ADDR_MAX];
	char name[BE_RPC_NAME_MAX]; /* replica name in the naming source */
	unsigned int index;         /* in the placement */
	bool replica;
};

struct pc {
	const char *transport;
	const char *be_ps;
	char dir[256];      /* config file, checkpoints */
	char config[300];
	unsigned int naddr;
	struct be_ctx *ctx;
	struct be_worker *w;
	struct be_rpc *rpc;
	struct be_rpc_naming *naming;
	struct be_ps *ps;
};

/* Parse the arguments, make the directory and write @config_text there. */
void pc_init(struct pc *c, int argc, char **argv, const char *config_text);

/* Start server @index (a primary with checkpoints in the test's
 * directory, or a replica following them) and wait for its "ready". */
void pc_server_start(struct pc *c, struct pc_server *s, unsigned int index, bool replica,
		     const char *name);
/* ... with @extra, a NULL-terminated list of more arguments (may be NULL). */
void pc_server_start_args(struct pc *c, struct pc_server *s, unsigned int index, bool replica,
			  const char *name, const char *const *extra);
/* SIGTERM and wait: the server must exit 0. Meanwhile the client's
 * worker (if started) progresses, so the server's clean close completes. */
void pc_server_stop(struct pc *c, struct pc_server *s);
/* SIGKILL and reap. */
void pc_server_kill(struct pc_server *s);
/* The RSS of the server in KiB, from /proc. */
long pc_server_rss_kb(const struct pc_server *s);

/* The client: context, worker, be_rpc, naming with @n servers (primaries
 * name their record "be.ps.<i>" and "be.ps.<i>.primary", replicas only
 * the first), be_ps over it. */
void pc_client_start(struct pc *c, struct pc_server *servers, unsigned int n);
void pc_client_stop(struct pc *c);
/* Put @s's records into the client's naming source with @epoch (a
 * restarted server announces its new address with a higher one). */
void pc_announce(struct pc *c, const struct pc_server *s, uint64_t epoch);

/* A channel straight to one server, for raw calls. */
struct be_rpc_chan *pc_chan(struct pc *c, const struct pc_server *s);

/*
 * A stream of fetches from table 0 (dimension PC_FETCH_DIM) kept in
 * flight on the client: pc_fetches_fill() starts one on each idle slot,
 * @nkey keys (<= PC_FETCH_MAX_KEYS) drawn by @key, with @flags
 * (BE_PS_FRESH, ...) and a 5 s deadline; @check (may be NULL) checks the
 * rows of each answered fetch and fails the test when one is wrong. The
 * test sets @c, @nkey, @key, @check, @flags and @rng; the rest is zero.
 */
#define PC_FETCH_SLOTS 8
#define PC_FETCH_MAX_KEYS 128
#define PC_FETCH_DIM 4
struct pc_fetches;
struct pc_fetch_slot {
	struct pc_fetches *f;
	int busy;
	uint64_t k[PC_FETCH_MAX_KEYS];
	float v[PC_FETCH_MAX_KEYS * PC_FETCH_DIM];
};
struct pc_fetches {
	struct pc *c;
	unsigned int nkey;
	uint32_t flags;
	uint64_t (*key)(struct pc_fetches *f);
	void (*check)(const struct pc_fetch_slot *q, unsigned int nkey);
	uint64_t rng;
	uint64_t done, failed; /* fetches answered, of them with an error */
	int last_err;
	struct pc_fetch_slot q[PC_FETCH_SLOTS];
};

void pc_fetches_fill(struct pc_fetches *f);
/* Fill and wait (be_worker_wait, 10 ms) until @goal fetches are done. */
void pc_fetches_run(struct pc_fetches *f, uint64_t goal);
/* Wait until no fetch is in flight; print the counts; fail the test,
 * naming the last error, if any fetch failed. */
void pc_fetches_finish(struct pc_fetches *f);

/* Remove the directory. */
void pc_fini(struct pc *c);

#endif
