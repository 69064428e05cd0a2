/*
 * Check the threading contract: two workers, each on its own thread with
 * its own evch, cq and srq, exchange SENDs and WRITE_IMMs over one device
 * while a third thread keeps growing and shrinking bemalloc (huge
 * allocations register and deregister regions on the same device). Every
 * message arrives intact; run under TSan (label "threads") this also
 * checks the device's registration table for races.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "xtest.h"

#define NMSG 2000
#define MSZ 1024
#define INFLIGHT 8 /* SENDs the client has out at once */

static struct xt t;
static struct xt_side cli, srv;
static struct be_xconn *c, *s;
static uint32_t cdst_rkey; /* the client grants cdst to the server */
static uint8_t *cdst;
static atomic_int done, server_done;

static void post_recv(struct xt_side *sd, void *buf)
{
	xt_recv_one(sd, (uint64_t)(uintptr_t)buf, buf, MSZ, xt_lkey(&t, buf));
}

static void post(struct be_xconn *conn, enum be_xwr_opcode op, uint64_t id, void *buf,
		 uint64_t raddr, uint32_t imm)
{
	uint32_t rkey = op == BE_XWR_WRITE_IMM ? cdst_rkey : 0;
	int rc;

	while ((rc = xt_try_post(&t, conn, op, id, buf, MSZ, BE_XWR_F_SIGNALED, raddr, rkey,
				 imm)) != 0) {
		ASSERT_EQ(rc, -ENOMEM); /* queue full: let completions drain */
		usleep(10);
	}
}

/*
 * Client: SEND i to the server, which answers with WRITE_IMM i. SEND i
 * goes from slot i % INFLIGHT of its buffer: the slot is rewritten only
 * once the answer to SEND i - INFLIGHT arrived, so that SEND was read
 * and delivered (the device reads a posted buffer until then).
 */
static void *client(void *arg)
{
	uint8_t *buf = be_alloc((size_t)MSZ * INFLIGHT);
	struct be_xwc wc[16];
	int sent = 0, got = 0, acked = 0, i, n;

	(void)arg;
	ASSERT(buf);
	while (got < NMSG || acked < NMSG) {
		if (sent < NMSG && sent - got < INFLIGHT) {
			uint8_t *slot = buf + (size_t)(sent % INFLIGHT) * MSZ;

			memset(slot, sent & 0xff, MSZ);
			post(c, BE_XWR_SEND, (uint64_t)sent, slot, 0, 0);
			sent++;
		}
		n = t.ops->cq_poll(cli.cq, wc, 16);
		ASSERT_OK(n);
		for (i = 0; i < n; i++) {
			ASSERT_EQ(wc[i].status, BE_XWC_SUCCESS);
			if (wc[i].opcode == BE_XWC_RECV_IMM) {
				uint8_t *p = cdst + (size_t)(wc[i].imm % 16) * MSZ;

				ASSERT_EQ(wc[i].imm, got);
				ASSERT_EQ(p[0], (uint8_t)~(got & 0xff));
				ASSERT_EQ(p[MSZ - 1], (uint8_t)~(got & 0xff));
				post_recv(&cli, (void *)(uintptr_t)wc[i].wr_id);
				got++;
			} else {
				ASSERT_EQ(wc[i].opcode, BE_XWC_SEND);
				acked++;
			}
		}
	}
	/* A worker keeps polling while it has peers: the acks it owes for
	 * the last messages go out with that progress. */
	while (!atomic_load(&server_done))
		ASSERT_OK(t.ops->cq_poll(cli.cq, wc, 16));
	be_free(buf);
	return NULL;
}

static void *server(void *arg)
{
	uint8_t *out = be_alloc((size_t)MSZ * 16);
	struct be_xwc wc[16];
	int got = 0, acked = 0, i, n;

	(void)arg;
	ASSERT(out);
	while (got < NMSG || acked < NMSG) {
		n = t.ops->cq_poll(srv.cq, wc, 16);
		ASSERT_OK(n);
		for (i = 0; i < n; i++) {
			ASSERT_EQ(wc[i].status, BE_XWC_SUCCESS);
			if (wc[i].opcode == BE_XWC_RECV) {
				uint8_t *in = (uint8_t *)(uintptr_t)wc[i].wr_id;
				uint8_t *o = out + (size_t)(got % 16) * MSZ;

				ASSERT_EQ(in[0], got & 0xff);
				ASSERT_EQ(in[MSZ - 1], got & 0xff);
				memset(o, ~got & 0xff, MSZ);
				post_recv(&srv, in);
				post(s, BE_XWR_WRITE_IMM, (uint64_t)got, o,
				     (uint64_t)(uintptr_t)(cdst + (size_t)(got % 16) * MSZ),
				     (uint32_t)got);
				got++;
			} else {
				acked++;
			}
		}
	}
	atomic_store(&server_done, 1);
	be_free(out);
	return NULL;
}

/* Registrations and deregistrations on the device, all along. */
static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&done)) {
		void *p = be_alloc(8u << 20); /* larger than a block: its own region */

		ASSERT(p);
		memset(p, 1, 4096);
		be_free(p);
		be_alloc_trim();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct be_xlistener *l;
	pthread_t tc, ts, tz;
	int i;

	xt_init(&t, argc, argv);
	xt_side_init(&t, &cli, 256, 64);
	xt_side_init(&t, &srv, 256, 64);
	l = xt_listen(&t, &srv);
	xt_connect_pair(&t, &cli, &srv, l, 32, &c, &s);
	cdst = xt_alloc(&t, (size_t)MSZ * 16);
	cdst_rkey = xt_grant(&t, c, cdst); /* before the threads start */
	for (i = 0; i < 32; i++) {
		post_recv(&cli, xt_alloc(&t, MSZ));
		post_recv(&srv, xt_alloc(&t, MSZ));
	}
	t.nsides = 0; /* each thread polls its own side */

	ASSERT(pthread_create(&tz, NULL, churn, NULL) == 0);
	ASSERT(pthread_create(&ts, NULL, server, NULL) == 0);
	ASSERT(pthread_create(&tc, NULL, client, NULL) == 0);
	ASSERT(pthread_join(tc, NULL) == 0);
	ASSERT(pthread_join(ts, NULL) == 0);
	atomic_store(&done, 1);
	ASSERT(pthread_join(tz, NULL) == 0);

	t.nsides = 2;
	t.ops->conn_destroy(c);
	t.ops->conn_destroy(s);
	t.ops->listener_close(l);
	xt_side_fini(&t, &cli);
	xt_side_fini(&t, &srv);
	xt_fini(&t);
	return 0;
}
