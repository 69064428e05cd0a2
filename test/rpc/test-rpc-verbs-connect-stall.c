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
 * The gate also watches the connecting worker's own thread for device
 * discovery: from the first verbs call until its reply, that thread must
 * open none of libibverbs' provider libraries, /sys/class/infiniband_verbs
 * or a /dev/infiniband/uverbs device (listing and opening devices, which
 * took 0.4-1 s in the guest, the providers' loading most of it). The
 * context opens its devices when it is created; before that, the first
 * connect opened them on the worker.
 *
 * Then two connects from fresh workers, each held at the gate until the
 * test lets it go: one whose socket is closed while held (the Engine
 * goes; the conn is freed by the connect thread once the step returns,
 * which ASan would see go wrong), and one held past its connect timeout
 * (on_close reports the timeout while the step is still held, the tcp
 * calls going on meanwhile).
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
#include "seccomp.h"

#define GATE_PATH "/dev/infiniband/rdma_cm"
#define GATE_CALLS 50
#define GATE_MAX_HELD 16

static atomic_ullong calls_ok;     /* tcp calls completed, mirrored by the pump */
static atomic_int gate_fd = -1;    /* the seccomp listener, once installed */
/* Armed, the gate holds opens of GATE_PATH until calls_ok reaches
 * gate_need (or the guard runs out), then disarms itself. */
static atomic_int gate_armed;
static atomic_ullong gate_need;
static atomic_int gate_held;       /* opens held since armed */
static atomic_int gate_by_calls;   /* they were let through by the calls */
/* While watch_tid is set, opens by that thread of a path of device
 * discovery are counted, the first one's path kept. */
static atomic_int watch_tid;
static atomic_int watch_opens;
static char watch_first[256];      /* written by the gate before the count */

/* Hold the next opens of GATE_PATH until @need calls completed. */
static void gate_arm(unsigned long long need)
{
	atomic_store(&gate_held, 0);
	atomic_store(&gate_by_calls, 0);
	atomic_store(&gate_need, need);
	atomic_store(&gate_armed, 1);
}

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

/* Does opening @path list or open RDMA devices (libibverbs' provider
 * libraries, its sysfs class, a uverbs device)? */
static bool gate_discovery(const char *path)
{
	return strstr(path, "/libibverbs/") || strstr(path, "infiniband_verbs") ||
	       strstr(path, "/dev/infiniband/uverbs");
}

/* The gate thread: answers every open() of the filtered threads; while
 * armed, holds those of GATE_PATH until gate_need calls completed (or the
 * guard ran out), then lets them go and disarms. */
static void *gate_main(void *arg)
{
	const char *h = getenv("ST_HANG_S");
	uint64_t guard_us = (uint64_t)(h ? atoi(h) : 60) * 1000000u / 3, first = 0;
	uint64_t held[GATE_MAX_HELD];
	int mem = *(int *)arg, nheld = 0, fd, i;

	while ((fd = atomic_load(&gate_fd)) < 0)
		usleep(1000);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct seccomp_notif n;
		bool by_calls;
		char path[256];

		by_calls = atomic_load(&calls_ok) >= atomic_load(&gate_need);
		if (nheld && (by_calls || now_us() - first > guard_us)) {
			atomic_store(&gate_by_calls, by_calls);
			atomic_store(&gate_armed, 0);
			for (i = 0; i < nheld; i++)
				gate_continue(fd, held[i]);
			nheld = 0;
		}
		if (poll(&p, 1, 1) <= 0)
			continue;
		memset(&n, 0, sizeof(n));
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
			continue;
		gate_path(mem, &n, path, sizeof(path));
		if (atomic_load(&watch_tid) == (int)n.pid && gate_discovery(path)) {
			if (!atomic_load(&watch_opens))
				snprintf(watch_first, sizeof(watch_first), "%s", path);
			atomic_fetch_add(&watch_opens, 1);
		}
		if (!atomic_load(&gate_armed) || strcmp(path, GATE_PATH) ||
		    nheld == GATE_MAX_HELD) {
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
		TEST_SECCOMP_HEAD,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	long fd = test_seccomp(f, sizeof(f) / sizeof(f[0]), SECCOMP_FILTER_FLAG_NEW_LISTENER);

	if (fd < 0)
		return (int)fd;
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

/* A socket's on_close, recorded. */
struct closed {
	int calls;
	int reason;
};

static void on_close_rec(struct be_sock *s, int reason, void *user)
{
	struct closed *c = user;

	(void)s;
	c->calls++;
	c->reason = reason;
}

/* Progress @w2 and the tcp stream's worker @w once. */
static void pump_two(struct be_worker *w, struct be_worker *w2, struct rt_stream *st)
{
	uint64_t dummy = 0;

	ASSERT_GE(be_worker_progress(w2), 0);
	pump_once(w, st, &dummy);
}

/*
 * A verbs connect from a fresh worker of @ctx to @vaddr, held at the gate
 * until told: *@s is the connecting socket, with on_close into @c. The
 * tcp stream @st of @w goes on meanwhile.
 */
static void held_connect(struct be_ctx *ctx, struct be_worker *w, struct rt_stream *st,
			 const char *vaddr, struct be_worker **w2, struct be_sock **s,
			 struct closed *c)
{
	const struct be_sock_cbs cbs = { .on_close = on_close_rec };
	uint64_t t0 = now_us();

	ASSERT_OK(be_worker_create(ctx, w2));
	gate_arm(~0ull); /* until told */
	ASSERT_OK(be_sock_connect(*w2, vaddr, &cbs, c, s));
	while (!atomic_load(&gate_held)) {
		pump_two(w, *w2, st);
		ASSERT_LT(now_us() - t0, 60000000u);
	}
}

/* Let the gate go once GATE_CALLS more calls of @st completed. */
static void gate_release_after_calls(struct be_worker *w, struct be_worker *w2,
				     struct rt_stream *st)
{
	uint64_t t0 = now_us();

	atomic_store(&gate_need, st->ok + GATE_CALLS);
	while (atomic_load(&gate_armed)) {
		pump_two(w, w2, st);
		ASSERT_LT(now_us() - t0, 60000000u);
	}
	ASSERT(atomic_load(&gate_by_calls));
}

struct client_args {
	struct rt *t;
	bool gate;
	const struct be_rpc_record *tcp_rec, *verbs_rec;
	bool skip;
};

static void *client_main(void *arg);

int main(int argc, char **argv)
{
	struct be_rpc_record tcp_rec, verbs_rec;
	struct client_args a = { 0 };
	struct rt_replica rep;
	pthread_t gthr, cthr;
	bool gate = true;
	int mem = -1, i;
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
	}
	/* The client runs on a thread of its own, which alone is filtered
	 * (with the threads it starts): the main thread stays free for what
	 * runs at exit (LeakSanitizer stops every thread, the gate's too,
	 * and then reads /proc). */
	a.t = &t;
	a.gate = gate;
	a.tcp_rec = &tcp_rec;
	a.verbs_rec = &verbs_rec;
	ASSERT_OK(pthread_create(&cthr, NULL, client_main, &a));
	ASSERT_OK(pthread_join(cthr, NULL));
	rt_replica_kill(&rep, SIGKILL);
	rt_replica_reap(&rep);
	if (a.skip)
		return 77;
	return 0;
}

static void *client_main(void *arg)
{
	struct client_args *a = arg;
	struct be_rpc_record tcp_rec = *a->tcp_rec, verbs_rec = *a->verbs_rec;
	bool gate = a->gate;
	struct rt_result vres = { 0 };
	struct be_rpc_chan *tch, *vch;
	uint64_t longest = 0, t0, t_start, hang;
	unsigned long long ok0;
	struct rt_stream st;
	struct rt_client cli;
	struct be_ctx *ctx;
	struct rt t = *a->t;
	int rc, i;

	if (gate) {
		rc = gate_install();
		if (rc) {
			fprintf(stderr, "seccomp user notification: %s: skipped\n", strerror(-rc));
			a->skip = true;
			return NULL;
		}
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

	if (gate) {
		gate_arm(st.ok + GATE_CALLS);
		atomic_store(&watch_tid, (int)syscall(SYS_gettid)); /* the worker's */
	}

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
		atomic_store(&watch_tid, 0);
		if (atomic_load(&watch_opens))
			TEST_FAIL("the worker's thread listed or opened RDMA devices during its "
				  "first verbs connect: %d open(s), the first of %s",
				  atomic_load(&watch_opens), watch_first);
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

	if (gate) {
		struct be_worker *w2;
		struct be_config cfg3;
		struct be_ctx *ctx3;
		struct closed c2 = { 0 }, c3 = { 0 };
		struct be_sock *s2, *s3;
		unsigned long long ok1;

		/* Abandoned while its step is held: the socket closes, the
		 * Engine goes, the conn is freed once the step returns (by the
		 * connect thread; ASan would see a leak or a second free). */
		held_connect(ctx, cli.w, &st, verbs_rec.addrs[0], &w2, &s2, &c2);
		be_sock_close(s2);
		t0 = now_us();
		while (be_worker_engine_count(w2)) {
			pump_two(cli.w, w2, &st);
			ASSERT_LT(now_us() - t0, hang);
		}
		gate_release_after_calls(cli.w, w2, &st);
		for (i = 0; i < 50; i++)
			pump_two(cli.w, w2, &st);
		ASSERT_EQ(c2.calls, 0); /* never after be_sock_close() */
		ASSERT_OK(be_worker_destroy(w2));
		fprintf(stderr, "abandoned connect: freed after its held step\n");

		/* Held past its connect timeout: reported on time (the step
		 * still held), the worker's other calls going on meanwhile;
		 * the conn is dropped once the step returns. */
		cfg3 = t.cfg;
		cfg3.connect_timeout_ms = 2000;
		ASSERT_OK(be_ctx_create(&cfg3, &ctx3));
		held_connect(ctx3, cli.w, &st, verbs_rec.addrs[0], &w2, &s3, &c3);
		ok1 = st.ok;
		t0 = now_us();
		while (!c3.calls) {
			pump_two(cli.w, w2, &st);
			ASSERT_LT(now_us() - t0, hang);
		}
		fprintf(stderr, "held connect: on_close %d (%s) while held, %llu tcp calls meanwhile\n",
			c3.reason, strerror(c3.reason < 0 ? -c3.reason : c3.reason),
			(unsigned long long)(st.ok - ok1));
		ASSERT_EQ(c3.calls, 1);
		ASSERT_LT(c3.reason, 0);
		ASSERT(atomic_load(&gate_armed)); /* its step is still held */
		ASSERT_GT(st.ok, ok1);
		be_sock_close(s3);
		gate_release_after_calls(cli.w, w2, &st);
		for (i = 0; i < 50; i++)
			pump_two(cli.w, w2, &st);
		ASSERT_EQ(c3.calls, 1);
		ASSERT_OK(be_worker_destroy(w2));
		ASSERT_OK(be_ctx_destroy(ctx3));
	}

	rt_stream_drain(&st, &cli.w, 1);
	ASSERT_EQ(st.ok, st.done);
	be_rpc_chan_destroy(vch);
	be_rpc_chan_destroy(tch);
	rt_client_stop(&cli);
	be_ctx_destroy(ctx);
	return NULL;
}
