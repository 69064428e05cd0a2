/*
 * Check the shm transport between two processes (fork): WRITEs and
 * WRITE_IMMs of 1 B to 16 MiB land intact in the peer's granted region,
 * and a region the peer registers and grants after the connection is up
 * (its rkey sent in a SEND) is usable at once; revoking its grant makes
 * later WRITEs to it fail with BE_XWC_REM_ACCESS_ERR.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;
static uint32_t late_rkey; /* the server's grant of its late region */

#define BIG (16u << 20)

static const uint32_t sizes[] = {
	1, 2, 3, 7, 63, 64, 65, 4095, 4096, 4097, 65536, 1u << 20, (1u << 20) + 1, 3u << 20, BIG,
};

static uint8_t pat(uint32_t i, uint32_t size)
{
	return (uint8_t)(i * 31u + size * 7u + (i >> 12));
}

struct late_msg {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

/* The server: verifies what lands, answers each check with one byte. */
static int server(const char *name, int ready_fd)
{
	struct xt_side s;
	struct xt_mem m, late, out;
	struct be_xevent ev;
	struct be_xwc wc;
	int checks = 0;

	xt_init_child(&xt);
	xt_side_init(&xt, &s, 4096, 64);
	xt_mem_reg(&xt, &m, BIG + 4096);
	memset(m.p, 0xab, BIG + 1);
	xt_mem_reg(&xt, &out, 4096);
	for (int i = 0; i < 32; i++)
		xt_mem_recv(&s, &out, 0, 64, 1000 + (uint64_t)i);
	ASSERT_OK(ops->listen(s.ch, name, 4, &s.l));
	ASSERT_EQ(write(ready_fd, "r", 1), 1);
	xt_side_accept_grant(&s, &m);

	for (;;) {
		int r = ops->cq_poll(s.cq, &wc, 1);
		uint32_t size, i;
		uint8_t ok = 1;

		ASSERT_OK(r);
		if (!r) {
			r = ops->evch_get(s.ch, &ev);
			ASSERT_OK(r);
			if (r && ev.type == BE_XEV_DISCONNECTED)
				break;
			continue;
		}
		if (wc.opcode == BE_XWC_SEND || wc.opcode == BE_XWC_WRITE)
			continue;
		ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
		xt_mem_recv(&s, &out, 0, 64, wc.wr_id);
		if (wc.opcode == BE_XWC_RECV) {
			/* "late": register a region now and send its key. */
			struct late_msg lm;

			xt_mem_reg(&xt, &late, 1u << 20);
			memset(late.p, 0, late.len);
			lm.addr = xt_mem_addr(&late, 0);
			lm.rkey = xt_mem_grant(&late, s.conn);
			late_rkey = lm.rkey;
			lm.len = (uint32_t)late.len;
			memcpy(out.p + 1024, &lm, sizeof(lm));
			ASSERT_OK(xt_mem_post(s.conn, BE_XWR_SEND, &out, 1024, sizeof(lm), 0, 0, 0, 0, 1));
			continue;
		}
		ASSERT_EQ(wc.opcode, BE_XWC_RECV_IMM);
		if (wc.imm == 0xffffffffu) {
			/* The late region was written: check it, then drop it
			 * (its grant first). */
			for (i = 0; i < 4096; i++)
				if (late.p[i] != (uint8_t)(i ^ 0x3c))
					ok = 0;
			ops->revoke(s.conn, late_rkey, 0);
			xt_mem_unreg(&late);
		} else {
			size = wc.imm;
			for (i = 0; i < size && ok; i++)
				if (m.p[i] != pat(i, size))
					ok = 0;
			if (m.p[size] != 0xab) /* nothing past the end */
				ok = 0;
			memset(m.p, 0xab, size + 1);
		}
		out.p[2048] = ok;
		ASSERT_OK(xt_mem_post(s.conn, BE_XWR_SEND, &out, 2048, 1, 0, 0, 0, 0, 2));
		checks++;
	}
	ASSERT_EQ(checks, (int)(sizeof(sizes) / sizeof(sizes[0])) + 1);
	ops->conn_destroy(s.conn);
	s.conn = NULL;
	xt_mem_unreg(&m);
	xt_mem_unreg(&out);
	xt_side_fini(&xt, &s);
	return 0;
}

static uint8_t wait_reply(struct xt_side *c, struct xt_mem *in)
{
	struct be_xwc wc;

	for (;;) {
		xt_side_wc(c, &wc, 1);
		ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
		if (wc.opcode == BE_XWC_RECV) {
			uint8_t v = in->p[wc.wr_id * 64];

			xt_mem_recv(c, in, wc.wr_id * 64, 64, wc.wr_id);
			return v;
		}
	}
}

int main(int argc, char **argv)
{
	struct xt_side c;
	struct xt_mem src, in;
	struct be_xconn_attr attr;
	struct be_xevent ev;
	struct be_xwc wc;
	struct xt_grant_msg priv;
	struct late_msg lm;
	char name[64], ch;
	int pfd[2], st;
	pid_t pid;
	size_t k;

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	snprintf(name, sizeof(name), "twoproc-%d", (int)getpid());
	ASSERT_OK(pipe(pfd));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		_exit(server(name, pfd[1]));
	}
	close(pfd[1]);
	ASSERT_EQ(read(pfd[0], &ch, 1), 1);

	xt_side_init(&xt, &c, 4096, 64);
	xt_mem_reg(&xt, &src, BIG);
	xt_mem_reg(&xt, &in, 64 * 64);
	for (int i = 0; i < 32; i++)
		xt_mem_recv(&c, &in, (uint64_t)i * 64, 64, (uint64_t)i);
	attr = xt_attr(&c, 64);
	ASSERT_OK(ops->connect(c.ch, name, &attr, NULL, 0, &c.conn));
	xt_side_expect(&c, BE_XEV_ESTABLISHED, &ev, NULL);
	ASSERT_EQ(ev.priv_len, sizeof(priv));
	memcpy(&priv, ev.priv, sizeof(priv));

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint32_t size = sizes[k], i;

		for (i = 0; i < size; i++)
			src.p[i] = pat(i, size);
		if (k % 2) {
			/* WRITE, then an empty WRITE_IMM to say so */
			ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE, &src, 0, size, priv.addr, priv.rkey, 0,
					   0, 1));
			ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE_IMM, &src, 0, 0, priv.addr, priv.rkey,
					   size, 0, 2));
		} else {
			ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE_IMM, &src, 0, size, priv.addr,
					   priv.rkey, size, 0, 2));
		}
		if (wait_reply(&c, &in) != 1)
			TEST_FAIL("size %u arrived damaged", size);
	}

	/* Ask for a late region, write it, check. */
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_SEND, &src, 0, 1, 0, 0, 0, 0, 3));
	for (;;) {
		xt_side_wc(&c, &wc, 1);
		if (wc.opcode == BE_XWC_RECV)
			break;
	}
	memcpy(&lm, in.p + wc.wr_id * 64, sizeof(lm));
	xt_mem_recv(&c, &in, wc.wr_id * 64, 64, wc.wr_id);
	for (uint32_t i = 0; i < 4096; i++)
		src.p[i] = (uint8_t)(i ^ 0x3c);
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE_IMM, &src, 0, 4096, lm.addr, lm.rkey, 0xffffffffu, 0,
			   4));
	ASSERT_EQ(wait_reply(&c, &in), 1);
	/* The server deregistered it before replying: a WRITE now fails. */
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE, &src, 0, 64, lm.addr, lm.rkey, 0, BE_XWR_F_SIGNALED,
			   5));
	for (;;) {
		xt_side_wc(&c, &wc, 1);
		if (wc.wr_id == 5)
			break;
	}
	ASSERT_EQ(wc.status, BE_XWC_REM_ACCESS_ERR);
	xt_side_expect(&c, BE_XEV_DISCONNECTED, &ev, NULL);

	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ops->conn_destroy(c.conn);
	c.conn = NULL;
	xt_mem_unreg(&src);
	xt_mem_unreg(&in);
	xt_side_fini(&xt, &c);
	xt_fini(&xt);
	return 0;
}
