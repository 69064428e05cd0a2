/*
 * dev.c - the shm device: registered regions and their announcement.
 *
 * Model. A device owns a table of SHM_MAX_REGIONS region slots. bemalloc
 * registers each block (a memfd range) through the reg hook, from any
 * thread, with its pool lock held; the slot number and a generation make
 * the key (lkey == rkey). The data path validates local keys without a
 * lock: a slot's key is published last with release on registration and
 * cleared first on deregistration, and a reader re-checks the key after
 * reading the range (a seqlock whose sequence is the key).
 *
 * Peers learn of regions over each connection's socket: at connect time a
 * snapshot (be__shm_push_attach()), then every registration and
 * deregistration is pushed synchronously to every connection on the push
 * list before reg()/dereg() returns. So by the time this process can hand
 * an rkey to a peer (in a later message), the peer's socket already holds
 * the region's fd, and a peer that meets an unknown rkey drains its socket
 * before failing the WR. All of this runs under dev->lock, which orders the
 * messages on every socket like the table changes.
 *
 * Limits: SHM_MAX_REGIONS live regions per device. A push that cannot be
 * written within a second (a peer that stopped reading its socket) marks
 * that connection failed; its worker puts it in error.
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
	be__list_init(&d->push);
	d->base.alloc_dev = -1;
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
	if (!be__list_empty(&d->push))
		be_log_warn("shm: device closed with connections alive");
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
	(void)d;
	out->has_thread_domain = 0;
	return 0;
}

size_t be__shm_msg_len(uint16_t type, uint16_t count)
{
	size_t h = offsetof(struct shm_msg, u);

	switch (type) {
	case SHM_MSG_REG_ADD:
		return h + (size_t)count * sizeof(struct shm_msg_reg);
	case SHM_MSG_REG_DEL:
		return h + (size_t)count * sizeof(uint32_t);
	case SHM_MSG_BYE:
		return h;
	default:
		return sizeof(struct shm_msg);
	}
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
		char buf[CMSG_SPACE(sizeof(int) * SHM_REG_BATCH)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	uint64_t deadline = 0;
	ssize_t n;

	if (nfds > SHM_REG_BATCH)
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
 * The push queue. Each conn on the push list has a queue of region keys to
 * announce (add or delete), in table order. An entry is counted in the
 * shared ctl's regs_queued as soon as it is queued; the peer counts what it
 * handled (regs_seen) and, before a WRITE, drains its socket while the two
 * differ, deferring the WR if entries are still queued here. The queue is
 * flushed without blocking: at (de)registration, at attach time, and by the
 * conn's worker (cq_poll, evch_get) while the socket was full.
 */
#define SHM_PQ_MAX (1u << 20)

static int dev_pq_add(struct shm_conn *c, uint32_t key, bool del)
{
	if (c->pq_len == c->pq_cap) {
		uint32_t ncap = c->pq_cap ? c->pq_cap * 2 : 64;
		struct shm_push *n;

		if (ncap > SHM_PQ_MAX)
			return -ENOSPC;
		n = realloc(c->pq, sizeof(*n) * ncap);
		if (!n)
			return -ENOMEM;
		c->pq = n;
		c->pq_cap = ncap;
	}
	c->pq[c->pq_len].key = key;
	c->pq[c->pq_len].del = del;
	c->pq_len++;
	__atomic_add_fetch(&c->rx_ctl->regs_queued, 1, __ATOMIC_RELEASE);
	return 0;
}

static void dev_push_fail(struct shm_conn *c, int err)
{
	be_log_err("shm: cannot announce a region to peer pid %d: %s", (int)c->peer_pid,
		   strerror(-err));
	__atomic_store_n(&c->push_failed, 1, __ATOMIC_RELEASE);
}

static bool dev_key_live(struct shm_dev *d, uint32_t key)
{
	uint32_t slot = SHM_KEY_SLOT(key);

	return slot < SHM_MAX_REGIONS && d->regions[slot].key == key;
}

/* Send as much of @c's queue as the socket takes. Caller holds dev->lock. */
static void dev_pq_flush_locked(struct shm_dev *d, struct shm_conn *c)
{
	uint32_t done = 0;

	while (done < c->pq_len) {
		struct shm_msg m;
		int fds[SHM_REG_BATCH];
		bool add = !c->pq[done].del && dev_key_live(d, c->pq[done].key);
		uint32_t n = 0, nfds = 0, k;
		int ret;

		memset(&m, 0, offsetof(struct shm_msg, u));
		m.magic = SHM_MSG_MAGIC;
		m.type = add ? SHM_MSG_REG_ADD : SHM_MSG_REG_DEL;
		/* A batch of adds of live regions, or of deletes (an add whose
		 * region is gone again is sent as a delete: counts must match). */
		while (done + n < c->pq_len && n < SHM_REG_BATCH) {
			struct shm_push *e = &c->pq[done + n];
			bool live_add = !e->del && dev_key_live(d, e->key);

			if (live_add != add)
				break;
			if (add) {
				struct shm_region *r = &d->regions[SHM_KEY_SLOT(e->key)];

				memset(&m.u.reg[n], 0, sizeof(m.u.reg[n]));
				m.u.reg[n].key = r->key;
				m.u.reg[n].addr = r->addr;
				m.u.reg[n].len = r->len;
				m.u.reg[n].off = r->off;
				/* bemalloc's blocks share one memfd: pass it once
				 * (fds in flight count against RLIMIT_NOFILE). */
				for (k = 0; k < nfds && fds[k] != r->fd; k++)
					;
				if (k == nfds)
					fds[nfds++] = r->fd;
				m.u.reg[n].fdi = k;
			} else {
				m.u.key[n] = e->key;
			}
			n++;
		}
		m.count = (uint16_t)n;
		ret = be__shm_sendmsg(c->fd, &m, be__shm_msg_len(m.type, m.count), fds,
				      add ? (int)nfds : 0, 0);
		/* Full socket, or too many fds in flight: the peer drains. */
		if (ret == -EAGAIN || ret == -ETOOMANYREFS)
			break;
		if (ret) {
			/* The peer is gone (or we are out of fds); the conn
			 * fails, so there is nothing left to keep in order. */
			dev_push_fail(c, ret);
			done = c->pq_len;
			break;
		}
		done += n;
	}
	if (done) {
		memmove(c->pq, c->pq + done, sizeof(*c->pq) * (c->pq_len - done));
		c->pq_len -= done;
	}
	__atomic_store_n(&c->push_pending, c->pq_len != 0, __ATOMIC_RELAXED);
}

/* The worker's part: flush what the socket did not take before. */
void be__shm_push_flush(struct shm_conn *c)
{
	struct shm_dev *d = c->dev;

	pthread_mutex_lock(&d->lock);
	if (be__list_linked(&c->push_link))
		dev_pq_flush_locked(d, c);
	pthread_mutex_unlock(&d->lock);
}

/*
 * be__shm_push_attach() - put @c on the device's push list and announce
 * every registered region to it. From now on every (de)registration is
 * announced to @c too, after these. Returns 0 or -errno (then @c is not on
 * the list).
 */
int be__shm_push_attach(struct shm_conn *c)
{
	struct shm_dev *d = c->dev;
	uint32_t i;
	int ret = 0;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < d->nregions_hi && !ret; i++)
		if (d->regions[i].key)
			ret = dev_pq_add(c, d->regions[i].key, false);
	if (ret) {
		free(c->pq);
		c->pq = NULL;
		c->pq_len = c->pq_cap = 0;
	} else {
		be__list_add_head(&d->push, &c->push_link);
		dev_pq_flush_locked(d, c);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

void be__shm_push_detach(struct shm_conn *c)
{
	struct shm_dev *d = c->dev;

	pthread_mutex_lock(&d->lock);
	be__list_del_init(&c->push_link);
	free(c->pq);
	c->pq = NULL;
	c->pq_len = c->pq_cap = 0;
	__atomic_store_n(&c->push_pending, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
}

/* Announce the (de)registration of @key to every conn on the push list.
 * Caller holds dev->lock. */
static void dev_push_all_locked(struct shm_dev *d, uint32_t key, bool del)
{
	struct be__list *e;

	be__list_for_each(e, &d->push) {
		struct shm_conn *c = be__list_entry(e, struct shm_conn, push_link);
		int ret = dev_pq_add(c, key, del);

		if (ret)
			dev_push_fail(c, ret);
		else
			dev_pq_flush_locked(d, c);
	}
}

/*
 * dev_reg() - the reg hook: register [addr, addr+len) mapped from @fd at
 * @fd_offset. Borrows @fd until dereg. Runs under bemalloc's pool lock.
 */
static int dev_reg(void *dev, void *addr, size_t len, int fd, uint64_t fd_offset,
		   struct be_alloc_mr *out, char *err, size_t err_len)
{
	struct shm_dev *d = dev;
	struct shm_region *r = NULL;
	uint32_t i;

	if (!d || !addr || !len || !out || fd < 0 || (uint64_t)(uintptr_t)addr + len < len) {
		if (err && err_len)
			snprintf(err, err_len, "shm: bad registration (needs a memfd)");
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
	r->off = fd_offset;
	r->fd = fd;
	__atomic_store_n(&r->key, r->gen << SHM_KEY_SLOT_BITS | i, __ATOMIC_RELEASE);
	if (i >= d->nregions_hi)
		d->nregions_hi = i + 1;
	dev_push_all_locked(d, r->key, false);
	out->lkey = r->key;
	out->rkey = r->key;
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
	dev_push_all_locked(d, mr->lkey, true);
	r->fd = -1;
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
