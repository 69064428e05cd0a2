/*
 * madvise(MADV_DONTFORK) failing is an allocation failure, not a crash and
 * not a region left to be shared with children.
 *
 * A seccomp filter makes every madvise(..., MADV_DONTFORK) of this process
 * fail with EPERM (other madvise calls pass). Then a small and a huge
 * allocation return NULL with errno ENOMEM, be_alloc_last_error() names
 * MADV_DONTFORK, the failures are counted, nothing stays mapped, nothing
 * was registered on the attached device, and no descriptor leaks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <be/alloc.h>
#include "test.h"
#include "hook.h"

#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static struct th_dev dev;

static int fd_count(void)
{
	return test_dir_count("/proc/self/fd");
}

int main(void)
{
#ifdef TEST_AUDIT_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
		/* the advice, low half (little-endian) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_DONTFORK, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };
	struct be_alloc_stats st;
	int fds;
	void *p;

	th_init(&dev, "dontfork", 1);
	ASSERT_OK(th_attach(&dev));
	ASSERT_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	ASSERT_EQ(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog), 0);
	/* The filter works: */
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(p != MAP_FAILED);
	ASSERT_EQ(madvise(p, 4096, MADV_DONTFORK), -1);
	ASSERT_EQ(errno, EPERM);
	ASSERT_EQ(madvise(p, 4096, MADV_NORMAL), 0);
	munmap(p, 4096);

	errno = 0;
	ASSERT_PTR_EQ(be_alloc(64), NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT(strstr(be_alloc_last_error(), "MADV_DONTFORK"));
	ASSERT(strstr(be_alloc_last_error(), strerror(EPERM)));
	fds = fd_count(); /* the arena memfd stays open, for the next try */
	errno = 0;
	ASSERT_PTR_EQ(be_alloc(200000), NULL);
	ASSERT_EQ(errno, ENOMEM);
	errno = 0;
	ASSERT_PTR_EQ(be_alloc(9u << 20), NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT(strstr(be_alloc_last_error(), "MADV_DONTFORK"));
	ASSERT_EQ(fd_count(), fds);

	be_alloc_stats(&st);
	ASSERT_UEQ(st.failures, 3);
	ASSERT_UEQ(st.blocks, 0);
	ASSERT_UEQ(st.huge_regions, 0);
	ASSERT_UEQ(st.mapped_bytes, 0);
	ASSERT_UEQ(st.allocations, 0);
	ASSERT_EQ(atomic_load(&dev.nreg), 0);
	ASSERT_EQ(atomic_load(&dev.attempts), 0);
#else
	fprintf(stderr, "no seccomp architecture constant for this CPU: not run\n");
#endif
	return 0;
}
