/* The lower triangle of the N x N matrix cut into square tiles of edge T:
 * tile (I, J) with I >= J covers rows [I*T, min((I+1)*T, N)) and columns
 * [J*T, ...). Tiles are numbered row by row: index = I*(I+1)/2 + J.
 * A kernel-regression job without test x test needs only the tiles whose
 * columns start among its first M samples (the train set): J < ceil(M/T).
 * Pure. */
#ifndef NTKD_TILING_H
#define NTKD_TILING_H

#include <stddef.h>
#include <stdint.h>

struct ntk_tiling {
  uint64_t n;      /* samples */
  uint64_t tile;   /* tile edge */
  uint64_t nb;     /* blocks per side: ceil(n / tile) */
  uint64_t ntiles; /* nb * (nb + 1) / 2: the whole lower triangle (UINT64_MAX where that does not fit) */
  uint64_t nbc;    /* column blocks needed: tiles with J >= nbc are skipped */
  uint64_t needed; /* tiles needed: ntiles unless columns are limited */
};

struct ntk_tile {
  uint64_t index;
  uint64_t bi, bj;          /* block row and column, bi >= bj */
  uint64_t r0, rows, c0, cols;
};

void ntk_tiling_init(struct ntk_tiling *t, uint64_t n, uint64_t tile);

/* Need only the columns of the first `m` samples (0 or >= n: all). */
void ntk_tiling_limit_columns(struct ntk_tiling *t, uint64_t m);

/* Whether tile `index` is needed (see ntk_tiling_limit_columns). */
int ntk_tiling_needed(const struct ntk_tiling *t, uint64_t index);

/* Tile number `index` (< ntiles). */
struct ntk_tile ntk_tiling_tile(const struct ntk_tiling *t, uint64_t index);

/* The needed tiles in index order, each found in O(1) where
 * ntk_tiling_needed and ntk_tiling_tile invert an index:
 *   for (int more = ntk_tiling_first(t, &tile); more; more = ntk_tiling_next(t, &tile))
 * first: tile 0 (0 when there are no tiles); next: the needed tile after
 * *tile (0 after the last). */
int ntk_tiling_first(const struct ntk_tiling *t, struct ntk_tile *tile);
int ntk_tiling_next(const struct ntk_tiling *t, struct ntk_tile *tile);

/* Index of tile (bi, bj), bi >= bj. */
uint64_t ntk_tiling_index(uint64_t bi, uint64_t bj);

/* Number of distinct lower-triangle pairs (i >= j) in a tile. */
uint64_t ntk_tile_pairs(const struct ntk_tile *tile);

/* Entries of tiles[0..n), rows x cols each (a diagonal tile's both
 * halves, as the library computes them): its progress's total. */
uint64_t ntk_tiles_entries(const struct ntk_tile *tiles, size_t n);

#endif
