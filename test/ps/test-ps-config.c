/*
 * Check the config parser: a complete file gives exactly the tables,
 * shards, placement, limits and dedup settings it says, with documented
 * defaults for what it leaves out; each of a list of malformed files is
 * refused with -EINVAL and a message naming the line and the problem
 * (unknown directive or key, a key twice, a key of another optimizer,
 * values out of range or with trailing junk, missing required keys,
 * order); loading reports a missing file and an oversized one.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pstest.h"

static const char *good =
	"# a model\n"
	"shards 300   # logical shards\n"
	"servers 4\n"
	"place 0-9 3\n"
	"\tplace 299 1\r\n"
	"limits keys=64K reply=16M\n"
	"dedup trainers=512 idle=1000\n"
	"\n"
	"table user dim=16 optimizer=adagrad lr=0.05 init=uniform lo=-0.01 hi=0.01 seed=42\n"
	"table item.v2 dim=64 optimizer=ftrl lr=0.1 beta=0.5 l1=0.001 l2=1e-4 init=zeros "
	"missing=0 max_rows=1M\n"
	"table ctx-1 dim=1 optimizer=sgd lr=1 init=uniform lo=0 hi=1 missing=init\n"
	"table ada2 dim=8 optimizer=adagrad lr=0.5 eps=1e-6 init_accum=0.1 init=zeros\n";

static void test_good(void)
{
	struct be__ps_config c;
	const struct be__ps_table *t;
	uint32_t s;

	pt_config(&c, good);
	ASSERT_EQ(c.n_shards, 300);
	ASSERT_EQ(c.n_servers, 4);
	for (s = 0; s < 300; s++)
		ASSERT_EQ(c.placement[s], s < 10 ? 3 : s == 299 ? 1 : s % 4);
	ASSERT_EQ(c.limits.max_keys, 65536);
	ASSERT_UEQ(c.limits.max_reply_bytes, 16u << 20);
	ASSERT_EQ(c.dedup.max_trainers, 512);
	ASSERT_UEQ(c.dedup.evict_idle, 1000);
	ASSERT_EQ(c.n_tables, 4);

	t = be__ps_config_table(&c, "user");
	ASSERT(t && t->id == 0 && t->dim == 16);
	ASSERT(t->opt.kind == BE_PS_OPT_ADAGRAD && t->opt.lr == 0.05f);
	ASSERT(t->opt.eps == 1e-8f && t->opt.init_accum == 0.0f);
	ASSERT(t->init.kind == BE_PS_INIT_UNIFORM && t->init.lo == -0.01f && t->init.hi == 0.01f);
	ASSERT_UEQ(t->init.seed, 42);
	ASSERT(t->missing == BE_PS_MISSING_INIT);
	ASSERT_UEQ(t->max_rows, BE_PS_STORE_MAX_ROWS);

	t = be__ps_config_table(&c, "item.v2");
	ASSERT(t && t->id == 1 && t->dim == 64 && t->opt.kind == BE_PS_OPT_FTRL);
	ASSERT(t->opt.lr == 0.1f && t->opt.beta == 0.5f && t->opt.l1 == 0.001f &&
	       t->opt.l2 == 1e-4f);
	ASSERT(t->init.kind == BE_PS_INIT_ZEROS);
	ASSERT(t->missing == BE_PS_MISSING_DEFAULT && t->missing_value == 0.0f);
	ASSERT_UEQ(t->max_rows, 1u << 20);

	t = be__ps_config_table(&c, "ctx-1");
	ASSERT(t && t->id == 2 && t->dim == 1 && t->opt.kind == BE_PS_OPT_SGD);
	ASSERT(t->missing == BE_PS_MISSING_INIT);
	/* Default seed: FNV-1a 64 of the name. */
	ASSERT_UEQ(t->init.seed, 0xd8d899cf63011ae8ull);

	t = be__ps_config_table(&c, "ada2");
	ASSERT(t && t->opt.eps == 1e-6f && t->opt.init_accum == 0.1f);
	ASSERT(be__ps_config_table(&c, "nope") == NULL);
	be__ps_config_close(&c);

	/* Defaults. */
	pt_config(&c, "shards 1\ntable t dim=2 optimizer=ftrl lr=1 init=zeros\n");
	ASSERT_EQ(c.n_servers, 1);
	ASSERT_EQ(c.placement[0], 0);
	ASSERT_EQ(c.limits.max_keys, BE_PS_DEFAULT_MAX_KEYS);
	ASSERT_UEQ(c.limits.max_reply_bytes, BE_PS_DEFAULT_MAX_REPLY);
	ASSERT_EQ(c.dedup.max_trainers, BE_PS_DEFAULT_MAX_TRAINERS);
	ASSERT_UEQ(c.dedup.evict_idle, BE_PS_DEFAULT_EVICT_IDLE);
	ASSERT(c.tables[0].opt.beta == 1.0f && c.tables[0].opt.l1 == 0 && c.tables[0].opt.l2 == 0);
	be__ps_config_close(&c);
}

#define T "table t dim=4 optimizer=sgd lr=0.1 init=zeros"

static const struct {
	const char *text;
	const char *err; /* a substring of the message */
} bad[] = {
	{ "", "no 'shards' line" },
	{ "shards 4\n", "no 'table' line" },
	{ "shards 4\nshards 4\n" T, "line 2: 'shards' given twice" },
	{ "shards 0\n" T, "line 1: shards '0'" },
	{ "shards 65537\n" T, "line 1: shards" },
	{ "shards 4x\n" T, "line 1: shards '4x'" },
	{ "shards -4\n" T, "line 1: shards" },
	{ "shards\n" T, "line 1: 'shards' takes 1 argument" },
	{ "shards 4 5\n" T, "line 1: 'shards' takes 1 argument" },
	{ "shards 2\nservers 3\n" T, "more servers (3) than shards (2)" },
	{ "place 0 1\nshards 4\n" T, "line 1: 'shards' must come before 'place'" },
	{ "shards 4\nplace 0 0\nservers 2\n" T, "line 3: 'servers' must come before 'place'" },
	{ "shards 4\nservers 2\nplace 0 2\n" T, "line 3: server '2'" },
	{ "shards 4\nplace 4 0\n" T, "line 2: shard '4'" },
	{ "shards 4\nplace 3-1 0\n" T, "line 2: shard '1'" },
	{ "shards 4\nplace 1- 0\n" T, "line 2: shard ''" },
	{ "shards 4\nplace 1\n" T, "line 2: 'place' takes" },
	{ "shards 4\nlimits keys=0\n" T, "line 2: keys '0'" },
	{ "shards 4\nlimits reply=100\n" T, "line 2: reply '100'" },
	{ "shards 4\nlimits keys=1 keys=2\n" T, "line 2: 'keys' given twice" },
	{ "shards 4\nlimits keys=1\nlimits reply=8K\n" T, "line 3: 'limits' given twice" },
	{ "shards 4\nlimits trainers=1\n" T, "line 2: 'limits': unknown key 'trainers'" },
	{ "shards 4\ndedup trainers\n" T, "line 2: 'trainers': expected key=value" },
	{ "shards 4\nshard 4\n" T, "line 2: unknown directive 'shard'" },
	{ "shards 4\ntable\n", "line 2: 'table' needs a name" },
	{ "shards 4\ntable a/b dim=1\n", "line 2: table name 'a/b'" },
	{ "shards 4\n" T "\n" T "\n", "line 3: table 't' defined twice" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=0.1\n", "dim, optimizer, lr and init are required" },
	{ "shards 4\ntable t optimizer=sgd lr=0.1 init=zeros\n", "are required" },
	{ "shards 4\n" T " dims=4\n", "line 2: table 't': unknown key 'dims'" },
	{ "shards 4\n" T " dim=4\n", "line 2: table 't': 'dim' given twice" },
	{ "shards 4\n" T " dim\n", "'dim': expected key=value" },
	{ "shards 4\n" T " dim=\n", "'dim=': expected key=value" },
	{ "shards 4\ntable t dim=0 optimizer=sgd lr=0.1 init=zeros\n", "dim '0'" },
	{ "shards 4\ntable t dim=4097 optimizer=sgd lr=0.1 init=zeros\n", "dim '4097'" },
	{ "shards 4\ntable t dim=4 optimizer=adam lr=0.1 init=zeros\n", "unknown optimizer 'adam'" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=0 init=zeros\n", "lr must be > 0" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=-1 init=zeros\n", "lr must be > 0" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=nan init=zeros\n", "lr 'nan' is not a finite" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=1e40 init=zeros\n", "lr '1e40'" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=0.1x init=zeros\n", "lr '0.1x'" },
	{ "shards 4\n" T " beta=1\n", "'beta' applies to optimizer ftrl only" },
	{ "shards 4\n" T " eps=1\n", "'eps' applies to optimizer adagrad only" },
	{ "shards 4\ntable t dim=4 optimizer=adagrad lr=1 eps=0 init=zeros\n", "eps must be > 0" },
	{ "shards 4\ntable t dim=4 optimizer=ftrl lr=1 l1=-1 init=zeros\n", "l1 must be >= 0" },
	{ "shards 4\n" T " lo=0\n", "'lo' applies to init uniform only" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=1 init=normal\n", "unknown init 'normal'" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=1 init=uniform lo=1\n", "needs lo and hi" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=1 init=uniform lo=1 hi=1\n", "lo < hi" },
	{ "shards 4\ntable t dim=4 optimizer=sgd lr=1 init=uniform lo=0 hi=1 seed=x\n", "seed 'x'" },
	{ "shards 4\n" T " missing=zero\n", "missing 'zero'" },
	{ "shards 4\n" T " max_rows=0\n", "max_rows '0'" },
	{ "shards 4\n" T " max_rows=4G\n", "max_rows '4G'" },
	{ "shards 4\n" T " a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14 o=15 "
	  "p=16 q=17 r=18 s=19 t=20 u=21 v=22 w=23 x=24 y=25 z=26 aa=27\n", "more than 32 words" },
};

static void test_bad(void)
{
	char err[256];
	size_t i;

	for (i = 0; i < BE_ARRAY_SIZE(bad); i++) {
		struct be__ps_config c;
		int rc = be__ps_config_parse(bad[i].text, strlen(bad[i].text), &c, err, sizeof(err));

		if (rc != -EINVAL || !strstr(err, bad[i].err))
			TEST_FAIL("case %zu: rc %d, message '%s', expected '%s'", i, rc, err,
				  bad[i].err);
		ASSERT(c.placement == NULL);
	}
	/* A NUL byte, and a message that fits a small buffer. */
	{
		struct be__ps_config c;
		static const char nul[] = "shards 4\n\0table";

		ASSERT_EQ(be__ps_config_parse(nul, sizeof(nul) - 1, &c, err, sizeof(err)), -EINVAL);
		ASSERT(strstr(err, "NUL"));
		ASSERT_EQ(be__ps_config_parse("x", 1, &c, err, 8), -EINVAL);
		ASSERT_EQ(strlen(err), 7);
		ASSERT_EQ(be__ps_config_parse("x", 1, &c, NULL, 0), -EINVAL);
	}
	/* More than 64 tables. */
	{
		struct be__ps_config c;
		char *big = malloc(100 * 80), *p = big;
		int k;

		ASSERT(big);
		p += sprintf(p, "shards 1\n");
		for (k = 0; k < 65; k++)
			p += sprintf(p, "table t%d dim=1 optimizer=sgd lr=1 init=zeros\n", k);
		ASSERT_EQ(be__ps_config_parse(big, strlen(big), &c, err, sizeof(err)), -EINVAL);
		ASSERT(strstr(err, "line 66: more than 64 tables"));
		free(big);
	}
}

static void test_load(void)
{
	struct be__ps_config c;
	char dir[256], path[512], err[256];
	FILE *f;
	int fd;

	pt_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/model.conf", dir);
	ASSERT_EQ(be__ps_config_load(path, &c, err, sizeof(err)), -ENOENT);
	ASSERT(strstr(err, "model.conf"));
	f = fopen(path, "w");
	ASSERT(f);
	fputs(good, f);
	fclose(f);
	ASSERT_OK(be__ps_config_load(path, &c, err, sizeof(err)));
	ASSERT_EQ(c.n_tables, 4);
	be__ps_config_close(&c);
	fd = open(path, O_WRONLY | O_TRUNC);
	ASSERT_GE(fd, 0);
	ASSERT_OK(ftruncate(fd, BE_PS_CONFIG_MAX_BYTES + 1));
	close(fd);
	ASSERT_EQ(be__ps_config_load(path, &c, err, sizeof(err)), -EFBIG);
	pt_rmdir(dir);
}

int main(void)
{
	test_good();
	test_bad();
	test_load();
	return 0;
}
