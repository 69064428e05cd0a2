/*
 * tcp.c - the tcp transport's ops table ("tcp"): kernel TCP behind the
 * RNIC interface of xport.h. The fallback path and the baseline.
 *
 * The implementation is split by role, as in every transport's folder:
 * dev.c (device, registered regions), cm.c (event channel, conns,
 * handshake, listeners), cq.c (cq and srq), data.c (the data path: send
 * queue, frames, acks) and tcp.h (objects, wire format).
 *
 * Model (objects in tcp.h; the wire format in docs/TRANSPORTS.md):
 *
 *   device      "tcp", one port, a table of registered regions.
 *   evch        progress for connection setup: accepts, non-blocking
 *               connects, the HELLO / ACCEPT / REJECT handshake carrying
 *               private data, handshake deadlines. evch_fd is an epoll fd
 *               over listeners, handshaking sockets, an eventfd that is
 *               readable while events are queued, and a timerfd.
 *   cq          progress for the data path: cq_poll reads and writes the
 *               sockets of established conns that epoll reports ready
 *               (non-blocking, with a byte budget per conn), then returns
 *               queued completions. cq_fd is that epoll fd plus an eventfd
 *               that cq_arm / locally made completions signal.
 *   srq         a ring of receives; SENDs and WRITE_IMMs of every conn
 *               attached to it take from it in arrival order.
 *   conn        one TCP connection (TCP_NODELAY, non-blocking). Hang-ups
 *               of established conns are noticed by cq_poll on their cqs
 *               (a worker polls both its cq and its evch).
 *
 * There are no threads here: nothing happens unless the owner calls
 * cq_poll or evch_get. A worker must therefore keep polling its cq while
 * it has peers, or arm it before it sleeps: that is also what sends the
 * acks it owes (deferred by one poll, see data.c), so a peer's
 * completions wait for this worker's next poll or arm. Nothing calls back
 * into the user, so objects can be destroyed at any time between calls.
 */
#include "xport/addr.h"
#include "xport/tcp/tcp.h"

const struct be_xport_ops be__xport_tcp_ops = {
	.name = "tcp",
	.dev_open = be__tcp_dev_open,
	.dev_close = be__tcp_dev_close,
	.dev_query = be__tcp_dev_query,
	.dev_reg_hook = be__tcp_dev_reg_hook,
	.evch_create = be__tcp_evch_create,
	.evch_destroy = be__tcp_evch_destroy,
	.evch_fd = be__tcp_evch_fd,
	.evch_get = be__tcp_evch_get,
	.cq_create = be__tcp_cq_create,
	.cq_destroy = be__tcp_cq_destroy,
	.cq_poll = be__tcp_cq_poll,
	.cq_fd = be__tcp_cq_fd,
	.cq_arm = be__tcp_cq_arm,
	.cq_ack = be__tcp_cq_ack,
	.srq_create = be__tcp_srq_create,
	.srq_destroy = be__tcp_srq_destroy,
	.srq_post_recv = be__tcp_srq_post_recv,
	.srq_arm_limit = be__tcp_srq_arm_limit,
	.listen = be__tcp_listen,
	.listener_addr = be__tcp_listener_addr,
	.listener_close = be__tcp_listener_close,
	.connect = be__tcp_connect,
	.accept = be__tcp_accept,
	.reject = be__tcp_reject,
	.disconnect = be__tcp_disconnect,
	.conn_destroy = be__tcp_conn_destroy,
	.post_send = be__tcp_post_send,
	.conn_peer_addr = be__tcp_conn_peer_addr,
	.addr_canon = be__inet_canon,
};
