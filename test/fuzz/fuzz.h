/*
 * fuzz.h - the harnesses of the parsers a peer feeds (test/fuzz/).
 *
 * Each harness, fuzz-NAME.c, defines LLVMFuzzerTestOneInput() (one input:
 * it must never crash, leak or read out of bounds, and checks what the
 * parser promises of what it accepts) and the functions below.
 * Two builds of each:
 *   fuzz-NAME       this plain-C driver (fuzz-main.c), any compiler: runs
 *                   the seed corpus test/fuzz/corpus/NAME, then a fixed
 *                   number of deterministic mutations of it
 *                   ($BE_FUZZ_ITERS); ctest runs it (labels fuzz, security)
 *                   in every build, under ASan+UBSan in the sanitizer one.
 *   libfuzzer-NAME  the same entry under libFuzzer (clang, -DBE_FUZZ=ON),
 *                   coverage-guided; docs/SECURITY.md has the long runs.
 */
#ifndef BE_TEST_FUZZ_H
#define BE_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Write the harness's seeds (made with the real encoders) as files into
 * @dir through @put; the committed corpus is their output. */
void fuzz_seeds(void (*put)(const char *dir, const char *name, const void *p, size_t n),
		const char *dir);
/* After the driver's run of @iters mutated inputs: print what the inputs
 * did and fail when the mutations exercised too little (the parser
 * accepted none, or refused none). */
void fuzz_summary(unsigned long iters);
/* Tokens of the input's format (pieces of JSON, say) that the driver
 * splices in among its blind mutations. A binary format needs none (the
 * driver's own mutations know it): its harness leaves the function out,
 * and the driver's default gives none (*@n = 0, NULL). */
const char *const *fuzz_dict(size_t *n);

/*
 * fuzz_body() - the input past its first @skip bytes (the harness's
 * selectors; size >= @skip), copied into a malloc()ed buffer of exactly
 * its size (1 byte when empty), so that ASan sees a read one past it.
 * Returns the copy, which the harness frees.
 */
static inline uint8_t *fuzz_body(const uint8_t *data, size_t size, size_t skip)
{
	uint8_t *p = malloc(size - skip ? size - skip : 1);

	ASSERT(p);
	memcpy(p, data + skip, size - skip);
	return p;
}

#endif /* BE_TEST_FUZZ_H */
