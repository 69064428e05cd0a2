/*
 * Check checkpoints. A shard of three tables (SGD, Adagrad, FTRL) with
 * rows spanning several write buffers and a dedup window round-trips
 * exactly: version, rows, optimizer state, window; saving again replaces
 * the file and leaves no temporary behind. Refused, each with its own
 * code: no file (-ENOENT), another model (-EINVAL: dim, shard count,
 * shard id), too many rows for max_rows (-ENOSPC), a newer format
 * (-ENOTSUP). A small checkpoint truncated at every length is refused
 * with -ENODATA, and with any byte flipped (three masks at every
 * position) or a byte appended with -EBADMSG: never a crash, never
 * accepted. CRC-32C gives the standard check value, in hardware and by
 * table, in one piece or many.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pstest.h"

static const char *cfg_text =
	"shards 16\n"
	"table s dim=4 optimizer=sgd lr=0.1 init=uniform lo=-1 hi=1\n"
	"table a dim=8 optimizer=adagrad lr=0.1 init=uniform lo=-1 hi=1 init_accum=0.1\n"
	"table f dim=3 optimizer=ftrl lr=0.1 init=zeros l1=0.01\n";

#define NROWS 30000u
static uint64_t keys[NROWS];
static float grads[NROWS * 8];
static uint8_t msg[NROWS * 8 * 4 * 4];

/* Push @n keys into every table of @sh as trainer @t, seq @seq. */
static void push_all(struct be__ps_shard *sh, uint64_t t, uint64_t seq, uint32_t n)
{
	struct be__ps_msg m = { .op = BE_PS_OP_PUSH, .shard = sh->id, .trainer = t, .seq = seq,
				.nsec = sh->cfg->n_tables };
	struct be__ps_msg d;
	uint32_t i;
	int64_t len;

	for (i = 0; i < m.nsec; i++)
		m.sec[i] = (struct be__ps_sec){ .table = i, .dim = sh->cfg->tables[i].dim, .n = n,
						.keys = (const uint8_t *)keys,
						.vals = (const uint8_t *)grads };
	len = be__ps_msg_encode(&m, msg, sizeof(msg));
	ASSERT_GT(len, 0);
	pt_decode(msg, (size_t)len, sh->cfg, &d);
	ASSERT_OK(be__ps_shard_push(sh, &d));
}

static void same_shard(const struct be__ps_shard *a, const struct be__ps_shard *b)
{
	uint32_t i, r;

	ASSERT_UEQ(a->version, b->version);
	ASSERT_EQ(a->id, b->id);
	for (i = 0; i < a->cfg->n_tables; i++) {
		const struct be__ps_store *x = &a->stores[i], *y = &b->stores[i];
		size_t rec = 8 + 4 * (size_t)(x->dim + x->state_floats);

		ASSERT_UEQ(x->rows, y->rows);
		for (r = 0; r < x->rows; r++) {
			uint8_t *row = be__ps_store_row(x, r);

			ASSERT_EQ(be__ps_store_find(y, be__ps_row_key(row)), r);
			ASSERT(!memcmp(row, be__ps_store_row(y, r), rec));
		}
	}
	ASSERT_EQ(a->dedup.count, b->dedup.count);
	for (i = 0; i < a->dedup.cap; i++) {
		const struct be__ps_dedup_entry *e = &a->dedup.slots[i];
		uint32_t j;

		if (!e->trainer)
			continue;
		for (j = 0; j < b->dedup.cap && b->dedup.slots[j].trainer != e->trainer; j++)
			;
		ASSERT_LT(j, b->dedup.cap);
		ASSERT(!memcmp(e, &b->dedup.slots[j], sizeof(*e)));
	}
}


static void test_round_trip(const char *dir)
{
	struct be__ps_config c, other;
	struct be__ps_shard *sh, *back;
	const char *why;
	uint64_t st = 5;
	uint32_t i;
	char p1[512], p2[512];

	pt_config(&c, cfg_text);
	ASSERT_OK(be__ps_shard_create(&c, 9, &sh));
	pt_keys(keys, NROWS, 9, 16, 2);
	for (i = 0; i < NROWS * 8; i++)
		grads[i] = pt_randf(&st);
	push_all(sh, 1, 1, NROWS);
	push_all(sh, 2, 7, NROWS / 2);
	push_all(sh, 1, 3, 100);
	push_all(sh, 3, 1, 10);
	ASSERT_UEQ(sh->version, 4);
	ASSERT_OK(be__ps_ckpt_save(sh, dir, &why));
	ASSERT_EQ(test_dir_count(dir), 1);
	ASSERT_OK(be__ps_ckpt_load(&c, 9, dir, &back, &why));
	same_shard(sh, back);
	be__ps_shard_destroy(back);

	/* Save again after more pushes: replaced, still one file. */
	push_all(sh, 2, 8, 1000);
	ASSERT_OK(be__ps_ckpt_save(sh, dir, &why));
	ASSERT_EQ(test_dir_count(dir), 1);
	ASSERT_OK(be__ps_ckpt_load(&c, 9, dir, &back, &why));
	same_shard(sh, back);
	be__ps_shard_destroy(back);

	/* Refusals of sound files. */
	back = NULL;
	ASSERT_EQ(be__ps_ckpt_load(&c, 8, dir, &back, &why), -ENOENT);
	ASSERT_OK(be__ps_ckpt_path(p1, sizeof(p1), dir, 9));
	ASSERT_OK(be__ps_ckpt_path(p2, sizeof(p2), dir, 8));
	ASSERT_OK(link(p1, p2));
	ASSERT_EQ(be__ps_ckpt_load(&c, 8, dir, &back, &why), -EINVAL);
	ASSERT(strstr(why, "another shard"));
	unlink(p2);
	pt_config(&other, "shards 16\n"
			  "table s dim=4 optimizer=sgd lr=0.1 init=zeros\n"
			  "table a dim=9 optimizer=adagrad lr=0.1 init=zeros\n"
			  "table f dim=3 optimizer=ftrl lr=0.1 init=zeros\n");
	ASSERT_EQ(be__ps_ckpt_load(&other, 9, dir, &back, &why), -EINVAL);
	be__ps_config_close(&other);
	pt_config(&other, "shards 16\n"
			  "table s dim=4 optimizer=sgd lr=0.1 init=zeros\n"
			  "table a dim=8 optimizer=sgd lr=0.1 init=zeros\n"
			  "table f dim=3 optimizer=ftrl lr=0.1 init=zeros\n");
	ASSERT_EQ(be__ps_ckpt_load(&other, 9, dir, &back, &why), -EINVAL);
	be__ps_config_close(&other);
	pt_config(&other, "shards 17\n"
			  "table s dim=4 optimizer=sgd lr=0.1 init=zeros\n"
			  "table a dim=8 optimizer=adagrad lr=0.1 init=zeros\n"
			  "table f dim=3 optimizer=ftrl lr=0.1 init=zeros\n");
	ASSERT_EQ(be__ps_ckpt_load(&other, 9, dir, &back, &why), -EINVAL);
	be__ps_config_close(&other);
	pt_config(&other, "shards 16\n"
			  "table s dim=4 optimizer=sgd lr=0.1 init=zeros max_rows=100\n"
			  "table a dim=8 optimizer=adagrad lr=0.1 init=zeros\n"
			  "table f dim=3 optimizer=ftrl lr=0.1 init=zeros\n");
	ASSERT_EQ(be__ps_ckpt_load(&other, 9, dir, &back, &why), -ENOSPC);
	be__ps_config_close(&other);
	ASSERT(back == NULL);
	unlink(p1);
	be__ps_shard_destroy(sh);
	be__ps_config_close(&c);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = malloc(1 << 16);

	ASSERT(f && b);
	*len = fread(b, 1, 1 << 16, f);
	fclose(f);
	return b;
}

static void write_file(const char *path, const uint8_t *b, size_t len)
{
	FILE *f = fopen(path, "wb");

	ASSERT(f);
	ASSERT_EQ(fwrite(b, 1, len, f), len);
	ASSERT_EQ(fclose(f), 0);
}

static int load(const struct be__ps_config *c, const char *dir)
{
	struct be__ps_shard *sh = NULL;
	const char *why = NULL;
	int rc = be__ps_ckpt_load(c, 0, dir, &sh, &why);

	ASSERT(why != NULL);
	if (!rc)
		be__ps_shard_destroy(sh);
	else
		ASSERT(sh == NULL);
	return rc;
}

static void test_damage(const char *dir)
{
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	struct be__ps_config c;
	struct be__ps_shard *sh;
	const char *why;
	char path[512];
	uint8_t *good, *bad;
	size_t len, i, k;
	uint32_t crc;

	pt_config(&c, "shards 2\ntable t dim=2 optimizer=sgd lr=0.1 init=zeros\n");
	ASSERT_OK(be__ps_shard_create(&c, 0, &sh));
	pt_keys(keys, 3, 0, 2, 3);
	grads[0] = grads[1] = 1;
	push_all(sh, 42, 1, 3);
	ASSERT_OK(be__ps_ckpt_save(sh, dir, &why));
	ASSERT_OK(be__ps_ckpt_path(path, sizeof(path), dir, 0));
	good = read_file(path, &len);
	ASSERT_EQ(len, 64 + 96 + 32 + 3 * (8 + 8) + 8);
	bad = malloc(len + 1);
	ASSERT(bad);
	ASSERT_EQ(load(&c, dir), 0);

	for (i = 0; i < len; i++) {
		write_file(path, good, i);
		ASSERT_EQ(load(&c, dir), -ENODATA);
	}
	for (i = 0; i < len; i++)
		for (k = 0; k < BE_ARRAY_SIZE(masks); k++) {
			memcpy(bad, good, len);
			bad[i] ^= masks[k];
			write_file(path, bad, len);
			if (load(&c, dir) != -EBADMSG)
				TEST_FAIL("byte %zu ^ 0x%02x not refused as corrupt", i, masks[k]);
		}
	memcpy(bad, good, len);
	bad[len] = 0;
	write_file(path, bad, len + 1);
	ASSERT_EQ(load(&c, dir), -EBADMSG);

	/* A sound header of a later format version. */
	memcpy(bad, good, len);
	bad[8] = 2;
	crc = be__crc32c(0, bad, 60);
	crc = be__crc32c(crc, bad + 64, 96);
	memcpy(bad + 60, &crc, 4);
	write_file(path, bad, len);
	ASSERT_EQ(load(&c, dir), -ENOTSUP);

	write_file(path, good, len);
	ASSERT_EQ(load(&c, dir), 0);
	unlink(path);
	free(good);
	free(bad);
	be__ps_shard_destroy(sh);
	be__ps_config_close(&c);
}

static void test_crc(void)
{
	static const char check[] = "123456789";
	uint8_t data[1000];
	uint64_t st = 1;
	size_t i, n;

	ASSERT_UEQ(be__crc32c(0, check, 9), 0xe3069283u);
	ASSERT_UEQ(be__crc32c_sw(0, check, 9), 0xe3069283u);
	ASSERT_UEQ(be__crc32c(0, "", 0), 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)pt_rand(&st);
	for (n = 0; n < sizeof(data); n += 37) {
		uint32_t one = be__crc32c(0, data, n);

		ASSERT_UEQ(one, be__crc32c_sw(0, data, n));
		ASSERT_UEQ(one, be__crc32c(be__crc32c(0, data, n / 3), data + n / 3, n - n / 3));
		if (n)
			ASSERT_UEQ(one, be__crc32c_sw(be__crc32c_sw(0, data, 1), data + 1, n - 1));
	}
}

int main(void)
{
	char dir[256];

	test_crc();
	pt_tmpdir(dir, sizeof(dir));
	test_round_trip(dir);
	test_damage(dir);
	ASSERT_EQ(test_dir_count(dir), 0);
	pt_rmdir(dir);
	return 0;
}
