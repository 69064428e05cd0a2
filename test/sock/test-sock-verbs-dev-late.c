/*
 * Check that an RDMA device that was not there when its context was
 * created gives a connect or a listen on it a clear error at once
 * (-ENODEV) instead of being listed and opened on the worker's thread,
 * that the context's other device still serves, and that a context
 * created after the device appeared uses it.
 *
 * Soft-RoCE guest with two NICs only (label rxe): rxe1 is deleted before
 * the first context is created and added back on eth1 after it. Before
 * contexts opened their devices at creation, the connect opened rxe1 on
 * the worker and went on (returned 0).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stest.h"
#include "xport/xport.h"

/* Does rxe1's port name its netdev (so the address maps to rxe1)? */
static bool dev1_ready(const char *dev)
{
	char path[256], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return buf[0] != '\0' && buf[0] != '\n';
}

/* Nothing connects to the listeners: never called. */
static int on_accept(struct be_listener *l, struct be_sock *s, void *user)
{
	(void)l;
	(void)s;
	(void)user;
	return -ECONNREFUSED;
}

int main(void)
{
	const char *ip0 = getenv("BE_RXE_IP0"), *ip1 = getenv("BE_RXE_IP1");
	const char *dev1 = getenv("BE_RXE_DEV1");
	const struct be_sock_cbs cbs = { .on_accept = on_accept };
	struct be_worker *w, *w2;
	struct be_listener *l;
	struct be_ctx *ctx, *ctx2;
	struct be_config cfg;
	struct be_sock *s;
	char addr[160], cmd[160];
	uint64_t start;

	if (!ip0 || !ip1 || !dev1 || !be__xport_find("verbs")) {
		fprintf(stderr, "needs the Soft-RoCE guest with two NICs: skipped\n");
		return 77;
	}
	st_config_init(&cfg);
	snprintf(cmd, sizeof(cmd), "rdma link delete %s", dev1);
	ASSERT_EQ(system(cmd), 0);
	ASSERT_OK(be_ctx_create(&cfg, &ctx));
	ASSERT_OK(be_worker_create(ctx, &w));
	snprintf(cmd, sizeof(cmd), "rdma link add %s type rxe netdev eth1", dev1);
	ASSERT_EQ(system(cmd), 0);
	start = st_hang_start();
	while (!dev1_ready(dev1)) {
		usleep(10000);
		st_hang_check(start, "rxe1's port names eth1");
	}

	/* The device came after the context: refused at once, by name. */
	snprintf(addr, sizeof(addr), "verbs://%s:7471", ip1);
	ASSERT_EQ(be_sock_connect(w, addr, &cbs, NULL, &s), -ENODEV);
	snprintf(addr, sizeof(addr), "verbs://%s:0", ip1);
	ASSERT_EQ(be_listen(w, addr, &cbs, NULL, &l), -ENODEV);
	ASSERT_EQ(be_worker_engine_count(w), 0);

	/* The device the context opened still serves. */
	snprintf(addr, sizeof(addr), "verbs://%s:0", ip0);
	ASSERT_OK(be_listen(w, addr, &cbs, NULL, &l));
	be_listener_close(l);

	/* A context created now has it. */
	ASSERT_OK(be_ctx_create(&cfg, &ctx2));
	ASSERT_OK(be_worker_create(ctx2, &w2));
	snprintf(addr, sizeof(addr), "verbs://%s:0", ip1);
	ASSERT_OK(be_listen(w2, addr, &cbs, NULL, &l));
	be_listener_close(l);

	ASSERT_OK(be_worker_destroy(w2));
	ASSERT_OK(be_ctx_destroy(ctx2));
	ASSERT_OK(be_worker_destroy(w));
	ASSERT_OK(be_ctx_destroy(ctx));
	return 0;
}
