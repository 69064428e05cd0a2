/*
 * config.h - checking a configuration before a context uses it
 * (internal to src/sock).
 */
#ifndef BE_SOCK_CONFIG_H
#define BE_SOCK_CONFIG_H

#include <be/sock.h>
#include "util/abi.h"

/* The v1 layout of struct be_config ends with admit_uids (util/abi.h). */
#define BE__CONFIG_V1 BE__V1_SIZE(struct be_config, admit_uids)

/* Reject impossible settings (-EINVAL), clamp the rest so the core's
 * invariants hold; config.c. */
int be__config_check(struct be_config *cfg);

#endif /* BE_SOCK_CONFIG_H */
