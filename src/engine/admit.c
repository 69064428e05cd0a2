/*
 * admit.c - admission: who may hold an Engine with us, decided before
 * anything is committed to the peer.
 *
 * Model. Three checks, each optional, in this order (docs/SECURITY.md):
 *
 *   uid rule     on shm the kernel names the peer's process (SO_PEERCRED);
 *                its uid must match be_config.admit_uids (default: ours).
 *                Both sides check it: an abstract socket name is anyone's
 *                to take, so a client checks the listener too.
 *   secret       when both hellos carry BE_HELLO_F_AUTH, four AUTH frames
 *                prove the shared secret both ways before any other frame
 *                (docs/PROTOCOL.md, "Admission"):
 *                  connector  AUTH HELLO     nonce_c
 *                  acceptor   AUTH CHALLENGE nonce_s
 *                  connector  AUTH PROOF     MAC("C")
 *                  acceptor   AUTH ACCEPT    MAC("S")   (or AUTH REFUSED)
 *                MAC(r) = HMAC-SHA256(secret, "be-auth-1" | r | nonce_c |
 *                nonce_s | hello_c | hello_s): fresh nonces from getrandom()
 *                on each side (no replay), the role (no reflection), both
 *                hellos as sent (no tampering with the parameters or the
 *                AUTH flag). The connector proves first, so the acceptor
 *                shows no MAC to a peer that has not proven the secret, and
 *                it sees (counts, logs) every wrong secret. A side with a
 *                secret refuses a peer without.
 *   hook         the listener's be_admit_cb, with the peer's address and
 *                uid, once the two above passed.
 *
 * What "nothing committed" means. An acceptor that refuses at the request
 * (uid, no secret offered, hook without a secret) makes no Engine: the
 * transport rejects with a reason. While the secret is proven, the Engine
 * exists with its first grant (credits_init receives of the SRQ, already
 * posted) and the connection, under the connect deadline; but no Socket,
 * no grant of memory, and staging buffers of BE_PROTO_MIN_RECV_BUF bytes
 * only; no transport shares memory with a peer, admitted or not. A
 * refusal is counted (worker "admit_refused") and logged; the
 * peer hears the reason (reject reason, or AUTH REFUSED) and its connect
 * fails with -EACCES.
 *
 * Threads: the worker's, like the rest of an Engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "engine/engine.h"
#include "util/common.h"
#include "util/log.h"

#define ADMIT_LABEL "be-auth-1"

static bool admit_has_secret(const struct be_worker *w)
{
	return w->ctx->cfg.auth_secret_len > 0;
}

/* Does the rule be_config.admit_uids (validated when the context is made)
 * allow @uid? */
static bool admit_uid_ok(const char *rule, uint32_t uid)
{
	uint32_t self = (uint32_t)geteuid();

	if (!*rule)
		return uid == self;
	if (strcmp(rule, "*") == 0)
		return true;
	while (*rule) {
		size_t n = strcspn(rule, ",");

		if (n == 4 && strncmp(rule, "self", 4) == 0) {
			if (uid == self)
				return true;
		} else if (strtoull(rule, NULL, 10) == uid) {
			return true;
		}
		rule += n;
		if (*rule == ',')
			rule++;
	}
	return false;
}

static void admit_count(struct be_worker *w, const char *addr, const char *why)
{
	w->admit_refused++;
	be_log_warn("admission: refused %s: %s", addr, why);
}

/* The listener's hook, if any: 0 to admit. */
static int admit_hook(struct be_listener *l, const char *addr, bool has_cred, uint32_t uid,
		      uint32_t gid, int32_t pid, bool authenticated)
{
	struct be_peer_info pi = {
		.addr = addr,
		.has_cred = has_cred,
		.uid = uid,
		.gid = gid,
		.pid = pid,
		.authenticated = authenticated,
	};
	int rc;

	if (!l || !l->admit)
		return 0;
	rc = l->admit(l, &pi, l->admit_user);
	return rc < 0 ? rc : 0;
}

int be__admit_request(struct be_worker *w, struct be_listener *l, const struct be_xevent *ev,
		      const struct be__hello *peer, const char *addr)
{
	const struct be_config *cfg = &w->ctx->cfg;
	char why[256];
	int rc;

	if (ev->has_cred && !admit_uid_ok(cfg->admit_uids, ev->peer_uid)) {
		snprintf(why, sizeof(why), "uid %u not allowed (admit_uids \"%s\")", ev->peer_uid,
			 cfg->admit_uids);
		admit_count(w, addr, why);
		return BE_REJECT_ADMISSION;
	}
	if (admit_has_secret(w)) {
		if (!(peer->flags & BE_HELLO_F_AUTH)) {
			admit_count(w, addr, "it offers no shared secret and we require one");
			return BE_REJECT_AUTH;
		}
		return 0; /* the hook runs once the secret is proven */
	}
	rc = admit_hook(l, addr, ev->has_cred, ev->peer_uid, ev->peer_gid, ev->peer_pid, false);
	if (rc) {
		snprintf(why, sizeof(why), "the accept hook refused it (%s)", be_strerror(rc));
		admit_count(w, addr, why);
		return BE_REJECT_ADMISSION;
	}
	return 0;
}

/* MAC(@role) over the transcript (see the top of the file) into @out.
 * Returns 0 or -EIO (libcrypto failed). */
static int admit_mac(const struct be__engine *e, char role, uint8_t out[BE_AUTH_MAC])
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	uint8_t msg[sizeof(ADMIT_LABEL) - 1 + 1 + 2 * BE_AUTH_NONCE + 2 * BE_PROTO_HELLO_LEN];
	unsigned int len = BE_AUTH_MAC;
	uint8_t *p = msg;

	memcpy(p, ADMIT_LABEL, sizeof(ADMIT_LABEL) - 1);
	p += sizeof(ADMIT_LABEL) - 1;
	*p++ = (uint8_t)role;
	memcpy(p, e->nonce_c, BE_AUTH_NONCE);
	p += BE_AUTH_NONCE;
	memcpy(p, e->nonce_s, BE_AUTH_NONCE);
	p += BE_AUTH_NONCE;
	memcpy(p, e->hello_c, BE_PROTO_HELLO_LEN);
	p += BE_PROTO_HELLO_LEN;
	memcpy(p, e->hello_s, BE_PROTO_HELLO_LEN);
	if (!HMAC(EVP_sha256(), cfg->auth_secret, (int)cfg->auth_secret_len, msg, sizeof(msg), out,
		  &len) ||
	    len != BE_AUTH_MAC)
		return -EIO;
	return 0;
}

static bool admit_mac_ok(const struct be__engine *e, char role, const uint8_t *mac)
{
	uint8_t want[BE_AUTH_MAC];
	bool ok = admit_mac(e, role, want) == 0 && CRYPTO_memcmp(want, mac, BE_AUTH_MAC) == 0;

	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

static int admit_nonce(uint8_t *out)
{
	size_t got = 0;

	while (got < BE_AUTH_NONCE) {
		ssize_t n = getrandom(out + got, BE_AUTH_NONCE - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

/* Queue AUTH @step with @nonce and @mac (either may be NULL: zeros). */
static int admit_send(struct be__engine *e, uint32_t step, const uint8_t *nonce,
		      const uint8_t *mac)
{
	uint8_t body[BE_AUTH_BODY] = { 0 };
	struct be__frame f = { .type = BE_FR_AUTH, .msg = step, .auth = body };

	if (nonce)
		memcpy(body, nonce, BE_AUTH_NONCE);
	if (mac)
		memcpy(body + BE_AUTH_NONCE, mac, BE_AUTH_MAC);
	return be__engine_ctrl(e, &f);
}

/* Queue AUTH @step carrying MAC(@role). Returns 0, or false after
 * failing @e. */
static bool admit_send_mac(struct be__engine *e, uint32_t step, char role)
{
	uint8_t mac[BE_AUTH_MAC];
	int rc = admit_mac(e, role, mac);

	if (!rc)
		rc = admit_send(e, step, NULL, mac);
	OPENSSL_cleanse(mac, sizeof(mac));
	if (rc)
		be__engine_fail(e, rc, "admission: no MAC, or no memory for it");
	return rc == 0;
}

/* Draw a fresh @nonce, wait in state @next and queue AUTH @step with the
 * nonce; fails @e when either cannot be done. */
static void admit_send_nonce(struct be__engine *e, uint32_t step, uint8_t *nonce,
			     enum be__admit_state next)
{
	if (admit_nonce(nonce)) {
		be__engine_fail(e, -EIO, "admission: no random bytes");
		return;
	}
	e->admit = next;
	if (admit_send(e, step, nonce, NULL))
		be__engine_fail(e, -ENOMEM, "no memory for a control frame");
}

/* Acceptor: the connector's nonce is in and the transport is up. */
static void admit_challenge(struct be__engine *e)
{
	admit_send_nonce(e, BE_AUTH_CHALLENGE, e->nonce_s, BE_ADM_WAIT_PROOF);
}

/* Either side: the peer is admitted (or no secret was asked for); the
 * Engine is established. */
static void admit_done(struct be__engine *e)
{
	e->admit = BE_ADM_DONE;
	be__engine_admitted(e);
}

/* Acceptor: refuse @e with @reason; it ends once the REFUSED left. */
static void admit_refuse(struct be__engine *e, uint32_t reason, const char *why)
{
	uint8_t r[BE_AUTH_NONCE] = { 0 };

	admit_count(e->w, e->addr, why);
	r[0] = (uint8_t)reason;
	e->admit = BE_ADM_REFUSING;
	if (admit_send(e, BE_AUTH_REFUSED, r, NULL))
		be__engine_fail(e, -EACCES, "not admitted");
}

void be__admit_sent(struct be__engine *e)
{
	if (e->admit == BE_ADM_REFUSING && !be__window_busy(&e->win) &&
	    be__list_empty(&e->ctrlq) && !e->cur)
		be__engine_fail(e, -EACCES, "not admitted");
}

void be__admit_established(struct be__engine *e, const struct be_xevent *ev)
{
	const struct be_config *cfg = &e->w->ctx->cfg;
	bool secret = admit_has_secret(e->w);
	char why[256];

	if (!e->connector) {
		if (e->admit == BE_ADM_DONE)
			be__engine_admitted(e);
		else if (e->admit == BE_ADM_GOT_HELLO)
			admit_challenge(e);
		return;
	}
	if (ev->has_cred && !admit_uid_ok(cfg->admit_uids, ev->peer_uid)) {
		snprintf(why, sizeof(why), "the listener's uid %u is not allowed (admit_uids \"%s\")",
			 ev->peer_uid, cfg->admit_uids);
		be_log_warn("admission: %s: %s", e->addr, why);
		be__engine_fail(e, -EACCES, why);
		return;
	}
	if (secret && !(e->peer.flags & BE_HELLO_F_AUTH)) {
		be__engine_fail(e, -EACCES, "the peer holds no shared secret and we require one");
		return;
	}
	e->auth = secret;
	if (!e->auth) {
		admit_done(e);
		return;
	}
	memcpy(e->hello_s, ev->priv, BE_PROTO_HELLO_LEN);
	admit_send_nonce(e, BE_AUTH_HELLO, e->nonce_c, BE_ADM_WAIT_CHALLENGE);
}

static const char *admit_auth(struct be__engine *e, const struct be__frame *f)
{
	const uint8_t *nonce = f->auth, *mac = f->auth + BE_AUTH_NONCE;
	char why[256];
	int rc;

	switch (f->msg) {
	case BE_AUTH_HELLO:
		if (e->connector || e->admit != BE_ADM_WAIT_HELLO)
			return "AUTH HELLO out of turn";
		memcpy(e->nonce_c, nonce, BE_AUTH_NONCE);
		if (e->xestab)
			admit_challenge(e);
		else
			e->admit = BE_ADM_GOT_HELLO;
		return NULL;
	case BE_AUTH_CHALLENGE:
		if (!e->connector || e->admit != BE_ADM_WAIT_CHALLENGE)
			return "AUTH CHALLENGE out of turn";
		memcpy(e->nonce_s, nonce, BE_AUTH_NONCE);
		if (admit_send_mac(e, BE_AUTH_PROOF, 'C'))
			e->admit = BE_ADM_WAIT_ACCEPT;
		return NULL;
	case BE_AUTH_PROOF:
		if (e->connector || e->admit != BE_ADM_WAIT_PROOF)
			return "AUTH PROOF out of turn";
		if (!admit_mac_ok(e, 'C', mac)) {
			admit_refuse(e, BE_REJECT_AUTH, "it did not prove the shared secret");
			return NULL;
		}
		rc = admit_hook(e->listener, e->addr, e->has_cred, e->peer_uid, e->peer_gid,
				e->peer_pid, true);
		if (rc) {
			snprintf(why, sizeof(why), "the accept hook refused it (%s)", be_strerror(rc));
			admit_refuse(e, BE_REJECT_ADMISSION, why);
			return NULL;
		}
		if (admit_send_mac(e, BE_AUTH_ACCEPT, 'S'))
			admit_done(e);
		return NULL;
	case BE_AUTH_ACCEPT:
		if (!e->connector || e->admit != BE_ADM_WAIT_ACCEPT)
			return "AUTH ACCEPT out of turn";
		if (!admit_mac_ok(e, 'S', mac)) {
			be_log_warn("admission: %s did not prove the shared secret", e->addr);
			be__engine_fail(e, -EACCES, "the peer did not prove the shared secret");
			return NULL;
		}
		admit_done(e);
		return NULL;
	case BE_AUTH_REFUSED:
		if (!e->connector || e->admit != BE_ADM_WAIT_ACCEPT)
			return "AUTH REFUSED out of turn";
		snprintf(why, sizeof(why), "refused by the peer: %s",
			 nonce[0] <= BE_REJECT_MAX ? be__reject_str(nonce[0]) : "unknown reason");
		be_log_warn("admission: %s: %s", e->addr, why);
		be__engine_fail(e, -EACCES, why);
		return NULL;
	default:
		return "unknown AUTH step";
	}
}

const char *be__admit_frame(struct be__engine *e, const struct be__frame *f)
{
	const char *why;

	if (f->type != BE_FR_AUTH) {
		/* After our REFUSED nothing of the peer matters any more. */
		if (e->admit == BE_ADM_REFUSING)
			return NULL;
		return "frame before admission";
	}
	if (f->sock || (f->flags & ~BE_FRF_STARVED))
		return "AUTH frame with a socket or flags";
	if (e->admit == BE_ADM_REFUSING)
		return NULL;
	if (!e->auth)
		return "AUTH frame without a shared secret";
	if (be__credit_return(&e->cr, f->credits))
		return "credit overflow: more credits returned than used";
	e->refs++;
	why = admit_auth(e, f);
	be__engine_unref(e);
	return why;
}
