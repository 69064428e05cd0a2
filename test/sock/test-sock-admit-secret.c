/*
 * Check admission by shared secret (docs/SECURITY.md): a client that
 * proves the listener's secret connects and talks; one with another
 * secret, or none, is refused before any Socket reaches the listener's
 * application: its socket gets on_close(-EACCES), the listener's worker
 * counts and logs the refusal ("admit_refused"). A client with a secret
 * refuses a listener that holds none (-EACCES) or another one. The
 * secret may come from a file, which must not be readable by others.
 * Before the fix any client could connect to any listener.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stest.h"

static struct st_server srv;
static int hook_calls, hook_auth;

/* The accept hook runs once the secret is proven, and says so. */
static int admit_cb(struct be_listener *l, const struct be_peer_info *peer, void *user)
{
	hook_calls++;
	hook_auth = peer->authenticated;
	return 0;
}

static void set_secret(struct be_config *cfg, const char *s)
{
	cfg->auth_secret_len = s ? (uint32_t)strlen(s) : 0;
	if (s)
		memcpy(cfg->auth_secret, s, strlen(s));
}

static int try_client(struct st *t, struct be_worker *sw, const char *addr, const char *secret)
{
	struct be_config cfg = t->cfg;

	set_secret(&cfg, secret);
	return st_try_client(&cfg, sw, addr);
}

/* A listener of a context with @secret on a worker of its own. */
static void server(struct st *t, const char *secret, struct be_ctx **ctx, struct be_worker **w,
		   struct be_listener **l, char *addr, size_t len)
{
	struct be_config cfg = t->cfg;

	set_secret(&cfg, secret);
	st_serve(&cfg, t, &srv, ctx, w, l, addr, len);
}

static void test_secret_file(struct st *t)
{
	char path[] = "/tmp/be-secret-XXXXXX";
	struct be_config cfg = t->cfg;
	struct be_ctx *ctx;
	int fd = mkstemp(path);

	ASSERT(fd >= 0);
	ASSERT_EQ(write(fd, "s3cret\n", 7), 7);
	close(fd);
	cfg.auth_secret_len = 0;
	snprintf(cfg.auth_secret_file, sizeof(cfg.auth_secret_file), "%s", path);
	/* Readable by others: refused. */
	ASSERT_OK(chmod(path, 0644));
	ASSERT_EQ(be_ctx_create(&cfg, &ctx), -EACCES);
	ASSERT_OK(chmod(path, 0620));
	ASSERT_EQ(be_ctx_create(&cfg, &ctx), -EACCES);
	/* The owner's alone: its first line is the secret. */
	ASSERT_OK(chmod(path, 0600));
	ASSERT_OK(be_ctx_create(&cfg, &ctx));
	ASSERT_UEQ(be_ctx_config(ctx)->auth_secret_len, 6);
	ASSERT(memcmp(be_ctx_config(ctx)->auth_secret, "s3cret", 6) == 0);
	ASSERT_OK(be_ctx_destroy(ctx));
	/* Empty: no secret is not a secret. */
	fd = open(path, O_WRONLY | O_TRUNC);
	ASSERT(fd >= 0);
	close(fd);
	ASSERT_EQ(be_ctx_create(&cfg, &ctx), -EINVAL);
	unlink(path);
	ASSERT_EQ(be_ctx_create(&cfg, &ctx), -ENOENT);
}

int main(int argc, char **argv)
{
	struct be_listener *l;
	struct be_worker *w;
	struct be_ctx *ctx;
	char addr[160];
	struct st t;

	st_init(&t, argc, argv);
	srv.echo = true;
	test_secret_file(&t);

	server(&t, "the right secret", &ctx, &w, &l, addr, sizeof(addr));
	ASSERT_OK(be_listener_set_admit(l, admit_cb, NULL));
	/* The same secret: admitted, the echo comes back. */
	ASSERT_EQ(try_client(&t, w, addr, "the right secret"), 0);
	ASSERT_EQ(srv.accepted, 1);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 0);
	ASSERT_EQ(hook_calls, 1);
	ASSERT_EQ(hook_auth, 1);
	/* Another secret: refused after the proof, no socket accepted. */
	ASSERT_EQ(try_client(&t, w, addr, "the wrong secret"), -EACCES);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 1);
	/* None: refused at the request. */
	ASSERT_EQ(try_client(&t, w, addr, NULL), -EACCES);
	ASSERT_EQ(st_worker_num(w, "admit_refused"), 2);
	ASSERT_EQ(srv.accepted, 1);
	ASSERT_EQ(hook_calls, 1);
	st_serve_end(ctx, w, &srv, l);

	/* A listener without a secret: a client that holds one refuses it. */
	server(&t, NULL, &ctx, &w, &l, addr, sizeof(addr));
	ASSERT_EQ(try_client(&t, w, addr, "the right secret"), -EACCES);
	ASSERT_EQ(try_client(&t, w, addr, NULL), 0);
	ASSERT_EQ(srv.accepted, 2);
	st_serve_end(ctx, w, &srv, l);
	return 0;
}
