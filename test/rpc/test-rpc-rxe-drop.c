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
static pid_t act_pid;
static bool link_fault;

/* The last change of addresses has ended, and well. */
static void act_wait(void)
{
	int st;

	if (!act_pid)
		return;
	ASSERT_EQ(waitpid(act_pid, &st, 0), act_pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		TEST_FAIL("changing the addresses failed (status %d)", st);
	act_pid = 0;
}

/*
 * Remove (or give back) the address of every NIC in --drop, in a child
 * process: starting `ip` in the guest takes a second or more, and this
 * thread must keep the client's worker going meanwhile, as an
 * application's would be while a NIC fails under it.
 */
static void act(struct rt_replica *rep, bool repair, void *arg)
{
	char cmd[256], var[16];
	size_t off = 0;
	int i;

	(void)rep;
	(void)arg;
	act_wait();
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
	act_pid = fork();
	ASSERT(act_pid >= 0);
	if (!act_pid) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
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
	be_rpc_config_init(&def); /* the default deadline */
	rt_path_switch(&t, paths, rt_slow_factor() * def.timeout_us, act, NULL,
		       ndrop > 1 ? "rdma-gone" : "port-gone", &cs);
	act_wait();
	return 0;
}
