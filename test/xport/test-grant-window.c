/*
 * Check that a grant (xport.h grant / revoke) lets the peer WRITE exactly
 * the granted range, on this conn, while the grant lives, and nothing
 * else of the block it lies in: on tcp and shm the transport's grant
 * table, on verbs (unless BE_VERBS_MW=0) a type-2B memory window bound per
 * grant. The key reaches the peer as the contract asks: the owner posts a
 * SEND after the grant and the peer writes once it received it. Each
 * case writes once inside the grant (it lands), then once where it must
 * not:
 * - right past the end of the grant, still inside the block;
 * - right before its start;
 * - inside the range after the grant was revoked (revoke returned 0, or
 *   returned 1 and its BE_XWC_REVOKE completion came);
 * - inside the range of another conn's live grant, with its key;
 * - with the block's own rkey (verbs: the MR has no remote access).
 * The bad WRITE completes with REM_ACCESS_ERR, the one after it flushes,
 * both conns see DISCONNECTED, and the block is as the good WRITEs left
 * it. Skipped (77) on a transport without grants, or on verbs without
 * memory windows (grants are then the block's rkey).
 * The first two cases are not run on Soft-RoCE (a software RDMA device,
 * one with a "parent" in sysfs): its responder checks a WRITE through a
 * window against the window's MR, the whole block, not the window's
 * range (rxe_resp.c, check_rkey(), Linux 6.1), so there a window scopes
 * a key to its conn and its lifetime only and such a WRITE lands
 * (docs/SECURITY.md, "Remote keys"). On a NIC that enforces window
 * ranges, as the verbs specification asks, they are asserted.
 */
#include <stdbool.h>
#include <unistd.h>

#include "xtest.h"

#define TLEN 8192
#define GOFF 1024   /* the grant: [target + GOFF, target + GOFF + GLEN) */
#define GLEN 4096

enum bad_kind { PAST_END, BEFORE_START, REVOKED, OTHER_CONN, BLOCK_KEY };

static const char *const names[] = { "past the end", "before the start", "after revoke",
				     "another conn's key", "the block's rkey" };

static struct xt_pair p;
static uint8_t *target, *region, *src, *snapshot;
static size_t rlen;

static void grant(struct be_xconn *s, uint32_t *rkey)
{
	ASSERT_OK(p.t.ops->grant(s, target + GOFF, GLEN, rkey));
}

/* Hand the keys granted on @s so far to its peer, as the contract asks:
 * in a SEND posted after the grants, received before the peer uses them.
 * The receive may lie in the block: the snapshot is taken after it. */
static void tell(struct be_xconn *s)
{
	struct xt *t = &p.t;
	struct be_xwc wc;

	xt_post(t, s, BE_XWR_SEND, 7, src, 8, BE_XWR_F_SIGNALED, 0, 0, 0);
	xt_expect_wc(t, &p.srv, 7, BE_XWC_SUCCESS, NULL);
	xt_wait_wc(t, &p.cli, &wc, 1);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(wc.opcode, BE_XWC_RECV);
	xt_post_recvs(t, &p.cli, 1, 64);
	memcpy(snapshot, region, rlen);
}

/* One WRITE of @len bytes of src into @raddr under @rkey, signaled. */
static void write_(struct be_xconn *c, uint64_t wr_id, uint64_t raddr, uint32_t rkey,
		   uint32_t len)
{
	xt_post(&p.t, c, BE_XWR_WRITE, wr_id, src, len, BE_XWR_F_SIGNALED, raddr, rkey, 0);
}

static void run(enum bad_kind k)
{
	struct xt *t = &p.t;
	struct be_xconn *c, *s, *c2 = NULL, *s2 = NULL;
	struct be_xwc wc[3];
	uint64_t gstart = (uint64_t)(uintptr_t)(target + GOFF);
	uint64_t raddr = gstart;
	uint32_t rkey, bad_key, len = 16;
	int rc;

	xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c, &s);
	grant(s, &rkey);
	if (k == BLOCK_KEY && rkey == xt_rkey(t, target)) {
		fprintf(stderr, "grants are the block's rkey: no windows on this device\n");
		exit(77);
	}
	tell(s);
	bad_key = rkey;
	/* The good WRITE, waited for: it lands. */
	write_(c, 1, gstart + 64, rkey, 8);
	xt_expect_wc(t, &p.cli, 1, BE_XWC_SUCCESS, NULL);
	memcpy(snapshot + (target - region) + GOFF + 64, src, 8);

	switch (k) {
	case PAST_END:
		raddr = gstart + GLEN - 8;
		break;
	case BEFORE_START:
		raddr = gstart - 8;
		break;
	case REVOKED:
		rc = t->ops->revoke(s, rkey, 77);
		ASSERT(rc == 0 || rc == 1);
		if (rc == 1) {
			/* Ended once its completion says so, not before. */
			xt_expect_wc(t, &p.srv, 77, BE_XWC_SUCCESS, &wc[0]);
			ASSERT_EQ(wc[0].opcode, BE_XWC_REVOKE);
		}
		break;
	case OTHER_CONN:
		/* A second conn with its own grant of the same range: its key
		 * is worth nothing on the first conn. */
		xt_connect_pair(t, &p.cli, &p.srv, p.l, 16, &c2, &s2);
		grant(s2, &bad_key);
		tell(s2);
		break;
	case BLOCK_KEY:
		bad_key = xt_rkey(t, target);
		break;
	}
	write_(c, 2, raddr, bad_key, len);
	xt_post(t, c, BE_XWR_WRITE, 3, src, 8, 0, gstart + 128, rkey, 0);
	xt_wait_wc(t, &p.cli, wc, 2);
	fprintf(stderr, "case %s: %s, %s\n", names[k], be__xwc_status_str(wc[0].status),
		be__xwc_status_str(wc[1].status));
	ASSERT_UEQ(wc[0].wr_id, 2);
	ASSERT_EQ(wc[0].status, BE_XWC_REM_ACCESS_ERR);
	ASSERT_UEQ(wc[1].wr_id, 3);
	ASSERT_EQ(wc[1].status, BE_XWC_WR_FLUSH_ERR);
	xt_expect_disconnected(t, &p.cli, c, &p.srv, s);
	ASSERT(memcmp(region, snapshot, rlen) == 0);
	t->ops->conn_destroy(c);
	t->ops->conn_destroy(s);
	if (c2) {
		/* Untouched by the other conn's failure: its grant still works. */
		write_(c2, 4, gstart + 256, bad_key, 8);
		xt_expect_wc(t, &p.cli, 4, BE_XWC_SUCCESS, NULL);
		memcpy(snapshot + (target - region) + GOFF + 256, src, 8);
		ASSERT(memcmp(region, snapshot, rlen) == 0);
		t->ops->conn_destroy(c2);
		t->ops->conn_destroy(s2);
	}
}

/* Is @t's device a software RDMA one (Soft-RoCE: its sysfs entry names
 * the netdev it runs on as "parent")? */
static bool xt_soft_rdma(struct xt *t)
{
	char path[160];

	if (strcmp(t->transport, "verbs"))
		return false;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/parent", t->attr.name);
	return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
	bool soft;
	int k;

	xt_pair_open(&p, argc, argv, 64, 16, 16, 0);
	if (!p.t.ops->grant) {
		fprintf(stderr, "%s: no grants\n", p.t.transport);
		xt_pair_close(&p);
		return 77;
	}
	xt_post_recvs(&p.t, &p.cli, 4, 64);
	target = xt_alloc(&p.t, TLEN);
	xt_region(&p.t, target, &region, &rlen);
	src = xt_alloc(&p.t, 64);
	xt_fill(src, 64, 9);
	xt_fill(target, TLEN, 3);
	snapshot = malloc(rlen);
	ASSERT(snapshot);
	memcpy(snapshot, region, rlen);
	soft = xt_soft_rdma(&p.t);
	for (k = BLOCK_KEY; k >= PAST_END; k--) {
		if (k <= BEFORE_START && soft) {
			fprintf(stderr, "case %s: not run on %s, a software RDMA device: it "
					"checks a window's WRITE against its MR, not its range\n",
				names[k], p.t.attr.name);
			continue;
		}
		run((enum bad_kind)k);
	}
	free(snapshot);
	xt_pair_close(&p);
	return 0;
}
