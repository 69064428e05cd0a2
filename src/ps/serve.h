/*
 * serve.h - executing decoded pull and push requests on a shard
 * (internal). The RPC-facing server decodes a request with
 * be__ps_req_decode() against the shard's config, runs it here on the
 * shard's thread, and sends the reply; on an error it sends
 * be__ps_error_reply() instead (docs/PS.md lists the statuses).
 */
#ifndef BE_PS_SERVE_H
#define BE_PS_SERVE_H

#include "ps/ps_int.h"
#include "ps/wire.h"

/*
 * be__ps_shard_pull() - answer PULL @req into @out: the PULL_REPLY, every
 * value written straight from its row (or, for a key without a row, the
 * initializer's value or the table's default, counted) into @out.
 *
 * Ownership: borrows @req and the request buffer it points into; borrows
 * @out (8-byte aligned, @cap >= be__ps_pull_reply_len(@req): a bemalloc
 * buffer, so the reply leaves without a copy) and writes the reply there.
 * Threads: the shard's. Returns the reply's length, -ESTALE (the shard's
 * model version is below @req's), -ENOBUFS (@cap too small) or -EINVAL
 * (not a pull of this shard, @out misaligned); on error @out is undefined
 * and the shard unchanged.
 */
int64_t be__ps_shard_pull(struct be__ps_shard *sh, const struct be__ps_msg *req, uint8_t *out,
			  size_t cap);

/*
 * be__ps_shard_push() - apply PUSH @req exactly once: every gradient with
 * its table's optimizer, rows created (initialised) for new keys, model
 * version + 1. All or nothing.
 *
 * Ownership: borrows @req and the request buffer it points into.
 * Threads: the shard's. Returns 0 (applied), -EALREADY (applied before:
 * nothing done, the trainer counts it as success), -ERANGE (seq below the
 * trainer's window), -ENOSPC (dedup table full, or a table's max_rows),
 * -ENOMEM, or -EINVAL (not a push of this shard); on any error nothing was
 * applied and the sequence number was not recorded.
 */
int be__ps_shard_push(struct be__ps_shard *sh, const struct be__ps_msg *req);

#endif /* BE_PS_SERVE_H */
