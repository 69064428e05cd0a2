/*
 * A forked child does not inherit the parent's bemalloc memory: touching
 * a parent buffer in the child faults (SIGSEGV), before and after the
 * child allocated buffers of its own (the parent's address ranges stay
 * reserved, so no buffer of the child can take their place).
 *
 * The child catches SIGSEGV itself (sigsetjmp/siglongjmp) so the check
 * also works where a sanitizer reports faults; it exits 0 only if every
 * touch faulted. A grandchild, forked from the child after the child
 * allocated, does the same for the child's buffers.
 *
 * Skipped (77) under ThreadSanitizer: its fork() starts a thread in the
 * child before the atfork handlers run, and that thread's stack may take
 * the range of a parent block, which bemalloc's handler then cannot
 * reserve (docs/ALLOC.md, "Fork"): a stale pointer there is writable.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"
#include "forkwait.h"

#define NP 4

#if defined(__SANITIZE_THREAD__)
#define FF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FF_TSAN 1
#endif
#endif

static sigjmp_buf fault_jmp;
static const size_t psizes[NP] = { 64, 4096, 300000, (5u << 20) + 4096 };

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(fault_jmp, 1);
}

/* True if writing one byte at @p faults. */
static bool write_faults(void *p)
{
	volatile uint8_t *b = p;

	if (sigsetjmp(fault_jmp, 1))
		return true;
	b[0] = 0x5a;
	return false;
}

static void catch_segv(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	ASSERT_EQ(sigaction(SIGBUS, &sa, NULL), 0);
}

/* Exit status: 0 if every buffer in @bufs faults, 1 + index otherwise. */
static int all_fault(void *const *bufs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!write_faults(bufs[i]))
			return 1 + i;
	return 0;
}

static int child(void *const *pbufs)
{
	void *mine[NP * 8];
	pid_t pid;
	int i, rc;

	catch_segv();
	rc = all_fault(pbufs, NP);
	if (rc)
		return rc;
	/* Allocate as much again: new blocks never land on the parent's. */
	for (i = 0; i < NP * 8; i++) {
		mine[i] = be_alloc(psizes[i % NP]);
		if (!mine[i])
			return 20;
		memset(mine[i], 0x11, psizes[i % NP]);
	}
	rc = all_fault(pbufs, NP);
	if (rc)
		return 10 + rc;
	/* One generation further: the child's buffers are not inherited
	 * either, and the child keeps its own. */
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return 30;
	if (pid == 0)
		_exit(all_fault(mine, NP * 8));
	tf_wait_ok(pid, 60);
	for (i = 0; i < NP * 8; i++) {
		if (((uint8_t *)mine[i])[psizes[i % NP] - 1] != 0x11)
			return 40;
		be_free(mine[i]);
	}
	return 0;
}

int main(void)
{
	void *p[NP];
	int i, st;
	pid_t pid;

#ifdef FF_TSAN
	fprintf(stderr, "ThreadSanitizer maps a thread's stack in a forked child before "
			"bemalloc's fork handler runs: skipped\n");
	return 77;
#endif
	for (i = 0; i < NP; i++) {
		p[i] = be_alloc(psizes[i]);
		ASSERT(p[i]);
		th_fill(p[i], psizes[i], (uint32_t)i);
	}
	fflush(stderr);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0)
		_exit(child(p));
	st = tf_wait(pid, 60);
	if (!WIFEXITED(st))
		TEST_FAIL("child died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
	if (WEXITSTATUS(st))
		TEST_FAIL("child: status %d (1..%d: a parent buffer was writable; 11..: after "
			  "the child allocated; 20: be_alloc failed; 30+: grandchild)",
			  WEXITSTATUS(st), NP);
	for (i = 0; i < NP; i++) {
		ASSERT(th_check(p[i], psizes[i], (uint32_t)i));
		be_free(p[i]);
	}
	return 0;
}
