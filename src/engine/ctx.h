/*
 * ctx.h - the context: a configuration and the devices of its transports
 * (internal).
 *
 *   be_ctx ──< be__cdev (one per device in use: tcp, shm, and each verbs
 *                        NIC; device, bemalloc index, the defaults its
 *                        Engines start from)
 *
 * Model. The application creates a context (be_ctx_create) and makes its
 * workers on it. The context opens every verbs device as it is created
 * (be__ctx_dev_open_all: finding and opening one is too slow for a
 * worker's thread, ctx_dev.c); tcp and shm, one device each, open the
 * first time a worker of the context uses an address on them. A worker
 * uses the device its address belongs to (listen) or is reached through
 * (connect) (be__ctx_dev). Each is attached to bemalloc so every block is
 * registered on it, and closed with the context (be__ctx_dev_close_all).
 *
 * Sharing. Every worker of the context, on any thread, reads it: the
 * configuration is fixed at creation and a be__cdev is written once,
 * under the mutex, before it is handed out; the data path never takes the
 * lock. Limit: BE_CTX_MAX_DEVS devices per context (bemalloc registers
 * on at most BE_ALLOC_MAX_DEVICES in the process).
 */
#ifndef BE_ENGINE_CTX_H
#define BE_ENGINE_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <be/sock.h>
#include "xport/xport.h"

#define BE_CTX_MAX_DEVS 6

/* The defaults of the settings a device bounds (be_config_init()): a
 * default the device cannot take is lowered quietly (info), a depth the
 * application chose is clamped with a warning (ctx_dev.c). */
#define BE_CTX_DEFAULT_SQ_DEPTH 128u
#define BE_CTX_DEFAULT_CQ_DEPTH 65536u
#define BE_CTX_DEFAULT_SRQ_MAX_DEPTH 8192u

struct be__cdev {
	const char *name;                /* "tcp", "shm", "verbs" */
	const struct be_xport_ops *ops;
	struct be_xdev *dev;             /* NULL until opened */
	int alloc_dev;                   /* bemalloc device index */
	struct be_xdev_attr attr;
	uint32_t sq_depth;               /* cfg's, within the device's limits */
	uint32_t cq_depth;
	uint32_t srq_max_depth;
	uint32_t frag_size;              /* default fragment size on this device */
	uint64_t send_window;            /* default send window of its Engines */
	uint32_t frag_bulk;              /* fragment size with no small messages about */
	uint64_t mixed_window;           /* soft limit of its Engines' windows (0: none) */
};

struct be_ctx {
	struct be_config cfg;
	pthread_mutex_t lock;            /* guards dev[] and ndev */
	struct be__cdev dev[BE_CTX_MAX_DEVS];
	int ndev;
	atomic_int workers;
};

/* Open every device of each transport that has several (verbs), as far
 * as they open (failures are logged). At creation, before any worker;
 * may take a second (libibverbs loading its providers). */
void be__ctx_dev_open_all(struct be_ctx *ctx);
/* The device of transport @name that @addr (the text after "scheme://";
 * NULL: any device) is on: @passive, an address to listen on, else one
 * to connect to. tcp and shm open theirs here once; a verbs device must
 * have opened with the context (else -ENODEV). *@out stays valid until
 * the context is destroyed. 0, -EPROTONOSUPPORT, -ENOSPC, -ENODEV or the
 * transport's -errno (a bad address). May block resolving a host name.
 * Threads: any. */
int be__ctx_dev(struct be_ctx *ctx, const char *name, const char *addr, bool passive,
		struct be__cdev **out);
/* Detach every device of @ctx from bemalloc and close it. No worker of
 * @ctx may be alive. */
void be__ctx_dev_close_all(struct be_ctx *ctx);

#endif /* BE_ENGINE_CTX_H */
