/*
 * Check that a verbs connect that is slow to set up does not hold its
 * worker: while a blocking step of the connect waits in the kernel, RPC
 * calls over tcp on the same worker keep completing, and the verbs call
 * that asked for the connect completes once the step is let through.
 *
 * The slow step is an open() of /dev/infiniband/rdma_cm (the rdma_cm
 * device: librdmacm's start and every event channel open it) held in the
 * kernel by a seccomp user notification, as a slow device or a security
 * module would hold it: every open() of the test's threads is reported
 * to a gate thread (started before the filter, so not filtered itself),
 * which lets the others go on at once and holds the first one of that
 * device until GATE_CALLS more tcp calls of the connecting worker have
 * completed, or until the hang guard (ST_HANG_S / 3) runs out: then the
 * test fails. Before connection setup moved off the worker, that worker
 * itself sat in the open (the device lookup's synchronous cm_id, then the
 * event channel), so no call could complete until the guard let it go.
 *
 * Soft-RoCE guest only (label rxe): the server, a replica in a child
 * process, listens on tcp and on $BE_RXE_IP0 before the gate is set. The
 * client is a fresh process as far as verbs go: this is its first verbs
 * connect. No timing assertion. On stderr: the longest the worker was
 * held between two progress calls while that connect was set up, and how
 * many tcp calls completed meanwhile; --no-gate measures it without the
 * gate (docs/TRANSPORTS.md, "Connecting").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rtest.h"

#define GATE_PATH "/dev/infiniband/rdma_cm"
#define GATE_CALLS 50
#define GATE_MAX_HELD 16

static atomic_ullong calls_ok;     /* tcp calls completed, mirrored by the pump */
static atomic_int gate_held;       /* opens of GATE_PATH the gate held */
static atomic_int gate_by_calls;   /* they were let through by the calls */
static atomic_int gate_fd = -1;    /* the seccomp listener, once installed */
static atomic_ullong gate_base;

static uint64_t now_us(void)
{
	return (uint64_t)rt_us();
}

/* Let a reported open() go on as asked. */
static void gate_continue(int fd, uint64_t id)
{
	struct seccomp_notif_resp r = { .id = id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };

	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &r) < 0 && errno != ENOENT)
		perror("SECCOMP_IOCTL_NOTIF_SEND");
}

/* The path an open()/openat() reported by @n names, read from our own
 * memory (the caller is a thread of this process). */
static void gate_path(int mem, const struct seccomp_notif *n, char *buf, size_t len)
{
	uint64_t addr = n->data.nr == SYS_openat ? n->data.args[1] : n->data.args[0];
	ssize_t got;

	buf[0] = '\0';
	got = pread(mem, buf, len - 1, (off_t)addr);
	if (got < 0)
		got = pread(mem, buf, 32, (off_t)addr); /* near the end of a page */
	buf[got > 0 ? got : 0] = '\0';
	buf[len - 1] = '\0';
}

/* The gate thread: answers every open() of the filtered threads; holds
 * those of GATE_PATH until GATE_CALLS more calls completed (or the guard
 * ran out), then lets every later one through at once. */
static void *gate_main(void *arg)
{
	const char *h = getenv("ST_HANG_S");
	uint64_t guard_us = (uint64_t)(h ? atoi(h) : 60) * 1000000u / 3, first = 0;
	uint64_t held[GATE_MAX_HELD];
	int mem = *(int *)arg, nheld = 0, fd, i;
	bool released = false;

	while ((fd = atomic_load(&gate_fd)) < 0)
		usleep(1000);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct seccomp_notif n;
		char path[256];

		if (nheld && !released &&
		    (atomic_load(&calls_ok) >= atomic_load(&gate_base) + GATE_CALLS ||
		     now_us() - first > guard_us)) {
			if (atomic_load(&calls_ok) >= atomic_load(&gate_base) + GATE_CALLS)
				atomic_store(&gate_by_calls, 1);
			released = true;
			for (i = 0; i < nheld; i++)
				gate_continue(fd, held[i]);
		}
		if (poll(&p, 1, 1) <= 0)
			continue;
		memset(&n, 0, sizeof(n));
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
			continue;
		gate_path(mem, &n, path, sizeof(path));
		if (released || strcmp(path, GATE_PATH) || nheld == GATE_MAX_HELD) {
			gate_continue(fd, n.id);
			continue;
		}
		if (!nheld)
			first = now_us();
		held[nheld++] = n.id;
		atomic_fetch_add(&gate_held, 1);
	}
	return NULL;
}

/* Report every open() and openat() of this thread and the threads it
 * starts from now on to the gate. 0, or -errno (no seccomp here). */
static int gate_install(void)
{
#if defined(__x86_64__)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	long fd;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
		     &prog);
	if (fd < 0)
		return -errno;
	atomic_store(&gate_fd, (int)fd);
	return 0;
#else
	return -ENOSYS; /* the guest is x86-64 (docs/SOFT-ROCE.md) */
#endif
}

/* Progress @w once and keep the tcp stream @st full; the longest pass is
 * the longest the worker was held. */
static void pump_once(struct be_worker *w, struct rt_stream *st, uint64_t *longest)
{
	uint64_t t0 = now_us();

	ASSERT_GE(be_worker_wait(w, 1), 0);
	rt_stream_fill(st);
	atomic_store(&calls_ok, st->ok);
	if (now_us() - t0 > *longest)
		*longest = now_us() - t0;
}

int main(int argc, char **argv)
{
	bool gate = true;
	struct be_rpc_record tcp_rec, verbs_rec;
	struct be_rpc_chan *tch, *vch;
	struct rt_result vres = { 0 };
	struct rt_replica rep;
	struct rt_stream st;
	struct rt_client cli;
	struct be_ctx *ctx;
	uint64_t longest = 0, t0, t_start, hang;
	unsigned long long ok0;
	pthread_t gthr;
	int mem = -1, rc, i;
	struct rt t;

	rt_init(&t, argc, argv);
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--no-gate"))
			gate = false;
	if (strcmp(t.transport, "verbs") || !getenv("BE_RXE_IP0")) {
		fprintf(stderr, "needs --transport verbs in the Soft-RoCE guest: skipped\n");
		return 77;
	}
	/* The replica first: no context may exist in the parent at fork. */
	rt_replica_start(&t, &rep, "tcp,verbs");
	rt_replica_record(&rep, "r0", &tcp_rec);
	verbs_rec = tcp_rec;
	tcp_rec.naddrs = 1;
	ASSERT(!strncmp(tcp_rec.addrs[0], "tcp://", 6));
	snprintf(verbs_rec.addrs[0], sizeof(verbs_rec.addrs[0]), "%s", rep.addrs[1]);
	verbs_rec.naddrs = 1;
	ASSERT(!strncmp(verbs_rec.addrs[0], "verbs://", 8));

	if (gate) {
		/* The gate thread first: it must not be filtered itself. */
		mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
		ASSERT_GE(mem, 0);
		ASSERT_OK(pthread_create(&gthr, NULL, gate_main, &mem));
		ASSERT_OK(pthread_detach(gthr));
		rc = gate_install();
		if (rc) {
			fprintf(stderr, "seccomp user notification: %s: skipped\n", strerror(-rc));
			rt_replica_kill(&rep, SIGKILL);
			rt_replica_reap(&rep);
			return 77;
		}
		atomic_store(&gate_base, ~0ull >> 1); /* nothing held before the connect */
	}

	/* A client whose worker has used no verbs yet, with a stream of tcp
	 * calls, one at a time, so each completion needs a progress call. */
	t.cfg.connect_timeout_ms = 120000;
	ASSERT_OK(be_ctx_create(&t.cfg, &ctx));
	rt_client_start(&t, &cli, ctx);
	ASSERT_OK(be_rpc_chan_create(cli.rpc, &tcp_rec, 1, &tch));
	ASSERT_OK(be_rpc_chan_create(cli.rpc, &verbs_rec, 1, &vch));
	rt_stream_init(&st, tch, RT_ECHO, BE_RPC_IDEMPOTENT, 1);
	hang = 60000000;
	t_start = now_us();
	while (st.ok < 20) {
		pump_once(cli.w, &st, &longest);
		ASSERT_LT(now_us() - t_start, hang);
	}

	if (gate)
		atomic_store(&gate_base, st.ok);

	/* The first verbs call connects the verbs path: the worker's first
	 * verbs connect, held at the gate. */
	ok0 = st.ok;
	longest = 0;
	t0 = now_us();
	ASSERT_OK(be_rpc_call(vch, RT_SVC, RT_ECHO, rt_req(64, 3), 64, NULL, rt_done_cb, &vres,
			      NULL));
	if (now_us() - t0 > longest)
		longest = now_us() - t0;
	while (!vres.calls) {
		pump_once(cli.w, &st, &longest);
		ASSERT_LT(now_us() - t0, hang);
	}
	fprintf(stderr,
		"first verbs connect: %.1f ms to the first verbs reply, worker held at most "
		"%.1f ms, %llu tcp calls completed meanwhile%s\n",
		(now_us() - t0) / 1000.0, longest / 1000.0, (unsigned long long)(st.ok - ok0),
		gate ? " (through the gate)" : "");
	if (gate) {
		fprintf(stderr, "gate: %d open(s) of %s held\n", atomic_load(&gate_held), GATE_PATH);
		/* The connect did wait at the gate, and the worker went on. */
		ASSERT_GE(atomic_load(&gate_held), 1);
		if (!atomic_load(&gate_by_calls))
			TEST_FAIL("the worker was held: %d tcp calls did not complete while the "
				  "verbs connect waited to open %s",
				  GATE_CALLS, GATE_PATH);
	}
	ASSERT_EQ(vres.calls, 1);
	ASSERT_EQ(vres.status, 0);
	ASSERT_EQ(vres.len, 64);
	ASSERT(rt_check(vres.reply, vres.len, 3));
	be_rpc_buf_free(vres.reply);

	rt_stream_drain(&st, &cli.w, 1);
	ASSERT_EQ(st.ok, st.done);
	be_rpc_chan_destroy(vch);
	be_rpc_chan_destroy(tch);
	rt_client_stop(&cli);
	be_ctx_destroy(ctx);
	rt_replica_kill(&rep, SIGKILL);
	rt_replica_reap(&rep);
	return 0;
}
