/*
 * tcp.c - the tcp transport's ops table ("tcp"): kernel TCP behind the
 * RNIC interface of xport.h. The fallback path and the baseline.
 *
 * The implementation is split by role, as in every transport's folder:
 * dev.c (device, registered regions), cm.c (event channel, conns,
 * handshake, listeners), cq.c (cq and srq), data.c (the data path: send
 * queue, frames, acks) and tcp.h (objects, wire format).
 *
 * Model (objects in tcp.h; the wire format in docs/PROTOCOL.md, "tcp
 * transport frames"):
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
	BE__XPORT_OPS(tcp),
	.addr_canon = be__inet_canon,
	.conn_rx_resume = be__tcp_conn_rx_resume,
	.grant = be__tcp_grant,
	.revoke = be__tcp_revoke,
	.cq_arm_covers = true,
};
