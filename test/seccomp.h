/*
 * seccomp.h - seccomp filters of the tests that make one system call
 * fail or stop on purpose (test-alloc-dontfork-fail,
 * test-rpc-verbs-connect-stall).
 *
 * A filter opens with TEST_SECCOMP_HEAD: a call of another architecture
 * is allowed, then the system call number is loaded for the filter's own
 * tests. test_seccomp() installs it on the calling thread (and the threads
 * it starts from then on).
 */
#ifndef BE_TEST_SECCOMP_H
#define BE_TEST_SECCOMP_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef TEST_AUDIT_ARCH
#define TEST_SECCOMP_HEAD                                                     \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_AUDIT_ARCH, 1, 0),             \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                            \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#endif

/* Install the @n instructions at @f with seccomp's @flags, after
 * PR_SET_NO_NEW_PRIVS. Returns what seccomp() does (a notification fd
 * with SECCOMP_FILTER_FLAG_NEW_LISTENER, else 0) or -errno. */
static inline long test_seccomp(struct sock_filter *f, size_t n, unsigned int flags)
{
	struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };
	long r;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	return r < 0 ? -errno : r;
}

#endif /* BE_TEST_SECCOMP_H */
