/*
 * Check that a WRITE or WRITE_IMM outside the granted range of its rkey
 * (past the end, before the start, overflowing the address space), or with
 * an unknown rkey, completes with BE_XWC_REM_ACCESS_ERR without touching
 * any memory (guard bytes stay intact), that the WRs after it flush, that
 * the conn goes to error on both sides, and that a bad local key fails with
 * BE_XWC_LOC_PROT_ERR.
 */
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

#define REG_LEN (1u << 20)

struct bad_case {
	const char *what;
	uint64_t raddr_off;   /* from the region start; see flags */
	uint32_t len;
	int rkey_delta;       /* added to the rkey */
	int before;           /* raddr = start - raddr_off */
	int huge;             /* raddr = UINT64_MAX - raddr_off */
	enum be_xwr_opcode op;
};

static const struct bad_case cases[] = {
	{ "one past the end", REG_LEN - 64, 65, 0, 0, 0, BE_XWR_WRITE },
	{ "starts at the end", REG_LEN, 1, 0, 0, 0, BE_XWR_WRITE },
	{ "before the start", 64, 64, 0, 1, 0, BE_XWR_WRITE },
	{ "address overflow", 16, 64, 0, 0, 1, BE_XWR_WRITE },
	{ "unknown rkey", 0, 64, 0x10000, 0, 0, BE_XWR_WRITE },
	{ "unknown slot", 0, 64, 77, 0, 0, BE_XWR_WRITE },
	{ "imm past the end", REG_LEN - 8, 16, 0, 0, 0, BE_XWR_WRITE_IMM },
};

static void check_guards(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != 0xee)
			TEST_FAIL("byte %zu of the target changed", i);
}

static void run_case(const struct bad_case *bc, int n)
{
	struct xt_side a, b;
	struct xt_mem ma, mb, guard;
	struct be_xevent ev;
	struct be_xwc wc[4];
	uint64_t raddr;
	uint32_t rkey;
	char name[64];

	xt_side_init(&xt, &a, 4096, 64);
	xt_side_init(&xt, &b, 4096, 64);
	/* The target region sits between two other registered regions full
	 * of guard bytes, so a write past either end would be visible. */
	xt_mem_reg(&xt, &guard, 3 * REG_LEN);
	xt_mem_reg(&xt, &mb, 4096);
	memset(guard.p, 0xee, guard.len);
	{
		char err[64];

		ma = guard;
		ma.p = guard.p + REG_LEN;
		ma.len = REG_LEN;
		ASSERT_OK(xt.hook.reg(xt.hook.dev, ma.p, REG_LEN, guard.fd, REG_LEN, &ma.mr, err,
				     sizeof(err)));
	}
	memset(mb.p, 0x11, 4096);
	snprintf(name, sizeof(name), "rkey-%d-%d", (int)getpid(), n);
	xt_side_connect(&a, &b, name, 16);

	raddr = xt_mem_addr(&ma, bc->raddr_off);
	if (bc->before)
		raddr = xt_mem_addr(&ma, 0) - bc->raddr_off;
	if (bc->huge)
		raddr = UINT64_MAX - bc->raddr_off;
	rkey = xt_mem_grant(&ma, a.conn);
	xt_mem_recv(&a, &ma, 0, 0, 1);
	ASSERT_OK(xt_mem_post(b.conn, bc->op, &mb, 0, bc->len, raddr,
			   rkey + (uint32_t)bc->rkey_delta, 5, 0, 10));
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_WRITE, &mb, 0, 64, xt_mem_addr(&ma, 0), rkey, 0,
			   BE_XWR_F_SIGNALED, 11));
	/* The owner of the target checks it as it consumes the record. */
	ASSERT_EQ(ops->cq_poll(a.cq, wc, 4), 0);
	xt_side_wc(&b, wc, 2);
	if (wc[0].status != BE_XWC_REM_ACCESS_ERR)
		TEST_FAIL("%s: status %d", bc->what, wc[0].status);
	ASSERT_UEQ(wc[0].wr_id, 10);
	ASSERT_UEQ(wc[1].wr_id, 11);
	ASSERT_EQ(wc[1].status, BE_XWC_WR_FLUSH_ERR);
	xt_side_expect(&b, BE_XEV_DISCONNECTED, &ev, NULL);
	xt_side_expect(&a, BE_XEV_DISCONNECTED, &ev, NULL);
	xt_side_no_wc(&a);
	check_guards(guard.p, guard.len);

	ops->conn_destroy(a.conn);
	ops->conn_destroy(b.conn);
	a.conn = b.conn = NULL;
	xt.hook.dereg(xt.hook.dev, &ma.mr);
	xt_mem_unreg(&guard);
	xt_mem_unreg(&mb);
	xt_side_fini(&xt, &a);
	xt_side_fini(&xt, &b);
}

/* A local sge outside any registration: LOC_PROT_ERR, conn in error. */
static void run_lkey(void)
{
	struct xt_side a, b;
	struct xt_mem ma, mb;
	struct be_xevent ev;
	struct be_xwc wc[2];
	uint8_t stack_buf[64];
	struct be_xsge sge = { .addr = (uint64_t)(uintptr_t)stack_buf, .length = 64 };
	struct be_xsend_wr wr, *bad = NULL;

	xt_sides_open(&xt, &a, &b, 64, &ma, &mb, 4096, 16);
	sge.lkey = mb.mr.lkey; /* the key of another region */
	wr = xt_wr(BE_XWR_SEND, 3, BE_XWR_F_SIGNALED, &sge, 1);
	xt_mem_recv(&a, &ma, 0, 4096, 1);
	ASSERT_OK(ops->post_send(b.conn, &wr, &bad));
	xt_side_wc(&b, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_LOC_PROT_ERR);
	xt_side_expect(&b, BE_XEV_DISCONNECTED, &ev, NULL);
	xt_side_expect(&a, BE_XEV_DISCONNECTED, &ev, NULL);

	/* Bad WRs are refused at post time with *bad set. */
	wr.opcode = 42;
	bad = NULL;
	ASSERT_EQ(ops->post_send(b.conn, &wr, &bad), -EINVAL);
	ASSERT(bad == &wr);

	xt_sides_close(&a, &b, &ma, &mb);
}

int main(int argc, char **argv)
{
	size_t i;

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i], (int)i);
	run_lkey();
	xt_fini(&xt);
	return 0;
}
