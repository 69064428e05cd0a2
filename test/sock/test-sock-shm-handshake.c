/*
 * Check that a shm listener bounds connections that never send their
 * request (docs/SECURITY.md, "Limits"): of sockets that connect and say
 * nothing, at most SHM_MAX_HANDSHAKE_UID of one uid wait at once (the
 * rest are closed at once), every one is closed once SHM_HELLO_TIMEOUT_MS
 * passed, and the listener then serves a real client. Before the fix
 * they were never cut: they pinned file descriptors for good.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "stest.h"
#include "xport/shm/shm.h"

#define NSILENT ((int)SHM_MAX_HANDSHAKE_UID + 8)

static struct st_fx f;
static int fds[NSILENT];
static bool gone[NSILENT];

/* Connect a raw socket to the shm listener @name, as a client would. */
static int raw_connect(const char *name)
{
	struct sockaddr_un sa;
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, "be-shm-", 7);
	memcpy(sa.sun_path + 8, name, n);
	ASSERT_OK(connect(fd, (struct sockaddr *)&sa,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 8 + n)));
	return fd;
}

/* How many silent sockets the listener closed (EOF) so far. */
static int closed_count(void)
{
	int i, n = 0;

	for (i = 0; i < NSILENT; i++) {
		char b;

		if (!gone[i] && recv(fds[i], &b, 1, MSG_DONTWAIT) == 0)
			gone[i] = true;
		n += gone[i];
	}
	return n;
}

static bool over_cap_closed(void *arg)
{
	return closed_count() >= NSILENT - (int)SHM_MAX_HANDSHAKE_UID;
}

static bool all_closed(void *arg)
{
	return closed_count() == NSILENT;
}

int main(int argc, char **argv)
{
	int i;

	st_fx_init(&f, argc, argv);
	if (strcmp(f.t.transport, "shm") != 0)
		return 77;
	f.srv.echo = true;
	st_fx_pair(&f);
	for (i = 0; i < NSILENT; i++)
		fds[i] = raw_connect(f.addr + strlen("shm://"));
	/* Beyond the cap of one uid: closed at once. */
	st_pump(f.ws, 1, over_cap_closed, NULL);
	/* The rest: closed by the deadline. */
	st_pump(f.ws, 1, all_closed, NULL);
	for (i = 0; i < NSILENT; i++)
		close(fds[i]);
	/* And the listener serves. */
	ASSERT_EQ(st_try_client(&f.t.cfg, f.ws[0], f.addr), 0);
	ASSERT_EQ(f.srv.accepted, 1);
	st_fx_unpair(&f);
	return 0;
}
