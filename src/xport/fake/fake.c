/*
 * fake.c - the fake transport's ops table ("fake") and its fault API:
 * the settings every fake object reads (fake.h).
 *
 * The implementation is split by role, as in every transport's folder:
 * dev.c (device: the inner transport's, ports), cm.c (event channel,
 * listeners, conns, event faults), cq.c (cq and srq: the queue of
 * completions made or held here), data.c (post_send, the shadow send
 * queue, WR and receive faults).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#include "xport/fake/fake.h"

struct fake_global be__fake = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.rng = 1,
	.port_up = { true, true, true, true },
	.devs = BE__LIST_INIT(be__fake.devs),
	.evchs = BE__LIST_INIT(be__fake.evchs),
};

const struct be_xport_ops be__xport_fake_ops = {
	BE__XPORT_OPS(fake),
	.addr_canon = be__fake_addr_canon,
	.conn_rx_resume = be__fake_conn_rx_resume,
	.grant = be__fake_grant,
	.revoke = be__fake_revoke,
};

const struct be_xport_ops *be__fake_inner_ops(void)
{
	const struct be_xport_ops *ops;
	const char *env;

	pthread_mutex_lock(&be__fake.lock);
	ops = be__fake.inner;
	pthread_mutex_unlock(&be__fake.lock);
	if (ops)
		return ops;
	env = getenv("BE_FAKE_INNER");
	if (env && !strcmp(env, "shm"))
		return &be__xport_shm_ops;
	return &be__xport_tcp_ops;
}

void be__fake_reset(void)
{
	int i;

	pthread_mutex_lock(&be__fake.lock);
	be__fake.inner = NULL;
	be__fake.rng = 1;
	memset(&be__fake.conn_new, 0, sizeof(be__fake.conn_new));
	memset(be__fake.rules, 0, sizeof(be__fake.rules));
	be__fake.srq_fail_nth = 0;
	be__fake.srq_posted = 0;
	be__fake.srq_fail_err = 0;
	for (i = 0; i < BE_XPORT_MAX_PORTS; i++)
		be__fake.port_up[i] = true;
	be__fake.port_gen++;
	memset(&be__fake.st, 0, sizeof(be__fake.st));
	pthread_mutex_unlock(&be__fake.lock);
}

int be__fake_inner(const char *name)
{
	const struct be_xport_ops *ops = NULL;

	if (name && !strcmp(name, "tcp"))
		ops = &be__xport_tcp_ops;
	else if (name && !strcmp(name, "shm"))
		ops = &be__xport_shm_ops;
	else if (name)
		return -EPROTONOSUPPORT;
	pthread_mutex_lock(&be__fake.lock);
	be__fake.inner = ops;
	pthread_mutex_unlock(&be__fake.lock);
	return 0;
}

void be__fake_seed(uint64_t seed)
{
	pthread_mutex_lock(&be__fake.lock);
	be__fake.rng = seed ? seed : 1;
	pthread_mutex_unlock(&be__fake.lock);
}

/* xorshift64: the same seed gives the same jitter. */
uint64_t be__fake_rand(void)
{
	uint64_t x;

	pthread_mutex_lock(&be__fake.lock);
	x = be__fake.rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	be__fake.rng = x;
	pthread_mutex_unlock(&be__fake.lock);
	return x;
}

void be__fake_conn_new(const struct be__fake_faults *f)
{
	pthread_mutex_lock(&be__fake.lock);
	if (f)
		be__fake.conn_new = *f;
	else
		memset(&be__fake.conn_new, 0, sizeof(be__fake.conn_new));
	pthread_mutex_unlock(&be__fake.lock);
}

int be__fake_conn_set(struct be_xconn *xc, const struct be__fake_faults *f)
{
	struct fake_conn *c;

	if (!xc || !xc->dev || xc->dev->ops != &be__xport_fake_ops)
		return -EINVAL;
	c = to_fconn(xc);
	if (f)
		c->f = *f;
	else
		memset(&c->f, 0, sizeof(c->f));
	c->nwr = c->bytes = c->nrecv = 0;
	return 0;
}

int be__fake_event_rule(enum be_xev_type type, unsigned int n, int gets)
{
	int i, rc = -ENOSPC;

	pthread_mutex_lock(&be__fake.lock);
	for (i = 0; i < FAKE_MAX_RULES; i++)
		if (!be__fake.rules[i].n) {
			be__fake.rules[i] = (struct fake_rule){ .type = type, .n = n, .gets = gets };
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&be__fake.lock);
	return rc;
}

int be__fake_rule_take(enum be_xev_type type, int *gets)
{
	int i, rc = 0;

	pthread_mutex_lock(&be__fake.lock);
	for (i = 0; i < FAKE_MAX_RULES; i++) {
		struct fake_rule *r = &be__fake.rules[i];

		if (!r->n || r->type != type)
			continue;
		r->n--;
		if (r->gets < 0) {
			be__fake.st.ev_dropped++;
			rc = 1;
		} else {
			be__fake.st.ev_delayed++;
			*gets = r->gets;
			rc = 2;
		}
		break;
	}
	pthread_mutex_unlock(&be__fake.lock);
	return rc;
}

void be__fake_srq_post_fail(uint64_t nth, int err)
{
	pthread_mutex_lock(&be__fake.lock);
	be__fake.srq_fail_nth = nth;
	be__fake.srq_fail_err = err < 0 ? err : -EIO;
	be__fake.srq_posted = 0;
	pthread_mutex_unlock(&be__fake.lock);
}

int be__fake_port(int port, bool up)
{
	struct be__list *p;

	if (port < 0 || port >= BE_XPORT_MAX_PORTS)
		return -EINVAL;
	pthread_mutex_lock(&be__fake.lock);
	be__fake.port_up[port] = up;
	be__fake.port_gen++;
	/* Each evch notices at its next evch_get: wake its owner. */
	be__list_for_each(p, &be__fake.evchs)
		be__wake_kick(be__list_entry(p, struct fake_evch, link)->c.wake.efd);
	pthread_mutex_unlock(&be__fake.lock);
	return 0;
}

void be__fake_stats(struct be__fake_stats *out)
{
	pthread_mutex_lock(&be__fake.lock);
	*out = be__fake.st;
	pthread_mutex_unlock(&be__fake.lock);
}

void be__fake_count(uint64_t *field)
{
	pthread_mutex_lock(&be__fake.lock);
	(*field)++;
	pthread_mutex_unlock(&be__fake.lock);
}

/*
 * The environment, for processes a test cannot call into (read once, when
 * the first fake device opens): BE_FAKE_SEED=n, and BE_FAKE_CONN, the
 * faults every conn starts with, as comma-separated key=value pairs:
 * fail_wr, fail_status, fail_post (an errno, positive or not),
 * break_after, fail_recv, recv_status, delay, jitter, stall_rx.
 * An unknown key is logged and ignored.
 */
static void fake_env_conn(const char *spec)
{
	struct be__fake_faults f = { 0 };
	char buf[256], *save = NULL, *kv;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		unsigned long long v;

		if (!eq) {
			be_log_warn("fake: BE_FAKE_CONN: \"%s\" is not key=value", kv);
			continue;
		}
		*eq = '\0';
		v = strtoull(eq + 1, NULL, 0);
		if (!strcmp(kv, "fail_wr"))
			f.fail_wr = v;
		else if (!strcmp(kv, "fail_status"))
			f.fail_status = (enum be_xwc_status)v;
		else if (!strcmp(kv, "fail_post"))
			f.fail_post = -abs(atoi(eq + 1));
		else if (!strcmp(kv, "break_after")) {
			f.do_break = true;
			f.break_after = v;
		} else if (!strcmp(kv, "fail_recv"))
			f.fail_recv = v;
		else if (!strcmp(kv, "recv_status"))
			f.recv_status = (enum be_xwc_status)v;
		else if (!strcmp(kv, "delay"))
			f.delay_polls = (uint32_t)v;
		else if (!strcmp(kv, "jitter"))
			f.jitter_polls = (uint32_t)v;
		else if (!strcmp(kv, "stall_rx"))
			f.stall_rx = v != 0;
		else
			be_log_warn("fake: BE_FAKE_CONN: unknown key %s", kv);
	}
	be__fake_conn_new(&f);
}

static void fake_env_once(void)
{
	const char *seed = getenv("BE_FAKE_SEED");
	const char *conn = getenv("BE_FAKE_CONN");

	if (seed)
		be__fake_seed(strtoull(seed, NULL, 0));
	if (conn)
		fake_env_conn(conn);
}

void be__fake_env_load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fake_env_once);
}
