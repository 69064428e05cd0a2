/*
 * ckpt.h - checkpoints of one shard (internal): rows, optimizer state,
 * dedup window and model version in one file, written atomically and
 * refused when truncated or corrupt. The byte layout is in docs/PS.md
 * ("Checkpoint file"); checkpoint.c implements it.
 *
 * A checkpoint is a snapshot: the caller guarantees that nothing changes
 * the shard while it is being written (it runs on the shard's thread, or
 * in a forked child: the stores are plain anonymous memory, inherited
 * copy-on-write). Loading builds a new shard and hands it over only when
 * the whole file checked out, so a refused file changes nothing.
 */
#ifndef BE_PS_CKPT_H
#define BE_PS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ps/ps_int.h"

#define BE_PS_CKPT_MAGIC "BEPSCKPT"
#define BE_PS_CKPT_VERSION 1u
#define BE_PS_CKPT_HDR_LEN 64u
#define BE_PS_CKPT_TABLE_LEN 96u
#define BE_PS_CKPT_TRAINER_LEN 32u
#define BE_PS_CKPT_TRAILER_LEN 8u
#define BE_PS_CKPT_END 0x444e4542u /* "BEND" */

/* CRC-32C of @len bytes at @buf, continuing @crc (0 to start). */
uint32_t be__crc32c(uint32_t crc, const void *buf, size_t len);
/* The same by table, whatever the CPU (for tests). */
uint32_t be__crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* "@dir/shard-NNNNN.ckpt" into @buf. 0 or -ENAMETOOLONG. */
int be__ps_ckpt_path(char *buf, size_t len, const char *dir, uint32_t shard);

/*
 * be__ps_ckpt_save() - write @sh to be__ps_ckpt_path(@dir, id): into a
 * temporary file beside it, fsync, rename over the old checkpoint, fsync
 * the directory. A crash at any point leaves the old checkpoint or the
 * new one, never a mix.
 * Borrows @sh (unchanged). Returns 0, or -errno of the failed step with
 * the step in *@why (the temporary file is removed).
 */
int be__ps_ckpt_save(const struct be__ps_shard *sh, const char *dir, const char **why);

/*
 * be__ps_ckpt_load() - read shard @shard of @cfg from @dir into a new
 * shard. Returns 0 with *@out set (the caller owns it:
 * be__ps_shard_destroy()), or, with a reason in *@why and nothing
 * allocated:
 *   -ENOENT     no checkpoint of this shard
 *   -ENODATA    truncated: shorter than its header says
 *   -EBADMSG    corrupt: not a checkpoint, checksum mismatch, a field out
 *               of range, a key twice or of another shard, bytes after
 *               the end
 *   -ENOTSUP    a format version this build does not read
 *   -EINVAL     a sound checkpoint of another model: shard id, shard
 *               count, tables (name, dim, optimizer) differ from @cfg
 *   -ENOSPC     more rows than a table's max_rows, or trainers than
 *               max_trainers
 *   -ENOMEM, or -errno of open/read.
 */
int be__ps_ckpt_load(const struct be__ps_config *cfg, uint32_t shard, const char *dir,
		     struct be__ps_shard **out, const char **why);

#endif /* BE_PS_CKPT_H */
