/*
 * Check that a peer cannot kill us with SIGBUS through memory it hands
 * us: an shm conn maps nothing of a peer but the ring segment, sealed
 * against shrinking. A hostile acceptor, speaking the shm handshake by
 * hand (cm.c), announces an unsealed memfd the way peers once announced
 * their regions (REG_ADD, now a protocol error):
 * - in the handshake: the connect fails (UNREACHABLE, -EPROTO);
 * - once connected, then truncates it to nothing: the conn goes to error
 *   at once and the WRITE posted afterwards into that "region" touches
 *   nothing. When regions were announced and mapped, that WRITE died of
 *   SIGBUS.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "xtest.h"
#include "xport/shm/shm.h"

#define REGION_LEN (64u << 10)
#define HOSTILE_ADDR 0x7e0000000000ull /* any address: the peer's own */

static struct xt xt;
static const struct be_xport_ops *ops;

/* The hostile acceptor: a listener of the transport's naming, by hand. */
struct hostile {
	int lfd, fd;
	uint8_t *seg;       /* the connector's segment, mapped */
	size_t seg_len;
};

static void hostile_listen(struct hostile *h, const char *name)
{
	struct sockaddr_un sa;
	size_t n = strlen(name);
	socklen_t len;

	memset(h, 0, sizeof(*h));
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, "be-shm-", 7);
	memcpy(sa.sun_path + 8, name, n);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 8 + n);
	h->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ASSERT(h->lfd >= 0);
	ASSERT_OK(bind(h->lfd, (struct sockaddr *)&sa, len));
	ASSERT_OK(listen(h->lfd, 4));
}

/* Accept the connector and take its REQ (segment, eventfds). */
static void hostile_accept(struct hostile *h)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} cbuf;
	struct shm_msg m;
	struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
			     .msg_controllen = sizeof(cbuf.buf) };
	struct cmsghdr *cm;
	int fds[3], i;
	struct stat st;

	h->fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
	ASSERT(h->fd >= 0);
	ASSERT(recvmsg(h->fd, &mh, MSG_CMSG_CLOEXEC) > 0);
	ASSERT_EQ(m.type, SHM_MSG_REQ);
	cm = CMSG_FIRSTHDR(&mh);
	ASSERT(cm && cm->cmsg_type == SCM_RIGHTS);
	ASSERT_EQ((int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), 3);
	memcpy(fds, CMSG_DATA(cm), sizeof(fds));
	ASSERT_OK(fstat(fds[0], &st));
	h->seg_len = (size_t)st.st_size;
	h->seg = mmap(NULL, h->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	ASSERT(h->seg != MAP_FAILED);
	for (i = 0; i < 3; i++)
		close(fds[i]);
}

/* A region announcement as peers sent them: the header, then one entry
 * naming the message's fd. */
struct reg_add {
	uint32_t magic;
	uint16_t type;
	uint16_t count;
	uint32_t key;
	uint32_t fdi;
	uint64_t addr;
	uint64_t len;
	uint64_t off;
};

/* Announce one region of @fd, and count it where the owner used to
 * (offset 256 of the connector's control block), which made the
 * connector read its socket before its next WRITE. */
static void hostile_announce(struct hostile *h, uint32_t key, int fd)
{
	struct reg_add m = {
		.magic = SHM_MSG_MAGIC, .type = SHM_MSG_RETIRED_REG_ADD, .count = 1, .key = key,
		.addr = HOSTILE_ADDR, .len = REGION_LEN,
	};

	__atomic_add_fetch((uint32_t *)(void *)(h->seg + 256), 1, __ATOMIC_RELEASE);
	ASSERT_OK(be__shm_sendmsg(h->fd, (const struct shm_msg *)(const void *)&m, sizeof(m), &fd,
				  1, 1000));
}

static void hostile_acc(struct hostile *h)
{
	struct shm_msg m;
	int efd[2] = { eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC) };

	ASSERT(efd[0] >= 0 && efd[1] >= 0);
	memset(&m, 0, sizeof(m));
	m.magic = SHM_MSG_MAGIC;
	m.type = SHM_MSG_ACC;
	ASSERT_OK(be__shm_sendmsg(h->fd, &m, be__shm_msg_len(SHM_MSG_ACC, 0), efd, 2, 1000));
	close(efd[0]);
	close(efd[1]);
}

static void hostile_close(struct hostile *h)
{
	if (h->seg)
		munmap(h->seg, h->seg_len);
	close(h->fd);
	close(h->lfd);
}

/* An unsealed memfd of REGION_LEN bytes, mapped at *map. */
static int unsealed_memfd(uint8_t **map)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC);

	ASSERT(fd >= 0);
	ASSERT_OK(ftruncate(fd, REGION_LEN));
	*map = mmap(NULL, REGION_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT(*map != MAP_FAILED);
	return fd;
}

static struct be_xconn *connect_to(struct xt_side *a, const char *name)
{
	struct be_xconn_attr attr = xt_attr(a, 16);
	struct be_xconn *c = NULL;

	ASSERT_OK(ops->connect(a->ch, name, &attr, "hi", 2, &c));
	return c;
}

/* An unsealed memfd pushed on the live conn: error, and nothing is
 * touched after the peer truncated it. */
static void run_push(void)
{
	struct xt_side a;
	struct xt_mem src;
	struct hostile h;
	struct be_xevent ev;
	struct be_xwc wc[2];
	uint8_t *bad_map;
	int bad, got, n;
	char name[64];

	xt_side_init(&xt, &a, 64, 0);
	xt_mem_reg(&xt, &src, 4096);
	memset(src.p, 0x5a, 4096);
	snprintf(name, sizeof(name), "unsealed-push-%d", (int)getpid());
	hostile_listen(&h, name);
	a.conn = connect_to(&a, name);
	hostile_accept(&h);
	hostile_acc(&h);
	xt_side_expect(&a, BE_XEV_ESTABLISHED, &ev, NULL);

	/* The push: its socket message is there before the evch is read. */
	bad = unsealed_memfd(&bad_map);
	hostile_announce(&h, 2u << 16 | 2, bad);
	got = xt_side_event(&a, &ev, 2000, NULL);
	/* Now shrink it under whoever mapped it. */
	munmap(bad_map, REGION_LEN);
	ASSERT_OK(ftruncate(bad, 0));
	n = xt_mem_post(a.conn, BE_XWR_WRITE, &src, 0, 100, HOSTILE_ADDR, 2u << 16 | 2, 0,
			BE_XWR_F_SIGNALED, 2);
	/* Still alive: the region was refused, not mapped. */
	ASSERT(got == 1);
	ASSERT_EQ(ev.type, BE_XEV_DISCONNECTED);
	ASSERT_EQ(ev.status, -EPROTO);
	if (n == 0) {
		xt_side_wc(&a, wc, 1);
		ASSERT(wc[0].status != BE_XWC_SUCCESS);
	}
	ops->conn_destroy(a.conn);
	a.conn = NULL;
	hostile_close(&h);
	close(bad);
	xt_mem_unreg(&src);
	xt_side_fini(&xt, &a);
}

/* Unsealed memfd announced in the handshake: the connect fails. */
static void run_handshake(void)
{
	struct xt_side a;
	struct hostile h;
	struct be_xevent ev;
	uint8_t *map;
	int fd;
	char name[64];

	xt_side_init(&xt, &a, 64, 0);
	snprintf(name, sizeof(name), "unsealed-hs-%d", (int)getpid());
	hostile_listen(&h, name);
	a.conn = connect_to(&a, name);
	hostile_accept(&h);
	fd = unsealed_memfd(&map);
	hostile_announce(&h, 1u << 16 | 3, fd);
	hostile_acc(&h);
	xt_side_expect(&a, BE_XEV_UNREACHABLE, &ev, NULL);
	ASSERT_EQ(ev.status, -EPROTO);
	ops->conn_destroy(a.conn);
	a.conn = NULL;
	hostile_close(&h);
	munmap(map, REGION_LEN);
	close(fd);
	xt_side_fini(&xt, &a);
}

int main(int argc, char **argv)
{
	xt_init(&xt, argc, argv);
	ops = xt.ops;
	if (strcmp(xt.transport, "shm"))
		return 77;
	run_push();
	run_handshake();
	xt_fini(&xt);
	return 0;
}
