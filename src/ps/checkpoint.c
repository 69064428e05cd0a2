/*
 * checkpoint.c - saving and loading one shard (ckpt.h; byte layout in
 * docs/PS.md, "Checkpoint file").
 *
 * File: a 64-byte header, one 96-byte record per table, the dedup
 * entries, each table's rows, an 8-byte trailer. The header's CRC covers
 * the header and the table records and is checked before any of their
 * fields is believed; the trailer's CRC covers everything between, and is
 * computed while the body streams through a 1 MiB buffer, so neither side
 * holds the file in memory. The header gives the file's exact length,
 * checked against the file's size before the body is read: a truncated
 * file is refused as such, before anything is allocated for it.
 *
 * Durability: write the temporary file, fsync it, rename it over the
 * checkpoint, fsync the directory (so the rename itself survives a
 * crash). rename() is atomic, so readers see the old file or the new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps/ckpt.h"

#define CKPT_BUF (1u << 20)

int be__ps_ckpt_path(char *buf, size_t len, const char *dir, uint32_t shard)
{
	int n = snprintf(buf, len, "%s/shard-%05u.ckpt", dir, shard);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Bytes of one row in the file: key, values, state (no padding). */
static uint64_t ckpt_rec_len(const struct be__ps_store *st)
{
	return 8 + 4ull * (st->dim + st->state_floats);
}

/* ---- writing ---- */

struct ckpt_out {
	int fd;
	uint8_t *buf;
	size_t used;
	uint32_t crc; /* of the body, as it is flushed */
	bool body;    /* flushed bytes count into crc */
};

static int out_write(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int out_flush(struct ckpt_out *o)
{
	int err;

	if (o->body)
		o->crc = be__crc32c(o->crc, o->buf, o->used);
	err = out_write(o->fd, o->buf, o->used);
	o->used = 0;
	return err;
}

/* Append @n (<= CKPT_BUF) bytes. */
static int out_put(struct ckpt_out *o, const void *p, size_t n)
{
	int err;

	if (o->used + n > CKPT_BUF && (err = out_flush(o)))
		return err;
	memcpy(o->buf + o->used, p, n);
	o->used += n;
	return 0;
}

/* Header and table records, with the header's CRC over both. */
static void ckpt_header(const struct be__ps_shard *sh, uint64_t file_len, uint8_t *h)
{
	const struct be__ps_config *cfg = sh->cfg;
	uint32_t i, crc;

	memset(h, 0, BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * cfg->n_tables);
	memcpy(h, BE_PS_CKPT_MAGIC, 8);
	be__ps_put32(h + 8, BE_PS_CKPT_VERSION);
	be__ps_put32(h + 12, BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * cfg->n_tables);
	be__ps_put32(h + 16, sh->id);
	be__ps_put32(h + 20, cfg->n_shards);
	be__ps_put64(h + 24, sh->version);
	be__ps_put32(h + 32, cfg->n_tables);
	be__ps_put32(h + 36, sh->dedup.count);
	be__ps_put64(h + 40, file_len);
	for (i = 0; i < cfg->n_tables; i++) {
		const struct be__ps_store *st = &sh->stores[i];
		uint8_t *r = h + BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * i;

		memcpy(r, cfg->tables[i].name, strlen(cfg->tables[i].name));
		be__ps_put32(r + 64, i);
		be__ps_put32(r + 68, st->dim);
		be__ps_put32(r + 72, cfg->tables[i].opt.kind);
		be__ps_put32(r + 76, st->state_floats);
		be__ps_put64(r + 80, st->rows);
	}
	crc = be__crc32c(0, h, 60);
	crc = be__crc32c(crc, h + BE_PS_CKPT_HDR_LEN, BE_PS_CKPT_TABLE_LEN * cfg->n_tables);
	be__ps_put32(h + 60, crc);
}

static int ckpt_body(const struct be__ps_shard *sh, struct ckpt_out *o)
{
	uint8_t e[BE_PS_CKPT_TRAINER_LEN];
	uint32_t i;
	uint64_t r;
	int err;

	for (i = 0; i < sh->dedup.cap; i++) {
		const struct be__ps_dedup_entry *d = &sh->dedup.slots[i];

		if (!d->trainer)
			continue;
		be__ps_put64(e, d->trainer);
		be__ps_put64(e + 8, d->hi);
		be__ps_put64(e + 16, d->map);
		be__ps_put64(e + 24, d->last);
		if ((err = out_put(o, e, sizeof(e))))
			return err;
	}
	for (i = 0; i < sh->cfg->n_tables; i++) {
		const struct be__ps_store *st = &sh->stores[i];
		size_t rec = (size_t)ckpt_rec_len(st);

		for (r = 0; r < st->rows; r++)
			if ((err = out_put(o, be__ps_store_row(st, (uint32_t)r), rec)))
				return err;
	}
	return 0;
}

static int ckpt_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

int be__ps_ckpt_save(const struct be__ps_shard *sh, const char *dir, const char **why)
{
	const struct be__ps_config *cfg = sh->cfg;
	uint8_t hdr[BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * BE_PS_MAX_TABLES];
	size_t hdr_len = BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * cfg->n_tables;
	char path[4096], tmp[4096 + 32];
	struct ckpt_out o = { .fd = -1 };
	uint8_t trailer[BE_PS_CKPT_TRAILER_LEN];
	uint64_t len = hdr_len + (uint64_t)BE_PS_CKPT_TRAINER_LEN * sh->dedup.count +
		       BE_PS_CKPT_TRAILER_LEN;
	uint32_t i;
	int err;

	for (i = 0; i < cfg->n_tables; i++)
		len += sh->stores[i].rows * ckpt_rec_len(&sh->stores[i]);
	*why = "path too long";
	if ((err = be__ps_ckpt_path(path, sizeof(path), dir, sh->id)))
		return err;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	*why = "out of memory";
	o.buf = malloc(CKPT_BUF);
	if (!o.buf)
		return -ENOMEM;
	*why = "create the temporary file";
	o.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o.fd < 0) {
		err = -errno;
		goto fail_open;
	}
	*why = "write";
	ckpt_header(sh, len, hdr);
	if ((err = out_write(o.fd, hdr, hdr_len)))
		goto fail;
	o.body = true;
	if ((err = ckpt_body(sh, &o)) || (err = out_flush(&o)))
		goto fail;
	be__ps_put32(trailer, o.crc);
	be__ps_put32(trailer + 4, BE_PS_CKPT_END);
	if ((err = out_write(o.fd, trailer, sizeof(trailer))))
		goto fail;
	*why = "fsync the temporary file";
	if (fsync(o.fd)) {
		err = -errno;
		goto fail;
	}
	*why = "close the temporary file";
	err = close(o.fd) ? -errno : 0;
	o.fd = -1;
	if (err)
		goto fail;
	*why = "rename over the checkpoint";
	if (rename(tmp, path)) {
		err = -errno;
		goto fail;
	}
	free(o.buf);
	*why = "fsync the directory";
	return ckpt_fsync_dir(dir);

fail:
	if (o.fd >= 0)
		close(o.fd);
	unlink(tmp);
fail_open:
	free(o.buf);
	return err;
}

/* ---- reading ---- */

struct ckpt_in {
	int fd;
	uint8_t *buf;
	size_t pos, len; /* unread bytes: buf[pos .. len) */
	uint64_t left;   /* body bytes not yet read from the file */
	uint32_t crc;    /* of the body bytes read so far */
};

/* The next @n (<= CKPT_BUF) body bytes, contiguous, or NULL with -ENODATA
 * when the file ends early (it shrank after the size check). */
static const uint8_t *in_get(struct ckpt_in *in, size_t n, int *err)
{
	const uint8_t *p;

	if (in->len - in->pos < n) {
		memmove(in->buf, in->buf + in->pos, in->len - in->pos);
		in->len -= in->pos;
		in->pos = 0;
		while (in->len < n) {
			size_t want = CKPT_BUF - in->len;
			ssize_t r;

			if (want > in->left)
				want = (size_t)in->left;
			r = want ? read(in->fd, in->buf + in->len, want) : 0;
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				*err = r < 0 ? -errno : -ENODATA;
				return NULL;
			}
			in->crc = be__crc32c(in->crc, in->buf + in->len, (size_t)r);
			in->len += (size_t)r;
			in->left -= (uint64_t)r;
		}
	}
	p = in->buf + in->pos;
	in->pos += n;
	return p;
}

static int read_exact(int fd, void *buf, size_t n, uint64_t off)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ENODATA;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

#define FAIL(code, msg)                                                      \
	do {                                                                 \
		*why = msg;                                                  \
		return code;                                                 \
	} while (0)

/* Header and table records: read, checksummed, checked against @cfg.
 * Sets *@rows (per table), *@version, *@trainers, *@file_len. */
static int ckpt_read_header(int fd, uint64_t size, const struct be__ps_config *cfg,
			    uint32_t shard, uint64_t *rows, uint64_t *version,
			    uint32_t *trainers, uint64_t *file_len, const char **why)
{
	uint8_t h[BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * BE_PS_MAX_TABLES];
	uint32_t n_tables, hdr_len, i, crc;
	uint64_t expect;
	int err;

	if (size < BE_PS_CKPT_HDR_LEN)
		FAIL(-ENODATA, "truncated: shorter than the header");
	if ((err = read_exact(fd, h, BE_PS_CKPT_HDR_LEN, 0)))
		FAIL(err, "read the header");
	if (memcmp(h, BE_PS_CKPT_MAGIC, 8))
		FAIL(-EBADMSG, "not a checkpoint (magic)");
	n_tables = be__ps_get32(h + 32);
	hdr_len = be__ps_get32(h + 12);
	if (n_tables > BE_PS_MAX_TABLES ||
	    hdr_len != BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * n_tables)
		FAIL(-EBADMSG, "corrupt header (table count)");
	if (size < hdr_len)
		FAIL(-ENODATA, "truncated: shorter than the header");
	if ((err = read_exact(fd, h + BE_PS_CKPT_HDR_LEN, hdr_len - BE_PS_CKPT_HDR_LEN,
			      BE_PS_CKPT_HDR_LEN)))
		FAIL(err, "read the header");
	crc = be__crc32c(0, h, 60);
	crc = be__crc32c(crc, h + BE_PS_CKPT_HDR_LEN, hdr_len - BE_PS_CKPT_HDR_LEN);
	if (crc != be__ps_get32(h + 60))
		FAIL(-EBADMSG, "header checksum mismatch");
	/* From here on the header is what a writer wrote. */
	if (be__ps_get32(h + 8) != BE_PS_CKPT_VERSION)
		FAIL(-ENOTSUP, "unsupported checkpoint version");
	if (be__ps_get32(h + 48) || be__ps_get32(h + 52) || be__ps_get32(h + 56))
		FAIL(-EBADMSG, "reserved header field not zero");
	*version = be__ps_get64(h + 24);
	*trainers = be__ps_get32(h + 36);
	*file_len = be__ps_get64(h + 40);
	if (size < *file_len)
		FAIL(-ENODATA, "truncated: shorter than its header says");
	if (size > *file_len)
		FAIL(-EBADMSG, "bytes after the end");
	if (be__ps_get32(h + 16) != shard)
		FAIL(-EINVAL, "checkpoint of another shard");
	if (be__ps_get32(h + 20) != cfg->n_shards)
		FAIL(-EINVAL, "checkpoint of another shard count");
	if (n_tables != cfg->n_tables)
		FAIL(-EINVAL, "checkpoint with other tables (count)");
	if (*trainers > cfg->dedup.max_trainers)
		FAIL(-ENOSPC, "more trainers than max_trainers");
	expect = hdr_len + (uint64_t)BE_PS_CKPT_TRAINER_LEN * *trainers + BE_PS_CKPT_TRAILER_LEN;
	for (i = 0; i < n_tables; i++) {
		const uint8_t *r = h + BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * i;
		const struct be__ps_table *t = &cfg->tables[i];
		uint32_t sf = be__ps_opt_state_floats(t->opt.kind, t->dim);
		char name[BE_PS_NAME_MAX + 1] = { 0 };

		memcpy(name, r, BE_PS_NAME_MAX);
		if (r[BE_PS_NAME_MAX] || strcmp(name, t->name) || be__ps_get32(r + 64) != i)
			FAIL(-EINVAL, "checkpoint with other tables (name)");
		if (be__ps_get32(r + 68) != t->dim || be__ps_get32(r + 72) != t->opt.kind || be__ps_get32(r + 76) != sf)
			FAIL(-EINVAL, "checkpoint with other tables (dim or optimizer)");
		if (be__ps_get64(r + 88))
			FAIL(-EBADMSG, "reserved table field not zero");
		rows[i] = be__ps_get64(r + 80);
		if (rows[i] > BE_PS_STORE_MAX_ROWS)
			FAIL(-EBADMSG, "corrupt header (row count)");
		if (t->max_rows && rows[i] > t->max_rows)
			FAIL(-ENOSPC, "more rows than the table's max_rows");
		expect += rows[i] * (8 + 4ull * (t->dim + sf));
	}
	if (expect != *file_len)
		FAIL(-EBADMSG, "corrupt header (length)");
	return 0;
}

static int ckpt_read_body(struct ckpt_in *in, struct be__ps_shard *sh, const uint64_t *rows,
			  uint32_t trainers, const char **why)
{
	uint32_t i;
	uint64_t k;
	int err = 0;

	for (k = 0; k < trainers; k++) {
		const uint8_t *p = in_get(in, BE_PS_CKPT_TRAINER_LEN, &err);
		struct be__ps_dedup_entry e;

		if (!p)
			FAIL(err, "read the dedup window");
		e = (struct be__ps_dedup_entry){ .trainer = be__ps_get64(p), .hi = be__ps_get64(p + 8),
						 .map = be__ps_get64(p + 16), .last = be__ps_get64(p + 24) };
		if (e.last > sh->version)
			FAIL(-EBADMSG, "corrupt dedup entry");
		if ((err = be__ps_dedup_restore(&sh->dedup, &e)))
			FAIL(err, "corrupt dedup entry");
	}
	for (i = 0; i < sh->cfg->n_tables; i++) {
		struct be__ps_store *st = &sh->stores[i];
		size_t rec = (size_t)ckpt_rec_len(st);

		if ((err = be__ps_store_reserve(st, rows[i])))
			FAIL(err, "no room for the rows");
		for (k = 0; k < rows[i]; k++) {
			const uint8_t *p = in_get(in, rec, &err);
			uint64_t key;
			uint32_t r;

			if (!p)
				FAIL(err, "read the rows");
			key = be__ps_get64(p);
			if (be__ps_shard_of(key, sh->cfg->n_shards) != sh->id)
				FAIL(-EBADMSG, "corrupt row (key of another shard)");
			err = be__ps_store_add(st, key, &r);
			if (err < 0)
				FAIL(err, "no room for the rows");
			if (err == 0)
				FAIL(-EBADMSG, "corrupt rows (key twice)");
			memcpy(be__ps_store_row(st, r), p, rec);
		}
	}
	return 0;
}

int be__ps_ckpt_load(const struct be__ps_config *cfg, uint32_t shard, const char *dir,
		     struct be__ps_shard **out, const char **why)
{
	uint64_t rows[BE_PS_MAX_TABLES], version, file_len;
	struct ckpt_in in = { .fd = -1 };
	struct be__ps_shard *sh = NULL;
	uint8_t trailer[BE_PS_CKPT_TRAILER_LEN];
	char path[4096];
	uint32_t trainers;
	struct stat stt;
	int err;

	*why = "path too long";
	if ((err = be__ps_ckpt_path(path, sizeof(path), dir, shard)))
		return err;
	*why = "open";
	in.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (in.fd < 0)
		return -errno;
	*why = "stat";
	if (fstat(in.fd, &stt)) {
		err = -errno;
		goto out;
	}
	if ((err = ckpt_read_header(in.fd, (uint64_t)stt.st_size, cfg, shard, rows, &version,
				    &trainers, &file_len, why)))
		goto out;
	*why = "out of memory";
	in.buf = malloc(CKPT_BUF);
	if (!in.buf) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = be__ps_shard_create(cfg, shard, &sh)))
		goto out;
	sh->version = version;
	in.left = file_len - BE_PS_CKPT_TRAILER_LEN -
		  (BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * cfg->n_tables);
	if (lseek(in.fd, BE_PS_CKPT_HDR_LEN + BE_PS_CKPT_TABLE_LEN * cfg->n_tables, SEEK_SET) < 0) {
		err = -errno;
		*why = "seek";
		goto out;
	}
	if ((err = ckpt_read_body(&in, sh, rows, trainers, why)))
		goto out;
	if (in.left || in.pos != in.len) {
		err = -EBADMSG; /* cannot happen: lengths were checked */
		*why = "corrupt body (length)";
		goto out;
	}
	if ((err = read_exact(in.fd, trailer, sizeof(trailer), file_len - sizeof(trailer)))) {
		*why = "read the trailer";
		goto out;
	}
	if (be__ps_get32(trailer + 4) != BE_PS_CKPT_END || be__ps_get32(trailer) != in.crc) {
		err = -EBADMSG;
		*why = "body checksum mismatch";
		goto out;
	}
	*out = sh;
	sh = NULL;
	*why = "";
out:
	be__ps_shard_destroy(sh);
	free(in.buf);
	close(in.fd);
	return err;
}
