/*
 * Check ordering on one conn: a long chain of mixed SEND, WRITE and
 * WRITE_IMM, posted in several post_send calls and as one linked chain,
 * executes in posting order: the receiver sees receives in order (the
 * imm / payload sequence numbers increase by one), a WRITE posted before a
 * SEND is visible when the SEND arrives, and the signaled completions on
 * the sender come back in posting order.
 */
#include "xtest.h"

#define N 2000
#define CHAIN 64

int main(int argc, char **argv)
{
	struct xt_pair p;
	struct xt *t = &p.t;
	static struct be_xwc wc[N];
	static struct be_xsend_wr wr[N];
	static struct be_xsge sge[N];
	uint32_t *seqbuf, *target;
	uint32_t expect = 0, nrecv = 0;
	uint64_t last_id = 0;
	uint32_t rkey;
	int i, k, got;

	xt_pair_open(&p, argc, argv, 4096, 0, N + 8, CHAIN * 2);
	xt_post_recvs(t, &p.srv, N, 64);
	seqbuf = xt_alloc(t, N * sizeof(uint32_t));
	target = xt_alloc(t, N * sizeof(uint32_t));
	memset(target, 0, N * sizeof(uint32_t));
	rkey = xt_grant(t, p.s, target);

	/* Op i: i%3 == 0 WRITE seq into target[i]; 1 SEND seq; 2 WRITE_IMM imm=seq. */
	for (i = 0; i < N; i++) {
		seqbuf[i] = (uint32_t)i;
		sge[i].addr = (uint64_t)(uintptr_t)&seqbuf[i];
		sge[i].length = sizeof(uint32_t);
		sge[i].lkey = xt_lkey(t, seqbuf);
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = (uint64_t)i + 1;
		wr[i].opcode = i % 3 == 0 ? BE_XWR_WRITE : i % 3 == 1 ? BE_XWR_SEND : BE_XWR_WRITE_IMM;
		wr[i].flags = i % 5 == 4 || i == N - 1 ? BE_XWR_F_SIGNALED : 0;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].remote_addr = (uint64_t)(uintptr_t)&target[i];
		wr[i].rkey = rkey;
		wr[i].imm = (uint32_t)i;
	}
	/* Chains of CHAIN linked WRs; wait for room when the queue is full. */
	for (i = 0; i < N; i += CHAIN) {
		struct be_xsend_wr *bad, *head;
		int n = BE_MIN(CHAIN, N - i);

		for (k = 0; k < n - 1; k++)
			wr[i + k].next = &wr[i + k + 1];
		wr[i + n - 1].next = NULL;
		head = &wr[i];
		for (;;) {
			int r = t->ops->post_send(p.c, head, &bad);

			if (r == 0)
				break;
			/* Queue full: the rest of the chain, from bad, after progress. */
			ASSERT_EQ(r, -ENOMEM);
			ASSERT(bad != NULL);
			head = bad;
			xt_spin(t, 1);
		}
	}
	/* Receiver: receives in order, WRITEs before them visible. */
	while (nrecv < (uint32_t)(N * 2 / 3)) {
		got = 0;
		xt_wait_wc(t, &p.srv, wc, 1);
		got = 1;
		for (k = 0; k < got; k++) {
			uint32_t seq;

			ASSERT_EQ(wc[k].status, BE_XWC_SUCCESS);
			if (wc[k].opcode == BE_XWC_RECV_IMM) {
				seq = wc[k].imm;
			} else {
				ASSERT_EQ(wc[k].opcode, BE_XWC_RECV);
				ASSERT_EQ(wc[k].byte_len, 4);
				memcpy(&seq, (void *)(uintptr_t)wc[k].wr_id, 4);
			}
			/* The next receive-consuming op after expect. */
			while (expect % 3 == 0)
				expect++;
			ASSERT_EQ(seq, expect);
			/* Every WRITE before it is in place. */
			if (seq >= 1)
				ASSERT_EQ(target[(seq - 1) / 3 * 3], (seq - 1) / 3 * 3);
			expect++;
			nrecv++;
		}
	}
	/* Sender: signaled completions in posting order. */
	for (k = 0; k < N / 5 + 1; k++) {
		xt_wait_wc(t, &p.cli, wc, 1);
		ASSERT_EQ(wc[0].status, BE_XWC_SUCCESS);
		ASSERT(wc[0].wr_id > last_id);
		last_id = wc[0].wr_id;
		if (last_id == N)
			break;
	}
	ASSERT_UEQ(last_id, N);
	for (i = 0; i < N; i += 3)
		ASSERT_EQ(target[i], i);

	xt_pair_close(&p);
	return 0;
}
