/* Tile numbering of the lower triangle. */
#include "base/tiling.h"

#include <math.h>

/* k (k + 1) / 2, or UINT64_MAX where it does not fit in 64 bits: a store
 * header's N = 2^32 with T = 1 wrapped to 2^31 tiles, under every cap, and
 * an export read a tile past them as "not computed" (NaN, exit 0). */
static uint64_t triangle(uint64_t k) {
  if (k == UINT64_MAX) return UINT64_MAX;
  uint64_t a = k, b = k + 1, p;
  if (a % 2 == 0) a /= 2;
  else b /= 2;
  return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

void ntk_tiling_init(struct ntk_tiling *t, uint64_t n, uint64_t tile) {
  t->n = n;
  t->tile = tile;
  t->nb = tile ? n / tile + (n % tile != 0) : 0; /* (n + tile - 1 wraps for n near 2^64) */
  t->ntiles = triangle(t->nb);
  t->nbc = t->nb;
  t->needed = t->ntiles;
}

void ntk_tiling_limit_columns(struct ntk_tiling *t, uint64_t m) {
  t->nbc = m == 0 || m >= t->n || !t->tile ? t->nb : m / t->tile + (m % t->tile != 0);
  /* Block rows I < nbc need I + 1 tiles, the others nbc each (saturated, as ntiles). */
  uint64_t rest, sum;
  if (__builtin_mul_overflow(t->nb - t->nbc, t->nbc, &rest) || __builtin_add_overflow(triangle(t->nbc), rest, &sum))
    sum = UINT64_MAX;
  t->needed = sum;
}

uint64_t ntk_tiling_index(uint64_t bi, uint64_t bj) { return bi * (bi + 1) / 2 + bj; }

/* Tile (bi, bj) numbered `index`. */
static struct ntk_tile block(const struct ntk_tiling *t, uint64_t index, uint64_t bi, uint64_t bj) {
  struct ntk_tile r;
  r.index = index;
  r.bi = bi;
  r.bj = bj;
  r.r0 = bi * t->tile;
  r.c0 = r.bj * t->tile;
  r.rows = t->n - r.r0 < t->tile ? t->n - r.r0 : t->tile;
  r.cols = t->n - r.c0 < t->tile ? t->n - r.c0 : t->tile;
  return r;
}

struct ntk_tile ntk_tiling_tile(const struct ntk_tiling *t, uint64_t index) {
  /* Invert index = bi(bi+1)/2 + bj with a float guess, then fix it up. */
  uint64_t bi = (uint64_t)((sqrt(8.0 * (double)index + 1.0) - 1.0) / 2.0);
  while (bi * (bi + 1) / 2 > index) bi--;
  while ((bi + 1) * (bi + 2) / 2 <= index) bi++;
  return block(t, index, bi, index - bi * (bi + 1) / 2);
}

int ntk_tiling_first(const struct ntk_tiling *t, struct ntk_tile *tile) {
  if (t->nb == 0) return 0;
  *tile = block(t, 0, 0, 0);
  return 1;
}

int ntk_tiling_next(const struct ntk_tiling *t, struct ntk_tile *tile) {
  uint64_t bi = tile->bi, bj = tile->bj + 1;
  if (bj > bi || bj >= t->nbc) bi++, bj = 0; /* the rest of the row is not needed */
  if (bi >= t->nb) return 0;
  *tile = block(t, ntk_tiling_index(bi, bj), bi, bj);
  return 1;
}

uint64_t ntk_tile_pairs(const struct ntk_tile *tile) {
  if (tile->bi != tile->bj) return tile->rows * tile->cols;
  return tile->rows * (tile->rows + 1) / 2;
}

uint64_t ntk_tiles_entries(const struct ntk_tile *tiles, size_t n) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += tiles[i].rows * tiles[i].cols;
  return total;
}

int ntk_tiling_needed(const struct ntk_tiling *t, uint64_t index) {
  if (index >= t->ntiles) return 0;
  return t->nbc == t->nb || ntk_tiling_tile(t, index).bj < t->nbc;
}
