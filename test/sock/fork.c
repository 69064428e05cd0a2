/*
 * fork.c - child-process servers for the socket tests (see fork.h).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fork.h"

void st_child_start(struct st *t, struct st_child *c, void (*body)(struct st *t, int wfd))
{
	int fds[2];
	ssize_t n, got = 0;

	ASSERT_EQ(pipe(fds), 0);
	c->pid = fork();
	ASSERT_GE(c->pid, 0);
	if (c->pid == 0) {
		close(fds[0]);
		body(t, fds[1]);
		_exit(3);
	}
	close(fds[1]);
	while ((n = read(fds[0], c->addr + got, sizeof(c->addr) - 1 - (size_t)got)) > 0)
		got += n;
	close(fds[0]);
	c->addr[got] = '\0';
	ASSERT_GT(got, 0);
}

void st_child_kill(struct st_child *c)
{
	int status;

	kill(c->pid, SIGKILL);
	kill(c->pid, SIGCONT);
	ASSERT_EQ(waitpid(c->pid, &status, 0), c->pid);
}

void st_child_wait(struct st_child *c)
{
	int status;

	ASSERT_EQ(waitpid(c->pid, &status, 0), c->pid);
	ASSERT(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
}

static bool st_child_echo_done(void *arg)
{
	struct st_server *sv = arg;

	return sv->accepted > 0 && sv->closed == sv->accepted;
}

void st_child_echo(struct st *t, int wfd)
{
	static struct st_server sv;
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];

	sv.echo = true;
	ASSERT_OK(be_ctx_create(&t->cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	ASSERT_OK(be_listen(w, st_listen_addr(t), &st_server_cbs, &sv, &l));
	ASSERT_OK(be_listener_addr(l, addr, sizeof(addr)));
	ASSERT_EQ(write(wfd, addr, strlen(addr)), (ssize_t)strlen(addr));
	close(wfd);
	st_pump(&w, 1, st_child_echo_done, &sv);
	be_worker_destroy(w);
	be_ctx_destroy(ctx);
	_exit(0);
}
