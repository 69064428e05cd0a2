/*
 * test.h - assertions for the test programs.
 *
 * Each test is its own executable, run by ctest in its own process with a
 * timeout (the libuv model: one file per behaviour). A failed ASSERT prints
 * where and why, and aborts, so ctest reports the failure.
 */
#ifndef BE_TEST_TEST_H
#define BE_TEST_TEST_H

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_FAIL(...)                                                       \
	do {                                                                 \
		fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);        \
		fprintf(stderr, __VA_ARGS__);                                \
		fprintf(stderr, "\n");                                       \
		fflush(stderr);                                              \
		abort();                                                     \
	} while (0)

#define ASSERT(cond)                                                         \
	do {                                                                 \
		if (!(cond))                                                 \
			TEST_FAIL("%s", #cond);                              \
	} while (0)

#define ASSERT_OP(a, op, b, fmt, type)                                       \
	do {                                                                 \
		type a_ = (type)(a);                                         \
		type b_ = (type)(b);                                         \
		if (!(a_ op b_))                                             \
			TEST_FAIL("%s %s %s (" fmt " vs " fmt ")", #a, #op,  \
				  #b, a_, b_);                               \
	} while (0)

#define ASSERT_EQ(a, b) ASSERT_OP(a, ==, b, "%" PRId64, int64_t)
#define ASSERT_NE(a, b) ASSERT_OP(a, !=, b, "%" PRId64, int64_t)
#define ASSERT_LT(a, b) ASSERT_OP(a, <, b, "%" PRId64, int64_t)
#define ASSERT_LE(a, b) ASSERT_OP(a, <=, b, "%" PRId64, int64_t)
#define ASSERT_GT(a, b) ASSERT_OP(a, >, b, "%" PRId64, int64_t)
#define ASSERT_GE(a, b) ASSERT_OP(a, >=, b, "%" PRId64, int64_t)
#define ASSERT_UEQ(a, b) ASSERT_OP(a, ==, b, "%" PRIu64, uint64_t)
#define ASSERT_PTR_NE(a, b) ASSERT_OP(a, !=, b, "%p", const void *)
#define ASSERT_PTR_EQ(a, b) ASSERT_OP(a, ==, b, "%p", const void *)
#define ASSERT_OK(expr)                                                      \
	do {                                                                 \
		long long r_ = (long long)(expr);                            \
		if (r_ < 0)                                                  \
			TEST_FAIL("%s returned %lld (%s)", #expr, r_,        \
				  strerror((int)-r_));                       \
	} while (0)

/* test_arg() - the argument after option @name in @argv, or @def when
 * @name is not given (the options every test takes: --transport NAME,
 * --addr A, ...). */
static inline const char *test_arg(int argc, char **argv, const char *name, const char *def)
{
	int i;

	for (i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	return def;
}

/* test_rand() - the next of xorshift64's numbers from state *@x (not 0):
 * test input and patterns, not statistics. */
static inline uint64_t test_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* test_dir_count() - the entries of directory @dir but "." and ".."
 * (and hidden ones): files, open descriptors in /proc/self/fd, ... */
static inline int test_dir_count(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ASSERT(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

#endif /* BE_TEST_TEST_H */
