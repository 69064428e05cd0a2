/*
 * conn.c - RPC connections: one be_sock each, client or server side.
 *
 * A client conn belongs to one address of one replica of one channel
 * (struct rpc_addr) and carries that channel's requests to it; a server
 * conn is a socket a listener accepted. Requests flow only from the
 * opener to the acceptor, so a REQUEST on a client conn or a REPLY on a
 * server conn is a protocol error.
 *
 * A conn is referenced by its open socket and by every attempt (client)
 * or request (server) on it, and freed when the last reference goes: a
 * handler may answer after the caller hung up, and the reply is then
 * dropped with nothing freed under it.
 */
#include <errno.h>
#include <stdlib.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

/* Close @c's socket. Returns 1 if it had one: the caller then owns the
 * socket's reference and drops it. */
static int conn_close_sock(struct rpc_conn *c)
{
	if (!c->s)
		return 0;
	be_sock_close(c->s);
	c->s = NULL;
	if (c->role == RPC_CONN_SERVER) {
		be__list_del_init(&c->link);
		c->rpc->ss.conns--;
	}
	return 1;
}

void be__rpc_conn_close(struct rpc_conn *c)
{
	if (conn_close_sock(c))
		be__rpc_conn_put(c);
}

static void client_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	be__rpc_client_recv(user, buf, len);
}

static void client_close(struct be_sock *s, int reason, void *user)
{
	struct rpc_conn *c = user;

	/* The peer closing its socket (reason 0) ends the conn as surely as
	 * a failure: its requests will not be answered. */
	if (!reason)
		reason = -ECONNRESET;
	c->refs++;
	if (c->addr)
		be__rpc_addr_down(c->addr, reason);
	else
		be__rpc_conn_failed(c, reason);
	/* The socket's reference is not the last (we hold one): drop it
	 * without a put, so that only our put below may free @c. */
	c->refs -= conn_close_sock(c);
	be__rpc_conn_put(c);
}

const struct be_sock_cbs be__rpc_client_cbs = {
	.on_recv = client_recv,
	.on_close = client_close,
};

static void server_recv(struct be_sock *s, void *buf, size_t len, void *user)
{
	be__rpc_server_recv(user, buf, len);
}

static void server_close(struct be_sock *s, int reason, void *user)
{
	be__rpc_conn_close(user);
}

static int server_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	struct be_rpc *rpc = user;
	struct rpc_conn *c;
	struct be__list *p;

	/* l is NULL when the Engine's listener was closed since: the
	 * server stopped accepting there (be_rpc_unlisten()), on the
	 * Engines it already has too. */
	if (rpc->destroyed || !l)
		return -ECONNREFUSED;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct rpc_conn){ .rpc = rpc, .s = s, .role = RPC_CONN_SERVER, .refs = 1 };
	be__list_init(&c->atts);
	for (p = rpc->lsts.next; p != &rpc->lsts; p = p->next) {
		struct rpc_lst *rl = be__list_entry(p, struct rpc_lst, link);

		if (rl->l == l)
			c->lst = rl;
	}
	be__list_add_tail(&rpc->sconns, &c->link);
	rpc->ss.conns++;
	be_sock_set_user(s, c);
	return 0;
}

const struct be_sock_cbs be__rpc_server_cbs = {
	.on_recv = server_recv,
	.on_close = server_close,
	.on_accept = server_accept,
};
