/*
 * client.c - the parameter server's client (include/be/ps.h): fetches and
 * pushes split by shard into one scatter call each.
 *
 * Objects. struct be_ps holds the model's config, two channels per server
 * (fetch: every replica; push: the primary), and per logical shard the
 * push sequence numbers, the pushes unanswered and the highest model
 * version seen. One operation (struct ps_op) lives from be_ps_fetch() or
 * be_ps_push() to its completion: the slices it writes to, each slice's
 * map from the caller's positions to its unique keys, the legs, and the
 * scatter items the RPC layer writes into.
 *
 * Building an operation is synchronous: keys are deduplicated per slice
 * (an open-addressing table over the slice), every unique key gets its
 * shard, a stable counting sort over the shards orders the unique keys by
 * shard and, within a shard, by slice and first appearance, and each
 * shard's run becomes one message (more when it exceeds the model's
 * limits), its sections the runs of one slice. The reply of a leg lists
 * the values of its keys in the same order, so gathering walks the
 * sorted keys and the reply together; no key is looked up twice.
 *
 * Scratch that only the synchronous part uses (counters by shard, the
 * dedup table) belongs to the client and is reused: the client is used by
 * one thread.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <be/ps.h>

#include "ps/config.h"
#include "ps/ps_int.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "util/abi.h"
#include "util/log.h"

/* The v1 layouts of ps.h's growing structs end with these fields
 * (util/abi.h). */
#define PS_FETCH_OPTS_V1 BE__V1_SIZE(struct be_ps_fetch_opts, flags)
#define PS_PUSH_OPTS_V1 BE__V1_SIZE(struct be_ps_push_opts, timeout_us)
#define PS_RESULT_V1 BE__V1_SIZE(struct be_ps_result, duplicates)

#define PS_WINDOW BE_PS_DEDUP_WINDOW /* pushes unanswered per shard */

struct be_ps {
	struct be_rpc *rpc;
	struct be__ps_config cfg;
	uint32_t svc;
	struct be_rpc_chan **fetch_ch; /* n_servers */
	struct be_rpc_chan **push_ch;  /* n_servers; may equal fetch_ch[i] */
	uint64_t trainer;
	uint64_t *seq;    /* n_shards: the last sequence number used */
	uint64_t *seen;   /* n_shards: the highest model version seen */
	uint32_t *unans;  /* n_shards: pushes sent and not completed */
	uint32_t *cnt;    /* n_shards + 1: scratch of the counting sort */
	uint32_t *htab;   /* scratch of deduplication: unique index + 1 */
	uint32_t hcap;
};

struct ps_ent {
	uint32_t slice;
	uint32_t u; /* unique key index in its slice */
};

struct ps_leg {
	uint32_t shard;
	uint32_t e0, e1; /* sorted entries */
	uint32_t nsec;
	uint64_t seq;    /* push */
};

struct ps_slice {
	uint32_t table, dim, n, nu;
	float *out;      /* fetch: the caller's; lent until completion */
	uint32_t *pos;   /* n: position -> unique index */
	uint64_t *ukeys; /* nu unique keys (freed once the requests are built) */
	float *uvals;    /* nu x dim: fetch: values; push: summed gradients */
};

struct ps_op {
	struct be_ps *ps;
	int push;
	uint16_t pull_flags;
	be_ps_done_cb cb;
	void *arg;
	unsigned int nsl;
	struct ps_slice sl[BE_PS_MAX_TABLES];
	struct ps_ent *ents;
	uint32_t nents;
	struct ps_leg *legs;
	struct be_rpc_scatter_item *items;
	uint32_t nlegs;
};

static void op_free(struct ps_op *op)
{
	unsigned int i;

	for (i = 0; i < op->nsl; i++) {
		free(op->sl[i].pos);
		free(op->sl[i].ukeys);
		free(op->sl[i].uvals);
	}
	free(op->ents);
	free(op->legs);
	free(op->items);
	free(op);
}

/* ---- creation */

static uint64_t client_trainer_id(void)
{
	struct timespec ts;
	uint64_t x;
	FILE *f = fopen("/dev/urandom", "re");

	if (f) {
		size_t got = fread(&x, sizeof(x), 1, f);

		fclose(f);
		if (got == 1 && x)
			return x;
	}
	/* No /dev/urandom: the clock and the address of a local are unique
	 * enough between the incarnations of one trainer. */
	clock_gettime(CLOCK_REALTIME, &ts);
	x = be__ps_mix64(((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
			 (uint64_t)(uintptr_t)&ts);
	return x ? x : 1;
}

int be_ps_create(struct be_rpc *rpc, const char *config_path, struct be_rpc_naming *n,
		 const char *service, struct be_ps **out)
{
	char err[256], name[BE_RPC_NAME_MAX];
	struct be_rpc_record rec;
	struct be_ps *ps;
	uint32_t i;
	int rc;

	if (!rpc || !config_path || !n || !service || !out)
		return -EINVAL;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	rc = be__ps_config_load(config_path, &ps->cfg, err, sizeof(err));
	if (rc) {
		be_log_err("ps: %s: %s", config_path, err);
		free(ps);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	ps->rpc = rpc;
	ps->svc = be_rpc_service_id(BE_PS_SERVICE);
	ps->trainer = client_trainer_id();
	ps->fetch_ch = calloc(ps->cfg.n_servers, sizeof(*ps->fetch_ch));
	ps->push_ch = calloc(ps->cfg.n_servers, sizeof(*ps->push_ch));
	ps->seq = calloc(ps->cfg.n_shards, sizeof(*ps->seq));
	ps->seen = calloc(ps->cfg.n_shards, sizeof(*ps->seen));
	ps->unans = calloc(ps->cfg.n_shards, sizeof(*ps->unans));
	ps->cnt = calloc(ps->cfg.n_shards + 1, sizeof(*ps->cnt));
	rc = -ENOMEM;
	if (!ps->fetch_ch || !ps->push_ch || !ps->seq || !ps->seen || !ps->unans || !ps->cnt)
		goto fail;
	for (i = 0; i < ps->cfg.n_servers; i++) {
		rc = -EINVAL;
		if (snprintf(name, sizeof(name), "%s.%u.primary", service, i) >= (int)sizeof(name))
			goto fail;
		if (be_rpc_naming_get(n, name, &rec, 1) > 0) {
			if ((rc = be_rpc_chan_watch(rpc, n, name, BE_RPC_ANY_SHARD, &ps->push_ch[i])))
				goto fail;
		}
		snprintf(name, sizeof(name), "%s.%u", service, i);
		if ((rc = be_rpc_chan_watch(rpc, n, name, BE_RPC_ANY_SHARD, &ps->fetch_ch[i])))
			goto fail;
		if (!ps->push_ch[i])
			ps->push_ch[i] = ps->fetch_ch[i];
	}
	*out = ps;
	return 0;

fail:
	be_ps_destroy(ps);
	return rc;
}

void be_ps_destroy(struct be_ps *ps)
{
	uint32_t i;

	if (!ps)
		return;
	for (i = 0; ps->fetch_ch && i < ps->cfg.n_servers; i++) {
		if (ps->push_ch && ps->push_ch[i] && ps->push_ch[i] != ps->fetch_ch[i])
			be_rpc_chan_destroy(ps->push_ch[i]);
		if (ps->fetch_ch[i])
			be_rpc_chan_destroy(ps->fetch_ch[i]);
	}
	free(ps->fetch_ch);
	free(ps->push_ch);
	free(ps->seq);
	free(ps->seen);
	free(ps->unans);
	free(ps->cnt);
	free(ps->htab);
	be__ps_config_close(&ps->cfg);
	free(ps);
}

int be_ps_table(const struct be_ps *ps, const char *name)
{
	const struct be__ps_table *t = be__ps_config_table(&ps->cfg, name);

	return t ? (int)t->id : -ENOENT;
}

uint32_t be_ps_dim(const struct be_ps *ps, uint32_t table)
{
	return table < ps->cfg.n_tables ? ps->cfg.tables[table].dim : 0;
}

uint32_t be_ps_shards(const struct be_ps *ps)
{
	return ps->cfg.n_shards;
}

int be_ps_chan_stats_sized(struct be_ps *ps, uint32_t server, int push,
			   struct be_rpc_chan_stats *out)
{
	if (!ps || server >= ps->cfg.n_servers || !out)
		return -EINVAL;
	be_rpc_chan_stats_sized(push ? ps->push_ch[server] : ps->fetch_ch[server], out);
	return 0;
}

uint64_t be_ps_version_seen(const struct be_ps *ps, uint32_t shard)
{
	return shard < ps->cfg.n_shards ? ps->seen[shard] : 0;
}

/* ---- building an operation */

/*
 * Deduplicate the keys of slice @s (@keys, and for a push @grads): unique
 * keys in order of first appearance, pos[] of every position, and for a
 * push the gradients of a repeated key summed in that order.
 */
static int op_dedup(struct be_ps *ps, struct ps_slice *s, const uint64_t *keys,
		    const float *grads)
{
	uint32_t cap = 16, mask, j, u;

	while (cap < 2ull * s->n)
		cap <<= 1;
	if (cap > ps->hcap) {
		uint32_t *t = realloc(ps->htab, (size_t)cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		ps->htab = t;
		ps->hcap = cap;
	}
	memset(ps->htab, 0, (size_t)cap * sizeof(*ps->htab));
	mask = cap - 1;
	s->pos = malloc((size_t)s->n * sizeof(*s->pos));
	s->ukeys = malloc((size_t)s->n * sizeof(*s->ukeys));
	if (grads)
		s->uvals = malloc((size_t)s->n * s->dim * sizeof(float));
	if (!s->pos || !s->ukeys || (grads && !s->uvals))
		return -ENOMEM;
	s->nu = 0;
	for (j = 0; j < s->n; j++) {
		uint64_t k = keys[j];
		uint32_t h = (uint32_t)(be__ps_index_hash(k) >> 32) & mask;

		while ((u = ps->htab[h]) && s->ukeys[u - 1] != k)
			h = (h + 1) & mask;
		if (!u) {
			u = ++s->nu;
			ps->htab[h] = u;
			s->ukeys[u - 1] = k;
			if (grads)
				memcpy(s->uvals + (size_t)(u - 1) * s->dim, grads + (size_t)j * s->dim,
				       s->dim * sizeof(float));
		} else if (grads) {
			float *acc = s->uvals + (size_t)(u - 1) * s->dim;
			const float *g = grads + (size_t)j * s->dim;
			uint32_t i;

			for (i = 0; i < s->dim; i++)
				acc[i] += g[i];
		}
		s->pos[j] = u - 1;
	}
	return 0;
}

/* Sort every unique key of every slice by shard (stable) into op->ents. */
static int op_sort(struct be_ps *ps, struct ps_op *op)
{
	uint32_t n_shards = ps->cfg.n_shards, *cnt = ps->cnt, i, u, s, sum = 0;
	uint32_t *shard_of;

	op->nents = 0;
	for (i = 0; i < op->nsl; i++)
		op->nents += op->sl[i].nu;
	op->ents = malloc((size_t)op->nents * sizeof(*op->ents));
	shard_of = malloc((size_t)op->nents * sizeof(*shard_of));
	if (!op->ents || !shard_of) {
		free(shard_of);
		return -ENOMEM;
	}
	for (i = 0, sum = 0; i < op->nsl; i++)
		for (u = 0; u < op->sl[i].nu; u++) {
			s = be__ps_shard_of(op->sl[i].ukeys[u], n_shards);
			shard_of[sum++] = s;
			cnt[s + 1]++;
		}
	for (s = 0; s < n_shards; s++)
		cnt[s + 1] += cnt[s];
	for (i = 0, sum = 0; i < op->nsl; i++)
		for (u = 0; u < op->sl[i].nu; u++) {
			s = shard_of[sum++];
			op->ents[cnt[s]++] = (struct ps_ent){ i, u };
		}
	memset(cnt, 0, (size_t)(n_shards + 1) * sizeof(*cnt));
	free(shard_of);
	return 0;
}

static uint32_t op_ent_shard(const struct be_ps *ps, const struct ps_op *op, uint32_t e)
{
	const struct ps_ent *x = &op->ents[e];

	return be__ps_shard_of(op->sl[x->slice].ukeys[x->u], ps->cfg.n_shards);
}

/*
 * Cut the sorted entries into legs: one per shard, more when a shard's
 * part would pass the model's limits (keys per request, bytes of a pull
 * reply). Returns 0 or -ENOMEM.
 */
static int op_legs(struct be_ps *ps, struct ps_op *op)
{
	const struct be__ps_limits *lim = &ps->cfg.limits;
	uint32_t e = 0, cap = 16;

	op->legs = malloc(cap * sizeof(*op->legs));
	if (!op->legs)
		return -ENOMEM;
	op->nlegs = 0;
	while (e < op->nents) {
		uint32_t shard = op_ent_shard(ps, op, e), keys = 0, nsec = 0, prev = UINT32_MAX;
		uint64_t bytes = BE_PS_HDR_LEN;
		struct ps_leg *l;

		if (op->nlegs == cap) {
			struct ps_leg *t = realloc(op->legs, 2 * cap * sizeof(*t));

			if (!t)
				return -ENOMEM;
			op->legs = t;
			cap *= 2;
		}
		l = &op->legs[op->nlegs++];
		l->shard = shard;
		l->e0 = e;
		while (e < op->nents && op_ent_shard(ps, op, e) == shard) {
			uint32_t sl = op->ents[e].slice, dim = op->sl[sl].dim;
			uint64_t add;

			/* Reply bytes of this key: its values, and a section
			 * header with padding when it opens a section. */
			add = (uint64_t)dim * 4 + (sl != prev ? BE_PS_SEC_HDR_LEN + 8 : 0);
			if (keys && (keys + 1 > lim->max_keys || bytes + add > lim->max_reply_bytes))
				break;
			if (sl != prev) {
				nsec++;
				prev = sl;
			}
			bytes += add;
			keys++;
			e++;
		}
		l->e1 = e;
		l->nsec = nsec;
	}
	return 0;
}

/* Write leg @l's request into a new RPC buffer: *@buf, *@len. */
static int op_encode(struct be_ps *ps, struct ps_op *op, struct ps_leg *l, void **buf,
		     size_t *len)
{
	struct be__ps_msg m = { .op = op->push ? BE_PS_OP_PUSH : BE_PS_OP_PULL };
	uint64_t total = BE_PS_HDR_LEN;
	uint32_t e, k;
	uint8_t *p;

	m.shard = l->shard;
	m.nsec = l->nsec;
	if (op->push) {
		m.trainer = ps->trainer;
		m.seq = l->seq;
	} else {
		m.flags = op->pull_flags;
		m.version = (op->pull_flags & BE_PS_FRESH) ? ps->seen[l->shard] : 0;
		m.flags &= BE_PS_PULL_F_INFERENCE;
	}
	for (e = l->e0; e < l->e1; e = k) {
		uint32_t sl = op->ents[e].slice;

		for (k = e; k < l->e1 && op->ents[k].slice == sl; k++)
			;
		total += be__ps_sec_len(m.op, m.flags, k - e, op->sl[sl].dim);
	}
	p = be_rpc_buf_alloc((size_t)total);
	if (!p)
		return -ENOMEM;
	be__ps_hdr_put(p, &m);
	*buf = p;
	*len = (size_t)total;
	p += BE_PS_HDR_LEN;
	for (e = l->e0; e < l->e1; e = k) {
		const struct ps_slice *s = &op->sl[op->ents[e].slice];
		uint32_t n, i;
		uint64_t vb;

		for (k = e; k < l->e1 && op->ents[k].slice == op->ents[e].slice; k++)
			;
		n = k - e;
		be__ps_sec_put(p, s->table, s->dim, n, 0);
		p += BE_PS_SEC_HDR_LEN;
		for (i = 0; i < n; i++)
			be__ps_put64(p + 8 * (size_t)i, s->ukeys[op->ents[e + i].u]);
		p += 8 * (size_t)n;
		if (!op->push)
			continue;
		for (i = 0; i < n; i++)
			memcpy(p + (size_t)i * s->dim * 4, s->uvals + (size_t)op->ents[e + i].u * s->dim,
			       (size_t)s->dim * 4);
		vb = (uint64_t)n * s->dim * 4;
		memset(p + vb, 0, be__ps_pad8(vb) - vb);
		p += be__ps_pad8(vb);
	}
	return 0;
}

/* ---- completion */

/* The request leg @l sent, as the reply decoder wants it (no arrays). */
static void op_leg_msg(const struct be_ps *ps, const struct ps_op *op, const struct ps_leg *l,
		       struct be__ps_msg *m)
{
	uint32_t e, k;

	memset(m, 0, offsetof(struct be__ps_msg, sec));
	m->op = op->push ? BE_PS_OP_PUSH : BE_PS_OP_PULL;
	m->shard = l->shard;
	if (op->push) {
		m->trainer = ps->trainer;
		m->seq = l->seq;
	} else {
		m->flags = op->pull_flags & BE_PS_PULL_F_INFERENCE;
	}
	for (e = l->e0; e < l->e1; e = k) {
		const struct ps_slice *s = &op->sl[op->ents[e].slice];

		for (k = e; k < l->e1 && op->ents[k].slice == op->ents[e].slice; k++)
			;
		m->sec[m->nsec].table = s->table;
		m->sec[m->nsec].dim = s->dim;
		m->sec[m->nsec].n = k - e;
		m->nsec++;
	}
}

/* Check leg @l's reply and take what it says. Returns its status. */
static int op_leg_done(struct be_ps *ps, struct ps_op *op, struct ps_leg *l,
		       const struct be_rpc_scatter_item *it, struct be_ps_result *res)
{
	struct be__ps_msg q, m;
	const char *why;
	uint32_t e, i;
	int rc;

	if (it->status)
		return it->status;
	op_leg_msg(ps, op, l, &q);
	rc = be__ps_reply_decode(it->reply, it->reply_len, &q, &m, &why);
	if (rc) {
		be_log_warn("ps: shard %u: bad reply: %s", l->shard, why);
		return -EBADMSG;
	}
	if (m.version > ps->seen[l->shard])
		ps->seen[l->shard] = m.version;
	if (op->push) {
		if (m.status == -EALREADY) {
			res->duplicates++;
			return 0;
		}
		return m.status;
	}
	if (m.status)
		return m.status;
	e = l->e0;
	for (i = 0; i < m.nsec; i++) {
		const struct be__ps_sec *sec = &m.sec[i];
		uint32_t j;

		res->missing += sec->n_missing;
		for (j = 0; j < sec->n; j++, e++) {
			struct ps_slice *s = &op->sl[op->ents[e].slice];

			memcpy(s->uvals + (size_t)op->ents[e].u * s->dim,
			       sec->vals + (size_t)j * s->dim * 4, (size_t)s->dim * 4);
		}
	}
	return 0;
}

static void op_scatter_done(struct be_rpc_scatter_item *items, unsigned int n, int status,
			    void *arg)
{
	struct ps_op *op = arg;
	struct be_ps *ps = op->ps;
	struct be_ps_result res = { .size = sizeof(res), .legs = op->nlegs,
				    .unique_keys = op->nents };
	int first = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		int rc = op_leg_done(ps, op, &op->legs[i], &items[i], &res);

		if (op->push)
			ps->unans[op->legs[i].shard]--;
		if (rc) {
			res.legs_failed++;
			if (!first)
				first = rc;
		}
		be_rpc_buf_free(items[i].reply);
	}
	if (status)
		first = status; /* the first failure in time, as the RPC layer saw it */
	if (!first && !op->push) {
		for (i = 0; i < op->nsl; i++) {
			struct ps_slice *s = &op->sl[i];
			uint32_t j;

			for (j = 0; j < s->n; j++)
				memcpy(s->out + (size_t)j * s->dim, s->uvals + (size_t)s->pos[j] * s->dim,
				       (size_t)s->dim * 4);
		}
	}
	op->cb(first, &res, op->arg);
	op_free(op);
}

/* ---- starting an operation */

static int op_start(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n, int push,
		    uint32_t flags, uint32_t timeout_us, be_ps_done_cb cb, void *arg)
{
	struct be_rpc_call_opts ro = { .timeout_us = timeout_us, .flags = BE_RPC_IDEMPOTENT };
	uint64_t seen_tables = 0;
	struct ps_op *op;
	uint32_t i, keys = 0;
	int rc;

	if (!ps || !sl || !n || n > BE_PS_MAX_TABLES || !cb)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (sl[i].table >= ps->cfg.n_tables || (seen_tables & (1ull << sl[i].table)) ||
		    (sl[i].n && (!sl[i].keys || !sl[i].vals)))
			return -EINVAL;
		seen_tables |= 1ull << sl[i].table;
		keys += sl[i].n;
		if (push) {
			uint64_t j, m = (uint64_t)sl[i].n * ps->cfg.tables[sl[i].table].dim;

			for (j = 0; j < m; j++)
				if (!isfinite(sl[i].vals[j]))
					return -EINVAL;
		}
	}
	if (!keys)
		return -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->ps = ps;
	op->push = push;
	op->pull_flags = (uint16_t)flags;
	op->cb = cb;
	op->arg = arg;
	rc = -ENOMEM;
	for (i = 0; i < n; i++) {
		struct ps_slice *s;

		if (!sl[i].n)
			continue;
		s = &op->sl[op->nsl++];
		s->table = sl[i].table;
		s->dim = ps->cfg.tables[s->table].dim;
		s->n = sl[i].n;
		s->out = sl[i].vals;
		if ((rc = op_dedup(ps, s, sl[i].keys, push ? sl[i].vals : NULL)))
			goto fail;
		if (!push && !(s->uvals = malloc((size_t)s->nu * s->dim * sizeof(float))))
			goto fail;
	}
	if ((rc = op_sort(ps, op)) || (rc = op_legs(ps, op)))
		goto fail;
	if (push) {
		/* The window: at most 64 unanswered per shard, counting the
		 * legs of this push (docs/PS.md, section 5). */
		for (i = 0; i < op->nlegs; i++)
			ps->cnt[op->legs[i].shard]++;
		rc = 0;
		for (i = 0; i < op->nlegs; i++)
			if (ps->unans[op->legs[i].shard] + ps->cnt[op->legs[i].shard] > PS_WINDOW)
				rc = -EAGAIN;
		for (i = 0; i < op->nlegs; i++)
			ps->cnt[op->legs[i].shard] = 0;
		if (rc)
			goto fail;
		ro.timeout_us = timeout_us;
	} else {
		ro.timeout_us = timeout_us ? timeout_us : BE_PS_FETCH_TIMEOUT_US;
	}
	op->items = calloc(op->nlegs, sizeof(*op->items));
	if (!op->items) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < op->nlegs; i++) {
		struct ps_leg *l = &op->legs[i];
		struct be_rpc_scatter_item *it = &op->items[i];
		uint32_t server = be__ps_server_of(&ps->cfg, l->shard);

		if (push)
			l->seq = ps->seq[l->shard] + 1;
		if ((rc = op_encode(ps, op, l, &it->req, &it->len)))
			goto fail_items;
		if (push)
			ps->seq[l->shard]++;
		it->ch = push ? ps->push_ch[server] : ps->fetch_ch[server];
		it->service = ps->svc;
		it->method = push ? BE_PS_M_PUSH : BE_PS_M_PULL;
	}
	/* The unique keys were needed only to build the requests. */
	for (i = 0; i < op->nsl; i++) {
		free(op->sl[i].ukeys);
		op->sl[i].ukeys = NULL;
		if (push) {
			free(op->sl[i].uvals);
			op->sl[i].uvals = NULL;
		}
	}
	rc = be_rpc_scatter(ps->rpc, op->items, op->nlegs, &ro, op_scatter_done, op, NULL);
	if (rc)
		goto fail_items;
	if (push)
		for (i = 0; i < op->nlegs; i++)
			ps->unans[op->legs[i].shard]++;
	return 0;

fail_items:
	/* Nothing was sent: give back the sequence numbers, newest first,
	 * so the shards see no gap. */
	for (i = op->nlegs; i--;) {
		if (!op->items[i].req)
			continue;
		be_rpc_buf_free(op->items[i].req);
		if (push)
			ps->seq[op->legs[i].shard]--;
	}
fail:
	op_free(op);
	return rc;
}

/* The caller's options (NULL: all 0) as the library's full-size structs;
 * -EINVAL for a bad size or unknown flags. */
static int fetch_opts(struct be_ps_fetch_opts *o, const struct be_ps_fetch_opts *user)
{
	*o = (struct be_ps_fetch_opts){ .size = sizeof(*o) };
	if (user && be__abi_read(o, sizeof(*o), user, PS_FETCH_OPTS_V1))
		return -EINVAL;
	return o->flags & ~(uint32_t)(BE_PS_INFERENCE | BE_PS_FRESH) ? -EINVAL : 0;
}

static int push_opts(struct be_ps_push_opts *o, const struct be_ps_push_opts *user)
{
	*o = (struct be_ps_push_opts){ .size = sizeof(*o) };
	return user ? be__abi_read(o, sizeof(*o), user, PS_PUSH_OPTS_V1) : 0;
}

int be_ps_fetch(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
		const struct be_ps_fetch_opts *opts, be_ps_done_cb cb, void *arg)
{
	struct be_ps_fetch_opts o;
	int rc = fetch_opts(&o, opts);

	return rc ? rc : op_start(ps, sl, n, 0, o.flags, o.timeout_us, cb, arg);
}

int be_ps_push(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
	       const struct be_ps_push_opts *opts, be_ps_done_cb cb, void *arg)
{
	struct be_ps_push_opts o;
	int rc = push_opts(&o, opts);

	return rc ? rc : op_start(ps, sl, n, 1, 0, o.timeout_us, cb, arg);
}

/* ---- waiting */

/* The result of a waited operation lives on the heap: should the worker
 * break while waiting, the waiter leaves and the completion, whenever it
 * comes, frees it. */
struct ps_sync {
	int done;
	int abandoned;
	int status;
	struct be_ps_result res;
};

static void ps_sync_cb(int status, const struct be_ps_result *res, void *arg)
{
	struct ps_sync *w = arg;

	if (w->abandoned) {
		free(w);
		return;
	}
	w->status = status;
	w->res = *res;
	w->done = 1;
}

static int ps_wait(struct be_ps *ps, struct ps_sync *w, struct be_ps_result *res)
{
	int rc = 0;

	while (!w->done) {
		rc = be_worker_wait(be_rpc_worker(ps->rpc), 100);
		if (rc < 0 && !w->done) {
			w->abandoned = 1;
			return rc;
		}
	}
	if (res)
		be__abi_write(res, &w->res, sizeof(w->res), PS_RESULT_V1);
	rc = w->status;
	free(w);
	return rc;
}

static int ps_sync(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n, int push,
		   uint32_t flags, uint32_t timeout_us, struct be_ps_result *res)
{
	struct ps_sync *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	rc = op_start(ps, sl, n, push, flags, timeout_us, ps_sync_cb, w);
	if (rc) {
		free(w);
		return rc;
	}
	return ps_wait(ps, w, res);
}

int be_ps_fetch_sync_sized(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
			   const struct be_ps_fetch_opts *opts, struct be_ps_result *res)
{
	struct be_ps_fetch_opts o;
	int rc = fetch_opts(&o, opts);

	return rc ? rc : ps_sync(ps, sl, n, 0, o.flags, o.timeout_us, res);
}

int be_ps_push_sync_sized(struct be_ps *ps, const struct be_ps_slice *sl, unsigned int n,
			  const struct be_ps_push_opts *opts, struct be_ps_result *res)
{
	struct be_ps_push_opts o;
	int rc = push_opts(&o, opts);

	return rc ? rc : ps_sync(ps, sl, n, 1, 0, o.timeout_us, res);
}
