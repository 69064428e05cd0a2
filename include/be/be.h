/*
 * be.h - umbrella header of the be library.
 *
 * be is an RDMA communication library in layers:
 *
 *   ps.h                      the parameter server's client: fetch, push
 *   rpc.h                     calls with deadlines over replica sets, failover
 *   sock.h                    Sockets multiplexed over Engines (the BE core)
 *   alloc.h                   bemalloc: message buffers already registered for RDMA
 *   transports                verbs, shm, tcp (internal, src/xport)
 *
 * Errors: every function that can fail returns 0 or a positive count on
 * success and a negative errno code on failure (-ENOMEM, -EINVAL, ...),
 * its results in out parameters; only be_alloc() and be_rpc_buf_alloc()
 * return NULL (and set errno) like malloc. Codes of our own sit below
 * BE_ERRNO_BASE. The library never prints to stdout and never exits the
 * process. Structs with a leading `size` grow by docs/API.md's rule,
 * which also states this one.
 */
#ifndef BE_BE_H
#define BE_BE_H

#include <errno.h>

#include <be/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BE_VERSION_MAJOR 0
#define BE_VERSION_MINOR 1
#define BE_VERSION_PATCH 0

/* Project-specific error codes, all negative and below any errno value. */
#define BE_ERRNO_BASE (-4000)
#define BE_EPROTO_PEER (BE_ERRNO_BASE - 1) /* peer violated the wire protocol */
#define BE_ECONNFAULT (BE_ERRNO_BASE - 2)  /* engine marked faulty (keepalive, be_sock_fail_engine) */

/* be_strerror() - a static string describing @err (negative errno or BE_E*). */
BE_EXPORT const char *be_strerror(int err);

/*
 * be_log_set_fn() - route the library's diagnostics to @fn (level 1 error ..
 * 4 debug, a NUL-terminated message without newline). NULL restores the
 * default: silent, or stderr when BE_LOG=<level> is set. @fn may be called
 * from any library thread and must not call back into the library.
 */
typedef void (*be_log_fn)(int level, const char *msg);
BE_EXPORT void be_log_set_fn(be_log_fn fn);

/* be_version_string() - "MAJOR.MINOR.PATCH". */
BE_EXPORT const char *be_version_string(void);

#ifdef __cplusplus
}
#endif

#include <be/alloc.h>
#include <be/sock.h>
#include <be/rpc.h>
#include <be/ps.h>

#endif /* BE_BE_H */
