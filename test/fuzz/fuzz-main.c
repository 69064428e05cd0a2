/*
 * fuzz-main.c - the plain-C driver of every harness (fuzz.h): runs each
 * file of the corpus directory, then BE_FUZZ_ITERS (default 200000)
 * mutated inputs, deterministically (a fixed xorshift seed, so a failure
 * reproduces). Mutations are the usual blind ones of a binary format:
 * bit flips, bytes and 32-bit words set to boundary values, runs deleted,
 * duplicated or spliced in from another seed, truncation; and, for a
 * harness with a dictionary (fuzz_dict()), its tokens inserted.
 *
 *   fuzz-NAME CORPUS_DIR               run the corpus and the mutations
 *   fuzz-NAME --write-seeds DIR        write the harness's seeds
 *   fuzz-NAME --run FILE...            run these inputs only (reproduce
 *                                      what libFuzzer found)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "test.h"

#define FUZZ_MAX_SEEDS 256
#define FUZZ_CAP (64u << 10)

struct input {
	uint8_t *p;
	size_t n;
};

static struct input seeds[FUZZ_MAX_SEEDS];
static int nseeds;
static const char *const *dict;
static size_t ndict;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	return test_rand(&rng);
}

static int read_file(const char *path, struct input *in)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -1;
	in->p = malloc(FUZZ_CAP);
	ASSERT(in->p);
	n = fread(in->p, 1, FUZZ_CAP, f);
	fclose(f);
	in->n = n;
	return 0;
}

static void put_file(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	ASSERT(f);
	ASSERT(fwrite(p, 1, n, f) == n);
	fclose(f);
}

/* The dictionary of a harness that has none (fuzz.h). */
__attribute__((weak)) const char *const *fuzz_dict(size_t *n)
{
	*n = 0;
	return NULL;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The corpus in name order, so the run is the same everywhere. */
static void load_corpus(const char *dir)
{
	char *names[FUZZ_MAX_SEEDS], path[512];
	struct dirent *d;
	DIR *dp = opendir(dir);
	int n = 0, i;

	ASSERT(dp);
	while ((d = readdir(dp)) && n < FUZZ_MAX_SEEDS)
		if (d->d_name[0] != '.')
			names[n++] = strdup(d->d_name);
	closedir(dp);
	qsort(names, (size_t)n, sizeof(names[0]), name_cmp);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		ASSERT_EQ(read_file(path, &seeds[nseeds]), 0);
		nseeds++;
		free(names[i]);
	}
	ASSERT_GT(nseeds, 0);
}

static const uint32_t words[] = { 0, 1, 2, 7, 8, 15, 16, 0x7f, 0x80, 0xff, 0x100, 0xffff,
				  0x10000, 0x7fffffff, 0x80000000u, 0xfffffff0u, 0xffffffffu };

static void mutate(uint8_t *b, size_t *n)
{
	size_t at = *n ? next() % *n : 0, len;
	const struct input *o;
	const char *t;
	uint32_t v;

	/* One mutation in five inserts a token of the format (only with a
	 * dictionary: without, the sequence is what it always was). */
	if (ndict && next() % 5 == 0) {
		t = dict[next() % ndict];
		len = strlen(t);
		if (*n + len <= FUZZ_CAP) {
			memmove(b + at + len, b + at, *n - at);
			memcpy(b + at, t, len);
			*n += len;
		}
		return;
	}
	switch (next() % 8) {
	case 0: /* flip a bit */
		if (*n)
			b[at] ^= (uint8_t)(1u << (next() % 8));
		break;
	case 1: /* a byte to a boundary value */
		if (*n)
			b[at] = (uint8_t)words[next() % (sizeof(words) / sizeof(words[0]))];
		break;
	case 2: /* a little-endian word to a boundary value, at a 4-aligned offset */
		at &= ~(size_t)3;
		if (at + 4 <= *n) {
			v = words[next() % (sizeof(words) / sizeof(words[0]))];
			if (next() % 4 == 0)
				v += (uint32_t)(next() % 64) - 32;
			memcpy(b + at, &v, 4);
		}
		break;
	case 3: /* delete a run */
		len = next() % 16 + 1;
		if (at + len <= *n) {
			memmove(b + at, b + at + len, *n - at - len);
			*n -= len;
		}
		break;
	case 4: /* duplicate a run */
		len = next() % 64 + 1;
		if (at + len <= *n && *n + len <= FUZZ_CAP) {
			memmove(b + at + len, b + at, *n - at);
			*n += len;
		}
		break;
	case 5: /* truncate */
		if (*n)
			*n = next() % *n;
		break;
	case 6: /* splice the tail of another seed */
		o = &seeds[next() % (uint64_t)nseeds];
		if (o->n) {
			size_t from = next() % o->n;

			len = o->n - from;
			if (at + len > FUZZ_CAP)
				len = FUZZ_CAP - at;
			memcpy(b + at, o->p + from, len);
			*n = at + len;
		}
		break;
	default: /* append a copy of itself (more frames of the same kind) */
		if (*n && 2 * *n <= FUZZ_CAP) {
			memcpy(b + *n, b, *n);
			*n *= 2;
		}
		break;
	}
}

int main(int argc, char **argv)
{
	const char *env = getenv("BE_FUZZ_ITERS");
	unsigned long iters = env ? strtoul(env, NULL, 10) : 200000, i;
	uint8_t *buf;
	size_t n;
	int s;

	if (argc == 3 && !strcmp(argv[1], "--write-seeds")) {
		fuzz_seeds(put_file, argv[2]);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "--run")) {
		for (s = 2; s < argc; s++) {
			struct input in;

			ASSERT_EQ(read_file(argv[s], &in), 0);
			LLVMFuzzerTestOneInput(in.p, in.n);
			free(in.p);
		}
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR | --write-seeds DIR | --run FILE...\n",
			argv[0]);
		return 2;
	}
	dict = fuzz_dict(&ndict);
	load_corpus(argv[1]);
	for (s = 0; s < nseeds; s++)
		LLVMFuzzerTestOneInput(seeds[s].p, seeds[s].n);
	buf = malloc(FUZZ_CAP);
	ASSERT(buf);
	for (i = 0; i < iters; i++) {
		int k, muts = 1 + (int)(next() % 4);

		s = (int)(next() % (uint64_t)nseeds);
		n = seeds[s].n;
		memcpy(buf, seeds[s].p, n);
		for (k = 0; k < muts; k++)
			mutate(buf, &n);
		LLVMFuzzerTestOneInput(buf, n);
	}
	printf("%s: %d seeds, %lu mutated inputs\n", argv[0], nseeds, iters);
	fuzz_summary(iters);
	for (s = 0; s < nseeds; s++)
		free(seeds[s].p);
	free(buf);
	return 0;
}
