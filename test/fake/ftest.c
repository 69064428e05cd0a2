/*
 * ftest.c - helper of the fault tests (see ftest.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/sock_state.h"
#include "engine/worker.h"
#include "ftest.h"

void ft_init(struct ft *t, int argc, char **argv)
{
	int i;

	memset(t, 0, sizeof(*t));
	t->inner = "tcp";
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--inner") && i + 1 < argc)
			t->inner = argv[++i];
	be__fake_reset();
	ASSERT_OK(be__fake_inner(t->inner));
	{
		char *av[] = { argv[0], "--transport", "fake", NULL };

		st_init(&t->st, 3, av);
	}
}

const char *ft_addr(struct ft *t)
{
	if (!strcmp(t->inner, "shm"))
		snprintf(t->addr, sizeof(t->addr), "fake://be-ft-%d-%d", (int)getpid(), t->naddr++);
	else
		snprintf(t->addr, sizeof(t->addr), "fake://127.0.0.1:0");
	return t->addr;
}

void ft_listen(struct ft *t, struct be_worker *w, struct st_server *srv, struct be_listener **l,
	       char *addr, size_t len)
{
	ASSERT_OK(be_listen(w, ft_addr(t), &st_server_cbs, srv, l));
	ASSERT_OK(be_listener_addr(*l, addr, len));
}

void ft_pair(struct ft *t, struct be_ctx **ctx, struct be_worker *ws[2], struct st_server *srv,
	     struct be_listener **l, char *addr, size_t len)
{
	ASSERT_OK(be_ctx_create(&t->st.cfg, ctx));
	ASSERT_OK(be_worker_create(*ctx, &ws[0]));
	ASSERT_OK(be_worker_create(*ctx, &ws[1]));
	ft_listen(t, ws[0], srv, l, addr, len);
}

struct be_xconn *ft_conn(struct be_sock *s)
{
	ASSERT(s->e);
	ASSERT(s->e->conn);
	return s->e->conn;
}

struct be_sock *ft_connect_send(struct be_worker *w, const char *addr, struct st_server *cli,
				size_t len, uint32_t seed, struct st_sends *sends)
{
	struct be_sock *c;

	ASSERT_OK(be_sock_connect(w, addr, &st_server_cbs, cli, &c));
	ASSERT_OK(be_sock_send(c, st_msg(len, seed), len, st_send_cb, sends));
	return c;
}

void ft_check_one_failed(enum be_xwc_opcode op)
{
	struct be__fake_stats fs;

	be__fake_stats(&fs);
	ASSERT_EQ(fs.wr_failed, 1);
	ASSERT_EQ(fs.failed_op, op);
}

void ft_check_srq(struct be_worker *w)
{
	struct be__wdev *wd;

	ASSERT_OK(be__worker_wdev(w, "fake", NULL, false, &wd));
	ASSERT_EQ(be__fake_srq_outstanding(wd->srq), (int64_t)wd->nbufs - wd->nunposted);
}
