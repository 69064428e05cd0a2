/*
 * A child forked after its parent allocated must not hand out memory the
 * parent uses.
 *
 * The parent allocates and fills buffers of every kind (small, medium,
 * large, huge) before the fork, and again after it (a huge one reused from
 * the huge cache among them). Then the child, released through a pipe,
 * allocates many buffers of the same sizes, enough for new blocks, fills
 * them with another pattern and exits. The parent checks every one of its
 * buffers.
 *
 * Without fork safety the child's copy of the allocator continues from the
 * same state as the parent's over the same MAP_SHARED blocks and the same
 * arena memfd: it hands out the very addresses the parent allocated after
 * the fork, and the parent finds the child's pattern in its buffers.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"
#include "forkwait.h"

#define NSIZES 7
#define PER_SIZE 24
#define CHILD_PER_SIZE 96

static const size_t sizes[NSIZES] = {
	64, 1000, 4096, 20000, 100000, 1u << 20, (6u << 20) + 4096,
};

struct bufs {
	void *p[NSIZES][PER_SIZE];
};

static void bufs_fill(struct bufs *b, uint32_t seed, unsigned n_huge)
{
	unsigned k, i;

	for (k = 0; k < NSIZES; k++) {
		unsigned n = k == NSIZES - 1 ? n_huge : PER_SIZE;

		for (i = 0; i < n; i++) {
			b->p[k][i] = be_alloc(sizes[k]);
			if (!b->p[k][i])
				TEST_FAIL("be_alloc(%zu): %s", sizes[k], be_alloc_last_error());
			th_fill(b->p[k][i], sizes[k], seed + k * PER_SIZE + i);
		}
	}
}

static void bufs_check_free(struct bufs *b, uint32_t seed, unsigned n_huge)
{
	unsigned k, i, bad = 0;

	for (k = 0; k < NSIZES; k++) {
		unsigned n = k == NSIZES - 1 ? n_huge : PER_SIZE;

		for (i = 0; i < n; i++) {
			if (!th_check(b->p[k][i], sizes[k], seed + k * PER_SIZE + i)) {
				fprintf(stderr, "buffer %u of %zu bytes at %p overwritten\n", i,
					sizes[k], b->p[k][i]);
				bad++;
			}
			be_free(b->p[k][i]);
		}
	}
	ASSERT_EQ(bad, 0);
}

/* The child: wait for the go, then allocate and scribble. */
static int child(int rfd)
{
	static void *mine[NSIZES][CHILD_PER_SIZE];
	unsigned k, i;
	char ch;

	if (read(rfd, &ch, 1) != 1)
		return 2;
	for (k = 0; k < NSIZES; k++) {
		unsigned n = k == NSIZES - 1 ? 2 : CHILD_PER_SIZE;

		for (i = 0; i < n; i++) {
			mine[k][i] = be_alloc(sizes[k]);
			if (!mine[k][i])
				return 3;
			memset(mine[k][i], 0xa5, sizes[k]);
		}
	}
	return 0;
}

int main(void)
{
	static struct bufs before, after;
	int pfd[2];
	void *h;
	pid_t pid;

	bufs_fill(&before, 1, 1);
	/* A huge region in the huge cache: the parent reuses it below. */
	h = be_alloc(sizes[NSIZES - 1]);
	ASSERT(h);
	be_free(h);

	ASSERT_OK(pipe(pfd));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		close(pfd[1]);
		_exit(child(pfd[0]));
	}
	close(pfd[0]);
	bufs_fill(&after, 1000, 1);
	ASSERT_EQ(write(pfd[1], "g", 1), 1);
	close(pfd[1]);
	tf_wait_ok(pid, 60);

	bufs_check_free(&before, 1, 1);
	bufs_check_free(&after, 1000, 1);
	be_alloc_trim();
	return 0;
}
