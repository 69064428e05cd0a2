/*
 * cm.c - connection management of the tcp transport: the event channel,
 * conns (their lifetime and epoll membership), the HELLO / ACCEPT /
 * REJECT handshake with its deadlines, listeners, and connect / accept /
 * reject / disconnect.
 *
 * Lifetimes: conns and listeners belong to the user, except conns that
 * were never handed out (a handshake still in progress on a listener,
 * or a CONNECT_REQUEST still queued when its listener closes) and conns
 * passed to reject(). Destroy conns and listeners before the srq, cq and
 * evch they use, and all of those before the device; a parent destroyed
 * early detaches (and logs) rather than leaving dangling pointers.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/addr.h"
#include "xport/tcp/tcp.h"

#define TCP_HELLO_TIMEOUT_MS 10000 /* inbound socket must say HELLO by then */
#define TCP_ACCEPT_BATCH 64
#define TCP_MAX_HANDSHAKE 1024     /* inbound + outbound handshakes per evch */

/* Sentinels in epoll data: queued-events eventfd and the timerfd. */
static int tcp_efd_tag;
static int tcp_tfd_tag;

static void tcp_set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- event channel --------------------------------------------------- */

void be__tcp_evch_push(struct tcp_evch *ch, const struct be_xevent *ev)
{
	if (ch)
		be__xch_push(&ch->c, ev);
}

int be__tcp_evch_create(struct be_xdev *xdev, struct be_xevch **out)
{
	return be__xch_new(sizeof(struct tcp_evch), xdev, BE__WAKE_TIMER, &tcp_efd_tag,
			   &tcp_tfd_tag, out);
}

static void conn_free(struct tcp_conn *c);
static void listener_free(struct tcp_listener *l);

void be__tcp_evch_destroy(struct be_xevch *xch)
{
	struct tcp_evch *ch;

	if (!xch)
		return;
	ch = container_of(xch, struct tcp_evch, c.x);
	while (!be__list_empty(&ch->c.listeners)) {
		struct tcp_listener *l = container_of(ch->c.listeners.next, struct tcp_listener, link);

		be_log_err("tcp: evch destroyed with listener %s open; closing it", l->addr);
		listener_free(l);
	}
	while (!be__list_empty(&ch->c.conns)) {
		struct tcp_conn *c = container_of(ch->c.conns.next, struct tcp_conn, ev_link);

		/* Conns never handed to the user go with the evch. */
		if (c->state == TCP_C_WAIT_HELLO ||
		    (c->state == TCP_C_REQUEST && be__xch_has(&ch->c, &c->x, 0))) {
			conn_free(c);
			continue;
		}
		be_log_err("tcp: evch destroyed with conn %s alive; detaching it", c->peer);
		/* The user still owns c: cut it off, keep the object. */
		be__tcp_conn_close_fd(c);
		if (c->state != TCP_C_ERROR)
			c->state = TCP_C_DEAD;
		be__list_del_init(&c->ev_link);
		c->ch = NULL;
		c->x.evch = NULL;
	}
	be__xch_free(&ch->c);
}

static void evch_timer_update(struct tcp_evch *ch)
{
	struct be__list *p;
	uint64_t min = 0;

	for (p = ch->c.conns.next; ch->nhandshake && p != &ch->c.conns; p = p->next) {
		struct tcp_conn *c = container_of(p, struct tcp_conn, ev_link);

		if (c->deadline_ns && (!min || c->deadline_ns < min))
			min = c->deadline_ns;
	}
	be__wake_arm_timer(&ch->c.wake, min);
}

static void conn_set_deadline(struct tcp_conn *c, int ms)
{
	if (!c->deadline_ns)
		c->ch->nhandshake++;
	c->deadline_ns = be__now_ns() + (uint64_t)ms * 1000000ull;
	evch_timer_update(c->ch);
}

static void conn_clear_deadline(struct tcp_conn *c)
{
	if (!c->deadline_ns)
		return;
	c->deadline_ns = 0;
	if (c->ch) {
		c->ch->nhandshake--;
		evch_timer_update(c->ch);
	}
}

/* ---- conns: lifetime and epoll membership ----------------------------- */

static struct tcp_conn *conn_new(struct tcp_evch *ch)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rbuf = malloc(TCP_RBUF_SIZE);
	if (!c->rbuf) {
		free(c);
		return NULL;
	}
	if (be__xch_conn_reserve(&ch->c)) {
		free(c->rbuf);
		free(c);
		return NULL;
	}
	c->kind = TCP_K_CONN;
	c->fd = -1;
	c->ch = ch;
	c->dev = container_of(ch->c.x.dev, struct tcp_dev, x);
	c->x.dev = ch->c.x.dev;
	c->x.evch = &ch->c.x;
	be__list_init(&c->scq_link);
	be__list_init(&c->rcq_link);
	be__list_init(&c->sep_link);
	be__list_init(&c->rep_link);
	be__list_init(&c->srq_link);
	be__list_init(&c->kick_link);
	be__list_init(&c->ack_link);
	be__xgrants_init(&c->grants);
	be__list_add_tail(&ch->c.conns, &c->ev_link);
	return c;
}

static int cq_epoll_ctl(struct tcp_cq *cq, int op, struct tcp_conn *c, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = c };

	return epoll_ctl(cq->c.wake.epfd, op, c->fd, &e);
}

/* Record whether @c is in @cq's epoll set (*@in: &c->ep_scq or
 * &c->ep_rcq), keeping the cq's epset and count with it. */
static void cq_ep_member(struct tcp_cq *cq, struct tcp_conn *c, int *in, int member)
{
	struct be__list *l = in == &c->ep_scq ? &c->sep_link : &c->rep_link;

	if (*in == member)
		return;
	*in = member;
	if (member) {
		be__list_add_tail(&cq->epset, l);
		cq->nep++;
	} else {
		be__list_del_init(l);
		cq->nep--;
	}
}

/* Make @c's entry in @cq's epoll set (*@in: whether it has one) ask for
 * @want, or leave the set when @want is 0. */
static void cq_epoll_set(struct tcp_cq *cq, struct tcp_conn *c, int *in, uint32_t want)
{
	if (!want && *in) {
		cq_epoll_ctl(cq, EPOLL_CTL_DEL, c, 0);
		cq_ep_member(cq, c, in, 0);
	} else if (want) {
		if (cq_epoll_ctl(cq, *in ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c, want) == 0)
			cq_ep_member(cq, c, in, 1);
	}
}

void be__tcp_conn_epoll_update(struct tcp_conn *c)
{
	uint32_t want = 0;

	if (c->fd < 0)
		return;
	if (c->state == TCP_C_ESTABLISHED || c->state == TCP_C_ERROR)
		want = (c->rx_stalled ? 0 : EPOLLIN) | (be__tcp_conn_tx_pending(c) ? EPOLLOUT : 0);
	if (want == c->ep_events)
		return;
	if (c->scq)
		cq_epoll_set(c->scq, c, &c->ep_scq, want);
	if (c->rcq && c->rcq != c->scq)
		cq_epoll_set(c->rcq, c, &c->ep_rcq, want);
	c->ep_events = want;
}

static int conn_evch_epoll(struct tcp_conn *c, int op, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = c };

	if (epoll_ctl(c->ch->c.wake.epfd, op, c->fd, &e) < 0)
		return -errno;
	c->ep_ch = op != EPOLL_CTL_DEL;
	return 0;
}

void be__tcp_conn_close_fd(struct tcp_conn *c)
{
	if (c->fd < 0)
		return;
	if (c->ep_scq && c->scq) {
		cq_epoll_ctl(c->scq, EPOLL_CTL_DEL, c, 0);
		cq_ep_member(c->scq, c, &c->ep_scq, 0);
	}
	if (c->ep_rcq && c->rcq) {
		cq_epoll_ctl(c->rcq, EPOLL_CTL_DEL, c, 0);
		cq_ep_member(c->rcq, c, &c->ep_rcq, 0);
	}
	if (c->ep_ch && c->ch)
		conn_evch_epoll(c, EPOLL_CTL_DEL, 0);
	c->ep_scq = c->ep_rcq = c->ep_ch = 0;
	c->ep_events = 0;
	close(c->fd);
	c->fd = -1;
}

static int conn_check_attr(struct tcp_evch *ch, const struct be_xconn_attr *attr)
{
	if (!attr || !attr->send_cq || !attr->recv_cq)
		return -EINVAL;
	if (attr->srq && attr->srq->cq != attr->recv_cq)
		return -EINVAL;
	if (attr->send_cq->dev != ch->c.x.dev || attr->recv_cq->dev != ch->c.x.dev)
		return -EINVAL;
	if (attr->max_send_wr > TCP_MAX_QP_WR)
		return -EINVAL;
	return 0;
}

/* Take the cqs, srq and send queue of @attr (checked). */
static int conn_attach(struct tcp_conn *c, const struct be_xconn_attr *attr)
{
	int ret = be__tcp_conn_alloc_sq(c, attr->max_send_wr, attr->max_inline);

	if (ret)
		return ret;
	c->scq = container_of(attr->send_cq, struct tcp_cq, c.x);
	c->rcq = container_of(attr->recv_cq, struct tcp_cq, c.x);
	be__list_add_tail(&c->scq->conns, &c->scq_link);
	if (c->rcq != c->scq)
		be__list_add_tail(&c->rcq->conns, &c->rcq_link);
	if (attr->srq) {
		c->srq = container_of(attr->srq, struct tcp_srq, x);
		be__list_add_tail(&c->srq->conns, &c->srq_link);
	}
	c->x.user = attr->user;
	c->rx_alloc = attr->rx_alloc;
	c->rx_free = attr->rx_free;
	c->timeout_ms = attr->timeout_ms > 0 ? attr->timeout_ms : TCP_DEFAULT_TIMEOUT_MS;
	return 0;
}

static void conn_free(struct tcp_conn *c)
{
	be__tcp_conn_close_fd(c);
	conn_clear_deadline(c);
	be__tcp_conn_free_aslots(c);
	if (c->rx_has_recv && c->rcq) {
		/* A receive taken for a frame that never finished: give it back. */
		struct be_xwc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = c->rx_recv.wr_id;
		wc.status = BE_XWC_WR_FLUSH_ERR;
		wc.opcode = c->rx.type == TCP_F_SEND ? BE_XWC_RECV : BE_XWC_RECV_IMM;
		be__tcp_cq_push(c->rcq, &wc);
	}
	be__list_del_init(&c->kick_link);
	be__list_del_init(&c->ack_link);
	if (c->scq) {
		be__wcq_forget(&c->scq->wcq, &c->x);
		be__list_del_init(&c->scq_link);
	}
	if (c->rcq) {
		if (c->rcq != c->scq)
			be__wcq_forget(&c->rcq->wcq, &c->x);
		be__list_del_init(&c->rcq_link);
	}
	if (c->srq)
		be__list_del_init(&c->srq_link);
	if (c->ch) {
		be__xch_conn_release(&c->ch->c, &c->x);
		be__list_del_init(&c->ev_link);
	}
	be__tcp_conn_free_sq(c);
	free(c->addrs);
	be__xgrants_fini(&c->grants);
	free(c->rbuf);
	free(c);
}

void be__tcp_conn_destroy(struct be_xconn *xc)
{
	if (xc)
		conn_free(container_of(xc, struct tcp_conn, x));
}

/* ---- handshake --------------------------------------------------------- */

/* Write a handshake frame in one go: a fresh socket's buffer takes 88 bytes. */
static int conn_send_hs(struct tcp_conn *c, uint8_t type, const void *priv, size_t len)
{
	struct tcp_hdr h = { .magic = TCP_MAGIC, .type = type };
	uint8_t buf[TCP_HDR_LEN + BE_XPORT_PRIV_MAX];
	ssize_t n;

	h.len = (uint32_t)len;
	if (type == TCP_F_HELLO)
		h.addr = TCP_PROTO_VERSION;
	be__tcp_hdr_pack(buf, &h);
	if (len)
		memcpy(buf + TCP_HDR_LEN, priv, len);
	do
		n = send(c->fd, buf, TCP_HDR_LEN + len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != TCP_HDR_LEN + len)
		return -EIO;
	return 0;
}

static void conn_unreachable(struct tcp_conn *c, int status)
{
	struct be_xevent ev;

	be_log_info("tcp: connect to %s failed: %s", c->peer, strerror(-status));
	be__tcp_conn_close_fd(c);
	conn_clear_deadline(c);
	c->state = TCP_C_DEAD;
	memset(&ev, 0, sizeof(ev));
	ev.type = BE_XEV_UNREACHABLE;
	ev.status = status;
	ev.conn = &c->x;
	be__tcp_evch_push(c->ch, &ev);
}

/*
 * Connector: start the TCP connect to the next address the name resolved
 * to (c->addrs). Each is tried in turn while the ones before fail, as a
 * name such as "localhost" may resolve first to ::1 with the listener on
 * 127.0.0.1 only; the connect's one deadline bounds them all. Once a TCP
 * connect succeeds the conn stays with that peer, which answers the
 * HELLO. Returns 0 with an attempt in flight; 1 with *@err the last
 * attempt's error when no address is left; or -errno (no fd, epoll).
 */
static int conn_connect_next(struct tcp_conn *c, int *err)
{
	while (c->addrs && c->addr_next < c->addrs->n) {
		const struct sockaddr *sa = (const void *)&c->addrs->ss[c->addr_next];
		socklen_t sl = c->addrs->len[c->addr_next];
		char num[BE_XPORT_ADDR_MAX] = "?";
		int r;

		c->addr_next++;
		be__tcp_conn_close_fd(c);
		c->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			r = -errno;
			if (r != -EAFNOSUPPORT)
				return r;
			*err = r; /* no IPv6 here: the next one may be IPv4 */
			continue;
		}
		tcp_set_nodelay(c->fd);
		if (connect(c->fd, sa, sl) == 0 || errno == EINPROGRESS)
			return conn_evch_epoll(c, EPOLL_CTL_ADD, EPOLLOUT);
		/* Refused right away (loopback). */
		*err = -errno;
		be__inet_format(sa, num, sizeof(num));
		be_log_info("tcp: connect to %s (%s) failed: %s", c->peer, num, strerror(-*err));
	}
	be__tcp_conn_close_fd(c);
	return 1;
}

const char *be__tcp_hs_check(const uint8_t *buf, uint32_t avail, uint8_t expect,
			     struct tcp_hdr *h)
{
	if (avail < TCP_HDR_LEN)
		return NULL;
	be__tcp_hdr_unpack(h, buf);
	if (h->magic != TCP_MAGIC || h->rsvd || h->status || h->len > BE_XPORT_PRIV_MAX || h->ack)
		return "bad handshake header";
	if (avail < TCP_HDR_LEN + h->len)
		return NULL;
	if (expect == TCP_F_HELLO) {
		/* Nothing may follow a HELLO: the connector waits for the
		 * answer before it sends anything else. */
		if (h->type != TCP_F_HELLO || h->addr != TCP_PROTO_VERSION || h->imm || h->rkey ||
		    avail != TCP_HDR_LEN + h->len)
			return "bad HELLO";
		return NULL;
	}
	/* Frames may follow an ACCEPT at once; nothing follows a REJECT. */
	if (h->type != TCP_F_ACCEPT && (h->type != TCP_F_REJECT || avail != TCP_HDR_LEN + h->len))
		return "bad handshake answer";
	return NULL;
}

/*
 * Read handshake bytes into rbuf; returns 1 with *h set when a whole
 * frame (header + up to BE_XPORT_PRIV_MAX bytes) is there and is what
 * @expect allows (be__tcp_hs_check()), 0 if more is needed, or -errno
 * (hang-up: -ECONNRESET; malformed: -EPROTO with *@why).
 */
static int conn_hs_read(struct tcp_conn *c, uint8_t expect, struct tcp_hdr *h, const char **why)
{
	for (;;) {
		ssize_t n;

		if (c->rend >= TCP_HDR_LEN) {
			*why = be__tcp_hs_check(c->rbuf, c->rend, expect, h);
			if (*why)
				return -EPROTO;
			if (c->rend >= TCP_HDR_LEN + h->len)
				return 1;
		}
		n = recv(c->fd, c->rbuf + c->rend, TCP_RBUF_SIZE - c->rend, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		c->rend += (uint32_t)n;
	}
}

/* *@ev: an event @type of @c that carries the private data of the
 * handshake frame @h (in c->rbuf, after its header). */
static void conn_hs_event(struct tcp_conn *c, const struct tcp_hdr *h, enum be_xev_type type,
			  struct be_xevent *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	ev->conn = &c->x;
	ev->priv_len = (uint8_t)h->len;
	memcpy(ev->priv, c->rbuf + TCP_HDR_LEN, h->len);
}

/* Connector: the acceptor's answer arrived, the conn joins its cqs. */
static void conn_established(struct tcp_conn *c, const struct tcp_hdr *h)
{
	struct be_xevent ev;

	conn_hs_event(c, h, BE_XEV_ESTABLISHED, &ev);
	conn_evch_epoll(c, EPOLL_CTL_DEL, 0);
	conn_clear_deadline(c);
	c->rpos = TCP_HDR_LEN + h->len;
	c->state = TCP_C_ESTABLISHED;
	be__tcp_conn_epoll_update(c);
	be__tcp_evch_push(c->ch, &ev);
	/* Frames that came right behind the ACCEPT sit in rbuf already. */
	if (c->rend > c->rpos)
		be__tcp_cq_kick(c->rcq, c);
}

static void conn_hs_progress(struct tcp_conn *c, uint32_t events)
{
	struct be_xevent ev;
	struct tcp_hdr h;
	const char *why = NULL;
	int r;

	switch (c->state) {
	case TCP_C_CONNECTING: {
		int err = 0;
		socklen_t el = sizeof(err);

		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err) {
			err = -err;
			if (c->addr_next < c->addrs->n)
				be_log_info("tcp: connect to %s: address %u of %u failed: %s; "
					    "trying the next", c->peer, c->addr_next, c->addrs->n,
					    strerror(-err));
			r = conn_connect_next(c, &err);
			if (r)
				conn_unreachable(c, r < 0 ? r : err);
			return;
		}
		free(c->addrs);
		c->addrs = NULL;
		r = conn_send_hs(c, TCP_F_HELLO, c->ctl, c->ctl_len);
		c->ctl_len = 0;
		if (r) {
			conn_unreachable(c, r);
			return;
		}
		c->state = TCP_C_HELLO_SENT;
		conn_evch_epoll(c, EPOLL_CTL_MOD, EPOLLIN);
		return;
	}
	case TCP_C_HELLO_SENT:
		r = conn_hs_read(c, TCP_F_ACCEPT, &h, &why);
		if (r == 0)
			return;
		if (r < 0) {
			if (r == -EPROTO)
				be_log_err("tcp: connect to %s: %s (type %u)", c->peer, why, h.type);
			conn_unreachable(c, r);
			return;
		}
		if (h.type == TCP_F_ACCEPT) {
			conn_established(c, &h);
			return;
		}
		conn_hs_event(c, &h, BE_XEV_REJECTED, &ev);
		ev.status = -ECONNREFUSED;
		be__tcp_conn_close_fd(c);
		conn_clear_deadline(c);
		c->state = TCP_C_DEAD;
		be__tcp_evch_push(c->ch, &ev);
		return;
	case TCP_C_WAIT_HELLO:
		r = conn_hs_read(c, TCP_F_HELLO, &h, &why);
		if (r == 0)
			return;
		if (r < 0) {
			if (r == -EPROTO)
				be_log_err("tcp: inbound connection from %s: %s; closed", c->peer, why);
			else
				be_log_info("tcp: inbound connection from %s: hung up before HELLO", c->peer);
			conn_free(c);
			return;
		}
		conn_hs_event(c, &h, BE_XEV_CONNECT_REQUEST, &ev);
		ev.listener = &c->listener->x;
		c->rpos = c->rend = 0;
		conn_evch_epoll(c, EPOLL_CTL_DEL, 0);
		conn_clear_deadline(c);
		c->state = TCP_C_REQUEST;
		be__tcp_evch_push(c->ch, &ev);
		return;
	default:
		return;
	}
}

static void listener_accept(struct tcp_listener *l, struct tcp_evch *ch)
{
	int i;

	for (i = 0; i < TCP_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_conn *c;
		int fd;

		fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				be_log_err("tcp: accept on %s: %s", l->addr, strerror(errno));
			return;
		}
		if (ch->nhandshake >= TCP_MAX_HANDSHAKE) {
			/* A flood of sockets that never say HELLO must not
			 * pin unbounded memory; they time out meanwhile. */
			be_log_warn("tcp: %u handshakes pending on %s; refusing", ch->nhandshake,
				    l->addr);
			close(fd);
			continue;
		}
		tcp_set_nodelay(fd);
		c = conn_new(ch);
		if (!c) {
			be_log_err("tcp: out of memory accepting on %s", l->addr);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->state = TCP_C_WAIT_HELLO;
		c->listener = l;
		if (be__inet_format((struct sockaddr *)&ss, c->peer, sizeof(c->peer)))
			snprintf(c->peer, sizeof(c->peer), "?");
		if (conn_evch_epoll(c, EPOLL_CTL_ADD, EPOLLIN) < 0) {
			conn_free(c);
			continue;
		}
		conn_set_deadline(c, TCP_HELLO_TIMEOUT_MS);
	}
}

static void evch_check_deadlines(struct tcp_evch *ch)
{
	uint64_t now = be__now_ns();
	struct be__list *p, *next;

	for (p = ch->c.conns.next; p != &ch->c.conns; p = next) {
		struct tcp_conn *c = container_of(p, struct tcp_conn, ev_link);

		next = p->next;
		if (!c->deadline_ns || now < c->deadline_ns)
			continue;
		if (c->state == TCP_C_WAIT_HELLO) {
			be_log_info("tcp: inbound connection from %s: no HELLO in time; closed",
				    c->peer);
			conn_free(c);
		} else {
			conn_unreachable(c, -ETIMEDOUT);
		}
	}
}

int be__tcp_evch_get(struct be_xevch *xch, struct be_xevent *ev)
{
	struct epoll_event evs[32];
	struct tcp_evch *ch;
	int n, i;

	if (!xch || !ev)
		return -EINVAL;
	ch = container_of(xch, struct tcp_evch, c.x);
	n = epoll_wait(ch->c.wake.epfd, evs, (int)BE_ARRAY_SIZE(evs), 0);
	for (i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;

		if (p == &tcp_efd_tag)
			continue;
		if (p == &tcp_tfd_tag) {
			be__wake_drain(ch->c.wake.tfd);
			continue;
		}
		if (*(int *)p == TCP_K_LISTENER)
			listener_accept(p, ch);
		else
			conn_hs_progress(p, evs[i].events);
	}
	if (ch->nhandshake)
		evch_check_deadlines(ch);
	return be__xch_pop(&ch->c, ev);
}

/* ---- listeners --------------------------------------------------------- */

int be__tcp_listen(struct be_xevch *xch, const char *addr, int backlog,
		   struct be_xlistener **out)
{
	struct sockaddr_storage ss;
	struct tcp_listener *l;
	struct tcp_evch *ch;
	socklen_t sl;
	int ret;

	if (!xch || !out)
		return -EINVAL;
	ch = container_of(xch, struct tcp_evch, c.x);
	ret = be__inet_resolve(addr, true, &ss, &sl);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->kind = TCP_K_LISTENER;
	l->x.dev = xch->dev;
	l->x.evch = xch;
	l->fd = be__xch_listen_fd(&ch->c, (struct sockaddr *)&ss, sl, SOCK_STREAM, backlog, l);
	if (l->fd < 0) {
		ret = l->fd;
		goto err_free;
	}
	sl = sizeof(ss);
	if (getsockname(l->fd, (struct sockaddr *)&ss, &sl) < 0) {
		ret = -errno;
		goto err_close;
	}
	ret = be__inet_format((struct sockaddr *)&ss, l->addr, sizeof(l->addr));
	if (ret)
		goto err_close;
	be__list_add_tail(&ch->c.listeners, &l->link);
	*out = &l->x;
	return 0;

err_close:
	close(l->fd);
err_free:
	free(l);
	return ret;
}

int be__tcp_listener_addr(struct be_xlistener *xl, char *buf, size_t len)
{
	if (!xl || !buf || !len)
		return -EINVAL;
	return be__xaddr_printf(buf, len, "%s", container_of(xl, struct tcp_listener, x)->addr);
}

static void listener_free(struct tcp_listener *l)
{
	struct tcp_evch *ch = container_of(l->x.evch, struct tcp_evch, c.x);
	struct be__list *p, *next;

	epoll_ctl(ch->c.wake.epfd, EPOLL_CTL_DEL, l->fd, NULL);
	close(l->fd);
	/* Requests not yet handed to the user die with the listener. */
	for (p = ch->c.conns.next; p != &ch->c.conns; p = next) {
		struct tcp_conn *c = container_of(p, struct tcp_conn, ev_link);

		next = p->next;
		if (c->listener != l)
			continue;
		if (c->state == TCP_C_WAIT_HELLO ||
		    (c->state == TCP_C_REQUEST && be__xch_has(&ch->c, &c->x, 0)))
			conn_free(c);
		else
			c->listener = NULL;
	}
	be__xch_purge(&ch->c, NULL, &l->x, NULL);
	be__list_del_init(&l->link);
	free(l);
}

void be__tcp_listener_close(struct be_xlistener *xl)
{
	if (xl)
		listener_free(container_of(xl, struct tcp_listener, x));
}

/* ---- connect / accept / reject / disconnect ---------------------------- */

int be__tcp_connect(struct be_xevch *xch, const char *addr, const struct be_xconn_attr *attr,
		    const void *priv, size_t priv_len, struct be_xconn **out)
{
	struct be__inet_addrs *addrs;
	struct tcp_evch *ch;
	struct tcp_conn *c;
	int ret, err = -EHOSTUNREACH;

	if (!xch || !out || priv_len > BE_XPORT_PRIV_MAX || (priv_len && !priv))
		return -EINVAL;
	ch = container_of(xch, struct tcp_evch, c.x);
	ret = conn_check_attr(ch, attr);
	if (ret)
		return ret;
	addrs = malloc(sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	ret = be__inet_resolve_all(addr, false, addrs);
	if (ret) {
		free(addrs);
		return ret;
	}
	c = conn_new(ch);
	if (!c) {
		free(addrs);
		return -ENOMEM;
	}
	c->addrs = addrs;
	ret = conn_attach(c, attr);
	if (ret)
		goto err_free;
	snprintf(c->peer, sizeof(c->peer), "%s", addr);
	/* The HELLO's private data waits in ctl until the socket connects. */
	if (priv_len)
		memcpy(c->ctl, priv, priv_len);
	c->ctl_len = (uint32_t)priv_len;
	c->state = TCP_C_CONNECTING;
	ret = conn_connect_next(c, &err);
	if (ret < 0)
		goto err_free;
	if (ret) {
		/* Every address refused right away: report it as an event,
		 * as the contract says connect only starts the attempt. */
		conn_unreachable(c, err);
		*out = &c->x;
		return 0;
	}
	conn_set_deadline(c, c->timeout_ms);
	*out = &c->x;
	return 0;

err_free:
	conn_free(c);
	return ret;
}

int be__tcp_accept(struct be_xconn *xc, const struct be_xconn_attr *attr, const void *priv,
		   size_t priv_len)
{
	struct tcp_conn *c;
	struct be_xevent ev;
	int ret;

	if (!xc || priv_len > BE_XPORT_PRIV_MAX || (priv_len && !priv))
		return -EINVAL;
	c = container_of(xc, struct tcp_conn, x);
	if (c->state != TCP_C_REQUEST || !c->ch)
		return -EINVAL;
	ret = conn_check_attr(c->ch, attr);
	if (ret)
		return ret;
	ret = conn_attach(c, attr);
	if (ret)
		return ret;
	ret = conn_send_hs(c, TCP_F_ACCEPT, priv, priv_len);
	if (ret) {
		be_log_info("tcp: accept of %s failed: %s", c->peer, strerror(-ret));
		be__tcp_conn_close_fd(c);
		c->state = TCP_C_DEAD;
		return ret;
	}
	c->listener = NULL;
	c->state = TCP_C_ESTABLISHED;
	be__tcp_conn_epoll_update(c);
	memset(&ev, 0, sizeof(ev));
	ev.type = BE_XEV_ESTABLISHED;
	ev.conn = &c->x;
	be__tcp_evch_push(c->ch, &ev);
	return 0;
}

int be__tcp_reject(struct be_xconn *xc, const void *priv, size_t priv_len)
{
	struct tcp_conn *c;
	int ret;

	if (!xc || priv_len > BE_XPORT_PRIV_MAX || (priv_len && !priv))
		return -EINVAL;
	c = container_of(xc, struct tcp_conn, x);
	if (c->state != TCP_C_REQUEST)
		return -EINVAL;
	ret = conn_send_hs(c, TCP_F_REJECT, priv, priv_len);
	if (ret)
		be_log_info("tcp: reject of %s not delivered: %s", c->peer, strerror(-ret));
	conn_free(c);
	return 0;
}

int be__tcp_disconnect(struct be_xconn *xc)
{
	struct tcp_conn *c;

	if (!xc)
		return -EINVAL;
	c = container_of(xc, struct tcp_conn, x);
	if (c->state == TCP_C_ERROR)
		return 0;
	if (c->state != TCP_C_ESTABLISHED)
		return -ENOTCONN;
	/* BYE tells the peer this is an orderly close (its WRs flush rather
	 * than fail with a retry error). */
	be__tcp_conn_send_ctl_now(c, TCP_F_BYE, 0);
	be__tcp_conn_fail(c, BE_XWC_WR_FLUSH_ERR, 0, 1);
	return 0;
}

int be__tcp_conn_peer_addr(struct be_xconn *xc, char *buf, size_t len)
{
	if (!xc || !buf || !len)
		return -EINVAL;
	return be__xaddr_printf(buf, len, "%s", container_of(xc, struct tcp_conn, x)->peer);
}
