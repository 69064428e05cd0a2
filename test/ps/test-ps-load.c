/*
 * Check the workload programs end to end: two be-ps servers over the
 * test's transport, found through a naming file, a be-ps-load trainer
 * (pull, compute, push, 20 steps) and then a ranker (Poisson fetches for
 * a second, deadlines of seconds so that a loaded machine does not turn
 * into errors): both exit 0 and print one JSON line with the documented
 * keys, the trainer without an error, the ranker with fetches answered
 * and the keys the trainer never pushed counted as defaults served.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pscluster.h"

static const char *conf = "shards 8\n"
			  "servers 2\n"
			  "table user dim=16 optimizer=adagrad lr=0.05 init=uniform lo=-0.01 hi=0.01\n"
			  "table item dim=8 optimizer=sgd lr=0.05 init=zeros\n";

static const char *const json_keys[] = {
	"\"tool\":\"be-ps-load\"", "\"ops\":", "\"errors\":", "\"shed\":", "\"defaults\":",
	"\"cpu_s_per_1000\":", "_p99_us\":", "_p999_us\":", "_max_us\":", "\"server_rss_kb\":[",
};

/* Run @cmd, return its JSON line in @out; it must exit 0. */
static void run(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	char line[4096];
	unsigned int i;

	ASSERT(p);
	out[0] = 0;
	while (fgets(line, sizeof(line), p))
		if (line[0] == '{')
			snprintf(out, len, "%s", line);
	ASSERT_EQ(pclose(p), 0);
	fprintf(stderr, "%s", out);
	for (i = 0; i < sizeof(json_keys) / sizeof(json_keys[0]); i++)
		if (!strstr(out, json_keys[i]))
			TEST_FAIL("no %s in the JSON line", json_keys[i]);
}

int main(int argc, char **argv)
{
	struct pc c;
	struct pc_server srv[2];
	const char *load = NULL;
	char naming[320], cmd[2048], out[4096];
	FILE *f;
	int i;

	for (i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--load"))
			load = argv[i + 1];
	if (!load)
		TEST_FAIL("--load PATH is required");
	pc_init(&c, argc, argv, conf);
	pc_server_start(&c, &srv[0], 0, false, "p0");
	pc_server_start(&c, &srv[1], 1, false, "p1");
	snprintf(naming, sizeof(naming), "%s/naming", c.dir);
	f = fopen(naming, "w");
	ASSERT(f);
	fprintf(f, "be.ps.0 p0 addr=%s\nbe.ps.1 p1 addr=%s\n", srv[0].addr, srv[1].addr);
	ASSERT_OK(fclose(f));

	snprintf(cmd, sizeof(cmd),
		 "%s trainer --config %s --naming file://%s --tables 2 --keys 256 --steps 20 "
		 "--duration 60 --compute-us 100 --timeout-us 10000000 --server-pid %d "
		 "--server-pid %d --json",
		 load, c.config, naming, (int)srv[0].pid, (int)srv[1].pid);
	run(cmd, out, sizeof(out));
	ASSERT(strstr(out, "\"role\":\"trainer\",\"ops\":20,\"errors\":0,"));
	ASSERT(strstr(out, "\"push_p99_us\":"));

	snprintf(cmd, sizeof(cmd),
		 "%s ranker --config %s --naming file://%s --tables 2 --keys 512 --rate 50 "
		 "--duration 1 --timeout-us 10000000 --server-pid %d --json",
		 load, c.config, naming, (int)srv[0].pid);
	run(cmd, out, sizeof(out));
	ASSERT(strstr(out, "\"role\":\"ranker\""));
	ASSERT(strstr(out, "\"errors\":0,"));
	ASSERT(!strstr(out, "\"ops\":0,"));
	ASSERT(!strstr(out, "\"defaults\":0,"));

	pc_server_stop(&c, &srv[0]);
	pc_server_stop(&c, &srv[1]);
	pc_fini(&c);
	return 0;
}
