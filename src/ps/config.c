/*
 * config.c - parsing the config file (config.h, docs/PS.md "Config
 * file").
 *
 *   # comment                          to the end of the line
 *   shards <n>                         once, required, before any place
 *   servers <n>                        once, default 1, before any place
 *   place <shard>[-<last>] <server>    any number: override the default
 *                                      placement (shard s on server s % n)
 *   limits [keys=<n>] [reply=<bytes>]  once
 *   dedup [trainers=<n>] [idle=<n>]    once
 *   table <name> <key>=<value> ...     1 .. 64, ids in file order
 *
 * Strict: unknown directives and keys, keys given twice, keys that do not
 * apply (beta for sgd), values out of range, trailing junk in a number,
 * a directive given twice: each is an error naming the line. Numbers are
 * decimal integers with an optional K, M or G (binary) suffix, or floats
 * as strtof reads them, finite.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ps/config.h"

#define CFG_MAX_TOKENS 32

struct cfg_parser {
	struct be__ps_config *c;
	unsigned line;
	char *err;
	size_t err_len;
	unsigned seen; /* directives given once: CFG_SEEN_* */
};

enum { CFG_SEEN_SHARDS = 1, CFG_SEEN_SERVERS = 2, CFG_SEEN_LIMITS = 4, CFG_SEEN_DEDUP = 8 };

__attribute__((format(printf, 2, 3))) static int cfg_fail(struct cfg_parser *p, const char *fmt,
							   ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->err && p->err_len && p->line)
		snprintf(p->err, p->err_len, "line %u: %s", p->line, msg);
	else if (p->err && p->err_len)
		snprintf(p->err, p->err_len, "%s", msg);
	return -EINVAL;
}

/* Decimal digits and an optional K/M/G suffix; 0 or -EINVAL/-ERANGE. */
static int cfg_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	switch (*s) {
	case 'K': shift = 10; s++; break;
	case 'M': shift = 20; s++; break;
	case 'G': shift = 30; s++; break;
	default: break;
	}
	if (*s)
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	v <<= shift;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static int cfg_float(const char *s, float *out)
{
	char *end;
	float v;

	if (!*s || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtof(s, &end);
	if (*end || errno || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

static int cfg_u32_arg(struct cfg_parser *p, const char *what, const char *s, uint64_t min,
		       uint64_t max, uint32_t *out)
{
	uint64_t v;

	if (cfg_uint(s, min, max, &v))
		return cfg_fail(p, "%s '%s': expected an integer in %llu..%llu", what, s,
				(unsigned long long)min, (unsigned long long)max);
	*out = (uint32_t)v;
	return 0;
}

/* Split @line at spaces and tabs; returns the number of tokens or -1. */
static int cfg_tokens(char *line, char **tok)
{
	int n = 0;

	for (;;) {
		while (*line == ' ' || *line == '\t' || *line == '\r')
			*line++ = '\0';
		if (!*line)
			return n;
		if (n == CFG_MAX_TOKENS)
			return -1;
		tok[n++] = line;
		while (*line && *line != ' ' && *line != '\t' && *line != '\r')
			line++;
	}
}

/* "key=value": split in place; NULL when there is no '=' or an empty side. */
static char *cfg_kv(char *tok)
{
	char *eq = strchr(tok, '=');

	if (!eq || eq == tok || !eq[1])
		return NULL;
	*eq = '\0';
	return eq + 1;
}

static int cfg_placement(struct cfg_parser *p)
{
	struct be__ps_config *c = p->c;

	if (c->placement)
		return 0;
	if (!(p->seen & CFG_SEEN_SHARDS))
		return cfg_fail(p, "'shards' must come before 'place'");
	c->placement = malloc(sizeof(*c->placement) * c->n_shards);
	if (!c->placement)
		return -ENOMEM;
	be__ps_placement_default(c->placement, c->n_shards, c->n_servers);
	return 0;
}

static int cfg_once(struct cfg_parser *p, unsigned bit, const char *name, int ntok, int want)
{
	if (p->seen & bit)
		return cfg_fail(p, "'%s' given twice", name);
	if (ntok != want)
		return cfg_fail(p, "'%s' takes %d argument%s", name, want - 1,
				want == 2 ? "" : "s");
	if (p->c->placement && (bit == CFG_SEEN_SHARDS || bit == CFG_SEEN_SERVERS))
		return cfg_fail(p, "'%s' must come before 'place'", name);
	p->seen |= bit;
	return 0;
}

static int cfg_place(struct cfg_parser *p, char **tok, int ntok)
{
	struct be__ps_config *c = p->c;
	uint32_t first = 0, last = 0, server = 0, s;
	char *dash;
	int err;

	if (ntok != 3)
		return cfg_fail(p, "'place' takes a shard or range and a server");
	if ((err = cfg_placement(p)))
		return err;
	dash = strchr(tok[1], '-');
	if (dash)
		*dash = '\0';
	if ((err = cfg_u32_arg(p, "shard", tok[1], 0, c->n_shards - 1, &first)))
		return err;
	last = first;
	if (dash && (err = cfg_u32_arg(p, "shard", dash + 1, first, c->n_shards - 1, &last)))
		return err;
	if ((err = cfg_u32_arg(p, "server", tok[2], 0, c->n_servers - 1, &server)))
		return err;
	for (s = first; s <= last; s++)
		c->placement[s] = server;
	return 0;
}

static int cfg_options(struct cfg_parser *p, char **tok, int ntok)
{
	struct be__ps_config *c = p->c;
	bool limits = !strcmp(tok[0], "limits");
	unsigned given = 0;
	int i, err;

	if (p->seen & (limits ? CFG_SEEN_LIMITS : CFG_SEEN_DEDUP))
		return cfg_fail(p, "'%s' given twice", tok[0]);
	p->seen |= limits ? CFG_SEEN_LIMITS : CFG_SEEN_DEDUP;
	for (i = 1; i < ntok; i++) {
		char *v = cfg_kv(tok[i]);
		unsigned which;
		uint64_t x;

		if (!v)
			return cfg_fail(p, "'%s': expected key=value", tok[i]);
		if (limits && !strcmp(tok[i], "keys"))
			which = 1, err = cfg_uint(v, 1, UINT32_MAX, &x);
		else if (limits && !strcmp(tok[i], "reply"))
			which = 2, err = cfg_uint(v, 4096, UINT64_MAX >> 1, &x);
		else if (!limits && !strcmp(tok[i], "trainers"))
			which = 1, err = cfg_uint(v, 1, 1u << 24, &x);
		else if (!limits && !strcmp(tok[i], "idle"))
			which = 2, err = cfg_uint(v, 0, UINT64_MAX >> 1, &x);
		else
			return cfg_fail(p, "'%s': unknown key '%s'", tok[0], tok[i]);
		if (given & which)
			return cfg_fail(p, "'%s' given twice", tok[i]);
		given |= which;
		if (err)
			return cfg_fail(p, "%s '%s': not a number in range", tok[i], v);
		if (limits && which == 1)
			c->limits.max_keys = (uint32_t)x;
		else if (limits)
			c->limits.max_reply_bytes = x;
		else if (which == 1)
			c->dedup.max_trainers = (uint32_t)x;
		else
			c->dedup.evict_idle = x;
	}
	return 0;
}

/* ---- table lines ---- */

enum cfg_key {
	K_DIM, K_OPTIMIZER, K_LR, K_EPS, K_INIT_ACCUM, K_BETA, K_L1, K_L2,
	K_INIT, K_LO, K_HI, K_SEED, K_MISSING, K_MAX_ROWS, K_COUNT
};

static const char *const cfg_key_names[K_COUNT] = {
	"dim", "optimizer", "lr", "eps", "init_accum", "beta", "l1", "l2",
	"init", "lo", "hi", "seed", "missing", "max_rows",
};

static bool cfg_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (!n || n > BE_PS_NAME_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

/* FNV-1a of the name: the default seed, so tables differ and a table's
 * initial values do not change when tables are added or reordered. */
static uint64_t cfg_name_seed(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
	return h;
}

/* A float key: absent keeps *out. */
static int cfg_tfloat(struct cfg_parser *p, const struct be__ps_table *t, char **val,
		      enum cfg_key k, float min, bool min_open, float *out)
{
	float v;

	if (!val[k])
		return 0;
	if (cfg_float(val[k], &v))
		return cfg_fail(p, "table '%s': %s '%s' is not a finite number", t->name,
				cfg_key_names[k], val[k]);
	if (v < min || (min_open && v == min))
		return cfg_fail(p, "table '%s': %s must be %s %g", t->name, cfg_key_names[k],
				min_open ? ">" : ">=", (double)min);
	*out = v;
	return 0;
}

/* Keys that apply only to one optimizer or initializer. */
static int cfg_only(struct cfg_parser *p, const struct be__ps_table *t, char **val,
		    const enum cfg_key *keys, int n, bool applies, const char *to)
{
	int i;

	for (i = 0; i < n; i++)
		if (val[keys[i]] && !applies)
			return cfg_fail(p, "table '%s': '%s' applies to %s only", t->name,
					cfg_key_names[keys[i]], to);
	return 0;
}

static int cfg_table_opt(struct cfg_parser *p, struct be__ps_table *t, char **val)
{
	static const enum cfg_key adagrad[] = { K_EPS, K_INIT_ACCUM };
	static const enum cfg_key ftrl[] = { K_BETA, K_L1, K_L2 };
	struct be__ps_opt *o = &t->opt;
	int err;

	if (!strcmp(val[K_OPTIMIZER], "sgd"))
		o->kind = BE_PS_OPT_SGD;
	else if (!strcmp(val[K_OPTIMIZER], "adagrad"))
		o->kind = BE_PS_OPT_ADAGRAD;
	else if (!strcmp(val[K_OPTIMIZER], "ftrl"))
		o->kind = BE_PS_OPT_FTRL;
	else
		return cfg_fail(p, "table '%s': unknown optimizer '%s' (sgd, adagrad, ftrl)",
				t->name, val[K_OPTIMIZER]);
	o->eps = 1e-8f;
	o->beta = 1.0f;
	if ((err = cfg_only(p, t, val, adagrad, 2, o->kind == BE_PS_OPT_ADAGRAD,
			    "optimizer adagrad")) ||
	    (err = cfg_only(p, t, val, ftrl, 3, o->kind == BE_PS_OPT_FTRL, "optimizer ftrl")) ||
	    (err = cfg_tfloat(p, t, val, K_LR, 0, true, &o->lr)) ||
	    (err = cfg_tfloat(p, t, val, K_EPS, 0, true, &o->eps)) ||
	    (err = cfg_tfloat(p, t, val, K_INIT_ACCUM, 0, false, &o->init_accum)) ||
	    (err = cfg_tfloat(p, t, val, K_BETA, 0, false, &o->beta)) ||
	    (err = cfg_tfloat(p, t, val, K_L1, 0, false, &o->l1)) ||
	    (err = cfg_tfloat(p, t, val, K_L2, 0, false, &o->l2)))
		return err;
	return 0;
}

static int cfg_table_init(struct cfg_parser *p, struct be__ps_table *t, char **val)
{
	static const enum cfg_key uniform[] = { K_LO, K_HI, K_SEED };
	struct be__ps_init *in = &t->init;
	uint64_t v;
	int err;

	if (!strcmp(val[K_INIT], "zeros"))
		in->kind = BE_PS_INIT_ZEROS;
	else if (!strcmp(val[K_INIT], "uniform"))
		in->kind = BE_PS_INIT_UNIFORM;
	else
		return cfg_fail(p, "table '%s': unknown init '%s' (zeros, uniform)", t->name,
				val[K_INIT]);
	if ((err = cfg_only(p, t, val, uniform, 3, in->kind == BE_PS_INIT_UNIFORM,
			    "init uniform")))
		return err;
	if (in->kind != BE_PS_INIT_UNIFORM)
		return 0;
	if (!val[K_LO] || !val[K_HI])
		return cfg_fail(p, "table '%s': init uniform needs lo and hi", t->name);
	if (cfg_float(val[K_LO], &in->lo) || cfg_float(val[K_HI], &in->hi) || !(in->lo < in->hi))
		return cfg_fail(p, "table '%s': lo and hi must be finite, lo < hi", t->name);
	in->seed = cfg_name_seed(t->name);
	if (val[K_SEED]) {
		if (cfg_uint(val[K_SEED], 0, UINT64_MAX, &v))
			return cfg_fail(p, "table '%s': seed '%s' is not an integer", t->name,
					val[K_SEED]);
		in->seed = v;
	}
	return 0;
}

static int cfg_table(struct cfg_parser *p, char **tok, int ntok)
{
	struct be__ps_config *c = p->c;
	struct be__ps_table *t;
	char *val[K_COUNT] = { 0 };
	uint64_t v;
	uint32_t i;
	int k, err;

	if (ntok < 2)
		return cfg_fail(p, "'table' needs a name");
	if (!cfg_name_ok(tok[1]))
		return cfg_fail(p, "table name '%s': 1..%u of [A-Za-z0-9_.-]", tok[1],
				BE_PS_NAME_MAX);
	if (be__ps_config_table(c, tok[1]))
		return cfg_fail(p, "table '%s' defined twice", tok[1]);
	if (c->n_tables == BE_PS_MAX_TABLES)
		return cfg_fail(p, "more than %u tables", BE_PS_MAX_TABLES);
	t = &c->tables[c->n_tables];
	memset(t, 0, sizeof(*t));
	memcpy(t->name, tok[1], strlen(tok[1]) + 1);
	t->id = c->n_tables;
	for (i = 2; i < (uint32_t)ntok; i++) {
		char *value = cfg_kv(tok[i]);

		if (!value)
			return cfg_fail(p, "table '%s': '%s': expected key=value", t->name, tok[i]);
		for (k = 0; k < K_COUNT && strcmp(tok[i], cfg_key_names[k]); k++)
			;
		if (k == K_COUNT)
			return cfg_fail(p, "table '%s': unknown key '%s'", t->name, tok[i]);
		if (val[k])
			return cfg_fail(p, "table '%s': '%s' given twice", t->name, tok[i]);
		val[k] = value;
	}
	if (!val[K_DIM] || !val[K_OPTIMIZER] || !val[K_LR] || !val[K_INIT])
		return cfg_fail(p, "table '%s': dim, optimizer, lr and init are required",
				t->name);
	if ((err = cfg_u32_arg(p, "dim", val[K_DIM], 1, BE_PS_MAX_DIM, &t->dim)) ||
	    (err = cfg_table_opt(p, t, val)) || (err = cfg_table_init(p, t, val)))
		return err;
	t->missing = BE_PS_MISSING_INIT;
	if (val[K_MISSING] && strcmp(val[K_MISSING], "init")) {
		t->missing = BE_PS_MISSING_DEFAULT;
		if (cfg_float(val[K_MISSING], &t->missing_value))
			return cfg_fail(p, "table '%s': missing '%s': 'init' or a finite number",
					t->name, val[K_MISSING]);
	}
	t->max_rows = BE_PS_STORE_MAX_ROWS;
	if (val[K_MAX_ROWS]) {
		if (cfg_uint(val[K_MAX_ROWS], 1, BE_PS_STORE_MAX_ROWS, &v))
			return cfg_fail(p, "table '%s': max_rows '%s': 1..%u", t->name,
					val[K_MAX_ROWS], BE_PS_STORE_MAX_ROWS);
		t->max_rows = v;
	}
	c->n_tables++;
	return 0;
}

static int cfg_line(struct cfg_parser *p, char *line)
{
	struct be__ps_config *c = p->c;
	char *tok[CFG_MAX_TOKENS], *hash = strchr(line, '#');
	int ntok, err;

	if (hash)
		*hash = '\0';
	ntok = cfg_tokens(line, tok);
	if (ntok < 0)
		return cfg_fail(p, "more than %d words", CFG_MAX_TOKENS);
	if (!ntok)
		return 0;
	if (!strcmp(tok[0], "shards")) {
		if ((err = cfg_once(p, CFG_SEEN_SHARDS, "shards", ntok, 2)))
			return err;
		return cfg_u32_arg(p, "shards", tok[1], 1, BE_PS_MAX_SHARDS, &c->n_shards);
	}
	if (!strcmp(tok[0], "servers")) {
		if ((err = cfg_once(p, CFG_SEEN_SERVERS, "servers", ntok, 2)))
			return err;
		return cfg_u32_arg(p, "servers", tok[1], 1, BE_PS_MAX_SHARDS, &c->n_servers);
	}
	if (!strcmp(tok[0], "place"))
		return cfg_place(p, tok, ntok);
	if (!strcmp(tok[0], "limits") || !strcmp(tok[0], "dedup"))
		return cfg_options(p, tok, ntok);
	if (!strcmp(tok[0], "table"))
		return cfg_table(p, tok, ntok);
	return cfg_fail(p, "unknown directive '%s'", tok[0]);
}

static void cfg_defaults(struct be__ps_config *c)
{
	memset(c, 0, sizeof(*c));
	c->n_servers = 1;
	c->limits.max_keys = BE_PS_DEFAULT_MAX_KEYS;
	c->limits.max_reply_bytes = BE_PS_DEFAULT_MAX_REPLY;
	c->dedup.max_trainers = BE_PS_DEFAULT_MAX_TRAINERS;
	c->dedup.evict_idle = BE_PS_DEFAULT_EVICT_IDLE;
}

int be__ps_config_parse(const char *text, size_t len, struct be__ps_config *c, char *err,
			size_t err_len)
{
	struct cfg_parser p = { .c = c, .err = err, .err_len = err_len };
	char *copy, *line, *next;
	int rc = 0;

	cfg_defaults(c);
	if (err && err_len)
		err[0] = '\0';
	if (memchr(text, '\0', len))
		return cfg_fail(&p, "NUL byte in the config");
	copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = '\0';
	for (line = copy; line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		p.line++;
		rc = cfg_line(&p, line);
	}
	free(copy);
	p.line = 0; /* what follows is about the whole file */
	if (!rc && !(p.seen & CFG_SEEN_SHARDS))
		rc = cfg_fail(&p, "no 'shards' line");
	if (!rc && !c->n_tables)
		rc = cfg_fail(&p, "no 'table' line");
	if (!rc && c->n_servers > c->n_shards)
		rc = cfg_fail(&p, "more servers (%u) than shards (%u)", c->n_servers, c->n_shards);
	if (!rc)
		rc = cfg_placement(&p);
	if (rc)
		be__ps_config_close(c);
	return rc;
}

int be__ps_config_load(const char *path, struct be__ps_config *c, char *err, size_t err_len)
{
	char *buf;
	size_t len = 0;
	int fd, rc;

	if (err && err_len)
		err[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (err && err_len)
			snprintf(err, err_len, "%s: %s", path, strerror(-rc));
		return rc;
	}
	buf = malloc(BE_PS_CONFIG_MAX_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, BE_PS_CONFIG_MAX_BYTES + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : 0;
			break;
		}
		len += (size_t)r;
		if (len > BE_PS_CONFIG_MAX_BYTES) {
			rc = -EFBIG;
			break;
		}
	}
	close(fd);
	if (rc) {
		if (err && err_len)
			snprintf(err, err_len, "%s: %s", path,
				 rc == -EFBIG ? "larger than 1 MiB" : strerror(-rc));
	} else {
		rc = be__ps_config_parse(buf, len, c, err, err_len);
	}
	free(buf);
	return rc;
}

void be__ps_config_close(struct be__ps_config *c)
{
	free(c->placement);
	c->placement = NULL;
}

const struct be__ps_table *be__ps_config_table(const struct be__ps_config *c, const char *name)
{
	uint32_t i;

	for (i = 0; i < c->n_tables; i++)
		if (!strcmp(c->tables[i].name, name))
			return &c->tables[i];
	return NULL;
}
