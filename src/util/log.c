/*
 * log.c - diagnostics sink. One global function pointer, read atomically;
 * the environment is read once.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <be/be.h>
#include "util/log.h"

static _Atomic(be_log_fn) log_fn;
static atomic_int env_level = -1;

void be_log_set_fn(be_log_fn fn)
{
	atomic_store(&log_fn, fn);
}

static int log_env_level(void)
{
	int lvl = atomic_load_explicit(&env_level, memory_order_relaxed);

	if (lvl < 0) {
		const char *s = getenv("BE_LOG");

		lvl = s ? atoi(s) : 0;
		atomic_store_explicit(&env_level, lvl, memory_order_relaxed);
	}
	return lvl;
}

void be__log(enum be_log_level lvl, const char *fmt, ...)
{
	be_log_fn fn = atomic_load(&log_fn);
	char msg[512];
	va_list ap;

	if (!fn && (int)lvl > log_env_level())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fn)
		fn((int)lvl, msg);
	else
		fprintf(stderr, "be[%d]: %s\n", (int)lvl, msg);
}

void be__log_clamped(const char *name, unsigned long long asked, unsigned long long now,
		     const char *why)
{
	be_log_warn("config: %s %llu clamped to %llu (%s)", name, asked, now, why);
}
