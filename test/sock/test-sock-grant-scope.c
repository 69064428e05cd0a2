/*
 * Check that a peer's RDMA WRITEs reach only what it was granted (xport.h
 * grant op: tcp and shm, verbs by memory windows): a raw peer (raw.h)
 * asks for large messages and gets WRITE_RESPs, then
 * - writes right past a granted buffer, in the same bemalloc block;
 * - writes again into a grant whose message it completed (the buffer now
 *   belongs to the application);
 * - replays an (address, rkey) of a closed connection on a new one;
 * each of which must fail its connection (REM_ACCESS_ERR at the peer, the
 * server's Engine gone) and leave the memory untouched; and
 * - the keys of one connection's grants are distinct, none repeating the
 *   one before (on a block's rkey, every grant of a block had one key).
 * On verbs (memory windows, the default) the write past the grant is
 * left out on Soft-RoCE (a software RDMA device: one with a "parent" in
 * sysfs), whose responder checks a window's WRITE against its MR, the
 * whole block, not the window's range (rxe_resp.c, check_rkey()), so it
 * would land there (docs/SECURITY.md, "Remote keys"); it is asserted on
 * other devices. The write into a completed grant is asserted on verbs
 * too: the message is delivered only once its window's invalidate
 * completed (large.c). Skipped on verbs with BE_VERBS_MW=0 (block
 * rkeys).
 */
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "engine/proto.h"
#include "raw.h"
#include "stest.h"
#include "util/common.h"
#include "xport/xport.h"

#define LEN 100000u

static struct be_worker *w;
static struct st_server srv;
static char addr[160];

/* Open socket 0 and ask for @n messages of LEN bytes; wait for the
 * answers (all granted: well below max_grant_bytes). */
static void ask(int n)
{
	struct be__frame f[17] = {
		{ .type = BE_FR_SOCK_OPEN, .flags = BE_FRF_OPENER, .sock = 0 },
	};
	int i;

	ASSERT(n <= 16);
	for (i = 1; i <= n; i++)
		f[i] = (struct be__frame){ .type = BE_FR_WRITE_REQ, .flags = BE_FRF_OPENER,
					   .sock = 0, .msg = (uint32_t)(i - 1), .length = LEN };
	raw_send_frames(f, n + 1, NULL);
	st_pump(&w, 1, cond_answers, (void *)(intptr_t)n);
	ASSERT(!raw.dead);
	ASSERT_EQ(raw.nresp, n);
}

/* A signaled WRITE (or WRITE_IMM with @imm) of @len bytes of @src. */
static void post(enum be_xwr_opcode op, const uint8_t *src, uint32_t len, uint64_t raddr,
		 uint32_t rkey, uint32_t imm)
{
	struct be_xsge sge = { .addr = (uintptr_t)src, .length = len };
	struct be_xsend_wr wr = {
		.opcode = op, .flags = BE_XWR_F_SIGNALED, .sg_list = &sge, .num_sge = 1,
		.remote_addr = raddr, .rkey = rkey, .imm = imm,
	}, *bad;

	sge.lkey = raw_lkey(src, NULL);
	ASSERT_OK(raw.ops->post_send(raw.conn, &wr, &bad));
}

static void expect_refused(const char *what)
{
	st_pump(&w, 1, cond_dead, NULL);
	raw.ops->conn_destroy(raw.conn);
	raw.conn = NULL;
	fprintf(stderr, "refused: %s\n", what);
}

static bool cond_recvd(void *arg)
{
	raw_poll();
	return srv.recvd >= (int)(intptr_t)arg || raw.dead;
}

/* Is there a software RDMA device (Soft-RoCE names its netdev as
 * "parent" in sysfs)? The guest's tests run on one. */
static int soft_rdma(void)
{
	glob_t g;
	int n;

	if (glob("/sys/class/infiniband/*/parent", 0, NULL, &g))
		return 0;
	n = g.gl_pathc > 0;
	globfree(&g);
	return n;
}

int main(int argc, char **argv)
{
	struct be_listener *l;
	struct be_ctx *ctx;
	struct st t;
	uint8_t *src, before[64], *a;
	uint64_t old_addr;
	uint32_t old_rkey;
	int i, j, verbs;

	st_init(&t, argc, argv);
	verbs = !strcmp(t.transport, "verbs");
	if (verbs && getenv("BE_VERBS_MW") && !strcmp(getenv("BE_VERBS_MW"), "0")) {
		fprintf(stderr, "verbs without windows: a block's rkey reaches the block "
				"(docs/SECURITY.md): skipped\n");
		return 77;
	}
	raw_serve(&t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	src = be_alloc(LEN);
	ASSERT(src);
	memset(src, 0xa5, LEN);

	/* Distinct keys per grant on one connection. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	ASSERT(raw.established);
	ask(8);
	for (i = 0; i < 8; i++) {
		ASSERT(raw.rkeys[i] != 0);
		for (j = 0; j < i; j++)
			if (raw.rkeys[i] == raw.rkeys[j])
				TEST_FAIL("grants %d and %d share rkey 0x%x", j, i, raw.rkeys[i]);
	}

	/* Right past a grant, inside the same block: refused, untouched. */
	if (!verbs || !soft_rdma()) {
		a = (uint8_t *)(uintptr_t)raw.resp.addr + LEN;
		memcpy(before, a, sizeof(before));
		post(BE_XWR_WRITE, src, 64, raw.resp.addr + LEN, raw.resp.rkey, 0);
		expect_refused("WRITE past the end of its grant");
		if (memcmp(before, a, sizeof(before)))
			TEST_FAIL("the bytes past the grant changed");
	} else {
		raw_hang_up();
	}

	/* A grant written and completed, then written again. */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	ask(1);
	post(BE_XWR_WRITE_IMM, src, LEN, raw.resp.addr, raw.resp.rkey, raw.resp.token);
	st_pump(&w, 1, cond_recvd, (void *)(intptr_t)1);
	ASSERT_EQ(srv.recvd, 1);
	ASSERT(!raw.dead);
	post(BE_XWR_WRITE, src, 64, raw.resp.addr, raw.resp.rkey, 0);
	expect_refused("WRITE into a completed grant");

	/* A key of a connection that is gone, on a new one (which has a
	 * grant of its own, so it is not refused for having none). */
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	ask(1);
	old_addr = raw.resp.addr;
	old_rkey = raw.resp.rkey;
	raw_hang_up();
	raw_connect(addr, BE_PROTO_MAGIC, 8);
	ask(1);
	ASSERT(raw.resp.rkey != old_rkey);
	/* The old buffer may well be the new grant's (bemalloc reuses it):
	 * then only the key tells them apart. */
	a = (uint8_t *)(uintptr_t)old_addr;
	memcpy(before, a, sizeof(before));
	memset(src, 0x3c, 64);
	ASSERT(before[0] != 0x3c);
	post(BE_XWR_WRITE, src, 64, old_addr, old_rkey, 0);
	expect_refused("an old connection's key on a new one");
	if (memcmp(before, a, sizeof(before)))
		TEST_FAIL("the old grant's bytes changed");

	be_free(src);
	raw_serve_end(ctx, &srv, l);
	return 0;
}
