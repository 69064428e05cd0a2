/*
 * dev.c - the shm device: registered regions, for local keys.
 *
 * Model. A device owns a table of SHM_MAX_REGIONS region slots. bemalloc
 * registers each block through the reg hook, from any thread, with its
 * pool lock held; the slot number and a generation make the lkey. The
 * data path validates local keys without a lock: a slot's key is
 * published last with release on registration and cleared first on
 * deregistration, and a reader re-checks the key after reading the range
 * (a seqlock whose sequence is the key).
 *
 * Regions never leave this process: a peer's WRITEs reach only what a
 * conn granted (data.c), placed by this process. So the rkey of a
 * registration is 0, which names no grant.
 *
 * Limits: SHM_MAX_REGIONS live regions per device.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/common.h"
#include "util/log.h"
#include "xport/shm/shm.h"


int be__shm_dev_open(const char *name, struct be_xdev **out)
{
	struct shm_dev *d;
	uint64_t v;
	int ret;

	if (!out)
		return -EINVAL;
	if (name && *name && strcmp(name, "shm") && strcmp(name, "shm0"))
		return -ENODEV;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->regions = calloc(SHM_MAX_REGIONS, sizeof(*d->regions));
	if (!d->regions) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = pthread_mutex_init(&d->lock, NULL);
	if (ret) {
		ret = -ret;
		goto err_regions;
	}
	d->ring_size = SHM_DEFAULT_RING;
	if (be__env_size("BE_SHM_RING_SIZE", &v) == 1) {
		if (v < SHM_MIN_RING || v > SHM_MAX_RING || (v & (v - 1)))
			be_log_warn("shm: BE_SHM_RING_SIZE=%llu ignored (power of two, 64K..64M)",
				    (unsigned long long)v);
		else
			d->ring_size = (uint32_t)v;
	}
	d->base.ops = &be__xport_shm_ops;
	*out = &d->base;
	return 0;

err_regions:
	free(d->regions);
err_free:
	free(d);
	return ret;
}

void be__shm_dev_close(struct be_xdev *dev)
{
	struct shm_dev *d;

	if (!dev)
		return;
	d = to_sdev(dev);
	pthread_mutex_destroy(&d->lock);
	free(d->regions);
	free(d);
}

int be__shm_dev_query(struct be_xdev *dev, struct be_xdev_attr *out)
{
	struct shm_dev *d;

	if (!dev || !out)
		return -EINVAL;
	d = to_sdev(dev);
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "shm");
	snprintf(out->transport, sizeof(out->transport), "shm");
	out->num_ports = 1;
	out->port[0].up = 1;
	out->port[0].speed_mbps = SHM_SPEED_MBPS;
	out->port[0].mtu = SHM_MTU;
	out->max_inline = SHM_MAX_INLINE;
	out->max_sge = SHM_MAX_SGE;
	out->max_qp_wr = SHM_MAX_QP_WR;
	out->max_srq_wr = SHM_MAX_SRQ_WR;
	/* WRITEs may be up to 2 GiB; a SEND must fit a quarter of a ring. */
	out->max_msg_size = SHM_MAX_MSG;
	out->max_rx_alloc = BE_XASLOTS;
	(void)d;
	out->has_thread_domain = 0;
	return 0;
}

size_t be__shm_msg_len(uint16_t type, uint16_t count)
{
	(void)count;
	return type == SHM_MSG_BYE ? offsetof(struct shm_msg, u) : sizeof(struct shm_msg);
}

/*
 * be__shm_sendmsg() - send one message with @nfds descriptors, waiting up
 * to @wait_ms for socket space. Borrows @fds (the kernel dups them).
 * Returns 0 or -errno (-EPIPE/-ECONNRESET when the peer is gone).
 */
int be__shm_sendmsg(int fd, const struct shm_msg *m, size_t len, const int *fds, int nfds,
		    int wait_ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SHM_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	uint64_t deadline = 0;
	ssize_t n;

	if (nfds > SHM_MAX_FDS)
		return -EINVAL;
	if (nfds > 0) {
		struct cmsghdr *cm;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		uint64_t now;
		int left;

		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0)
			return -EMSGSIZE; /* cannot happen on SEQPACKET */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || wait_ms <= 0)
			return -errno;
		now = be__now_ns();
		if (!deadline)
			deadline = now + (uint64_t)wait_ms * 1000000ull;
		if (now >= deadline)
			return -ETIMEDOUT;
		left = (int)((deadline - now) / 1000000ull) + 1;
		if (poll(&p, 1, left) < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * dev_reg() - the reg hook: register [addr, addr+len) for local use (@fd,
 * @fd_offset unused: nothing is shared). Runs under bemalloc's pool lock.
 */
static int dev_reg(void *dev, void *addr, size_t len, int fd, uint64_t fd_offset,
		   struct be_alloc_mr *out, char *err, size_t err_len)
{
	struct shm_dev *d = dev;
	struct shm_region *r = NULL;
	uint32_t i;

	(void)fd;
	(void)fd_offset;
	if (!d || !addr || !len || !out || (uint64_t)(uintptr_t)addr + len < len) {
		if (err && err_len)
			snprintf(err, err_len, "shm: bad registration");
		return -EINVAL;
	}
	pthread_mutex_lock(&d->lock);
	for (i = 0; i < SHM_MAX_REGIONS; i++) {
		if (!d->regions[i].key) {
			r = &d->regions[i];
			break;
		}
	}
	if (!r) {
		pthread_mutex_unlock(&d->lock);
		if (err && err_len)
			snprintf(err, err_len, "shm: %u regions registered already",
				 SHM_MAX_REGIONS);
		return -ENOSPC;
	}
	r->gen = (r->gen + 1) & 0xffffu;
	if (!r->gen)
		r->gen = 1;
	/* Release: a reader that sees the new range also sees the slot's old
	 * key cleared, so its re-check of the key fails. */
	__atomic_store_n(&r->addr, (uint64_t)(uintptr_t)addr, __ATOMIC_RELEASE);
	__atomic_store_n(&r->len, (uint64_t)len, __ATOMIC_RELEASE);
	__atomic_store_n(&r->key, r->gen << SHM_KEY_SLOT_BITS | i, __ATOMIC_RELEASE);
	out->lkey = r->key;
	out->rkey = 0;
	out->handle = r;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

static void dev_dereg(void *dev, struct be_alloc_mr *mr)
{
	struct shm_dev *d = dev;
	struct shm_region *r;
	uint32_t slot;

	if (!d || !mr)
		return;
	slot = SHM_KEY_SLOT(mr->lkey);
	if (slot >= SHM_MAX_REGIONS)
		return;
	r = &d->regions[slot];
	pthread_mutex_lock(&d->lock);
	if (r->key != mr->lkey) {
		pthread_mutex_unlock(&d->lock);
		be_log_warn("shm: dereg of unknown key 0x%x", mr->lkey);
		return;
	}
	__atomic_store_n(&r->key, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&d->lock);
}

void be__shm_dev_reg_hook(struct be_xdev *dev, struct be_alloc_reg_hook *out)
{
	if (!out)
		return;
	out->name = "shm";
	out->reg = dev_reg;
	out->dereg = dev_dereg;
	out->dev = dev ? to_sdev(dev) : NULL;
}

/*
 * be__shm_local_check() - is [addr, addr+len) inside the region of @lkey?
 * Lock-free; see the model. Returns 0 or -EACCES.
 */
int be__shm_local_check(struct shm_dev *d, uint32_t lkey, uint64_t addr, uint64_t len)
{
	uint32_t slot = SHM_KEY_SLOT(lkey);
	struct shm_region *r;
	uint64_t ra, rl;

	if (slot >= SHM_MAX_REGIONS || !lkey)
		return -EACCES;
	r = &d->regions[slot];
	if (__atomic_load_n(&r->key, __ATOMIC_ACQUIRE) != lkey)
		return -EACCES;
	/* Acquire loads keep the key's re-read after them. */
	ra = __atomic_load_n(&r->addr, __ATOMIC_ACQUIRE);
	rl = __atomic_load_n(&r->len, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&r->key, __ATOMIC_RELAXED) != lkey)
		return -EACCES;
	if (addr < ra || addr - ra > rl || len > rl - (addr - ra))
		return -EACCES;
	return 0;
}
