/*
 * init.c - the initial value of a row, and what a pull answers for a key
 * that has no row.
 *
 * A row's initial values depend only on (table seed, key, coordinate), so
 * every replica, every restart and every client computes the same ones,
 * and a pull of a missing key returns exactly the values a push to that
 * key would start from. Coordinate i of key k (docs/PS.md, "Initializers"):
 *
 *   s    = mix64(k ^ seed)
 *   z_i  = mix64(s + (i + 1) * GOLDEN)           (splitmix64's i-th output)
 *   u_i  = (z_i >> 40) * 2^-24                   (24 bits: exact in float)
 *   w_i  = (float)(lo + (hi - lo) * u_i)         (computed in double)
 *
 * so w_i lies in [lo, hi] (hi only by rounding). The stream of key k
 * overlaps that of another key only if their s differ by a small multiple
 * of GOLDEN: about dim / 2^64 per pair of keys.
 */
#include "ps/ps_int.h"

void be__ps_init_row(const struct be__ps_table *t, uint64_t key, float *w)
{
	uint64_t s;
	double lo, span;
	uint32_t i;

	if (t->init.kind != BE_PS_INIT_UNIFORM) {
		memset(w, 0, (size_t)t->dim * sizeof(*w));
		return;
	}
	s = be__ps_mix64(key ^ t->init.seed);
	lo = t->init.lo;
	span = (double)t->init.hi - lo;
	for (i = 0; i < t->dim; i++) {
		uint64_t z = be__ps_mix64(s + (uint64_t)(i + 1) * BE_PS_GOLDEN);
		double u = (double)(z >> 40) * 0x1p-24;

		w[i] = (float)(lo + span * u);
	}
}

int be__ps_missing_row(const struct be__ps_table *t, uint64_t key, bool inference, float *w)
{
	uint32_t i;

	if (inference && t->missing == BE_PS_MISSING_DEFAULT) {
		for (i = 0; i < t->dim; i++)
			w[i] = t->missing_value;
		return 1;
	}
	be__ps_init_row(t, key, w);
	return 0;
}
