/*
 * Check the failover ladder over Soft-RoCE when a NIC goes away under a
 * stream of calls, in the guest with two NICs (test/rxe/rxe-run --nics 2:
 * rxe0 on eth0 at $BE_RXE_IP0, rxe1 on eth1 at $BE_RXE_IP1). A replica in
 * another process serves two paths, --paths FIRST,SECOND in rtest's names
 * ("verbs0", "verbs1", "tcp": the loopback); the client's one context
 * opens both RDMA devices and uses each for the addresses on it:
 *
 *   --paths verbs0,verbs1 --drop 0   port switch: rxe0 -> rxe1 and back
 *   --paths verbs0,tcp --drop 0,1    TCP fallback: no RDMA device works,
 *                                    the calls go over tcp; RDMA back ->
 *                                    they return to rxe0
 *
 * The calls carry the default deadline (scaled to the guest,
 * rt_slow_factor()). Each NIC in --drop loses its address (ip addr del),
 * so rxe can no longer route from it: the QPs on it fail at their next
 * send and new connections to it do not resolve, as when a real port goes
 * away. Taking the link down instead (--link, not registered) leaves the
 * repaired port unusable for connects from any process, rping's too
 * (docs/RPC.md, "Verbs connects in the guest"). The calls go on over the second path without a
 * failure; once the addresses are back they return to the first
 * (rt_path_switch(): no call failed, moved over and back, counted as port
 * switches or as a fallback and its return).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtest.h"

static int drop_nic[2];
static int ndrop;
static bool link_fault;
static int act_cmd = -1, act_done = -1; /* pipes to and from the actor */
static int act_queued;                  /* commands sent, status not read */

/*
 * The actor: a process forked before the client exists that runs the
 * command lines it reads (one per write, NUL-terminated) with sh, one
 * after the other, and answers each with its status (an int). The
 * client's thread only writes to a pipe and never waits for a command:
 * the repair is asked while the break's `ip` may still run (it takes a
 * second or more in the guest; the calls move over as soon as the first
 * NIC's address is gone), and it queues behind it. The test used to wait
 * for the break's child there (waitpid() on the thread that drives the
 * client's worker), which held every path of the worker for up to 1.4 s,
 * tcp included: the calls in flight over tcp outlived their deadline.
 */
static void actor_start(void)
{
	int to[2], from[2];
	pid_t pid;

	ASSERT_OK(pipe(to));
	ASSERT_OK(pipe(from));
	pid = fork();
	ASSERT(pid >= 0);
	if (!pid) {
		char cmd[512];
		size_t n = 0;

		close(to[1]);
		close(from[0]);
		/* A byte at a time: two commands may be in the pipe at once. */
		while (read(to[0], &cmd[n], 1) == 1) {
			int st;

			if (cmd[n] && ++n < sizeof(cmd))
				continue;
			cmd[n < sizeof(cmd) ? n : sizeof(cmd) - 1] = '\0';
			n = 0;
			st = system(cmd);
			if (write(from[1], &st, sizeof(st)) != sizeof(st))
				_exit(1);
		}
		_exit(0); /* the client is gone */
	}
	close(to[0]);
	close(from[1]);
	act_cmd = to[1];
	act_done = from[0];
}

/* Every change of addresses asked has ended, and well. */
static void act_wait(void)
{
	int st;

	for (; act_queued; act_queued--) {
		ASSERT_EQ(read(act_done, &st, sizeof(st)), (ssize_t)sizeof(st));
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			TEST_FAIL("changing the addresses failed (status %d)", st);
	}
}

/*
 * Remove (or give back) the address of every NIC in --drop, in the actor:
 * starting `ip` in the guest takes a second or more, and this thread must
 * keep the client's worker going meanwhile, as an application's would be
 * while a NIC fails under it.
 */
static void act(struct rt_replica *rep, bool repair, void *arg)
{
	char cmd[256], var[16];
	size_t off = 0;
	int i;

	(void)rep;
	(void)arg;
	for (i = 0; i < ndrop; i++) {
		snprintf(var, sizeof(var), "BE_RXE_IP%d", drop_nic[i]);
		ASSERT(getenv(var));
		if (link_fault)
			off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "%sip link set eth%d %s",
						i ? " && " : "", drop_nic[i], repair ? "up" : "down");
		else
			off += (size_t)snprintf(cmd + off, sizeof(cmd) - off,
						"%sip addr %s %s/24 dev eth%d", i ? " && " : "",
						repair ? "add" : "del", getenv(var), drop_nic[i]);
		ASSERT_LT(off, sizeof(cmd));
	}
	ASSERT_EQ(write(act_cmd, cmd, strlen(cmd) + 1), (ssize_t)(strlen(cmd) + 1));
	act_queued++;
}

/* The library's log with a clock and the process (client or replica):
 * what a guest run shows when it fails. */
static void logts(int level, const char *msg)
{
	fprintf(stderr, "%llu %d be[%d]: %s\n", (unsigned long long)(rt_ms() % 100000),
		(int)getpid(), level, msg);
}

int main(int argc, char **argv)
{
	const char *paths = "verbs0,verbs1", *drop = "0";
	struct be_rpc_chan_stats cs;
	struct be_rpc_config def;
	struct rt t;
	int i;

	rt_init(&t, argc, argv);
	be_log_set_fn(logts);
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--paths") && i + 1 < argc)
			paths = argv[++i];
		else if (!strcmp(argv[i], "--drop") && i + 1 < argc)
			drop = argv[++i];
		else if (!strcmp(argv[i], "--link"))
			link_fault = true;
	if (!getenv("BE_RXE_GUEST") || !getenv("BE_RXE_IP1")) {
		fprintf(stderr, "needs the Soft-RoCE guest with two NICs (rxe-run --nics 2): "
				"skipped\n");
		return 77;
	}
	for (; *drop && ndrop < 2; drop += strspn(drop, ",")) {
		ASSERT(*drop == '0' || *drop == '1');
		drop_nic[ndrop++] = *drop - '0';
		drop += strcspn(drop, ",");
	}
	actor_start();
	be_rpc_config_init(&def); /* the default deadline */
	rt_path_switch(&t, paths, rt_slow_factor() * def.timeout_us, act, NULL,
		       ndrop > 1 ? "rdma-gone" : "port-gone", &cs);
	act_wait();
	return 0;
}
