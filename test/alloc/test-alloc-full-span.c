/*
 * Check that spans a heap let go of because they were full come back to
 * it when another thread frees their objects: thread A fills three spans
 * of one class (two of them get detached as full), thread B frees every
 * object, then A allocates as many again and must get them from the same
 * spans (no new span, no new block). Run for a small and a medium class.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

enum { MAXN = 4096 };

static void *objs[MAXN];
static int nobj;
static size_t objsize;

static void *alloc_all(void *arg)
{
	int i;

	for (i = 0; i < nobj; i++) {
		objs[i] = be_alloc(objsize);
		ASSERT(objs[i] != NULL);
		th_fill(objs[i], objsize, (uint32_t)i);
	}
	return NULL;
}

static void *free_all(void *arg)
{
	int i;

	for (i = 0; i < nobj; i++) {
		ASSERT(th_check(objs[i], objsize, (uint32_t)i));
		be_free(objs[i]);
	}
	return NULL;
}

static void run(pthread_t *a_thread, size_t size, int n)
{
	static uintptr_t spans1[MAXN];
	struct be_alloc_stats st;
	uint64_t blocks;
	pthread_t t;
	int i, j;

	objsize = size;
	nobj = n;
	alloc_all(NULL); /* on this thread: "A" */
	for (i = 0; i < n; i++)
		spans1[i] = (uintptr_t)objs[i] >> 16;
	be_alloc_stats(&st);
	blocks = st.blocks;
	ASSERT_EQ(pthread_create(&t, NULL, free_all, NULL), 0); /* "B" */
	ASSERT_EQ(pthread_join(t, NULL), 0);
	alloc_all(NULL);
	for (i = 0; i < n; i++) {
		uintptr_t sp = (uintptr_t)objs[i] >> 16;

		for (j = 0; j < n && spans1[j] != sp; j++)
			;
		if (j == n)
			TEST_FAIL("size %zu: object %d in a span not used before", size, i);
	}
	be_alloc_stats(&st);
	ASSERT_UEQ(st.blocks, blocks);
	for (i = 0; i < n; i++)
		be_free(objs[i]);
	(void)a_thread;
}

int main(void)
{
	struct be_alloc_stats st;

	run(NULL, 64, 3000);   /* 1024 per span: 2 full spans + 1 active */
	run(NULL, 4096, 90);   /* 32 per span */
	run(NULL, 20000, 75);  /* 25 per span, 8 units: fill every unit */
	be_alloc_stats(&st);
	ASSERT_UEQ(st.bytes_in_use, 0);
	return 0;
}
