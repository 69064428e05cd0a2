/*
 * cm.c - the fake event channel, listeners and conns, and the event
 * faults (dropped or delayed events, ports going down).
 *
 * Model. A fake evch wraps an inner one. evch_get takes every event the
 * inner evch has, names our objects in it (a CONNECT_REQUEST makes the
 * fake conn of the request), passes it through the event rules and
 * queues it, due at a count of evch_get calls; then hands out the oldest
 * event that is due. Events of one conn keep their order. Its fd is an
 * epoll set over the inner evch's fd and an eventfd, readable while
 * events wait here. Port changes (be__fake_port) are noticed here, on
 * the evch's thread, which is the one its conns belong to.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "xport/fake/fake.h"

static struct fake_evch *to_ch(struct be_xevch *x)
{
	return container_of(x, struct fake_evch, c.x);
}

static struct fake_listener *to_fl(struct be_xlistener *x)
{
	return container_of(x, struct fake_listener, x);
}

int be__fake_evch_push(struct fake_evch *ch, const struct be_xevent *ev, uint64_t due)
{
	struct fake_conn *c = ev->conn ? to_fconn(ev->conn) : NULL;

	if (be__grow(&ch->q, &ch->cap, ch->count + 1, sizeof(*ch->q), 16))
		return -ENOMEM;
	if (c && due != UINT64_MAX) {
		if (due < c->edue)
			due = c->edue;
		c->edue = due;
	}
	ch->q[ch->count].ev = *ev;
	ch->q[ch->count].due = due;
	ch->q[ch->count].dropped = due == UINT64_MAX;
	ch->count++;
	be__wake_kick(ch->c.wake.efd);
	return 0;
}

/* Drop the queued events naming @c (its requests too). */
static void evch_purge_conn(struct fake_evch *ch, struct fake_conn *c)
{
	uint32_t i, n = 0;

	for (i = 0; i < ch->count; i++)
		if (ch->q[i].ev.conn != &c->x)
			ch->q[n++] = ch->q[i];
	ch->count = n;
}

static void conn_free(struct fake_conn *c)
{
	be__list_del_init(&c->link);
	be__list_del_init(&c->slink);
	be__list_del_init(&c->rlink);
	if (c->ch)
		evch_purge_conn(c->ch, c);
	be__fake_sq_free(c);
	free(c);
}

/* A request nobody will answer (dropped, or its listener closed): refuse
 * it, which destroys the inner conn, and forget it. */
static void conn_abandon(struct fake_conn *c)
{
	const struct be_xport_ops *in = fake_in_ops(c->x.dev);

	if (in->reject(c->in, NULL, 0))
		in->conn_destroy(c->in);
	conn_free(c);
}

static struct fake_conn *conn_new(struct fake_evch *ch)
{
	struct fake_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->x.dev = ch->c.x.dev;
	c->x.evch = &ch->c.x;
	c->ch = ch;
	be__list_init(&c->slink);
	be__list_init(&c->rlink);
	pthread_mutex_lock(&be__fake.lock);
	c->f = be__fake.conn_new;
	be__fake.st.conns++;
	pthread_mutex_unlock(&be__fake.lock);
	be__list_add_tail(&ch->c.conns, &c->link);
	return c;
}

/* ---- ports ---- */

static void evch_port_down(struct fake_evch *ch)
{
	struct be__list *p;

	be__list_for_each(p, &ch->c.conns) {
		struct fake_conn *c = be__list_entry(p, struct fake_conn, link);
		struct be_xevent ev = { .type = BE_XEV_UNREACHABLE, .status = -ENETDOWN };

		if (c->l || c->dead)
			continue; /* a request not answered yet; one already gone */
		if (c->established) {
			be__fake_conn_break(c, BE_XWC_RETRY_EXC_ERR);
			continue;
		}
		/* Still connecting: it never will. */
		c->dead = true;
		c->failed = true;
		ev.conn = &c->x;
		be__fake_evch_push(ch, &ev, ch->gets);
	}
}

static void evch_ports(struct fake_evch *ch)
{
	bool up[BE_XPORT_MAX_PORTS];
	unsigned int gen;
	int i;

	pthread_mutex_lock(&be__fake.lock);
	gen = be__fake.port_gen;
	memcpy(up, be__fake.port_up, sizeof(up));
	pthread_mutex_unlock(&be__fake.lock);
	if (gen == ch->port_gen)
		return;
	ch->port_gen = gen;
	for (i = 0; i < BE_XPORT_MAX_PORTS; i++) {
		struct be_xevent ev = { .type = BE_XEV_PORT_CHANGE, .port = i, .up = up[i] };

		if (up[i] == ch->port_up[i])
			continue;
		ch->port_up[i] = up[i];
		be__fake_evch_push(ch, &ev, ch->gets);
		/* Conns use port 0 (shm and tcp have no other). */
		if (i == 0 && !up[i])
			evch_port_down(ch);
	}
}

/* ---- event channel ---- */

int be__fake_evch_create(struct be_xdev *xd, struct be_xevch **out)
{
	const struct be_xport_ops *in = fake_in_ops(xd);
	struct fake_evch *ch;
	struct be_xevch *x;
	int rc;

	rc = be__xch_new(sizeof(*ch), xd, 0, NULL, NULL, &x);
	if (rc)
		return rc;
	ch = to_ch(x);
	rc = in->evch_create(container_of(xd, struct fake_dev, x)->in, &ch->in);
	if (rc)
		goto err_free;
	rc = be__wake_watch(&ch->c.wake, in->evch_fd(ch->in), EPOLLIN, NULL);
	if (rc)
		goto err_ch;
	pthread_mutex_lock(&be__fake.lock);
	ch->port_gen = be__fake.port_gen;
	memcpy(ch->port_up, be__fake.port_up, sizeof(ch->port_up));
	be__list_add_tail(&be__fake.evchs, &ch->link);
	pthread_mutex_unlock(&be__fake.lock);
	*out = &ch->c.x;
	return 0;

err_ch:
	in->evch_destroy(ch->in);
err_free:
	be__xch_free(&ch->c);
	return rc;
}

void be__fake_evch_destroy(struct be_xevch *xch)
{
	struct fake_evch *ch;
	struct be__list *p;

	if (!xch)
		return;
	ch = to_ch(xch);
	pthread_mutex_lock(&be__fake.lock);
	be__list_del_init(&ch->link);
	pthread_mutex_unlock(&be__fake.lock);
	/* Requests never handed out are ours to refuse; the owner's conns
	 * still open (a caller bug) forget the evch. */
	while (!be__list_empty(&ch->c.conns)) {
		struct fake_conn *c = be__list_entry(be__list_first(&ch->c.conns), struct fake_conn,
						     link);

		if (c->l && !c->handed) {
			conn_abandon(c);
			continue;
		}
		be__list_del_init(&c->link);
		c->ch = NULL;
	}
	/* Listeners go with their evch, as the inner ones do. */
	while ((p = be__list_pop(&ch->c.listeners)))
		free(be__list_entry(p, struct fake_listener, link));
	fake_in_ops(xch->dev)->evch_destroy(ch->in);
	free(ch->q);
	be__xch_free(&ch->c);
}

/* An inner event, with our objects in it, through the rules. */
static void evch_take(struct fake_evch *ch, struct be_xevent *ev)
{
	struct fake_conn *c = NULL;
	uint64_t due = ch->gets;
	int gets = 0, rule;

	if (ev->type == BE_XEV_CONNECT_REQUEST) {
		struct fake_listener *l = ev->listener ? ev->listener->user : NULL;
		const struct be_xport_ops *in = fake_in_ops(ch->c.x.dev);

		c = l ? conn_new(ch) : NULL;
		if (!c) {
			if (in->reject(ev->conn, NULL, 0))
				in->conn_destroy(ev->conn);
			return;
		}
		c->in = ev->conn;
		c->in->user = c;
		c->l = &l->x;
		ev->conn = &c->x;
		ev->listener = &l->x;
	} else if (ev->type == BE_XEV_SRQ_LIMIT) {
		ev->srq = ev->srq ? ev->srq->user : NULL;
	} else if (ev->conn) {
		c = ev->conn->user;
		if (!c || c->dead)
			return; /* gone as far as its owner knows */
		ev->conn = &c->x;
		ev->listener = NULL;
		if (ev->type == BE_XEV_ESTABLISHED)
			c->established = true;
	}
	rule = be__fake_rule_take(ev->type, &gets);
	if (rule == 1) {
		/* A dropped request waits for its listener to close. */
		if (ev->type == BE_XEV_CONNECT_REQUEST)
			be__fake_evch_push(ch, ev, UINT64_MAX);
		return;
	}
	if (rule == 2)
		due += (uint64_t)gets;
	be__fake_evch_push(ch, ev, due);
}

int be__fake_evch_get(struct be_xevch *xch, struct be_xevent *ev)
{
	const struct be_xport_ops *in;
	struct fake_evch *ch;
	struct be_xevent iev;
	uint32_t i;
	int rc, waiting = 0, found = 0;

	if (!xch || !ev)
		return -EINVAL;
	ch = to_ch(xch);
	in = fake_in_ops(xch->dev);
	ch->gets++;
	evch_ports(ch);
	while ((rc = in->evch_get(ch->in, &iev)) > 0)
		evch_take(ch, &iev);
	if (rc < 0 && rc != -EAGAIN && !ch->count)
		return rc;
	for (i = 0; i < ch->count; i++) {
		if (!found && !ch->q[i].dropped && ch->q[i].due <= ch->gets) {
			*ev = ch->q[i].ev;
			if (ev->type == BE_XEV_CONNECT_REQUEST)
				to_fconn(ev->conn)->handed = true;
			memmove(&ch->q[i], &ch->q[i + 1], (ch->count - i - 1) * sizeof(ch->q[0]));
			ch->count--;
			found = 1;
			i--;
			continue;
		}
		if (!ch->q[i].dropped)
			waiting++;
	}
	if (waiting)
		be__wake_kick(ch->c.wake.efd);
	else
		be__wake_drain(ch->c.wake.efd);
	return found;
}

/* ---- listeners ---- */

int be__fake_listen(struct be_xevch *xch, const char *addr, int backlog,
		    struct be_xlistener **out)
{
	struct fake_listener *l;
	int rc;

	if (!xch || !out)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rc = fake_in_ops(xch->dev)->listen(to_ch(xch)->in, addr, backlog, &l->in);
	if (rc) {
		free(l);
		return rc;
	}
	l->in->user = l;
	l->x.dev = xch->dev;
	l->x.evch = xch;
	be__list_add_tail(&to_ch(xch)->c.listeners, &l->link);
	*out = &l->x;
	return 0;
}

int be__fake_listener_addr(struct be_xlistener *xl, char *buf, size_t len)
{
	if (!xl)
		return -EINVAL;
	return fake_in_ops(xl->dev)->listener_addr(to_fl(xl)->in, buf, len);
}

void be__fake_listener_close(struct be_xlistener *xl)
{
	struct fake_evch *ch;
	uint32_t i;

	if (!xl)
		return;
	be__list_del_init(&to_fl(xl)->link);
	ch = to_ch(xl->evch);
	/* Its requests nobody answered are refused; its other events go. */
	for (i = 0; i < ch->count;) {
		struct fake_ev *e = &ch->q[i];

		if (e->ev.listener != xl) {
			i++;
		} else if (e->ev.type == BE_XEV_CONNECT_REQUEST) {
			conn_abandon(to_fconn(e->ev.conn)); /* takes its events */
		} else {
			memmove(e, e + 1, (ch->count - i - 1) * sizeof(*e));
			ch->count--;
		}
	}
	fake_in_ops(xl->dev)->listener_close(to_fl(xl)->in);
	free(to_fl(xl));
}

/* ---- conns ---- */

static int fake_rx_alloc(struct be_xconn *in, uint64_t len, void **out)
{
	struct fake_conn *c = in->user;

	return c->rx_alloc(&c->x, len, out);
}

static void fake_rx_free(struct be_xconn *in, void *buf)
{
	struct fake_conn *c = in->user;

	c->rx_free(&c->x, buf);
}

/* The inner attributes of @a, for fake conn @c. */
static void conn_attr(struct fake_conn *c, const struct be_xconn_attr *a, struct be_xconn_attr *ia)
{
	*ia = *a;
	c->scq = container_of(a->send_cq, struct fake_cq, c.x);
	c->rcq = container_of(a->recv_cq, struct fake_cq, c.x);
	be__list_del_init(&c->slink);
	be__list_del_init(&c->rlink);
	be__list_add_tail(&c->scq->sconns, &c->slink);
	be__list_add_tail(&c->rcq->rconns, &c->rlink);
	c->rx_alloc = a->rx_alloc;
	c->rx_free = a->rx_free;
	c->x.user = a->user;
	ia->send_cq = c->scq->in;
	ia->recv_cq = c->rcq->in;
	ia->srq = a->srq ? container_of(a->srq, struct fake_srq, x)->in : NULL;
	ia->user = c;
	ia->rx_alloc = a->rx_alloc ? fake_rx_alloc : NULL;
	ia->rx_free = a->rx_free ? fake_rx_free : NULL;
}

int be__fake_connect(struct be_xevch *xch, const char *addr, const struct be_xconn_attr *attr,
		     const void *priv, size_t priv_len, struct be_xconn **out)
{
	struct be_xconn_attr ia;
	struct fake_evch *ch;
	struct fake_conn *c;
	bool up;
	int rc;

	if (!xch || !attr || !attr->send_cq || !attr->recv_cq || !out)
		return -EINVAL;
	ch = to_ch(xch);
	c = conn_new(ch);
	if (!c)
		return -ENOMEM;
	conn_attr(c, attr, &ia);
	pthread_mutex_lock(&be__fake.lock);
	up = be__fake.port_up[0];
	pthread_mutex_unlock(&be__fake.lock);
	if (!up) {
		struct be_xevent ev = {
			.type = BE_XEV_UNREACHABLE, .status = -ENETDOWN, .conn = &c->x
		};

		c->dead = true;
		c->failed = true;
		be__fake_evch_push(ch, &ev, ch->gets);
		*out = &c->x;
		return 0;
	}
	rc = fake_in_ops(xch->dev)->connect(ch->in, addr, &ia, priv, priv_len, &c->in);
	if (rc) {
		conn_free(c);
		return rc;
	}
	c->in->user = c;
	*out = &c->x;
	return 0;
}

int be__fake_accept(struct be_xconn *xc, const struct be_xconn_attr *attr, const void *priv,
		    size_t priv_len)
{
	struct be_xconn_attr ia;
	struct fake_conn *c;

	if (!xc || !attr || !attr->send_cq || !attr->recv_cq)
		return -EINVAL;
	c = to_fconn(xc);
	conn_attr(c, attr, &ia);
	c->l = NULL;
	return fake_in_ops(xc->dev)->accept(c->in, &ia, priv, priv_len);
}

int be__fake_reject(struct be_xconn *xc, const void *priv, size_t priv_len)
{
	struct fake_conn *c;
	int rc;

	if (!xc)
		return -EINVAL;
	c = to_fconn(xc);
	rc = fake_in_ops(xc->dev)->reject(c->in, priv, priv_len);
	if (rc)
		return rc;
	conn_free(c); /* the inner conn is gone with it */
	return 0;
}

int be__fake_disconnect(struct be_xconn *xc)
{
	struct fake_conn *c;

	if (!xc)
		return -EINVAL;
	c = to_fconn(xc);
	if (!c->in || c->disc)
		return 0;
	c->disc = true;
	return fake_in_ops(xc->dev)->disconnect(c->in);
}

void be__fake_conn_destroy(struct be_xconn *xc)
{
	struct fake_conn *c;

	if (!xc)
		return;
	c = to_fconn(xc);
	if (c->in)
		fake_in_ops(xc->dev)->conn_destroy(c->in);
	if (c->scq)
		be__fake_cq_forget(c->scq, c);
	if (c->rcq && c->rcq != c->scq)
		be__fake_cq_forget(c->rcq, c);
	conn_free(c);
}

/*
 * The pass-through ops below act on the inner conn alone: fake_fwd()
 * returns it with its transport's ops in *@in, or NULL when @xc is NULL
 * or before the inner connect.
 */
static struct be_xconn *fake_fwd(struct be_xconn *xc, const struct be_xport_ops **in)
{
	*in = xc ? fake_in_ops(xc->dev) : NULL;
	return xc ? to_fconn(xc)->in : NULL;
}

int be__fake_conn_peer_addr(struct be_xconn *xc, char *buf, size_t len)
{
	const struct be_xport_ops *in;
	struct be_xconn *ic = fake_fwd(xc, &in);

	if (ic)
		return in->conn_peer_addr(ic, buf, len);
	return xc ? be__xaddr_printf(buf, len, "-") : -EINVAL;
}

int be__fake_addr_canon(const char *addr, char *buf, size_t len)
{
	const struct be_xport_ops *in = be__fake_inner_ops();

	if (in->addr_canon)
		return in->addr_canon(addr, buf, len);
	return be__xaddr_printf(buf, len, "%s", addr);
}

int be__fake_conn_rx_resume(struct be_xconn *xc)
{
	const struct be_xport_ops *in;
	struct be_xconn *ic = fake_fwd(xc, &in);

	if (!ic)
		return xc ? 0 : -EINVAL;
	return in->conn_rx_resume ? in->conn_rx_resume(ic) : -EOPNOTSUPP;
}

/* grant and revoke (xport.h): the inner conn's, so that its peer's
 * WRITEs, checked there, find them. Both inner transports have them. */
int be__fake_grant(struct be_xconn *xc, void *addr, size_t len, uint32_t *rkey)
{
	const struct be_xport_ops *in;
	struct be_xconn *ic = fake_fwd(xc, &in);

	if (!ic)
		return xc ? -ENOTCONN : -EINVAL;
	return in->grant ? in->grant(ic, addr, len, rkey) : -EOPNOTSUPP;
}

/* The inner transports (tcp, shm) end a grant at once: revoke is never
 * pending here, so no BE_XWC_REVOKE needs translating. */
int be__fake_revoke(struct be_xconn *xc, uint32_t rkey, uint64_t cookie)
{
	const struct be_xport_ops *in;
	struct be_xconn *ic = fake_fwd(xc, &in);

	if (ic && in->revoke)
		return in->revoke(ic, rkey, cookie);
	return 0;
}
