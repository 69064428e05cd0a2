/*
 * dev.c - the fake device: the inner transport's device, opened with it,
 * with the fake ports' state over its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xport/fake/fake.h"

int be__fake_dev_open(const char *name, struct be_xdev **out)
{
	const struct be_xport_ops *in_ops = be__fake_inner_ops();
	struct fake_dev *d;
	int rc;

	if (!out)
		return -EINVAL;
	be__fake_env_load();
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	rc = in_ops->dev_open(name, &d->in);
	if (rc) {
		free(d);
		return rc;
	}
	d->x.ops = &be__xport_fake_ops;
	d->in_ops = in_ops;
	pthread_mutex_lock(&be__fake.lock);
	be__list_add_tail(&be__fake.devs, &d->link);
	pthread_mutex_unlock(&be__fake.lock);
	*out = &d->x;
	return 0;
}

void be__fake_dev_close(struct be_xdev *xd)
{
	struct fake_dev *d;

	if (!xd)
		return;
	d = container_of(xd, struct fake_dev, x);
	pthread_mutex_lock(&be__fake.lock);
	be__list_del_init(&d->link);
	pthread_mutex_unlock(&be__fake.lock);
	d->in_ops->dev_close(d->in);
	free(d);
}

int be__fake_dev_query(struct be_xdev *xd, struct be_xdev_attr *out)
{
	struct fake_dev *d;
	char name[sizeof(out->name)];
	int rc, i;

	if (!xd || !out)
		return -EINVAL;
	d = container_of(xd, struct fake_dev, x);
	rc = d->in_ops->dev_query(d->in, out);
	if (rc)
		return rc;
	snprintf(name, sizeof(name), "fake-%.58s", out->name);
	memcpy(out->name, name, sizeof(out->name));
	snprintf(out->transport, sizeof(out->transport), "fake");
	pthread_mutex_lock(&be__fake.lock);
	for (i = 0; i < out->num_ports && i < BE_XPORT_MAX_PORTS; i++)
		out->port[i].up = out->port[i].up && be__fake.port_up[i];
	pthread_mutex_unlock(&be__fake.lock);
	return 0;
}

/* Memory is registered on the inner device: its keys are the ones WRs
 * carry, passed through unchanged. */
void be__fake_dev_reg_hook(struct be_xdev *xd, struct be_alloc_reg_hook *out)
{
	struct fake_dev *d = container_of(xd, struct fake_dev, x);

	d->in_ops->dev_reg_hook(d->in, out);
}
