/*
 * Check peer death on shm: when the peer process is killed with -9, the
 * survivor's cq fd (armed) becomes readable, every outstanding WR
 * completes with an error (the first BE_XWC_REM_ABORT_ERR, the rest
 * BE_XWC_WR_FLUSH_ERR, unsignaled ones too), BE_XEV_DISCONNECTED arrives,
 * later posts flush without touching the dead peer's memory, and the
 * killed process leaves nothing behind in /dev/shm.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "xtest.h"

static struct xt xt; /* the device every side of this process uses */
static const struct be_xport_ops *ops;

/* A sorted, newline-joined listing of /dev/shm ("" if it does not exist). */
static char *dev_shm_list(void)
{
	struct dirent **ents;
	size_t cap = 1, len = 0;
	char *out;
	int n, i;

	n = scandir("/dev/shm", &ents, NULL, alphasort);
	if (n < 0)
		return strdup("");
	for (i = 0; i < n; i++)
		cap += strlen(ents[i]->d_name) + 1;
	out = malloc(cap);
	ASSERT(out);
	out[0] = 0;
	for (i = 0; i < n; i++) {
		size_t l = strlen(ents[i]->d_name);

		memcpy(out + len, ents[i]->d_name, l);
		len += l;
		out[len++] = '\n';
		out[len] = 0;
		free(ents[i]);
	}
	free(ents);
	return out;
}

static void server(const char *name, int ready_fd)
{
	struct xt_side s;
	struct xt_mem m;

	xt_init_child(&xt);
	xt_side_init(&xt, &s, 4096, 64);
	xt_mem_reg(&xt, &m, 1u << 20);
	for (int i = 0; i < 8; i++)
		xt_mem_recv(&s, &m, 4096 * (uint64_t)i, 4096, (uint64_t)i);
	ASSERT_OK(ops->listen(s.ch, name, 4, &s.l));
	xt_side_accept_grant(&s, &m);
	ASSERT_EQ(write(ready_fd, "r", 1), 1);
	/* Never poll again: the client's SENDs stay outstanding. */
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	struct xt_side c;
	struct xt_mem src;
	struct be_xconn_attr attr;
	struct be_xevent ev;
	struct be_xwc wc[8];
	struct xt_grant_msg priv;
	char name[64], ch, *before, *after;
	struct pollfd p;
	int pfd[2], st, got = 0;
	pid_t pid;

	xt_init(&xt, argc, argv);
	ops = xt.ops;

	before = dev_shm_list();
	snprintf(name, sizeof(name), "kill-%d", (int)getpid());
	ASSERT_OK(pipe(pfd));
	xt_side_init(&xt, &c, 4096, 64);
	xt_mem_reg(&xt, &src, 1u << 20);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		server(name, pfd[1]);
		_exit(1);
	}
	close(pfd[1]);
	attr = xt_attr(&c, 64);
	/* The listener may not exist yet: retry while UNREACHABLE. */
	for (int tries = 0;; tries++) {
		ASSERT_OK(ops->connect(c.ch, name, &attr, NULL, 0, &c.conn));
		ASSERT(xt_side_event(&c, &ev, 10000, NULL));
		if (ev.type == BE_XEV_ESTABLISHED)
			break;
		ASSERT_EQ(ev.type, BE_XEV_UNREACHABLE);
		ASSERT(tries < 1000);
		ops->conn_destroy(c.conn);
		c.conn = NULL;
		poll(NULL, 0, 10);
	}
	memcpy(&priv, ev.priv, sizeof(priv));
	ASSERT_EQ(read(pfd[0], &ch, 1), 1);

	/* A WRITE and three SENDs stay outstanding (the peer, which places
	 * WRITEs itself, never consumes them). */
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE, &src, 0, 4096, priv.addr, priv.rkey, 0,
			   BE_XWR_F_SIGNALED, 1));
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_SEND, &src, 0, 100, 0, 0, 0, BE_XWR_F_SIGNALED, 2));
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_SEND, &src, 0, 100, 0, 0, 0, 0, 3));
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_SEND, &src, 0, 100, 0, 0, 0, BE_XWR_F_SIGNALED, 4));
	xt_side_no_wc(&c);

	/* Sleep on the cq fd: the death must wake it. */
	ASSERT_OK(ops->cq_arm(c.cq));
	p.fd = ops->cq_fd(c.cq);
	p.events = POLLIN;
	ASSERT_EQ(poll(&p, 1, 0), 0);
	ASSERT_OK(kill(pid, SIGKILL));
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFSIGNALED(st));
	ASSERT_EQ(poll(&p, 1, 10000), 1);

	while (got < 4) {
		int r = ops->cq_poll(c.cq, wc + got, 8 - got);

		ASSERT_OK(r);
		got += r;
	}
	ASSERT_EQ(got, 4);
	ASSERT_UEQ(wc[0].wr_id, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_REM_ABORT_ERR);
	for (int i = 1; i < 4; i++) {
		ASSERT_UEQ(wc[i].wr_id, (uint64_t)i + 1);
		ASSERT_EQ(wc[i].status, BE_XWC_WR_FLUSH_ERR);
	}
	xt_side_expect(&c, BE_XEV_DISCONNECTED, &ev, NULL);
	ASSERT((const void *)ev.conn == (const void *)c.conn);
	ASSERT_OK(ops->cq_ack(c.cq));

	/* Later WRITEs flush: the dead peer's memory is not written. */
	ASSERT_OK(xt_mem_post(c.conn, BE_XWR_WRITE, &src, 0, 64, priv.addr, priv.rkey, 0, 0, 5));
	xt_side_wc(&c, wc, 1);
	ASSERT_EQ(wc[0].status, BE_XWC_WR_FLUSH_ERR);
	ASSERT_EQ(ops->evch_get(c.ch, &ev), 0);

	ops->conn_destroy(c.conn);
	c.conn = NULL;
	xt_mem_unreg(&src);
	xt_side_fini(&xt, &c);
	after = dev_shm_list();
	if (strcmp(before, after))
		TEST_FAIL("/dev/shm changed:\nbefore:\n%s\nafter:\n%s", before, after);
	free(before);
	free(after);
	xt_fini(&xt);
	return 0;
}
