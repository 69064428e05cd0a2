/*
 * Check that a peer killed in the middle of a transfer is detected: the
 * server (a child process) is SIGKILLed while the client keeps streaming
 * WRITE_WITH_IMMs into its memory; the client sees DISCONNECTED on its
 * evch, its in-flight WRs complete (with errors once the conn is down),
 * and posts afterwards flush. Nothing hangs.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xtest.h"

#define TV_REGION (1u << 20) /* the test's registered memory */
#define TV_RECV_SIZE 4096u

static struct xt_mem mem; /* TV_REGION bytes, registered */

#define SRC_OFF (512u << 10)
#define CHUNK (64u << 10)
#define KILL_AFTER 8

struct target {
	uint64_t addr;
	uint32_t rkey;
};

static void child(int argc, char **argv, int wfd)
{
	struct xt e;
	struct xt_side srv;
	struct be_xconn_attr ca = { 0 };
	struct be_xlistener *lst;
	struct be_xevent ev;
	struct be_xwc wc[4];
	struct target t;
	char addr[128], laddr[128];
	int got = 0, r;

	xt_init(&e, argc, argv);
	xt_mem_reg(&e, &mem, TV_REGION);
	xt_side_init(&e, &srv, 256, 64);
	xt_mem_recvs(&srv, &mem, 0, 32, TV_RECV_SIZE);
	snprintf(addr, sizeof(addr), "%s:0", getenv("BE_RXE_IP0"));
	ASSERT_OK(e.ops->listen(srv.ch, addr, 4, &lst));
	ASSERT_OK(e.ops->listener_addr(lst, laddr, sizeof(laddr)));
	ASSERT_EQ(write(wfd, laddr, sizeof(laddr)), (ssize_t)sizeof(laddr));
	ev = xt_side_wait_event(&srv, BE_XEV_CONNECT_REQUEST, 0);
	ca.send_cq = srv.cq;
	ca.recv_cq = srv.cq;
	ca.srq = srv.srq;
	ca.max_send_wr = 16;
	t.addr = (uintptr_t)(mem.p + (256u << 10));
	t.rkey = mem.mr.rkey;
	ASSERT_OK(e.ops->accept(ev.conn, &ca, &t, sizeof(t)));
	xt_side_wait_event(&srv, BE_XEV_ESTABLISHED, 0);
	while (got < KILL_AFTER) {
		r = e.ops->cq_poll(srv.cq, wc, 4);
		ASSERT_OK(r);
		got += r;
	}
	fprintf(stderr, "  server: %d chunks received, dying\n", got);
	raise(SIGKILL);
}

int main(int argc, char **argv)
{
	struct xt e;
	struct xt_side cli;
	struct be_xconn_attr ca = { 0 };
	struct be_xconn *cc;
	struct be_xevent ev;
	struct be_xwc wc[8];
	struct be_xsge sge;
	struct be_xsend_wr w, *bad;
	struct target t;
	char laddr[128];
	int pfd[2], status, inflight = 0, sent = 0, errors = 0, r, i;
	uint64_t end;
	pid_t pid;

	/* Block rkeys (no grant windows): the key goes out with the accept,
	 * before the QP a window would be bound on is ready. */
	setenv("BE_VERBS_MW", "0", 1);
	if (!getenv("BE_RXE_IP0")) {
		fprintf(stderr, "SKIP: run under test/rxe/rxe-run\n");
		return 77;
	}
	ASSERT_OK(pipe(pfd));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		child(argc, argv, pfd[1]);
		_exit(1);
	}
	close(pfd[1]);
	ASSERT_EQ(read(pfd[0], laddr, sizeof(laddr)), (ssize_t)sizeof(laddr));
	close(pfd[0]);

	xt_init(&e, argc, argv);
	xt_mem_reg(&e, &mem, TV_REGION);
	xt_side_init(&e, &cli, 256, 16);
	ca.send_cq = cli.cq;
	ca.recv_cq = cli.cq;
	ca.srq = cli.srq;
	ca.max_send_wr = 16;
	ASSERT_OK(e.ops->connect(cli.ch, laddr, &ca, NULL, 0, &cc));
	ev = xt_side_wait_event(&cli, BE_XEV_ESTABLISHED, 0);
	ASSERT_EQ(ev.priv_len, sizeof(t));
	memcpy(&t, ev.priv, sizeof(t));

	/* Stream until the conn is reported down. */
	end = xt_now_ms() + XT_WAIT_S * 1000;
	for (;;) {
		if (inflight < 4) {
			memset(&w, 0, sizeof(w));
			sge = (struct be_xsge){ (uintptr_t)(mem.p + SRC_OFF), CHUNK, mem.mr.lkey };
			w.wr_id = (uint64_t)sent;
			w.opcode = BE_XWR_WRITE_IMM;
			w.flags = BE_XWR_F_SIGNALED;
			w.sg_list = &sge;
			w.num_sge = 1;
			w.remote_addr = t.addr;
			w.rkey = t.rkey;
			w.imm = (uint32_t)sent;
			r = e.ops->post_send(cc, &w, &bad);
			if (r == 0) {
				inflight++;
				sent++;
			} else {
				ASSERT(r == -ECONNRESET || r == -ENOTCONN);
			}
		}
		r = e.ops->cq_poll(cli.cq, wc, 8);
		ASSERT_OK(r);
		for (i = 0; i < r; i++) {
			inflight--;
			if (wc[i].status != BE_XWC_SUCCESS)
				errors++;
		}
		xt_side_pump(&e, 0);
		if (cli.nev)
			break;
		if (xt_now_ms() > end)
			TEST_FAIL("peer death not detected within %d s", XT_WAIT_S);
	}
	ev = xt_side_wait_event(&cli, BE_XEV_DISCONNECTED, 0);
	ASSERT(ev.conn == cc);
	fprintf(stderr, "  client: %d chunks sent, DISCONNECTED status %d, %d error completions\n",
		sent, ev.status, errors);
	ASSERT_GE(sent, KILL_AFTER);
	/* Every WR in flight completes. */
	end = xt_now_ms() + XT_WAIT_S * 1000;
	while (inflight > 0) {
		r = e.ops->cq_poll(cli.cq, wc, 8);
		ASSERT_OK(r);
		for (i = 0; i < r; i++) {
			inflight--;
			ASSERT(wc[i].conn == cc);
		}
		if (xt_now_ms() > end)
			TEST_FAIL("%d WRs never completed", inflight);
	}
	/* Later posts flush. */
	w.wr_id = 999;
	ASSERT_OK(e.ops->post_send(cc, &w, &bad));
	xt_side_wc(&cli, wc, 1);
	ASSERT_UEQ(wc[0].wr_id, 999);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	e.ops->conn_destroy(cc);
	xt_side_fini(&e, &cli);
	xt_mem_unreg(&mem);
	xt_fini(&e);
	fprintf(stderr, "ok\n");
	return 0;
}
