/*
 * server.c - the shards of one server process and the requests routed to
 * them (model in server.h).
 *
 * A request is decoded against the config before anything else, so a
 * malformed one is refused with the decoder's code and touches no shard.
 * The reply buffer is taken from the caller's allocator before a push is
 * applied: a push whose reply could not be built has applied nothing,
 * and the trainer's retry under the same sequence number is applied once.
 * (Were the order reversed, the retry would still be answered -EALREADY,
 * but a reply that cannot be allocated should not follow work that was.)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ps/ckpt.h"
#include "ps/serve.h"
#include "ps/server.h"

int be__ps_server_create(const struct be__ps_config *cfg, uint32_t index, uint32_t flags,
			 struct be__ps_server **out)
{
	struct be__ps_server *s;
	uint32_t i, n = 0;
	int err = -ENOMEM;

	if (index >= cfg->n_servers || (flags & ~BE_PS_SERVER_REPLICA))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->index = index;
	s->flags = flags;
	s->shards = calloc(cfg->n_shards, sizeof(*s->shards));
	for (i = 0; i < cfg->n_shards; i++)
		n += be__ps_server_of(cfg, i) == index;
	s->local = calloc(n ? n : 1, sizeof(*s->local));
	s->ckpt_stamp = calloc(n ? n : 1, sizeof(*s->ckpt_stamp));
	if (!s->shards || !s->local || !s->ckpt_stamp)
		goto fail;
	for (i = 0; i < cfg->n_shards; i++) {
		if (be__ps_server_of(cfg, i) != index)
			continue;
		if ((err = be__ps_shard_create(cfg, i, &s->shards[i])))
			goto fail;
		s->local[s->n_local++] = i;
	}
	*out = s;
	return 0;

fail:
	be__ps_server_destroy(s);
	return err;
}

void be__ps_server_destroy(struct be__ps_server *s)
{
	uint32_t i;

	if (!s)
		return;
	for (i = 0; s->shards && i < s->n_local; i++)
		be__ps_shard_destroy(s->shards[s->local[i]]);
	free(s->shards);
	free(s->local);
	free(s->ckpt_stamp);
	free(s);
}

int be__ps_server_load(struct be__ps_server *s, const char *dir, uint32_t *bad_shard,
		       const char **why)
{
	struct be__ps_shard **fresh = calloc(s->n_local ? s->n_local : 1, sizeof(*fresh));
	uint32_t i;
	int err = 0, loaded = 0;

	if (!fresh)
		return -ENOMEM;
	for (i = 0; i < s->n_local; i++) {
		err = be__ps_ckpt_load(s->cfg, s->local[i], dir, &fresh[i], why);
		if (err == -ENOENT) {
			err = 0;
			continue;
		}
		if (err) {
			*bad_shard = s->local[i];
			break;
		}
		loaded++;
	}
	for (i = 0; i < s->n_local; i++) {
		uint32_t id = s->local[i];

		if (!fresh[i])
			continue;
		if (err) {
			be__ps_shard_destroy(fresh[i]);
			continue;
		}
		be__ps_shard_destroy(s->shards[id]);
		s->shards[id] = fresh[i];
	}
	free(fresh);
	return err ? err : loaded;
}

int be__ps_server_save(struct be__ps_server *s, const char *dir, uint32_t *bad_shard,
		       const char **why)
{
	const char *w = NULL;
	uint32_t i;
	int first = 0, err;

	for (i = 0; i < s->n_local; i++) {
		err = be__ps_ckpt_save(s->shards[s->local[i]], dir, &w);
		if (!err) {
			s->stats.checkpoints++;
			continue;
		}
		s->stats.ckpt_errors++;
		if (!first) {
			first = err;
			*bad_shard = s->local[i];
			*why = w;
		}
	}
	return first;
}

/* What identifies one version of a checkpoint file: a new file (rename)
 * has a new inode, and its mtime and size are those of its writing. */
static uint64_t server_stamp(const struct stat *st)
{
	uint64_t h = (uint64_t)st->st_ino;

	h = h * 0x100000001b3ull ^ (uint64_t)st->st_size;
	h = h * 0x100000001b3ull ^ (uint64_t)st->st_mtim.tv_sec;
	h = h * 0x100000001b3ull ^ (uint64_t)st->st_mtim.tv_nsec;
	return h | 1; /* 0 means "never seen" */
}

int be__ps_server_follow(struct be__ps_server *s, const char *dir)
{
	char path[4096];
	struct be__ps_shard *fresh;
	struct stat st;
	const char *why;
	uint32_t i;
	int n = 0;

	for (i = 0; i < s->n_local; i++) {
		uint32_t id = s->local[i];
		uint64_t stamp;

		if (be__ps_ckpt_path(path, sizeof(path), dir, id) || stat(path, &st))
			continue;
		stamp = server_stamp(&st);
		if (stamp == s->ckpt_stamp[i])
			continue;
		s->ckpt_stamp[i] = stamp;
		if (be__ps_ckpt_load(s->cfg, id, dir, &fresh, &why)) {
			s->stats.reload_errors++;
			/* The stamp stays: writers rename whole files
			 * into place, so a file that fails to load is bad
			 * as it stands; it is tried again once replaced. */
			continue;
		}
		if (fresh->version <= s->shards[id]->version) {
			be__ps_shard_destroy(fresh);
			continue;
		}
		be__ps_shard_destroy(s->shards[id]);
		s->shards[id] = fresh;
		s->stats.reloads++;
		n++;
	}
	return n;
}

/* ---- INFO */

size_t be__ps_info_len(const struct be__ps_server *s)
{
	return BE_PS_INFO_HDR_LEN + (size_t)s->n_local * BE_PS_INFO_ENT_LEN;
}

/* Header: version u8, zero u8, zero u16, index u32, n_shards u32, flags
 * u16, zero u16 -- then count = (len - 16) / 16 entries. */
void be__ps_info_put(const struct be__ps_server *s, uint8_t *buf)
{
	uint32_t i;

	memset(buf, 0, BE_PS_INFO_HDR_LEN);
	buf[0] = BE_PS_INFO_VERSION;
	be__ps_put32(buf + 4, s->index);
	be__ps_put32(buf + 8, s->cfg->n_shards);
	be__ps_put16(buf + 12, (uint16_t)s->flags);
	for (i = 0; i < s->n_local; i++) {
		uint8_t *e = buf + BE_PS_INFO_HDR_LEN + (size_t)i * BE_PS_INFO_ENT_LEN;

		be__ps_put32(e, s->local[i]);
		be__ps_put32(e + 4, 0);
		be__ps_put64(e + 8, s->shards[s->local[i]]->version);
	}
}

int be__ps_info_decode(const uint8_t *buf, size_t len, struct be__ps_info *out,
		       const char **why)
{
	uint32_t i, prev = 0, shard;
	uint64_t v;

	if (len < BE_PS_INFO_HDR_LEN || (len - BE_PS_INFO_HDR_LEN) % BE_PS_INFO_ENT_LEN) {
		*why = "INFO reply: length";
		return -EBADMSG;
	}
	if (buf[0] != BE_PS_INFO_VERSION || buf[1] || be__ps_get16(buf + 2) ||
	    be__ps_get16(buf + 14) || (be__ps_get16(buf + 12) & ~BE_PS_SERVER_REPLICA)) {
		*why = "INFO reply: version, flags or reserved fields";
		return -EBADMSG;
	}
	out->index = be__ps_get32(buf + 4);
	out->n_shards = be__ps_get32(buf + 8);
	out->flags = be__ps_get16(buf + 12);
	out->count = (uint32_t)((len - BE_PS_INFO_HDR_LEN) / BE_PS_INFO_ENT_LEN);
	out->ents = buf + BE_PS_INFO_HDR_LEN;
	if (!out->n_shards || out->n_shards > BE_PS_MAX_SHARDS || out->count > out->n_shards) {
		*why = "INFO reply: shard count";
		return -EBADMSG;
	}
	for (i = 0; i < out->count; i++) {
		be__ps_info_ent(out, i, &shard, &v);
		if (shard >= out->n_shards || (i && shard <= prev) ||
		    be__ps_get32(out->ents + (size_t)i * BE_PS_INFO_ENT_LEN + 4)) {
			*why = "INFO reply: shards out of order or range";
			return -EBADMSG;
		}
		prev = shard;
	}
	return 0;
}

/* ---- requests */

static int server_pull(struct be__ps_server *s, struct be__ps_shard *sh,
		       const struct be__ps_msg *m, const struct be__ps_alloc *a, void **reply,
		       size_t *len_out)
{
	uint64_t len = be__ps_pull_reply_len(m);
	int64_t r;
	void *buf;

	if (m->version > sh->version) {
		sh->stats.stale++;
		s->stats.stale++;
		return -EAGAIN;
	}
	buf = a->alloc((size_t)len, a->arg);
	if (!buf) {
		s->stats.no_memory++;
		return -ENOMEM;
	}
	r = be__ps_shard_pull(sh, m, buf, (size_t)len);
	if (r < 0) {
		/* Cannot happen for a request decoded against this config
		 * and a buffer of the reply's length; refuse rather than
		 * send an undefined buffer. */
		a->free(buf, a->arg);
		return (int)r;
	}
	*reply = buf;
	*len_out = (size_t)r;
	return 0;
}

static int server_push(struct be__ps_server *s, struct be__ps_shard *sh,
		       const struct be__ps_msg *m, const struct be__ps_alloc *a, void **reply,
		       size_t *len_out)
{
	struct be__ps_msg r = {
		.op = BE_PS_OP_PUSH_REPLY,
		.shard = m->shard,
		.trainer = m->trainer,
		.seq = m->seq,
	};
	uint8_t *buf;
	int rc;

	if (s->flags & BE_PS_SERVER_REPLICA) {
		s->stats.read_only++;
		return -EROFS;
	}
	buf = a->alloc(BE_PS_HDR_LEN, a->arg);
	if (!buf) {
		s->stats.no_memory++;
		return -ENOMEM;
	}
	rc = be__ps_shard_push(sh, m);
	r.status = rc;
	r.version = sh->version;
	be__ps_hdr_put(buf, &r);
	*reply = buf;
	*len_out = BE_PS_HDR_LEN;
	return 0;
}

int be__ps_server_handle(struct be__ps_server *s, uint32_t method, const uint8_t *req,
			 size_t len, const struct be__ps_alloc *a, const char *ckpt_dir,
			 void **reply, size_t *len_out)
{
	struct be__ps_msg m;
	struct be__ps_shard *sh;
	const char *why;
	uint32_t bad;
	int err;

	s->stats.requests++;
	switch (method) {
	case BE_PS_M_PULL:
	case BE_PS_M_PUSH:
		break;
	case BE_PS_M_INFO:
		if (len) {
			s->stats.malformed++;
			return -EBADMSG;
		}
		*reply = a->alloc(be__ps_info_len(s), a->arg);
		if (!*reply) {
			s->stats.no_memory++;
			return -ENOMEM;
		}
		be__ps_info_put(s, *reply);
		*len_out = be__ps_info_len(s);
		return 0;
	case BE_PS_M_CHECKPOINT:
		if (len) {
			s->stats.malformed++;
			return -EBADMSG;
		}
		if (!ckpt_dir)
			return -ENOTSUP;
		if ((err = be__ps_server_save(s, ckpt_dir, &bad, &why)))
			return err;
		*reply = NULL;
		*len_out = 0;
		return 0;
	default:
		return -ENOSYS;
	}
	if ((err = be__ps_req_decode(req, len, s->cfg, &m, &why))) {
		s->stats.malformed++;
		return err;
	}
	/* The op must match the method: a PUSH sent as a pull would
	 * otherwise slip past a replica's read-only rule. */
	if (m.op != (method == BE_PS_M_PULL ? BE_PS_OP_PULL : BE_PS_OP_PUSH)) {
		s->stats.malformed++;
		return -EINVAL;
	}
	sh = s->shards[m.shard];
	if (!sh) {
		s->stats.not_hosted++;
		return -ENXIO;
	}
	if (m.op == BE_PS_OP_PULL)
		return server_pull(s, sh, &m, a, reply, len_out);
	return server_push(s, sh, &m, a, reply, len_out);
}
