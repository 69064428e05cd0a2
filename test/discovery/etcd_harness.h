/*
 * etcd_harness.h - real etcd servers for the discovery tests.
 *
 * eh_start() runs Debian's etcd-server (/usr/bin/etcd, or $BE_ETCD_BIN)
 * as a cluster of one or more members on free loopback ports, each with
 * its own data directory under a fresh directory in the current one
 * (ctest runs a test in its build folder), and waits until every member
 * is healthy. Members can be killed with SIGKILL, frozen with SIGSTOP and
 * restarted on the same ports and data directory. eh_stop() kills them
 * and removes the directory; a test that fails keeps it, with each
 * member's log (mN.log), for a look. Members die with the test process
 * (PR_SET_PDEATHSIG), whatever ends it.
 *
 * When etcd is not installed, eh_start() exits the test with 77 (skipped):
 * that is the only reason a discovery test skips.
 */
#ifndef BE_TEST_DISCOVERY_ETCD_HARNESS_H
#define BE_TEST_DISCOVERY_ETCD_HARNESS_H

#include <stddef.h>

#define EH_MAX_MEMBERS 3
#define EH_WAIT_S 60 /* the bound on every wait for a condition */
#define EH_REQUEST_MS 15000 /* request timeout of the tests' clients */

struct be_etcd;
struct be_etcd_event;
struct be_etcd_watch;
struct be_etcd_watch_opts;

struct eh;

/* Start @members (1..EH_MAX_MEMBERS) members and wait until all are
 * healthy; fails the test if they do not become so within a minute. */
struct eh *eh_start(int members);

/* "http://127.0.0.1:PORT", the client URL of member @i. */
const char *eh_url(const struct eh *h, int i);

/* SIGKILL member @i and reap it. */
void eh_kill9(struct eh *h, int i);

/* Send @sig (SIGSTOP, SIGCONT) to member @i. */
void eh_signal(struct eh *h, int i, int sig);

/* Start member @i again on its ports and data directory. With @wait, wait
 * until it is healthy (which needs a quorum of the cluster running). */
void eh_restart(struct eh *h, int i, int wait);

/* Whether member @i answers /health with true within @timeout_ms. */
int eh_healthy(const struct eh *h, int i, int timeout_ms);

/* A client of member @i with the default options, but for a request
 * timeout of EH_REQUEST_MS. */
struct be_etcd *eh_client(const struct eh *h, int i);

/* Check that client @c refused no response (stats.refused) and destroy
 * it. */
void eh_client_close(struct be_etcd *c);

/* A watch callback that counts the events it gets into the int @arg. */
void eh_count_events(void *arg, const struct be_etcd_event *ev, size_t n);

/* Watch every key under @prefix from the revision after the one a read
 * of it sees now (sets @o->start_revision), counting events into *@n
 * (eh_count_events()); fails the test on an error. */
struct be_etcd_watch *eh_watch_next(struct be_etcd *c, const char *prefix,
				    struct be_etcd_watch_opts *o, int *n);

/* Run @w until *@n (which its callback raises) reaches @want; fails the
 * test if the watch ends or after EH_WAIT_S. */
void eh_watch_until(struct be_etcd_watch *w, const int *n, int want);

/* Run @w until it ends and return why; fails the test after EH_WAIT_S. */
int eh_watch_end(struct be_etcd_watch *w);

/* Kill every member and remove the directory. */
void eh_stop(struct eh *h);

#endif /* BE_TEST_DISCOVERY_ETCD_HARNESS_H */
