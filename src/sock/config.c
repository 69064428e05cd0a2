/*
 * config.c - defaults of struct be_config, their BE_* environment
 * overrides, and the checks a context applies before using one.
 *
 * Why these defaults: 8 KiB eager covers a parameter-server request of
 * 512 keys (4 KiB) with its RPC and pull headers in one copy, where a 4
 * KiB limit sent every such request down the large-message path; 10 KiB
 * receive buffers (a bemalloc size class) hold a full eager message with
 * its frame header and 2 KiB of small frames batched with it; a grant of
 * 8 credits x 10 KiB is 80 KiB of receive memory per quiet Engine, 64
 * credits (640 KiB) per busy one, and 512 initial receives serve 64 quiet
 * peers before
 * the SRQ grows; a 1 MiB window is about 80 us at 100 Gb/s,
 * enough to keep a link busy while bounding incast bursts; 50 us of
 * spinning catches a ping-pong's answer without burning a core when idle.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <be/be.h>
#include <be/sock.h>
#include "engine/ctx.h"
#include "engine/proto.h"
#include "sock/config.h"
#include "util/abi.h"
#include "util/common.h"
#include "util/log.h"

static void config_env64(const char *name, uint64_t *v)
{
	uint64_t x;
	int rc = be__env_size(name, &x);

	if (rc < 0)
		be_log_warn("config: ignoring malformed %s", name);
	else if (rc > 0)
		*v = x;
}

static void config_env_str(const char *name, char *v, size_t len)
{
	const char *s = getenv(name);

	if (!s)
		return;
	if (strlen(s) >= len) {
		be_log_warn("config: ignoring %s: too long", name);
		return;
	}
	snprintf(v, len, "%s", s);
}

static void config_env32(const char *name, uint32_t *v)
{
	uint64_t x = *v;

	config_env64(name, &x);
	if (x > UINT32_MAX) {
		be_log_warn("config: ignoring %s: too large", name);
		return;
	}
	*v = (uint32_t)x;
}

void be_config_init_sized(struct be_config *out)
{
	struct be_config c, *cfg = &c;
	uint32_t sched = 1;

	*cfg = (struct be_config){
		.size = sizeof(*cfg),
		.eager_max = 8192,
		.recv_buf_size = 10240,
		.srq_depth = 512,
		.srq_max_depth = BE_CTX_DEFAULT_SRQ_MAX_DEPTH,
		.credits = 64,
		.credits_init = 8,
		.send_window = 0,
		.frag_size = 0,
		.frag_sched = 1,
		.sq_depth = BE_CTX_DEFAULT_SQ_DEPTH,
		.cq_depth = BE_CTX_DEFAULT_CQ_DEPTH,
		.keepalive_ms = 1000,
		.conn_timeout_ms = 10000,
		.spin_us = 50,
		.max_sockets = 65536,
		.max_msg_size = 1ull << 30,
		.max_grant_bytes = 256ull << 20,
		.max_worker_grant_bytes = 1ull << 30,
		.max_peer_engines = 128,
		.max_peer_sockets = 65536,
		.max_peer_grant_bytes = 256ull << 20,
		.max_reqs = 4,
		.sock_window = 16ull << 20,
		.nomem_backoff_us = 1000,
		.nomem_backoff_max_us = 100000,
		.engine_idle_ms = 30000,
		.close_timeout_ms = 10000,
		.oneway = 1,
	};
	config_env32("BE_EAGER_MAX", &cfg->eager_max);
	config_env32("BE_RECV_BUF_SIZE", &cfg->recv_buf_size);
	config_env32("BE_SRQ_DEPTH", &cfg->srq_depth);
	config_env32("BE_SRQ_MAX_DEPTH", &cfg->srq_max_depth);
	config_env32("BE_CREDITS", &cfg->credits);
	config_env32("BE_CREDITS_INIT", &cfg->credits_init);
	if (getenv("BE_SEND_WINDOW") && !strcmp(getenv("BE_SEND_WINDOW"), "off"))
		cfg->send_window = BE_SEND_WINDOW_OFF;
	else
		config_env64("BE_SEND_WINDOW", &cfg->send_window);
	config_env32("BE_FRAG_SIZE", &cfg->frag_size);
	config_env32("BE_FRAG_SCHED", &sched);
	cfg->frag_sched = sched != 0;
	config_env32("BE_SQ_DEPTH", &cfg->sq_depth);
	config_env32("BE_CQ_DEPTH", &cfg->cq_depth);
	config_env32("BE_KEEPALIVE_MS", &cfg->keepalive_ms);
	config_env32("BE_CONN_TIMEOUT_MS", &cfg->conn_timeout_ms);
	config_env32("BE_CONNECT_TIMEOUT_MS", &cfg->connect_timeout_ms);
	config_env32("BE_SPIN_US", &cfg->spin_us);
	config_env32("BE_MAX_SOCKETS", &cfg->max_sockets);
	config_env64("BE_MAX_MSG", &cfg->max_msg_size);
	config_env64("BE_MAX_GRANT_BYTES", &cfg->max_grant_bytes);
	config_env64("BE_MAX_WORKER_GRANT_BYTES", &cfg->max_worker_grant_bytes);
	config_env32("BE_MAX_PEER_ENGINES", &cfg->max_peer_engines);
	config_env32("BE_MAX_PEER_SOCKETS", &cfg->max_peer_sockets);
	config_env64("BE_MAX_PEER_GRANT_BYTES", &cfg->max_peer_grant_bytes);
	config_env32("BE_MAX_REQS", &cfg->max_reqs);
	config_env64("BE_SOCK_WINDOW", &cfg->sock_window);
	config_env32("BE_NOMEM_BACKOFF_US", &cfg->nomem_backoff_us);
	config_env32("BE_NOMEM_BACKOFF_MAX_US", &cfg->nomem_backoff_max_us);
	config_env32("BE_ENGINE_IDLE_MS", &cfg->engine_idle_ms);
	config_env32("BE_CLOSE_TIMEOUT_MS", &cfg->close_timeout_ms);
	config_env32("BE_ONEWAY", &cfg->oneway);
	cfg->oneway = cfg->oneway != 0;
	config_env_str("BE_AUTH_SECRET_FILE", cfg->auth_secret_file, sizeof(cfg->auth_secret_file));
	config_env_str("BE_ADMIT_UIDS", cfg->admit_uids, sizeof(cfg->admit_uids));
	{
		const char *sec = getenv("BE_AUTH_SECRET");
		size_t n = sec ? strlen(sec) : 0;

		if (n > sizeof(cfg->auth_secret))
			be_log_warn("config: ignoring BE_AUTH_SECRET: longer than %zu bytes",
				    sizeof(cfg->auth_secret));
		else if (n) {
			memcpy(cfg->auth_secret, sec, n);
			cfg->auth_secret_len = (uint32_t)n;
		}
	}
	if (out)
		be__abi_write(out, cfg, sizeof(*cfg), BE__CONFIG_V1);
}

/*
 * Read the shared secret from @path into @cfg: a regular file that only
 * its owner may read or write (a secret others can read is no secret, and
 * one others can write lets them pick it), its first line without the
 * newline, 1 .. BE_AUTH_SECRET_MAX bytes. Returns 0, -EACCES (mode),
 * -EINVAL (not a regular file, empty, too long) or open's -errno.
 */
static int config_read_secret(struct be_config *cfg, const char *path)
{
	uint8_t buf[BE_AUTH_SECRET_MAX + 2];
	struct stat st;
	ssize_t n;
	size_t len;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		be_log_err("config: auth_secret_file %s: %s", path, be_strerror(rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		be_log_err("config: auth_secret_file %s is not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		be_log_err("config: auth_secret_file %s: mode %03o lets others read or write "
			   "it; make it 0600", path, (unsigned)(st.st_mode & 0777));
		rc = -EACCES;
		goto out;
	}
	n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	len = (size_t)n;
	if (len && buf[len - 1] == '\n')
		len--;
	if (len && buf[len - 1] == '\r')
		len--;
	if (!len || len > BE_AUTH_SECRET_MAX || memchr(buf, '\n', len)) {
		be_log_err("config: auth_secret_file %s: the secret must be one line of 1 to %d "
			   "bytes", path, BE_AUTH_SECRET_MAX);
		rc = -EINVAL;
		goto out;
	}
	memcpy(cfg->auth_secret, buf, len);
	cfg->auth_secret_len = (uint32_t)len;
out:
	memset(buf, 0, sizeof(buf));
	close(fd);
	return rc;
}

/* "", "*", or a comma-separated list of uids and "self". */
static int config_check_uids(const char *s)
{
	if (!*s || strcmp(s, "*") == 0)
		return 0;
	while (*s) {
		size_t n = strcspn(s, ",");

		if (!(n == 4 && strncmp(s, "self", 4) == 0)) {
			size_t i;

			if (!n || n > 10)
				return -EINVAL;
			for (i = 0; i < n; i++)
				if (s[i] < '0' || s[i] > '9')
					return -EINVAL;
			if (strtoull(s, NULL, 10) > UINT32_MAX)
				return -EINVAL;
		}
		s += n;
		if (*s == ',' && *++s == '\0')
			return -EINVAL;
	}
	return 0;
}

static void config_clamp32(const char *name, uint32_t *v, uint32_t now, const char *why)
{
	be__log_clamped(name, *v, now, why);
	*v = now;
}

/*
 * be__config_check() - reject impossible settings, clamp the rest so the
 * core's invariants hold (a DATA frame fits a receive buffer, a fragment
 * fits the window), logging each clamp once. A 0 that the field's
 * comment gives a meaning (credits_init, connect_timeout_ms, max_reqs,
 * max_grant_bytes) is that meaning, not a clamp. Returns 0 or -EINVAL.
 */
int be__config_check(struct be_config *cfg)
{
	if (cfg->recv_buf_size < BE_PROTO_MIN_RECV_BUF || cfg->recv_buf_size > BE_PROTO_MAX_RECV_BUF)
		return -EINVAL;
	if (cfg->recv_buf_size % BE_FRAME_ALIGN)
		config_clamp32("recv_buf_size", &cfg->recv_buf_size,
			       BE_ALIGN_UP(cfg->recv_buf_size, BE_FRAME_ALIGN),
			       "rounded up to a multiple of 8");
	if (cfg->credits < BE_PROTO_MIN_CREDITS || cfg->credits > BE_PROTO_MAX_CREDITS)
		return -EINVAL;
	if (!cfg->credits_init)
		cfg->credits_init = cfg->credits;
	else if (cfg->credits_init > cfg->credits)
		config_clamp32("credits_init", &cfg->credits_init, cfg->credits,
			       "at most credits");
	if (cfg->credits_init < BE_PROTO_MIN_CREDITS)
		return -EINVAL;
	if (!cfg->sq_depth || cfg->sq_depth < 8 || !cfg->cq_depth ||
	    !cfg->max_sockets || !cfg->max_msg_size || !cfg->keepalive_ms ||
	    !cfg->conn_timeout_ms)
		return -EINVAL;
	if (cfg->eager_max > cfg->recv_buf_size - BE_FRAME_HDR)
		config_clamp32("eager_max", &cfg->eager_max, cfg->recv_buf_size - BE_FRAME_HDR,
			       "recv_buf_size less one 16-byte frame header");
	if (cfg->srq_depth < cfg->credits)
		config_clamp32("srq_depth", &cfg->srq_depth, cfg->credits, "at least credits");
	if (cfg->srq_max_depth < cfg->srq_depth)
		config_clamp32("srq_max_depth", &cfg->srq_max_depth, cfg->srq_depth,
			       "at least srq_depth");
	if (cfg->frag_size && cfg->send_window && cfg->frag_size > cfg->send_window)
		config_clamp32("frag_size", &cfg->frag_size,
			       (uint32_t)BE_MIN(cfg->send_window, (uint64_t)UINT32_MAX),
			       "at most send_window");
	if (!cfg->connect_timeout_ms)
		cfg->connect_timeout_ms = cfg->conn_timeout_ms;
	if (!cfg->max_reqs)
		cfg->max_reqs = 1;
	if (!cfg->max_grant_bytes)
		cfg->max_grant_bytes = UINT64_MAX;
	if (!cfg->max_worker_grant_bytes)
		cfg->max_worker_grant_bytes = UINT64_MAX;
	if (!cfg->max_peer_grant_bytes)
		cfg->max_peer_grant_bytes = UINT64_MAX;
	if (!cfg->sock_window) {
		cfg->sock_window = UINT64_MAX;
	} else if (cfg->sock_window < BE_PROTO_MIN_SOCK_WINDOW) {
		be_log_warn("config: sock_window %llu raised to %u (the least a peer accepts)",
			    (unsigned long long)cfg->sock_window, BE_PROTO_MIN_SOCK_WINDOW);
		cfg->sock_window = BE_PROTO_MIN_SOCK_WINDOW;
	}
	if (!cfg->nomem_backoff_us)
		config_clamp32("nomem_backoff_us", &cfg->nomem_backoff_us, 1, "at least 1");
	if (cfg->nomem_backoff_max_us < cfg->nomem_backoff_us)
		config_clamp32("nomem_backoff_max_us", &cfg->nomem_backoff_max_us,
			       cfg->nomem_backoff_us, "at least nomem_backoff_us");
	if (cfg->max_sockets > (1u << 24))
		config_clamp32("max_sockets", &cfg->max_sockets, 1u << 24, "at most 2^24");
	if (cfg->auth_secret_len > BE_AUTH_SECRET_MAX ||
	    !memchr(cfg->auth_secret_file, '\0', sizeof(cfg->auth_secret_file)) ||
	    !memchr(cfg->admit_uids, '\0', sizeof(cfg->admit_uids)) ||
	    config_check_uids(cfg->admit_uids))
		return -EINVAL;
	if (!cfg->auth_secret_len && cfg->auth_secret_file[0]) {
		int rc = config_read_secret(cfg, cfg->auth_secret_file);

		if (rc)
			return rc;
	}
	return 0;
}
