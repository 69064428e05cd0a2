/*
 * log.h - the library's diagnostics (internal).
 *
 * The library never writes to stdout. Messages go to the function set with
 * be_log_set_fn() (public, in be.h) or, when none is set, to stderr only if
 * BE_LOG=1..4 is in the environment (1 error, 2 warn, 3 info, 4 debug).
 */
#ifndef BE_UTIL_LOG_H
#define BE_UTIL_LOG_H

enum be_log_level { BE_LOG_ERROR = 1, BE_LOG_WARN, BE_LOG_INFO, BE_LOG_DEBUG };

void be__log(enum be_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define be_log_err(...) be__log(BE_LOG_ERROR, __VA_ARGS__)
#define be_log_warn(...) be__log(BE_LOG_WARN, __VA_ARGS__)
#define be_log_info(...) be__log(BE_LOG_INFO, __VA_ARGS__)
#define be_log_dbg(...) be__log(BE_LOG_DEBUG, __VA_ARGS__)

/*
 * be__log_clamped() - warn that setting @name was asked as @asked and
 * @now is used instead, and @why. Every clamp of a be_config field goes
 * through here, once per context (src/sock/config.c for the settings
 * themselves, src/engine/ctx_dev.c for a device's limits), so that no
 * setting changes silently.
 */
void be__log_clamped(const char *name, unsigned long long asked, unsigned long long now,
		     const char *why);

#endif /* BE_UTIL_LOG_H */
