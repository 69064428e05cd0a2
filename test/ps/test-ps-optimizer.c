/*
 * Check the optimizers against a reference computed here in double
 * precision from the formulas of docs/PS.md: SGD, row-wise Adagrad and
 * FTRL-Proximal over a few hundred random gradients (some all zero), on
 * several dimensions and hyperparameters; FTRL's L1 gives exact zeros and
 * its first step from a random row with beta = l1 = l2 = 0 moves each
 * coordinate by exactly -alpha sign(g); state sizes and initial state.
 */
#include <math.h>

#include "pstest.h"

#define STEPS 300
#define MAXD 64

struct ref {
	double w[MAXD], acc, z[MAXD], n[MAXD];
};

static void ref_apply(const struct be__ps_opt *o, uint32_t dim, struct ref *r, const float *g)
{
	uint32_t i;
	double sum = 0;

	switch (o->kind) {
	case BE_PS_OPT_SGD:
		for (i = 0; i < dim; i++)
			r->w[i] -= (double)o->lr * g[i];
		break;
	case BE_PS_OPT_ADAGRAD:
		for (i = 0; i < dim; i++)
			sum += (double)g[i] * g[i];
		r->acc += sum / dim;
		for (i = 0; i < dim; i++)
			r->w[i] -= (double)o->lr * g[i] / (sqrt(r->acc) + o->eps);
		break;
	case BE_PS_OPT_FTRL:
		for (i = 0; i < dim; i++) {
			double gi = g[i], nn = r->n[i] + gi * gi;
			double sigma = (sqrt(nn) - sqrt(r->n[i])) / o->lr;

			r->z[i] += gi - sigma * r->w[i];
			r->n[i] = nn;
			if (fabs(r->z[i]) <= o->l1)
				r->w[i] = 0;
			else
				r->w[i] = -(r->z[i] - copysign(o->l1, r->z[i])) /
					  ((o->beta + sqrt(nn)) / o->lr + o->l2);
		}
		break;
	}
}

static void close_enough(double want, float got, const char *what, int step, uint32_t i)
{
	double tol = 2e-4 * (fabs(want) > 1 ? fabs(want) : 1);

	if (fabs(want - got) > tol)
		TEST_FAIL("%s step %d coord %u: want %.9g got %.9g", what, step, i, want, got);
}

static void run(const struct be__ps_opt *o, uint32_t dim, uint64_t seed, const char *what)
{
	float w[MAXD], state[2 * MAXD + 1], g[MAXD];
	struct ref r = { 0 };
	uint64_t rs = seed;
	uint32_t i;
	int step;

	ASSERT_LE(dim, MAXD);
	for (i = 0; i < dim; i++) {
		w[i] = pt_randf(&rs) * 0.05f;
		r.w[i] = w[i];
	}
	be__ps_opt_init_state(o, dim, state);
	r.acc = o->init_accum;
	for (step = 0; step < STEPS; step++) {
		bool zero = step % 17 == 5;

		for (i = 0; i < dim; i++)
			g[i] = zero ? 0.0f : pt_randf(&rs) * (step % 3 ? 0.5f : 2.0f);
		be__ps_opt_apply(o, dim, w, state, g);
		ref_apply(o, dim, &r, g);
		for (i = 0; i < dim; i++) {
			ASSERT(isfinite(w[i]));
			close_enough(r.w[i], w[i], what, step, i);
		}
		if (o->kind == BE_PS_OPT_ADAGRAD)
			close_enough(r.acc, state[0], "adagrad accumulator", step, 0);
		if (o->kind == BE_PS_OPT_FTRL)
			for (i = 0; i < dim; i++) {
				close_enough(r.z[i], state[i], "ftrl z", step, i);
				close_enough(r.n[i], state[dim + i], "ftrl n", step, i);
			}
	}
}

static void test_reference(void)
{
	static const uint32_t dims[] = { 1, 3, 16, 64 };
	struct be__ps_opt sgd = { .kind = BE_PS_OPT_SGD, .lr = 0.01f };
	struct be__ps_opt ada = { .kind = BE_PS_OPT_ADAGRAD, .lr = 0.05f, .eps = 1e-8f };
	struct be__ps_opt ada_acc = { .kind = BE_PS_OPT_ADAGRAD, .lr = 0.1f, .eps = 1e-6f,
				      .init_accum = 0.1f };
	struct be__ps_opt ftrl = { .kind = BE_PS_OPT_FTRL, .lr = 0.05f, .beta = 1.0f };
	struct be__ps_opt ftrl_reg = { .kind = BE_PS_OPT_FTRL, .lr = 0.1f, .beta = 0.5f,
				       .l1 = 0.2f, .l2 = 0.3f };
	uint32_t i;

	for (i = 0; i < BE_ARRAY_SIZE(dims); i++) {
		run(&sgd, dims[i], 1 + i, "sgd");
		run(&ada, dims[i], 11 + i, "adagrad");
		run(&ada_acc, dims[i], 21 + i, "adagrad init_accum");
		run(&ftrl, dims[i], 31 + i, "ftrl");
		run(&ftrl_reg, dims[i], 41 + i, "ftrl l1 l2");
	}
}

/* One SGD step is exactly w - lr * g in float. */
static void test_sgd_exact(void)
{
	struct be__ps_opt o = { .kind = BE_PS_OPT_SGD, .lr = 0.25f };
	float w[2] = { 1.0f, -3.0f }, g[2] = { 2.0f, 0.5f };

	be__ps_opt_apply(&o, 2, w, NULL, g);
	ASSERT(w[0] == 0.5f && w[1] == -3.125f);
}

static void test_ftrl_shapes(void)
{
	struct be__ps_opt first = { .kind = BE_PS_OPT_FTRL, .lr = 0.5f };
	struct be__ps_opt sparse = { .kind = BE_PS_OPT_FTRL, .lr = 0.1f, .beta = 1.0f,
				     .l1 = 10.0f };
	float w[4] = { 0.1f, -0.2f, 0.3f, 0.0f }, st[8], g[4] = { 0.3f, -2.0f, 1e-3f, 5.0f };
	uint32_t i;

	/* beta = l1 = l2 = 0: the first step moves by -alpha sign(g). */
	be__ps_opt_init_state(&first, 4, st);
	be__ps_opt_apply(&first, 4, w, st, g);
	close_enough(0.1 - 0.5, w[0], "ftrl first", 0, 0);
	close_enough(-0.2 + 0.5, w[1], "ftrl first", 0, 1);
	close_enough(0.3 - 0.5, w[2], "ftrl first", 0, 2);
	close_enough(0.0 - 0.5, w[3], "ftrl first", 0, 3);
	/* |z| <= l1: exactly zero. */
	for (i = 0; i < 4; i++)
		w[i] = 0.01f * (float)i;
	be__ps_opt_init_state(&sparse, 4, st);
	be__ps_opt_apply(&sparse, 4, w, st, g);
	for (i = 0; i < 4; i++)
		ASSERT(w[i] == 0.0f);
}

static void test_state(void)
{
	struct be__ps_opt ada = { .kind = BE_PS_OPT_ADAGRAD, .lr = 1, .eps = 1, .init_accum = 0.5f };
	struct be__ps_opt ftrl = { .kind = BE_PS_OPT_FTRL, .lr = 1 };
	float st[10];
	int i;

	ASSERT_EQ(be__ps_opt_state_floats(BE_PS_OPT_SGD, 16), 0);
	ASSERT_EQ(be__ps_opt_state_floats(BE_PS_OPT_ADAGRAD, 16), 1);
	ASSERT_EQ(be__ps_opt_state_floats(BE_PS_OPT_FTRL, 16), 32);
	be__ps_opt_init_state(&ada, 5, st);
	ASSERT(st[0] == 0.5f);
	for (i = 0; i < 10; i++)
		st[i] = 7;
	be__ps_opt_init_state(&ftrl, 5, st);
	for (i = 0; i < 10; i++)
		ASSERT(st[i] == 0.0f);
	ASSERT(!strcmp(be__ps_opt_name(BE_PS_OPT_FTRL), "ftrl"));
	ASSERT(be__ps_opt_name(99) == NULL);
}

int main(void)
{
	test_reference();
	test_sgd_exact();
	test_ftrl_shapes();
	test_state();
	return 0;
}
