/*
 * verbs.c - the verbs transport: devices, memory registration, CQs, SRQs,
 * QPs and the data path, on libibverbs. Connection management (rdma_cm) is
 * in cm.c; the objects are described in verbs_int.h.
 *
 * Device. dev_open() finds the device by name with ibv_get_device_list()
 * and opens its own context and PD. rdma_cm binds its cm_ids to contexts
 * of its own (shared by the whole process and inherited across fork()), so
 * QPs are made here with ibv_create_qp() and moved through INIT, RTR and
 * RTS with the attributes rdma_init_qp_attr() gives (cm.c): rdma_cm still
 * resolves the address, picks the port and the RoCE v2 GID, and carries
 * the handshake. A cm_id bound to another device is refused.
 *
 * Thread domains. Each CQ (one per worker) tries ibv_alloc_td() and a
 * parent domain over the device's PD; the worker's SRQs and QPs are created
 * on it so the provider can drop its locks. Providers without thread
 * domains (rxe, siw) make ibv_alloc_td() fail: the worker then uses the
 * plain PD, which is correct, only with uncontended locks.
 *
 * Completions. A CQ maps qp_num -> conn in a table owned by its worker. To
 * keep "no completion names a destroyed conn" even when a QP number is
 * reused, conn_destroy() drains the CQ right after the QP is destroyed and
 * keeps the other conns' completions in a backlog that cq_poll() returns
 * first. An SRQ remembers the wr_ids of its posted receives, because
 * ibv_destroy_srq() silently drops them and the contract says they flush.
 *
 * Held sends. Between accept() and the RTU the connector's QP may not be
 * ready yet, so an acceptor's conn keeps copies of what is posted and
 * posts them at the RTU (cm.c, be__verbs_accept()); meanwhile cq_poll()
 * and post_send() also read the evch, where the RTU arrives.
 *
 * Errors on a conn. The first error completion of a conn that was not being
 * torn down puts a BE_XEV_DISCONNECTED (with a status derived from the
 * completion) on the conn's evch and starts rdma_disconnect(), so the peer
 * learns it too. Fatal QP async events do the same through the evch queue.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/addr.h"
#include "xport/verbs_int.h"

/* A be_xsge is passed to verbs as an ibv_sge without copying. */
_Static_assert(sizeof(struct be_xsge) == sizeof(struct ibv_sge), "sge size");
_Static_assert(offsetof(struct be_xsge, addr) == offsetof(struct ibv_sge, addr), "sge addr");
_Static_assert(offsetof(struct be_xsge, length) == offsetof(struct ibv_sge, length), "sge len");
_Static_assert(offsetof(struct be_xsge, lkey) == offsetof(struct ibv_sge, lkey), "sge lkey");

#define VERBS_SGE_MAX 8      /* send SGEs per WR we ask for */
#define VERBS_POST_BATCH 16  /* WRs converted per ibv_post_*() call */
#define VERBS_POLL_BATCH 32
#define VERBS_CQ_ACK_BATCH 64

pthread_mutex_t be__verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct be__list verbs_devs = BE__LIST_INIT(verbs_devs); /* verbs_lock */

static int verbs_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* ------------------------------------------------------------ devices */

static uint32_t verbs_speed_mbps(uint8_t speed, uint8_t width)
{
	uint32_t lane, lanes;

	switch (speed) {
	case 1: lane = 2500; break;     /* SDR */
	case 2: lane = 5000; break;     /* DDR */
	case 4: lane = 10000; break;    /* QDR */
	case 8: lane = 10000; break;    /* FDR10 */
	case 16: lane = 14000; break;   /* FDR */
	case 32: lane = 25000; break;   /* EDR */
	case 64: lane = 50000; break;   /* HDR */
	case 128: lane = 100000; break; /* NDR */
	case 255: lane = 200000; break; /* XDR (reported in active_speed_ex) */
	default: return 0;
	}
	switch (width) {
	case 1: lanes = 1; break;
	case 2: lanes = 4; break;
	case 4: lanes = 8; break;
	case 8: lanes = 12; break;
	case 16: lanes = 2; break;
	default: return 0;
	}
	return lane * lanes;
}

static uint32_t verbs_mtu_bytes(enum ibv_mtu m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128u << m : 0;
}

/* The network interface behind port @port (RoCE), from sysfs. */
static void verbs_port_netdev(const char *dev, int port, char *buf, size_t len)
{
	char path[256];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/0",
		 dev, port);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	else
		buf[0] = '\0';
	fclose(f);
}

/* Largest max_inline_data an RC QP of this device accepts (0 if none). */
static uint32_t verbs_probe_inline(struct ibv_context *ctx, struct ibv_pd *pd)
{
	static const uint32_t tries[] = { 1024, 512, 256, 128, 64, 32 };
	struct ibv_cq *cq;
	uint32_t got = 0;
	size_t i;

	cq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	if (!cq)
		return 0;
	for (i = 0; i < BE_ARRAY_SIZE(tries) && !got; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = tries[i] },
			.qp_type = IBV_QPT_RC,
		};
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);

		if (qp) {
			got = BE_MAX(ia.cap.max_inline_data, tries[i]);
			ibv_destroy_qp(qp);
		}
	}
	ibv_destroy_cq(cq);
	return got;
}

static int verbs_probe_td(struct ibv_context *ctx)
{
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_td *td = ibv_alloc_td(ctx, &ta);

	if (!td)
		return 0;
	ibv_dealloc_td(td);
	return 1;
}

static int verbs_dev_open(const char *name, struct be_xdev **out)
{
	struct ibv_device **list;
	struct ibv_device *found = NULL;
	struct ibv_context *ctx;
	struct verbs_dev *dev;
	char want[64], have[256] = "";
	__be64 guid = 0;
	int n, i, ret;

	if (!name || !out)
		return -EINVAL;
	list = ibv_get_device_list(&n);
	if (!list) {
		ret = -errno;
		be_log_err("verbs: ibv_get_device_list: %s (is the RDMA stack loaded?)",
			   strerror(-ret));
		return ret ? ret : -ENODEV;
	}
	want[0] = '\0';
	for (i = 0; i < n; i++) {
		const char *dn = ibv_get_device_name(list[i]);

		if (!found && (!name[0] || strcmp(dn, name) == 0)) {
			found = list[i];
			snprintf(want, sizeof(want), "%s", dn);
			guid = ibv_get_device_guid(found);
		}
		if (strlen(have) + strlen(dn) + 2 < sizeof(have)) {
			strcat(have, have[0] ? " " : "");
			strcat(have, dn);
		}
	}
	if (!found) {
		ibv_free_device_list(list);
		be_log_err("verbs: no RDMA device %s%s%s (available: %s)", name[0] ? "\"" : "",
			   name[0] ? name : "at all", name[0] ? "\"" : "", have[0] ? have : "none");
		return -ENODEV;
	}
	/* Our own context, not rdma_cm's: what a process creates on it dies
	 * with the process (rdma_cm's contexts are inherited across fork()). */
	ctx = ibv_open_device(found);
	ret = ctx ? 0 : (errno ? -errno : -ENODEV);
	ibv_free_device_list(list);
	if (!ctx) {
		be_log_err("verbs: ibv_open_device(%s): %s", want, strerror(-ret));
		return ret;
	}

	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		ibv_close_device(ctx);
		return -ENOMEM;
	}
	dev->base.ops = &be__xport_verbs_ops;
	dev->base.alloc_dev = -1;
	dev->ctx = ctx;
	dev->guid = guid;
	dev->pid = getpid();
	pthread_rwlock_init(&dev->mr_lock, NULL);
	be__list_init(&dev->evchs);
	snprintf(dev->name, sizeof(dev->name), "%s", want);
	if (ibv_query_device(ctx, &dev->attr)) {
		ret = -errno;
		be_log_err("verbs: ibv_query_device(%s): %s", want, strerror(errno));
		goto err_free;
	}
	dev->num_ports = BE_MIN((int)dev->attr.phys_port_cnt, BE_XPORT_MAX_PORTS);
	dev->quirk_rxe = dev->attr.vendor_id == 0xffffff; /* Soft-RoCE */
	dev->pd = ibv_alloc_pd(ctx);
	if (!dev->pd) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_alloc_pd(%s): %s", want, strerror(-ret));
		goto err_free;
	}
	ret = verbs_set_nonblock(ctx->async_fd);
	if (ret) {
		be_log_err("verbs: %s: async fd: %s", want, strerror(-ret));
		goto err_pd;
	}
	dev->max_inline = verbs_probe_inline(ctx, dev->pd);
	dev->max_sge = (uint32_t)BE_MIN(dev->attr.max_sge, VERBS_SGE_MAX);
	dev->has_td = verbs_probe_td(ctx);
	be_log_info("verbs: opened %s: %d port(s), max_inline %u, thread domains %s", want,
		    dev->num_ports, dev->max_inline, dev->has_td ? "yes" : "no (plain PD)");

	pthread_mutex_lock(&be__verbs_lock);
	be__list_add_head(&verbs_devs, &dev->link);
	pthread_mutex_unlock(&be__verbs_lock);
	*out = &dev->base;
	return 0;

err_pd:
	ibv_dealloc_pd(dev->pd);
err_free:
	pthread_rwlock_destroy(&dev->mr_lock);
	ibv_close_device(ctx);
	free(dev);
	return ret;
}

static void verbs_dev_close(struct be_xdev *d)
{
	struct verbs_dev *dev = to_vdev(d);
	int ret;

	pthread_mutex_lock(&be__verbs_lock);
	be__list_del_init(&dev->link);
	if (!be__list_empty(&dev->evchs))
		be_log_err("verbs: closing %s with event channels still open", dev->name);
	pthread_mutex_unlock(&be__verbs_lock);
	if (getpid() != dev->pid) {
		/* Inherited across fork(): the objects are the parent's. */
		be__verbs_map_free(&dev->mrs);
		free(dev);
		return;
	}
	ret = ibv_dealloc_pd(dev->pd);
	if (ret)
		be_log_err("verbs: ibv_dealloc_pd(%s): %s (memory regions or QPs still exist)",
			   dev->name, strerror(ret));
	if (dev->mrs.count)
		be_log_err("verbs: closing %s with %zu memory region(s) registered",
			   dev->name, dev->mrs.count);
	be__verbs_map_free(&dev->mrs);
	pthread_rwlock_destroy(&dev->mr_lock);
	if (!ret && ibv_close_device(dev->ctx))
		be_log_err("verbs: ibv_close_device(%s): %s", dev->name, strerror(errno));
	free(dev);
}

static int verbs_dev_query(struct be_xdev *d, struct be_xdev_attr *out)
{
	struct verbs_dev *dev = to_vdev(d);
	int p;

	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", dev->name);
	snprintf(out->transport, sizeof(out->transport), "verbs");
	out->num_ports = dev->num_ports;
	for (p = 0; p < dev->num_ports; p++) {
		struct be_xport_port_attr *pa = &out->port[p];
		struct ibv_port_attr ia;

		if (ibv_query_port(dev->ctx, (uint8_t)(p + 1), &ia)) {
			be_log_warn("verbs: ibv_query_port(%s, %d): %s", dev->name, p + 1,
				    strerror(errno));
			continue;
		}
		pa->up = ia.state == IBV_PORT_ACTIVE;
		pa->speed_mbps = verbs_speed_mbps(ia.active_speed, ia.active_width);
		pa->mtu = verbs_mtu_bytes(ia.active_mtu);
		verbs_port_netdev(dev->name, p + 1, pa->netdev, sizeof(pa->netdev));
		if (!out->max_msg_size || ia.max_msg_sz < out->max_msg_size)
			out->max_msg_size = ia.max_msg_sz;
	}
	out->max_inline = dev->max_inline;
	out->max_sge = dev->max_sge;
	out->max_qp_wr = (uint32_t)dev->attr.max_qp_wr;
	out->max_srq_wr = (uint32_t)dev->attr.max_srq_wr;
	out->max_cqe = (uint32_t)dev->attr.max_cqe;
	out->has_thread_domain = dev->has_td;
	return 0;
}

static int verbs_reg(void *d, void *addr, size_t len, int fd, uint64_t fd_offset,
		     struct be_alloc_mr *out, char *err, size_t err_len)
{
	struct verbs_dev *dev = d;
	struct ibv_mr *mr;
	int e;

	/*
	 * A forked child inherits the parent's devices (in bemalloc's list
	 * too) and shares their uverbs file: what it registered there would
	 * outlive it and pin the parent's PD. Such a device is inert in the
	 * child: it opens its own.
	 */
	if (getpid() != dev->pid) {
		out->lkey = out->rkey = 0;
		out->handle = NULL;
		return 0;
	}
	mr = ibv_reg_mr(dev->pd, addr, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr) {
		e = errno ? errno : ENOMEM;
		if (err && err_len)
			snprintf(err, err_len, "ibv_reg_mr on %s (%zu bytes): %s%s", dev->name, len,
				 strerror(e),
				 (e == ENOMEM || e == EPERM) ?
					 " (locked memory limit? see ulimit -l / RLIMIT_MEMLOCK)" :
					 "");
		return -e;
	}
	pthread_rwlock_wrlock(&dev->mr_lock);
	e = be__verbs_map_put(&dev->mrs, mr->lkey, (uintptr_t)mr);
	pthread_rwlock_unlock(&dev->mr_lock);
	if (e) {
		ibv_dereg_mr(mr);
		if (err && err_len)
			snprintf(err, err_len, "verbs %s: out of memory", dev->name);
		return e;
	}
	out->lkey = mr->lkey;
	out->rkey = mr->rkey;
	out->handle = mr;
	return 0;
}

static void verbs_dereg(void *d, struct be_alloc_mr *mr)
{
	struct verbs_dev *dev = d;
	int ret;

	if (!mr->handle)
		return;
	pthread_rwlock_wrlock(&dev->mr_lock);
	be__verbs_map_del(&dev->mrs, ((struct ibv_mr *)mr->handle)->lkey);
	pthread_rwlock_unlock(&dev->mr_lock);
	ret = ibv_dereg_mr(mr->handle);
	if (ret)
		be_log_err("verbs: ibv_dereg_mr on %s: %s", dev->name, strerror(ret));
	mr->handle = NULL;
}

static void verbs_dev_reg_hook(struct be_xdev *d, struct be_alloc_reg_hook *out)
{
	struct verbs_dev *dev = to_vdev(d);

	out->name = dev->name;
	out->reg = verbs_reg;
	out->dereg = verbs_dereg;
	out->dev = dev;
}

/* ------------------------------------------------------ async events */

void be__verbs_evch_push_locked(struct verbs_evch *ch, const struct be_xevent *ev)
{
	be__xevq_push(&ch->evq, ch->wake.efd, ev);
}

/*
 * Call @fn(ch, arg) for every evch of every verbs_dev on @ctx (all
 * devices: @ctx NULL) until it returns non-zero; returns that. Holds
 * verbs_lock.
 */
static int verbs_each_evch_locked(struct ibv_context *ctx,
				  int (*fn)(struct verbs_evch *ch, const void *arg), const void *arg)
{
	struct be__list *de, *ce;
	int ret;

	be__list_for_each(de, &verbs_devs) {
		struct verbs_dev *d = be__list_entry(de, struct verbs_dev, link);

		if (ctx && d->ctx != ctx)
			continue;
		be__list_for_each(ce, &d->evchs) {
			ret = fn(be__list_entry(ce, struct verbs_evch, dev_link), arg);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int verbs_push_one(struct verbs_evch *ch, const void *ev)
{
	be__verbs_evch_push_locked(ch, ev);
	return 0;
}

/* Copy @ev to every evch of every verbs_dev on @ctx. Holds verbs_lock. */
static void verbs_fanout_locked(struct ibv_context *ctx, const struct be_xevent *ev)
{
	verbs_each_evch_locked(ctx, verbs_push_one, ev);
}

static int verbs_is_evch(struct verbs_evch *ch, const void *want)
{
	return ch == want;
}

/* SRQ_LIMIT goes to the worker owning the SRQ: the evch of the first
 * conn that used it, if that channel still exists; else to every evch. */
static void verbs_srq_event_locked(struct verbs_dev *dev, struct verbs_srq *srq,
				   const struct be_xevent *ev)
{
	if (srq->evch && verbs_each_evch_locked(NULL, verbs_is_evch, srq->evch)) {
		be__verbs_evch_push_locked(srq->evch, ev);
		return;
	}
	verbs_fanout_locked(dev->ctx, ev);
}

void be__verbs_async_pump(struct verbs_dev *dev)
{
	struct ibv_async_event ae;

	while (ibv_get_async_event(dev->ctx, &ae) == 0) {
		struct be_xevent ev;
		struct verbs_conn *vc = NULL;
		int fan = 1, p;

		memset(&ev, 0, sizeof(ev));
		switch (ae.event_type) {
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			ev.type = BE_XEV_SRQ_LIMIT;
			ev.srq = &((struct verbs_srq *)ae.element.srq->srq_context)->base;
			fan = 2;
			break;
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
			ev.type = BE_XEV_PORT_CHANGE;
			ev.port = ae.element.port_num - 1;
			ev.up = ae.event_type == IBV_EVENT_PORT_ACTIVE;
			be_log_warn("verbs: %s port %d is %s", dev->name, ae.element.port_num,
				    ev.up ? "up" : "down");
			break;
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
			vc = ae.element.qp->qp_context;
			ev.type = VERBS_QEV_QP_FATAL;
			ev.status = ae.event_type == IBV_EVENT_QP_ACCESS_ERR ? -EACCES : -EIO;
			ev.conn = &vc->base;
			fan = 0;
			be_log_err("verbs: %s: QP %u: %s", dev->name, ae.element.qp->qp_num,
				   ibv_event_type_str(ae.event_type));
			break;
		case IBV_EVENT_DEVICE_FATAL:
			be_log_err("verbs: %s: device fatal error: every port is down", dev->name);
			pthread_mutex_lock(&be__verbs_lock);
			for (p = 0; p < dev->num_ports; p++) {
				memset(&ev, 0, sizeof(ev));
				ev.type = BE_XEV_PORT_CHANGE;
				ev.port = p;
				verbs_fanout_locked(dev->ctx, &ev);
			}
			pthread_mutex_unlock(&be__verbs_lock);
			fan = -1;
			break;
		case IBV_EVENT_CQ_ERR:
			be_log_err("verbs: %s: CQ overrun (%s)", dev->name,
				   ibv_event_type_str(ae.event_type));
			fan = -1;
			break;
		default:
			be_log_dbg("verbs: %s: async event %s", dev->name,
				   ibv_event_type_str(ae.event_type));
			fan = -1;
			break;
		}
		/* Queue before the ack: destroying the QP/SRQ waits for the
		 * ack, and purges the queues afterwards. */
		pthread_mutex_lock(&be__verbs_lock);
		if (fan == 1)
			verbs_fanout_locked(dev->ctx, &ev);
		else if (fan == 0 && vc->base.evch)
			be__verbs_evch_push_locked(to_vevch(vc->base.evch), &ev);
		else if (fan == 2)
			verbs_srq_event_locked(dev, to_vsrq(ev.srq), &ev);
		pthread_mutex_unlock(&be__verbs_lock);
		ibv_ack_async_event(&ae);
	}
}

/* Drop queued events that name @conn or @srq from @ch. Holds verbs_lock. */
void be__verbs_purge_locked(struct verbs_evch *ch, const struct be_xconn *conn,
			       const struct be_xsrq *srq)
{
	be__xevq_purge(&ch->evq, ch->wake.efd, conn, NULL, srq);
}

static int verbs_purge_srq(struct verbs_evch *ch, const void *srq)
{
	be__verbs_purge_locked(ch, NULL, srq);
	return 0;
}

/* ------------------------------------------------------ completions */

static void verbs_bl_push(struct verbs_cq *cq, const struct be_xwc *wc)
{
	if (cq->bl_len == cq->bl_cap) {
		if (cq->bl_head) {
			memmove(cq->backlog, cq->backlog + cq->bl_head,
				(cq->bl_len - cq->bl_head) * sizeof(*wc));
			cq->bl_len -= cq->bl_head;
			cq->bl_head = 0;
		} else {
			size_t ncap = cq->bl_cap ? cq->bl_cap * 2 : 64;
			struct be_xwc *n = realloc(cq->backlog, ncap * sizeof(*wc));

			if (!n) {
				be_log_err("verbs: out of memory: completion of wr_id %#llx lost",
					   (unsigned long long)wc->wr_id);
				return;
			}
			cq->backlog = n;
			cq->bl_cap = ncap;
		}
	}
	if (cq->bl_head == cq->bl_len)
		be__wake_kick(cq->wake.efd);
	cq->backlog[cq->bl_len++] = *wc;
}

static enum be_xwc_status verbs_wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return BE_XWC_SUCCESS;
	case IBV_WC_LOC_LEN_ERR: return BE_XWC_LOC_LEN_ERR;
	case IBV_WC_LOC_PROT_ERR: return BE_XWC_LOC_PROT_ERR;
	case IBV_WC_WR_FLUSH_ERR: return BE_XWC_WR_FLUSH_ERR;
	case IBV_WC_REM_ACCESS_ERR: return BE_XWC_REM_ACCESS_ERR;
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_INV_REQ_ERR: return BE_XWC_REM_OP_ERR;
	case IBV_WC_RETRY_EXC_ERR: return BE_XWC_RETRY_EXC_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR: return BE_XWC_RNR_RETRY_EXC;
	default: return BE_XWC_GENERAL_ERR;
	}
}

static int verbs_status_errno(enum be_xwc_status s)
{
	switch (s) {
	case BE_XWC_SUCCESS: return 0;
	case BE_XWC_LOC_LEN_ERR: return -EMSGSIZE;
	case BE_XWC_LOC_PROT_ERR: return -EFAULT;
	case BE_XWC_WR_FLUSH_ERR: return -ECONNRESET;
	case BE_XWC_REM_ACCESS_ERR: return -EACCES;
	case BE_XWC_REM_OP_ERR: return -EPROTO;
	case BE_XWC_RETRY_EXC_ERR: return -ETIMEDOUT;
	case BE_XWC_RNR_RETRY_EXC: return -ENOBUFS;
	default: return -EIO;
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

static void verbs_srq_unrecord(struct verbs_srq *srq, uint64_t wr_id)
{
	uint64_t cnt = 0;

	if (!be__verbs_map_get(&srq->posted, wr_id, &cnt))
		return;
	if (cnt > 1)
		be__verbs_map_put(&srq->posted, wr_id, cnt - 1);
	else
		be__verbs_map_del(&srq->posted, wr_id);
	srq->nposted--;
}

/* Find the send WR of @wr_id among @vc's outstanding ones; 1 if found. */
static int verbs_sq_has(const struct verbs_conn *vc, uint64_t wr_id)
{
	uint32_t i;

	for (i = vc->sq_head; i != vc->sq_tail; i++)
		if (vc->sq[i & vc->sq_mask].wr_id == wr_id)
			return 1;
	return 0;
}

/*
 * The send WR a send completion belongs to: unsignaled WRs before it
 * completed silently (on success) and leave the ring with it. On error
 * every WR has its own completion, signaled or not.
 */
static enum be_xwc_opcode verbs_sq_complete(struct verbs_conn *vc, const struct ibv_wc *iwc)
{
	enum be_xwc_opcode op = BE_XWC_SEND;

	while (vc->sq_head != vc->sq_tail) {
		struct verbs_swr *s = &vc->sq[vc->sq_head & vc->sq_mask];

		vc->sq_head++;
		if (s->wr_id == iwc->wr_id && (s->signaled || iwc->status != IBV_WC_SUCCESS)) {
			op = (enum be_xwc_opcode)s->opcode;
			break;
		}
	}
	return op;
}

/*
 * Turn one ibv_wc into a be_xwc; 1 if it is to be delivered. Error
 * completions carry only wr_id, status and qp_num (ibv_poll_cq(3)), so a
 * failed WR is a send when its wr_id is outstanding on the conn's send
 * queue, and otherwise a receive if its SRQ holds that wr_id.
 */
static int verbs_wc_map(struct verbs_cq *cq, const struct ibv_wc *iwc, struct be_xwc *wc)
{
	struct verbs_conn *vc = NULL;
	uint64_t v, cnt;
	int is_recv;

	if (be__verbs_map_get(&cq->qps, iwc->qp_num, &v))
		vc = (struct verbs_conn *)(uintptr_t)v;
	if (iwc->status == IBV_WC_SUCCESS)
		is_recv = !!(iwc->opcode & IBV_WC_RECV);
	else
		is_recv = vc && !verbs_sq_has(vc, iwc->wr_id) && vc->srq &&
			  be__verbs_map_get(&vc->srq->posted, iwc->wr_id, &cnt);
	if (!vc) {
		/* Cannot happen: conn_destroy() drains the CQ first. */
		be_log_dbg("verbs: completion for unknown QP %u dropped", iwc->qp_num);
		return 0;
	}
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = iwc->wr_id;
	wc->status = verbs_wc_status(iwc->status);
	/* rxe reports local buffer faults as LOC_QP_OP_ERR: a receive that
	 * cannot hold the message (NICs: LOC_LEN_ERR), a send whose lkey or
	 * range is bad (NICs: LOC_PROT_ERR). */
	if (iwc->status == IBV_WC_LOC_QP_OP_ERR && to_vdev(cq->base.dev)->quirk_rxe)
		wc->status = is_recv ? BE_XWC_LOC_LEN_ERR : BE_XWC_LOC_PROT_ERR;
	wc->vendor_err = iwc->vendor_err;
	wc->conn = &vc->base;
	if (is_recv) {
		wc->srq = vc->srq ? &vc->srq->base : NULL;
		wc->byte_len = iwc->byte_len;
		if (iwc->status == IBV_WC_SUCCESS && iwc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			wc->opcode = BE_XWC_RECV_IMM;
			wc->imm = ntohl(iwc->imm_data);
		} else {
			wc->opcode = BE_XWC_RECV;
		}
		if (vc->srq)
			verbs_srq_unrecord(vc->srq, iwc->wr_id);
	} else {
		wc->opcode = verbs_sq_complete(vc, iwc);
	}
	if (wc->status != BE_XWC_SUCCESS && !vc->reported_down && !vc->disconnect_sent) {
		char why[96];

		snprintf(why, sizeof(why), "%s completion: %s (vendor error %#x)",
			 is_recv ? "receive" : "send", ibv_wc_status_str(iwc->status),
			 iwc->vendor_err);
		be__verbs_conn_failed(vc, verbs_status_errno(wc->status), why);
	}
	return 1;
}

/* Move everything on @cq's CQ into its backlog. */
static void verbs_cq_drain(struct verbs_cq *cq)
{
	struct ibv_wc iwc[VERBS_POLL_BATCH];
	struct be_xwc wc;
	int k, i;

	do {
		k = ibv_poll_cq(cq->cq, VERBS_POLL_BATCH, iwc);
		for (i = 0; i < k; i++)
			if (verbs_wc_map(cq, &iwc[i], &wc))
				verbs_bl_push(cq, &wc);
	} while (k == VERBS_POLL_BATCH);
}

/* Backlog entries of @vc: sends vanish, receives become flushes with no conn
 * (the buffer goes back to its owner). */
static void verbs_bl_forget(struct verbs_cq *cq, const struct verbs_conn *vc)
{
	size_t i, o = cq->bl_head;

	for (i = cq->bl_head; i < cq->bl_len; i++) {
		struct be_xwc *w = &cq->backlog[i];

		if (w->conn == &vc->base) {
			if (w->opcode != BE_XWC_RECV && w->opcode != BE_XWC_RECV_IMM)
				continue;
			w->conn = NULL;
			w->status = BE_XWC_WR_FLUSH_ERR;
			w->opcode = BE_XWC_RECV;
			w->byte_len = 0;
		}
		cq->backlog[o++] = *w;
	}
	cq->bl_len = o;
	if (cq->bl_head == cq->bl_len) {
		cq->bl_head = cq->bl_len = 0;
		be__wake_drain(cq->wake.efd);
	}
}

static int verbs_cq_create(struct be_xdev *d, uint32_t depth, struct be_xcq **out)
{
	struct verbs_dev *dev = to_vdev(d);
	struct verbs_cq *cq;
	int ret;

	if (!depth || !out)
		return -EINVAL;
	if (depth > (uint32_t)dev->attr.max_cqe)
		depth = (uint32_t)dev->attr.max_cqe;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->base.dev = d;
	be__list_init(&cq->srqs);
	be__list_init(&cq->holding);
	cq->ch = ibv_create_comp_channel(dev->ctx);
	if (!cq->ch) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_comp_channel(%s): %s", dev->name, strerror(-ret));
		goto err_free;
	}
	ret = verbs_set_nonblock(cq->ch->fd);
	if (ret)
		goto err_ch;
	cq->cq = ibv_create_cq(dev->ctx, (int)depth, cq, cq->ch, 0);
	if (!cq->cq) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_cq(%s, %u): %s", dev->name, depth, strerror(-ret));
		goto err_ch;
	}
	cq->qp_pd = dev->pd;
	if (dev->has_td) {
		struct ibv_td_init_attr ta = { 0 };

		cq->td = ibv_alloc_td(dev->ctx, &ta);
		if (cq->td) {
			struct ibv_parent_domain_init_attr pa = { .pd = dev->pd, .td = cq->td };
			struct ibv_pd *ppd = ibv_alloc_parent_domain(dev->ctx, &pa);

			if (ppd) {
				cq->qp_pd = ppd;
			} else {
				be_log_info("verbs: %s: no parent domain (%s), using the plain PD",
					    dev->name, strerror(errno));
				ibv_dealloc_td(cq->td);
				cq->td = NULL;
			}
		}
	}
	/* The set is only handed out, never read here: no tags. */
	ret = be__wake_init(&cq->wake, 0, NULL, NULL);
	if (ret)
		goto err_cq;
	ret = be__wake_watch(&cq->wake, cq->ch->fd, EPOLLIN, NULL);
	if (ret)
		goto err_wake;
	*out = &cq->base;
	return 0;

err_wake:
	be__wake_close(&cq->wake);
err_cq:
	if (cq->td) {
		ibv_dealloc_pd(cq->qp_pd);
		ibv_dealloc_td(cq->td);
	}
	ibv_destroy_cq(cq->cq);
err_ch:
	ibv_destroy_comp_channel(cq->ch);
err_free:
	free(cq);
	return ret;
}

/* Destroy the QP of every conn on @cq (only those using @srq, if set): a
 * caller destroys a parent before its children. */
static void verbs_cq_detach_conns(struct verbs_cq *cq, struct verbs_srq *srq)
{
	struct verbs_conn **list;
	uint64_t k, v;
	size_t pos = 0, n = 0, i;

	list = calloc(cq->qps.count ? cq->qps.count : 1, sizeof(*list));
	if (!list)
		return;
	while (be__verbs_map_next(&cq->qps, &pos, &k, &v)) {
		struct verbs_conn *vc = (struct verbs_conn *)(uintptr_t)v;

		if (!srq || vc->srq == srq)
			list[n++] = vc;
	}
	for (i = 0; i < n; i++)
		be__verbs_conn_detach(list[i]);
	free(list);
}

static void verbs_cq_destroy(struct be_xcq *c)
{
	struct verbs_cq *cq = to_vcq(c);
	struct verbs_dev *dev = to_vdev(c->dev);
	int ret;

	if (cq->qps.count) {
		be_log_err("verbs: destroying a CQ of %s with %zu connection(s) still on it; "
			   "their QPs go first", dev->name, cq->qps.count);
		verbs_cq_detach_conns(cq, NULL);
	}
	while (!be__list_empty(&cq->srqs)) {
		struct verbs_srq *srq = be__list_entry(cq->srqs.next, struct verbs_srq, cq_link);

		be_log_err("verbs: destroying a CQ of %s before its SRQ", dev->name);
		be__list_del_init(&srq->cq_link);
		srq->base.cq = NULL;
	}
	if (cq->unacked)
		ibv_ack_cq_events(cq->cq, cq->unacked);
	ret = ibv_destroy_cq(cq->cq);
	if (ret)
		be_log_err("verbs: ibv_destroy_cq(%s): %s", dev->name, strerror(ret));
	if (cq->td) {
		ibv_dealloc_pd(cq->qp_pd);
		ibv_dealloc_td(cq->td);
	}
	ibv_destroy_comp_channel(cq->ch);
	be__wake_close(&cq->wake);
	be__verbs_map_free(&cq->qps);
	free(cq->backlog);
	free(cq);
}

/*
 * Conns of @cq hold sends until their RTU (cm.c), which arrives on their
 * evch: a worker that polls only its cq for a while must not keep them
 * waiting, so read those evchs here (the evch and the cq have one owner).
 */
static void verbs_cq_pump_holders(struct verbs_cq *cq)
{
	struct verbs_evch *chs[4];
	struct be__list *e;
	int n = 0, i;

	for (e = cq->holding.next; e != &cq->holding && n < 4; e = e->next) {
		struct verbs_conn *vc = be__list_entry(e, struct verbs_conn, hold_link);
		struct verbs_evch *ch = to_vevch(vc->base.evch);

		for (i = 0; i < n && chs[i] != ch; i++)
			;
		if (i == n)
			chs[n++] = ch;
	}
	for (i = 0; i < n; i++)
		be__verbs_evch_pump(chs[i]);
}

static int verbs_cq_poll(struct be_xcq *c, struct be_xwc *wc, int n)
{
	struct verbs_cq *cq = to_vcq(c);
	struct ibv_wc iwc[VERBS_POLL_BATCH];
	int got = 0, k, i, want;

	if (n < 0 || (n && !wc))
		return -EINVAL;
	if (BE_UNLIKELY(!be__list_empty(&cq->holding)))
		verbs_cq_pump_holders(cq);
	if (cq->bl_head != cq->bl_len) {
		while (got < n && cq->bl_head < cq->bl_len)
			wc[got++] = cq->backlog[cq->bl_head++];
		if (cq->bl_head == cq->bl_len) {
			cq->bl_head = cq->bl_len = 0;
			be__wake_drain(cq->wake.efd);
		}
	}
	while (got < n) {
		want = BE_MIN(n - got, VERBS_POLL_BATCH);
		k = ibv_poll_cq(cq->cq, want, iwc);
		if (k < 0) {
			be_log_err("verbs: ibv_poll_cq: %d", k);
			return got ? got : -EIO;
		}
		for (i = 0; i < k; i++)
			got += verbs_wc_map(cq, &iwc[i], &wc[got]);
		if (k < want)
			break;
	}
	return got;
}

static int verbs_cq_fd(struct be_xcq *c)
{
	return to_vcq(c)->wake.epfd;
}

/*
 * A CQ event fires only for completions added after arming, but the
 * contract wakes an armed cq at once when completions are already there:
 * take them into the backlog, whose eventfd is readable while non-empty.
 */
static int verbs_cq_arm(struct be_xcq *c)
{
	struct verbs_cq *cq = to_vcq(c);
	int ret = ibv_req_notify_cq(cq->cq, 0);

	if (ret)
		return -ret;
	verbs_cq_drain(cq);
	return 0;
}

static int verbs_cq_ack(struct be_xcq *c)
{
	struct verbs_cq *cq = to_vcq(c);
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (ibv_get_cq_event(cq->ch, &ev_cq, &ev_ctx) == 0) {
		/* ibv_ack_cq_events() takes a lock: ack in batches. */
		if (++cq->unacked >= VERBS_CQ_ACK_BATCH) {
			ibv_ack_cq_events(cq->cq, cq->unacked);
			cq->unacked = 0;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	return 0;
}

/* ---------------------------------------------------- receive queues */

static int verbs_srq_create(struct be_xcq *c, uint32_t depth, struct be_xsrq **out)
{
	struct verbs_cq *cq = to_vcq(c);
	struct verbs_dev *dev = to_vdev(c->dev);
	struct ibv_srq_init_attr ia;
	struct verbs_srq *srq;
	int ret;

	if (!depth || !out)
		return -EINVAL;
	if (depth > (uint32_t)dev->attr.max_srq_wr)
		return -EINVAL;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = srq;
	ia.attr.max_wr = depth;
	ia.attr.max_sge = 1;
	srq->srq = ibv_create_srq(cq->qp_pd, &ia);
	if (!srq->srq) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_srq(%s, %u): %s", dev->name, depth, strerror(-ret));
		free(srq);
		return ret;
	}
	srq->base.dev = c->dev;
	srq->base.cq = c;
	srq->depth = depth;
	be__list_add_head(&cq->srqs, &srq->cq_link);
	*out = &srq->base;
	return 0;
}

static void verbs_srq_destroy(struct be_xsrq *s)
{
	struct verbs_srq *srq = to_vsrq(s);
	struct verbs_cq *cq = s->cq ? to_vcq(s->cq) : NULL;
	struct verbs_dev *dev = to_vdev(s->dev);
	uint64_t wr_id, cnt;
	size_t pos = 0;
	int ret;

	if (cq && cq->qps.count)
		verbs_cq_detach_conns(cq, srq);
	ret = ibv_destroy_srq(srq->srq);
	if (ret) {
		be_log_err("verbs: ibv_destroy_srq(%s): %s; leaked", dev->name, strerror(ret));
		return;
	}
	/* Hand every posted receive back as a flush, as the contract says
	 * (verbs drops them silently). */
	while (cq && be__verbs_map_next(&srq->posted, &pos, &wr_id, &cnt)) {
		struct be_xwc wc = {
			.wr_id = wr_id,
			.status = BE_XWC_WR_FLUSH_ERR,
			.opcode = BE_XWC_RECV,
		};

		while (cnt--)
			verbs_bl_push(cq, &wc);
	}
	be__list_del_init(&srq->cq_link);
	be__verbs_map_free(&srq->posted);
	pthread_mutex_lock(&be__verbs_lock);
	verbs_each_evch_locked(dev->ctx, verbs_purge_srq, s);
	pthread_mutex_unlock(&be__verbs_lock);
	free(srq);
}

/* Does @sge lie inside a region registered on @dev with its lkey? */
static int verbs_lkey_ok(struct verbs_dev *dev, const struct be_xsge *sge)
{
	uint64_t v;
	int ok = 0;

	pthread_rwlock_rdlock(&dev->mr_lock);
	if (be__verbs_map_get(&dev->mrs, sge->lkey, &v)) {
		const struct ibv_mr *mr = (const struct ibv_mr *)(uintptr_t)v;
		uint64_t start = (uintptr_t)mr->addr;

		ok = sge->addr >= start && sge->addr - start <= mr->length &&
		     sge->length <= mr->length - (sge->addr - start);
	}
	pthread_rwlock_unlock(&dev->mr_lock);
	return ok;
}

static int verbs_srq_post_recv(struct be_xsrq *s, struct be_xrecv_wr *wr, struct be_xrecv_wr **bad)
{
	struct verbs_srq *srq = to_vsrq(s);
	struct verbs_dev *dev = to_vdev(s->dev);
	struct ibv_recv_wr iw[VERBS_POST_BATCH], *ibad;
	struct be_xrecv_wr *w = wr, *batch[VERBS_POST_BATCH];
	uint64_t cnt;
	int n, i, ret, err, posted;

	while (w) {
		err = 0;
		for (n = 0; w && n < VERBS_POST_BATCH; n++, w = w->next) {
			if (srq->nposted >= srq->depth) {
				err = -ENOMEM;
				break;
			}
			if (!verbs_lkey_ok(dev, &w->sge)) {
				err = -EINVAL;
				break;
			}
			/* Record first: the receive may complete right after. */
			cnt = 0;
			be__verbs_map_get(&srq->posted, w->wr_id, &cnt);
			err = be__verbs_map_put(&srq->posted, w->wr_id, cnt + 1);
			if (err)
				break;
			srq->nposted++;
			batch[n] = w;
			iw[n].wr_id = w->wr_id;
			iw[n].sg_list = (struct ibv_sge *)(uintptr_t)&w->sge;
			iw[n].num_sge = 1;
			iw[n].next = &iw[n + 1];
		}
		if (n) {
			iw[n - 1].next = NULL;
			ret = ibv_post_srq_recv(srq->srq, iw, &ibad);
			if (ret) {
				posted = (int)(ibad - iw);
				for (i = posted; i < n; i++)
					verbs_srq_unrecord(srq, batch[i]->wr_id);
				if (bad)
					*bad = batch[posted];
				return -ret;
			}
		}
		if (err) {
			if (bad)
				*bad = w;
			return err;
		}
	}
	return 0;
}

static int verbs_srq_arm_limit(struct be_xsrq *s, uint32_t limit)
{
	struct ibv_srq_attr a = { .srq_limit = limit };

	return -ibv_modify_srq(to_vsrq(s)->srq, &a, IBV_SRQ_LIMIT);
}

/* ----------------------------------------------------------- QPs */

static void verbs_held_free(struct verbs_conn *vc);

int be__verbs_qp_create(struct verbs_conn *vc, const struct be_xconn_attr *attr)
{
	struct verbs_dev *dev = to_vdev(vc->base.dev);
	struct verbs_cq *scq, *rcq;
	struct verbs_srq *srq;
	struct ibv_qp_init_attr ia;
	uint32_t depth, slots;
	int ret;

	if (!attr || !attr->send_cq)
		return -EINVAL;
	scq = to_vcq(attr->send_cq);
	rcq = attr->recv_cq ? to_vcq(attr->recv_cq) : scq;
	srq = attr->srq ? to_vsrq(attr->srq) : NULL;
	if (srq && srq->base.cq != &rcq->base)
		return -EINVAL;
	if (scq->base.dev != vc->base.dev || rcq->base.dev != vc->base.dev)
		return -EINVAL;
	depth = attr->max_send_wr ? attr->max_send_wr : 128;
	depth = BE_MIN(depth, (uint32_t)dev->attr.max_qp_wr);

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = vc;
	ia.send_cq = scq->cq;
	ia.recv_cq = rcq->cq;
	ia.srq = srq ? srq->srq : NULL;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = depth;
	ia.cap.max_recv_wr = srq ? 0 : 1;
	ia.cap.max_send_sge = dev->max_sge;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = BE_MIN(attr->max_inline, dev->max_inline);
	/* The worker's thread domain, if it has one (its SRQ's, which is the
	 * recv CQ's, so QP and SRQ share a domain). */
	vc->qp = ibv_create_qp(rcq->qp_pd, &ia);
	if (!vc->qp) {
		ret = errno ? -errno : -ENOMEM;
		be_log_err("verbs: ibv_create_qp on %s (depth %u, inline %u): %s", dev->name,
			   depth, ia.cap.max_inline_data, strerror(-ret));
		return ret;
	}
	ret = be__verbs_qp_to(vc, IBV_QPS_INIT);
	if (ret) {
		be_log_err("verbs: QP to INIT on %s: %s", dev->name, strerror(-ret));
		goto err_qp;
	}
	vc->qp_num = vc->qp->qp_num;
	vc->max_inline = ia.cap.max_inline_data;
	vc->max_sge = BE_MIN(ia.cap.max_send_sge, dev->max_sge);
	vc->max_send_wr = ia.cap.max_send_wr;
	vc->held = NULL;
	vc->held_tail = &vc->held;
	be__list_init(&vc->hold_link);
	for (slots = 1; slots < ia.cap.max_send_wr; slots <<= 1)
		;
	vc->sq = calloc(slots, sizeof(*vc->sq));
	if (!vc->sq) {
		ret = -ENOMEM;
		goto err_qp;
	}
	vc->sq_mask = slots - 1;
	vc->sq_head = vc->sq_tail = 0;
	ret = be__verbs_map_put(&scq->qps, vc->qp_num, (uintptr_t)vc);
	if (ret)
		goto err_sq;
	if (rcq != scq) {
		ret = be__verbs_map_put(&rcq->qps, vc->qp_num, (uintptr_t)vc);
		if (ret)
			goto err_map;
	}
	vc->send_cq = scq;
	vc->recv_cq = rcq;
	vc->srq = srq;
	if (srq && !srq->evch && vc->base.evch) {
		pthread_mutex_lock(&be__verbs_lock);
		srq->evch = to_vevch(vc->base.evch);
		pthread_mutex_unlock(&be__verbs_lock);
	}
	return 0;

err_map:
	be__verbs_map_del(&scq->qps, vc->qp_num);
err_sq:
	free(vc->sq);
	vc->sq = NULL;
err_qp:
	ibv_destroy_qp(vc->qp);
	vc->qp = NULL;
	return ret;
}

void be__verbs_qp_destroy(struct verbs_conn *vc)
{
	struct verbs_cq *cq[2] = { vc->send_cq, vc->recv_cq };
	int i, n = vc->recv_cq == vc->send_cq ? 1 : 2;

	if (!vc->qp)
		return;
	verbs_held_free(vc);
	if (ibv_destroy_qp(vc->qp))
		be_log_err("verbs: ibv_destroy_qp(%u): %s", vc->qp_num, strerror(errno));
	vc->qp = NULL;
	/* The QP is gone: whatever it completed is on the CQs now. Take it
	 * off (other conns' completions wait in the backlog) and forget it. */
	for (i = 0; i < n; i++) {
		verbs_cq_drain(cq[i]);
		verbs_bl_forget(cq[i], vc);
		be__verbs_map_del(&cq[i]->qps, vc->qp_num);
	}
	free(vc->sq);
	vc->sq = NULL;
	vc->send_cq = vc->recv_cq = NULL;
	vc->srq = NULL;
}

/* ------------------------------------------------------- data path */

static void verbs_sq_push(struct verbs_conn *vc, const struct be_xsend_wr *w)
{
	struct verbs_swr *s = &vc->sq[vc->sq_tail++ & vc->sq_mask];

	s->wr_id = w->wr_id;
	s->opcode = (uint8_t)(w->opcode == BE_XWR_SEND    ? BE_XWC_SEND :
			      w->opcode == BE_XWR_WRITE ? BE_XWC_WRITE :
							  BE_XWC_WRITE_IMM);
	s->signaled = !!(w->flags & BE_XWR_F_SIGNALED);
}

/* The checks ibv_post_send() would not make for us (or would make only
 * after posting the WRs before): 0 or -EINVAL. */
static int verbs_wr_check(const struct verbs_conn *vc, const struct be_xsend_wr *w)
{
	if (w->num_sge < 0 || (uint32_t)w->num_sge > vc->max_sge || (w->num_sge && !w->sg_list))
		return -EINVAL;
	if (w->opcode != BE_XWR_SEND && w->opcode != BE_XWR_WRITE && w->opcode != BE_XWR_WRITE_IMM)
		return -EINVAL;
	if (w->flags & BE_XWR_F_INLINE) {
		uint64_t len = 0;
		int k;

		for (k = 0; k < w->num_sge; k++)
			len += w->sg_list[k].length;
		if (len > vc->max_inline)
			return -EINVAL;
	}
	return 0;
}

/* Post the chain @wr to @vc's QP, whatever its state (in error it
 * flushes). *bad: the first WR not posted. */
static int verbs_post_now(struct verbs_conn *vc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct ibv_send_wr iw[VERBS_POST_BATCH], *ibad;
	struct be_xsend_wr *w = wr, *batch[VERBS_POST_BATCH];
	int n, i, ret, err, posted;
	uint32_t free_slots;

	while (w) {
		err = 0;
		free_slots = vc->sq_mask + 1 - (vc->sq_tail - vc->sq_head);
		for (n = 0; w && n < VERBS_POST_BATCH; n++, w = w->next) {
			struct ibv_send_wr *x = &iw[n];

			if ((uint32_t)n >= free_slots) {
				err = -ENOMEM; /* send queue full, as ibv_post_send says */
				break;
			}
			err = verbs_wr_check(vc, w);
			if (err)
				break;
			memset(x, 0, sizeof(*x));
			x->wr_id = w->wr_id;
			x->sg_list = (struct ibv_sge *)(uintptr_t)w->sg_list;
			x->num_sge = w->num_sge;
			x->next = &iw[n + 1];
			if (w->flags & BE_XWR_F_SIGNALED)
				x->send_flags |= IBV_SEND_SIGNALED;
			if (w->flags & BE_XWR_F_INLINE)
				x->send_flags |= IBV_SEND_INLINE;
			switch (w->opcode) {
			case BE_XWR_SEND:
				x->opcode = IBV_WR_SEND;
				break;
			case BE_XWR_WRITE:
				x->opcode = IBV_WR_RDMA_WRITE;
				break;
			case BE_XWR_WRITE_IMM:
				x->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				x->imm_data = htonl(w->imm);
				break;
			}
			if (w->opcode != BE_XWR_SEND) {
				x->wr.rdma.remote_addr = w->remote_addr;
				x->wr.rdma.rkey = w->rkey;
			}
			batch[n] = w;
		}
		if (n) {
			iw[n - 1].next = NULL;
			ret = ibv_post_send(vc->qp, iw, &ibad);
			posted = ret ? (int)(ibad - iw) : n;
			for (i = 0; i < posted; i++)
				verbs_sq_push(vc, batch[i]);
			if (ret) {
				if (bad)
					*bad = batch[posted];
				return -ret;
			}
		}
		if (err) {
			if (bad)
				*bad = w;
			return err;
		}
	}
	return 0;
}

/*
 * Keep copies of the chain @wr on @vc until be__verbs_release_held(): the
 * acceptor before the RTU (cm.c). Checked as verbs_post_now() would, and
 * at most max_send_wr held (-ENOMEM), so that all of them fit the empty
 * send queue at release. Ownership: copies the WR and its scatter list,
 * and the data of an INLINE WR (its buffer is free on return, as verbs
 * promises); the buffers of the others stay lent until their completion.
 */
static int verbs_hold(struct verbs_conn *vc, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct be_xsend_wr *w;
	int err = 0;

	for (w = wr; w; w = w->next) {
		struct verbs_held *h;
		size_t extra = (size_t)(w->num_sge > 0 ? w->num_sge : 0) * sizeof(struct be_xsge);
		uint64_t len = 0;
		int k;

		err = verbs_wr_check(vc, w);
		if (err)
			break;
		if (vc->nheld >= vc->max_send_wr) {
			err = -ENOMEM;
			break;
		}
		if (w->flags & BE_XWR_F_INLINE) {
			for (k = 0; k < w->num_sge; k++)
				len += w->sg_list[k].length;
			extra = sizeof(struct be_xsge) + (size_t)len; /* <= max_inline */
		}
		h = malloc(sizeof(*h) + extra);
		if (!h) {
			err = -ENOMEM;
			break;
		}
		h->next = NULL;
		h->wr = *w;
		h->wr.next = NULL;
		h->wr.sg_list = h->sge;
		if (w->flags & BE_XWR_F_INLINE) {
			uint8_t *p = (uint8_t *)(h->sge + 1);

			for (k = 0; k < w->num_sge; k++) {
				memcpy(p, (const void *)(uintptr_t)w->sg_list[k].addr,
				       w->sg_list[k].length);
				p += w->sg_list[k].length;
			}
			h->sge[0].addr = (uintptr_t)(h->sge + 1);
			h->sge[0].length = (uint32_t)len;
			h->sge[0].lkey = w->num_sge ? w->sg_list[0].lkey : 0;
			h->wr.num_sge = len ? 1 : 0;
		} else if (w->num_sge > 0) {
			memcpy(h->sge, w->sg_list, (size_t)w->num_sge * sizeof(*h->sge));
		}
		*vc->held_tail = h;
		vc->held_tail = &h->next;
		if (!vc->nheld++)
			be__list_add_head(&vc->send_cq->holding, &vc->hold_link);
	}
	if (err && bad)
		*bad = w;
	return err;
}

/* Forget @vc's held WRs without completing them (its QP is being
 * destroyed: no completion names it again). */
static void verbs_held_free(struct verbs_conn *vc)
{
	struct verbs_held *h;

	while ((h = vc->held)) {
		vc->held = h->next;
		free(h);
	}
	vc->held_tail = &vc->held;
	if (vc->nheld) {
		be__list_del_init(&vc->hold_link);
		vc->nheld = 0;
	}
	vc->hold = 0;
}

void be__verbs_release_held(struct verbs_conn *vc)
{
	struct be_xsend_wr *first = NULL, **tail = &first, *bad = NULL, *w;
	struct verbs_held *h;
	int ret;

	if (!vc->hold)
		return;
	vc->hold = 0;
	if (!vc->nheld || !vc->qp) {
		verbs_held_free(vc);
		return;
	}
	for (h = vc->held; h; h = h->next) {
		*tail = &h->wr;
		tail = &h->wr.next;
	}
	ret = verbs_post_now(vc, first, &bad);
	if (ret) {
		/* Cannot happen (checked, and the queue was empty); if it
		 * does, the WRs not posted still complete, as flushed. */
		be__verbs_conn_failed(vc, ret, "posting the sends held until the RTU");
		for (w = bad; w; w = w->next) {
			struct be_xwc wc;

			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w->wr_id;
			wc.status = BE_XWC_WR_FLUSH_ERR;
			wc.opcode = w->opcode == BE_XWR_SEND    ? BE_XWC_SEND :
				    w->opcode == BE_XWR_WRITE ? BE_XWC_WRITE :
								BE_XWC_WRITE_IMM;
			wc.conn = &vc->base;
			verbs_bl_push(vc->send_cq, &wc);
		}
	}
	verbs_held_free(vc);
}

static int verbs_post_send(struct be_xconn *c, struct be_xsend_wr *wr, struct be_xsend_wr **bad)
{
	struct verbs_conn *vc = to_vconn(c);

	/* A conn in error still takes WRs: the QP (in the error state)
	 * flushes them in order, as the contract asks. */
	if (!vc->qp || !vc->was_established) {
		if (bad)
			*bad = wr;
		return -ENOTCONN;
	}
	if (BE_UNLIKELY(vc->hold)) {
		/* The acceptor before the RTU. It may be in already. */
		if (vc->base.evch)
			be__verbs_evch_pump(to_vevch(vc->base.evch));
		if (vc->hold)
			return verbs_hold(vc, wr, bad);
	}
	return verbs_post_now(vc, wr, bad);
}

const struct be_xport_ops be__xport_verbs_ops = {
	.name = "verbs",
	.dev_open = verbs_dev_open,
	.dev_close = verbs_dev_close,
	.dev_query = verbs_dev_query,
	.dev_reg_hook = verbs_dev_reg_hook,
	.evch_create = be__verbs_evch_create,
	.evch_destroy = be__verbs_evch_destroy,
	.evch_fd = be__verbs_evch_fd,
	.evch_get = be__verbs_evch_get,
	.cq_create = verbs_cq_create,
	.cq_destroy = verbs_cq_destroy,
	.cq_poll = verbs_cq_poll,
	.cq_fd = verbs_cq_fd,
	.cq_arm = verbs_cq_arm,
	.cq_ack = verbs_cq_ack,
	.srq_create = verbs_srq_create,
	.srq_destroy = verbs_srq_destroy,
	.srq_post_recv = verbs_srq_post_recv,
	.srq_arm_limit = verbs_srq_arm_limit,
	.listen = be__verbs_listen,
	.listener_addr = be__verbs_listener_addr,
	.listener_close = be__verbs_listener_close,
	.connect = be__verbs_connect,
	.accept = be__verbs_accept,
	.reject = be__verbs_reject,
	.disconnect = be__verbs_disconnect,
	.conn_destroy = be__verbs_conn_destroy,
	.post_send = verbs_post_send,
	.conn_peer_addr = be__verbs_conn_peer_addr,
	.addr_canon = be__inet_canon,
};
