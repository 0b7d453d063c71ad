/* Precision templating, the one way ntkd writes code for float and double:
 * a body file (NAME_impl.h beside the code that uses it) is written once
 * in terms of REAL and included twice through this file, once per
 * precision:
 *
 *   #define EACH_PRECISION_FILE "kernels/cnn_impl.h"    (its path from src/)
 *   #include "kernels/each_precision.h"
 *
 * Each time the body sees REAL (float, then double), SFX(x) (x##_f, then
 * x##_d) and the matching names: the maps of src/kernels/kernel_maps.h
 * (ABRELU_R, ABRELU_VU, RSQRT, ERF, ERF_ABC, GELU, and MAP, the dispatcher over every
 * nonlinearity), MAP_ROWS and MAP_PAIRS (its vectorised loops,
 * src/kernels/map_rows.h), FABS and REAL_MAX (<math.h>, <float.h>).
 *
 * A body names its functions plainly. It opens with one rename for each
 * per-precision name it defines or calls,
 *
 *   #define pair SFX(pair)
 *
 * then defines `static void pair(...)` and calls `pair(...)`, and #undefs
 * its renames at its end. The compiler makes pair_f and pair_d, the names
 * code outside the body calls; ctags indexes `pair` at its definition and
 * a debugger shows pair_f / pair_d at the body file's own lines. No
 * function is defined inside a macro.
 *
 * No include guard: included once per body file it expands. */
#define REAL float
#define SFX(x) x##_f
#define ABRELU_R ntk_abreluf_r
#define ABRELU_VU ntk_abreluf_slots
#define RSQRT ntk_rsqrtf
#define ERF ntk_erff
#define ERF_ABC ntk_erf_abcf
#define GELU ntk_geluf
#define MAP ntk_mapf
#define MAP_ROWS ntk_map_rows_f
#define MAP_PAIRS ntk_map_pairs_f
#define FABS fabsf
#define REAL_MAX FLT_MAX
#define GEMM cblas_sgemm
#include EACH_PRECISION_FILE
#undef REAL
#undef SFX
#undef ABRELU_R
#undef ABRELU_VU
#undef RSQRT
#undef ERF
#undef ERF_ABC
#undef GELU
#undef MAP
#undef MAP_ROWS
#undef MAP_PAIRS
#undef FABS
#undef REAL_MAX
#undef GEMM
#define REAL double
#define SFX(x) x##_d
#define ABRELU_R ntk_abrelu_r
#define ABRELU_VU ntk_abrelu_slots
#define RSQRT ntk_rsqrt
#define ERF ntk_erf
#define ERF_ABC ntk_erf_abc
#define GELU ntk_gelu
#define MAP ntk_map
#define MAP_ROWS ntk_map_rows_d
#define MAP_PAIRS ntk_map_pairs_d
#define FABS fabs
#define REAL_MAX DBL_MAX
#define GEMM cblas_dgemm
#include EACH_PRECISION_FILE
#undef REAL
#undef SFX
#undef ABRELU_R
#undef ABRELU_VU
#undef RSQRT
#undef ERF
#undef ERF_ABC
#undef GELU
#undef MAP
#undef MAP_ROWS
#undef MAP_PAIRS
#undef FABS
#undef REAL_MAX
#undef GEMM
#undef EACH_PRECISION_FILE
