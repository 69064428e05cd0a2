/*
 * fork.h - a server in a child process, for tests that kill, stop or
 * starve the peer. The child runs an echo server on its own context and
 * worker and tells the parent its address through a pipe.
 */
#ifndef BE_TEST_SOCK_FORK_H
#define BE_TEST_SOCK_FORK_H

#include <sys/types.h>

#include "stest.h"

struct st_child {
	pid_t pid;
	char addr[160];
};

/* Fork; the child calls @body(t, wfd) which must write the listen
 * address (NUL-terminated) to wfd and never return. */
void st_child_start(struct st *t, struct st_child *c, void (*body)(struct st *t, int wfd));
/* SIGKILL (if alive) and reap. */
void st_child_kill(struct st_child *c);
/* Wait for a normal exit; asserts status 0. */
void st_child_wait(struct st_child *c);

/* A body: echo server until the peer closes every socket, then exit 0. */
void st_child_echo(struct st *t, int wfd);

#endif
