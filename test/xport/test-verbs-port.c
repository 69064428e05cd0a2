/*
 * Check that a port going down and up again is seen on verbs: taking the
 * second NIC of the guest down (ip link) raises BE_XEV_PORT_CHANGE (port
 * 0, down) on every evch of the device opened on it, dev_query reports the
 * port down, and bringing it up raises PORT_CHANGE (up). Runs under
 * test/rxe/rxe-run --nics 2 (rxe1 on eth1).
 */
#include <stdlib.h>

#include "test-verbs-common.h"

static void set_link(const char *state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "ip link set eth1 %s", state);
	ASSERT_EQ(system(cmd), 0);
}

static struct be_xevent wait_port(const struct be_xport_ops *ops, struct be_xevch *ch, int up)
{
	double end = tv_now() + TV_WAIT_S;
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
		if (tv_now() > end)
			TEST_FAIL("no PORT_CHANGE (up %d) within %d s", up, TV_WAIT_S);
		p.fd = ops->evch_fd(ch);
		p.events = POLLIN;
		poll(&p, 1, 100);
	}
}

int main(void)
{
	const struct be_xport_ops *ops = &be__xport_verbs_ops;
	const char *name = getenv("BE_RXE_DEV1");
	struct be_xdev *dev;
	struct be_xevch *a, *b;
	struct be_xdev_attr attr;
	struct be_xevent ev;

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
