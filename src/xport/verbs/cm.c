/*
 * cm.c - connection management of the verbs transport, on librdmacm.
 *
 * Objects. A verbs_evch wraps one rdma_event_channel; its fd (an epoll
 * set) also watches the device's async fd and an eventfd that is readable
 * while the transport has events of its own queued (verbs.h). A
 * listener is a listening rdma_cm_id; a conn is one rdma_cm_id plus its RC
 * QP. Connection requests arrive on the listener's channel and the new
 * conns stay on it.
 *
 * Active side. connect() resolves the address (rdma_resolve_addr() from
 * the IP: rdma_cm picks the device, the port and the RoCE v2 GID for us),
 * evch_get() continues on ADDR_RESOLVED with rdma_resolve_route() and on
 * ROUTE_RESOLVED creates the QP (on our own context, data.c) and sends
 * the request; on the REP it moves the QP to RTR/RTS and sends the RTU
 * (rdma_establish()). The user sees only ESTABLISHED, REJECTED or
 * UNREACHABLE. A name's addresses are tried in turn: when one fails before
 * the REP (no address, no route, nobody listening) the attempt starts over
 * on a fresh cm_id with the next (cm_retry()), within the one deadline.
 *
 * Connect thread. The rdma_cm calls that start those steps (create_id,
 * resolve_addr, resolve_route, connect, destroy_id), the event channel's
 * creation and librdmacm's own start (its first call opens the rdma_cm
 * device; it opens a context of its own on each RDMA device it meets) are
 * system calls that can wait in the kernel: for a device, for the address
 * and GID tables while a NIC's addresses change, for a route that is
 * going away. On the worker's
 * thread such a wait holds every Engine of the worker, tcp included, and
 * with it the RPC layer's fallback path. So each evch has one thread of
 * its own, started by its first connect and joined by evch_destroy(),
 * that makes them in the order they were asked (evch->jobs): the worker
 * queues a step (cm_job_post_locked()) and goes on; the events that
 * follow arrive on the evch's channel, in the worker's poll set as
 * before, and a step that fails comes back as a queued VERBS_QEV_CM_FAIL.
 * The channel itself is opened by the first step that needs it
 * (cm_channel(); a listener opens it on the worker). The thread owns an
 * active conn's cm_ids (cm_id, and addr_next, the next address to try);
 * the worker borrows the current one (id) from ROUTE_RESOLVED on, which
 * is the one that stays. What stays on the worker is quick and local:
 * reading events, our QP (data.c) and its transitions, the RTU
 * (rdma_establish()), disconnects, and the passive side (listen, accept,
 * reject), which answers a peer whose packets just arrived.
 *
 * Abandoned connects. The connect deadline is the worker's own timer, so
 * a step held in the kernel does not hold the connect past it: the conn
 * is reported UNREACHABLE (-ETIMEDOUT) on time and its cm_id destroyed
 * when the thread gets to it (VJ_DROP). conn_destroy() of an active conn
 * (its Engine closed, its worker destroyed) hands it to the thread
 * (VJ_FREE), which destroys its cm_id and frees it after any step still
 * queued for it, so the conn is freed exactly once, by the thread. Its
 * queued events are dropped and its queue nodes released at once; events
 * of a cm_id being destroyed are acked without a look (conn->dying), and
 * rdma_destroy_id() waits for those acks, so the conn outlives them. A
 * step that fails after conn_destroy() reports nothing (conn->dying,
 * under verbs_lock).
 *
 * Passive side. accept() readies the QP and answers; ESTABLISHED is
 * reported at once, since the RTU arrives only when the connector's
 * process reads its channel. Sends posted before the RTU (rdma_cm's
 * ESTABLISHED) are held and posted at the RTU: until then the connector's
 * QP would drop them (see be__verbs_accept()).
 *
 * Parameters of every QP: rnr_retry_count 0, so a SEND that finds no
 * receive fails at once (the core's credits make that impossible, so it is
 * a bug to surface, not to hide behind retries); retry_count 6 with an ACK
 * timeout of 4.096 us * 2^BE_VERBS_ACK_TIMEOUT (default 16: about 268 ms),
 * so a dead peer is detected in about two seconds. Not 7: Soft-RoCE takes
 * a retry_count of 7 as "retry forever" (as IBTA defines only for
 * rnr_retry), and a peer whose DREQ was lost would never be detected
 * (test-verbs-dreq-lost).
 *
 * Private data. The RC connect request carries at most 56 bytes of user
 * data and rdma_cm reports its full size, not the sender's length, so the
 * first byte carries the length: BE_XPORT_PRIV_MAX is 55 for that reason.
 *
 * Refusals. Only a reject by the peer's application (rdma_reject(), IB CM
 * reason "consumer defined") is BE_XEV_REJECTED with its private data;
 * every other reject (nobody listens on the port, stale connection, the
 * request died with its listener) is BE_XEV_UNREACHABLE, -ECONNREFUSED,
 * as a TCP connect to a closed port would be.
 *
 * Events and memory. rdma_cm queues its events in the kernel, but the
 * transport queues some of a conn's itself (the evch's evq): ESTABLISHED at
 * accept(), DISCONNECTED from disconnect() and from a failed conn, fatal
 * QP errors, and whatever evch_pump() read early. Each conn reserves
 * queue nodes for them when it is made (VERBS_CONN_EVENTS, util/evq.h),
 * when a refusal is still possible (connect() fails, a request is
 * rejected), so none of them is lost for want of memory later.
 *
 * Disconnection. disconnect(), a failed conn and a DISCONNECTED event (the
 * peer left or failed) all move our QP to error (its WRs flush) and send
 * the DREQ/DREP with rdma_disconnect(). disconnect() reports DISCONNECTED
 * locally at once. Each conn reports at most one of DISCONNECTED,
 * UNREACHABLE and REJECTED.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/addr.h"
#include "xport/verbs/verbs.h"

#define CM_DEFAULT_TIMEOUT_MS 10000
#define CM_RETRY_COUNT 6 /* 7 is "forever" on Soft-RoCE: see above */
#define CM_REJ_CONSUMER_DEFINED 28 /* IB CM reject reason: rdma_reject() */

static uint8_t cm_ack_timeout(void)
{
	uint64_t v;

	if (be__env_size("BE_VERBS_ACK_TIMEOUT", &v) == 1 && v <= 31)
		return (uint8_t)v;
	return 16;
}

/* Private data with its length in the first byte; returns the wire size. */
static uint8_t cm_priv_encode(uint8_t *out, const void *priv, size_t len)
{
	out[0] = (uint8_t)len;
	if (len)
		memcpy(out + 1, priv, len);
	return (uint8_t)(len + 1);
}

static void cm_priv_decode(struct be_xevent *ev, const void *data, size_t len)
{
	const uint8_t *p = data;

	ev->priv_len = 0;
	if (!p || len < 1 || p[0] > len - 1 || p[0] > BE_XPORT_PRIV_MAX)
		return;
	ev->priv_len = p[0];
	memcpy(ev->priv, p + 1, p[0]);
}

/* IB CM reject reasons seen on RoCE (IBTA table 112). */
static const char *cm_reject_str(int reason)
{
	switch (reason) {
	case 1: return "no QP available at the peer";
	case 8: return "nobody listens on that port";
	case 10: return "stale connection";
	case CM_REJ_CONSUMER_DEFINED: return "refused by the peer";
	default: return "IB CM reject";
	}
}

static void cm_conn_params(struct rdma_conn_param *cp, const uint8_t *priv, uint8_t len)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = priv;
	cp->private_data_len = len;
	/* We never RDMA READ: no read resources either way. */
	cp->responder_resources = 0;
	cp->initiator_depth = 0;
	cp->retry_count = CM_RETRY_COUNT;
	cp->rnr_retry_count = 0;
}

static void cm_set_ack_timeout(struct rdma_cm_id *id)
{
	uint8_t t = cm_ack_timeout();

	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
		be_log_dbg("verbs: RDMA_OPTION_ID_ACK_TIMEOUT: %s (kernel default kept)",
			   strerror(errno));
}

/* Is @ctx (a cm_id's, rdma_cm's own context) the device @dev opened? */
static int cm_same_dev(const struct verbs_dev *dev, const struct ibv_context *ctx)
{
	return ctx && ibv_get_device_guid(ctx->device) == dev->guid &&
	       strcmp(ibv_get_device_name(ctx->device), dev->name) == 0;
}

static const char *cm_dev_name(const struct ibv_context *ctx)
{
	return ctx ? ibv_get_device_name(ctx->device) : "?";
}

/*
 * The QP is ours, not rdma_cm's (data.c), so its transitions are done
 * here as librdmacm would: attributes from rdma_init_qp_attr() (port,
 * GID index, path, PSNs, timeouts, retry counts from the handshake).
 */
int be__verbs_qp_to(struct verbs_conn *vc, enum ibv_qp_state state)
{
	struct ibv_qp_attr a;
	int mask = 0, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	if (rdma_init_qp_attr(vc->id, &a, &mask))
		return errno ? -errno : -EINVAL;
	ret = ibv_modify_qp(vc->qp, &a, mask);
	return -ret;
}

/* INIT again (the access flags are known only once the CM handshake is
 * under way), then RTR and RTS: what rdma_accept()/rdma_connect() do for
 * QPs made by rdma_create_qp(). */
static int cm_qp_ready(struct verbs_conn *vc)
{
	int ret;

	ret = be__verbs_qp_to(vc, IBV_QPS_INIT);
	if (!ret)
		ret = be__verbs_qp_to(vc, IBV_QPS_RTR);
	if (!ret)
		ret = be__verbs_qp_to(vc, IBV_QPS_RTS);
	if (ret)
		be_log_err("verbs: QP %u to RTS: %s", vc->qp_num, strerror(-ret));
	return ret;
}

void be__verbs_conn_teardown(struct verbs_conn *vc)
{
	if (vc->qp) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		ibv_modify_qp(vc->qp, &a, IBV_QP_STATE);
	}
	/* Sends held until the RTU flush now, in order, behind the rest. */
	be__verbs_release_held(vc);
	if (vc->disconnect_sent || !vc->id)
		return;
	vc->disconnect_sent = 1;
	/* Before the acceptor has the RTU a DREQ cannot be sent: later. */
	if (!vc->cm_established) {
		vc->dreq_pending = 1;
		return;
	}
	if (rdma_disconnect(vc->id))
		be_log_dbg("verbs: rdma_disconnect: %s", strerror(errno));
}

static bool cm_thread_running(const struct verbs_evch *ch);
static struct rdma_event_channel *cm_channel(struct verbs_evch *ch, int *err);
static void cm_job_post_locked(struct verbs_evch *ch, struct verbs_conn *vc,
			       enum verbs_job job, int status);

void be__verbs_conn_detach(struct verbs_conn *vc)
{
	struct verbs_evch *ch = vc->base.evch ? to_vevch(vc->base.evch) : NULL;

	be__verbs_qp_destroy(vc);
	vc->state = VC_DOWN;
	if (vc->active && ch && cm_thread_running(ch)) {
		/* Its CQ went first: the cm_id is the connect thread's to
		 * destroy; the conn stays on its channel until destroyed. */
		vc->id = NULL;
		pthread_mutex_lock(&be__verbs_lock);
		cm_job_post_locked(ch, vc, VJ_DROP, 0);
		pthread_mutex_unlock(&be__verbs_lock);
		return;
	}
	/* Passive, or the connect thread has stopped (its evch is going). */
	if (vc->active) {
		vc->id = vc->cm_id;
		vc->cm_id = NULL;
	}
	if (vc->id && rdma_destroy_id(vc->id))
		be_log_err("verbs: rdma_destroy_id: %s", strerror(errno));
	vc->id = NULL;
	if (ch) {
		be__list_del_init(&vc->ch_link);
		pthread_mutex_lock(&be__verbs_lock);
		be__verbs_purge_locked(ch, &vc->base, NULL);
		be__evq_unreserve(&ch->c.evq, VERBS_CONN_EVENTS);
		pthread_mutex_unlock(&be__verbs_lock);
		vc->base.evch = NULL;
	}
}

void be__verbs_conn_failed(struct verbs_conn *vc, int status, const char *why)
{
	struct be_xevent ev;
	char peer[BE_XPORT_ADDR_MAX];

	if (vc->reported_down)
		return;
	vc->reported_down = 1;
	vc->state = VC_DOWN;
	if (be__verbs_conn_peer_addr(&vc->base, peer, sizeof(peer)) < 0)
		snprintf(peer, sizeof(peer), "?");
	be_log_err("verbs: connection to %s (QP %u) failed: %s", peer, vc->qp_num, why);
	/* The QP goes to error (the rest flushes) and the peer is told. */
	be__verbs_conn_teardown(vc);
	memset(&ev, 0, sizeof(ev));
	ev.type = BE_XEV_DISCONNECTED;
	ev.status = status;
	ev.conn = &vc->base;
	be__verbs_conn_push(vc, &ev);
}

void be__verbs_conn_push(struct verbs_conn *vc, const struct be_xevent *ev)
{
	if (!vc->base.evch)
		return;
	pthread_mutex_lock(&be__verbs_lock);
	be__verbs_evch_push_locked(to_vevch(vc->base.evch), ev);
	pthread_mutex_unlock(&be__verbs_lock);
}

/* ------------------------------------------------------ connect thread */

#define CM_SLOW_STEP_MS 50 /* a step that took longer is logged */

static bool cm_thread_running(const struct verbs_evch *ch)
{
	return ch->cm_pid == getpid();
}

/*
 * Queue @job for @vc on @ch's connect thread, behind the steps asked
 * before. A job queued and not yet started is replaced (a drop or a free
 * makes a pending step moot); nothing follows VJ_FREE. Caller holds
 * verbs_lock.
 */
static void cm_job_post_locked(struct verbs_evch *ch, struct verbs_conn *vc,
			       enum verbs_job job, int status)
{
	if (vc->job == VJ_FREE)
		return;
	if (vc->job == VJ_NONE)
		be__list_add_tail(&ch->jobs, &vc->job_link);
	vc->job = job;
	vc->job_status = status;
	pthread_cond_signal(&ch->cm_cv);
}

static void cm_job_post(struct verbs_evch *ch, struct verbs_conn *vc, enum verbs_job job,
			int status)
{
	pthread_mutex_lock(&be__verbs_lock);
	cm_job_post_locked(ch, vc, job, status);
	pthread_mutex_unlock(&be__verbs_lock);
}

/* A step that held the connect thread long: what the worker was spared. */
static void cm_step_took(const char *what, uint64_t t0)
{
	uint64_t ms = (be__now_ns() - t0) / 1000000;

	if (ms >= CM_SLOW_STEP_MS)
		be_log_info("verbs: %s took %llu ms (connect thread)", what,
			    (unsigned long long)ms);
}

/* @vc's connect failed with @status in the connect thread: its owner
 * reports UNREACHABLE (evch_get()), unless it is being destroyed. */
static void cm_job_fail(struct verbs_evch *ch, struct verbs_conn *vc, int status)
{
	struct be_xevent ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = VERBS_QEV_CM_FAIL;
	ev.status = status;
	ev.conn = &vc->base;
	pthread_mutex_lock(&be__verbs_lock);
	if (!vc->dying)
		be__verbs_evch_push_locked(ch, &ev);
	pthread_mutex_unlock(&be__verbs_lock);
}

static void cm_id_drop(struct verbs_conn *vc)
{
	uint64_t t0 = be__now_ns();

	if (!vc->cm_id)
		return;
	if (rdma_destroy_id(vc->cm_id))
		be_log_err("verbs: rdma_destroy_id: %s", strerror(errno));
	vc->cm_id = NULL;
	cm_step_took("rdma_destroy_id", t0);
}

/*
 * VJ_START: resolve the next address of vc->addrs on a fresh cm_id (one
 * that has resolved or sent a request cannot be reused). Returns with the
 * resolution in flight, or reports the error of the last address tried
 * (@status when none was left).
 */
static void cm_job_start(struct verbs_evch *ch, struct verbs_conn *vc, int status)
{
	cm_id_drop(vc);
	while (vc->addrs && vc->addr_next < vc->addrs->n) {
		struct sockaddr *sa = (void *)&vc->addrs->ss[vc->addr_next++];
		char num[BE_XPORT_ADDR_MAX] = "?";
		uint64_t t0 = be__now_ns();

		be__inet_format(sa, num, sizeof(num));
		if (vc->addr_next > 1)
			be_log_info("verbs: trying address %u of %u (%s)", vc->addr_next,
				    vc->addrs->n, num);
		if (!vc->cm_id) {
			struct rdma_event_channel *chan = cm_channel(ch, &status);

			if (!chan)
				break;
			if (rdma_create_id(chan, &vc->cm_id, vc, RDMA_PS_TCP)) {
				vc->cm_id = NULL;
				status = errno ? -errno : -ENOMEM;
				be_log_err("verbs: rdma_create_id: %s", strerror(-status));
				break;
			}
			cm_step_took("rdma_create_id", t0);
			cm_set_ack_timeout(vc->cm_id);
		}
		if (!rdma_resolve_addr(vc->cm_id, NULL, sa, vc->timeout_ms)) {
			cm_step_took("rdma_resolve_addr", t0);
			return;
		}
		status = errno ? -errno : -EHOSTUNREACH;
		cm_step_took("rdma_resolve_addr", t0);
		be_log_info("verbs: rdma_resolve_addr(%s): %s", num, strerror(-status));
	}
	cm_job_fail(ch, vc, status);
}

static void cm_job_run(struct verbs_evch *ch, struct verbs_conn *vc, enum verbs_job job,
		       int status, uint32_t qp_num, bool srq)
{
	struct rdma_conn_param cp;
	uint64_t t0 = be__now_ns();
	int r;

	switch (job) {
	case VJ_START:
		cm_job_start(ch, vc, status);
		break;
	case VJ_ROUTE:
		if (!vc->cm_id)
			break;
		if (!rdma_resolve_route(vc->cm_id, vc->timeout_ms)) {
			cm_step_took("rdma_resolve_route", t0);
			break;
		}
		r = errno ? -errno : -EIO;
		be_log_err("verbs: rdma_resolve_route: %s", strerror(-r));
		cm_job_start(ch, vc, r); /* the next address, if any */
		break;
	case VJ_CONNECT:
		if (!vc->cm_id)
			break;
		cm_conn_params(&cp, vc->priv, vc->priv_len);
		cp.qp_num = qp_num;
		cp.srq = srq;
		if (!rdma_connect(vc->cm_id, &cp)) {
			cm_step_took("rdma_connect", t0);
			break;
		}
		r = errno ? -errno : -EIO;
		be_log_err("verbs: rdma_connect: %s", strerror(-r));
		cm_job_fail(ch, vc, r);
		break;
	case VJ_DROP:
		cm_id_drop(vc);
		break;
	case VJ_FREE:
		cm_id_drop(vc);
		free(vc->addrs);
		free(vc);
		break;
	case VJ_NONE:
		break;
	}
}

/* The connect thread: runs the steps queued on @arg (an evch) in order,
 * until cm_stop is set and none is left. */
static void *cm_thread_main(void *arg)
{
	struct verbs_evch *ch = arg;
	uint64_t t0 = be__now_ns();
	struct ibv_context **devs;

	/* librdmacm opens its own context of a device when an event first
	 * names it, inside rdma_get_cm_event() on the worker: open them all
	 * here first (they stay open, as librdmacm keeps them). */
	devs = rdma_get_devices(NULL);
	if (devs)
		rdma_free_devices(devs);
	cm_step_took("rdma_get_devices", t0);
	pthread_mutex_lock(&be__verbs_lock);
	for (;;) {
		struct verbs_conn *vc;
		enum verbs_job job;
		uint32_t qp_num;
		int status;
		bool srq;

		if (be__list_empty(&ch->jobs)) {
			if (ch->cm_stop)
				break;
			pthread_cond_wait(&ch->cm_cv, &be__verbs_lock);
			continue;
		}
		vc = be__list_entry(ch->jobs.next, struct verbs_conn, job_link);
		be__list_del_init(&vc->job_link);
		job = vc->job;
		status = vc->job_status;
		qp_num = vc->job_qp_num;
		srq = vc->job_srq;
		vc->job = VJ_NONE;
		pthread_mutex_unlock(&be__verbs_lock);
		cm_job_run(ch, vc, job, status, qp_num, srq);
		pthread_mutex_lock(&be__verbs_lock);
	}
	pthread_mutex_unlock(&be__verbs_lock);
	return NULL;
}

/* Start @ch's connect thread unless it runs (in this process: a forked
 * child has none). Signals stay with the application's threads. */
static int cm_thread_start(struct verbs_evch *ch)
{
	sigset_t all, old;
	int ret;

	if (cm_thread_running(ch))
		return 0;
	be__list_init(&ch->jobs);
	ch->cm_stop = false;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&ch->cm_thr, NULL, cm_thread_main, ch);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		be_log_err("verbs: cannot start a connect thread: %s", strerror(-ret));
		return ret;
	}
	ch->cm_pid = getpid();
	return 0;
}

/* Stop @ch's connect thread once the steps queued have run. */
static void cm_thread_stop(struct verbs_evch *ch)
{
	if (!cm_thread_running(ch))
		return;
	pthread_mutex_lock(&be__verbs_lock);
	ch->cm_stop = true;
	pthread_cond_signal(&ch->cm_cv);
	pthread_mutex_unlock(&be__verbs_lock);
	pthread_join(ch->cm_thr, NULL);
	ch->cm_pid = 0;
}

/* ------------------------------------------------------ event channels */

void be__verbs_evch_push_locked(struct verbs_evch *ch, const struct be_xevent *ev)
{
	be__xch_push(&ch->c, ev);
}

/* Drop queued events that name @conn or @srq from @ch. Holds verbs_lock. */
void be__verbs_purge_locked(struct verbs_evch *ch, const struct be_xconn *conn,
			       const struct be_xsrq *srq)
{
	be__xch_purge(&ch->c, conn, NULL, srq);
}

/*
 * @ch's rdma_event_channel, opened on first use: by the connect thread
 * for the first connect (opening it is the first librdmacm call of a
 * process that only connects, which initialises the library: see
 * "Connect thread"), on the worker for a listener. Its fd joins the evch's
 * epoll set, so a worker asleep there wakes for its events. Returns the
 * channel, or NULL with *@err set (-errno).
 */
static struct rdma_event_channel *cm_channel(struct verbs_evch *ch, int *err)
{
	struct rdma_event_channel *rc = __atomic_load_n(&ch->ch, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (rc)
		return rc;
	pthread_mutex_lock(&ch->ch_lock);
	rc = ch->ch;
	if (rc)
		goto out;
	rc = rdma_create_event_channel();
	if (!rc) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: rdma_create_event_channel: %s (is rdma_ucm loaded?)",
			   strerror(-ret));
		goto out;
	}
	ret = be__verbs_set_nonblock(rc->fd);
	if (!ret)
		ret = be__wake_watch(&ch->c.wake, rc->fd, EPOLLIN, NULL);
	if (ret) {
		be_log_err("verbs: event channel: %s", strerror(-ret));
		rdma_destroy_event_channel(rc);
		rc = NULL;
		goto out;
	}
	__atomic_store_n(&ch->ch, rc, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&ch->ch_lock);
	*err = ret;
	return rc;
}

int be__verbs_evch_create(struct be_xdev *d, struct be_xevch **out)
{
	struct verbs_dev *dev = to_vdev(d);
	struct verbs_evch *ch;
	struct be_xevch *x;
	int ret;

	/* The set is only handed out, never read here: no tags. The rdma_cm
	 * channel joins it when first used (cm_channel()). */
	ret = be__xch_new(sizeof(*ch), d, BE__WAKE_TIMER, NULL, NULL, &x);
	if (ret)
		return ret;
	ch = to_vevch(x);
	be__list_init(&ch->jobs);
	ret = -pthread_cond_init(&ch->cm_cv, NULL);
	if (ret)
		goto err_free;
	ret = -pthread_mutex_init(&ch->ch_lock, NULL);
	if (ret)
		goto err_cv;
	ret = be__wake_watch(&ch->c.wake, dev->ctx->async_fd, EPOLLIN, NULL);
	if (ret)
		goto err_mu;
	pthread_mutex_lock(&be__verbs_lock);
	be__list_add_head(&dev->evchs, &ch->dev_link);
	pthread_mutex_unlock(&be__verbs_lock);
	/* The connect thread now, not at the first connect: starting a
	 * thread took 30-160 ms in the Soft-RoCE guest, and the engine
	 * creates a connecting worker's evch off its thread (wdev.c). If
	 * it does not start, connect() tries again. */
	cm_thread_start(ch);
	*out = &ch->c.x;
	return 0;

err_mu:
	pthread_mutex_destroy(&ch->ch_lock);
err_cv:
	pthread_cond_destroy(&ch->cm_cv);
err_free:
	be__xch_free(&ch->c);
	return ret;
}

void be__verbs_evch_destroy(struct be_xevch *c)
{
	struct verbs_evch *ch = to_vevch(c);
	struct verbs_dev *dev = to_vdev(c->dev);

	/* The steps queued run first (the cm_ids of destroyed conns go). */
	cm_thread_stop(ch);
	/* Children first (a caller bug, but no crash): conns become husks
	 * that conn_destroy() only frees. */
	if (!be__list_empty(&ch->c.conns) || !be__list_empty(&ch->c.listeners))
		be_log_err("verbs: event channel of %s destroyed before its connections",
			   dev->name);
	while (!be__list_empty(&ch->c.conns))
		be__verbs_conn_detach(be__list_entry(ch->c.conns.next, struct verbs_conn, ch_link));
	/* Listeners are closed with it, as on tcp: their handles die here. */
	while (!be__list_empty(&ch->c.listeners)) {
		struct verbs_listener *vl =
			be__list_entry(ch->c.listeners.next, struct verbs_listener, link);

		be__list_del_init(&vl->link);
		if (rdma_destroy_id(vl->id))
			be_log_err("verbs: rdma_destroy_id(listener): %s", strerror(errno));
		free(vl);
	}
	pthread_mutex_lock(&be__verbs_lock);
	be__list_del_init(&ch->dev_link);
	be__evq_clear(&ch->c.evq);
	pthread_mutex_unlock(&be__verbs_lock);
	if (ch->ch)
		rdma_destroy_event_channel(ch->ch);
	pthread_mutex_destroy(&ch->ch_lock);
	pthread_cond_destroy(&ch->cm_cv);
	be__xch_free(&ch->c);
}

/* The oldest event of @ch's own queue into @ev: 1, or 0 if none. */
static int cm_queue_pop(struct verbs_evch *ch, struct be_xevent *ev)
{
	int ret;

	pthread_mutex_lock(&be__verbs_lock);
	ret = be__xch_pop(&ch->c, ev);
	pthread_mutex_unlock(&be__verbs_lock);
	return ret;
}

/* A conn's connect attempt or connection ended: report it once. */
static int cm_conn_down(struct verbs_conn *vc, enum be_xev_type type, int status,
			struct be_xevent *ev)
{
	vc->state = VC_DOWN;
	if (vc->reported_down)
		return 0;
	vc->reported_down = 1;
	ev->type = type;
	ev->status = status;
	ev->conn = &vc->base;
	return 1;
}

/*
 * The attempt on vc's current address failed with @status before the
 * peer answered: the connect thread starts over with the next address on
 * a new cm_id, or reports @status when none is left (cm_job_start()).
 * Returns 0: nothing to report yet.
 */
static int cm_retry(struct verbs_evch *ch, struct verbs_conn *vc, int status)
{
	be__verbs_qp_destroy(vc);
	vc->id = NULL;
	vc->state = VC_RESOLVING;
	cm_job_post(ch, vc, VJ_START, status);
	return 0;
}

/* 1 if a failed attempt of @vc may go on (with its next address, if the
 * connect thread finds one). */
static int cm_can_retry(const struct verbs_conn *vc)
{
	return vc->active && !vc->was_established && !vc->reported_down &&
	       (vc->state == VC_RESOLVING || vc->state == VC_CONNECTING);
}

/* ROUTE_RESOLVED on @id: our QP, then the request (connect thread). */
static int cm_route_resolved(struct verbs_evch *ch, struct verbs_conn *vc, struct rdma_cm_id *id)
{
	int ret;

	/* The cm_id that stays: the QP's transitions take its attributes. */
	vc->id = id;
	vc->base.port = (int)id->port_num - 1;
	if (rdma_get_peer_addr(id)->sa_family)
		memcpy(&vc->peer, rdma_get_peer_addr(id), sizeof(vc->peer));
	ret = be__verbs_qp_create(vc, &vc->attr);
	if (ret)
		return ret;
	vc->state = VC_CONNECTING;
	pthread_mutex_lock(&be__verbs_lock);
	vc->job_qp_num = vc->qp_num;
	vc->job_srq = vc->srq != NULL;
	cm_job_post_locked(ch, vc, VJ_CONNECT, 0);
	pthread_mutex_unlock(&be__verbs_lock);
	return 0;
}

/* Reserve a new conn's queue nodes on @ch (see "Events and memory").
 * 0 or -ENOMEM. */
static int cm_reserve(struct verbs_evch *ch)
{
	int ret;

	pthread_mutex_lock(&be__verbs_lock);
	ret = be__evq_reserve(&ch->c.evq, VERBS_CONN_EVENTS);
	pthread_mutex_unlock(&be__verbs_lock);
	return ret;
}

/* A connection request on listener @vl: a new conn, or refused. */
static int cm_conn_request(struct verbs_evch *ch, struct rdma_cm_event *e, struct be_xevent *ev)
{
	struct verbs_listener *vl = e->listen_id->context;
	struct verbs_dev *dev = to_vdev(vl->base.dev);
	struct rdma_cm_id *id = e->id;
	struct verbs_conn *vc = NULL;

	if (!cm_same_dev(dev, id->verbs)) {
		be_log_err("verbs: connection request arrived on device %s, but this listener "
			   "uses %s; refused (listen on an address of %s)",
			   cm_dev_name(id->verbs), dev->name, dev->name);
	} else {
		vc = calloc(1, sizeof(*vc));
		if (vc && cm_reserve(ch)) {
			free(vc);
			vc = NULL;
		}
		if (!vc)
			be_log_err("verbs: out of memory: connection request refused");
	}
	if (!vc) {
		rdma_ack_cm_event(e);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return 0;
	}
	vc->magic = VERBS_OBJ_CONN;
	vc->base.dev = vl->base.dev;
	vc->base.evch = &ch->c.x;
	vc->base.port = (int)id->port_num - 1;
	vc->id = id;
	vc->state = VC_REQUEST;
	id->context = vc;
	be__list_add_head(&ch->c.conns, &vc->ch_link);
	ev->type = BE_XEV_CONNECT_REQUEST;
	ev->conn = &vc->base;
	ev->listener = &vl->base;
	cm_priv_decode(ev, e->param.conn.private_data, e->param.conn.private_data_len);
	rdma_ack_cm_event(e);
	return 1;
}

/*
 * Translate one rdma_cm event; acks it. Returns 1 with *ev filled, 0 when
 * the event was handled internally.
 */
static int cm_translate(struct verbs_evch *ch, struct rdma_cm_event *e, struct be_xevent *ev)
{
	enum rdma_cm_event_type type = e->event;
	struct verbs_conn *vc = NULL;
	struct verbs_dev *dev;
	int status = e->status, ret = 0, retry = 0, r;

	memset(ev, 0, sizeof(*ev));
	if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
		return cm_conn_request(ch, e, ev);
	if (e->id->context && *(uint32_t *)e->id->context == VERBS_OBJ_CONN)
		vc = e->id->context;
	if (vc && vc->dying) {
		/* Its cm_id is being destroyed, which waits for this ack. */
		rdma_ack_cm_event(e);
		return 0;
	}
	if (!vc) {
		/* The listener's own id: only device removal / address change. */
		if (type == RDMA_CM_EVENT_DEVICE_REMOVAL)
			be_log_err("verbs: device of a listener was removed");
		else
			be_log_dbg("verbs: listener event %s", rdma_event_str(type));
		rdma_ack_cm_event(e);
		return 0;
	}
	dev = to_vdev(vc->base.dev);

	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (vc->state != VC_RESOLVING || vc->reported_down)
			break;
		if (!cm_same_dev(dev, e->id->verbs)) {
			char peer[BE_XPORT_ADDR_MAX] = "?";

			be__inet_format(rdma_get_peer_addr(e->id), peer, sizeof(peer));
			be_log_err("verbs: %s is reached through device %s, not %s (the device "
				   "this connection was opened on)",
				   peer, cm_dev_name(e->id->verbs), dev->name);
			retry = -ENODEV;
		} else {
			cm_job_post(ch, vc, VJ_ROUTE, 0);
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (vc->state != VC_RESOLVING || vc->reported_down)
			break;
		r = cm_route_resolved(ch, vc, e->id);
		if (r)
			ret = cm_conn_down(vc, BE_XEV_UNREACHABLE, r, ev);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* The acceptor's REP: ready our QP, send the RTU. */
		if (vc->state != VC_CONNECTING || vc->reported_down || e->id != vc->id)
			break;
		r = cm_qp_ready(vc);
		if (!r && rdma_establish(vc->id))
			r = errno ? -errno : -EIO;
		if (r) {
			rdma_reject(vc->id, NULL, 0);
			ret = cm_conn_down(vc, BE_XEV_UNREACHABLE, r, ev);
			break;
		}
		cm_priv_decode(ev, e->param.conn.private_data, e->param.conn.private_data_len);
		vc->state = VC_ESTABLISHED;
		vc->was_established = 1;
		vc->cm_established = 1;
		free(vc->addrs);
		vc->addrs = NULL;
		ev->type = BE_XEV_ESTABLISHED;
		ev->conn = &vc->base;
		ret = 1;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* The acceptor got the RTU (the user had ESTABLISHED at
		 * accept): the connector's QP is ready, the held sends go. */
		vc->cm_established = 1;
		be__verbs_release_held(vc);
		if (vc->dreq_pending) {
			vc->dreq_pending = 0;
			if (rdma_disconnect(vc->id))
				be_log_dbg("verbs: rdma_disconnect: %s", strerror(errno));
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		be_log_info("verbs: connection rejected: %s (%d)",
			    cm_reject_str(status), status);
		if ((vc->state == VC_CONNECTING || vc->state == VC_RESOLVING) &&
		    status == CM_REJ_CONSUMER_DEFINED) {
			ret = cm_conn_down(vc, BE_XEV_REJECTED, -ECONNREFUSED, ev);
			if (ret)
				cm_priv_decode(ev, e->param.conn.private_data,
					       e->param.conn.private_data_len);
		} else if (cm_can_retry(vc)) {
			retry = -ECONNREFUSED; /* nobody listens there */
		} else if (vc->state == VC_CONNECTING || vc->state == VC_RESOLVING) {
			ret = cm_conn_down(vc, BE_XEV_UNREACHABLE, -ECONNREFUSED, ev);
		} else {
			be__verbs_conn_teardown(vc);
			ret = cm_conn_down(vc, BE_XEV_DISCONNECTED, -ECONNREFUSED, ev);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		r = status < 0 ? status : -EHOSTUNREACH;
		be_log_info("verbs: %s: %s", rdma_event_str(type), strerror(-r));
		if (cm_can_retry(vc)) {
			retry = r;
			break;
		}
		if (vc->was_established)
			be__verbs_conn_teardown(vc);
		ret = cm_conn_down(vc,
				   vc->was_established ? BE_XEV_DISCONNECTED : BE_XEV_UNREACHABLE,
				   r, ev);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* Flush our QP and answer the peer's DREQ. */
		vc->cm_established = 1;
		be__verbs_conn_teardown(vc);
		ret = cm_conn_down(vc, BE_XEV_DISCONNECTED, status < 0 ? status : 0, ev);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		be_log_err("verbs: device %s removed under a connection", dev->name);
		be__verbs_conn_teardown(vc);
		ret = cm_conn_down(vc,
				   vc->was_established ? BE_XEV_DISCONNECTED : BE_XEV_UNREACHABLE,
				   -ENODEV, ev);
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_ADDR_CHANGE:
	default:
		be_log_dbg("verbs: event %s ignored", rdma_event_str(type));
		break;
	}
	rdma_ack_cm_event(e);
	if (retry)
		ret = cm_retry(ch, vc, retry);
	return ret;
}

/* Arm the evch's timer for the earliest connect deadline (0: none). */
static void cm_timer_set(struct verbs_evch *ch, uint64_t deadline_ns)
{
	be__wake_arm_timer(&ch->c.wake, deadline_ns);
	ch->next_deadline = deadline_ns;
}

/*
 * attr.timeout_ms bounds the whole connect, but rdma_cm times only the
 * address and route resolution; the IB CM retries a request for a minute.
 * A connect past its deadline is abandoned here: its cm_id is destroyed
 * (the IB CM sends a REJ) and UNREACHABLE (-ETIMEDOUT) reported. Returns
 * 1 with *ev filled, 0 if none expired; re-arms the timer.
 */
static int cm_check_deadlines(struct verbs_evch *ch, struct be_xevent *ev)
{
	uint64_t now = be__now_ns(), next = 0;
	struct verbs_conn *late = NULL;
	struct be__list *e;

	be__wake_drain(ch->c.wake.tfd);
	if (!ch->next_deadline || ch->next_deadline > now)
		return 0;
	be__list_for_each(e, &ch->c.conns) {
		struct verbs_conn *vc = be__list_entry(e, struct verbs_conn, ch_link);

		if (!vc->deadline_ns || vc->reported_down ||
		    (vc->state != VC_RESOLVING && vc->state != VC_CONNECTING))
			continue;
		if (!late && vc->deadline_ns <= now)
			late = vc;
		else if (!next || vc->deadline_ns < next)
			next = vc->deadline_ns;
	}
	cm_timer_set(ch, next);
	if (!late)
		return 0;
	be_log_info("verbs: connect timed out after %d ms", late->timeout_ms);
	/* Reported now, even while a step of it waits in the kernel; the
	 * connect thread destroys its cm_id when it gets there. */
	be__verbs_qp_destroy(late);
	late->id = NULL;
	cm_job_post(ch, late, VJ_DROP, 0);
	memset(ev, 0, sizeof(*ev));
	return cm_conn_down(late, BE_XEV_UNREACHABLE, -ETIMEDOUT, ev);
}

int be__verbs_evch_get(struct be_xevch *c, struct be_xevent *ev)
{
	struct verbs_evch *ch = to_vevch(c);
	struct rdma_event_channel *chan;
	struct rdma_cm_event *e;
	struct be_xevent q;
	bool queued;
	int ret;

	if (!ev)
		return -EINVAL;
	for (;;) {
		if (cm_queue_pop(ch, &q)) {
			if (q.type == VERBS_QEV_QP_FATAL) {
				char why[64];

				snprintf(why, sizeof(why), "fatal QP event (%s)",
					 strerror(-q.status));
				/* Queues the DISCONNECTED unless already reported. */
				be__verbs_conn_failed(to_vconn(q.conn), q.status, why);
				continue;
			}
			if (q.type == VERBS_QEV_CM_FAIL) {
				struct verbs_conn *vc = to_vconn(q.conn);

				/* Stale when the conn was reported down since. */
				if (vc->state != VC_RESOLVING && vc->state != VC_CONNECTING)
					continue;
				memset(ev, 0, sizeof(*ev));
				if (cm_conn_down(vc, BE_XEV_UNREACHABLE, q.status, ev))
					return 1;
				continue;
			}
			*ev = q;
			return 1;
		}
		be__verbs_async_pump(to_vdev(c->dev));
		pthread_mutex_lock(&be__verbs_lock);
		queued = !be__evq_empty(&ch->c.evq);
		pthread_mutex_unlock(&be__verbs_lock);
		if (queued)
			continue;
		chan = __atomic_load_n(&ch->ch, __ATOMIC_ACQUIRE);
		if (!chan)
			return cm_check_deadlines(ch, ev);
		if (rdma_get_cm_event(chan, &e)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return cm_check_deadlines(ch, ev);
			return errno ? -errno : -EIO;
		}
		ret = cm_translate(ch, e, ev);
		if (ret)
			return ret;
	}
}

void be__verbs_evch_pump(struct verbs_evch *ch)
{
	struct rdma_event_channel *chan = __atomic_load_n(&ch->ch, __ATOMIC_ACQUIRE);
	struct rdma_cm_event *e;
	struct be_xevent ev;

	/* Errors other than EAGAIN are evch_get()'s to report. */
	while (chan && rdma_get_cm_event(chan, &e) == 0) {
		if (cm_translate(ch, e, &ev) != 1)
			continue;
		pthread_mutex_lock(&be__verbs_lock);
		be__verbs_evch_push_locked(ch, &ev);
		pthread_mutex_unlock(&be__verbs_lock);
	}
}

/* --------------------------------------------------------- listeners */

int be__verbs_listen(struct be_xevch *c, const char *addr, int backlog,
		     struct be_xlistener **out)
{
	struct verbs_evch *ch = to_vevch(c);
	struct verbs_dev *dev = to_vdev(c->dev);
	struct rdma_event_channel *chan;
	struct sockaddr_storage ss;
	struct verbs_listener *vl;
	socklen_t sl;
	int ret;

	if (!out)
		return -EINVAL;
	ret = be__inet_resolve(addr, true, &ss, &sl);
	if (ret) {
		be_log_err("verbs: cannot listen on \"%s\": %s", addr ? addr : "", strerror(-ret));
		return ret;
	}
	vl = calloc(1, sizeof(*vl));
	if (!vl)
		return -ENOMEM;
	vl->magic = VERBS_OBJ_LISTENER;
	vl->base.dev = c->dev;
	vl->base.evch = c;
	chan = cm_channel(ch, &ret);
	if (!chan)
		goto err_free;
	if (rdma_create_id(chan, &vl->id, vl, RDMA_PS_TCP)) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: rdma_create_id: %s", strerror(-ret));
		goto err_free;
	}
	if (rdma_bind_addr(vl->id, (struct sockaddr *)&ss)) {
		ret = errno ? -errno : -EADDRNOTAVAIL;
		be_log_err("verbs: cannot listen on %s: %s", addr, strerror(-ret));
		goto err_id;
	}
	if (vl->id->verbs && !cm_same_dev(dev, vl->id->verbs)) {
		be_log_err("verbs: %s belongs to device %s, not %s", addr,
			   cm_dev_name(vl->id->verbs), dev->name);
		ret = -ENODEV;
		goto err_id;
	}
	if (rdma_listen(vl->id, backlog > 0 ? backlog : 128)) {
		ret = errno ? -errno : -EIO;
		be_log_err("verbs: rdma_listen(%s): %s", addr, strerror(-ret));
		goto err_id;
	}
	be__list_add_head(&ch->c.listeners, &vl->link);
	*out = &vl->base;
	return 0;

err_id:
	rdma_destroy_id(vl->id);
err_free:
	free(vl);
	return ret;
}

int be__verbs_listener_addr(struct be_xlistener *l, char *buf, size_t len)
{
	return be__inet_format(rdma_get_local_addr(to_vlistener(l)->id), buf, len);
}

void be__verbs_listener_close(struct be_xlistener *l)
{
	struct verbs_listener *vl = to_vlistener(l);

	if (vl->base.evch)
		be__list_del_init(&vl->link);
	/* Pending requests die with the listening id (rdma_cm rejects them). */
	if (vl->id && rdma_destroy_id(vl->id))
		be_log_err("verbs: rdma_destroy_id(listener): %s", strerror(errno));
	free(vl);
}

/* ------------------------------------------------------- connections */

int be__verbs_connect(struct be_xevch *c, const char *addr, const struct be_xconn_attr *attr,
		      const void *priv, size_t priv_len, struct be_xconn **out)
{
	struct verbs_evch *ch = to_vevch(c);
	struct be__inet_addrs *addrs;
	struct verbs_conn *vc;
	int ret;

	if (!attr || !attr->send_cq || !out || (priv_len && !priv))
		return -EINVAL;
	if (priv_len > BE_XPORT_PRIV_MAX) {
		be_log_err("verbs: connect private data of %zu bytes; at most %d", priv_len,
			   BE_XPORT_PRIV_MAX);
		return -EINVAL;
	}
	addrs = malloc(sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	ret = be__inet_resolve_all(addr, false, addrs);
	if (ret) {
		be_log_err("verbs: cannot connect to \"%s\": %s", addr ? addr : "", strerror(-ret));
		free(addrs);
		return ret;
	}
	vc = calloc(1, sizeof(*vc));
	if (!vc || cm_reserve(ch)) {
		free(vc);
		free(addrs);
		return -ENOMEM;
	}
	vc->magic = VERBS_OBJ_CONN;
	vc->base.dev = c->dev;
	vc->base.evch = c;
	vc->base.port = -1; /* known once the route is */
	vc->base.user = attr->user;
	vc->attr = *attr;
	vc->priv_len = cm_priv_encode(vc->priv, priv, priv_len);
	vc->timeout_ms = attr->timeout_ms > 0 ? attr->timeout_ms : CM_DEFAULT_TIMEOUT_MS;
	vc->state = VC_RESOLVING;
	vc->active = 1;
	vc->addrs = addrs;
	memcpy(&vc->peer, &addrs->ss[0], sizeof(vc->peer));
	be__list_init(&vc->job_link);
	ret = cm_thread_start(ch);
	if (ret)
		goto err_free;
	be__list_add_head(&ch->c.conns, &vc->ch_link);
	vc->deadline_ns = be__now_ns() + (uint64_t)vc->timeout_ms * 1000000u;
	if (!ch->next_deadline || vc->deadline_ns < ch->next_deadline)
		cm_timer_set(ch, vc->deadline_ns);
	/* The rdma_cm steps run on the connect thread; the worker goes on. */
	cm_job_post(ch, vc, VJ_START, -EHOSTUNREACH);
	*out = &vc->base;
	return 0;

err_free:
	pthread_mutex_lock(&be__verbs_lock);
	be__evq_unreserve(&ch->c.evq, VERBS_CONN_EVENTS);
	pthread_mutex_unlock(&be__verbs_lock);
	free(vc->addrs);
	free(vc);
	return ret;
}

int be__verbs_accept(struct be_xconn *conn, const struct be_xconn_attr *attr,
		     const void *priv, size_t priv_len)
{
	struct verbs_conn *vc = to_vconn(conn);
	struct rdma_conn_param cp;
	uint8_t buf[BE_XPORT_PRIV_MAX + 1], len;
	int ret;

	if (!attr || (priv_len && !priv))
		return -EINVAL;
	if (priv_len > BE_XPORT_PRIV_MAX)
		return -EINVAL;
	if (vc->state != VC_REQUEST)
		return -EINVAL;
	cm_set_ack_timeout(vc->id);
	ret = be__verbs_qp_create(vc, attr);
	if (ret)
		return ret;
	ret = cm_qp_ready(vc);
	if (ret) {
		be__verbs_qp_destroy(vc);
		return ret;
	}
	len = cm_priv_encode(buf, priv, priv_len);
	cm_conn_params(&cp, buf, len);
	cp.qp_num = vc->qp_num;
	cp.srq = vc->srq != NULL;
	if (rdma_accept(vc->id, &cp)) {
		ret = errno ? -errno : -EIO;
		be_log_err("verbs: rdma_accept: %s", strerror(-ret));
		be__verbs_qp_destroy(vc);
		return ret;
	}
	vc->base.user = attr->user;
	/*
	 * Our QP is in RTS now, but the connector's stays in INIT until its
	 * process reads the REP (its evch_get) and moves it to RTR: a packet
	 * that arrives before is dropped, and only our retransmission (an ACK
	 * timeout later) would deliver it. rdma_cm says when it is safe to
	 * send: RDMA_CM_EVENT_ESTABLISHED, at the RTU the connector sends
	 * once its QP is ready. ESTABLISHED is still reported to the user at
	 * once (a single thread serving both ends would otherwise wait for
	 * itself), and the sends posted until the RTU are held by the conn
	 * (data.c) and posted when it arrives, or flushed if the conn fails
	 * first. The RTU is read by evch_get(), and by cq_poll() and
	 * post_send() while sends are held.
	 */
	vc->state = VC_ESTABLISHED;
	vc->was_established = 1;
	vc->hold = 1;
	{
		struct be_xevent ev;

		memset(&ev, 0, sizeof(ev));
		ev.type = BE_XEV_ESTABLISHED;
		ev.conn = conn;
		be__verbs_conn_push(vc, &ev);
	}
	return 0;
}

static void cm_conn_free(struct verbs_conn *vc)
{
	struct verbs_evch *ch = vc->base.evch ? to_vevch(vc->base.evch) : NULL;

	if (vc->active && ch && cm_thread_running(ch)) {
		/* Its cm_id is the connect thread's: it destroys it and frees
		 * the conn after the steps still queued for it. */
		be__verbs_qp_destroy(vc);
		vc->id = NULL;
		be__list_del_init(&vc->ch_link);
		pthread_mutex_lock(&be__verbs_lock);
		be__verbs_purge_locked(ch, &vc->base, NULL);
		be__evq_unreserve(&ch->c.evq, VERBS_CONN_EVENTS);
		vc->dying = true;
		cm_job_post_locked(ch, vc, VJ_FREE, 0);
		pthread_mutex_unlock(&be__verbs_lock);
		return;
	}
	be__verbs_conn_detach(vc);
	free(vc->addrs);
	free(vc);
}

int be__verbs_reject(struct be_xconn *conn, const void *priv, size_t priv_len)
{
	struct verbs_conn *vc = to_vconn(conn);
	uint8_t buf[BE_XPORT_PRIV_MAX + 1], len;

	if ((priv_len && !priv) || vc->state != VC_REQUEST)
		return -EINVAL;
	if (priv_len > BE_XPORT_PRIV_MAX)
		return -EINVAL;
	len = cm_priv_encode(buf, priv, priv_len);
	if (rdma_reject(vc->id, buf, len)) {
		int ret = errno ? -errno : -EIO;

		be_log_err("verbs: rdma_reject: %s", strerror(-ret));
		return ret;
	}
	cm_conn_free(vc);
	return 0;
}

int be__verbs_disconnect(struct be_xconn *conn)
{
	struct verbs_conn *vc = to_vconn(conn);
	struct be_xevent ev;

	if (!vc->was_established)
		return -ENOTCONN;
	/* The QP goes to error (outstanding WRs flush); a DREQ goes out. */
	be__verbs_conn_teardown(vc);
	/* Reported here: rdma_cm's own DISCONNECTED waits for the peer's
	 * DREP, i.e. for the peer's process to read its channel. */
	memset(&ev, 0, sizeof(ev));
	if (cm_conn_down(vc, BE_XEV_DISCONNECTED, 0, &ev))
		be__verbs_conn_push(vc, &ev);
	return 0;
}

void be__verbs_conn_destroy(struct be_xconn *conn)
{
	if (conn)
		cm_conn_free(to_vconn(conn));
}

int be__verbs_conn_peer_addr(struct be_xconn *conn, char *buf, size_t len)
{
	struct verbs_conn *vc = to_vconn(conn);

	if (vc->id)
		return be__inet_format(rdma_get_peer_addr(vc->id), buf, len);
	/* Connecting, or failed: the address of the attempt last known. */
	if (vc->active)
		return be__inet_format((struct sockaddr *)&vc->peer, buf, len);
	return -ENOTCONN;
}
