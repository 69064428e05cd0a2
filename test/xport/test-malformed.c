/*
 * Check that hostile input over raw TCP sockets never crashes the tcp
 * transport or touches memory: garbage instead of a HELLO, a HELLO with a
 * wrong version or oversized private data, a HELLO cut short, and, on an
 * accepted conn, frames with a bad magic, an unknown type, a huge length,
 * an ack of frames never sent, a WRITE with a bad rkey (answered by a NAK
 * with the access status), and rounds of random headers. Pre-handshake
 * garbage is dropped without an event; garbage on an established conn
 * ends in DISCONNECTED. On the connecting side, an acceptor answering
 * garbage, oversized private data or a hang-up gives UNREACHABLE, and
 * frames arriving right behind the ACCEPT are handled (good or bad).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xtest.h"
#include "xport/tcp/tcp.h"

static int raw_connect(const char *addr)
{
	struct sockaddr_in sin;
	char host[64];
	const char *colon = strrchr(addr, ':');
	int fd;

	ASSERT(colon && (size_t)(colon - addr) < sizeof(host));
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	ASSERT(inet_pton(AF_INET, host, &sin.sin_addr) == 1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT(fd >= 0);
	ASSERT(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	return fd;
}

static void raw_send(int fd, const void *buf, size_t len)
{
	ASSERT((size_t)send(fd, buf, len, MSG_NOSIGNAL) == len);
}

static void raw_frame(int fd, uint8_t type, uint32_t len, uint32_t rkey, uint64_t addr,
		      uint32_t ack, const void *payload, size_t plen)
{
	struct tcp_hdr h = { .magic = TCP_MAGIC, .type = type, .len = len, .rkey = rkey,
			     .addr = addr, .ack = ack };
	uint8_t b[TCP_HDR_LEN];

	be__tcp_hdr_pack(b, &h);
	raw_send(fd, b, sizeof(b));
	if (plen)
		raw_send(fd, payload, plen);
}

/* Read until EOF/reset, making progress; returns the bytes read. */
static size_t raw_drain(struct xt *t, int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;
	int i;

	for (i = 0; i < 200000; i++) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		xt_progress(t);
		if (poll(&p, 1, 1) <= 0)
			continue;
		n = recv(fd, buf + got, cap - got, MSG_DONTWAIT);
		if (n <= 0)
			return got;
		got += (size_t)n;
		if (got == cap)
			return got;
	}
	TEST_FAIL("raw socket never closed");
	return got;
}

/* A raw client that completed the handshake; returns its fd and the conn. */
static int raw_established(struct xt *t, struct xt_side *srv, const char *addr,
			   struct be_xconn **conn)
{
	struct be_xconn_attr sa = xt_attr(srv, 16);
	struct be_xevent ev;
	uint8_t buf[TCP_HDR_LEN];
	struct tcp_hdr h;
	size_t got = 0;
	int fd = raw_connect(addr);

	raw_frame(fd, TCP_F_HELLO, 0, 0, TCP_PROTO_VERSION, 0, NULL, 0);
	xt_expect_event(t, srv, BE_XEV_CONNECT_REQUEST, &ev);
	*conn = ev.conn;
	ASSERT_OK(t->ops->accept(ev.conn, &sa, NULL, 0));
	xt_expect_event(t, srv, BE_XEV_ESTABLISHED, &ev);
	while (got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);

		ASSERT(n > 0);
		got += (size_t)n;
	}
	be__tcp_hdr_unpack(&h, buf);
	ASSERT_EQ(h.type, TCP_F_ACCEPT);
	return fd;
}

static uint8_t big_payload[100];

/* A raw listening socket on 127.0.0.1; its address into @addr. */
static int raw_listen(char *addr, size_t len)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ASSERT(fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ASSERT(listen(fd, 8) == 0);
	ASSERT(getsockname(fd, (struct sockaddr *)&sin, &sl) == 0);
	snprintf(addr, len, "127.0.0.1:%u", ntohs(sin.sin_port));
	return fd;
}

/* Accept the transport's connect on @lfd and read its HELLO. */
static int raw_accept_hello(struct xt *t, int lfd)
{
	uint8_t b[TCP_HDR_LEN];
	struct tcp_hdr h;
	size_t got = 0;
	int i, fd = -1;

	for (i = 0; i < 100000 && fd < 0; i++) {
		struct pollfd p = { lfd, POLLIN, 0 };

		xt_progress(t);
		if (poll(&p, 1, 1) > 0)
			fd = accept(lfd, NULL, NULL);
	}
	ASSERT(fd >= 0);
	for (i = 0; i < 100000 && got < sizeof(b); i++) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		xt_progress(t);
		if (poll(&p, 1, 1) <= 0)
			continue;
		n = recv(fd, b + got, sizeof(b) - got, 0);
		ASSERT(n > 0);
		got += (size_t)n;
	}
	ASSERT_EQ(got, sizeof(b));
	be__tcp_hdr_unpack(&h, b);
	ASSERT_EQ(h.type, TCP_F_HELLO);
	ASSERT_EQ(h.len, 0);
	return fd;
}

/* The transport connects to a hostile acceptor that answers @answer. */
static void hostile_acceptor(struct xt *t, struct xt_side *cli)
{
	struct be_xconn_attr ca = xt_attr(cli, 4);
	struct be_xconn *c;
	struct be_xevent ev;
	struct be_xwc wc;
	char addr[BE_XPORT_ADDR_MAX];
	int lfd = raw_listen(addr, sizeof(addr)), fd, k;
	uint8_t junk[TCP_HDR_LEN];

	for (k = 0; k < 5; k++) {
		ASSERT_OK(t->ops->connect(cli->ch, addr, &ca, NULL, 0, &c));
		fd = raw_accept_hello(t, lfd);
		switch (k) {
		case 0: /* garbage instead of an answer */
			memset(junk, 0x5C, sizeof(junk));
			raw_send(fd, junk, sizeof(junk));
			xt_expect_event(t, cli, BE_XEV_UNREACHABLE, &ev);
			ASSERT_EQ(ev.status, -EPROTO);
			break;
		case 1: /* ACCEPT with too much private data */
			memset(big_payload, 0, sizeof(big_payload));
			raw_frame(fd, TCP_F_ACCEPT, sizeof(big_payload), 0, 0, 0, big_payload,
				  sizeof(big_payload));
			xt_expect_event(t, cli, BE_XEV_UNREACHABLE, &ev);
			ASSERT_EQ(ev.status, -EPROTO);
			break;
		case 2: /* hang-up instead of an answer */
			close(fd);
			fd = -1;
			xt_expect_event(t, cli, BE_XEV_UNREACHABLE, &ev);
			ASSERT(ev.status < 0);
			break;
		case 3: /* ACCEPT, then at once a valid SEND (read together) */
			raw_frame(fd, TCP_F_ACCEPT, 2, 0, 0, 0, "ok", 2);
			raw_frame(fd, TCP_F_SEND, 5, 0, 0, 0, "hello", 5);
			xt_expect_event(t, cli, BE_XEV_ESTABLISHED, &ev);
			ASSERT_EQ(ev.priv_len, 2);
			xt_wait_wc(t, cli, &wc, 1);
			ASSERT_EQ(wc.status, BE_XWC_SUCCESS);
			ASSERT_EQ(wc.opcode, BE_XWC_RECV);
			ASSERT_EQ(wc.byte_len, 5);
			ASSERT(memcmp((void *)(uintptr_t)wc.wr_id, "hello", 5) == 0);
			ASSERT_PTR_EQ(wc.conn, c);
			break;
		case 4: /* ACCEPT, then at once garbage */
			raw_frame(fd, TCP_F_ACCEPT, 0, 0, 0, 0, NULL, 0);
			memset(junk, 0xC5, sizeof(junk));
			raw_send(fd, junk, sizeof(junk));
			xt_expect_event(t, cli, BE_XEV_ESTABLISHED, &ev);
			xt_expect_event(t, cli, BE_XEV_DISCONNECTED, &ev);
			ASSERT_EQ(ev.status, -EPROTO);
			break;
		}
		t->ops->conn_destroy(c);
		if (fd >= 0)
			close(fd);
	}
	close(lfd);
}

static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	return test_rand(&rnd_state);
}

int main(int argc, char **argv)
{
	struct xt t;
	struct xt_side srv;
	struct be_xlistener *l;
	struct be_xconn *c;
	struct be_xevent ev;
	char addr[BE_XPORT_ADDR_MAX];
	uint8_t buf[4096], big[100], tail[64], *target, *snap, *rbase;
	size_t rlen;
	uint32_t rkey;
	struct tcp_hdr h;
	int fd, i;

	xt_init(&t, argc, argv);
	if (strcmp(t.transport, "tcp") != 0)
		return 77;
	xt_side_init(&t, &srv, 64, 16);
	xt_post_recvs(&t, &srv, 4, 64);
	l = xt_listen(&t, &srv);
	ASSERT_OK(t.ops->listener_addr(l, addr, sizeof(addr)));
	target = xt_alloc(&t, 4096);
	xt_fill(target, 4096, 1);
	snap = malloc(4096);
	ASSERT(snap);
	memcpy(snap, target, 4096);

	/* Pre-handshake garbage: closed, no event. */
	fd = raw_connect(addr);
	memset(buf, 0xAB, 64);
	raw_send(fd, buf, 64);
	raw_drain(&t, fd, buf, sizeof(buf));
	close(fd);
	/* Wrong version. */
	fd = raw_connect(addr);
	raw_frame(fd, TCP_F_HELLO, 0, 0, 99, 0, NULL, 0);
	raw_drain(&t, fd, buf, sizeof(buf));
	close(fd);
	/* Oversized private data. */
	fd = raw_connect(addr);
	memset(big, 1, sizeof(big));
	raw_frame(fd, TCP_F_HELLO, sizeof(big), 0, TCP_PROTO_VERSION, 0, big, sizeof(big));
	raw_drain(&t, fd, buf, sizeof(buf));
	close(fd);
	/* HELLO cut short, then hang-up. */
	fd = raw_connect(addr);
	raw_send(fd, "BET1\x01", 5);
	xt_spin(&t, 10);
	close(fd);
	/* Something other than HELLO. */
	fd = raw_connect(addr);
	raw_frame(fd, TCP_F_WRITE, 4, 1, 0, 0, "abcd", 4);
	raw_drain(&t, fd, buf, sizeof(buf));
	close(fd);
	xt_spin(&t, 10);
	ASSERT_EQ(srv.nev, 0);

	/* Established, then a WRITE with a bad rkey: a NAK comes back. */
	fd = raw_established(&t, &srv, addr, &c);
	raw_frame(fd, TCP_F_WRITE, 16, xt_grant(&t, c, target) ^ 0x1234,
		  (uint64_t)(uintptr_t)target, 0, buf, 16);
	ASSERT_GE(raw_drain(&t, fd, buf, sizeof(buf)), TCP_HDR_LEN);
	be__tcp_hdr_unpack(&h, buf);
	ASSERT_EQ(h.type, TCP_F_NAK);
	ASSERT_EQ(h.status, TCP_NAK_ACCESS);
	ASSERT_EQ(h.ack, 0);
	close(fd);
	xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
	ASSERT_PTR_EQ(ev.conn, c);
	t.ops->conn_destroy(c);

	/* A valid WRITE, then one past the end of the registered region:
	 * the first lands only. */
	fd = raw_established(&t, &srv, addr, &c);
	memset(buf, 0x77, 64);
	rkey = xt_grant(&t, c, target);
	raw_frame(fd, TCP_F_WRITE, 8, rkey, (uint64_t)(uintptr_t)target, 0, buf, 8);
	xt_region(&t, target, &rbase, &rlen);
	memcpy(tail, rbase + rlen - sizeof(tail), sizeof(tail));
	raw_frame(fd, TCP_F_WRITE, 64, rkey,
		  (uint64_t)(uintptr_t)rbase + rlen - 32, 0, buf, 64);
	ASSERT_GE(raw_drain(&t, fd, buf, sizeof(buf)), TCP_HDR_LEN);
	be__tcp_hdr_unpack(&h, buf);
	/* An ACK may precede the NAK; the NAK says one frame was placed. */
	if (h.type == TCP_F_ACK)
		be__tcp_hdr_unpack(&h, buf + TCP_HDR_LEN);
	ASSERT_EQ(h.type, TCP_F_NAK);
	ASSERT_EQ(h.ack, 1);
	memset(snap, 0x77, 8);
	ASSERT(memcmp(target, snap, 4096) == 0);
	ASSERT(memcmp(rbase + rlen - sizeof(tail), tail, sizeof(tail)) == 0);
	close(fd);
	xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
	t.ops->conn_destroy(c);

	/* Malformed frames, each on its own conn. */
	for (i = 0; i < 5; i++) {
		struct tcp_hdr m = { .magic = TCP_MAGIC, .type = TCP_F_SEND };
		uint8_t b[TCP_HDR_LEN];

		switch (i) {
		case 0: m.magic = 0xDEADBEEF; break;
		case 1: m.type = 200; break;
		case 2: m.len = 0xFFFFFFFFu; break;
		case 3: m.type = TCP_F_ACK; m.ack = 5; break;  /* acks nothing we sent */
		case 4: m.type = TCP_F_HELLO; break;           /* handshake twice */
		}
		fd = raw_established(&t, &srv, addr, &c);
		be__tcp_hdr_pack(b, &m);
		raw_send(fd, b, sizeof(b));
		raw_drain(&t, fd, buf, sizeof(buf));
		close(fd);
		xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
		ASSERT_PTR_EQ(ev.conn, c);
		ASSERT(ev.status < 0);
		t.ops->conn_destroy(c);
	}

	/* Random headers with the right magic, and random bytes. */
	for (i = 0; i < 200; i++) {
		uint8_t b[TCP_HDR_LEN * 4];
		size_t k;

		fd = raw_established(&t, &srv, addr, &c);
		for (k = 0; k < sizeof(b); k++)
			b[k] = (uint8_t)rnd();
		if (i % 2) {
			struct tcp_hdr m;

			m.magic = TCP_MAGIC;
			m.type = (uint8_t)(rnd() % 12);
			m.status = (uint8_t)(rnd() % 3 == 0 ? rnd() : 0);
			m.rsvd = 0;
			m.len = (uint32_t)(rnd() % 3 == 0 ? rnd() : rnd() % 200);
			m.rkey = rnd() % 2 ? xt_grant(&t, c, target) : (uint32_t)rnd();
			m.addr = rnd() % 2 ? (uint64_t)(uintptr_t)target + rnd() % 8192 - 4096 :
					     rnd();
			m.imm = (uint32_t)rnd();
			m.ack = rnd() % 2 ? 0 : (uint32_t)rnd();
			be__tcp_hdr_pack(b, &m);
		}
		raw_send(fd, b, (size_t)(rnd() % sizeof(b)) + 1);
		xt_spin(&t, 1);
		close(fd);
		xt_expect_event(&t, &srv, BE_XEV_DISCONNECTED, &ev);
		ASSERT_PTR_EQ(ev.conn, c);
		t.ops->conn_destroy(c);
		srv.nwc = 0; /* receives the fuzz may have filled (or failed) */
	}

	/* The connecting side against a hostile acceptor. */
	{
		struct xt_side cli;

		xt_side_init(&t, &cli, 64, 4);
		xt_post_recvs(&t, &cli, 2, 64);
		hostile_acceptor(&t, &cli);
		xt_side_fini(&t, &cli);
	}

	free(snap);
	t.ops->listener_close(l);
	xt_side_fini(&t, &srv);
	xt_fini(&t);
	return 0;
}
