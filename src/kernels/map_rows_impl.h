/* The map loops of src/kernels/map_rows.c, written once for both
 * precisions: map_rows.c includes this file through each_precision.h
 * (REAL, the maps ABRELU_R, ERF, ERF_ABC, GELU, MAP) and its loop shapes
 * (SWITCH, ROWS_ANY, ROWS_COLS, PAIRS) expand here. ntk_map_rows and
 * ntk_map_pairs become ntk_map_rows_f / _d and ntk_map_pairs_f / _d, the
 * names map_rows.h declares. */

#define ntk_map_rows SFX(ntk_map_rows)
#define ntk_map_pairs SFX(ntk_map_pairs)

NTK_CLONES void ntk_map_rows(const struct ntk_map *restrict m, REAL *restrict g, REAL *restrict t, size_t rows,
                             size_t cols, const REAL *restrict qa, const REAL *restrict ra, const REAL *restrict qb,
                             const REAL *restrict rb, size_t qb_row) {
  SWITCH(ROWS_ANY, ROWS_COLS)
}

NTK_CLONES void ntk_map_pairs(const struct ntk_map *restrict m, REAL *restrict g, REAL *restrict t, size_t n,
                              const REAL *restrict qa, const REAL *restrict ra, const REAL *restrict qb,
                              const REAL *restrict rb) {
  SWITCH(PAIRS, PAIRS)
}

#undef ntk_map_rows
#undef ntk_map_pairs
