/*
 * peer.c - limits per peer identity: what one client may make a worker
 * hold across all the Engines it opens (docs/SECURITY.md, "Limits").
 *
 * Model. Every Engine a listener accepts belongs to the identity of the
 * peer that connected, one be__peer per identity per worker:
 *
 *   shm          the peer process's uid (SO_PEERCRED): "uid:1000"
 *   tcp, verbs   the peer's host address without its port:
 *                "tcp://10.0.0.2" (the kernel's word, nothing more: peers
 *                behind one NAT are one identity)
 *
 * A shared secret does not tell its holders apart, so it adds no identity
 * of its own: an admitted peer is still counted by its uid or address.
 * Three counts per identity, each with its bound (0: none):
 *
 *   engines      live Engines (accept to reap)     max_peer_engines:
 *                a new one is rejected (BE_REJECT_LIMIT; the connect
 *                fails with -ECONNREFUSED), counted as "limit_refused"
 *   socks        Sockets the peer opened on them   max_peer_sockets:
 *                a new one is refused like on_accept refusing it
 *   grant_bytes  lent to its WRITEs (large.c)      max_peer_grant_bytes:
 *                a WRITE_REQ beyond is answered WRITE_NOMEM (one always
 *                fits while the identity holds no grant)
 *
 * Engines this worker connected have no identity: their peer is one the
 * application chose. An identity lives while an Engine of it does (refs,
 * until the Engine is freed, so that grants released late still find
 * it). A list per worker: it is searched once per accepted connection.
 *
 * Threads: the worker's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

/* The identity of the peer of connection request @ev whose address is
 * @addr ("scheme://host:port") into @out. */
static void peer_identity(const struct be_xevent *ev, const char *addr, char *out, size_t len)
{
	const char *colon;

	if (ev->has_cred) {
		snprintf(out, len, "uid:%u", ev->peer_uid);
		return;
	}
	snprintf(out, len, "%s", addr);
	/* Drop ":port" (IPv6 hosts are bracketed, so the last colon is the
	 * port's when it follows a digit run to the end). */
	colon = strrchr(out, ':');
	if (colon && colon > strstr(out, "://") + 2 && colon[1] &&
	    strspn(colon + 1, "0123456789") == strlen(colon + 1))
		out[colon - out] = '\0';
}

static struct be__peer *peer_find(struct be_worker *w, const char *id)
{
	struct be__list *p;

	for (p = w->peers.next; p != &w->peers; p = p->next) {
		struct be__peer *x = be__list_entry(p, struct be__peer, link);

		if (strcmp(x->id, id) == 0)
			return x;
	}
	return NULL;
}

int be__peer_request(struct be_worker *w, const struct be_xevent *ev, const char *addr,
		     struct be__peer **out)
{
	const struct be_config *cfg = &w->ctx->cfg;
	char id[sizeof(((struct be__peer *)0)->id)];
	struct be__peer *p;

	peer_identity(ev, addr, id, sizeof(id));
	p = peer_find(w, id);
	if (p && cfg->max_peer_engines && p->engines >= cfg->max_peer_engines) {
		w->limit_refused++;
		be_log_warn("admission: refused %s: %s already holds %u Engines "
			    "(max_peer_engines)", addr, id, p->engines);
		return BE_REJECT_LIMIT;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return BE_REJECT_RESOURCES;
		snprintf(p->id, sizeof(p->id), "%s", id);
		be__list_add_tail(&w->peers, &p->link);
	}
	*out = p;
	return 0;
}

void be__peer_attach(struct be__engine *e, struct be__peer *p)
{
	e->pid = p;
	p->refs++;
	p->engines++;
}

void be__peer_forget(struct be_worker *w, struct be__peer *p)
{
	if (p && !p->refs) {
		be__list_del_init(&p->link);
		free(p);
	}
}

void be__peer_engine_gone(struct be__engine *e)
{
	if (e->pid && !e->pid_gone) {
		e->pid_gone = true;
		e->pid->engines--;
	}
}

void be__peer_put(struct be__engine *e)
{
	struct be__peer *p = e->pid;

	if (!p)
		return;
	be__peer_engine_gone(e);
	e->pid = NULL;
	p->refs--;
	be__peer_forget(e->w, p);
}

bool be__peer_sock_ok(struct be__engine *e)
{
	uint32_t max = e->w->ctx->cfg.max_peer_sockets;

	return !e->pid || !max || e->pid->socks < max;
}
