/*
 * Check region announcements under pressure: 3000 regions (slices of one
 * memfd, as bemalloc's blocks are) registered while the peer reads nothing
 * overflow the socket; the rest is queued, a WRITE to the last region
 * waits until it is announced and then lands, and a deregistration is
 * seen by the very next WRITE (REM_ACCESS_ERR, target untouched).
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

#define NREG 3000
#define SLICE 4096

/* Poll both sides until @b has one completion. */
static void wc_both(struct xt_side *a, struct xt_side *b, struct be_xwc *wc)
{
	uint64_t end = xt_now_ms() + 20000;
	struct be_xwc junk[8];

	for (;;) {
		int r = ops->cq_poll(b->cq, wc, 1);

		ASSERT_OK(r);
		if (r)
			return;
		ASSERT_OK(ops->cq_poll(a->cq, junk, 8));
		ASSERT(xt_now_ms() < end);
	}
}

int main(int argc, char **argv)
{
	static struct be_alloc_mr mr[NREG];
	struct xt_side a, b;
	struct xt_mem src;
	struct be_xwc wc;
	struct be_xevent ev;
	uint8_t *base;
	char name[64], err[64];
	int fd, i;

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	xt_side_init(&xt, &a, 4096, 64);
	xt_side_init(&xt, &b, 4096, 64);
	xt_mem_reg(&xt, &src, 65536);
	memset(src.p, 0x5c, 65536);
	snprintf(name, sizeof(name), "manyreg-%d", (int)getpid());
	xt_side_connect(&a, &b, name, 64);

	fd = xt_memfd("be-test-arena", (size_t)NREG * SLICE);
	base = mmap(NULL, (size_t)NREG * SLICE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT(base != MAP_FAILED);
	for (i = 0; i < NREG; i++)
		ASSERT_OK(xt.hook.reg(xt.hook.dev, base + (size_t)i * SLICE, SLICE, fd,
				     (uint64_t)i * SLICE, &mr[i], err, sizeof(err)));

	/* The last region: announced after all the others. */
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_WRITE, &src, 0, 100,
			   (uint64_t)(uintptr_t)(base + (size_t)(NREG - 1) * SLICE + 8),
			   mr[NREG - 1].rkey, 0, BE_XWR_F_SIGNALED, 1));
	wc_both(&a, &b, &wc);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(base[(size_t)(NREG - 1) * SLICE + 8], 0x5c);
	ASSERT_EQ(base[(size_t)(NREG - 1) * SLICE + 107], 0x5c);
	ASSERT_EQ(base[(size_t)(NREG - 1) * SLICE + 108], 0);
	/* A middle one. */
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_WRITE, &src, 0, SLICE,
			   (uint64_t)(uintptr_t)(base + (size_t)1500 * SLICE), mr[1500].rkey, 0,
			   BE_XWR_F_SIGNALED, 2));
	wc_both(&a, &b, &wc);
	ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
	ASSERT_EQ(base[(size_t)1500 * SLICE + SLICE - 1], 0x5c);

	/* Deregistered: the next WRITE fails and touches nothing. */
	xt.hook.dereg(xt.hook.dev, &mr[1600]);
	ASSERT_OK(xt_mem_post(b.conn, BE_XWR_WRITE, &src, 0, 64,
			   (uint64_t)(uintptr_t)(base + (size_t)1600 * SLICE), mr[1600].rkey, 0,
			   BE_XWR_F_SIGNALED, 3));
	wc_both(&a, &b, &wc);
	ASSERT_UEQ(wc.wr_id, 3);
	ASSERT_EQ(wc.status, BE_XWC_REM_ACCESS_ERR);
	ASSERT_EQ(base[(size_t)1600 * SLICE], 0);
	xt_side_expect(&b, BE_XEV_DISCONNECTED, &ev, NULL);

	for (i = 0; i < NREG; i++)
		if (i != 1600)
			xt.hook.dereg(xt.hook.dev, &mr[i]);
	munmap(base, (size_t)NREG * SLICE);
	close(fd);
	xt_mem_unreg(&src);
	xt_side_fini(&xt, &a);
	xt_side_fini(&xt, &b);
	xt_fini(&xt);
	return 0;
}
