/*
 * Check the shards of one server process and the requests routed to
 * them (src/ps/server.c), without a transport. A server hosts exactly the
 * shards placed on it; a pull or push of another shard is refused with
 * -ENXIO, a malformed one with the decoder's code, a method that does not
 * match the message's op with -EINVAL, an unknown method with -ENOSYS,
 * each without allocating a reply. A pull is answered in a buffer of the
 * caller's allocator; a pull asking a model version the shard has not
 * reached is refused with -EAGAIN (the RPC layer then tries another
 * replica). A push applies once (its retry is answered -EALREADY) and
 * its reply carries the new model version; a push whose reply buffer
 * cannot be allocated is refused with -ENOMEM and applies nothing; a
 * replica refuses pushes with -EROFS. INFO reports each hosted shard's
 * model version and decodes; its decoder refuses malformed replies.
 * CHECKPOINT writes every shard; a new server loads them with the same
 * versions and rows, and a replica following the directory picks up a
 * newer checkpoint and ignores an unchanged or older one.
 */
#include <stdlib.h>

#include "ps/server.h"
#include "pstest.h"

static const char *cfg_text = "shards 6\n"
			      "servers 2\n"
			      "place 5 0\n"
			      "table t dim=4 optimizer=sgd lr=0.5 init=uniform lo=-1 hi=1\n";

static struct be__ps_config cfg;
static int allocs, frees, fail_next;
static uint8_t req[1 << 16] __attribute__((aligned(64)));

static void *t_alloc(size_t size, void *arg)
{
	if (fail_next) {
		fail_next = 0;
		return NULL;
	}
	allocs++;
	return aligned_alloc(64, (size + 63) & ~(size_t)63);
}

static void t_free(void *p, void *arg)
{
	frees++;
	free(p);
}

static const struct be__ps_alloc ta = { t_alloc, t_free, NULL };

/* Handle and, on success, keep the reply in *@rep (caller frees). */
static int handle(struct be__ps_server *s, uint32_t method, const uint8_t *buf, size_t len,
		  const char *dir, void **rep, size_t *rlen)
{
	int before = allocs, r;

	*rep = NULL;
	*rlen = 0;
	r = be__ps_server_handle(s, method, buf, len, &ta, dir, rep, rlen);
	if (r)
		ASSERT_EQ(allocs, before); /* nothing allocated for a refusal */
	return r;
}

/* Hand the request in req (@len bytes) to @s as @method and decode its
 * reply into @m; the reply's buffer in *@rep for the caller to free
 * (t_free). Returns what the handler did (no reply unless 0). */
static int call1(struct be__ps_server *s, uint32_t method, size_t len, struct be__ps_msg *m,
		 void **rep)
{
	struct be__ps_msg q;
	const char *why;
	size_t rlen;
	int r = handle(s, method, req, len, NULL, rep, &rlen);

	if (r)
		return r;
	pt_decode(req, len, &cfg, &q);
	ASSERT_OK(be__ps_reply_decode(*rep, rlen, &q, m, &why));
	return 0;
}

static int pull1(struct be__ps_server *s, uint32_t shard, uint64_t minv, uint64_t key,
		 float *out, uint64_t *version)
{
	struct be__ps_msg m;
	void *rep;
	int r = call1(s, BE_PS_M_PULL, pt_pull(req, sizeof(req), shard, 0, minv, 0, 4, &key, 1),
		      &m, &rep);

	if (r)
		return r;
	ASSERT_EQ(m.status, 0);
	memcpy(out, m.sec[0].vals, 16);
	*version = m.version;
	t_free(rep, NULL);
	return 0;
}

static int push1(struct be__ps_server *s, uint32_t shard, uint64_t seq, uint64_t key, float g,
		 uint64_t *version)
{
	float grads[4] = { g, g, g, g };
	struct be__ps_msg m;
	void *rep;
	int r = call1(s, BE_PS_M_PUSH,
		      pt_push(req, sizeof(req), shard, 9, seq, 0, 4, &key, grads, 1), &m, &rep);

	if (r)
		return r;
	*version = m.version;
	t_free(rep, NULL);
	return m.status;
}

int main(void)
{
	struct be__ps_server *s0, *s1, *rep0;
	struct be__ps_info info;
	const char *why;
	char dir[256];
	uint64_t key, k5, v;
	uint32_t shard, bad;
	float w[4], w0[4], w1[4];
	uint8_t junk[64];
	void *rep;
	size_t rlen, len;
	int i;

	pt_config(&cfg, cfg_text);
	ASSERT_EQ(be__ps_server_create(&cfg, 2, 0, &s0), -EINVAL);
	ASSERT_EQ(be__ps_server_create(&cfg, 0, 0x100, &s0), -EINVAL);
	ASSERT_OK(be__ps_server_create(&cfg, 0, 0, &s0));
	ASSERT_OK(be__ps_server_create(&cfg, 1, 0, &s1));
	/* Shards 0, 2, 4 by default, 5 by its place line. */
	ASSERT_EQ(s0->n_local, 4);
	ASSERT_EQ(s0->local[0], 0);
	ASSERT_EQ(s0->local[3], 5);
	ASSERT_EQ(s1->n_local, 2);
	ASSERT(s1->shards[1] && s1->shards[3] && !s1->shards[5]);

	/* Routing. */
	pt_keys(&key, 1, 2, 6, 1);
	pt_keys(&k5, 1, 5, 6, 2);
	ASSERT_OK(pull1(s0, 2, 0, key, w0, &v));
	ASSERT_EQ(v, 0);
	ASSERT_EQ(pull1(s1, 2, 0, key, w, &v), -ENXIO);
	ASSERT_EQ(push1(s1, 5, 1, k5, 1.0f, &v), -ENXIO);
	ASSERT_EQ(s1->stats.not_hosted, 2);

	/* Push once, retry, version; pull sees it. */
	ASSERT_OK(push1(s0, 2, 1, key, 1.0f, &v));
	ASSERT_EQ(v, 1);
	ASSERT_EQ(push1(s0, 2, 1, key, 1.0f, &v), -EALREADY);
	ASSERT_EQ(v, 1);
	ASSERT_OK(pull1(s0, 2, 1, key, w1, &v));
	for (i = 0; i < 4; i++)
		ASSERT(w1[i] == w0[i] - 0.5f);
	/* Stale: min version 2 on a shard at 1. */
	ASSERT_EQ(pull1(s0, 2, 2, key, w, &v), -EAGAIN);
	ASSERT_EQ(s0->stats.stale, 1);

	/* No reply buffer: refused, nothing applied, the same seq applies later. */
	fail_next = 1;
	ASSERT_EQ(push1(s0, 2, 2, key, 1.0f, &v), -ENOMEM);
	ASSERT_EQ(s0->shards[2]->version, 1);
	fail_next = 1;
	ASSERT_EQ(pull1(s0, 2, 0, key, w, &v), -ENOMEM);
	ASSERT_OK(push1(s0, 2, 2, key, 1.0f, &v));
	ASSERT_EQ(v, 2);

	/* Malformed, mismatched, unknown. */
	len = pt_pull(req, sizeof(req), 2, 0, 0, 0, 4, &key, 1);
	ASSERT_EQ(handle(s0, BE_PS_M_PUSH, req, len, NULL, &rep, &rlen), -EINVAL);
	ASSERT_EQ(handle(s0, BE_PS_M_PULL, req, len - 1, NULL, &rep, &rlen), -EBADMSG);
	req[4] = 7; /* shard 7 of 6 */
	ASSERT_EQ(handle(s0, BE_PS_M_PULL, req, len, NULL, &rep, &rlen), -EINVAL);
	ASSERT_EQ(handle(s0, 99, req, len, NULL, &rep, &rlen), -ENOSYS);
	ASSERT_EQ(handle(s0, BE_PS_M_PULL, NULL, 0, NULL, &rep, &rlen), -EBADMSG);
	ASSERT_EQ(handle(s0, BE_PS_M_INFO, req, 1, NULL, &rep, &rlen), -EBADMSG);
	ASSERT_EQ(handle(s0, BE_PS_M_CHECKPOINT, NULL, 0, NULL, &rep, &rlen), -ENOTSUP);
	ASSERT_EQ(s0->stats.malformed, 5);

	/* INFO. */
	ASSERT_OK(handle(s0, BE_PS_M_INFO, NULL, 0, NULL, &rep, &rlen));
	ASSERT_OK(be__ps_info_decode(rep, rlen, &info, &why));
	ASSERT_EQ(info.index, 0);
	ASSERT_EQ(info.n_shards, 6);
	ASSERT_EQ(info.count, 4);
	be__ps_info_ent(&info, 1, &shard, &v);
	ASSERT_EQ(shard, 2);
	ASSERT_EQ(v, 2);
	ASSERT_EQ(be__ps_info_decode(rep, rlen - 1, &info, &why), -EBADMSG);
	((uint8_t *)rep)[16] = 9; /* first entry's shard 0 -> 9 >= 6 */
	ASSERT_EQ(be__ps_info_decode(rep, rlen, &info, &why), -EBADMSG);
	((uint8_t *)rep)[16] = 0;
	((uint8_t *)rep)[1] = 1;
	ASSERT_EQ(be__ps_info_decode(rep, rlen, &info, &why), -EBADMSG);
	t_free(rep, NULL);
	memset(junk, 0, sizeof(junk));
	ASSERT_EQ(be__ps_info_decode(junk, sizeof(junk), &info, &why), -EBADMSG);

	/* CHECKPOINT, load into a new server, a replica follows. */
	pt_tmpdir(dir, sizeof(dir));
	ASSERT_OK(be__ps_server_create(&cfg, 0, BE_PS_SERVER_REPLICA, &rep0));
	ASSERT_EQ(be__ps_server_follow(rep0, dir), 0);
	ASSERT_EQ(push1(rep0, 2, 1, key, 1.0f, &v), -EROFS);
	ASSERT_OK(handle(s0, BE_PS_M_CHECKPOINT, NULL, 0, dir, &rep, &rlen));
	ASSERT(!rep && !rlen);
	ASSERT_EQ(s0->stats.checkpoints, 4);
	ASSERT_EQ(be__ps_server_follow(rep0, dir), 1); /* only shard 2 is newer */
	ASSERT_EQ(be__ps_server_follow(rep0, dir), 0); /* unchanged */
	ASSERT_OK(pull1(rep0, 2, 2, key, w, &v));
	ASSERT_EQ(v, 2);
	ASSERT(w[0] == w0[0] - 1.0f);
	ASSERT_OK(push1(s0, 2, 3, key, 1.0f, &v));
	ASSERT_EQ(pull1(rep0, 2, 3, key, w, &v), -EAGAIN);
	ASSERT_OK(be__ps_server_save(s0, dir, &bad, &why));
	ASSERT_EQ(be__ps_server_follow(rep0, dir), 1);
	ASSERT_OK(pull1(rep0, 2, 3, key, w, &v));
	ASSERT_EQ(v, 3);
	ASSERT_EQ(rep0->stats.reloads, 2);

	be__ps_server_destroy(s1);
	ASSERT_OK(be__ps_server_create(&cfg, 0, 0, &s1));
	ASSERT_EQ(be__ps_server_load(s1, dir, &bad, &why), 4);
	ASSERT_EQ(s1->shards[2]->version, 3);
	ASSERT_EQ(push1(s1, 2, 3, key, 1.0f, &v), -EALREADY);
	ASSERT_OK(pull1(s1, 2, 0, key, w, &v));
	ASSERT(w[0] == w0[0] - 1.5f);
	/* A server of another placement does not host shard 2: its file is
	 * not read, shard 1 has none. */
	be__ps_server_destroy(s1);
	ASSERT_OK(be__ps_server_create(&cfg, 1, 0, &s1));
	ASSERT_EQ(be__ps_server_load(s1, dir, &bad, &why), 0);

	be__ps_server_destroy(rep0);
	be__ps_server_destroy(s1);
	be__ps_server_destroy(s0);
	ASSERT_EQ(allocs, frees);
	pt_rmdir(dir);
	be__ps_config_close(&cfg);
	return 0;
}
