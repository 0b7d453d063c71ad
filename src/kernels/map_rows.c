/* One loop per map, shape and precision, compiled for x86-64-v4, -v3 and
 * baseline x86-64 (NTK_CLONES) under -ffp-contract=off: the same bits as
 * the scalar dispatchers of src/kernels/kernel_maps.h (tests/test_clones.c
 * checks every target). The switch on the kind sits outside the loops, so
 * each loop inlines one map and vectorises; it has no default, so a map
 * without a loop fails the build (-Werror=switch). A batch of 16 lanes (the
 * CNN batch) gets its own copy with a constant trip count.
 * NTK_MAP_UNROLL (default 1) unrolls that copy over rows, so that several
 * independent map chains are in flight: measured on this project's 2-core
 * Zen 5 VM, 2, 4 and 8 were 1-5 % slower than 1 (the out-of-order core
 * already overlaps consecutive rows; docs/PERFORMANCE.md, issue 15). */
#include "kernels/map_rows.h"

/* The loop shapes, expanded in map_rows_impl.h (REAL, and the maps of
 * each_precision.h). */

/* The loop over rows x COLS with MAP(q12, q11, q22, r11, r22, &td). */
#define ROWS(COLS, MAP)                                                  \
  for (size_t i = 0; i < rows; i++) {                                    \
    REAL *gi = g + i * (COLS), q11 = qa[i], r11 = ra[i];                 \
    const REAL *qbi = qb + i * qb_row, *rbi = rb + i * qb_row;           \
    (void)r11, (void)rbi; /* only the float ABRelu map reads them */     \
    if (t) {                                                             \
      REAL *ti = t + i * (COLS);                                         \
      for (size_t j = 0; j < (COLS); j++) {                              \
        REAL td;                                                         \
        gi[j] = MAP(gi[j], q11, qbi[j], r11, rbi[j], &td);               \
        ti[j] *= td;                                                     \
      }                                                                  \
    } else {                                                             \
      for (size_t j = 0; j < (COLS); j++) {                              \
        REAL td;                                                         \
        gi[j] = MAP(gi[j], q11, qbi[j], r11, rbi[j], &td);               \
      }                                                                  \
    }                                                                    \
  }

#ifndef NTK_MAP_UNROLL
#define NTK_MAP_UNROLL 1
#endif
#define PRAGMA_(x) _Pragma(#x)
#define PRAGMA(x) PRAGMA_(x)
#define ROWS_ANY(MAP)                                     \
  do {                                                    \
    if (cols == 16) {                                     \
      PRAGMA(GCC unroll NTK_MAP_UNROLL) ROWS(16, MAP)     \
    } else ROWS(cols, MAP);                               \
  } while (0)

/* Each map with its parameters bound, as MAP(q12, q11, q22, r11, r22, td). */
#define F_ABRELU(q12, q11, q22, r11, r22, td) ABRELU_R(pa, pb, q12, q11, q22, r11, r22, td)
#define F_ERF(q12, q11, q22, r11, r22, td) ERF(q12, q11, q22, td)
#define F_ERF_ABC(q12, q11, q22, r11, r22, td) ERF_ABC(m, q12, q11, q22, td)
#define F_GELU(q12, q11, q22, r11, r22, td) GELU(q12, q11, q22, td)
#define F_ANY(q12, q11, q22, r11, r22, td) MAP(m, q12, q11, q22, r11, r22, td)

/* Entry k pairs qa[k] with qb[k] (ra, rb alike): the pair-by-pair CNN
 * paths, where both images' positions move along a row. */
#define PAIRS(MAP)                                                       \
  do {                                                                   \
    if (t) {                                                             \
      for (size_t k = 0; k < n; k++) {                                   \
        REAL td;                                                         \
        g[k] = MAP(g[k], qa[k], qb[k], ra[k], rb[k], &td);               \
        t[k] *= td;                                                      \
      }                                                                  \
    } else {                                                             \
      for (size_t k = 0; k < n; k++) {                                   \
        REAL td;                                                         \
        g[k] = MAP(g[k], qa[k], qb[k], ra[k], rb[k], &td);               \
      }                                                                  \
    }                                                                    \
  } while (0)

/* The switch on the kind, each case running LOOP with its map, FAST for
 * the vectorised maps; shared by both loop shapes. */
#define SWITCH(FAST, ANY)                                                                                   \
  const REAL pa = (REAL)m->a, pb = (REAL)m->b;                                                             \
  switch (m->kind) {                                                                                       \
  case NTK_MAP_ABRELU:                                                                                     \
    FAST(F_ABRELU);                                                                                        \
    break;                                                                                                 \
  case NTK_MAP_ERF: /* Erf(1, 1, 0) is ERF itself (ERF_ABC's bits), without its scaling */            \
    if (ntk_map_is_plain_erf(m)) FAST(F_ERF);                                                              \
    else FAST(F_ERF_ABC);                                                                                  \
    break;                                                                                                 \
  case NTK_MAP_GELU:                                                                                       \
    FAST(F_GELU);                                                                                          \
    break;                                                                                                 \
  /* libm-bound (exp, atan2, sin) and in double: scalar loops through the dispatcher */                   \
  case NTK_MAP_SIN:                                                                                        \
  case NTK_MAP_RBF:                                                                                        \
  case NTK_MAP_EXP:                                                                                        \
  case NTK_MAP_EXPNORM:                                                                                    \
  case NTK_MAP_GAUSSIAN:                                                                                   \
  case NTK_MAP_SIGN:                                                                                       \
  case NTK_MAP_MONOMIAL:                                                                                   \
  case NTK_MAP_RECTMONO:                                                                                   \
  case NTK_MAP_POLYNOMIAL:                                                                                 \
  case NTK_MAP_HERMITE:                                                                                    \
  case NTK_MAP_GABOR:                                                                                      \
  case NTK_MAP_LAYERNORM:                                                                                  \
  case NTK_MAP_NUMERICAL:                                                                                  \
    ANY(F_ANY);                                                                                            \
    break;                                                                                                 \
  }

#define ROWS_COLS(MAP) ROWS(cols, MAP)

/* ntk_map_rows_f, ntk_map_pairs_f and the _d ones. */
#define EACH_PRECISION_FILE "kernels/map_rows_impl.h"
#include "kernels/each_precision.h"
