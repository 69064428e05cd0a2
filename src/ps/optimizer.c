/*
 * optimizer.c - applying one gradient to one row: SGD, row-wise Adagrad,
 * FTRL-Proximal. The formulas are in docs/PS.md ("Optimizers"); this file
 * is their implementation, in float32 and in the order written there.
 *
 * Per row state: SGD none; Adagrad one accumulator G for the whole row
 * (as in FBGEMM's row-wise Adagrad: the mean of g^2 over the row is
 * accumulated, so one float per row instead of dim); FTRL z[dim] then
 * n[dim] (McMahan et al., "Ad Click Prediction: a View from the
 * Trenches", KDD 2013, Algorithm 1 with learning-rate power -1/2).
 *
 * Gradients are finite (the wire decoder refuses others), so a row stays
 * finite unless the hyperparameters make it diverge.
 */
#include <math.h>

#include "ps/ps_int.h"

uint32_t be__ps_opt_state_floats(uint32_t kind, uint32_t dim)
{
	switch (kind) {
	case BE_PS_OPT_ADAGRAD:
		return 1;
	case BE_PS_OPT_FTRL:
		return 2 * dim;
	default:
		return 0;
	}
}

const char *be__ps_opt_name(uint32_t kind)
{
	switch (kind) {
	case BE_PS_OPT_SGD:
		return "sgd";
	case BE_PS_OPT_ADAGRAD:
		return "adagrad";
	case BE_PS_OPT_FTRL:
		return "ftrl";
	default:
		return NULL;
	}
}

void be__ps_opt_init_state(const struct be__ps_opt *o, uint32_t dim, float *state)
{
	switch (o->kind) {
	case BE_PS_OPT_ADAGRAD:
		state[0] = o->init_accum;
		break;
	case BE_PS_OPT_FTRL:
		memset(state, 0, 2 * (size_t)dim * sizeof(*state));
		break;
	default:
		break;
	}
}

static void opt_sgd(const struct be__ps_opt *o, uint32_t dim, float *w, const float *g)
{
	uint32_t i;

	for (i = 0; i < dim; i++)
		w[i] -= o->lr * g[i];
}

/* G += mean(g^2); w -= lr * g / (sqrt(G) + eps). */
static void opt_adagrad(const struct be__ps_opt *o, uint32_t dim, float *w, float *acc,
			const float *g)
{
	float sum = 0.0f, step;
	uint32_t i;

	for (i = 0; i < dim; i++)
		sum += g[i] * g[i];
	acc[0] += sum / (float)dim;
	step = o->lr / (sqrtf(acc[0]) + o->eps);
	for (i = 0; i < dim; i++)
		w[i] -= step * g[i];
}

/*
 * Per coordinate: sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;
 * z += g - sigma * w; n += g^2;
 * w = 0 if |z| <= l1, else -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2).
 * The row's initial values enter through sigma * w at its first update,
 * so a randomly initialised row keeps its initialisation (with l1 = 0
 * and beta = 0, the first step moves w by exactly -alpha sign(g)).
 */
static void opt_ftrl(const struct be__ps_opt *o, uint32_t dim, float *w, float *state,
		     const float *g)
{
	float *z = state, *n = state + dim;
	uint32_t i;

	for (i = 0; i < dim; i++) {
		float n_new = n[i] + g[i] * g[i];
		float sqrt_new = sqrtf(n_new);
		float sigma = (sqrt_new - sqrtf(n[i])) / o->lr;

		z[i] += g[i] - sigma * w[i];
		n[i] = n_new;
		if (fabsf(z[i]) <= o->l1)
			w[i] = 0.0f;
		else
			w[i] = -(z[i] - copysignf(o->l1, z[i])) /
			       ((o->beta + sqrt_new) / o->lr + o->l2);
	}
}

void be__ps_opt_apply(const struct be__ps_opt *o, uint32_t dim, float *w, float *state,
		      const float *g)
{
	switch (o->kind) {
	case BE_PS_OPT_SGD:
		opt_sgd(o, dim, w, g);
		break;
	case BE_PS_OPT_ADAGRAD:
		opt_adagrad(o, dim, w, state, g);
		break;
	case BE_PS_OPT_FTRL:
		opt_ftrl(o, dim, w, state, g);
		break;
	default:
		break;
	}
}
