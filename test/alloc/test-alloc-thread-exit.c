/*
 * Check thread exit: in each round, threads allocate a mix of buffers,
 * free half of them, hand the other half to the main thread and exit; the
 * main thread frees those after the join (remote frees into the heap of a
 * thread that is gone). Exited heaps are adopted by the next threads, so
 * over many rounds the number of blocks must not grow: a leak of the
 * exited heaps' memory would add blocks every round (about ten per round
 * here), while reuse keeps the count within fragmentation slack (half) of
 * the peak seen during the warm-up rounds.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

enum { THREADS = 3, ROUNDS = 40, WARMUP = 10, PER = 1200 };

struct job {
	unsigned seed;
	void *keep[PER / 2];
	size_t n[PER / 2];
};

static const struct th_mix mix = { .one_in = 10, .large_min = 40000, .large_span = 100000,
				   .medium_span = 20000 };

static void *worker(void *arg)
{
	struct job *j = arg;
	void *p[PER];
	size_t n[PER];
	int i;

	for (i = 0; i < PER; i++) {
		n[i] = th_pick_size(&j->seed, &mix);
		p[i] = be_alloc(n[i]);
		ASSERT(p[i] != NULL);
		th_fill(p[i], n[i] < 512 ? n[i] : 512, (uint32_t)i);
	}
	for (i = 0; i < PER; i++) {
		ASSERT(th_check(p[i], n[i] < 512 ? n[i] : 512, (uint32_t)i));
		if (i % 2) {
			be_free(p[i]);
		} else {
			j->keep[i / 2] = p[i];
			j->n[i / 2] = n[i];
		}
	}
	return NULL;
}

int main(void)
{
	static struct job jobs[THREADS];
	struct be_alloc_stats st;
	uint64_t warm_blocks = 0, max_blocks = 0;
	int r, t, i;

	for (r = 0; r < ROUNDS; r++) {
		pthread_t th[THREADS];

		for (t = 0; t < THREADS; t++) {
			jobs[t].seed = (unsigned)(r * THREADS + t + 1);
			ASSERT_EQ(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
		}
		for (t = 0; t < THREADS; t++)
			ASSERT_EQ(pthread_join(th[t], NULL), 0);
		for (t = 0; t < THREADS; t++)
			for (i = 0; i < PER / 2; i++) {
				ASSERT(th_check(jobs[t].keep[i],
						jobs[t].n[i] < 512 ? jobs[t].n[i] : 512,
						(uint32_t)(2 * i)));
				be_free(jobs[t].keep[i]);
			}
		be_alloc_stats(&st);
		ASSERT_UEQ(st.bytes_in_use, 0);
		if (st.blocks > max_blocks)
			max_blocks = st.blocks;
		if (r == WARMUP - 1)
			warm_blocks = max_blocks;
	}
	fprintf(stderr, "blocks after warm-up %llu, max over %d rounds %llu\n",
		(unsigned long long)warm_blocks, ROUNDS, (unsigned long long)max_blocks);
	ASSERT_LE(max_blocks, warm_blocks + warm_blocks / 2);
	/* Exited heaps hold nothing a trim cannot give back. */
	be_alloc_trim();
	be_alloc_stats(&st);
	ASSERT_UEQ(st.blocks, 0);
	return 0;
}
