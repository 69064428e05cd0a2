/*
 * Check the send window: bytes in flight never exceed the limit (except a
 * single WR larger than the window, alone), the ring never exceeds its
 * capacity, completions retire records in order up to the signaled one,
 * and a full window always contains a signaled WR (so it can reopen).
 * The same for the soft limit (the mixed window): fragments stay under
 * it while it is on, and one that does not fit always has a signaled WR
 * ahead of it.
 */
#include <be/be.h>
#include "engine/window.h"
#include "test.h"

static void test_basic(void)
{
	struct be__window w;
	struct be__wr_rec r;
	bool sig;
	uint64_t s1, s2, s3;

	ASSERT_EQ(be__window_init(&w, 8, 1000), 0);
	ASSERT(be__window_fits(&w, 5000)); /* alone, oversize allowed */
	ASSERT(be__window_fits(&w, 600));
	s1 = be__window_push(&w, BE_WR_SEND, 600, NULL, &sig);
	ASSERT(sig);
	ASSERT(!be__window_fits(&w, 401));
	ASSERT_EQ(w.stalls, 1);
	ASSERT(be__window_fits(&w, 400));
	s2 = be__window_push(&w, BE_WR_FRAG, 100, NULL, &sig);
	s3 = be__window_push(&w, BE_WR_FRAG_LAST, 100, NULL, &sig);
	ASSERT(sig);
	ASSERT_UEQ(w.in_flight, 800);
	ASSERT_EQ(be__window_pop(&w, s1, &r), 1);
	ASSERT_UEQ(r.seq, s1);
	ASSERT_EQ(be__window_pop(&w, s1, &r), 0);
	ASSERT_EQ(be__window_pop(&w, s3, &r), 1);
	ASSERT_UEQ(r.seq, s2);
	ASSERT_EQ(be__window_pop(&w, s3, &r), 1);
	ASSERT_EQ(be__window_pop(&w, UINT64_MAX, &r), 0);
	ASSERT_UEQ(w.in_flight, 0);
	ASSERT_UEQ(w.max_in_flight, 800);
	be__window_free(&w);
}

/* A stalled window: some signaled WR (the oldest not completed of
 * @signaled, @ns of them pushed) must exist; completing it retires at
 * least one record. */
static void window_reopen(struct be__window *w, const uint64_t *signaled, int *hs, int ns)
{
	struct be__wr_rec r;
	int got = 0;

	ASSERT_LT(*hs, ns);
	while (be__window_pop(w, signaled[*hs % 4096], &r))
		got++;
	(*hs)++;
	ASSERT_GT(got, 0);
}

/*
 * Random pushes of fragments of 1..@maxn bytes (rand() seeded with
 * @seed) into a fresh window of 1 MiB; completions only for signaled
 * WRs. With @soft, a soft limit of 128 KiB goes on and off every 1000
 * pushes and a fragment goes only when it fits it too. Checks after each
 * push that nothing ends above a limit; the caller checks the counters
 * and frees @w.
 */
static void random_progress(struct be__window *w, unsigned seed, uint32_t maxn, bool soft)
{
	uint64_t signaled[4096];
	int ns = 0, hs = 0, i;

	srand(seed);
	ASSERT_EQ(be__window_init(w, 64, 1 << 20), 0);
	if (soft)
		be__window_set_soft(w, 128 << 10);
	for (i = 0; i < 100000; i++) {
		uint32_t n = 1 + (uint32_t)(rand() % maxn);
		bool sig;

		if (soft && i % 1000 == 0)
			w->soft_on = !w->soft_on;
		if (be__window_fits(w, n) && (!soft || be__window_soft_fits(w, n))) {
			uint64_t seq = be__window_push(w, BE_WR_FRAG, n, NULL, &sig);

			if (sig)
				signaled[ns++ % 4096] = seq;
			ASSERT(w->in_flight <= w->limit || (!soft && w->count == 1));
			ASSERT(w->count <= w->cap);
			ASSERT(!w->soft_on || w->in_flight <= w->soft_limit);
		} else {
			window_reopen(w, signaled, &hs, ns);
		}
	}
}

/* Fragments up to 70000 bytes; completions only for signaled WRs. */
static void test_signal_progress(void)
{
	struct be__window w;

	random_progress(&w, 3, 70000, false);
	ASSERT(w.max_in_flight <= w.limit);
	be__window_free(&w);
}

static void test_soft(void)
{
	struct be__window w;
	struct be__wr_rec r;
	uint64_t seq[4];
	bool sig;
	int i;

	ASSERT_EQ(be__window_init(&w, 64, 512 << 10), 0);
	be__window_set_soft(&w, 128 << 10);
	w.soft_on = true;
	/* Signaled every quarter of the soft limit: here every fragment. */
	for (i = 0; i < 4; i++) {
		ASSERT(be__window_fits(&w, 32 << 10));
		ASSERT(be__window_soft_fits(&w, 32 << 10));
		seq[i] = be__window_push(&w, BE_WR_FRAG, 32 << 10, NULL, &sig);
		ASSERT(sig);
	}
	ASSERT_UEQ(w.in_flight, 128 << 10);
	ASSERT_UEQ(w.soft_max, 128 << 10);
	ASSERT(!be__window_soft_fits(&w, 1));
	ASSERT_UEQ(w.soft_stalls, 1);
	/* Off (the stream is alone): only the window counts. */
	w.soft_on = false;
	ASSERT(be__window_soft_fits(&w, 32 << 10));
	ASSERT(be__window_fits(&w, 32 << 10));
	w.soft_on = true;
	ASSERT_EQ(be__window_pop(&w, seq[0], &r), 1);
	ASSERT(be__window_soft_fits(&w, 32 << 10));
	ASSERT(!be__window_soft_fits(&w, (32 << 10) + 1));
	while (be__window_pop(&w, seq[3], &r))
		;
	ASSERT_UEQ(w.in_flight, 0);
	/* Nothing signaled in flight: a fragment too large for the soft
	 * limit goes anyway (nothing would reopen it), and is signaled. */
	be__window_push(&w, BE_WR_FRAG, 1000, NULL, &sig);
	ASSERT(!sig);
	ASSERT(be__window_soft_fits(&w, 128 << 10));
	be__window_push(&w, BE_WR_FRAG, 128 << 10, NULL, &sig);
	ASSERT(sig);
	be__window_free(&w);
}

/* Random fragments (at most 3/4 of the soft limit) while the soft limit
 * goes on and off. While it is on, what passes soft_fits never ends
 * above it, even when it was turned on with more in flight (that drains
 * first). */
static void test_soft_progress(void)
{
	struct be__window w;

	random_progress(&w, 5, 96 << 10, true);
	ASSERT_GT(w.soft_stalls, 0);
	ASSERT_LE(w.soft_max, w.soft_limit);
	be__window_free(&w);
}

int main(void)
{
	test_basic();
	test_signal_progress();
	test_soft();
	test_soft_progress();
	return 0;
}
