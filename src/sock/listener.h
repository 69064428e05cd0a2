/*
 * listener.h - what the rest of src/sock does with a listener (internal
 * to src/sock).
 */
#ifndef BE_SOCK_LISTENER_H
#define BE_SOCK_LISTENER_H

#include <be/sock.h>

/* Stop listening (be_listener_close(), or the worker shuts down and the
 * handle stays valid): the transport refuses new connections; requests
 * already under way are rejected by the worker (engine.c). listener.c. */
void be__listener_stop(struct be_listener *l);

#endif /* BE_SOCK_LISTENER_H */
