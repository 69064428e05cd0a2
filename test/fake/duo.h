/*
 * duo.h - the scenario most fault tests share: one client worker with
 * two Engines to one server worker (two listeners), both warmed up with
 * one eager message. A fault is set on the first Engine; the second must
 * not notice.
 */
#ifndef BE_TEST_FAKE_DUO_H
#define BE_TEST_FAKE_DUO_H

#include "ftest.h"

#define DUO_MSG 1000          /* above max_inline: completes with its SEND */
#define DUO_LARGE (1u << 20)  /* above eager_max */

struct duo {
	struct ft t;
	struct be_ctx *ctx;
	struct be_worker *ws[2];   /* server, client */
	struct be_listener *l, *l2;
	struct be_sock *c, *c2;    /* client sockets, one per Engine */
	struct st_server srv, srv2;
	struct st_server cli, cli2;
	struct st_sends sends, sends2;
};

/* ft_init(); the test may then adjust s->t.st.cfg before duo_start(). */
void duo_init(struct duo *s, int argc, char **argv);
/* Set up both Engines and warm them up (one message each, delivered). */
void duo_start(struct duo *s);
/* Send up to @n messages of @len bytes on the first Engine, running
 * @w's progress after each when @w is not NULL, until one is refused
 * with -ENOTCONN (its Engine failed; the buffer is freed). Returns how
 * many were sent. */
int duo_send(struct duo *s, int n, size_t len, struct be_worker *w);
/* Pump until the first Engine's sends completed (@n in all) and both of
 * its sockets got on_close; check each send completed exactly once. */
void duo_wait_failed(struct duo *s, int n);
/* Set @f on the first Engine, send one DUO_LARGE message on it and wait
 * (duo_wait_failed) until it failed: the send completed with @err, as
 * did the client socket's on_close, and nothing of it was delivered. */
void duo_large_fails(struct duo *s, const struct be__fake_faults *f, int err);
/* The second Engine still carries an eager and a large message; every
 * receive buffer is back; tear everything down. */
void duo_finish(struct duo *s);

#endif /* BE_TEST_FAKE_DUO_H */
