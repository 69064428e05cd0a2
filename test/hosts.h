/*
 * hosts.h - run a test against Debian's stock /etc/hosts.
 *
 * A stock Debian 12 /etc/hosts names localhost twice, 127.0.0.1 and ::1,
 * and getaddrinfo() returns ::1 first (RFC 6724). Container and CI images
 * often list 127.0.0.1 only, which hides what a newcomer's machine shows.
 * test_stock_hosts() makes this process see the stock file, with @extra
 * lines appended: it enters a mount namespace of its own and bind-mounts
 * a copy over /etc/hosts. The system's file is not touched. Call it before
 * the process's first lookup. Needs CAP_SYS_ADMIN (the tests run as root
 * in CI); returns 0 or -errno.
 */
#ifndef BE_TEST_HOSTS_H
#define BE_TEST_HOSTS_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

/* What Debian 12's netbase and installer write. */
#define TEST_STOCK_HOSTS                                                     \
	"127.0.0.1\tlocalhost\n"                                             \
	"127.0.1.1\tbe-test\n"                                               \
	"\n"                                                                 \
	"# The following lines are desirable for IPv6 capable hosts\n"      \
	"::1     localhost ip6-localhost ip6-loopback\n"                     \
	"ff02::1 ip6-allnodes\n"                                             \
	"ff02::2 ip6-allrouters\n"

static inline int test_stock_hosts(const char *extra)
{
	char path[] = "/tmp/be-test-hosts.XXXXXX";
	int fd, r = 0;
	FILE *f;

	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		r = -errno;
		close(fd);
		unlink(path);
		return r;
	}
	fprintf(f, "%s%s", TEST_STOCK_HOSTS, extra ? extra : "");
	if (fclose(f))
		r = -EIO;
	if (!r && (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		   mount(path, "/etc/hosts", NULL, MS_BIND, NULL)))
		r = -errno;
	/* The mount keeps the file's inode; its name is no longer needed. */
	unlink(path);
	return r;
}

#endif /* BE_TEST_HOSTS_H */
