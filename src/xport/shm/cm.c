/*
 * cm.c - shm connection management: names, handshake, death.
 *
 * Model. A listener is an abstract-namespace Unix SEQPACKET socket
 * "\0be-shm-<name>": nothing exists in the filesystem, so a process killed
 * with -9 leaves nothing behind. Every connection is one such socket plus
 * the shared segment (ring.h). The handshake:
 *
 *   connector                               acceptor
 *   REQ(ring size, priv) + fds{segment memfd,
 *       recv cq eventfd, send cq eventfd}  ─►  map segment; CONNECT_REQUEST
 *                                          ◄─  ACC(priv) + fds{its eventfds}
 *   ESTABLISHED(priv)                          ESTABLISHED (at accept)
 *   (or REJ(priv) → REJECTED)
 *
 * The acceptor is connected as soon as it accepted: everything the
 * connector needs is in the ACC, and the connector posts nothing before it
 * has read it. No memory of ours but the segment reaches the peer, before
 * or after the Engine admitted it: a WRITE is placed by its target's owner
 * into a grant (shm.h), so shm has nothing to hold back until the
 * Engine admits the peer. An accepted socket must send its REQ within
 * SHM_HELLO_TIMEOUT_MS, and only so many may wait for theirs
 * (cm_accept_sockets()).
 *
 * After that the socket carries only BYE: the segment is all either
 * process shares. A BYE, a hang-up (the peer died: the kernel closes
 * its end) or a protocol violation puts the conn in error: outstanding WRs
 * flush, a BYE and shutdown(SHUT_WR) tell the peer, and DISCONNECTED is
 * queued once. The socket is watched by the evch's epoll (all messages)
 * and by the epolls of the conn's cqs (hang-up only, so a worker asleep on
 * its cq fd wakes when its peer dies); cq_poll also checks those epolls
 * every SHM_HUP_CHECK_POLLS polls.
 *
 * Events queue on the evch (evch.h's be__xch_*(): its eventfd is
 * readable while events are queued). Connect deadlines use one timerfd
 * per evch.
 *
 * Threads: all of this runs on the evch's owner thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/common.h"
#include "util/log.h"
#include "xport/addr.h"
#include "xport/shm/shm.h"

#define SHM_SOCK_PREFIX "be-shm-"
#define SHM_EVCH_SPIN 64   /* epoll events handled per evch_get call at most */

static uint32_t cm_auto_name_seq;

/* The tags of every evch's eventfd and timerfd in its epoll set. */
static struct shm_ph cm_efd_ph = { SHM_PH_EVFD };
static struct shm_ph cm_tfd_ph = { SHM_PH_TIMER };

/* ---- event queue ---------------------------------------------------- */

void be__shm_evch_queue(struct shm_evch *ch, const struct be_xevent *ev)
{
	be__xch_push(&ch->c, ev);
}

static void cm_queue(struct shm_conn *c, enum be_xev_type type, int status,
		     const uint8_t *priv, uint8_t priv_len)
{
	struct be_xevent ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.status = status;
	ev.conn = &c->base;
	if (type == BE_XEV_CONNECT_REQUEST && c->listener)
		ev.listener = &c->listener->base;
	if (priv && priv_len) {
		memcpy(ev.priv, priv, priv_len);
		ev.priv_len = priv_len;
	}
	if (c->has_cred) {
		ev.has_cred = true;
		ev.peer_uid = c->peer_uid;
		ev.peer_gid = c->peer_gid;
		ev.peer_pid = c->peer_pid;
	}
	if (c->base.evch) /* NULL: the evch was destroyed first (a caller bug) */
		be__shm_evch_queue(to_sevch(c->base.evch), &ev);
}

/* ---- evch ----------------------------------------------------------- */

int be__shm_evch_create(struct be_xdev *dev, struct be_xevch **out)
{
	return be__xch_new(sizeof(struct shm_evch), dev, BE__WAKE_TIMER, &cm_efd_ph, &cm_tfd_ph,
			   out);
}

void be__shm_evch_destroy(struct be_xevch *xch)
{
	struct shm_evch *ch;
	struct be__list *e, *next;

	if (!xch)
		return;
	ch = to_sevch(xch);
	/* Conns the application never saw (no REQ yet) are ours to free. */
	while (!be__list_empty(&ch->c.listeners))
		be__shm_listener_close(
			&be__list_entry(ch->c.listeners.next, struct shm_listener, link)->base);
	be__list_for_each_safe(e, next, &ch->c.conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, ev_link);

		if (c->state == SHM_CS_WAIT_REQ) {
			be__shm_conn_destroy(&c->base);
			continue;
		}
		/* A caller bug; the conn lives on without events. */
		be_log_warn("shm: evch destroyed with a live conn");
		c->base.evch = NULL;
		be__list_del_init(&c->ev_link);
	}
	be__xch_free(&ch->c);
}

static void cm_timer_arm(struct shm_evch *ch)
{
	struct be__list *e;
	uint64_t at = 0;

	be__list_for_each(e, &ch->c.conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, ev_link);

		if ((c->state == SHM_CS_CONNECTING || c->state == SHM_CS_WAIT_REQ) &&
		    (!at || c->deadline_ns < at))
			at = c->deadline_ns;
	}
	ch->timer_at = at;
	be__wake_arm_timer(&ch->c.wake, at);
}

/* Stop watching @c's socket (EOF seen or handshake over and failed). */
static void cm_unwatch(struct shm_conn *c)
{
	if (c->sock_dead || c->fd < 0)
		return;
	c->sock_dead = true;
	if (c->base.evch)
		epoll_ctl(to_sevch(c->base.evch)->c.wake.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	be__shm_conn_unwatch(c);
}

static void cm_handshake_failed(struct shm_conn *c, enum be_xev_type type, int status,
				const uint8_t *priv, uint8_t priv_len)
{
	c->state = SHM_CS_CLOSED;
	cm_unwatch(c);
	cm_queue(c, type, status, priv, priv_len);
	if (c->base.evch)
		cm_timer_arm(to_sevch(c->base.evch));
}

static void cm_timer_fired(struct shm_evch *ch)
{
	uint64_t now = be__now_ns();
	struct be__list *e, *next;

	be__wake_drain(ch->c.wake.tfd);
	be__list_for_each_safe(e, next, &ch->c.conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, ev_link);

		if (c->deadline_ns > now)
			continue;
		if (c->state == SHM_CS_CONNECTING) {
			cm_handshake_failed(c, BE_XEV_UNREACHABLE, -ETIMEDOUT, NULL, 0);
		} else if (c->state == SHM_CS_WAIT_REQ) {
			be_log_info("shm: %s sent no request in time; closed", c->peer_name);
			be__shm_conn_destroy(&c->base);
		}
	}
	cm_timer_arm(ch);
}

/* The peer's process from the kernel (SO_PEERCRED): what the Engine's
 * admission checks (its uid) and what logs name (its pid). */
static void cm_peer_cred(struct shm_conn *c)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);

	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
		return;
	c->peer_pid = cred.pid;
	c->peer_uid = cred.uid;
	c->peer_gid = cred.gid;
	c->has_cred = true;
}

/* ---- conn objects ----------------------------------------------------- */

static struct shm_conn *cm_conn_new(struct shm_evch *ch)
{
	struct shm_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (be__xch_conn_reserve(&ch->c)) {
		free(c);
		return NULL;
	}
	c->base.dev = ch->c.x.dev;
	c->base.evch = &ch->c.x;
	c->dev = to_sdev(ch->c.x.dev);
	c->ph.kind = SHM_PH_CONN;
	c->fd = -1;
	c->peer_rx_efd = -1;
	c->peer_tx_efd = -1;
	be__xgrants_init(&c->grants);
	be__list_init(&c->s_link);
	be__list_init(&c->r_link);
	be__list_add_head(&ch->c.conns, &c->ev_link);
	return c;
}

void be__shm_conn_destroy(struct be_xconn *xc)
{
	struct shm_conn *c;
	struct shm_evch *ch;

	if (!xc)
		return;
	c = to_sconn(xc);
	ch = c->base.evch ? to_sevch(c->base.evch) : NULL;
	if (c->state == SHM_CS_WAIT_REQ && ch)
		ch->nhandshake--;
	if (c->state == SHM_CS_CONNECTED && c->fd >= 0) {
		struct shm_msg m;

		memset(&m, 0, sizeof(m));
		m.magic = SHM_MSG_MAGIC;
		m.type = SHM_MSG_BYE;
		be__shm_sendmsg(c->fd, &m, be__shm_msg_len(SHM_MSG_BYE, 0), NULL, 0, 0);
	}
	be__shm_conn_detach_cqs(c);
	if (c->fd >= 0) {
		if (!c->sock_dead && ch)
			epoll_ctl(ch->c.wake.epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	if (ch) {
		be__list_del_init(&c->ev_link);
		be__xch_conn_release(&ch->c, &c->base);
		if (c->state == SHM_CS_CONNECTING || c->state == SHM_CS_WAIT_REQ)
			cm_timer_arm(ch);
	}
	be__xgrants_fini(&c->grants);
	be__xaslots_free(&c->aslots, &c->base, c->rx_free);
	if (c->seg)
		munmap(c->seg, c->seg_len);
	if (c->peer_rx_efd >= 0)
		close(c->peer_rx_efd);
	if (c->peer_tx_efd >= 0)
		close(c->peer_tx_efd);
	be__shm_sq_free(c);
	free(c);
}

/*
 * be__shm_conn_error() - put @c in error: the first outstanding WR that has
 * no status yet completes with @first, the others with WR_FLUSH_ERR; the
 * peer is told (BYE, then shutdown); DISCONNECTED(@ev_status) is queued.
 */
void be__shm_conn_error(struct shm_conn *c, enum be_xwc_status first, int ev_status)
{
	if (c->state != SHM_CS_CONNECTED)
		return;
	c->state = SHM_CS_ERROR;
	c->err_first = (uint8_t)first;
	/* Asynchronous errors fail every WR not completed yet; a WR's own
	 * error moves this past the WRs before it (see sq_exec()). */
	c->err_keep = c->sq_head;
	if (c->fd >= 0 && !c->sock_dead) {
		struct shm_msg m;

		memset(&m, 0, sizeof(m));
		m.magic = SHM_MSG_MAGIC;
		m.type = SHM_MSG_BYE;
		be__shm_sendmsg(c->fd, &m, be__shm_msg_len(SHM_MSG_BYE, 0), NULL, 0, 0);
		shutdown(c->fd, SHUT_WR);
	}
	if (!c->disc_queued) {
		c->disc_queued = true;
		cm_queue(c, BE_XEV_DISCONNECTED, ev_status, NULL, 0);
	}
	if (c->scq)
		be__shm_cq_kick(c->scq);
}

/* ---- socket messages ------------------------------------------------- */

static int cm_validate_attr(const struct be_xconn_attr *attr, struct be_xdev *dev)
{
	/* No srq is allowed: such a conn only sends (a SEND to it is RNR). */
	if (!attr || !attr->send_cq || !attr->recv_cq)
		return -EINVAL;
	if (attr->send_cq->dev != dev || attr->recv_cq->dev != dev)
		return -EINVAL;
	if (attr->srq && (attr->srq->dev != dev || attr->srq->cq != attr->recv_cq))
		return -EINVAL;
	if (attr->max_send_wr == 0 || attr->max_send_wr > SHM_MAX_QP_WR)
		return -EINVAL;
	return 0;
}

static void cm_close_fds(int *fds, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

bool be__shm_ring_size_ok(uint32_t ring_size)
{
	return ring_size >= SHM_MIN_RING && ring_size <= SHM_MAX_RING &&
	       !(ring_size & (ring_size - 1));
}

static int cm_map_segment(struct shm_conn *c, int fd, uint32_t ring_size)
{
	size_t len;
	struct stat st;
	uint8_t *p;
	int seals;

	if (!be__shm_ring_size_ok(ring_size))
		return -EPROTO;
	len = SHM_SEG_CTL_BYTES + 2 * (size_t)ring_size;
	/* The segment must not shrink under us (SIGBUS). */
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != len || seals < 0 ||
	    !(seals & F_SEAL_SHRINK))
		return -EPROTO;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	c->seg = p;
	c->seg_len = len;
	c->ring_size = ring_size;
	if (c->connector) {
		c->tx_ctl = (struct shm_ring_ctl *)(void *)p;
		c->rx_ctl = (struct shm_ring_ctl *)(void *)(p + 1024);
		c->tx_data = p + SHM_SEG_CTL_BYTES;
		c->rx_data = p + SHM_SEG_CTL_BYTES + ring_size;
	} else {
		c->rx_ctl = (struct shm_ring_ctl *)(void *)p;
		c->tx_ctl = (struct shm_ring_ctl *)(void *)(p + 1024);
		c->rx_data = p + SHM_SEG_CTL_BYTES;
		c->tx_data = p + SHM_SEG_CTL_BYTES + ring_size;
	}
	return 0;
}

static int cm_send_simple(struct shm_conn *c, uint16_t type, const void *priv, size_t priv_len,
			  const int *fds, int nfds)
{
	struct shm_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = SHM_MSG_MAGIC;
	m.type = type;
	m.u.cm.ring_size = c->ring_size;
	m.u.cm.priv_len = (uint32_t)priv_len;
	if (priv_len)
		memcpy(m.u.cm.priv, priv, priv_len);
	return be__shm_sendmsg(c->fd, &m, be__shm_msg_len(type, 0), fds, nfds, 1000);
}

static void cm_on_eof(struct shm_conn *c)
{
	cm_unwatch(c);
	switch (c->state) {
	case SHM_CS_CONNECTING:
		cm_handshake_failed(c, BE_XEV_UNREACHABLE, -ECONNRESET, NULL, 0);
		break;
	case SHM_CS_WAIT_REQ:
		be__shm_conn_destroy(&c->base);
		break;
	case SHM_CS_REQ_RCVD:
		c->state = SHM_CS_CLOSED;
		break;
	case SHM_CS_CONNECTED:
		be__shm_conn_error(c, BE_XWC_REM_ABORT_ERR, -ECONNRESET);
		break;
	default:
		break;
	}
}

const char *be__shm_msg_check(const struct shm_msg *m, size_t len, int nfds)
{
	if (len < offsetof(struct shm_msg, u) || m->magic != SHM_MSG_MAGIC)
		return "bad message header";
	if (len < be__shm_msg_len(m->type, m->count) || m->count)
		return "message shorter than its type, or with a count";
	/* Anything else, the retired region announcements included (a memfd
	 * we would map), is a protocol error. */
	switch (m->type) {
	case SHM_MSG_REQ:
		if (nfds != 3 || m->u.cm.priv_len > BE_XPORT_PRIV_MAX)
			return "malformed request";
		/* The segment itself is checked as it is mapped. */
		if (!be__shm_ring_size_ok(m->u.cm.ring_size))
			return "request with a bad ring size";
		return NULL;
	case SHM_MSG_ACC:
		if (nfds != 2 || m->u.cm.priv_len > BE_XPORT_PRIV_MAX)
			return "malformed accept";
		return NULL;
	case SHM_MSG_REJ:
		if (m->u.cm.priv_len > BE_XPORT_PRIV_MAX)
			return "malformed reject";
		return NULL;
	case SHM_MSG_BYE:
		return NULL;
	default:
		return "unknown message type";
	}
}

/*
 * cm_handle() - one message from the peer, with @nfds received fds, which
 * it takes (maps or closes). Returns 0, or -EPROTO to drop the conn.
 */
static int cm_handle(struct shm_conn *c, const struct shm_msg *m, size_t len, int *fds, int nfds)
{
	uint8_t plen;
	int ret;

	if (be__shm_msg_check(m, len, nfds))
		goto proto;
	switch (m->type) {
	case SHM_MSG_REQ:
		if (c->state != SHM_CS_WAIT_REQ)
			goto proto;
		ret = cm_map_segment(c, fds[0], m->u.cm.ring_size);
		if (ret)
			goto proto;
		close(fds[0]);
		c->peer_rx_efd = fds[1];
		c->peer_tx_efd = fds[2];
		nfds = 0;
		plen = (uint8_t)m->u.cm.priv_len;
		c->state = SHM_CS_REQ_RCVD;
		if (c->base.evch)
			to_sevch(c->base.evch)->nhandshake--;
		cm_queue(c, BE_XEV_CONNECT_REQUEST, 0, m->u.cm.priv, plen);
		return 0;
	case SHM_MSG_ACC:
		if (c->state != SHM_CS_CONNECTING)
			goto proto;
		c->peer_rx_efd = fds[0];
		c->peer_tx_efd = fds[1];
		nfds = 0;
		c->state = SHM_CS_CONNECTED;
		if (c->base.evch)
			cm_timer_arm(to_sevch(c->base.evch));
		cm_queue(c, BE_XEV_ESTABLISHED, 0, m->u.cm.priv, (uint8_t)m->u.cm.priv_len);
		return 0;
	case SHM_MSG_REJ:
		if (c->state != SHM_CS_CONNECTING)
			goto proto;
		cm_handshake_failed(c, BE_XEV_REJECTED, -ECONNREFUSED, m->u.cm.priv,
				    (uint8_t)m->u.cm.priv_len);
		break;
	default: /* SHM_MSG_BYE */
		if (c->state == SHM_CS_CONNECTED)
			be__shm_conn_error(c, BE_XWC_WR_FLUSH_ERR, 0);
		else if (c->state == SHM_CS_REQ_RCVD)
			c->state = SHM_CS_CLOSED;
		break;
	}
	cm_close_fds(fds, nfds);
	return 0;

proto:
	cm_close_fds(fds, nfds);
	return -EPROTO;
}

void be__shm_conn_read_sock(struct shm_conn *c)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHM_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct shm_msg m;

	while (c->fd >= 0 && !c->sock_dead) {
		struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
		int fds[SHM_MAX_FDS];
		int nfds = 0;
		struct cmsghdr *cm;
		ssize_t n;
		int state = c->state;

		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			n = 0; /* ECONNRESET and friends: the peer is gone */
		}
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t k, cnt;

			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			c->fds_rx += (uint32_t)cnt;
			for (k = 0; k < cnt; k++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
				if (nfds < (int)BE_ARRAY_SIZE(fds))
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		if (n == 0) {
			cm_close_fds(fds, nfds);
			cm_on_eof(c); /* may free c */
			return;
		}
		if ((mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
		    cm_handle(c, &m, (size_t)n, fds, nfds) < 0) {
			be_log_err("shm: protocol error from peer pid %d (state %d)",
				   (int)c->peer_pid, state);
			if (c->state == SHM_CS_CONNECTED) {
				be__shm_conn_error(c, BE_XWC_GENERAL_ERR, -EPROTO);
			} else if (c->state == SHM_CS_WAIT_REQ) {
				be__shm_conn_destroy(&c->base);
				return;
			} else if (c->state == SHM_CS_CONNECTING) {
				cm_handshake_failed(c, BE_XEV_UNREACHABLE, -EPROTO, NULL, 0);
			} else if (c->state == SHM_CS_REQ_RCVD) {
				c->state = SHM_CS_CLOSED; /* accept fails */
			}
			cm_unwatch(c);
			return;
		}
	}
}

/* ---- listeners ------------------------------------------------------- */

static int cm_sockaddr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n = strlen(name);

	if (!n || n > SHM_NAME_MAX || memchr(name, '/', n))
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* Abstract namespace: sun_path[0] = 0, nothing in the filesystem. */
	memcpy(sa->sun_path + 1, SHM_SOCK_PREFIX, sizeof(SHM_SOCK_PREFIX) - 1);
	memcpy(sa->sun_path + sizeof(SHM_SOCK_PREFIX), name, n);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(SHM_SOCK_PREFIX) + n);
	return 0;
}

int be__shm_listen(struct be_xevch *xch, const char *addr, int backlog,
		   struct be_xlistener **out)
{
	struct shm_evch *ch;
	struct shm_listener *l;
	struct sockaddr_un sa;
	socklen_t salen;
	int ret;

	if (!xch || !out)
		return -EINVAL;
	ch = to_sevch(xch);
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.dev = xch->dev;
	l->base.evch = xch;
	l->ph.kind = SHM_PH_LISTENER;
	if (addr && *addr) {
		if (strlen(addr) > SHM_NAME_MAX) {
			ret = -ENAMETOOLONG;
			goto err_free;
		}
		snprintf(l->name, sizeof(l->name), "%s", addr);
	} else {
		snprintf(l->name, sizeof(l->name), "p%d-%u", (int)getpid(),
			 __atomic_add_fetch(&cm_auto_name_seq, 1, __ATOMIC_RELAXED));
	}
	ret = cm_sockaddr(l->name, &sa, &salen);
	if (ret)
		goto err_free;
	l->fd = be__xch_listen_fd(&ch->c, (struct sockaddr *)&sa, salen, SOCK_SEQPACKET, backlog,
				  &l->ph);
	if (l->fd < 0) {
		ret = l->fd;
		goto err_free;
	}
	be__list_add_head(&ch->c.listeners, &l->link);
	*out = &l->base;
	return 0;

err_free:
	free(l);
	return ret;
}

int be__shm_listener_addr(struct be_xlistener *xl, char *buf, size_t len)
{
	if (!xl || !buf || !len)
		return -EINVAL;
	return be__xaddr_printf(buf, len, "%s", to_slistener(xl)->name);
}

void be__shm_listener_close(struct be_xlistener *xl)
{
	struct shm_listener *l;
	struct shm_evch *ch;
	struct be__list *e, *next;

	if (!xl)
		return;
	l = to_slistener(xl);
	ch = to_sevch(xl->evch);
	epoll_ctl(ch->c.wake.epfd, EPOLL_CTL_DEL, l->fd, NULL);
	close(l->fd);
	be__list_del_init(&l->link);
	/* Requests not yet taken by the application are refused. */
	be__list_for_each_safe(e, next, &ch->c.conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, ev_link);

		if (c->listener != l)
			continue;
		c->listener = NULL;
		if (c->state == SHM_CS_WAIT_REQ) {
			be__shm_conn_destroy(&c->base);
		} else if (c->state == SHM_CS_REQ_RCVD &&
			   be__xch_has(&ch->c, &c->base, BE_XEV_CONNECT_REQUEST)) {
			be__shm_reject(&c->base, NULL, 0);
		}
	}
	be__xch_purge(&ch->c, NULL, &l->base, NULL);
	free(l);
}

/* Accepted sockets of @uid that sent no REQ yet. */
static uint32_t cm_handshakes_of(struct shm_evch *ch, uint32_t uid)
{
	struct be__list *e;
	uint32_t n = 0;

	be__list_for_each(e, &ch->c.conns) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, ev_link);

		n += c->state == SHM_CS_WAIT_REQ && c->has_cred && c->peer_uid == uid;
	}
	return n;
}

/*
 * Accept what waits on @l. A socket must send its REQ within
 * SHM_HELLO_TIMEOUT_MS, and at most SHM_MAX_HANDSHAKE sockets (of one
 * uid: SHM_MAX_HANDSHAKE_UID) wait for theirs at once; beyond, new ones
 * are closed at once. So sockets that connect and say nothing cannot
 * pin file descriptors and memory without bound, and one user's cannot
 * keep another's connects out.
 */
static void cm_accept_sockets(struct shm_listener *l)
{
	struct shm_evch *ch = to_sevch(l->base.evch);

	for (;;) {
		struct shm_conn *c;
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				be_log_warn("shm: accept on %s: %s", l->name, strerror(errno));
			return;
		}
		c = cm_conn_new(ch);
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->listener = l;
		cm_peer_cred(c);
		snprintf(c->peer_name, sizeof(c->peer_name), "pid:%d", (int)c->peer_pid);
		if (ch->nhandshake >= SHM_MAX_HANDSHAKE ||
		    (c->has_cred && cm_handshakes_of(ch, c->peer_uid) >= SHM_MAX_HANDSHAKE_UID)) {
			be_log_warn("shm: %u handshakes pending on %s (uid %u); refusing %s",
				    ch->nhandshake, l->name, c->peer_uid, c->peer_name);
			be__shm_conn_destroy(&c->base);
			continue;
		}
		c->state = SHM_CS_WAIT_REQ;
		ch->nhandshake++;
		c->deadline_ns = be__now_ns() + (uint64_t)SHM_HELLO_TIMEOUT_MS * 1000000ull;
		if (be__wake_watch(&ch->c.wake, fd, EPOLLIN | EPOLLRDHUP, &c->ph)) {
			be__shm_conn_destroy(&c->base);
			continue;
		}
		if (!ch->timer_at || c->deadline_ns < ch->timer_at)
			cm_timer_arm(ch);
	}
}

int be__shm_evch_get(struct be_xevch *xch, struct be_xevent *ev)
{
	struct shm_evch *ch;
	int spin;

	if (!xch || !ev)
		return -EINVAL;
	ch = to_sevch(xch);
	for (spin = 0; spin < SHM_EVCH_SPIN; spin++) {
		struct epoll_event e;
		struct shm_ph *ph;
		int n;

		if (be__xch_pop(&ch->c, ev))
			return 1;
		n = epoll_wait(ch->c.wake.epfd, &e, 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;
		ph = e.data.ptr;
		switch (ph->kind) {
		case SHM_PH_EVFD:
			if (be__evq_empty(&ch->c.evq)) {
				int ret = be__wake_drain(ch->c.wake.efd);

				if (ret)
					return ret;
			}
			break;
		case SHM_PH_TIMER:
			cm_timer_fired(ch);
			break;
		case SHM_PH_LISTENER:
			cm_accept_sockets(container_of(ph, struct shm_listener, ph));
			break;
		case SHM_PH_CONN:
			be__shm_conn_read_sock(container_of(ph, struct shm_conn, ph));
			break;
		}
	}
	return 0;
}

/* ---- connect / accept / reject / disconnect -------------------------- */

static int cm_setup_conn(struct shm_conn *c, const struct be_xconn_attr *attr)
{
	int ret;

	ret = be__shm_sq_init(c, attr->max_send_wr);
	if (ret)
		return ret;
	c->scq = to_scq(attr->send_cq);
	c->rcq = to_scq(attr->recv_cq);
	c->srq = attr->srq ? to_ssrq(attr->srq) : NULL;
	c->max_inline = BE_MIN(attr->max_inline, SHM_MAX_INLINE);
	c->base.user = attr->user;
	c->rx_alloc = attr->rx_alloc;
	c->rx_free = attr->rx_free;
	return 0;
}

static int cm_create_segment(struct shm_conn *c, uint32_t ring_size)
{
	size_t len = SHM_SEG_CTL_BYTES + 2 * (size_t)ring_size;
	int fd, ret;

	fd = memfd_create("be-shm-conn", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		goto err;
	}
	ret = cm_map_segment(c, fd, ring_size);
	if (ret)
		goto err;
	return fd;
err:
	close(fd);
	return ret;
}

int be__shm_connect(struct be_xevch *xch, const char *addr, const struct be_xconn_attr *attr,
		    const void *priv, size_t priv_len, struct be_xconn **out)
{
	struct shm_evch *ch;
	struct shm_conn *c;
	struct sockaddr_un sa;
	socklen_t salen;
	uint64_t deadline;
	int segfd, fds[3], ret, tmo;

	if (!xch || !addr || !out || priv_len > BE_XPORT_PRIV_MAX || (priv_len && !priv))
		return -EINVAL;
	ret = cm_validate_attr(attr, xch->dev);
	if (ret)
		return ret;
	ret = cm_sockaddr(addr, &sa, &salen);
	if (ret)
		return ret;
	ch = to_sevch(xch);
	c = cm_conn_new(ch);
	if (!c)
		return -ENOMEM;
	c->connector = true;
	c->state = SHM_CS_CONNECTING;
	snprintf(c->peer_name, sizeof(c->peer_name), "%s", addr);
	ret = cm_setup_conn(c, attr);
	if (ret)
		goto err_conn;
	segfd = cm_create_segment(c, c->dev->ring_size);
	if (segfd < 0) {
		ret = segfd;
		goto err_conn;
	}
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		ret = -errno;
		goto err_seg;
	}
	ret = be__shm_conn_attach_cqs(c);
	if (ret)
		goto err_seg;
	ret = be__wake_watch(&ch->c.wake, c->fd, EPOLLIN | EPOLLRDHUP, &c->ph);
	if (ret)
		goto err_seg;
	tmo = attr->timeout_ms > 0 ? attr->timeout_ms : SHM_CONNECT_TIMEOUT_MS;
	deadline = be__now_ns() + (uint64_t)tmo * 1000000ull;
	c->deadline_ns = deadline;
	*out = &c->base;

	/* From here on, failures are reported as UNREACHABLE events. */
	for (;;) {
		if (connect(c->fd, (struct sockaddr *)&sa, salen) == 0)
			break;
		if (errno == EINTR)
			continue;
		/* A full backlog: the listener is alive but slow; retry. */
		if (errno == EAGAIN && be__now_ns() < deadline) {
			poll(NULL, 0, 1);
			continue;
		}
		ret = -errno;
		goto unreachable;
	}
	cm_peer_cred(c);
	fds[0] = segfd;
	fds[1] = c->rcq->c.wake.efd;
	fds[2] = c->scq->c.wake.efd;
	ret = cm_send_simple(c, SHM_MSG_REQ, priv, priv_len, fds, 3);
	if (ret)
		goto unreachable;
	close(segfd);
	cm_timer_arm(ch);
	return 0;

unreachable:
	close(segfd);
	cm_handshake_failed(c, BE_XEV_UNREACHABLE, ret, NULL, 0);
	return 0;
err_seg:
	close(segfd);
err_conn:
	be__shm_conn_destroy(&c->base);
	return ret;
}

int be__shm_accept(struct be_xconn *xc, const struct be_xconn_attr *attr, const void *priv,
		   size_t priv_len)
{
	struct shm_conn *c;
	int fds[2], ret;

	if (!xc || priv_len > BE_XPORT_PRIV_MAX || (priv_len && !priv))
		return -EINVAL;
	c = to_sconn(xc);
	if (c->state == SHM_CS_CLOSED)
		return -ECONNRESET;
	if (c->state != SHM_CS_REQ_RCVD)
		return -EINVAL;
	ret = cm_validate_attr(attr, xc->dev);
	if (ret)
		return ret;
	ret = cm_setup_conn(c, attr);
	if (ret)
		return ret;
	ret = be__shm_conn_attach_cqs(c);
	if (ret)
		goto err_sq;
	fds[0] = c->rcq->c.wake.efd;
	fds[1] = c->scq->c.wake.efd;
	ret = cm_send_simple(c, SHM_MSG_ACC, priv, priv_len, fds, 2);
	if (ret)
		goto err_cqs;
	c->state = SHM_CS_CONNECTED;
	cm_queue(c, BE_XEV_ESTABLISHED, 0, NULL, 0);
	return 0;

err_cqs:
	be__shm_conn_detach_cqs(c);
err_sq:
	be__shm_sq_free(c);
	c->scq = c->rcq = NULL;
	c->srq = NULL;
	return ret;
}

int be__shm_reject(struct be_xconn *xc, const void *priv, size_t priv_len)
{
	struct shm_conn *c;

	if (!xc || priv_len > BE_XPORT_PRIV_MAX || (priv_len && !priv))
		return -EINVAL;
	c = to_sconn(xc);
	if (c->state != SHM_CS_REQ_RCVD && c->state != SHM_CS_CLOSED)
		return -EINVAL;
	if (c->state == SHM_CS_REQ_RCVD)
		cm_send_simple(c, SHM_MSG_REJ, priv, priv_len, NULL, 0);
	be__shm_conn_destroy(xc);
	return 0;
}

int be__shm_disconnect(struct be_xconn *xc)
{
	struct shm_conn *c;

	if (!xc)
		return -EINVAL;
	c = to_sconn(xc);
	switch (c->state) {
	case SHM_CS_CONNECTED:
		be__shm_conn_error(c, BE_XWC_WR_FLUSH_ERR, 0);
		return 0;
	case SHM_CS_ERROR:
		return 0;
	default:
		return -ENOTCONN;
	}
}

int be__shm_conn_peer_addr(struct be_xconn *xc, char *buf, size_t len)
{
	if (!xc || !buf || !len)
		return -EINVAL;
	return be__xaddr_printf(buf, len, "shm:%s", to_sconn(xc)->peer_name);
}
