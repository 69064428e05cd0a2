/*
 * perf_opts.c - the option parser every be-perf subcommand shares: a
 * table of options (perf.h, struct perf_opt) instead of a strcmp chain or
 * a getopt switch per subcommand, so that every subcommand takes its
 * options the same way and says the same things about bad ones.
 */
#include <stdlib.h>
#include <string.h>

#include "perf.h"

static const struct perf_opt *opts_find(const struct perf_opt *opts, const char *a, size_t len)
{
	for (; opts->type != PERF_OPT_END; opts++)
		if (opts->name && strlen(opts->name) == len && !strncmp(opts->name, a, len))
			return opts;
	return NULL;
}

int perf_opts_parse(const char *cmd, int argc, char **argv, const struct perf_opt *opts,
		    void (*usage)(FILE *f, const char *cmd))
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *eq = strchr(a, '='), *v;
		const struct perf_opt *o;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout, cmd);
			return 0;
		}
		o = opts_find(opts, a, eq ? (size_t)(eq - a) : strlen(a));
		if (!o) {
			fprintf(stderr, "be-perf %s: unknown option '%s' (see --help)\n", cmd, a);
			return 2;
		}
		if (o->type == PERF_OPT_FLAG) {
			if (eq) {
				fprintf(stderr, "be-perf %s: %s takes no value\n", cmd, o->name);
				return 2;
			}
			*(int *)o->dst = o->val;
			continue;
		}
		v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
		if (!v) {
			fprintf(stderr, "be-perf %s: %s needs a value\n", cmd, o->name);
			return 2;
		}
		switch (o->type) {
		case PERF_OPT_STR:
			*(const char **)o->dst = v;
			break;
		case PERF_OPT_SIZE:
			*(uint64_t *)o->dst = perf_parse_size(v);
			break;
		case PERF_OPT_U32:
			*(uint32_t *)o->dst = (uint32_t)perf_parse_size(v);
			break;
		case PERF_OPT_INT:
			*(int *)o->dst = atoi(v);
			break;
		case PERF_OPT_FN:
			if (o->fn(o->dst, v))
				return 2;
			break;
		default:
			break;
		}
	}
	return -1;
}

int perf_opts_bad(const char *cmd)
{
	fprintf(stderr, "be-perf %s: bad arguments (see --help)\n", cmd);
	return 2;
}
