/*
 * Check that what the acceptor posts right after accept() reaches the
 * connector without being lost and retransmitted. At accept() the
 * acceptor's QP is ready (RTS) but the connector's QP stays in INIT until
 * the connector's process reads the REP (its evch_get): a packet sent
 * before that is dropped by the connector's QP and only the sender's
 * retransmission, an ACK timeout later, delivers it.
 *
 * The test posts SEND, WRITE_WITH_IMM, an inline SEND, an unsignaled
 * WRITE and a signaled SEND on the acceptor's conn before the connector
 * has read its REP, lets them reach the wire (before a fix they would be
 * dropped there), then lets the connector finish. Every message must
 * arrive, in order and intact, and Soft-RoCE's retransmission counter
 * (hw_counters/completer_retry_err: the requester timed out and resent)
 * must not have moved. The ACK timeout is raised to ~4 s
 * (BE_VERBS_ACK_TIMEOUT=20) so that a slow guest cannot cause a
 * retransmission of its own; no time is measured.
 *
 * Then the paths that end a conn before the connector's QP is ready:
 * WRs posted and then disconnect() all complete with WR_FLUSH_ERR
 * (signaled or not, in order) and nothing reaches the connector; WRs
 * posted and then conn_destroy() never complete.
 */
#include <dirent.h>
#include <unistd.h>

#include "xtest.h"

#define TV_REGION (1u << 20) /* the test's registered memory */
#define TV_RECV_SIZE 4096u

static struct xt_mem mem; /* TV_REGION bytes, registered */

#define SRV_RECV_OFF 0              /* 16 receives of the server */
#define CLI_RECV_OFF (128u << 10)   /* 16 receives of the client */
#define SRC_OFF (256u << 10)        /* server's source data */
#define DST_OFF (512u << 10)        /* client's WRITE target */
#define WR_LEN 4096u
#define MAX_CTRS 64

struct ctrs {
	int n;
	char name[MAX_CTRS][256];
	unsigned long long v[MAX_CTRS];
};

/* Every counter of the device's port 1 (rxe: hw_counters). */
static void ctrs_read(const char *dev, struct ctrs *c)
{
	char dir[256], path[512];
	struct dirent *d;
	DIR *dp;

	c->n = 0;
	snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports/1/hw_counters", dev);
	dp = opendir(dir);
	if (!dp)
		TEST_FAIL("%s: %s (not Soft-RoCE?)", dir, strerror(errno));
	while ((d = readdir(dp)) && c->n < MAX_CTRS) {
		FILE *f;

		if (d->d_name[0] == '.' || strcmp(d->d_name, "lifespan") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &c->v[c->n]) == 1) {
			snprintf(c->name[c->n], sizeof(c->name[0]), "%s", d->d_name);
			c->n++;
		}
		fclose(f);
	}
	closedir(dp);
}

/* How much counter @name grew from @a to @b (printing every one that did);
 * fails if @name is not there. */
static unsigned long long ctrs_delta(const struct ctrs *a, const struct ctrs *b,
				     const char *name)
{
	unsigned long long want = 0;
	int i, j, found = 0;

	for (i = 0; i < b->n; i++)
		for (j = 0; j < a->n; j++)
			if (strcmp(a->name[j], b->name[i]) == 0) {
				if (b->v[i] != a->v[j])
					fprintf(stderr, "  counter %s: +%llu\n", b->name[i],
						b->v[i] - a->v[j]);
				if (strcmp(b->name[i], name) == 0) {
					want = b->v[i] - a->v[j];
					found = 1;
				}
			}
	if (!found)
		TEST_FAIL("no counter %s", name);
	return want;
}

static void post(struct be_xconn *c, uint64_t wr_id, enum be_xwr_opcode op, unsigned flags,
		 size_t off, uint32_t len, uint64_t raddr, uint32_t imm)
{
	ASSERT_OK(xt_mem_post(c, op, &mem, off, len, raddr, mem.mr.rkey, imm, flags, wr_id));
}

static struct be_xconn_attr attr_of(struct xt_side *s)
{
	struct be_xconn_attr a = { 0 };

	a.send_cq = s->cq;
	a.recv_cq = s->cq;
	a.srq = s->srq;
	a.max_send_wr = 16;
	a.max_inline = 64;
	return a;
}

/* Up to the CONNECT_REQUEST: the connector has sent its REQ and waits for
 * the REP, which it reads only at its next evch_get. */
static struct be_xconn *request(struct xt *e, struct xt_side *cli, struct xt_side *srv,
				const char *laddr, struct be_xconn **cc)
{
	struct be_xconn_attr ca = attr_of(cli);
	struct be_xevent ev;

	ASSERT_OK(e->ops->connect(cli->ch, laddr, &ca, NULL, 0, cc));
	ev = xt_side_wait_event(srv, BE_XEV_CONNECT_REQUEST, 1);
	return ev.conn;
}

static void accept_now(struct xt *e, struct xt_side *srv, struct be_xconn *sc)
{
	struct be_xconn_attr sa = attr_of(srv);
	struct be_xevent ev;

	ASSERT_OK(e->ops->accept(sc, &sa, NULL, 0));
	/* The acceptor's ESTABLISHED comes at once: only its own evch is
	 * read, the connector has not seen the REP. */
	ev = xt_side_wait_event(srv, BE_XEV_ESTABLISHED, 0);
	ASSERT(ev.conn == sc);
}

int main(int argc, char **argv)
{
	struct xt e;
	struct xt_side cli, srv;
	struct be_xlistener *lst;
	struct be_xconn *cc, *sc;
	struct be_xwc wc[8], rx[8];
	struct be_xevent ev;
	struct ctrs before, after;
	const char *dev;
	char addr[128], laddr[128];
	int got_rx = 0, got_tx = 0, i, r;
	unsigned long long retries;

	/* Before the device opens: every QP takes it at accept/connect. */
	/* Block rkeys (no grant windows): this test posts to the peer's
	 * memory by its MR's rkey, as before any grant could be made. */
	setenv("BE_VERBS_MW", "0", 1);
	setenv("BE_VERBS_ACK_TIMEOUT", "20", 1);
	xt_init(&e, argc, argv);
	xt_mem_reg(&e, &mem, TV_REGION);
	dev = getenv("BE_RXE_DEV0") ? getenv("BE_RXE_DEV0") : e.attr.name;
	xt_side_init(&e, &srv, 256, 64);
	xt_mem_recvs(&srv, &mem, SRV_RECV_OFF, 16, TV_RECV_SIZE);
	xt_side_init(&e, &cli, 256, 64);
	xt_mem_recvs(&cli, &mem, CLI_RECV_OFF, 16, TV_RECV_SIZE);
	snprintf(addr, sizeof(addr), "%s:0", getenv("BE_RXE_IP0"));
	ASSERT_OK(e.ops->listen(srv.ch, addr, 16, &lst));
	ASSERT_OK(e.ops->listener_addr(lst, laddr, sizeof(laddr)));
	for (i = 0; i < 5; i++)
		memset(mem.p + SRC_OFF + (size_t)i * WR_LEN, 'a' + i, WR_LEN);
	memset(mem.p + DST_OFF, 0, 2 * WR_LEN);

	/* 1. Posted at once after accept, before the connector's QP is ready. */
	ctrs_read(dev, &before);
	sc = request(&e, &cli, &srv, laddr, &cc);
	accept_now(&e, &srv, sc);
	post(sc, 1, BE_XWR_SEND, BE_XWR_F_SIGNALED, SRC_OFF, 100, 0, 0);
	post(sc, 2, BE_XWR_WRITE_IMM, BE_XWR_F_SIGNALED, SRC_OFF + WR_LEN, WR_LEN,
	     (uintptr_t)(mem.p + DST_OFF), 7);
	post(sc, 3, BE_XWR_SEND, BE_XWR_F_SIGNALED | BE_XWR_F_INLINE, SRC_OFF + 2 * WR_LEN,
	     50, 0, 0);
	/* Inline: the buffer is free on return. */
	memset(mem.p + SRC_OFF + 2 * WR_LEN, 'z', 50);
	post(sc, 4, BE_XWR_WRITE, 0, SRC_OFF + 3 * WR_LEN, WR_LEN,
	     (uintptr_t)(mem.p + DST_OFF + WR_LEN), 0);
	post(sc, 5, BE_XWR_SEND, BE_XWR_F_SIGNALED, SRC_OFF + 4 * WR_LEN, 200, 0, 0);
	/* Give the packets time to leave (before a fix, to be dropped): this
	 * provokes the loss, it measures nothing. */
	usleep(300 * 1000);
	ev = xt_side_wait_event(&cli, BE_XEV_ESTABLISHED, 0);
	ASSERT(ev.conn == cc);
	/* A worker polls its cqs; the acceptor's evch is not read here. */
	{
		uint64_t end = xt_now_ms() + XT_WAIT_S * 1000;

		while (got_rx < 4 || got_tx < 4) {
			r = e.ops->cq_poll(cli.cq, rx + got_rx, 4 - got_rx);
			ASSERT_OK(r);
			got_rx += r;
			r = e.ops->cq_poll(srv.cq, wc + got_tx, 4 - got_tx);
			ASSERT_OK(r);
			got_tx += r;
			if (xt_now_ms() > end)
				TEST_FAIL("%d of 4 receives, %d of 4 sends within %d s", got_rx,
					  got_tx, XT_WAIT_S);
		}
	}
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(wc[i].status, BE_XWC_SUCCESS);
		ASSERT(wc[i].conn == sc);
	}
	ASSERT_UEQ(wc[0].wr_id, 1);
	ASSERT_EQ(wc[0].opcode, BE_XWC_SEND);
	ASSERT_UEQ(wc[1].wr_id, 2);
	ASSERT_EQ(wc[1].opcode, BE_XWC_WRITE_IMM);
	ASSERT_UEQ(wc[2].wr_id, 3);
	ASSERT_UEQ(wc[3].wr_id, 5);
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(rx[i].status, BE_XWC_SUCCESS);
		ASSERT(rx[i].conn == cc);
	}
	ASSERT_EQ(rx[0].opcode, BE_XWC_RECV);
	ASSERT_EQ(rx[0].byte_len, 100);
	ASSERT_EQ(mem.p[rx[0].wr_id], 'a');
	ASSERT_EQ(mem.p[rx[0].wr_id + 99], 'a');
	ASSERT_EQ(rx[1].opcode, BE_XWC_RECV_IMM);
	ASSERT_EQ(rx[1].imm, 7);
	ASSERT_EQ(rx[1].byte_len, WR_LEN);
	ASSERT_EQ(mem.p[DST_OFF], 'b');
	ASSERT_EQ(mem.p[DST_OFF + WR_LEN - 1], 'b');
	ASSERT_EQ(rx[2].opcode, BE_XWC_RECV);
	ASSERT_EQ(rx[2].byte_len, 50);
	ASSERT_EQ(mem.p[rx[2].wr_id], 'c'); /* the inline copy, not the 'z' after */
	/* The last SEND completed, so the unsignaled WRITE before it landed. */
	ASSERT_EQ(mem.p[DST_OFF + WR_LEN], 'd');
	ASSERT_EQ(mem.p[DST_OFF + 2 * WR_LEN - 1], 'd');
	ASSERT_EQ(rx[3].opcode, BE_XWC_RECV);
	ASSERT_EQ(rx[3].byte_len, 200);
	ASSERT_EQ(mem.p[rx[3].wr_id], 'e');
	ctrs_read(dev, &after);
	retries = ctrs_delta(&before, &after, "completer_retry_err");
	fprintf(stderr, "  retransmission timeouts: %llu\n", retries);
	ASSERT_UEQ(retries, 0);
	/* Nothing left over on either side. */
	ASSERT_EQ(e.ops->cq_poll(srv.cq, wc, 8), 0);
	ASSERT_EQ(e.ops->cq_poll(cli.cq, rx, 8), 0);
	ASSERT_OK(e.ops->disconnect(sc));
	xt_side_disconnected(&srv, sc, &cli, cc);
	e.ops->conn_destroy(sc);
	e.ops->conn_destroy(cc);

	/* 2. Posted, then disconnect() before the connector's QP is ready:
	 * every WR flushes, in order, signaled or not; nothing arrives. */
	sc = request(&e, &cli, &srv, laddr, &cc);
	accept_now(&e, &srv, sc);
	post(sc, 11, BE_XWR_SEND, BE_XWR_F_SIGNALED, SRC_OFF, 100, 0, 0);
	post(sc, 12, BE_XWR_WRITE, 0, SRC_OFF, 64, (uintptr_t)(mem.p + DST_OFF), 0);
	post(sc, 13, BE_XWR_WRITE_IMM, BE_XWR_F_SIGNALED, SRC_OFF, 64,
	     (uintptr_t)(mem.p + DST_OFF), 9);
	ASSERT_OK(e.ops->disconnect(sc));
	xt_side_wc(&srv, wc, 3);
	ASSERT_UEQ(wc[0].wr_id, 11);
	ASSERT_UEQ(wc[1].wr_id, 12);
	ASSERT_UEQ(wc[2].wr_id, 13);
	for (i = 0; i < 3; i++) {
		ASSERT(wc[i].conn == sc);
		/* The first may have run before the QP went to error. */
		if (i || wc[i].status != BE_XWC_SUCCESS)
			ASSERT_EQ(wc[i].status, BE_XWC_WR_FLUSH_ERR);
	}
	xt_side_disconnected(&srv, sc, &cli, cc);
	for (i = 0; i < 10; i++) {
		r = e.ops->cq_poll(cli.cq, rx, 8);
		ASSERT_OK(r);
		for (int k = 0; k < r; k++)
			ASSERT(rx[k].status != BE_XWC_SUCCESS);
	}
	e.ops->conn_destroy(sc);
	e.ops->conn_destroy(cc);

	/* 3. Posted, then conn_destroy(): no completion names the conn. */
	sc = request(&e, &cli, &srv, laddr, &cc);
	accept_now(&e, &srv, sc);
	post(sc, 21, BE_XWR_SEND, BE_XWR_F_SIGNALED, SRC_OFF, 100, 0, 0);
	e.ops->conn_destroy(sc);
	xt_side_pump(&e, 50);
	for (i = 0; i < 10; i++)
		ASSERT_EQ(e.ops->cq_poll(srv.cq, wc, 8), 0);
	e.ops->conn_destroy(cc);

	e.ops->listener_close(lst);
	xt_sides_close(&cli, &srv, &mem, NULL);
	xt_fini(&e);
	return 0;
}
