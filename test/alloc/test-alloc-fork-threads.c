/*
 * fork() while other threads allocate: the child is never stuck on a lock
 * a parent thread held at the fork, and its bemalloc works.
 *
 * Three threads allocate and free (small, medium, large, huge from the
 * huge cache, and a trim now and then, so the pool lock is taken often)
 * while the main thread forks again and again. Each child allocates,
 * checks and frees a few buffers of every kind (new blocks, its own huge
 * region: the pool lock and the slow paths) and exits with _exit(0). The
 * parent waits for each child with a bound and fails on a hang. The
 * allocating threads check their own patterns.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"
#include "forkwait.h"

#define NTHREADS 3
#define NFORKS 40

static atomic_int stop;
static atomic_long rounds;

static const size_t sizes[] = { 64, 700, 5000, 40000, 300000, (5u << 20) + 4096 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void *worker(void *arg)
{
	uint32_t seed = (uint32_t)(uintptr_t)arg * 7919u;
	void *held[16] = { 0 };
	size_t held_sz[16] = { 0 };
	unsigned n = 0;

	while (!atomic_load(&stop)) {
		unsigned slot = n % 16, k = (seed >> 8) % NSIZES;

		seed = seed * 1103515245u + 12345u;
		if (held[slot]) {
			if (!th_check(held[slot], held_sz[slot], slot + n))
				TEST_FAIL("worker buffer %p damaged", held[slot]);
			be_free(held[slot]);
			held[slot] = NULL;
		}
		/* Huge ones are rarer: they take the pool lock. */
		if (k == NSIZES - 1 && (seed & 7))
			k = 0;
		held[slot] = be_alloc(sizes[k]);
		if (!held[slot])
			TEST_FAIL("worker be_alloc(%zu): %s", sizes[k], be_alloc_last_error());
		held_sz[slot] = sizes[k] < 8192 ? sizes[k] : 8192;
		/* Tag with the round it is checked in (slot + n + 16). */
		th_fill(held[slot], held_sz[slot], slot + n + 16);
		n++;
		if (n % 512 == 0)
			be_alloc_trim();
		atomic_fetch_add_explicit(&rounds, 1, memory_order_relaxed);
	}
	for (unsigned i = 0; i < 16; i++)
		be_free(held[i]);
	return NULL;
}

static int child(void)
{
	void *p[NSIZES * 4];
	unsigned i;

	for (i = 0; i < NSIZES * 4; i++) {
		size_t sz = sizes[i % NSIZES];

		p[i] = be_alloc(sz);
		if (!p[i])
			return 2;
		memset(p[i], (int)i, sz);
	}
	for (i = 0; i < NSIZES * 4; i++) {
		size_t sz = sizes[i % NSIZES];

		if (((uint8_t *)p[i])[0] != (uint8_t)i || ((uint8_t *)p[i])[sz - 1] != (uint8_t)i)
			return 3;
		be_free(p[i]);
	}
	return 0;
}

int main(void)
{
	pthread_t th[NTHREADS];
	long last = 0;
	int i;

	for (i = 0; i < NTHREADS; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < NFORKS; i++) {
		pid_t pid;

		/* Fork while the workers are busy: wait until they made progress
		 * since the last fork. */
		while (atomic_load(&rounds) < last + 200)
			usleep(100);
		last = atomic_load(&rounds);
		fflush(stderr);
		pid = fork();
		ASSERT(pid >= 0);
		if (pid == 0)
			_exit(child());
		tf_wait_ok(pid, 30);
	}
	atomic_store(&stop, 1);
	for (i = 0; i < NTHREADS; i++)
		ASSERT_EQ(pthread_join(th[i], NULL), 0);
	return 0;
}
