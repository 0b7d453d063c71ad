/* One loop per map and precision, compiled for AVX-512, AVX2 and baseline
 * x86-64 (NTK_CLONES) under -ffp-contract=off: the same bits as the scalar
 * dispatchers of include/ntkd/kernel_maps.h. The switch on the kind sits
 * outside the loops, so each loop inlines one map and vectorises; it has
 * no default, so a map without a loop fails the build (-Werror=switch).
 * A batch of 16 lanes (the CNN batch) gets its own copy with a constant
 * trip count. */
#include "map_rows.h"

/* The loop over rows x COLS with MAP(q12, q11, q22, r11, r22, &td). */
#define ROWS(COLS, MAP)                                                  \
  for (size_t i = 0; i < rows; i++) {                                    \
    T *gi = g + i * (COLS), q11 = qa[i], r11 = ra[i];                    \
    const T *qbi = qb + i * qb_row, *rbi = rb + i * qb_row;              \
    (void)r11, (void)rbi; /* only the float ABRelu map reads them */     \
    if (t) {                                                             \
      T *ti = t + i * (COLS);                                            \
      for (size_t j = 0; j < (COLS); j++) {                              \
        T td;                                                            \
        gi[j] = MAP(gi[j], q11, qbi[j], r11, rbi[j], &td);               \
        ti[j] *= td;                                                     \
      }                                                                  \
    } else {                                                             \
      for (size_t j = 0; j < (COLS); j++) {                              \
        T td;                                                            \
        gi[j] = MAP(gi[j], q11, qbi[j], r11, rbi[j], &td);               \
      }                                                                  \
    }                                                                    \
  }

#define ROWS_ANY(MAP)              \
  do {                             \
    if (cols == 16) ROWS(16, MAP)  \
    else ROWS(cols, MAP)           \
  } while (0)

/* Each map with its parameters bound, as MAP(q12, q11, q22, r11, r22, td). */
#define F_ABRELU(q12, q11, q22, r11, r22, td) ABRELU(pa, pb, q12, q11, q22, r11, r22, td)
#define F_ERF(q12, q11, q22, r11, r22, td) ERF(q12, q11, q22, td)
#define F_ERF_ABC(q12, q11, q22, r11, r22, td) ERF_ABC(m, q12, q11, q22, td)
#define F_GELU(q12, q11, q22, r11, r22, td) GELU(q12, q11, q22, td)
#define F_ANY(q12, q11, q22, r11, r22, td) MAP(m, q12, q11, q22, r11, r22, td)

#define DEFINE_ROWS(T_, SFX)                                                          \
  NTK_CLONES void ntk_map_rows_##SFX(const struct ntk_map *restrict m, T_ *restrict g, T_ *restrict t,        \
                                     size_t rows, size_t cols, const T_ *restrict qa, const T_ *restrict ra,   \
                                     const T_ *restrict qb, const T_ *restrict rb, size_t qb_row) {            \
    typedef T_ T;                                                                                            \
    const T pa = (T)m->a, pb = (T)m->b;                                                                      \
    const int plain = ntk_map_is_plain_erf(m);                                                               \
    switch (m->kind) {                                                                                       \
    case NTK_MAP_ABRELU:                                                                                     \
      ROWS_ANY(F_ABRELU);                                                                                    \
      break;                                                                                                 \
    case NTK_MAP_ERF: /* Erf(1, 1, 0) is ERF itself (ERF_ABC's bits), without its scaling */            \
      if (plain) ROWS_ANY(F_ERF);                                                                            \
      else ROWS_ANY(F_ERF_ABC);                                                                              \
      break;                                                                                                 \
    case NTK_MAP_GELU:                                                                                       \
      ROWS_ANY(F_GELU);                                                                                      \
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
    case NTK_MAP_LAYERNORM:                                                                                  \
      ROWS(cols, F_ANY);                                                                                     \
      break;                                                                                                 \
    }                                                                                                        \
  }

#define ABRELU ntk_abreluf_r
#define ERF ntk_erff
#define ERF_ABC ntk_erf_abcf
#define GELU ntk_geluf
#define MAP ntk_mapf
DEFINE_ROWS(float, f)
#undef ABRELU
#undef ERF
#undef ERF_ABC
#undef GELU
#undef MAP
#define ABRELU ntk_abrelu_r
#define ERF ntk_erf
#define ERF_ABC ntk_erf_abc
#define GELU ntk_gelu
#define MAP ntk_map
DEFINE_ROWS(double, d)
