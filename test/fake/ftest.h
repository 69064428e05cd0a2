/*
 * ftest.h - helper of the fault tests (test/fake): the socket tests'
 * helper (test/sock/stest.h) on the fake transport (src/xport/fake).
 *
 * Every test runs its workers over "fake" wrapping the inner transport
 * named by --inner (tcp, the default, or shm), scripts its faults with
 * the API of src/xport/fake/fake.h, and checks what the engine promises
 * (include/be/sock.h): every send completes exactly once, on_close says
 * why, nothing leaks (the ASan build), other Engines go on. Faults fire
 * on counts; the only waits are st_pump()'s conditions.
 */
#ifndef BE_TEST_FAKE_FTEST_H
#define BE_TEST_FAKE_FTEST_H

#include "sock/stest.h"
#include "xport/fake/fake.h"

struct ft {
	struct st st;
	const char *inner;   /* "tcp" or "shm" */
	int naddr;
	char addr[160];
};

/* Parse --inner; reset the fake transport's faults; t->st as st_init()
 * makes it, on transport "fake". */
void ft_init(struct ft *t, int argc, char **argv);
/* A fresh listen address on the inner transport. */
const char *ft_addr(struct ft *t);
/* st_pair() on a fresh fake address. */
void ft_pair(struct ft *t, struct be_ctx **ctx, struct be_worker *ws[2], struct st_server *srv,
	     struct be_listener **l, char *addr, size_t len);
/* Another listener on @w (callbacks st_server_cbs, user @srv). */
void ft_listen(struct ft *t, struct be_worker *w, struct st_server *srv, struct be_listener **l,
	       char *addr, size_t len);

/* The transport conn under socket @s (its Engine's). */
struct be_xconn *ft_conn(struct be_sock *s);

/* Connect @w to @addr and queue one message st_msg(@len, @seed) on the
 * new socket (st_send_cb into @sends); returns the socket. The client
 * socket's record is a struct st_server (callbacks st_server_cbs, user
 * @cli): its closed, close_reason and recvd. Fails the test on an error. */
struct be_sock *ft_connect_send(struct be_worker *w, const char *addr, struct st_server *cli,
				size_t len, uint32_t seed, struct st_sends *sends);

/* Check that the fake transport failed exactly one send WR (fail_wr or
 * break_after), of opcode @op. */
void ft_check_one_failed(enum be_xwc_opcode op);

/* Check that every receive buffer of @w's fake queues is back: posted on
 * its SRQ or waiting to be posted again, none lost. Call when nothing is
 * in flight. */
void ft_check_srq(struct be_worker *w);

#endif /* BE_TEST_FAKE_FTEST_H */
