/*
 * listener.c - listeners: accept Engines on a worker's transport.
 *
 * A listener belongs to one worker; connection requests reach that
 * worker's event channel, which creates an acceptor-side Engine
 * (engine.c). Sockets the peer then opens on that Engine are offered to
 * the listener's on_accept. Closing a listener stops new Engines; Engines
 * already accepted keep working and keep the callbacks they were given.
 * struct be_listener is in src/engine/worker.h: Engines read it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <be/sock.h>
#include "engine/engine.h"
#include "sock/listener.h"
#include "util/log.h"

int be_listen(struct be_worker *w, const char *addr, const struct be_sock_cbs *cbs, void *user,
	      struct be_listener **out)
{
	const char *p = addr ? strstr(addr, "://") : NULL;
	struct be_listener *l;
	char scheme[16];
	size_t n;
	int rc;

	if (!w || !p || !cbs || !cbs->on_accept || !out)
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(w);
	if (w->shutdown)
		return -ESHUTDOWN;
	n = (size_t)(p - addr);
	if (!n || n >= sizeof(scheme) || strlen(p + 3) >= BE_XPORT_ADDR_MAX)
		return -EINVAL;
	memcpy(scheme, addr, n);
	scheme[n] = '\0';
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rc = be__worker_wdev(w, scheme, p + 3, true, &l->wd);
	if (rc)
		goto err_free;
	l->w = w;
	l->cbs = *cbs;
	l->user = user;
	snprintf(l->scheme, sizeof(l->scheme), "%s", scheme);
	rc = l->wd->cd->ops->listen(l->wd->evch, p + 3, 128, &l->xl);
	if (rc) {
		be_log_err("listen %s: %s", addr, be_strerror(rc));
		goto err_free;
	}
	l->xl->user = l;
	be__list_add_tail(&w->listeners, &l->link);
	*out = l;
	return 0;

err_free:
	free(l);
	return rc;
}

int be_listener_set_admit(struct be_listener *l, be_admit_cb cb, void *user)
{
	if (!l)
		return -EINVAL;
	BE_WORKER_ASSERT_THREAD(l->w);
	l->admit = cb;
	l->admit_user = user;
	return 0;
}

int be_listener_addr(struct be_listener *l, char *buf, size_t len)
{
	size_t n = strlen(l->scheme) + 3;

	BE_WORKER_ASSERT_THREAD(l->w);
	if (!l->xl)
		return -ESHUTDOWN;
	if (len <= n)
		return -ENOSPC;
	snprintf(buf, len, "%s://", l->scheme);
	return l->wd->cd->ops->listener_addr(l->xl, buf + n, len - n);
}

void be_listener_close(struct be_listener *l)
{
	struct be__list *p;

	if (!l)
		return;
	BE_WORKER_ASSERT_THREAD(l->w);
	for (p = l->w->engines.next; p != &l->w->engines; p = p->next) {
		struct be__engine *e = be__list_entry(p, struct be__engine, wlink);

		if (e->listener == l)
			e->listener = NULL;
	}
	be__listener_stop(l);
	be__list_del_init(&l->link);
	free(l);
}

/* Stop listening (be_listener_close(), or the worker shuts down and the
 * handle stays valid): the transport refuses new connections; requests
 * already under way are rejected by the worker (engine.c). */
void be__listener_stop(struct be_listener *l)
{
	if (l->xl)
		l->wd->cd->ops->listener_close(l->xl);
	l->xl = NULL;
}
