/*
 * Check that a port going down and up again is seen on verbs: taking the
 * second NIC of the guest down (ip link) raises BE_XEV_PORT_CHANGE (port
 * 0, down) on every evch of the device opened on it, dev_query reports the
 * port down, and bringing it up raises PORT_CHANGE (up). Runs under
 * test/rxe/rxe-run --nics 2 (rxe1 on eth1).
 */
#include <poll.h>
#include <stdlib.h>

#include "xtest.h"

static void set_link(const char *state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "ip link set eth1 %s", state);
	ASSERT_EQ(system(cmd), 0);
}

static struct be_xevent wait_port(const struct be_xport_ops *ops, struct be_xevch *ch, int up)
{
	uint64_t end = xt_now_ms() + XT_WAIT_S * 1000;
	struct be_xevent ev;
	struct pollfd p;
	int r;

	for (;;) {
		r = ops->evch_get(ch, &ev);
		ASSERT_OK(r);
		if (r == 1 && ev.type == BE_XEV_PORT_CHANGE && ev.up == up)
			return ev;
		if (r == 1)
			continue; /* e.g. a flap reported twice */
		if (xt_now_ms() > end)
			TEST_FAIL("no PORT_CHANGE (up %d) within %d s", up, XT_WAIT_S);
		p.fd = ops->evch_fd(ch);
		p.events = POLLIN;
		poll(&p, 1, 100);
	}
}

int main(int argc, char **argv)
{
	const struct be_xport_ops *ops = be__xport_find("verbs");
	const char *name = getenv("BE_RXE_DEV1");
	struct be_xdev *dev;
	struct be_xevch *a, *b;
	struct be_xdev_attr attr;
	struct be_xevent ev;

	(void)argc;
	(void)argv;
	ASSERT(ops);
	if (!name) {
		fprintf(stderr, "SKIP: needs test/rxe/rxe-run --nics 2\n");
		return 77;
	}
	ASSERT_OK(ops->dev_open(name, &dev));
	ASSERT_OK(ops->dev_query(dev, &attr));
	fprintf(stderr, "%s: port up %d, netdev %s\n", attr.name, attr.port[0].up,
		attr.port[0].netdev);
	ASSERT(attr.port[0].up);
	ASSERT(strcmp(attr.port[0].netdev, "eth1") == 0);
	ASSERT_OK(ops->evch_create(dev, &a));
	ASSERT_OK(ops->evch_create(dev, &b));

	set_link("down");
	ev = wait_port(ops, a, 0);
	ASSERT_EQ(ev.port, 0);
	ev = wait_port(ops, b, 0);
	ASSERT_EQ(ev.port, 0);
	ASSERT_OK(ops->dev_query(dev, &attr));
	ASSERT(!attr.port[0].up);

	set_link("up");
	ev = wait_port(ops, a, 1);
	ASSERT_EQ(ev.port, 0);
	ev = wait_port(ops, b, 1);
	ASSERT_OK(ops->dev_query(dev, &attr));
	ASSERT(attr.port[0].up);

	ops->evch_destroy(a);
	ops->evch_destroy(b);
	ops->dev_close(dev);
	fprintf(stderr, "ok\n");
	return 0;
}
