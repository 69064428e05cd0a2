/*
 * config.h - checking a configuration before a context uses it
 * (internal to src/sock).
 */
#ifndef BE_SOCK_CONFIG_H
#define BE_SOCK_CONFIG_H

#include <be/sock.h>

/* Reject impossible settings (-EINVAL), clamp the rest so the core's
 * invariants hold; config.c. */
int be__config_check(struct be_config *cfg);

#endif /* BE_SOCK_CONFIG_H */
