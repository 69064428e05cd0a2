/*
 * table.c - the store of one table in one shard: rows in slabs, an
 * open-addressing index from key to row (model in ps_int.h).
 *
 * Memory per row, with stride = align8(8 + 4 * (dim + state_floats)):
 *   rows   stride bytes (key, values, optimizer state), no allocator
 *          header, in slabs of about 2 MiB, so the last slab is partly
 *          unused (at most 2 MiB per store);
 *   index  8 bytes per slot, between 4/3 and 8/3 slots per row (the index
 *          doubles when it would pass 3/4 full): 10.7 to 21.3 bytes a row.
 * For dim 16 and Adagrad that is 80 + 10.7..21.3 bytes a row
 * (be-perf ps-store measures it).
 *
 * Why this shape. A per-row malloc would cost a 16-byte header and a
 * pointer per row and scatter rows over the heap; slabs keep them dense
 * and never move them, so a row's address stays valid across inserts (a
 * push looks rows up first and applies after). The slot keeps 32 bits of
 * the hash beside the row index, so a probe compares keys only when the
 * tags agree: a lookup reads its home cache line of the index and then
 * the row it wanted anyway. Home slots come from the top bits of that tag,
 * so doubling the index rehashes from the slots alone, without touching
 * a row. The index and slabs come straight from mmap: they are large,
 * page-aligned, zero-filled on demand (a store's memory is what it has
 * touched) and go back to the OS when the store closes.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "ps/ps_int.h"
#include "util/common.h"

#define STORE_SLAB_TARGET (2u << 20) /* bytes per slab, at most */
#define STORE_MIN_CAP 16u

static void *store_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	/* Random probes over hundreds of MiB miss the TLB on 4 KiB pages;
	 * huge pages are a hint, refused harmlessly where unsupported. */
	if (len >= (2u << 20))
		(void)madvise(p, len, MADV_HUGEPAGE);
#endif
	return p;
}

static uint64_t *index_alloc(uint64_t cap)
{
	uint64_t *ix = store_map(cap * sizeof(*ix));

	if (ix)
		memset(ix, 0xff, cap * sizeof(*ix)); /* every row BE_PS_NO_ROW */
	return ix;
}

static unsigned log2_u64(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

int be__ps_store_init(struct be__ps_store *s, const struct be__ps_table *t)
{
	uint32_t sf = be__ps_opt_state_floats(t->opt.kind, t->dim);
	uint32_t stride = BE_ALIGN_UP(8u + 4u * (t->dim + sf), 8u);
	uint32_t shift = 0;

	while (shift < 20 && ((size_t)stride << (shift + 1)) <= STORE_SLAB_TARGET)
		shift++;
	*s = (struct be__ps_store){
		.t = t,
		.dim = t->dim,
		.state_floats = sf,
		.row_bytes = stride,
		.slab_shift = shift,
		.slab_bytes = (size_t)stride << shift,
		.cap = STORE_MIN_CAP,
		.shift = 32 - log2_u64(STORE_MIN_CAP),
		.max_rows = t->max_rows && t->max_rows < BE_PS_STORE_MAX_ROWS ?
				    t->max_rows : BE_PS_STORE_MAX_ROWS,
	};
	s->index = index_alloc(s->cap);
	return s->index ? 0 : -ENOMEM;
}

void be__ps_store_close(struct be__ps_store *s)
{
	uint32_t i;

	for (i = 0; i < s->n_slabs; i++)
		munmap(s->slabs[i], s->slab_bytes);
	free(s->slabs);
	if (s->index)
		munmap(s->index, s->cap * sizeof(*s->index));
	memset(s, 0, sizeof(*s));
}

/* Put @slot (tag and row) into @ix of @cap slots; the row is absent. */
static void index_put(uint64_t *ix, uint64_t cap, uint32_t shift, uint64_t slot)
{
	uint64_t mask = cap - 1, pos = (slot >> 32) >> shift;

	while ((uint32_t)ix[pos] != BE_PS_NO_ROW)
		pos = (pos + 1) & mask;
	ix[pos] = slot;
}

static int index_grow(struct be__ps_store *s, uint64_t cap)
{
	uint32_t shift = 32 - log2_u64(cap);
	uint64_t *ix = index_alloc(cap), i;

	if (!ix)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++)
		if ((uint32_t)s->index[i] != BE_PS_NO_ROW)
			index_put(ix, cap, shift, s->index[i]);
	munmap(s->index, s->cap * sizeof(*s->index));
	s->index = ix;
	s->cap = cap;
	s->shift = shift;
	return 0;
}

static int slab_add(struct be__ps_store *s)
{
	uint8_t *slab;

	if (be__grow(&s->slabs, &s->slabs_cap, s->n_slabs + 1, sizeof(*s->slabs), 16))
		return -ENOMEM;
	slab = store_map(s->slab_bytes);
	if (!slab)
		return -ENOMEM;
	s->slabs[s->n_slabs++] = slab;
	return 0;
}

int be__ps_store_reserve(struct be__ps_store *s, uint64_t n)
{
	uint64_t need = s->rows + n, cap = s->cap;
	int err;

	if (n > s->max_rows || need > s->max_rows)
		return -ENOSPC;
	/* Grow the index first: a failure then leaves only an emptier
	 * index, never rows without slots. */
	while (need > cap / 4 * 3)
		cap *= 2;
	if (cap != s->cap && (err = index_grow(s, cap)))
		return err;
	while (((uint64_t)s->n_slabs << s->slab_shift) < need)
		if ((err = slab_add(s)))
			return err;
	return 0;
}

int be__ps_store_add(struct be__ps_store *s, uint64_t key, uint32_t *row)
{
	uint64_t h = be__ps_index_hash(key), tag = h >> 32, mask, pos;
	uint32_t r = be__ps_store_find_h(s, key, h);
	int err;

	if (r != BE_PS_NO_ROW) {
		*row = r;
		return 0;
	}
	if ((err = be__ps_store_reserve(s, 1)))
		return err;
	mask = s->cap - 1;
	pos = tag >> s->shift;
	while ((uint32_t)s->index[pos] != BE_PS_NO_ROW)
		pos = (pos + 1) & mask;
	r = (uint32_t)s->rows++;
	s->index[pos] = (tag << 32) | r;
	memcpy(be__ps_store_row(s, r), &key, sizeof(key));
	*row = r;
	return 1;
}

void be__ps_store_mem(const struct be__ps_store *s, struct be__ps_store_mem *out)
{
	out->rows = s->rows;
	out->row_bytes = s->rows * s->row_bytes;
	out->slab_bytes = (uint64_t)s->n_slabs * s->slab_bytes;
	out->index_bytes = s->cap * sizeof(*s->index);
}
