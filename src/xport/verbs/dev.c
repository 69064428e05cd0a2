/*
 * dev.c - verbs devices: opening one, its ports, memory registration, and
 * the device's async events.
 *
 * Device. dev_open() finds the device by name with ibv_get_device_list()
 * and opens its own context and PD. rdma_cm binds its cm_ids to contexts
 * of its own (shared by the whole process and inherited across fork()), so
 * QPs are made on ours with ibv_create_qp() (data.c) and moved through
 * INIT, RTR and RTS with the attributes rdma_init_qp_attr() gives (cm.c):
 * rdma_cm still resolves the address, picks the port and the RoCE v2 GID,
 * and carries the handshake. A cm_id bound to another device is refused.
 *
 * Registration. bemalloc registers every block with ibv_reg_mr() on the
 * device's PD (local write and window binding where the device has
 * type-2B memory windows, which grants bind, data.c; else local and
 * remote write: docs/SECURITY.md, "Remote keys", has what that exposes)
 * and the lkey goes into
 * the device's table, so that a receive with a bad lkey is refused when it
 * is posted rather than failing when a message arrives. A device a forked
 * child inherited registers nothing: the child opens its own.
 *
 * Which device. A context opens a verbs_dev on every device (dev_name()
 * lists them; engine/ctx_dev.c) and uses for each address the one
 * addr_dev() names before anything is created on it, the one rdma_cm
 * will pick: for an address to listen on, the device whose netdev holds
 * it; for an address to connect to, the device holding the source
 * address of the kernel's route to it (the address itself when it is
 * local, as in the Soft-RoCE guest, where rxe0 and rxe1 both loop back).
 * It asks the kernel's tables and sysfs, not rdma_cm: it runs on the
 * worker's thread before every connect (see be__verbs_addr_dev()).
 *
 * Async events. The device's async fd is read by whichever thread calls
 * evch_get first (be__verbs_async_pump()): an SRQ limit goes to the event
 * channel of the SRQ's worker, a port change to every event channel of
 * the device, a fatal QP error to its conn's channel, where the conn's
 * owner turns it into DISCONNECTED (cm.c).
 *
 * Threads: the list of open devices and each device's event channels are
 * guarded by be__verbs_lock; registration runs under bemalloc's pool lock
 * and takes mr_lock for writing, lookups take it for reading.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "xport/addr.h"
#include "xport/verbs/verbs.h"

#define VERBS_SGE_MAX 8      /* send SGEs per WR we ask for */

static int verbs_probe_mw(struct verbs_dev *dev);

pthread_mutex_t be__verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct be__list verbs_devs = BE__LIST_INIT(verbs_devs); /* verbs_lock */

int be__verbs_set_nonblock(int fd)
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
	char path[512]; /* the prefix, a device name of up to 255 bytes, the rest */
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

int be__verbs_dev_open(const char *name, struct be_xdev **out)
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
	ret = be__verbs_set_nonblock(ctx->async_fd);
	if (ret) {
		be_log_err("verbs: %s: async fd: %s", want, strerror(-ret));
		goto err_pd;
	}
	dev->max_inline = verbs_probe_inline(ctx, dev->pd);
	dev->max_sge = (uint32_t)BE_MIN(dev->attr.max_sge, VERBS_SGE_MAX);
	dev->has_td = verbs_probe_td(ctx);
	dev->has_mw = verbs_probe_mw(dev);
	be_log_info("verbs: opened %s: %d port(s), max_inline %u, thread domains %s, "
		    "grants %s", want, dev->num_ports, dev->max_inline,
		    dev->has_td ? "yes" : "no (plain PD)",
		    dev->has_mw ? "type-2 memory windows" : "no (block rkeys)");

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

void be__verbs_dev_close(struct be_xdev *d)
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

int be__verbs_dev_query(struct be_xdev *d, struct be_xdev_attr *out)
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
	out->max_cqe = be__verbs_cq_max(dev); /* less the windows' room (cq.c) */
	out->has_thread_domain = dev->has_td;
	return 0;
}

int be__verbs_dev_name(int i, char *buf, size_t len)
{
	struct ibv_device **list;
	int n, ret = -ENODEV;

	list = ibv_get_device_list(&n);
	if (!list)
		return errno ? -errno : -ENODEV;
	if (i >= 0 && i < n) {
		snprintf(buf, len, "%s", ibv_get_device_name(list[i]));
		ret = 0;
	}
	ibv_free_device_list(list);
	return ret;
}

/* Is @sa the wildcard address (listen on every device)? */
static bool verbs_addr_any(const struct sockaddr_storage *ss)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	return !memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, &any6, sizeof(any6));
}

/*
 * The local address a connection to @ss leaves from: a UDP socket's
 * connect() looks up the route and sends nothing. 0, or -errno when there
 * is no route (rdma_cm will say so when it resolves the address).
 */
static int verbs_route_src(struct sockaddr_storage *ss, socklen_t sl)
{
	struct sockaddr_storage src;
	socklen_t srcl = sizeof(src);
	int fd, ret = 0;

	fd = socket(ss->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)ss, sl) ||
	    getsockname(fd, (struct sockaddr *)&src, &srcl))
		ret = -errno;
	close(fd);
	if (!ret)
		*ss = src;
	return ret;
}

/* The network interface that holds the local address @ss (its name into
 * @ifname), from getifaddrs(): a netlink dump, no RDMA call. 0 or -ENOENT. */
static int verbs_addr_ifname(const struct sockaddr_storage *ss, char *ifname, size_t len)
{
	struct ifaddrs *ifa, *i;
	int ret = -ENOENT;

	if (getifaddrs(&ifa))
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		const struct sockaddr *a = i->ifa_addr;

		if (!a || a->sa_family != ss->ss_family || !i->ifa_name)
			continue;
		if (a->sa_family == AF_INET ?
			    ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
				    ((const struct sockaddr_in *)ss)->sin_addr.s_addr :
			    !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
				    &((const struct sockaddr_in6 *)ss)->sin6_addr,
				    sizeof(struct in6_addr))) {
			snprintf(ifname, len, "%s", i->ifa_name);
			ret = 0;
			break;
		}
	}
	freeifaddrs(ifa);
	return ret;
}

/* Does @ifname, or an interface it is stacked on (a VLAN's or a bond's
 * lower device, one level), carry port @port of RDMA device @dev? */
static bool verbs_port_on(const char *dev, int port, const char *ifname)
{
	char nd[64], path[320];
	struct dirent *d;
	bool on = false;
	DIR *dir;

	verbs_port_netdev(dev, port, nd, sizeof(nd));
	if (!nd[0])
		return false;
	if (!strcmp(nd, ifname))
		return true;
	snprintf(path, sizeof(path), "/sys/class/net/%s", ifname);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!on && (d = readdir(dir)))
		on = !strncmp(d->d_name, "lower_", 6) && !strcmp(d->d_name + 6, nd);
	closedir(dir);
	return on;
}

/*
 * The address-to-device lookup runs on the thread that connects (the
 * worker's, engine/ctx_dev.c), before every connect and listen, so it
 * must not wait: it asks only the kernel's routing table, the interface
 * list and sysfs, never rdma_cm or libibverbs. Before, a synchronous
 * cm_id bound to the address named the device; the first one in a
 * process initialised librdmacm and libibverbs (loading every provider
 * library), which held the worker for 0.7 to 2.4 s in the Soft-RoCE
 * guest, and each later one cost a cm_id's creation, bind and
 * destruction in the kernel. The result is the one rdma_cm's bind would
 * give: the device with a port on the interface that holds the address
 * (RoCE: the port's GIDs are the interface's addresses).
 */
int be__verbs_addr_dev(const char *addr, bool passive, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	char ifname[IF_NAMESIZE + 1];
	struct dirent *d;
	socklen_t sl;
	DIR *dir;
	int ret;

	if (!buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	ret = be__inet_resolve(addr, passive, &ss, &sl);
	if (ret)
		return ret;
	if (!passive && verbs_route_src(&ss, sl))
		return 0;
	if (verbs_addr_any(&ss) || verbs_addr_ifname(&ss, ifname, sizeof(ifname)))
		return 0;
	dir = opendir("/sys/class/infiniband");
	if (!dir)
		return 0;
	while (!buf[0] && (d = readdir(dir))) {
		int port;

		if (d->d_name[0] == '.')
			continue;
		for (port = 1; port <= BE_XPORT_MAX_PORTS && !buf[0]; port++)
			if (verbs_port_on(d->d_name, port, ifname))
				snprintf(buf, len, "%s", d->d_name);
	}
	closedir(dir);
	return 0;
}

/* ------------------------------------------------------ registration */

/*
 * Type-2B memory windows, what a grant binds (data.c): the device must say
 * so and allocate one. BE_VERBS_MW=0 turns them off (block rkeys, as on a
 * device without them: docs/SECURITY.md, "Remote keys", has what that
 * exposes), for measuring what windows cost.
 */
static int verbs_probe_mw(struct verbs_dev *dev)
{
	const char *env = getenv("BE_VERBS_MW");
	struct ibv_mw *mw;

	if (env && !strcmp(env, "0"))
		return 0;
	if (!(dev->attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) || dev->attr.max_mw <= 0)
		return 0;
	mw = ibv_alloc_mw(dev->pd, IBV_MW_TYPE_2);
	if (!mw)
		return 0;
	ibv_dealloc_mw(mw);
	return 1;
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
	/* No remote read: the core never posts an RDMA READ, and with it a
	 * block's rkey would also let a peer read the whole block. With
	 * windows, no remote access at all: a peer writes only through the
	 * window a grant binds over the block (MW_BIND; a window with remote
	 * write needs local write on its MR), and the block's own rkey,
	 * guessed or not, reaches nothing. */
	mr = ibv_reg_mr(dev->pd, addr, len,
			IBV_ACCESS_LOCAL_WRITE |
				(dev->has_mw ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE));
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

void be__verbs_dev_reg_hook(struct be_xdev *d, struct be_alloc_reg_hook *out)
{
	struct verbs_dev *dev = to_vdev(d);

	out->name = dev->name;
	out->reg = verbs_reg;
	out->dereg = verbs_dereg;
	out->dev = dev;
}

/* The registration holding [@addr, @addr+@len): a walk of the table, one
 * entry per bemalloc block (a grant's, once per large message). */
struct ibv_mr *be__verbs_mr_find(struct verbs_dev *dev, const void *addr, size_t len)
{
	struct ibv_mr *found = NULL;
	uint64_t a = (uintptr_t)addr, key, v;
	size_t pos = 0;

	pthread_rwlock_rdlock(&dev->mr_lock);
	while (be__verbs_map_next(&dev->mrs, &pos, &key, &v)) {
		struct ibv_mr *mr = (struct ibv_mr *)(uintptr_t)v;
		uint64_t start = (uintptr_t)mr->addr;

		if (a >= start && a - start <= mr->length && len <= mr->length - (a - start)) {
			found = mr;
			break;
		}
	}
	pthread_rwlock_unlock(&dev->mr_lock);
	return found;
}

/* Does @sge lie inside a region registered on @dev with its lkey? */
int be__verbs_lkey_ok(struct verbs_dev *dev, const struct be_xsge *sge)
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

/* ------------------------------------------------------ async events */

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

/*
 * be__verbs_srq_bind() - @srq's SRQ_LIMIT events go to @ch, the channel
 * of the first conn that uses it. One node of @ch's queue is reserved for
 * them (evq.h), so the event is not lost when memory is short: a worker
 * that missed it would never refill its SRQ. One is enough: the limit
 * fires once per arming, and the worker arms it again only after it took
 * the event (a second queued before that takes a fresh node or none).
 * Returns 0 or -ENOMEM (nothing changed). Takes verbs_lock.
 */
int be__verbs_srq_bind(struct verbs_srq *srq, struct verbs_evch *ch)
{
	int ret = 0;

	pthread_mutex_lock(&be__verbs_lock);
	if (!srq->evch) {
		ret = be__evq_reserve(&ch->c.evq, 1);
		if (!ret)
			srq->evch = ch;
	}
	pthread_mutex_unlock(&be__verbs_lock);
	return ret;
}

/* SRQ_LIMIT goes to the worker owning the SRQ: the evch of the first
 * conn that used it (from the node reserved there), if that channel still
 * exists; else to every evch. */
static void verbs_srq_event_locked(struct verbs_dev *dev, struct verbs_srq *srq,
				   const struct be_xevent *ev)
{
	if (srq->evch && verbs_each_evch_locked(NULL, verbs_is_evch, srq->evch)) {
		int ret = be__evq_push(&srq->evch->c.evq, ev, true);

		if (ret < 0)
			be_log_err("verbs: %s: out of memory queueing SRQ_LIMIT; lost", dev->name);
		else if (ret)
			be__wake_kick(srq->evch->c.wake.efd);
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

static int verbs_purge_srq(struct verbs_evch *ch, const void *srq)
{
	be__verbs_purge_locked(ch, NULL, srq);
	return 0;
}

/* Drop the queued events naming @srq from every event channel of @dev,
 * and the node its channel reserved for it (be__verbs_srq_bind()). */
void be__verbs_dev_purge_srq(struct verbs_dev *dev, const struct be_xsrq *srq)
{
	struct verbs_srq *vs = to_vsrq((struct be_xsrq *)srq);

	pthread_mutex_lock(&be__verbs_lock);
	verbs_each_evch_locked(dev->ctx, verbs_purge_srq, srq);
	/* A channel destroyed first took its reserve with it. */
	if (vs->evch && verbs_each_evch_locked(NULL, verbs_is_evch, vs->evch))
		be__evq_unreserve(&vs->evch->c.evq, 1);
	vs->evch = NULL;
	pthread_mutex_unlock(&be__verbs_lock);
}
