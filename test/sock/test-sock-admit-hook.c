/*
 * Check the admission rules of a listener without a shared secret
 * (docs/SECURITY.md): its accept hook sees each connecting peer's
 * address and, on shm, the kernel's uid, gid and pid of its process, and
 * a refusal keeps the peer out (its socket gets on_close(-EACCES), no
 * Socket reaches on_accept, the refusal is counted); on shm the uid rule
 * (admit_uids, default our own uid) refuses other users, both ways: a
 * client refuses a listener whose uid the rule does not allow. Before the
 * fix every peer was accepted and nothing named its uid.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stest.h"

static struct st_server srv;

struct hook {
	int calls;
	int refuse;               /* the errno to refuse with, 0 to admit */
	struct be_peer_info last;
	char addr[160];
};

static int admit_cb(struct be_listener *l, const struct be_peer_info *peer, void *user)
{
	struct hook *h = user;

	h->calls++;
	h->last = *peer;
	snprintf(h->addr, sizeof(h->addr), "%s", peer->addr);
	h->last.addr = h->addr;
	return h->refuse;
}

static void test_hook(struct st *t, bool shm)
{
	struct hook h = { 0 };
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160], scheme[32];

	st_serve(&t->cfg, t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	ASSERT_OK(be_listener_set_admit(l, admit_cb, &h));
	/* Refused: the client learns it, the application never sees it. */
	h.refuse = -EPERM;
	ASSERT_EQ(st_try_client(&t->cfg, w, addr), -EACCES);
	ASSERT_EQ(h.calls, 1);
	ASSERT_EQ(srv.accepted, 0);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 1);
	/* Admitted: it talks. */
	h.refuse = 0;
	ASSERT_EQ(st_try_client(&t->cfg, w, addr), 0);
	ASSERT_EQ(h.calls, 2);
	ASSERT_EQ(srv.accepted, 1);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 1);
	/* What the hook saw. */
	snprintf(scheme, sizeof(scheme), "%s://", t->transport);
	ASSERT(strncmp(h.last.addr, scheme, strlen(scheme)) == 0);
	ASSERT_EQ(h.last.authenticated, 0);
	ASSERT_EQ(h.last.has_cred, shm ? 1 : 0);
	if (shm) {
		ASSERT_UEQ(h.last.uid, (uint32_t)geteuid());
		ASSERT_UEQ(h.last.gid, (uint32_t)getegid());
		ASSERT_EQ(h.last.pid, (int32_t)getpid());
	}
	/* No hook: everyone (of our uid) is admitted. */
	ASSERT_OK(be_listener_set_admit(l, NULL, NULL));
	ASSERT_EQ(st_try_client(&t->cfg, w, addr), 0);
	ASSERT_EQ(h.calls, 2);
	st_serve_end(ctx, w, &srv, l);
}

/* shm: the uid rule, on the listener and on the client. */
static void test_uid(struct st *t)
{
	struct be_config scfg = t->cfg, ccfg = t->cfg;
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];
	uint32_t other = (uint32_t)geteuid() + 1;

	/* A listener that admits another uid only refuses us. */
	snprintf(scfg.admit_uids, sizeof(scfg.admit_uids), "%u", other);
	st_serve(&scfg, t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	ASSERT_EQ(st_try_client(&ccfg, w, addr), -EACCES);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 1);
	ASSERT_EQ(srv.accepted, 0);
	st_serve_end(ctx, w, &srv, l);
	/* A list that names us ("self"), and "*", admit us. */
	snprintf(scfg.admit_uids, sizeof(scfg.admit_uids), "%u,self", other);
	st_serve(&scfg, t, &srv, &ctx, &w, &l, addr, sizeof(addr));
	ASSERT_EQ(st_try_client(&ccfg, w, addr), 0);
	/* A client that admits another uid only refuses our listener. */
	snprintf(ccfg.admit_uids, sizeof(ccfg.admit_uids), "%u", other);
	ASSERT_EQ(st_try_client(&ccfg, w, addr), -EACCES);
	snprintf(ccfg.admit_uids, sizeof(ccfg.admit_uids), "*");
	ASSERT_EQ(st_try_client(&ccfg, w, addr), 0);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 0);
	st_serve_end(ctx, w, &srv, l);
	/* A malformed rule is refused at once. */
	snprintf(scfg.admit_uids, sizeof(scfg.admit_uids), "12,x");
	ASSERT_EQ(be_ctx_create(&scfg, &ctx), -EINVAL);
	snprintf(scfg.admit_uids, sizeof(scfg.admit_uids), "12,");
	ASSERT_EQ(be_ctx_create(&scfg, &ctx), -EINVAL);
}

int main(int argc, char **argv)
{
	struct st t;
	bool shm;

	st_init(&t, argc, argv);
	shm = strcmp(t.transport, "shm") == 0;
	srv.echo = true;
	test_hook(&t, shm);
	srv.accepted = 0;
	if (shm)
		test_uid(&t);
	return 0;
}
