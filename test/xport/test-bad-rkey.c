/*
 * Check that WRITEs outside what the peer registered (and granted, on a
 * transport with grants: here all of the region) are refused without
 * touching memory: a wrong rkey, a range running past the end of the
 * region, a range before its start, and an address that wraps around.
 * The WR completes with REM_ACCESS_ERR, the WRs posted after it flush,
 * the ones before it succeed, both ends see DISCONNECTED, and guard bytes
 * around the target are intact; a post after the error fails or flushes.
 * A bad lkey on the sender completes with
 * LOC_PROT_ERR, and so does the lkey of a region deregistered since a
 * post from it succeeded (the transport must not trust what it found
 * for the earlier post).
 */
#include <sys/mman.h>
#include <unistd.h>

#include "xtest.h"

#define TLEN 4096

struct bad_case {
	const char *what;
	int64_t off;       /* from the start of the region */
	uint32_t len;
	uint32_t rkey_xor;
	int wrap;
};

static const struct bad_case cases[] = {
	{ "wrong rkey", 0, 16, 0x5A5A5A5A, 0 },
	{ "past the end", -1, 16, 0, 0 },        /* region end - 8 */
	{ "before the start", -8, 16, 0, 0 },
	{ "wrap around", 0, 4096, 0, 1 },
};

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	struct be_xevent ev;
	struct be_xwc wc[3];
	uint8_t *region, *target, *src, *snapshot;
	size_t i, rlen;

	xt_pair_open(&p, argc, argv, 64, 0, 16, 0);
	/* Writes are checked against the registered region (the bemalloc
	 * block holding the target), so the cases aim at its edges and the
	 * whole region serves as guard bytes. */
	target = xt_alloc(t, TLEN);
	xt_region(t, target, &region, &rlen);
	src = xt_alloc(t, 8192);
	xt_fill(src, 8192, 9);
	xt_fill(target, TLEN, 3);
	snapshot = malloc(rlen);
	ASSERT(snapshot);
	memcpy(snapshot, region, rlen);

	for (i = 0; i < BE_ARRAY_SIZE(cases); i++) {
		const struct bad_case *bc = &cases[i];
		struct be_xconn *c, *s;
		uint64_t raddr = bc->wrap ? UINT64_MAX - 100 :
			bc->off == -1 ? (uint64_t)(uintptr_t)region + rlen - 8 :
			bc->off == 0 ? (uint64_t)(uintptr_t)target :
			(uint64_t)(uintptr_t)region + (uint64_t)bc->off;

		uint32_t rkey;

		xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c, &s);
		rkey = xt_grant(t, s, target);
		/* good, bad, then one that must flush */
		xt_post(t, c, BE_XWR_WRITE, 1, src, 8, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)target + 100, rkey, 0);
		xt_post(t, c, BE_XWR_WRITE, 2, src, bc->len, BE_XWR_F_SIGNALED, raddr,
			rkey ^ bc->rkey_xor, 0);
		xt_post(t, c, BE_XWR_WRITE, 3, src, 8, 0,
			(uint64_t)(uintptr_t)target + 200, rkey, 0);
		xt_wait_wc(t, &p.cli, wc, 3);
		fprintf(stderr, "case %s: %s, %s, %s\n", bc->what,
			be__xwc_status_str(wc[0].status), be__xwc_status_str(wc[1].status),
			be__xwc_status_str(wc[2].status));
		ASSERT_UEQ(wc[0].wr_id, 1);
		ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
		ASSERT_UEQ(wc[1].wr_id, 2);
		ASSERT_EQ(wc[1].status, BE_XWC_REM_ACCESS_ERR);
		ASSERT_UEQ(wc[2].wr_id, 3);
		ASSERT_EQ(wc[2].status, BE_XWC_WR_FLUSH_ERR);
		xt_expect_disconnected(t, &p.cli, c, &p.srv, s);
		/* Only the good write landed. */
		memcpy(snapshot + (target - region) + 100, src, 8);
		ASSERT(memcmp(region, snapshot, rlen) == 0);
		/* Posting to a conn in error fails or flushes. */
		xt_post_on_error(t, &p.cli, c, 4, src);
		xt_spin(t, 5);
		ASSERT_EQ(p.srv.nwc, 0);
		ASSERT_EQ(p.cli.nwc, 0);
		t->ops->conn_destroy(c);
		t->ops->conn_destroy(s);
	}

	/* A bad lkey: WR 1 succeeds, WR 2 fails locally, WR 3 flushes. */
	{
		struct be_xconn *c, *s;
		struct be_xsend_wr wr, *bad;
		struct be_xsge sge = { (uint64_t)(uintptr_t)src, 8, xt_lkey(t, src) ^ 0x33CC33CC };

		uint32_t rkey;

		xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c, &s);
		rkey = xt_grant(t, s, target);
		xt_post(t, c, BE_XWR_WRITE, 1, src, 8, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)target, rkey, 0);
		wr = xt_wr(BE_XWR_WRITE, 2, BE_XWR_F_SIGNALED, &sge, 1);
		wr.remote_addr = (uint64_t)(uintptr_t)target;
		wr.rkey = rkey;
		ASSERT_OK(t->ops->post_send(c, &wr, &bad));
		xt_post(t, c, BE_XWR_WRITE, 3, src, 8, BE_XWR_F_SIGNALED,
			(uint64_t)(uintptr_t)target, rkey, 0);
		xt_wait_wc(t, &p.cli, wc, 3);
		/* On shm the peer places a WRITE: one it has not acknowledged
		 * when the conn fails flushes, like every other such WR. */
		if (strcmp(t->transport, "shm"))
			ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
		else
			ASSERT(wc[0].status == BE_XWC_SUCCESS || wc[0].status == BE_XWC_WR_FLUSH_ERR);
		fprintf(stderr, "bad lkey: %s (vendor %u)\n", be__xwc_status_str(wc[1].status),
			wc[1].vendor_err);
		/* Soft-RoCE reports a bad lkey with a status verbs maps to
		 * GENERAL_ERR; the software transports say LOC_PROT_ERR. */
		if (strcmp(t->transport, "verbs") != 0)
			ASSERT_EQ(wc[1].status, BE_XWC_LOC_PROT_ERR);
		ASSERT(wc[1].status != BE_XWC_SUCCESS && wc[1].status != BE_XWC_WR_FLUSH_ERR);
		ASSERT_EQ(wc[2].status, BE_XWC_WR_FLUSH_ERR);
		xt_expect_event(t, &p.cli, BE_XEV_DISCONNECTED, &ev);
		xt_expect_event(t, &p.srv, BE_XEV_DISCONNECTED, &ev);
		t->ops->conn_destroy(c);
		t->ops->conn_destroy(s);
	}

	/* An lkey that was good for the last post, deregistered since. */
	{
		struct be_xconn *c, *s;
		struct be_xsend_wr wr, *bad;
		struct xt_mem m;
		struct be_xsge sge;
		uint32_t rkey;

		xt_mem_reg(t, &m, 4096);
		sge = (struct be_xsge){ (uint64_t)(uintptr_t)m.p, 8, m.mr.lkey };
		xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c, &s);
		rkey = xt_grant(t, s, target);
		wr = xt_wr(BE_XWR_WRITE, 1, BE_XWR_F_SIGNALED, &sge, 1);
		wr.remote_addr = (uint64_t)(uintptr_t)target;
		wr.rkey = rkey;
		ASSERT_OK(t->ops->post_send(c, &wr, &bad));
		xt_wait_wc(t, &p.cli, wc, 1);
		ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
		t->hook.dereg(t->hook.dev, &m.mr);
		wr.wr_id = 2;
		ASSERT_OK(t->ops->post_send(c, &wr, &bad));
		xt_wait_wc(t, &p.cli, wc, 1);
		fprintf(stderr, "deregistered lkey: %s\n", be__xwc_status_str(wc[0].status));
		if (strcmp(t->transport, "verbs") != 0)
			ASSERT_EQ(wc[0].status, BE_XWC_LOC_PROT_ERR);
		ASSERT(wc[0].status != BE_XWC_SUCCESS);
		xt_expect_event(t, &p.cli, BE_XEV_DISCONNECTED, &ev);
		xt_expect_event(t, &p.srv, BE_XEV_DISCONNECTED, &ev);
		t->ops->conn_destroy(c);
		t->ops->conn_destroy(s);
		munmap(m.p, m.len);
		close(m.fd);
	}

	free(snapshot);
	xt_pair_close(&p);
	return 0;
}
